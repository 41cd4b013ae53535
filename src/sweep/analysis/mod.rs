//! Analysis: from measured points to an answer; the runner calls [`finalize`], the outputs read
//! what it stored in [`SweepResults`], and nothing here knows how it is drawn. The parts:
//! [`stats`] (median and spread, Little's law, Goetz's pool size, the sweet spot, generator
//! saturation, each citing its source), [`usl`] (the Universal Scalability Law fit),
//! [`recommend`] (the best architecture within the bound and its reasons) and [`findings`] (the
//! records of what was concluded). This file groups a sweep's points into the series they take.

pub mod findings;
pub mod recommend;

use std::collections::{BTreeMap, BTreeSet};

pub use crate::lab::stats;
pub use crate::lab::stats::{little_warning, mark_point};
pub use findings::{
    Analysis, BestChoice, GoetzEstimate, RankedArch, Recommendation, SweetSpot, UslSeries,
    WorkloadAnalysis,
};
pub use recommend::{best_choice, best_within_bound};
pub use stats::{
    fell_short, fold_repetitions, generator_saturated, goetz_pool_size, little_shortfall, median,
    requests_in_flight, rps_range, sweet_spot, WorkerThroughput, MAX_ERROR_RATE, WITHIN_BEST,
};

use super::results::{PointResult, SweepResults};
use super::spec::{Arch, LoadMode, Workload};
use crate::model::usl::{self, fit_usl};
use recommend::{explain, ProseContext};

/// Recomputes the per-point flags that depend on the experiment (Little's law: in-flight
/// ratio, starved, its warning) and the whole analysis. The runner calls it after every point;
/// `sweetspot report` calls it on a loaded `results.json`.
pub fn finalize(results: &mut SweepResults) {
    let experiment = &results.experiment;
    for point in &mut results.points {
        let keepalive = experiment
            .workloads
            .iter()
            .find(|w| w.name == point.workload)
            .is_none_or(|w| w.keepalive);
        mark_point(point, experiment.mode, keepalive);
    }
    let (analysis, recommendation) = analyze(results);
    results.analysis = analysis;
    results.recommendation = recommendation;
}

/// Analyses a sweep's points.
pub fn analyze(results: &SweepResults) -> (Analysis, Recommendation) {
    let experiment = &results.experiment;
    let cores = if results.machine.pinned {
        1.0
    } else {
        results.cores()
    };
    let mut analysis = Analysis {
        p99_bound_ms: experiment.p99_bound_ms,
        failed_points: results.points.iter().filter(|p| !p.ok).count(),
        generator_bound_points: results.points.iter().filter(|p| p.generator_bound).count(),
        lab_limited_points: results
            .points
            .iter()
            .filter(|p| recommend::lab_limit(p).is_some())
            .count(),
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
    let prose = ProseContext {
        p99_bound_ms: experiment.p99_bound_ms,
        mode: experiment.mode,
        cores: results.machine.cores.max(1),
    };
    let mut recommendation = Recommendation::default();
    for workload in &experiment.workloads {
        let Some(analysed) = analyze_workload(results, workload, cores) else {
            continue;
        };
        explain(&analysed, &prose, &mut recommendation);
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
    let all: Vec<&PointResult> = results.points.iter().collect();
    analysis.oversized = crate::lab::budget::oversized(&all, |p| series_label(&p.arch, p.workers));
    for line in crate::lab::budget::oversized_lines(&analysis.oversized) {
        recommendation
            .details
            .push(format!("Over its quota at once: {line}."));
    }
    if analysis.lab_limited_points > 0 {
        let n = analysis.lab_limited_points;
        recommendation.details.push(format!(
            "{n} of {} point(s) were the lab's limit (the load generator or the network path \
             set the figure, see each point's limit), not the server's: none of them is a \
             candidate.",
            results.points.len()
        ));
    }
    (analysis, recommendation)
}

/// One workload's findings from its points (`None` without any): the best, the cheapest, the
/// sweet spots, the USL fits and Goetz's pool on `cores`.
fn analyze_workload(
    results: &SweepResults,
    workload: &Workload,
    cores: f64,
) -> Option<WorkloadAnalysis> {
    let experiment = &results.experiment;
    let bound_us = experiment.p99_bound_ms * 1000.0;
    let points: Vec<&PointResult> = results
        .points
        .iter()
        .filter(|p| p.workload == workload.name)
        .collect();
    if points.is_empty() {
        return None;
    }
    let usable: Vec<&PointResult> = points
        .iter()
        .copied()
        .filter(|p| p.ok && p.figures.rps > 0.0)
        .collect();
    let offered = (experiment.mode == LoadMode::Rate)
        .then_some(experiment.rate)
        .flatten();
    let best = best_choice(&points, bound_us, offered);
    let (cheapest, cheapest_within_spread) = cheapest_of(&usable);
    let sweet_spots = sweet_spots_of(&usable);
    let usl = usl_series_of(&usable);
    let compute_us = median(
        &usable
            .iter()
            .filter(|p| p.target == "sweetspot" && p.server_cpu_us_per_request > 0.0)
            .map(|p| p.server_cpu_us_per_request)
            .collect::<Vec<_>>(),
    );
    let goetz =
        goetz_pool_size(cores, 1.0, workload.wait_ms() / 1e3, compute_us / 1e6).map(|pool_size| {
            GoetzEstimate {
                workload: workload.name.clone(),
                cores,
                utilization: 1.0,
                wait_ms: workload.wait_ms(),
                compute_us,
                pool_size,
                concurrency_cap: points.iter().map(|p| p.concurrency).max().unwrap_or(0),
                measured_sweet_spot: sweet_spots
                    .iter()
                    .max_by(|a, b| a.best_rps.total_cmp(&b.best_rps))
                    .map(|s| s.workers),
            }
        });
    Some(WorkloadAnalysis {
        workload: workload.name.clone(),
        best,
        cheapest,
        cheapest_within_spread,
        sweet_spots,
        usl,
        goetz,
    })
}

/// The cheapest architecture in server CPU per request (its cheapest point with few errors),
/// and the others whose repetitions overlap it.
fn cheapest_of(usable: &[&PointResult]) -> (Option<(String, f64)>, Vec<String>) {
    let mut per_arch: BTreeMap<&str, &PointResult> = BTreeMap::new();
    for p in usable
        .iter()
        .copied()
        .filter(|p| p.server_cpu_us_per_request > 0.0 && p.error_rate() <= MAX_ERROR_RATE)
    {
        let entry = per_arch.entry(p.arch.as_str()).or_insert(p);
        if p.server_cpu_us_per_request < entry.server_cpu_us_per_request {
            *entry = p;
        }
    }
    let mut ranked: Vec<&PointResult> = per_arch.into_values().collect();
    ranked.sort_by(|a, b| {
        a.server_cpu_us_per_request
            .total_cmp(&b.server_cpu_us_per_request)
    });
    let Some(cheapest) = ranked.first() else {
        return (None, Vec::new());
    };
    let range = stats::cpu_per_request_range(cheapest);
    let within = ranked
        .iter()
        .skip(1)
        .filter(|p| {
            (p.spread.repetitions > 1 || cheapest.spread.repetitions > 1)
                && stats::ranges_overlap(stats::cpu_per_request_range(p), range)
        })
        .map(|p| p.arch.clone())
        .collect();
    (
        Some((cheapest.arch.clone(), cheapest.server_cpu_us_per_request)),
        within,
    )
}

/// `epoll` or `prethreaded/8` (with workers when known and swept; an external target's when
/// its `{workers}` is swept).
pub fn series_label(arch: &str, workers: Option<u32>) -> String {
    match workers {
        Some(w) if Arch::from_name(arch).is_none_or(Arch::pooled) => format!("{arch}/{w}"),
        _ => arch.to_string(),
    }
}

fn sweet_spots_of(points: &[&PointResult]) -> Vec<SweetSpot> {
    // Per series: the pools that answered every connection, and every pool size tried.
    type Group = (Vec<WorkerThroughput>, BTreeSet<u32>);
    let mut groups: BTreeMap<(String, u32), Group> = BTreeMap::new();
    for p in points {
        let Some(workers) = p.workers else { continue };
        let (answered, tried) = groups.entry((p.arch.clone(), p.concurrency)).or_default();
        tried.insert(workers);
        // A pool that left some connections unanswered (a thread per keep-alive connection,
        // fewer threads than connections) is no sweet spot, however fast the others went.
        if p.starved {
            continue;
        }
        let (min, max) = rps_range(p);
        answered.push(WorkerThroughput {
            workers,
            rps: p.figures.rps,
            min,
            max,
        });
    }
    groups
        .into_iter()
        .filter_map(|((arch, concurrency), (series, tried))| {
            let only = |s: &[WorkerThroughput]| {
                let sizes: BTreeSet<u32> = s.iter().map(|p| p.workers).collect();
                (sizes.len() == 1 && tried.len() >= 2).then(|| s[0].workers)
            };
            let workers = sweet_spot(&series).or_else(|| only(&series))?;
            let rps = series.iter().find(|p| p.workers == workers)?.rps;
            let best = series.iter().max_by(|a, b| a.rps.total_cmp(&b.rps))?;
            Some(SweetSpot {
                arch,
                workload: points[0].workload.clone(),
                concurrency,
                workers,
                rps,
                best_rps: best.rps,
                best_workers: best.workers,
                max_workers_tried: tried.iter().max().copied().unwrap_or(workers),
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
            .push((f64::from(p.concurrency), p.figures.rps));
        if let Some(w) = p.workers {
            by_workers
                .entry((p.arch.clone(), p.concurrency))
                .or_default()
                .push((f64::from(w), p.figures.rps));
        }
    }
    let make = |arch: String, axis: &str, fixed: Option<u32>, data: &[(f64, f64)]| {
        let levels = usl::distinct_levels(data);
        // A single level is not a series: nothing to fit or to refuse.
        if levels < 2 {
            return None;
        }
        let (n, x) = data.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
        let measured_max_n = data.iter().map(|p| p.0 as u32).max().unwrap_or(0);
        let fitted = fit_usl(data);
        let fit = fitted.ok();
        Some(UslSeries {
            arch,
            workload: workload.clone(),
            axis: axis.to_string(),
            fixed,
            levels,
            fit,
            refused: fitted.err().map(|why| why.to_string()),
            limit: fit.map(|f| f.limit(f64::from(measured_max_n))),
            predicted_peak_n: fit.and_then(|f| f.peak_concurrency()),
            predicted_peak_rps: fit.and_then(|f| f.peak_throughput()),
            ceiling_rps: fit.and_then(|f| f.ceiling()),
            measured_best_n: n as u32,
            measured_best_rps: x,
            measured_max_n,
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sweep::results::{
        Machine, PointLatency, RunFigures, RunMeasurement, ServerUsage, Spread,
    };
    use crate::sweep::spec::Experiment;

    fn fixture(text: &str) -> SweepResults {
        let mut results: SweepResults = serde_json::from_str(text).expect("the fixture parses");
        finalize(&mut results);
        results
    }

    fn find<'a>(r: &'a SweepResults, workload: &str, arch: &str, c: u32) -> &'a PointResult {
        r.points
            .iter()
            .find(|p| p.workload == workload && p.arch == arch && p.concurrency == c)
            .unwrap()
    }

    #[test]
    fn one_rule_marks_every_point_whose_load_fell_short() {
        let r = fixture(include_str!("../../../tests/data/quick-results.json"));
        // The cases the old rule missed: 56 of 64 connections never answered, and 3 of 4.
        assert!(find(&r, "hello", "prethreaded", 64).starved);
        assert!(find(&r, "hello", "iterative", 4).starved);
        // ... and the ones it had: the same rule on every workload.
        assert!(find(&r, "fib", "prethreaded", 64).starved);
        assert!(find(&r, "sleep", "iterative", 4).starved);
        assert!(!find(&r, "hello", "epoll", 64).starved);
        for p in &r.points {
            let stuck = p.figures.unanswered + p.errors_by_kind.timeout;
            let expected = stuck > 0
                || little_shortfall(
                    p.figures.rps,
                    p.figures.latency_us.mean,
                    p.concurrency,
                    true,
                );
            assert_eq!(
                p.starved, expected,
                "{} {} c={}",
                p.workload, p.arch, p.concurrency
            );
            // Each mark comes with its reason among the warnings.
            assert_eq!(
                p.starved,
                p.warnings.iter().any(|w| w.starts_with("Little's law")),
                "{} {} c={}",
                p.workload,
                p.arch,
                p.concurrency
            );
        }
        // results.json carries the flag as the tables show it.
        let json = serde_json::to_value(find(&r, "hello", "prethreaded", 64)).unwrap();
        assert_eq!(json["starved"], true);
        let tables = crate::sweep::output::workload_tables(&r, "hello");
        let prethreaded = tables[0]
            .rows
            .iter()
            .find(|row| row[0] == "prethreaded/8")
            .unwrap();
        assert!(prethreaded[3].ends_with('~'), "{prethreaded:?}");
        assert!(tables[0]
            .notes
            .contains(&crate::sweep::output::STARVED_NOTE.to_string()));
    }

    #[test]
    fn the_c10k_recommendation_ranks_by_p99_and_says_so() {
        let r = fixture(include_str!("../../../tests/data/c10k-results.json"));
        let best = r.analysis.workloads[0].best.as_ref().unwrap();
        assert_eq!(best.ranked_by, findings::RankedBy::P99);
        // The winner has the lowest p99 among the candidates that met the bound.
        let candidates: Vec<&PointResult> = r
            .points
            .iter()
            .filter(|p| {
                p.ok && !recommend::p99_is_lower_bound(p)
                    && p.figures.latency_us.p99 <= 2_000_000.0
                    && p.error_rate() <= MAX_ERROR_RATE
            })
            .collect();
        let lowest = candidates
            .iter()
            .min_by(|a, b| {
                a.figures
                    .latency_us
                    .p99
                    .total_cmp(&b.figures.latency_us.p99)
            })
            .unwrap();
        assert_eq!(
            (best.arch.as_str(), best.p99_us),
            (lowest.arch.as_str(), lowest.figures.latency_us.p99)
        );
        let summary = &r.recommendation.summary[0];
        assert!(
            summary
                .contains("ranked by p99 since every candidate delivered the offered 5,000 req/s")
                && summary.contains("10,000 connections")
                && summary.contains("bound 2,000 ms"),
            "{summary}"
        );
    }

    fn sweep(points: Vec<PointResult>, cores: u32) -> SweepResults {
        let experiment = Experiment::from_toml(
            "name = \"t\"\narchs = [\"epoll\"]\nconcurrency = [1]\n[[workload]]\nname = \"w\"\nroute = \"/hello\"\n",
            "t",
        )
        .unwrap();
        SweepResults {
            version: 1,
            source: "t".into(),
            experiment,
            started: String::new(),
            finished: String::new(),
            interrupted: false,
            points_planned: points.len(),
            versions: Default::default(),
            machine: Machine {
                cores,
                ..Default::default()
            },
            points,
            recommendation: Default::default(),
            analysis: Default::default(),
        }
    }

    /// A successful point with p99 1 ms and the mean Little's law gives, for the tests here and
    /// in the analysis' files.
    pub(crate) fn point(
        arch: &str,
        workers: Option<u32>,
        concurrency: u32,
        rps: f64,
    ) -> PointResult {
        PointResult {
            arch: arch.into(),
            workers,
            workload: "w".into(),
            concurrency,
            target: "sweetspot".into(),
            ok: true,
            figures: RunFigures {
                requests: rps as u64,
                duration_s: 1.0,
                rps,
                latency_us: PointLatency {
                    p99: 1000.0,
                    mean: f64::from(concurrency) / rps * 1e6,
                    ..Default::default()
                },
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn usl_fits_six_levels_and_refuses_fewer_in_words() {
        let x = |n: f64| usl::usl_throughput(1000.0, 0.05, 0.001, n);
        let mut points: Vec<PointResult> = [1, 2, 4, 8, 16, 32]
            .iter()
            .map(|&c| point("epoll", None, c, x(f64::from(c))))
            .collect();
        points.extend(
            [1, 2, 4]
                .iter()
                .map(|&c| point("threaded", None, c, x(f64::from(c)))),
        );
        let mut results = sweep(points, 2);
        finalize(&mut results);
        let usl = &results.analysis.workloads[0].usl;
        let epoll = usl.iter().find(|u| u.arch == "epoll").unwrap();
        let fit = epoll.fit.unwrap();
        assert!((fit.sigma - 0.05).abs() < 1e-6 && (fit.kappa - 0.001).abs() < 1e-8);
        assert_eq!(epoll.levels, 6);
        assert!((epoll.predicted_peak_n.unwrap() - (0.95f64 / 0.001).sqrt()).abs() < 1e-3);
        let threaded = usl.iter().find(|u| u.arch == "threaded").unwrap();
        assert_eq!(threaded.fit, None);
        assert_eq!(
            threaded.refused.as_deref(),
            Some("3 level(s) measured, and a fit needs at least 6")
        );
        assert!(
            results.recommendation.details.contains(
                &"w: no USL fit for threaded over connections (3 levels): a fit needs at least 6 \
                  measured levels."
                    .to_string()
            ),
            "{:?}",
            results.recommendation.details
        );
    }

    /// A point measured twice, at `cpu_us` server CPU per request in each run.
    fn with_cpu(arch: &str, cpu_us: [f64; 2]) -> PointResult {
        let mut p = point(arch, None, 4, 1000.0);
        p.runs = cpu_us
            .iter()
            .map(|&us| RunMeasurement {
                figures: RunFigures {
                    requests: 1000,
                    rps: 1000.0,
                    server: ServerUsage {
                        cpu_s: us * 1000.0 / 1e6,
                        ..Default::default()
                    },
                    ..Default::default()
                },
                ..Default::default()
            })
            .collect();
        p.server_cpu_us_per_request = cpu_us[0];
        p.spread = Spread {
            repetitions: 2,
            rps_min: 1000.0,
            rps_max: 1000.0,
            ..Default::default()
        };
        p
    }

    #[test]
    fn the_cheapest_is_named_only_outside_the_spread() {
        let a = with_cpu("forking", [10.0, 14.0]);
        let b = with_cpu("epoll", [12.0, 16.0]);
        assert_eq!(stats::cpu_per_request_range(&a), (10.0, 14.0));
        let (cheapest, within) = cheapest_of(&[&a, &b]);
        assert_eq!(cheapest, Some(("forking".to_string(), 10.0)));
        assert_eq!(within, vec!["epoll".to_string()]);
        let mut results = sweep(vec![a.clone(), b], 2);
        finalize(&mut results);
        assert!(results.recommendation.details.contains(
            &"w: in server CPU per request, forking, epoll are indistinguishable within the \
              spread of the repetitions: none is the cheapest."
                .to_string()
        ));
        // Clear of each other: forking is the cheapest.
        let c = with_cpu("epoll", [15.0, 16.0]);
        let mut results = sweep(vec![a, c], 2);
        finalize(&mut results);
        assert!(results.recommendation.details.contains(
            &"w: the cheapest in server CPU was forking, 10 us per request.".to_string()
        ));
    }

    /// prethreaded at `concurrency` connections: (workers, req/s) a point.
    fn prethreaded(concurrency: u32, pools: [(u32, f64); 3]) -> [PointResult; 3] {
        pools.map(|(workers, rps)| point("prethreaded", Some(workers), concurrency, rps))
    }

    fn spots(points: &[PointResult]) -> Vec<findings::SweetSpot> {
        sweet_spots_of(&points.iter().collect::<Vec<_>>())
    }

    #[test]
    fn sweet_spots_use_the_spread() {
        let mut points = prethreaded(8, [(1, 100.0), (2, 180.0), (4, 200.0)]);
        assert_eq!(spots(&points)[0].workers, 4);
        points[1].spread = Spread {
            repetitions: 3,
            rps_min: 170.0,
            rps_max: 195.0,
            ..Default::default()
        };
        points[2].spread = Spread {
            repetitions: 3,
            rps_min: 190.0,
            rps_max: 210.0,
            ..Default::default()
        };
        let found = spots(&points);
        assert_eq!((found[0].workers, found[0].best_workers), (2, 4));
    }

    #[test]
    fn a_pool_that_starved_connections_is_no_sweet_spot() {
        let mut points = prethreaded(32, [(8, 9_600.0), (32, 10_000.0), (64, 9_900.0)]);
        assert_eq!(spots(&points)[0].workers, 8);
        points[0].starved = true;
        let found = spots(&points);
        assert_eq!((found[0].workers, found[0].best_workers), (32, 32));
        assert_eq!(found[0].max_workers_tried, 64);
        // The one pool that answered everyone is the sweet spot of those tried.
        points[1].starved = true;
        let found = spots(&points);
        assert_eq!(found[0].workers, 64);
        points[2].starved = true;
        assert!(spots(&points).is_empty());
    }
}
