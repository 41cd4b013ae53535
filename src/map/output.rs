//! What a map shows: `results.json` (written atomically, after every cell), the table on the
//! terminal and in `map.md`, a heat map per wait mode (`map-async.svg`, `map-blocking.svg`:
//! colour = the winning architecture, label = its pool, hatched = a tie), and `report.html`
//! with both. Drawn from the results alone, so `report` could redraw them.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::run::{CellResult, MapResults};
use super::spec::WaitMode;
use crate::arch::Arch;
use crate::render::svg::{heat_map, HeatCell};
use crate::render::units::{percent, thousands, wall_time};

pub const RESULTS_FILE: &str = "results.json";

/// Writes `results.json` atomically (a temporary file, then a rename).
pub fn write_results(results: &MapResults, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(RESULTS_FILE);
    let tmp = dir.join(format!("{RESULTS_FILE}.tmp"));
    std::fs::write(&tmp, serde_json::to_string_pretty(results)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))
}

/// A cell's text: the winner (`arch/W`), `tie: a = b`, or why there is none.
pub fn cell_text(c: &CellResult) -> String {
    let Some(outcome) = &c.outcome else {
        return "(not run)".into();
    };
    let Some(winner) = outcome.winner else {
        return "none meets p99".into();
    };
    if outcome.ties.is_empty() {
        winner.label()
    } else {
        format!("tie: {} = {}", winner.label(), outcome.ties.join(" = "))
    }
}

/// The wait modes a map has, in order.
fn modes(results: &MapResults) -> Vec<WaitMode> {
    let mut modes: Vec<WaitMode> = results.cells.iter().map(|c| c.cell.wait).collect();
    modes.dedup();
    modes
}

/// The table: per wait mode, rows by wait/CPU ratio, columns by concurrency; then Goetz and
/// the default pool beside each pooled winner; then the cost against the full grid.
pub fn table(results: &MapResults) -> String {
    let spec = &results.spec;
    let mut out = format!(
        "map {}: {} us of CPU a request, p99 bound {} ms, {} cells\n",
        spec.name,
        spec.cpu_us,
        spec.p99_bound_ms,
        results.cells.len()
    );
    for mode in modes(results) {
        out.push_str(&format!(
            "\n{} waits (rows: wait/CPU; columns: connections)\n",
            mode.name()
        ));
        out.push_str("| W/C (wait) |");
        for c in &spec.concurrency {
            out.push_str(&format!(" {c} |"));
        }
        out.push('\n');
        out.push_str(&format!("|---|{}\n", "---|".repeat(spec.concurrency.len())));
        for &ratio in &spec.ratios {
            let wait_ms = ratio * spec.cpu_us / 1000.0;
            out.push_str(&format!("| {ratio} ({wait_ms} ms) |"));
            for &conc in &spec.concurrency {
                let text = results
                    .cells
                    .iter()
                    .find(|c| {
                        c.cell.wait == mode && c.cell.ratio == ratio && c.cell.concurrency == conc
                    })
                    .map(|c| {
                        let rps = c
                            .outcome
                            .as_ref()
                            .filter(|o| o.winner.is_some())
                            .map(|o| format!(" ({} req/s)", thousands(o.rps)))
                            .unwrap_or_default();
                        format!("{}{rps}", cell_text(c))
                    })
                    .unwrap_or_else(|| "(not run)".into());
                out.push_str(&format!(" {text} |"));
            }
            out.push('\n');
        }
    }
    let pooled: Vec<&CellResult> = results
        .cells
        .iter()
        .filter(|c| {
            c.outcome
                .as_ref()
                .and_then(|o| o.winner)
                .is_some_and(|w| w.arch.pooled())
        })
        .collect();
    if !pooled.is_empty() {
        out.push_str("\nPooled winners: the measured sweet spot beside the rules of thumb\n");
        out.push_str(
            "| cell | winner | sweet spot | Goetz | 2n+1 | default |\n|---|---|---|---|---|---|\n",
        );
        for c in pooled {
            let o = c.outcome.as_ref().expect("filtered");
            let w = o.winner.expect("filtered");
            let rule = |name: &str| {
                o.rules
                    .iter()
                    .find(|r| r.rule == name)
                    .map(|r| {
                        let cost = if r.meets_bound {
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
    }
    for c in results
        .cells
        .iter()
        .filter_map(|c| c.verify.as_ref().map(|v| (c, v)))
    {
        let (cell, v) = c;
        out.push_str(&format!(
            "\nverify {}: adaptive pick {} ({} req/s, {}..{}) against the full grid's best {} ({} req/s, {}..{}): {}\n",
            cell.cell.key,
            v.pick,
            thousands(v.pick_rps.0),
            thousands(v.pick_rps.1),
            thousands(v.pick_rps.2),
            v.grid_best,
            thousands(v.grid_best_rps.0),
            thousands(v.grid_best_rps.1),
            thousands(v.grid_best_rps.2),
            if v.inside { "inside its spread" } else { "OUTSIDE its spread" }
        ));
    }
    out.push_str(&format!(
        "\n{} points measured in {}, where the full grid needs {} ({} of it){}\n",
        results.points_measured,
        wall_time(results.wall_s),
        results.full_grid_points,
        percent(results.points_measured as f64 / results.full_grid_points.max(1) as f64),
        if results.interrupted {
            "; interrupted: `sweetspot map --resume DIR` finishes it"
        } else {
            ""
        }
    ));
    out
}

/// `-12%` for a loss of 12%, `+3%` for a gain.
fn signed_loss(loss: f64) -> String {
    if loss >= 0.0 {
        format!("-{}", percent((loss * 100.0).round() / 100.0))
    } else {
        format!("+{}", percent((-loss * 100.0).round() / 100.0))
    }
}

/// One heat map per wait mode, as (file name, SVG).
pub fn heat_maps(results: &MapResults) -> anyhow::Result<Vec<(String, String)>> {
    let spec = &results.spec;
    let columns: Vec<String> = spec.concurrency.iter().map(|c| c.to_string()).collect();
    let rows: Vec<String> = spec.ratios.iter().map(|r| r.to_string()).collect();
    let arch_index = |a: Arch| Arch::all().iter().position(|x| *x == a).unwrap_or(0);
    let mut maps = Vec::new();
    for mode in modes(results) {
        let mut cells = Vec::new();
        let mut legend: Vec<(String, usize)> = Vec::new();
        for c in results.cells.iter().filter(|c| c.cell.wait == mode) {
            let column = spec
                .concurrency
                .iter()
                .position(|x| *x == c.cell.concurrency);
            let row = spec.ratios.iter().position(|x| *x == c.cell.ratio);
            let (Some(column), Some(row)) = (column, row) else {
                continue;
            };
            let winner = c.outcome.as_ref().and_then(|o| o.winner);
            let ties = c
                .outcome
                .as_ref()
                .map(|o| o.ties.clone())
                .unwrap_or_default();
            let mut lines = Vec::new();
            match winner {
                Some(w) => {
                    lines.push(w.arch.name().to_string());
                    match w.workers {
                        Some(n) => lines.push(format!("pool {n} (Goetz {})", c.goetz)),
                        None => lines.push("no pool".into()),
                    }
                    // The full list is in the table; a cell holds two names.
                    match ties.len() {
                        0 => {}
                        1 | 2 => lines.push(format!("tie: {}", ties.join(", "))),
                        n => lines.push(format!("tie with {n} others")),
                    }
                    let name = w.arch.name().to_string();
                    if !legend.iter().any(|(n, _)| *n == name) {
                        legend.push((name, arch_index(w.arch)));
                    }
                }
                None => lines.push(cell_text(c)),
            }
            cells.push(HeatCell {
                column,
                row,
                color: winner.map(|w| arch_index(w.arch)),
                hatched: !ties.is_empty(),
                lines,
            });
        }
        let title = format!(
            "{}: the winner per cell, {} us CPU, {} waits",
            spec.name,
            spec.cpu_us,
            mode.name()
        );
        let svg = heat_map(
            &title,
            "connections",
            &columns,
            "wait / CPU",
            &rows,
            &cells,
            &legend,
        )?;
        maps.push((format!("map-{}.svg", mode.name()), svg));
    }
    Ok(maps)
}

/// Writes every file of a finished (or interrupted) map: results, table, heat maps, report.
pub fn write_all(results: &MapResults, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    write_results(results, dir)?;
    let mut written = vec![dir.join(RESULTS_FILE)];
    let table = table(results);
    let md = dir.join("map.md");
    std::fs::write(&md, &table).with_context(|| format!("writing {}", md.display()))?;
    written.push(md);
    let maps = heat_maps(results)?;
    let mut html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>body{{font-family:sans-serif;margin:2em;max-width:1100px}}pre{{background:#f6f6f6;padding:1em;overflow-x:auto}}</style>\
         </head><body>\n<h1>The sweet-spot map: {}</h1>\n<p>{}</p>\n",
        crate::render::html::escape(&results.spec.name),
        crate::render::html::escape(&results.spec.name),
        crate::render::html::escape(&results.spec.description),
    );
    for (name, svg) in &maps {
        let path = dir.join(name);
        std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
        html.push_str(&format!("<figure>{svg}</figure>\n"));
    }
    html.push_str(&format!(
        "<pre>{}</pre>\n</body></html>\n",
        crate::render::html::escape(&table)
    ));
    let report = dir.join("report.html");
    std::fs::write(&report, html).with_context(|| format!("writing {}", report.display()))?;
    written.push(report);
    Ok(written)
}
