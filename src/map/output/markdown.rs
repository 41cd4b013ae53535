//! `map.md` and the terminal's table: per map, rows by wait/CPU ratio, columns by
//! concurrency; the rules of thumb beside each pooled winner, the verifications, the cost.

use super::*;
use crate::map::halving::Outcome;
use crate::map::results::{CellResult, MapResults};
use crate::render::numbers::{percent, thousands, wall_time};

/// The table: per map (wait mode and CPU), rows by wait/CPU ratio, columns by concurrency;
/// then the rules of thumb beside each pooled winner, the verifications, and the cost.
pub fn table(results: &MapResults) -> String {
    let spec = &results.spec;
    let mut out = format!(
        "map {}: p99 bound {} ms, {} cells{}\n",
        spec.name,
        spec.p99_bound_ms,
        results.cells.len(),
        path_words(results)
            .map(|p| format!(
                ", across a network path ({p}): each cycle and bound holds its round trip"
            ))
            .unwrap_or_default()
    );
    for map in maps(results) {
        out.push_str(&format!(
            "\n{} us of CPU, {} waits{}{} (rows: wait/CPU; columns: connections; each: the \
             winner, its req/s, its share of its own bound (its CPU a request on the cores the \
             load generator left it, and each cycle's), or of {} where that is not known, the \
             figure that decided)\n",
            map.1,
            map.0.name(),
            rtt_words(results, map.2),
            cpus_words(results, map.3),
            if spec.has_path() {
                "min(cores/C, N/(C+W+RTT))"
            } else {
                "min(cores/C, N/(C+W))"
            }
        ));
        out.push_str("| W/C (wait) |");
        for c in &spec.concurrency {
            out.push_str(&format!(" {c} |"));
        }
        out.push_str(&format!(
            "\n|---|{}\n",
            "---|".repeat(spec.concurrency.len())
        ));
        for &ratio in &spec.ratios {
            out.push_str(&format!("| {ratio} ({} ms) |", ratio * map.1 / 1000.0));
            for &conc in &spec.concurrency {
                let text = find(results, map, ratio, conc)
                    .map(cell_line)
                    .unwrap_or_else(|| "(not run)".into());
                out.push_str(&format!(" {text} |"));
            }
            out.push('\n');
        }
    }
    out.push_str(&rules_table(results));
    out.push_str(&verify_lines(results));
    out.push_str(&format!("\n{}\n", results.summary));
    out.push_str(&format!(
        "\n{}{}\n",
        super::points_sentence(results),
        if results.interrupted {
            "; interrupted: `sweetspot map --resume DIR` finishes it"
        } else {
            ""
        }
    ));
    out
}

/// One cell of the table: its text, throughput, share of the bound and deciding figure.
pub(super) fn cell_line(c: &CellResult) -> String {
    let Some(o) = c.outcome.as_ref().filter(|o| o.winner.is_some()) else {
        return cell_text(c);
    };
    let decided = o
        .decided_by
        .map(|f| format!(", by {}", f.name()))
        .unwrap_or_default();
    format!(
        "{} ({} req/s, {}{decided})",
        cell_text(c),
        thousands(o.rps),
        of_bound(o)
    )
}

/// The measured sweet spot beside the rules of thumb, for every pooled winner.
pub(super) fn rules_table(results: &MapResults) -> String {
    let pooled: Vec<(&CellResult, &Outcome)> = results
        .cells
        .iter()
        .filter_map(|c| c.outcome.as_ref().map(|o| (c, o)))
        .filter(|(_, o)| o.winner.is_some_and(|w| w.arch.pooled()))
        .collect();
    if pooled.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\nPooled winners: the measured sweet spot beside the rules of thumb\n\
         | cell | winner | sweet spot | Goetz | 2n+1 | default |\n|---|---|---|---|---|---|\n",
    );
    for (c, o) in pooled {
        let w = o.winner.expect("filtered");
        let rule = |name: &str| {
            o.rules
                .iter()
                .find(|r| r.rule == name)
                .map(|r| {
                    // (Not measured: the model's figure where it gave one, else the pool's
                    // own bound, a loss only where that bound is under the sweet spot.)
                    let cost = if r.predicted.is_some() {
                        format!("{} req/s, predicted", signed_loss(r.rps_loss))
                    } else if !r.measured && r.rps_loss > 0.0 {
                        format!(
                            "-{} or worse, by its bound",
                            percent((r.rps_loss * 100.0).floor() / 100.0)
                        )
                    } else if !r.measured {
                        "not measured".into()
                    } else if r.meets_bound {
                        format!("{} req/s", signed_loss(r.rps_loss))
                    } else {
                        "misses p99".into()
                    };
                    format!("{} ({cost})", r.workers)
                })
                .unwrap_or_else(|| "-".into())
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            c.cell.key,
            w.arch.name(),
            w.workers.unwrap_or(0),
            rule("goetz"),
            rule("2n+1"),
            rule("default")
        ));
    }
    out
}

/// A line per verified cell: the pick against the full measurement's best.
pub(super) fn verify_lines(results: &MapResults) -> String {
    let mut out = String::new();
    for c in &results.cells {
        let Some(v) = &c.verify else { continue };
        out.push_str(&format!(
            "\nverify {} (every architecture at its pool and its default, {} each): {}\n",
            c.cell.key,
            wall_time(f64::from(v.window_ms) / 1000.0),
            v.verdict()
        ));
    }
    out
}

/// `-12%` for a loss of 12%, `+3%` for a gain.
pub(super) fn signed_loss(loss: f64) -> String {
    if loss >= 0.0 {
        format!("-{}", percent((loss * 100.0).round() / 100.0))
    } else {
        format!("+{}", percent((-loss * 100.0).round() / 100.0))
    }
}
