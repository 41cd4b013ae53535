//! `table.md`: the study-style tables (rows concurrency, columns architectures), the
//! recommendation and the machine, readable in a terminal or on GitHub.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{workload_tables, Exporter, Table};
use crate::sweep::results::SweepResults;

/// Writes `table.md`.
pub struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    fn name(&self) -> &'static str {
        "markdown"
    }

    fn export(&self, results: &SweepResults, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
        super::write_one(dir, "table.md", &render(results))
    }
}

/// A Markdown table with a title and notes.
pub fn table_markdown(table: &Table) -> String {
    if table.header.is_empty() {
        return format!("_{}_\n\n", table.title);
    }
    let mut out = format!("### {}\n\n", table.title);
    let escape = |s: &str| s.replace('|', "\\|");
    let line = |cells: &[String]| {
        let cells: Vec<String> = cells.iter().map(|c| escape(c)).collect();
        format!("| {} |\n", cells.join(" | "))
    };
    out.push_str(&line(&table.header));
    let aligns: Vec<String> = (0..table.header.len())
        .map(|i| {
            if i == 0 {
                ":--".to_string()
            } else {
                "--:".to_string()
            }
        })
        .collect();
    out.push_str(&format!("|{}|\n", aligns.join("|")));
    for row in &table.rows {
        out.push_str(&line(row));
    }
    if !table.notes.is_empty() {
        out.push('\n');
        for note in &table.notes {
            let _ = writeln!(out, "_{note}_  ");
        }
    }
    out.push('\n');
    out
}

/// The whole Markdown document.
pub fn render(results: &SweepResults) -> String {
    let e = &results.experiment;
    let mut out = format!("# sweetspot sweep: {}\n\n", e.name);
    if !e.description.is_empty() {
        let _ = writeln!(out, "{}\n", e.description);
    }
    let m = &results.machine;
    let _ =
        writeln!(
        out,
        "Machine: {} ({} cores), Linux {}. Started {}, finished {}. {} of {} points measured{}.\n",
        m.cpu_model,
        m.cores,
        m.kernel,
        results.started,
        results.finished,
        results.points.len(),
        results.points_planned,
        if results.interrupted { " (interrupted)" } else { "" }
    );
    out.push_str("## Recommendation\n\n");
    for line in &results.recommendation.summary {
        let _ = writeln!(out, "- {line}");
    }
    out.push('\n');
    out.push_str(&super::why::why_markdown(results));
    for workload in &e.workloads {
        let tables = workload_tables(results, &workload.name);
        if tables.is_empty() {
            continue;
        }
        let _ = writeln!(out, "## {} (`{}`)\n", workload.name, workload.route);
        for table in &tables {
            out.push_str(&table_markdown(table));
        }
    }
    if !results.analysis.warnings.is_empty() {
        out.push_str("## Warnings\n\n");
        for w in &results.analysis.warnings {
            let _ = writeln!(out, "- {w}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::analysis::finalize;
    use crate::sweep::output::fixture::small_sweep;

    #[test]
    fn the_document_marks_lower_bounds_and_spreads() {
        let mut results = small_sweep();
        finalize(&mut results);
        let md = render(&results);
        assert!(
            md.contains("| 64 | >= 1.00 s~ | 3.0 ms (2.5 ms..3.5 ms) |\n"),
            "{md}"
        );
        assert!(
            md.contains("| 64 | 97~ | 30,000 (29,000..31,000) |\n"),
            "{md}"
        );
        // The details table: p50 exact, p99 a lower bound.
        assert!(
            md.contains("| iterative | 64 | 97~ | 3.00 s | 200 us | >= 1.00 s |"),
            "{md}"
        );
        assert!(md.contains("_`>=` a lower bound: requests still unanswered"));
        // The recommendation never names the censored point.
        assert!(
            md.contains("- hello: epoll: 30,000 req/s at 64 connections"),
            "{md}"
        );
    }

    #[test]
    fn tables_render_with_alignment_and_escaping() {
        let table = Table {
            title: "t".into(),
            header: vec!["a".into(), "b|c".into()],
            rows: vec![vec!["1".into(), "2".into()]],
            notes: vec!["n".into()],
            hovers: Default::default(),
        };
        let md = table_markdown(&table);
        assert!(md.contains("| a | b\\|c |\n|:--|--:|\n| 1 | 2 |\n"), "{md}");
        assert!(md.contains("_n_"));
    }
}
