//! The verdict between measured candidates: the most throughput whose p99 meets the bound, and,
//! among those inside the best's throughput spread, the lower p99, then the lower CPU per
//! request, then the smaller memory. Pure functions over [`Level`]s, which [`super::search`]
//! builds from its samples; a tie is named only when nothing tells the candidates apart.

use serde::{Deserialize, Serialize};

/// Two throughputs closer than this fraction are indistinguishable, whatever their spread:
/// where the cores are saturated, one server's 300 ms runs differ by up to 2.4% here, and a
/// 300 ms window reads up to 2% under a 3 s one (async/2 1,880 then 1,909 req/s; hybrid/2
/// 1,806 then 1,839, 1 ms of CPU at 64 connections), so two servers ranked by one run each
/// can be 5% apart by the measurement alone.
pub const TIE_FRACTION: f64 = 0.05;
/// A p99 within this fraction of the lowest is as good: a p99 is one sample of the slowest
/// hundredth, and two runs of one server differ by about this much.
pub const P99_TOLERANCE: f64 = 0.20;
/// Where the cores are saturated (the cell's bound is `cores / C`), a p99 is the queueing order
/// of the moment more than the server: one server's p99 moved by a third and more between runs
/// here (reactors/2 51.0 then 38.4 ms, and 58.6 then 35.8 ms in two 300 ms runs and 61.9 ms in
/// 3 s ones; uring/2 39.9 then 45.9 ms; 1 ms of CPU at 64 connections), so a p99 within this
/// fraction of the lowest is as good there. At 35%, 3 s runs told reactors/2 (61.9 ms) from
/// uring/2 (44.9 ms) by 1.3 ms, where the search's runs had not.
pub const P99_TOLERANCE_SATURATED: f64 = 0.50;
/// CPU per request within this fraction of the lowest is as good (a shared machine's noise).
pub const CPU_TOLERANCE: f64 = 0.10;
/// Peak memory within this fraction of the smallest is as good.
pub const MEMORY_TOLERANCE: f64 = 0.25;

/// What one candidate measured, over its repetitions.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Level {
    /// (mean, min, max) of the throughput that counts (0 where the p99 missed the bound).
    pub rps: (f64, f64, f64),
    /// Mean p99, microseconds.
    pub p99_us: f64,
    /// The lowest and highest p99 of its runs (both 0: one run, or not known).
    #[serde(default)]
    pub p99_range: (f64, f64),
    /// Mean server CPU per request, microseconds (0: not measured).
    pub cpu_us: f64,
    /// Mean peak RSS of the server, KiB (0: not measured).
    pub rss_kb: f64,
}

/// The figure that told the winner from the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Figure {
    Throughput,
    P99,
    Cpu,
    Memory,
    /// Throughput at the physical bound with a p99 at its floor, and CPU and memory those of
    /// the leanest server measured: the rest were not measured (nothing can beat it).
    Bound,
}

impl Figure {
    pub fn name(self) -> &'static str {
        match self {
            Figure::Throughput => "throughput",
            Figure::P99 => "p99",
            Figure::Cpu => "CPU per request",
            Figure::Memory => "memory",
            Figure::Bound => "reaching the bound at the floors",
        }
    }
}

/// The verdict over some levels, by index.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranking {
    pub winner: usize,
    /// Indistinguishable from the winner on every figure.
    pub ties: Vec<usize>,
    /// The figure that left the winner alone (`None`: a tie).
    pub decided_by: Option<Figure>,
    /// Inside the best's throughput spread (the winner among them).
    pub contenders: Vec<usize>,
}

/// Whether two (mean, min, max) throughputs cannot be told apart: their ranges overlap, or
/// their means are within [`TIE_FRACTION`].
pub fn indistinguishable(a: (f64, f64, f64), b: (f64, f64, f64)) -> bool {
    let top = a.0.max(b.0);
    if top <= 0.0 {
        return true;
    }
    (a.0 - b.0).abs() <= TIE_FRACTION * top || (a.1 <= b.2 && b.1 <= a.2)
}

/// How far above the lowest a figure may be and still be as good: a fraction of the lowest,
/// and never less than an absolute floor (for the p99, the machine's own jitter, see
/// [`super::search::Cell::p99_jitter_us`]; 0 where there is none).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    pub fraction: f64,
    pub floor: f64,
}

impl Tolerance {
    /// A fraction alone.
    pub const fn of(fraction: f64) -> Self {
        Tolerance {
            fraction,
            floor: 0.0,
        }
    }

    /// Whether `value` is as good as `lowest`.
    pub fn allows(&self, value: f64, lowest: f64) -> bool {
        value <= (lowest * (1.0 + self.fraction)).max(lowest + self.floor)
    }
}

/// A figure, how to read it off a level, and its tolerance.
type FigureRule = (Figure, fn(&Level) -> f64, Tolerance);

/// Whether two p99s' runs overlap: a server's p99 moves between runs by more than
/// [`P99_TOLERANCE`] where the cores are saturated (queueing order, not the server), so two
/// whose runs overlap cannot be told apart however far their means are.
fn p99_runs_overlap(a: &Level, b: &Level) -> bool {
    let known = |l: &Level| l.p99_range.1 > l.p99_range.0;
    known(a) && known(b) && a.p99_range.0 <= b.p99_range.1 && b.p99_range.0 <= a.p99_range.1
}

/// Of `alive` (indices into `levels`), those that each figure in turn (p99, CPU per request,
/// memory) keeps within its tolerance of the best among them (for the p99, also those whose
/// runs overlap the best's), and the figure that left one alone, if one did. A figure not
/// measured for some of them cannot tell them apart.
pub fn cheapest(levels: &[Level], alive: Vec<usize>) -> (Vec<usize>, Option<Figure>) {
    cheapest_with(levels, alive, Tolerance::of(P99_TOLERANCE))
}

/// [`cheapest`] with the p99's tolerance given ([`P99_TOLERANCE_SATURATED`] where the cores
/// are saturated, and the machine's jitter as its floor).
pub fn cheapest_with(
    levels: &[Level],
    alive: Vec<usize>,
    p99_tolerance: Tolerance,
) -> (Vec<usize>, Option<Figure>) {
    let (alive, decided_by, _) = filter_by_cost(levels, alive, p99_tolerance);
    (alive, decided_by)
}

/// One left out by a figure: (its index, the figure, the index of the best on it then).
type LeftOut = (usize, Figure, usize);

/// [`cheapest_with`], and who each figure left out.
fn filter_by_cost(
    levels: &[Level],
    mut alive: Vec<usize>,
    p99_tolerance: Tolerance,
) -> (Vec<usize>, Option<Figure>, Vec<LeftOut>) {
    let figures: [FigureRule; 3] = [
        (Figure::P99, |l| l.p99_us, p99_tolerance),
        (Figure::Cpu, |l| l.cpu_us, Tolerance::of(CPU_TOLERANCE)),
        (
            Figure::Memory,
            |l| l.rss_kb,
            Tolerance::of(MEMORY_TOLERANCE),
        ),
    ];
    let mut decided_by = None;
    let mut left_out = Vec::new();
    for (figure, value, tolerance) in figures {
        if alive.len() <= 1 {
            break;
        }
        if alive.iter().any(|&i| value(&levels[i]) <= 0.0) {
            continue;
        }
        let best = *alive
            .iter()
            .min_by(|&&a, &&b| value(&levels[a]).total_cmp(&value(&levels[b])))
            .expect("alive is not empty");
        let lowest = value(&levels[best]);
        alive.retain(|&i| {
            let kept = tolerance.allows(value(&levels[i]), lowest)
                || (figure == Figure::P99 && p99_runs_overlap(&levels[i], &levels[best]));
            if !kept {
                left_out.push((i, figure, best));
            }
            kept
        });
        if alive.len() == 1 {
            decided_by = Some(figure);
        }
    }
    (alive, decided_by, left_out)
}

/// The one with the most throughput that counts, and those indistinguishable from it (itself
/// included): `None` when none has throughput that counts.
fn contenders_of(levels: &[Level]) -> Option<(usize, Vec<usize>)> {
    let best = (0..levels.len())
        .filter(|&i| levels[i].rps.0 > 0.0)
        .max_by(|&a, &b| levels[a].rps.0.total_cmp(&levels[b].rps.0))?;
    let contenders = (0..levels.len())
        .filter(|&i| levels[i].rps.0 > 0.0 && indistinguishable(levels[best].rps, levels[i].rps))
        .collect();
    Some((best, contenders))
}

/// Why the ranking of `levels` left each one out, by index: `None` for the winner and its
/// ties and for those whose p99 missed the bound; else the figure and the index of the one it
/// was measured against (the best's throughput, or the lowest of that figure then).
pub fn left_by(levels: &[Level], p99_tolerance: Tolerance) -> Vec<Option<(Figure, usize)>> {
    let mut out = vec![None; levels.len()];
    let Some((best, contenders)) = contenders_of(levels) else {
        return out;
    };
    for i in (0..levels.len()).filter(|&i| levels[i].rps.0 > 0.0 && !contenders.contains(&i)) {
        out[i] = Some((Figure::Throughput, best));
    }
    let (_, _, left_out) = filter_by_cost(levels, contenders, p99_tolerance);
    for (i, figure, against) in left_out {
        out[i] = Some((figure, against));
    }
    out
}

/// Ranks `levels`: `None` when none has throughput that counts. The contenders are those
/// indistinguishable from the most throughput; each figure in turn (p99, CPU per request,
/// memory) keeps those within its tolerance of the contenders' best; the winner is the
/// survivor with the most throughput, the other survivors its ties.
pub fn rank(levels: &[Level]) -> Option<Ranking> {
    rank_with(levels, Tolerance::of(P99_TOLERANCE))
}

/// [`rank`] with the p99's tolerance given.
pub fn rank_with(levels: &[Level], p99_tolerance: Tolerance) -> Option<Ranking> {
    let (_, contenders) = contenders_of(levels)?;
    let (alive, by_cost) = cheapest_with(levels, contenders.clone(), p99_tolerance);
    let decided_by = if contenders.len() == 1 {
        Some(Figure::Throughput)
    } else {
        by_cost
    };
    let winner = *alive
        .iter()
        .max_by(|&&a, &&b| levels[a].rps.0.total_cmp(&levels[b].rps.0))
        .expect("the contenders hold the best");
    let ties = alive.into_iter().filter(|&i| i != winner).collect();
    Some(Ranking {
        winner,
        ties,
        decided_by,
        contenders,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The winner and what decided, under `tolerance`.
    fn decided(levels: &[Level], tolerance: Tolerance) -> (usize, Option<Figure>) {
        let r = rank_with(levels, tolerance).unwrap();
        (r.winner, r.decided_by)
    }

    fn level(rps: f64, p99_ms: f64, cpu_us: f64, rss_mb: f64) -> Level {
        Level {
            rps: (rps, rps, rps),
            p99_us: p99_ms * 1000.0,
            p99_range: (0.0, 0.0),
            cpu_us,
            rss_kb: rss_mb * 1024.0,
        }
    }

    #[test]
    fn each_one_left_out_says_by_which_figure_and_against_whom() {
        let levels = [
            level(1801.0, 256.0, 1100.0, 40.0),
            level(1839.0, 157.0, 1070.0, 8.0),
            level(1774.0, 160.0, 1080.0, 719.0),
            level(1740.0, 100.0, 1000.0, 4.0),
            level(0.0, 900.0, 1000.0, 4.0),
        ];
        let why = left_by(&levels, Tolerance::of(P99_TOLERANCE));
        // 256 ms is past the p99 tolerance of 157 ms; 719 MB past memory's of 8 MB; the last
        // but one is outside the best's throughput spread; the last missed the bound.
        assert_eq!(
            why,
            vec![
                Some((Figure::P99, 1)),
                None,
                Some((Figure::Memory, 1)),
                Some((Figure::Throughput, 1)),
                None
            ]
        );
        let r = rank(&levels).unwrap();
        assert_eq!(why[r.winner], None);
    }

    #[test]
    fn throughput_decides_when_one_is_clearly_ahead() {
        let r = rank(&[
            level(1000.0, 50.0, 100.0, 8.0),
            level(1500.0, 90.0, 300.0, 700.0),
        ])
        .unwrap();
        assert_eq!((r.winner, r.decided_by), (1, Some(Figure::Throughput)));
        assert!(r.ties.is_empty());
        assert_eq!(r.contenders, vec![1]);
    }

    #[test]
    fn inside_the_spread_the_lower_p99_then_cpu_then_memory_decides() {
        // The case: reactors/2 1,839 req/s p99 157 ms 8 MB; prethreaded/256 1,801
        // p99 256 ms; forking 1,774 p99 512 ms 719 MB (3.5% behind: inside the spread).
        let levels = [
            level(1801.0, 256.0, 1100.0, 40.0),
            level(1839.0, 157.0, 1070.0, 8.0),
            level(1774.0, 512.0, 1180.0, 719.0),
            level(1740.0, 100.0, 1000.0, 4.0),
        ];
        let r = rank(&levels).unwrap();
        assert_eq!((r.winner, r.decided_by), (1, Some(Figure::P99)));
        // The last, 5.4% behind, is outside the spread: throughput alone leaves it out, for
        // all its lower p99, CPU and memory.
        assert_eq!(r.contenders, vec![0, 1, 2]);
        // Same p99s: the CPU decides; same CPU too: the memory.
        let cpu = [
            level(1800.0, 150.0, 1200.0, 8.0),
            level(1790.0, 160.0, 1000.0, 9.0),
        ];
        assert_eq!(rank(&cpu).unwrap().decided_by, Some(Figure::Cpu));
        assert_eq!(rank(&cpu).unwrap().winner, 1);
        let memory = [
            level(1800.0, 150.0, 1000.0, 719.0),
            level(1790.0, 160.0, 1020.0, 8.0),
        ];
        let r = rank(&memory).unwrap();
        assert_eq!((r.winner, r.decided_by), (1, Some(Figure::Memory)));
    }

    #[test]
    fn where_the_cores_are_saturated_a_p99_half_again_is_as_good() {
        // uring/2 p99 40 ms at 17 MB against async/2 51 ms at 8 MB, throughput inside the
        // spread: the p99 decides at 20%; at 50% the memory does.
        let levels = [
            level(1962.0, 40.0, 1014.0, 16.8),
            level(1883.0, 51.3, 1022.0, 8.0),
        ];
        assert_eq!(
            decided(&levels, Tolerance::of(P99_TOLERANCE)),
            (0, Some(Figure::P99))
        );
        assert_eq!(
            decided(&levels, Tolerance::of(P99_TOLERANCE_SATURATED)),
            (1, Some(Figure::Memory))
        );
        // 60% apart is still told apart.
        let far = [levels[0], level(1883.0, 64.0, 1022.0, 8.0)];
        assert_eq!(
            decided(&far, Tolerance::of(P99_TOLERANCE_SATURATED)),
            (0, Some(Figure::P99))
        );
    }

    #[test]
    fn p99s_within_the_machines_jitter_are_as_good_however_short() {
        // One connection, 1 ms of CPU: hybrid/2 p99 1.135 ms against iterative 1.375 ms, 21%
        // apart, where the machine alone moves a one-connection p99 by 0.3 ms.
        let levels = [
            level(920.0, 1.375, 1090.0, 2.0),
            level(915.0, 1.135, 1150.0, 3.0),
        ];
        assert_eq!(
            decided(&levels, Tolerance::of(P99_TOLERANCE)),
            (1, Some(Figure::P99))
        );
        let jitter = Tolerance {
            fraction: P99_TOLERANCE,
            floor: 300.0,
        };
        assert_eq!(decided(&levels, jitter), (0, Some(Figure::Memory)));
        // The floor does not reach 0.3 ms past the lowest.
        let far = [level(920.0, 1.436, 1090.0, 2.0), levels[1]];
        assert_eq!(decided(&far, jitter), (1, Some(Figure::P99)));
        assert!(jitter.allows(1435.0, 1135.0) && !jitter.allows(1436.0, 1135.0));
    }

    #[test]
    fn p99s_whose_runs_overlap_are_as_good_however_far_their_means() {
        // Means 38 and 48 ms (26% apart): the runs, 30-46 and 44-52, overlap.
        let mut a = level(1900.0, 38.0, 1000.0, 8.0);
        let mut b = level(1940.0, 48.0, 1000.0, 8.5);
        a.p99_range = (30_000.0, 46_000.0);
        b.p99_range = (44_000.0, 52_000.0);
        let r = rank(&[a, b]).unwrap();
        assert_eq!((r.winner, r.ties.clone(), r.decided_by), (1, vec![0], None));
        // Runs apart (47-52): the p99 decides.
        b.p99_range = (47_000.0, 52_000.0);
        let r = rank(&[a, b]).unwrap();
        assert_eq!((r.winner, r.decided_by), (0, Some(Figure::P99)));
        // One run each: the tolerance alone.
        a.p99_range = (0.0, 0.0);
        assert_eq!(rank(&[a, b]).unwrap().decided_by, Some(Figure::P99));
    }

    #[test]
    fn a_tie_only_when_every_figure_agrees_and_none_when_nothing_counts() {
        let r = rank(&[
            level(1000.0, 50.0, 100.0, 8.0),
            level(990.0, 52.0, 104.0, 9.0),
        ])
        .unwrap();
        assert_eq!((r.winner, r.ties.clone(), r.decided_by), (0, vec![1], None));
        // An unmeasured figure cannot decide: the next one does.
        let r = rank(&[
            level(1000.0, 50.0, 0.0, 8.0),
            level(990.0, 52.0, 104.0, 90.0),
        ])
        .unwrap();
        assert_eq!((r.winner, r.decided_by), (0, Some(Figure::Memory)));
        assert_eq!(rank(&[level(0.0, 5.0, 1.0, 1.0)]), None);
        assert_eq!(rank(&[]), None);
    }

    #[test]
    fn ranges_that_overlap_are_indistinguishable() {
        assert!(indistinguishable(
            (100.0, 90.0, 110.0),
            (120.0, 105.0, 130.0)
        ));
        assert!(!indistinguishable(
            (100.0, 99.0, 101.0),
            (120.0, 119.0, 121.0)
        ));
        assert!(indistinguishable(
            (100.0, 100.0, 100.0),
            (102.0, 102.0, 102.0)
        ));
        assert!(indistinguishable((0.0, 0.0, 0.0), (0.0, 0.0, 0.0)));
    }
}
