//! `sweetspot load`: a load generator in the class of wrk, wrk2 and ab: closed loop (`-c` for
//! `-d`), fixed count (`-n`, exactly) and rate (`-R`, a constant rate or a plan, with
//! coordinated omission corrected), over HTTP/1.1 (`https://` too) or a `tcp://` echo protocol.
//! This file is the driver: [`run`] is the entry point the sweep calls in-process (validate,
//! pre-flight, one engine worker per thread, merge what they measured) and [`run_load`] adds the
//! command line's output. The tree follows a run: [`source`] and [`config`], the [`engine`],
//! [`stats`], [`output`], and [`scaleout`] for distributed runs.

pub mod args;
pub mod config;
pub mod engine;
pub mod error;
pub mod h2;
pub mod output;
pub mod run_options;
pub mod scaleout;
pub mod source;
pub mod stats;
pub mod target;

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::{Duration, Instant};

use anyhow::Context;

pub use args::LoadArgs;
pub use config::{default_threads, Engine, HttpVersion, LoadConfig, Mode, TlsOptions, MAX_STREAMS};
pub use engine::framing::{HttpResponseFramer, ResponseFramer};
pub use error::{FailureKind, FramingError};
pub use output::report::{LoadReport, NetReport, TlsReport};
pub use run_options::{narrow_to_segment, RunOptions, SegmentRun};
pub use source::plan::RatePlan;
pub use source::urls::{read_url_file, UrlList};
pub use stats::{
    ErrorCounts, LatencyHistogram, LatencyKey, LatencySummary, LowerBounds, SATURATED_BUSY_FRACTION,
};
pub use target::Target;

use crate::usage;
use engine::{split_shares, RunPlan};
use source::request::RequestBytes;
use source::urls::RequestSet;
use stats::ThreadStats;

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

/// [`run`], with a live progress display fed from the workers' counters; across a network
/// path when the config has one (`--net`).
fn run_observed(
    config: &LoadConfig,
    stop: Option<&AtomicBool>,
    progress: Option<&output::progress::LiveProgress>,
    options: &RunOptions,
) -> anyhow::Result<LoadReport> {
    let Some(spec) = config.net else {
        return run_from_here(config, stop, progress, options, None);
    };
    config.validate()?;
    let server = net_server(&config.target)?;
    let mut path = crate::net::NetPath::create(spec, server, &config.pin_cpus)?;
    let drops_before = path.device_drops();
    let near_end = path.near_end;
    let report = path.inside(|| run_from_here(config, stop, progress, options, Some(near_end)))?;
    path.check()?;
    let mut report = report?;
    let device_dropped = path.device_drops().saturating_sub(drops_before);
    let c = path.counts();
    let load = |n: &std::sync::atomic::AtomicU64| n.load(std::sync::atomic::Ordering::Relaxed);
    let written = load(&c.written);
    let response_bytes = mean_response_bytes(&report);
    let transfer_ms = spec
        .rate_bps
        .map_or(0.0, |bps| response_bytes * 8.0 * 1000.0 / bps.max(1) as f64);
    let toward_clients: Vec<u64> = c
        .flow_bytes
        .lock()
        .map(|flows| flows.values().map(|b| b[1]).filter(|b| *b > 0).collect())
        .unwrap_or_default();
    report.net = Some(output::report::NetReport {
        path: spec.describe(),
        spec,
        packets: load(&c.packets),
        lost: load(&c.lost),
        queue_dropped: load(&c.queue_dropped),
        queued_max_us: load(&c.queued_max_ns) as f64 / 1000.0,
        overflowed: load(&c.overflowed),
        device_dropped,
        retrans_clients: load(&c.retrans_up),
        retrans_server_side: load(&c.retrans_down),
        written,
        late_mean_us: load(&c.late_ns) as f64 / 1000.0 / written.max(1) as f64,
        late_max_us: load(&c.late_max_ns) as f64 / 1000.0,
        late_packets: load(&c.late_packets),
        late_p99_us: c.late_p99_us(),
        relay_cpu_s: load(&c.cpu_ns) as f64 / 1e9,
        relay_cpus: path.relay_cpus.clone(),
        flows: output::report::FlowShares::of(&toward_clients, report.duration_s),
        response_bytes,
        transfer_ms,
    });
    Ok(report)
}

/// A response's mean size on the path: the bytes of the responses read whole over their
/// count. An HTTP/2 run, whose frames are not split by response, has only its bytes read
/// over its answers (the part of a response still arriving at the end in them).
fn mean_response_bytes(report: &LoadReport) -> f64 {
    if report.response_bytes > 0 {
        return report.response_bytes as f64 / report.responses_read.max(1) as f64;
    }
    report.bytes_read as f64 / report.answered().max(1) as f64
}

/// The server's address a network path's near end stands for: the target's, on this
/// machine's IPv4 loopback (a path leads to a server here, never off the machine).
fn net_server(target: &Target) -> anyhow::Result<std::net::Ipv4Addr> {
    let addrs = target.resolve()?;
    addrs
        .iter()
        .find_map(|a| match a.ip() {
            std::net::IpAddr::V4(ip) if ip.is_loopback() => Some(ip),
            _ => None,
        })
        .ok_or_else(|| {
            usage(format!(
                "--net: the target must be on this machine's IPv4 loopback (127.0.0.1), not {}",
                addrs[0].ip()
            ))
        })
}

/// The run itself, from the calling thread's network namespace; `via`: the address that
/// stands for the target's (a network path's near end).
fn run_from_here(
    config: &LoadConfig,
    stop: Option<&AtomicBool>,
    progress: Option<&output::progress::LiveProgress>,
    options: &RunOptions,
    via: Option<std::net::Ipv4Addr>,
) -> anyhow::Result<LoadReport> {
    let target = prepare(config, via)?;
    let threads = config.threads.min(config.connections);
    let placed = place(config, options, threads);
    let late = wait_for_start(options)?;
    let start = Instant::now();
    let started_at = std::time::SystemTime::now();
    let mut recording = Recording::open(config, options, threads, started_at)?;
    let engine_config = placed.engine_config.as_ref().unwrap_or(config);
    let rate_plan = engine_config.rate_plan();
    let settle = match (config.settle, config.mode) {
        (Some(limit), Mode::Closed { .. }) => Some(engine::settle::Settle::new(
            start,
            config.connections,
            limit,
        )),
        _ => None,
    };
    let plan = RunPlan {
        config: engine_config,
        addrs: std::iter::once(target.addr)
            .chain(config.replicas.iter().copied())
            .collect(),
        request: &target.request,
        start,
        deadline: config
            .mode
            .duration()
            .map(|d| start + d + config.settle.unwrap_or_default()),
        settle: settle.as_ref(),
        stop,
        total_connections: placed.total_connections,
        windows: rate_plan.as_ref().map(|p| p.windows()).unwrap_or_default(),
        count_steps: rate_plan.as_ref().is_some_and(|p| !p.is_constant()),
        rate_plan,
        intervals: recording.intervals.take(),
        tls: target.tls,
    };
    let merged = drive(
        &plan,
        target.http2.as_ref(),
        placed.shares,
        progress,
        &mut recording,
    )?;
    let mut report = output::report::build(config, threads, &merged);
    report.segment = options.segment.as_ref().map(|s| s.info.clone());
    report.started_at_unix_s = scaleout::segment::unix_seconds(started_at);
    report.ended_at_unix_s = report.started_at_unix_s + report.duration_s;
    report.start_late_s = late.map(|late| late.as_secs_f64());
    if let (Some(report_tls), Some(server)) = (report.tls.as_mut(), target.server_tls) {
        report_tls.version = server.version;
        report_tls.alpn = server.alpn;
    }
    recording.finish(merged.elapsed, &mut report)?;
    Ok(report)
}

/// What a run sends and where, known before it starts.
struct Prepared {
    request: RequestSet,
    /// An HTTP/2 run (`--h2c`, or `h2` chosen by ALPN): its requests and TLS.
    http2: Option<h2::H2Plan>,
    tls: Option<engine::transport::TlsConnector>,
    addr: std::net::SocketAddr,
    server_tls: Option<engine::tls::ServerInfo>,
}

/// Validates `config`, serializes the requests once, and connects once to the target (an
/// unreachable target fails here, within the timeout).
fn prepare(config: &LoadConfig, via: Option<std::net::Ipv4Addr>) -> anyhow::Result<Prepared> {
    config.validate()?;
    if config.engine == Engine::Uring {
        engine::ring::check_available().map_err(|e| {
            usage(format!(
                "--engine uring: io_uring is unavailable here ({e}); use --engine epoll"
            ))
        })?;
    }
    let request = match &config.urls {
        Some(list) => list.request_set(&config.headers, config.keepalive, config.pipeline),
        None => RequestSet::single(
            &RequestBytes::build(
                &config.target,
                &config.method,
                &config.headers,
                &config.body,
                config.keepalive,
                config.message_len,
                1,
            ),
            config.pipeline,
        ),
    }
    .map_err(usage)?;
    let offer_h2 = config.http == HttpVersion::Auto && config.not_for_http2().is_none();
    let alpn: &[&[u8]] = if offer_h2 {
        &[engine::tls::ALPN_H2, engine::tls::ALPN_HTTP1]
    } else {
        &[engine::tls::ALPN_HTTP1]
    };
    let mut tls = match &config.target {
        target if target.is_tls() => Some(engine::transport::TlsConnector::offering(
            &config.tls,
            target.host(),
            alpn,
        )?),
        _ => None,
    };
    let (addr, server_tls) =
        engine::transport::preflight_connect(&config.target, config.timeout, tls.as_ref(), via)?;
    let chose_h2 = server_tls.as_ref().and_then(|s| s.alpn.as_deref()) == Some("h2");
    let http2 = if config.http == HttpVersion::H2c || (offer_h2 && chose_h2) {
        Some(h2::H2Plan {
            requests: h2::H2Requests::of(config).map_err(usage)?,
            tls: tls.take(),
            streams: config.streams,
        })
    } else {
        if config.streams > 1 || config.grpc {
            return Err(usage(format!(
                "{}: {} did not choose h2 by ALPN; it speaks HTTP/1.1 only",
                if config.grpc { "--grpc" } else { "--streams" },
                config.target.host()
            )));
        }
        if offer_h2 {
            tls = tls
                .map(|_| engine::transport::TlsConnector::new(&config.tls, config.target.host()))
                .transpose()?;
        }
        None
    };
    crate::os::check_file_limit(
        config.connections as u64,
        &format!("{} connections", config.connections),
    )?;
    Ok(Prepared {
        request,
        http2,
        tls,
        addr,
        server_tls,
    })
}

/// How the connections are spread over the threads, and what the engine is told of the run.
struct Placement {
    shares: Vec<engine::WorkerShare>,
    total_connections: usize,
    /// A segment in rate mode: the whole run's config, which the engine paces by.
    engine_config: Option<LoadConfig>,
}

/// Splits the connections over `threads`. A segment's connections keep their numbers in the
/// whole run, and the engine sees the whole run's rate over all its connections: each
/// connection then sends at R / C with the phase it would have in one process (the segment's
/// own rate is R * c_I / C).
fn place(config: &LoadConfig, options: &RunOptions, threads: usize) -> Placement {
    let mut shares = split_shares(config.connections, threads, &config.mode);
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
            whole.plan = seg.whole_plan.clone();
            engine_config = Some(whole);
        }
    }
    Placement {
        shares,
        total_connections,
        engine_config,
    }
}

/// Checks that the interval log can be created (before waiting), then waits for `--start-at`;
/// returns how late the start was, if one was asked for.
fn wait_for_start(options: &RunOptions) -> anyhow::Result<Option<Duration>> {
    if let Some(path) = &options.hlog {
        std::fs::File::create(path)
            .map_err(|e| usage(format!("--hlog: cannot create {}: {e}", path.display())))?;
    }
    let Some(at) = options.start_at else {
        return Ok(None);
    };
    let (late, was_late) = scaleout::segment::wait_until(at);
    if was_late {
        eprintln!(
            "sweetspot: started {:.3} s late (--start-at {:.3})",
            late.as_secs_f64(),
            scaleout::segment::unix_seconds(at)
        );
    }
    Ok(Some(late))
}

/// The time series and the interval log of a run, fed while it runs.
struct Recording {
    hlog: Option<output::hlog::HlogWriter>,
    collector: Option<stats::series::IntervalCollector>,
    /// Handed to the engine's workers once.
    intervals: Option<stats::series::IntervalPlan>,
    /// A write to the interval log failed during the run.
    error: Option<anyhow::Error>,
}

impl Recording {
    fn open(
        config: &LoadConfig,
        options: &RunOptions,
        threads: usize,
        started_at: std::time::SystemTime,
    ) -> anyhow::Result<Recording> {
        let hlog = match &options.hlog {
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
                Some(output::hlog::HlogWriter::create(
                    path,
                    started_at,
                    &[comment],
                )?)
            }
            None => None,
        };
        // The time series, which also feeds the interval log.
        let interval = options.series.or(options
            .hlog
            .as_ref()
            .map(|_| stats::series::DEFAULT_INTERVAL));
        let (collector, intervals) = match interval {
            Some(interval) => {
                let (collector, plan) = stats::series::IntervalCollector::new(
                    interval,
                    threads,
                    config.mode.duration(),
                );
                (Some(collector), Some(plan))
            }
            None => (None, None),
        };
        Ok(Recording {
            hlog,
            collector,
            intervals,
            error: None,
        })
    }

    /// Takes the intervals completed so far, waiting up to `wait` (sleeps without a series).
    fn pump(&mut self, wait: Duration) {
        let Some(collector) = self.collector.as_mut() else {
            std::thread::sleep(Duration::from_millis(100));
            return;
        };
        let pumped = collector.pump(wait, &mut write_to(&mut self.hlog));
        if let Err(e) = pumped {
            self.error = Some(e);
            self.hlog = None;
        }
    }

    /// Closes the series and the log and puts the series in `report`.
    fn finish(self, elapsed: Duration, report: &mut LoadReport) -> anyhow::Result<()> {
        if let Some(e) = self.error {
            return Err(e.context("--hlog"));
        }
        let (Some(collector), mut hlog) = (self.collector, self.hlog) else {
            return Ok(());
        };
        let whole = match report.histogram.as_deref() {
            Some(text) => {
                Some(stats::LatencyHistogram::decode(text).map_err(|e| anyhow::anyhow!(e))?)
            }
            None => None,
        };
        let (points, censored) =
            collector.finish(elapsed, whole.as_ref(), &mut write_to(&mut hlog))?;
        if let Some(writer) = hlog {
            writer
                .finish(elapsed, censored.as_ref(), report)
                .context("--hlog")?;
        }
        report.series = points;
        Ok(())
    }
}

/// Runs one engine worker per share (an HTTP/2 one with `http2`), feeds the progress line and
/// the series while they run, and adds up what they measured.
fn drive(
    plan: &RunPlan,
    http2: Option<&h2::H2Plan>,
    shares: Vec<engine::WorkerShare>,
    progress: Option<&output::progress::LiveProgress>,
    recording: &mut Recording,
) -> anyhow::Result<ThreadStats> {
    let counters: Vec<AtomicU64> = shares.iter().map(|_| AtomicU64::new(0)).collect();
    let results: Vec<std::io::Result<ThreadStats>> = std::thread::scope(|scope| {
        let handles: Vec<_> = shares
            .into_iter()
            .zip(&counters)
            .map(|(share, completed)| {
                std::thread::Builder::new()
                    .name(format!("load-{}", share.index))
                    .spawn_scoped(scope, move || match http2 {
                        Some(h2) => h2::run_worker(plan, h2, share, completed),
                        None => engine::run_worker(plan, share, completed),
                    })
            })
            .collect();
        if progress.is_some() || recording.collector.is_some() {
            let running = || {
                handles
                    .iter()
                    .any(|h| h.as_ref().is_ok_and(|h| !h.is_finished()))
            };
            watch(running, &counters, plan.start, progress, recording);
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
    let mut merged: Option<ThreadStats> = None;
    for result in results {
        let stats = result.context("load thread failed")?;
        match merged.as_mut() {
            Some(all) => all.merge(&stats),
            None => merged = Some(stats),
        }
    }
    merged.context("no load threads ran")
}

/// While `running` says so: pumps the series and updates the progress line every 100 ms.
fn watch(
    running: impl Fn() -> bool,
    counters: &[AtomicU64],
    start: Instant,
    progress: Option<&output::progress::LiveProgress>,
    recording: &mut Recording,
) {
    let mut next_update = Instant::now();
    while running() {
        recording.pump(Duration::from_millis(50));
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

/// Where the series' complete intervals go beside the series: the interval log, if any.
fn write_to(
    hlog: &mut Option<output::hlog::HlogWriter>,
) -> impl FnMut(stats::series::CompleteInterval) -> anyhow::Result<()> + '_ {
    move |interval| match hlog.as_mut() {
        Some(writer) => writer.write_interval(&interval),
        None => Ok(()),
    }
}

/// Runs `sweetspot load`: validate, run with a progress line on a terminal, print the summary
/// and the JSON.
pub fn run_load(args: LoadArgs) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    let mut config = LoadConfig::from_args(&args)?;
    if let Some(dest) = &args.json {
        crate::render::json::check_destination("--json", dest)?;
    }
    let options = RunOptions::from_args(&args, &mut config)?;
    // Fail before the run, not after it, when an output file cannot be written.
    for (flag, path) in [("--csv", &args.csv), ("--html", &args.html)] {
        if let Some(path) = path {
            std::fs::File::create(path)
                .map_err(|e| usage(format!("{flag}: cannot create {}: {e}", path.display())))?;
        }
    }
    let live = (std::io::stderr().is_terminal() && !args.quiet)
        .then(|| output::progress::LiveProgress::new(&config));
    let stop = crate::os::stop_on_signals()?;
    let report = run_observed(&config, Some(&stop), live.as_ref(), &options)?;
    let summary = (!args.quiet).then(|| output::human::render(&report, &config));
    crate::render::json::write_results(summary.as_deref(), args.json.as_deref(), &report)?;
    if let Some(path) = &args.csv {
        std::fs::write(path, output::timeseries::csv(&report.series))
            .with_context(|| format!("--csv: cannot write {}", path.display()))?;
    }
    if let Some(path) = &args.html {
        std::fs::write(path, output::timeseries::html(&report, &report.series)?)
            .with_context(|| format!("--html: cannot write {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_responses_size_leaves_out_what_was_still_arriving() {
        // 10 responses of 1,000 bytes read whole, and 600 bytes of an eleventh.
        let report = LoadReport {
            requests: 10,
            responses_read: 10,
            bytes_read: 10_600,
            response_bytes: 10_000,
            ..LoadReport::default()
        };
        assert_eq!(mean_response_bytes(&report), 1000.0);
        // HTTP/2 counts no response bytes: its bytes read over every answer, drain in.
        let h2 = LoadReport {
            requests: 8,
            drained: 2,
            bytes_read: 10_600,
            ..LoadReport::default()
        };
        assert_eq!(mean_response_bytes(&h2), 1060.0);
    }
}
