//! The flags of `sweetspot load` turned once into a validated [`LoadConfig`].
//!
//! Two stages, as ripgrep does: clap parses the raw [`LoadArgs`] ([`super::args`]); [`LoadConfig::from_args`]
//! parses their text (durations, headers, the body file) and hands the result to
//! [`LoadConfig::validate`], the one place every limit is checked, with one set of messages
//! naming the flag. A config built in code (the sweep's, the tests') goes through the same
//! `validate` when it is run. What a run needs beyond the engine is in
//! [`super::run_options`].

use crate::units::parse_duration;
use std::time::Duration;

pub use crate::load::args::Engine;
use crate::load::args::LoadArgs;
use crate::load::source::plan::RatePlan;
use crate::load::source::request::{self, is_token_byte, parse_header};
use crate::load::source::urls::UrlList;
use crate::load::target::Target;
use crate::net::NetSpec;
use crate::usage;

const MAX_CONNECTIONS: u64 = 1_000_000;
const MAX_THREADS: u64 = 1024;
const MAX_REQUESTS: u64 = 1_000_000_000_000;
const MAX_RATE: f64 = 100_000_000.0;
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);
const MAX_TIMEOUT: Duration = Duration::from_secs(3600);
const MAX_PIPELINE: u64 = 1024;
const MAX_MESSAGE_BYTES: u64 = 1 << 20;
const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// How long a wait gathers responses by default (`--gather`). Under closed-loop or count load a
/// wait gathers a batch (the ring engine's batch size) for up to this window, then returns with what has come
/// (or, with nothing yet, waits for the first): being woken for every response is what costs
/// most per request on a VM. Latency is not distorted, since it ends at the kernel's arrival
/// stamp (its age on the realtime clock subtracted from the monotonic clock read at the same
/// moment); only a connection's next request waits, up to the window. Rate mode never gathers.
pub const DEFAULT_GATHER: Duration = Duration::from_micros(100);
/// How late a rate-mode send may go out to share a wakeup with others (`--slack`): none by
/// default, every send at its own time. Sends that share a wakeup reach the server as a burst
/// and queue there: with the lateness left out of the latency (see `InFlight`), a 1 ms slack
/// still raised nginx's p50 by 30 to 40 us at 2,000 and 20,000 req/s (benches/rate_cost.txt),
/// the burst's queue, not the generator's lateness. A send at its own time costs a timer
/// wakeup, which on this VM is itself 26 us of CPU (benches/rate_cost.txt, the floor):
/// precision is the default, the cheaper bursts a choice.
pub const DEFAULT_SLACK: Duration = Duration::ZERO;
/// `--slack` may not be longer than this.
pub const MAX_SLACK: Duration = Duration::from_millis(10);

/// At most this many sends share a wakeup on average: a bigger burst queues at the server
/// and changes what is measured (nginx on one core at 78,000/s: batches of 78 in 1 ms raised
/// its p50 from 90 us to 535 us; benches/rate_cost.txt).
pub const MAX_BATCH: f64 = 20.0;

/// The slack a thread sending `rate` requests a second batches its sends with: `slack`, cut
/// to [`MAX_BATCH`] sends' worth, when at least two sends fall due within it on average; none
/// otherwise, so that a request with no other due near it goes out at its own time rather
/// than late for nothing.
pub fn batch_slack(slack: Duration, rate: f64) -> Duration {
    if rate * slack.as_secs_f64() >= 2.0 {
        slack.min(Duration::from_secs_f64(MAX_BATCH / rate))
    } else {
        Duration::ZERO
    }
}
/// `--gather` may not be longer than this.
pub const MAX_GATHER: Duration = Duration::from_millis(10);

/// How to trust the server: the `--insecure` and `--cacert` flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// Accept any certificate (handshake signatures are still checked).
    pub insecure: bool,
    /// Trust the CA certificates in this PEM file instead of the built-in roots.
    pub cacert: Option<std::path::PathBuf>,
}

/// How a run decides what to send and when to stop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// Every connection sends its next request as soon as the last one is answered.
    Closed { duration: Duration },
    /// Exactly `requests` requests in total, then stop.
    Count { requests: u64 },
    /// `rate` requests/s in total, each with an intended send time. With a load plan
    /// ([`LoadConfig::plan`]) `rate` is the plan's mean rate and `duration` its length.
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

/// `--body`: the text, or with `@PATH` the file's bytes.
fn body_of(args: &LoadArgs) -> anyhow::Result<Vec<u8>> {
    Ok(match &args.body {
        None => Vec::new(),
        Some(text) => match text.strip_prefix('@') {
            Some(path) => {
                request::read_body_file(path).map_err(|e| usage(format!("--body: {e}")))?
            }
            None => text.clone().into_bytes(),
        },
    })
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
    /// https:// targets: how to trust the server's certificate.
    pub tls: TlsOptions,
    pub method: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub pipeline: usize,
    /// Bytes per echo query, newline included.
    pub message_len: usize,
    /// CPUs to pin load threads to, round robin; empty: no pinning.
    pub pin_cpus: Vec<usize>,
    /// The load threads' nice value, set by each on itself as it starts (a failure, without
    /// root, leaves them at the process's): the lab's (see [`crate::lab::GENERATOR_NICE`]);
    /// `load` leaves it unset, as wrk does.
    pub nice: Option<i32>,
    /// The addresses of the server's replicas beside the target's (none: the target alone),
    /// each its own copy on its own port: connection `i` goes to the `i mod (1 + R)`-th of
    /// the target and these, as a Service spreads connections over its pods. The lab's.
    pub replicas: Vec<std::net::SocketAddr>,
    pub engine: Engine,
    /// `--engine uring`: how long a wait may gather responses (zero: it does not).
    pub gather: Duration,
    /// `--urls`: the requests to rotate (then `method`, `headers` and `body` are not the
    /// request: `headers` go on every line, `method` is HEAD only if every line is HEAD).
    pub urls: Option<std::sync::Arc<crate::load::source::urls::UrlList>>,
    /// Rate mode: a plan whose rate changes (a ramp, steps); `None` for a constant rate, which
    /// is the one-step plan [`LoadConfig::rate_plan`] makes from the mode. Set with
    /// [`LoadConfig::set_plan`], which keeps `mode` in step.
    pub plan: Option<RatePlan>,
    /// Closed mode: the measured window (`-d` long) opens only once every connection has been
    /// answered once, or after this long whatever is unanswered; before it nothing is counted.
    pub settle: Option<Duration>,
    /// Rate mode: how late a send may go out to share a wakeup with the others due by then.
    pub slack: Duration,
    /// A network path between the clients and the server (`--net`; see [`crate::net`]).
    pub net: Option<NetSpec>,
    /// Which HTTP: HTTP/2 over TLS when the server picks it, HTTP/1.1 only, or h2c.
    pub http: HttpVersion,
    /// `--grpc`: every request a gRPC unary call (see [`LoadConfig::make_grpc`]).
    pub grpc: bool,
    /// HTTP/2: concurrent streams per connection (`--streams`), each a request loop.
    pub streams: usize,
}

/// Which HTTP a run speaks (`--http1`, `--h2c`; see [`crate::load::h2`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpVersion {
    /// HTTP/1.1, or over `https://` HTTP/2 when the server picks `h2` by ALPN.
    #[default]
    Auto,
    /// HTTP/1.1 only (`--http1`): ALPN offers `http/1.1` alone.
    Http1,
    /// HTTP/2 over cleartext TCP with prior knowledge (`--h2c`).
    H2c,
}

/// The most `--streams` per connection.
pub const MAX_STREAMS: u64 = 1000;

/// `--gather`: how long an io_uring wait may gather responses.
fn gather_of(args: &LoadArgs) -> anyhow::Result<Duration> {
    match &args.gather {
        None => Ok(DEFAULT_GATHER),
        Some(_) if args.engine != Engine::Uring => Err(usage("--gather applies to --engine uring")),
        Some(text) => parse_duration(text).map_err(|e| usage(format!("--gather: {e}"))),
    }
}

/// One thread per core, as wrk's users usually choose.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The target and the URL list: `TARGET`, or `--urls FILE` (its path-only lines for TARGET).
fn target_of(args: &LoadArgs) -> anyhow::Result<(Target, Option<std::sync::Arc<UrlList>>)> {
    Ok(match (&args.target, &args.urls) {
        (target, Some(file)) => {
            if args.method != "GET" || args.body.is_some() {
                return Err(usage(
                    "-m and --body do not apply with --urls (each line gives its own)",
                ));
            }
            let target = target.as_deref().map(Target::parse).transpose()?;
            let list =
                crate::load::source::urls::read_url_file(file, target.as_ref()).map_err(usage)?;
            (list.target(), Some(std::sync::Arc::new(list)))
        }
        (Some(target), None) => (Target::parse(target)?, None),
        (None, None) => {
            return Err(usage(
                "load needs a TARGET (http://HOST:PORT/PATH or tcp://HOST:PORT) or --urls FILE",
            ))
        }
    })
}

/// The mode of `-n`, `-R` (a rate or a plan) and `-d`, and the plan when it is not constant.
fn mode_of(args: &LoadArgs) -> anyhow::Result<(Mode, Option<RatePlan>)> {
    let given_duration = match &args.duration {
        Some(text) => Some(parse_duration(text).map_err(|e| usage(format!("-d: {e}")))?),
        None => None,
    };
    let duration = given_duration.unwrap_or(DEFAULT_DURATION);
    let mut plan = None;
    let mode = match (args.requests, &args.rate) {
        (Some(requests), _) => Mode::Count { requests },
        // A plain number is a constant rate, checked by `validate` like one built in code.
        (None, Some(text)) => match text.trim().parse::<f64>() {
            Ok(rate) => Mode::Rate { rate, duration },
            Err(_) => {
                let parsed = RatePlan::parse(text, given_duration, DEFAULT_DURATION)
                    .map_err(|e| usage(format!("-R {}: {e}", text.trim())))?;
                let mode = Mode::Rate {
                    rate: parsed.mean_rate(),
                    duration: parsed.duration(),
                };
                plan = (!parsed.is_constant()).then_some(parsed);
                mode
            }
        },
        (None, None) => Mode::Closed { duration },
    };
    Ok((mode, plan))
}

impl LoadConfig {
    /// Rate mode: the slack a thread holding `connections` of `total` batches its sends with
    /// (its share of the rate is its share of the connections); zero in the other modes.
    pub fn thread_slack(&self, connections: usize, total: usize) -> Duration {
        let Mode::Rate { rate, .. } = self.mode else {
            return Duration::ZERO;
        };
        batch_slack(self.slack, rate * connections as f64 / total.max(1) as f64)
    }

    /// Rate mode: the slack the busiest thread batches its sends with; zero in the other modes.
    pub fn effective_slack(&self) -> Duration {
        let connections = self.connections.max(1);
        let busiest = connections.div_ceil(self.threads.clamp(1, connections));
        self.thread_slack(busiest, connections)
    }

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
            tls: TlsOptions::default(),
            method: "GET".to_string(),
            headers: Vec::new(),
            body: Vec::new(),
            pipeline: 1,
            message_len: 64,
            pin_cpus: Vec::new(),
            nice: None,
            replicas: Vec::new(),
            engine: Engine::Epoll,
            gather: DEFAULT_GATHER,
            urls: None,
            plan: None,
            settle: None,
            slack: DEFAULT_SLACK,
            net: None,
            http: HttpVersion::Auto,
            grpc: false,
            streams: 1,
        }
    }

    /// Runs at `plan`: rate mode at the plan's mean rate for its length (a constant plan is
    /// plain rate mode).
    pub fn set_plan(&mut self, plan: RatePlan) {
        self.mode = Mode::Rate {
            rate: plan.mean_rate(),
            duration: plan.duration(),
        };
        self.plan = (!plan.is_constant()).then_some(plan);
    }

    /// Rate mode: the plan the engine follows (a constant rate is a plan of one step).
    pub fn rate_plan(&self) -> Option<RatePlan> {
        match (&self.plan, self.mode) {
            (Some(plan), Mode::Rate { .. }) => Some(plan.clone()),
            (None, Mode::Rate { rate, duration }) => Some(RatePlan::constant(rate, duration)),
            _ => None,
        }
    }

    /// Parses command-line flags into a config and validates it; every problem is a usage
    /// error (exit 2) in one line naming the flag.
    pub fn from_args(args: &LoadArgs) -> anyhow::Result<LoadConfig> {
        let (target, urls) = target_of(args)?;
        let method = match &urls {
            Some(list) => list.framing_method().to_string(),
            None => args.method.clone(),
        };
        let (mode, plan) = mode_of(args)?;
        let timeout =
            parse_duration(&args.timeout).map_err(|e| usage(format!("--timeout: {e}")))?;
        let headers = args
            .headers
            .iter()
            .map(|h| parse_header(h).map_err(|e| usage(format!("-H {h:?}: {e}"))))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let body = body_of(args)?;
        // Out-of-range numbers saturate so that `validate` (not a cast) reports them.
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let mut config = LoadConfig {
            target,
            connections: size(args.connections),
            threads: args.threads.map_or_else(default_threads, size),
            mode,
            timeout,
            keepalive: !args.no_keepalive,
            tls: TlsOptions {
                insecure: args.insecure,
                cacert: args.cacert.clone(),
            },
            method,
            headers,
            body,
            pipeline: size(args.pipeline),
            message_len: size(args.message),
            pin_cpus: args.pin.clone(),
            nice: None,
            replicas: Vec::new(),
            engine: args.engine,
            gather: gather_of(args)?,
            urls,
            plan,
            settle: args
                .settle
                .as_deref()
                .map(|text| parse_duration(text).map_err(|e| usage(format!("--settle: {e}"))))
                .transpose()?,
            slack: match &args.slack {
                None => DEFAULT_SLACK,
                Some(text) => parse_duration(text).map_err(|e| usage(format!("--slack: {e}")))?,
            },
            net: args
                .net
                .as_deref()
                .map(|text| NetSpec::parse(text).map_err(|e| usage(format!("--net: {e}"))))
                .transpose()?,
            http: match (args.http1, args.h2c) {
                (true, _) => HttpVersion::Http1,
                (_, true) => HttpVersion::H2c,
                _ => HttpVersion::Auto,
            },
            grpc: args.grpc,
            streams: usize::try_from(args.streams.unwrap_or(1)).unwrap_or(usize::MAX),
        };
        if args.grpc {
            config.make_grpc()?;
        }
        if args.streams.is_some() && !args.h2c && !args.grpc && !config.target.is_tls() {
            return Err(usage(
                "--streams is HTTP/2's: use it with --h2c or an https:// target",
            ));
        }
        config.validate()?;
        config.threads = config.threads.min(config.connections);
        Ok(config)
    }

    /// The one check of a config against the limits, for flags and for configs built in code
    /// (the sweep's) alike; every problem is a usage error naming the flag.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.check_load()?;
        self.check_connection()?;
        self.check_request()?;
        self.check_http2()?;
        if !self.pin_cpus.is_empty() {
            let cpus = crate::sys::usable_cpus();
            if let Some(cpu) = self.pin_cpus.iter().find(|c| !cpus.contains(c)) {
                return Err(usage(format!(
                    "--pin: no CPU {cpu} (this process may run on CPUs {cpus:?})"
                )));
            }
        }
        Ok(())
    }

    /// Connections, threads, and the mode's count, rate, duration or plan.
    fn check_load(&self) -> anyhow::Result<()> {
        one_to(
            "-c (connections)",
            self.connections as u64,
            MAX_CONNECTIONS,
            "",
        )?;
        one_to("-t (threads)", self.threads as u64, MAX_THREADS, "")?;
        match self.mode {
            Mode::Count { requests } if requests == 0 || requests > MAX_REQUESTS => {
                return Err(usage(format!(
                    "-n (requests) must be between 1 and {MAX_REQUESTS}, not {requests}"
                )))
            }
            Mode::Rate { rate, .. } if !(rate.is_finite() && rate > 0.0 && rate <= MAX_RATE) => {
                return Err(usage(format!(
                    "-R (rate) must be above 0 and at most {MAX_RATE}, not {rate}"
                )))
            }
            Mode::Closed { duration } | Mode::Rate { duration, .. }
                if duration.is_zero() || duration > MAX_DURATION =>
            {
                return Err(usage(
                    "-d (duration) must be more than 0 and at most 7 days",
                ))
            }
            _ => {}
        }
        if self.slack > MAX_SLACK {
            return Err(usage(format!(
                "--slack must be at most {} ms",
                MAX_SLACK.as_millis()
            )));
        }
        match (self.settle, self.mode) {
            (Some(limit), _) if limit.is_zero() || limit > MAX_DURATION => {
                return Err(usage("--settle must be more than 0 and at most 7 days"))
            }
            (Some(_), Mode::Count { .. } | Mode::Rate { .. }) => {
                return Err(usage(
                    "--settle applies to the closed loop (-d without -n or -R)",
                ))
            }
            _ => {}
        }
        if let Some(plan) = &self.plan {
            plan.check().map_err(|e| usage(format!("-R {plan}: {e}")))?;
            let agrees = match self.mode {
                Mode::Rate { rate, duration } => {
                    duration == plan.duration()
                        && (rate - plan.mean_rate()).abs() <= 1e-9 * rate.abs()
                }
                _ => false,
            };
            if !agrees {
                return Err(usage(format!(
                    "-R {plan}: a plan needs rate mode at its mean rate for its length (use LoadConfig::set_plan)"
                )));
            }
        }
        Ok(())
    }

    /// What each connection does: timeout, pipeline depth, keep-alive, echo message length.
    fn check_connection(&self) -> anyhow::Result<()> {
        if self.timeout.is_zero() || self.timeout > MAX_TIMEOUT {
            return Err(usage("--timeout must be more than 0 and at most 1h"));
        }
        one_to("--pipeline", self.pipeline as u64, MAX_PIPELINE, "")?;
        if !self.keepalive && self.pipeline > 1 {
            return Err(usage("--pipeline needs keep-alive (drop --no-keepalive)"));
        }
        one_to(
            "--message",
            self.message_len as u64,
            MAX_MESSAGE_BYTES,
            " bytes",
        )?;
        Ok(())
    }

    /// `--grpc`: the request as a gRPC unary call. A POST with gRPC's headers and the body
    /// framed as its message, over HTTP/2: h2c to an http:// target (HTTP/2 by ALPN over
    /// https://, which must pick it).
    pub fn make_grpc(&mut self) -> anyhow::Result<()> {
        if !matches!(self.target, Target::Http { .. }) {
            return Err(usage("--grpc needs an http:// or https:// target"));
        }
        if self.method != "GET" && self.method != "POST" {
            return Err(usage("--grpc calls are POSTs; drop -m"));
        }
        self.method = "POST".into();
        if !self.target.is_tls() {
            self.http = HttpVersion::H2c;
        }
        self.headers.retain(|(n, _)| {
            !n.eq_ignore_ascii_case("content-type") && !n.eq_ignore_ascii_case("te")
        });
        self.headers.push((
            "content-type".into(),
            crate::http::grpc::CONTENT_TYPE.into(),
        ));
        self.headers.push(("te".into(), "trailers".into()));
        self.body = crate::http::grpc::frame(&self.body);
        Ok(())
    }

    /// HTTP/2's streams, and what HTTP/2 runs do not take: what only HTTP/1.1 has (pipelining,
    /// one connection a request), the echo protocol, io_uring and a settled window.
    fn check_http2(&self) -> anyhow::Result<()> {
        one_to("--streams", self.streams as u64, MAX_STREAMS, "")?;
        if self.http == HttpVersion::H2c || self.streams > 1 {
            let flag = if self.http == HttpVersion::H2c {
                "--h2c"
            } else {
                "--streams"
            };
            if self.http == HttpVersion::H2c
                && !matches!(self.target, Target::Http { tls: false, .. })
            {
                return Err(usage(
                    "--h2c needs an http:// target (https:// negotiates h2 by ALPN)",
                ));
            }
            if self.http == HttpVersion::Http1 {
                return Err(usage("--streams is HTTP/2's; drop --http1"));
            }
            if let Some(why) = self.not_for_http2() {
                return Err(usage(format!("{flag}: {why}")));
            }
        }
        Ok(())
    }

    /// Why this config cannot run over HTTP/2, if it cannot: an `https://` run then offers
    /// `http/1.1` alone by ALPN.
    pub fn not_for_http2(&self) -> Option<&'static str> {
        if self.pipeline > 1 {
            Some("--pipeline is HTTP/1.1's; HTTP/2 runs --streams per connection")
        } else if !self.keepalive {
            Some("--no-keepalive is HTTP/1.1's")
        } else if self.engine == Engine::Uring {
            Some("HTTP/2 runs on tokio, not --engine uring")
        } else if self.settle.is_some() {
            Some("--settle is not supported over HTTP/2")
        } else {
            None
        }
    }

    /// The request and its target: method, headers, body, TLS options, engine, gather window.
    fn check_request(&self) -> anyhow::Result<()> {
        if self.method.is_empty() || !self.method.bytes().all(is_token_byte) {
            return Err(usage(format!("-m: invalid method {:?}", self.method)));
        }
        if let Some((name, _)) = self.headers.iter().find(|(name, value)| {
            name.is_empty()
                || !name.bytes().all(is_token_byte)
                || value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0)
        }) {
            return Err(usage(format!(
                "-H {name:?}: invalid header (a token name; no CR, LF or NUL in the value)"
            )));
        }
        if matches!(self.target, Target::Echo { .. })
            && (!self.headers.is_empty() || !self.body.is_empty())
        {
            return Err(usage("-H and --body apply to http:// targets only"));
        }
        if !self.target.is_tls() && self.tls != TlsOptions::default() {
            return Err(usage(
                "--insecure and --cacert apply to https:// targets only",
            ));
        }
        if self.engine == Engine::Uring && self.target.is_tls() {
            return Err(usage(
                "--engine uring speaks http:// and tcp:// only; https:// runs on --engine epoll",
            ));
        }
        if self.gather > MAX_GATHER {
            return Err(usage(format!(
                "--gather must be at most {}ms",
                MAX_GATHER.as_millis()
            )));
        }
        Ok(())
    }
}

/// A usage error unless `value` of `flag` is from 1 to `max` (`unit` after the bound).
fn one_to(flag: &str, value: u64, max: u64, unit: &str) -> anyhow::Result<()> {
    if value == 0 || value > max {
        return Err(usage(format!(
            "{flag} must be between 1 and {max}{unit}, not {value}"
        )));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: LoadArgs,
    }

    pub(crate) fn config(line: &str) -> anyhow::Result<LoadConfig> {
        let argv = std::iter::once("load").chain(line.split_whitespace());
        let cli = Cli::try_parse_from(argv).map_err(|e| anyhow::anyhow!("{e}"))?;
        LoadConfig::from_args(&cli.args)
    }

    fn is_usage(e: &anyhow::Error) -> bool {
        e.downcast_ref::<crate::UsageError>().is_some()
    }

    #[test]
    fn sends_are_batched_only_where_two_fall_due_within_the_slack() {
        let ms = Duration::from_millis;
        assert_eq!(batch_slack(ms(1), 20_000.0), ms(1));
        // 80,000/s: 20 sends' worth, 250 us.
        assert_eq!(batch_slack(ms(1), 80_000.0), Duration::from_micros(250));
        assert_eq!(batch_slack(ms(1), 2_000.0), ms(1));
        assert_eq!(batch_slack(ms(1), 1_999.0), Duration::ZERO);
        assert_eq!(batch_slack(Duration::ZERO, 1e6), Duration::ZERO);
        // 20,000/s over 2 threads: 10,000 each, 10 sends per ms.
        let c = config("-R 20000 -c 50 -t 2 -d 1s http://127.0.0.1:1/").unwrap();
        assert_eq!(c.slack, Duration::ZERO);
        assert_eq!(c.effective_slack(), Duration::ZERO);
        let c = config("-R 20000 -c 50 -t 2 --slack 1ms -d 1s http://127.0.0.1:1/").unwrap();
        assert_eq!(c.effective_slack(), ms(1));
        // 100/s: one send every 20 ms per thread, each at its own time.
        let c = config("-R 100 -c 4 -t 2 --slack 1ms -d 1s http://127.0.0.1:1/").unwrap();
        assert_eq!(c.effective_slack(), Duration::ZERO);
        let c = config("-R 20000 -c 50 --slack 250us -d 1s http://127.0.0.1:1/").unwrap();
        assert_eq!(c.slack, Duration::from_micros(250));
        let c = config("-c 50 -d 1s http://127.0.0.1:1/").unwrap();
        assert_eq!(c.effective_slack(), Duration::ZERO);
        assert!(config("-c 5 --slack 1ms http://127.0.0.1:1/").is_err());
        assert!(config("-R 10 --slack 11ms http://127.0.0.1:1/").is_err_and(|e| is_usage(&e)));
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
    fn tls_flags_from_an_https_target() {
        let k = config("https://localhost:8443/ -k").unwrap();
        assert!(k.target.is_tls());
        assert_eq!(
            k.tls,
            TlsOptions {
                insecure: true,
                cacert: None
            }
        );
        let ca = config("https://localhost/ --cacert /tmp/ca.pem").unwrap();
        assert_eq!(ca.tls.cacert, Some("/tmp/ca.pem".into()));
        assert!(!ca.tls.insecure);
        assert!(config("https://localhost/ -k --cacert /tmp/ca.pem").is_err());
    }

    #[test]
    fn the_engine_is_epoll_unless_asked() {
        assert_eq!(config("http://h/").unwrap().engine, Engine::Epoll);
        let uring = config("http://h/ --engine uring").unwrap();
        assert_eq!(uring.gather, Duration::from_micros(100));
        let none = config("http://h/ --engine uring --gather 0").unwrap();
        assert_eq!(none.gather, Duration::ZERO);
        let long = config("http://h/ --engine uring --gather 2ms").unwrap();
        assert_eq!(long.gather, Duration::from_millis(2));
        assert_eq!(
            config("http://h/ --engine uring").unwrap().engine,
            Engine::Uring
        );
        assert_eq!(
            config("tcp://h:1 --engine uring").unwrap().engine,
            Engine::Uring
        );
        assert_eq!(
            config("https://h/ --engine uring").unwrap_err().to_string(),
            "--engine uring speaks http:// and tcp:// only; https:// runs on --engine epoll"
        );
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
            "http://h/ --insecure",
            "http://h/ --cacert ca.pem",
            "tcp://h:1 -k",
            "https://h/ --engine uring",
            "http://h/ --gather 1ms",
            "http://h/ --engine uring --gather 11ms",
            "http://h/ --engine uring --gather soon",
        ] {
            let e = config(line).unwrap_err();
            assert!(is_usage(&e), "{line}: {e}");
        }
    }

    #[test]
    fn flags_and_code_built_configs_get_the_same_message() {
        let from_flags = config("http://127.0.0.1:1/ -c 4 --pipeline 0")
            .unwrap_err()
            .to_string();
        let mut built = LoadConfig::new(
            Target::parse("http://127.0.0.1:1/").unwrap(),
            4,
            Mode::Closed {
                duration: Duration::from_secs(1),
            },
        );
        built.pipeline = 0;
        let from_code = built.validate().unwrap_err();
        assert!(is_usage(&from_code));
        assert_eq!(from_code.to_string(), from_flags);
        assert_eq!(from_flags, "--pipeline must be between 1 and 1024, not 0");
        let e = config("http://h/ -R nan").unwrap_err().to_string();
        assert_eq!(
            e,
            "-R (rate) must be above 0 and at most 100000000, not NaN"
        );
        built.pipeline = 1;
        built.threads = 0;
        assert_eq!(
            built.validate().unwrap_err().to_string(),
            "-t (threads) must be between 1 and 1024, not 0"
        );
    }

    #[test]
    fn plans_from_flags_set_rate_mode_at_their_mean() {
        let ramp = config("http://h/ -R 100..300 -d 2s").unwrap();
        assert_eq!(
            ramp.mode,
            Mode::Rate {
                rate: 200.0,
                duration: Duration::from_secs(2)
            }
        );
        assert_eq!(ramp.plan.as_ref().unwrap().to_string(), "100..300@2s");
        let steps = config("http://h/ -R 200@1s,400@1s").unwrap();
        assert_eq!(
            steps.mode,
            Mode::Rate {
                rate: 300.0,
                duration: Duration::from_secs(2)
            }
        );
        assert_eq!(steps.rate_plan(), steps.plan);
        // A constant rate is a plan of one step, not stored.
        let constant = config("http://h/ -R 500 -d 3s").unwrap();
        assert_eq!(constant.plan, None);
        assert_eq!(
            constant.rate_plan(),
            Some(RatePlan::constant(500.0, Duration::from_secs(3)))
        );
        assert_eq!(config("http://h/ -R 500@3s").unwrap().plan, None);
        for (line, message) in [
            (
                "http://h/ -R 5..",
                "-R 5..: the ramp 5.. needs a rate at both ends",
            ),
            (
                "http://h/ -R 1000@1s -d 2s",
                "-R 1000@1s: the steps last 1s but -d says 2s",
            ),
            (
                "http://h/ -R 1000@",
                "-R 1000@: step 1 (1000@) needs a duration",
            ),
        ] {
            let e = config(line).unwrap_err();
            assert!(is_usage(&e), "{line}: {e}");
            assert!(e.to_string().starts_with(message), "{line}: {e}");
        }
        // A plan built in code must come with its rate mode (set_plan keeps them together).
        let mut built = LoadConfig::new(
            Target::parse("http://h/").unwrap(),
            2,
            Mode::Closed {
                duration: Duration::from_secs(2),
            },
        );
        built.plan = ramp.plan.clone();
        assert!(built.validate().is_err());
        built.set_plan(ramp.plan.clone().unwrap());
        built.validate().unwrap();
        assert_eq!(built.mode, ramp.mode);
    }
}
