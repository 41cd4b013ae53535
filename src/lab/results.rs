//! What one point measured, as every command records it: a [`PointResult`] (its repetitions
//! folded into a median with a min/max spread), each repetition's [`RunMeasurement`], and the
//! [`Machine`] it ran on. The contract keys of DESIGN.md (`points[].arch/workers/workload/
//! concurrency/rps/latency_us/errors/server/client`) stay at the top of a point's JSON (the
//! run's figures, [`RunFigures`], are flattened there); everything else is extra.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::cgroup::CpuMethod;
use crate::load::LowerBounds;
use crate::load::NetReport;

/// Latency percentiles of a point, microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct PointLatency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    /// Mean of the answered requests (what Little's law relates to throughput); the other
    /// figures include the requests left unanswered at their age.
    pub mean: f64,
    pub max: f64,
    /// The figures above that are only lower bounds (requests sent and never answered).
    #[serde(default, skip_serializing_if = "LowerBounds::is_empty")]
    pub lower_bound: LowerBounds,
}

/// Errors of a point by kind: the load engine's own counts, stored as it writes them.
pub use crate::load::ErrorCounts;

/// What the server's process tree cost during the measured window.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ServerUsage {
    /// User + system CPU seconds of the whole tree.
    pub cpu_s: f64,
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    /// Peak of the summed VmRSS of the tree.
    pub rss_kb: u64,
    pub threads: u64,
    pub processes: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// How `cpu_s` was measured: `cgroup-v1-cpuacct` or `cgroup-v2` (a cgroup made for the
    /// server: exact, exited processes included) or `proc+children` (/proc plus reaped
    /// children, where no cgroup could be made). Absent in results from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_method: Option<CpuMethod>,
    /// True when the server's CPU could not be sampled here: what answers on the target's port
    /// is not the started command's process tree (it runs on another machine, e.g. started by
    /// `ssh HOST ...` or `srun -w NODE ...`, or detached from the command's process group) and
    /// no `cpu_command` reported it. The figures above are then unknown (0 here, "n/a" in
    /// tables), not zero.
    #[serde(default)]
    pub cpu_unavailable: bool,
    /// True when the server's process tree is not here at all (see `cpu_unavailable`): memory,
    /// threads, processes and context switches are unknown (0 here, "n/a" in tables), even
    /// when a `cpu_command` reported the CPU.
    #[serde(default)]
    pub remote: bool,
    /// The wall time `cpu_s` was measured over: from before the load run's connects to after
    /// its drain (longer than the measured `duration_s` when requests were still answered
    /// after the deadline). 0 in results from before it was recorded.
    #[serde(default)]
    pub window_s: f64,
    /// The requests the server answered in that window: the run's responses plus the answers
    /// of its drain. 0 in results from before it was recorded.
    #[serde(default)]
    pub answered: u64,
    /// The server's tasks by state, averaged over the window's samples: running or runnable,
    /// sleeping, blocked in the kernel (0 in results from before they were recorded).
    #[serde(default)]
    pub tasks_running: f64,
    #[serde(default)]
    pub tasks_sleeping: f64,
    #[serde(default)]
    pub tasks_blocked: f64,
    /// Seconds the server's tasks waited on a run queue for a CPU in the window (the
    /// scheduler's `schedstat`; live tasks only).
    #[serde(default)]
    pub runqueue_wait_s: f64,
    /// The process that ran most in the window: its running or runnable threads (mean) and
    /// the CPU seconds it ran.
    #[serde(default)]
    pub busiest_running_threads: f64,
    #[serde(default)]
    pub busiest_cpu_s: f64,
    /// Over how many of its threads that process's CPU was spread (the inverse Simpson index
    /// of their shares: 1 for one thread doing the work, 8 for eight equal turns).
    #[serde(default)]
    pub busiest_threads_sharing: f64,
    /// The CPUs the server may run on (its affinity); 0 when not known.
    #[serde(default)]
    pub cores_allowed: u32,
    /// Cores the whole machine kept busy over the window (`/proc/stat`): the server, the
    /// load generator, the lab and anything else running.
    #[serde(default)]
    pub machine_busy_cores: f64,
    /// Under a CPU quota (`cpus`): the quota in cores, and over the window the CFS periods,
    /// those in which the quota ran out (the server throttled), and the time throttled.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub quota_cores: f64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub quota_periods: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub throttled_periods: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub throttled_s: f64,
    /// Under a memory limit (`memory`): the limit, the most the server's tasks held (from its
    /// start), and over the window how often they reached the limit and how many processes
    /// the OOM killer took.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub memory_limit_bytes: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub memory_peak_bytes: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub memory_limit_hits: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub oom_kills: u64,
    /// Copies of the server run side by side (`replicas`), each on its own port with its own
    /// budget, the connections spread over them in turn; the figures above are their sums
    /// (the quota is each one's; the connections each held are the run's
    /// `replica_connections`).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub replicas: u32,
}

impl ServerUsage {
    /// The CPU quota of all the server's copies together, in cores (0 without a quota).
    pub fn quota_total(&self) -> f64 {
        self.quota_cores * f64::from(self.replicas.max(1))
    }

    /// What a figure per request divides by: the requests answered while it was measured
    /// (`answered`, the drain's included), or the run's `requests` where more (results that
    /// lack `answered`), and at least 1.
    pub fn answered_at_least(&self, requests: u64) -> u64 {
        self.answered.max(requests).max(1)
    }

    /// CPU microseconds per request: the CPU over the requests answered while it was measured
    /// (`answered`; `requests` for results that lack it). Dividing by the measured window's
    /// responses alone would charge the drain's work to them.
    pub fn cpu_us_per_request(&self, requests: u64) -> f64 {
        let answered = if self.answered > 0 {
            self.answered
        } else {
            requests
        };
        if answered > 0 {
            self.cpu_s * 1e6 / answered as f64
        } else {
            0.0
        }
    }

    /// `cpu` seconds as a share of one core over the window they were measured in
    /// (`duration_s` for results that lack it): never more than the cores there are.
    pub fn busy(&self, cpu: f64, duration_s: f64) -> Option<f64> {
        let window = if self.window_s > 0.0 {
            self.window_s
        } else {
            duration_s
        };
        (window > 0.0).then(|| cpu / window)
    }
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

fn is_zero_u64(x: &u64) -> bool {
    *x == 0
}

fn is_zero_u32(x: &u32) -> bool {
    *x == 0
}

/// What the load generator cost.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ClientUsage {
    pub cpu_s: f64,
    pub threads: u32,
    /// Time its threads waited for a CPU (a core shared with other work).
    #[serde(default)]
    pub wait_s: f64,
    /// Rate mode: how late it sent the answered requests after they could go (its own
    /// lateness, in no latency), mean µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_late_us: Option<f64>,
}

/// A run's figures, declared once: what one repetition measured ([`RunMeasurement`]) and
/// what a point reports as the median of its repetitions ([`PointResult`]), which takes the
/// median run's whole. Both flatten it, so the JSON keeps these keys at the top of a point.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RunFigures {
    pub requests: u64,
    pub duration_s: f64,
    pub rps: f64,
    /// Closed loop: throughput in whole cycles, each connection's answers over its own span
    /// (no partial cycle counted at the window's ends): the load report's `cycle_rps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycle_rps: Option<f64>,
    pub latency_us: PointLatency,
    /// Requests still waiting when the run ended (neither answered nor timed out): work the
    /// server was still holding, which the percentiles cannot show.
    #[serde(default)]
    pub unanswered: u64,
    /// Responses by HTTP status (empty for echo).
    pub status: BTreeMap<String, u64>,
    pub server: ServerUsage,
    pub client: ClientUsage,
    /// Across a network path (`net`): what the path and its relay did (lateness, drops, CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<NetReport>,
    /// HTTP/2: the server's stream cap and the requests that waited on the client under it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2: Option<StreamCap>,
    /// HTTPS (`tls`): the handshakes, apart from the requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<HandshakeFigures>,
    /// gRPC (`grpc`): the calls by `grpc-status` code (`"0"` is OK; every other is a failed
    /// call, though its HTTP status was 200).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub grpc_status: BTreeMap<String, u64>,
}

/// An HTTPS run's handshakes: the generator's count and times (in no request's latency), and
/// the server's own CPU per handshake.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct HandshakeFigures {
    /// Handshakes the run's connections completed, and of those the resumed ones.
    pub handshakes: u64,
    pub resumed: u64,
    /// Their times in microseconds, from the TCP connection to the handshake's end.
    pub p50_us: f64,
    pub p99_us: f64,
    /// Their share of the time waited (handshakes and responses).
    pub share: f64,
    /// The server's CPU per handshake (µs), over every handshake of its life (the warm-up's
    /// too), from its stats line; `None` when it printed none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_us: Option<f64>,
}

/// What an HTTP/2 run's connections allowed: the lowest `MAX_CONCURRENT_STREAMS` a server
/// announced, and the requests that waited on the client for a stream under it, with the
/// waits' share of the answered requests' latency.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct StreamCap {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_max_streams: Option<u64>,
    pub waits: u64,
    pub wait_share: f64,
}

/// One measured repetition of a point.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RunMeasurement {
    #[serde(flatten)]
    pub figures: RunFigures,
    pub errors: ErrorCounts,
    /// Rate mode: the rate asked for, and whether it was held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_held: Option<bool>,
    /// Across a network path (`net`): TCP segments retransmitted in the run, by the clients
    /// and on the server's side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmissions: Option<u64>,
    /// With replicas: the connections each held halfway through the window (the kernel's
    /// count of established sockets on each one's port), in replica order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replica_connections: Vec<u32>,
}

/// Min and max over the repetitions of a point.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Spread {
    pub repetitions: u32,
    pub rps_min: f64,
    pub rps_max: f64,
    pub p99_min: f64,
    pub p99_max: f64,
}

/// One grid cell: the median of its repetitions, the spread, and what went wrong if anything.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PointResult {
    /// Our architecture, or the external target's name.
    pub arch: String,
    /// Workers as the server reported them (`None` for external targets).
    pub workers: Option<u32>,
    pub workload: String,
    pub concurrency: u32,
    /// HTTP/2 (h2c) points: streams per connection; `concurrency` is then the requests in
    /// flight, over `concurrency / streams` connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<u32>,
    /// `sweetspot` or `external`.
    pub target: String,
    /// False when the point failed; `failure` says why and the numbers are zero.
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The median run's figures (see [`RunFigures`]).
    #[serde(flatten)]
    pub figures: RunFigures,
    /// Total errors (the contract key); by kind in `errors_by_kind`.
    pub errors: u64,
    pub errors_by_kind: ErrorCounts,
    /// Server CPU per successful request, microseconds.
    pub server_cpu_us_per_request: f64,
    /// True when the generator, not the server, was the bottleneck.
    pub generator_bound: bool,
    /// Little's law: mean requests in flight (throughput x mean latency) over connections
    /// offered; well under 1 means some connections were not being served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight_ratio: Option<f64>,
    /// True when that ratio says some offered connections were not being served, so the
    /// percentiles leave their waits out.
    #[serde(default)]
    pub starved: bool,
    /// Plain-words warnings about this point (Little's law, saturation).
    pub warnings: Vec<String>,
    pub spread: Spread,
    pub runs: Vec<RunMeasurement>,
    /// What limited the point, and the figures that show it (see [`super::limit`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
    /// The point's own bound, requests a second, counting its server's CPU a request and the
    /// load generator's share of the machine ([`super::limit::own_bound_rps`]; 0: not known).
    #[serde(default)]
    pub bound_rps: f64,
}

impl PointResult {
    /// Throughput in whole cycles where the load generator counted them (a window that ends
    /// mid-cycle undercounts responses, not requests in flight), else the window's.
    pub fn whole_cycle_rps(&self) -> f64 {
        self.figures
            .cycle_rps
            .filter(|r| *r > 0.0)
            .unwrap_or(self.figures.rps)
    }

    /// The series this point belongs to in tables and plots: the arch, plus the worker count
    /// when the experiment swept workers for it.
    pub fn series_key(&self) -> (String, Option<u32>) {
        (self.arch.clone(), self.workers)
    }

    /// Non-2xx/3xx responses, which a server returning 500s fast must not be rewarded for,
    /// and gRPC calls that ended with a status other than OK.
    pub fn bad_statuses(&self) -> u64 {
        let http: u64 = self
            .figures
            .status
            .iter()
            .filter(|(code, _)| !(code.starts_with('2') || code.starts_with('3')))
            .map(|(_, n)| n)
            .sum();
        http + self.failed_calls().map(|(_, n)| n).sum::<u64>()
    }

    /// gRPC calls by a status other than OK: (code, count).
    fn failed_calls(&self) -> impl Iterator<Item = (&String, u64)> {
        self.figures
            .grpc_status
            .iter()
            .filter(|(code, _)| code.as_str() != "0")
            .map(|(code, n)| (code, *n))
    }

    /// How the point's requests failed, in one phrase, when over 1% of them did (else `None`):
    /// `every response was 404 (812 of 812)`, `500: 40 of 1,000 responses; 3 connect errors`.
    pub fn failure_cause(&self) -> Option<String> {
        if self.error_rate() <= 0.01 {
            return None;
        }
        let n = |v: u64| crate::render::numbers::thousands(v as f64);
        let responses: u64 = self.figures.status.values().sum();
        let bad: Vec<(&String, &u64)> = self
            .figures
            .status
            .iter()
            .filter(|(code, _)| !(code.starts_with('2') || code.starts_with('3')))
            .collect();
        let mut parts = Vec::new();
        match bad.as_slice() {
            [] => {}
            [(code, &count)] if count == responses => parts.push(format!(
                "every response was {code} ({} of {})",
                n(count),
                n(responses)
            )),
            _ => parts.push(format!(
                "{} of {} responses",
                bad.iter()
                    .map(|(code, &count)| format!("{code}: {}", n(count)))
                    .collect::<Vec<_>>()
                    .join(", "),
                n(responses)
            )),
        }
        let e = &self.errors_by_kind;
        let errors: Vec<String> = [
            (e.connect, "connect error(s)"),
            (e.read, "read error(s)"),
            (e.write, "write error(s)"),
            (e.timeout, "timeout(s)"),
            (e.protocol, "malformed response(s)"),
        ]
        .iter()
        .filter(|(count, _)| *count > 0)
        .map(|(count, what)| format!("{} {what}", n(*count)))
        .collect();
        if !errors.is_empty() {
            parts.push(errors.join(", "));
        }
        let calls: u64 = self.figures.grpc_status.values().sum();
        for (code, count) in self.failed_calls() {
            let name = code
                .parse()
                .map_or("UNKNOWN_CODE", crate::http::grpc::status_name);
            parts.push(format!(
                "gRPC {name} ({code}): {} of {} calls",
                n(count),
                n(calls)
            ));
        }
        if parts.is_empty() {
            parts.push("no request was answered".into());
        }
        Some(parts.join("; "))
    }

    /// Fraction of attempts that were errors or bad statuses.
    pub fn error_rate(&self) -> f64 {
        let bad = (self.errors + self.bad_statuses()) as f64;
        let attempts = self.figures.requests as f64 + self.errors as f64;
        if attempts == 0.0 {
            if self.ok {
                0.0
            } else {
                1.0
            }
        } else {
            bad / attempts
        }
    }
}

/// The machine a sweep ran on.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Machine {
    pub cpu_model: String,
    pub cores: u32,
    pub kernel: String,
    pub memory_kb: u64,
    pub hostname: String,
    /// RLIMIT_NOFILE soft limit during the sweep.
    pub open_files_limit: u64,
    pub pinned: bool,
    /// The load generator's threads' nice value ([`super::GENERATOR_NICE`] where the lab may
    /// set it, as root; 0, the server's, otherwise).
    #[serde(default)]
    pub generator_nice: i32,
    pub notes: Vec<String>,
}

impl Machine {
    /// Reads the machine from /proc, and tries on a thread of its own whether the lab may give
    /// its load generator [`super::GENERATOR_NICE`] (`generator_nice`).
    pub fn detect() -> Machine {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        let cpuinfo = read("/proc/cpuinfo");
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| {
                let (key, value) = l.split_once(':')?;
                (key.trim() == "model name").then(|| value.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        let meminfo = read("/proc/meminfo");
        Machine {
            cpu_model,
            cores,
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            memory_kb: super::probe::status_field(&meminfo, "MemTotal").unwrap_or(0),
            hostname: read("/proc/sys/kernel/hostname").trim().to_string(),
            open_files_limit: nix::sys::resource::getrlimit(
                nix::sys::resource::Resource::RLIMIT_NOFILE,
            )
            .map_or(0, |(soft, _)| soft),
            pinned: false,
            generator_nice: if crate::sys::may_set_thread_nice(super::GENERATOR_NICE) {
                super::GENERATOR_NICE
            } else {
                0
            },
            notes: Vec::new(),
        }
    }
}

/// `results/NAME-YYYYMMDD-HHMMSS` (UTC), for sweeps and maps alike.
pub fn default_out_dir(name: &str) -> std::path::PathBuf {
    let stamp = utc_timestamp()
        .replace(['-', ':'], "")
        .replace('T', "-")
        .trim_end_matches('Z')
        .to_string();
    std::path::PathBuf::from("results").join(format!("{name}-{stamp}"))
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub fn utc_timestamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format_utc(secs)
}

/// Formats seconds since the epoch as an ISO 8601 UTC time (Hinnant's civil-from-days).
pub fn format_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// What set a point's figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LimitKind {
    Cores,
    /// A CPU quota (`cpus`) throttled the server.
    Quota,
    /// A memory limit (`memory`): the server's tasks reached it (reclaimed, refused or
    /// killed).
    Memory,
    Pool,
    Lock,
    Wait,
    Starved,
    Errors,
    /// The load generator saturated: the figure is the lab's, not the server's.
    Generator,
    /// The `--net` path's relay was late or dropped packets: the figure is the lab's.
    Path,
    /// HTTP/2: one connection's streams shared its one reader and writer (about a core), or
    /// waited on the client under the server's stream cap.
    Connection,
    /// No rule explains it; the evidence gives the figures.
    Unexplained,
}

impl LimitKind {
    pub fn name(self) -> &'static str {
        match self {
            LimitKind::Cores => "cores",
            LimitKind::Quota => "quota",
            LimitKind::Memory => "memory",
            LimitKind::Pool => "pool",
            LimitKind::Lock => "lock",
            LimitKind::Wait => "wait",
            LimitKind::Starved => "starved",
            LimitKind::Errors => "errors",
            LimitKind::Generator => "generator",
            LimitKind::Path => "path",
            LimitKind::Connection => "connection",
            LimitKind::Unexplained => "unexplained",
        }
    }

    /// Whether the lab, not the server, set the figure (such a point is never a winner).
    pub fn is_lab(self) -> bool {
        matches!(self, LimitKind::Generator | LimitKind::Path)
    }
}

/// A point's limit: its kind, and one sentence with the figures that show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    pub kind: LimitKind,
    pub evidence: String,
}

impl Limit {
    /// The kind where the lab (the load generator, the path), not the server, set the figures.
    pub fn lab(&self) -> Option<LimitKind> {
        Some(self.kind).filter(|k| k.is_lab())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formatting_matches_known_dates() {
        crate::render::numbers::tests::writes(
            format_utc,
            &[
                (0, "1970-01-01T00:00:00Z"),
                (951_782_400, "2000-02-29T00:00:00Z"),
                (1_700_000_000, "2023-11-14T22:13:20Z"),
            ],
        );
    }

    #[test]
    fn a_failed_point_says_how_its_requests_failed() {
        let mut p = PointResult {
            ok: true,
            ..Default::default()
        };
        p.figures.requests = 1000;
        p.figures.status.insert("200".into(), 1000);
        assert_eq!(p.failure_cause(), None);
        p.figures.status.clear();
        p.figures.status.insert("404".into(), 1000);
        assert_eq!(
            p.failure_cause().as_deref(),
            Some("every response was 404 (1,000 of 1,000)")
        );
        p.figures.status.insert("404".into(), 40);
        p.figures.status.insert("200".into(), 950);
        p.figures.status.insert("503".into(), 10);
        p.errors_by_kind.connect = 3;
        p.errors_by_kind.timeout = 2;
        p.errors = 5;
        assert_eq!(
            p.failure_cause().as_deref(),
            Some("404: 40, 503: 10 of 1,000 responses; 3 connect error(s), 2 timeout(s)")
        );
        // 1% or less is not a failure.
        p.figures.status.clear();
        p.figures.status.insert("200".into(), 995);
        p.figures.status.insert("500".into(), 5);
        p.errors_by_kind = Default::default();
        p.errors = 0;
        assert_eq!(p.failure_cause(), None);
    }

    #[test]
    fn error_rate_counts_bad_statuses() {
        let mut p = PointResult {
            ok: true,
            figures: RunFigures {
                requests: 90,
                ..Default::default()
            },
            errors: 10,
            ..Default::default()
        };
        p.figures.status.insert("200".into(), 80);
        p.figures.status.insert("500".into(), 10);
        assert!((p.error_rate() - 0.2).abs() < 1e-9);
    }

    #[test]
    fn a_runs_figures_stay_at_the_top_of_a_points_json_and_read_back() {
        let mut p = PointResult {
            arch: "async".into(),
            ok: true,
            figures: RunFigures {
                requests: 300,
                duration_s: 1.5,
                rps: 200.0,
                unanswered: 2,
                ..Default::default()
            },
            errors: 1,
            ..Default::default()
        };
        p.figures.status.insert("200".into(), 300);
        p.runs.push(RunMeasurement {
            figures: p.figures.clone(),
            rate_held: Some(true),
            ..Default::default()
        });
        let json = serde_json::to_value(&p).unwrap();
        let keys = |v: &serde_json::Value| -> Vec<String> {
            v.as_object().unwrap().keys().cloned().collect()
        };
        for key in [
            "requests",
            "duration_s",
            "rps",
            "latency_us",
            "unanswered",
            "status",
        ] {
            assert!(keys(&json).contains(&key.to_string()), "{key}: {json}");
            assert!(keys(&json["runs"][0]).contains(&key.to_string()), "{key}");
        }
        assert!(!keys(&json).contains(&"figures".to_string()));
        assert_eq!(
            (json["rps"].as_f64(), json["runs"][0]["rate_held"].as_bool()),
            (Some(200.0), Some(true))
        );
        // Unset options stay out, as before (no `cycle_rps` or `net` key).
        assert!(!keys(&json).contains(&"cycle_rps".to_string()));
        assert!(!keys(&json).contains(&"net".to_string()));
        let back: PointResult = serde_json::from_value(json).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn error_counts_keep_their_json_shape() {
        let counts = ErrorCounts {
            connect: 1,
            read: 2,
            write: 3,
            timeout: 4,
            protocol: 5,
        };
        assert_eq!(
            serde_json::to_string(&counts).unwrap(),
            r#"{"connect":1,"read":2,"write":3,"timeout":4,"protocol":5}"#
        );
        assert_eq!(counts.total(), 15);
    }

    #[test]
    fn machine_is_detected() {
        let m = Machine::detect();
        assert!(m.cores >= 1 && !m.kernel.is_empty());
    }

    #[test]
    fn server_cpu_is_per_answer_and_busy_over_its_window() {
        // 20 s measured, 2 cores busy for 27 s (10 s of fib after the deadline, as a drain),
        // 140 responses in the window and 50 more answered in the drain.
        let usage = ServerUsage {
            cpu_s: 54.0,
            window_s: 27.0,
            answered: 190,
            ..Default::default()
        };
        assert_eq!(usage.cpu_us_per_request(140), 54.0 * 1e6 / 190.0);
        assert_eq!(usage.busy(usage.cpu_s, 20.0), Some(2.0));
        // Results from before the window and the answers were recorded: as they were read.
        let old = ServerUsage {
            cpu_s: 3.0,
            ..Default::default()
        };
        assert_eq!(old.cpu_us_per_request(1000), 3000.0);
        assert_eq!(old.busy(old.cpu_s, 2.0), Some(1.5));
        assert_eq!(old.cpu_us_per_request(0), 0.0);
        assert_eq!(old.busy(old.cpu_s, 0.0), None);
    }
}
