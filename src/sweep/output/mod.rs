//! Outputs of a sweep: one file per format behind one small trait.
//!
//! Each [`Exporter`] turns a [`SweepResults`] into files in the output directory: JSON
//! ([`json`]), the study-style Markdown table ([`markdown`]), a CSV row per point ([`csv`]),
//! SVG plots ([`svg`]) and the self-contained HTML report ([`html`]). The terminal summary
//! ([`terminal`]) prints instead of writing. The tables every text format shares are built once here ([`workload_tables`]), so
//! Markdown, HTML and the terminal agree cell for cell.

pub mod csv;
pub mod html;
pub mod json;
pub mod markdown;
pub mod svg;
pub mod terminal;
pub mod why;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::analysis::recommend::usl_series_name;
use super::analysis::{series_label, UslSeries, MAX_ERROR_RATE};
use super::results::{PointResult, SweepResults};
use crate::load::LatencyKey;
pub use crate::render::latency_figure;
pub use crate::render::numbers::{duration_us, percent, thousands};

/// Writes one output format into a directory.
pub trait Exporter {
    /// The format's name, for messages.
    fn name(&self) -> &'static str;
    /// Writes the files and returns their paths.
    fn export(&self, results: &SweepResults, dir: &Path) -> anyhow::Result<Vec<PathBuf>>;
}

/// Writes `text` to `dir/name`: the one file an exporter writes.
fn write_one(dir: &Path, name: &str, text: &str) -> anyhow::Result<Vec<PathBuf>> {
    let path = dir.join(name);
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(vec![path])
}

/// Every file format, in the order they are written (JSON first: it is the record).
pub fn exporters() -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(json::JsonExporter),
        Box::new(markdown::MarkdownExporter),
        Box::new(csv::CsvExporter),
        Box::new(svg::SvgExporter),
        Box::new(html::HtmlExporter),
    ]
}

/// Writes every format; returns every file written.
pub fn write_all(results: &SweepResults, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))?;
    let mut written = Vec::new();
    for exporter in exporters() {
        let files = exporter
            .export(results, dir)
            .map_err(|e| e.context(format!("writing {}", exporter.name())))?;
        written.extend(files);
    }
    Ok(written)
}

/// A file-name-safe version of a workload name.
pub fn file_stem(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Past this many series, the study grid lists architectures as rows instead of columns.
pub const MAX_SERIES_AS_COLUMNS: usize = 6;

/// A table of text cells with a title and footnotes. A table without a header has nothing to
/// show: its title is the whole message, printed as one line.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Table {
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub notes: Vec<String>,
    /// Text shown on hover over a cell (row, column), in the HTML report.
    pub hovers: BTreeMap<(usize, usize), String>,
}

/// The series of a workload in the order the experiment lists them: (arch, workers).
pub fn series_of(points: &[&PointResult]) -> Vec<(String, Option<u32>)> {
    let mut seen = BTreeSet::new();
    let mut series = Vec::new();
    for p in points {
        let key = p.series_key();
        if seen.insert(key.clone()) {
            series.push(key);
        }
    }
    series
}

/// The points of one workload.
pub fn points_of<'a>(results: &'a SweepResults, workload: &str) -> Vec<&'a PointResult> {
    results
        .points
        .iter()
        .filter(|p| p.workload == workload)
        .collect()
}

/// The distinct concurrency levels, ascending.
pub fn levels_of(points: &[&PointResult]) -> Vec<u32> {
    let set: BTreeSet<u32> = points.iter().map(|p| p.concurrency).collect();
    set.into_iter().collect()
}

fn mark(p: &PointResult) -> String {
    let mut m = String::new();
    if p.error_rate() > MAX_ERROR_RATE {
        m.push('*');
    }
    if p.generator_bound {
        m.push('g');
    }
    if p.starved {
        m.push('~');
    }
    m
}

/// A latency figure of a point (`key` as in [`crate::load::LatencyKey`]), with
/// `>= ` before it when it is only a lower bound.
pub fn latency_cell(p: &PointResult, key: LatencyKey) -> String {
    let l = &p.figures.latency_us;
    let value = match key {
        LatencyKey::P50 => l.p50,
        LatencyKey::P90 => l.p90,
        LatencyKey::P99 => l.p99,
        LatencyKey::P999 => l.p999,
        LatencyKey::Mean => l.mean,
        LatencyKey::Max => l.max,
        _ => f64::NAN,
    };
    latency_figure(value, l.lower_bound.contains(key))
}

/// Whether a point was measured more than once (and so has a spread to show).
pub fn repeated(p: &PointResult) -> bool {
    p.spread.repetitions > 1
}

/// `1,950..2,250`: the point's throughput over its repetitions.
pub fn rps_spread_text(p: &PointResult) -> String {
    format!(
        "{}..{}",
        thousands(p.spread.rps_min),
        thousands(p.spread.rps_max)
    )
}

/// `1.0 ms..>= 2.00 s`: the point's p99 over its repetitions, each end marked when the run it
/// came from had only a lower bound.
pub fn p99_spread_text(p: &PointResult) -> String {
    let end = |value: f64| {
        let lower = p
            .runs
            .iter()
            .find(|r| r.figures.latency_us.p99 == value)
            .is_some_and(|r| r.figures.latency_us.lower_bound.contains(LatencyKey::P99));
        latency_figure(value, lower)
    };
    format!("{}..{}", end(p.spread.p99_min), end(p.spread.p99_max))
}

fn rps_cell(p: &PointResult) -> String {
    if !p.ok {
        return "failed".into();
    }
    let mut cell = format!("{}{}", thousands(p.figures.rps), mark(p));
    if repeated(p) {
        cell.push_str(&format!(" ({})", rps_spread_text(p)));
    }
    cell
}

fn p99_cell(p: &PointResult) -> String {
    if !p.ok {
        return "failed".into();
    }
    let mut cell = format!("{}{}", latency_cell(p, LatencyKey::P99), mark(p));
    if repeated(p) {
        cell.push_str(&format!(" ({})", p99_spread_text(p)));
    }
    cell
}

/// The footnote of the `~` mark, the same wherever the mark is shown.
pub const STARVED_NOTE: &str = "`~` the load did not reach the server as intended (closed loop): \
    some requests were never answered (in flight when the run ended, or timed out), or by \
    Little's law fewer requests were in flight than connections offered";

/// The footnotes explaining the marks the points carry (a mark no point carries is not
/// explained).
fn mark_notes(points: &[&PointResult]) -> Vec<String> {
    let mut notes = Vec::new();
    if points.iter().any(|p| p.error_rate() > MAX_ERROR_RATE) {
        notes.push(format!(
            "`*` more than {} of requests failed or timed out",
            percent(MAX_ERROR_RATE)
        ));
    }
    if points.iter().any(|p| p.generator_bound) {
        notes.push("`g` the load generator, not the server, was saturated".to_string());
    }
    if points.iter().any(|p| p.starved) {
        notes.push(STARVED_NOTE.to_string());
    }
    if points
        .iter()
        .any(|p| !p.figures.latency_us.lower_bound.is_empty())
    {
        notes.push(
            "`>=` a lower bound: requests still unanswered when the run ended (or timed out) \
             would only raise it"
                .to_string(),
        );
    }
    if let Some(n) = points.iter().map(|p| p.spread.repetitions).max() {
        if n > 1 {
            notes.push(format!(
                "`(a..b)` min..max over the repetitions of a point (up to {n}); the value before \
                 it is the median run's"
            ));
        }
    }
    notes
}

/// The tables for one workload: the study-style grid (rows concurrency, columns
/// architectures) when there are several levels, else one row per architecture with its
/// measurements side by side; then the per-point details.
pub fn workload_tables(results: &SweepResults, workload: &str) -> Vec<Table> {
    let points = points_of(results, workload);
    if points.is_empty() {
        return Vec::new();
    }
    let series = series_of(&points);
    let levels = levels_of(&points);
    let mut tables = Vec::new();
    let labels: Vec<String> = series.iter().map(|(a, w)| series_label(a, *w)).collect();
    let find = |s: &(String, Option<u32>), c: u32| {
        points
            .iter()
            .copied()
            .find(|p| p.series_key() == *s && p.concurrency == c)
    };
    if levels.len() > 1 {
        // The study's grid has architectures as columns; past a handful of them it is wider
        // than a page, so they become rows (and the levels columns).
        let transposed = series.len() > MAX_SERIES_AS_COLUMNS;
        for (title, cell) in [
            ("requests/second", rps_cell as fn(&PointResult) -> String),
            ("p99 latency", p99_cell),
        ] {
            let (header, rows) = if transposed {
                let mut header = vec!["arch \\ connections".to_string()];
                header.extend(levels.iter().map(|&c| thousands(f64::from(c))));
                let rows = series
                    .iter()
                    .zip(&labels)
                    .map(|(s, label)| {
                        let mut row = vec![label.clone()];
                        row.extend(
                            levels
                                .iter()
                                .map(|&c| find(s, c).map_or(String::new(), cell)),
                        );
                        row
                    })
                    .collect();
                (header, rows)
            } else {
                let mut header = vec!["concurrency".to_string()];
                header.extend(labels.iter().cloned());
                let rows = levels
                    .iter()
                    .map(|&c| {
                        let mut row = vec![thousands(f64::from(c))];
                        row.extend(
                            series
                                .iter()
                                .map(|s| find(s, c).map_or(String::new(), cell)),
                        );
                        row
                    })
                    .collect();
                (header, rows)
            };
            tables.push(Table {
                title: format!("{workload}: {title}"),
                header,
                rows,
                notes: mark_notes(&points),
                hovers: BTreeMap::new(),
            });
        }
    }
    if let Some(table) = budget_table(workload, &points) {
        tables.push(table);
    }
    tables.push(details_table(workload, &points, levels.len() > 1));
    if let Some(table) = usl_table(results, workload) {
        tables.push(table);
    }
    tables
}

/// The title's end of the table of budgets, which the terminal shows beside the headline.
pub const BUDGET_TITLE: &str = ": under each budget";

/// Where points ran under a quota or as replicas: each point's shape (copies x cores), what it
/// delivered, its memory (all copies together), how often its quota ran out, and the
/// connections each copy held.
fn budget_table(workload: &str, points: &[&PointResult]) -> Option<Table> {
    if !points
        .iter()
        .any(|p| p.figures.server.quota_cores > 0.0 || p.figures.server.replicas > 1)
    {
        return None;
    }
    let header = [
        "arch",
        "conns",
        "shape",
        "req/s",
        "p99",
        "server CPU",
        "throttled",
        "throttled/req",
        "RSS",
        "connections each",
    ]
    .map(String::from)
    .to_vec();
    let rows = points.iter().map(|p| budget_row(p)).collect();
    Some(Table {
        title: format!("{workload}{BUDGET_TITLE}"),
        header,
        rows,
        notes: vec![
            "shape: copies x each one's CPU quota; throttled: the share of 100 ms periods in \
             which a quota ran out, and per request the time its tasks stood still for it \
             (summed over the CPUs); RSS: all copies together; connections each: held by each \
             copy halfway through"
                .into(),
        ],
        hovers: BTreeMap::new(),
    })
}

/// One point's row of [`budget_table`].
fn budget_row(p: &PointResult) -> Vec<String> {
    let s = &p.figures.server;
    let copies = s.replicas.max(1);
    let shape = if s.quota_cores > 0.0 {
        format!(
            "{copies} x {}",
            crate::lab::budget::cores_words(s.quota_cores)
        )
    } else {
        format!("{copies} x the machine")
    };
    let (throttled, per_request) = if s.quota_periods > 0 {
        (
            percent(s.throttled_periods as f64 / s.quota_periods as f64),
            duration_us(s.throttled_s * 1e6 / s.answered_at_least(p.figures.requests) as f64),
        )
    } else {
        ("-".into(), "-".into())
    };
    let each = p
        .runs
        .first()
        .filter(|r| !r.replica_connections.is_empty())
        .map(|r| {
            r.replica_connections
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(" / ")
        })
        .unwrap_or_else(|| "-".into());
    vec![
        series_label(&p.arch, p.workers),
        thousands(f64::from(p.concurrency)),
        shape,
        rps_cell(p),
        p99_cell(p),
        format!(
            "{:.2} cores",
            s.cpu_s / s.window_s.max(p.figures.duration_s).max(1e-9)
        ),
        throttled,
        per_request,
        format!("{:.1} MB", s.rss_kb as f64 / 1024.0),
        each,
    ]
}

/// The USL fits of a workload's series, and the series that were too short to fit.
fn usl_table(results: &SweepResults, workload: &str) -> Option<Table> {
    let analysed = results
        .analysis
        .workloads
        .iter()
        .find(|w| w.workload == workload)?;
    if analysed.usl.is_empty() {
        return None;
    }
    let (fitted, unfitted): (Vec<&UslSeries>, Vec<&UslSeries>) =
        analysed.usl.iter().partition(|u| u.fit.is_some());
    let unfitted_line = format!(
        "not fitted, fewer than {} levels: {}",
        crate::model::usl::MIN_LEVELS,
        unfitted
            .iter()
            .map(|u| format!("{} ({})", usl_series_name(u), u.levels))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if fitted.is_empty() {
        return Some(Table {
            title: format!(
                "{workload}: USL: not fitted, fewer than {} levels in every series",
                crate::model::usl::MIN_LEVELS
            ),
            ..Table::default()
        });
    }
    let header = [
        "series",
        "levels",
        "sigma",
        "kappa",
        "lambda (req/s)",
        "R^2",
        "limit",
        "peak N*",
        "X_max (req/s)",
        "measured best N",
    ];
    let rows = fitted.iter().map(|u| usl_row(u, header.len())).collect();
    Some(Table {
        title: format!("{workload}: Universal Scalability Law fits"),
        header: header.iter().map(|h| h.to_string()).collect(),
        rows,
        notes: usl_notes()
            .into_iter()
            .chain((!unfitted.is_empty()).then_some(unfitted_line))
            .collect(),
        hovers: BTreeMap::new(),
    })
}

/// One fitted series' row of [`usl_table`], `columns` wide.
fn usl_row(u: &UslSeries, columns: usize) -> Vec<String> {
    let mut row = vec![usl_series_name(u), u.levels.to_string()];
    match u.fit {
        Some(fit) => row.extend([
            format!("{:.4}", fit.sigma),
            format!("{:.6}", fit.kappa),
            thousands(fit.lambda),
            format!("{:.3}", fit.r_squared),
            u.limit.map_or("-".into(), |l| l.to_string()),
            u.predicted_peak_n
                .map_or("none".into(), |n| format!("{n:.1}")),
            match (u.predicted_peak_rps, u.ceiling_rps) {
                (Some(x), _) => thousands(x),
                (None, Some(x)) => format!("ceiling {}", thousands(x)),
                (None, None) => "-".into(),
            },
        ]),
        None => {
            row.push("not fitted".into());
            row.resize(columns - 1, String::new());
        }
    }
    row.push(thousands(f64::from(u.measured_best_n)));
    row
}

/// What the USL table's columns mean.
fn usl_notes() -> Vec<String> {
    vec![
        format!(
            "X(N) = lambda N / (1 + sigma (N-1) + kappa N (N-1)) (Gunther), fitted by bounded \
             nonlinear least squares (sigma, kappa >= 0); peak N* = sqrt((1-sigma)/kappa), \
             X_max = X(N*); a peak far beyond the measured N is an extrapolation; series with \
             fewer than {} levels are not fitted",
            crate::model::usl::MIN_LEVELS
        ),
        format!(
            "limit: the term that costs more at the largest N measured, contention \
             sigma (N-1) or coherency kappa N (N-1); none when together under {}",
            percent(crate::model::usl::NEGLIGIBLE_PENALTY)
        ),
    ]
}

/// One row per point with every measurement.
fn details_table(workload: &str, points: &[&PointResult], include_concurrency: bool) -> Table {
    let any_repeated = points.iter().any(|p| repeated(p));
    let header = details_header(points, include_concurrency, any_repeated);
    let rows = points
        .iter()
        .map(|p| details_row(p, header.len(), include_concurrency, any_repeated))
        .collect();
    let mut notes = mark_notes(points);
    notes.extend(limit_notes(points, include_concurrency));
    let column = header.len() - 1;
    let hovers = points
        .iter()
        .enumerate()
        .filter_map(|(row, p)| Some(((row, column), p.limit.as_ref()?.evidence.clone())))
        .collect();
    notes.push(
        "CPU percentages are of one core over the measured time; server figures cover the whole \
         process tree; context switches of tasks that lived between two samples are missed"
            .into(),
    );
    Table {
        title: format!("{workload}: every point"),
        header,
        rows,
        notes,
        hovers,
    }
}

/// The header of [`details_table`]: the level's column only where points differ in it.
fn details_header(
    points: &[&PointResult],
    include_concurrency: bool,
    any_repeated: bool,
) -> Vec<String> {
    let mut header: Vec<String> = vec!["arch".into()];
    if include_concurrency {
        header.push("conns".into());
    } else if let Some(p) = points.first() {
        // Over HTTP/2 the level is the requests in flight, over fewer connections.
        let what = if points.iter().any(|p| p.streams.is_some()) {
            "in flight"
        } else {
            "connections"
        };
        header[0] = format!("arch ({} {what})", p.concurrency);
    }
    for h in [
        "req/s",
        "time",
        "p50",
        "p99",
        "errors",
        "timeouts",
        "unanswered",
        "server CPU/req",
        "server CPU",
        "client CPU",
        "RSS",
        "threads",
        "procs",
        "ctx sw (vol/invol)",
        "ctx sw/req",
    ] {
        header.push(h.into());
    }
    if any_repeated {
        header.push("spread req/s".into());
        header.push("spread p99".into());
    }
    header.push("limit".into());
    header
}

/// One point's row of [`details_table`], `columns` wide.
fn details_row(
    p: &PointResult,
    columns: usize,
    include_concurrency: bool,
    any_repeated: bool,
) -> Vec<String> {
    let mut row = vec![series_label(&p.arch, p.workers)];
    if include_concurrency {
        row.push(thousands(f64::from(p.concurrency)));
    }
    if !p.ok {
        row.push("failed".into());
        row.push(p.failure.clone().unwrap_or_default());
        row.resize(columns, String::new());
        return row;
    }
    row.extend(measurement_cells(p));
    if any_repeated {
        if repeated(p) {
            row.push(rps_spread_text(p));
            row.push(p99_spread_text(p));
        } else {
            row.extend(["-".to_string(), "-".to_string()]);
        }
    }
    row.push(limit_cell(p));
    row
}

/// What limited a point, in a word (`lab: generator` where the lab set the figure).
fn limit_cell(p: &PointResult) -> String {
    match &p.limit {
        Some(l) if l.kind.is_lab() => format!("lab: {}", l.kind.name()),
        Some(l) => l.kind.name().to_string(),
        None => "-".into(),
    }
}

/// Each point's limit with its evidence, a line each.
fn limit_notes(points: &[&PointResult], include_concurrency: bool) -> Vec<String> {
    points
        .iter()
        .filter_map(|p| {
            let l = p.limit.as_ref()?;
            let at = if include_concurrency {
                format!(" at {}", thousands(f64::from(p.concurrency)))
            } else {
                String::new()
            };
            Some(format!(
                "{}{at}: {}: {}",
                series_label(&p.arch, p.workers),
                l.kind.name(),
                l.evidence
            ))
        })
        .collect()
}

/// A measured point's cells from req/s to the context switches.
fn measurement_cells(p: &PointResult) -> Vec<String> {
    let percent = |cpu: f64| {
        if p.figures.server.cpu_unavailable {
            "n/a".into()
        } else {
            match p.figures.server.busy(cpu, p.figures.duration_s) {
                Some(busy) => format!("{:.0}%", busy * 100.0),
                None => "-".into(),
            }
        }
    };
    let mut cells = vec![
        format!("{}{}", thousands(p.figures.rps), mark(p)),
        format!("{:.2} s", p.figures.duration_s),
        latency_cell(p, LatencyKey::P50),
        latency_cell(p, LatencyKey::P99),
        thousands(p.errors as f64 + p.bad_statuses() as f64),
        thousands(p.errors_by_kind.timeout as f64),
        thousands(p.figures.unanswered as f64),
        if p.figures.server.cpu_unavailable {
            "n/a".into()
        } else {
            duration_us(p.server_cpu_us_per_request)
        },
        percent(p.figures.server.cpu_s),
        match p
            .figures
            .server
            .busy(p.figures.client.cpu_s, p.figures.duration_s)
        {
            Some(busy) => format!("{:.0}%", busy * 100.0),
            None => "-".into(),
        },
    ];
    // A server on another machine: its tree was not sampled here.
    let remote = |cell: String| {
        if p.figures.server.remote {
            "n/a".into()
        } else {
            cell
        }
    };
    cells.extend([
        remote(format!("{:.1} MB", p.figures.server.rss_kb as f64 / 1024.0)),
        remote(p.figures.server.threads.to_string()),
        remote(p.figures.server.processes.to_string()),
        remote(format!(
            "{}/{}",
            thousands(p.figures.server.voluntary_switches as f64),
            thousands(p.figures.server.involuntary_switches as f64)
        )),
        remote({
            let per =
                |n: u64| n as f64 / p.figures.server.answered_at_least(p.figures.requests) as f64;
            format!(
                "{:.2}/{:.2}",
                per(p.figures.server.voluntary_switches),
                per(p.figures.server.involuntary_switches)
            )
        }),
    ]);
    cells
}

/// A small sweep for the output tests: iterative and epoll at 1 and 64 connections, where
/// iterative's p99 at 64 is only a lower bound and epoll was measured three times per point.
#[cfg(test)]
pub mod fixture {
    use crate::load::LatencyKey;
    use crate::sweep::results::{
        Machine, PointLatency, PointResult, RunFigures, RunMeasurement, Spread, SweepResults,
    };
    use crate::sweep::spec::Experiment;

    fn point(arch: &str, concurrency: u32, rps: f64, p50: f64, p99: f64) -> PointResult {
        PointResult {
            arch: arch.into(),
            workers: None,
            workload: "hello".into(),
            concurrency,
            target: "sweetspot".into(),
            ok: true,
            figures: RunFigures {
                requests: (rps * 3.0) as u64,
                duration_s: 3.0,
                rps,
                latency_us: PointLatency {
                    p50,
                    p90: p99,
                    p99,
                    p999: p99,
                    mean: p50,
                    max: p99,
                    lower_bound: Default::default(),
                },
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn repeated(mut p: PointResult, rps: [f64; 3], p99: [f64; 3]) -> PointResult {
        p.runs = rps
            .iter()
            .zip(p99)
            .map(|(&rps, p99)| RunMeasurement {
                figures: RunFigures {
                    rps,
                    latency_us: PointLatency {
                        p99,
                        ..p.figures.latency_us
                    },
                    ..Default::default()
                },
                ..Default::default()
            })
            .collect();
        p.spread = Spread {
            repetitions: 3,
            rps_min: rps[0],
            rps_max: rps[2],
            p99_min: p99[0],
            p99_max: p99[2],
        };
        p
    }

    /// The sweep; `repetitions` for epoll's points is 3.
    pub fn small_sweep() -> SweepResults {
        let experiment = Experiment::from_toml(
            "name = \"small\"\narchs = [\"iterative\", \"epoll\"]\nconcurrency = [1, 64]\n\
             [[workload]]\nname = \"hello\"\nroute = \"/hello\"\n",
            "small",
        )
        .expect("valid experiment");
        let mut censored = point("iterative", 64, 97.0, 200.0, 1_000_000.0);
        for key in [LatencyKey::P99, LatencyKey::P999, LatencyKey::Max] {
            censored.figures.latency_us.lower_bound.insert(key);
        }
        censored.figures.unanswered = 63;
        let points = vec![
            point("iterative", 1, 20_000.0, 40.0, 80.0),
            repeated(
                point("epoll", 1, 21_000.0, 35.0, 70.0),
                [20_000.0, 21_000.0, 22_000.0],
                [60.0, 70.0, 90.0],
            ),
            censored,
            repeated(
                point("epoll", 64, 30_000.0, 1_500.0, 3_000.0),
                [29_000.0, 30_000.0, 31_000.0],
                [2_500.0, 3_000.0, 3_500.0],
            ),
        ];
        SweepResults {
            version: 1,
            source: "small".into(),
            experiment,
            started: "2026-11-21T09:00:00Z".into(),
            finished: "2026-11-21T09:01:00Z".into(),
            interrupted: false,
            points_planned: points.len(),
            versions: Default::default(),
            machine: Machine {
                cpu_model: "test cpu".into(),
                cores: 2,
                kernel: "6.0".into(),
                ..Default::default()
            },
            points,
            recommendation: Default::default(),
            analysis: Default::default(),
        }
    }
}

/// A line per workload of an HTTPS sweep: handshakes per request, the resumed share, their
/// largest share of the time waited, and the server's median CPU per handshake over the points
/// that made more than a few (the warm-up's one full handshake is in each server's count).
pub fn tls_lines(results: &SweepResults) -> Vec<String> {
    let mut lines = Vec::new();
    for w in &results.experiment.workloads {
        let points: Vec<_> = results
            .points
            .iter()
            .filter(|p| p.workload == w.name && p.ok)
            .filter_map(|p| Some((p, p.figures.tls?)))
            .collect();
        let handshakes: u64 = points.iter().map(|(_, t)| t.handshakes).sum();
        if handshakes == 0 {
            continue;
        }
        let requests: u64 = points.iter().map(|(p, _)| p.figures.requests).sum();
        let resumed: u64 = points.iter().map(|(_, t)| t.resumed).sum();
        let share = points.iter().map(|(_, t)| t.share).fold(0.0, f64::max);
        let mut cpu: Vec<f64> = points
            .iter()
            .filter(|(_, t)| t.handshakes >= 10)
            .filter_map(|(_, t)| t.server_cpu_us)
            .collect();
        cpu.sort_by(f64::total_cmp);
        let cpu = match cpu.len() {
            0 => String::new(),
            n => format!(
                "; the server's CPU {:.0} us a handshake (median of {n} points)",
                cpu[n / 2]
            ),
        };
        lines.push(format!(
            "{}: {:.3} handshakes a request ({}% resumed), at most {:.0}% of the time waited{cpu}",
            w.name,
            handshakes as f64 / requests.max(1) as f64,
            (100.0 * resumed as f64 / handshakes as f64).round(),
            100.0 * share
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_stems_are_safe() {
        assert_eq!(file_stem("fib?n=25 x"), "fib_n_25_x");
    }

    #[test]
    fn grid_cells_mark_lower_bounds_and_show_the_spread() {
        let results = fixture::small_sweep();
        let tables = workload_tables(&results, "hello");
        let rps = &tables[0];
        assert_eq!(rps.title, "hello: requests/second");
        assert_eq!(
            rps.rows,
            vec![
                vec!["1", "20,000", "21,000 (20,000..22,000)"],
                vec!["64", "97", "30,000 (29,000..31,000)"],
            ]
        );
        let p99 = &tables[1];
        assert_eq!(
            p99.rows,
            vec![
                vec!["1", "80 us", "70 us (60 us..90 us)"],
                vec!["64", ">= 1.00 s", "3.0 ms (2.5 ms..3.5 ms)"],
            ]
        );
        assert!(p99
            .notes
            .iter()
            .any(|n| n.starts_with("`>=` a lower bound")));
        assert!(p99.notes.iter().any(|n| n.starts_with("`(a..b)` min..max")));
        // The details: p50 exact, p99 a lower bound, and the spread columns.
        let details = &tables[2];
        let column = |name: &str| details.header.iter().position(|h| h == name).unwrap();
        let censored = &details.rows[2];
        assert_eq!(censored[0], "iterative");
        assert_eq!(censored[column("p50")], "200 us");
        assert_eq!(censored[column("p99")], ">= 1.00 s");
        assert_eq!(censored[column("spread req/s")], "-");
        let epoll = &details.rows[3];
        assert_eq!(epoll[column("spread req/s")], "29,000..31,000");
        assert_eq!(epoll[column("spread p99")], "2.5 ms..3.5 ms");
    }

    #[test]
    fn a_single_run_sweep_has_no_spread_columns_or_notes() {
        let mut results = fixture::small_sweep();
        for p in &mut results.points {
            p.spread = Default::default();
            p.figures.latency_us.lower_bound = Default::default();
        }
        let tables = workload_tables(&results, "hello");
        assert_eq!(tables[0].rows[1], vec!["64", "97", "30,000"]);
        assert!(!tables[2].header.iter().any(|h| h.starts_with("spread")));
        assert!(!tables[1]
            .notes
            .iter()
            .any(|n| n.starts_with("`>=`") || n.starts_with("`(a..b)`")));
    }
}
