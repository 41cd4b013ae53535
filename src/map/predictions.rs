//! The model's predictions of a cell's candidates ([`crate::model::fit`]): where a candidate
//! runs ([`placement`]), the pools each architecture is predicted at ([`pools`]), what a
//! measured point tells the model ([`observed`]), and the forecast of a cell from the points
//! a run measured so far ([`forecast_cell`]), which the map's search measures to decide by.

use super::halving::{Candidate, Cell};
use super::points::PointRecord;
use super::spec::MapSpec;
use crate::arch::{Arch, Holding};
use crate::model::fit::{Fitted, Observed, Placement, Predicted};
use crate::model::Workload;
use crate::search::Sample;

/// Where a candidate runs, to the model: the machine's cores, shared with the generator unless
/// the map pins the servers to a CPU set, and the cores the candidate can use (its loops or
/// its parallelism, within the budget).
pub fn placement(spec: &MapSpec, cell: &Cell, c: Candidate, machine: f64) -> Placement {
    // (Loops blocked by a wait hold requests as a pool does: the model takes the pool from
    // the candidate's workers; the cores here are what runs their CPU.)
    let own = match (c.arch.holding(), c.workers) {
        (Holding::Loops, Some(w)) => f64::from(w).min(machine),
        _ => c.arch.parallelism(machine),
    };
    let budget = cell.budget;
    Placement {
        machine_cores: machine,
        shares_with_generator: spec.cpuset.is_none(),
        server_cores: own.min(budget),
        budgeted: budget < own,
    }
}

/// The pools a candidate architecture is predicted at: every pool of the grid where its
/// workers each hold a request or run a loop, its starting pool where they hold connections,
/// and the rules of thumb's pools (so that what a rule would lose is predicted, not measured,
/// under a budget).
pub fn pools(cell: &Cell, arch: Arch) -> Vec<Option<u32>> {
    if !arch.pooled() {
        return vec![None];
    }
    let mut pools: Vec<Option<u32>> = if arch.holds_connections() {
        vec![cell.start_pool(arch)]
    } else {
        cell.grid_pools().into_iter().map(Some).collect()
    };
    for (_, w) in cell.rules_for(arch) {
        let w = Some(w.clamp(1, cell.pool_cap()));
        if !pools.contains(&w) {
            pools.push(w);
        }
    }
    pools
}

/// A cell's request, as the model reads it.
pub fn workload_of(cell: &Cell) -> Workload {
    Workload {
        cpu_us: cell.cpu_us,
        wait_us: cell.wait_ms * 1000.0,
        blocking: cell.blocking,
    }
}

/// Each of `arch`'s pools in `cell` ([`pools`]) predicted by its `model`, placed for each.
pub fn predict_pools(
    spec: &MapSpec,
    cell: &Cell,
    arch: Arch,
    model: &Fitted,
    machine: f64,
) -> Vec<(Candidate, Predicted)> {
    let workload = workload_of(cell);
    pools(cell, arch)
        .into_iter()
        .map(|workers| {
            let c = Candidate { arch, workers };
            let there = Fitted {
                placement: placement(spec, cell, c, machine),
                ..*model
            };
            (c, there.predict(&workload, cell.concurrency, workers))
        })
        .collect()
}

/// The observation a sample of candidate `c` in `cell` makes, on a machine of `machine`
/// cores.
pub fn observed(
    spec: &MapSpec,
    cell: &Cell,
    c: Candidate,
    sample: &Sample,
    machine: f64,
) -> Observed {
    Observed {
        connections: cell.concurrency,
        pool: c.workers,
        workload: workload_of(cell),
        rps: sample.rps,
        server_us: sample.cpu_us,
        client_us: sample.client_cpu_us,
        p50_us: sample.p50_us,
        p99_us: sample.p99_us,
        placement: placement(spec, cell, c, machine),
    }
}

/// Points of one architecture at least this many connection counts before the model
/// predicts it: points at one `N` say nothing of how its costs move with `N` (three round
/// trips at one connection, C of 20 us to 2 ms, predicted uring/2 at 22,527 req/s at 256
/// connections, where it served 58,854).
pub const MIN_LEVELS: usize = 2;

/// What the models fitted on `records` (the run's points so far, in the cells `views` names)
/// predict of `cell`'s candidates: each architecture measured at at least [`MIN_LEVELS`]
/// connection counts (without a wait, or with one of the cell's kind, and one with a wait
/// where the cell has one), at each of its pools. Points the lab set (the generator, the
/// path), that failed or whose server's CPU is unknown are left out of the fit.
pub fn forecast_cell(
    spec: &MapSpec,
    cell: &Cell,
    views: &std::collections::BTreeMap<String, Cell>,
    records: &[&PointRecord],
    handoff_us: f64,
    machine: f64,
) -> Vec<(Candidate, Predicted)> {
    let mut out = Vec::new();
    for &arch in &cell.archs {
        let usable = usable_points(cell, arch, views, records);
        let mine: Vec<(&Cell, &PointRecord)> = usable
            .iter()
            .filter(|(_, r)| !r.sample.p99_lower_bound)
            .copied()
            .collect();
        let mut levels: Vec<u32> = mine.iter().map(|(v, _)| v.concurrency).collect();
        levels.sort_unstable();
        levels.dedup();
        // A cell that waits is predicted only from points that waited as it does, under a
        // budget too: how much longer than asked a server's waits take is its own (at
        // map-quick's 10 ms waits on 16 connections, predicted without a point that waited,
        // every server read 1,360 req/s; hybrid/2 served 1,363, the event loops and the
        // threads 870 to 1,140).
        let waited = mine.iter().any(|(v, _)| v.wait_ms > 0.0);
        if levels.len() < MIN_LEVELS || (cell.wait_ms > 0.0 && !waited) {
            continue;
        }
        let obs: Vec<Observed> = mine
            .iter()
            .map(|(v, r)| observed(spec, v, r.probe.candidate, &r.sample, machine))
            .collect();
        if let Some(model) = Fitted::fit(arch.holding(), &obs, handoff_us) {
            let ratios = residuals_here(spec, cell, &usable, &model, machine);
            let scale = crate::model::fit::residual_scale(&ratios).unwrap_or(1.0);
            out.extend(
                predict_pools(spec, cell, arch, &model, machine)
                    .into_iter()
                    .map(|(c, p)| {
                        let p = p.scaled(scale);
                        match p99_missed_here(cell, c, views, records) {
                            Some(floor) => (c, p.with_p99_at_least(floor)),
                            None => (c, p),
                        }
                    }),
            );
        }
    }
    out
}

/// The p99 candidate `c` measured at `cell`'s connection count among `records` (in the cells
/// `views` names), where each point there missed the cell's bound
/// ([`crate::model::fit::p99_missed_here`]). A point that failed (errors over 1%: requests
/// timed out) missed it whatever its p99 read, and counts here though the fit leaves it out
/// (forking at 4,096 connections failed so in each of map-wide's cells there); a point the
/// lab set says nothing of the server.
fn p99_missed_here(
    cell: &Cell,
    c: Candidate,
    views: &std::collections::BTreeMap<String, Cell>,
    records: &[&PointRecord],
) -> Option<f64> {
    let p99s: Vec<f64> = records
        .iter()
        .filter(|r| r.probe.candidate == c && r.sample.lab().is_none())
        .filter(|r| {
            views
                .get(&r.cell)
                .is_some_and(|v| v.concurrency == cell.concurrency)
        })
        .map(|r| match r.sample.ok {
            true => r.sample.p99_us,
            false => r.sample.p99_us.max(cell.p99_bound_us),
        })
        .collect();
    crate::model::fit::p99_missed_here(&p99s, cell.p99_bound_us)
}

/// `arch`'s points among `records` the model can read (in the cells `views` names): not the
/// lab's, not failed, with the server's CPU known, and without a wait of the other kind than
/// `cell`'s (blocking, or not), which says nothing of it. Their p99 may be only a lower bound.
fn usable_points<'a>(
    cell: &Cell,
    arch: Arch,
    views: &'a std::collections::BTreeMap<String, Cell>,
    records: &[&'a PointRecord],
) -> Vec<(&'a Cell, &'a PointRecord)> {
    records
        .iter()
        .filter(|r| r.probe.candidate.arch == arch)
        .filter(|r| r.sample.ok && r.sample.lab().is_none())
        .filter(|r| r.sample.cpu_us > 0.0 && r.sample.rps > 0.0)
        .filter_map(|r| Some((views.get(&r.cell)?, *r)))
        .filter(|(v, _)| v.wait_ms == 0.0 || v.blocking == cell.blocking)
        .collect()
}

/// The model's residuals (measured over predicted throughput) on an architecture's `usable`
/// points ([`usable_points`]) at `cell`'s connection count: of those that waited as the cell
/// does (or not at all, where it does not) if any, else of all of them. Points whose p99 was
/// only a lower bound count here, though the fit leaves them out (their throughput was
/// measured whole): a thread or process a connection at 256 connections starved some of them
/// in every run, and left out, the model kept proposing it. The fit is one curve along the
/// connections, and a server's costs there can move past it: at 256 connections map-wide's
/// full measurements read forking and preforked 10 to 90% under it, uring/2 up to 14% over
/// it, where at 16 they were within 5%. The residual where the architecture was measured at
/// that count carries its own miss to the cell's other candidates of it, so the few points a
/// cell is allowed go to the candidates in the running.
fn residuals_here(
    spec: &MapSpec,
    cell: &Cell,
    usable: &[(&Cell, &PointRecord)],
    model: &Fitted,
    machine: f64,
) -> Vec<f64> {
    let at_n: Vec<(bool, f64)> = usable
        .iter()
        .filter(|(v, _)| v.concurrency == cell.concurrency)
        .map(|(v, r)| {
            let o = observed(spec, v, r.probe.candidate, &r.sample, machine);
            let alike = (v.wait_ms > 0.0) == (cell.wait_ms > 0.0);
            (alike, 1.0 / (1.0 + model.miss(&o)))
        })
        .collect();
    let alike: Vec<f64> = at_n.iter().filter(|(a, _)| *a).map(|(_, r)| *r).collect();
    if alike.is_empty() {
        at_n.into_iter().map(|(_, r)| r).collect()
    } else {
        alike
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map::halving::testing::{cell, sample};
    use crate::map::halving::Probe;
    use std::collections::BTreeMap;

    /// A point of `c` in the cell `key`: its p99, and whether it failed.
    fn point(key: &str, c: Candidate, p99_us: f64, ok: bool) -> PointRecord {
        PointRecord {
            cell: key.into(),
            probe: Probe {
                candidate: c,
                duration_ms: 2000,
                rep: 0,
            },
            sample: Sample {
                ok,
                ..sample(5000.0, p99_us)
            },
            failure: None,
        }
    }

    /// Forking's points at 4,096 connections set its p99 floor there where each missed the
    /// bound, a failed one whatever its p99 read; a point under the bound at that count, or
    /// points at another count only, set none.
    #[test]
    fn a_p99_floor_comes_from_the_candidates_points_at_the_cells_connections() {
        let forking = Candidate {
            arch: Arch::Forking,
            workers: None,
        };
        let here = cell(&[Arch::Forking], 4096);
        let bound = here.p99_bound_us;
        let views: BTreeMap<String, Cell> = [
            ("a-c4096".to_string(), cell(&[Arch::Forking], 4096)),
            ("b-c4096".to_string(), cell(&[Arch::Forking], 4096)),
            ("a-c256".to_string(), cell(&[Arch::Forking], 256)),
        ]
        .into();
        let failed = point("a-c4096", forking, 0.0, false);
        let slow = point("b-c4096", forking, 3.0 * bound, true);
        let fine = point("b-c4096", forking, bound / 10.0, true);
        let elsewhere = point("a-c256", forking, 3.0 * bound, true);
        let floor = |records: &[&PointRecord]| p99_missed_here(&here, forking, &views, records);
        assert_eq!(floor(&[&failed, &slow, &elsewhere]), Some(bound));
        assert_eq!(floor(&[&slow]), Some(3.0 * bound));
        assert_eq!(floor(&[&failed, &fine]), None);
        assert_eq!(floor(&[&elsewhere]), None);
        // Another candidate's points say nothing of it.
        let threaded = Candidate {
            arch: Arch::Threaded,
            workers: None,
        };
        assert_eq!(p99_missed_here(&here, threaded, &views, &[&failed]), None);
    }
}
