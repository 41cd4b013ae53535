//! What a run makes outside its own process (servers, cgroups, network namespaces) and how it
//! is taken back however the run ends. A run holds a directory under [`runs_root`], locked
//! (flock) for its life, with a file per thing it made; its children carry [`MARKER`] in their
//! environment. A guard process (`sweetspot __reclaim`, reading a pipe only the run holds) and
//! the next run take back what a run whose lock is free left: a lock, unlike a pid, cannot
//! outlive its process or be reused. Used by `sweep`'s servers and cgroups and `net`'s paths.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};

/// The environment variable every process a run starts carries: `SWEETSPOT_RUN=<token>`.
pub const MARKER: &str = "SWEETSPOT_RUN";
/// The prefix of every cgroup and namespace a run makes: `sweetspot-<token>-<n>`.
pub const PREFIX: &str = "sweetspot-";
/// A run's token: this many base-36 characters (short enough for a 15-byte device name).
pub const TOKEN_LEN: usize = 6;
const LOCK_FILE: &str = "lock";
/// The file in a run's directory that holds the run's pid.
pub const PID_FILE: &str = "pid";

/// The live run of this process, with the directory it holds.
pub struct Run {
    token: String,
    dir: PathBuf,
    _lock: Flock<File>,
    next_name: AtomicU64,
    next_entry: AtomicU64,
}

static RUN: OnceLock<Option<Run>> = OnceLock::new();
/// The guard's pipe: closed by the kernel when this process ends, however it ends.
static GUARD_PIPE: Mutex<Option<std::process::ChildStdin>> = Mutex::new(None);

/// Where runs keep their directories: `/run/sweetspot` for root, else under the temp dir.
pub fn runs_root() -> PathBuf {
    if nix::unistd::geteuid().is_root() {
        PathBuf::from("/run/sweetspot")
    } else {
        std::env::temp_dir().join(format!("sweetspot-runs-{}", nix::unistd::getuid()))
    }
}

/// This process's run, begun on first use: what dead runs left is taken back (said in one
/// line on stderr), a directory is locked, and a guard is started when this is the sweetspot
/// binary. `None` where no run directory can be made (then names fall back to the pid).
pub fn current() -> Option<&'static Run> {
    RUN.get_or_init(|| {
        let root = runs_root();
        std::fs::create_dir_all(&root).ok()?;
        let taken = reclaim_dead(&root);
        taken.say("a dead run left");
        let run = Run::lock_new(&root)?;
        run.start_guard();
        Some(run)
    })
    .as_ref()
}

impl Run {
    fn lock_new(root: &Path) -> Option<Run> {
        for _ in 0..16 {
            let token = random_token();
            let (hidden, dir) = (root.join(format!(".{token}")), root.join(&token));
            if dir.exists() || std::fs::create_dir(&hidden).is_err() {
                continue;
            }
            let lock = File::create(hidden.join(LOCK_FILE)).ok()?;
            let lock = Flock::lock(lock, FlockArg::LockExclusiveNonblock).ok()?;
            // For people and tests: which process the run is (never trusted for liveness).
            let _ = std::fs::write(hidden.join(PID_FILE), format!("{}\n", std::process::id()));
            // Made under a hidden name and renamed once locked: no scan sees it unlocked.
            std::fs::rename(&hidden, &dir).ok()?;
            return Some(Run {
                token,
                dir,
                _lock: lock,
                next_name: AtomicU64::new(0),
                next_entry: AtomicU64::new(0),
            });
        }
        None
    }

    /// The run's token, in the names of what it makes and in [`MARKER`].
    pub fn token(&self) -> &str {
        &self.token
    }

    /// A number for the next name made in this run.
    pub fn next_name(&self) -> u64 {
        self.next_name.fetch_add(1, Ordering::Relaxed)
    }

    /// Records something made (before it is made); the record goes when the [`Entry`] drops.
    pub fn record(&self, kind: Kind, what: &str) -> Entry {
        let n = self.next_entry.fetch_add(1, Ordering::Relaxed);
        let file = self.dir.join(format!("{}-{n}", kind.word()));
        let _ = std::fs::write(&file, what);
        Entry { file }
    }

    /// Starts `sweetspot __reclaim DIR` in a session of its own, holding the read end of a pipe
    /// whose write end only this process has: at its end-of-file the run is over.
    fn start_guard(&self) {
        let Ok(exe) = std::env::current_exe() else {
            return;
        };
        // A test harness linking the library is not the binary that has the guard.
        if exe.file_name().is_none_or(|n| n != "sweetspot") {
            return;
        }
        let mut command = std::process::Command::new(exe);
        command
            .arg("__reclaim")
            .arg(&self.dir)
            .env_remove(MARKER)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null());
        crate::sys::new_session_before_exec(&mut command);
        if let Ok(mut guard) = command.spawn() {
            *GUARD_PIPE.lock().unwrap_or_else(|p| p.into_inner()) = guard.stdin.take();
        }
    }
}

/// A name's parts for something this process makes: (token, n), the run's token and its next
/// number; with no run, this process's pid (alive while it is, see [`run_alive`]) and a
/// number of this process's. Named `sweetspot-<token>-<n>`.
pub fn next_name(run: Option<&Run>) -> (String, u64) {
    static WITHOUT_RUN: AtomicU64 = AtomicU64::new(0);
    match run {
        Some(run) => (run.token.clone(), run.next_name()),
        None => (
            std::process::id().to_string(),
            WITHOUT_RUN.fetch_add(1, Ordering::Relaxed),
        ),
    }
}

/// What a run records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A cgroup's directory.
    Cgroup,
    /// A network namespace's name.
    Netns,
    /// A scratch directory of the run's (`sweetspot-<command>-<pid>` in the temp dir).
    Scratch,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Cgroup => "cgroup",
            Kind::Netns => "netns",
            Kind::Scratch => "scratch",
        }
    }
}

/// A record of something made; removed when dropped (the thing was taken back by its owner).
#[derive(Debug)]
pub struct Entry {
    file: PathBuf,
}

impl Drop for Entry {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}

/// Six base-36 characters from the clock and the pid, mixed (no two live runs share one: a
/// run's directory is made exclusively).
fn random_token() -> String {
    static SALT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut x =
        nanos ^ (u64::from(std::process::id()) << 32) ^ SALT.fetch_add(0x9E37, Ordering::Relaxed);
    // splitmix64's finalizer: neighbouring inputs give unrelated outputs.
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    base36(x % 36u64.pow(TOKEN_LEN as u32), TOKEN_LEN)
}

/// `n` in base 36, left-padded with zeros to `width`.
pub fn base36(mut n: u64, width: usize) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    while n > 0 || out.is_empty() {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
    }
    while out.len() < width {
        out.push(b'0');
    }
    out.reverse();
    String::from_utf8(out).expect("ASCII digits")
}

/// The token in a name of ours, `sweetspot-<token>-<n>`.
pub fn token_of(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(PREFIX)?;
    let (token, n) = rest.split_once('-')?;
    n.parse::<u64>().ok()?;
    (!token.is_empty() && token.bytes().all(|b| b.is_ascii_alphanumeric())).then_some(token)
}

/// Whether the run of `token` is alive: its directory's lock is held. A name made before runs
/// had directories carries a pid: alive while that pid is.
pub fn run_alive(root: &Path, token: &str) -> bool {
    if let Some(run) = RUN.get().and_then(Option::as_ref) {
        if run.token == token {
            return true;
        }
    }
    let dir = root.join(token);
    if dir.is_dir() {
        return match File::open(dir.join(LOCK_FILE)) {
            Ok(file) => Flock::lock(file, FlockArg::LockSharedNonblock).is_err(),
            Err(_) => false,
        };
    }
    token.bytes().all(|b| b.is_ascii_digit()) && Path::new("/proc").join(token).exists()
}

/// What was taken back, counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    pub processes: usize,
    pub cgroups: usize,
    pub namespaces: usize,
}

impl Taken {
    fn add(&mut self, other: Taken) {
        self.processes += other.processes;
        self.cgroups += other.cgroups;
        self.namespaces += other.namespaces;
    }

    pub fn is_empty(&self) -> bool {
        *self == Taken::default()
    }

    /// One line on stderr when anything was taken: `sweetspot: removed what <whose> left: ...`.
    pub fn say(&self, whose: &str) {
        let parts: Vec<String> = [
            (self.processes, "process(es)"),
            (self.cgroups, "cgroup(s)"),
            (self.namespaces, "network namespace(s)"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        if !parts.is_empty() {
            eprintln!("sweetspot: removed what {whose}: {}", parts.join(", "));
        }
    }
}

/// Takes back what every dead run under `root` left, and removes their directories.
pub fn reclaim_dead(root: &Path) -> Taken {
    let mut taken = Taken::default();
    let Ok(entries) = std::fs::read_dir(root) else {
        return taken;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let path = entry.path();
        if name.starts_with('.') || !path.is_dir() {
            // A hidden directory is a run being made, or one that died making itself.
            if name.starts_with('.') && older_than(&path, Duration::from_secs(60)) {
                let _ = std::fs::remove_dir_all(&path);
            }
            continue;
        }
        let Ok(lock) = File::open(path.join(LOCK_FILE)) else {
            let _ = std::fs::remove_dir_all(&path);
            continue;
        };
        if let Ok(held) = Flock::lock(lock, FlockArg::LockExclusiveNonblock) {
            taken.add(reclaim_run(&path));
            drop(held);
        }
    }
    taken
}

fn older_than(path: &Path, age: Duration) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .is_ok_and(|t| t.elapsed().unwrap_or_default() > age)
}

/// Takes back everything run directory `dir` lists and every process carrying its marker,
/// then removes the directory. The caller holds its lock (its run is over).
pub fn reclaim_run(dir: &Path) -> Taken {
    let mut taken = Taken::default();
    let token = dir
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let mut cgroups = Vec::new();
    let mut namespaces = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Ok(what) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        if name.starts_with("cgroup-") {
            cgroups.push(PathBuf::from(what.trim()));
        } else if name.starts_with("netns-") {
            namespaces.push(what.trim().to_string());
        } else if name.starts_with("scratch-") {
            remove_scratch(Path::new(what.trim()));
        }
    }
    taken.processes += kill_marked(&token);
    for cgroup in cgroups.iter().filter(|c| c.is_dir()) {
        taken.processes += kill_cgroup_tree(cgroup);
        if remove_cgroup_tree(cgroup) {
            taken.cgroups += 1;
        }
    }
    for name in &namespaces {
        if delete_namespace(name) {
            taken.namespaces += 1;
        }
    }
    let _ = std::fs::remove_dir_all(dir);
    taken
}

/// Removes a run's scratch directory: only one of ours (`sweetspot-...` directly in the temp
/// dir), whatever the record says.
fn remove_scratch(dir: &Path) {
    let ours = dir.parent() == Some(std::env::temp_dir().as_path())
        && dir
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("sweetspot-"));
    if ours {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Kills every process whose environment carries `SWEETSPOT_RUN=<token>`, until none is left
/// (at most 2 s); how many there were.
pub fn kill_marked(token: &str) -> usize {
    if token.is_empty() {
        return 0;
    }
    let needle = format!("{MARKER}={token}\0");
    let me = std::process::id() as i32;
    let find = || -> Vec<i32> {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|&pid| pid != me && !is_zombie(pid))
            .filter(|pid| {
                let mut environ = Vec::new();
                File::open(format!("/proc/{pid}/environ"))
                    .and_then(|mut f| f.read_to_end(&mut environ))
                    .is_ok()
                    && environ
                        .windows(needle.len())
                        .any(|w| w == needle.as_bytes())
            })
            .collect()
    };
    kill_until_gone(find)
}

/// Kills what `find` finds until it finds nothing (at most 2 s); how many it found first.
fn kill_until_gone(find: impl Fn() -> Vec<i32>) -> usize {
    let first = find();
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut pids = first.clone();
    while !pids.is_empty() && Instant::now() < deadline {
        for &pid in &pids {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = nix::sys::wait::waitpid(
                nix::unistd::Pid::from_raw(pid),
                Some(nix::sys::wait::WaitPidFlag::WNOHANG),
            );
        }
        std::thread::sleep(Duration::from_millis(10));
        pids = find();
    }
    first.len()
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
    })
}

/// The processes in cgroup `dir` and in any cgroup made inside it.
pub fn cgroup_tree_pids(dir: &Path) -> Vec<i32> {
    let mut pids: Vec<i32> = std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    for child in child_cgroups(dir) {
        pids.extend(cgroup_tree_pids(&child));
    }
    pids
}

/// The cgroups directly inside `dir`.
pub fn child_cgroups(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// Kills every live process in cgroup `dir`'s tree until it is empty; how many there were.
pub fn kill_cgroup_tree(dir: &Path) -> usize {
    kill_until_gone(|| {
        cgroup_tree_pids(dir)
            .into_iter()
            .filter(|&pid| !is_zombie(pid))
            .collect()
    })
}

/// Removes cgroup `dir`, the cgroups inside it first, retrying while its last processes leave
/// (at most 2 s); whether it is gone.
pub fn remove_cgroup_tree(dir: &Path) -> bool {
    fn remove(dir: &Path) -> std::io::Result<()> {
        for child in child_cgroups(dir) {
            let _ = remove(&child);
        }
        std::fs::remove_dir(dir)
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        if remove(dir).is_ok() || !dir.exists() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Deletes network namespace `name` with iproute2 when it exists; whether it was deleted.
pub fn delete_namespace(name: &str) -> bool {
    Path::new("/run/netns").join(name).exists()
        && std::process::Command::new("ip")
            .args(["netns", "del", name])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// Takes back the cgroups named `sweetspot-<token>-<n>` inside `parent` whose run is dead
/// (left by a run that died between making one and recording it, or by an older sweetspot).
pub fn reclaim_named_cgroups(parent: &Path) -> Taken {
    let root = runs_root();
    let mut taken = Taken::default();
    for dir in child_cgroups(parent) {
        let name = dir.file_name().map(|n| n.to_string_lossy().to_string());
        let Some(token) = name.as_deref().and_then(token_of) else {
            continue;
        };
        if !run_alive(&root, token) {
            taken.processes += kill_cgroup_tree(&dir);
            if remove_cgroup_tree(&dir) {
                taken.cgroups += 1;
            }
        }
    }
    taken
}

/// Deletes the namespaces named `sweetspot-<token>-<n>` whose run is dead.
pub fn reclaim_named_namespaces() -> Taken {
    let root = runs_root();
    let mut taken = Taken::default();
    let Ok(entries) = std::fs::read_dir("/run/netns") else {
        return taken;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(token) = token_of(&name) else {
            continue;
        };
        if !run_alive(&root, token) && delete_namespace(&name) {
            taken.namespaces += 1;
        }
    }
    taken
}

/// `sweetspot __reclaim DIR`: the guard. Waits for end-of-file on stdin (its run ended), takes
/// the run's lock, and takes back what the run left, saying so in one line if it left anything.
pub fn guard(dir: &Path) -> anyhow::Result<()> {
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin().lock();
    loop {
        match stdin.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let Ok(lock) = File::open(dir.join(LOCK_FILE)) else {
        return Ok(());
    };
    // The run is over; a child of it between fork and exec may hold the lock for a moment.
    let Ok(_held) = Flock::lock(lock, FlockArg::LockExclusive) else {
        return Ok(());
    };
    reclaim_run(dir).say("the run left running when it ended");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_their_run_token() {
        assert_eq!(token_of("sweetspot-k3x9a0-12"), Some("k3x9a0"));
        assert_eq!(token_of("sweetspot-1234-0"), Some("1234"));
        assert_eq!(token_of("sweetspot-1234"), None);
        assert_eq!(token_of("other-1234-0"), None);
        assert_eq!(token_of("sweetspot--0"), None);
        assert_eq!(token_of("sweetspot-a/b-0"), None);
    }

    #[test]
    fn tokens_are_six_base36_characters() {
        assert_eq!(base36(0, 3), "000");
        assert_eq!(base36(35, 1), "z");
        assert_eq!(base36(36, 1), "10");
        assert_eq!(base36(36u64.pow(6) - 1, 6), "zzzzzz");
        let tokens: std::collections::BTreeSet<String> = (0..200).map(|_| random_token()).collect();
        assert!(tokens.len() >= 199, "{} distinct of 200", tokens.len());
        assert!(tokens
            .iter()
            .all(|t| t.len() == TOKEN_LEN && t.bytes().all(|b| b.is_ascii_alphanumeric())));
    }

    #[test]
    fn a_dead_runs_directory_and_processes_are_taken_back_and_a_live_ones_kept() {
        let root =
            std::env::temp_dir().join(format!("sweetspot-reclaim-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let live = Run::lock_new(&root).unwrap();
        // A dead run: its directory with a lock nobody holds, and a process with its marker.
        let dead = root.join("dead00");
        std::fs::create_dir(&dead).unwrap();
        File::create(dead.join(LOCK_FILE)).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env(MARKER, "dead00")
            .spawn()
            .unwrap();
        assert!(run_alive(&root, live.token()));
        assert!(!run_alive(&root, "dead00"));
        let pid = child.id() as i32;
        // A process that has just exec'd shows an empty environment for a moment (the kernel
        // sets its bounds after waking a vfork parent): wait until it shows the marker.
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline
            && !std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|e| e.windows(13).any(|w| w == b"SWEETSPOT_RUN"))
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        // A dead run's lock can be held for a moment by another test's child between its
        // fork and its exec (a probe's descriptor, duplicated): that run is taken back later.
        let mut taken = Taken::default();
        let deadline = Instant::now() + Duration::from_secs(2);
        while dead.exists() && Instant::now() < deadline {
            taken.add(reclaim_dead(&root));
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(taken.processes, 1);
        // Killed, and reaped (by the reclaim, or here).
        let _ = child.try_wait();
        assert!(is_zombie(pid), "process {pid} is alive");
        assert!(!dead.exists());
        assert!(live.dir.exists(), "a live run's directory is kept");
        drop(live);
        let _ = std::fs::remove_dir_all(&root);
    }
}
