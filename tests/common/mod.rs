//! Test harness: real `sweetspot serve` processes and a real redis-server on free ports, the
//! `sweetspot` binary run to the end, and a small raw HTTP client that shows exactly what went
//! over the wire. Sub-modules: [`tiny`], std::net servers that misbehave on purpose, and
//! [`pki`], certificates made with rcgen; [`source`], the tree read as text. Every test crate compiles all of it and uses a part,
//! hence `dead_code` is allowed.
#![allow(dead_code)]

pub mod pki;
pub mod runs;
pub mod source;
pub mod tiny;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

/// Runs `sweetspot ARGS` to its exit, stdin closed, and returns what it gave.
pub fn sweetspot_output(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sweetspot"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run sweetspot")
}

/// Runs `sweetspot ARGS` to its exit: the exit code (-1 when a signal ended it), stdout, stderr
/// and how long it took.
pub fn sweetspot(args: &[&str]) -> (i32, String, String, Duration) {
    let started = Instant::now();
    let out = sweetspot_output(args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        started.elapsed(),
    )
}

/// Latency assertions hold on a 2-core machine only if the tests of one suite do not load it at
/// the same time: a timing test holds this lock, alone, while it runs; a test that loads the
/// machine without timing it holds [`shared_lock`], beside the others of its kind but never
/// beside a timing test. A test that failed while holding either does not stop the others.
pub fn timing_lock() -> RwLockWriteGuard<'static, ()> {
    TIMING
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// See [`timing_lock`].
pub fn shared_lock() -> RwLockReadGuard<'static, ()> {
    TIMING
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

static TIMING: RwLock<()> = RwLock::new(());

/// Busy loops pinned to one CPU (`taskset`), for a test that needs a core shared with other
/// work; killed and reaped when dropped, whatever the test did.
pub struct BusyLoops(Vec<Child>);

impl BusyLoops {
    pub fn on(cpu: u32, loops: usize) -> BusyLoops {
        Self::at_nice(cpu, loops, 0)
    }

    /// As [`BusyLoops::on`], at the nice value the lab gives its load generator where it may
    /// ([`sweetspot::lab::GENERATOR_NICE`], root): loops that share the generator's core at
    /// its own priority.
    pub fn beside_the_generator(cpu: u32, loops: usize) -> BusyLoops {
        let machine = sweetspot::lab::Machine::detect();
        Self::at_nice(cpu, loops, machine.generator_nice)
    }

    fn at_nice(cpu: u32, loops: usize, nice: i32) -> BusyLoops {
        let (cpu, nice) = (cpu.to_string(), nice.to_string());
        BusyLoops(
            (0..loops)
                .map(|_| {
                    Command::new("taskset")
                        .args(["-c", &cpu, "nice", "-n", &nice])
                        .args(["sh", "-c", "while :; do :; done"])
                        .spawn()
                        .expect("taskset")
                })
                .collect(),
        )
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Seconds since the Unix epoch, as `--start-at` takes them.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A scratch directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir =
            std::env::temp_dir().join(format!("sweetspot-test-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `sweetspot serve`, in its own process group, stopped on drop.
pub struct Server {
    child: Option<Child>,
    stdout: Option<BufReader<std::process::ChildStdout>>,
    pub port: u16,
    pub ready_line: String,
}

impl Server {
    /// Starts `sweetspot serve --port 0 ARGS...` and waits for its ready line.
    pub fn start(args: &[&str]) -> Server {
        Server::spawn(
            Command::new(env!("CARGO_BIN_EXE_sweetspot")),
            args,
            Stdio::null(),
        )
    }

    /// Starts the server with at most `nofile` open files (through prlimit, which execs it
    /// in place), its stderr going to `stderr`.
    pub fn start_with_fd_limit(args: &[&str], nofile: u64, stderr: std::fs::File) -> Server {
        let mut cmd = Command::new("prlimit");
        cmd.arg(format!("--nofile={nofile}:{nofile}"))
            .arg(env!("CARGO_BIN_EXE_sweetspot"));
        Server::spawn(cmd, args, stderr.into())
    }

    fn spawn(mut cmd: Command, args: &[&str], stderr: Stdio) -> Server {
        cmd.arg("serve").arg("--port").arg("0").args(args);
        cmd.stdout(Stdio::piped())
            .stderr(stderr)
            .stdin(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd.spawn().expect("spawn sweetspot serve");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut ready_line = String::new();
        stdout.read_line(&mut ready_line).unwrap();
        let ready_line = ready_line.trim_end().to_string();
        let port = ready_line
            .split_whitespace()
            .nth(2)
            .and_then(|url| url.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| {
                let _ = child.kill();
                panic!("no ready line from {args:?}: {ready_line:?}")
            });
        Server {
            child: Some(child),
            stdout: Some(stdout),
            port,
            ready_line,
        }
    }

    /// Whether the server process is still running.
    pub fn running(&mut self) -> bool {
        self.child.as_mut().unwrap().try_wait().unwrap().is_none()
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Stops the server with SIGTERM and returns how many requests its stop line says it
    /// served.
    pub fn stop_and_count_served(self) -> u64 {
        let (code, rest) = self.stop_with(Signal::SIGTERM);
        assert_eq!(code, Some(0), "server exit code");
        rest.split("served ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no served count in {rest:?}"))
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.as_ref().unwrap().id() as i32)
    }

    /// Sends `signal` and waits for the exit; returns the exit code and the rest of stdout.
    pub fn stop_with(mut self, signal: Signal) -> (Option<i32>, String) {
        let pid = self.pid();
        let mut child = self.child.take().unwrap();
        kill(pid, signal).unwrap();
        let deadline = Instant::now() + Duration::from_secs(15);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = killpg(pid, Signal::SIGKILL);
                panic!("server did not stop within 15 s of {signal}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut rest = String::new();
        if let Some(mut out) = self.stdout.take() {
            let _ = out.read_to_string(&mut rest);
        }
        (status.code(), rest)
    }

    /// Kills the whole process group with SIGKILL, as a crash would.
    pub fn crash(mut self) {
        let pid = self.pid();
        let mut child = self.child.take().unwrap();
        killpg(pid, Signal::SIGKILL).unwrap();
        child.wait().unwrap();
        wait_group_gone(pid);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = Pid::from_raw(child.id() as i32);
            let _ = killpg(pid, Signal::SIGKILL);
            let _ = child.wait();
        }
    }
}

/// What the tests read of a process from `/proc/PID/stat`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: i32,
    pub state: String,
    pub ppid: i32,
    pub pgrp: i32,
    /// User plus system CPU, in clock ticks.
    pub cpu_ticks: u64,
}

/// Reads `/proc/PID/stat`; `None` when the process is gone.
pub fn proc_stat(pid: i32) -> Option<ProcStat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command: state, ppid, pgrp, ..., utime (12th), stime.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some(ProcStat {
        pid,
        state: fields.first()?.to_string(),
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        cpu_ticks: fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?,
    })
}

/// Resident memory of a process in KiB, from `/proc/PID/status` (VmRSS); `None` when gone.
pub fn rss_kb(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The largest resident memory (KiB) of any live process in the process group `pgid`: the
/// process that serves a connection, whichever architecture it is.
pub fn group_max_rss_kb(pgid: Pid) -> u64 {
    group_live(pgid)
        .into_iter()
        .filter_map(rss_kb)
        .max()
        .unwrap_or(0)
}

/// The live (not zombie) processes of the process group `pgid`, by pid.
pub fn group_live(pgid: Pid) -> Vec<i32> {
    processes()
        .iter()
        .filter(|p| p.pgrp == pgid.as_raw() && p.state != "Z")
        .map(|p| p.pid)
        .collect()
}

/// Every process visible in `/proc`.
pub fn processes() -> Vec<ProcStat> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter_map(proc_stat)
        .collect()
}

/// The children of `pid`, by pid: the zombies among them (exited, not reaped) with `zombies`,
/// else the live ones.
pub fn children(pid: Pid, zombies: bool) -> Vec<i32> {
    processes()
        .iter()
        .filter(|p| p.ppid == pid.as_raw() && (p.state == "Z") == zombies)
        .map(|p| p.pid)
        .collect()
}

/// Whether a live (not zombie) process is left in the process group `pgid`. Zombies whose
/// parent is not ours to reap do not count.
pub fn group_alive(pgid: Pid) -> bool {
    killpg(pgid, None).is_ok() && !group_live(pgid).is_empty()
}

/// Waits up to 5 s for a process group to have no live process.
pub fn wait_group_gone(pgid: Pid) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while group_alive(pgid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A real redis-server on a free port, without persistence, stopped on drop.
pub struct Redis {
    child: Option<Child>,
    pub port: u16,
    _dir: TempDir,
}

impl Redis {
    /// On a free port. A port is only free a moment: where another test's server took it
    /// first (redis-server then exits, and the port answers that server's HTTP), another port.
    pub fn start() -> Redis {
        let mut taken = Vec::new();
        for _ in 0..5 {
            match Redis::try_start_on(free_port()) {
                Ok(redis) => return redis,
                Err(why) => taken.push(why),
            }
        }
        panic!("redis-server did not start: {taken:?}");
    }

    pub fn start_on(port: u16) -> Redis {
        Redis::try_start_on(port).unwrap_or_else(|why| panic!("{why}"))
    }

    /// redis-server on `port`, once it answers PING with PONG; `Err` where it exited, or the
    /// port answered something else (another server holds it), or nothing answered in 10 s.
    fn try_start_on(port: u16) -> Result<Redis, String> {
        let dir = TempDir::new("redis");
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "redis-server is not installed: run the tests with scripts/test, which installs it",
            );
        let mut redis = Redis {
            child: Some(child),
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
                s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
                let mut buf = [0u8; 7];
                if s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() {
                    if &buf == b"+PONG\r\n" {
                        return Ok(redis);
                    }
                    return Err(format!(
                        "port {port} answered {:?}, not redis",
                        String::from_utf8_lossy(&buf)
                    ));
                }
            }
            if let Some(status) = redis
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                return Err(format!("redis-server on {port} exited: {status}"));
            }
            if Instant::now() >= deadline {
                return Err(format!("redis-server did not start on {port}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Sends `signal` to redis-server (SIGSTOP hangs it with its port still accepting).
    pub fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(self.child.as_ref().unwrap().id() as i32);
        kill(pid, signal).unwrap();
    }

    /// Stops redis (SIGKILL) and reaps it, so its port refuses connections from then on.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One HTTP response as read off the wire.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A client connection that keeps its read buffer between replies.
pub struct Client {
    pub reader: BufReader<TcpStream>,
}

impl Client {
    pub fn connect(port: u16) -> Client {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Client {
            reader: BufReader::new(stream),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.reader.get_mut().write_all(bytes).unwrap();
    }

    /// Reads one response; `head` for a HEAD request (no body follows).
    pub fn read_reply(&mut self, head: bool) -> Reply {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        assert!(line.starts_with("HTTP/1.1 "), "bad status line {line:?}");
        let status = line[9..12].parse().unwrap();
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            self.reader.read_line(&mut h).unwrap();
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (n, v) = h.split_once(':').unwrap();
            headers.push((n.trim().to_string(), v.trim().to_string()));
        }
        let mut reply = Reply {
            status,
            headers,
            body: Vec::new(),
        };
        if !head {
            let len: usize = reply.header("content-length").unwrap().parse().unwrap();
            reply.body = vec![0; len];
            self.reader.read_exact(&mut reply.body).unwrap();
        }
        reply
    }

    /// True when the server has closed the connection (EOF with nothing more sent).
    pub fn closed_by_server(&mut self) -> bool {
        let mut rest = Vec::new();
        self.reader.read_to_end(&mut rest).is_ok() && rest.is_empty()
    }
}

/// Sends one raw request on a new connection and reads one reply.
pub fn raw(port: u16, request: &str) -> Reply {
    let mut c = Client::connect(port);
    c.send(request.as_bytes());
    c.read_reply(request.starts_with("HEAD "))
}

/// GET `path` on a new connection that closes after the reply.
pub fn get(port: u16, path: &str) -> Reply {
    raw(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
    )
}

/// POSTs a guestbook form on a new connection.
pub fn post_remark(port: u16, name: &str, remarks: &str) -> Reply {
    let body: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("guest-name", name)
        .append_pair("guest-remarks", remarks)
        .finish();
    raw(
        port,
        &format!(
            "POST /guestbook HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
    )
}

/// The visitor count shown on a guestbook page.
pub fn visitors(page: &str) -> u64 {
    let start = page.find("id=\"visitors\">").expect("visitor counter") + 14;
    page[start..]
        .split('<')
        .next()
        .unwrap()
        .parse()
        .expect("a number")
}
