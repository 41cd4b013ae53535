//! Pure statistics over measured points: medians and repetition spreads, Little's law, Goetz's
//! pool size, the sweet spot, and whether the generator rather than the server was the limit.
//!
//! Every function here is deterministic, takes numbers (or the plain measurement records of
//! [`super::results`]) and returns numbers; each cites where its rule comes from and is
//! tested on known data in this file. The sweep's words and the USL fit are in
//! `sweep::analysis`.

use std::collections::BTreeSet;

use super::plan::LoadMode;
use super::results::{PointResult, RunMeasurement, Spread};
use crate::load::SATURATED_BUSY_FRACTION;
use crate::render::numbers::thousands;

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
/// A shortfall must also cost at least this much time per request cycle to count: for
/// requests of tens of microseconds, the generator's own turnaround between a response and the
/// next request is a large fraction of the cycle without anything being wrong.
pub const LITTLE_MIN_GAP_US: f64 = 1000.0;

/// The in-flight ratio under which a point counts as starved.
pub fn little_min_ratio(keepalive: bool) -> f64 {
    if keepalive {
        LITTLE_MIN_RATIO
    } else {
        LITTLE_MIN_RATIO_PER_REQUEST
    }
}

/// The median of a slice (mean of the middle two for even lengths); 0 for an empty slice.
/// Non-finite values are ignored. The textbook definition (e.g. NIST/SEMATECH e-Handbook of
/// Statistical Methods, section 1.3.5.1).
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
///
/// The median is robust to one run disturbed by the shared machine, where a mean is not;
/// hyperfine likewise reports each benchmark's min..max range and median beside its mean.
pub fn fold_repetitions(runs: &[RunMeasurement]) -> Option<(RunMeasurement, Spread)> {
    if runs.is_empty() {
        return None;
    }
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by(|&a, &b| runs[a].figures.rps.total_cmp(&runs[b].figures.rps));
    // Lower median for even counts: never flatter the result.
    let representative = runs[order[(runs.len() - 1) / 2]].clone();
    let fold = |f: fn(&RunMeasurement) -> f64, pick: fn(f64, f64) -> f64| {
        runs.iter().map(f).reduce(pick).unwrap_or(0.0)
    };
    let spread = Spread {
        repetitions: runs.len() as u32,
        rps_min: fold(|r| r.figures.rps, f64::min),
        rps_max: fold(|r| r.figures.rps, f64::max),
        p99_min: fold(|r| r.figures.latency_us.p99, f64::min),
        p99_max: fold(|r| r.figures.latency_us.p99, f64::max),
    };
    Some((representative, spread))
}

/// A point's throughput range over its repetitions: the spread when there were several,
/// else the single value (a range of width zero).
pub fn rps_range(p: &PointResult) -> (f64, f64) {
    if p.spread.repetitions > 1 {
        (p.spread.rps_min, p.spread.rps_max)
    } else {
        (p.figures.rps, p.figures.rps)
    }
}

/// A point's server CPU per request, microseconds, over its repetitions: the min and max of
/// the runs' own ratios when there were several, else the point's value.
pub fn cpu_per_request_range(p: &PointResult) -> (f64, f64) {
    let per_run: Vec<f64> = p
        .runs
        .iter()
        .filter(|r| r.figures.requests > 0)
        .map(|r| r.figures.server.cpu_us_per_request(r.figures.requests))
        .collect();
    if p.spread.repetitions > 1 && per_run.len() > 1 {
        let min = per_run.iter().copied().fold(f64::MAX, f64::min);
        let max = per_run.iter().copied().fold(f64::MIN, f64::max);
        (min, max)
    } else {
        (p.server_cpu_us_per_request, p.server_cpu_us_per_request)
    }
}

/// Whether two measured ranges `(min, max)` overlap: a difference between two values whose
/// repetitions overlap is inside the spread and is not a difference the data can show. (The
/// min-max range is the crudest interval; with a handful of repetitions it is also the only
/// one that assumes no distribution.)
pub fn ranges_overlap(a: (f64, f64), b: (f64, f64)) -> bool {
    a.0 <= b.1 && b.0 <= a.1
}

/// Whether the generator and not the server limited a point: the generator used nearly a core
/// per load thread while the server used well below what was left for it.
///
/// `server_parallelism` is how many cores the server could use at most (1 for a single-threaded
/// architecture); the server's room is that, capped by the cores the generator left free.
/// This is our own rule of thumb, not a published one: a generator that is itself saturated
/// measures itself (the warning of G. Tene, "How NOT to measure latency", 2015), and the
/// thresholds (85% busy, 70% of the room) leave margin for /proc sampling noise.
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
    client_busy >= SATURATED_BUSY_FRACTION * client_threads && server_busy < 0.7 * server_room
}

/// Little's law, L = X x W (J. D. C. Little, "A proof for the queuing formula L = lambda W",
/// Operations Research 9(3), 1961): mean requests in flight = throughput x mean latency.
pub fn requests_in_flight(rps: f64, mean_latency_us: f64) -> f64 {
    rps * mean_latency_us / 1e6
}

/// Per request cycle of a connection, the time not spent waiting for a response:
/// concurrency / throughput - mean latency (Little's law solved for the cycle time).
pub fn cycle_gap_us(rps: f64, mean_latency_us: f64, concurrency: u32) -> f64 {
    f64::from(concurrency) / rps * 1e6 - mean_latency_us
}

/// True when markedly fewer requests were in flight than the closed loop offered: some
/// connections were not being served (or the generator was not sending). In a closed loop
/// every connection always has a request out, so by Little's law throughput x mean latency
/// should equal the connections.
pub fn little_shortfall(rps: f64, mean_latency_us: f64, concurrency: u32, keepalive: bool) -> bool {
    if rps <= 0.0 || concurrency == 0 {
        return false;
    }
    let ratio = requests_in_flight(rps, mean_latency_us) / f64::from(concurrency);
    ratio < little_min_ratio(keepalive)
        && cycle_gap_us(rps, mean_latency_us, concurrency) > LITTLE_MIN_GAP_US
}

/// The one rule behind the `~` mark: in a closed loop, the load did not reach the server as
/// intended. Either some requests were never answered (`stuck`: still in flight when the run
/// ended, or timed out), so their connections were held back and their waits are only lower
/// bounds; or, by Little's law, markedly fewer requests were in flight than connections
/// ([`little_shortfall`]).
pub fn fell_short(
    rps: f64,
    mean_latency_us: f64,
    concurrency: u32,
    keepalive: bool,
    stuck: u64,
) -> bool {
    stuck > 0 || little_shortfall(rps, mean_latency_us, concurrency, keepalive)
}

/// Goetz's pool size, N_threads = N_cpu x U x (1 + W/C) (B. Goetz et al., *Java Concurrency in
/// Practice*, 2006, section 8.2). `None` without a positive compute time.
pub fn goetz_pool_size(cores: f64, utilization: f64, wait_s: f64, compute_s: f64) -> Option<f64> {
    (compute_s > 0.0 && cores > 0.0).then(|| cores * utilization * (1.0 + wait_s / compute_s))
}

/// One worker count's throughput for [`sweet_spot`]: the median and its range over the
/// repetitions (`min == max == rps` for a single run).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkerThroughput {
    pub workers: u32,
    pub rps: f64,
    pub min: f64,
    pub max: f64,
}

impl WorkerThroughput {
    /// A single measurement, without a spread.
    pub fn single(workers: u32, rps: f64) -> WorkerThroughput {
        WorkerThroughput {
            workers,
            rps,
            min: rps,
            max: rps,
        }
    }
}

/// The sweet spot: the fewest workers whose throughput is as good as the best, where "as
/// good" means within [`WITHIN_BEST`] of it, or with repetitions that overlap the best's
/// (inside the spread, so not measurably worse). `None` for fewer than two distinct worker
/// counts. The "knee capacity" of R. Jain, *The Art of Computer Systems Performance
/// Analysis*, 1991, ch. 3: the point past which more resources buy little more throughput.
pub fn sweet_spot(series: &[WorkerThroughput]) -> Option<u32> {
    let distinct: BTreeSet<u32> = series.iter().map(|p| p.workers).collect();
    if distinct.len() < 2 {
        return None;
    }
    let best = series.iter().max_by(|a, b| a.rps.total_cmp(&b.rps))?;
    series
        .iter()
        .filter(|p| {
            p.rps >= best.rps * (1.0 - WITHIN_BEST)
                || ranges_overlap((p.min, p.max), (best.min, best.max))
        })
        .map(|p| p.workers)
        .min()
}

/// Sets the flags Little's law reads on a measured point: the share of the offered
/// connections in flight, whether the point was starved, and the warning that says how.
pub fn mark_point(point: &mut PointResult, mode: LoadMode, keepalive: bool) {
    // Count mode: every request is answered or fails before the run ends, so waits are in
    // the percentiles, and connections that finish their share early only thin the tail:
    // warn only at the looser bound, and never call it starved.
    let closed = mode == LoadMode::Closed;
    let keepalive = keepalive && closed;
    // Little's law needs the throughput of whole cycles where it was counted: a window
    // that ends mid-cycle undercounts the responses per second, not the requests in flight.
    let rps = point.whole_cycle_rps();
    let cycle_us = connection_cycle_us(&point.figures);
    point.in_flight_ratio = (point.ok && rps > 0.0)
        .then(|| requests_in_flight(rps, cycle_us) / f64::from(point.concurrency));
    // Requests never answered: in flight when the run ended, or timed out. Only a closed
    // loop holds a connection's next request back behind them.
    let stuck = if closed {
        point.figures.unanswered + point.errors_by_kind.timeout
    } else {
        0
    };
    point.starved =
        closed && point.ok && fell_short(rps, cycle_us, point.concurrency, keepalive, stuck);
    point.warnings.retain(|w| !w.starts_with("Little's law"));
    if mode != LoadMode::Rate {
        if let Some(w) = little_warning(
            rps,
            cycle_us,
            point.concurrency,
            point.errors,
            keepalive,
            stuck,
        ) {
            point.warnings.push(w);
        }
    }
}

/// How long a connection of the closed loop is busy with the server per request, µs: the
/// request's mean latency, and over TLS the handshake time each request carries (in no
/// latency; the handshakes' share `s` of the time waited makes it latency x s / (1 - s)). A
/// connection that is handshaking is loading the server, not starved. The share is capped at
/// 95%, so a run that was all handshakes cannot divide by nothing.
pub fn connection_cycle_us(figures: &crate::lab::results::RunFigures) -> f64 {
    let share = figures.tls.map_or(0.0, |t| t.share.clamp(0.0, 0.95));
    figures.latency_us.mean / (1.0 - share)
}

/// The warning behind a `~` mark (see [`fell_short`]): requests that were never
/// answered (`stuck`), or fewer requests in flight than the closed loop offered.
pub fn little_warning(
    rps: f64,
    mean_latency_us: f64,
    concurrency: u32,
    errors: u64,
    keepalive: bool,
    stuck: u64,
) -> Option<String> {
    if !fell_short(rps, mean_latency_us, concurrency, keepalive, stuck) {
        return None;
    }
    let in_flight = requests_in_flight(rps, mean_latency_us);
    let ratio = in_flight / f64::from(concurrency);
    let cause = if stuck > 0 {
        format!(
            "{} never answered, still in flight when the run ended or timed out: their \
             connections were held back, and the percentiles they affect are lower bounds",
            if stuck == 1 {
                "1 request was".to_string()
            } else {
                format!("{} requests were", thousands(stuck as f64))
            }
        )
    } else if errors > 0 {
        format!("{errors} requests failed or timed out, and time spent on them is not latency")
    } else if keepalive {
        "the other connections waited unanswered, as when a server gives each worker one \
         keep-alive connection at a time, or the generator was slow to send"
            .to_string()
    } else {
        "connections waited in the server's accept backlog, or the generator spent the time \
         connecting"
            .to_string()
    };
    Some(format!(
        "Little's law: throughput x mean latency of the answered requests = {in_flight:.1} \
         requests in flight, but {} connections were offered ({:.0}%): the load did not reach \
         the server as intended ({cause})",
        thousands(f64::from(concurrency)),
        ratio * 100.0
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::results::{PointLatency, RunFigures};

    #[test]
    fn a_connection_that_handshakes_is_busy_not_starved() {
        use crate::lab::results::HandshakeFigures;
        // 16 connections, 4,000 answers a second of 500 us each: 2 requests in flight by
        // latency alone, but handshakes were 87.5% of the time waited, so each connection
        // spent 4 ms a request busy with the server: 16 in flight.
        let mut point = PointResult {
            ok: true,
            concurrency: 16,
            figures: RunFigures {
                rps: 4000.0,
                requests: 4000,
                duration_s: 1.0,
                latency_us: PointLatency {
                    mean: 500.0,
                    ..Default::default()
                },
                ..Default::default()
            },
            ..Default::default()
        };
        mark_point(&mut point, LoadMode::Closed, false);
        assert!(point.starved, "by latency alone, 2 of 16 in flight");
        point.figures.tls = Some(HandshakeFigures {
            handshakes: 4000,
            resumed: 3990,
            share: 0.875,
            ..Default::default()
        });
        mark_point(&mut point, LoadMode::Closed, false);
        assert!(!point.starved, "{:?}", point.warnings);
        assert!((point.in_flight_ratio.unwrap() - 1.0).abs() < 1e-9);
        assert_eq!(connection_cycle_us(&point.figures), 4000.0);
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[f64::NAN, 5.0]), 5.0);
    }

    #[test]
    fn repetitions_fold_to_median_and_spread() {
        let run = |rps: f64, p99: f64| RunMeasurement {
            figures: RunFigures {
                rps,
                latency_us: PointLatency {
                    p99,
                    ..Default::default()
                },
                ..Default::default()
            },
            ..Default::default()
        };
        let (rep, spread) =
            fold_repetitions(&[run(100.0, 5.0), run(300.0, 1.0), run(200.0, 9.0)]).unwrap();
        assert_eq!(rep.figures.rps, 200.0);
        assert_eq!(rep.figures.latency_us.p99, 9.0);
        assert_eq!((spread.rps_min, spread.rps_max), (100.0, 300.0));
        assert_eq!((spread.p99_min, spread.p99_max), (1.0, 9.0));
        assert_eq!(spread.repetitions, 3);
        // Even counts take the lower median.
        let (rep, _) = fold_repetitions(&[run(100.0, 5.0), run(300.0, 1.0)]).unwrap();
        assert_eq!(rep.figures.rps, 100.0);
        assert!(fold_repetitions(&[]).is_none());
    }

    #[test]
    fn ranges_overlap_only_when_they_share_a_value() {
        assert!(ranges_overlap((1.0, 3.0), (2.0, 4.0)));
        assert!(ranges_overlap((2.0, 4.0), (1.0, 3.0)));
        assert!(ranges_overlap((1.0, 2.0), (2.0, 3.0)));
        assert!(!ranges_overlap((1.0, 1.9), (2.0, 3.0)));
        assert!(!ranges_overlap((5.0, 5.0), (4.0, 4.0)));
    }

    #[test]
    fn a_point_without_repetitions_has_a_range_of_zero_width() {
        let mut p = PointResult {
            figures: RunFigures {
                rps: 10.0,
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(rps_range(&p), (10.0, 10.0));
        p.spread = Spread {
            repetitions: 3,
            rps_min: 8.0,
            rps_max: 12.0,
            ..Default::default()
        };
        assert_eq!(rps_range(&p), (8.0, 12.0));
    }

    #[test]
    fn sweet_spot_is_fewest_workers_within_five_percent() {
        let single = |s: &[(u32, f64)]| -> Vec<WorkerThroughput> {
            s.iter()
                .map(|&(w, r)| WorkerThroughput::single(w, r))
                .collect()
        };
        let io = single(&[(1, 50.0), (2, 100.0), (4, 196.0), (8, 200.0), (16, 199.0)]);
        assert_eq!(sweet_spot(&io), Some(4));
        let cpu = single(&[(1, 100.0), (2, 190.0), (4, 185.0), (8, 170.0)]);
        assert_eq!(sweet_spot(&cpu), Some(2));
        assert_eq!(sweet_spot(&single(&[(4, 10.0), (4, 12.0)])), None);
    }

    #[test]
    fn sweet_spot_counts_a_count_inside_the_best_spread_as_good() {
        // 2 workers are 10% below the best median, but their runs reach into the best's range.
        let series = [
            WorkerThroughput {
                workers: 1,
                rps: 50.0,
                min: 48.0,
                max: 52.0,
            },
            WorkerThroughput {
                workers: 2,
                rps: 90.0,
                min: 80.0,
                max: 96.0,
            },
            WorkerThroughput {
                workers: 4,
                rps: 100.0,
                min: 95.0,
                max: 104.0,
            },
        ];
        assert_eq!(sweet_spot(&series), Some(2));
        // The same medians without the overlap: 4 workers.
        let tight: Vec<WorkerThroughput> = series
            .iter()
            .map(|p| WorkerThroughput::single(p.workers, p.rps))
            .collect();
        assert_eq!(sweet_spot(&tight), Some(4));
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
    fn littles_law_shortfall() {
        // 64 connections, 1000 req/s at 64 ms: 64 in flight, as offered.
        assert!((requests_in_flight(1000.0, 64_000.0) - 64.0).abs() < 1e-9);
        assert!(!little_shortfall(1000.0, 64_000.0, 64, true));
        // Only 10 in flight of 64 offered.
        assert!(little_shortfall(1000.0, 10_000.0, 64, true));
        // A connection per request tolerates connect time outside the latency.
        assert!(!little_shortfall(1000.0, 40_000.0, 64, false));
        assert!(little_shortfall(1000.0, 40_000.0, 64, true));
        // Microsecond requests: 20 us of generator turnaround per cycle is not a shortfall.
        assert!(!little_shortfall(20_000.0, 30.0, 1, true));
        // A pool serving 8 of 64 keep-alive connections at 10 ms per request is.
        assert!(little_shortfall(784.0, 10_200.0, 64, true));
        assert!((cycle_gap_us(1000.0, 600.0, 1) - 400.0).abs() < 1e-9);
        assert!(!little_shortfall(0.0, 1.0, 4, true));
    }

    #[test]
    fn a_stuck_request_falls_short_even_when_the_others_are_fast() {
        // The quick preset's hello prethreaded/8 at 64 connections: 56 connections never
        // answered, the 8 served ones fast enough that the cycle gap stays under a
        // millisecond, so Little's law alone does not see it.
        assert!(!little_shortfall(77_197.0, 85.0, 64, true));
        assert!(fell_short(77_197.0, 85.0, 64, true, 56));
        // iterative at 4 connections: 3 stuck.
        assert!(fell_short(17_339.0, 57.0, 4, true, 3));
        // Healthy: nothing stuck, every connection busy.
        assert!(!fell_short(30_000.0, 2_100.0, 64, true, 0));
        // Little's law alone still counts.
        assert!(fell_short(784.0, 10_200.0, 64, true, 0));
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

    #[test]
    fn littles_law_warning_names_the_shortfall() {
        assert!(little_warning(1000.0, 64_000.0, 64, 0, true, 0).is_none());
        let w = little_warning(1000.0, 10_000.0, 64, 3, true, 0).unwrap();
        assert!(
            w.contains("10.0 requests in flight") && w.contains("3 requests failed"),
            "{w}"
        );
        assert!(little_warning(1000.0, 40_000.0, 64, 0, false, 0).is_none());
        // Stuck connections are named even when Little's law alone would pass.
        let w = little_warning(77_197.0, 85.0, 64, 0, true, 56).unwrap();
        assert!(
            w.contains("56 requests were never answered") && w.contains("64 connections"),
            "{w}"
        );
    }
}
