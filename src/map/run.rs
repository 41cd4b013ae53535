//! Running a map: each cell's search ([`super::search`]) measured on live servers through the
//! lab's door ([`crate::lab::Lab::point`]), every finished point logged at once ([`super::points`]), a progress line
//! with the cells done, the points measured and the time left, and the results rewritten
//! after each cell so an interrupted run keeps what it finished.

use std::io::IsTerminal;
use std::time::Instant;

use super::halving::{self, Candidate, Cell, Outcome, Probe, Verify};
use super::points::PointRecord;
use super::results::{write_results, CellResult, MapResults, RoundTripAt};
use super::spec::{CellSpec, MapSpec, PointBudget, WaitMode};
use crate::arch::Arch;
use crate::lab::plan::{PointPlan, PointSpec, Setup, TargetSpec, Workload};
use crate::lab::points::PointLog;
use crate::lab::results::utc_timestamp;
use crate::lab::{Lab, Origin};
use crate::search::{sample_of, Measure, Sample};

/// A cell's probes, answered by the lab: from the point log when the point finished before,
/// else measured on a live server.
struct CellProbes<'a> {
    cell: &'a CellSpec,
    spec: &'a MapSpec,
    lab: &'a Lab,
    log: &'a mut PointLog<PointRecord>,
    progress: &'a mut Progress,
}

impl Measure<Probe> for CellProbes<'_> {
    fn measure(&mut self, probe: &Probe) -> Option<Sample> {
        let lab = self.lab;
        let cores = lab.machine.cores;
        let (spec, cell) = (self.spec, self.cell);
        let whole = spec.whole_cores(cell.cpus, cores);
        if let Some(twin) = round_trip_twin(spec, cell) {
            if let Some(record) = self.log.get(&PointRecord::key_of(&twin, probe)) {
                return Some(record.sample.clone());
            }
        }
        let key = PointRecord::key_of(&cell.key, probe);
        let (record, origin) = lab.point(
            "map",
            self.log,
            &key,
            || plan_for(spec, cell, cores, probe),
            |result| PointRecord {
                cell: cell.key.clone(),
                probe: *probe,
                sample: sample_of(&result, whole),
                // A server that did not run, or requests that failed (statuses, errors): how.
                failure: result.failure.clone().or_else(|| {
                    result
                        .failure_cause()
                        .map(|cause| format!("requests failed: {cause}"))
                }),
            },
        )?;
        if origin == Origin::Measured {
            self.progress.measured();
        }
        Some(record.sample)
    }

    fn why(&mut self, reason: &'static str) {
        self.progress.why(reason);
    }
}

/// The round trip's cell where `cell` asks what it measured: one connection, no wait, the same
/// C, path and (no) quota, a request of constant CPU. Its points answer the cell's same probes
/// (under a budget every server was measured there once; at map-quick's 1 ms and one
/// connection they were measured again, 11 of its points).
fn round_trip_twin(spec: &MapSpec, cell: &CellSpec) -> Option<String> {
    let same = cell.concurrency == 1
        && cell.wait_ms == 0.0
        && cell.cpus.is_none()
        && spec.dist.is_none()
        && spec.cv.is_none();
    let key = round_trip_key(spec, cell.cpu_us, cell.rtt_ms);
    (same && key != cell.key).then_some(key)
}

/// One probe of `cell`, answered as the search's are: from the point log when it finished
/// before, else measured on a live server. `None`: interrupted.
pub fn probe_once(
    spec: &MapSpec,
    cell: &CellSpec,
    lab: &Lab,
    log: &mut PointLog<PointRecord>,
    progress: &mut Progress,
    probe: &Probe,
) -> Option<Sample> {
    CellProbes {
        cell,
        spec,
        lab,
        log,
        progress,
    }
    .measure(probe)
}

/// The point a probe measures: its architecture and pool, the cell's route and concurrency,
/// the probe's run length, a window that opens once every connection was answered.
fn plan_for(spec: &MapSpec, cell: &CellSpec, cores: u32, probe: &Probe) -> PointPlan {
    // Connecting every connection and answering each once may take a few cycles of the cell,
    // and thousands of forks or threads.
    let cycle_s = cell_of(spec, cell, cores, &[]).cycle_ms() / 1000.0;
    let settle_s = (3.0 * cycle_s + f64::from(cell.concurrency) / 1000.0).clamp(2.0, 30.0);
    let mut setup = Setup::closed(f64::from(probe.duration_ms) / 1000.0, spec.warmup_s());
    setup.timeout = (spec.p99_bound_ms / 1000.0 * 2.0).max(2.0);
    setup.settle = Some(settle_s);
    setup.net = cell.net_spec();
    setup.cpus = cell.cpus;
    setup.cpuset = spec.cpuset_cpus();
    PointPlan {
        point: PointSpec {
            target: TargetSpec::Ours {
                arch: probe.candidate.arch,
                variant: None,
            },
            workers: probe.candidate.workers,
            workload: Workload::get("cell", &cell.route),
            concurrency: cell.concurrency,
            cpus: None,
            streams: None,
        },
        setup,
    }
}

/// The search's view of a cell on a machine of `cores` CPUs, under the map's budget.
pub fn cell_of(spec: &MapSpec, cell: &CellSpec, cores: u32, rules: &[(String, u32)]) -> Cell {
    Cell {
        archs: spec.archs.clone(),
        concurrency: cell.concurrency,
        cores: spec.whole_cores(cell.cpus, cores.max(1)),
        budget: spec.budget(cell.cpus, cores.max(1)),
        quota: cell.cpus.is_some(),
        cpu_us: cell.cpu_us,
        wait_ms: cell.wait_ms,
        blocking: cell.wait == WaitMode::Blocking,
        p99_bound_us: spec.p99_bound_ms * 1000.0,
        base_ms: spec.base_ms(),
        rounds: spec.rounds,
        max_pool: spec.max_pool,
        rules: rules.to_vec(),
        round_trip_us: 0.0,
        p99_jitter_us: 0.0,
        path_rtt_us: cell.rtt_ms * 1000.0,
        forecast: Vec::new(),
        allowance: None,
        spare: 0,
    }
}

/// Runs every cell not yet finished, saving the results after each; returns them.
pub fn run_cells(
    spec: &MapSpec,
    source: &str,
    out: &std::path::Path,
    lab: &Lab,
    log: &mut PointLog<PointRecord>,
    previous_wall_s: f64,
    plain: bool,
) -> anyhow::Result<MapResults> {
    let cores = lab.cores();
    let cells = spec.cells();
    let started = Instant::now();
    let mut progress = Progress::new(cells.len(), log.len(), plain);
    let grid: usize = cells
        .iter()
        .map(|c| cell_of(spec, c, cores, &[]).full_grid_points())
        .sum();
    progress.of_grid(grid);
    let mut results = MapResults::new(source, spec, lab.machine.clone(), previous_wall_s);
    results.started = utc_timestamp();
    if !round_trips(spec, lab, log, &mut progress, &mut results) {
        progress.finish();
        save(&mut results, &cells, started, previous_wall_s, out)?;
        return Ok(results);
    }
    let views = views_of(spec, &cells, &results, cores);
    // (Read only where the model predicts: see `cell_model`.)
    let budget = spec.point_budget.map(|b| b.points(grid));
    for (index, cell) in cells.iter().enumerate() {
        let round_trip = round_trip_of(&results, cell);
        if lab.stopped() {
            break;
        }
        progress.starting(cell);
        // Fitted on the cells before this one only (and the round trips): a resumed run then
        // predicts, and so asks for, exactly what the first did.
        let model = if spec.predict {
            let before = &views_before(spec, &cells, cell, &results);
            // Verification's full measurements are not the run's: a verified map predicts
            // what the same map unverified would.
            let records: Vec<&PointRecord> = log
                .records()
                .filter(|r| before.contains(&r.cell) && !r.probe.verifies())
                .collect();
            let left = cells.len() - index;
            cell_model(
                spec,
                cell,
                &views,
                &records,
                round_trip,
                cores,
                (budget, left),
            )
        } else {
            CellModel::default()
        };
        let Some((outcome, verify)) =
            search_cell(spec, cell, round_trip, model, lab, log, &mut progress)
        else {
            break;
        };
        let probe_cell = cell_of(spec, cell, cores, &[]);
        results
            .cells
            .push(cell_result(cell, &probe_cell, outcome, verify, log));
        progress.cell_done();
        save(&mut results, &cells, started, previous_wall_s, out)?;
    }
    progress.finish();
    save(&mut results, &cells, started, previous_wall_s, out)?;
    Ok(results)
}

/// The round trip measured for `cell`'s C and path (its points counted in
/// `round_trip_points` already).
fn round_trip_of(results: &MapResults, cell: &CellSpec) -> RoundTrip {
    results
        .round_trips
        .iter()
        .find(|r| r.cpu_us == cell.cpu_us && r.rtt_ms == cell.rtt_ms)
        .map_or(RoundTrip::default(), |r| RoundTrip {
            us: r.us,
            jitter_us: r.jitter_us,
            points: 0,
            handoff_us: r.handoff_us,
        })
}

/// What the model brings to `cell`: its candidates predicted by the models fitted on
/// `records` (the cells before it and the round trips), and what is left of the run's budget
/// (`budget`: its points, and the cells from this one on) after those records: the same on a
/// resumed run.
fn cell_model(
    spec: &MapSpec,
    cell: &CellSpec,
    views: &std::collections::BTreeMap<String, Cell>,
    records: &[&PointRecord],
    round_trip: RoundTrip,
    cores: u32,
    (budget, left): (Option<usize>, usize),
) -> CellModel {
    let view = cell_of(spec, cell, cores, &[]);
    let (handoff_us, machine) = (round_trip.handoff_us, f64::from(cores));
    // Verification's full measurements are not the search's: not of the budget.
    let spent = records.iter().filter(|r| !r.probe.verifies()).count();
    CellModel {
        forecast: super::predictions::forecast_cell(
            spec, &view, views, records, handoff_us, machine,
        ),
        allowance: budget.map(|t| PointBudget::allowance(t, spent, left)),
        spare: budget.map_or(0, |t| PointBudget::spare(t, spent, left)),
    }
}

/// The round trip of each C the map has at each path's round trip, measured once a run, into
/// `results`. `false`: interrupted.
fn round_trips(
    spec: &MapSpec,
    lab: &Lab,
    log: &mut PointLog<PointRecord>,
    progress: &mut Progress,
    results: &mut MapResults,
) -> bool {
    for (i, &cpu_us) in spec.cpu_us.iter().enumerate() {
        for rtt_ms in spec.rtts() {
            let Some(rt) = round_trip(spec, (cpu_us, i == 0), rtt_ms, lab, log, progress) else {
                return false;
            };
            results.round_trips.push(RoundTripAt {
                cpu_us,
                rtt_ms,
                us: rt.us,
                jitter_us: rt.jitter_us,
                handoff_us: rt.handoff_us,
            });
            results.round_trip_points += rt.points;
        }
    }
    // Beyond each path's own round trip: what the machine adds.
    results.round_trip_us = results
        .round_trips
        .iter()
        .map(|r| (r.us - r.rtt_ms * 1000.0).max(0.0))
        .fold(0.0, f64::max);
    true
}

/// A searched cell's results: its outcome, its verification and its points (the search's
/// and verification's counted apart).
fn cell_result(
    cell: &CellSpec,
    probe_cell: &Cell,
    outcome: halving::Outcome,
    verify: Option<Verify>,
    log: &PointLog<PointRecord>,
) -> CellResult {
    let points: Vec<PointRecord> = log.of_cell(&cell.key).into_iter().cloned().collect();
    let verifying = points.iter().filter(|p| p.probe.verifies()).count();
    CellResult {
        cell: cell.clone(),
        outcome: Some(outcome),
        goetz: probe_cell.goetz(),
        points_measured: points.len() - verifying,
        points_verifying: verifying,
        points,
        full_grid_points: probe_cell.full_grid_points(),
        verify,
    }
}

/// The keys of the cells measured before `cell` in the run's order, and of the round trips.
fn views_before(
    spec: &MapSpec,
    cells: &[CellSpec],
    cell: &CellSpec,
    results: &MapResults,
) -> std::collections::BTreeSet<String> {
    cells
        .iter()
        .take_while(|c| c.key != cell.key)
        .map(|c| c.key.clone())
        .chain(
            results
                .round_trips
                .iter()
                .map(|r| round_trip_key(spec, r.cpu_us, r.rtt_ms)),
        )
        .collect()
}

/// Every cell as the search sees it, by key, the round trips' among them: what the model's
/// points were measured in.
fn views_of(
    spec: &MapSpec,
    cells: &[CellSpec],
    results: &MapResults,
    cores: u32,
) -> std::collections::BTreeMap<String, Cell> {
    cells
        .iter()
        .cloned()
        .chain(
            results
                .round_trips
                .iter()
                .map(|r| round_trip_cell(spec, r.cpu_us, r.rtt_ms)),
        )
        .map(|c| (c.key.clone(), cell_of(spec, &c, cores, &[])))
        .collect()
}

/// The cell name under which the round-trip points of a request of `cpu_us` are stored
/// (`-rtt100` after it across a path of 100 ms, when the map has several).
pub fn round_trip_key(spec: &MapSpec, cpu_us: f64, rtt_ms: f64) -> String {
    format!("round-trip-c{cpu_us}{}", spec.rtt_suffix(rtt_ms))
}

/// What a request of `cpu_us` and no wait (`/work?cpu_us=C`) at one connection shows of this
/// machine, beyond its C: see [`round_trip`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RoundTrip {
    /// The shorter cycle of the two leanest servers less C, µs.
    pub us: f64,
    /// The smaller of their p99s' distance from their medians, µs: what the machine alone
    /// adds to a p99 at one connection (0: not known).
    pub jitter_us: f64,
    /// The points it took.
    pub points: usize,
    /// What the leanest server's cycle held beyond both CPUs (a wake-up on each side and the
    /// loopback, or the path), µs: the model's hand-off ([`crate::model::fit::Fitted`]).
    pub handoff_us: f64,
}

/// The servers a round trip is measured on: the two leanest.
const ROUND_TRIP_ARCHS: [Arch; 2] = [Arch::Iterative, Arch::Epoll];

/// The round trip of a request of `cpu_us` and no wait at one connection on this machine: the
/// two leanest servers (iterative, epoll), one run each. The cycle less C is what a closed
/// loop adds to every cycle whatever the server (two wake-ups, the generator's and the
/// server's parsing, and the CPU the request takes beyond its C: 1 ms of CPU cycled in
/// 1,086 us where an empty request cycled in 44 to 54 us), so the search can tell a server at
/// what the machine allows ([`halving::Cell::reach_rps`]). The p99's distance from the median
/// on both is the machine's own jitter (a shared machine's preemptions; 0.2 to 0.3 ms here
/// at 1 ms), under which two p99s cannot be told apart ([`halving::Cell::p99_jitter_us`]).
/// Measured once a run for each C and path (kept in the point log); across a path it holds the
/// path's round trip (`rtt_ms`). Under a budget, the first C's (`first`) measures the model's
/// [`first_points`] too. `None`: interrupted.
pub fn round_trip(
    spec: &MapSpec,
    (cpu_us, first): (f64, bool),
    rtt_ms: f64,
    lab: &Lab,
    log: &mut PointLog<PointRecord>,
    progress: &mut Progress,
) -> Option<RoundTrip> {
    let cell = round_trip_cell(spec, cpu_us, rtt_ms);
    let mut live = CellProbes {
        cell: &cell,
        spec,
        lab,
        log,
        progress,
    };
    let mut best_rps: f64 = 0.0;
    let mut jitter_us = f64::INFINITY;
    let mut handoff_us = f64::INFINITY;
    for arch in ROUND_TRIP_ARCHS {
        live.why("the round trip at one connection");
        let probe = Probe {
            candidate: Candidate {
                arch,
                workers: None,
            },
            duration_ms: spec.base_ms(),
            rep: 0,
        };
        let sample = live.measure(&probe)?;
        if sample.ok {
            best_rps = best_rps.max(sample.rps);
            if sample.cpu_us > 0.0 {
                let h = crate::model::fit::handoff_us(
                    1,
                    sample.rps,
                    sample.cpu_us,
                    sample.client_cpu_us,
                    rtt_ms * 1000.0,
                );
                handoff_us = handoff_us.min(h);
            }
        }
        jitter_us = if sample.ok && sample.p50_us > 0.0 {
            jitter_us.min((sample.p99_us - sample.p50_us).max(0.0))
        } else {
            0.0
        };
    }
    if first && spec.predict && spec.point_budget.is_some() {
        first_points(spec, &cell, lab.cores(), &mut live)?;
    }
    Some(RoundTrip {
        us: if best_rps > 0.0 {
            (1e6 / best_rps - cpu_us).max(0.0)
        } else {
            0.0
        },
        jitter_us,
        points: live.log.of_cell(&cell.key).len(),
        handoff_us: if handoff_us.is_finite() {
            handoff_us
        } else {
            0.0
        },
    })
}

/// Under a budget, every server but the round trip's own once at one connection too: the
/// model's first point of each (its cost beyond C where nothing batches), so that one cell
/// more lets it predict them all. At the map's first C only: a server's cost beyond C is its
/// own whatever the C, and the cells of the first C then give the model its other connection
/// counts (at map-wide's three Cs these points were 27 of its 191, one in seven). `None`:
/// interrupted.
fn first_points(spec: &MapSpec, cell: &CellSpec, cores: u32, live: &mut CellProbes) -> Option<()> {
    let view = cell_of(spec, cell, cores, &[]);
    for &arch in spec.archs.iter().filter(|a| !ROUND_TRIP_ARCHS.contains(a)) {
        let probe = Probe {
            candidate: Candidate {
                arch,
                workers: view.start_pool(arch),
            },
            duration_ms: spec.base_ms(),
            rep: 0,
        };
        live.why("the model's first point of each server");
        live.measure(&probe)?;
    }
    Some(())
}

/// The cell of the round trip of a request of `cpu_us` at one connection, across a path of
/// `rtt_ms`.
pub fn round_trip_cell(spec: &MapSpec, cpu_us: f64, rtt_ms: f64) -> CellSpec {
    CellSpec {
        wait: WaitMode::Async,
        ratio: 0.0,
        concurrency: 1,
        cpu_us,
        wait_ms: 0.0,
        rtt_ms,
        net: spec.net_at(rtt_ms),
        // The machine's own round trip: outside any quota.
        cpus: None,
        route: super::spec::work_route(cpu_us, 0.0, WaitMode::Async, None, None),
        key: round_trip_key(spec, cpu_us, rtt_ms),
    }
}

/// What the model brings to a cell's search: its candidates predicted, and the points the
/// run's budget allows it ([`halving::Cell::forecast`], [`halving::Cell::allowance`]).
#[derive(Debug, Clone, Default)]
pub struct CellModel {
    pub forecast: Vec<(Candidate, crate::model::fit::Predicted)>,
    pub allowance: Option<usize>,
    pub spare: usize,
}

/// Searches one cell, then measures the rules of thumb on its pooled winner, and the full grid
/// when the map verifies; `round_trip` is the run's for the cell's C. `None`: interrupted.
pub fn search_cell(
    spec: &MapSpec,
    cell: &CellSpec,
    round_trip: RoundTrip,
    model: CellModel,
    lab: &Lab,
    log: &mut PointLog<PointRecord>,
    progress: &mut Progress,
) -> Option<(Outcome, Option<Verify>)> {
    let cores = lab.cores();
    let mut probe_cell = cell_of(spec, cell, cores, &[]);
    probe_cell.round_trip_us = round_trip.us;
    probe_cell.p99_jitter_us = round_trip.jitter_us;
    probe_cell.forecast = model.forecast;
    probe_cell.allowance = model.allowance;
    probe_cell.spare = model.spare;
    let mut live = CellProbes {
        cell,
        spec,
        lab,
        log,
        progress,
    };
    // The default pool is the winner's: the search runs once without the rules, then again
    // with them; the second run's points up to the rules come from the point log, not a server.
    let mut outcome = halving::search(&probe_cell, &mut live)?;
    if let Some(winner) = outcome.winner.filter(|w| w.arch.pooled()) {
        let rules_cell = Cell {
            rules: probe_cell.rules_for(winner.arch),
            ..probe_cell.clone()
        };
        outcome = halving::search(&rules_cell, &mut live)?;
    }
    say_how_rules_failed(&mut outcome, &cell.key, live.log);
    let verify = match (spec.verifies(&cell.key), outcome.winner) {
        (true, Some(_)) => {
            live.why(VERIFY_WHY);
            Some(halving::verify(&probe_cell, &outcome, &mut live)?)
        }
        _ => None,
    };
    Some((outcome, verify))
}

/// A rule whose pool missed the bound for failed requests says how they failed (from its
/// stored points: the last one's failure).
fn say_how_rules_failed(outcome: &mut Outcome, cell: &str, log: &PointLog<PointRecord>) {
    let records = log.of_cell(cell);
    for rule in &mut outcome.rules {
        let Some(why) = rule.missed_because.as_mut() else {
            continue;
        };
        let failure = records
            .iter()
            .filter(|r| {
                r.probe.candidate.workers == Some(rule.workers)
                    && outcome
                        .winner
                        .is_some_and(|w| w.arch == r.probe.candidate.arch)
            })
            .filter_map(|r| r.failure.as_deref())
            .next_back();
        if let Some(failure) = failure {
            why.push_str(&format!(" ({})", failure.lines().next().unwrap_or(failure)));
        }
    }
}

/// Totals, timestamps and `results.json` as they stand.
fn save(
    results: &mut MapResults,
    cells: &[CellSpec],
    started: Instant,
    previous_wall_s: f64,
    out: &std::path::Path,
) -> anyhow::Result<()> {
    results.interrupted = results.cells.len() < cells.len();
    results.points_measured = results.round_trip_points
        + results
            .cells
            .iter()
            .map(|c| c.points_measured)
            .sum::<usize>();
    results.points_verifying = results.cells.iter().map(|c| c.points_verifying).sum();
    results.full_grid_points = results.cells.iter().map(|c| c.full_grid_points).sum();
    results.wall_s = previous_wall_s + started.elapsed().as_secs_f64();
    results.finished = utc_timestamp();
    results.summary = super::output::summary(results);
    write_results(results, out)
}

/// Why a verification's points are measured, as the progress line says.
const VERIFY_WHY: &str = "to verify: every candidate in full";

/// The progress line: cells done, points measured, the time left.
pub struct Progress {
    cells: usize,
    /// The points the cells' full grids would take (0: not said).
    grid: usize,
    done: usize,
    measured: usize,
    /// Of `measured`, the points of verifications (not of the search, nor of its budget).
    verifying: usize,
    stored_before: usize,
    started: Instant,
    tty: bool,
    current: String,
    /// Why the next point is needed, and the cell's points so far by why.
    why: &'static str,
    whys: Vec<(&'static str, usize)>,
}

impl Progress {
    pub fn new(cells: usize, stored_before: usize, plain: bool) -> Progress {
        Progress {
            cells,
            grid: 0,
            done: 0,
            measured: 0,
            verifying: 0,
            stored_before,
            started: Instant::now(),
            tty: !plain && std::io::stderr().is_terminal(),
            current: String::new(),
            why: "",
            whys: Vec::new(),
        }
    }

    fn line(&self) -> String {
        let left = if self.done > 0 {
            let per_cell = self.started.elapsed().as_secs_f64() / self.done as f64;
            format!(
                ", about {} left",
                crate::render::numbers::wall_time(per_cell * (self.cells - self.done) as f64)
            )
        } else {
            String::new()
        };
        format!(
            "map: cell {}/{} {}: {} points measured{}{}{left}{}",
            (self.done + 1).min(self.cells),
            self.cells,
            self.current,
            self.measured - self.verifying,
            self.grid_share(),
            if self.stored_before > 0 {
                format!(" ({} from the resumed run)", self.stored_before)
            } else {
                String::new()
            },
            if self.why.is_empty() {
                String::new()
            } else {
                format!("; now: {}", self.why)
            },
        )
    }

    /// The points the full grids of the cells would take, to say what share was measured.
    pub fn of_grid(&mut self, points: usize) {
        self.grid = points;
    }

    /// ` (0.4% of the grid's 9,558)`, where the grid is known, and the points verification
    /// measured beside the search's (`, and 21 more to verify`), not of the grid's share.
    fn grid_share(&self) -> String {
        let verifying = if self.verifying > 0 {
            format!(", and {} more to verify", self.verifying)
        } else {
            String::new()
        };
        if self.grid == 0 {
            return verifying;
        }
        let searched = self.measured - self.verifying + self.stored_before;
        format!(
            " ({} of the grid's {}){verifying}",
            crate::render::numbers::percent(
                (searched as f64 / self.grid as f64 * 1000.0).round() / 1000.0
            ),
            crate::render::numbers::thousands(self.grid as f64)
        )
    }

    fn starting(&mut self, cell: &CellSpec) {
        self.current = cell.key.clone();
        self.whys.clear();
        if self.tty {
            eprint!("\r\x1b[2K{}", self.line());
        }
    }

    /// Why the next point is needed.
    fn why(&mut self, reason: &'static str) {
        self.why = reason;
    }

    /// The cell's points by why: `2 the model's leader, 1 to confirm ...`.
    fn whys_text(&self) -> String {
        self.whys
            .iter()
            .map(|(why, n)| format!("{n} {why}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn measured(&mut self) {
        self.measured += 1;
        if self.why == VERIFY_WHY {
            self.verifying += 1;
        }
        match self.whys.iter_mut().find(|(w, _)| *w == self.why) {
            Some((_, n)) => *n += 1,
            None => self.whys.push((self.why, 1)),
        }
        if self.tty {
            eprint!("\r\x1b[2K{}", self.line());
        }
    }

    fn cell_done(&mut self) {
        self.done += 1;
        if !self.tty {
            let left = self.started.elapsed().as_secs_f64() / self.done as f64
                * (self.cells - self.done) as f64;
            let whys = self.whys_text();
            eprintln!(
                "map: {}/{} cells done ({}), {} points measured{}, about {} left{}",
                self.done,
                self.cells,
                self.current,
                self.measured - self.verifying,
                self.grid_share(),
                crate::render::numbers::wall_time(left),
                if whys.is_empty() {
                    String::new()
                } else {
                    format!("; this cell's: {whys}")
                }
            );
        }
        self.whys.clear();
        self.why = "";
    }

    pub fn finish(&self) {
        if self.tty {
            eprintln!();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_that_missed_for_failed_requests_says_how_from_its_points() {
        let async5 = Candidate {
            arch: Arch::Async,
            workers: Some(5),
        };
        let async2 = Candidate {
            workers: Some(2),
            ..async5
        };
        let rule = |name: &str, workers: u32, missed: Option<&str>| {
            serde_json::json!({"rule": name, "workers": workers, "rps": 0.0, "p99_us": 0.0,
                "meets_bound": missed.is_none(), "rps_loss": 1.0, "missed_because": missed})
        };
        let mut outcome: Outcome = serde_json::from_value(serde_json::json!({
            "winner": async2, "rps": 100.0, "p99_us": 1000.0, "ties": [], "runner_up": null,
            "margin": null, "rounds": 1, "final_ms": 300, "bound_rps": 200.0,
            "infeasible": null, "candidates": [], "starving": [], "outclassed": [],
            "unneeded": [],
            "rules": [rule("2n+1", 5, Some("over 1% of its requests failed or timed out")),
                      rule("default", 2, None)],
        }))
        .unwrap();
        let dir = crate::os::fresh_test_dir("rules");
        let mut log = PointLog::<PointRecord>::open(&dir).unwrap();
        for (candidate, failure) in [
            (
                async5,
                Some("requests failed: every response was 503 (40 of 40)"),
            ),
            (async2, None),
        ] {
            log.put_record(PointRecord {
                cell: "async-r0-c16".into(),
                probe: Probe {
                    candidate,
                    duration_ms: 300,
                    rep: 0,
                },
                sample: sample_of(&Default::default(), 1),
                failure: failure.map(str::to_string),
            })
            .unwrap();
        }
        say_how_rules_failed(&mut outcome, "async-r0-c16", &log);
        // One point of two failed: the run did not fail as a whole.
        assert_eq!(log.every_point_failed(), None);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            outcome.rules[0].missed_because.as_deref(),
            Some(
                "over 1% of its requests failed or timed out (requests failed: every response \
                 was 503 (40 of 40))"
            )
        );
        assert_eq!(outcome.rules[1].missed_because, None);
    }

    #[test]
    fn a_run_whose_every_point_failed_says_so_with_the_first_cause() {
        let dir = crate::os::fresh_test_dir("failed");
        let mut log = PointLog::<PointRecord>::open(&dir).unwrap();
        assert_eq!(log.every_point_failed(), None);
        for workers in [1, 2] {
            log.put_record(PointRecord {
                cell: "async-r0-c16".into(),
                probe: Probe {
                    candidate: Candidate {
                        arch: Arch::Async,
                        workers: Some(workers),
                    },
                    duration_ms: 300,
                    rep: 0,
                },
                sample: sample_of(&Default::default(), 1),
                failure: Some(format!(
                    "requests failed: every response was 500 ({workers} of {workers})\nmore"
                )),
            })
            .unwrap();
        }
        let said = log.every_point_failed();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            said.as_deref(),
            Some(
                "every point failed (2); the first: async-r0-c16 async/1: requests failed: every \
                 response was 500 (1 of 1)"
            )
        );
    }
}
