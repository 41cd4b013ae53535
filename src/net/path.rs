//! One network path, made for a run and removed after it: a namespace for the clients
//! (`sweetspot-<pid>-<n>`), a TUN device in it (`ssv<pid>x<n>c`, its only route out) and one
//! here (`ssv<pid>x<n>s`), addresses on a /30 of 10.201.0.0/16 that nothing here uses, and the
//! relay between the two ([`super::relay`]). Set up with iproute2's `ip`, the kernel's own tool
//! for namespaces, addresses and routes.
//!
//! Nothing outlives a run: the TUN devices are not persistent (they vanish with the relay's
//! descriptors, even when the run is killed with SIGKILL), and a namespace left by a killed
//! run is found by its pid and removed by the next ([`clean_stale`]). A [`NetPath`] removes
//! itself when dropped: on success, on error, and on Ctrl-C, which ends runs by returning.

use std::fs::File;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{bail, Context};

use super::relay::{self, Counts, Ends};
use super::NetSpec;

/// The prefix of every namespace sweetspot makes.
pub const PREFIX: &str = "sweetspot-";

/// Paths made by this process so far (their names' `n`).
static MADE: AtomicU32 = AtomicU32::new(0);

/// A path made for one run.
pub struct NetPath {
    pub name: String,
    pub spec: NetSpec,
    /// The path's near end, here: the address the clients connect to in place of the server's.
    pub near_end: Ipv4Addr,
    /// The clients' address, in their namespace.
    pub client_addr: Ipv4Addr,
    /// The server's address the near end stands for.
    pub server: Ipv4Addr,
    namespace: File,
    stop: Arc<AtomicBool>,
    /// One relay thread each way ([`relay::run`]).
    relays: Vec<JoinHandle<std::io::Result<()>>>,
    counts: Arc<Counts>,
}

/// Runs `cmd args...`, failing with its stderr's first line.
fn run(cmd: &str, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .with_context(|| format!("running {cmd} (install iproute2)"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        bail!(
            "{cmd} {}: {}",
            args.join(" "),
            stderr.lines().next().unwrap_or("failed").trim()
        );
    }
    Ok(())
}

/// Whether this process may make namespaces and devices (root, which has CAP_NET_ADMIN and
/// CAP_SYS_ADMIN).
pub fn permitted() -> bool {
    nix::unistd::geteuid().is_root()
}

impl NetPath {
    /// Makes a path whose near end stands for `server` (an IPv4 address of this machine,
    /// 127.0.0.1 for a server on loopback) and starts its relay.
    pub fn create(spec: NetSpec, server: Ipv4Addr) -> anyhow::Result<NetPath> {
        if !permitted() {
            bail!("--net needs root (it makes a network namespace and TUN devices)");
        }
        clean_stale();
        let pid = std::process::id();
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let name = format!("{PREFIX}{pid}-{n}");
        let (client_if, server_if) = (format!("ssv{pid}x{n}c"), format!("ssv{pid}x{n}s"));
        let (near_end, client_addr) = free_subnet(pid, n)?;
        run("ip", &["netns", "add", &name])?;
        // From here on a failure deletes the namespace (the devices go with their descriptors).
        let made = (|| -> anyhow::Result<(File, std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
            let server_tun = crate::sys::open_tun(&server_if)
                .with_context(|| format!("making the TUN device {server_if}"))?;
            let client_tun = crate::sys::open_tun(&client_if)
                .with_context(|| format!("making the TUN device {client_if}"))?;
            run("ip", &["link", "set", &client_if, "netns", &name])?;
            let near = near_end.to_string();
            let client = client_addr.to_string();
            run(
                "ip",
                &["addr", "add", &near, "peer", &client, "dev", &server_if],
            )?;
            run("ip", &["link", "set", &server_if, "up"])?;
            // Packets for 127.0.0.1 arriving on the device, and the server's answers from it,
            // are routed (the kernel drops both as martians otherwise).
            for (key, value) in [("route_localnet", "1"), ("rp_filter", "0")] {
                let file = format!("/proc/sys/net/ipv4/conf/{server_if}/{key}");
                std::fs::write(&file, value).with_context(|| format!("writing {file}"))?;
            }
            let in_ns = |args: &[&str]| {
                let mut all = vec!["-n", name.as_str()];
                all.extend_from_slice(args);
                run("ip", &all)
            };
            in_ns(&["addr", "add", &client, "peer", &near, "dev", &client_if])?;
            in_ns(&["link", "set", &client_if, "up"])?;
            in_ns(&["link", "set", "lo", "up"])?;
            in_ns(&["route", "add", "default", "dev", &client_if])?;
            let namespace = File::open(PathBuf::from("/run/netns").join(&name))?;
            Ok((namespace, client_tun, server_tun))
        })();
        let (namespace, client_tun, server_tun) = match made {
            Ok(made) => made,
            Err(e) => {
                let _ = run("ip", &["netns", "del", &name]);
                return Err(e);
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(Counts::default());
        let ends = Ends { near_end, server };
        let (client_tun, server_tun) = (Arc::new(client_tun), Arc::new(server_tun));
        let mut relays = Vec::new();
        for (from, to, toward_server, thread_name) in [
            (&client_tun, &server_tun, true, "net-path-up"),
            (&server_tun, &client_tun, false, "net-path-down"),
        ] {
            let (from, to) = (Arc::clone(from), Arc::clone(to));
            let (stopped, counts) = (Arc::clone(&stop), Arc::clone(&counts));
            let started = std::thread::Builder::new()
                .name(thread_name.into())
                .spawn(move || {
                    relay::run(
                        from,
                        to,
                        spec.link(),
                        spec.loss(),
                        toward_server,
                        ends,
                        stopped,
                        counts,
                    )
                })
                .context("starting the path's relay");
            match started {
                Ok(relay) => relays.push(relay),
                Err(e) => {
                    stop.store(true, Ordering::SeqCst);
                    for relay in relays {
                        let _ = relay.join();
                    }
                    let _ = run("ip", &["netns", "del", &name]);
                    return Err(e);
                }
            }
        }
        Ok(NetPath {
            name,
            spec,
            near_end,
            client_addr,
            server,
            namespace,
            stop,
            relays,
            counts,
        })
    }

    /// Runs `f` on a thread inside the clients' namespace (every thread it starts is in it
    /// too), and returns what it returned.
    pub fn inside<T: Send>(&self, f: impl FnOnce() -> T + Send) -> anyhow::Result<T> {
        let namespace = &self.namespace;
        std::thread::scope(|scope| {
            scope
                .spawn(move || {
                    nix::sched::setns(namespace, nix::sched::CloneFlags::CLONE_NEWNET)
                        .context("joining the clients' network namespace")?;
                    Ok(f())
                })
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    /// TCP segments retransmitted so far by the clients (in their namespace) and by this
    /// machine's own stack, where the server is (`RetransSegs` of each `/proc/net/snmp`).
    pub fn retransmissions(&self) -> (u64, u64) {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .ok()
                .and_then(|s| retrans_segs(&s))
                .unwrap_or(0)
        };
        let clients = self
            .inside(|| read("/proc/thread-self/net/snmp"))
            .unwrap_or(0);
        (clients, read("/proc/thread-self/net/snmp"))
    }

    /// Packets the path carried, and those it dropped for `loss` and for a full queue.
    pub fn packets(&self) -> (u64, u64, u64) {
        let c = &self.counts;
        (
            c.packets.load(Ordering::Relaxed),
            c.lost.load(Ordering::Relaxed),
            c.overflowed.load(Ordering::Relaxed),
        )
    }

    /// Whether the relay still runs both ways (it stops only when asked, or on a device
    /// error).
    pub fn relaying(&self) -> bool {
        !self.relays.is_empty() && self.relays.iter().all(|r| !r.is_finished())
    }
}

impl Drop for NetPath {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for relay in self.relays.drain(..) {
            // The descriptors close with the last of them, and the TUN devices vanish.
            let _ = relay.join();
        }
        let _ = run("ip", &["netns", "del", &self.name]);
    }
}

/// `RetransSegs` of a `/proc/net/snmp`'s `Tcp:` lines (a header line, then a value line).
pub fn retrans_segs(snmp: &str) -> Option<u64> {
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let header = tcp.next()?;
    let values = tcp.next()?;
    let i = header.split_whitespace().position(|k| k == "RetransSegs")?;
    values.split_whitespace().nth(i)?.parse().ok()
}

/// A /30 of 10.201.0.0/16 that no address here is in: (the near end, the clients').
fn free_subnet(pid: u32, n: u32) -> anyhow::Result<(Ipv4Addr, Ipv4Addr)> {
    let used = Command::new("ip")
        .args(["-4", "-o", "addr", "show"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default();
    let start = (pid.wrapping_mul(31).wrapping_add(n)) % 16384;
    for k in 0..16384u32 {
        let index = (start + k) % 16384;
        let base = 0x0AC9_0000u32 + index * 4; // 10.201.0.0 + 4 x index
        let near = Ipv4Addr::from(base + 1);
        let client = Ipv4Addr::from(base + 2);
        if !used.contains(&format!("inet {near} ")) && !used.contains(&format!("inet {client} ")) {
            return Ok((near, client));
        }
    }
    bail!("no free /30 left in 10.201.0.0/16")
}

/// Removes the namespaces of sweetspot runs that no longer run (killed with SIGKILL, say):
/// `sweetspot-<pid>-<n>` whose pid is gone. Their TUN devices went with their descriptors.
pub fn clean_stale() {
    let Ok(entries) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(pid) = stale_pid(&name) else {
            continue;
        };
        if !PathBuf::from(format!("/proc/{pid}")).exists() {
            let _ = run("ip", &["netns", "del", &name]);
        }
    }
}

/// The pid in a namespace name of ours, `sweetspot-<pid>-<n>`.
fn stale_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let (pid, n) = rest.split_once('-')?;
    n.parse::<u32>().ok()?;
    pid.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retransmissions_are_read_from_snmp() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n\
                    Tcp: 1 200 120000 -1 10 12 0 0 2 5000 4800 37 0 3 0\n";
        assert_eq!(retrans_segs(snmp), Some(37));
        assert_eq!(retrans_segs("Ip: 1\n"), None);
    }

    #[test]
    fn only_our_namespaces_are_ours() {
        assert_eq!(stale_pid("sweetspot-1234-0"), Some(1234));
        assert_eq!(stale_pid("sweetspot-1234"), None);
        assert_eq!(stale_pid("other-1234-0"), None);
        assert_eq!(stale_pid("sweetspot-x-0"), None);
    }
}
