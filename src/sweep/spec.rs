//! The experiment spec: what a sweep runs, as read from a TOML file or a preset.
//!
//! An experiment is a grid, architecture x worker count x workload x concurrency (x repetition),
//! plus variants (one of our architectures with extra `serve` flags, as a series of its own) and
//! external targets (a user's own server started by a shell command) that sit in the same
//! tables. Architectures are [`Arch`] itself, so an experiment can name exactly what `serve`
//! accepts (or `"all"`). The presets are ordinary TOML files in `experiments/`, embedded here with
//! `include_str!` so `sweetspot sweep quick` works from any directory. Parsing is strict
//! (unknown keys, unknown architectures, empty grids are usage errors, exit 2) because a typo in
//! an experiment otherwise costs minutes of measuring the wrong thing.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Deserializer, Serialize};

pub use crate::arch::{Arch, Protocol};
use crate::lab::budget::MAX_REPLICAS;
pub use crate::lab::plan::{
    check_path_list, de_archs, sleep_ms_of_route, stand_in_server, unknown_arch, ExternalTarget,
    LoadMode, PointSpec, Requirement, Setup, TargetSpec, Variant, Workload,
};
use crate::units::{de_opt_seconds, de_seconds};
use crate::usage;

/// The presets, by name, as shipped in `experiments/`.
pub const PRESETS: &[(&str, &str)] = shipped!("experiments/", ".toml";
    "quick", "echo", "zerohttpd", "modern", "c10k", "threads", "io-wait", "gil", "puma", "node",
    "java", "go", "shape", "apache", "h2", "cpu-bound", "slow-clients", "tls", "grpc",
);

/// Seconds a point may measure (`duration`): a day.
pub const MAX_DURATION_S: f64 = 86_400.0;
/// Seconds of warm-up per point: an hour.
pub const MAX_WARMUP_S: f64 = 3_600.0;
/// Seconds for `timeout` and `ready_timeout`: an hour, as `load --timeout` allows.
pub const MAX_TIMEOUT_S: f64 = 3_600.0;
/// Connections per point, as `load -c` allows; the file limit must also allow it (checked
/// before the sweep starts).
pub const MAX_CONCURRENCY: u32 = 1_000_000;
/// Load generator threads, as `load -t` allows.
pub const MAX_LOAD_THREADS: u32 = 1_024;
/// Requests per second in rate mode, as `load -R` allows.
pub const MAX_RATE: f64 = 100_000_000.0;
/// Requests per point in count mode, as `load -n` allows.
pub const MAX_REQUESTS: u64 = 1_000_000_000_000;
pub const MAX_REPETITIONS: u32 = 1_000;
/// The p99 bound of the recommendation, in ms: an hour.
pub const MAX_P99_BOUND_MS: f64 = 3_600_000.0;
/// `wait_ms` of a workload: a minute, as `/sleep` allows.
pub const MAX_WAIT_MS: f64 = 60_000.0;
/// Bytes of a request body or an echo line: 1 MiB, as `load` allows.
pub const MAX_BODY_BYTES: u64 = 1 << 20;

/// The lower end of a range: exclusive (`Above`) or inclusive (`AtLeast`).
#[derive(Clone, Copy)]
enum Low {
    Above(f64),
    AtLeast(f64),
}
use Low::{Above, AtLeast};

/// `key = value: must be ...` unless `value` (finite) is in the range.
fn number_in(key: &str, value: f64, low: Low, max: f64, unit: &str) -> Result<(), String> {
    let (ok_low, open) = match low {
        Above(min) => (value > min, format!("({min}")),
        AtLeast(min) => (value >= min, format!("[{min}")),
    };
    if value.is_finite() && ok_low && value <= max {
        Ok(())
    } else {
        // 1e300 reads better than its 301 digits.
        let shown = if value.is_finite() && value.abs() >= 1e9 {
            format!("{value:e}")
        } else {
            value.to_string()
        };
        Err(format!("{key} = {shown}: must be in {open}, {max}] {unit}"))
    }
}

fn seconds_in(key: &str, value: f64, low: Low, max: f64) -> Result<(), String> {
    number_in(key, value, low, max, "seconds")
}

fn int_in(key: &str, value: u64, min: u64, max: u64) -> Result<(), String> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(format!("{key} = {value}: must be in [{min}, {max}]"))
    }
}

/// Whether `store` is a `--store` our servers take (`{tmp}` stands for the sweep's scratch
/// directory).
pub fn check_store(store: &str) -> Result<(), String> {
    crate::store::StoreConfig::parse(Some(store))
        .map(|_| ())
        .map_err(|_| "must be sqlite:PATH or redis://HOST[:PORT]".to_string())
}

impl Workload {
    /// This workload's own keys, checked as [`Experiment::check_ranges`] does.
    fn check_ranges(&self, protocol: Protocol, timed: bool) -> Result<(), String> {
        if self.urls.is_some() && protocol != Protocol::Http {
            return Err("urls applies to HTTP workloads".into());
        }
        self.url_list(stand_in_server().as_ref())?;
        self.rate_plan(1.0)?;
        if let Some(levels) = &self.concurrency {
            if levels.is_empty() {
                return Err("concurrency = []: needs at least one level".into());
            }
            for &c in levels {
                int_in("concurrency", c.into(), 1, MAX_CONCURRENCY.into())?;
            }
        }
        if let (Some(d), true) = (self.duration, timed) {
            seconds_in("duration", d, Above(0.0), MAX_DURATION_S)?;
        }
        if let Some(t) = self.timeout {
            seconds_in("timeout", t, Above(0.0), MAX_TIMEOUT_S)?;
        }
        if let Some(ms) = self.wait_ms {
            number_in("wait_ms", ms, AtLeast(0.0), MAX_WAIT_MS, "ms")?;
        }
        if let Some(len) = self.message_len {
            int_in("message_len", len as u64, 1, MAX_BODY_BYTES)?;
        }
        if self.body.len() as u64 > MAX_BODY_BYTES {
            return Err(format!(
                "body is {} bytes: at most {MAX_BODY_BYTES}",
                self.body.len()
            ));
        }
        let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if self.method.is_empty() || !self.method.bytes().all(token) {
            return Err(format!(
                "method = {:?}: must be an HTTP method like GET",
                self.method
            ));
        }
        if protocol == Protocol::Http
            && (!self.route.starts_with('/') || self.route.bytes().any(|b| b <= b' ' || b == 0x7f))
        {
            return Err(format!(
                "route = {:?}: must start with / and hold no spaces or control characters",
                self.route
            ));
        }
        Ok(())
    }
}

impl ExternalTarget {
    /// A placeholder needs values and values need their placeholder.
    fn check_pool(&self, experiment_workers: &[u32]) -> Result<(), String> {
        let has = |p: &str| self.command.contains(p);
        if has("{workers}") && self.worker_values(experiment_workers).is_empty() {
            return Err("the command has {workers} but no workers = [...] gives its values".into());
        }
        if !has("{workers}") && !self.workers.is_empty() {
            return Err("workers = [...] given, but the command has no {workers}".into());
        }
        if has("{threads}") && self.threads.is_empty() {
            return Err("the command has {threads} but no threads = [...] gives its values".into());
        }
        if !has("{threads}") && !self.threads.is_empty() {
            return Err("threads = [...] given, but the command has no {threads}".into());
        }
        for &n in self.workers.iter().chain(&self.threads) {
            int_in(
                "workers/threads",
                n.into(),
                1,
                crate::arch::listen::MAX_WORKERS as u64,
            )?;
        }
        Ok(())
    }
}

/// `serve` flags the sweep sets on every server it starts, so a variant may not.
const SWEEP_SET_FLAGS: &[&str] = &[
    "--arch",
    "--workers",
    "--host",
    "--port",
    "--store",
    "--protocol",
];

impl Variant {
    /// The flags parse as `serve` would parse them (and make sense for the arch), none is one
    /// the sweep sets, and the name is a plain word that is no architecture's.
    fn check(&self) -> Result<(), String> {
        #[derive(clap::Parser)]
        struct ServeLine {
            #[command(flatten)]
            args: crate::serve::ServeArgs,
        }
        let plain = |b: u8| b.is_ascii_alphanumeric() || b"-_.:/".contains(&b);
        if self.name.is_empty() || !self.name.bytes().all(plain) {
            return Err("name must be letters, digits and - _ . : /".into());
        }
        if Arch::from_name(&self.name).is_some() {
            return Err("name is an architecture's: give the variant its own".into());
        }
        if let Some(flag) = self.args.iter().find(|a| {
            SWEEP_SET_FLAGS
                .iter()
                .any(|f| a.as_str() == *f || a.starts_with(&format!("{f}=")))
        }) {
            return Err(format!(
                "args: {flag} is set by the sweep (for --workers use workers = [...])"
            ));
        }
        let line = ["serve", "--arch", self.arch.name(), "--port", "0"]
            .into_iter()
            .map(String::from)
            .chain(self.args.iter().cloned());
        let parsed = <ServeLine as clap::Parser>::try_parse_from(line).map_err(|e| {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or_default();
            format!("args: {}", first.trim_start_matches("error: "))
        })?;
        crate::serve::ServeConfig::from_args(&parsed.args)
            .map(|_| ())
            .map_err(|e| format!("args: {e}"))
    }
}

/// A whole experiment as written in TOML.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Our architectures to run, or `"all"` for every one [`Arch`] lists; may be empty when
    /// only external targets are measured.
    #[serde(default, deserialize_with = "de_archs")]
    pub archs: Vec<Arch>,
    /// Pool sizes for pooled architectures; empty means the server's default.
    #[serde(default)]
    pub workers: Vec<u32>,
    /// Concurrency levels (connections), unless a workload overrides them.
    #[serde(default)]
    pub concurrency: Vec<u32>,
    #[serde(rename = "workload", alias = "workloads")]
    pub workloads: Vec<Workload>,
    #[serde(default)]
    pub mode: LoadMode,
    /// Seconds measured per point (closed and rate modes).
    #[serde(default = "default_duration", deserialize_with = "de_seconds")]
    pub duration: f64,
    /// Count mode: requests per point.
    #[serde(default)]
    pub requests: Option<u64>,
    /// Rate mode: requests per second.
    #[serde(default)]
    pub rate: Option<f64>,
    /// Seconds of unmeasured load before each measurement.
    #[serde(default = "default_warmup", deserialize_with = "de_seconds")]
    pub warmup: f64,
    /// Connections used to warm up (default 1). More can poison the measurement: requests a
    /// slow server has not accepted when the warm-up ends stay in its backlog and are served,
    /// to nobody, while the measurement waits behind them.
    #[serde(default)]
    pub warmup_connections: Option<u32>,
    /// Closed mode: the measured window opens only once every connection has been answered
    /// once, or after this many seconds whatever is unanswered (connecting thousands of
    /// connections and their first requests are then not measured).
    #[serde(default, deserialize_with = "de_opt_seconds")]
    pub settle: Option<f64>,
    #[serde(default = "default_repetitions")]
    pub repetitions: u32,
    /// Seconds before a request counts as timed out.
    #[serde(default = "default_timeout", deserialize_with = "de_seconds")]
    pub timeout: f64,
    /// Load generator threads.
    #[serde(default = "default_load_threads")]
    pub load_threads: u32,
    /// Pin the server to CPU 0 and the generator to CPU 1.
    #[serde(default)]
    pub pin: bool,
    /// `--store` for our server (`sqlite:PATH` or `redis://HOST:PORT`).
    #[serde(default)]
    pub store: Option<String>,
    #[serde(default)]
    pub protocol: Protocol,
    /// The latency bound (ms) the recommendation must respect.
    #[serde(default = "default_p99_bound_ms")]
    pub p99_bound_ms: f64,
    /// Seconds to wait for a server's ready line.
    #[serde(default = "default_ready_timeout", deserialize_with = "de_seconds")]
    pub ready_timeout: f64,
    /// Skip concurrency levels above this for the named architectures (the study's blanks).
    #[serde(default, deserialize_with = "de_max_concurrency")]
    pub max_concurrency: BTreeMap<Arch, u32>,
    /// Our architectures again with extra `serve` flags, each a series of its own.
    #[serde(default, rename = "variant", alias = "variants")]
    pub variants: Vec<Variant>,
    #[serde(default)]
    pub external: Vec<ExternalTarget>,
    /// What must be installed first (the peers' runtimes).
    #[serde(default)]
    pub requires: Vec<Requirement>,
    /// A network path between the load generator and the server,
    /// `rtt=50ms[,jitter=5ms][,rate=10mbit][,bottleneck=100mbit][,queue=N][,loss=0.5%]`
    /// (see [`crate::net`]; needs root), read into a typed path once, with the file.
    #[serde(
        default,
        with = "crate::net::as_key",
        skip_serializing_if = "Option::is_none"
    )]
    pub net: Option<crate::net::NetSpec>,
    /// A CPU quota for every server, in cores (`cpus = 0.5`: half a core, as a container's
    /// `--cpus`; needs root and the cgroup v1 cpu controller). A list (`cpus = [0.5, 1, 2]`)
    /// is an axis: every server runs once per quota, each a series of its own (`NAME@0.5cpu`).
    #[serde(
        default,
        deserialize_with = "crate::lab::budget::de_cpus",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub cpus: Vec<f64>,
    /// The CPUs every server may run on (`cpuset = "0"`, as a container's `--cpuset-cpus`;
    /// needs root and the cgroup v1 cpuset controller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpuset: Option<crate::lab::budget::CpuList>,
    /// Copies of every server side by side, each on its own port with its own budget (`cpus`
    /// is each one's), the connections spread over them in turn; an `[[external]]`'s own
    /// `replicas` (and `cpus`) take its place. Needs root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    /// A memory limit for every server (`memory = "64M"`, as a container's `--memory`; needs
    /// root and the cgroup v1 memory controller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// HTTP/2 (h2c) streams per connection, an axis (`streams = [1, 10, 100]`): every point
    /// once per value, each server a series of its own (`NAME@10streams`); `concurrency` stays
    /// the requests in flight, over `concurrency / streams` connections (a level that is not a
    /// multiple of a value is left out for it). Every server must speak h2c: ours is `async`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<u32>,
    /// HTTPS: our servers serve TLS (HTTP/1.1, or HTTP/2 by ALPN with `streams`) with a
    /// certificate the lab makes; each point records the handshakes apart from the requests
    /// (full and resumed, their times, and the server's CPU per handshake).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tls: bool,
    /// gRPC: every request a unary call of the lab's method, `/sweetspot.Lab/Work`, carrying
    /// its workload's `/work` figures (every route a `/work` without a spread), over HTTP/2:
    /// h2c, `streams` each channel's. Of ours only async serves it; an `[[external]]` must
    /// serve the method (experiments/peers/grpcio.sh). Calls are counted by `grpc-status`,
    /// and a status other than OK is a failed call.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub grpc: bool,
}

fn default_duration() -> f64 {
    1.0
}
fn default_warmup() -> f64 {
    0.2
}
fn default_repetitions() -> u32 {
    1
}
fn default_timeout() -> f64 {
    2.0
}
fn default_load_threads() -> u32 {
    1
}
fn default_p99_bound_ms() -> f64 {
    100.0
}
fn default_ready_timeout() -> f64 {
    10.0
}

/// `max_concurrency = { iterative = 200 }`, keyed by architecture.
fn de_max_concurrency<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<Arch, u32>, D::Error> {
    BTreeMap::<String, u32>::deserialize(d)?
        .into_iter()
        .map(|(name, max)| match Arch::from_name(&name) {
            Some(arch) => Ok((arch, max)),
            None => Err(serde::de::Error::custom(format!(
                "max_concurrency: {}",
                unknown_arch(&name)
            ))),
        })
        .collect()
}

impl Experiment {
    /// Parses and validates an experiment; every problem is a usage error.
    pub fn from_toml(text: &str, origin: &str) -> anyhow::Result<Experiment> {
        let experiment: Experiment =
            toml::from_str(text).map_err(|e| crate::toml_usage(text, origin, &e))?;
        experiment.validate(origin)?;
        Ok(experiment)
    }

    /// Resolves a preset name or a path to a TOML file.
    pub fn load(name_or_path: &str) -> anyhow::Result<Experiment> {
        if let Some((_, text)) = PRESETS.iter().find(|(name, _)| *name == name_or_path) {
            return Experiment::from_toml(text, &format!("preset {name_or_path}"));
        }
        let path = Path::new(name_or_path);
        let looks_like_file = name_or_path.ends_with(".toml") || name_or_path.contains('/');
        if !looks_like_file && !path.exists() {
            let names: Vec<&str> = PRESETS.iter().map(|(n, _)| *n).collect();
            return Err(usage(format!(
                "unknown preset {name_or_path:?} (presets: {}; or give a FILE.toml)",
                names.join(", ")
            )));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
        Experiment::from_toml(&text, &path.display().to_string())
    }

    fn validate(&self, origin: &str) -> anyhow::Result<()> {
        self.check_ranges()
            .map_err(|msg| usage(format!("{origin}: {msg}")))
    }

    /// Every rule an experiment must follow, so nothing fails (or panics) once running. The
    /// error names the key and the allowed range, as one line.
    fn check_ranges(&self) -> Result<(), String> {
        if self.archs.is_empty() && self.variants.is_empty() && self.external.is_empty() {
            return Err("no archs, variants or external targets: nothing to measure".into());
        }
        if self.workloads.is_empty() {
            return Err("no [[workload]]".into());
        }
        self.check_load()?;
        self.check_pools()?;
        let names = self.check_workloads()?;
        self.check_targets(&names)
    }

    /// The network path.
    pub fn net_spec(&self) -> Option<crate::net::NetSpec> {
        self.net
    }

    /// `streams`: each from 1 to the load's limit, over our servers that speak h2c only, and
    /// no HTTP/1.1-only setting beside it.
    fn check_streams(&self) -> Result<(), String> {
        if self.streams.is_empty() {
            return Ok(());
        }
        for &s in &self.streams {
            int_in("streams", u64::from(s), 1, crate::load::MAX_STREAMS)?;
        }
        if let Some(arch) = self.archs.iter().find(|a| !a.serves_http2()) {
            return Err(format!(
                "streams: {} does not speak HTTP/2; of ours only async does (archs = [\"async\"])",
                arch.name()
            ));
        }
        if self.settle.is_some() {
            return Err("streams: settle is HTTP/1.1's (drop one)".into());
        }
        if !self
            .streams
            .iter()
            .any(|&s| self.concurrency.iter().any(|&c| c.is_multiple_of(s)))
        {
            return Err("streams: no concurrency level is a multiple of a streams value".into());
        }
        Ok(())
    }

    /// `tls`: over HTTP, on our servers; an external target is started by its own command,
    /// which the lab cannot give a certificate.
    fn check_tls(&self) -> Result<(), String> {
        if !self.tls {
            return Ok(());
        }
        if self.protocol != Protocol::Http {
            return Err("tls: only protocol = \"http\" is served over TLS".into());
        }
        if let Some(ext) = self.external.first() {
            return Err(format!(
                "tls: [[external]] {:?} is started by its own command, which the lab cannot give \
                 its certificate (drop tls, or measure it with `load --insecure https://...`)",
                ext.name
            ));
        }
        Ok(())
    }

    /// `grpc`: over HTTP/2, on our servers that speak it, and every workload a `/work` the
    /// message can carry.
    fn check_grpc(&self) -> Result<(), String> {
        if !self.grpc {
            return Ok(());
        }
        if self.protocol != Protocol::Http {
            return Err("grpc: only protocol = \"http\" carries gRPC".into());
        }
        if let Some(arch) = self
            .archs
            .iter()
            .chain(self.variants.iter().map(|v| &v.arch))
            .find(|a| !a.serves_http2())
        {
            return Err(format!(
                "grpc: {} does not speak HTTP/2; of ours only async serves gRPC",
                arch.name()
            ));
        }
        if self.settle.is_some() {
            return Err("grpc: settle is HTTP/1.1's (drop it)".into());
        }
        for w in &self.workloads {
            w.grpc_message()?;
            if !w.keepalive {
                return Err(format!(
                    "grpc: workload {:?} has keepalive = false, and a channel is kept",
                    w.name
                ));
            }
        }
        Ok(())
    }

    /// The load: its times, its mode's own key, the counts.
    fn check_load(&self) -> Result<(), String> {
        if let Some(memory) = &self.memory {
            let bytes = crate::units::parse_bytes(memory)
                .map_err(|e| format!("memory = {memory:?}: {e}"))?;
            if bytes < 4 << 20 {
                return Err(format!("memory = {memory:?}: at least 4M"));
            }
        }
        crate::lab::budget::check_keys(&self.cpus, self.cpuset.as_ref())?;
        self.check_streams()?;
        self.check_tls()?;
        self.check_grpc()?;
        if let Some(r) = self.replicas {
            int_in("replicas", u64::from(r), 1, u64::from(MAX_REPLICAS))?;
        }
        // Closed and rate modes measure for `duration`; count mode ignores it.
        let timed = self.mode != LoadMode::Count;
        if timed {
            seconds_in("duration", self.duration, Above(0.0), MAX_DURATION_S)?;
        }
        seconds_in("warmup", self.warmup, AtLeast(0.0), MAX_WARMUP_S)?;
        seconds_in("timeout", self.timeout, Above(0.0), MAX_TIMEOUT_S)?;
        seconds_in(
            "ready_timeout",
            self.ready_timeout,
            Above(0.0),
            MAX_TIMEOUT_S,
        )?;
        if let Some(rate) = self.rate {
            number_in("rate", rate, Above(0.0), MAX_RATE, "requests/s")?;
        }
        match (self.mode, self.rate, self.requests) {
            (LoadMode::Rate, None, _) => {
                return Err(format!(
                    "mode = \"rate\" needs rate (in (0, {MAX_RATE}] requests/s)"
                ))
            }
            (LoadMode::Count, _, None) => {
                return Err(format!(
                    "mode = \"count\" needs requests (in [1, {MAX_REQUESTS}])"
                ))
            }
            _ => {}
        }
        if let Some(requests) = self.requests {
            int_in("requests", requests, 1, MAX_REQUESTS)?;
        }
        if let Some(n) = self.warmup_connections {
            int_in("warmup_connections", n.into(), 1, MAX_CONCURRENCY.into())?;
        }
        if let Some(settle) = self.settle {
            if self.mode != LoadMode::Closed {
                return Err("settle applies to mode = \"closed\"".into());
            }
            seconds_in("settle", settle, Above(0.0), MAX_TIMEOUT_S)?;
        }
        int_in(
            "repetitions",
            self.repetitions.into(),
            1,
            MAX_REPETITIONS.into(),
        )?;
        int_in(
            "load_threads",
            self.load_threads.into(),
            1,
            MAX_LOAD_THREADS.into(),
        )?;
        Ok(())
    }

    /// Pool sizes, concurrency levels, the latency bound and the store.
    fn check_pools(&self) -> Result<(), String> {
        for &w in &self.workers {
            int_in(
                "workers",
                w.into(),
                1,
                crate::arch::listen::MAX_WORKERS as u64,
            )?;
        }
        for &c in &self.concurrency {
            int_in("concurrency", c.into(), 1, MAX_CONCURRENCY.into())?;
        }
        for (arch, &max) in &self.max_concurrency {
            int_in(
                &format!("max_concurrency.{arch}"),
                max.into(),
                1,
                MAX_CONCURRENCY.into(),
            )?;
        }
        number_in(
            "p99_bound_ms",
            self.p99_bound_ms,
            Above(0.0),
            MAX_P99_BOUND_MS,
            "ms",
        )?;
        if let Some(store) = &self.store {
            check_store(store).map_err(|e| format!("store = {store:?}: {e}"))?;
        }
        Ok(())
    }

    /// Each workload, once each, with concurrency levels; returns their names.
    fn check_workloads(&self) -> Result<std::collections::BTreeSet<&str>, String> {
        let timed = self.mode != LoadMode::Count;
        let mut names = std::collections::BTreeSet::new();
        for w in &self.workloads {
            if !names.insert(w.name.as_str()) {
                return Err(format!("workload {:?} appears twice", w.name));
            }
            w.check_ranges(self.protocol, timed)
                .map_err(|e| format!("workload {:?}: {e}", w.name))?;
            if let (Some(plan), false) = (&w.plan, self.mode == LoadMode::Rate) {
                return Err(format!(
                    "workload {:?}: plan = {plan:?} needs mode = \"rate\"",
                    w.name
                ));
            }
            if w.concurrency.is_none() && self.concurrency.is_empty() {
                return Err(format!(
                    "workload {:?}: no concurrency levels (set concurrency = [...])",
                    w.name
                ));
            }
        }
        Ok(names)
    }

    /// Variants and external targets: valid, named once, on known workloads.
    fn check_targets(&self, names: &std::collections::BTreeSet<&str>) -> Result<(), String> {
        let mut series = std::collections::BTreeSet::new();
        for v in &self.variants {
            v.check()
                .map_err(|e| format!("variant {:?}: {e}", v.name))?;
            if !series.insert(v.name.as_str()) {
                return Err(format!("variant {:?} appears twice", v.name));
            }
        }
        for ext in &self.external {
            if series.contains(ext.name.as_str()) {
                return Err(format!(
                    "external {:?}: a variant has that name already",
                    ext.name
                ));
            }
            if ext.command.trim().is_empty() || ext.url.is_empty() {
                return Err(format!("external {:?}: needs command and url", ext.name));
            }
            if let Some(t) = ext.ready_timeout {
                seconds_in("ready_timeout", t, Above(0.0), MAX_TIMEOUT_S)
                    .map_err(|e| format!("external {:?}: {e}", ext.name))?;
            }
            if let Some(list) = &ext.workloads {
                if let Some(bad) = list.iter().find(|n| !names.contains(n.as_str())) {
                    return Err(format!("external {:?}: unknown workload {bad:?}", ext.name));
                }
            }
            ext.check_pool(&self.workers)
                .map_err(|e| format!("external {:?}: {e}", ext.name))?;
            if let Some(q) = ext.cpus {
                crate::lab::budget::check_cpus(q)
                    .map_err(|e| format!("external {:?}: cpus = {e}", ext.name))?;
                if self.cpus.len() > 1 {
                    return Err(format!(
                        "external {:?}: cpus of its own and the experiment's axis of cpus: \
                         give one",
                        ext.name
                    ));
                }
            }
            if let Some(r) = ext.replicas {
                int_in("replicas", u64::from(r), 1, u64::from(MAX_REPLICAS))
                    .map_err(|e| format!("external {:?}: {e}", ext.name))?;
            }
        }
        Ok(())
    }

    /// The most connections any point (or warm-up) opens at once.
    pub fn max_connections(&self) -> u32 {
        self.points()
            .iter()
            .map(|p| p.concurrency)
            .chain(self.warmup_connections)
            .max()
            .unwrap_or(1)
    }

    /// Expands the grid into the points to run, in run order: with an axis of quotas
    /// (`cpus = [0.5, 1]`), every point once per quota, each server a series of its own.
    pub fn points(&self) -> Vec<PointSpec> {
        let mut points = self.points_of_one_budget();
        if !self.streams.is_empty() {
            points = self
                .streams
                .iter()
                .flat_map(|&s| points.iter().filter_map(move |p| p.with_streams(s)))
                .collect();
        }
        if self.cpus.len() < 2 {
            return points;
        }
        self.cpus
            .iter()
            .flat_map(|&q| points.iter().map(move |p| p.under_quota(q)))
            .collect()
    }

    fn points_of_one_budget(&self) -> Vec<PointSpec> {
        let mut points = Vec::new();
        for workload in &self.workloads {
            let levels = workload.concurrency.as_ref().unwrap_or(&self.concurrency);
            let plain = self.archs.iter().map(|&arch| TargetSpec::Ours {
                arch,
                variant: None,
            });
            let variants = self.variants.iter().map(|v| TargetSpec::Ours {
                arch: v.arch,
                variant: Some(v.clone()),
            });
            for target in plain.chain(variants) {
                let TargetSpec::Ours { arch, .. } = &target else {
                    continue;
                };
                let worker_choices: Vec<Option<u32>> = if self.workers.is_empty() || !arch.pooled()
                {
                    vec![None]
                } else {
                    self.workers.iter().copied().map(Some).collect()
                };
                for workers in worker_choices {
                    for &concurrency in levels {
                        if self
                            .max_concurrency
                            .get(arch)
                            .is_some_and(|&max| concurrency > max)
                        {
                            continue;
                        }
                        points.push(PointSpec {
                            target: target.clone(),
                            workers,
                            workload: workload.clone(),
                            concurrency,
                            cpus: None,
                            streams: None,
                        });
                    }
                }
            }
            for ext in self
                .external
                .iter()
                .flat_map(ExternalTarget::per_thread_count)
            {
                if ext
                    .workloads
                    .as_ref()
                    .is_some_and(|only| !only.contains(&workload.name))
                {
                    continue;
                }
                let values = ext.worker_values(&self.workers);
                let worker_choices: Vec<Option<u32>> = if values.is_empty() {
                    vec![None]
                } else {
                    values.iter().copied().map(Some).collect()
                };
                for workers in worker_choices {
                    for &concurrency in levels {
                        points.push(PointSpec {
                            target: TargetSpec::External(ext.clone()),
                            workers,
                            workload: workload.clone(),
                            concurrency,
                            cpus: None,
                            streams: None,
                        });
                    }
                }
            }
        }
        points
    }

    /// The settings every point of this experiment shares, for the lab.
    pub fn setup(&self) -> Setup {
        Setup {
            mode: self.mode,
            duration: self.duration,
            requests: self.requests,
            rate: self.rate,
            warmup: self.warmup,
            warmup_connections: self.warmup_connections,
            settle: self.settle,
            repetitions: self.repetitions,
            timeout: self.timeout,
            load_threads: self.load_threads,
            store: self.store.clone(),
            protocol: self.protocol,
            ready_timeout: self.ready_timeout,
            net: self.net_spec(),
            cpus: match self.cpus[..] {
                [one] => Some(one),
                _ => None,
            },
            replicas: self.replicas.unwrap_or(1),
            cpuset: self.cpuset.as_ref().map(|l| l.cpus().to_vec()),
            memory: self
                .memory
                .as_deref()
                .and_then(|m| crate::units::parse_bytes(m).ok()),
            tls: self.tls,
            grpc: self.grpc,
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

    /// A rough time estimate for the whole plan (for the progress line), in seconds.
    pub fn estimated_seconds(&self, plan: &[PointSpec]) -> f64 {
        plan.iter()
            .map(|p| {
                let measured = match self.mode {
                    LoadMode::Count => 1.0,
                    _ => self.duration_of(&p.workload),
                };
                (measured + self.warmup + 0.3) * f64::from(self.repetitions)
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_parses_and_expands() {
        for (name, text) in PRESETS {
            let e = Experiment::from_toml(text, name).unwrap();
            assert_eq!(&e.name, name);
            assert!(!e.points().is_empty(), "{name} has no points");
        }
    }

    /// `sweep --list` shows the description: a preset that names its architectures there
    /// names every one it runs.
    #[test]
    fn c10k_description_names_every_arch_it_runs() {
        let text = PRESETS.iter().find(|(name, _)| *name == "c10k").unwrap().1;
        let e = Experiment::from_toml(text, "c10k").unwrap();
        assert!(e.archs.len() >= 5, "{:?}", e.archs);
        for arch in &e.archs {
            assert!(
                e.description.contains(arch.name()),
                "{arch:?}: {}",
                e.description
            );
        }
    }

    #[test]
    fn experiments_round_trip_through_json() {
        for (name, text) in PRESETS {
            let e = Experiment::from_toml(text, name).unwrap();
            let json = serde_json::to_string(&e).unwrap();
            let back: Experiment = serde_json::from_str(&json).unwrap();
            assert_eq!(back, e, "{name}");
        }
    }

    #[test]
    fn sleep_route_gives_wait() {
        assert_eq!(sleep_ms_of_route("/sleep?ms=100"), Some(100.0));
        assert_eq!(sleep_ms_of_route("/fib?n=3"), None);
        assert_eq!(
            sleep_ms_of_route("/work?cpu_us=200&wait_ms=30&dist=exp"),
            Some(30.0)
        );
        assert_eq!(sleep_ms_of_route("/work?cpu_us=200"), None);
        assert_eq!(sleep_ms_of_route("/work?ms=5"), None);
        let w: Workload = toml::from_str("name = \"s\"\nroute = \"/sleep?x=1&ms=7\"").unwrap();
        assert_eq!(w.wait_ms(), 7.0);
    }

    #[test]
    fn bad_input_is_a_usage_error() {
        let unknown_arch = "name='x'\narchs=['fibers']\nconcurrency=[1]\n[[workload]]\nname='h'\n";
        let err = Experiment::from_toml(unknown_arch, "t").unwrap_err();
        assert!(err.downcast_ref::<crate::UsageError>().is_some());
        assert!(err.to_string().contains("unknown arch"), "{err}");
        let typo = "name='x'\narchs=['epoll']\nconcurency=[1]\n[[workload]]\nname='h'\n";
        let err = Experiment::from_toml(typo, "t").unwrap_err();
        assert!(err.to_string().contains("concurency"), "{err}");
        assert!(Experiment::load("no-such-preset").is_err());
    }

    #[test]
    fn archs_are_the_enum_or_all() {
        let all = "name='x'\narchs='all'\nconcurrency=[1]\n[[workload]]\nname='h'\n";
        let e = Experiment::from_toml(all, "t").unwrap();
        assert_eq!(e.archs, Arch::all());
        let listed =
            "name='x'\narchs=['epoll','preforked']\nconcurrency=[1]\n[[workload]]\nname='h'\n";
        let e = Experiment::from_toml(listed, "t").unwrap();
        assert_eq!(e.archs, [Arch::Epoll, Arch::Preforked]);
        for bad in ["archs=['fibers']", "archs='some'", "archs=3"] {
            let text = format!("name='x'\n{bad}\nconcurrency=[1]\n[[workload]]\nname='h'\n");
            let err = Experiment::from_toml(&text, "t").unwrap_err().to_string();
            assert!(err.starts_with("t: line 2: archs: "), "{bad}: {err}");
            assert!(err.contains(&Arch::names()), "{bad}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
        let bad_max = "name='x'\narchs=['epoll']\nmax_concurrency={fibers=3}\nconcurrency=[1]\n[[workload]]\nname='h'\n";
        let err = Experiment::from_toml(bad_max, "t").unwrap_err().to_string();
        assert!(
            err.contains("max_concurrency: unknown arch \"fibers\""),
            "{err}"
        );
    }

    #[test]
    fn grid_expands_workers_only_for_pools_and_respects_limits() {
        let text = r#"
            name = "g"
            archs = ["threaded", "prethreaded", "iterative"]
            workers = [1, 4]
            concurrency = [10, 500]
            max_concurrency = { iterative = 200 }
            [[workload]]
            name = "hello"
        "#;
        let e = Experiment::from_toml(text, "g").unwrap();
        let points = e.points();
        // threaded: 2 levels; prethreaded: 2 workers x 2 levels; iterative: 1 level.
        assert_eq!(points.len(), 2 + 4 + 1);
        assert!(points
            .iter()
            .filter(|p| p.target.name() == "threaded")
            .all(|p| p.workers.is_none()));
    }

    #[test]
    fn an_axis_of_quotas_makes_a_series_of_each_server_per_quota() {
        let e = Experiment::from_toml(
            "name = \"a\"\narchs = [\"epoll\"]\nconcurrency = [1, 4]\ncpus = [0.5, 2]\n\
             [[workload]]\nname = \"h\"\nroute = \"/hello\"\n\
             [[external]]\nname = \"x\"\ncommand = \"x {port}\"\nurl = \"http://127.0.0.1:{port}\"\n",
            "test",
        )
        .unwrap();
        let points = e.points();
        let named: Vec<(String, Option<f64>, u32)> = points
            .iter()
            .map(|p| (p.target.name().to_string(), p.cpus, p.concurrency))
            .collect();
        assert_eq!(
            named,
            [
                ("epoll@0.5cpu".to_string(), Some(0.5), 1),
                ("epoll@0.5cpu".to_string(), Some(0.5), 4),
                ("x@0.5cpu".to_string(), Some(0.5), 1),
                ("x@0.5cpu".to_string(), Some(0.5), 4),
                ("epoll@2cpu".to_string(), Some(2.0), 1),
                ("epoll@2cpu".to_string(), Some(2.0), 4),
                ("x@2cpu".to_string(), Some(2.0), 1),
                ("x@2cpu".to_string(), Some(2.0), 4),
            ]
        );
        // Each point's plan carries its quota; the experiment's setup has none of its own.
        assert_eq!(e.setup().cpus, None);
        assert_eq!(points[0].plan(&e.setup()).setup.cpus, Some(0.5));
        assert_eq!(points[7].plan(&e.setup()).setup.cpus, Some(2.0));
        // One value is the setup's, and no series is renamed.
        let one = Experiment::from_toml(
            "name = \"a\"\narchs = [\"epoll\"]\nconcurrency = [1]\ncpus = 0.5\nreplicas = 2\n\
             [[workload]]\nname = \"h\"\nroute = \"/hello\"\n",
            "test",
        )
        .unwrap();
        assert_eq!(one.points()[0].target.name(), "epoll");
        assert_eq!((one.setup().cpus, one.setup().replicas), (Some(0.5), 2));
    }

    #[test]
    fn variants_are_series_of_their_own_after_the_plain_archs() {
        let text = r#"
            name = "v"
            archs = ["reactors", "epoll"]
            workers = [1, 2]
            concurrency = [10, 500]
            max_concurrency = { reactors = 100 }
            [[variant]]
            name = "reactors-shared"
            arch = "reactors"
            args = ["--accept", "shared"]
            [[workload]]
            name = "hello"
        "#;
        let e = Experiment::from_toml(text, "v").unwrap();
        let points = e.points();
        let names: Vec<(&str, Option<u32>, u32)> = points
            .iter()
            .map(|p| (p.target.name(), p.workers, p.concurrency))
            .collect();
        // reactors is pooled (workers 1 and 2) and capped at 100 connections; so is its variant.
        assert_eq!(
            names,
            [
                ("reactors", Some(1), 10),
                ("reactors", Some(2), 10),
                ("epoll", None, 10),
                ("epoll", None, 500),
                ("reactors-shared", Some(1), 10),
                ("reactors-shared", Some(2), 10),
            ]
        );
        assert_eq!(
            points[5].target,
            TargetSpec::Ours {
                arch: Arch::Reactors,
                variant: Some(Variant {
                    name: "reactors-shared".into(),
                    arch: Arch::Reactors,
                    args: vec!["--accept".into(), "shared".into()],
                }),
            }
        );
    }
}
