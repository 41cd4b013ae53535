//! /proc probes: what a server's whole process tree costs while it is measured. The tree is
//! every process in the server's process group (the runner puts it in its own): a forking
//! server's children, a preforked pool, a shell wrapper's child. CPU by [`group_cpu_consistent`]
//! is the `proc+children` fallback where no cgroup can be made ([`super::cgroup`]); memory,
//! threads, processes and context switches are sampled by a [`TreeSampler`]. Parsing is pure
//! functions over the file text, tested without a process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The fields of `/proc/PID/stat` the sweep needs, times in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcStat {
    pub pid: i32,
    pub ppid: i32,
    pub pgrp: i32,
    pub utime: u64,
    pub stime: u64,
    pub cutime: u64,
    pub cstime: u64,
    pub num_threads: u64,
    /// CPU time of the live tasks in nanoseconds, summed from `/proc/PID/task/TID/schedstat`
    /// (the scheduler's exact runtime), when read.
    pub runtime_ns: Option<u64>,
}

/// Parses `/proc/PID/stat`. The command name is in parentheses and may hold spaces or
/// parentheses itself, so fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let pid = text[..open].trim().parse().ok()?;
    // Fields after the name, numbered as in proc(5) starting at field 3 (state).
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    let field = |n: usize| -> Option<&str> { rest.get(n - 3).copied() };
    let num = |n: usize| -> Option<u64> { field(n)?.parse::<i64>().ok().map(|v| v.max(0) as u64) };
    Some(ProcStat {
        pid,
        ppid: field(4)?.parse().ok()?,
        pgrp: field(5)?.parse().ok()?,
        utime: num(14)?,
        stime: num(15)?,
        cutime: num(16)?,
        cstime: num(17)?,
        num_threads: num(20)?,
        runtime_ns: None,
    })
}

/// The first field of `/proc/PID/task/TID/schedstat`: nanoseconds the task has run.
pub fn parse_schedstat(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// Sum of the scheduler runtime of every live task of `pid`; `None` without schedstat.
fn live_runtime_ns(pid: i32) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = None;
    for task in tasks.flatten() {
        if let Some(ns) = std::fs::read_to_string(task.path().join("schedstat"))
            .ok()
            .and_then(|t| parse_schedstat(&t))
        {
            *total.get_or_insert(0) += ns;
        }
    }
    total
}

/// The value of a `Key:   123 kB` line of a `/proc/.../status` file.
pub fn status_field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        if name != key {
            return None;
        }
        value.split_whitespace().next()?.parse().ok()
    })
}

/// CPU time of a process tree, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TreeCpu {
    pub user_s: f64,
    pub system_s: f64,
}

impl TreeCpu {
    pub fn total_s(&self) -> f64 {
        self.user_s + self.system_s
    }

    /// The CPU used between two readings, never negative (a process that left the group between
    /// readings can make a raw difference dip).
    pub fn since(&self, earlier: &TreeCpu) -> TreeCpu {
        TreeCpu {
            user_s: (self.user_s - earlier.user_s).max(0.0),
            system_s: (self.system_s - earlier.system_s).max(0.0),
        }
    }
}

/// Sums the CPU of a set of processes, counting each one's reaped children too.
///
/// A live process's own time is the larger of two lower bounds: `utime+stime` of its `stat`
/// (which also holds its exited threads, but is built from tick samples and was seen here to
/// read half the true runtime for a mostly sleeping process: 10 ms for 22 ms run) and the exact
/// scheduler runtime of its live tasks (`runtime_ns`, which misses exited threads). The
/// user/system split follows the tick samples.
pub fn sum_cpu(stats: &[ProcStat]) -> TreeCpu {
    let hz = crate::sys::clock_ticks_per_second();
    let mut total = TreeCpu::default();
    for s in stats {
        let (user, system) = (s.utime as f64 / hz, s.stime as f64 / hz);
        let sampled = user + system;
        let own = s
            .runtime_ns
            .map_or(sampled, |ns| sampled.max(ns as f64 / 1e9));
        let user_share = if sampled > 0.0 { user / sampled } else { 0.5 };
        total.user_s += own * user_share + s.cutime as f64 / hz;
        total.system_s += own * (1.0 - user_share) + s.cstime as f64 / hz;
    }
    total
}

/// `/proc/PID/stat` of one process, `None` when it is gone.
fn stat_of(pid: i32) -> Option<ProcStat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// `/proc/PID/stat` of every process (processes that vanish mid-scan are skipped).
fn every_process() -> Vec<ProcStat> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(stat_of)
        .collect()
}

/// A process's stat with its live runtime (schedstat) filled in.
fn with_runtime(stat: ProcStat) -> ProcStat {
    ProcStat {
        runtime_ns: live_runtime_ns(stat.pid),
        ..stat
    }
}

/// Every process in process group `pgrp`, read from /proc (processes that vanish mid-scan are
/// skipped).
pub fn group_processes(pgrp: i32) -> Vec<ProcStat> {
    every_process()
        .into_iter()
        .filter(|stat| stat.pgrp == pgrp)
        .map(with_runtime)
        .collect()
}

pub use crate::reclaim::{cgroup_tree_pids, child_cgroups};

/// Which processes are a server's.
#[derive(Debug, Clone)]
pub enum Members {
    /// Its process group.
    Group(i32),
    /// Its process group and whatever is in its cgroup (the cgroup's directory), where pieces
    /// of it that left the group (a daemon, a `setsid` child) still are.
    GroupAndCgroup(i32, PathBuf),
    /// A process and its descendants (by parent), wherever their groups are: a server the
    /// user started, known by its pid.
    Tree(i32),
}

impl Members {
    /// The server's processes now.
    pub fn processes(&self) -> Vec<ProcStat> {
        match self {
            Members::Group(pgrp) => group_processes(*pgrp),
            Members::Tree(root) => tree_processes(*root),
            Members::GroupAndCgroup(pgrp, dir) => {
                let mut all = group_processes(*pgrp);
                for pid in cgroup_tree_pids(dir) {
                    if all.iter().any(|p| p.pid == pid) {
                        continue;
                    }
                    all.extend(stat_of(pid).map(with_runtime));
                }
                all
            }
        }
    }
}

/// A process and all its descendants, read from /proc.
fn tree_processes(root: i32) -> Vec<ProcStat> {
    let all = every_process();
    let mut inside = vec![root];
    let mut grew = true;
    while grew {
        grew = false;
        for p in &all {
            if inside.contains(&p.ppid) && !inside.contains(&p.pid) {
                inside.push(p.pid);
                grew = true;
            }
        }
    }
    all.into_iter()
        .filter(|p| inside.contains(&p.pid))
        .map(with_runtime)
        .collect()
}

/// CPU of the whole process group now.
pub fn group_cpu(pgrp: i32) -> TreeCpu {
    sum_cpu(&group_processes(pgrp))
}

/// Whether two scans of a group saw the same processes with the same reaped-children times:
/// then no member was reaped (nor born) while they ran, and their CPU sum misses nothing.
pub fn scans_agree(first: &[ProcStat], second: &[ProcStat]) -> bool {
    let key = |stats: &[ProcStat]| {
        let mut k: Vec<(i32, u64, u64)> =
            stats.iter().map(|s| (s.pid, s.cutime, s.cstime)).collect();
        k.sort_unstable();
        k
    };
    key(first) == key(second)
}

/// Scans before giving up on a quiet moment (a server forking and reaping without pause).
const CONSISTENT_SCAN_TRIES: usize = 50;

/// CPU of the whole process group, from two back-to-back scans that agree (see [`scans_agree`]);
/// after `CONSISTENT_SCAN_TRIES` disagreements, the last scan.
///
/// CPU is read from `/proc/PID/stat`: utime+stime of each live process plus cutime+cstime,
/// which hold the time of children already reaped, so a forking server's finished children
/// still count. That sum is only right when no process is reaped in the middle of a scan (then
/// it is in neither its own `stat`, read too late, nor its parent's `cutime`, read too early),
/// and a forking server's children all exit together at the end of a run, so the scan is
/// repeated until two in a row agree.
pub fn group_cpu_consistent(pgrp: i32) -> TreeCpu {
    let mut previous = group_processes(pgrp);
    for _ in 0..CONSISTENT_SCAN_TRIES {
        let current = group_processes(pgrp);
        if scans_agree(&previous, &current) {
            return sum_cpu(&current);
        }
        previous = current;
        std::thread::sleep(Duration::from_millis(1));
    }
    sum_cpu(&previous)
}

/// CPU of the children this process has reaped (RUSAGE_CHILDREN): as a subreaper the runner
/// reaps the orphans of a server whose parent process died, so their time lands here.
pub fn reaped_children_cpu() -> TreeCpu {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_CHILDREN)
        .map(|u| {
            let tv = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            TreeCpu {
                user_s: tv(u.user_time()),
                system_s: tv(u.system_time()),
            }
        })
        .unwrap_or_default()
}

impl std::ops::Add for TreeCpu {
    type Output = TreeCpu;
    fn add(self, other: TreeCpu) -> TreeCpu {
        TreeCpu {
            user_s: self.user_s + other.user_s,
            system_s: self.system_s + other.system_s,
        }
    }
}

/// The rows of a `/proc/net/tcp` or `/proc/net/tcp6` table whose local port is `port` and
/// whose state is `state` (hex, as the table writes it), split into fields.
fn sockets_in<'a>(
    table: &'a str,
    port: u16,
    state: &'a str,
) -> impl Iterator<Item = Vec<&'a str>> + 'a {
    table.lines().skip(1).filter_map(move |line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let local_port = fields.get(1)?.rsplit_once(':')?.1;
        (*fields.get(3)? == state && u16::from_str_radix(local_port, 16).ok()? == port)
            .then_some(fields)
    })
}

/// Inodes of the sockets listening on `port` in a `/proc/net/tcp` or `/proc/net/tcp6` table.
pub fn listening_inodes(table: &str, port: u16) -> Vec<u64> {
    const LISTEN: &str = "0A";
    sockets_in(table, port, LISTEN)
        .filter_map(|fields| fields.get(9)?.parse().ok())
        .collect()
}

/// The connections established to `port` here: the server's ends of them, whose local port
/// it is (`/proc/net/tcp` and `tcp6`).
pub fn established_to(port: u16) -> u32 {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|t| std::fs::read_to_string(t).ok())
        .map(|text| established_in(&text, port))
        .sum()
}

/// In a `/proc/net/tcp` table, the established sockets whose local port is `port`.
pub fn established_in(table: &str, port: u16) -> u32 {
    const ESTABLISHED: &str = "01";
    sockets_in(table, port, ESTABLISHED).count() as u32
}

/// Whether a process of group `pgrp` holds a socket listening on `port` here. When it does
/// not, the server that answers on that port is not the started command's process tree (it
/// runs on another machine, or was detached into a process group of its own), so the group's
/// CPU is not the server's.
pub fn listens_on(members: &Members, port: u16) -> bool {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(text) = std::fs::read_to_string(table) {
            inodes.extend(listening_inodes(&text, port));
        }
    }
    if inodes.is_empty() {
        return false;
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    members.processes().iter().any(|process| {
        std::fs::read_dir(format!("/proc/{}/fd", process.pid))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .any(|link| wanted.iter().any(|w| link.as_os_str() == w.as_str()))
    })
}

/// Peaks and counts over a measurement window.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TreeSample {
    /// Largest sum of VmRSS over the tree seen in any one sample.
    pub peak_rss_kb: u64,
    pub peak_threads: u64,
    pub peak_processes: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub samples: u64,
    /// Tasks by state, averaged over the samples: running or runnable (`R`), sleeping (`S`,
    /// `I`), blocked in the kernel (`D`).
    pub tasks: TaskStates,
    /// Seconds the tree's tasks waited on a run queue for a CPU in the window, and ran (the
    /// scheduler's own counts, `/proc/PID/task/TID/schedstat`; live tasks only).
    pub runqueue_wait_s: f64,
    pub run_s: f64,
    /// The process that ran most in the window: its running or runnable threads (mean) and
    /// the CPU seconds it ran; what tells a runtime lock (one core used by a process whose
    /// threads all want one) from a pool.
    pub busiest: BusiestProcess,
    /// The CPUs the server's first process may run on (its affinity); 0 when not read.
    pub cores_allowed: u32,
}

/// Mean tasks in each state over a window's samples.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TaskStates {
    pub running: f64,
    pub sleeping: f64,
    pub blocked: f64,
}

/// See [`TreeSample::busiest`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BusiestProcess {
    pub running_threads: f64,
    pub cpu_s: f64,
    /// Over how many threads its CPU was spread: the inverse Simpson index of the threads'
    /// shares of it (1 for one thread doing all the work, 8 for eight equal turns).
    pub threads_sharing: f64,
}

/// The inverse Simpson index of some amounts: 1 / sum of the squared shares (0 for none).
pub fn effective_count(amounts: &[u64]) -> f64 {
    let total: u64 = amounts.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let squares: f64 = amounts
        .iter()
        .map(|a| (*a as f64 / total as f64).powi(2))
        .sum();
    1.0 / squares
}

/// The machine's CPU time so far, from the first line of `/proc/stat`: (busy, total) in
/// clock ticks, busy being all but idle and iowait.
pub fn parse_machine_cpu(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().next()?.strip_prefix("cpu ")?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .map(|t| t.parse().ok())
        .collect::<Option<_>>()?;
    let total: u64 = ticks.iter().take(8).sum();
    let idle = ticks.get(3)? + ticks.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// The machine's CPU time so far (see [`parse_machine_cpu`]).
pub fn machine_cpu() -> Option<(u64, u64)> {
    parse_machine_cpu(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// Cores the whole machine kept busy between two readings of [`machine_cpu`].
pub fn machine_busy_cores(before: (u64, u64), after: (u64, u64), cores: u32) -> f64 {
    let total = after.1.saturating_sub(before.1);
    if total == 0 {
        return 0.0;
    }
    after.0.saturating_sub(before.0) as f64 / total as f64 * f64::from(cores)
}

/// The state letter of a `/proc/.../status` file's `State:` line (`R`, `S`, `D`, ...).
pub fn state_of(status: &str) -> Option<char> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("State:"))
        .and_then(|v| v.trim().chars().next())
}

/// The run time and the run-queue wait of `/proc/PID/task/TID/schedstat`, nanoseconds.
pub fn parse_run_and_wait(text: &str) -> Option<(u64, u64)> {
    let mut fields = text.split_whitespace();
    let run = fields.next()?.parse().ok()?;
    let wait = fields.next()?.parse().ok()?;
    Some((run, wait))
}

/// How many CPUs a `Cpus_allowed_list` names (`0-1,3` is 3).
pub fn cpus_in_list(list: &str) -> u32 {
    list.trim()
        .split(',')
        .filter(|part| !part.is_empty())
        .map(|part| match part.split_once('-') {
            Some((a, b)) => match (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 0,
            },
            None => u32::from(part.trim().parse::<u32>().is_ok()),
        })
        .sum()
}

/// (voluntary, involuntary) context switches of one task.
type SwitchCounts = (u64, u64);

/// One task's counts when first and last seen in the window.
#[derive(Clone, Copy, Default)]
struct TaskCounts {
    switches: SwitchCounts,
    /// Run and run-queue wait, nanoseconds.
    sched: (u64, u64),
}

#[derive(Default)]
struct SamplerState {
    sample: TreeSample,
    /// Counts per task: (first seen, last seen) and its process, so a task's counts run from
    /// the window's start (or its birth) to its last sighting.
    tasks: HashMap<i32, (TaskCounts, TaskCounts, i32)>,
    /// Per process: its running or runnable threads summed over the samples.
    running_of: HashMap<i32, u64>,
    /// Summed over the samples: tasks running, sleeping, blocked.
    states: (u64, u64, u64),
    first_pass_done: bool,
}

impl SamplerState {
    fn take_sample(&mut self, members: &Members) {
        let processes = members.processes();
        let mut rss = 0;
        let mut threads = 0;
        for process in &processes {
            let dir = format!("/proc/{}", process.pid);
            if let Ok(status) = std::fs::read_to_string(format!("{dir}/status")) {
                rss += status_field(&status, "VmRSS").unwrap_or(0);
                if self.sample.cores_allowed == 0 {
                    self.sample.cores_allowed = status
                        .lines()
                        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                        .map_or(0, cpus_in_list);
                }
            }
            threads += process.num_threads;
            self.sample_tasks(process.pid, &dir);
        }
        self.first_pass_done = true;
        let s = &mut self.sample;
        s.samples += 1;
        s.peak_rss_kb = s.peak_rss_kb.max(rss);
        s.peak_threads = s.peak_threads.max(threads);
        s.peak_processes = s.peak_processes.max(processes.len() as u64);
        self.summarize();
    }

    /// Reads every task of process `pid`: its state, switches and scheduler counts.
    fn sample_tasks(&mut self, pid: i32, dir: &str) {
        let Ok(tasks) = std::fs::read_dir(format!("{dir}/task")) else {
            return;
        };
        for task in tasks.flatten() {
            let Some(tid) = task
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
                continue;
            };
            match state_of(&status) {
                Some('R') => {
                    self.states.0 += 1;
                    *self.running_of.entry(pid).or_default() += 1;
                }
                Some('D') => self.states.2 += 1,
                Some(_) => self.states.1 += 1,
                None => {}
            }
            let now = TaskCounts {
                switches: (
                    status_field(&status, "voluntary_ctxt_switches").unwrap_or(0),
                    status_field(&status, "nonvoluntary_ctxt_switches").unwrap_or(0),
                ),
                sched: std::fs::read_to_string(task.path().join("schedstat"))
                    .ok()
                    .and_then(|t| parse_run_and_wait(&t))
                    .unwrap_or_default(),
            };
            // Tasks present at the first pass start the window; later ones are born inside
            // it, so all their counts belong to it.
            let start = if self.first_pass_done {
                TaskCounts::default()
            } else {
                now
            };
            self.tasks
                .entry(tid)
                .and_modify(|(_, last, _)| *last = now)
                .or_insert((start, now, pid));
        }
    }

    /// The window's counts from the per-task first and last sightings.
    fn summarize(&mut self) {
        let delta = |f: fn(&TaskCounts) -> u64| -> u64 {
            self.tasks
                .values()
                .map(|(a, b, _)| f(b).saturating_sub(f(a)))
                .sum()
        };
        let voluntary = delta(|c| c.switches.0);
        let involuntary = delta(|c| c.switches.1);
        let run_ns = delta(|c| c.sched.0);
        let wait_ns = delta(|c| c.sched.1);
        let mut run_of: HashMap<i32, u64> = HashMap::new();
        for (a, b, pid) in self.tasks.values() {
            *run_of.entry(*pid).or_default() += b.sched.0.saturating_sub(a.sched.0);
        }
        let s = &mut self.sample;
        let n = s.samples.max(1) as f64;
        s.voluntary_switches = voluntary;
        s.involuntary_switches = involuntary;
        s.run_s = run_ns as f64 / 1e9;
        s.runqueue_wait_s = wait_ns as f64 / 1e9;
        s.tasks = TaskStates {
            running: self.states.0 as f64 / n,
            sleeping: self.states.1 as f64 / n,
            blocked: self.states.2 as f64 / n,
        };
        if let Some((pid, ns)) = run_of.iter().max_by_key(|(_, ns)| **ns) {
            let runs: Vec<u64> = self
                .tasks
                .values()
                .filter(|(_, _, p)| p == pid)
                .map(|(a, b, _)| b.sched.0.saturating_sub(a.sched.0))
                .collect();
            s.busiest = BusiestProcess {
                running_threads: self.running_of.get(pid).copied().unwrap_or(0) as f64 / n,
                cpu_s: *ns as f64 / 1e9,
                threads_sharing: effective_count(&runs),
            };
        }
    }
}

/// Samples a process group on a background thread until [`TreeSampler::finish`].
///
/// Context switches are per task in `/proc/PID/task/TID/status`, and a task that lived and died
/// between two samples is missed, so those counts are lower bounds for thread- or
/// process-per-connection servers.
pub struct TreeSampler {
    stop: Arc<AtomicBool>,
    state: Arc<Mutex<SamplerState>>,
    thread: Option<JoinHandle<()>>,
    members: Members,
}

impl TreeSampler {
    /// Takes a first sample now, then one every `interval`.
    pub fn start(members: Members, interval: Duration) -> TreeSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(Mutex::new(SamplerState::default()));
        lock(&state).take_sample(&members);
        let thread = {
            let (stop, state) = (Arc::clone(&stop), Arc::clone(&state));
            let members = members.clone();
            std::thread::Builder::new()
                .name("sweep-sampler".into())
                .spawn(move || {
                    // Parked, not asleep, between samples: `finish` unparks it, so a point
                    // does not wait out the rest of an interval to end.
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::park_timeout(interval);
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        lock(&state).take_sample(&members);
                    }
                })
                .ok()
        };
        TreeSampler {
            stop,
            state,
            thread,
            members,
        }
    }

    /// Takes a last sample and returns the window's peaks and counts.
    pub fn finish(mut self) -> TreeSample {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
        let mut state = lock(&self.state);
        state.take_sample(&self.members);
        state.sample
    }
}

impl Drop for TreeSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = &self.thread {
            thread.thread().unpark();
        }
    }
}

fn lock(state: &Mutex<SamplerState>) -> std::sync::MutexGuard<'_, SamplerState> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// CPU time (user+system, seconds) of this process, all threads: the generator's own cost.
pub fn own_cpu_s() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_SELF)
        .map(|u| {
            let tv = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            tv(u.user_time()) + tv(u.system_time())
        })
        .unwrap_or(0.0)
}

/// Whether a path exists under /proc (used to check a process is gone).
pub fn process_exists(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 300 0 0 0 \
                        150 30 20 10 20 0 7 0 123 4096 200 18446744073709551615";

    #[test]
    fn stat_fields_are_counted_after_the_name() {
        let s = parse_stat(STAT).unwrap();
        assert_eq!(s.pid, 4242);
        assert_eq!(s.ppid, 1);
        assert_eq!(s.pgrp, 4242);
        assert_eq!((s.utime, s.stime, s.cutime, s.cstime), (150, 30, 20, 10));
        assert_eq!(s.num_threads, 7);
    }

    #[test]
    fn listening_sockets_are_found_by_port() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0 100 0 0 10 0\n\
   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0 20 4 30 10 -1\n\
   2: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 77 1 0 100 0 0 10 0\n";
        assert_eq!(listening_inodes(table, 8080), vec![4242]);
        assert_eq!(listening_inodes(table, 80), vec![77]);
        assert!(listening_inodes(table, 81).is_empty());
        // The server's end of a connection to 8080 (local 8080, established); not the
        // listener, nor a client's end whose remote port is 8080.
        let with_client = format!(
            "{table}   3: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 4444 1 0 20 4 30 10 -1\n"
        );
        assert_eq!(established_in(&with_client, 8080), 1);
        assert_eq!(established_in(&with_client, 80), 0);
        assert_eq!(established_in(&with_client, 0xD431), 1);
    }

    #[test]
    fn our_own_listener_is_in_our_group_and_a_free_port_is_not() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let pgrp = nix::unistd::getpgrp().as_raw();
        assert!(listens_on(&Members::Group(pgrp), port));
        drop(listener);
        assert!(!listens_on(&Members::Group(pgrp), port));
    }

    #[test]
    fn cpu_sums_live_and_reaped_children() {
        let a = parse_stat(STAT).unwrap();
        let b = ProcStat {
            utime: 50,
            stime: 50,
            ..a
        };
        let hz = crate::sys::clock_ticks_per_second();
        let cpu = sum_cpu(&[a, b]);
        assert!((cpu.user_s - (150.0 + 20.0 + 50.0 + 20.0) / hz).abs() < 1e-9);
        assert!((cpu.system_s - (30.0 + 10.0 + 50.0 + 10.0) / hz).abs() < 1e-9);
        // The exact runtime wins when the tick samples fall short, split as the ticks are;
        // the reaped children's times are added as they are.
        let short = ProcStat {
            utime: 0,
            stime: 1,
            cutime: 0,
            cstime: 0,
            runtime_ns: Some((3.0 / hz * 1e9) as u64),
            ..a
        };
        let cpu = sum_cpu(&[short]);
        assert!(cpu.user_s.abs() < 1e-9 && (cpu.system_s - 3.0 / hz).abs() < 1e-6);
        // ... and never lowers what the ticks say (exited threads are only in the ticks).
        let threads_gone = ProcStat {
            runtime_ns: Some(0),
            ..short
        };
        assert!((sum_cpu(&[threads_gone]).system_s - 1.0 / hz).abs() < 1e-9);
        assert_eq!(
            parse_schedstat("22092405 32444933 1954\n"),
            Some(22_092_405)
        );
        let later = TreeCpu {
            user_s: 1.0,
            system_s: 0.1,
        };
        assert_eq!(
            later
                .since(&TreeCpu {
                    user_s: 0.5,
                    system_s: 0.5
                })
                .system_s,
            0.0
        );
    }

    #[test]
    fn scans_agree_only_without_a_reap_or_a_birth_between_them() {
        let parent = parse_stat(STAT).unwrap();
        let child = ProcStat {
            pid: 4243,
            ppid: 4242,
            utime: 90,
            ..parent
        };
        let before = [parent, child];
        // Order does not matter; CPU still running does not matter.
        let later = [ProcStat { utime: 95, ..child }, parent];
        assert!(scans_agree(&before, &later));
        // The child was reaped: gone, and its time moved into the parent's cutime.
        let reaped = [ProcStat {
            cutime: parent.cutime + 90,
            ..parent
        }];
        assert!(!scans_agree(&before, &reaped));
        // A reap of some other child between the scans changes cutime alone.
        let other_reaped = [
            ProcStat {
                cstime: parent.cstime + 1,
                ..parent
            },
            child,
        ];
        assert!(!scans_agree(&before, &other_reaped));
        assert!(!scans_agree(&before, &before[..1]));
    }

    #[test]
    fn status_fields_parse() {
        let text = "Name:\tx\nVmRSS:\t  1234 kB\nvoluntary_ctxt_switches:\t9\n";
        assert_eq!(status_field(text, "VmRSS"), Some(1234));
        assert_eq!(status_field(text, "voluntary_ctxt_switches"), Some(9));
        assert_eq!(status_field(text, "VmHWM"), None);
    }

    #[test]
    fn samples_this_test_process_group() {
        let me = parse_stat(&std::fs::read_to_string("/proc/self/stat").unwrap()).unwrap();
        let sampler = TreeSampler::start(Members::Group(me.pgrp), Duration::from_millis(10));
        std::thread::sleep(Duration::from_millis(30));
        let sample = sampler.finish();
        assert!(sample.peak_rss_kb > 0 && sample.peak_threads >= 1 && sample.peak_processes >= 1);
        assert!(own_cpu_s() > 0.0);
    }

    #[test]
    fn task_states_scheduler_counts_and_cpu_lists_parse() {
        let status = "Name:\tpython3\nUmask:\t0022\nState:\tR (running)\nTgid:\t42\n";
        assert_eq!(state_of(status), Some('R'));
        assert_eq!(state_of("State:\tD (disk sleep)\n"), Some('D'));
        assert_eq!(state_of("Name:\tx\n"), None);
        assert_eq!(
            parse_run_and_wait("1187654321 2345678 301\n"),
            Some((1_187_654_321, 2_345_678))
        );
        assert_eq!(parse_run_and_wait("12\n"), None);
        assert_eq!(cpus_in_list("0-1\n"), 2);
        assert_eq!(cpus_in_list("0-1,3,5-7"), 6);
        assert_eq!(cpus_in_list("0"), 1);
        assert_eq!(cpus_in_list(""), 0);
        assert_eq!(cpus_in_list("3-1"), 0);
        let stat = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\n";
        assert_eq!(parse_machine_cpu(stat), Some((150, 1000)));
        assert_eq!(parse_machine_cpu("intr 1 2\n"), None);
        assert_eq!(machine_busy_cores((150, 1000), (1050, 2000), 2), 1.8);
        assert_eq!(effective_count(&[]), 0.0);
        assert_eq!(effective_count(&[5, 0, 0]), 1.0);
        assert_eq!(effective_count(&[3; 8]), 8.0);
        assert!((effective_count(&[90, 5, 5]) - 1.227).abs() < 0.001);
    }
}
