//! `sweetspot load`: a load generator in the class of wrk, wrk2 and ab.
//!
//! Three ways to drive a target: closed loop (`-c` connections for `-d`, one batch in flight on
//! each, like wrk), fixed count (`-n` requests in total, exactly, like ab), and constant rate
//! (`-R`, wrk2's coordinated-omission correction, with the uncorrected view beside it). Targets
//! are HTTP/1.1 URLs or `tcp://` line-echo servers.
//!
//! Arguments are validated in two stages, as ripgrep does: clap parses [`LoadArgs`], then
//! [`LoadConfig::from_args`] turns them into a checked config (bad input: one line, exit 2).
//! [`run`] is the library entry point the sweep calls in-process; [`run_load`] adds the command
//! line's output. Neighbours: [`engine`] (the event loops), [`framing`] (where responses end),
//! [`stats`] (histograms and counters), [`report`] (the result), [`human`] and [`json`] (output).

pub mod engine;
pub mod error;
pub mod framing;
pub mod hlog;
pub mod human;
pub mod json;
pub mod plan;
pub mod progress;
pub mod report;
pub mod request;
pub mod segment;
pub mod stats;
pub mod steps;
pub mod target;

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::{Duration, Instant};

use anyhow::Context;

pub use error::{FailureKind, FramingError};
pub use report::LoadReport;
pub use stats::{ErrorCounts, LatencySummary};
pub use target::Target;

use crate::usage;
use engine::{RunPlan, WorkerShare};
use request::RequestBytes;
use stats::ThreadStats;

const MAX_CONNECTIONS: u64 = 1_000_000;
const MAX_THREADS: u64 = 1024;
const MAX_REQUESTS: u64 = 1_000_000_000_000;
const MAX_RATE: f64 = 100_000_000.0;
const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);
const MAX_TIMEOUT: Duration = Duration::from_secs(3600);
const MAX_PIPELINE: u64 = 1024;
const MAX_MESSAGE_BYTES: u64 = 1 << 20;
const DEFAULT_DURATION: Duration = Duration::from_secs(10);
/// The pre-flight connection gives up after this long, so an unreachable target fails fast.
const PREFLIGHT_CONNECT_LIMIT: Duration = Duration::from_secs(3);

/// Flags of `sweetspot load`.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// http://HOST:PORT/PATH or tcp://HOST:PORT (echo protocol).
    pub target: String,
    /// Connections to keep open.
    #[arg(short = 'c', long = "connections", default_value_t = 10)]
    pub connections: u64,
    /// Threads, each an event loop over its share of the connections [default: one per core].
    #[arg(short = 't', long = "threads")]
    pub threads: Option<u64>,
    /// How long to run (e.g. 10s, 500ms, 2m) [default: 10s].
    #[arg(short = 'd', long = "duration", conflicts_with = "requests")]
    pub duration: Option<String>,
    /// Send exactly this many requests in total, then stop.
    #[arg(short = 'n', long = "requests")]
    pub requests: Option<u64>,
    /// Constant rate in requests/s over all connections (latency from intended send times).
    #[arg(
        short = 'R',
        long = "rate",
        conflicts_with = "requests",
        allow_negative_numbers = true
    )]
    pub rate: Option<f64>,
    /// A request without a complete response after this long is a timeout.
    #[arg(long, default_value = "2s")]
    pub timeout: String,
    /// Open a new connection for every request.
    #[arg(long)]
    pub no_keepalive: bool,
    /// HTTP method.
    #[arg(short = 'm', long = "method", default_value = "GET")]
    pub method: String,
    /// An extra request header "Name: value" (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Request body; @PATH reads it from a file.
    #[arg(long)]
    pub body: Option<String>,
    /// Requests sent back to back on a connection before waiting for their responses.
    #[arg(long, default_value_t = 1)]
    pub pipeline: u64,
    /// Bytes per echo query (tcp:// targets), the last one a newline.
    #[arg(long = "message", value_name = "BYTES", default_value_t = 64)]
    pub message: u64,
    /// Write the report as JSON to PATH, or to stdout with "-".
    #[arg(long, value_name = "PATH")]
    pub json: Option<String>,
    /// Pin load threads to these CPUs, round robin (e.g. --pin 1 or --pin 0,1).
    #[arg(long = "pin", value_name = "CPUS", value_delimiter = ',')]
    pub pin: Vec<usize>,
    /// No human summary (JSON only, if asked for).
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Be worker I of N of a distributed run: take this worker's share of -c and of -R or -n
    /// (shares add up exactly); merge the workers' JSON with `sweetspot merge`.
    #[arg(long, value_name = "I/N")]
    pub segment: Option<String>,
    /// Wait until this wall-clock time (Unix seconds), then start; a late worker says by how much.
    #[arg(long, value_name = "UNIX_TIME", conflicts_with = "start_in")]
    pub start_at: Option<String>,
    /// Wait this long (e.g. 5s), then start.
    #[arg(long, value_name = "DURATION")]
    pub start_in: Option<String>,
    /// Write an HdrHistogram interval log (one histogram per second) to PATH.
    #[arg(long, value_name = "PATH")]
    pub hlog: Option<std::path::PathBuf>,
}

/// Options of one run beyond what the engine needs: its place in a distributed run, when to
/// start, and the interval log.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub segment: Option<SegmentRun>,
    /// Start at this wall-clock time.
    pub start_at: Option<std::time::SystemTime>,
    pub hlog: Option<std::path::PathBuf>,
}

/// A segment of a distributed run: its description, and the whole run's connection count and
/// rate, which the engine uses so the segment's connections keep their global send phases.
#[derive(Debug, Clone)]
pub struct SegmentRun {
    pub info: segment::SegmentInfo,
    pub first_connection: usize,
}

impl RunOptions {
    /// Validates the scale-out flags and narrows `config` (the whole run) to this segment.
    pub fn from_args(args: &LoadArgs, config: &mut LoadConfig) -> anyhow::Result<RunOptions> {
        let start_at = match (&args.start_at, &args.start_in) {
            (Some(at), _) => Some(segment::parse_start_at(at).map_err(usage)?),
            (None, Some(text)) => {
                let wait = parse_duration(text).map_err(|e| usage(format!("--start-in: {e}")))?;
                if wait > MAX_DURATION {
                    return Err(usage("--start-in must be at most 7 days"));
                }
                Some(std::time::SystemTime::now() + wait)
            }
            (None, None) => None,
        };
        let segment = match &args.segment {
            None => None,
            Some(text) => {
                let seg = segment::Segment::parse(text).map_err(usage)?;
                Some(narrow_to_segment(config, seg)?)
            }
        };
        Ok(RunOptions {
            segment,
            start_at,
            hlog: args.hlog.clone(),
        })
    }
}

/// Narrows a whole-run config to segment `seg`: its share of the connections and of `-n`, and
/// in rate mode of the rate (`R * c_I / C`, so the rates add up to `R`).
pub fn narrow_to_segment(
    config: &mut LoadConfig,
    seg: segment::Segment,
) -> anyhow::Result<SegmentRun> {
    let total_connections = config.connections as u64;
    let connections = seg.share(total_connections);
    if connections == 0 {
        return Err(usage(format!(
            "--segment {}/{}: -c {total_connections} leaves this worker no connection (use -c {} or more)",
            seg.index, seg.count, seg.count
        )));
    }
    let (total_rate, total_requests, requests) = match &mut config.mode {
        Mode::Rate { rate, .. } => {
            let total = *rate;
            *rate = total * connections as f64 / total_connections as f64;
            (Some(total), None, None)
        }
        Mode::Count { requests } => {
            let total = *requests;
            let mine = seg.share(total);
            if mine == 0 {
                return Err(usage(format!(
                    "--segment {}/{}: -n {total} leaves this worker no request (use -n {} or more)",
                    seg.index, seg.count, seg.count
                )));
            }
            *requests = mine;
            (None, Some(total), Some(mine))
        }
        Mode::Closed { .. } => (None, None, None),
    };
    config.connections = connections as usize;
    config.threads = config.threads.min(config.connections);
    Ok(SegmentRun {
        info: segment::SegmentInfo {
            index: seg.index,
            count: seg.count,
            connections,
            total_connections,
            total_rate,
            total_requests,
            requests,
            host: segment::host_name(),
            cores: default_threads(),
        },
        first_connection: seg.first(total_connections) as usize,
    })
}

/// How a run decides what to send and when to stop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// Every connection sends its next request as soon as the last one is answered.
    Closed { duration: Duration },
    /// Exactly `requests` requests in total, then stop.
    Count { requests: u64 },
    /// `rate` requests/s in total, each with an intended send time.
    Rate { rate: f64, duration: Duration },
}

impl Mode {
    /// The planned length of the run (none for count mode).
    pub fn duration(&self) -> Option<Duration> {
        match self {
            Mode::Closed { duration } | Mode::Rate { duration, .. } => Some(*duration),
            Mode::Count { .. } => None,
        }
    }

    /// "closed", "count" or "rate".
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Closed { .. } => "closed",
            Mode::Count { .. } => "count",
            Mode::Rate { .. } => "rate",
        }
    }
}

/// A validated load run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub target: Target,
    pub connections: usize,
    /// Event-loop threads; clamped to `connections` at run time.
    pub threads: usize,
    pub mode: Mode,
    pub timeout: Duration,
    pub keepalive: bool,
    pub method: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub pipeline: usize,
    /// Bytes per echo query, newline included.
    pub message_len: usize,
    /// CPUs to pin load threads to, round robin; empty: no pinning.
    pub pin_cpus: Vec<usize>,
}

/// One thread per core, as wrk's users usually choose.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl LoadConfig {
    /// A config with wrk-like defaults: one thread per core (at most one per connection),
    /// 2 s timeout, keep-alive, GET, no pipelining, 64-byte echo messages.
    pub fn new(target: Target, connections: usize, mode: Mode) -> LoadConfig {
        LoadConfig {
            target,
            connections,
            threads: default_threads().min(connections.max(1)),
            mode,
            timeout: Duration::from_secs(2),
            keepalive: true,
            method: "GET".to_string(),
            headers: Vec::new(),
            body: Vec::new(),
            pipeline: 1,
            message_len: 64,
            pin_cpus: Vec::new(),
        }
    }

    /// Validates command-line flags into a config; every problem is a usage error (exit 2).
    pub fn from_args(args: &LoadArgs) -> anyhow::Result<LoadConfig> {
        let target = Target::parse(&args.target)?;
        if args.connections == 0 || args.connections > MAX_CONNECTIONS {
            return Err(usage(format!(
                "-c must be between 1 and {MAX_CONNECTIONS}, not {}",
                args.connections
            )));
        }
        let connections = args.connections as usize;
        let threads = match args.threads {
            Some(0) => return Err(usage("-t must be at least 1")),
            Some(t) if t > MAX_THREADS => {
                return Err(usage(format!("-t must be at most {MAX_THREADS}, not {t}")))
            }
            Some(t) => t as usize,
            None => default_threads(),
        }
        .min(connections);
        let duration = match &args.duration {
            Some(text) => parse_duration(text).map_err(|e| usage(format!("-d: {e}")))?,
            None => DEFAULT_DURATION,
        };
        if duration.is_zero() || duration > MAX_DURATION {
            return Err(usage("-d must be more than 0 and at most 7 days"));
        }
        let mode = match (args.requests, args.rate) {
            (Some(n), _) if n == 0 || n > MAX_REQUESTS => {
                return Err(usage(format!(
                    "-n must be between 1 and {MAX_REQUESTS}, not {n}"
                )))
            }
            (Some(requests), _) => Mode::Count { requests },
            (None, Some(rate)) if !(rate.is_finite() && rate > 0.0 && rate <= MAX_RATE) => {
                return Err(usage(format!(
                    "-R must be a rate above 0 and at most {MAX_RATE}, not {rate}"
                )))
            }
            (None, Some(rate)) => Mode::Rate { rate, duration },
            (None, None) => Mode::Closed { duration },
        };
        let timeout =
            parse_duration(&args.timeout).map_err(|e| usage(format!("--timeout: {e}")))?;
        if timeout.is_zero() || timeout > MAX_TIMEOUT {
            return Err(usage("--timeout must be more than 0 and at most 1h"));
        }
        if args.pipeline == 0 || args.pipeline > MAX_PIPELINE {
            return Err(usage(format!(
                "--pipeline must be between 1 and {MAX_PIPELINE}, not {}",
                args.pipeline
            )));
        }
        if args.no_keepalive && args.pipeline > 1 {
            return Err(usage("--pipeline needs keep-alive (drop --no-keepalive)"));
        }
        if args.message == 0 || args.message > MAX_MESSAGE_BYTES {
            return Err(usage(format!(
                "--message must be between 1 and {MAX_MESSAGE_BYTES} bytes, not {}",
                args.message
            )));
        }
        let method = args.method.clone();
        if method.is_empty() || !method.bytes().all(is_token_byte) {
            return Err(usage(format!("-m: invalid method {method:?}")));
        }
        let headers = args
            .headers
            .iter()
            .map(|h| parse_header(h).map_err(|e| usage(format!("-H {h:?}: {e}"))))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let body = match &args.body {
            None => Vec::new(),
            Some(text) => match text.strip_prefix('@') {
                Some(path) => {
                    request::read_body_file(path).map_err(|e| usage(format!("--body: {e}")))?
                }
                None => text.clone().into_bytes(),
            },
        };
        if matches!(target, Target::Echo { .. }) && (!headers.is_empty() || !body.is_empty()) {
            return Err(usage("-H and --body apply to http:// targets only"));
        }
        let cpus = crate::sys::usable_cpus();
        if let Some(cpu) = args.pin.iter().find(|c| !cpus.contains(c)) {
            return Err(usage(format!(
                "--pin: no CPU {cpu} (this process may run on CPUs {cpus:?})"
            )));
        }
        Ok(LoadConfig {
            target,
            connections,
            threads,
            mode,
            timeout,
            keepalive: !args.no_keepalive,
            method,
            headers,
            body,
            pipeline: args.pipeline as usize,
            message_len: args.message as usize,
            pin_cpus: args.pin.clone(),
        })
    }

    /// Checks a config built in code (the sweep's) against the same limits as the flags.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.connections == 0 || self.connections as u64 > MAX_CONNECTIONS {
            return Err(usage(format!(
                "connections must be between 1 and {MAX_CONNECTIONS}, not {}",
                self.connections
            )));
        }
        if self.threads == 0 || self.threads as u64 > MAX_THREADS {
            return Err(usage(format!(
                "threads must be between 1 and {MAX_THREADS}, not {}",
                self.threads
            )));
        }
        match self.mode {
            Mode::Count { requests } if requests == 0 || requests > MAX_REQUESTS => {
                return Err(usage(format!(
                    "requests must be between 1 and {MAX_REQUESTS}"
                )))
            }
            Mode::Rate { rate, .. } if !(rate.is_finite() && rate > 0.0 && rate <= MAX_RATE) => {
                return Err(usage(format!(
                    "rate must be above 0 and at most {MAX_RATE}"
                )))
            }
            Mode::Closed { duration } | Mode::Rate { duration, .. }
                if duration.is_zero() || duration > MAX_DURATION =>
            {
                return Err(usage("duration must be more than 0 and at most 7 days"))
            }
            _ => {}
        }
        if self.timeout.is_zero() || self.timeout > MAX_TIMEOUT {
            return Err(usage("timeout must be more than 0 and at most 1h"));
        }
        if self.pipeline == 0 || self.pipeline as u64 > MAX_PIPELINE {
            return Err(usage(format!(
                "pipeline must be between 1 and {MAX_PIPELINE}"
            )));
        }
        if !self.keepalive && self.pipeline > 1 {
            return Err(usage("pipelining needs keep-alive"));
        }
        if self.message_len == 0 || self.message_len as u64 > MAX_MESSAGE_BYTES {
            return Err(usage(format!(
                "message length must be between 1 and {MAX_MESSAGE_BYTES} bytes"
            )));
        }
        Ok(())
    }
}

/// Parses `10s`, `500ms`, `250us`, `2m`, `1h`, `1.5s`; a bare number means seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("invalid duration {text:?} (try 10s, 500ms, 2m)"))?;
    let seconds = match unit.trim() {
        "" | "s" | "sec" | "secs" => value,
        "ms" => value / 1e3,
        "us" | "µs" => value / 1e6,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?} (use us, ms, s, m, h)"
            ))
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("duration {text:?} out of range"))
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn parse_header(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once(':')
        .ok_or_else(|| "expected \"Name: value\"".to_string())?;
    let name = name.trim();
    if name.is_empty() || !name.bytes().all(is_token_byte) {
        return Err(format!("invalid header name {name:?}"));
    }
    let value = value.trim();
    if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return Err("header values cannot contain CR, LF or NUL".into());
    }
    Ok((name.to_string(), value.to_string()))
}

/// Runs a load test and returns what it measured. `stop` set to true ends the run early and
/// cleanly, with what was measured so far. An unreachable target fails within a few seconds.
pub fn run(config: &LoadConfig, stop: Option<&AtomicBool>) -> anyhow::Result<LoadReport> {
    run_observed(config, stop, None, &RunOptions::default())
}

/// [`run`] as one segment of a distributed run, or with a start time or an interval log.
pub fn run_with(
    config: &LoadConfig,
    stop: Option<&AtomicBool>,
    options: &RunOptions,
) -> anyhow::Result<LoadReport> {
    run_observed(config, stop, None, options)
}

/// [`run`], with a live progress display fed from the workers' counters.
fn run_observed(
    config: &LoadConfig,
    stop: Option<&AtomicBool>,
    progress: Option<&progress::LiveProgress>,
    options: &RunOptions,
) -> anyhow::Result<LoadReport> {
    config.validate()?;
    let threads = config.threads.min(config.connections);
    let addr = preflight_connect(&config.target, config.timeout)?;
    ensure_file_limit(config.connections)?;
    let request = RequestBytes::build(
        &config.target,
        &config.method,
        &config.headers,
        &config.body,
        config.keepalive,
        config.message_len,
        config.pipeline,
    );
    let mut shares = split_shares(config.connections, threads, &config.mode);
    // A segment's connections keep their numbers in the whole run, and the engine sees the
    // whole run's rate over all its connections: each connection then sends at R / C with the
    // phase it would have in one process (the segment's own rate is R * c_I / C).
    let mut engine_config = None;
    let mut total_connections = config.connections;
    if let Some(seg) = &options.segment {
        for share in &mut shares {
            share.first_connection += seg.first_connection;
        }
        total_connections = seg.info.total_connections as usize;
        if let (Mode::Rate { duration, .. }, Some(rate)) = (config.mode, seg.info.total_rate) {
            let mut whole = config.clone();
            whole.mode = Mode::Rate { rate, duration };
            engine_config = Some(whole);
        }
    }
    if let Some(path) = &options.hlog {
        // Fail before waiting for the start time; the log is written from the real start.
        std::fs::File::create(path)
            .map_err(|e| usage(format!("--hlog: cannot create {}: {e}", path.display())))?;
    }
    let late = options.start_at.map(segment::wait_until);
    if let (Some((late, true)), Some(at)) = (late, options.start_at) {
        eprintln!(
            "sweetspot: started {:.3} s late (--start-at {:.3})",
            late.as_secs_f64(),
            segment::unix_seconds(at)
        );
    }
    let counters: Vec<AtomicU64> = (0..threads).map(|_| AtomicU64::new(0)).collect();
    let start = Instant::now();
    let started_at = std::time::SystemTime::now();
    let (mut hlog, intervals) = match &options.hlog {
        Some(path) => {
            let comment = format!(
                "[sweetspot load {} mode={} connections={}{}]",
                config.target,
                config.mode.name(),
                config.connections,
                options.segment.as_ref().map_or(String::new(), |s| format!(
                    " segment={}/{}",
                    s.info.index, s.info.count
                ))
            );
            let (writer, tx) = hlog::HlogWriter::create(path, started_at, &[comment], threads)?;
            (Some(writer), Some(tx))
        }
        None => (None, None),
    };
    let plan = RunPlan {
        config: engine_config.as_ref().unwrap_or(config),
        addr,
        request: &request,
        start,
        deadline: config.mode.duration().map(|d| start + d),
        stop,
        total_connections,
        intervals,
    };
    let mut hlog_error = None;
    let results: Vec<std::io::Result<ThreadStats>> = std::thread::scope(|scope| {
        let handles: Vec<_> = shares
            .into_iter()
            .zip(&counters)
            .map(|(share, completed)| {
                let plan = &plan;
                std::thread::Builder::new()
                    .name(format!("load-{}", share.index))
                    .spawn_scoped(scope, move || engine::run_worker(plan, share, completed))
            })
            .collect();
        if progress.is_some() || hlog.is_some() {
            let mut next_update = Instant::now();
            while handles
                .iter()
                .any(|h| h.as_ref().is_ok_and(|h| !h.is_finished()))
            {
                match hlog.as_mut().map(|w| w.pump(Duration::from_millis(50))) {
                    Some(Ok(())) => {}
                    Some(Err(e)) => {
                        hlog_error = Some(e);
                        hlog = None;
                    }
                    None => std::thread::sleep(Duration::from_millis(100)),
                }
                if let Some(progress) = progress.filter(|_| Instant::now() >= next_update) {
                    next_update = Instant::now() + Duration::from_millis(100);
                    let completed = counters
                        .iter()
                        .map(|c| c.load(std::sync::atomic::Ordering::Relaxed))
                        .sum();
                    progress.update(completed, start.elapsed());
                }
            }
            if let Some(progress) = progress {
                progress.finish();
            }
        }
        handles
            .into_iter()
            .map(|h| match h {
                Ok(handle) => handle
                    .join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("a load thread panicked"))),
                Err(e) => Err(e),
            })
            .collect()
    });
    if let Some(e) = hlog_error {
        return Err(e.context("--hlog"));
    }
    let mut merged: Option<ThreadStats> = None;
    for result in results {
        let stats = result.context("load thread failed")?;
        match merged.as_mut() {
            Some(all) => all.merge(&stats),
            None => merged = Some(stats),
        }
    }
    let merged = merged.context("no load threads ran")?;
    let mut report = report::build(config, threads, &merged);
    report.segment = options.segment.as_ref().map(|s| s.info.clone());
    report.started_at_unix_s = segment::unix_seconds(started_at);
    report.ended_at_unix_s = report.started_at_unix_s + report.duration_s;
    report.start_late_s = late.map(|(late, _)| late.as_secs_f64());
    if let Some(writer) = hlog {
        writer.finish(merged.elapsed, &report)?;
    }
    Ok(report)
}

/// Connects once, blocking, before the run: an unreachable target becomes one clear error
/// (exit 1) within a few seconds instead of a run full of connect errors.
fn preflight_connect(target: &Target, timeout: Duration) -> anyhow::Result<SocketAddr> {
    let addrs = target.resolve()?;
    let limit = timeout.min(PREFLIGHT_CONNECT_LIMIT);
    let mut last_error = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, limit) {
            Ok(_) => return Ok(addr),
            Err(e) => last_error = Some((addr, e)),
        }
    }
    let (addr, e) = last_error.expect("resolve returns at least one address");
    anyhow::bail!("cannot connect to {target} ({addr}): {e}")
}

/// Makes sure the process may open a descriptor per connection, raising the soft limit if the
/// hard one allows; asking for more connections than the system allows is a usage error.
fn ensure_file_limit(connections: usize) -> anyhow::Result<()> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let needed = connections as u64 + 64;
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return Ok(());
    };
    if soft >= needed {
        return Ok(());
    }
    if hard >= needed && setrlimit(Resource::RLIMIT_NOFILE, needed, hard).is_ok() {
        return Ok(());
    }
    Err(usage(format!(
        "{connections} connections need {needed} open files, but the limit is {hard} (raise ulimit -n)"
    )))
}

/// Splits connections (and, in count mode, requests) across threads as evenly as possible;
/// the shares add up exactly.
fn split_shares(connections: usize, threads: usize, mode: &Mode) -> Vec<WorkerShare> {
    let threads = threads.clamp(1, connections.max(1));
    let mut shares = Vec::with_capacity(threads);
    let mut first = 0;
    for index in 0..threads {
        let count = connections / threads + usize::from(index < connections % threads);
        shares.push(WorkerShare {
            index,
            first_connection: first,
            connections: count,
            requests: None,
        });
        first += count;
    }
    if let Mode::Count { requests } = *mode {
        let mut assigned = 0;
        for share in &mut shares {
            let n = requests * share.connections as u64 / connections as u64;
            share.requests = Some(n);
            assigned += n;
        }
        for share in shares.iter_mut().take((requests - assigned) as usize) {
            share.requests = share.requests.map(|n| n + 1);
        }
    }
    shares
}

/// Runs `sweetspot load`: validate, run with a progress line on a terminal, print the summary
/// and the JSON.
pub fn run_load(args: LoadArgs) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    let mut config = LoadConfig::from_args(&args)?;
    if let Some(dest) = &args.json {
        json::check_destination(dest)?;
    }
    let options = RunOptions::from_args(&args, &mut config)?;
    let json_to_stdout = args.json.as_deref() == Some("-");
    let live = (std::io::stderr().is_terminal() && !args.quiet)
        .then(|| progress::LiveProgress::new(&config));
    let report = run_observed(&config, None, live.as_ref(), &options)?;
    if !args.quiet {
        let summary = human::render(&report, &config);
        if json_to_stdout {
            eprint!("{summary}");
        } else {
            print!("{summary}");
        }
    }
    if let Some(dest) = &args.json {
        json::write(&report, dest)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: LoadArgs,
    }

    fn config(line: &str) -> anyhow::Result<LoadConfig> {
        let argv = std::iter::once("load").chain(line.split_whitespace());
        let cli = Cli::try_parse_from(argv).map_err(|e| anyhow::anyhow!("{e}"))?;
        LoadConfig::from_args(&cli.args)
    }

    fn is_usage(e: &anyhow::Error) -> bool {
        e.downcast_ref::<crate::UsageError>().is_some()
    }

    #[test]
    fn parses_durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn modes_from_flags() {
        let c = config("http://127.0.0.1:1/ -c 4 -t 8 -d 3s").unwrap();
        assert_eq!(
            c.mode,
            Mode::Closed {
                duration: Duration::from_secs(3)
            }
        );
        assert_eq!(c.threads, 4, "threads are clamped to connections");
        let n = config("http://127.0.0.1:1/ -n 1000").unwrap();
        assert_eq!(n.mode, Mode::Count { requests: 1000 });
        let r = config("http://127.0.0.1:1/ -R 200 -d 2s --timeout 500ms").unwrap();
        assert_eq!(
            r.mode,
            Mode::Rate {
                rate: 200.0,
                duration: Duration::from_secs(2)
            }
        );
        assert_eq!(r.timeout, Duration::from_millis(500));
        let h = config("http://h/ -m POST -H Content-Type:text/plain --body a=1 --no-keepalive")
            .unwrap();
        assert_eq!(
            h.headers,
            vec![("Content-Type".into(), "text/plain".into())]
        );
        assert_eq!(h.body, b"a=1");
        assert!(!h.keepalive);
    }

    #[test]
    fn absurd_flags_are_usage_errors() {
        for line in [
            "nope -c 1",
            "http://h/ -c 0",
            "http://h/ -c 2000000",
            "http://h/ -t 0",
            "http://h/ -t 5000",
            "http://h/ -n 0",
            "http://h/ -R 0",
            "http://h/ -R -5",
            "http://h/ -R inf",
            "http://h/ -d 0s",
            "http://h/ -d 1y",
            "http://h/ --timeout 0",
            "http://h/ --pipeline 0",
            "http://h/ --pipeline 2 --no-keepalive",
            "http://h/ -H nocolon",
            "tcp://h:1 --message 0",
            "tcp://h:1 --body x",
        ] {
            let e = config(line).unwrap_err();
            assert!(is_usage(&e), "{line}: {e}");
        }
    }

    #[test]
    fn shares_add_up_exactly() {
        let shares = split_shares(10, 3, &Mode::Count { requests: 1001 });
        let conns: Vec<usize> = shares.iter().map(|s| s.connections).collect();
        assert_eq!(conns, vec![4, 3, 3]);
        let firsts: Vec<usize> = shares.iter().map(|s| s.first_connection).collect();
        assert_eq!(firsts, vec![0, 4, 7]);
        let total: u64 = shares.iter().map(|s| s.requests.unwrap()).sum();
        assert_eq!(total, 1001);
        let small = split_shares(3, 2, &Mode::Count { requests: 1 });
        assert_eq!(small.iter().map(|s| s.requests.unwrap()).sum::<u64>(), 1);
    }
}
