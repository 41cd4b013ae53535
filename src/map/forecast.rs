//! `advise --predict`: one cell's answer from a model of each server ([`crate::model::fit`])
//! fitted on at most [`MAX_POINTS`] points measured on the spot, in seconds: one connection on
//! the leanest server without the wait (the machine's hand-off between the generator and a
//! server), and each architecture at its starting pool in the cell's first window (what a
//! request costs it and the generator under this load, and how long its waits really were).
//! Every candidate (each architecture at each of its pools) is then predicted by MVA with an
//! interval; the pick is the most throughput whose mean latency meets the p99 bound, and the
//! candidates whose intervals overlap the pick's are named as the model's undecided.
//! `--verify` measures the pick at the cell in a full window and says whether it landed
//! inside its interval.

use serde::Serialize;

use super::halving::{smallest_within_tie, Candidate, Cell, Probe};
use super::points::PointRecord;
use super::predictions::{observed, predict_pools, workload_of};
use super::run::{cell_of, probe_once, Progress};
use super::spec::{work_route, CellSpec, MapSpec, WaitMode};
use crate::arch::Arch;
use crate::lab::limit::Limit;
use crate::lab::points::PointLog;
use crate::lab::Lab;
use crate::model::fit::{handoff_us, Fitted};
use crate::render::numbers::{duration_us, thousands, wall_time};

/// The most points a forecast measures (one connection, then one an architecture).
pub const MAX_POINTS: usize = 12;

/// A candidate as the model predicts it at the cell.
#[derive(Debug, Clone, Serialize)]
pub struct ForecastRow {
    /// The candidate, and its label.
    #[serde(skip)]
    pub candidate: Candidate,
    pub label: String,
    /// Throughput, requests a second: the prediction and its interval.
    pub rps: f64,
    pub low: f64,
    pub high: f64,
    /// The mean latency predicted (the cycle less the round trip), ms.
    pub latency_ms: f64,
    /// The bound with the server's own cost counted, and the term that binds.
    pub bound_rps: f64,
    pub binding: String,
    /// The server's CPU a request beyond C and the generator's, fitted, µs.
    pub overhead_us: f64,
    pub generator_us: f64,
    /// The median and p99 predicted (the mean scaled by the ratios the model's points
    /// showed), and the p99's interval, ms (0: no latency measured to scale by).
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p99_low_ms: f64,
    pub p99_high_ms: f64,
    /// The p99 predicted meets the p99 bound (where none is predicted, the mean latency: a
    /// p99 is no lower than the mean).
    pub meets_p99: bool,
}

impl ForecastRow {
    /// Whether a measured throughput lies inside the interval.
    pub fn holds(&self, rps: f64) -> bool {
        (self.low..=self.high).contains(&rps)
    }

    /// Whether two candidates' intervals overlap: the model cannot tell them apart.
    pub fn overlaps(&self, other: &ForecastRow) -> bool {
        self.low <= other.high && other.low <= self.high
    }
}

/// The pick measured at the cell in a full window.
#[derive(Debug, Clone, Serialize)]
pub struct Confirmation {
    pub label: String,
    pub rps: f64,
    pub p99_us: f64,
    pub window_ms: u32,
    /// Its throughput fell inside the interval predicted.
    pub inside: bool,
    /// Its p99 fell inside the p99's interval predicted (`None`: none was predicted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_inside: Option<bool>,
    pub meets_p99: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
}

/// What `advise --predict` found.
#[derive(Debug, Clone, Serialize)]
pub struct Forecast {
    /// The points the models were fitted on, measured now or taken from the point log.
    pub points: usize,
    /// The hand-off a cycle holds beyond both CPUs at one connection here, µs.
    pub handoff_us: f64,
    pub pick: Option<ForecastRow>,
    /// Candidates whose intervals overlap the pick's: the model cannot rank them apart, a
    /// measurement would.
    pub undecided: Vec<String>,
    /// Every architecture at its best pool predicted, most throughput first.
    pub candidates: Vec<ForecastRow>,
    /// Left out: they leave connections unanswered by their shape, or their point failed.
    pub left_out: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<Confirmation>,
}

/// A cell like `cell` at `connections` with no wait: the hand-off's point.
fn cost_cell(cell: &CellSpec, connections: u32) -> CellSpec {
    CellSpec {
        wait: WaitMode::Async,
        ratio: 0.0,
        concurrency: connections,
        wait_ms: 0.0,
        route: work_route(cell.cpu_us, 0.0, WaitMode::Async, None, None),
        key: format!("predict-c{}-n{connections}", cell.cpu_us),
        ..cell.clone()
    }
}

/// An architecture's row: its model's prediction at each of its pools, the smallest pool
/// within [`TIE_FRACTION`](crate::search::rank::TIE_FRACTION) of its best.
fn best_row(
    spec: &MapSpec,
    cell: &Cell,
    arch: Arch,
    model: &Fitted,
    machine: f64,
) -> Option<ForecastRow> {
    let predicted = predict_pools(spec, cell, arch, model, machine);
    let &(c, p) = smallest_within_tie(&predicted)?;
    let latency_ms = p.prediction.latency_us / 1000.0;
    let waits = workload_of(cell).waits();
    Some(ForecastRow {
        candidate: c,
        label: c.label(),
        rps: p.prediction.rps,
        low: p.low,
        high: p.high,
        latency_ms,
        bound_rps: p.prediction.bound_rps,
        binding: model.binding_name(p.prediction.binding).to_string(),
        overhead_us: model.overhead.at(cell.concurrency, cell.cpu_us, waits),
        generator_us: model.generator.at(cell.concurrency, cell.cpu_us, waits),
        p50_ms: p.p50.us / 1000.0,
        p99_ms: p.p99.us / 1000.0,
        p99_low_ms: p.p99.low / 1000.0,
        p99_high_ms: p.p99.high / 1000.0,
        meets_p99: if p.p99.us > 0.0 {
            p.p99.low <= cell.p99_bound_us
        } else {
            latency_ms * 1000.0 <= cell.p99_bound_us
        },
    })
}

/// Forecasts `cell`: the points, the models, every candidate predicted, and with `verify`
/// the pick measured. `None`: interrupted.
pub fn forecast(
    spec: &MapSpec,
    cell: &CellSpec,
    lab: &Lab,
    log: &mut PointLog<PointRecord>,
    progress: &mut Progress,
    verify: bool,
) -> Option<Forecast> {
    let cores = lab.cores();
    let machine = f64::from(cores);
    let real = cell_of(spec, cell, cores, &[]);
    let one = cost_cell(cell, 1);
    let one_cell = cell_of(spec, &one, cores, &[]);
    let probe = |candidate: Candidate, of: &Cell| Probe {
        candidate,
        duration_ms: of.first_window_ms(),
        rep: 0,
    };
    let iterative = Candidate {
        arch: Arch::Iterative,
        workers: None,
    };
    let first = probe_once(spec, &one, lab, log, progress, &probe(iterative, &one_cell))?;
    let handoff_us = handoff_us(1, first.rps, first.cpu_us, first.client_cpu_us, 0.0);
    let starving = real.starving();
    let mut left_out: Vec<String> = starving.iter().map(Candidate::label).collect();
    let mut points = 1;
    let mut rows = Vec::new();
    for c in real.starting_candidates() {
        let sample = probe_once(spec, cell, lab, log, progress, &probe(c, &real))?;
        points += 1;
        if !sample.ok || sample.cpu_us <= 0.0 {
            left_out.push(format!("{} (its point failed)", c.label()));
            continue;
        }
        let obs = [observed(spec, &real, c, &sample, machine)];
        if let Some(model) = Fitted::fit(c.arch.holding(), &obs, handoff_us) {
            rows.extend(best_row(spec, &real, c.arch, &model, machine));
        }
    }
    rows.sort_by(|a, b| b.rps.total_cmp(&a.rps));
    let pick = rows.iter().find(|r| r.meets_p99).cloned();
    let undecided = pick.as_ref().map_or_else(Vec::new, |p| {
        rows.iter()
            .filter(|r| r.label != p.label && r.meets_p99 && r.overlaps(p))
            .map(|r| r.label.clone())
            .collect()
    });
    let confirmation = match (&pick, verify) {
        (Some(p), true) => Some(confirm(spec, cell, &real, lab, log, progress, p)?),
        _ => None,
    };
    Some(Forecast {
        points,
        handoff_us,
        pick,
        undecided,
        candidates: rows,
        left_out,
        confirmation,
    })
}

/// The pick measured at the cell in a full window ([`Cell::full_window_ms`]).
fn confirm(
    spec: &MapSpec,
    cell: &CellSpec,
    real: &Cell,
    lab: &Lab,
    log: &mut PointLog<PointRecord>,
    progress: &mut Progress,
    pick: &ForecastRow,
) -> Option<Confirmation> {
    let window_ms = real.full_window_ms();
    let probe = Probe {
        candidate: pick.candidate,
        duration_ms: window_ms,
        rep: 0,
    };
    let sample = probe_once(spec, cell, lab, log, progress, &probe)?;
    Some(Confirmation {
        label: pick.label.clone(),
        rps: sample.rps,
        p99_us: sample.p99_us,
        window_ms,
        inside: pick.holds(sample.rps),
        p99_inside: (pick.p99_ms > 0.0).then(|| {
            (pick.p99_low_ms * 1000.0..=pick.p99_high_ms * 1000.0).contains(&sample.p99_us)
        }),
        meets_p99: sample.meets(real.p99_bound_us),
        limit: sample.limit,
    })
}

/// What `advise --predict --json` prints.
#[derive(Debug, Clone, Serialize)]
pub struct PredictedAdvice {
    pub cpu_us: f64,
    pub wait_ms: f64,
    pub wait: WaitMode,
    pub concurrency: u32,
    pub p99_bound_ms: f64,
    pub route: String,
    pub forecast: Forecast,
    /// The points measured by this run (the rest came from the point log of `--out`).
    pub points_measured: usize,
    pub wall_s: f64,
}

/// A row in words: `1,850 req/s (1,700 to 1,990), bound by cores; mean latency 34.6 ms,
/// p50 33.1 ms, p99 41.0 ms (37.7 ms to 44.3 ms)`.
fn row_words(r: &ForecastRow) -> String {
    format!(
        "{} req/s ({} to {}), bound by {}; mean latency {}{}",
        thousands(r.rps),
        thousands(r.low),
        thousands(r.high),
        r.binding,
        duration_us(r.latency_ms * 1000.0),
        if r.p99_ms > 0.0 {
            format!(
                ", p50 {}, p99 {} ({} to {})",
                duration_us(r.p50_ms * 1000.0),
                duration_us(r.p99_ms * 1000.0),
                duration_us(r.p99_low_ms * 1000.0),
                duration_us(r.p99_high_ms * 1000.0)
            )
        } else {
            String::new()
        }
    )
}

/// The forecast in words.
pub fn text(a: &PredictedAdvice) -> String {
    let f = &a.forecast;
    let mut out = format!(
        "sweetspot advise --predict: {} of CPU and {} a request, {} connections, p99 \
         under {}\n  the model: fitted on {} points (one connection on iterative without the \
         wait; each architecture at its starting pool at {} connections), {} measured now, in \
         {}; each cycle's hand-off here {}\n",
        duration_us(a.cpu_us),
        if a.wait_ms > 0.0 {
            format!(
                "{} of {} wait",
                duration_us(a.wait_ms * 1000.0),
                a.wait.name()
            )
        } else {
            "no wait".to_string()
        },
        a.concurrency,
        duration_us(a.p99_bound_ms * 1000.0),
        f.points,
        a.concurrency,
        a.points_measured
            .saturating_sub(usize::from(f.confirmation.is_some())),
        wall_time(a.wall_s),
        duration_us(f.handoff_us)
    );
    match &f.pick {
        Some(p) => {
            out.push_str(&format!(
                "  predicted pick: {}: {}\n",
                p.label,
                row_words(p)
            ));
            if !f.undecided.is_empty() {
                out.push_str(&format!(
                    "  the model cannot tell it from: {} (their intervals overlap its)\n",
                    f.undecided.join(", ")
                ));
            }
        }
        None => out.push_str("  predicted pick: none meets the p99 bound\n"),
    }
    match (&f.confirmation, &f.pick) {
        (Some(c), Some(p)) => out.push_str(&format!(
            "  measured: {} at {} req/s in {}, p99 {}: {} its interval ({} to {}){}{}\n",
            c.label,
            thousands(c.rps),
            duration_us(f64::from(c.window_ms) * 1000.0),
            duration_us(c.p99_us),
            if c.inside { "inside" } else { "outside" },
            thousands(p.low),
            thousands(p.high),
            match c.p99_inside {
                Some(inside) => format!(
                    "; its p99 {} the p99's ({} to {})",
                    if inside { "inside" } else { "outside" },
                    duration_us(p.p99_low_ms * 1000.0),
                    duration_us(p.p99_high_ms * 1000.0)
                ),
                None => String::new(),
            },
            c.limit
                .as_ref()
                .map(|l| format!("; what limited it: {}: {}", l.kind.name(), l.evidence))
                .unwrap_or_default()
        )),
        (None, Some(p)) => out.push_str(&format!(
            "  to confirm: the same with --verify measures {} at {} connections in a full \
             window\n",
            p.label, a.concurrency
        )),
        _ => {}
    }
    out.push_str(&candidates_text(f));
    out
}

/// Every candidate predicted, a line each, and what was left out.
fn candidates_text(f: &Forecast) -> String {
    let mut out = String::new();
    out.push_str(
        "  every candidate at its best pool (req/s predicted, interval, the term that binds, \
         mean latency; the server's CPU a request beyond C and the generator's):\n",
    );
    for r in &f.candidates {
        out.push_str(&format!(
            "    {:<16} {:>9} {:>21} {:<6} {:>9}  {} + {}{}\n",
            r.label,
            thousands(r.rps),
            format!("{} to {}", thousands(r.low), thousands(r.high)),
            r.binding,
            duration_us(r.latency_ms * 1000.0),
            duration_us(r.overhead_us),
            duration_us(r.generator_us),
            if r.meets_p99 {
                ""
            } else {
                "  (misses the p99 bound)"
            }
        ));
    }
    if !f.left_out.is_empty() {
        out.push_str(&format!("  left out: {}\n", f.left_out.join(", ")));
    }
    out
}
