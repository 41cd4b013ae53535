//! Server processes under test: start one in its own process group, know when it is ready, stop
//! it and everything it forked. Ours is `sweetspot serve --port 0`, ready at its ready line; an
//! external one is a shell command, ready when its port accepts. The child leads its process
//! group, so stopping signals the group (SIGTERM, a bounded wait, SIGKILL), and the sweep is a
//! child subreaper ([`become_subreaper`]) so what a server forked is reaped here, not left a
//! zombie. [`ServerProcess::start_in`] starts it inside a cgroup ([`super::cgroup`]).

use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;

/// How often a booting external server is read ([`ServerProcess::wait_until_settled`]).
const SETTLE_INTERVAL: Duration = Duration::from_millis(100);
/// How long a server must stay quiet to be booted.
const SETTLE_SPAN_S: f64 = 0.4;
/// Quiet: under this share of one core, with its processes and threads unchanged.
const SETTLE_CORE_SHARE: f64 = 0.05;
/// The longest wait for a server to settle once its port is open.
const SETTLE_CAP: Duration = Duration::from_secs(15);

/// One reading of a booting server: when (seconds from the first), its processes and threads,
/// and the CPU it has used so far (seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BootReading {
    pub at_s: f64,
    pub processes: usize,
    pub threads: u64,
    pub cpu_s: f64,
}

/// Whether a server has finished booting: over the last [`SETTLE_SPAN_S`] of readings its
/// processes and threads did not change and it used under [`SETTLE_CORE_SHARE`] of a core.
pub fn settled(readings: &[BootReading]) -> bool {
    let Some(last) = readings.last() else {
        return false;
    };
    let Some(first) = readings
        .iter()
        .rev()
        .find(|r| last.at_s - r.at_s >= SETTLE_SPAN_S - 1e-9)
    else {
        return false;
    };
    let span = readings
        .iter()
        .filter(|r| r.at_s >= first.at_s)
        .collect::<Vec<_>>();
    span.iter()
        .all(|r| (r.processes, r.threads) == (last.processes, last.threads))
        && last.cpu_s - first.cpu_s < SETTLE_CORE_SHARE * (last.at_s - first.at_s)
}

/// What the ready line says: `listening on http://HOST:PORT arch=ARCH workers=N`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadyLine {
    /// `http` or `tcp`.
    pub scheme: String,
    pub host: String,
    pub port: u16,
    pub arch: Option<String>,
    pub workers: Option<u32>,
}

/// Parses the server's ready line; `None` for any other line.
pub fn parse_ready_line(line: &str) -> Option<ReadyLine> {
    let rest = line.trim().strip_prefix("listening on ")?;
    let mut words = rest.split_whitespace();
    let url = words.next()?;
    let (scheme, authority) = url.split_once("://")?;
    let authority = authority.trim_end_matches('/');
    let (host, port) = authority.rsplit_once(':')?;
    let mut ready = ReadyLine {
        scheme: scheme.to_string(),
        host: host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        port: port.parse().ok()?,
        arch: None,
        workers: None,
    };
    for word in words {
        if let Some(arch) = word.strip_prefix("arch=") {
            ready.arch = Some(arch.to_string());
        } else if let Some(workers) = word.strip_prefix("workers=") {
            ready.workers = workers.parse().ok();
        }
    }
    Some(ready)
}

/// How to start one server.
#[derive(Debug, Clone)]
pub enum Launch {
    /// `BINARY serve --arch ARCH --port 0 ...`.
    Ours {
        binary: PathBuf,
        arch: crate::arch::Arch,
        /// A variant's extra `serve` flags.
        extra_args: Vec<String>,
        workers: Option<u32>,
        store: Option<String>,
        protocol: &'static str,
        /// Run under `taskset -c 0` (when taskset exists).
        pin_with_taskset: bool,
    },
    /// `sh -c COMMAND`, ready when `host:port` accepts a connection.
    External {
        command: String,
        host: String,
        port: u16,
    },
}

/// How long [`ServerProcess::stats_line`] waits for a stopped server's last line.
const STATS_WAIT: Duration = Duration::from_millis(500);

/// A running server under test.
pub struct ServerProcess {
    child: Child,
    pgid: i32,
    pub ready: ReadyLine,
    stderr_tail: Arc<Mutex<String>>,
    stderr_closed: Arc<AtomicBool>,
    /// Bytes the server wrote to stdout and stderr (drained and dropped but for a tail).
    output_bytes: Arc<AtomicU64>,
    stopped: bool,
    /// The cgroup the server runs in, when it was started in one.
    cgroup_dir: Option<PathBuf>,
    /// What stopping the server took beyond a SIGTERM answered in time, in plain words.
    pub stop_notes: Vec<String>,
    /// Our server's stats line (`stopped: ...`), once it printed it.
    stats: Arc<Mutex<Option<String>>>,
}

/// Drains a stream of the server's, keeping its last few KB (to explain a failure) and
/// counting its bytes. Reads in blocks, not lines, so a server that floods its output with no
/// newline costs the runner a fixed 8 KiB buffer and a 4 KiB tail, never more.
fn spawn_tail_reader(
    stream: impl Read + Send + 'static,
    tail: Arc<Mutex<String>>,
    closed: Arc<AtomicBool>,
    bytes: Arc<AtomicU64>,
) {
    let _ = std::thread::Builder::new()
        .name("server-output".into())
        .spawn(move || {
            let mut stream = stream;
            let mut block = [0u8; 8192];
            loop {
                let n = match stream.read(&mut block) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                };
                bytes.fetch_add(n as u64, Ordering::Relaxed);
                let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
                t.push_str(&String::from_utf8_lossy(&block[..n]));
                if t.len() > 4096 {
                    let cut = t.len() - 2048;
                    let cut = (cut..t.len()).find(|&i| t.is_char_boundary(i)).unwrap_or(0);
                    t.drain(..cut);
                }
            }
            closed.store(true, Ordering::SeqCst);
        });
}

/// Whether `taskset` is on the PATH.
pub fn taskset_available() -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join("taskset").is_file()))
}

/// A free TCP port on 127.0.0.1 (bound, then released: the usual small race).
pub fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr()?.port())
}

/// The command that starts `launch`: a process-group leader with piped stdout and stderr.
fn command_for(launch: &Launch) -> Command {
    let mut command = match launch {
        Launch::Ours {
            binary,
            arch,
            extra_args,
            workers,
            store,
            protocol,
            pin_with_taskset,
        } => {
            let mut command = if *pin_with_taskset {
                let mut c = Command::new("taskset");
                c.arg("-c").arg("0").arg(binary);
                c
            } else {
                Command::new(binary)
            };
            command.args([
                "serve",
                "--arch",
                arch.name(),
                "--host",
                "127.0.0.1",
                "--port",
                "0",
            ]);
            command.args(["--protocol", protocol]);
            if let Some(workers) = workers {
                command.arg("--workers").arg(workers.to_string());
            }
            if let Some(store) = store {
                command.arg("--store").arg(store);
            }
            command.args(extra_args);
            command
        }
        Launch::External { command: line, .. } => {
            let mut command = Command::new("sh");
            command.arg("-c").arg(line);
            command
        }
    };
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // Dies with the runner however it dies; what it starts in turn carries the run's marker
    // and its cgroup, by which the run's guard (or the next run) finds it.
    crate::sys::die_with_parent_before_exec(&mut command);
    if let Some(run) = crate::reclaim::current() {
        command.env(crate::reclaim::MARKER, run.token());
    }
    command
}

/// Spawns the launch's command, in the cgroup of `cgroup_procs` where it can be joined before
/// the exec (else outside it: the bool says which), and in every budget's cgroup or not at all.
fn spawn_in(
    launch: &Launch,
    cgroup_procs: Option<&Path>,
    budgets: &[std::path::PathBuf],
) -> anyhow::Result<(std::process::Child, bool)> {
    let command_of = || -> anyhow::Result<std::process::Command> {
        let mut command = command_for(launch);
        for budget in budgets {
            crate::sys::join_cgroup_before_exec(&mut command, budget)
                .with_context(|| format!("joining the budget's {}", budget.display()))?;
        }
        Ok(command)
    };
    if let Some(procs) = cgroup_procs {
        let mut command = command_of()?;
        if crate::sys::join_cgroup_before_exec(&mut command, procs).is_ok() {
            if let Ok(child) = command.spawn() {
                return Ok((child, true));
            }
        }
    }
    let mut command = command_of()?;
    let child = command
        .spawn()
        .with_context(|| format!("starting {command:?}"))?;
    Ok((child, false))
}

impl ServerProcess {
    /// Starts a server and waits (at most `ready_timeout`) until it is ready. On failure the
    /// error says why (exit status and the end of its stderr) and nothing is left running.
    pub fn start(launch: &Launch, ready_timeout: Duration) -> anyhow::Result<ServerProcess> {
        Self::start_in(launch, ready_timeout, None, &[])
    }

    /// [`ServerProcess::start`], with the server moved into a cgroup before it execs (by
    /// writing to `cgroup_procs`, that cgroup's `cgroup.procs`), so everything it ever runs is
    /// charged to the cgroup. If the server cannot be spawned into the cgroup it is spawned
    /// without; [`ServerProcess::in_cgroup`] says which happened. With `budgets` (the
    /// `cgroup.procs` of a CPU quota's or a memory limit's cgroup, in other hierarchies) it
    /// joins those too, or does not start.
    pub fn start_in(
        launch: &Launch,
        ready_timeout: Duration,
        cgroup_procs: Option<&Path>,
        budgets: &[std::path::PathBuf],
    ) -> anyhow::Result<ServerProcess> {
        let (mut child, in_cgroup) = spawn_in(launch, cgroup_procs, budgets)?;
        let pgid = child.id() as i32;
        let stderr_tail = Arc::new(Mutex::new(String::new()));
        let stderr_closed = Arc::new(AtomicBool::new(false));
        let output_bytes = Arc::new(AtomicU64::new(0));
        if let Some(stderr) = child.stderr.take() {
            spawn_tail_reader(
                stderr,
                Arc::clone(&stderr_tail),
                Arc::clone(&stderr_closed),
                Arc::clone(&output_bytes),
            );
        }
        let stdout = child.stdout.take();
        let mut server = ServerProcess {
            child,
            pgid,
            ready: ReadyLine {
                scheme: String::new(),
                host: String::new(),
                port: 0,
                arch: None,
                workers: None,
            },
            stderr_tail,
            stderr_closed,
            output_bytes,
            stopped: false,
            cgroup_dir: cgroup_procs
                .filter(|_| in_cgroup)
                .and_then(Path::parent)
                .map(Path::to_path_buf),
            stop_notes: Vec::new(),
            stats: Arc::default(),
        };
        match server.wait_until_ready(launch, stdout, ready_timeout) {
            Ok(ready) => {
                server.ready = ready;
                Ok(server)
            }
            Err(e) => {
                server.stop();
                Err(e)
            }
        }
    }

    /// Waits for our server's ready line, or for an external server's port to open (its
    /// stdout counted and dropped).
    fn wait_until_ready(
        &mut self,
        launch: &Launch,
        stdout: Option<std::process::ChildStdout>,
        ready_timeout: Duration,
    ) -> anyhow::Result<ReadyLine> {
        match launch {
            Launch::Ours { .. } => self.wait_for_ready_line(stdout, ready_timeout),
            Launch::External { host, port, .. } => {
                if let Some(stdout) = stdout {
                    let ignored = Arc::new(Mutex::new(String::new()));
                    spawn_tail_reader(
                        stdout,
                        ignored,
                        Arc::new(AtomicBool::new(false)),
                        Arc::clone(&self.output_bytes),
                    );
                }
                self.wait_for_port(host, *port, ready_timeout)
            }
        }
    }

    fn wait_for_ready_line(
        &mut self,
        stdout: Option<impl Read + Send + 'static>,
        timeout: Duration,
    ) -> anyhow::Result<ReadyLine> {
        let stdout = stdout.ok_or_else(|| anyhow!("no stdout from the server"))?;
        let (sender, receiver) = mpsc::channel();
        let stats = Arc::clone(&self.stats);
        // The reader keeps draining stdout after the ready line so the server never blocks
        // writing its stats line, which it keeps; it ends at EOF when the group is gone.
        let _ = std::thread::Builder::new()
            .name("server-stdout".into())
            .spawn(move || {
                let mut sent = false;
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if !sent {
                        if let Some(ready) = parse_ready_line(&line) {
                            let _ = sender.send(ready);
                            sent = true;
                        }
                    } else if line.starts_with("stopped: ") {
                        *stats.lock().unwrap_or_else(|e| e.into_inner()) = Some(line);
                    }
                }
            });
        let deadline = Instant::now() + timeout;
        loop {
            match receiver.recv_timeout(Duration::from_millis(50)) {
                Ok(ready) => return Ok(ready),
                Err(mpsc::RecvTimeoutError::Disconnected)
                | Err(mpsc::RecvTimeoutError::Timeout)
                    if self.exited().is_some() =>
                {
                    let status = self.exited().expect("checked above");
                    bail!(
                        "server exited ({status}) before it was ready{}",
                        self.stderr_note()
                    )
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            if Instant::now() >= deadline {
                bail!(
                    "no ready line within {:.1}s{}",
                    timeout.as_secs_f64(),
                    self.stderr_note()
                );
            }
        }
    }

    fn wait_for_port(
        &mut self,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> anyhow::Result<ReadyLine> {
        let deadline = Instant::now() + timeout;
        let address = (host, port)
            .to_socket_addrs()
            .with_context(|| format!("resolving {host}:{port}"))?
            .next()
            .ok_or_else(|| anyhow!("{host}:{port} resolves to nothing"))?;
        loop {
            if let Some(status) = self.gone() {
                bail!(
                    "command exited ({status}) before its port opened{}",
                    self.stderr_note()
                );
            }
            if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
                self.wait_until_settled(deadline);
                return Ok(ReadyLine {
                    scheme: "http".into(),
                    host: host.to_string(),
                    port,
                    arch: None,
                    workers: None,
                });
            }
            if Instant::now() >= deadline {
                bail!(
                    "port {port} not open within {:.1}s{}",
                    timeout.as_secs_f64(),
                    self.stderr_note()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits, until `deadline` and at most [`SETTLE_CAP`], for a server whose port is open to
    /// finish booting ([`settled`]): Puma's cluster mode binds in its master and then forks
    /// workers that each load the app (8 workers of 1 thread served 294 req/s from the moment
    /// the port opened, 392 three seconds later, against a bound of 400), gunicorn's master
    /// likewise. A server never quiet (a busy background thread) is measured from the cap on.
    fn wait_until_settled(&mut self, deadline: Instant) {
        let cap = deadline.min(Instant::now() + SETTLE_CAP);
        let start = Instant::now();
        let members = self.members();
        let mut readings = Vec::new();
        while Instant::now() < cap && self.exited().is_none() {
            let processes = members.processes();
            readings.push(BootReading {
                at_s: start.elapsed().as_secs_f64(),
                processes: processes.len(),
                threads: processes.iter().map(|p| p.num_threads).sum(),
                cpu_s: super::probe::sum_cpu(&processes).total_s(),
            });
            if settled(&readings) {
                return;
            }
            std::thread::sleep(SETTLE_INTERVAL);
        }
    }

    /// Whether the server was started inside the cgroup asked for.
    pub fn in_cgroup(&self) -> bool {
        self.cgroup_dir.is_some()
    }

    /// Bytes the server has written to its stdout and stderr so far.
    pub fn output_bytes(&self) -> u64 {
        self.output_bytes.load(Ordering::Relaxed)
    }

    /// The server's processes: its group, and its cgroup where it has one.
    pub fn members(&self) -> super::probe::Members {
        use super::probe::Members;
        match &self.cgroup_dir {
            Some(dir) => Members::GroupAndCgroup(self.pgid, dir.clone()),
            None => Members::Group(self.pgid),
        }
    }

    /// The process group id (= the leader's pid).
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// The exit status if the leader has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The leader's exit status once the server is gone: the leader failed, or it exited
    /// cleanly and nothing of the server is left (a command that daemonizes exits 0 and leaves
    /// its server running in its cgroup, or in its process group: that server is not gone).
    pub fn gone(&mut self) -> Option<ExitStatus> {
        let status = self.exited()?;
        if !status.success() {
            return Some(status);
        }
        reap_group(self.pgid);
        let left = match &self.cgroup_dir {
            Some(dir) => !super::probe::cgroup_tree_pids(dir).is_empty(),
            None => !group_is_empty(self.pgid),
        };
        (!left).then_some(status)
    }

    /// The processes of the server outside its process group that are still running (only
    /// known in a cgroup: they left the group, by `setsid` or by daemonizing).
    fn strays(&self) -> Vec<i32> {
        let Some(dir) = &self.cgroup_dir else {
            return Vec::new();
        };
        super::probe::cgroup_tree_pids(dir)
            .into_iter()
            .filter(|&pid| {
                matches!(nix::unistd::getpgid(Some(Pid::from_raw(pid))), Ok(g) if g.as_raw() != self.pgid)
            })
            .collect()
    }

    /// ": <last stderr line>" when the server said anything on stderr. When the server has
    /// exited, waits briefly for its last words to be read.
    pub fn stderr_note(&self) -> String {
        let deadline = Instant::now() + Duration::from_millis(500);
        while !self.stderr_closed.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let tail = self.stderr_tail.lock().unwrap_or_else(|p| p.into_inner());
        match tail.lines().rev().find(|l| !l.trim().is_empty()) {
            Some(line) => format!(": {}", line.trim()),
            None => String::new(),
        }
    }

    /// Stops the whole server: SIGTERM to its group (and, when its leader had already exited,
    /// to what it left running in its cgroup: a daemon), up to 3 s for them to leave, then
    /// SIGKILL. Then, in a cgroup, kills what the server left behind outside its group. Each
    /// step beyond a SIGTERM answered in time is noted in [`ServerProcess::stop_notes`]. Reaps
    /// the leader and any re-parented members. Idempotent.
    pub fn stop(&mut self) {
        use super::cgroup::signal_all;
        if self.stopped {
            return;
        }
        self.stopped = true;
        let daemonized = self.exited().is_some();
        let group = Pid::from_raw(self.pgid);
        let _ = killpg(group, Signal::SIGTERM);
        // A stopped (SIGSTOPped) member would ignore SIGTERM until continued.
        let _ = killpg(group, Signal::SIGCONT);
        if daemonized {
            signal_all(&self.strays(), Signal::SIGTERM);
        }
        if !self.wait_group_gone(Duration::from_secs(3), daemonized) {
            let left = crate::lab::probe::group_processes(self.pgid).len()
                + if daemonized { self.strays().len() } else { 0 };
            self.stop_notes.push(format!(
                "the server ignored SIGTERM for 3 s: {left} process(es) killed"
            ));
            let _ = killpg(group, Signal::SIGKILL);
            if daemonized {
                signal_all(&self.strays(), Signal::SIGKILL);
            }
            self.wait_group_gone(Duration::from_secs(2), daemonized);
        }
        let strays = self.strays();
        if !strays.is_empty() {
            self.stop_notes.push(format!(
                "the server left {} process(es) of its own running outside its process group \
                 after it stopped: killed",
                strays.len()
            ));
            let deadline = Instant::now() + Duration::from_secs(2);
            while !self.strays().is_empty() && Instant::now() < deadline {
                signal_all(&self.strays(), Signal::SIGKILL);
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    /// Our server's stats line, once stopped: waits a moment for the reader to have it (the
    /// process is gone, its last line on the way); `None` if none came.
    pub fn stats_line(&self) -> Option<String> {
        let deadline = Instant::now() + STATS_WAIT;
        loop {
            let line = self.stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
            if line.is_some() || Instant::now() >= deadline {
                return line;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits until no process of the group remains (nor, with `and_strays`, of the server
    /// outside it), reaping what is ours to reap.
    fn wait_group_gone(&mut self, bound: Duration, and_strays: bool) -> bool {
        let deadline = Instant::now() + bound;
        loop {
            let _ = self.child.try_wait();
            reap_group(self.pgid);
            if self.child.try_wait().ok().flatten().is_some()
                && group_is_empty(self.pgid)
                && (!and_strays || self.strays().is_empty())
            {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reaps exited members of a process group that were re-parented to us.
fn reap_group(pgid: i32) {
    loop {
        match waitpid(Pid::from_raw(-pgid), Some(WaitPidFlag::WNOHANG)) {
            Ok(nix::sys::wait::WaitStatus::StillAlive) | Err(_) => return,
            Ok(_) => continue,
        }
    }
}

/// True when no live (non-zombie) process is in the group. Zombies whose parent is someone else
/// cannot be reaped by us and hold no resources, so they do not count.
pub fn group_is_empty(pgid: i32) -> bool {
    match killpg(Pid::from_raw(pgid), None) {
        Err(Errno::ESRCH) => true,
        Err(_) => false,
        Ok(()) => crate::lab::probe::group_processes(pgid).iter().all(|p| {
            std::fs::read_to_string(format!("/proc/{}/stat", p.pid))
                .map(|s| {
                    s.rsplit_once(')')
                        .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
                })
                .unwrap_or(true)
        }),
    }
}

/// Makes this process the reaper of orphans from its descendants, so a server's forked
/// children that outlive their parent come back to us to be reaped.
pub fn become_subreaper() {
    let _ = nix::sys::prctl::set_child_subreaper(true);
}

/// The server binary to run for our architectures: this executable.
pub fn this_binary() -> anyhow::Result<PathBuf> {
    std::env::current_exe().context("finding the sweetspot executable")
}

/// Checks that a binary path is usable before the sweep starts.
pub fn check_binary(path: &Path) -> anyhow::Result<()> {
    if !path.is_file() {
        bail!("server binary {} not found", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_line_parses() {
        let r =
            parse_ready_line("listening on http://127.0.0.1:40123 arch=epoll workers=1").unwrap();
        assert_eq!(r.scheme, "http");
        assert_eq!(r.host, "127.0.0.1");
        assert_eq!(r.port, 40123);
        assert_eq!(r.arch.as_deref(), Some("epoll"));
        assert_eq!(r.workers, Some(1));
        let r = parse_ready_line("listening on tcp://[::1]:7 arch=poll").unwrap();
        assert_eq!(
            (r.scheme.as_str(), r.host.as_str(), r.port),
            ("tcp", "::1", 7)
        );
        assert!(parse_ready_line("starting up").is_none());
        assert!(parse_ready_line("listening on http://127.0.0.1:notaport").is_none());
    }

    #[test]
    fn a_server_is_booted_once_quiet_for_a_span() {
        let r = |at_s: f64, processes: usize, threads: u64, cpu_s: f64| BootReading {
            at_s,
            processes,
            threads,
            cpu_s,
        };
        // Not yet a span of readings.
        assert!(!settled(&[]));
        assert!(!settled(&[r(0.0, 1, 1, 0.0), r(0.3, 1, 1, 0.0)]));
        // Quiet for 0.4 s: 0.01 s of CPU is 2.5% of a core.
        let quiet = [r(0.0, 1, 1, 0.10), r(0.2, 1, 1, 0.105), r(0.4, 1, 1, 0.11)];
        assert!(settled(&quiet));
        // 0.03 s over 0.4 s is 7.5% of a core: still booting.
        let busy = [r(0.0, 1, 1, 0.10), r(0.2, 1, 1, 0.12), r(0.4, 1, 1, 0.13)];
        assert!(!settled(&busy));
        // A worker forked inside the span, or a thread started: still booting.
        let forked = [r(0.0, 1, 1, 0.1), r(0.2, 2, 2, 0.1), r(0.4, 2, 2, 0.1)];
        assert!(!settled(&forked));
        let threads = [r(0.0, 2, 2, 0.1), r(0.2, 2, 3, 0.1), r(0.4, 2, 3, 0.1)];
        assert!(!settled(&threads));
        // Busy once, then quiet for a whole span after it.
        let mut later = busy.to_vec();
        later.extend([r(0.6, 1, 1, 0.131), r(0.8, 1, 1, 0.132)]);
        assert!(settled(&later));
    }

    #[test]
    fn an_external_server_is_ready_once_its_workers_booted() {
        // The port opens at once, then a forked worker boots for 1 s of CPU before it writes
        // its mark: ready is after the mark, not when the port opened.
        let port = free_port().unwrap();
        let mark = std::env::temp_dir().join(format!("sweetspot-booted-{}", std::process::id()));
        let _ = std::fs::remove_file(&mark);
        let command = format!(
            "python3 -c 'import socket,time,os; s=socket.socket(); \
             s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); \
             s.bind((\"127.0.0.1\",{port})); s.listen(64)\n\
             if os.fork() == 0:\n t=time.process_time()+1.0\n \
             while time.process_time() < t: pass\n \
             open(\"{mark}\",\"w\").write(\"booted\")\n\
             time.sleep(60)'",
            mark = mark.display()
        );
        let launch = Launch::External {
            command,
            host: "127.0.0.1".into(),
            port,
        };
        let opened = Instant::now();
        let mut server = ServerProcess::start(&launch, Duration::from_secs(20)).unwrap();
        let waited = opened.elapsed();
        let booted = mark.exists();
        server.stop();
        let _ = std::fs::remove_file(&mark);
        assert!(booted, "ready after {waited:?}, before the worker booted");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
    }

    #[test]
    fn external_command_starts_and_stops_with_its_children() {
        let port = free_port().unwrap();
        // A shell that forks a listener and a sleeper: both must go with the group.
        let command = format!(
            "python3 -c 'import socket,time; s=socket.socket(); \
             s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); \
             s.bind((\"127.0.0.1\",{port})); s.listen(); time.sleep(60)' & sleep 60; wait"
        );
        let launch = Launch::External {
            command,
            host: "127.0.0.1".into(),
            port,
        };
        let mut server = match ServerProcess::start(&launch, Duration::from_secs(10)) {
            Ok(s) => s,
            Err(e) if e.to_string().contains("exited") => return, // no python3 here
            Err(e) => panic!("{e:#}"),
        };
        let pgid = server.pgid();
        assert!(crate::lab::probe::group_processes(pgid).len() >= 2);
        server.stop();
        assert!(group_is_empty(pgid));
    }

    #[test]
    fn a_command_that_dies_is_a_failure_with_its_reason() {
        let port = free_port().unwrap();
        let launch = Launch::External {
            command: "echo 'address already in use' >&2; exit 3".into(),
            host: "127.0.0.1".into(),
            port,
        };
        let err = ServerProcess::start(&launch, Duration::from_secs(5))
            .err()
            .unwrap();
        let text = err.to_string();
        assert!(
            text.contains("exited") && text.contains("already in use"),
            "{text}"
        );
    }
}
