//! What one point is: which server (one of our architectures, a variant of one, or an
//! external command with its knob values filled in), the workload it is asked, the
//! connections, and how it is loaded ([`Setup`]: the load shape, the window, the net path).
//! Every command measures a [`PointPlan`] through [`super::measure`]; `sweep` builds its plans
//! from an experiment file, `map`, `advise` and `tune` build theirs in code.

use serde::{Deserialize, Deserializer, Serialize};

use crate::arch::{Arch, Protocol};
use crate::units::de_opt_seconds;

/// How the load generator drives each point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LoadMode {
    /// Every connection sends its next request when the previous answer arrives, for `duration`.
    #[default]
    Closed,
    /// A fixed total number of requests (`requests`), spread over the connections.
    Count,
    /// A constant request rate (`rate` per second) for `duration`, latency from intended send.
    Rate,
}

/// One workload: what each request asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// A short name used in tables and plots, e.g. `hello`.
    pub name: String,
    /// The request path with its query, e.g. `/fib?n=25`. Ignored for echo.
    #[serde(default = "default_route")]
    pub route: String,
    #[serde(default = "default_method")]
    pub method: String,
    /// Request body (for POST), sent as `application/x-www-form-urlencoded` when non-empty.
    #[serde(default)]
    pub body: String,
    /// Keep connections open between requests; `false` opens a connection per request.
    #[serde(default = "default_true")]
    pub keepalive: bool,
    /// Echo protocol: bytes per line sent.
    #[serde(default)]
    pub message_len: Option<usize>,
    /// Time per request spent waiting (not computing), for Goetz's formula. Derived from
    /// `/sleep?ms=M` when not given.
    #[serde(default)]
    pub wait_ms: Option<f64>,
    /// Concurrency levels for this workload only (overrides the experiment's list).
    #[serde(default)]
    pub concurrency: Option<Vec<u32>>,
    /// Seconds measured per point for this workload only.
    #[serde(default, deserialize_with = "de_opt_seconds")]
    pub duration: Option<f64>,
    /// Request timeout (seconds) for this workload only.
    #[serde(default, deserialize_with = "de_opt_seconds")]
    pub timeout: Option<f64>,
    /// A URL list file, as `load --urls` reads one, rotated on every connection in place of
    /// `route` (each line its own method, body and headers; path-only lines go to the server
    /// under test). `route` still names the warm-up's and the ready check's request.
    #[serde(default)]
    pub urls: Option<String>,
    /// A rate plan, as `load -R` takes one (`1000`, a ramp `100..5000`, steps
    /// `1000@10s,2000@10s`), in place of the experiment's constant `rate` (mode = "rate"); a
    /// plan without its own durations lasts the point's `duration`.
    #[serde(default)]
    pub plan: Option<String>,
}

fn default_route() -> String {
    "/hello".into()
}
fn default_method() -> String {
    "GET".into()
}
fn default_true() -> bool {
    true
}

impl Workload {
    /// The lab's gRPC message for this workload (`grpc`): its `/work` route's CPU and wait as
    /// a `WorkRequest`, or why it has none (another route, or a spread the message cannot
    /// carry).
    pub fn grpc_message(&self) -> Result<Vec<u8>, String> {
        use prost::Message;
        let (path, query) = self.route.split_once('?').unwrap_or((&self.route, ""));
        if path != "/work" {
            return Err(format!(
                "grpc: workload {:?} asks {}, and gRPC carries /work only",
                self.name, self.route
            ));
        }
        let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        let spec = crate::app::WorkSpec::parse(|name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        })
        .map_err(|e| format!("grpc: workload {:?}: {e}", self.name))?;
        if spec.spread != crate::app::work::Spread::Const {
            return Err(format!(
                "grpc: workload {:?} spreads its work, which the message cannot carry",
                self.name
            ));
        }
        Ok(crate::http::grpc::WorkRequest {
            cpu_us: spec.cpu_us,
            wait_us: spec.wait_us,
            blocking: spec.blocking,
        }
        .encode_to_vec())
    }

    /// A GET of `route` on keep-alive connections, named `name`: every other key at its
    /// default, as an experiment file that names only these two would have it.
    pub fn get(name: &str, route: &str) -> Workload {
        Workload {
            name: name.into(),
            route: route.into(),
            method: default_method(),
            body: String::new(),
            keepalive: true,
            message_len: None,
            wait_ms: None,
            concurrency: None,
            duration: None,
            timeout: None,
            urls: None,
            plan: None,
        }
    }
}

/// The server a URL list is checked against before its own port is known (a sweep's, tune's,
/// started on a free port): the list's lines must then be paths, as an absolute URL names a
/// host and port of its own.
pub fn stand_in_server() -> Option<crate::load::Target> {
    crate::load::Target::parse("http://127.0.0.1:9/").ok()
}

/// Checks a URL list for a server started on a port not known yet; errors as `load --urls`
/// says them.
pub fn check_path_list(file: &std::path::Path) -> Result<(), String> {
    crate::load::read_url_file(file, stand_in_server().as_ref()).map(|_| ())
}

impl Workload {
    /// The URL list of `urls`, its path-only lines for `target`.
    pub fn url_list(
        &self,
        target: Option<&crate::load::Target>,
    ) -> Result<Option<crate::load::UrlList>, String> {
        self.urls
            .as_deref()
            .map(|file| {
                crate::load::read_url_file(std::path::Path::new(file), target).map_err(|e| {
                    let what = e.strip_prefix(&format!("--urls {file}: ")).unwrap_or(&e);
                    format!("urls = {file:?}: {what}")
                })
            })
            .transpose()
    }

    /// The rate plan of `plan`, lasting `duration_s` where it does not say.
    pub fn rate_plan(&self, duration_s: f64) -> Result<Option<crate::load::RatePlan>, String> {
        self.plan
            .as_deref()
            .map(|text| {
                crate::load::RatePlan::parse(
                    text,
                    None,
                    std::time::Duration::from_secs_f64(duration_s),
                )
                .map_err(|e| format!("plan = {:?}: {e}", text.trim()))
            })
            .transpose()
    }

    /// The wait per request in milliseconds: explicit, else parsed from `/sleep?ms=M`, else 0.
    pub fn wait_ms(&self) -> f64 {
        if let Some(ms) = self.wait_ms {
            return ms;
        }
        sleep_ms_of_route(&self.route).unwrap_or(0.0)
    }
}

/// The wait a route asks for, in ms: `M` from `/sleep?ms=M`, `W` from `/work?wait_ms=W` or
/// `/work?wait_us=U` (its mean, whatever its spread).
pub fn sleep_ms_of_route(route: &str) -> Option<f64> {
    let (path, query) = route.split_once('?')?;
    let keys: &[(&str, f64)] = match path {
        "/sleep" => &[("ms=", 1.0)],
        "/work" => &[("wait_ms=", 1.0), ("wait_us=", 0.001)],
        _ => return None,
    };
    query.split('&').find_map(|kv| {
        keys.iter().find_map(|(key, scale)| {
            kv.strip_prefix(key)
                .and_then(|v| v.parse::<f64>().ok())
                .map(|v| v * scale)
        })
    })
}

/// Something an experiment needs installed (a runtime, a package), checked before anything
/// runs (see [`super::peers`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requirement {
    pub name: String,
    /// A shell command that succeeds when it is installed.
    pub check: String,
    /// The shell command that installs it (run when the sweep runs as root).
    pub install: String,
    /// A shell command whose first line of output is its version, recorded in `results.json`.
    pub version: String,
}

/// A server the user starts with a shell command, measured like ours.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalTarget {
    /// The column name in tables, e.g. `node`.
    pub name: String,
    /// A shell command (run with `sh -c`) that starts the server in the foreground. `{port}` is
    /// replaced with a free port; `{workers}` with each value of `workers` and `{threads}` with
    /// each of `threads`, so the server's own pool is swept; `{peers}` with the directory of the
    /// peer sources the project ships ([`super::peers`]).
    pub command: String,
    /// The base URL, e.g. `http://127.0.0.1:{port}`; each workload's route is appended.
    pub url: String,
    /// Seconds to wait for the port to accept connections.
    #[serde(default, deserialize_with = "de_opt_seconds")]
    pub ready_timeout: Option<f64>,
    /// Only these workloads (by name); all when absent.
    #[serde(default)]
    pub workloads: Option<Vec<String>>,
    /// For a server the sweep cannot sample here (another machine): a shell command that
    /// prints the server's CPU seconds so far (user + system, one number). It runs before and
    /// after each measurement; the difference is the server's CPU. `{port}` is replaced with
    /// the port of `url`.
    #[serde(default)]
    pub cpu_command: Option<String>,
    /// The values of `{workers}` (the experiment's `workers` when absent): the server runs
    /// once per value, and its points form a pooled series of its own.
    #[serde(default)]
    pub workers: Vec<u32>,
    /// The values of `{threads}`, for a server with both (gunicorn's `--workers` and
    /// `--threads`): each value is a series of its own, `NAME-tT`.
    #[serde(default)]
    pub threads: Vec<u32>,
    /// This server's own CPU quota, in cores, in place of the experiment's `cpus` (with
    /// `replicas`, each copy's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// Copies of this server side by side, each on its own port (`{port}`) with its own
    /// budget, the connections spread over them in turn, as a Service over its pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
}

impl ExternalTarget {
    /// The values `{workers}` takes (none: the command has no such placeholder).
    pub fn worker_values<'a>(&'a self, experiment_workers: &'a [u32]) -> &'a [u32] {
        if !self.command.contains("{workers}") {
            &[]
        } else if self.workers.is_empty() {
            experiment_workers
        } else {
            &self.workers
        }
    }

    /// The target once per value of `threads` (`NAME-tT`, `{threads}` filled in), or itself.
    pub fn per_thread_count(&self) -> Vec<ExternalTarget> {
        if self.threads.is_empty() {
            return vec![self.clone()];
        }
        self.threads
            .iter()
            .map(|t| ExternalTarget {
                name: format!("{}-t{t}", self.name),
                command: self.command.replace("{threads}", &t.to_string()),
                threads: Vec::new(),
                ..self.clone()
            })
            .collect()
    }
}

/// One of our architectures run with extra `serve` flags, as a series of its own: e.g.
/// `reactors` with `--accept shared` beside plain `reactors`. `[[variant]]` in TOML.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    /// The series name in tables and plots, e.g. `reactors-shared`; not an architecture's name.
    pub name: String,
    pub arch: Arch,
    /// Extra `serve` flags, e.g. `["--accept", "shared"]`. Not the ones the sweep sets itself.
    #[serde(default)]
    pub args: Vec<String>,
}

/// Which server a point measures.
#[derive(Debug, Clone, PartialEq)]
pub enum TargetSpec {
    /// Our `arch`, plain or as a variant (its name and extra flags).
    Ours {
        arch: Arch,
        variant: Option<Variant>,
    },
    External(ExternalTarget),
}

impl TargetSpec {
    /// The column name: the architecture, the variant's name, or the external target's name.
    pub fn name(&self) -> &str {
        match self {
            TargetSpec::Ours {
                variant: Some(v), ..
            } => &v.name,
            TargetSpec::Ours { arch, .. } => arch.name(),
            TargetSpec::External(ext) => &ext.name,
        }
    }

    /// The same server under another name (a series of its own: `NAME@0.5cpu`).
    pub fn renamed(&self, name: String) -> TargetSpec {
        match self {
            TargetSpec::Ours { arch, variant } => TargetSpec::Ours {
                arch: *arch,
                variant: Some(Variant {
                    name,
                    arch: *arch,
                    args: variant.as_ref().map(|v| v.args.clone()).unwrap_or_default(),
                }),
            },
            TargetSpec::External(ext) => TargetSpec::External(ExternalTarget {
                name,
                ..ext.clone()
            }),
        }
    }
}

/// One cell of the grid (all its repetitions).
#[derive(Debug, Clone, PartialEq)]
pub struct PointSpec {
    pub target: TargetSpec,
    /// Requested pool size; `None` lets the server choose.
    pub workers: Option<u32>,
    pub workload: Workload,
    pub concurrency: u32,
    /// A CPU quota of this point's own, in cores, in place of the setup's (an axis of quotas:
    /// the series is named for it, `NAME@0.5cpu`).
    pub cpus: Option<f64>,
    /// HTTP/2 (h2c): streams per connection; `concurrency` stays the requests in flight, over
    /// `concurrency / streams` connections (an axis of streams: the series `NAME@10streams`).
    pub streams: Option<u32>,
}

impl PointSpec {
    /// This point under a quota of `cpus` cores, as a series of its own (`NAME@0.5cpu`).
    pub fn under_quota(&self, cpus: f64) -> PointSpec {
        let name = super::budget::series_name(self.target.name(), cpus);
        PointSpec {
            target: self.target.renamed(name),
            cpus: Some(cpus),
            ..self.clone()
        }
    }

    /// This point over HTTP/2 with `streams` a connection, as a series of its own
    /// (`NAME@10streams`); `None` where its requests in flight are not a whole number of
    /// connections of that many streams.
    pub fn with_streams(&self, streams: u32) -> Option<PointSpec> {
        if streams == 0 || !self.concurrency.is_multiple_of(streams) {
            return None;
        }
        let plural = if streams == 1 { "" } else { "s" };
        let name = format!("{}@{streams}stream{plural}", self.target.name());
        Some(PointSpec {
            target: self.target.renamed(name),
            streams: Some(streams),
            ..self.clone()
        })
    }

    /// The connections the point's load opens: its concurrency, over HTTP/2 divided by its
    /// streams.
    pub fn connections(&self) -> u32 {
        self.concurrency / self.streams.unwrap_or(1).max(1)
    }

    /// The point's plan: `setup`, under the point's own quota where it has one (an axis's,
    /// else its server's), and its server's replicas.
    pub fn plan(&self, setup: &Setup) -> PointPlan {
        let mut setup = setup.clone();
        if let TargetSpec::External(ext) = &self.target {
            setup.cpus = ext.cpus.or(setup.cpus);
            setup.replicas = ext.replicas.unwrap_or(setup.replicas);
        }
        if let Some(cpus) = self.cpus {
            setup.cpus = Some(cpus);
        }
        PointPlan {
            point: self.clone(),
            setup,
        }
    }
}

/// How a point is loaded and run, beyond what it measures: the load shape, the window, the
/// server's start, the network path. An experiment's keys of the same names, or a command's
/// flags.
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    pub mode: LoadMode,
    /// Seconds measured (closed and rate modes), unless the workload says.
    pub duration: f64,
    /// Count mode: requests per point.
    pub requests: Option<u64>,
    /// Rate mode: requests per second (a workload's plan takes its place).
    pub rate: Option<f64>,
    /// Seconds of unmeasured load before each measurement, on `warmup_connections` (1).
    pub warmup: f64,
    pub warmup_connections: Option<u32>,
    /// Closed mode: the window opens once every connection was answered, or after this.
    pub settle: Option<f64>,
    pub repetitions: u32,
    /// Seconds before a request counts as timed out, unless the workload says.
    pub timeout: f64,
    pub load_threads: u32,
    /// `--store` for our server; `{tmp}` is the run's scratch directory.
    pub store: Option<String>,
    pub protocol: Protocol,
    /// Seconds to wait for the server to be ready.
    pub ready_timeout: f64,
    /// A network path between the generator and the server.
    pub net: Option<crate::net::NetSpec>,
    /// A CPU quota for the server, in cores (a container's `--cpus`): CFS bandwidth over
    /// 100 ms periods.
    pub cpus: Option<f64>,
    /// The CPUs the server may run on (a container's `--cpuset-cpus`).
    pub cpuset: Option<Vec<usize>>,
    /// Copies of the server, each on its own port in budgets of its own (the quota is each
    /// one's), the connections spread over them in turn (1: the server alone).
    pub replicas: u32,
    /// A memory limit for the server, in bytes (a container's `--memory`).
    pub memory: Option<u64>,
    /// HTTPS: our servers serve HTTP/1.1 (or HTTP/2 by ALPN) over TLS with a certificate the
    /// lab makes ([`super::cert`]), and the generator accepts it.
    pub tls: bool,
    /// gRPC: every request a unary call of the lab's method with the workload's `/work`
    /// figures ([`Workload::grpc_message`]).
    pub grpc: bool,
}

impl Setup {
    /// A closed loop of `duration` seconds after `warmup` seconds, every other setting at an
    /// experiment file's default.
    pub fn closed(duration: f64, warmup: f64) -> Setup {
        Setup {
            mode: LoadMode::Closed,
            duration,
            requests: None,
            rate: None,
            warmup,
            warmup_connections: None,
            settle: None,
            repetitions: 1,
            timeout: 2.0,
            load_threads: 1,
            store: None,
            protocol: Protocol::Http,
            ready_timeout: 10.0,
            net: None,
            cpus: None,
            cpuset: None,
            replicas: 1,
            memory: None,
            tls: false,
            grpc: false,
        }
    }

    /// Seconds measured per point of a workload.
    pub fn duration_of(&self, workload: &Workload) -> f64 {
        workload.duration.unwrap_or(self.duration)
    }

    /// Request timeout (seconds) for a workload.
    pub fn timeout_of(&self, workload: &Workload) -> f64 {
        workload.timeout.unwrap_or(self.timeout)
    }
}

/// One point, whole: what is measured and how.
#[derive(Debug, Clone, PartialEq)]
pub struct PointPlan {
    pub point: PointSpec,
    pub setup: Setup,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ArchList {
    Names(Vec<String>),
    Word(String),
}

/// `archs = ["epoll", ...]` or `archs = "all"`; an unknown name is an error naming the key.
pub fn de_archs<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Arch>, D::Error> {
    let bad = |what: String| serde::de::Error::custom(format!("archs: {what}"));
    match ArchList::deserialize(d).map_err(|_| {
        bad(format!(
            "expected \"all\" or a list of architectures ({})",
            Arch::names()
        ))
    })? {
        ArchList::Word(word) if word == "all" => Ok(Arch::all().to_vec()),
        ArchList::Word(word) => Err(bad(unknown_arch(&word))),
        ArchList::Names(names) => names
            .iter()
            .map(|n| Arch::from_name(n).ok_or_else(|| bad(unknown_arch(n))))
            .collect(),
    }
}

/// The error for an architecture name that is none of ours.
pub fn unknown_arch(name: &str) -> String {
    format!(
        "unknown arch {name:?} (allowed: {}, or \"all\")",
        Arch::names()
    )
}
