//! The adaptive search of one cell of the map: the architecture and pool size with the most
//! throughput whose p99 meets the bound, ranked by cost among the indistinguishable
//! ([`super::rank`]), without measuring the full grid. Architectures by successive halving
//! (stopped early once the leader reaches the cell's physical bound); the winner's pool by
//! bracketing on a doubling scale, then a golden-section search in log space with noise gating.
//! Written here, not taken from a crate: the search over live servers is the product. Pure:
//! every number comes from a [`Measure`], so it is tested on synthetic curves, and a resumed
//! run replays it exactly.

use std::collections::BTreeMap;

use crate::arch::Arch;
use crate::search::knob;
use crate::search::rank::{
    indistinguishable, rank_with, Figure, Level, Tolerance, CPU_TOLERANCE, MEMORY_TOLERANCE,
    P99_TOLERANCE, TIE_FRACTION,
};
use crate::search::sample::EDGE_FRACTION;
use crate::search::{level_of, Measure, Miss, Sample};

mod cell;
mod outcome;
#[cfg(test)]
pub(crate) mod testing;
mod verify;

pub use cell::{smallest_within_tie, Candidate, Cell, Probe};
use cell::{starves_by_shape, window_ms};
use outcome::{decisions, labels, no_winner, prediction_rows, row_of, rows};
pub use outcome::{CandidateRow, Outcome, PredictionRow, RuleOutcome};
pub use verify::{verify, Verify};

/// Repetitions of each point of the full grid (for its count).
pub const GRID_REPS: u32 = 3;
/// A server within this fraction of what the machine allows is at the bound: it may end a
/// search early ([`Search::beyond_reach`]), so it is held closer than two throughputs are to
/// tie (a server 5% under it was 5% under three others here, at 16 connections and 100 ms).
const AT_BOUND_FRACTION: f64 = 0.03;
/// A window shorter than this many cycles of every connection may end before a slow
/// request's answer: a p99 that is then a lower bound is measured again, longer.
const LOWER_BOUND_CYCLES: f64 = 10.0;
/// The first round's window holds at least this many cycles of every connection.
const FIRST_ROUND_CYCLES: f64 = 3.0;
/// A window shorter than this many of a candidate's own cycles is measured again, longer.
const OWN_CYCLES: f64 = 2.0;
/// Verification runs each candidate this long (or three cycles, if longer), twice for the
/// pick and those close to the best.
pub const VERIFY_MS: u32 = 3000;
/// Under a budget where the model predicts the cell, each candidate runs this long
/// ([`Cell::contest_window_ms`]).
pub const CONTEST_MS: u32 = 2000;
/// The repetition numbers verification's probes carry (this and the next), apart from the
/// search's own.
pub const VERIFY_REP: u32 = 9;
/// Under a budget, kinds of server ([`crate::arch::Holding`]) measured under their predicted
/// intervals after which a cell is taken to run slower than the model says as a whole: the
/// model's leader's and two more.
const CELL_UNDER: usize = 3;
/// At most this many candidates run a second time in the halving's last round.
const SECOND_RUNS: usize = 2;
/// The longest window the search asks for.
const MAX_WINDOW_MS: u32 = 60_000;
/// A verdict this close is confirmed in longer runs before it stands: another architecture, or
/// a cheaper pool of the winner's, this far or less under the winner's throughput. The
/// search's short windows put uring/4 7 to 11% over uring/2 where 3 s runs put them 3 to 5%
/// apart (50 us of CPU and 5 ms waits at 1,000 connections), and hybrid/2 5.9% under async/2
/// where 3 s runs put it 4.4% under.
const CONTESTED_FRACTION: f64 = 0.12;
/// Runnable threads per core from which a thread-per-connection server starts in a long window
/// ([`Cell::crowded`]).
const CROWDED_PER_CORE: f64 = 64.0;
/// At most this many candidates contest a verdict in longer runs.
const CONTESTERS: usize = 1;

/// Per candidate and run length: its samples.
#[derive(Default)]
struct Samples(BTreeMap<(Candidate, u32), Vec<Sample>>);

impl Samples {
    fn at(&self, c: Candidate, ms: u32) -> &[Sample] {
        self.0.get(&(c, ms)).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The candidate's samples at its longest run length.
    fn longest(&self, c: Candidate) -> &[Sample] {
        self.longest_ms(c).map_or(&[], |ms| self.at(c, ms))
    }

    /// The candidate's longest run length.
    fn longest_ms(&self, c: Candidate) -> Option<u32> {
        self.0
            .keys()
            .filter(|(k, _)| *k == c)
            .map(|(_, ms)| *ms)
            .max()
    }
}

/// A search in progress: the cell, where numbers come from, and what was measured.
struct Search<'a> {
    cell: &'a Cell,
    m: &'a mut dyn Measure<Probe>,
    samples: Samples,
    asked: BTreeMap<Probe, Sample>,
    /// The candidates the first round left out unmeasured (see [`Search::outclassed`]).
    outclassed: Vec<Candidate>,
    /// The candidate the first round stopped at, beyond reach of the rest
    /// ([`Search::beyond_reach`]), and the rest, left unmeasured.
    beyond: Option<Candidate>,
    unneeded: Vec<Candidate>,
    /// The candidates the first round left out because the model's interval for them lay
    /// below what another measured ([`Search::is_predicted_out`]).
    predicted_out: Vec<Candidate>,
    /// The candidates the model predicted and the cell's budget left unmeasured
    /// ([`Search::can_spend`]).
    over_budget: Vec<Candidate>,
    /// Why the next point is needed ([`Measure::why`]).
    why: &'static str,
}

impl Search<'_> {
    /// Measures `c` for `ms` (repetition `rep`) and files the sample under `ms`. A p99 that is
    /// a lower bound, or a window of fewer than two of the candidate's own cycles, in a window
    /// of fewer than ten of the bound's cycles is measured again in one of ten cycles (a short
    /// window, not the server, cut it off), unless the candidate's pool starves connections by
    /// its shape, or the sample failed (errors over 1%: requests that took longer than the
    /// load's timeout, above any p99 bound, however long the window). It goes straight to ten:
    /// each step between costs a whole probe (a server started, every connection made and
    /// settled), the longest of them most of it.
    fn run(&mut self, c: Candidate, ms: u32, rep: u32) -> Option<Sample> {
        let ten_cycles = window_ms(LOWER_BOUND_CYCLES * self.cell.cycle_ms());
        let starves = starves_by_shape(c, self.cell.concurrency);
        // A crowded run queue ([`Cell::crowded`]) starts in the ten cycles a short window would
        // be lengthened to: the short one would be a probe spent for nothing.
        let first = if self.cell.crowded(c) && ten_cycles >= ms + ms / 2 && !starves {
            ten_cycles
        } else {
            ms
        };
        let mut sample = self.probe(c, first, rep)?;
        // Only a window at least half as long again tells more than the one before; a sample
        // with errors over 1% (requests that timed out, after every connection settled) missed
        // the bound whatever the window, and one that failed has nothing to lengthen.
        if sample.ok
            && first == ms
            && (sample.p99_lower_bound || self.too_short(&sample, ms))
            && ten_cycles >= ms + ms / 2
            && !starves
        {
            self.why = "a longer window (the short one cut cycles off)";
            sample = self.probe(c, ten_cycles, rep)?;
        }
        self.samples
            .0
            .entry((c, ms))
            .or_default()
            .push(sample.clone());
        Some(sample)
    }

    /// Whether a window held fewer than two of the candidate's own cycles (N over its
    /// throughput): a server much slower than the bound needs a longer window for whole
    /// cycles of every connection. (Three of the bound's cycles open the search; a server
    /// near the bound is not measured again for missing it by a little.)
    fn too_short(&self, sample: &Sample, window_ms: u32) -> bool {
        sample.ok
            && sample.rps > 0.0
            && f64::from(window_ms)
                < OWN_CYCLES * f64::from(self.cell.concurrency) / sample.rps * 1000.0
    }

    /// One measurement, asked of the source once (a lengthened window may be one a later
    /// round asks for).
    fn probe(&mut self, candidate: Candidate, duration_ms: u32, rep: u32) -> Option<Sample> {
        let probe = Probe {
            candidate,
            duration_ms,
            rep,
        };
        if let Some(sample) = self.asked.get(&probe) {
            return Some(sample.clone());
        }
        self.m.why(self.why);
        let sample = self.m.measure(&probe)?;
        self.asked.insert(probe, sample.clone());
        Some(sample)
    }

    fn level(&self, c: Candidate) -> Level {
        level_of(self.samples.longest(c), self.cell.p99_bound_us)
    }

    fn level_at(&self, c: Candidate, ms: u32) -> Level {
        level_of(self.samples.at(c, ms), self.cell.p99_bound_us)
    }

    /// Sorts by throughput that counts, best first.
    fn sort(&self, cs: &mut [Candidate]) {
        cs.sort_by(|a, b| self.level(*b).rps.0.total_cmp(&self.level(*a).rps.0));
    }

    /// The ranking of `cs` by their levels, as indices into `cs`.
    fn rank(&self, cs: &[Candidate]) -> Option<crate::search::rank::Ranking> {
        rank_with(
            &cs.iter().map(|c| self.level(*c)).collect::<Vec<_>>(),
            self.cell.p99_tolerance(),
        )
    }

    /// Successive halving: every candidate, the better half kept (and any indistinguishable
    /// from the leader), runs doubled; stops after `rounds`, at two candidates, or once the
    /// leader is within its spread of the physical bound. The first round stops at the first
    /// candidate beyond reach of the rest ([`Search::beyond_reach`]). Returns the finalists,
    /// the rounds run and the final run length.
    fn halving(&mut self) -> Option<(Vec<Candidate>, u32, u32)> {
        let mut alive = self.cell.starting_candidates();
        // The highest own bound first, so that those that cannot reach it are seen to be;
        // among equal bounds the leanest shape first.
        let cell = self.cell;
        alive.sort_by_key(|c| cell.footprint(*c));
        alive.sort_by(|a, b| {
            cell.candidate_bound_rps(*b)
                .total_cmp(&cell.candidate_bound_rps(*a))
        });

        self.budget_order(&mut alive);
        let mut ms = if self.cell.contests_long() {
            self.cell.contest_window_ms()
        } else {
            self.cell.first_window_ms()
        };
        let mut rounds = 0;
        loop {
            rounds += 1;
            for (i, c) in alive.clone().into_iter().enumerate() {
                if rounds == 1 && self.is_outclassed(c) {
                    self.outclassed.push(c);
                    continue;
                }
                if rounds == 1 && self.is_predicted_out(c) {
                    self.predicted_out.push(c);
                    continue;
                }
                // (One point kept for the leader's confirmation, where runs are short.)
                if rounds == 1 && self.is_over_budget(c) {
                    self.over_budget.push(c);
                    continue;
                }
                self.why = self.first_round_why(c, rounds);
                self.run(c, ms, 0)?;
                if rounds == 1 && self.beyond_reach(c) {
                    self.beyond = Some(c);
                    self.unneeded = alive[i + 1..].to_vec();
                    return Some((vec![c], rounds, ms));
                }
            }
            // A model that missed a point of this cell beyond its interval decides nothing
            // here: what it left out is measured after all.
            if rounds == 1 && !self.model_holds() {
                let mut left: Vec<Candidate> = std::mem::take(&mut self.predicted_out);
                left.append(&mut self.over_budget);
                self.budget_order(&mut left);
                for c in left {
                    if self.can_spend(1 + self.kept_to_confirm()) {
                        self.why = "the model missed a point of this cell";
                        self.run(c, ms, 0)?;
                    } else {
                        self.over_budget.push(c);
                    }
                }
            }
            if rounds == 1 {
                self.until_decided(ms)?;
            }
            alive.retain(|c| {
                !self.outclassed.contains(c)
                    && !self.predicted_out.contains(c)
                    && !self.over_budget.contains(c)
            });
            self.sort(&mut alive);
            let leader = self.level(alive[0]).rps;
            let keep = alive.len().div_ceil(2);
            let mut next = alive.clone();
            let rest = next.split_off(keep);
            next.extend(
                rest.into_iter()
                    .filter(|c| leader.0 > 0.0 && indistinguishable(leader, self.level(*c).rps)),
            );
            // Nothing more to learn from longer runs: the leader is at the bound, or every
            // candidate kept is already indistinguishable from it.
            let settled = self.at_bound(alive[0])
                || next
                    .iter()
                    .all(|c| indistinguishable(leader, self.level(*c).rps));
            // A budget with no room for a round of the kept and a confirmation ends it here.
            let spent = !self.can_spend(next.len() + 1);
            if rounds >= self.cell.rounds || alive.len() <= 2 || settled || spent {
                self.second_runs(&mut alive, ms)?;
                return Some((alive, rounds, ms));
            }
            alive = next;
            ms = window_ms(f64::from(ms) * 2.0);
        }
    }

    /// Whether the cell's budget leaves room for `more` points beyond those measured (always,
    /// without a budget).
    fn can_spend(&self, more: usize) -> bool {
        self.allowance()
            .is_none_or(|a| self.asked.len() + more <= a)
    }

    /// The cell's allowance, up to twice over where the model missed a point of it beyond
    /// its interval (its ranking is then in doubt), as far as the run's spare points go
    /// ([`Cell::spare`]: the cells after keep their share). None beyond them: in map-wide
    /// one point at least on every miss carried a run to 198 of its 191 points.
    fn allowance(&self) -> Option<usize> {
        let a = self.cell.allowance?;
        Some(if self.model_holds() {
            a
        } else {
            a + a.min(self.cell.spare)
        })
    }

    /// Whether a candidate the model predicted is one the budget leaves out: the first of
    /// them is always measured (the model's leader, to check it), the rest while a point is
    /// left (beside the confirmation, where runs are short).
    fn is_over_budget(&self, c: Candidate) -> bool {
        self.cell.predicted(c).is_some()
            && self.model_checked()
            && !self.can_spend(1 + self.kept_to_confirm())
    }

    /// The points a budget keeps for the confirmation of a verdict in long runs: none where
    /// the runs are long already ([`Cell::contests_long`]), else one.
    fn kept_to_confirm(&self) -> usize {
        usize::from(!self.cell.contests_long())
    }

    /// Whether a candidate the model predicted was measured in this cell already (its
    /// leader, checked).
    fn model_checked(&self) -> bool {
        self.samples
            .0
            .keys()
            .any(|(k, _)| self.cell.predicted(*k).is_some())
    }

    /// Under a budget, the first round runs the model's leader first, then the candidates
    /// the model does not know (it cannot predict them; measured whatever the budget, unless
    /// their own bound ([`Cell::candidate_bound_rps`]) lies clearly under the most predicted:
    /// those come in the model's order by that bound, where what was measured before them
    /// outclasses them), then the rest in the order of their predicted throughput, so that
    /// what the budget leaves out is what the model ranks lowest. The leader is ranked as the
    /// search ranks: of those predicted within [`TIE_FRACTION`] of the most throughput, the
    /// most throughput among those whose predicted p99 is within the cell's tolerance of the
    /// lowest. Those predicted to miss the p99 bound ([`Cell::predicted_to_miss_the_bound`])
    /// come last: their throughput would not count.
    fn budget_order(&self, alive: &mut [Candidate]) {
        if self.cell.allowance.is_none() {
            return;
        }
        let predicted = |c: &Candidate| self.cell.predicted(*c).map(|p| p.prediction.rps);
        let misses = |c: &Candidate| self.cell.predicted_to_miss_the_bound(*c);
        let top = alive
            .iter()
            .filter(|c| !misses(c))
            .filter_map(predicted)
            .fold(0.0, f64::max);
        let p99 = |c: &Candidate| {
            self.cell
                .predicted(*c)
                .map(|p| p.p99.us)
                .filter(|us| *us > 0.0)
                .unwrap_or(f64::INFINITY)
        };
        let close: Vec<Candidate> = alive
            .iter()
            .filter(|c| !misses(c))
            .filter(|c| predicted(c).is_some_and(|r| r >= top * (1.0 - TIE_FRACTION)))
            .copied()
            .collect();
        let lowest = close.iter().map(p99).fold(f64::INFINITY, f64::min);
        let tolerance = self.cell.p99_tolerance();
        let leader = close
            .into_iter()
            .filter(|c| tolerance.allows(p99(c), lowest))
            .max_by(|a, b| {
                predicted(a)
                    .unwrap_or(0.0)
                    .total_cmp(&predicted(b).unwrap_or(0.0))
            });
        // An unknown candidate whose own bound lies clearly under the most predicted takes
        // its place by that bound: measured after those the model ranks above it, it is
        // outclassed by the first of them that measures above it (poll and epoll, a thread
        // each, at 3,200 req/s with blocking waits of 200 us over 256 connections, took both
        // points of a cell the model led at 37,000, and the three servers within 10% of the
        // pick went unmeasured).
        let own_bound = |c: &Candidate| {
            let b = self.cell.candidate_bound_rps(*c);
            (b < top * (1.0 - TIE_FRACTION)).then_some(b)
        };
        let key = |c: &Candidate| {
            if Some(*c) == leader {
                f64::INFINITY
            } else {
                predicted(c).or_else(|| own_bound(c)).unwrap_or(f64::MAX)
            }
        };
        alive.sort_by(|a, b| {
            misses(a)
                .cmp(&misses(b))
                .then_with(|| key(b).total_cmp(&key(a)))
        });
    }

    /// Under a budget, where the first round did not decide: what the budget left out is
    /// measured in the model's order, past the allowance (until [`CELL_UNDER`] measured
    /// under their intervals), while nothing measured met the p99
    /// bound (the model's leaders starved their connections, say) or the candidate's interval
    /// lies wholly above the best measured (the model's leader measured below it: the model
    /// says the one left out would beat every one measured, so either it does or the model is
    /// wrong about the cell). A cell has a winner wherever one was there to find, and no
    /// candidate the model ranks clearly above the pick is left out. `None`: interrupted.
    fn until_decided(&mut self, ms: u32) -> Option<()> {
        let mut left = std::mem::take(&mut self.over_budget);
        self.budget_order(&mut left);
        while !left.is_empty() {
            // A kind of server not measured in the cell yet first (the model's order within
            // each): where the model misses a cell, it misses it by kind (at map-quick's 10 ms
            // waits on 16 connections the event loops ran 20% under it, hybrid/2 on it).
            let measured = self.kinds_measured();
            let next = left
                .iter()
                .position(|c| !measured.contains(&c.arch.holding()))
                .unwrap_or(0);
            let c = left.remove(next);
            let best = self.best_measured();
            // (A candidate predicted to miss the p99 bound would not count, however fast.)
            let above = self.cell.predicted(c).is_some_and(|p| p.low > best)
                && !self.cell.predicted_to_miss_the_bound(c);
            // Three kinds measured under their intervals: the whole cell runs slower than the
            // model says (the machine busy, or a term it lacks), not its leader alone; its
            // order of the rest is as good as a measurement of them.
            if best > 0.0 && (!above || self.measured_under() >= CELL_UNDER) {
                self.over_budget.push(c);
                continue;
            }
            self.why = if best > 0.0 {
                "its interval is above every one measured"
            } else {
                "nothing measured met the p99 bound"
            };
            self.run(c, ms, 0)?;
        }
        let mut left_out = std::mem::take(&mut self.over_budget);
        self.budget_order(&mut left_out);
        self.over_budget = left_out;
        Some(())
    }

    /// How many kinds of server ([`crate::arch::Holding`]) the model predicted measured under
    /// their intervals in this cell.
    fn measured_under(&self) -> usize {
        let mut kinds: Vec<crate::arch::Holding> = Vec::new();
        for k in self.measured_candidates() {
            let under = self
                .cell
                .predicted(k)
                .is_some_and(|p| mean_rps(self.samples.longest(k)) < p.low);
            if under && !kinds.contains(&k.arch.holding()) {
                kinds.push(k.arch.holding());
            }
        }
        kinds.len()
    }

    /// The kinds of server measured in this cell.
    fn kinds_measured(&self) -> Vec<crate::arch::Holding> {
        self.measured_candidates()
            .into_iter()
            .map(|k| k.arch.holding())
            .collect()
    }

    fn measured_candidates(&self) -> Vec<Candidate> {
        let mut seen: Vec<Candidate> = self.samples.0.keys().map(|(k, _)| *k).collect();
        seen.dedup();
        seen
    }

    /// Why a candidate of a halving round is measured.
    fn first_round_why(&self, c: Candidate, round: u32) -> &'static str {
        let measured_predicted = self.model_checked();
        match (round, self.cell.predicted(c)) {
            (2.., _) => "a halving round",
            (_, None) if self.cell.forecast.is_empty() => "the first round",
            (_, None) => "the model does not know it yet",
            (_, Some(_)) if !measured_predicted => "the model's leader",
            (_, Some(_)) => "its interval reaches the leader's",
        }
    }

    /// Whether a candidate cannot reach what another already did: its own bound (one thread,
    /// or its pool, waiting on a blocking wait) is clearly below the best measured throughput
    /// that met the p99 bound. Measuring it would not change the verdict.
    fn is_outclassed(&self, c: Candidate) -> bool {
        let best = self
            .best_measured()
            // A measurement may pass the cell's bound by its noise; the bound is what counts.
            .min(self.cell.bound_rps());
        self.cell.candidate_bound_rps(c) < best * (1.0 - TIE_FRACTION)
    }

    /// The most throughput measured in the cell so far that met the p99 bound.
    fn best_measured(&self) -> f64 {
        self.samples
            .0
            .keys()
            .map(|(k, _)| self.level(*k).rps.0)
            .fold(0.0, f64::max)
    }

    /// Whether the model says `c` cannot reach what another already did: its interval's top
    /// is clearly under the best measured throughput that met the p99 bound (by more than
    /// [`TIE_FRACTION`], within which a leaner candidate could still win on its p99 or its
    /// costs), and the model held on every candidate of this cell measured so far
    /// ([`Search::model_holds`]).
    fn is_predicted_out(&self, c: Candidate) -> bool {
        let Some(p) = self.cell.predicted(c) else {
            return false;
        };
        let best = self.best_measured();
        best > 0.0 && p.high < best * (1.0 - TIE_FRACTION) && self.model_holds()
    }

    /// Whether every candidate of this cell measured so far that the model predicted was
    /// measured inside its interval (its mean throughput, whether or not its p99 met the
    /// bound).
    fn model_holds(&self) -> bool {
        self.samples.0.keys().all(|(k, _)| {
            self.cell
                .predicted(*k)
                .is_none_or(|p| p.holds(mean_rps(self.samples.longest(*k))))
        })
    }

    /// Whether nothing left to measure could beat `c` by a figure the ranking tells apart:
    /// its throughput reached the cell's bound (none passes it), its p99 is within
    /// [`P99_TOLERANCE`] (or the machine's jitter) of the floor a closed loop at the bound
    /// allows (Little's law), and
    /// its CPU per request and memory are within their tolerances of the least measured
    /// in the cell, where a single-threaded server, the leanest shape there is, was measured.
    /// Candidates run leanest first, so the first to pass is also the cheapest.
    fn beyond_reach(&self, c: Candidate) -> bool {
        let l = self.level(c);
        let p99_tolerance = Tolerance {
            fraction: P99_TOLERANCE,
            floor: self.cell.p99_jitter_us,
        };
        if !self.at_bound(c) || !p99_tolerance.allows(l.p99_us, self.cell.latency_floor_us()) {
            return false;
        }
        let measured: Vec<(Candidate, Level)> = self
            .samples
            .0
            .keys()
            .map(|(k, _)| (*k, self.level(*k)))
            .collect();
        if !measured.iter().any(|(k, _)| k.arch.single_threaded()) {
            return false;
        }
        let least = |f: fn(&Level) -> f64| {
            measured
                .iter()
                .map(|(_, l)| f(l))
                .filter(|v| *v > 0.0)
                .fold(f64::INFINITY, f64::min)
        };
        // An unmeasured figure (0) cannot tell candidates apart in the ranking either.
        let within = |v: f64, least: f64, tolerance: f64| v <= least * (1.0 + tolerance);
        (l.cpu_us <= 0.0 || within(l.cpu_us, least(|l| l.cpu_us), CPU_TOLERANCE))
            && (l.rss_kb <= 0.0 || within(l.rss_kb, least(|l| l.rss_kb), MEMORY_TOLERANCE))
    }

    /// Whether a candidate's throughput reached what the machine allows ([`Cell::reach_rps`])
    /// within [`AT_BOUND_FRACTION`].
    fn at_bound(&self, c: Candidate) -> bool {
        let l = self.level(c).rps;
        l.0 > 0.0 && l.2.max(l.0) >= self.cell.reach_rps() * (1.0 - AT_BOUND_FRACTION)
    }

    /// The candidates whose verdict against `winner` a longer run could turn
    /// ([`CONTESTED_FRACTION`]), closest first. `top` (the field's most throughput) draws the
    /// line of the contenders, [`TIE_FRACTION`] under it: in question are those under the line
    /// by at most [`CONTESTED_FRACTION`] that would beat the winner on cost at equal throughput
    /// (all three of hybrid/2, uring/2 and reactors/2 within 6% at 64 connections and 1 ms: a
    /// 300 ms run put hybrid/2, the lowest p99, 5.6% under uring/2, where 3 s runs put it 4.9%
    /// under), and, where the winner is the top, any other architecture as close (short runs put
    /// prethreaded/8 6% over hybrid/2 where 3 s runs put hybrid/2 6% over prethreaded/8, 500 us
    /// and 5 ms at 8 connections). The top, when it is not the winner, is in question with
    /// them, and alone when it leads the winner by within [`EDGE_FRACTION`] of a clear lead.
    fn contesters(&self, winner: Candidate, top: Candidate) -> Vec<Candidate> {
        let (w, t) = (self.level(winner), self.level(top));
        if w.rps.0 <= 0.0 || t.rps.0 <= 0.0 {
            return Vec::new();
        }
        let mut out: Vec<(f64, Candidate)> = Vec::new();
        for c in self.samples.0.keys().map(|(c, _)| *c) {
            let l = self.level(c);
            if c == winner || c == top || l.rps.0 <= 0.0 || out.iter().any(|(_, o)| *o == c) {
                continue;
            }
            let gap = (l.rps.0 - t.rps.0) / t.rps.0;
            let cheaper = {
                let tied = Level { rps: w.rps, ..l };
                rank_with(&[w, tied], self.cell.p99_tolerance())
                    .is_some_and(|r| r.winner == 1 && r.ties.is_empty())
            };
            if (cheaper || (winner == top && c.arch != winner.arch))
                && !indistinguishable(t.rps, l.rps)
                && gap >= -CONTESTED_FRACTION
            {
                out.push((gap.abs(), c));
            }
        }
        out.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut out: Vec<Candidate> = out.into_iter().take(CONTESTERS).map(|(_, c)| c).collect();
        if let Some(pool) = self.default_pool(winner, t.rps) {
            if !out.contains(&pool) {
                out.push(pool);
            }
        }
        // (A larger pool of the winner's own architecture this close is its plateau: the pool
        // search already took the smallest as good.)
        let lead = (t.rps.0 - w.rps.0) / w.rps.0;
        let near_lead = top.arch != winner.arch && lead > TIE_FRACTION - EDGE_FRACTION;
        if top != winner && (!out.is_empty() || near_lead) {
            out.insert(0, top);
        }
        out
    }

    /// The winner's architecture at its default pool, when the winner's pool is larger and the
    /// default's own bound could tie it, and it was not measured clearly out of contention
    /// (more than [`CONTESTED_FRACTION`] under the contenders' line drawn from `top`): a pool
    /// other than the default is recommended only where it beats the default in long runs
    /// ([`Search::over_default`]). Short windows part pools that long ones tie (300 ms runs
    /// put uring/3 7% over uring/2, 3 s ones 3.4%, at 50 us and 5 ms over 1,000 connections;
    /// uring/2 then won on memory by 25.1% against a 25% tolerance).
    fn default_pool(&self, winner: Candidate, top: (f64, f64, f64)) -> Option<Candidate> {
        let default = Candidate {
            arch: winner.arch,
            workers: Some(self.cell.default_pool(winner.arch)),
        };
        let w = self.level(winner).rps.0;
        let measured = self.level(default).rps;
        (winner.workers > default.workers
            && self.cell.candidate_bound_rps(default) >= w * (1.0 - TIE_FRACTION)
            && (measured.0 <= 0.0 || (measured.0 - top.0) / top.0 >= -CONTESTED_FRACTION))
            .then_some(default)
    }

    /// Of `pool` and its architecture's `default` pool, both run long, the one to recommend:
    /// `pool` only where it leads the default by more than [`TIE_FRACTION`] and, beyond it,
    /// more than the two runs' own spread (at least [`EDGE_FRACTION`]): a lead further runs
    /// will not read as a tie. Two 3 s runs of uring/2 read 27,922 and 28,788 req/s, and two
    /// more 28,627 and 29,646, so uring/4's 7.6% lead over the first two was 2.6% over the
    /// next (50 us and 5 ms at 1,000 connections). Or `pool` where it costs less at equal
    /// throughput; the default otherwise.
    fn over_default(&self, pool: Candidate, default: Candidate) -> Candidate {
        let (p, d) = (self.level(pool), self.level(default));
        if p.rps.0 <= 0.0 || d.rps.0 <= 0.0 {
            return if p.rps.0 > 0.0 { pool } else { default };
        }
        let width = |l: &Level| l.rps.2 - l.rps.1;
        let beyond = (EDGE_FRACTION * d.rps.0).max(width(&p) + width(&d));
        let clear_lead =
            p.rps.0 - d.rps.0 > TIE_FRACTION * d.rps.0 + beyond && !indistinguishable(p.rps, d.rps);
        let tied = Level { rps: p.rps, ..d };
        let cheaper = rank_with(&[p, tied], self.cell.p99_tolerance())
            .is_some_and(|r| r.winner == 0 && r.ties.is_empty());
        if clear_lead || cheaper {
            pool
        } else {
            default
        }
    }

    /// A close verdict confirmed: the winner and its [`Search::contesters`] run once more in
    /// the window verification uses ([`Cell::full_window_ms`]; a 1.5 s one still put uring/3
    /// 5.7% over uring/2 where 3 s ones put them within 5%), twice where one run each leaves it
    /// contested, and ranked again among themselves on those runs, never against the rest's
    /// shorter ones. Short windows order close servers wrongly more often than they misread
    /// their throughput.
    fn confirm(
        &mut self,
        mut field: Vec<Candidate>,
        ranking: crate::search::rank::Ranking,
        final_ms: u32,
    ) -> Option<(Vec<Candidate>, crate::search::rank::Ranking)> {
        let winner = field[ranking.winner];
        // Long runs already: ranked among themselves, nothing to confirm.
        if self.cell.contests_long() {
            return Some((field, ranking));
        }
        let contesters = self.in_question(winner, &field);
        if contesters.is_empty() || self.beyond.is_some() {
            return Some((field, ranking));
        }
        let ms = self.cell.full_window_ms().max(final_ms * 2);
        let before = field.clone();
        self.why = "to confirm a close verdict in a long run";
        for c in std::iter::once(winner).chain(contesters.iter().copied()) {
            self.run(c, ms, 0)?;
        }
        // Still contested after one longer run each (one run's noise is a few %): a second
        // run of each still in question, whose spread then counts as well.
        let mut all = field.clone();
        all.extend(contesters.iter().copied());
        let still: Vec<Candidate> = self
            .contesters(winner, self.top(&all))
            .into_iter()
            .filter(|c| contesters.contains(c))
            .collect();
        if !still.is_empty() && self.can_spend(1 + still.len()) {
            for c in std::iter::once(winner).chain(still) {
                self.run(c, ms, 1)?;
            }
        }
        // The winner's own pools first, as the knob search chooses: of those as good as their
        // best, the smallest. Then the field, each architecture once, ranked again.
        let mut pools = vec![winner];
        pools.extend(contesters.iter().filter(|c| c.arch == winner.arch));
        if let Some(r) = self.rank(&pools) {
            let pool = std::iter::once(r.winner)
                .chain(r.ties)
                .map(|i| pools[i])
                .min_by_key(|c| c.workers)
                .expect("the winner is there");
            let default = Candidate {
                arch: winner.arch,
                workers: Some(self.cell.default_pool(winner.arch)),
            };
            field[ranking.winner] = if contesters.contains(&default) && pool != default {
                self.over_default(pool, default)
            } else {
                pool
            };
        }
        for c in contesters.iter().filter(|c| c.arch != winner.arch) {
            if !field.contains(c) {
                field.push(*c);
            }
        }
        // The verdict again among the runs of the same length only: the winner and those in
        // question, in the long window. The rest of the field lost to the winner in the short
        // one, and their short runs are not ranked against long ones.
        let long: Vec<Candidate> = field
            .iter()
            .copied()
            .filter(|c| self.samples.longest_ms(*c) == Some(ms))
            .collect();
        // None of them met the bound as measured last: the verdict stands as it was (the rows
        // show the runs).
        match self.rank(&long) {
            Some(r) => Some((long, r)),
            None => Some((before, ranking)),
        }
    }

    /// The candidates a close verdict for `winner` is confirmed against in long runs: its
    /// [`Search::contesters`], as many as the budget leaves room for beside the winner, and in
    /// a cell the model could not predict its closest rival ([`Search::closest_rival`])
    /// whatever the budget.
    fn in_question(&self, winner: Candidate, field: &[Candidate]) -> Vec<Candidate> {
        let mut contesters = self.contesters(winner, self.top(field));
        // A cell the model could not predict, under a budget, measured its whole field in short
        // runs: its verdict is confirmed against the closest architecture whatever the budget
        // and the gap (the cells after share what is left). In map-wide's first cells, 300 ms
        // runs put uring/2 ahead on its CPU among a throughput tie where 3 s runs put it 7%
        // under threaded, prethreaded/16 ahead where 3 s runs put it 15% under uring/2, and
        // hybrid/2 31% ahead at 37,783 req/s where 3 s runs read it at 27,575.
        let unpredicted = self.cell.allowance.is_some() && !self.cell.contests_long();
        if let Some(rival) = self.closest_rival(winner, field).filter(|_| unpredicted) {
            contesters.retain(|c| *c != rival);
            contesters.insert(0, rival);
        }
        // Under a budget, as many of those in question as it leaves room for beside the winner.
        while contesters.len() > usize::from(unpredicted) && !self.can_spend(1 + contesters.len()) {
            contesters.pop();
        }
        contesters
    }

    /// The candidate of another architecture than `winner`'s with the most throughput that
    /// counts in `field`.
    fn closest_rival(&self, winner: Candidate, field: &[Candidate]) -> Option<Candidate> {
        field
            .iter()
            .copied()
            .filter(|c| c.arch != winner.arch && self.level(*c).rps.0 > 0.0)
            .max_by(|a, b| self.level(*a).rps.0.total_cmp(&self.level(*b).rps.0))
    }

    /// The candidate of `cs` with the most throughput that counts.
    fn top(&self, cs: &[Candidate]) -> Candidate {
        *cs.iter()
            .max_by(|a, b| self.level(**a).rps.0.total_cmp(&self.level(**b).rps.0))
            .expect("a ranked field is not empty")
    }

    /// A second run of the leader and of the few closest to it (within 10%), for their
    /// spread and their costs.
    fn second_runs(&mut self, alive: &mut [Candidate], ms: u32) -> Option<()> {
        if alive.is_empty() {
            return Some(());
        }
        let top = self.level(alive[0]).rps.0;
        let close: Vec<Candidate> = alive
            .iter()
            .copied()
            .filter(|c| top > 0.0 && self.level(*c).rps.0 >= top * 0.9)
            .take(SECOND_RUNS)
            .collect();
        self.why = "a second run of the closest";
        for c in close {
            if self.can_spend(1 + self.kept_to_confirm()) {
                self.run(c, ms, 1)?;
            }
        }
        self.sort(alive);
        Some(())
    }
}

/// The mean throughput of some samples, whether or not their p99s met the bound.
fn mean_rps(samples: &[Sample]) -> f64 {
    samples.iter().map(|s| s.rps).sum::<f64>() / samples.len().max(1) as f64
}

/// Runs the search of one cell. `None` when interrupted.
pub fn search(cell: &Cell, m: &mut dyn Measure<Probe>) -> Option<Outcome> {
    if let Some(reason) = cell.infeasible() {
        return Some(no_winner(cell, 0, 0, Some(reason), Vec::new()));
    }
    let mut s = Search {
        cell,
        m,
        samples: Samples::default(),
        asked: BTreeMap::new(),
        outclassed: Vec::new(),
        beyond: None,
        unneeded: Vec::new(),
        predicted_out: Vec::new(),
        over_budget: Vec::new(),
        why: "the first round",
    };
    if cell.starting_candidates().is_empty() {
        return Some(no_winner(cell, 0, 0, None, Vec::new()));
    }
    let (finalists, rounds, final_ms) = s.halving()?;
    let Some(first) = s.rank(&finalists) else {
        let rows = rows(&s, &finalists);
        let mut out = no_winner(cell, rounds, final_ms, None, rows);
        out.outclassed = labels(&s.outclassed);
        out.predicted_out = labels(&s.predicted_out);
        out.over_budget = labels(&s.over_budget);
        out.predictions = prediction_rows(&s);
        return Some(out);
    };
    // The verdict among the finalists, each pooled one at its own pool: whenever a pooled
    // architecture whose pool was not searched yet leads, its pool is searched and the field
    // ranked again.
    let mut field = finalists.clone();
    let mut ranking = first;
    let mut searched = Vec::new();
    loop {
        let leader = field[ranking.winner];
        // A pick beyond reach needs no pool search either: no pool of it can pass it.
        if !leader.arch.pooled()
            || leader.arch.holds_connections()
            || searched.contains(&leader.arch)
            || s.beyond.is_some()
        {
            break;
        }
        searched.push(leader.arch);
        let pool = pool_search(&mut s, leader.arch, final_ms)?;
        field[ranking.winner] = Candidate {
            arch: leader.arch,
            workers: Some(pool),
        };
        ranking = s.rank(&field)?;
    }
    let (field, ranking) = s.confirm(field, ranking, final_ms)?;
    let winner = field[ranking.winner];
    let level = s.level(winner);
    let runner_up = field
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != ranking.winner)
        .map(|(_, c)| *c)
        .max_by(|a, b| s.level(*a).rps.0.total_cmp(&s.level(*b).rps.0))
        .filter(|c| s.level(*c).rps.0 > 0.0);
    let rules = measure_rules(&mut s, winner, final_ms, level.rps.0)?;
    let tied: Vec<Candidate> = ranking.ties.iter().map(|&i| field[i]).collect();
    // Every candidate measured in the halving and for the verdict, then the rules' pools.
    let mut shown = vec![winner];
    shown.extend(field.iter().copied());
    shown.extend(cell.starting_candidates());
    shown.extend(rules_candidates(cell, winner));
    Some(Outcome {
        winner: Some(winner),
        rps: level.rps.0,
        p99_us: level.p99_us,
        ties: labels(&tied),
        decided_by: if s.beyond.is_some() {
            Some(Figure::Bound)
        } else {
            ranking.decided_by
        },
        runner_up: runner_up.map(|c| c.label()),
        margin: runner_up.map(|r| (level.rps.0 - s.level(r).rps.0) / level.rps.0),
        rules,
        rounds,
        final_ms,
        bound_rps: cell.bound_rps(),
        infeasible: None,
        candidates: rows(&s, &shown),
        starving: labels(&cell.starving()),
        outclassed: labels(&s.outclassed),
        unneeded: labels(&s.unneeded),
        predicted_out: labels(&s.predicted_out),
        over_budget: labels(&s.over_budget),
        allowance: cell.allowance,
        predictions: prediction_rows(&s),
        decisions: decisions(&s, final_ms, &field, winner, &tied, &shown),
    })
}

/// The rules' pools on the winner's architecture.
fn rules_candidates(cell: &Cell, winner: Candidate) -> Vec<Candidate> {
    if !winner.arch.pooled() {
        return Vec::new();
    }
    cell.rules
        .iter()
        .map(|(_, w)| Candidate {
            arch: winner.arch,
            workers: Some((*w).clamp(1, cell.pool_cap())),
        })
        .collect()
}

/// Measures each rule's pool on the winner's architecture (where not measured yet) and what
/// it loses against the winner's `best` throughput. A rule's pool not yet measured whose own
/// bound ([`Cell::candidate_bound_rps`]) is clearly under `best` is not measured, as the
/// halving leaves such a candidate out: its throughput is at most that bound, and it loses at
/// least the difference (two threads waiting 100 ms at a time serve at most 20 requests a
/// second, where the sweet spot served 1,790).
fn measure_rules(
    s: &mut Search,
    winner: Candidate,
    ms: u32,
    best: f64,
) -> Option<Vec<RuleOutcome>> {
    let mut rules = Vec::new();
    let names: Vec<String> = s.cell.rules.iter().map(|(n, _)| n.clone()).collect();
    for (rule, c) in names.into_iter().zip(rules_candidates(s.cell, winner)) {
        if s.samples.at(c, ms).is_empty() {
            // Under a budget, the model's figure stands for a rule's pool whether or not it
            // held on the cell: the rows say which figures were predicted.
            let trusted = s.model_holds() || s.cell.allowance.is_some();
            if let Some(p) = s.cell.predicted(c).filter(|_| trusted) {
                let rps = p.prediction.rps;
                rules.push(RuleOutcome {
                    rule,
                    workers: c.workers.unwrap_or(0),
                    rps,
                    p99_us: 0.0,
                    meets_bound: true,
                    rps_loss: (best - rps) / best,
                    missed_because: None,
                    measured: false,
                    limit: None,
                    predicted: Some((p.low, p.high)),
                });
                continue;
            }
            let own_bound = s.cell.candidate_bound_rps(c);
            if own_bound < best * (1.0 - TIE_FRACTION) || !s.can_spend(1) {
                rules.push(RuleOutcome {
                    rule,
                    workers: c.workers.unwrap_or(0),
                    rps: own_bound,
                    p99_us: 0.0,
                    meets_bound: true,
                    rps_loss: (best - own_bound) / best,
                    missed_because: None,
                    measured: false,
                    limit: None,
                    predicted: None,
                });
                continue;
            }
            s.why = "a rule of thumb's pool";
            s.run(c, ms, 0)?;
        }
        let last = s.samples.at(c, ms).last().expect("measured").clone();
        let mean = s.level_at(c, ms).rps.0;
        let missed_because = Miss::of(s.samples.at(c, ms), s.cell.p99_bound_us)
            .map(|miss| miss.text(s.cell.p99_bound_us));
        rules.push(RuleOutcome {
            rule,
            workers: c.workers.unwrap_or(0),
            rps: last.rps,
            p99_us: last.p99_us,
            meets_bound: mean > 0.0,
            rps_loss: (best - mean) / best,
            missed_because,
            measured: true,
            limit: last.limit,
            predicted: None,
        });
    }
    Some(rules)
}

/// The winner architecture's pool: the model's ([`Cell::predicted_pool`]) where it holds, else
/// by the knob search ([`knob::search`]) over 1 to the cap, its own bound the candidate's
/// ([`Cell::candidate_bound_rps`]).
fn pool_search(s: &mut Search, arch: Arch, ms: u32) -> Option<u32> {
    // The model's pool, measured: it stands where the model held on it and on the cell.
    if let Some(w) = s.cell.predicted_pool(arch) {
        let c = Candidate {
            arch,
            workers: Some(w),
        };
        if s.samples.at(c, ms).is_empty() && s.can_spend(1 + s.kept_to_confirm()) {
            s.why = "the model's pool for the winner";
            s.run(c, ms, 0)?;
        }
        // Under a budget with no room for a search of pools, the model's pool stands, once
        // measured.
        let measured = !s.samples.at(c, ms).is_empty();
        if measured && (s.model_holds() || !s.can_spend(4)) {
            return Some(w);
        }
    }
    // No room for a search of pools: the pool the first round measured (the leader's).
    if !s.can_spend(4) {
        return s.cell.start_pool(arch);
    }
    let cap = s.cell.pool_cap();
    s.why = "the winner's pool";
    knob::search(&mut PoolCurve { s, arch, ms }, 1, cap)
}

/// An architecture's pools at one run length, as the knob search sees them.
struct PoolCurve<'s, 'a> {
    s: &'s mut Search<'a>,
    arch: Arch,
    ms: u32,
}

impl PoolCurve<'_, '_> {
    fn cand(&self, w: u32) -> Candidate {
        Candidate {
            arch: self.arch,
            workers: Some(w),
        }
    }
}

impl knob::Curve for PoolCurve<'_, '_> {
    fn level(&mut self, w: u32, reps: u32) -> Option<Level> {
        let c = self.cand(w);
        while (self.s.samples.at(c, self.ms).len() as u32) < reps {
            let rep = self.s.samples.at(c, self.ms).len() as u32;
            self.s.run(c, self.ms, rep)?;
        }
        Some(self.s.level_at(c, self.ms))
    }

    fn reps(&self, w: u32) -> u32 {
        self.s.samples.at(self.cand(w), self.ms).len() as u32
    }

    fn measured(&self) -> Vec<u32> {
        self.s
            .samples
            .0
            .keys()
            .filter(|(c, m)| c.arch == self.arch && *m == self.ms)
            .filter_map(|(c, _)| c.workers)
            .collect()
    }

    fn own_bound(&self, w: u32) -> f64 {
        self.s.cell.candidate_bound_rps(self.cand(w))
    }
}

#[cfg(test)]
mod tests;
