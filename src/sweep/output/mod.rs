//! Outputs of a sweep: one file per format behind one small trait.
//!
//! Each [`Exporter`] turns a [`SweepResults`] into files in the output directory: JSON
//! ([`json`]), the study-style Markdown table ([`markdown`]), SVG plots ([`svg`]) and the
//! self-contained HTML report ([`html`]). The terminal summary ([`terminal`]) prints instead of
//! writing. The tables every text format shares are built once here ([`workload_tables`]), so
//! Markdown, HTML and the terminal agree cell for cell.

pub mod html;
pub mod json;
pub mod markdown;
pub mod svg;
pub mod terminal;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::analysis::series_label;
use super::results::{PointResult, SweepResults};

/// Writes one output format into a directory.
pub trait Exporter {
    /// The format's name, for messages.
    fn name(&self) -> &'static str;
    /// Writes the files and returns their paths.
    fn export(&self, results: &SweepResults, dir: &Path) -> anyhow::Result<Vec<PathBuf>>;
}

/// Every file format, in the order they are written (JSON first: it is the record).
pub fn exporters() -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(json::JsonExporter),
        Box::new(markdown::MarkdownExporter),
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

/// `12345.6` -> `12,346`; small values keep one decimal (`9.5`).
pub fn thousands(value: f64) -> String {
    if !value.is_finite() {
        return "-".into();
    }
    if value.abs() < 100.0 && value.fract().abs() > 1e-9 {
        return format!("{value:.1}");
    }
    let rounded = value.round() as i64;
    let digits = rounded.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    if rounded < 0 {
        out.insert(0, '-');
    }
    out
}

/// Microseconds in the unit a reader wants.
pub fn duration_us(us: f64) -> String {
    if !us.is_finite() || us <= 0.0 {
        return "-".into();
    }
    if us >= 1e6 {
        format!("{:.2} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{us:.0} us")
    }
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

/// A table of text cells with a title and footnotes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Table {
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub notes: Vec<String>,
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
    if p.error_rate() > super::analysis::MAX_ERROR_RATE {
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

fn rps_cell(p: &PointResult) -> String {
    if !p.ok {
        return "failed".into();
    }
    format!("{}{}", thousands(p.rps), mark(p))
}

const MARK_NOTES: [&str; 3] = [
    "`*` more than 1% of requests failed or timed out",
    "`g` the load generator, not the server, was saturated",
    "`~` Little's law: fewer requests in flight than connections offered; some connections \
     waited unanswered (their wait is in the percentiles, as lower bounds)",
];

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
        for (title, cell) in [
            ("requests/second", rps_cell as fn(&PointResult) -> String),
            ("p99 latency", |p: &PointResult| {
                if p.ok {
                    format!("{}{}", duration_us(p.latency_us.p99), mark(p))
                } else {
                    "failed".into()
                }
            }),
        ] {
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
            tables.push(Table {
                title: format!("{workload}: {title}"),
                header,
                rows,
                notes: MARK_NOTES.iter().map(|s| s.to_string()).collect(),
            });
        }
    }
    tables.push(details_table(workload, &points, levels.len() > 1));
    if let Some(table) = usl_table(results, workload) {
        tables.push(table);
    }
    tables
}

/// The USL fits of a workload's series.
fn usl_table(results: &SweepResults, workload: &str) -> Option<Table> {
    let analysed = results
        .analysis
        .workloads
        .iter()
        .find(|w| w.workload == workload)?;
    if analysed.usl.is_empty() {
        return None;
    }
    let header = [
        "series",
        "over",
        "sigma",
        "kappa",
        "lambda (req/s)",
        "R^2",
        "predicted peak N",
        "predicted peak req/s",
        "measured best N",
    ];
    let rows = analysed
        .usl
        .iter()
        .map(|u| {
            let series = match (u.axis.as_str(), u.fixed) {
                ("workers", Some(c)) => format!("{} at {c} connections", u.arch),
                (_, workers) => series_label(&u.arch, workers),
            };
            vec![
                series,
                u.axis.clone(),
                format!("{:.3}", u.fit.sigma),
                format!("{:.5}", u.fit.kappa),
                thousands(u.fit.lambda),
                format!("{:.2}", u.fit.r_squared),
                u.predicted_peak_n.map_or("none".into(), thousands),
                u.predicted_peak_rps.map_or("-".into(), thousands),
                thousands(f64::from(u.measured_best_n)),
            ]
        })
        .collect();
    Some(Table {
        title: format!("{workload}: Universal Scalability Law fits"),
        header: header.iter().map(|h| h.to_string()).collect(),
        rows,
        notes: vec![
            "X(N) = lambda N / (1 + sigma (N-1) + kappa N (N-1)) (Gunther); peak at \
             sqrt((1-sigma)/kappa); a peak far beyond the measured N is an extrapolation"
                .into(),
        ],
    })
}

/// One row per point with every measurement.
fn details_table(workload: &str, points: &[&PointResult], include_concurrency: bool) -> Table {
    let mut header: Vec<String> = vec!["arch".into()];
    if include_concurrency {
        header.push("conns".into());
    } else if let Some(p) = points.first() {
        header[0] = format!("arch ({} connections)", p.concurrency);
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
        "spread req/s",
    ] {
        header.push(h.into());
    }
    let rows = points
        .iter()
        .map(|p| {
            let mut row = vec![series_label(&p.arch, p.workers)];
            if include_concurrency {
                row.push(thousands(f64::from(p.concurrency)));
            }
            if !p.ok {
                row.push("failed".into());
                row.push(p.failure.clone().unwrap_or_default());
                row.resize(header.len(), String::new());
                return row;
            }
            let percent = |cpu: f64| {
                if p.server.cpu_unavailable {
                    "n/a".into()
                } else if p.duration_s > 0.0 {
                    format!("{:.0}%", cpu / p.duration_s * 100.0)
                } else {
                    "-".into()
                }
            };
            row.extend([
                rps_cell(p),
                format!("{:.2} s", p.duration_s),
                duration_us(p.latency_us.p50),
                duration_us(p.latency_us.p99),
                thousands(p.errors as f64 + p.bad_statuses() as f64),
                thousands(p.errors_by_kind.timeout as f64),
                thousands(p.unanswered as f64),
                if p.server.cpu_unavailable {
                    "n/a".into()
                } else {
                    duration_us(p.server_cpu_us_per_request)
                },
                percent(p.server.cpu_s),
                if p.duration_s > 0.0 {
                    format!("{:.0}%", p.client.cpu_s / p.duration_s * 100.0)
                } else {
                    "-".into()
                },
            ]);
            // A server on another machine: its tree was not sampled here.
            let remote = |cell: String| if p.server.remote { "n/a".into() } else { cell };
            row.extend([
                remote(format!("{:.1} MB", p.server.rss_kb as f64 / 1024.0)),
                remote(p.server.threads.to_string()),
                remote(p.server.processes.to_string()),
                remote(format!(
                    "{}/{}",
                    thousands(p.server.voluntary_switches as f64),
                    thousands(p.server.involuntary_switches as f64)
                )),
                if p.spread.repetitions > 1 {
                    format!(
                        "{}..{}",
                        thousands(p.spread.rps_min),
                        thousands(p.spread.rps_max)
                    )
                } else {
                    "-".into()
                },
            ]);
            row
        })
        .collect();
    let mut notes: Vec<String> = MARK_NOTES.iter().map(|s| s.to_string()).collect();
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(2100.4), "2,100");
        assert_eq!(thousands(1234567.0), "1,234,567");
        assert_eq!(thousands(9.46), "9.5");
        assert_eq!(thousands(-1500.0), "-1,500");
    }

    #[test]
    fn durations_pick_units() {
        assert_eq!(duration_us(850.0), "850 us");
        assert_eq!(duration_us(12_345.0), "12.3 ms");
        assert_eq!(duration_us(2_500_000.0), "2.50 s");
        assert_eq!(duration_us(0.0), "-");
    }

    #[test]
    fn file_stems_are_safe() {
        assert_eq!(file_stem("fib?n=25 x"), "fib_n_25_x");
    }
}
