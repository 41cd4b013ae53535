//! A cell of the map as its search sees it: the [`Cell`] (architectures, connections, CPU and
//! wait per request, the bound) with its physical bounds and windows, and the [`Candidate`]s
//! and [`Probe`]s the search measures.

use serde::{Deserialize, Serialize};

use super::*;
use crate::arch::Arch;
use crate::model::fit::Predicted;
use crate::search::rank::{Tolerance, P99_TOLERANCE, P99_TOLERANCE_SATURATED};

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

impl Probe {
    /// Whether it is a verification's full measurement ([`super::VERIFY_REP`] and after), not
    /// the search's: never fitted by the model nor counted in a budget.
    pub fn verifies(&self) -> bool {
        self.rep >= super::VERIFY_REP
    }
}

/// One cell's question.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub archs: Vec<Arch>,
    pub concurrency: u32,
    /// The whole cores a server sizes itself for (its CPUs, or a quota rounded down): the
    /// default pools and the rules of thumb.
    pub cores: u32,
    /// The cores of CPU the server may use (a quota, `--cpus`, may be fractional): the bound.
    pub budget: f64,
    /// The server runs under a CFS quota: each window holds at least [`QUOTA_WINDOW_MS`].
    pub quota: bool,
    pub cpu_us: f64,
    pub wait_ms: f64,
    /// The wait blocks the thread that runs the request.
    pub blocking: bool,
    pub p99_bound_us: f64,
    /// The first round's run length at least; each round doubles it.
    pub base_ms: u32,
    /// At most this many rounds of halving.
    pub rounds: u32,
    /// The largest pool tried.
    pub max_pool: u32,
    /// Pool sizes measured beside the sweet spot (Goetz's, `2n+1`, the default), by name.
    pub rules: Vec<(String, u32)>,
    /// The round trip at one connection on this machine beyond the request's C, µs (0: not
    /// measured; see `map::run::round_trip`): what every cycle of a closed loop adds to
    /// `C + W`, whatever the server.
    pub round_trip_us: f64,
    /// How far the machine alone stretches a one-connection p99 beyond its median on the
    /// leanest server, µs (0: not measured; see `map::run::round_trip`): two p99s closer
    /// than this cannot be told apart here, however short they are.
    pub p99_jitter_us: f64,
    /// A network path's round trip between the clients and the server, µs (0: loopback):
    /// part of every cycle, so of the bound, `N / (C + W + RTT)`.
    pub path_rtt_us: f64,
    /// What the model of each server, fitted on the run's points so far, predicts of the
    /// candidates of this cell (empty: no model, every candidate is measured). The search
    /// leaves out those whose interval lies below what another measured, while the model
    /// holds in the cell ([`Search::model_holds`]).
    pub forecast: Vec<(Candidate, Predicted)>,
    /// The points this cell may measure under the run's budget (`None`: no budget): past it,
    /// the model's predictions stand for the candidates it knows.
    pub allowance: Option<usize>,
    /// Under a budget, the points beyond the allowance the run can give this cell where the
    /// model missed a point of it ([`PointBudget::spare`](crate::map::spec::PointBudget::spare)):
    /// up to the allowance again.
    pub spare: usize,
}

impl Cell {
    /// The model's prediction of a candidate, if it has one.
    pub fn predicted(&self, c: Candidate) -> Option<&Predicted> {
        self.forecast.iter().find(|(k, _)| *k == c).map(|(_, p)| p)
    }

    /// Whether the model predicts `c` misses the cell's p99 bound: its p99 interval lies
    /// wholly at or above it, which a candidate that missed the bound in every point at the
    /// cell's connection count is predicted to (`Predicted::with_p99_at_least`; a failed
    /// point's floor is the bound itself, so a lower end at the bound counts as a miss here,
    /// where `advise --predict`'s `meets_p99` reads it as met). Its throughput would not count.
    pub fn predicted_to_miss_the_bound(&self, c: Candidate) -> bool {
        self.predicted(c)
            .is_some_and(|p| p.p99.low > 0.0 && p.p99.low >= self.p99_bound_us)
    }

    /// The pool the model predicts best for a pooled architecture: the smallest of its
    /// predicted pools within [`TIE_FRACTION`] of its best ([`smallest_within_tie`]), never
    /// one that leaves connections without a worker where each holds one. `None`: no pool
    /// predicted, or none above 0.
    pub fn predicted_pool(&self, arch: Arch) -> Option<u32> {
        let serves_all =
            |w: u32| !arch.holds_connections() || w >= self.concurrency.min(self.pool_cap());
        let mine: Vec<(Candidate, Predicted)> = self
            .forecast
            .iter()
            .filter(|(c, _)| c.arch == arch && c.workers.is_some_and(serves_all))
            .copied()
            .collect();
        smallest_within_tie(&mine)
            .filter(|(_, p)| p.prediction.rps > 0.0)
            .and_then(|(c, _)| c.workers)
    }

    /// The rules of thumb's pools for `arch`: Goetz's, `2n+1` on the cell's cores, and the
    /// architecture's default there.
    pub fn rules_for(&self, arch: Arch) -> Vec<(String, u32)> {
        vec![
            ("goetz".into(), self.goetz()),
            ("2n+1".into(), 2 * self.cores + 1),
            (
                "default".into(),
                arch.default_workers(self.cores as usize).max(1) as u32,
            ),
        ]
    }

    /// Goetz's pool, `cores x (1 + W/C)`, rounded, within `1..=cap`.
    pub fn goetz(&self) -> u32 {
        let c = self.cpu_us.max(1.0) / 1000.0;
        let n = self.budget * (1.0 + self.wait_ms / c);
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

    /// The physical bound on throughput, requests a second: `min(cores / C, N / (C + W))`,
    /// the cores' capacity and the closed loop's (each connection has one request at a time;
    /// across a network path each cycle holds its round trip too).
    pub fn bound_rps(&self) -> f64 {
        let (cores, closed_loop) = self.capacities(0.0);
        cores.min(closed_loop)
    }

    /// The cores' capacity `cores / C` and the closed loop's `N / (C + W + extra)`, requests a
    /// second, with each cycle lengthened by `extra_us`.
    pub(super) fn capacities(&self, extra_us: f64) -> (f64, f64) {
        let c_s = self.cpu_us.max(1.0) / 1e6;
        let cycle_s = c_s + self.wait_ms / 1000.0 + (self.path_rtt_us + extra_us.max(0.0)) / 1e6;
        (self.budget / c_s, f64::from(self.concurrency) / cycle_s)
    }

    /// Whether the cores are what bounds the cell (`cores / C <= N / (C + W)`): every request
    /// queues for them, and its p99 is the queueing order of the moment.
    pub fn saturated(&self) -> bool {
        let (cores, closed_loop) = self.capacities(0.0);
        cores <= closed_loop
    }

    /// How far apart two p99s may be and still be as good, in this cell: a fraction of the
    /// lower, and never less than the machine's jitter.
    pub fn p99_tolerance(&self) -> Tolerance {
        Tolerance {
            fraction: if self.saturated() {
                P99_TOLERANCE_SATURATED
            } else {
                P99_TOLERANCE
            },
            floor: self.p99_jitter_us,
        }
    }

    /// What a closed loop can reach on this machine: the physical bound with each
    /// connection's cycle lengthened by the machine's round trip,
    /// `min(cores / C, N / (C + W + rt))`. A server at it is as fast as any can be here; at one
    /// connection and 1 ms of CPU the round trip alone keeps every server 5 to 9% under the
    /// bound.
    pub fn reach_rps(&self) -> f64 {
        // The round trip measured at one connection holds the path's already.
        let (cores, closed_loop) = self.capacities(self.round_trip_us - self.path_rtt_us);
        cores.min(closed_loop)
    }

    /// A candidate's own bound: with a blocking wait, only `P` threads can wait at once, which
    /// adds `P / (C + W)` (P: its pool, one a connection, or one thread for a single loop).
    /// Its threads run at most `min(P, cores) / C` requests a second on the cores, too (a
    /// single loop uses one core however many there are).
    pub fn candidate_bound_rps(&self, c: Candidate) -> f64 {
        let threads = self.threads_of(c);
        let c_s = self.cpu_us.max(1.0) / 1e6;
        let cores = self
            .bound_rps()
            .min(f64::from(threads).min(self.budget) / c_s);
        if !self.blocking {
            return cores;
        }
        let cycle_s = c_s + self.wait_ms / 1000.0;
        cores.min(f64::from(threads) / cycle_s)
    }

    /// Whether a candidate with a thread or process per connection keeps at least
    /// [`CROWDED_PER_CORE`] of them runnable per core (`N x C / (C + W)`): the scheduler then
    /// leaves some connection unanswered through a short window. Seen here in every such case
    /// of `map` (256 connections at W/C 0 and 1: forking, threaded, prethreaded/256 and
    /// preforked/256 each had a p99 that was a lower bound at three cycles), and in none with
    /// fewer (64 connections, or W/C 10).
    pub fn crowded(&self, c: Candidate) -> bool {
        let per_connection = match c.arch {
            a if a.spawns_per_connection() => c.workers.is_none(),
            a if a.holds_connections() => c.workers >= Some(self.concurrency),
            _ => false,
        };
        let runnable = f64::from(self.concurrency) * self.cpu_us
            / (self.cpu_us + self.wait_ms * 1000.0).max(1.0);
        per_connection && runnable >= CROWDED_PER_CORE * f64::from(self.cores)
    }

    /// The threads that run a candidate's requests (and wait in them, where waits block): its
    /// pool, one a connection, or one for a single loop.
    pub(super) fn threads_of(&self, c: Candidate) -> u32 {
        match c.workers {
            Some(w) => w,
            None if c.arch.spawns_per_connection() => self.concurrency,
            None => 1,
        }
    }

    /// What a candidate's shape costs before it is measured, processes then threads: the
    /// halving measures the leanest first, so that one reaching the bound early is also the
    /// cheapest there is ([`Search::beyond_reach`]).
    pub(super) fn footprint(&self, c: Candidate) -> (u32, u32) {
        let threads = self.threads_of(c);
        // A forking server's workers are children of a parent process.
        let processes = if c.arch.forks() { threads + 1 } else { 1 };
        (processes, threads)
    }

    /// The lowest latency a closed loop at its reach allows, in µs: one cycle (Little's law:
    /// N connections over [`Cell::reach_rps`]), no less than the request's own C + W and the
    /// round trip.
    pub fn latency_floor_us(&self) -> f64 {
        f64::from(self.concurrency) / self.reach_rps() * 1e6
    }

    /// One connection's cycle at the bound, in ms: its request's CPU and wait, or its turn
    /// behind every connection's CPU on the cores, whichever is longer (Little's law).
    pub fn cycle_ms(&self) -> f64 {
        f64::from(self.concurrency) / self.bound_rps() * 1000.0
    }

    /// The window of a full measurement, as verification runs it and a close verdict is
    /// confirmed in: [`VERIFY_MS`], or three cycles if longer.
    pub fn full_window_ms(&self) -> u32 {
        window_ms(f64::from(VERIFY_MS).max(FIRST_ROUND_CYCLES * self.cycle_ms()))
    }

    /// Whether the search measures straight in long runs ([`Cell::contest_window_ms`]): under
    /// a budget, where the model predicts the cell. Each point is then one long run of a
    /// candidate the model puts in the running, ranked only against long runs, where a short
    /// run of the model's leader and a long one to confirm it cost two points for one
    /// candidate. Short runs ordered close servers wrongly (async-u200-r0-c256 of map-wide:
    /// reactors/2 7,556 req/s in 300 ms ahead of hybrid/2, where 3 s runs read uring/2, not
    /// measured, 8,996 and reactors/2 8,066), and among the model's first three of the 10
    /// verified cells it predicted, the best of 3 s runs was within 5% of the cell's best in 9.
    pub fn contests_long(&self) -> bool {
        self.allowance.is_some() && !self.forecast.is_empty()
    }

    /// The window of a cell's long runs where it contests long ([`Cell::contests_long`]):
    /// [`CONTEST_MS`], or three cycles if longer. Shorter than verification's: map-wide's
    /// 150-odd long runs at 3 s took it to 11m37s here.
    pub fn contest_window_ms(&self) -> u32 {
        window_ms(f64::from(CONTEST_MS).max(FIRST_ROUND_CYCLES * self.cycle_ms()))
    }

    /// An architecture's default pool here (as `serve` starts it on this many cores), within
    /// the map's largest pool.
    pub fn default_pool(&self, arch: Arch) -> u32 {
        (arch.default_workers(self.cores as usize) as u32).clamp(1, self.max_pool)
    }

    /// The first round's run length: `base_ms`, or three cycles if longer.
    pub fn first_window_ms(&self) -> u32 {
        let floor = if self.quota { QUOTA_WINDOW_MS } else { 0.0 };
        window_ms(
            f64::from(self.base_ms)
                .max(FIRST_ROUND_CYCLES * self.cycle_ms())
                .max(floor),
        )
    }

    /// Why no server can meet the p99 bound in this cell, if none can: the mean latency of
    /// a closed loop is at least `N x C / cores` plus the wait (Little's law), and a p99 is
    /// no lower than the mean of a constant workload.
    pub fn infeasible(&self) -> Option<String> {
        let floor_us = f64::from(self.concurrency) * self.cpu_us / self.budget.max(0.01)
            + self.wait_ms * 1000.0;
        (floor_us > self.p99_bound_us).then(|| {
            format!(
                "no server can meet the p99 bound: {} connections x {} us of CPU on {} cores \
                 is a mean latency of at least {:.0} ms (Little's law)",
                self.concurrency,
                self.cpu_us,
                crate::lab::budget::cpus_text(self.budget),
                floor_us / 1000.0
            )
        })
    }

    /// The pool an architecture starts from: a pool whose workers each hold a connection for
    /// as long as it lives (preforked, prethreaded) at the cap, as keep-alive clients need; any
    /// other pool at Goetz's size where waits block its threads, else at a thread a core (its
    /// threads only run CPU work then; more only contend). `None` without a pool.
    pub fn start_pool(&self, arch: Arch) -> Option<u32> {
        arch.pooled().then(|| {
            if arch.holds_connections() {
                self.pool_cap()
            } else if self.blocking {
                self.goetz()
            } else {
                self.cores.clamp(1, self.pool_cap())
            }
        })
    }

    /// Each architecture at its starting pool.
    pub fn all_starting(&self) -> Vec<Candidate> {
        self.archs
            .iter()
            .map(|&arch| Candidate {
                arch,
                workers: self.start_pool(arch),
            })
            .collect()
    }

    /// The candidates the halving starts from: each architecture at its starting pool, but
    /// for those that starve connections by their shape ([`Cell::starving`]).
    pub fn starting_candidates(&self) -> Vec<Candidate> {
        self.all_starting()
            .into_iter()
            .filter(|c| !starves_by_shape(*c, self.concurrency))
            .collect()
    }

    /// The architectures left out of the search because they leave keep-alive connections
    /// unanswered by their shape, whatever the run (so their p99 is only a lower bound and
    /// never meets a bound): one thread serving one connection at a time to more than one,
    /// a pool of connection-holding workers capped below the connections.
    pub fn starving(&self) -> Vec<Candidate> {
        self.all_starting()
            .into_iter()
            .filter(|c| starves_by_shape(*c, self.concurrency))
            .collect()
    }
}

/// Of one architecture's pools as predicted, the smallest within [`TIE_FRACTION`] of the most
/// throughput predicted: more workers than that buy nothing the ranking tells apart.
pub fn smallest_within_tie(
    predicted: &[(Candidate, Predicted)],
) -> Option<&(Candidate, Predicted)> {
    let best = predicted
        .iter()
        .map(|(_, p)| p.prediction.rps)
        .fold(0.0, f64::max);
    predicted
        .iter()
        .filter(|(_, p)| p.prediction.rps >= best * (1.0 - TIE_FRACTION))
        .min_by_key(|(c, _)| c.workers)
}

/// Whether a candidate leaves keep-alive connections unanswered by its shape, however long it
/// runs: a pool of connection-holding workers smaller than the connections, or one thread
/// serving one connection at a time to more than one.
pub(super) fn starves_by_shape(c: Candidate, concurrency: u32) -> bool {
    (c.arch.holds_connections() && c.workers < Some(concurrency))
        || (c.arch.one_connection_at_a_time() && concurrency > 1)
}

/// The shortest window under a CPU quota: ten of its 100 ms periods. A window that starts
/// inside a period may also get that period's fresh quota: 116% of the bound was measured
/// here in 100 ms windows at half a core; over ten periods the excess is within 10%.
pub const QUOTA_WINDOW_MS: f64 = 1000.0;

pub(super) fn window_ms(ms: f64) -> u32 {
    (ms.ceil() as u32).clamp(10, MAX_WINDOW_MS)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    pub(super) fn a_cell_no_server_can_meet_is_answered_without_measuring() {
        let mut c = cell(&[Arch::Epoll], 4096);
        c.cpu_us = 2000.0;
        let mut curve = synthetic(|_| (1.0, 1.0));
        let out = search(&c, &mut curve).unwrap();
        assert!(curve.asked.is_empty());
        assert_eq!(out.winner, None);
        assert!(out.infeasible.unwrap().contains("Little's law"));
    }

    #[test]
    pub(super) fn bounds_of_cells_and_of_candidates_under_blocking_waits() {
        let mut c = cell(&[Arch::Prethreaded], 256);
        assert_eq!(c.bound_rps(), 2000.0);
        c.blocking = true;
        let pool = |w| Candidate {
            arch: Arch::Prethreaded,
            workers: Some(w),
        };
        // 8 threads waiting 11 ms each: 727/s.
        assert!((c.candidate_bound_rps(pool(8)) - 8.0 / 0.011).abs() < 1e-6);
        let epoll = Candidate {
            arch: Arch::Epoll,
            workers: None,
        };
        assert!((c.candidate_bound_rps(epoll) - 1.0 / 0.011).abs() < 1e-6);
        let threaded = Candidate {
            arch: Arch::Threaded,
            workers: None,
        };
        assert_eq!(c.candidate_bound_rps(threaded), 2000.0);
        // 256 connections at 2,000/s: a cycle is 128 ms; three of them open the search.
        assert_eq!(c.cycle_ms(), 128.0);
        assert_eq!(c.first_window_ms(), 384);
    }

    #[test]
    pub(super) fn the_grid_and_the_caps() {
        let c = cell(&[Arch::Prethreaded, Arch::Epoll], 100);
        assert_eq!(c.grid_pools(), vec![1, 2, 4, 8, 16, 32, 64, 100]);
        assert_eq!(c.full_grid_points(), (8 + 1) * 3);
        assert_eq!(c.goetz(), 22);
        assert_eq!(cell(&[Arch::Epoll], 1).pool_cap(), 1);
        assert_eq!(cell(&[Arch::Epoll], 1).grid_pools(), vec![1]);
    }
}
