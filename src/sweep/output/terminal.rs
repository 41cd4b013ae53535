//! The terminal summary printed at the end of a sweep (and by `sweetspot report`): the
//! recommendation first, then each workload's main table, aligned in plain text.

use std::fmt::Write as _;

use super::{duration_us, thousands, workload_tables, Table};
use crate::sweep::results::SweepResults;

/// A table as aligned plain text.
pub fn table_text(table: &Table) -> String {
    if table.header.is_empty() {
        return format!("{}\n", table.title);
    }
    let columns = table.header.len();
    let mut widths = vec![0usize; columns];
    for row in std::iter::once(&table.header).chain(&table.rows) {
        for (i, cell) in row.iter().enumerate().take(columns) {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = format!("{}\n", table.title);
    for row in std::iter::once(&table.header).chain(&table.rows) {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .take(columns)
            .map(|(i, c)| {
                if i == 0 {
                    format!("{c:<w$}", w = widths[i])
                } else {
                    format!("{c:>w$}", w = widths[i])
                }
            })
            .collect();
        let _ = writeln!(out, "  {}", cells.join("  ").trim_end());
    }
    out
}

/// The summary: machine, recommendation, and each workload's headline table.
pub fn summary(results: &SweepResults) -> String {
    let m = &results.machine;
    let mut out = format!(
        "sweep {}: {} of {} points on {} ({} cores, Linux {}){}\n\n",
        results.experiment.name,
        results.points.len(),
        results.points_planned,
        m.cpu_model,
        m.cores,
        m.kernel,
        if results.interrupted {
            ", interrupted"
        } else {
            ""
        }
    );
    let marks = headline_tables(results, &mut out);
    if !marks.is_empty() {
        for note in &marks {
            let _ = writeln!(out, "  {}", note.replace('`', ""));
        }
        out.push('\n');
    }
    let theory = sweet_spot_lines(results);
    if !theory.is_empty() {
        out.push_str("Sweet spots:\n");
        for line in theory {
            let _ = writeln!(out, "{line}");
        }
        out.push('\n');
    }
    let handshakes = super::tls_lines(results);
    if !handshakes.is_empty() {
        out.push_str("TLS handshakes (apart from the requests' latency):\n");
        for line in handshakes {
            let _ = writeln!(out, "  {line}");
        }
        out.push('\n');
    }
    out.push_str("Recommendation:\n");
    for line in &results.recommendation.summary {
        let _ = writeln!(out, "  {line}");
    }
    let a = &results.analysis;
    for line in crate::lab::budget::oversized_lines(&a.oversized) {
        let _ = writeln!(out, "  over its quota at once: {line}");
    }
    if a.failed_points > 0 || a.lab_limited_points > 0 || !a.warnings.is_empty() {
        let _ = writeln!(
            out,
            "  ({} failed, {} limited by the lab (generator, path), {} warnings: see report.html)",
            a.failed_points,
            a.lab_limited_points,
            a.warnings.len()
        );
    }
    out
}

/// Appends each workload's headline tables (the study grids of throughput then p99, whose
/// lower bounds and spreads must be seen, or the per-architecture table), narrowed for a
/// terminal; returns their notes, once each.
fn headline_tables(results: &SweepResults, out: &mut String) -> Vec<String> {
    let mut marks: Vec<String> = Vec::new();
    for workload in &results.experiment.workloads {
        let tables = workload_tables(results, &workload.name);
        // The grid of throughput and p99, else the first table; under budgets, theirs too.
        let is_budget = |t: &&Table| t.title.ends_with(super::BUDGET_TITLE);
        let mut headline: Vec<&Table> = match tables.first() {
            Some(first) if first.title.ends_with(": requests/second") => {
                tables[..2].iter().collect()
            }
            _ => tables.iter().filter(|t| !is_budget(t)).take(1).collect(),
        };
        // The budgets' table where the shapes differ (replicas, an axis of quotas, a quota of
        // an external's own); one quota for all is said in the method and each point's limit.
        let shapes = |t: &Table| {
            let column = t.header.iter().position(|h| h == "shape");
            let mut seen: Vec<&String> = t
                .rows
                .iter()
                .filter_map(|r| column.and_then(|c| r.get(c)))
                .collect();
            seen.sort();
            seen.dedup();
            seen.len()
        };
        headline.extend(tables.iter().find(|t| is_budget(t) && shapes(t) > 1));
        for table in headline {
            let mut table = table.clone();
            if table.header.len() > 12 {
                // Keep the terminal version narrow: the first columns say the most.
                table.header.truncate(10);
                for row in &mut table.rows {
                    row.truncate(10);
                }
            }
            out.push_str(&table_text(&table));
            out.push('\n');
            for note in &table.notes {
                if !marks.contains(note) {
                    marks.push(note.clone());
                }
            }
        }
    }
    marks
}

/// Each pooled series' sweet spot, and Goetz's prediction where a sweet spot was measured.
fn sweet_spot_lines(results: &SweepResults) -> Vec<String> {
    results
        .analysis
        .workloads
        .iter()
        .flat_map(|w| {
            let spots = w.sweet_spots.iter().map(move |s| {
                format!(
                    "  {}: {} at {} connections: sweet spot {} workers ({} req/s)",
                    w.workload,
                    s.arch,
                    s.concurrency,
                    s.workers,
                    thousands(s.rps)
                )
            });
            let goetz = w
                .goetz
                .iter()
                .filter(|g| g.measured_sweet_spot.is_some())
                .map(move |g| {
                    let (useful, capped) = g.useful_pool_size();
                    format!(
                        "  {}: Goetz predicts {} threads ({} cores x (1 + {:.1} ms wait / {} \
                         compute){})",
                        w.workload,
                        thousands(useful.round()),
                        g.cores,
                        g.wait_ms,
                        duration_us(g.compute_us),
                        if capped {
                            format!(
                                " = {}, capped by {} connections",
                                thousands(g.pool_size.round()),
                                thousands(f64::from(g.concurrency_cap))
                            )
                        } else {
                            String::new()
                        }
                    )
                });
            spots.chain(goetz).collect::<Vec<_>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::analysis::finalize;
    use crate::sweep::output::fixture::small_sweep;

    #[test]
    fn the_summary_marks_lower_bounds_and_spreads() {
        let mut results = small_sweep();
        finalize(&mut results);
        // 1 of 64 connections answered: Little's law marks the point starved too (`~`).
        let text = summary(&results);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.contains(&"hello: p99 latency"), "{text}");
        assert!(
            lines.contains(&"  64           >= 1.00 s~  3.0 ms (2.5 ms..3.5 ms)"),
            "{text}"
        );
        assert!(
            lines.contains(&"  64                 97~  30,000 (29,000..31,000)"),
            "{text}"
        );
        assert!(lines
            .iter()
            .any(|l| l.starts_with("  >= a lower bound: requests still unanswered")));
        assert!(lines
            .iter()
            .any(|l| l.starts_with("  (a..b) min..max over the repetitions")));
    }

    #[test]
    fn columns_align() {
        let table = Table {
            title: "t".into(),
            header: vec!["c".into(), "epoll".into()],
            rows: vec![vec!["1000".into(), "2,100".into()]],
            notes: vec![],
            hovers: Default::default(),
        };
        assert_eq!(table_text(&table), "t\n  c     epoll\n  1000  2,100\n");
    }
}
