//! The search's tests, on synthetic curves ([`super::testing`]).

use super::testing::*;
use super::*;
use std::collections::BTreeSet;

#[test]
fn halving_keeps_the_best_architecture_and_the_pool_is_the_plateau_start() {
    let mut curve = synthetic(|c: Candidate| match c.arch {
        Arch::Hybrid => (plateau(c.workers.unwrap(), 24, 1500.0), 30_000.0),
        Arch::Epoll => (180.0, 50_000.0),
        Arch::Async => (plateau(c.workers.unwrap(), 2, 190.0), 40_000.0),
        _ => (100.0, 60_000.0),
    });
    // Blocking waits: pools start at Goetz's 22.
    let mut c = cell(&[Arch::Epoll, Arch::Hybrid, Arch::Async, Arch::Poll], 64);
    c.blocking = true;
    let out = search(&c, &mut curve).unwrap();
    let winner = out.winner.unwrap();
    assert_eq!(winner.arch, Arch::Hybrid);
    // The smallest pool within 5% of the plateau's 1500: 23 workers (1437) or 24.
    let w = winner.workers.unwrap();
    assert!((23..=24).contains(&w), "{w}");
    let distinct: BTreeSet<_> = curve.asked.iter().collect();
    assert_eq!(distinct.len(), curve.asked.len(), "a probe asked twice");
    assert!(curve.asked.len() < c.full_grid_points());
    // Goetz's 22 loses a little, measured; 2n+1's 5 threads, each held 11 ms a request,
    // serve at most 455/s: it loses at least 68%, and is not measured.
    let rule = |name: &str| out.rules.iter().find(|r| r.rule == name).unwrap();
    assert!((0.02..0.1).contains(&rule("goetz").rps_loss), "{out:?}");
    assert!(rule("goetz").measured);
    assert!(!rule("2n+1").measured);
    assert!((rule("2n+1").rps - 5.0 / 0.011).abs() < 1e-6, "{out:?}");
    assert!(rule("2n+1").rps_loss > 0.68, "{out:?}");
    assert!(
        !curve.asked.iter().any(|p| p.candidate.workers == Some(5)),
        "{:?}",
        curve.asked
    );
    assert!(out.ties.is_empty());
    assert_eq!(out.decided_by, Some(Figure::Throughput));
    assert_eq!(out.runner_up.as_deref(), Some("async/22"), "{out:?}");
    // The bound: min(2 cores / 1 ms, 64 / 11 ms) = 2,000/s; the winner is 75% of it.
    assert_eq!(out.bound_rps, 2000.0);
    let of_bound = out.of_bound().unwrap();
    assert!((0.70..0.76).contains(&of_bound), "{of_bound}");
    assert!(out
        .winner_row()
        .is_some_and(|r| r.cpu_us == 100.0 && r.rss_kb == 8000.0));
}

#[test]
fn a_p99_over_the_bound_or_a_lower_bound_never_wins() {
    let mut curve = synthetic(|c: Candidate| match c.arch {
        Arch::Epoll => (5000.0, 500_000.0),
        _ => (1000.0, 10_000.0),
    });
    let out = search(&cell(&[Arch::Epoll, Arch::Poll], 8), &mut curve).unwrap();
    assert_eq!(out.winner.unwrap().arch, Arch::Poll);
    let lower = Sample {
        rps: 9.0,
        p99_us: 1.0,
        p50_us: 0.0,
        p99_lower_bound: true,
        ok: true,
        cpu_us: 0.0,
        rss_kb: 0,
        threads: 0,
        processes: 0,
        limit: None,
        bound_rps: 0.0,
        client_cpu_us: 0.0,
    };
    assert_eq!(lower.score(100.0), 0.0);
    let mut none = synthetic(|_| (1000.0, 900_000.0));
    let out = search(&cell(&[Arch::Epoll, Arch::Poll], 8), &mut none).unwrap();
    assert_eq!(out.winner, None);
    assert_eq!(out.candidates.len(), 2);
}

/// A lower bound in a short window is measured again, longer, up to ten cycles; a pool
/// that starves connections by its shape is not.
#[test]
fn a_lower_bound_in_a_short_window_is_measured_again_longer() {
    struct Short(Vec<Probe>);
    impl Measure<Probe> for Short {
        fn measure(&mut self, probe: &Probe) -> Option<Sample> {
            self.0.push(*probe);
            Some(Sample {
                rps: 100.0,
                p99_us: 20_000.0,
                p50_us: 0.0,
                // Censored below 200 ms: the window cut the slowest requests off.
                p99_lower_bound: probe.duration_ms < 200,
                ok: true,
                cpu_us: 10.0,
                rss_kb: 100,
                threads: 1,
                processes: 1,
                limit: None,
                bound_rps: 0.0,
                client_cpu_us: 0.0,
            })
        }
    }
    let mut c = cell(&[Arch::Epoll], 1);
    c.base_ms = 20;
    // One connection, 11 ms a cycle: 33 ms first, then straight to 110 (ten cycles), never
    // 200.
    let mut m = Short(Vec::new());
    let out = search(&c, &mut m).unwrap();
    assert_eq!(out.winner, None);
    let lengths: Vec<u32> =
        m.0.iter()
            .filter(|p| p.rep == 0)
            .map(|p| p.duration_ms)
            .collect();
    assert_eq!(lengths, vec![33, 110]);
    c.base_ms = 50;
    let mut m = Short(Vec::new());
    let out = search(&c, &mut m).unwrap();
    // 50, then 110 still censored: no winner... at 200 it would be. Ten cycles cap it.
    assert_eq!(out.winner, None);
    // Requests that timed out (errors over 1%): the bound is missed whatever the window.
    struct TimedOut(Vec<Probe>);
    impl Measure<Probe> for TimedOut {
        fn measure(&mut self, probe: &Probe) -> Option<Sample> {
            self.0.push(*probe);
            Some(Sample {
                rps: 100.0,
                p99_us: 2_000_000.0,
                p50_us: 0.0,
                p99_lower_bound: true,
                ok: false,
                cpu_us: 10.0,
                rss_kb: 100,
                threads: 1,
                processes: 1,
                limit: None,
                bound_rps: 0.0,
                client_cpu_us: 0.0,
            })
        }
    }
    c.base_ms = 20;
    let mut m = TimedOut(Vec::new());
    let out = search(&c, &mut m).unwrap();
    assert_eq!(out.winner, None);
    assert_eq!(
        m.0.iter().map(|p| p.duration_ms).collect::<Vec<_>>(),
        vec![33],
        "measured once, never longer"
    );
    // A pool that starves connections by its shape is left out, unmeasured.
    let mut c = cell(&[Arch::Prethreaded, Arch::Iterative], 64);
    c.base_ms = 20;
    c.max_pool = 32;
    let mut m = Short(Vec::new());
    let out = search(&c, &mut m).unwrap();
    assert!(m.0.is_empty(), "{:?}", m.0);
    assert_eq!(out.winner, None);
    assert_eq!(out.starving, ["prethreaded/32", "iterative"]);
}

#[test]
fn indistinguishable_throughput_is_decided_by_cost_or_named_a_tie() {
    let mut curve = synthetic(|c: Candidate| match c.arch {
        Arch::Epoll => (1000.0, 1000.0),
        Arch::Poll => (990.0, 1000.0),
        _ => (400.0, 1000.0),
    });
    // 16 connections: the bound (1,454/s) is out of a single loop's reach (1,000/s).
    let out = search(
        &cell(&[Arch::Epoll, Arch::Poll, Arch::Iterative], 16),
        &mut curve,
    )
    .unwrap();
    assert_eq!(
        out.winner.unwrap().arch,
        Arch::Epoll,
        "{out:?} {:?}",
        curve.asked
    );
    assert_eq!(
        out.ties,
        vec!["poll".to_string()],
        "{out:?} {:?}",
        curve.asked
    );
    assert_eq!(out.decided_by, None);
    // Nothing shown beats the winner on a figure: nothing to explain.
    assert!(out.decisions.is_empty(), "{:?}", out.decisions);
    // The same throughput, a third of the p99: the p99 decides.
    let mut curve = synthetic(|c: Candidate| match c.arch {
        Arch::Epoll => (1000.0, 30_000.0),
        Arch::Poll => (995.0, 10_000.0),
        _ => (400.0, 1000.0),
    });
    let out = search(
        &cell(&[Arch::Epoll, Arch::Poll, Arch::Iterative], 16),
        &mut curve,
    )
    .unwrap();
    assert_eq!(out.winner.unwrap().arch, Arch::Poll);
    assert_eq!(out.decided_by, Some(Figure::P99));
    assert!(out.ties.is_empty());
    // Epoll's row shows more throughput than the winner's: the report says what decided,
    // on which runs.
    assert_eq!(out.decisions.len(), 1, "{:?}", out.decisions);
    let d = &out.decisions[0];
    assert!(d.starts_with("epoll shows more throughput ("), "{d}");
    assert!(
        d.contains("the verdict's ranking left it out on p99: 30.0 ms against poll's 10.0 ms"),
        "{d}"
    );
    let rows: Vec<(String, u32, u32)> = out
        .candidates
        .iter()
        .map(|r| (r.label.clone(), r.runs, r.window_ms))
        .collect();
    let epoll = rows.iter().find(|r| r.0 == "epoll").unwrap();
    assert!(epoll.1 >= 1 && epoll.2 > 0, "{rows:?}");
    let runs = format!("{} run", epoll.1);
    assert!(d.contains(&runs), "{d} {rows:?}");
}

#[test]
fn a_crowded_thread_per_connection_server_starts_in_a_long_window() {
    let mut c = cell(&[Arch::Forking, Arch::Threaded, Arch::Reactors], 256);
    c.wait_ms = 0.0;
    c.rules.clear();
    c.p99_bound_us = 1e6;
    let forking = Candidate {
        arch: Arch::Forking,
        workers: None,
    };
    let prethreaded = |w| Candidate {
        arch: Arch::Prethreaded,
        workers: Some(w),
    };
    let reactors = Candidate {
        arch: Arch::Reactors,
        workers: Some(2),
    };
    // 256 runnable threads on 2 cores; 128 at W/C 1; 23 at W/C 10; 64 at 64 connections.
    assert!(c.crowded(forking) && c.crowded(prethreaded(256)));
    assert!(!c.crowded(reactors) && !c.crowded(prethreaded(8)));
    c.wait_ms = 1.0;
    assert!(c.crowded(forking));
    c.wait_ms = 10.0;
    assert!(!c.crowded(forking));
    c.wait_ms = 0.0;
    let mut few = c.clone();
    few.concurrency = 64;
    assert!(!few.crowded(forking));
    // The crowded ones are asked for ten cycles at once (256 / 2,000/s = 128 ms a cycle:
    // 1,280 ms), the rest for the first window; nothing is asked twice.
    let mut curve = synthetic(|c: Candidate| match c.arch {
        Arch::Reactors => (1900.0, 100_000.0),
        _ => (1700.0, 200_000.0),
    });
    search(&c, &mut curve).unwrap();
    let first: Vec<(String, u32)> = curve
        .asked
        .iter()
        .filter(|p| p.rep == 0)
        .map(|p| (p.candidate.label(), p.duration_ms))
        .collect();
    assert!(first.contains(&("forking".into(), 1280)), "{first:?}");
    assert!(first.contains(&("threaded".into(), 1280)), "{first:?}");
    let window = c.first_window_ms();
    assert!(first.contains(&("reactors/2".into(), window)), "{first:?}");
    assert!(!first.contains(&("forking".into(), window)), "{first:?}");
}

#[test]
fn a_close_verdict_is_confirmed_in_longer_runs() {
    // Short windows put epoll 8% over poll, whose p99 is half of epoll's; runs of 3 s put
    // them 3% apart, where the p99 decides: poll. Reactors, 26% under, is not asked
    // again.
    struct Windows(Vec<Probe>);
    impl Measure<Probe> for Windows {
        fn measure(&mut self, probe: &Probe) -> Option<Sample> {
            self.0.push(*probe);
            let long = probe.duration_ms >= VERIFY_MS;
            let (rps, p99) = match probe.candidate.arch {
                Arch::Epoll => (if long { 1030.0 } else { 1080.0 }, 60_000.0),
                Arch::Poll => (1000.0, 30_000.0),
                _ => (800.0, 20_000.0),
            };
            Some(sample(rps, p99))
        }
    }
    let mut c = cell(&[Arch::Epoll, Arch::Poll, Arch::Reactors], 64);
    c.rules.clear();
    // 500 us of CPU: one loop's own bound (2,000/s) is over what any reached.
    c.cpu_us = 500.0;
    let mut m = Windows(Vec::new());
    let out = search(&c, &mut m).unwrap();
    assert_eq!(out.winner.map(|w| w.arch), Some(Arch::Poll), "{out:?}");
    assert_eq!(out.decided_by, Some(Figure::P99));
    let long: BTreeSet<String> =
        m.0.iter()
            .filter(|p| p.duration_ms >= VERIFY_MS)
            .map(|p| p.candidate.label())
            .collect();
    assert_eq!(long.into_iter().collect::<Vec<_>>(), ["epoll", "poll"]);
    // Epoll's 3 s runs show more throughput than poll: the report says the p99 decided,
    // with its confirmation runs beside the search's. Reactors' lower p99 is from the
    // halving's first round, where poll was ahead on throughput at the same length.
    assert_eq!(out.decisions.len(), 2, "{:?}", out.decisions);
    let r = &out.decisions[1];
    assert!(
        r.starts_with("reactors/2 shows a lower p99 (20.0 ms)"),
        "{r}"
    );
    assert!(
        r.contains(
            "from 1 run of 100.0 ms; poll's from 1 run of 3.00 s: at its run length \
                    poll measured 1,000 req/s, p99 30.0 ms (1 run of 100.0 ms): poll was \
                    ahead on throughput: 1,000 req/s against 800 req/s"
        ),
        "{r}"
    );
    let d = &out.decisions[0];
    assert!(
        d.starts_with("epoll shows more throughput (1,030 req/s) than poll"),
        "{d}"
    );
    assert!(d.contains("from 1 run of 3.00 s (in the search's "), "{d}");
    assert!(d.contains(": 1,080 req/s, p99 60.0 ms)"), "{d}");
    assert!(
        d.contains("left it out on p99: 60.0 ms against poll's 30.0 ms"),
        "{d}"
    );
    // Where the longer runs agree with the short ones, the verdict stands: epoll 8% ahead
    // in every window wins on throughput.
    struct Steady;
    impl Measure<Probe> for Steady {
        fn measure(&mut self, probe: &Probe) -> Option<Sample> {
            Windows(Vec::new()).measure(&Probe {
                duration_ms: 100,
                ..*probe
            })
        }
    }
    let out = search(&c, &mut Steady).unwrap();
    assert_eq!(out.winner.map(|w| w.arch), Some(Arch::Epoll), "{out:?}");
    assert_eq!(out.decided_by, Some(Figure::Throughput));
}

/// Pools of uring whose short runs differ from their long ones: (workers, long) to
/// (req/s, peak RSS in KiB); uring/1 at 500/s, epoll at 600/s.
struct Pools(Vec<Probe>, PoolCurve);

/// (workers, long) to (req/s, peak RSS in KiB).
type PoolCurve = fn(u32, bool) -> (f64, u64);

impl Measure<Probe> for Pools {
    fn measure(&mut self, probe: &Probe) -> Option<Sample> {
        self.0.push(*probe);
        let long = probe.duration_ms >= VERIFY_MS;
        let c = probe.candidate;
        let (rps, rss_kb) = match (c.arch, c.workers) {
            (Arch::Uring, Some(1)) => (500.0, 14_000),
            (Arch::Uring, Some(w)) => (self.1)(w, long),
            _ => (600.0, 8_000),
        };
        Some(Sample {
            rss_kb,
            ..sample(rps, 30_000.0)
        })
    }
}

impl Pools {
    /// The pools run long.
    fn long(&self) -> Vec<String> {
        let long: BTreeSet<String> = self
            .0
            .iter()
            .filter(|p| p.duration_ms >= VERIFY_MS)
            .map(|p| p.candidate.label())
            .collect();
        long.into_iter().collect()
    }
}

/// Counts the default's long runs, so that they alternate.
static PROBES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
use std::sync::atomic::Ordering::Relaxed;

#[test]
fn a_pool_over_the_default_is_recommended_only_where_long_runs_say_so() {
    let mut c = cell(&[Arch::Uring, Arch::Epoll], 64);
    c.rules.clear();
    c.cpu_us = 500.0;
    // Each case: the pools' curve, the winner, and the pools run long (when it says).
    let cases: [(PoolCurve, &str, &[&str]); 4] = [
        // Short runs put uring/3 8% over the default uring/2, with 18% more memory; 3 s runs
        // put them 3% apart with 25.1% more: the memory decides, for the default.
        (
            |w, long| match w {
                2 => (1000.0, 18_700),
                _ if long => (1030.0, 23_400),
                _ => (1080.0, 18_700 + 3_400 * u64::from(w - 2)),
            },
            "uring/2",
            &["uring/2", "uring/3"],
        ),
        // Long runs put uring/3 6% over the default, at 5% more memory: a lead inside the
        // 2% a further run could take, and nothing cheaper: the default again.
        (
            |w, long| match w {
                2 => (1000.0, 18_700),
                _ if long => (1060.0, 19_600),
                _ => (1080.0, 19_600),
            },
            "uring/2",
            &[],
        ),
        // Long runs put uring/3 8% over it, but the default's two runs are 4% apart: a lead
        // its spread could close. The default.
        (
            |w, long| match w {
                2 if long => (
                    1000.0 + 40.0 * f64::from(PROBES.fetch_add(1, Relaxed) % 2),
                    18_700,
                ),
                2 => (1000.0, 18_700),
                _ if long => (1100.0, 19_600),
                _ => (1080.0, 19_600),
            },
            "uring/2",
            &[],
        ),
        // Long runs put uring/3 10% over it, every run alike: uring/3.
        (
            |w, long| match w {
                2 => (1000.0, 18_700),
                _ if long => (1100.0, 19_600),
                _ => (1080.0, 19_600),
            },
            "uring/3",
            &["uring/2", "uring/3"],
        ),
    ];
    for (curve, winner, long) in cases {
        let mut m = Pools(Vec::new(), curve);
        let out = search(&c, &mut m).unwrap();
        assert_eq!(
            out.winner.map(|w| w.label()).as_deref(),
            Some(winner),
            "{out:?}"
        );
        if !long.is_empty() {
            assert_eq!(m.long(), long);
        }
    }
    // A default whose own bound cannot tie the winner is not asked: with blocking waits of
    // 10 ms, uring/2's two threads serve at most 182/s.
    let mut blocking = cell(&[Arch::Uring, Arch::Epoll], 64);
    blocking.rules.clear();
    blocking.blocking = true;
    let mut m = Pools(Vec::new(), |w, _| {
        ((f64::from(w) / 0.011).min(1500.0) * 0.98, 18_700)
    });
    let out = search(&blocking, &mut m).unwrap();
    assert!(out.winner.unwrap().workers > Some(10), "{out:?}");
    assert!(
        !m.0.iter().any(|p| p.candidate.workers == Some(2)),
        "{:?}",
        m.0
    );
}

#[test]
fn halving_stops_once_the_leader_reaches_the_bound() {
    // 16 connections, 1 ms + 10 ms: the bound is 1,454/s; threaded and forking reach it,
    // with a p99 (30 ms) well over the floor (one cycle at the bound, 11 ms).
    let mut curve = synthetic(|c: Candidate| match c.arch {
        Arch::Threaded | Arch::Forking => (1450.0, 30_000.0),
        _ => (700.0, 30_000.0),
    });
    let archs = [
        Arch::Epoll,
        Arch::Poll,
        Arch::Iterative,
        Arch::Threaded,
        Arch::Forking,
    ];
    let out = search(&cell(&archs, 16), &mut curve).unwrap();
    assert_eq!(out.rounds, 1);
    assert!(out.of_bound().unwrap() > 0.99);
    // Two first runs and second runs of both: iterative starves 15 of 16 connections by
    // its shape, and a single loop's one core (1,000/s) cannot reach what threaded did.
    assert_eq!(curve.asked.len(), 4, "{:?}", curve.asked);
    assert_eq!(out.starving, ["iterative"]);
    assert_eq!(out.outclassed, ["epoll", "poll"]);
    assert!(out.unneeded.is_empty());
}

/// A lean server at the bound with a p99 at its floor, measured first, leaves nothing to
/// find: the rest go unmeasured. Not so when its memory is past the leanest's tolerance.
#[test]
fn the_first_round_stops_at_a_lean_server_beyond_reach() {
    struct Costly(Vec<Probe>, u64);
    impl Measure<Probe> for Costly {
        fn measure(&mut self, probe: &Probe) -> Option<Sample> {
            self.0.push(*probe);
            let (rps, p99_us, rss_kb) = match probe.candidate.arch {
                Arch::Epoll => (140.0, 110_000.0, 8000),
                Arch::Hybrid => (157.0, 104_000.0, self.1),
                _ => (155.0, 105_000.0, 9000),
            };
            Some(Sample {
                rps,
                p99_us,
                p50_us: 0.0,
                p99_lower_bound: false,
                ok: true,
                cpu_us: 1050.0,
                rss_kb,
                threads: 2,
                processes: 1,
                limit: None,
                bound_rps: 0.0,
                client_cpu_us: 0.0,
            })
        }
    }
    // 16 connections, 1 ms + 100 ms: the bound is 158/s, the floor of a p99 101 ms.
    let mut c = cell(
        &[Arch::Forking, Arch::Threaded, Arch::Hybrid, Arch::Epoll],
        16,
    );
    c.wait_ms = 100.0;
    c.p99_bound_us = 1_000_000.0;
    let mut m = Costly(Vec::new(), 8200);
    let out = search(&c, &mut m).unwrap();
    // Leanest first: epoll (one thread), hybrid/2, threaded (16), forking (16 processes).
    let order: Vec<String> = m.0.iter().map(|p| p.candidate.label()).collect();
    assert_eq!(order[..2], ["epoll", "hybrid/2"], "{order:?}");
    assert_eq!(out.winner.unwrap().label(), "hybrid/2");
    assert_eq!(out.decided_by, Some(Figure::Bound));
    assert_eq!(out.unneeded, ["threaded", "forking"]);
    // Its pool is not searched (none passes it); only the rules' pools are measured.
    assert!(m
        .0
        .iter()
        .all(|p| matches!(p.candidate.workers, None | Some(2 | 5 | 16))));
    // Hybrid at three times epoll's memory is past the tolerance: threaded, next and
    // within it, is the one beyond reach.
    let mut m = Costly(Vec::new(), 24_000);
    let out = search(&c, &mut m).unwrap();
    assert_eq!(out.winner.unwrap().label(), "threaded");
    assert_eq!(out.unneeded, ["forking"]);
    assert!(m.0.iter().all(|p| p.candidate.arch != Arch::Forking));
}

/// Why a candidate misses the bound: errors before unanswered requests before a p99 over
/// it; nothing when one of its runs met it (the mean of its counted throughput is above 0).
#[test]
fn a_miss_says_why() {
    let run = |p99_us: f64, lower: bool, ok: bool| Sample {
        rps: 100.0,
        p99_us,
        p50_us: 0.0,
        p99_lower_bound: lower,
        ok,
        cpu_us: 0.0,
        rss_kb: 0,
        threads: 1,
        processes: 1,
        limit: None,
        bound_rps: 0.0,
        client_cpu_us: 0.0,
    };
    let bound = 1_000_000.0;
    assert_eq!(Miss::of(&[], bound), None);
    assert_eq!(Miss::of(&[run(500_000.0, false, true)], bound), None);
    assert_eq!(
        Miss::of(&[run(500_000.0, false, true), run(3e6, false, true)], bound),
        None
    );
    let over = [run(1_500_000.0, false, true), run(2_000_000.0, false, true)];
    assert_eq!(Miss::of(&over, bound), Some(Miss::OverBound(2_000_000.0)));
    assert_eq!(
        Miss::OverBound(2_000_000.0).text(bound),
        "p99 2.00 s over the 1.00 s bound"
    );
    let unanswered = [run(1_500_000.0, false, true), run(900_000.0, true, true)];
    assert_eq!(Miss::of(&unanswered, bound), Some(Miss::Unanswered));
    let errors = [run(900_000.0, true, true), run(900_000.0, false, false)];
    assert_eq!(Miss::of(&errors, bound), Some(Miss::Errors));
    assert_eq!(
        [Miss::Errors, Miss::Unanswered, Miss::OverBound(0.0)].map(Miss::mark),
        ["e", "u", "x"]
    );
}

/// At one connection and 1 ms of CPU, the machine's round trip keeps every server about
/// 6% under `N / (C + W)`: without it known, nothing is at the bound and every
/// architecture is measured; with it (60 us), the first lean server at what the machine
/// allows ends the search, and its p99 floor is one cycle with the round trip.
#[test]
fn the_round_trip_lets_a_server_at_one_connection_be_at_the_bound() {
    struct RoundTrip(Vec<Probe>);
    impl Measure<Probe> for RoundTrip {
        fn measure(&mut self, probe: &Probe) -> Option<Sample> {
            self.0.push(*probe);
            Some(Sample {
                rps: 940.0,
                p99_us: 1_150.0,
                p50_us: 0.0,
                p99_lower_bound: false,
                ok: true,
                cpu_us: 1_020.0,
                rss_kb: 4_000,
                threads: 1,
                processes: 1,
                limit: None,
                bound_rps: 0.0,
                client_cpu_us: 0.0,
            })
        }
    }
    let archs = [Arch::Epoll, Arch::Poll, Arch::Threaded, Arch::Forking];
    let mut c = cell(&archs, 1);
    c.wait_ms = 0.0;
    c.rounds = 1;
    assert_eq!(c.reach_rps(), c.bound_rps());
    let mut m = RoundTrip(Vec::new());
    let out = search(&c, &mut m).unwrap();
    assert_ne!(out.decided_by, Some(Figure::Bound));
    assert!(out.unneeded.is_empty());
    let every: BTreeSet<Arch> = m.0.iter().map(|p| p.candidate.arch).collect();
    assert_eq!(every.len(), archs.len());

    c.round_trip_us = 60.0;
    assert!((c.reach_rps() - 1e6 / 1060.0).abs() < 1e-6);
    assert!((c.latency_floor_us() - 1060.0).abs() < 1e-6);
    let mut m = RoundTrip(Vec::new());
    let out = search(&c, &mut m).unwrap();
    assert_eq!(out.decided_by, Some(Figure::Bound));
    assert_eq!(out.winner.unwrap().label(), "epoll");
    assert_eq!(out.unneeded, ["poll", "threaded", "forking"]);
    assert_eq!(m.0.len(), 1, "{:?}", m.0);
    // The bound a figure is set against stays the physical one.
    assert_eq!(out.bound_rps, 1000.0);
}

/// With blocking waits, a single loop (one thread waiting at a time) cannot pass
/// 1 / (C + W): once a pool measured more, it is left out; and the winner's pool search
/// starts at the doubling whose successor's own bound can reach what the pool reached.
#[test]
fn candidates_below_what_another_reached_are_not_measured() {
    let mut curve = synthetic(|c: Candidate| match c.arch {
        Arch::Hybrid => (plateau(c.workers.unwrap(), 20, 1800.0), 30_000.0),
        _ => (85.0, 60_000.0),
    });
    // 1 ms + 10 ms blocking at 64 connections: a single loop's own bound is 91/s.
    let mut c = cell(&[Arch::Poll, Arch::Hybrid, Arch::Epoll], 64);
    c.blocking = true;
    let out = search(&c, &mut curve).unwrap();
    assert_eq!(out.outclassed, ["poll", "epoll"]);
    assert!(curve.asked.iter().all(|p| p.candidate.arch == Arch::Hybrid));
    // Hybrid/22 reached 1,800: a pool of 16 (16 / 11 ms = 1,454) cannot come within 5%
    // of it, 32 can: the bracket doubles from 32, the golden section searches above 16,
    // and nothing at 16 or below is measured (but the rules' pools, 5 and 22, for what
    // they lose).
    let smallest = curve
        .asked
        .iter()
        .filter_map(|p| p.candidate.workers)
        .filter(|w| ![5, 22].contains(w))
        .min()
        .unwrap();
    assert!((17..=19).contains(&smallest), "{:?}", curve.asked);
    assert!(curve.asked.iter().any(|p| p.candidate.workers == Some(32)));
    assert_eq!(out.winner.unwrap().arch, Arch::Hybrid);
    let w = out.winner.unwrap().workers.unwrap();
    assert!((19..=20).contains(&w), "{w}");
    // Async waits: every candidate's own bound is the cell's; nothing is left out.
    c.blocking = false;
    let mut curve = synthetic(curve.f);
    let out = search(&c, &mut curve).unwrap();
    assert!(out.outclassed.is_empty());
    assert!(curve.asked.iter().any(|p| p.candidate.arch == Arch::Poll));
}

#[test]
fn close_pools_are_measured_again_before_they_are_compared() {
    assert!(knob::gated((100.0, 100.0, 100.0), (101.0, 101.0, 101.0)));
    assert!(!knob::gated((100.0, 100.0, 100.0), (120.0, 120.0, 120.0)));
    assert!(!knob::gated((100.0, 99.0, 101.0), (110.0, 109.0, 111.0)));
    let mut curve = synthetic(|c: Candidate| (plateau(c.workers.unwrap(), 6, 1000.0), 1000.0));
    let out = search(&cell(&[Arch::Reactors], 64), &mut curve).unwrap();
    // Both of a pair on the plateau: the smaller goes on, neither measured a third time.
    assert!(
        !curve.asked.iter().any(|p| p.rep == 2),
        "a plateau measured again: {:?}",
        curve.asked
    );
    assert_eq!(out.winner.unwrap().workers, Some(6));
    // Below the plateau, 7 (947/s) and 9 (1,000/s) are within 6% of each other (three
    // times an unknown spread): both are measured again before they are compared.
    let mut curve = synthetic(|c: Candidate| {
        let w = c.workers.unwrap();
        let rps = match w {
            1 => 500.0,
            2 => 800.0,
            3..=7 => 940.0 + f64::from(w),
            // A peak, not a plateau: the golden section, not a bisection.
            8..=12 => 1000.0,
            _ => 850.0,
        };
        (rps, 1000.0)
    });
    let out = search(&cell(&[Arch::Reactors], 64), &mut curve).unwrap();
    let again = |w: u32| {
        curve
            .asked
            .iter()
            .any(|p| p.rep == 1 && p.candidate.workers == Some(w))
    };
    assert!(again(7) && again(9), "{:?}", curve.asked);
    assert_eq!(out.winner.unwrap().workers, Some(8));
}

/// A prediction of `rps` within 8% either side.
fn predicted(rps: f64) -> crate::model::fit::Predicted {
    crate::model::fit::Predicted {
        prediction: crate::model::Prediction {
            rps,
            latency_us: 0.0,
            bound_rps: 2000.0,
            binding: crate::model::Binding::Cores,
        },
        low: rps * 0.92,
        high: rps * 1.08,
        p50: Default::default(),
        p99: Default::default(),
    }
}

#[test]
fn the_model_leaves_out_what_it_places_under_the_measured_leader_while_it_holds() {
    let truth = |c: Candidate| match c.arch {
        Arch::Async => (1900.0, 30_000.0),
        Arch::Hybrid => (1850.0, 30_000.0),
        _ => (1200.0, 40_000.0),
    };
    let archs = [Arch::Async, Arch::Hybrid, Arch::Threaded, Arch::Prethreaded];
    let mut c = cell(&archs, 64);
    c.rules = Vec::new();
    let at = |arch, workers| Candidate { arch, workers };
    c.forecast = vec![
        (at(Arch::Async, Some(2)), predicted(1880.0)),
        (at(Arch::Hybrid, Some(2)), predicted(1820.0)),
        (at(Arch::Threaded, None), predicted(1180.0)),
        (at(Arch::Prethreaded, Some(64)), predicted(1150.0)),
    ];
    let mut curve = synthetic(truth);
    let out = search(&c, &mut curve).unwrap();
    assert_eq!(out.winner.unwrap().arch, Arch::Async);
    // Threaded's and prethreaded's tops (1,274 and 1,242) are under async/2's measured 1,900.
    assert_eq!(out.predicted_out, ["threaded", "prethreaded/64"]);
    assert!(
        !curve
            .asked
            .iter()
            .any(|p| matches!(p.candidate.arch, Arch::Threaded | Arch::Prethreaded)),
        "{:?}",
        curve.asked
    );
    // Each measured candidate carries its prediction; those left out carry none measured.
    let row = |label: &str| out.predictions.iter().find(|r| r.label == label).unwrap();
    // (Its two runs: 1,900 and, a repetition's synthetic noise, 1,909.5.)
    assert_eq!(row("async/2").measured_rps, Some(1904.75));
    assert_eq!(row("async/2").inside(), Some(true));
    assert_eq!(row("threaded").measured_rps, None);
    // The model off on async/2 (1,500 measured, its interval 1,730 to 2,030): it decides
    // nothing in this cell, and what it would have left out is measured.
    let mut off = synthetic(|c: Candidate| match c.arch {
        Arch::Async => (1500.0, 30_000.0),
        _ => truth(c),
    });
    let out = search(&c, &mut off).unwrap();
    assert!(out.predicted_out.is_empty(), "{out:?}");
    assert!(off.asked.iter().any(|p| p.candidate.arch == Arch::Threaded));
    assert_eq!(out.winner.unwrap().arch, Arch::Hybrid);
}

/// A cell of 64 connections allowed two points, where the model predicts async/2 (1,880),
/// hybrid/2 (1,840), uring/2 (1,820) and threaded (1,810) and does not know reactors yet.
fn budget_cell() -> Cell {
    let archs = [
        Arch::Async,
        Arch::Hybrid,
        Arch::Reactors,
        Arch::Uring,
        Arch::Threaded,
    ];
    let mut c = cell(&archs, 64);
    c.rules = Vec::new();
    let at = |arch, workers| Candidate { arch, workers };
    c.forecast = vec![
        (at(Arch::Async, Some(2)), predicted(1880.0)),
        (at(Arch::Hybrid, Some(2)), predicted(1840.0)),
        (at(Arch::Uring, Some(2)), predicted(1820.0)),
        (at(Arch::Threaded, None), predicted(1810.0)),
    ];
    c.allowance = Some(2);
    c.spare = 2;
    c
}

#[test]
fn a_budget_measures_the_models_leader_and_leaves_the_lowest_predicted_out() {
    // Four architectures the model knows, all close enough that none is predicted out, and
    // one it does not know yet (reactors). Two points allowed: the model's leader (async/2)
    // first, reactors (unknown: measured whatever the budget), the rest left out; what is
    // left out carries its prediction unmeasured.
    let truth = |c: Candidate| match c.arch {
        Arch::Async => (1900.0, 30_000.0),
        Arch::Reactors => (1700.0, 40_000.0),
        _ => (1800.0, 30_000.0),
    };
    let mut c = budget_cell();
    let mut curve = synthetic(truth);
    let out = search(&c, &mut curve).unwrap();
    let asked: Vec<Arch> = curve.asked.iter().map(|p| p.candidate.arch).collect();
    assert_eq!(asked[0], Arch::Async, "{asked:?}");
    assert_eq!(asked[1], Arch::Reactors, "{asked:?}");
    assert_eq!(out.winner.unwrap().arch, Arch::Async);
    assert_eq!(out.over_budget, ["hybrid/2", "uring/2", "threaded"]);
    assert_eq!(out.allowance, Some(2));
    // Both measured once, straight in the contest's long window: no short run, no
    // confirmation.
    assert!(c.contests_long());
    assert_eq!(c.contest_window_ms(), CONTEST_MS);
    assert_eq!(curve.asked.len(), 2, "{:?}", curve.asked);
    assert!(
        curve
            .asked
            .iter()
            .all(|p| p.duration_ms == c.contest_window_ms()),
        "{:?}",
        curve.asked
    );
    let row = |label: &str| out.predictions.iter().find(|r| r.label == label).unwrap();
    assert_eq!(
        (row("threaded").rps, row("threaded").measured_rps),
        (1810.0, None)
    );
    // Without a budget every one of them is measured.
    c.allowance = None;
    let mut all = synthetic(truth);
    let out = search(&c, &mut all).unwrap();
    assert!(out.over_budget.is_empty());
    assert!(all.asked.iter().any(|p| p.candidate.arch == Arch::Threaded));
    // The model off on its leader (1,500 measured against 1,730 to 2,030): the allowance
    // doubles, and the next of the model's order are measured after all.
    c.allowance = Some(2);
    let leader_off = |k: Candidate| match k.arch {
        Arch::Async => (1500.0, 30_000.0),
        _ => truth(k),
    };
    let mut off = synthetic(leader_off);
    let out = search(&c, &mut off).unwrap();
    assert!(off.asked.iter().any(|p| p.candidate.arch == Arch::Hybrid));
    assert_ne!(out.winner.unwrap().arch, Arch::Async);
    assert!(off.asked.len() <= 4, "{:?}", off.asked);
    // One spare point in the run: the miss widens the cell by one point only (hybrid/2, the
    // model's next; uring/2 and threaded stay out).
    c.spare = 1;
    let mut tight = synthetic(leader_off);
    search(&c, &mut tight).unwrap();
    let asked: Vec<Arch> = tight.asked.iter().map(|p| p.candidate.arch).collect();
    assert_eq!(asked, [Arch::Async, Arch::Reactors, Arch::Hybrid]);
    // None: the run keeps its budget, and the miss widens nothing.
    c.spare = 0;
    let mut kept = synthetic(leader_off);
    search(&c, &mut kept).unwrap();
    let asked: Vec<Arch> = kept.asked.iter().map(|p| p.candidate.arch).collect();
    assert_eq!(asked, [Arch::Async, Arch::Reactors]);
}

#[test]
fn under_a_budget_what_the_model_places_above_every_one_measured_is_measured() {
    // The model far off on this cell: its leader (async/2, 1,880 predicted), hybrid/2 and
    // uring/2 measure 1,200, 1,250 and 1,260, reactors (unknown) 1,300. Twice the allowance
    // is spent, in long runs (no point kept to confirm); threaded is left over, and its
    // interval (1,665 to 1,955) lies wholly above the best measured: a kind not measured in
    // the cell yet (a thread a connection), it is measured past the allowance (1,800, the
    // winner).
    let truth = |c: Candidate| match c.arch {
        Arch::Async => (1200.0, 30_000.0),
        Arch::Hybrid => (1250.0, 30_000.0),
        Arch::Uring => (1260.0, 30_000.0),
        Arch::Reactors => (1300.0, 30_000.0),
        _ => (1800.0, 30_000.0),
    };
    let c = budget_cell();
    let mut curve = synthetic(truth);
    let out = search(&c, &mut curve).unwrap();
    let mut first: Vec<Arch> = curve.asked.iter().map(|p| p.candidate.arch).collect();
    first.dedup();
    assert_eq!(
        first,
        [
            Arch::Async,
            Arch::Reactors,
            Arch::Hybrid,
            Arch::Uring,
            Arch::Threaded
        ],
        "{:?}",
        curve.asked
    );
    assert_eq!(out.winner.unwrap().arch, Arch::Threaded);
    assert!(out.over_budget.is_empty(), "{out:?}");
    // The whole cell 40% under the model: after three kinds measured under their intervals
    // (async and uring, event loops; hybrid, a pool a request; then threaded, a thread a
    // connection, chased), the rest is not chased: forking is a kind already measured under.
    let mut wide = budget_cell();
    wide.archs.push(Arch::Forking);
    wide.forecast.push((
        Candidate {
            arch: Arch::Forking,
            workers: None,
        },
        predicted(1800.0),
    ));
    let mut slow = synthetic(|k: Candidate| match k.arch {
        Arch::Async => (1128.0, 30_000.0),
        Arch::Hybrid => (1104.0, 30_000.0),
        Arch::Reactors => (700.0, 30_000.0),
        Arch::Uring => (1092.0, 30_000.0),
        _ => (1086.0, 30_000.0),
    });
    let out = search(&wide, &mut slow).unwrap();
    assert!(slow
        .asked
        .iter()
        .any(|p| p.candidate.arch == Arch::Threaded));
    assert!(slow.asked.iter().all(|p| p.candidate.arch != Arch::Forking));
    assert_eq!(out.over_budget, ["forking"]);
    assert_eq!(out.winner.unwrap().arch, Arch::Async);
}

#[test]
fn under_a_budget_the_models_leader_is_ranked_by_its_p99_among_throughput_ties() {
    // async/2 and hybrid/2 within 5% of each other: hybrid/2's predicted p99 (20 ms) is well
    // under async/2's (60 ms), so it is the leader, measured first; uring/2, 10% under, is
    // not in the running whatever its p99.
    let with_p99 = |rps: f64, p99_us: f64| {
        let mut p = predicted(rps);
        p.p99 = crate::model::fit::Latency {
            us: p99_us,
            low: p99_us * 0.9,
            high: p99_us * 1.1,
        };
        p
    };
    let archs = [Arch::Async, Arch::Hybrid, Arch::Uring];
    let mut c = cell(&archs, 64);
    c.rules = Vec::new();
    let at = |arch| Candidate {
        arch,
        workers: Some(2),
    };
    c.forecast = vec![
        (at(Arch::Async), with_p99(1880.0, 60_000.0)),
        (at(Arch::Hybrid), with_p99(1850.0, 20_000.0)),
        (at(Arch::Uring), with_p99(1690.0, 5_000.0)),
    ];
    c.allowance = Some(2);
    let mut curve = synthetic(|k: Candidate| match k.arch {
        Arch::Hybrid => (1850.0, 20_000.0),
        _ => (1880.0, 60_000.0),
    });
    search(&c, &mut curve).unwrap();
    assert_eq!(
        curve.asked[0].candidate.arch,
        Arch::Hybrid,
        "{:?}",
        curve.asked
    );
    // Without predicted p99s, the most throughput leads.
    for (_, p) in &mut c.forecast {
        p.p99 = Default::default();
    }
    let mut plain = synthetic(|_| (1880.0, 60_000.0));
    search(&c, &mut plain).unwrap();
    assert_eq!(
        plain.asked[0].candidate.arch,
        Arch::Async,
        "{:?}",
        plain.asked
    );
}

#[test]
fn under_a_budget_a_candidate_predicted_to_miss_the_p99_bound_is_measured_last() {
    // async/2 predicted the most throughput (1,880), but with a p99 over the cell's bound
    // (what it measured at these connections before); hybrid/2 (1,840) leads, uring/2
    // (1,820) follows, and async/2 is left out: its throughput would not count. Its interval
    // above every one measured does not bring it back.
    let mut c = budget_cell();
    c.archs = vec![Arch::Async, Arch::Hybrid, Arch::Uring];
    c.forecast.truncate(3);
    let bound = c.p99_bound_us;
    c.forecast[0].1 = c.forecast[0].1.with_p99_at_least(bound * 2.0);
    let mut curve = synthetic(|k: Candidate| match k.arch {
        Arch::Async => (1880.0, 2.0 * bound),
        Arch::Hybrid => (1840.0, 30_000.0),
        _ => (1820.0, 30_000.0),
    });
    let out = search(&c, &mut curve).unwrap();
    assert_eq!(
        asked_at(&curve.asked, c.contest_window_ms()),
        [Arch::Hybrid, Arch::Uring],
        "{:?}",
        curve.asked
    );
    assert_eq!(out.over_budget, ["async/2"]);
    assert_eq!(out.winner.unwrap().arch, Arch::Hybrid);
    // Its p99 under the bound, it leads again; and where only the interval's upper part is
    // above it (the model unsure), too.
    c.forecast[0].1 = predicted(1880.0);
    let mut plain = synthetic(|_| (1880.0, 30_000.0));
    search(&c, &mut plain).unwrap();
    assert_eq!(plain.asked[0].candidate.arch, Arch::Async);
    c.forecast[0].1.p99 = crate::model::fit::Latency {
        us: bound * 1.2,
        low: bound * 0.8,
        high: bound * 1.6,
    };
    let mut unsure = synthetic(|_| (1880.0, 30_000.0));
    search(&c, &mut unsure).unwrap();
    assert_eq!(unsure.asked[0].candidate.arch, Arch::Async);
}

#[test]
fn under_a_budget_an_unknown_candidate_under_the_models_leader_by_its_own_bound_is_not_measured() {
    // epoll, one thread at 1 ms a request, can serve 1,000 a second at most, where the model
    // predicts async/2 at 1,880: it runs after the predicted ones, and async/2's 1,900
    // measured outclasses it. reactors, unknown too but able to reach the leader, is measured
    // right after the leader as before.
    let mut c = budget_cell();
    c.archs.push(Arch::Epoll);
    let mut curve = synthetic(|k: Candidate| match k.arch {
        Arch::Async => (1900.0, 30_000.0),
        Arch::Epoll => (900.0, 30_000.0),
        _ => (1800.0, 30_000.0),
    });
    let out = search(&c, &mut curve).unwrap();
    let asked: Vec<Arch> = curve.asked.iter().map(|p| p.candidate.arch).collect();
    assert_eq!(asked[..2], [Arch::Async, Arch::Reactors], "{asked:?}");
    assert!(!asked.contains(&Arch::Epoll), "{asked:?}");
    assert_eq!(out.outclassed, ["epoll"]);
    assert_eq!(out.winner.unwrap().arch, Arch::Async);
    // Alone with the model's leader, whose prediction it could reach, it is measured.
    c.forecast.truncate(1);
    c.forecast[0].1 = predicted(950.0);
    let mut near = synthetic(|k: Candidate| match k.arch {
        Arch::Epoll => (900.0, 30_000.0),
        _ => (940.0, 30_000.0),
    });
    search(&c, &mut near).unwrap();
    assert!(near.asked.iter().any(|p| p.candidate.arch == Arch::Epoll));
}

/// The candidates' architectures asked for in windows of `ms`, in order.
fn asked_at(asked: &[Probe], ms: u32) -> Vec<Arch> {
    asked
        .iter()
        .filter(|p| p.duration_ms == ms)
        .map(|p| p.candidate.arch)
        .collect()
}

/// A synthetic server whose short runs read otherwise than its long ones.
struct Windowed<F: Fn(Candidate, u32) -> f64> {
    f: F,
    asked: Vec<Probe>,
}

impl<F: Fn(Candidate, u32) -> f64> Measure<Probe> for Windowed<F> {
    fn measure(&mut self, probe: &Probe) -> Option<Sample> {
        self.asked.push(*probe);
        Some(sample(
            (self.f)(probe.candidate, probe.duration_ms),
            30_000.0,
        ))
    }
}

#[test]
fn under_a_budget_a_cell_the_model_cannot_predict_confirms_its_verdict_in_long_runs() {
    // No forecast: the whole field is measured in short runs, where uring/2 leads threaded by
    // 2.5% (a tie) and hybrid/2 is 25% under. Two points allowed, all spent: the winner and
    // its closest rival still run once each in the full window, where threaded leads by 8%.
    let mut c = cell(&[Arch::Uring, Arch::Threaded, Arch::Hybrid], 16);
    c.rules = Vec::new();
    c.rounds = 1;
    c.allowance = Some(2);
    let full = c.full_window_ms();
    let f = move |k: Candidate, ms: u32| match (k.arch, ms >= full) {
        (Arch::Uring, false) => 1000.0,
        (Arch::Uring, true) => 900.0,
        (Arch::Threaded, _) => 975.0,
        _ => 750.0,
    };
    let mut m = Windowed {
        f,
        asked: Vec::new(),
    };
    assert!(!c.contests_long());
    let out = search(&c, &mut m).unwrap();
    assert_eq!(
        asked_at(&m.asked, full),
        [Arch::Uring, Arch::Threaded],
        "{:?}",
        m.asked
    );
    assert_eq!(out.winner.unwrap().arch, Arch::Threaded, "{out:?}");
    // A rival far under the winner in short runs is contested all the same: a short run's
    // lead can be the run's (hybrid/2 31% ahead in 300 ms, under in 3 s).
    let mut far = Windowed {
        f: move |k: Candidate, ms: u32| {
            if k.arch == Arch::Threaded {
                600.0
            } else {
                f(k, ms)
            }
        },
        asked: Vec::new(),
    };
    let out = search(&c, &mut far).unwrap();
    // (The closest other architecture is hybrid/2 now, at 750.)
    assert_eq!(
        asked_at(&far.asked, full),
        [Arch::Uring, Arch::Hybrid],
        "{:?}",
        far.asked
    );
    assert_eq!(out.winner.unwrap().arch, Arch::Uring);
}
