//! One network path, made for a run and removed after it: a namespace for the clients
//! (`sweetspot-<token>-<n>`, the run's token from [`crate::reclaim`]), a TUN device in it and
//! one here ([`tun_names`]), addresses on a /30 of 10.201.0.0/16 that nothing here uses, and
//! the relay between the two ([`super::relay`]). Set up with iproute2's `ip`. The TUN devices
//! vanish with the relay's descriptors; the namespace is recorded in the run's directory, so a
//! killed run's guard or the next run deletes it. A [`NetPath`] removes itself when dropped.

use std::fs::File;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{bail, Context};

use super::relay::{self, Counts, Ends, Way};
use super::NetSpec;

/// The prefix of every namespace sweetspot makes.
pub const PREFIX: &str = crate::reclaim::PREFIX;

/// The TUN devices of path `n` of run `token`: (the clients', the server side's). Within the
/// kernel's 15 bytes for any `n` below 36^6 (`ss`, 6, at most 6, `c`).
pub fn tun_names(token: &str, n: u64) -> (String, String) {
    let n = crate::reclaim::base36(n % 36u64.pow(6), 1);
    (format!("ss{token}{n}c"), format!("ss{token}{n}s"))
}

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
    /// The run's record of the namespace, dropped once it is deleted.
    _recorded: Option<crate::reclaim::Entry>,
    stop: Arc<AtomicBool>,
    /// One relay thread each way ([`relay::run`]).
    relays: Vec<JoinHandle<std::io::Result<()>>>,
    counts: Arc<Counts>,
    /// The TUN devices: (the clients', in their namespace; the server side's, here).
    devices: (String, String),
    /// The CPUs the relay threads run on (empty: any).
    pub relay_cpus: Vec<usize>,
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

/// Whether this process may make namespaces and devices: CAP_NET_ADMIN and CAP_SYS_ADMIN in
/// its effective set (root has both unless a container or `setpriv` took them away).
pub fn permitted() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| effective_caps(&s))
        .is_some_and(|caps| caps & NEEDED_CAPS == NEEDED_CAPS)
}

/// CAP_NET_ADMIN (12) and CAP_SYS_ADMIN (21), capabilities(7).
const NEEDED_CAPS: u64 = (1 << 12) | (1 << 21);

/// The effective capability set in a `/proc/<pid>/status` text (`CapEff:`, hexadecimal).
fn effective_caps(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line["CapEff:".len()..].trim(), 16).ok()
}

/// What `--net` says when it may not make a path: one line.
pub const NOT_PERMITTED: &str =
    "--net needs CAP_NET_ADMIN and CAP_SYS_ADMIN (run as root) to make a network namespace and TUN devices";

/// The namespace's ends wired: the two TUN devices made, the client's moved into the
/// namespace `name`, both addressed and up, the server's end routing loopback; the namespace's
/// handle and the two devices (they vanish with their descriptors).
fn wire(
    name: &str,
    client_if: &str,
    server_if: &str,
    near_end: Ipv4Addr,
    client_addr: Ipv4Addr,
) -> anyhow::Result<(File, std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    let server_tun = crate::sys::open_tun(server_if)
        .with_context(|| format!("making the TUN device {server_if}"))?;
    let client_tun = crate::sys::open_tun(client_if)
        .with_context(|| format!("making the TUN device {client_if}"))?;
    run("ip", &["link", "set", client_if, "netns", name])?;
    let near = near_end.to_string();
    let client = client_addr.to_string();
    run(
        "ip",
        &["addr", "add", &near, "peer", &client, "dev", server_if],
    )?;
    run("ip", &["link", "set", server_if, "up"])?;
    // Packets for 127.0.0.1 arriving on the device, and the server's answers from it,
    // are routed (the kernel drops both as martians otherwise).
    for (key, value) in [("route_localnet", "1"), ("rp_filter", "0")] {
        let file = format!("/proc/sys/net/ipv4/conf/{server_if}/{key}");
        std::fs::write(&file, value).with_context(|| format!("writing {file}"))?;
    }
    let in_ns = |args: &[&str]| {
        let mut all = vec!["-n", name];
        all.extend_from_slice(args);
        run("ip", &all)
    };
    in_ns(&["addr", "add", &client, "peer", &near, "dev", client_if])?;
    in_ns(&["link", "set", client_if, "up"])?;
    in_ns(&["link", "set", "lo", "up"])?;
    in_ns(&["route", "add", "default", "dev", client_if])?;
    let namespace = File::open(PathBuf::from("/run/netns").join(name))?;
    Ok((namespace, client_tun, server_tun))
}

impl NetPath {
    /// Makes a path whose near end stands for `server` (an IPv4 address of this machine,
    /// 127.0.0.1 for a server on loopback) and starts its relay, its threads on `cpus` (empty:
    /// any; the caller keeps them off the server's).
    pub fn create(spec: NetSpec, server: Ipv4Addr, cpus: &[usize]) -> anyhow::Result<NetPath> {
        super::require_permitted()?;
        clean_stale();
        let run_of = crate::reclaim::current();
        let (name, client_if, server_if, recorded) = add_namespace(run_of)?;
        // Held until the near end's address is on its device, where the next run looks.
        let subnet_lock = lock_subnets();
        let (near_end, client_addr) = match free_subnet(&name) {
            Ok(ends) => ends,
            Err(e) => {
                let _ = run("ip", &["netns", "del", &name]);
                return Err(e);
            }
        };
        // From here on a failure deletes the namespace (the devices go with their descriptors).
        let made = wire(&name, &client_if, &server_if, near_end, client_addr);
        drop(subnet_lock);
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
            let way = Way {
                link: spec.link(toward_server),
                bottleneck: spec.bottleneck(),
                loss: spec.loss(),
                toward_server,
                cpus: cpus.to_vec(),
            };
            let started = std::thread::Builder::new()
                .name(thread_name.into())
                .spawn(move || relay::run(from, to, way, ends, stopped, counts))
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
            _recorded: recorded,
            stop,
            relays,
            counts,
            devices: (client_if, server_if),
            relay_cpus: cpus.to_vec(),
        })
    }

    /// An error when a relay thread has stopped on its own (a device error): the path no longer
    /// carries packets, so what was measured across it is not a measurement.
    pub fn check(&mut self) -> anyhow::Result<()> {
        let Some(i) = self.relays.iter().position(|r| r.is_finished()) else {
            return Ok(());
        };
        let relay = self.relays.remove(i);
        let why = match relay.join() {
            Ok(Ok(())) => "it stopped".to_string(),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "it panicked".to_string(),
        };
        bail!("the network path's relay failed during the run: {why}")
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

    /// Packets the kernel dropped at the path's two TUN devices so far (received and sent,
    /// both devices): a relay too slow to take what the device queued, or a write refused.
    pub fn device_drops(&self) -> u64 {
        let read = |device: &str| {
            std::fs::read_to_string("/proc/thread-self/net/dev")
                .ok()
                .and_then(|s| device_drops(&s, device))
                .unwrap_or(0)
        };
        let clients = self.inside(|| read(&self.devices.0)).unwrap_or(0);
        clients + read(&self.devices.1)
    }

    /// The relay's counts so far (packets, drops, retransmissions, lateness, its threads'
    /// CPU, each connection's bytes), everything its threads measured in them.
    pub fn counts(&self) -> &Counts {
        self.counts.sync();
        &self.counts
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

/// The receive and transmit drops of `device` in a `/proc/net/dev` (`name: rx_bytes
/// rx_packets rx_errs rx_drop ... tx_bytes tx_packets tx_errs tx_drop ...`), summed.
pub fn device_drops(dev: &str, device: &str) -> Option<u64> {
    let line = dev
        .lines()
        .find_map(|l| l.trim_start().strip_prefix(device)?.strip_prefix(':'))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    Some(fields.get(3)? + fields.get(11)?)
}

/// Makes the path's namespace, recorded in the run first, under a name no other path has:
/// (its name, the clients' TUN device, the server side's, the record). A name taken by another
/// run ("File exists") is passed over.
fn add_namespace(
    run_of: Option<&crate::reclaim::Run>,
) -> anyhow::Result<(String, String, String, Option<crate::reclaim::Entry>)> {
    let mut last = None;
    for _ in 0..8 {
        let (token, n) = crate::reclaim::next_name(run_of);
        let name = format!("{PREFIX}{token}-{n}");
        let (client_if, server_if) = tun_names(&token, n);
        let recorded = run_of.map(|r| r.record(crate::reclaim::Kind::Netns, &name));
        match run("ip", &["netns", "add", &name]) {
            Ok(()) => return Ok((name, client_if, server_if, recorded)),
            Err(e) if e.to_string().contains("File exists") => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("no free namespace name")))
}

/// Holds the lock under which one path at a time, of any run here, picks its subnet and puts
/// its address on; released when dropped (or when the process dies). `None`: no lock to be had.
fn lock_subnets() -> Option<nix::fcntl::Flock<File>> {
    let root = crate::reclaim::runs_root();
    std::fs::create_dir_all(&root).ok()?;
    let file = File::create(root.join("subnet.lock")).ok()?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive).ok()
}

/// A /30 of 10.201.0.0/16 that no address here is in: (the near end, the clients'). The
/// search starts from a hash of the path's name.
fn free_subnet(name: &str) -> anyhow::Result<(Ipv4Addr, Ipv4Addr)> {
    let used = Command::new("ip")
        .args(["-4", "-o", "addr", "show"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default();
    let start = name
        .bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)))
        % 16384;
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

/// Deletes the namespaces of sweetspot runs that no longer run (killed with SIGKILL, say),
/// saying so in one line; their TUN devices went with their descriptors.
pub fn clean_stale() {
    crate::reclaim::reclaim_named_namespaces().say("a dead run left");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_drops_are_read_from_proc_net_dev() {
        let dev = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  100 2 0 0 0 0 0 0 100 2 0 0 0 0 0 0
ssab12c:  5000 40 0 3 0 0 0 0 6000 50 0 7 0 0 0 0
";
        assert_eq!(device_drops(dev, "ssab12c"), Some(10));
        assert_eq!(device_drops(dev, "lo"), Some(0));
        assert_eq!(device_drops(dev, "ssab12"), None);
        assert_eq!(device_drops(dev, "eth0"), None);
    }

    #[test]
    fn tun_names_fit_the_kernels_15_bytes_for_any_run_and_path() {
        // The largest token, and paths past 10,000 in one run (names once carried a 7-digit
        // pid and overflowed at the 1,000th path).
        for n in [0, 999, 1_000, 10_000, 36u64.pow(6) - 1, u64::MAX] {
            let (client, server) = tun_names("zzzzzz", n);
            assert!(
                client.len() <= 15 && server.len() <= 15,
                "{client} {server}"
            );
            assert_ne!(client, server);
        }
        let names: std::collections::BTreeSet<String> =
            (0..10_000).map(|n| tun_names("k3x9a0", n).0).collect();
        assert_eq!(names.len(), 10_000, "10,000 paths of one run, 10,000 names");
    }

    #[test]
    fn the_capabilities_a_path_needs_are_read_from_status() {
        let root = "Name:\tsweetspot\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        let caps = effective_caps(root).unwrap();
        assert_eq!(caps & NEEDED_CAPS, NEEDED_CAPS);
        // Root less CAP_NET_ADMIN (bit 12).
        let without = "CapEff:\t000001ffffffefff\n";
        assert_ne!(effective_caps(without).unwrap() & NEEDED_CAPS, NEEDED_CAPS);
        assert_eq!(effective_caps("Name: x\n"), None);
    }
}
