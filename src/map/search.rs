//! The adaptive search of one cell of the map: the architecture and pool size with the most
//! throughput whose p99 meets the bound, without measuring the full grid. Architectures by
//! successive halving; the winner's pool by bracketing on a doubling scale, then a golden-section
//! search in log space with noise gating; the smallest pool within 5% of the best. Written here,
//! not taken from a crate: the search over live servers is the product. Pure: every number comes
//! from a [`Measure`], so it is tested on synthetic curves, and a resumed run replays it exactly.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::arch::Arch;

/// A pool within this fraction of the best pool's throughput is as good (curves have plateaus).
pub const WITHIN_BEST: f64 = 0.05;
/// Two candidates closer than this fraction are indistinguishable, whatever their spread.
const TIE_FRACTION: f64 = 0.03;
/// Noise gating: two pool sizes closer than this many times their measured spread are measured
/// again rather than compared.
const GATE_SPREADS: f64 = 3.0;
/// At most this many repetitions of one point.
pub const MAX_REPS: u32 = 3;
/// Repetitions of each point of the full grid (for its count, and in `verify`).
pub const GRID_REPS: u32 = 3;

/// One measurement's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub rps: f64,
    pub p99_us: f64,
    /// The p99 is only a lower bound (requests still unanswered): it never meets a bound.
    pub p99_lower_bound: bool,
    /// The point ran (a server that could not start is `false`).
    pub ok: bool,
}

impl Sample {
    /// The throughput that counts: the point's when its p99 meets the bound, else 0.
    pub fn score(&self, p99_bound_us: f64) -> f64 {
        if self.ok && !self.p99_lower_bound && self.p99_us <= p99_bound_us {
            self.rps
        } else {
            0.0
        }
    }
}

/// A server to measure: an architecture and its pool size (`None` for one without a pool).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Candidate {
    pub arch: Arch,
    pub workers: Option<u32>,
}

impl Candidate {
    /// `arch` or `arch/W`.
    pub fn label(&self) -> String {
        match self.workers {
            Some(w) => format!("{}/{w}", self.arch.name()),
            None => self.arch.name().to_string(),
        }
    }
}

/// One measurement asked for: a candidate, for `duration_ms`, repetition `rep`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Probe {
    pub candidate: Candidate,
    pub duration_ms: u32,
    pub rep: u32,
}

/// Where the numbers come from: a live server (or, on resume, the disk; in tests, a curve).
/// `None`: interrupted.
pub trait Measure {
    fn measure(&mut self, probe: &Probe) -> Option<Sample>;
}

/// One cell's question.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub archs: Vec<Arch>,
    pub concurrency: u32,
    pub cores: u32,
    pub cpu_us: f64,
    pub wait_ms: f64,
    pub p99_bound_us: f64,
    /// The first round's run length; each round doubles it.
    pub base_ms: u32,
    /// At most this many rounds of halving.
    pub rounds: u32,
    /// The largest pool tried.
    pub max_pool: u32,
    /// Pool sizes measured beside the sweet spot (Goetz's, `2n+1`, the default), by name.
    pub rules: Vec<(String, u32)>,
}

impl Cell {
    /// Goetz's pool, `cores x (1 + W/C)`, rounded, within `1..=cap`.
    pub fn goetz(&self) -> u32 {
        let c = self.cpu_us.max(1.0) / 1000.0;
        let n = f64::from(self.cores) * (1.0 + self.wait_ms / c);
        (n.round() as u32).clamp(1, self.pool_cap())
    }

    /// The largest pool worth trying: no more workers than connections (at most that many
    /// requests are in flight), nor than `max_pool`.
    pub fn pool_cap(&self) -> u32 {
        self.max_pool.min(self.concurrency.max(1)).max(1)
    }

    /// The pool sizes of the full grid for a pooled architecture: 1, 2, 4, ... up to the cap.
    pub fn grid_pools(&self) -> Vec<u32> {
        let cap = self.pool_cap();
        let mut pools: Vec<u32> = std::iter::successors(Some(1u32), |p| p.checked_mul(2))
            .take_while(|&p| p < cap)
            .collect();
        pools.push(cap);
        pools
    }

    /// How many points the full grid needs: every architecture at every grid pool, each
    /// [`GRID_REPS`] times.
    pub fn full_grid_points(&self) -> usize {
        let per_rep: usize = self
            .archs
            .iter()
            .map(|a| {
                if a.pooled() {
                    self.grid_pools().len()
                } else {
                    1
                }
            })
            .sum();
        per_rep * GRID_REPS as usize
    }

    /// The candidates the halving starts from: each architecture once; a pool whose workers
    /// each hold a connection for as long as it lives (preforked, prethreaded) at the cap, as
    /// keep-alive clients need; any other pool at Goetz's size.
    fn starting_candidates(&self) -> Vec<Candidate> {
        let mut out = Vec::new();
        for &arch in &self.archs {
            if arch.pooled() {
                let holds_connections = matches!(arch, Arch::Prethreaded | Arch::Preforked);
                out.push(Candidate {
                    arch,
                    workers: Some(if holds_connections {
                        self.pool_cap()
                    } else {
                        self.goetz()
                    }),
                });
            } else {
                out.push(Candidate {
                    arch,
                    workers: None,
                });
            }
        }
        out
    }
}

/// A measured pool size beside the sweet spot, and what it costs against it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleOutcome {
    pub rule: String,
    pub workers: u32,
    pub rps: f64,
    pub p99_us: f64,
    pub meets_bound: bool,
    /// Throughput lost against the sweet spot, as a fraction (negative: it did better).
    pub rps_loss: f64,
}

/// What the search found for one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The best candidate whose p99 meets the bound (`None`: none did).
    pub winner: Option<Candidate>,
    pub rps: f64,
    pub p99_us: f64,
    /// Candidates indistinguishable from the winner within their spread (labels).
    pub ties: Vec<String>,
    /// The best of the rest, and the winner's margin over it (a fraction).
    pub runner_up: Option<String>,
    pub margin: Option<f64>,
    /// The pool sizes named in [`Cell::rules`], measured on the winner's architecture.
    pub rules: Vec<RuleOutcome>,
    /// Rounds of halving run, and the final run length.
    pub rounds: u32,
    pub final_ms: u32,
}

/// Per candidate: its scores by run length, and its last sample.
#[derive(Default)]
struct Samples(
    BTreeMap<(Candidate, u32), Vec<f64>>,
    BTreeMap<Candidate, Sample>,
);

impl Samples {
    fn add(&mut self, c: Candidate, ms: u32, sample: Sample, score: f64) {
        self.0.entry((c, ms)).or_default().push(score);
        self.1.insert(c, sample);
    }
    fn at(&self, c: Candidate, ms: u32) -> &[f64] {
        self.0.get(&(c, ms)).map(Vec::as_slice).unwrap_or(&[])
    }
    /// The mean and the range of a candidate's scores at its longest run length.
    fn level(&self, c: Candidate) -> (f64, f64, f64) {
        let longest = self
            .0
            .keys()
            .filter(|(k, _)| *k == c)
            .map(|(_, ms)| *ms)
            .max();
        longest.map_or((0.0, 0.0, 0.0), |ms| level_at(self, c, ms))
    }
}

/// Whether two (mean, min, max) levels cannot be told apart: their ranges overlap, or their
/// means are within [`TIE_FRACTION`].
fn indistinguishable(a: (f64, f64, f64), b: (f64, f64, f64)) -> bool {
    let top = a.0.max(b.0);
    if top <= 0.0 {
        return true;
    }
    (a.0 - b.0).abs() <= TIE_FRACTION * top || (a.1 <= b.2 && b.1 <= a.2)
}

/// Runs the search of one cell. `None` when interrupted.
pub fn search(cell: &Cell, m: &mut dyn Measure) -> Option<Outcome> {
    let mut samples = Samples::default();
    let mut run = |c: Candidate, ms: u32, rep: u32, samples: &mut Samples| -> Option<f64> {
        let probe = Probe {
            candidate: c,
            duration_ms: ms,
            rep,
        };
        let s = m.measure(&probe)?;
        let score = s.score(cell.p99_bound_us);
        samples.add(c, ms, s, score);
        Some(score)
    };
    // Successive halving over the candidates.
    let mut alive = cell.starting_candidates();
    let mut ms = cell.base_ms;
    let mut rounds = 0;
    loop {
        rounds += 1;
        let final_round = rounds >= cell.rounds || alive.len() <= 2;
        for &c in &alive {
            run(c, ms, 0, &mut samples)?;
        }
        alive.sort_by(|a, b| samples.level(*b).0.total_cmp(&samples.level(*a).0));
        if final_round {
            // A second run of the leader and of those close to it, for their spread.
            let top = samples.level(alive[0]).0;
            for &c in &alive {
                if samples.level(c).0 >= top * 0.9 {
                    run(c, ms, 1, &mut samples)?;
                }
            }
            alive.sort_by(|a, b| samples.level(*b).0.total_cmp(&samples.level(*a).0));
        }
        let leader = samples.level(alive[0]);
        if final_round || alive.len() == 1 {
            break;
        }
        let keep = alive.len().div_ceil(2);
        let mut next: Vec<Candidate> = alive[..keep].to_vec();
        next.extend(
            alive[keep..]
                .iter()
                .filter(|c| leader.0 > 0.0 && indistinguishable(leader, samples.level(**c))),
        );
        alive = next;
        ms *= 2;
    }
    let leader = alive[0];
    let leader_level = samples.level(leader);
    let final_ms = ms;
    if leader_level.0 <= 0.0 {
        return Some(Outcome {
            winner: None,
            rps: 0.0,
            p99_us: 0.0,
            ties: Vec::new(),
            runner_up: None,
            margin: None,
            rules: Vec::new(),
            rounds,
            final_ms,
        });
    }
    // The winner's pool.
    let (winner, level) = if leader.arch.pooled() {
        let pool = pool_search(cell, leader.arch, final_ms, &mut samples, &mut run)?;
        let c = Candidate {
            arch: leader.arch,
            workers: Some(pool),
        };
        (c, samples.level(c))
    } else {
        (leader, leader_level)
    };
    // Ties and the runner-up, among the other architectures that reached the last round.
    let others: Vec<Candidate> = alive
        .iter()
        .copied()
        .filter(|c| c.arch != winner.arch)
        .collect();
    let ties = others
        .iter()
        .filter(|c| indistinguishable(level, samples.level(**c)))
        .map(Candidate::label)
        .collect();
    // The runner-up: the best other architecture, wherever the halving left it.
    let mut rest: Vec<Candidate> = cell
        .starting_candidates()
        .into_iter()
        .filter(|c| c.arch != winner.arch)
        .collect();
    rest.sort_by(|a, b| samples.level(*b).0.total_cmp(&samples.level(*a).0));
    let runner_up = rest.first().copied().filter(|c| samples.level(*c).0 > 0.0);
    let margin = runner_up.map(|r| {
        let other = samples.level(r).0;
        if level.0 > 0.0 {
            (level.0 - other) / level.0
        } else {
            0.0
        }
    });
    let mut rules = Vec::new();
    if winner.arch.pooled() {
        for (rule, w) in &cell.rules {
            let c = Candidate {
                arch: winner.arch,
                workers: Some((*w).clamp(1, cell.max_pool)),
            };
            if samples.at(c, final_ms).is_empty() {
                run(c, final_ms, 0, &mut samples)?;
            }
            let s = samples.1[&c];
            let mean = samples.level(c).0;
            rules.push(RuleOutcome {
                rule: rule.clone(),
                workers: c.workers.unwrap_or(0),
                rps: s.rps,
                p99_us: s.p99_us,
                meets_bound: mean > 0.0,
                rps_loss: (level.0 - mean) / level.0,
            });
        }
    }
    let best = samples.1[&winner];
    Some(Outcome {
        winner: Some(winner),
        rps: level.0,
        p99_us: best.p99_us,
        ties,
        runner_up: runner_up.map(|c| c.label()),
        margin,
        rules,
        rounds,
        final_ms,
    })
}

/// The winner architecture's pool: bracket the best on a doubling scale, narrow it by a
/// golden-section search over log2(pool), repeating close calls (noise gating), then take
/// the smallest measured pool within [`WITHIN_BEST`] of the best.
fn pool_search(
    cell: &Cell,
    arch: Arch,
    ms: u32,
    samples: &mut Samples,
    run: &mut dyn FnMut(Candidate, u32, u32, &mut Samples) -> Option<f64>,
) -> Option<u32> {
    let cap = cell.pool_cap();
    let cand = |w: u32| Candidate {
        arch,
        workers: Some(w),
    };
    let measure = |w: u32,
                   samples: &mut Samples,
                   run: &mut dyn FnMut(Candidate, u32, u32, &mut Samples) -> Option<f64>|
     -> Option<(f64, f64, f64)> {
        if samples.at(cand(w), ms).is_empty() {
            run(cand(w), ms, 0, samples)?;
        }
        Some(level_at(samples, cand(w), ms))
    };
    // Bracket: double until the throughput falls clearly below the best so far.
    let (mut best_w, mut best) = (1u32, measure(1, samples, run)?.0);
    let mut w = 1u32;
    while w < cap {
        w = (w * 2).min(cap);
        let l = measure(w, samples, run)?.0;
        if l > best {
            (best_w, best) = (w, l);
        } else if l < best * (1.0 - WITHIN_BEST) && w >= best_w * 4 {
            break;
        }
    }
    // The knee: the smallest pool of the doubling scale within WITHIN_BEST of the best (the
    // best itself may sit far out on a plateau). Golden section in log2 space around it.
    let knee = samples
        .0
        .keys()
        .filter(|(c, m)| c.arch == arch && *m == ms)
        .filter_map(|(c, _)| c.workers)
        .filter(|w| w.is_power_of_two() || *w == cap)
        .filter(|&w| level_at(samples, cand(w), ms).0 >= best * (1.0 - WITHIN_BEST))
        .min()
        .unwrap_or(best_w);
    let (mut lo, mut hi) = (
        f64::from((knee / 2).max(1)).log2(),
        f64::from((knee * 2).min(cap)).log2(),
    );
    const PHI: f64 = 0.618_033_988_749_895;
    let pool_at = |t: f64| (2f64.powf(t).round() as u32).clamp(1, cap);
    let mut steps = 0;
    while pool_at(hi) - pool_at(lo) > 1 && steps < 12 {
        steps += 1;
        let (x1, x2) = (hi - PHI * (hi - lo), lo + PHI * (hi - lo));
        let (p1, p2) = (pool_at(x1), pool_at(x2));
        if p1 == p2 {
            break;
        }
        let (mut l1, mut l2) = (measure(p1, samples, run)?, measure(p2, samples, run)?);
        // Noise gating: too close to call against their spread: measure both again.
        let mut rep = 1;
        while rep < MAX_REPS && gated(l1, l2) {
            for p in [p1, p2] {
                if (samples.at(cand(p), ms).len() as u32) <= rep {
                    run(cand(p), ms, rep, samples)?;
                }
            }
            l1 = level_at(samples, cand(p1), ms);
            l2 = level_at(samples, cand(p2), ms);
            rep += 1;
        }
        // Ties go to the smaller pool.
        if l1.0 >= l2.0 * (1.0 - WITHIN_BEST / 2.0) {
            hi = x2;
        } else {
            lo = x1;
        }
    }
    // The smallest measured pool within WITHIN_BEST of the best measured.
    let measured: Vec<(u32, f64)> = samples
        .0
        .keys()
        .filter(|(c, m)| c.arch == arch && *m == ms)
        .filter_map(|(c, _)| c.workers)
        .map(|w| (w, level_at(samples, cand(w), ms).0))
        .collect();
    let top = measured.iter().map(|(_, l)| *l).fold(0.0, f64::max);
    measured
        .iter()
        .filter(|(_, l)| *l >= top * (1.0 - WITHIN_BEST))
        .map(|(w, _)| *w)
        .min()
        .or(Some(best_w))
}

/// (mean, min, max) of a candidate's scores at one run length.
fn level_at(samples: &Samples, c: Candidate, ms: u32) -> (f64, f64, f64) {
    mean_min_max(samples.at(c, ms))
}

/// (mean, min, max) of some scores; all 0 for none.
pub fn mean_min_max(xs: &[f64]) -> (f64, f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (mean, min, max)
}

/// Whether two pools' difference is within [`GATE_SPREADS`] times their spread (with one
/// sample each, the spread is unknown and taken as 2% of the level).
fn gated(a: (f64, f64, f64), b: (f64, f64, f64)) -> bool {
    let spread = |l: (f64, f64, f64)| {
        if l.2 > l.1 {
            (l.2 - l.1) / 2.0
        } else {
            0.02 * l.0
        }
    };
    (a.0 - b.0).abs() < GATE_SPREADS * spread(a).max(spread(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// A synthetic server: throughput by architecture and pool, p99 by a fixed rule, a little
    /// deterministic noise by repetition; counts what it was asked.
    struct Curve<F: Fn(Candidate) -> (f64, f64)> {
        f: F,
        asked: Vec<Probe>,
    }

    impl<F: Fn(Candidate) -> (f64, f64)> Measure for Curve<F> {
        fn measure(&mut self, probe: &Probe) -> Option<Sample> {
            self.asked.push(*probe);
            let (rps, p99) = (self.f)(probe.candidate);
            let noise = 1.0 + 0.005 * f64::from(probe.rep);
            Some(Sample {
                rps: rps * noise,
                p99_us: p99,
                p99_lower_bound: false,
                ok: true,
            })
        }
    }

    fn cell(archs: &[Arch], concurrency: u32) -> Cell {
        Cell {
            archs: archs.to_vec(),
            concurrency,
            cores: 2,
            cpu_us: 1000.0,
            wait_ms: 10.0,
            p99_bound_us: 100_000.0,
            base_ms: 100,
            rounds: 4,
            max_pool: 256,
            rules: vec![("goetz".into(), 22), ("2n+1".into(), 5)],
        }
    }

    /// A pool curve rising as a pool of `knee` workers fills, then flat (a plateau).
    fn plateau(w: u32, knee: u32, top: f64) -> f64 {
        top * (f64::from(w.min(knee)) / f64::from(knee))
    }

    #[test]
    fn halving_keeps_the_best_architecture_and_the_pool_is_the_plateau_start() {
        let mut curve = Curve {
            f: |c: Candidate| match c.arch {
                Arch::Prethreaded => (plateau(c.workers.unwrap(), 24, 2000.0), 30_000.0),
                Arch::Epoll => (180.0, 50_000.0),
                Arch::Async => (plateau(c.workers.unwrap(), 2, 190.0), 40_000.0),
                _ => (100.0, 60_000.0),
            },
            asked: Vec::new(),
        };
        let c = cell(
            &[Arch::Epoll, Arch::Prethreaded, Arch::Async, Arch::Poll],
            64,
        );
        let out = search(&c, &mut curve).unwrap();
        let winner = out.winner.unwrap();
        assert_eq!(winner.arch, Arch::Prethreaded);
        // The smallest pool within 5% of the plateau's 2000: 23 workers (1917) or 24.
        let w = winner.workers.unwrap();
        assert!((23..=24).contains(&w), "{w}");
        let distinct: BTreeSet<_> = curve.asked.iter().collect();
        assert_eq!(distinct.len(), curve.asked.len(), "a probe asked twice");
        assert!(curve.asked.len() < c.full_grid_points());
        // Goetz's 22 loses a little, 2n+1's 5 loses most of it.
        let loss = |rule: &str| out.rules.iter().find(|r| r.rule == rule).unwrap().rps_loss;
        assert!((0.02..0.1).contains(&loss("goetz")), "{out:?}");
        assert!(loss("2n+1") > 0.7, "{out:?}");
        assert!(out.ties.is_empty());
        assert_eq!(out.runner_up.as_deref(), Some("async/22"), "{out:?}");
    }

    #[test]
    fn a_p99_over_the_bound_or_a_lower_bound_never_wins() {
        let mut curve = Curve {
            f: |c: Candidate| match c.arch {
                Arch::Epoll => (5000.0, 500_000.0),
                _ => (1000.0, 10_000.0),
            },
            asked: Vec::new(),
        };
        let out = search(&cell(&[Arch::Epoll, Arch::Poll], 8), &mut curve).unwrap();
        assert_eq!(out.winner.unwrap().arch, Arch::Poll);
        let lower = Sample {
            rps: 9.0,
            p99_us: 1.0,
            p99_lower_bound: true,
            ok: true,
        };
        assert_eq!(lower.score(100.0), 0.0);
        let mut none = Curve {
            f: |_| (1000.0, 900_000.0),
            asked: Vec::new(),
        };
        let out = search(&cell(&[Arch::Epoll, Arch::Poll], 8), &mut none).unwrap();
        assert_eq!(out.winner, None);
    }

    #[test]
    fn indistinguishable_architectures_are_a_tie() {
        let mut curve = Curve {
            f: |c: Candidate| match c.arch {
                Arch::Epoll => (1000.0, 1000.0),
                Arch::Poll => (990.0, 1000.0),
                _ => (400.0, 1000.0),
            },
            asked: Vec::new(),
        };
        let out = search(
            &cell(&[Arch::Epoll, Arch::Poll, Arch::Iterative], 1),
            &mut curve,
        )
        .unwrap();
        assert_eq!(out.winner.unwrap().arch, Arch::Epoll);
        assert_eq!(out.ties, vec!["poll".to_string()]);
    }

    #[test]
    fn close_pools_are_measured_again_before_they_are_compared() {
        assert!(gated((100.0, 100.0, 100.0), (101.0, 101.0, 101.0)));
        assert!(!gated((100.0, 100.0, 100.0), (120.0, 120.0, 120.0)));
        assert!(!gated((100.0, 99.0, 101.0), (110.0, 109.0, 111.0)));
        let mut curve = Curve {
            f: |c: Candidate| (plateau(c.workers.unwrap(), 6, 1000.0), 1000.0),
            asked: Vec::new(),
        };
        let out = search(&cell(&[Arch::Prethreaded], 64), &mut curve).unwrap();
        assert!(
            curve.asked.iter().any(|p| p.rep == 2),
            "no repeat on a plateau"
        );
        assert_eq!(out.winner.unwrap().workers, Some(6));
    }

    #[test]
    fn the_grid_and_the_caps() {
        let c = cell(&[Arch::Prethreaded, Arch::Epoll], 100);
        assert_eq!(c.grid_pools(), vec![1, 2, 4, 8, 16, 32, 64, 100]);
        assert_eq!(c.full_grid_points(), (8 + 1) * 3);
        assert_eq!(c.goetz(), 22);
        assert_eq!(cell(&[Arch::Epoll], 1).pool_cap(), 1);
        assert_eq!(cell(&[Arch::Epoll], 1).grid_pools(), vec![1]);
    }
}
