//! `points.csv`: every point of a sweep, one row each, for a spreadsheet or a notebook. The
//! columns are flat figures from [`PointResult`]; `results.json` stays the record. Written with
//! the `csv` crate (quoting a workload name with a comma is its job, not ours).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::Exporter;
use crate::sweep::analysis::recommend::p99_is_lower_bound;
use crate::sweep::results::{PointResult, SweepResults};

/// Writes `points.csv`.
pub struct CsvExporter;

/// The file name of the table.
pub const POINTS_FILE: &str = "points.csv";

/// One point as a row. Latencies in microseconds, memory in KiB.
#[derive(Debug, Serialize)]
pub struct Row<'a> {
    pub workload: &'a str,
    pub arch: &'a str,
    /// Empty for an architecture without a pool.
    pub workers: Option<u32>,
    pub concurrency: u32,
    pub ok: bool,
    pub repetitions: u32,
    pub rps: f64,
    pub rps_min: f64,
    pub rps_max: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    /// The p99 is only a lower bound (requests still unanswered when the run ended).
    pub p99_lower_bound: bool,
    pub p999_us: f64,
    pub max_us: f64,
    pub errors: u64,
    pub unanswered: u64,
    pub server_cpu_us_per_request: f64,
    pub server_rss_kb: u64,
    pub server_threads: u64,
    pub server_processes: u64,
    pub generator_bound: bool,
    pub failure: &'a str,
}

/// The row of one point.
pub fn row(p: &PointResult) -> Row<'_> {
    let repeated = p.spread.repetitions > 1;
    Row {
        workload: &p.workload,
        arch: &p.arch,
        workers: p.workers,
        concurrency: p.concurrency,
        ok: p.ok,
        repetitions: p.spread.repetitions.max(1),
        rps: p.figures.rps,
        rps_min: if repeated {
            p.spread.rps_min
        } else {
            p.figures.rps
        },
        rps_max: if repeated {
            p.spread.rps_max
        } else {
            p.figures.rps
        },
        p50_us: p.figures.latency_us.p50,
        p90_us: p.figures.latency_us.p90,
        p99_us: p.figures.latency_us.p99,
        p99_lower_bound: p99_is_lower_bound(p),
        p999_us: p.figures.latency_us.p999,
        max_us: p.figures.latency_us.max,
        errors: p.errors,
        unanswered: p.figures.unanswered,
        server_cpu_us_per_request: p.server_cpu_us_per_request,
        server_rss_kb: p.figures.server.rss_kb,
        server_threads: p.figures.server.threads,
        server_processes: p.figures.server.processes,
        generator_bound: p.generator_bound,
        failure: p.failure.as_deref().unwrap_or(""),
    }
}

/// The whole table as text: a header, then the points in the order they ran.
pub fn to_text(results: &SweepResults) -> anyhow::Result<String> {
    let mut w = ::csv::Writer::from_writer(Vec::new());
    for p in &results.points {
        w.serialize(row(p))?;
    }
    if results.points.is_empty() {
        // No point, still a header: a reader sees the columns.
        w.serialize(row(&PointResult::default()))?;
        let text = String::from_utf8(w.into_inner()?)?;
        return Ok(text.lines().next().unwrap_or_default().to_string() + "\n");
    }
    Ok(String::from_utf8(w.into_inner()?)?)
}

impl Exporter for CsvExporter {
    fn name(&self) -> &'static str {
        "csv"
    }

    fn export(&self, results: &SweepResults, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
        super::write_one(dir, POINTS_FILE, &to_text(results)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::output::fixture::small_sweep;

    #[test]
    fn a_row_per_point_with_its_spread_and_lower_bound() {
        let mut results = small_sweep();
        results.points[0].workload = "hello, world".into();
        results.points[1].workers = Some(8);
        let text = to_text(&results).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert!(lines[0].starts_with("workload,arch,workers,concurrency,ok,repetitions,rps,"));
        assert!(lines[0].ends_with(",generator_bound,failure"));
        // A name with a comma is quoted; no pool is an empty field; one run is its own range.
        assert!(
            lines[1].starts_with("\"hello, world\",iterative,,1,true,1,20000.0,20000.0,20000.0,"),
            "{}",
            lines[1]
        );
        // Three repetitions: their range.
        assert!(
            lines[2].starts_with("hello,epoll,8,1,true,3,21000.0,20000.0,22000.0,"),
            "{}",
            lines[2]
        );
        // The censored p99 says it is a lower bound.
        let header: Vec<&str> = lines[0].split(',').collect();
        let col = header.iter().position(|h| *h == "p99_lower_bound").unwrap();
        let censored: Vec<&str> = lines[3].split(',').collect();
        assert_eq!(censored[col], "true", "{}", lines[3]);
        assert_eq!(lines[1].split(',').nth(col + 1), Some("false"));
        results.points.clear();
        assert_eq!(to_text(&results).unwrap(), lines[0].to_string() + "\n");
    }
}
