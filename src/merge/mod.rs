//! `sweetspot merge`: one report from the segments of a distributed load run. Each worker
//! (`sweetspot load --segment I/N` under Slurm, a Kubernetes Indexed Job or ssh) writes a JSON
//! report with its whole latency histogram, or an interval log (`--hlog`) ending in its report.
//! Merging is exact: histograms are added, never percentiles averaged, and counts summed. Inputs
//! that are not one run (different targets, modes or totals, segments missing or twice, times
//! that do not overlap) are refused with one line (exit 2). [`combine`] is the pure part;
//! [`run_merge`] reads the files and writes the summary, `--json` and `--html` ([`html`]).

pub mod html;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::load::scaleout::{
    self, merge_url_reports, H2Report, LatencyHistogram, LowerBounds, SegmentInfo, StepReport,
    TlsReport, UrlReport,
};
use crate::load::{ErrorCounts, LatencyKey, LatencySummary, LoadReport};
use crate::usage;

pub use crate::load::SATURATED_BUSY_FRACTION;

/// Flags of `sweetspot merge`.
#[derive(Debug, Clone, clap::Args)]
pub struct MergeArgs {
    /// The workers' JSON reports (`load --segment I/N --json`) and/or interval logs (`--hlog`).
    #[arg(required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Write the merged report as JSON to PATH, or to stdout with "-".
    #[arg(long, value_name = "PATH")]
    pub json: Option<String>,
    /// Write a self-contained HTML page of the merged report to PATH.
    #[arg(long, value_name = "PATH")]
    pub html: Option<PathBuf>,
    /// No human summary.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// One worker's contribution, read from a JSON report or an interval log.
#[derive(Debug, Clone)]
pub struct WorkerInput {
    /// Where it came from (a file name), for messages.
    pub source: String,
    pub report: LoadReport,
    pub latency: LatencyHistogram,
    /// Rate mode, from JSON reports (interval logs hold the corrected view only).
    pub latency_uncorrected: Option<LatencyHistogram>,
}

/// One worker's line in the merged report.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct WorkerLine {
    pub index: u64,
    pub source: String,
    pub host: String,
    pub connections: u64,
    /// This worker's fraction of the run's connections (and so of its rate).
    pub share: f64,
    pub requests: u64,
    /// This worker's fraction of all complete responses.
    pub requests_share: f64,
    pub rps: f64,
    pub errors: u64,
    /// Its own generator CPU (user + system of its load threads), seconds.
    pub client_cpu_s: f64,
    /// That CPU over its run time and the cores its threads could use (1.0 = all busy).
    pub client_busy: f64,
    /// Busy at least [`SATURATED_BUSY_FRACTION`]: its numbers may describe the generator.
    pub saturated: bool,
    /// Rate mode: whether it sent at its share of the rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_held: Option<bool>,
    /// Seconds after the earliest worker that it started.
    pub start_offset_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_late_s: Option<f64>,
}

/// The merged report of a distributed run.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct MergedReport {
    pub target: String,
    pub mode: String,
    pub segments: u64,
    pub connections: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_requests: Option<u64>,
    /// Earliest start and latest end over all workers, Unix seconds.
    pub started_at_unix_s: f64,
    pub ended_at_unix_s: f64,
    /// From the earliest start to the latest end.
    pub duration_s: f64,
    /// When every worker was running: from the latest start to the earliest end.
    pub common_interval_s: f64,
    /// Complete responses of all workers.
    pub requests: u64,
    pub requests_sent: u64,
    /// Complete responses per second over the common interval (from the workers' per-second
    /// counts, so at one-second resolution).
    pub rps: f64,
    /// Rate mode: the sum of the workers' achieved send rates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_rate: Option<f64>,
    /// Percentiles of the sum of the workers' histograms. `lower_bound` lists the figures
    /// some worker marked as lower bounds (conservative: see the README).
    pub latency_us: LatencySummary,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_uncorrected_us: Option<LatencySummary>,
    pub status: BTreeMap<String, u64>,
    pub errors: ErrorCounts,
    pub unanswered: u64,
    pub client_cpu_s: f64,
    pub workers: Vec<WorkerLine>,
    /// Indices of saturated workers.
    pub saturated_workers: Vec<u64>,
    /// The merged histogram (base64 compressed V2, as in load reports).
    pub histogram: String,
    /// `--urls` runs: each line's counts summed and histograms added over the workers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub urls: Vec<UrlReport>,
    /// A load plan's steps, added over the workers (see [`scaleout::merge_steps`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepReport>,
    /// An HTTP/2 run: the workers' HTTP/2 figures added up ([`H2Report::add_up`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2: Option<H2Report>,
    /// An `https://` run: the workers' handshakes added up, their histograms merged
    /// ([`TlsReport::add_up`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsReport>,
}

/// Whether a worker's own generator was the limit: its threads busy nearly all the time on the
/// cores they could use (threads beyond the worker's cores cannot add CPU).
pub fn worker_saturated(client_cpu_s: f64, duration_s: f64, threads: usize, cores: usize) -> bool {
    worker_busy(client_cpu_s, duration_s, threads, cores) >= SATURATED_BUSY_FRACTION
}

/// CPU over run time and usable cores (0 when unknown).
pub fn worker_busy(client_cpu_s: f64, duration_s: f64, threads: usize, cores: usize) -> f64 {
    let usable = match cores {
        0 => threads.max(1),
        cores => threads.clamp(1, cores),
    };
    if duration_s <= 0.0 {
        0.0
    } else {
        client_cpu_s / duration_s / usable as f64
    }
}

/// Complete responses between `from_s` and `to_s` seconds into a run of `duration_s`, from its
/// per-second rates (whole seconds, then the scaled partial last second), taking each second's
/// rate as constant within it.
pub fn requests_between(per_second: &[f64], duration_s: f64, from_s: f64, to_s: f64) -> f64 {
    per_second
        .iter()
        .enumerate()
        .map(|(k, rate)| {
            let (a, b) = (k as f64, (k as f64 + 1.0).min(duration_s));
            let overlap = (b.min(to_s) - a.max(from_s)).max(0.0);
            rate * overlap
        })
        .sum()
}

/// Merges the workers of one run; every reason they are not one run is an `Err` line.
pub fn combine(inputs: &[WorkerInput]) -> Result<MergedReport, String> {
    let (workers, base) = one_run(inputs)?;
    let first = workers[0];
    let window = Window::of(&workers)?;
    let totals = Totals::add_up(&workers, &window);
    let urls = merge_url_reports(
        &workers
            .iter()
            .map(|w| (w.source.as_str(), w.report.urls.as_slice()))
            .collect::<Vec<_>>(),
    )?;
    let step_rows: Vec<&[StepReport]> = workers.iter().map(|w| &w.report.steps[..]).collect();
    let steps = scaleout::merge_steps(&step_rows)
        .map_err(|e| format!("{} and the others: {e}", first.source))?;
    let common = window.common_end - window.common_start;
    let http2: Vec<&H2Report> = workers
        .iter()
        .filter_map(|w| w.report.http2.as_ref())
        .collect();
    let tls: Vec<&TlsReport> = workers
        .iter()
        .filter_map(|w| w.report.tls.as_ref())
        .collect();
    Ok(MergedReport {
        http2: (!http2.is_empty()).then(|| H2Report::add_up(&http2, &totals.latency)),
        tls: TlsReport::add_up(&tls, &totals.latency),
        target: first.report.target.clone(),
        mode: first.report.mode.clone(),
        segments: base.count,
        connections: base.total_connections,
        target_rate: base.total_rate,
        target_requests: base.total_requests,
        started_at_unix_s: window.start,
        ended_at_unix_s: window.end,
        duration_s: window.end - window.start,
        common_interval_s: common,
        requests: totals.requests,
        requests_sent: totals.sent,
        rps: totals.in_common / common,
        achieved_rate: totals.achieved,
        latency_us: totals.latency_us(),
        latency_uncorrected_us: totals.latency_uncorrected_us(),
        status: totals.status,
        errors: totals.errors,
        unanswered: totals.unanswered,
        client_cpu_s: totals.cpu,
        saturated_workers: totals
            .lines
            .iter()
            .filter(|l| l.saturated)
            .map(|l| l.index)
            .collect(),
        histogram: LatencyHistogram::encode(&totals.latency),
        workers: totals.lines,
        urls,
        steps,
    })
}

/// Checks that `inputs` are the segments of one run, each once and none missing, and returns
/// them in segment order with the run's description.
fn one_run(inputs: &[WorkerInput]) -> Result<(Vec<&WorkerInput>, SegmentInfo), String> {
    let first = inputs.first().ok_or("nothing to merge")?;
    let seg_of = |w: &WorkerInput| {
        w.report.segment.clone().ok_or_else(|| {
            format!(
                "{} is not a segment of a distributed run (it was not run with --segment I/N)",
                w.source
            )
        })
    };
    let base = seg_of(first)?;
    let mut by_index: BTreeMap<u64, &WorkerInput> = BTreeMap::new();
    for w in inputs {
        let seg = seg_of(w)?;
        same_run(first, &base, w, &seg)?;
        if let Some(other) = by_index.insert(seg.index, w) {
            return Err(format!(
                "segment {}/{} appears twice: {} and {}",
                seg.index, seg.count, other.source, w.source
            ));
        }
    }
    let missing: Vec<String> = (0..base.count)
        .filter(|i| !by_index.contains_key(i))
        .map(|i| i.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "segments {} of {} are missing (of 0..{})",
            missing.join(", "),
            base.count,
            base.count - 1
        ));
    }
    Ok((by_index.into_values().collect(), base))
}

/// Whether worker `w` (segment `seg`) ran the same run as `first` (segment `base`).
fn same_run(
    first: &WorkerInput,
    base: &SegmentInfo,
    w: &WorkerInput,
    seg: &SegmentInfo,
) -> Result<(), String> {
    let differs = |what: &str, a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| {
        Err(format!(
            "{} and {} are not one run: {what} {a:?} vs {b:?}",
            first.source, w.source
        ))
    };
    if seg.count != base.count {
        return differs("segment count", &base.count, &seg.count);
    }
    if w.report.target != first.report.target {
        return differs("target", &first.report.target, &w.report.target);
    }
    if w.report.mode != first.report.mode {
        return differs("mode", &first.report.mode, &w.report.mode);
    }
    if seg.total_connections != base.total_connections {
        return differs(
            "total connections",
            &base.total_connections,
            &seg.total_connections,
        );
    }
    if seg.total_rate != base.total_rate {
        return differs("total rate", &base.total_rate, &seg.total_rate);
    }
    if seg.plan != base.plan {
        return differs("load plan", &base.plan, &seg.plan);
    }
    let http2 = |r: &LoadReport| r.http2.as_ref().map(|h| (h.protocol.clone(), h.streams));
    if http2(&w.report) != http2(&first.report) {
        return differs(
            "HTTP/2 (protocol, streams)",
            &http2(&first.report),
            &http2(&w.report),
        );
    }
    let tls = |r: &LoadReport| r.tls.as_ref().map(|t| (t.version.clone(), t.alpn.clone()));
    if tls(&w.report) != tls(&first.report) {
        return differs("TLS (version, ALPN)", &tls(&first.report), &tls(&w.report));
    }
    if seg.total_requests != base.total_requests {
        return differs("total requests", &base.total_requests, &seg.total_requests);
    }
    Ok(())
}

/// When the workers ran: the first start to the last end, and the interval all of them ran.
struct Window {
    start: f64,
    end: f64,
    common_start: f64,
    common_end: f64,
}

impl Window {
    /// The workers' window; an error when they did not all run at one time.
    fn of(workers: &[&WorkerInput]) -> Result<Window, String> {
        let starts = || workers.iter().map(|w| w.report.started_at_unix_s);
        let ends = || workers.iter().map(|w| w.report.ended_at_unix_s);
        let window = Window {
            start: starts().fold(f64::INFINITY, f64::min),
            end: ends().fold(f64::NEG_INFINITY, f64::max),
            common_start: starts().fold(f64::NEG_INFINITY, f64::max),
            common_end: ends().fold(f64::INFINITY, f64::min),
        };
        if window.common_end > window.common_start {
            return Ok(window);
        }
        let early = workers
            .iter()
            .min_by(|a, b| {
                a.report
                    .ended_at_unix_s
                    .total_cmp(&b.report.ended_at_unix_s)
            })
            .expect("non-empty");
        let late = workers
            .iter()
            .max_by(|a, b| {
                a.report
                    .started_at_unix_s
                    .total_cmp(&b.report.started_at_unix_s)
            })
            .expect("non-empty");
        Err(format!(
            "not one run: {} ended at {:.3} before {} started at {:.3} (times do not overlap)",
            early.source, early.report.ended_at_unix_s, late.source, late.report.started_at_unix_s
        ))
    }
}

/// The workers' figures added up: histograms merged, counts summed, one line per worker.
struct Totals {
    latency: LatencyHistogram,
    /// `None` once a worker had no uncorrected view.
    uncorrected: Option<LatencyHistogram>,
    bounds: LowerBounds,
    uncorrected_bounds: LowerBounds,
    status: BTreeMap<String, u64>,
    errors: ErrorCounts,
    requests: u64,
    sent: u64,
    unanswered: u64,
    cpu: f64,
    /// Requests answered inside the common interval.
    in_common: f64,
    achieved: Option<f64>,
    lines: Vec<WorkerLine>,
}

impl Totals {
    fn add_up(workers: &[&WorkerInput], window: &Window) -> Totals {
        let mut t = Totals {
            latency: LatencyHistogram::new(),
            uncorrected: Some(LatencyHistogram::new()),
            bounds: LowerBounds::default(),
            uncorrected_bounds: LowerBounds::default(),
            status: BTreeMap::new(),
            errors: ErrorCounts::default(),
            requests: 0,
            sent: 0,
            unanswered: 0,
            cpu: 0.0,
            in_common: 0.0,
            achieved: None,
            lines: Vec::new(),
        };
        let total_requests: u64 = workers.iter().map(|w| w.report.requests).sum();
        for w in workers {
            t.add(w, window);
            t.lines.push(worker_line(w, window.start, total_requests));
        }
        t
    }

    fn add(&mut self, w: &WorkerInput, window: &Window) {
        let r = &w.report;
        self.latency.merge(&w.latency);
        match (&mut self.uncorrected, &w.latency_uncorrected) {
            (Some(all), Some(mine)) => all.merge(mine),
            _ => self.uncorrected = None,
        }
        for key in r.latency_us.lower_bound.keys() {
            self.bounds.insert(key);
        }
        if let Some(u) = &r.latency_uncorrected_us {
            for key in u.lower_bound.keys() {
                self.uncorrected_bounds.insert(key);
            }
        }
        for (code, n) in &r.status {
            *self.status.entry(code.clone()).or_insert(0) += n;
        }
        self.errors.merge(&r.errors);
        self.requests += r.requests;
        self.sent += r.requests_sent;
        self.unanswered += r.unanswered;
        self.cpu += r.client_cpu_s;
        if let Some(a) = r.achieved_rate {
            *self.achieved.get_or_insert(0.0) += a;
        }
        self.in_common += requests_between(
            &r.per_second,
            r.duration_s,
            window.common_start - r.started_at_unix_s,
            window.common_end - r.started_at_unix_s,
        );
    }

    fn latency_us(&self) -> LatencySummary {
        let mut summary = self.latency.summary();
        summary.lower_bound = self.bounds;
        summary
    }

    fn latency_uncorrected_us(&self) -> Option<LatencySummary> {
        let h = self.uncorrected.as_ref().filter(|h| !h.is_empty())?;
        let mut summary = h.summary();
        summary.lower_bound = self.uncorrected_bounds;
        Some(summary)
    }
}

/// One worker's line of the merged report.
fn worker_line(w: &WorkerInput, start: f64, total_requests: u64) -> WorkerLine {
    let r = &w.report;
    let seg = r.segment.as_ref().expect("a segment, checked by one_run");
    WorkerLine {
        index: seg.index,
        source: w.source.clone(),
        host: seg.host.clone(),
        connections: seg.connections,
        share: seg.connections as f64 / seg.total_connections.max(1) as f64,
        requests: r.requests,
        requests_share: if total_requests == 0 {
            0.0
        } else {
            r.requests as f64 / total_requests as f64
        },
        rps: r.rps,
        errors: r.errors.total(),
        client_cpu_s: r.client_cpu_s,
        client_busy: worker_busy(r.client_cpu_s, r.duration_s, r.threads, seg.cores),
        saturated: worker_saturated(r.client_cpu_s, r.duration_s, r.threads, seg.cores),
        rate_held: r.rate_held,
        start_offset_s: r.started_at_unix_s - start,
        start_late_s: r.start_late_s,
    }
}

/// Reads one worker's JSON report or interval log.
pub fn read_input(path: &Path) -> anyhow::Result<WorkerInput> {
    let source = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| usage(format!("cannot read {source}: {e}")))?;
    if text.trim_start().starts_with('{') {
        let report: LoadReport = serde_json::from_str(&text)
            .map_err(|e| usage(format!("{source}: not a sweetspot load report: {e}")))?;
        let latency = match &report.histogram {
            Some(h) => LatencyHistogram::decode(h).map_err(|e| usage(format!("{source}: {e}")))?,
            None => {
                return Err(usage(format!(
                    "{source} has no \"histogram\" (written by an older sweetspot?): cannot merge exactly"
                )))
            }
        };
        if latency.len() != report.latency_us.count {
            return Err(usage(format!(
                "{source}: its histogram holds {} samples but its latency_us.count says {}",
                latency.len(),
                report.latency_us.count
            )));
        }
        let latency_uncorrected = match &report.histogram_uncorrected {
            Some(h) => {
                Some(LatencyHistogram::decode(h).map_err(|e| usage(format!("{source}: {e}")))?)
            }
            None => None,
        };
        return Ok(WorkerInput {
            source,
            report,
            latency,
            latency_uncorrected,
        });
    }
    let run = scaleout::read_interval_log(&text).map_err(|e| usage(format!("{source}: {e}")))?;
    let report = run.report.clone().ok_or_else(|| {
        usage(format!(
            "{source}: no \"{}\" line (an interval log of sweetspot load --hlog ends with one)",
            scaleout::REPORT_COMMENT.trim()
        ))
    })?;
    let latency = run.total();
    if latency.len() != report.latency_us.count {
        return Err(usage(format!(
            "{source}: its intervals hold {} samples but its report line {}",
            latency.len(),
            report.latency_us.count
        )));
    }
    Ok(WorkerInput {
        source,
        report,
        latency,
        latency_uncorrected: None,
    })
}

/// Runs `sweetspot merge`.
pub fn run_merge(args: MergeArgs) -> anyhow::Result<()> {
    let inputs = args
        .files
        .iter()
        .map(|p| read_input(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let merged = combine(&inputs).map_err(usage)?;
    let summary = (!args.quiet).then(|| render(&merged));
    crate::render::json::write_results(summary.as_deref(), args.json.as_deref(), &merged)?;
    if let Some(path) = &args.html {
        std::fs::write(path, html::render(&merged))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// The human summary.
pub fn render(m: &MergedReport) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "merged {} segments of {} ({} mode, {} connections{})",
        m.segments,
        m.target,
        m.mode,
        m.connections,
        m.target_rate.map_or(String::new(), |r| format!(", -R {r}"))
    );
    let _ = writeln!(
        out,
        "  {} requests, {:.1} req/s over the common {:.3} s ({:.3} s first start to last end)",
        m.requests, m.rps, m.common_interval_s, m.duration_s
    );
    let s = &m.latency_us;
    let _ = writeln!(
        out,
        "  latency: p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
        s.figure(LatencyKey::P50),
        s.figure(LatencyKey::P90),
        s.figure(LatencyKey::P99),
        s.figure(LatencyKey::P999),
        s.figure(LatencyKey::Max)
    );
    let _ = writeln!(
        out,
        "  errors: {} (connect {}, read {}, write {}, timeout {}, protocol {}); status {:?}",
        m.errors.total(),
        m.errors.connect,
        m.errors.read,
        m.errors.write,
        m.errors.timeout,
        m.errors.protocol,
        m.status
    );
    let _ = writeln!(
        out,
        "  worker  host        conns  share  requests      req/s   cpu s   busy"
    );
    for w in &m.workers {
        let _ = writeln!(
            out,
            "  {:>6}  {:<10} {:>6} {:>5.1}% {:>9} {:>10.1} {:>7.3} {:>5.0}%{}",
            w.index,
            w.host,
            w.connections,
            w.share * 100.0,
            w.requests,
            w.rps,
            w.client_cpu_s,
            w.client_busy * 100.0,
            if w.saturated { "  SATURATED" } else { "" }
        );
    }
    if let Some(h2) = &m.http2 {
        scaleout::h2_block(&mut out, h2, m.connections as usize);
    }
    if let Some(tls) = &m.tls {
        scaleout::tls_block(&mut out, tls, true);
    }
    if !m.urls.is_empty() {
        out.push_str(&scaleout::url_table(&m.urls));
    }
    out.push_str(&scaleout::step_table(&m.steps));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(index: u64, count: u64, samples: &[u64], start: f64) -> WorkerInput {
        let mut latency = LatencyHistogram::new();
        for &us in samples {
            latency.record_us(us);
        }
        let report = LoadReport {
            requests: samples.len() as u64,
            duration_s: 2.0,
            rps: samples.len() as f64 / 2.0,
            latency_us: latency.summary(),
            status: BTreeMap::from([("200".to_string(), samples.len() as u64)]),
            per_second: vec![samples.len() as f64 / 2.0; 2],
            client_cpu_s: 0.5,
            target: "http://127.0.0.1:1/".into(),
            mode: "closed".into(),
            connections: 2,
            threads: 1,
            segment: Some(SegmentInfo {
                index,
                count,
                connections: 2,
                total_connections: 2 * count,
                total_rate: None,
                total_requests: None,
                requests: None,
                host: "h".into(),
                cores: 2,
                plan: None,
            }),
            started_at_unix_s: start,
            ended_at_unix_s: start + 2.0,
            histogram: Some(LatencyHistogram::encode(&latency)),
            ..LoadReport::default()
        };
        WorkerInput {
            source: format!("w{index}.json"),
            report,
            latency,
            latency_uncorrected: None,
        }
    }

    #[test]
    fn the_merge_equals_one_histogram_of_every_sample() {
        let mut all = LatencyHistogram::new();
        let mut inputs = Vec::new();
        for index in 0..4u64 {
            // Different shapes per worker, so averaging percentiles would be visibly wrong.
            let samples: Vec<u64> = (1..=1000 + 500 * index)
                .map(|k| k * (index + 1) * (index + 1) * 13 % 90_000 + 50)
                .collect();
            for &us in &samples {
                all.record_us(us);
            }
            inputs.push(worker(index, 4, &samples, 1000.0 + index as f64 * 0.1));
        }
        let m = combine(&inputs).unwrap();
        assert_eq!(m.latency_us, all.summary());
        assert_eq!(m.requests, all.len());
        assert_eq!(m.status.get("200"), Some(&all.len()));
        assert_eq!(
            LatencyHistogram::decode(&m.histogram).unwrap().summary(),
            all.summary()
        );
        let averaged_p99: f64 = inputs.iter().map(|w| w.latency.summary().p99).sum::<f64>() / 4.0;
        assert_ne!(m.latency_us.p99, averaged_p99);
        assert!((m.common_interval_s - 1.7).abs() < 1e-9);
        assert_eq!(
            m.workers.iter().map(|w| w.index).collect::<Vec<_>>(),
            vec![0, 1, 2, 3]
        );
        assert!(m.saturated_workers.is_empty());
    }

    #[test]
    fn tls_handshakes_add_up_their_histograms_merge_and_another_version_is_not_the_run() {
        let tls = |times: &[u64], resumed| {
            let mut h = LatencyHistogram::new();
            for &us in times {
                h.record_us(us);
            }
            TlsReport {
                version: "TLSv1.3".into(),
                alpn: Some("h2".into()),
                handshakes: times.len() as u64,
                resumed,
                handshake_us: h.summary(),
                handshake_share: 0.0,
                handshake_histogram: Some(h.encode()),
            }
        };
        // 10 samples of 1,000 us each: 10,000 us of latency over the two workers.
        let mut a = worker(0, 2, &[1000; 5], 1000.0);
        let mut b = worker(1, 2, &[1000; 5], 1000.0);
        a.report.tls = Some(tls(&[1000, 1000, 1000], 1));
        b.report.tls = Some(tls(&[3000, 3000], 0));
        let m = combine(&[a.clone(), b.clone()]).unwrap();
        let got = m.tls.unwrap();
        assert_eq!((got.handshakes, got.resumed), (5, 1));
        // The five handshakes' own histogram: mean 1,800 us, the slowest 3,000.
        let mut all = LatencyHistogram::new();
        for us in [1000, 1000, 1000, 3000, 3000] {
            all.record_us(us);
        }
        assert_eq!(got.handshake_us, all.summary());
        assert!((got.handshake_us.mean - 1800.0).abs() < 2.0, "{got:?}");
        // 9,000 us of handshakes beside 10,000 us of latency.
        assert!(
            (got.handshake_share - 9000.0 / 19000.0).abs() < 1e-3,
            "{got:?}"
        );
        // A part without its histogram (an older report): no TLS figures rather than wrong ones.
        b.report.tls.as_mut().unwrap().handshake_histogram = None;
        assert!(combine(&[a.clone(), b.clone()]).unwrap().tls.is_none());
        // Another TLS version is another run.
        b.report.tls = Some(TlsReport {
            version: "TLSv1.2".into(),
            ..tls(&[3000], 0)
        });
        let e = combine(&[a, b]).unwrap_err();
        assert!(e.contains("TLS (version, ALPN)"), "{e}");
    }

    #[test]
    fn http2_figures_add_up_and_a_worker_of_another_protocol_is_not_the_run() {
        let h2 = |opened, cap, waits, mean_us: f64, max_us, goaways| H2Report {
            protocol: "h2c".into(),
            streams: 4,
            connections_opened: opened,
            server_max_streams: cap,
            stream_waits: waits,
            stream_wait_mean_us: mean_us,
            stream_wait_max_us: max_us,
            stream_wait_share: 0.5,
            goaways,
            resets: goaways + 1,
            grpc_status: [("0".to_string(), opened * 10)].into(),
        };
        // 10 samples of 1,000 us each: 10,000 us of latency over the two workers.
        let mut a = worker(0, 2, &[1000; 5], 1000.0);
        let mut b = worker(1, 2, &[1000; 5], 1000.0);
        a.report.http2 = Some(h2(3, Some(100), 2, 500.0, 900.0, 2));
        b.report.http2 = Some(h2(2, Some(5), 3, 1000.0, 1500.0, 1));
        let m = combine(&[a.clone(), b.clone()]).unwrap();
        let got = m.http2.unwrap();
        assert_eq!(got.grpc_status, [("0".to_string(), 50)].into());
        assert_eq!(
            (
                got.connections_opened,
                got.server_max_streams,
                got.stream_waits
            ),
            (5, Some(5), 5)
        );
        // (2 x 500 + 3 x 1,000) / 5 waits; 4,000 of the 10,000 us of latency.
        assert_eq!(
            (got.stream_wait_mean_us, got.stream_wait_max_us),
            (800.0, 1500.0)
        );
        assert!((got.stream_wait_share - 0.4).abs() < 1e-9, "{got:?}");
        assert_eq!((got.goaways, got.resets), (3, 5));
        assert_eq!((got.protocol.as_str(), got.streams), ("h2c", 4));
        b.report.http2 = None;
        assert_eq!(
            combine(&[a, b]).unwrap_err(),
            "w0.json and w1.json are not one run: HTTP/2 (protocol, streams) \
             Some((\"h2c\", 4)) vs None"
        );
    }

    #[test]
    fn lower_bounds_of_any_worker_mark_the_merge() {
        let mut a = worker(0, 2, &[100, 200], 10.0);
        let b = worker(1, 2, &[300], 10.0);
        a.report.latency_us.lower_bound.insert(LatencyKey::Max);
        let m = combine(&[a, b]).unwrap();
        assert_eq!(
            m.latency_us.lower_bound.keys().collect::<Vec<_>>(),
            vec![LatencyKey::Max]
        );
    }

    #[test]
    fn mismatched_runs_are_refused() {
        let ok = || vec![worker(0, 2, &[1], 10.0), worker(1, 2, &[2], 10.5)];
        assert!(combine(&ok()).is_ok());
        let mut w = ok();
        w[1].report.target = "http://127.0.0.1:2/".into();
        assert!(combine(&w).unwrap_err().contains("target"));
        let mut w = ok();
        w[1].report.mode = "rate".into();
        assert!(combine(&w).unwrap_err().contains("mode"));
        let mut w = ok();
        w[1].report.started_at_unix_s = 20.0;
        w[1].report.ended_at_unix_s = 22.0;
        assert!(combine(&w).unwrap_err().contains("do not overlap"));
        let w = vec![worker(0, 2, &[1], 10.0)];
        assert!(combine(&w)
            .unwrap_err()
            .contains("segments 1 of 2 are missing"));
        let w = vec![worker(0, 2, &[1], 10.0), worker(0, 2, &[1], 10.0)];
        assert!(combine(&w).unwrap_err().contains("appears twice"));
        let w = vec![worker(0, 2, &[1], 10.0), worker(1, 3, &[1], 10.0)];
        assert!(combine(&w).unwrap_err().contains("segment count"));
        let mut w = ok();
        w[0].report.segment = None;
        assert!(combine(&w).unwrap_err().contains("not a segment"));
        assert!(combine(&[]).is_err());
    }

    #[test]
    fn a_busy_worker_is_flagged() {
        assert!(worker_saturated(1.9, 1.0, 2, 2));
        assert!(
            worker_saturated(0.9, 1.0, 4, 1),
            "threads beyond cores add nothing"
        );
        assert!(!worker_saturated(0.5, 1.0, 2, 2));
        assert!(!worker_saturated(1.0, 0.0, 1, 1));
        let mut busy = worker(1, 2, &[5], 10.0);
        busy.report.client_cpu_s = 1.95;
        let m = combine(&[worker(0, 2, &[5], 10.0), busy]).unwrap();
        assert_eq!(m.saturated_workers, vec![1]);
    }

    #[test]
    fn requests_in_a_window_integrate_per_second_rates() {
        // 10/s, 20/s, then 0.5 s at 40/s.
        let rates = [10.0, 20.0, 40.0];
        assert_eq!(requests_between(&rates, 2.5, 0.0, 2.5), 50.0);
        assert_eq!(requests_between(&rates, 2.5, 0.5, 1.5), 15.0);
        assert_eq!(requests_between(&rates, 2.5, 2.0, 9.0), 20.0);
        assert_eq!(requests_between(&rates, 2.5, -1.0, 0.0), 0.0);
    }
}
