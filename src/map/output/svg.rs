//! The heat maps: one a map (wait mode and CPU), colour a distinguishable winner.

use super::*;
use crate::arch::Arch;
use crate::map::results::{CellResult, MapResults};
use crate::render::svg::{heat_map, HeatCell};

/// One heat map per map (wait mode and CPU), as (file name, SVG).
pub fn heat_maps(results: &MapResults) -> anyhow::Result<Vec<(String, String)>> {
    let spec = &results.spec;
    let columns: Vec<String> = spec.concurrency.iter().map(|c| c.to_string()).collect();
    let rows: Vec<String> = spec.ratios.iter().map(|r| r.to_string()).collect();
    let several_cpus = spec.cpu_us.len() > 1;
    let mut out = Vec::new();
    for map in maps(results) {
        let mut cells = Vec::new();
        let mut legend: Vec<(String, usize)> = Vec::new();
        for c in cells_of(results, map) {
            let column = spec
                .concurrency
                .iter()
                .position(|x| *x == c.cell.concurrency);
            let row = spec.ratios.iter().position(|x| *x == c.cell.ratio);
            let (Some(column), Some(row)) = (column, row) else {
                continue;
            };
            cells.push(heat_cell(c, (column, row), &mut legend));
        }
        let title = format!(
            "{}: the winner per cell, {} us CPU, {} waits{}{} (grey: any of several)",
            spec.name,
            map.1,
            map.0.name(),
            rtt_words(results, map.2),
            cpus_words(results, map.3)
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
        let cpu = if several_cpus {
            format!("-{}us", map.1)
        } else {
            String::new()
        };
        let name = format!(
            "map-{}{cpu}{}{}.svg",
            map.0.name(),
            spec.rtt_suffix(map.2),
            spec.cpus_suffix(map.3)
        );
        out.push((name, svg));
    }
    Ok(out)
}

/// A cell of a heat map at (column, row): the winner's colour and pool with its share of the
/// bound, `any of N` hatched for a tie, or why there is none; the winner named in the legend.
fn heat_cell(
    c: &CellResult,
    (column, row): (usize, usize),
    legend: &mut Vec<(String, usize)>,
) -> HeatCell {
    let arch_index = |a: Arch| Arch::all().iter().position(|x| *x == a).unwrap_or(0);
    let outcome = c.outcome.as_ref();
    let winner = outcome.and_then(|o| o.winner);
    let tie = outcome.is_some_and(|o| !o.ties.is_empty());
    let mut lines = Vec::new();
    match (winner, outcome) {
        (Some(_), Some(o)) if tie => {
            lines.push(format!("any of {}", o.ties.len() + 1));
            lines.push(of_bound(o));
        }
        (Some(w), Some(o)) => {
            lines.push(w.arch.name().to_string());
            lines.push(match w.workers {
                Some(n) => format!("pool {n}, {}", of_bound(o)),
                None => of_bound(o),
            });
            let name = w.arch.name().to_string();
            if !legend.iter().any(|(n, _)| *n == name) {
                legend.push((name, arch_index(w.arch)));
            }
        }
        _ => lines.push(cell_text(c)),
    }
    HeatCell {
        column,
        row,
        color: winner.filter(|_| !tie).map(|w| arch_index(w.arch)),
        hatched: tie,
        lines,
    }
}
