//! Analysis: from measured points to an answer, as pure functions over the results.
//!
//! - the best architecture per workload within a p99 bound (highest throughput among the points
//!   whose p99 meets the bound with at most 1% errors);
//! - the sweet-spot worker count: the fewest workers within 5% of the best throughput;
//! - a Universal Scalability Law fit per series ([`super::usl`]) with its predicted peak;
//! - Goetz's pool size, N_threads = N_cpu x U x (1 + W/C) (B. Goetz et al., *Java Concurrency in
//!   Practice*, 2006, section 8.2), from the workload's wait W and the measured server CPU per
//!   request C, set beside the measured sweet spot;
//! - Little's law, L = X x W (J. D. C. Little, 1961): requests in flight = throughput x mean
//!   latency, which in a closed loop should equal the connections offered; a shortfall means the
//!   load did not reach the server as intended;
//! - whether the generator rather than the server was saturated.
//!
//! Everything here is deterministic and tested on known data in this file.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::results::{PointResult, RunMeasurement, Spread, SweepResults};
use super::spec::{Arch, LoadMode};
use super::usl::{fit_usl, UslFit};

/// Throughputs within this fraction of the best count as "as good" (sweet spot, ties).
pub const WITHIN_BEST: f64 = 0.05;
/// Points with more errors than this fraction are not candidates for "best".
pub const MAX_ERROR_RATE: f64 = 0.01;
/// Little's law: warn when fewer than this fraction of the offered requests were in flight
/// (keep-alive connections: the generator sends the next request at once).
pub const LITTLE_MIN_RATIO: f64 = 0.8;
/// The same with a connection per request, whose connect and close are outside the measured
/// latency and legitimately lower the ratio for fast requests.
pub const LITTLE_MIN_RATIO_PER_REQUEST: f64 = 0.5;

/// The in-flight ratio under which a point counts as starved.
pub fn little_min_ratio(keepalive: bool) -> f64 {
    if keepalive {
        LITTLE_MIN_RATIO
    } else {
        LITTLE_MIN_RATIO_PER_REQUEST
    }
}

/// The median of a slice (mean of the middle two for even lengths); 0 for an empty slice.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return 0.0;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

/// Picks the repetition with the median throughput as the point's representative (so its
/// latency, errors and CPU belong together) and the min/max spread over all of them.
pub fn fold_repetitions(runs: &[RunMeasurement]) -> Option<(RunMeasurement, Spread)> {
    if runs.is_empty() {
        return None;
    }
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by(|&a, &b| runs[a].rps.total_cmp(&runs[b].rps));
    // Lower median for even counts: never flatter the result.
    let representative = runs[order[(runs.len() - 1) / 2]].clone();
    let fold = |f: fn(&RunMeasurement) -> f64, pick: fn(f64, f64) -> f64| {
        runs.iter().map(f).reduce(pick).unwrap_or(0.0)
    };
    let spread = Spread {
        repetitions: runs.len() as u32,
        rps_min: fold(|r| r.rps, f64::min),
        rps_max: fold(|r| r.rps, f64::max),
        p99_min: fold(|r| r.latency_us.p99, f64::min),
        p99_max: fold(|r| r.latency_us.p99, f64::max),
    };
    Some((representative, spread))
}

/// Whether the generator and not the server limited a point: the generator used nearly a core
/// per load thread while the server used well below what was left for it.
///
/// `server_parallelism` is how many cores the server could use at most (1 for a single-threaded
/// architecture); the server's room is that, capped by the cores the generator left free.
pub fn generator_saturated(
    client_cpu_s: f64,
    client_threads: u32,
    server_cpu_s: f64,
    duration_s: f64,
    cores: f64,
    server_parallelism: f64,
) -> bool {
    if duration_s <= 0.0 {
        return false;
    }
    let client_busy = client_cpu_s / duration_s;
    let server_busy = server_cpu_s / duration_s;
    let client_threads = f64::from(client_threads.max(1)).min(cores);
    let server_room = server_parallelism.min((cores - client_busy).max(0.5));
    client_busy >= 0.85 * client_threads && server_busy < 0.7 * server_room
}

/// Little's law: mean requests in flight = throughput x mean latency.
pub fn requests_in_flight(rps: f64, mean_latency_us: f64) -> f64 {
    rps * mean_latency_us / 1e6
}

/// A shortfall must also cost at least this much time per request cycle to count: for
/// requests of tens of microseconds, the generator's own turnaround between a response and the
/// next request is a large fraction of the cycle without anything being wrong.
pub const LITTLE_MIN_GAP_US: f64 = 1000.0;

/// Per request cycle of a connection, the time not spent waiting for a response:
/// concurrency / throughput - mean latency.
pub fn cycle_gap_us(rps: f64, mean_latency_us: f64, concurrency: u32) -> f64 {
    f64::from(concurrency) / rps * 1e6 - mean_latency_us
}

/// True when markedly fewer requests were in flight than the closed loop offered: some
/// connections were not being served (or the generator was not sending).
pub fn little_shortfall(rps: f64, mean_latency_us: f64, concurrency: u32, keepalive: bool) -> bool {
    if rps <= 0.0 || concurrency == 0 {
        return false;
    }
    let ratio = requests_in_flight(rps, mean_latency_us) / f64::from(concurrency);
    ratio < little_min_ratio(keepalive)
        && cycle_gap_us(rps, mean_latency_us, concurrency) > LITTLE_MIN_GAP_US
}

/// A warning when fewer requests were in flight than the closed loop offered.
pub fn little_warning(
    rps: f64,
    mean_latency_us: f64,
    concurrency: u32,
    errors: u64,
    keepalive: bool,
) -> Option<String> {
    if !little_shortfall(rps, mean_latency_us, concurrency, keepalive) {
        return None;
    }
    let in_flight = requests_in_flight(rps, mean_latency_us);
    let ratio = in_flight / f64::from(concurrency);
    let cause = if errors > 0 {
        format!("{errors} requests failed or timed out, and time spent on them is not latency")
    } else {
        if keepalive {
            "the other connections waited unanswered, as when a server gives each worker one \
             keep-alive connection at a time, or the generator was slow to send"
                .to_string()
        } else {
            "connections waited in the server's accept backlog, or the generator spent the time \
             connecting"
                .to_string()
        }
    };
    Some(format!(
        "Little's law: throughput x mean latency = {in_flight:.1} requests in flight, but {concurrency} \
         connections were offered ({:.0}%): the load did not reach the server as intended ({cause})",
        ratio * 100.0
    ))
}

/// Goetz's pool size: N_cpu x U x (1 + W/C). `None` without a positive compute time.
pub fn goetz_pool_size(cores: f64, utilization: f64, wait_s: f64, compute_s: f64) -> Option<f64> {
    (compute_s > 0.0 && cores > 0.0).then(|| cores * utilization * (1.0 + wait_s / compute_s))
}

/// The fewest workers whose throughput is within 5% of the best; `None` for fewer than two
/// distinct worker counts.
pub fn sweet_spot(series: &[(u32, f64)]) -> Option<u32> {
    let distinct: BTreeSet<u32> = series.iter().map(|p| p.0).collect();
    if distinct.len() < 2 {
        return None;
    }
    let best = series.iter().map(|p| p.1).fold(f64::MIN, f64::max);
    series
        .iter()
        .filter(|p| p.1 >= best * (1.0 - WITHIN_BEST))
        .map(|p| p.0)
        .min()
}

/// The architecture that wins a workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BestChoice {
    pub arch: String,
    pub workers: Option<u32>,
    pub concurrency: u32,
    pub rps: f64,
    pub p99_us: f64,
    /// True when the bound was met; false means no point met it and this is the lowest p99.
    pub within_bound: bool,
    /// Other architectures within 5% of this one's throughput (under the same rule).
    pub ties: Vec<String>,
    /// Each candidate architecture's best throughput under the bound, best first.
    pub ranking: Vec<(String, f64)>,
    /// Architectures with no point under the bound, with why.
    pub excluded: Vec<(String, String)>,
}

/// The best architecture among `points` (one workload) within `p99_bound_us`.
pub fn best_within_bound(points: &[&PointResult], p99_bound_us: f64) -> Option<BestChoice> {
    let usable: Vec<&PointResult> = points
        .iter()
        .copied()
        .filter(|p| p.ok && p.rps > 0.0)
        .collect();
    if usable.is_empty() {
        return None;
    }
    let meets = |p: &PointResult| {
        p.latency_us.p99 <= p99_bound_us && p.error_rate() <= MAX_ERROR_RATE && !p.starved
    };
    let mut best_per_arch: BTreeMap<&str, &PointResult> = BTreeMap::new();
    for p in usable.iter().copied().filter(|p| meets(p)) {
        let entry = best_per_arch.entry(p.arch.as_str()).or_insert(p);
        if p.rps > entry.rps {
            *entry = p;
        }
    }
    let archs: BTreeSet<&str> = points.iter().map(|p| p.arch.as_str()).collect();
    let excluded: Vec<(String, String)> = archs
        .iter()
        .filter(|a| !best_per_arch.contains_key(*a))
        .map(|a| {
            let mine: Vec<&PointResult> = points.iter().copied().filter(|p| p.arch == *a).collect();
            let reason = if mine.iter().all(|p| !p.ok) {
                "every point failed".to_string()
            } else if mine
                .iter()
                .filter(|p| p.ok)
                .all(|p| p.error_rate() > MAX_ERROR_RATE)
            {
                "errors at every level".to_string()
            } else if mine
                .iter()
                .filter(|p| p.ok)
                .all(|p| p.starved || p.error_rate() > MAX_ERROR_RATE)
            {
                "at every level some connections waited unanswered (Little's law), so its \
                 percentiles leave out the slowest requests"
                    .to_string()
            } else {
                let lowest = mine
                    .iter()
                    .filter(|p| p.ok && !p.starved)
                    .map(|p| p.latency_us.p99)
                    .fold(f64::MAX, f64::min);
                format!(
                    "p99 never under the bound (lowest {})",
                    super::output::duration_us(lowest)
                )
            };
            (a.to_string(), reason)
        })
        .collect();
    let mut ranking: Vec<(&str, &PointResult)> = best_per_arch.into_iter().collect();
    ranking.sort_by(|a, b| b.1.rps.total_cmp(&a.1.rps));
    let (winner, within_bound) = match ranking.first() {
        Some((_, p)) => (*p, true),
        None => {
            // Prefer points whose percentiles cover every connection offered.
            let representative: Vec<&PointResult> =
                usable.iter().copied().filter(|p| !p.starved).collect();
            let pool = if representative.is_empty() {
                &usable
            } else {
                &representative
            };
            let lowest = pool
                .iter()
                .copied()
                .min_by(|a, b| a.latency_us.p99.total_cmp(&b.latency_us.p99))?;
            (lowest, false)
        }
    };
    let ties = ranking
        .iter()
        .skip(1)
        .filter(|(_, p)| p.rps >= winner.rps * (1.0 - WITHIN_BEST))
        .map(|(a, _)| a.to_string())
        .collect();
    Some(BestChoice {
        arch: winner.arch.clone(),
        workers: winner.workers,
        concurrency: winner.concurrency,
        rps: winner.rps,
        p99_us: winner.latency_us.p99,
        within_bound,
        ties,
        ranking: ranking
            .iter()
            .map(|(a, p)| (a.to_string(), p.rps))
            .collect(),
        excluded,
    })
}

/// A sweet spot found over worker counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweetSpot {
    pub arch: String,
    pub workload: String,
    pub concurrency: u32,
    pub workers: u32,
    pub rps: f64,
    pub best_rps: f64,
    pub best_workers: u32,
    /// The largest pool measured: a sweet spot there means the curve had not levelled off.
    #[serde(default)]
    pub max_workers_tried: u32,
}

/// A USL fit of one series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UslSeries {
    pub arch: String,
    pub workload: String,
    /// `concurrency` (fixed workers) or `workers` (fixed concurrency).
    pub axis: String,
    /// The fixed value of the other axis.
    pub fixed: Option<u32>,
    pub fit: UslFit,
    pub predicted_peak_n: Option<f64>,
    pub predicted_peak_rps: Option<f64>,
    pub measured_best_n: u32,
    pub measured_best_rps: f64,
    /// The largest N measured in this series.
    #[serde(default)]
    pub measured_max_n: u32,
}

/// Goetz's estimate beside the measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoetzEstimate {
    pub workload: String,
    pub cores: f64,
    pub utilization: f64,
    pub wait_ms: f64,
    /// Median server CPU per request over the workload's points, microseconds.
    pub compute_us: f64,
    pub pool_size: f64,
    pub measured_sweet_spot: Option<u32>,
}

/// Everything concluded about one workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadAnalysis {
    pub workload: String,
    pub best: Option<BestChoice>,
    /// The cheapest architecture in server CPU per request (among usable points).
    pub cheapest: Option<(String, f64)>,
    pub sweet_spots: Vec<SweetSpot>,
    pub usl: Vec<UslSeries>,
    pub goetz: Option<GoetzEstimate>,
}

/// The analysis of a whole sweep.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Analysis {
    pub p99_bound_ms: f64,
    pub workloads: Vec<WorkloadAnalysis>,
    /// Points whose measurement should be read with care.
    pub warnings: Vec<String>,
    pub failed_points: usize,
    pub generator_bound_points: usize,
}

/// The recommendation in plain words.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Recommendation {
    /// One line per workload: the architecture to pick.
    pub summary: Vec<String>,
    /// The reasons, sweet spots and theory, in sentences.
    pub details: Vec<String>,
}

fn format_rps(rps: f64) -> String {
    super::output::thousands(rps)
}

/// Analyses a sweep's points.
pub fn analyze(results: &SweepResults) -> (Analysis, Recommendation) {
    let experiment = &results.experiment;
    let bound_us = experiment.p99_bound_ms * 1000.0;
    let cores = if results.machine.pinned {
        1.0
    } else {
        results.cores()
    };
    let mut analysis = Analysis {
        p99_bound_ms: experiment.p99_bound_ms,
        failed_points: results.points.iter().filter(|p| !p.ok).count(),
        generator_bound_points: results.points.iter().filter(|p| p.generator_bound).count(),
        ..Default::default()
    };
    for p in &results.points {
        for w in &p.warnings {
            analysis.warnings.push(format!(
                "{} {} c={}: {w}",
                p.workload,
                series_label(&p.arch, p.workers),
                p.concurrency
            ));
        }
    }
    let mut recommendation = Recommendation::default();
    for workload in &experiment.workloads {
        let points: Vec<&PointResult> = results
            .points
            .iter()
            .filter(|p| p.workload == workload.name)
            .collect();
        if points.is_empty() {
            continue;
        }
        let usable: Vec<&PointResult> = points
            .iter()
            .copied()
            .filter(|p| p.ok && p.rps > 0.0)
            .collect();
        let best = best_within_bound(&points, bound_us);
        let cheapest = usable
            .iter()
            .filter(|p| p.server_cpu_us_per_request > 0.0 && p.error_rate() <= MAX_ERROR_RATE)
            .min_by(|a, b| {
                a.server_cpu_us_per_request
                    .total_cmp(&b.server_cpu_us_per_request)
            })
            .map(|p| (p.arch.clone(), p.server_cpu_us_per_request));
        let sweet_spots = sweet_spots_of(&usable);
        let usl = usl_series_of(&usable);
        let compute_us = median(
            &usable
                .iter()
                .filter(|p| p.target == "sweetspot" && p.server_cpu_us_per_request > 0.0)
                .map(|p| p.server_cpu_us_per_request)
                .collect::<Vec<_>>(),
        );
        let goetz = goetz_pool_size(cores, 1.0, workload.wait_ms() / 1e3, compute_us / 1e6).map(
            |pool_size| GoetzEstimate {
                workload: workload.name.clone(),
                cores,
                utilization: 1.0,
                wait_ms: workload.wait_ms(),
                compute_us,
                pool_size,
                measured_sweet_spot: sweet_spots
                    .iter()
                    .max_by(|a, b| a.best_rps.total_cmp(&b.best_rps))
                    .map(|s| s.workers),
            },
        );
        let analysed = WorkloadAnalysis {
            workload: workload.name.clone(),
            best,
            cheapest,
            sweet_spots,
            usl,
            goetz,
        };
        explain(
            &analysed,
            experiment.p99_bound_ms,
            experiment.mode,
            &mut recommendation,
        );
        analysis.workloads.push(analysed);
    }
    if analysis.failed_points > 0 {
        recommendation.details.push(format!(
            "{} point(s) failed and are left out; their reasons are in the tables.",
            analysis.failed_points
        ));
    }
    if analysis.generator_bound_points > 0 {
        recommendation.details.push(format!(
            "{} point(s) were limited by the load generator, not the server: their throughput is \
             a lower bound (try `pin = true`, more load threads, or a second machine).",
            analysis.generator_bound_points
        ));
    }
    (analysis, recommendation)
}

/// `epoll` or `prethreaded/8` (with workers when known and swept).
pub fn series_label(arch: &str, workers: Option<u32>) -> String {
    match workers {
        Some(w) if Arch::from_name(arch).is_some_and(Arch::pooled) => format!("{arch}/{w}"),
        _ => arch.to_string(),
    }
}

fn sweet_spots_of(points: &[&PointResult]) -> Vec<SweetSpot> {
    let mut groups: BTreeMap<(String, u32), Vec<(u32, f64)>> = BTreeMap::new();
    for p in points {
        if let Some(w) = p.workers {
            groups
                .entry((p.arch.clone(), p.concurrency))
                .or_default()
                .push((w, p.rps));
        }
    }
    groups
        .into_iter()
        .filter_map(|((arch, concurrency), series)| {
            let workers = sweet_spot(&series)?;
            let rps = series.iter().find(|p| p.0 == workers)?.1;
            let (best_workers, best_rps) =
                series.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
            Some(SweetSpot {
                arch,
                workload: points[0].workload.clone(),
                concurrency,
                workers,
                rps,
                best_rps,
                best_workers,
                max_workers_tried: series.iter().map(|p| p.0).max().unwrap_or(workers),
            })
        })
        .collect()
}

/// (N, throughput) pairs of one series.
type Series = Vec<(f64, f64)>;

fn usl_series_of(points: &[&PointResult]) -> Vec<UslSeries> {
    let workload = match points.first() {
        Some(p) => p.workload.clone(),
        None => return Vec::new(),
    };
    let mut by_concurrency: BTreeMap<(String, Option<u32>), Series> = BTreeMap::new();
    let mut by_workers: BTreeMap<(String, u32), Series> = BTreeMap::new();
    for p in points {
        by_concurrency
            .entry((p.arch.clone(), p.workers))
            .or_default()
            .push((f64::from(p.concurrency), p.rps));
        if let Some(w) = p.workers {
            by_workers
                .entry((p.arch.clone(), p.concurrency))
                .or_default()
                .push((f64::from(w), p.rps));
        }
    }
    let make = |arch: String, axis: &str, fixed: Option<u32>, data: &[(f64, f64)]| {
        let fit = fit_usl(data)?;
        let (n, x) = data.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
        Some(UslSeries {
            arch,
            workload: workload.clone(),
            axis: axis.to_string(),
            fixed,
            fit,
            predicted_peak_n: fit.peak_concurrency(),
            predicted_peak_rps: fit.peak_throughput(),
            measured_best_n: n as u32,
            measured_best_rps: x,
            measured_max_n: data.iter().map(|p| p.0 as u32).max().unwrap_or(0),
        })
    };
    let mut series: Vec<UslSeries> = by_concurrency
        .into_iter()
        .filter_map(|((arch, workers), data)| make(arch, "concurrency", workers, &data))
        .collect();
    series.extend(
        by_workers
            .into_iter()
            .filter_map(|((arch, c), data)| make(arch, "workers", Some(c), &data)),
    );
    series
}

fn explain(w: &WorkloadAnalysis, bound_ms: f64, mode: LoadMode, out: &mut Recommendation) {
    let name = &w.workload;
    match &w.best {
        Some(best) if best.within_bound => {
            let who = series_label(&best.arch, best.workers);
            let mut line = format!(
                "{name}: {who}: {} req/s at {} connections with p99 {} (bound {bound_ms} ms)",
                format_rps(best.rps),
                best.concurrency,
                super::output::duration_us(best.p99_us)
            );
            if !best.ties.is_empty() {
                line.push_str(&format!("; within 5%: {}", best.ties.join(", ")));
            }
            out.summary.push(line);
            let mut reason = format!(
                "For {name}, pick {who}: it had the highest throughput of the architectures whose \
                 p99 stayed under {bound_ms} ms with under 1% errors."
            );
            if let Some((second, rps)) = best.ranking.get(1) {
                reason.push_str(&format!(
                    " Next was {second} at {} req/s ({:+.0}%).",
                    format_rps(*rps),
                    (rps / best.rps - 1.0) * 100.0
                ));
            }
            if !best.ties.is_empty() {
                reason.push_str(
                    " Differences under 5% are within the noise of a shared 2-core machine: \
                     prefer the simpler or cheaper one.",
                );
            }
            out.details.push(reason);
        }
        Some(best) => {
            out.summary.push(format!(
                "{name}: no architecture met p99 <= {bound_ms} ms; lowest p99 was {} ({})",
                series_label(&best.arch, best.workers),
                super::output::duration_us(best.p99_us)
            ));
        }
        None => out.summary.push(format!("{name}: no usable measurement")),
    }
    if let Some(best) = &w.best {
        for (arch, why) in &best.excluded {
            out.details
                .push(format!("{name}: {arch} was not a candidate: {why}."));
        }
    }
    if let Some((arch, us)) = &w.cheapest {
        out.details.push(format!(
            "{name}: the cheapest in server CPU was {arch}, {} per request.",
            super::output::duration_us(*us)
        ));
    }
    for s in &w.sweet_spots {
        let mut line = format!(
            "{name}: sweet spot for {} at {} connections: {} workers, {} req/s (the fewest within \
             5% of the best, {} req/s with {} workers)",
            s.arch,
            s.concurrency,
            s.workers,
            format_rps(s.rps),
            format_rps(s.best_rps),
            s.best_workers
        );
        if s.workers == s.max_workers_tried {
            line.push_str(
                "; it is the largest pool tried, so the curve was still rising: try larger pools",
            );
            if s.workers >= s.concurrency {
                line.push_str(&format!(
                    " with more than {} connections, since a pool beyond the requests in flight \
                     has nothing to do",
                    s.concurrency
                ));
            }
        }
        line.push('.');
        out.details.push(line);
    }
    if let Some(g) = &w.goetz {
        let mut line = format!(
            "{name}: Goetz's formula, N_cpu x U x (1 + W/C) = {} x 1 x (1 + {:.1} ms / {}) = {:.1} \
             threads",
            g.cores,
            g.wait_ms,
            super::output::duration_us(g.compute_us),
            g.pool_size
        );
        match g.measured_sweet_spot {
            Some(n) => line.push_str(&format!("; measured sweet spot: {n}.")),
            None => line.push('.'),
        }
        out.details.push(line);
    }
    let winner = w.best.as_ref().map(|b| (b.arch.clone(), b.workers));
    let worth_telling = |u: &&UslSeries| {
        u.fit.r_squared >= 0.8
            && (u.axis == "workers" || winner.as_ref() == Some(&(u.arch.clone(), u.fixed)))
    };
    for u in w.usl.iter().filter(worth_telling) {
        let series = match (u.axis.as_str(), u.fixed) {
            ("workers", Some(c)) => format!("{} over workers at {c} connections", u.arch),
            (_, workers) => format!("{} over connections", series_label(&u.arch, workers)),
        };
        let peak = match (u.predicted_peak_n, u.predicted_peak_rps) {
            (Some(n), _) if n > 2.0 * u.measured_max_n as f64 => format!(
                "no peak within the measured range (the model extrapolates one near N = {n:.0})"
            ),
            (Some(n), Some(x)) => format!("peak near N = {n:.0} at {} req/s", format_rps(x)),
            (None, Some(x)) => format!("no peak; levels off toward {} req/s", format_rps(x)),
            _ => "still scaling linearly".to_string(),
        };
        out.details.push(format!(
            "{name}: USL fit for {series}: sigma {:.3}, kappa {:.5}, lambda {:.0}/s (R^2 {:.2}); {peak}; \
             measured best N = {}.",
            u.fit.sigma, u.fit.kappa, u.fit.lambda, u.fit.r_squared, u.measured_best_n
        ));
    }
    if mode == LoadMode::Rate {
        out.details.push(format!(
            "{name}: rate mode: latencies are measured from the intended send time (coordinated \
             omission corrected)."
        ));
    }
}

/// How many cores a server architecture can use at most.
pub fn server_parallelism(arch: &str, cores: f64) -> f64 {
    if Arch::from_name(arch).is_some_and(Arch::single_threaded) {
        1.0
    } else {
        cores
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::results::PointLatency;

    fn point(
        arch: &str,
        workers: Option<u32>,
        concurrency: u32,
        rps: f64,
        p99_ms: f64,
    ) -> PointResult {
        PointResult {
            arch: arch.into(),
            workers,
            workload: "w".into(),
            concurrency,
            target: "sweetspot".into(),
            ok: true,
            requests: (rps * 1.0) as u64,
            duration_s: 1.0,
            rps,
            latency_us: PointLatency {
                p99: p99_ms * 1000.0,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn repetitions_fold_to_median_and_spread() {
        let run = |rps: f64, p99: f64| RunMeasurement {
            rps,
            latency_us: PointLatency {
                p99,
                ..Default::default()
            },
            ..Default::default()
        };
        let (rep, spread) =
            fold_repetitions(&[run(100.0, 5.0), run(300.0, 1.0), run(200.0, 9.0)]).unwrap();
        assert_eq!(rep.rps, 200.0);
        assert_eq!(rep.latency_us.p99, 9.0);
        assert_eq!((spread.rps_min, spread.rps_max), (100.0, 300.0));
        assert_eq!((spread.p99_min, spread.p99_max), (1.0, 9.0));
        assert_eq!(spread.repetitions, 3);
        assert!(fold_repetitions(&[]).is_none());
    }

    #[test]
    fn sweet_spot_is_fewest_workers_within_five_percent() {
        let io = [(1, 50.0), (2, 100.0), (4, 196.0), (8, 200.0), (16, 199.0)];
        assert_eq!(sweet_spot(&io), Some(4));
        let cpu = [(1, 100.0), (2, 190.0), (4, 185.0), (8, 170.0)];
        assert_eq!(sweet_spot(&cpu), Some(2));
        assert_eq!(sweet_spot(&[(4, 10.0), (4, 12.0)]), None);
    }

    #[test]
    fn best_arch_respects_the_bound_and_errors() {
        let fast_but_slow_tail = point("threaded", None, 64, 9000.0, 250.0);
        let mut fast_with_errors = point("poll", None, 64, 9500.0, 5.0);
        fast_with_errors.errors = 500;
        let winner = point("epoll", None, 16, 8000.0, 4.0);
        let close_second = point("prethreaded", Some(4), 16, 7800.0, 6.0);
        let points = [
            &fast_but_slow_tail,
            &fast_with_errors,
            &winner,
            &close_second,
        ];
        let best = best_within_bound(&points, 100_000.0).unwrap();
        assert_eq!(best.arch, "epoll");
        assert!(best.within_bound);
        assert_eq!(best.ties, vec!["prethreaded".to_string()]);
        assert_eq!(best.ranking.len(), 2);
        let excluded: BTreeMap<_, _> = best.excluded.into_iter().collect();
        assert!(excluded["threaded"].contains("p99"));
        assert!(excluded["poll"].contains("errors"));
        // Nothing meets a 1 ms bound: the lowest p99 is reported instead.
        let none = best_within_bound(&points, 1000.0).unwrap();
        assert!(!none.within_bound);
        assert_eq!(none.arch, "epoll");
    }

    #[test]
    fn starved_points_are_not_candidates() {
        // A pool that served 2 of 50 connections shows a fine p99 for those 2 only.
        let mut starved_pool = point("prethreaded", Some(2), 50, 36.0, 67.0);
        starved_pool.starved = true;
        let fair = point("threaded", None, 50, 35.0, 1630.0);
        let best = best_within_bound(&[&starved_pool, &fair], 10_000_000.0).unwrap();
        assert_eq!(best.arch, "threaded");
        assert!(
            best.excluded[0].1.contains("unanswered"),
            "{:?}",
            best.excluded
        );
    }

    #[test]
    fn goetz_formula() {
        // 2 cores, 100 ms wait, 1 ms compute: 2 x (1 + 100) = 202 threads.
        assert!((goetz_pool_size(2.0, 1.0, 0.1, 0.001).unwrap() - 202.0).abs() < 1e-9);
        // Pure CPU: one thread per core.
        assert_eq!(goetz_pool_size(4.0, 1.0, 0.0, 0.002), Some(4.0));
        assert_eq!(goetz_pool_size(4.0, 1.0, 0.1, 0.0), None);
    }

    #[test]
    fn littles_law_flags_load_that_did_not_arrive() {
        // 64 connections, 1000 req/s at 64 ms: 64 in flight, as offered.
        assert!(little_warning(1000.0, 64_000.0, 64, 0, true).is_none());
        assert!((requests_in_flight(1000.0, 64_000.0) - 64.0).abs() < 1e-9);
        // Only 10 in flight of 64 offered.
        let w = little_warning(1000.0, 10_000.0, 64, 3, true).unwrap();
        // A connection per request tolerates connect time outside the latency.
        assert!(little_warning(1000.0, 40_000.0, 64, 0, false).is_none());
        assert!(little_warning(1000.0, 40_000.0, 64, 0, true).is_some());
        // Microsecond requests: 20 us of generator turnaround per cycle is not a shortfall.
        assert!(!little_shortfall(20_000.0, 30.0, 1, true));
        // A pool serving 8 of 64 keep-alive connections at 10 ms per request is.
        assert!(little_shortfall(784.0, 10_200.0, 64, true));
        assert!((cycle_gap_us(1000.0, 600.0, 1) - 400.0).abs() < 1e-9);
        assert!(
            w.contains("10.0 requests in flight") && w.contains("3 requests failed"),
            "{w}"
        );
    }

    #[test]
    fn generator_saturation_rule() {
        // Client burned a full core for its one thread; server used a quarter of its room.
        assert!(generator_saturated(1.0, 1, 0.25, 1.0, 2.0, 2.0));
        // Both saturated: the machine is the limit, not the generator alone.
        assert!(!generator_saturated(1.0, 1, 0.95, 1.0, 2.0, 2.0));
        // Client idle-ish.
        assert!(!generator_saturated(0.3, 1, 0.2, 1.0, 2.0, 2.0));
        // Single-threaded server at 90% of its one core is the limit.
        assert!(!generator_saturated(0.95, 1, 0.9, 1.0, 2.0, 1.0));
    }
}
