//! A server's CPU budget, as a container gives one: a CFS quota in cores (`--cpus 0.5`, a
//! container's `--cpus`) and a set of CPUs it may run on (`--cpuset 0`, a container's
//! `--cpuset-cpus`). The flags are declared once here for `sweep`, `map`, `advise` and `tune`;
//! their checks are pure functions. The lab puts the server, with every process it starts, in
//! a cgroup of the budget ([`super::cgroup::BudgetCgroup`]); the load generator stays outside.

use serde::{Deserialize, Serialize};

use super::results::PointResult;
use crate::usage;

/// Copies of a server a point may run side by side (`replicas`, `--replicas`).
pub const MAX_REPLICAS: u32 = 64;

/// The least and the most cores a quota may give.
pub const MIN_CPUS: f64 = 0.01;
pub const MAX_CPUS: f64 = 1024.0;

/// `--cpus` and `--cpuset`, as every measuring command takes them.
#[derive(Debug, Clone, Default, PartialEq, clap::Args, Serialize, Deserialize)]
pub struct BudgetFlags {
    /// A CPU quota for the server, in cores (fractional: 0.5 is half a core), as a container's
    /// --cpus: a CFS quota of Q x 100 ms in every 100 ms period, on the server and every
    /// process it starts; the load generator stays outside it. Each point records its throttled
    /// periods. Needs root (a writable cgroup v1 cpu controller).
    #[arg(long, value_name = "Q")]
    #[serde(default)]
    pub cpus: Option<f64>,
    /// The CPUs the server may run on, as a container's --cpuset-cpus: `0`, `0-1`, `0,2-3`.
    /// Needs root (a writable cgroup v1 cpuset controller).
    #[arg(long, value_name = "LIST")]
    #[serde(default)]
    pub cpuset: Option<String>,
}

impl BudgetFlags {
    /// The flags, checked: the quota in range, the set's CPUs on this machine.
    pub fn checked(&self) -> anyhow::Result<(Option<f64>, Option<Vec<usize>>)> {
        let cpus = self
            .cpus
            .map(|q| check_cpus(q).map_err(|e| usage(format!("--cpus {e}"))))
            .transpose()?;
        Ok((cpus, self.cpu_list()?.map(|l| l.0)))
    }

    /// `--cpuset`, checked against this machine's CPUs.
    pub fn cpu_list(&self) -> anyhow::Result<Option<CpuList>> {
        self.cpuset
            .as_deref()
            .map(|list| {
                parse_cpuset(list, &crate::sys::usable_cpus())
                    .map(CpuList)
                    .map_err(|e| usage(format!("--cpuset {list:?}: {e}")))
            })
            .transpose()
    }

    /// The flags, checked, in place of a file's `cpus` and `cpuset` where given.
    pub fn apply(&self, cpus: &mut Vec<f64>, cpuset: &mut Option<CpuList>) -> anyhow::Result<()> {
        let (quota, set) = self.checked()?;
        if let Some(q) = quota {
            *cpus = vec![q];
        }
        if let Some(set) = set {
            *cpuset = Some(CpuList(set));
        }
        Ok(())
    }
}

/// A set of CPUs, as a file or a results record writes it (`"0-1,3"`) and the lab uses it
/// (the CPUs, in order): read once, where its file is read. Reading checks only its form, so
/// that a record from another machine reads here; a spec's check holds it to this machine's
/// CPUs ([`check_keys`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

impl CpuList {
    /// The CPUs, in order.
    pub fn cpus(&self) -> &[usize] {
        &self.0
    }
}

impl std::fmt::Display for CpuList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::render::numbers::cpu_list_text(&self.0))
    }
}

impl Serialize for CpuList {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for CpuList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<CpuList, D::Error> {
        let text = String::deserialize(d)?;
        cpu_list(&text)
            .map(CpuList)
            .map_err(|e| serde::de::Error::custom(format!("{text:?}: {e}")))
    }
}

/// A file's `cpus` (one quota or an axis) and `cpuset`, checked (the set's CPUs on this
/// machine).
pub fn check_keys(cpus: &[f64], cpuset: Option<&CpuList>) -> Result<(), String> {
    check_cpus_axis("cpus", cpus)?;
    let usable = crate::sys::usable_cpus();
    if let Some(cpu) = cpuset.and_then(|l| l.0.iter().find(|c| !usable.contains(c))) {
        return Err(format!(
            "cpuset = \"{}\": no CPU {cpu} here (CPUs {})",
            cpuset.map(ToString::to_string).unwrap_or_default(),
            crate::render::numbers::cpu_list_text(&usable)
        ));
    }
    Ok(())
}

/// A quota in cores, from [`MIN_CPUS`] to [`MAX_CPUS`].
pub fn check_cpus(cpus: f64) -> Result<f64, String> {
    if (MIN_CPUS..=MAX_CPUS).contains(&cpus) {
        Ok(cpus)
    } else {
        Err(format!("{cpus}: from {MIN_CPUS} to {MAX_CPUS:.0} cores"))
    }
}

/// A CPU list as the kernel writes one (`0`, `0-1`, `0,2-3`), each CPU among `usable` (the
/// CPUs this process may run on), in order and without repeats.
pub fn parse_cpuset(text: &str, usable: &[usize]) -> Result<Vec<usize>, String> {
    let cpus = cpu_list(text)?;
    if let Some(cpu) = cpus.iter().find(|c| !usable.contains(c)) {
        return Err(format!(
            "no CPU {cpu} here (CPUs {})",
            crate::render::numbers::cpu_list_text(usable)
        ));
    }
    Ok(cpus)
}

/// The CPUs of a list as the kernel writes one, in order and without repeats, whatever the
/// machine: a list checked when it was given, or one a results file recorded.
pub fn cpu_list(text: &str) -> Result<Vec<usize>, String> {
    let mut cpus = std::collections::BTreeSet::new();
    for part in text.split(',').map(str::trim) {
        let number = |s: &str| {
            s.trim()
                .parse::<usize>()
                .map_err(|_| format!("{part:?} is not a CPU or a range of CPUs (as in 0-1,3)"))
        };
        let (low, high) = match part.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => (number(part)?, number(part)?),
        };
        if low > high {
            return Err(format!("{part:?}: the range runs backwards"));
        }
        cpus.extend(low..=high);
    }
    Ok(cpus.into_iter().collect())
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(f64),
    Many(Vec<f64>),
}

/// `cpus = 0.5` or `cpus = [0.5, 1, 2]` (an axis: every server once per quota).
pub fn de_cpus<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    match OneOrMany::deserialize(d)
        .map_err(|_| serde::de::Error::custom("cpus: a number of cores or a list of them"))?
    {
        OneOrMany::One(q) => Ok(vec![q]),
        OneOrMany::Many(list) => Ok(list),
    }
}

/// Cores in words: `1 core`, `0.5 cores`, `2 cores`.
pub fn cores_words(cores: f64) -> String {
    let n = cpus_text(cores);
    if n == "1" {
        "1 core".into()
    } else {
        format!("{n} cores")
    }
}

/// An axis of quotas, checked: each in range, none twice, at least one.
pub fn check_cpus_axis(key: &str, list: &[f64]) -> Result<(), String> {
    for (i, &q) in list.iter().enumerate() {
        check_cpus(q).map_err(|e| format!("{key} = {e}"))?;
        if list[..i].contains(&q) {
            return Err(format!("{key}: {} is listed twice", cpus_text(q)));
        }
    }
    Ok(())
}

/// The name of a series under one quota of an axis: `threaded@0.5cpu`.
pub fn series_name(name: &str, cpus: f64) -> String {
    format!("{name}@{}cpu", cpus_text(cpus))
}

/// A run's CPU budget as it applied, declared once for `advise` and `tune` (flattened into
/// their results, so the JSON keys stay where they were): `--cpus` and `--cpuset` as given,
/// the cores of CPU the servers could use (the quota within the set, else the machine's),
/// which Goetz's pool and the bound count, and the whole cores 2n+1 and the default pools
/// sized themselves for.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct BudgetApplied {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpuset: Option<CpuList>,
    #[serde(default)]
    pub cores: f64,
    #[serde(default)]
    pub whole_cores: u32,
}

impl BudgetApplied {
    /// Whether `--cpus` or `--cpuset` was given.
    pub fn given(&self) -> bool {
        self.cpus.is_some() || self.cpuset.is_some()
    }
}

/// The cores a server may use under a budget: the quota where there is one, never more than
/// its CPUs (the set, else `machine_cores`).
pub fn budget_cores(cpus: Option<f64>, cpuset: Option<&[usize]>, machine_cores: u32) -> f64 {
    let cores = cpuset.map_or(f64::from(machine_cores), |s| s.len() as f64);
    cpus.map_or(cores, |q| q.min(cores))
}

/// The whole cores a runtime that honours its budget sizes itself for (as Rust's standard
/// library does for our server, and Go 1.25 does): the quota rounded down, at least 1, never
/// more than its CPUs.
pub fn whole_cores(cpus: Option<f64>, cpuset: Option<&[usize]>, machine_cores: u32) -> u32 {
    let set = cpuset.map_or(machine_cores, |s| s.len() as u32).max(1);
    cpus.map_or(set, |q| (q.floor() as u32).clamp(1, set))
}

/// A quota's value in a name or a sentence: `0.5`, `1`, `2`.
pub fn cpus_text(cpus: f64) -> String {
    let text = format!("{cpus:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The share of a quota's periods throttled from which a server that sees more CPUs than its
/// quota is said to have sized itself for them (twice the quota limit's
/// [`super::limit::THROTTLED_PERIODS`]: a server that runs out now and then is not yet one).
pub const OVERSIZED_THROTTLED: f64 = 0.2;

/// The throttled time, summed over the CPUs, as a share of the window, from which a server
/// is said to have sized itself for more: a quarter of a CPU stood still on average. A
/// single-process runtime's helper threads (Node's, the JVM's collector) overrun a quota of
/// one core now and then, for a few ms a period (0.04 of the window here); a pool of two
/// busy processes under it stands still half of each period on both CPUs (1.0).
pub const OVERSIZED_THROTTLED_CPUS: f64 = 0.25;

/// Under a quota under one core, the mean running or runnable tasks from which the server ran
/// more than one thing at once (one thread alone is throttled by such a quota too).
pub const OVERSIZED_RUNNING: f64 = 1.5;

/// A server that sized itself for more CPUs than its quota lets it use: it sees `cpus_seen`
/// (its affinity), ran more than `quota` at once, and was throttled; beside it, the best
/// point of the same workload, connections and quota that was not (a right-sized run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Oversized {
    pub series: String,
    pub workload: String,
    pub concurrency: u32,
    pub cpus_seen: u32,
    pub quota: f64,
    /// Of the periods in the window, those in which the quota ran out.
    pub throttled_share: f64,
    /// Throttled time (summed over the CPUs its tasks waited on) per answered request, ms.
    pub throttled_ms_per_request: f64,
    pub rps: f64,
    pub p99_us: f64,
    /// Its load did not reach the server as intended (`~`): its p99 leaves waits out and is
    /// not the quota's cost.
    #[serde(default)]
    pub starved: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub right_sized: Option<RightSized>,
}

/// The run an [`Oversized`] one is set against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RightSized {
    pub series: String,
    pub rps: f64,
    pub p99_us: f64,
    pub throttled_share: f64,
}

fn throttled_share(p: &PointResult) -> f64 {
    let s = &p.figures.server;
    if s.quota_periods == 0 {
        0.0
    } else {
        s.throttled_periods as f64 / s.quota_periods as f64
    }
}

/// Whether a point's server saw more CPUs than its quota and ran more than the quota at once,
/// throttled in at least [`OVERSIZED_THROTTLED`] of the periods and for at least
/// [`OVERSIZED_THROTTLED_CPUS`] of the window. Over one core, throttling
/// alone shows it (one thread cannot use more than a core); under one, the tasks running at
/// once must show it too ([`OVERSIZED_RUNNING`]).
pub fn is_oversized(p: &PointResult) -> bool {
    let s = &p.figures.server;
    let window = if s.window_s > 0.0 {
        s.window_s
    } else {
        p.figures.duration_s
    };
    p.ok && s.quota_cores > 0.0
        && window > 0.0
        && f64::from(s.cores_allowed) > s.quota_cores
        && throttled_share(p) >= OVERSIZED_THROTTLED
        && s.throttled_s / window / f64::from(s.replicas.max(1)) >= OVERSIZED_THROTTLED_CPUS
        && (s.quota_cores >= 1.0 || s.tasks_running >= OVERSIZED_RUNNING)
}

/// Every oversized point of `points`, each beside the best right-sized point of the same
/// workload, connections and quota (of the same server at another pool where there is one):
/// the most throughput, then the lower p99 (`label` names a point's series).
pub fn oversized(
    points: &[&PointResult],
    label: impl Fn(&PointResult) -> String,
) -> Vec<Oversized> {
    points
        .iter()
        .filter(|p| is_oversized(p))
        .map(|p| {
            let right: Vec<&&PointResult> = points
                .iter()
                .filter(|q| {
                    q.ok && q.figures.rps > 0.0
                        && q.workload == p.workload
                        && q.concurrency == p.concurrency
                        && q.figures.server.quota_cores == p.figures.server.quota_cores
                        && !is_oversized(q)
                })
                .collect();
            // The same server at another pool where there is one, else any.
            let same: Vec<&&PointResult> =
                right.iter().copied().filter(|q| q.arch == p.arch).collect();
            let right_sized = if same.is_empty() { right } else { same }
                .into_iter()
                .max_by(|a, b| {
                    a.figures.rps.total_cmp(&b.figures.rps).then(
                        b.figures
                            .latency_us
                            .p99
                            .total_cmp(&a.figures.latency_us.p99),
                    )
                })
                .map(|q| RightSized {
                    series: label(q),
                    rps: q.figures.rps,
                    p99_us: q.figures.latency_us.p99,
                    throttled_share: throttled_share(q),
                });
            let answered = p.figures.server.answered_at_least(p.figures.requests);
            Oversized {
                series: label(p),
                workload: p.workload.clone(),
                concurrency: p.concurrency,
                cpus_seen: p.figures.server.cores_allowed,
                quota: p.figures.server.quota_cores,
                throttled_share: throttled_share(p),
                throttled_ms_per_request: p.figures.server.throttled_s * 1e3 / answered as f64,
                rps: p.figures.rps,
                p99_us: p.figures.latency_us.p99,
                starved: p.starved,
                right_sized,
            }
        })
        .collect()
}

/// One line a series: its worst point (the highest p99 against its right-sized run's, a
/// starved point's last), and how many more of its points were oversized.
pub fn oversized_lines(all: &[Oversized]) -> Vec<String> {
    let mut series: Vec<&str> = Vec::new();
    for o in all {
        if !series.contains(&o.series.as_str()) {
            series.push(&o.series);
        }
    }
    let cost = |o: &Oversized| {
        let ratio = o
            .right_sized
            .as_ref()
            .map_or(1.0, |r| o.p99_us / r.p99_us.max(1.0));
        if o.starved {
            -1.0 / ratio
        } else {
            ratio
        }
    };
    series
        .into_iter()
        .map(|name| {
            let of: Vec<&Oversized> = all.iter().filter(|o| o.series == name).collect();
            let worst = of
                .iter()
                .max_by(|a, b| cost(a).total_cmp(&cost(b)))
                .expect("a series has a point");
            match of.len() - 1 {
                0 => worst.sentence(),
                1 => format!("{} (and 1 more of its points)", worst.sentence()),
                n => format!("{} (and {n} more of its points)", worst.sentence()),
            }
        })
        .collect()
}

impl Oversized {
    /// In words: `node-auto sees 2 CPUs under a quota of 1 core and ran more than 1 at once:
    /// throttled in 84% of periods, 0.31 ms a request; 4,120 req/s, p99 38 ms, against
    /// node-1's 4,980 req/s, p99 2.1 ms (right-sized: throttled in 0%).`
    pub fn sentence(&self) -> String {
        let q = cpus_text(self.quota);
        let mut text = format!(
            "{} ({}, {} connections) sees {} CPUs under a quota of {} and ran more than \
             {q} at once: throttled in {:.0}% of periods, {:.2} ms a request; {} req/s, p99 {}",
            self.series,
            self.workload,
            self.concurrency,
            self.cpus_seen,
            cores_words(self.quota),
            self.throttled_share * 100.0,
            self.throttled_ms_per_request,
            crate::render::numbers::thousands(self.rps),
            crate::render::numbers::duration_us(self.p99_us),
        );
        match &self.right_sized {
            Some(r) => text.push_str(&format!(
                ", against {}'s {} req/s, p99 {} (right-sized: throttled in {:.0}% of periods)",
                r.series,
                crate::render::numbers::thousands(r.rps),
                crate::render::numbers::duration_us(r.p99_us),
                r.throttled_share * 100.0
            )),
            None => text.push_str(" (no right-sized run of the same case to set it against)"),
        }
        if self.starved {
            text.push_str(
                "; its load did not reach it as intended (~): its p99 leaves waits out and is \
                 not the quota's cost alone",
            );
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::results::RunFigures;

    #[test]
    fn a_cpu_list_is_read_as_the_kernel_writes_it() {
        let here = [0, 1, 2, 3];
        assert_eq!(parse_cpuset("0", &here), Ok(vec![0]));
        assert_eq!(parse_cpuset("0-1", &here), Ok(vec![0, 1]));
        assert_eq!(parse_cpuset("3,0-1,1", &here), Ok(vec![0, 1, 3]));
        assert_eq!(
            parse_cpuset("4", &here).unwrap_err(),
            "no CPU 4 here (CPUs 0-3)"
        );
        assert!(parse_cpuset("1-0", &here)
            .unwrap_err()
            .contains("backwards"));
        assert!(parse_cpuset("", &here).unwrap_err().contains("not a CPU"));
        assert!(parse_cpuset("a", &here).unwrap_err().contains("not a CPU"));
    }

    /// A point under a quota of `quota` cores on `seen` CPUs, throttled in `share` of 20
    /// periods for `throttled_s` of a 2 s window.
    fn point(arch: &str, quota: f64, seen: u32, share: f64, throttled_s: f64) -> PointResult {
        let mut p = PointResult {
            arch: arch.into(),
            workload: "cpu".into(),
            concurrency: 8,
            ok: true,
            figures: RunFigures {
                rps: 500.0,
                requests: 1000,
                duration_s: 2.0,
                ..Default::default()
            },
            ..PointResult::default()
        };
        p.figures.latency_us.p99 = 30_000.0 * (1.0 + share);
        let s = &mut p.figures.server;
        (s.quota_cores, s.cores_allowed, s.window_s) = (quota, seen, 2.0);
        (s.quota_periods, s.throttled_periods) = (20, (share * 20.0) as u64);
        (s.throttled_s, s.tasks_running, s.answered) = (throttled_s, 1.8, 1000);
        p
    }

    #[test]
    fn a_server_that_ran_more_than_its_quota_at_once_is_oversized() {
        // Two busy processes under a quota of 1: throttled in every period, a CPU's worth of
        // the window standing still.
        let two = point("py-cpus", 1.0, 2, 1.0, 2.0);
        // One process whose helper threads overran now and then: 70% of periods, 0.08 s.
        let one = point("py-1", 1.0, 2, 0.7, 0.08);
        // One CPU seen: nothing to size for beyond it.
        let pinned = point("pinned", 1.0, 1, 1.0, 2.0);
        assert!(is_oversized(&two));
        assert!(!is_oversized(&one));
        assert!(!is_oversized(&pinned));
        // Under half a core one thread alone is throttled too: only tasks at once show more.
        let mut alone = point("alone", 0.5, 2, 1.0, 1.0);
        alone.figures.server.tasks_running = 1.0;
        assert!(!is_oversized(&alone));
        alone.figures.server.tasks_running = 2.0;
        assert!(is_oversized(&alone));
        let found = oversized(&[&two, &one, &pinned], |p| p.arch.clone());
        assert_eq!(found.len(), 1);
        let o = &found[0];
        assert_eq!(
            (o.series.as_str(), o.cpus_seen, o.quota),
            ("py-cpus", 2, 1.0)
        );
        assert_eq!(o.throttled_ms_per_request, 2.0);
        // The right-sized run is the best not oversized of the same case (pinned is not).
        let r = o.right_sized.as_ref().unwrap();
        assert_eq!((r.series.as_str(), r.throttled_share), ("py-1", 0.7));
        assert_eq!(
            o.sentence(),
            "py-cpus (cpu, 8 connections) sees 2 CPUs under a quota of 1 core and ran more \
             than 1 at once: throttled in 100% of periods, 2.00 ms a request; 500 req/s, p99 \
             60.0 ms, against py-1's 500 req/s, p99 51.0 ms (right-sized: throttled in 70% of \
             periods)"
        );
        // One line a series, its worst point first.
        let mut again = o.clone();
        (again.concurrency, again.p99_us) = (64, 52_000.0);
        assert_eq!(
            oversized_lines(&[o.clone(), again.clone()]),
            [format!("{} (and 1 more of its points)", o.sentence())]
        );
        // A starved point's p99 is not the quota's cost: the other speaks for the series.
        let mut starved = o.clone();
        (starved.starved, starved.p99_us) = (true, 600_000.0);
        assert_eq!(
            oversized_lines(&[starved, again.clone()]),
            [format!("{} (and 1 more of its points)", again.sentence())]
        );
        // The same server at a smaller pool is its right-sized run before any other.
        let (mut big, mut small) = (two.clone(), one.clone());
        (big.arch, big.workers, small.arch, small.workers) =
            ("py".into(), Some(2), "py".into(), Some(1));
        small.figures.rps = 400.0;
        let found = oversized(&[&big, &small, &one], |p| {
            format!("{}/{:?}", p.arch, p.workers)
        });
        assert_eq!(found[0].right_sized.as_ref().unwrap().series, "py/Some(1)");
        // Replicas: the throttled time is each copy's share.
        let mut two_copies = point("copies", 1.0, 2, 1.0, 0.8);
        two_copies.figures.server.replicas = 2;
        assert!(!is_oversized(&two_copies));
    }

    #[test]
    fn the_budget_is_the_quota_within_the_set() {
        assert_eq!(budget_cores(None, None, 2), 2.0);
        assert_eq!(budget_cores(Some(0.5), None, 2), 0.5);
        assert_eq!(budget_cores(Some(4.0), None, 2), 2.0);
        assert_eq!(budget_cores(Some(1.5), Some(&[1]), 2), 1.0);
        assert_eq!(budget_cores(None, Some(&[0, 1]), 2), 2.0);
        assert_eq!(whole_cores(None, None, 2), 2);
        assert_eq!(whole_cores(Some(0.5), None, 2), 1);
        assert_eq!(whole_cores(Some(1.5), None, 2), 1);
        assert_eq!(whole_cores(Some(8.0), None, 2), 2);
        assert_eq!(whole_cores(None, Some(&[1]), 2), 1);
        assert_eq!(check_cpus(0.5), Ok(0.5));
        assert!(check_cpus(0.0).is_err());
        assert!(check_cpus(2000.0).is_err());
        assert_eq!(cpus_text(0.5), "0.5");
        assert_eq!(cpus_text(1.0), "1");
        assert_eq!(cpus_text(0.25), "0.25");
    }
}
