//! What a map shows, drawn from [`super::results`] alone: the table on the terminal and in
//! `map.md`, the paragraph that says what the map shows ([`summary`]), a heat map per wait mode
//! and CPU (`map-async.svg`, ...: colour = a distinguishable winner, a neutral fill = any of
//! several, label = the pool and the share of the physical bound), and `report.html` with the
//! heat maps and every cell's candidates as HTML tables.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::halving::{CandidateRow, Outcome};
use super::results::{write_results, CellResult, MapResults, RESULTS_FILE};
use super::spec::WaitMode;
use crate::arch::Arch;
use crate::render::html::{escape, page_start, PAGE_END};
use crate::render::numbers::{duration_us, percent, thousands, wall_time};
use crate::render::svg::{heat_map, HeatCell};

/// A cell's text: the winner (`arch/W`), `any of N: a, b`, or why there is none.
pub fn cell_text(c: &CellResult) -> String {
    let Some(outcome) = &c.outcome else {
        return "(not run)".into();
    };
    if outcome.infeasible.is_some() {
        return "none can meet p99".into();
    }
    let Some(winner) = outcome.winner else {
        return "none meets p99".into();
    };
    if outcome.ties.is_empty() {
        winner.label()
    } else {
        format!(
            "any of {}: {}, {}",
            outcome.ties.len() + 1,
            winner.label(),
            outcome.ties.join(", ")
        )
    }
}

/// `87% of bound`, for a cell with a winner.
fn of_bound(o: &Outcome) -> String {
    o.of_bound()
        .map(|f| format!("{} of bound", percent((f * 100.0).round() / 100.0)))
        .unwrap_or_default()
}

/// One map of a run: a wait mode, a CPU, a path's round trip (ms) and a quota (cores).
type MapKey = (WaitMode, f64, f64, Option<f64>);

fn map_key(c: &CellResult) -> MapKey {
    (c.cell.wait, c.cell.cpu_us, c.cell.rtt_ms, c.cell.cpus)
}

/// `, under a quota of 0.5 cores` for a map of several quotas.
fn cpus_words(results: &MapResults, cpus: Option<f64>) -> String {
    match cpus {
        Some(q) if results.spec.cpus.len() > 1 => {
            format!(", under a quota of {}", crate::lab::budget::cores_words(q))
        }
        _ => String::new(),
    }
}

/// The maps a run has: each wait mode at each CPU at each round trip, in order.
fn maps(results: &MapResults) -> Vec<MapKey> {
    let mut maps: Vec<MapKey> = Vec::new();
    for c in &results.cells {
        let key = map_key(c);
        if !maps.contains(&key) {
            maps.push(key);
        }
    }
    maps
}

fn cells_of(results: &MapResults, map: MapKey) -> impl Iterator<Item = &CellResult> {
    results.cells.iter().filter(move |c| map_key(c) == map)
}

/// `, across a 100 ms round trip` for a map of several round trips.
fn rtt_words(results: &MapResults, rtt_ms: f64) -> String {
    if results.spec.rtt_ms.len() < 2 {
        String::new()
    } else if rtt_ms == 0.0 && results.spec.net_at(0.0).is_none() {
        ", over loopback".into()
    } else {
        format!(", across a {rtt_ms} ms round trip")
    }
}

fn find(results: &MapResults, map: MapKey, ratio: f64, conc: u32) -> Option<&CellResult> {
    cells_of(results, map).find(|c| c.cell.ratio == ratio && c.cell.concurrency == conc)
}

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
             winner, its req/s, its share of {}, the figure that decided)\n",
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
        crate::search::points_sentence(
            results.points_measured,
            results.wall_s,
            results.full_grid_points
        ),
        if results.interrupted {
            "; interrupted: `sweetspot map --resume DIR` finishes it"
        } else {
            ""
        }
    ));
    out
}

/// One cell of the table: its text, throughput, share of the bound and deciding figure.
fn cell_line(c: &CellResult) -> String {
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
fn rules_table(results: &MapResults) -> String {
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
                    let cost = if !r.measured {
                        format!(
                            "-{} or worse, by its bound",
                            percent((r.rps_loss * 100.0).floor() / 100.0)
                        )
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
fn verify_lines(results: &MapResults) -> String {
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
fn signed_loss(loss: f64) -> String {
    if loss >= 0.0 {
        format!("-{}", percent((loss * 100.0).round() / 100.0))
    } else {
        format!("+{}", percent((-loss * 100.0).round() / 100.0))
    }
}

/// What the map shows, in a paragraph computed from its cells: where the architecture stops
/// mattering, what blocking waits need, where event loops win and by how much, where the
/// rules of thumb are off, and how near the physical bound the winners came.
pub fn summary(results: &MapResults) -> String {
    let done: Vec<(&CellResult, &Outcome)> = results
        .cells
        .iter()
        .filter_map(|c| c.outcome.as_ref().map(|o| (c, o)))
        .collect();
    if done.is_empty() {
        return "No cell was measured.".into();
    }
    let won: Vec<(&CellResult, &Outcome)> = done
        .iter()
        .copied()
        .filter(|(_, o)| o.winner.is_some())
        .collect();
    let mut parts = vec![ties_sentence(done.len(), &won)];
    parts.extend(cost_sentence(&won));
    parts.extend(bound_sentence(&won, results.round_trip_us));
    parts.extend(blocking_sentence(&won));
    parts.extend(event_loop_sentence(&won));
    parts.extend(rules_sentence(&won));
    parts.extend(limit_sentence(&won));
    parts.extend(lab_sentence(results));
    parts.extend(rtt_sentence(results));
    parts.extend(budget_sentence(results));
    parts.extend(cpus_sentence(results));
    let shares: Vec<f64> = won.iter().filter_map(|(_, o)| o.of_bound()).collect();
    if !shares.is_empty() {
        let mean = shares.iter().sum::<f64>() / shares.len() as f64;
        let low = shares.iter().copied().fold(f64::INFINITY, f64::min);
        parts.push(format!(
            "The winners reach {} of the physical bound on average (lowest {}).",
            percent((mean * 100.0).round() / 100.0),
            percent((low * 100.0).round() / 100.0)
        ));
    }
    let infeasible = done.iter().filter(|(_, o)| o.infeasible.is_some()).count();
    if infeasible > 0 {
        parts.push(format!(
            "{infeasible} cells cannot meet the p99 bound on any server (Little's law), so they were not measured."
        ));
    }
    parts.join(" ")
}

/// The servers' CPU budget, when the map had one: what the bound and the pools followed.
fn budget_sentence(results: &MapResults) -> Option<String> {
    let spec = &results.spec;
    if spec.cpus.is_empty() && spec.cpuset.is_none() {
        return None;
    }
    let cores = results.machine.cores.max(1);
    let set = spec.cpuset.as_ref().map(|s| format!(" on CPUs {s} only"));
    let under = |q: Option<f64>| match q {
        Some(q) => format!("a CPU quota of {}", crate::lab::budget::cores_words(q)),
        None => "the machine's CPUs".into(),
    };
    let sentences: Vec<String> = spec
        .quotas()
        .into_iter()
        .map(|q| {
            format!(
                "{}{}: each cell's bound counts {} cores, and the default pools and 2n+1 were \
                 sized for {}",
                under(q),
                set.clone().unwrap_or_default(),
                crate::lab::budget::cpus_text(spec.budget(q, cores)),
                spec.whole_cores(q, cores)
            )
        })
        .collect();
    Some(if sentences.len() == 1 {
        format!("Every server ran under {}.", sentences[0])
    } else {
        format!(
            "Each map ran under its own budget, {}.",
            sentences.join("; ")
        )
    })
}

/// What limited the winners, and where that changes across the cells: `What limited the
/// winners: the wait in 6 cells (at 16 to 64 connections); cores in 3 (at 256 to 1,024).`
fn limit_sentence(won: &[(&CellResult, &Outcome)]) -> Option<String> {
    let mut by_kind: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for (c, o) in won {
        if let Some(l) = o.winner_row().and_then(|r| r.limit.as_ref()) {
            by_kind
                .entry(l.kind.name())
                .or_default()
                .push(c.cell.concurrency);
        }
    }
    let mut kinds: Vec<(&str, Vec<u32>)> = by_kind.into_iter().collect();
    kinds.sort_by_key(|(_, at)| (*at.iter().min().unwrap_or(&0), std::cmp::Reverse(at.len())));
    let each: Vec<String> = kinds
        .iter()
        .map(|(kind, at)| {
            let (low, high) = (at.iter().min().unwrap_or(&0), at.iter().max().unwrap_or(&0));
            let range = if low == high {
                format!("at {}", thousands(f64::from(*low)))
            } else {
                format!(
                    "at {} to {}",
                    thousands(f64::from(*low)),
                    thousands(f64::from(*high))
                )
            };
            let cells = if at.len() == 1 { "cell" } else { "cells" };
            format!("{kind} in {} {cells} ({range} connections)", at.len())
        })
        .collect();
    (!each.is_empty()).then(|| format!("What limited the winners: {}.", each.join("; ")))
}

/// How many points the lab, not the server, limited (never counted for a winner).
fn lab_sentence(results: &MapResults) -> Option<String> {
    let points: Vec<&crate::search::Sample> = results
        .cells
        .iter()
        .flat_map(|c| c.points.iter().map(|p| &p.sample))
        .collect();
    let lab: BTreeSet<&str> = points
        .iter()
        .filter_map(|s| s.lab())
        .map(crate::lab::limit::LimitKind::name)
        .collect();
    let n = points.iter().filter(|s| s.lab().is_some()).count();
    (n > 0).then(|| {
        format!(
            "{} of the {} points measured were the lab's limit ({}), not the server's: none of \
             them counted.",
            thousands(n as f64),
            thousands(points.len() as f64),
            lab.into_iter().collect::<Vec<_>>().join(", ")
        )
    })
}

/// Where the architecture stops mattering.
fn ties_sentence(cells: usize, won: &[(&CellResult, &Outcome)]) -> String {
    let ties: Vec<&str> = won
        .iter()
        .filter(|(_, o)| !o.ties.is_empty())
        .map(|(c, _)| c.cell.key.as_str())
        .collect();
    format!(
        "{} of {cells} cells have a winner; in {} of them the architecture does not matter (any of \
         several, indistinguishable on throughput, p99, CPU and memory){}.",
        won.len(),
        ties.len(),
        if ties.is_empty() {
            String::new()
        } else {
            format!(": {}", ties.join(", "))
        }
    )
}

/// Where the first lean server measured reached the bound at the floors, the rest unmeasured.
fn bound_sentence(won: &[(&CellResult, &Outcome)], round_trip_us: f64) -> Option<String> {
    let at: Vec<String> = won
        .iter()
        .filter(|(_, o)| o.decided_by == Some(crate::search::rank::Figure::Bound))
        .map(|(c, o)| format!("{} at {}", o.winner.expect("won").label(), c.cell.key))
        .collect();
    (!at.is_empty()).then(|| {
        format!(
            "In {} a lean server reached the bound (each cycle lengthened by the round trip \
             at one connection here beyond the request's CPU, up to {}) with a p99 at its \
             floor and the CPU and memory of the leanest measured, so the rest were not \
             measured: {}.",
            if at.len() == 1 {
                "1 cell".to_string()
            } else {
                format!("{} cells", at.len())
            },
            crate::render::numbers::duration_us(round_trip_us),
            at.join(", ")
        )
    })
}

/// Where throughput tied and a cost decided.
fn cost_sentence(won: &[(&CellResult, &Outcome)]) -> Option<String> {
    use crate::search::rank::Figure;
    let decided: Vec<String> = won
        .iter()
        .filter_map(|(c, o)| match o.decided_by {
            Some(f @ (Figure::P99 | Figure::Cpu | Figure::Memory)) => Some(format!(
                "{} by {} at {}",
                o.winner.expect("won").label(),
                f.name(),
                c.cell.key
            )),
            _ => None,
        })
        .collect();
    listed("Where throughput tied, the cost decided", &decided)
}

/// What blocking waits need.
fn blocking_sentence(won: &[(&CellResult, &Outcome)]) -> Option<String> {
    let blocking: Vec<String> = won
        .iter()
        .filter(|(c, _)| c.cell.wait == WaitMode::Blocking && c.cell.wait_ms > 0.0)
        .map(|(c, o)| format!("{} at {}", o.winner.expect("won").label(), c.cell.key))
        .collect();
    listed(
        "With blocking waits the winners hold a thread or process per waiting request",
        &blocking,
    )
}

/// `lead: a, b, c.`, or nothing with nothing to list.
fn listed(lead: &str, items: &[String]) -> Option<String> {
    (!items.is_empty()).then(|| format!("{lead}: {}.", items.join(", ")))
}

/// Where event loops win outright, and by how much.
fn event_loop_sentence(won: &[(&CellResult, &Outcome)]) -> Option<String> {
    let loops: Vec<&(&CellResult, &Outcome)> = won
        .iter()
        .filter(|(_, o)| o.ties.is_empty() && o.winner.expect("won").arch.runs_event_loops())
        .collect();
    let (c, o) = loops.iter().max_by(|a, b| {
        a.1.margin
            .unwrap_or(0.0)
            .total_cmp(&b.1.margin.unwrap_or(0.0))
    })?;
    Some(format!(
        "An event loop wins outright in {} cells; its widest throughput margin is {} over {} at {}.",
        loops.len(),
        percent((o.margin.unwrap_or(0.0).max(0.0) * 100.0).round() / 100.0),
        o.runner_up.as_deref().unwrap_or("the rest"),
        c.cell.key
    ))
}

/// Where the rules of thumb are off (miss the bound, or lose over 5%).
fn rules_sentence(won: &[(&CellResult, &Outcome)]) -> Option<String> {
    let off: Vec<String> = won
        .iter()
        .flat_map(|(c, o)| o.rules.iter().map(move |r| (c, r)))
        .filter(|(_, r)| !r.meets_bound || r.rps_loss > 0.05)
        .map(|(c, r)| {
            let cost = if !r.measured {
                format!(
                    "loses at least {} (its own bound)",
                    percent((r.rps_loss * 100.0).floor() / 100.0)
                )
            } else if r.meets_bound {
                format!("loses {}", percent((r.rps_loss * 100.0).round() / 100.0))
            } else {
                "misses the p99 bound".into()
            };
            format!("{} ({}) {cost} at {}", r.rule, r.workers, c.cell.key)
        })
        .collect();
    (!off.is_empty()).then(|| {
        format!(
            "The rules of thumb are off in {} places: {}{}.",
            off.len(),
            off.iter().take(6).cloned().collect::<Vec<_>>().join("; "),
            if off.len() > 6 { "; ..." } else { "" }
        )
    })
}

/// The architectures a cell's verdict names: its winner's and those tied with it.
fn verdict_archs(o: &Outcome) -> Vec<String> {
    let mut archs: Vec<String> = o.winner.iter().map(|w| w.arch.name().to_string()).collect();
    for tie in &o.ties {
        archs.push(tie.split('/').next().unwrap_or(tie).to_string());
    }
    archs
}

/// A cell's verdict and what decided it: `epoll (by throughput)`.
fn verdict_words(c: &CellResult) -> String {
    match c.outcome.as_ref().and_then(|o| o.decided_by) {
        Some(f) => format!("{} (by {})", cell_text(c), f.name()),
        None => cell_text(c),
    }
}

/// Whether a cell's verdict differs from another's: another architecture that did not tie
/// there, a pool more than twice apart, or a winner on one side only (`None`: neither has one).
fn winner_changed(o: &Outcome, b: &Outcome) -> Option<bool> {
    match (o.winner, b.winner) {
        (Some(w), Some(bw)) => {
            let other_arch = !verdict_archs(b).contains(&w.arch.name().to_string())
                && !verdict_archs(o).contains(&bw.arch.name().to_string());
            let pool_moved = w.arch == bw.arch
                && matches!((w.workers, bw.workers), (Some(p), Some(q)) if p > 2 * q || q > 2 * p);
            Some(other_arch || pool_moved)
        }
        // A winner on one side only.
        (Some(_), None) | (None, Some(_)) => Some(true),
        (None, None) => None,
    }
}

/// Each cell that is not a base (`is_base`) against its base (the base cell of the same wait,
/// CPU, ratio and connections that `same` accepts): how many could be compared, and a phrase
/// (`describe(base, cell)`) for each whose winner changed.
fn changes_against(
    results: &MapResults,
    is_base: impl Fn(&CellResult) -> bool,
    same: impl Fn(&CellResult, &CellResult) -> bool,
    describe: impl Fn(&CellResult, &CellResult) -> String,
) -> (usize, Vec<String>) {
    let shape = |c: &CellResult| (c.cell.wait, c.cell.cpu_us, c.cell.ratio, c.cell.concurrency);
    let (mut compared, mut changed) = (0, Vec::new());
    for c in results.cells.iter().filter(|c| !is_base(c)) {
        let Some(base) = results
            .cells
            .iter()
            .find(|b| is_base(b) && shape(b) == shape(c) && same(b, c))
        else {
            continue;
        };
        let (Some(o), Some(b)) = (c.outcome.as_ref(), base.outcome.as_ref()) else {
            continue;
        };
        let Some(changed_here) = winner_changed(o, b) else {
            continue;
        };
        compared += 1;
        if changed_here {
            changed.push(describe(base, c));
        }
    }
    (compared, changed)
}

/// With several quotas (`cpus` a list): where a smaller quota changes the winner of the same
/// cell under the largest.
fn cpus_sentence(results: &MapResults) -> Option<String> {
    let spec = &results.spec;
    if spec.cpus.len() < 2 {
        return None;
    }
    let largest = spec.cpus.iter().copied().fold(0.0, f64::max);
    let words = crate::lab::budget::cores_words;
    let (compared, changed) = changes_against(
        results,
        |c| c.cell.cpus == Some(largest),
        |b, c| b.cell.rtt_ms == c.cell.rtt_ms,
        |base, c| {
            format!(
                "{}: {} under {}, {} under {}",
                c.cell.key,
                verdict_words(base),
                words(largest),
                verdict_words(c),
                words(c.cell.cpus.unwrap_or(largest))
            )
        },
    );
    (compared > 0).then(|| {
        if changed.is_empty() {
            format!(
                "The quota changes no winner: in {compared} cells the winner under {} wins (or \
                 ties) under less too.",
                words(largest)
            )
        } else {
            format!(
                "A smaller quota changes the winner in {} of {compared} cells: {}.",
                changed.len(),
                changed.join("; ")
            )
        }
    })
}

/// Where a path's round trip changes the winner, for a map of several round trips: each cell
/// against the same workload and concurrency at the map's shortest round trip. A change is a
/// winner that is not among the other's winner and ties, or the same architecture's pool
/// more than doubled or halved.
fn rtt_sentence(results: &MapResults) -> Option<String> {
    let spec = &results.spec;
    if spec.rtt_ms.len() < 2 {
        return None;
    }
    let shortest = spec.rtt_ms.iter().copied().fold(f64::INFINITY, f64::min);
    let (compared, changed) = changes_against(
        results,
        |c| c.cell.rtt_ms == shortest,
        |b, c| b.cell.cpus == c.cell.cpus,
        |base, c| {
            format!(
                "{}: {} at {shortest} ms, {} at {} ms",
                c.cell.key,
                verdict_words(base),
                verdict_words(c),
                c.cell.rtt_ms
            )
        },
    );
    (compared > 0).then(|| {
        if changed.is_empty() {
            format!(
                "The path's round trip changes no winner: in {compared} cells the winner at \
                 {shortest} ms wins (or ties) further away too."
            )
        } else {
            format!(
                "The path's round trip changes the winner in {} of {compared} cells: {}.",
                changed.len(),
                changed.join("; ")
            )
        }
    })
}

/// One heat map per map (wait mode and CPU), as (file name, SVG).
pub fn heat_maps(results: &MapResults) -> anyhow::Result<Vec<(String, String)>> {
    let spec = &results.spec;
    let columns: Vec<String> = spec.concurrency.iter().map(|c| c.to_string()).collect();
    let rows: Vec<String> = spec.ratios.iter().map(|r| r.to_string()).collect();
    let arch_index = |a: Arch| Arch::all().iter().position(|x| *x == a).unwrap_or(0);
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
            cells.push(HeatCell {
                column,
                row,
                color: winner.filter(|_| !tie).map(|w| arch_index(w.arch)),
                hatched: tie,
                lines,
            });
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

/// A cell's candidates as an HTML table.
fn candidates_html(c: &CellResult) -> String {
    let Some(o) = &c.outcome else {
        return String::new();
    };
    let mut html = format!(
        "<h3>{}</h3>\n<p class=\"note\">{} connections, {} us CPU and {} ms of {} wait a request{}; \
         the bound min(cores/C, N/(C+W{})) is {} req/s. Verdict: <b>{}</b>{}.</p>\n",
        escape(&c.cell.key),
        c.cell.concurrency,
        c.cell.cpu_us,
        c.cell.wait_ms,
        c.cell.wait.name(),
        crate::net::spec_of(c.cell.net.as_deref())
            .map(|n| format!(", across a path of {}", escape(&n.describe())))
            .unwrap_or_default(),
        if c.cell.net.is_some() { "+RTT" } else { "" },
        thousands(o.bound_rps),
        escape(&cell_text(c)),
        o.decided_by
            .map(|f| format!(", decided by {}", f.name()))
            .or_else(|| o.infeasible.as_ref().map(|r| format!(": {}", escape(r))))
            .unwrap_or_default()
    );
    if !o.starving.is_empty() {
        html.push_str(&format!(
            "<p class=\"note\">Left out unmeasured, as they leave connections unanswered by \
             their shape: {}.</p>\n",
            escape(&o.starving.join(", "))
        ));
    }
    if !o.outclassed.is_empty() {
        html.push_str(&format!(
            "<p class=\"note\">Left out unmeasured, as their own bound (one thread or their \
             pool, each waiting W) is below what another reached: {}.</p>\n",
            escape(&o.outclassed.join(", "))
        ));
    }
    if !o.unneeded.is_empty() {
        html.push_str(&format!(
            "<p class=\"note\">Left out unmeasured, as the winner reached the bound with a p99 \
             at its floor and the CPU and memory of the leanest measured (none could beat it): \
             {}.</p>\n",
            escape(&o.unneeded.join(", "))
        ));
    }
    if o.candidates.is_empty() {
        return html;
    }
    html.push_str(
        "<div class=\"scroll\"><table><tr><th>candidate</th><th>req/s</th><th>of bound</th>\
         <th>p99</th><th>CPU / request</th><th>peak RSS</th><th>threads</th><th>processes</th>\
         <th>runs</th></tr>\n",
    );
    for r in &o.candidates {
        html.push_str(&candidate_row_html(r, o.bound_rps));
    }
    html.push_str("</table></div>\n");
    for decision in &o.decisions {
        html.push_str(&format!(
            "<p class=\"note\">Why not: {}</p>\n",
            escape(decision)
        ));
    }
    html
}

/// `2 x 3.0 s`: a row's runs and their length (`-` when not recorded).
pub fn runs_text(r: &CandidateRow) -> String {
    if r.runs == 0 {
        return "-".into();
    }
    format!(
        "{} x {}",
        r.runs,
        duration_us(f64::from(r.window_ms) * 1000.0)
    )
}

fn candidate_row_html(r: &CandidateRow, bound: f64) -> String {
    let p99 = if r.p99_lower_bound {
        format!("&ge; {}", duration_us(r.p99_us))
    } else {
        duration_us(r.p99_us)
    };
    let missed = r.rps.0 <= 0.0;
    format!(
        "<tr><td>{}</td><td class=\"num{}\">{}{}</td><td class=\"num\">{}</td><td class=\"num\">{p99}</td>\
         <td class=\"num\">{}</td><td class=\"num\">{:.1} MiB</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
         <td class=\"num\">{}</td></tr>\n",
        escape(&r.label),
        if missed { " failed" } else { "" },
        thousands(r.measured_rps),
        if missed { " (misses p99)" } else { "" },
        if bound > 0.0 {
            percent((r.measured_rps / bound * 100.0).round() / 100.0)
        } else {
            "-".into()
        },
        duration_us(r.cpu_us),
        r.rss_kb / 1024.0,
        r.threads,
        r.processes,
        runs_text(r)
    )
}

/// The report: the paragraph, the heat maps, the table of winners, every cell's candidates.
/// The map's network path in words, if some cell ran across one: `rtt 100 ms, ...`, or with
/// several round trips `round trips of 0 (loopback) and 100 ms, ...`.
fn path_words(results: &MapResults) -> Option<String> {
    let spec = &results.spec;
    if !spec.has_path() {
        return None;
    }
    let net = crate::net::spec_of(spec.net.as_deref());
    if spec.rtt_ms.is_empty() {
        return net.map(|n| n.describe());
    }
    let rtts: Vec<String> = spec
        .rtt_ms
        .iter()
        .map(|&r| {
            if spec.net_at(r).is_none() {
                format!("{r} (loopback)")
            } else {
                r.to_string()
            }
        })
        .collect();
    let links = net.map(|n| n.describe_links()).unwrap_or_default();
    Some(match rtts.split_last() {
        Some((last, first)) if !first.is_empty() => {
            format!("round trips of {} and {last} ms{links}", first.join(", "))
        }
        _ => format!("rtt {} ms{links}", rtts.join("")),
    })
}

fn report_html(results: &MapResults, maps: &[(String, String)]) -> String {
    let mut html = page_start(&format!("sweet-spot map: {}", results.spec.name));
    html.push_str(&format!(
        "<h1>The sweet-spot map: {}</h1>\n<p>{}</p>\n",
        escape(&results.spec.name),
        escape(&results.spec.description),
    ));
    if let Some(path) = path_words(results) {
        html.push_str(&format!(
            "<p>Every client reached the servers across a network path: {}. Each cycle, and \
             so each cell's bound, holds its round trip.</p>\n",
            escape(&path)
        ));
    }
    html.push_str(&format!(
        "<p class=\"summary\">{}</p>\n",
        escape(&results.summary)
    ));
    for (_, svg) in maps {
        html.push_str(&format!("<figure>{svg}</figure>\n"));
    }
    html.push_str(
        "<h2>Winners</h2>\n<div class=\"scroll\"><table><tr><th>cell</th><th>verdict</th>\
        <th>req/s</th><th>of bound</th><th>p99</th><th>decided by</th><th>points</th></tr>\n",
    );
    for c in &results.cells {
        let o = c.outcome.as_ref();
        html.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td>{}</td><td class=\"num\">{} of {}</td></tr>\n",
            escape(&c.cell.key),
            escape(&cell_text(c)),
            o.map(|o| thousands(o.rps)).unwrap_or_default(),
            o.map(of_bound).unwrap_or_default(),
            o.map(|o| duration_us(o.p99_us)).unwrap_or_default(),
            o.and_then(|o| o.decided_by)
                .map(|f| f.name())
                .unwrap_or("-"),
            c.points_measured,
            c.full_grid_points
        ));
    }
    html.push_str("</table></div>\n<h2>Every cell's candidates</h2>\n");
    for c in &results.cells {
        html.push_str(&candidates_html(c));
    }
    html.push_str(&format!(
        "<p class=\"note\">{}.</p>\n{PAGE_END}",
        escape(&crate::search::points_sentence(
            results.points_measured,
            results.wall_s,
            results.full_grid_points
        ))
    ));
    html
}

/// Writes every file of a finished (or interrupted) map: results, table, heat maps, report.
pub fn write_all(results: &MapResults, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    write_results(results, dir)?;
    let mut written = vec![dir.join(RESULTS_FILE)];
    let md = dir.join("map.md");
    std::fs::write(&md, table(results)).with_context(|| format!("writing {}", md.display()))?;
    written.push(md);
    let maps = heat_maps(results)?;
    for (name, svg) in &maps {
        let path = dir.join(name);
        std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    let report = dir.join("report.html");
    std::fs::write(&report, report_html(results, &maps))
        .with_context(|| format!("writing {}", report.display()))?;
    written.push(report);
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map::halving::Candidate;
    use crate::map::spec::MapSpec;

    /// A searched cell of `spec` at (ratio, connections, round trip) won by `winner` (with
    /// `ties`), or by none.
    fn won(
        spec: &MapSpec,
        key: (f64, u32, f64),
        winner: Option<(Arch, Option<u32>)>,
        ties: &[&str],
    ) -> CellResult {
        let cell = spec
            .cells()
            .into_iter()
            .find(|c| (c.ratio, c.concurrency, c.rtt_ms) == key)
            .expect("a cell of the spec");
        CellResult {
            cell,
            outcome: Some(Outcome {
                winner: winner.map(|(arch, workers)| Candidate { arch, workers }),
                rps: 100.0,
                p99_us: 1000.0,
                ties: ties.iter().map(|t| t.to_string()).collect(),
                decided_by: None,
                runner_up: None,
                margin: None,
                rules: Vec::new(),
                rounds: 1,
                final_ms: 300,
                bound_rps: 200.0,
                infeasible: None,
                candidates: Vec::new(),
                starving: Vec::new(),
                outclassed: Vec::new(),
                unneeded: Vec::new(),
                decisions: Vec::new(),
            }),
            goetz: 2,
            points: Vec::new(),
            points_measured: 0,
            full_grid_points: 0,
            verify: None,
        }
    }

    fn results(spec: MapSpec, cells: Vec<CellResult>) -> MapResults {
        let mut r = MapResults::new("t", &spec, Default::default(), 1.0);
        r.cells = cells;
        r
    }

    /// `c` with its winner's row, limited by `kind`.
    fn limited_by(mut c: CellResult, kind: crate::lab::limit::LimitKind) -> CellResult {
        let o = c.outcome.as_mut().unwrap();
        o.candidates.push(CandidateRow {
            label: o.winner.unwrap().label(),
            rps: (100.0, 100.0, 100.0),
            measured_rps: 100.0,
            p99_us: 1000.0,
            p99_lower_bound: false,
            cpu_us: 0.0,
            rss_kb: 0.0,
            threads: 1,
            processes: 1,
            window_ms: 300,
            runs: 1,
            limit: Some(crate::lab::limit::Limit {
                kind,
                evidence: String::new(),
            }),
        });
        c
    }

    #[test]
    fn the_paragraph_says_which_limit_held_the_winners_at_which_connections() {
        use crate::lab::limit::LimitKind;
        let spec = MapSpec::from_toml(
            "name='m'\ncpu_us=1000\nratios=[0]\nconcurrency=[16, 256, 1000]\n",
            "t",
        )
        .unwrap();
        let epoll = Some((Arch::Epoll, None));
        let cells = vec![
            limited_by(won(&spec, (0.0, 16, 0.0), epoll, &[]), LimitKind::Wait),
            limited_by(won(&spec, (0.0, 256, 0.0), epoll, &[]), LimitKind::Cores),
            limited_by(won(&spec, (0.0, 1000, 0.0), epoll, &[]), LimitKind::Cores),
        ];
        let r = results(spec, cells);
        let won: Vec<(&CellResult, &Outcome)> = r
            .cells
            .iter()
            .map(|c| (c, c.outcome.as_ref().unwrap()))
            .collect();
        assert_eq!(
            limit_sentence(&won).as_deref(),
            Some(
                "What limited the winners: wait in 1 cell (at 16 connections); cores in 2 cells \
                 (at 256 to 1,000 connections)."
            )
        );
        assert!(summary(&r).contains("What limited the winners: wait in 1 cell"));
    }

    #[test]
    fn a_map_of_round_trips_has_a_map_per_round_trip_and_says_where_the_winner_changes() {
        let spec = MapSpec::from_toml(
            "name='m'\narchs=['epoll','threaded','prethreaded']\ncpu_us=1000\nratios=[0]\n\
             concurrency=[16, 256, 1000]\nrtt_ms=[0, 100]\n",
            "t",
        )
        .unwrap();
        let cells = vec![
            won(&spec, (0.0, 16, 0.0), Some((Arch::Epoll, None)), &[]),
            {
                let mut c = won(
                    &spec,
                    (0.0, 256, 0.0),
                    Some((Arch::Prethreaded, Some(8))),
                    &[],
                );
                c.outcome.as_mut().unwrap().decided_by = Some(crate::search::rank::Figure::P99);
                c
            },
            won(&spec, (0.0, 1000, 0.0), Some((Arch::Epoll, None)), &[]),
            // The same winner, and one tied with the other's winner: unchanged.
            won(&spec, (0.0, 16, 100.0), Some((Arch::Epoll, None)), &[]),
            won(
                &spec,
                (0.0, 1000, 100.0),
                Some((Arch::Threaded, None)),
                &["epoll"],
            ),
            // The pool moved from 8 to 256.
            won(
                &spec,
                (0.0, 256, 100.0),
                Some((Arch::Prethreaded, Some(256))),
                &[],
            ),
        ];
        let mut r = results(spec, cells);
        let sentence = rtt_sentence(&r).unwrap();
        assert_eq!(
            sentence,
            "The path's round trip changes the winner in 1 of 3 cells: async-rtt100-r0-c256: \
             prethreaded/8 (by p99) at 0 ms, prethreaded/256 at 100 ms."
        );
        // Another architecture outright is a change too.
        r.cells[3] = won(&r.spec, (0.0, 16, 100.0), Some((Arch::Threaded, None)), &[]);
        assert!(rtt_sentence(&r).unwrap().contains("in 2 of 3 cells"));
        // A map per round trip: its table, its heat map, its words.
        r.summary = summary(&r);
        assert!(
            r.summary.contains("changes the winner in 2 of 3"),
            "{}",
            r.summary
        );
        let text = table(&r);
        assert!(text.contains("async waits, over loopback"), "{text}");
        assert!(
            text.contains("async waits, across a 100 ms round trip"),
            "{text}"
        );
        assert!(text.contains("N/(C+W+RTT)"), "{text}");
        let names: Vec<String> = heat_maps(&r).unwrap().into_iter().map(|m| m.0).collect();
        assert_eq!(names, ["map-async-rtt0.svg", "map-async-rtt100.svg"]);
        assert_eq!(
            path_words(&r).as_deref(),
            Some("round trips of 0 (loopback) and 100 ms")
        );
        // One round trip: no sentence, one map, no suffix.
        let one = MapSpec::from_toml("name='m'\ncpu_us=1000\nratios=[0]\nconcurrency=[16]\n", "t")
            .unwrap();
        let cells = vec![won(&one, (0.0, 16, 0.0), Some((Arch::Epoll, None)), &[])];
        let r = results(one, cells);
        assert_eq!(rtt_sentence(&r), None);
        assert_eq!(path_words(&r), None);
        let names: Vec<String> = heat_maps(&r).unwrap().into_iter().map(|m| m.0).collect();
        assert_eq!(names, ["map-async.svg"]);
        assert!(table(&r).contains("N/(C+W))"));
    }
}
