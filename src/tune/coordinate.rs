//! The search over a server's own knobs: each knob in turn by the map's knob search
//! ([`crate::search::knob::search`]: doubling, golden section in log space, noise gating), the
//! others held where the last search left them, until a pass over the knobs changes nothing
//! (coordinate search, at most [`MAX_PASSES`] passes; the last knob, threads, first: it adds
//! concurrency where it costs least). Coordinate search rather than
//! successive halving over a coarse grid: the knobs people tune (workers, and threads within
//! each) interact through one quantity, the requests served at once, so each knob's best moves
//! little when the other moves, and a line search needs a handful of points where a coarse
//! two-knob grid needs its product. Pure: every number comes from a [`Measure`], so it is
//! tested on synthetic surfaces.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::spec::Knob;
use crate::search::knob::{self, WITHIN_BEST};
use crate::search::rank::{indistinguishable, rank, Level};
use crate::search::{level_of, Sample};

/// At most this many passes over the knobs.
pub const MAX_PASSES: usize = 3;
/// Repetitions of each configuration of the full grid.
pub const GRID_REPS: u32 = 3;

pub use crate::search::Measure;

/// One run a tune measures: the knobs' values and the repetition. The numbers come through
/// [`Measure`]: a live server (in tests, a surface).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub values: Vec<u32>,
    pub rep: u32,
}

impl Run {
    pub fn new(values: &[u32], rep: u32) -> Run {
        Run {
            values: values.to_vec(),
            rep,
        }
    }

    /// What names the run in the point log: the values, the connections, the loop, the repetition.
    pub fn key(&self, concurrency: u32, closed: bool) -> String {
        let values: Vec<String> = self.values.iter().map(u32::to_string).collect();
        format!(
            "{}|c{concurrency}|{}|r{}",
            values.join(","),
            if closed { "closed" } else { "run" },
            self.rep
        )
    }

    /// The knobs' values of a point-log key [`Run::key`] made.
    pub fn values_of_key(key: &str) -> Vec<u32> {
        let values = key.split('|').next().unwrap_or_default();
        values.split(',').filter_map(|v| v.parse().ok()).collect()
    }
}
/// What was measured, by configuration.
#[derive(Default)]
pub struct Measured {
    pub samples: BTreeMap<Vec<u32>, Vec<Sample>>,
}

impl Measured {
    /// The level of `values` over its first `reps` repetitions, measuring those missing.
    pub fn level(
        &mut self,
        m: &mut dyn Measure<Run>,
        values: &[u32],
        reps: u32,
        p99_bound_us: f64,
    ) -> Option<Level> {
        loop {
            let have = self.samples.get(values).map_or(0, Vec::len) as u32;
            if have >= reps {
                break;
            }
            let sample = m.measure(&Run::new(values, have))?;
            self.samples
                .entry(values.to_vec())
                .or_default()
                .push(sample);
        }
        Some(self.known(values, p99_bound_us))
    }

    /// The level of `values` over the runs measured so far, measuring none.
    pub fn known(&self, values: &[u32], p99_bound_us: f64) -> Level {
        level_of(
            self.samples.get(values).map_or(&[][..], Vec::as_slice),
            p99_bound_us,
        )
    }
}

/// One knob's line through a configuration, as the knob search sees it.
struct Line<'a> {
    measured: &'a mut Measured,
    m: &'a mut dyn Measure<Run>,
    at: Vec<u32>,
    axis: usize,
    p99_bound_us: f64,
}

impl Line<'_> {
    fn at(&self, w: u32) -> Vec<u32> {
        let mut v = self.at.clone();
        v[self.axis] = w;
        v
    }
}

impl knob::Curve for Line<'_> {
    fn level(&mut self, w: u32, reps: u32) -> Option<Level> {
        let at = self.at(w);
        self.measured.level(self.m, &at, reps, self.p99_bound_us)
    }

    fn reps(&self, w: u32) -> u32 {
        self.measured.samples.get(&self.at(w)).map_or(0, Vec::len) as u32
    }

    fn measured(&self) -> Vec<u32> {
        self.measured
            .samples
            .keys()
            .filter(|v| {
                v.iter()
                    .enumerate()
                    .all(|(i, x)| i == self.axis || *x == self.at[i])
            })
            .map(|v| v[self.axis])
            .collect()
    }

    fn own_bound(&self, _: u32) -> f64 {
        // A server of the user's: nothing is known of it before it runs.
        f64::INFINITY
    }
}

/// What the search found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Found {
    /// The configuration, a value per knob.
    pub pick: Vec<u32>,
    /// Its level: throughput that counts (0 where the p99 missed the bound), p99, costs.
    pub level: Level,
    /// The configuration after each knob's search, in order.
    pub path: Vec<Vec<u32>>,
    pub passes: usize,
    /// What became the pick by beating the search's own by more than 5%, three runs each:
    /// a rule of thumb's configuration (its name), or one the search measured (`search`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopted_from: Option<String>,
}

/// Searches `knobs` from `start`: each knob in turn, the others held, until a pass changes
/// nothing. `None`: interrupted.
pub fn search(
    knobs: &[Knob],
    start: &[u32],
    p99_bound_us: f64,
    measured: &mut Measured,
    m: &mut dyn Measure<Run>,
) -> Option<Found> {
    let mut at: Vec<u32> = start
        .iter()
        .zip(knobs)
        .map(|(v, k)| (*v).clamp(k.lo, k.hi))
        .collect();
    let mut path = Vec::new();
    let mut passes = 0;
    while passes < MAX_PASSES {
        passes += 1;
        let before = at.clone();
        // The last knob first (threads before workers): concurrency is added first where it
        // costs least (a thread, not a process).
        for (axis, k) in knobs.iter().enumerate().rev() {
            let mut line = Line {
                measured: &mut *measured,
                m: &mut *m,
                at: at.clone(),
                axis,
                p99_bound_us,
            };
            // The line's start is measured first, so the search knows what it reached there.
            knob::Curve::level(&mut line, at[axis], 1)?;
            at[axis] = knob::search(&mut line, k.lo, k.hi)?;
            path.push(at.clone());
        }
        // One knob needs one pass; more stop once a pass over them changed nothing.
        if knobs.len() == 1 || at == before {
            break;
        }
    }
    let level = measured.level(m, &at, 1, p99_bound_us)?;
    Some(Found {
        pick: at,
        level,
        path,
        passes,
        adopted_from: None,
    })
}

/// Every configuration of the knobs' ranges.
pub fn grid(knobs: &[Knob]) -> Vec<Vec<u32>> {
    knobs.iter().fold(vec![Vec::new()], |acc, k| {
        acc.iter()
            .flat_map(|prefix| {
                k.values().map(move |v| {
                    let mut p = prefix.clone();
                    p.push(v);
                    p
                })
            })
            .collect()
    })
}

/// How many points the full grid needs: every configuration, [`GRID_REPS`] times.
pub fn grid_points(knobs: &[Knob]) -> usize {
    knobs
        .iter()
        .map(|k| (k.hi - k.lo + 1) as usize)
        .product::<usize>()
        * GRID_REPS as usize
}

/// The pick checked against the full grid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GridCheck {
    /// The grid's best configuration by the map's ranking (throughput, then p99, CPU, memory).
    pub best: Vec<u32>,
    pub best_level: Level,
    /// The pick as the grid measured it.
    pub pick_level: Level,
    /// The pick meets the p99 bound and its throughput is indistinguishable from the best's or
    /// within [`WITHIN_BEST`] of it (the tolerance the pick is chosen with).
    pub inside: bool,
    pub points: usize,
}

/// Measures every configuration [`GRID_REPS`] times (repetitions numbered from `first_rep`,
/// apart from the search's) and says whether `pick` is inside the best's spread.
pub fn check_against_grid(
    knobs: &[Knob],
    pick: &[u32],
    p99_bound_us: f64,
    first_rep: u32,
    m: &mut dyn Measure<Run>,
) -> Option<GridCheck> {
    let configs = grid(knobs);
    let mut levels = Vec::new();
    for c in &configs {
        let mut samples = Vec::new();
        for rep in 0..GRID_REPS {
            samples.push(m.measure(&Run::new(c, first_rep + rep))?);
        }
        levels.push(level_of(&samples, p99_bound_us));
    }
    let pick_index = configs.iter().position(|c| c == pick)?;
    let pick_level = levels[pick_index];
    let (best, best_level) = match rank(&levels) {
        Some(r) => (configs[r.winner].clone(), levels[r.winner]),
        None => (pick.to_vec(), pick_level),
    };
    let inside = pick_level.rps.0 > 0.0
        && (indistinguishable(best_level.rps, pick_level.rps)
            || pick_level.rps.0 >= best_level.rps.0 * (1.0 - WITHIN_BEST));
    Some(GridCheck {
        best,
        best_level,
        pick_level,
        inside,
        points: configs.len() * GRID_REPS as usize,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A surface: throughput and p99 by configuration; deterministic noise by repetition.
    struct Surface<F: Fn(&[u32]) -> (f64, f64)>(F, Vec<(Vec<u32>, u32)>);

    impl<F: Fn(&[u32]) -> (f64, f64)> Measure<Run> for Surface<F> {
        fn measure(&mut self, run: &Run) -> Option<Sample> {
            let (values, rep) = (&run.values[..], run.rep);
            self.1.push((values.to_vec(), rep));
            let (rps, p99_us) = (self.0)(values);
            Some(Sample {
                rps: rps * (1.0 + 0.004 * f64::from(rep % 3)),
                p99_us,
                p50_us: 0.0,
                p99_lower_bound: false,
                ok: true,
                cpu_us: 100.0,
                rss_kb: 10_000 + 5_000 * u64::from(values[0]),
                threads: 1,
                processes: 1,
                limit: None,
                bound_rps: 0.0,
                client_cpu_us: 0.0,
            })
        }
    }

    fn knob(name: &str, lo: u32, hi: u32) -> Knob {
        Knob::named(name, lo, hi)
    }

    /// MRI-like: a global lock per process, so throughput grows with workers up to the
    /// cores (2) and, for IO-bound work, with threads up to what hides the wait.
    fn ruby(v: &[u32], wait_share: f64) -> (f64, f64) {
        let (w, t) = (f64::from(v[0]), f64::from(v[1]));
        let per_process = 100.0 * (1.0 + wait_share * (t.min(8.0) - 1.0));
        let rps = per_process * w.min(2.0) * (1.0 - 0.01 * (w - 2.0).max(0.0));
        (rps, 50_000.0 + 1_000.0 * t)
    }

    #[test]
    fn two_knobs_find_the_corner_of_the_surface_in_a_fraction_of_the_grid() {
        let knobs = [knob("workers", 1, 8), knob("threads", 1, 32)];
        // IO-bound: threads help up to 8; workers up to the 2 cores.
        let mut m = Surface(|v: &[u32]| ruby(v, 1.0), Vec::new());
        let mut measured = Measured::default();
        let found = search(&knobs, &[1, 1], 1e6, &mut measured, &mut m).unwrap();
        assert_eq!(found.pick[0], 2, "{found:?}");
        assert!((7..=8).contains(&found.pick[1]), "{found:?}");
        assert!(
            m.1.len() * 4 <= grid_points(&knobs),
            "{} points of {}",
            m.1.len(),
            grid_points(&knobs)
        );
        // CPU-bound: threads add nothing (the lock): the fewest threads, workers at the cores.
        let mut m = Surface(|v: &[u32]| ruby(v, 0.0), Vec::new());
        let mut measured = Measured::default();
        let found = search(&knobs, &[3, 5], 1e6, &mut measured, &mut m).unwrap();
        assert_eq!(found.pick, [2, 1], "{found:?}");
        // Checked against the grid: inside; a wrong pick is not.
        let check = check_against_grid(&knobs, &found.pick, 1e6, 10, &mut m).unwrap();
        assert!(check.inside, "{check:?}");
        assert_eq!(check.points, 8 * 32 * 3);
        let wrong = check_against_grid(&knobs, &[1, 1], 1e6, 10, &mut m).unwrap();
        assert!(!wrong.inside);
    }

    #[test]
    fn a_p99_over_the_bound_is_not_a_pick_and_the_grid_is_every_configuration() {
        // More threads, more throughput, but past 4 the p99 breaks the bound.
        let knobs = [knob("threads", 1, 16)];
        let mut m = Surface(
            |v: &[u32]| (100.0 * f64::from(v[0]), 10_000.0 * f64::from(v[0])),
            Vec::new(),
        );
        let mut measured = Measured::default();
        let found = search(&knobs, &[1], 45_000.0, &mut measured, &mut m).unwrap();
        assert_eq!(found.pick, [4]);
        assert_eq!(found.passes, 1);
        assert_eq!(
            grid(&[knob("a", 1, 2), knob("b", 3, 4)]),
            [vec![1, 3], vec![1, 4], vec![2, 3], vec![2, 4]]
        );
    }
}
