//! What a cell's search found: the [`Outcome`] with its winner, ties and rules, a
//! [`CandidateRow`] per candidate, and the decisions that say why each one left.

use serde::{Deserialize, Serialize};

use super::*;
use crate::lab::limit::Limit;
use crate::search::rank::{Figure, Level};
use crate::search::{level_of, Sample};

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
    /// Why it missed the bound, when its p99 alone does not say: requests left unanswered
    /// (the p99 only a lower bound), or more than 1% of them failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed_because: Option<String>,
    /// Measured; `false`: its own bound is clearly under the sweet spot's throughput, so `rps`
    /// is that bound (at most what it would serve) and `rps_loss` the least it loses.
    #[serde(default = "yes")]
    pub measured: bool,
    /// What limited its last run, with the evidence (`None`: not measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
    /// Not measured: `rps` is the model's prediction, within this interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted: Option<(f64, f64)>,
}

pub(super) fn yes() -> bool {
    true
}

/// One measured candidate as the tables show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateRow {
    pub label: String,
    /// The throughput that counts (0: its p99 missed the bound), mean and range.
    pub rps: (f64, f64, f64),
    /// Its measured throughput, whether or not the p99 met the bound.
    pub measured_rps: f64,
    pub p99_us: f64,
    pub p99_lower_bound: bool,
    pub cpu_us: f64,
    pub rss_kb: f64,
    pub threads: u64,
    pub processes: u64,
    /// The run length the figures are from (the candidate's longest), and how many runs.
    #[serde(default)]
    pub window_ms: u32,
    #[serde(default)]
    pub runs: u32,
    /// What limited its last run, with the evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
    /// Its own bound, requests a second (the mean of its runs'): its CPU a request on the
    /// cores the load generator left it, and each cycle's
    /// ([`crate::lab::limit::own_bound_rps`]; 0: not known).
    #[serde(default)]
    pub bound_rps: f64,
}

/// A candidate as the model predicted it, and as measured (at its longest runs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredictionRow {
    pub label: String,
    /// Requests a second: the prediction and its interval.
    pub rps: f64,
    pub low: f64,
    pub high: f64,
    pub binding: crate::model::Binding,
    /// Its mean measured throughput (`None`: left out unmeasured), and the run length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_rps: Option<f64>,
    #[serde(default)]
    pub window_ms: u32,
    /// The predicted median and p99 latency, µs, the p99's interval (0: the model had no
    /// latency measured to scale by), and the p99 measured (with `measured_rps`).
    #[serde(default)]
    pub p50_us: f64,
    #[serde(default)]
    pub p99_us: f64,
    #[serde(default)]
    pub p99_low: f64,
    #[serde(default)]
    pub p99_high: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_p99_us: Option<f64>,
}

impl PredictionRow {
    /// The model's miss on it, a share of the measurement (positive: it predicted more).
    pub fn miss(&self) -> Option<f64> {
        self.measured_rps
            .filter(|m| *m > 0.0)
            .map(|m| self.rps / m - 1.0)
    }

    /// The model's miss on its p99, a share of the measured one (`None`: either unknown).
    pub fn p99_miss(&self) -> Option<f64> {
        let measured = self.measured_p99_us.filter(|m| *m > 0.0)?;
        (self.p99_us > 0.0).then(|| self.p99_us / measured - 1.0)
    }

    /// Whether the measured p99 fell inside the predicted p99's interval (`None`: either
    /// unknown).
    pub fn p99_inside(&self) -> Option<bool> {
        self.p99_miss()?;
        self.measured_p99_us
            .map(|m| (self.p99_low..=self.p99_high).contains(&m))
    }

    /// Whether the measurement fell inside the interval.
    pub fn inside(&self) -> Option<bool> {
        self.measured_rps
            .map(|m| (self.low..=self.high).contains(&m))
    }
}

/// The predictions of the candidates measured in a search, and of those it left out by them.
pub(super) fn prediction_rows(s: &Search) -> Vec<PredictionRow> {
    let mut seen = std::collections::BTreeSet::new();
    s.samples
        .0
        .keys()
        .map(|(c, _)| *c)
        .chain(s.predicted_out.iter().copied())
        .chain(s.over_budget.iter().copied())
        .filter(|c| seen.insert(*c))
        .filter_map(|c| {
            let p = s.cell.predicted(c)?;
            let samples = s.samples.longest(c);
            Some(PredictionRow {
                label: c.label(),
                rps: p.prediction.rps,
                low: p.low,
                high: p.high,
                binding: p.prediction.binding,
                measured_rps: (!samples.is_empty()).then(|| super::mean_rps(samples)),
                window_ms: s.samples.longest_ms(c).unwrap_or(0),
                p50_us: p.p50.us,
                p99_us: p.p99.us,
                p99_low: p.p99.low,
                p99_high: p.p99.high,
                measured_p99_us: (!samples.is_empty())
                    .then(|| samples.iter().map(|x| x.p99_us).sum::<f64>() / samples.len() as f64),
            })
        })
        .collect()
}

/// What the search found for one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The best candidate whose p99 meets the bound (`None`: none did).
    pub winner: Option<Candidate>,
    pub rps: f64,
    pub p99_us: f64,
    /// Candidates indistinguishable from the winner on every figure (labels).
    pub ties: Vec<String>,
    /// The figure that told the winner from the rest (`None`: a tie, or no winner).
    #[serde(default)]
    pub decided_by: Option<Figure>,
    /// The best of the rest, and the winner's throughput margin over it (a fraction).
    pub runner_up: Option<String>,
    pub margin: Option<f64>,
    /// The pool sizes named in [`Cell::rules`], measured on the winner's architecture.
    pub rules: Vec<RuleOutcome>,
    /// Rounds of halving run, and the final run length.
    pub rounds: u32,
    pub final_ms: u32,
    /// The cell's physical bound, `min(cores / C, N / (C + W))`, requests a second.
    #[serde(default)]
    pub bound_rps: f64,
    /// Why no server could meet the p99 bound, when that was known before measuring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infeasible: Option<String>,
    /// Every candidate as measured last: the winner, the rest of the verdict's field, the rest
    /// of the halving's, the rules' pools.
    #[serde(default)]
    pub candidates: Vec<CandidateRow>,
    /// Left out unmeasured: they starve connections by their shape ([`Cell::starving`]).
    #[serde(default)]
    pub starving: Vec<String>,
    /// Left out unmeasured: their own bound ([`Cell::candidate_bound_rps`]) is below what a
    /// candidate measured before them already reached.
    #[serde(default)]
    pub outclassed: Vec<String>,
    /// Left out unmeasured: the winner, measured before them, was beyond their reach
    /// (`decided_by` [`Figure::Bound`]).
    #[serde(default)]
    pub unneeded: Vec<String>,
    /// Left out unmeasured: the model's interval for them lay under what another measured
    /// ([`Cell::forecast`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub predicted_out: Vec<String>,
    /// Left out unmeasured by the run's budget: the model predicted them (their rows in
    /// `predictions`), lower than those measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub over_budget: Vec<String>,
    /// The points the budget allowed this cell (`None`: no budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowance: Option<usize>,
    /// The model's prediction of each candidate measured or left out by it, beside what was
    /// measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub predictions: Vec<PredictionRow>,
    /// For each candidate whose row shows more throughput or a lower p99 than the winner's:
    /// what decided against it, on which runs ([`decisions`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<String>,
}

impl Outcome {
    /// The winner's throughput as a fraction of its own bound, which counts what a request
    /// cost it and the load generator's share of the machine ([`Outcome::own_bound_rps`]), or
    /// of the workload's where that is not known.
    pub fn of_bound(&self) -> Option<f64> {
        let bound = self.own_bound_rps().unwrap_or(self.bound_rps);
        (self.winner.is_some() && bound > 0.0).then(|| self.rps / bound)
    }

    /// The winner's throughput as a fraction of the workload's physical bound,
    /// `min(cores / C, N / (C + W))`.
    pub fn of_workload_bound(&self) -> Option<f64> {
        (self.winner.is_some() && self.bound_rps > 0.0).then(|| self.rps / self.bound_rps)
    }

    /// The winner's own bound, where its runs measured one.
    pub fn own_bound_rps(&self) -> Option<f64> {
        self.winner_row().map(|r| r.bound_rps).filter(|b| *b > 0.0)
    }

    /// The winner's row in [`Outcome::candidates`].
    pub fn winner_row(&self) -> Option<&CandidateRow> {
        let label = self.winner?.label();
        self.candidates.iter().find(|r| r.label == label)
    }
}

/// The row of a candidate's samples.
pub(super) fn row_of(
    label: String,
    samples: &[Sample],
    p99_bound_us: f64,
    window_ms: u32,
) -> CandidateRow {
    let level = level_of(samples, p99_bound_us);
    let last = samples.last();
    CandidateRow {
        window_ms,
        runs: samples.len() as u32,
        label,
        rps: level.rps,
        measured_rps: super::mean_rps(samples),
        p99_us: level.p99_us,
        p99_lower_bound: samples.iter().any(|s| s.p99_lower_bound),
        cpu_us: level.cpu_us,
        rss_kb: level.rss_kb,
        threads: last.map_or(0, |s| s.threads),
        processes: last.map_or(0, |s| s.processes),
        limit: last.and_then(|s| s.limit.clone()),
        bound_rps: mean_known(samples.iter().map(|s| s.bound_rps)),
    }
}

/// The mean of the known (positive) values, 0 where none is.
fn mean_known(values: impl Iterator<Item = f64>) -> f64 {
    let known: Vec<f64> = values.filter(|v| *v > 0.0).collect();
    if known.is_empty() {
        0.0
    } else {
        known.iter().sum::<f64>() / known.len() as f64
    }
}

pub(super) fn labels(cs: &[Candidate]) -> Vec<String> {
    cs.iter().map(Candidate::label).collect()
}

/// An outcome without a winner.
pub(super) fn no_winner(
    cell: &Cell,
    rounds: u32,
    final_ms: u32,
    infeasible: Option<String>,
    candidates: Vec<CandidateRow>,
) -> Outcome {
    Outcome {
        winner: None,
        rps: 0.0,
        p99_us: 0.0,
        ties: Vec::new(),
        decided_by: None,
        runner_up: None,
        margin: None,
        rules: Vec::new(),
        rounds,
        final_ms,
        bound_rps: cell.bound_rps(),
        infeasible,
        candidates,
        starving: labels(&cell.starving()),
        outclassed: Vec::new(),
        unneeded: Vec::new(),
        predicted_out: Vec::new(),
        over_budget: Vec::new(),
        allowance: cell.allowance,
        predictions: Vec::new(),
        decisions: Vec::new(),
    }
}

/// The rows of some candidates (each once), as measured.
pub(super) fn rows(s: &Search, cs: &[Candidate]) -> Vec<CandidateRow> {
    let mut seen = std::collections::BTreeSet::new();
    cs.iter()
        .filter(|c| seen.insert(**c))
        .filter(|c| !s.samples.longest(**c).is_empty())
        .map(|c| {
            let ms = s.samples.longest_ms(*c).unwrap_or(0);
            row_of(c.label(), s.samples.longest(*c), s.cell.p99_bound_us, ms)
        })
        .collect()
}

/// For each of `shown` whose figures (at its longest runs) show more throughput or a lower p99
/// than the winner's, one sentence: what decided against it and on which runs. In the final
/// `field`, the verdict's ranking, by the figure that left it out; measured only before (the
/// halving, the pool search, a rule's pool after the verdict), the winner and it compared at
/// its run length, as the search compared them.
pub(super) fn decisions(
    s: &Search,
    final_ms: u32,
    field: &[Candidate],
    winner: Candidate,
    ties: &[Candidate],
    shown: &[Candidate],
) -> Vec<String> {
    use crate::render::numbers::{duration_us, thousands};
    let tolerance = s.cell.p99_tolerance();
    let w = s.level(winner);
    let w_runs = runs_text(s, winner, None);
    let field_levels: Vec<Level> = field.iter().map(|c| s.level(*c)).collect();
    let field_why = crate::search::rank::left_by(&field_levels, tolerance);
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for &c in shown {
        if c == winner || ties.contains(&c) || !seen.insert(c) {
            continue;
        }
        let l = s.level(c);
        let more = l.rps.0 > w.rps.0;
        let lower = l.rps.0 > 0.0 && l.p99_us < w.p99_us;
        if !(more || lower) {
            continue;
        }
        let shows = match (more, lower) {
            (true, true) => format!(
                "more throughput ({} req/s) and a lower p99 ({})",
                thousands(l.rps.0),
                duration_us(l.p99_us)
            ),
            (true, false) => format!("more throughput ({} req/s)", thousands(l.rps.0)),
            _ => format!("a lower p99 ({})", duration_us(l.p99_us)),
        };
        let search_figures = search_figures(s, c, final_ms);
        let rule = if rules_candidates(s.cell, winner).contains(&c) && !field.contains(&c) {
            ", a rule of thumb's pool measured after the verdict"
        } else {
            ""
        };
        let head = format!(
            "{}{rule} shows {shows} than {} ({} req/s, p99 {}), from {}{search_figures}; {}'s \
             from {w_runs}",
            c.label(),
            winner.label(),
            thousands(w.rps.0),
            duration_us(w.p99_us),
            runs_text(s, c, None),
            winner.label(),
        );
        let why = match field.iter().position(|f| *f == c) {
            Some(i) => left_in_verdict(field, &field_levels, field_why[i], &l),
            None => why_before_the_verdict(s, c, winner),
        };
        out.push(format!("{head}: {why}."));
    }
    out
}

/// Where a candidate's figures come from longer runs than the search's: the search's own
/// beside them (` (in the search's 3 runs of 400 ms: 1,234 req/s, p99 2.0 ms)`), else nothing.
fn search_figures(s: &Search, c: Candidate, final_ms: u32) -> String {
    use crate::render::numbers::{duration_us, thousands};
    if s.samples.longest_ms(c) <= Some(final_ms) || s.samples.at(c, final_ms).is_empty() {
        return String::new();
    }
    let searched = s.level_at(c, final_ms);
    format!(
        " (in the search's {}: {} req/s, p99 {})",
        runs_text(s, c, Some(final_ms)),
        thousands(searched.rps.0),
        duration_us(searched.p99_us)
    )
}

/// Why the verdict's ranking left out a candidate of its field whose level is `l`: `left`, the
/// figure that did and the candidate it lost to (none: its p99 missed the bound).
fn left_in_verdict(
    field: &[Candidate],
    levels: &[Level],
    left: Option<(Figure, usize)>,
    l: &Level,
) -> String {
    use crate::render::numbers::thousands;
    match left {
        Some((Figure::Throughput, best)) => format!(
            "the verdict's ranking left it outside {}'s throughput spread ({} against {})",
            field[best].label(),
            thousands(l.rps.0),
            thousands(levels[best].rps.0)
        ),
        Some((figure, best)) => format!(
            "inside the throughput spread, the verdict's ranking left it out on {}: {} \
             against {}'s {}",
            figure.name(),
            figure_of(figure, l),
            field[best].label(),
            figure_of(figure, &levels[best])
        ),
        None => "its p99 missed the bound in the verdict's runs".to_string(),
    }
}

/// A figure of a level, in words: `1,234 req/s`, `12.0 ms`.
fn figure_of(f: Figure, l: &Level) -> String {
    use crate::render::numbers::{duration_us, thousands};
    match f {
        Figure::Throughput | Figure::Bound => format!("{} req/s", thousands(l.rps.0)),
        Figure::P99 => duration_us(l.p99_us),
        Figure::Cpu => format!("{} CPU a request", duration_us(l.cpu_us)),
        Figure::Memory => format!("{:.1} MiB", l.rss_kb / 1024.0),
    }
}

/// Why `c`, measured only before the verdict, lost to `winner`: the two compared at `c`'s
/// longest run length, as the search compared them.
fn why_before_the_verdict(s: &Search, c: Candidate, winner: Candidate) -> String {
    use crate::render::numbers::{duration_us, thousands};
    let l = s.level(c);
    let ms = s.samples.longest_ms(c).unwrap_or(0);
    let at = s.level_at(winner, ms);
    if s.samples.at(winner, ms).is_empty() || at.rps.0 <= 0.0 {
        return format!(
            "it was not measured in the verdict's runs, and {} not in its {} ones",
            winner.label(),
            duration_us(f64::from(ms) * 1000.0)
        );
    }
    let pair = crate::search::rank::rank_with(&[at, l], s.cell.p99_tolerance());
    let verdict = match pair.as_ref().map(|r| (r.winner, r.decided_by)) {
        Some((0, Some(f))) => format!(
            "{} was ahead on {}: {} against {}",
            winner.label(),
            f.name(),
            figure_of(f, &at),
            figure_of(f, &l)
        ),
        Some((0, None)) | Some((1, None))
            if c.arch == winner.arch && c.workers > winner.workers =>
        {
            "the two were indistinguishable there, and of pools as good as the best the \
             smallest is kept"
                .to_string()
        }
        Some((0, None)) | Some((1, None)) => "the two were indistinguishable there".to_string(),
        _ => format!(
            "{} was ahead there; the search kept {} on longer runs",
            c.label(),
            winner.label()
        ),
    };
    format!(
        "at its run length {} measured {} req/s, p99 {} ({}): {verdict}",
        winner.label(),
        thousands(at.rps.0),
        duration_us(at.p99_us),
        runs_text(s, winner, Some(ms)),
    )
}

/// `2 runs of 3.0 s` for a candidate's longest runs, or those of length `ms`.
pub(super) fn runs_text(s: &Search, c: Candidate, ms: Option<u32>) -> String {
    let ms = ms.or_else(|| s.samples.longest_ms(c)).unwrap_or(0);
    let n = s.samples.at(c, ms).len();
    format!(
        "{n} run{} of {}",
        if n == 1 { "" } else { "s" },
        crate::render::numbers::duration_us(f64::from(ms) * 1000.0)
    )
}
