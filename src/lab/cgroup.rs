//! Exact server CPU: a cgroup made for each measured server, where the machine allows one
//! ([`ServerCgroup`]), and the method used at each point ([`CpuMethod`], recorded as
//! `server.cpu_method` in `results.json`). A process tree read from /proc misses work: a
//! process that exits between two reads of a scan is in neither its own `stat` nor yet in its
//! parent's `cutime`, and a forking server's children all exit together at the end of a run.
//! The kernel's accounting of a cgroup has no such gap. The fallback is [`super::probe`].

use std::path::{Path, PathBuf};

use super::probe::TreeCpu;

/// The environment variable that forces a method.
pub const METHOD_ENV: &str = "SWEETSPOT_CPU_METHOD";

/// How a point's server CPU was measured.
///
/// Tried in this order, the first that works is used; [`METHOD_ENV`] (`auto`, or one of the
/// names) forces one, for tests and comparisons:
/// - `cgroup-v1-cpuacct`: a v1 hierarchy with the cpuacct controller (`cpuacct.usage`,
///   `cpuacct.usage_user`, `cpuacct.usage_sys`, nanoseconds);
/// - `cgroup-v2`: the unified hierarchy (`cpu.stat`: `usage_usec`, `user_usec`, `system_usec`;
///   the kernel keeps these for every cgroup, whether or not the cpu controller is enabled);
/// - `proc+children`: no writable cgroup (not root and no delegated subtree): /proc plus the
///   reaped children's usage, read as a consistent snapshot (see [`super::probe`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CpuMethod {
    #[serde(rename = "cgroup-v1-cpuacct")]
    CgroupV1Cpuacct,
    #[serde(rename = "cgroup-v2")]
    CgroupV2,
    #[serde(rename = "proc+children")]
    ProcChildren,
}

impl CpuMethod {
    /// The name recorded in `results.json`.
    pub fn name(self) -> &'static str {
        match self {
            CpuMethod::CgroupV1Cpuacct => "cgroup-v1-cpuacct",
            CpuMethod::CgroupV2 => "cgroup-v2",
            CpuMethod::ProcChildren => "proc+children",
        }
    }

    fn from_name(name: &str) -> Option<CpuMethod> {
        [
            CpuMethod::CgroupV1Cpuacct,
            CpuMethod::CgroupV2,
            CpuMethod::ProcChildren,
        ]
        .into_iter()
        .find(|m| m.name() == name)
    }
}

/// What `SWEETSPOT_CPU_METHOD` asks for: `None` is automatic. An unknown value is an error
/// naming the accepted ones.
pub fn forced_method() -> anyhow::Result<Option<CpuMethod>> {
    match std::env::var(METHOD_ENV) {
        Err(_) => Ok(None),
        Ok(value) if value.is_empty() || value == "auto" => Ok(None),
        Ok(value) => CpuMethod::from_name(&value).map(Some).ok_or_else(|| {
            crate::usage(format!(
                "{METHOD_ENV}={value:?}: expected auto, cgroup-v1-cpuacct, cgroup-v2 or \
                 proc+children"
            ))
        }),
    }
}

/// One line of `/proc/self/mountinfo` that matters here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    /// Where in the hierarchy the mount starts (`/` unless a container mounts a subtree).
    pub root: String,
    pub mount_point: PathBuf,
    /// `cgroup` (v1) or `cgroup2`.
    pub fs_type: String,
    /// The super options: for v1 the controllers (`rw,cpu,cpuacct`).
    pub options: String,
}

/// The cgroup mounts in a mountinfo text (proc(5): fields, ` - `, fs type, source, options).
pub fn parse_mountinfo(text: &str) -> Vec<CgroupMount> {
    text.lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let mut fields = before.split_whitespace();
            let root = fields.nth(3)?;
            let mount_point = fields.next()?;
            let mut after = after.split_whitespace();
            let fs_type = after.next()?;
            let _source = after.next()?;
            let options = after.next().unwrap_or("");
            (fs_type == "cgroup" || fs_type == "cgroup2").then(|| CgroupMount {
                root: unescape_octal(root),
                mount_point: PathBuf::from(unescape_octal(mount_point)),
                fs_type: fs_type.to_string(),
                options: options.to_string(),
            })
        })
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_octal(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 4 <= bytes.len()
            && bytes[i + 1..i + 4].iter().all(u8::is_ascii_digit)
        {
            let value =
                (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(value);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The part of cgroup path `own` below a mount's `root`, relative (`None` when the mount does
/// not contain it: then there is nowhere to make a cgroup next to ours).
pub fn path_below_root(own: &str, root: &str) -> Option<PathBuf> {
    let root = root.trim_end_matches('/');
    let rest = own.strip_prefix(root)?;
    if !(rest.is_empty() || rest.starts_with('/')) {
        return None;
    }
    Some(PathBuf::from(rest.trim_start_matches('/')))
}

/// This process's cgroup path in a hierarchy, from a `/proc/self/cgroup` text: the v2 line
/// (`0::/path`) for `None`, else the v1 line whose controller list holds `controller`.
pub fn own_cgroup_path(text: &str, controller: Option<&str>) -> Option<String> {
    text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let id = parts.next()?;
        let controllers = parts.next()?;
        let path = parts.next()?;
        let matches = match controller {
            None => id == "0" && controllers.is_empty(),
            Some(c) => controllers.split(',').any(|x| x == c),
        };
        matches.then(|| path.to_string())
    })
}

/// CPU of a v2 `cpu.stat` text (microseconds).
pub fn parse_v2_cpu_stat(text: &str) -> Option<TreeCpu> {
    let field = |key: &str| -> Option<f64> {
        text.lines()
            .find_map(|line| {
                let (name, value) = line.split_once(' ')?;
                (name == key).then(|| value.trim().parse::<u64>().ok())?
            })
            .map(|us| us as f64 / 1e6)
    };
    let usage = field("usage_usec")?;
    match (field("user_usec"), field("system_usec")) {
        // Scaled so the parts add up to the exact total (the split is tick-sampled).
        (Some(user), Some(system)) => Some(split_total(usage, user, system)),
        _ => Some(TreeCpu {
            user_s: usage,
            system_s: 0.0,
        }),
    }
}

/// CPU of v1 cpuacct files: the exact total (`cpuacct.usage`, ns) split in the proportion of
/// `cpuacct.usage_user` and `cpuacct.usage_sys` when present.
pub fn v1_cpu(usage_ns: &str, user_ns: Option<&str>, sys_ns: Option<&str>) -> Option<TreeCpu> {
    let parse = |t: &str| t.trim().parse::<u64>().ok().map(|ns| ns as f64 / 1e9);
    let total = parse(usage_ns)?;
    match (user_ns.and_then(parse), sys_ns.and_then(parse)) {
        (Some(user), Some(system)) => Some(split_total(total, user, system)),
        _ => Some(TreeCpu {
            user_s: total,
            system_s: 0.0,
        }),
    }
}

/// `total` split in the proportion `user : system` (all to user when both are zero).
fn split_total(total: f64, user: f64, system: f64) -> TreeCpu {
    let parts = user + system;
    if parts <= 0.0 {
        return TreeCpu {
            user_s: total,
            system_s: 0.0,
        };
    }
    TreeCpu {
        user_s: total * user / parts,
        system_s: total * system / parts,
    }
}

/// A cgroup made for one server; removed when dropped.
///
/// The runner makes one per server under its own cgroup in that hierarchy (from
/// `/proc/self/cgroup`, which is what a delegated subtree allows), puts the server into it
/// before it execs (so the server never runs outside it, and everything it forks or spawns
/// inherits it), reads the counters around the measured window, and after the server stopped
/// kills whatever is left in it (pieces that left its process group) and removes it.
#[derive(Debug)]
pub struct ServerCgroup {
    dir: PathBuf,
    method: CpuMethod,
    /// The run's record of it, so that a guard or the next run removes it if this run dies.
    _recorded: Option<crate::reclaim::Entry>,
}

impl ServerCgroup {
    /// Makes a cgroup by the first method that works (or only the `forced` one); `None` when
    /// no cgroup can be made here (the caller then measures with `proc+children`).
    pub fn create(forced: Option<CpuMethod>) -> Option<ServerCgroup> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let mounts = parse_mountinfo(&mountinfo);
        let candidates = [CpuMethod::CgroupV1Cpuacct, CpuMethod::CgroupV2];
        candidates
            .into_iter()
            .filter(|m| forced.is_none_or(|f| f == *m))
            .find_map(|method| {
                let (mount, own_path) = match method {
                    CpuMethod::CgroupV1Cpuacct => (
                        v1_mount(&mounts, "cpuacct")?,
                        own_cgroup_path(&own, Some("cpuacct"))?,
                    ),
                    CpuMethod::CgroupV2 => (
                        mounts.iter().find(|m| m.fs_type == "cgroup2")?,
                        own_cgroup_path(&own, None)?,
                    ),
                    CpuMethod::ProcChildren => return None,
                };
                let (dir, recorded) = named_cgroup(mount, &own_path)?;
                let cgroup = ServerCgroup {
                    dir,
                    method,
                    _recorded: recorded,
                };
                // A cgroup whose counters cannot be read is no use (dropping it removes it).
                cgroup.cpu().is_some().then_some(cgroup)
            })
    }

    pub fn method(&self) -> CpuMethod {
        self.method
    }

    /// The file a process writes `0` to, to move itself into this cgroup.
    pub fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// CPU charged to this cgroup so far: every task that ever ran in it, exited ones included.
    pub fn cpu(&self) -> Option<TreeCpu> {
        let read = |name: &str| std::fs::read_to_string(self.dir.join(name)).ok();
        match self.method {
            CpuMethod::CgroupV1Cpuacct => v1_cpu(
                &read("cpuacct.usage")?,
                read("cpuacct.usage_user").as_deref(),
                read("cpuacct.usage_sys").as_deref(),
            ),
            CpuMethod::CgroupV2 => parse_v2_cpu_stat(&read("cpu.stat")?),
            CpuMethod::ProcChildren => None,
        }
    }
}

/// The v1 hierarchy that has `controller` among its mount options.
fn v1_mount<'m>(mounts: &'m [CgroupMount], controller: &str) -> Option<&'m CgroupMount> {
    mounts
        .iter()
        .find(|m| m.fs_type == "cgroup" && m.options.split(',').any(|o| o == controller))
}

/// A new cgroup of this run below the runner's own in `mount`'s hierarchy, recorded so that a
/// guard or the next run removes it if this run dies.
fn named_cgroup(
    mount: &CgroupMount,
    own_path: &str,
) -> Option<(PathBuf, Option<crate::reclaim::Entry>)> {
    let parent = mount
        .mount_point
        .join(path_below_root(own_path, &mount.root)?);
    crate::reclaim::reclaim_named_cgroups(&parent).say("a dead run left");
    let run = crate::reclaim::current();
    let (token, n) = crate::reclaim::next_name(run);
    let dir = parent.join(format!("{}{token}-{n}", crate::reclaim::PREFIX));
    let recorded = run.map(|r| r.record(crate::reclaim::Kind::Cgroup, &dir.display().to_string()));
    std::fs::create_dir(&dir).ok()?;
    Some((dir, recorded))
}

/// The CFS period a quota is given in, µs (the kernel's default).
pub const QUOTA_PERIOD_US: u64 = 100_000;

/// A budget for a server, as a container's `--cpus` or `--memory`: a cgroup in the v1 `cpu`
/// hierarchy whose CFS bandwidth lets its tasks run `cpus` x the period in each 100 ms period
/// ([`BudgetCgroup::cpu_quota`]), or in the v1 `memory` hierarchy with a limit on what its
/// tasks may hold ([`BudgetCgroup::memory_limit`]). The server joins it before it execs.
/// Removed (its tasks killed) when dropped, like [`ServerCgroup`].
#[derive(Debug)]
pub struct BudgetCgroup {
    dir: PathBuf,
    _recorded: Option<crate::reclaim::Entry>,
}

/// The throttling counters of a quota's cgroup (`cpu.stat`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Throttling {
    pub periods: u64,
    pub throttled_periods: u64,
    pub throttled_s: f64,
}

impl Throttling {
    /// The counters of v1's `cpu.stat` (`nr_periods`, `nr_throttled`, `throttled_time` ns).
    pub fn parse(text: &str) -> Option<Throttling> {
        Some(Throttling {
            periods: stat_field(text, "nr_periods")?,
            throttled_periods: stat_field(text, "nr_throttled")?,
            throttled_s: stat_field(text, "throttled_time")? as f64 / 1e9,
        })
    }

    /// The counters between `before` and now.
    pub fn since(&self, before: &Throttling) -> Throttling {
        Throttling {
            periods: self.periods.saturating_sub(before.periods),
            throttled_periods: self
                .throttled_periods
                .saturating_sub(before.throttled_periods),
            throttled_s: (self.throttled_s - before.throttled_s).max(0.0),
        }
    }
}

/// `Sum` for a struct of counters: field by field, as replicas' cgroups add up.
macro_rules! sum_by_field {
    ($t:ident { $($f:ident),+ }) => {
        impl std::iter::Sum for $t {
            fn sum<I: Iterator<Item = $t>>(iter: I) -> $t {
                iter.fold($t::default(), |a, b| $t { $($f: a.$f + b.$f),+ })
            }
        }
    };
}

sum_by_field!(Throttling {
    periods,
    throttled_periods,
    throttled_s
});

/// What a memory budget's cgroup counted: the most its tasks held, how often they reached
/// the limit (and the kernel reclaimed or failed them), and how many the OOM killer took.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MemoryUse {
    pub peak_bytes: u64,
    pub limit_hits: u64,
    pub oom_kills: u64,
}

sum_by_field!(MemoryUse {
    peak_bytes,
    limit_hits,
    oom_kills
});

/// `name value` in a cgroup's key-value file.
fn stat_field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (key, value) = l.split_once(' ')?;
        (key == name).then(|| value.trim().parse().ok())?
    })
}

impl BudgetCgroup {
    /// A cgroup in the v1 hierarchy of `controller` with each of `limits` (file, value)
    /// written; an error, naming `what` was asked, that says why where it cannot be made.
    fn create(
        controller: &str,
        what: &str,
        limits: &[(&str, String)],
    ) -> anyhow::Result<BudgetCgroup> {
        let no = |why: &str| {
            anyhow::anyhow!("{what}: needs a writable cgroup v1 {controller} controller ({why})")
        };
        let read = |path: &str| std::fs::read_to_string(path).map_err(|e| no(&e.to_string()));
        let (mountinfo, own) = (read("/proc/self/mountinfo")?, read("/proc/self/cgroup")?);
        let mounts = parse_mountinfo(&mountinfo);
        let mount = v1_mount(&mounts, controller).ok_or_else(|| no("none is mounted"))?;
        let own_path =
            own_cgroup_path(&own, Some(controller)).ok_or_else(|| no("this process is in none"))?;
        let (dir, recorded) =
            named_cgroup(mount, &own_path).ok_or_else(|| no("cannot make one: run as root"))?;
        let cgroup = BudgetCgroup {
            dir,
            _recorded: recorded,
        };
        for (file, value) in limits {
            std::fs::write(cgroup.dir.join(file), value)
                .map_err(|e| no(&format!("{file}: {e}")))?;
        }
        Ok(cgroup)
    }

    /// `cores` of CPU (`cpus = 0.5`): a CFS quota over 100 ms periods.
    pub fn cpu_quota(cores: f64) -> anyhow::Result<BudgetCgroup> {
        let quota = ((cores * QUOTA_PERIOD_US as f64).round() as u64).max(1000);
        Self::create(
            "cpu",
            &format!("cpus = {cores}"),
            &[
                ("cpu.cfs_period_us", QUOTA_PERIOD_US.to_string()),
                ("cpu.cfs_quota_us", quota.to_string()),
            ],
        )
    }

    /// The CPUs `cpus` only (`cpuset = "0"`), on the memory nodes of the runner's own set.
    pub fn cpuset(cpus: &[usize]) -> anyhow::Result<BudgetCgroup> {
        let list = crate::render::numbers::cpu_list_text(cpus);
        let mems = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines().find_map(|l| {
                    l.strip_prefix("Mems_allowed_list:")
                        .map(|v| v.trim().to_string())
                })
            })
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| "0".into());
        Self::create(
            "cpuset",
            &format!("cpuset = {list:?}"),
            &[("cpuset.cpus", list.clone()), ("cpuset.mems", mems)],
        )
    }

    /// `bytes` of memory (`memory = "64M"`), swap included where the kernel counts it.
    pub fn memory_limit(bytes: u64) -> anyhow::Result<BudgetCgroup> {
        let cgroup = Self::create(
            "memory",
            &format!("memory = {bytes} bytes"),
            &[("memory.limit_in_bytes", bytes.to_string())],
        )?;
        // Without swap accounting the file is absent: the limit above is the whole budget.
        let _ = std::fs::write(
            cgroup.dir.join("memory.memsw.limit_in_bytes"),
            bytes.to_string(),
        );
        Ok(cgroup)
    }

    /// The file a process writes `0` to, to move itself into this cgroup.
    pub fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    fn read(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.dir.join(name)).ok()
    }

    /// A CPU quota's throttling so far.
    pub fn throttling(&self) -> Option<Throttling> {
        Throttling::parse(&self.read("cpu.stat")?)
    }

    /// A memory budget's use so far.
    pub fn memory(&self) -> Option<MemoryUse> {
        let number = |name: &str| self.read(name)?.trim().parse::<u64>().ok();
        Some(MemoryUse {
            peak_bytes: number("memory.max_usage_in_bytes")?,
            limit_hits: number("memory.failcnt")?,
            oom_kills: self
                .read("memory.oom_control")
                .and_then(|t| stat_field(&t, "oom_kill"))
                .unwrap_or(0),
        })
    }
}

impl Drop for BudgetCgroup {
    fn drop(&mut self) {
        crate::reclaim::kill_cgroup_tree(&self.dir);
        crate::reclaim::remove_cgroup_tree(&self.dir);
    }
}

impl ServerCgroup {
    /// The processes in the cgroup now, those in cgroups the server made inside it included.
    pub fn pids(&self) -> Vec<i32> {
        super::probe::cgroup_tree_pids(&self.dir)
    }
}

/// Sends `signal` to each of `pids` and reaps those that are the runner's to reap.
pub fn signal_all(pids: &[i32], signal: nix::sys::signal::Signal) {
    use nix::sys::wait::{waitpid, WaitPidFlag};
    use nix::unistd::Pid;
    for &pid in pids {
        let pid = Pid::from_raw(pid);
        let _ = nix::sys::signal::kill(pid, signal);
        let _ = waitpid(pid, Some(WaitPidFlag::WNOHANG));
    }
}

impl Drop for ServerCgroup {
    /// Kills whatever is still in the cgroup once the server was stopped (pieces of it that
    /// left its process group, `setsid` or a daemonizing command, but are still its own), then
    /// removes it and any cgroup the server made inside it.
    fn drop(&mut self) {
        crate::reclaim::kill_cgroup_tree(&self.dir);
        if !crate::reclaim::remove_cgroup_tree(&self.dir) {
            eprintln!(
                "sweep: could not remove cgroup {} (still in use)",
                self.dir.display()
            );
        }
    }
}

/// Reads a server's CPU by the method its point uses.
#[derive(Debug, Clone, Copy)]
pub enum CpuMeter<'a> {
    Cgroup(&'a ServerCgroup),
    /// `proc+children`: the process group's consistent /proc snapshot plus the runner's own
    /// reaped children (orphans of the server that the runner, a subreaper, reaped). The second
    /// part counts any child of the runner, so it is exact only while the server is the runner's
    /// only child process (true in a sweep, which runs one server at a time).
    ProcChildren {
        pgrp: i32,
    },
}

impl CpuMeter<'_> {
    pub fn method(&self) -> CpuMethod {
        match self {
            CpuMeter::Cgroup(cgroup) => cgroup.method(),
            CpuMeter::ProcChildren { .. } => CpuMethod::ProcChildren,
        }
    }

    /// CPU so far; differences of two readings give a window's usage.
    pub fn read(&self) -> TreeCpu {
        match self {
            CpuMeter::Cgroup(cgroup) => cgroup.cpu().unwrap_or_default(),
            CpuMeter::ProcChildren { pgrp } => {
                super::probe::group_cpu_consistent(*pgrp) + super::probe::reaped_children_cpu()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
25 30 0:22 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
33 25 0:29 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw,nsdelegate
35 25 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:15 - cgroup cgroup rw,cpu,cpuacct
36 25 0:32 / /sys/fs/cgroup/my\\040dir rw - cgroup cgroup rw,memory
";

    #[test]
    fn mountinfo_yields_cgroup_mounts_only() {
        let mounts = parse_mountinfo(MOUNTINFO);
        assert_eq!(mounts.len(), 3);
        assert_eq!(
            mounts[0].mount_point,
            PathBuf::from("/sys/fs/cgroup/unified")
        );
        assert_eq!(mounts[0].fs_type, "cgroup2");
        assert_eq!(
            mounts[1].mount_point,
            PathBuf::from("/sys/fs/cgroup/cpu,cpuacct")
        );
        assert_eq!(mounts[1].options, "rw,cpu,cpuacct");
        assert_eq!(mounts[1].root, "/");
        assert_eq!(
            mounts[2].mount_point,
            PathBuf::from("/sys/fs/cgroup/my dir")
        );
    }

    #[test]
    fn a_container_mount_of_a_subtree_is_joined_below_its_root() {
        assert_eq!(path_below_root("/", "/"), Some(PathBuf::from("")));
        assert_eq!(
            path_below_root("/user.slice/x", "/"),
            Some(PathBuf::from("user.slice/x"))
        );
        assert_eq!(
            path_below_root("/docker/abc", "/docker/abc"),
            Some(PathBuf::from(""))
        );
        assert_eq!(
            path_below_root("/docker/abc/sub", "/docker/abc"),
            Some(PathBuf::from("sub"))
        );
        assert_eq!(path_below_root("/docker/abcd", "/docker/abc"), None);
        assert_eq!(path_below_root("/other", "/docker"), None);
    }

    #[test]
    fn own_cgroup_path_by_controller() {
        let text = "12:cpu,cpuacct:/user.slice\n4:memory:/m\n0::/user.slice/session-1.scope\n";
        assert_eq!(
            own_cgroup_path(text, Some("cpuacct")).as_deref(),
            Some("/user.slice")
        );
        assert_eq!(own_cgroup_path(text, Some("memory")).as_deref(), Some("/m"));
        assert_eq!(
            own_cgroup_path(text, None).as_deref(),
            Some("/user.slice/session-1.scope")
        );
        assert_eq!(own_cgroup_path(text, Some("pids")), None);
    }

    #[test]
    fn counters_parse_and_split_the_exact_total() {
        let cpu = parse_v2_cpu_stat(
            "usage_usec 3000000\nuser_usec 1000000\nsystem_usec 1000000\nnice_usec 0\n",
        )
        .unwrap();
        assert_eq!((cpu.user_s, cpu.system_s), (1.5, 1.5));
        assert!(parse_v2_cpu_stat("nr_periods 0\n").is_none());
        let cpu = v1_cpu("2000000000\n", Some("300000000\n"), Some("100000000\n")).unwrap();
        assert!((cpu.user_s - 1.5).abs() < 1e-12 && (cpu.system_s - 0.5).abs() < 1e-12);
        let cpu = v1_cpu("1000000000", None, None).unwrap();
        assert_eq!(cpu.total_s(), 1.0);
    }

    #[test]
    fn method_names_round_trip() {
        for m in [
            CpuMethod::CgroupV1Cpuacct,
            CpuMethod::CgroupV2,
            CpuMethod::ProcChildren,
        ] {
            assert_eq!(CpuMethod::from_name(m.name()), Some(m));
            assert_eq!(
                serde_json::to_string(&m).unwrap(),
                format!("\"{}\"", m.name())
            );
        }
        assert_eq!(CpuMethod::from_name("cgroup"), None);
    }
}
