//! What the map shows, in sentences computed from its cells: where the architecture stops
//! mattering, what blocking waits need, where event loops win, where the rules of thumb are
//! off, what limited the winners, and how near the physical bound they came.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::map::halving::Outcome;
use crate::map::results::{CellResult, MapResults};
use crate::map::spec::WaitMode;
use crate::render::numbers::{percent, thousands};

/// What the map shows, in a paragraph computed from its cells: where the architecture stops
/// mattering, what blocking waits need, where event loops win and by how much, where the
/// rules of thumb are off, and how near the physical bound the winners came.
pub fn summary(results: &MapResults) -> String {
    sentences(results).join(" ")
}

/// The summary's sentences, the verdict over the cells (who won, or that any of several did)
/// first.
pub fn sentences(results: &MapResults) -> Vec<String> {
    let done: Vec<(&CellResult, &Outcome)> = results
        .cells
        .iter()
        .filter_map(|c| c.outcome.as_ref().map(|o| (c, o)))
        .collect();
    if done.is_empty() {
        return vec!["No cell was measured.".into()];
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
    parts.extend(share_sentence(&won));
    parts.extend(model_sentence(results));
    let infeasible = done.iter().filter(|(_, o)| o.infeasible.is_some()).count();
    if infeasible > 0 {
        parts.push(format!(
            "{infeasible} cells cannot meet the p99 bound on any server (Little's law), so they were not measured."
        ));
    }
    parts
}

/// The servers' CPU budget, when the map had one: what the bound and the pools followed.
pub(super) fn budget_sentence(results: &MapResults) -> Option<String> {
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
pub(super) fn limit_sentence(won: &[(&CellResult, &Outcome)]) -> Option<String> {
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
pub(super) fn lab_sentence(results: &MapResults) -> Option<String> {
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
pub(super) fn ties_sentence(cells: usize, won: &[(&CellResult, &Outcome)]) -> String {
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
pub(super) fn bound_sentence(
    won: &[(&CellResult, &Outcome)],
    round_trip_us: f64,
) -> Option<String> {
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
pub(super) fn cost_sentence(won: &[(&CellResult, &Outcome)]) -> Option<String> {
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
pub(super) fn blocking_sentence(won: &[(&CellResult, &Outcome)]) -> Option<String> {
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
pub(super) fn listed(lead: &str, items: &[String]) -> Option<String> {
    (!items.is_empty()).then(|| format!("{lead}: {}.", items.join(", ")))
}

/// Where event loops win outright, and by how much.
pub(super) fn event_loop_sentence(won: &[(&CellResult, &Outcome)]) -> Option<String> {
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
pub(super) fn rules_sentence(won: &[(&CellResult, &Outcome)]) -> Option<String> {
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
pub(super) fn verdict_archs(o: &Outcome) -> Vec<String> {
    let mut archs: Vec<String> = o.winner.iter().map(|w| w.arch.name().to_string()).collect();
    for tie in &o.ties {
        archs.push(tie.split('/').next().unwrap_or(tie).to_string());
    }
    archs
}

/// A cell's verdict and what decided it: `epoll (by throughput)`.
pub(super) fn verdict_words(c: &CellResult) -> String {
    match c.outcome.as_ref().and_then(|o| o.decided_by) {
        Some(f) => format!("{} (by {})", cell_text(c), f.name()),
        None => cell_text(c),
    }
}

/// Whether a cell's verdict differs from another's: another architecture that did not tie
/// there, a pool more than twice apart, or a winner on one side only (`None`: neither has one).
pub(super) fn winner_changed(o: &Outcome, b: &Outcome) -> Option<bool> {
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
pub(super) fn changes_against(
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
pub(super) fn cpus_sentence(results: &MapResults) -> Option<String> {
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
pub(super) fn rtt_sentence(results: &MapResults) -> Option<String> {
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

/// How near their bounds the winners came: their own (what a request cost each, on the cores
/// the load generator left it) and the workload's, `min(cores / C, N / (C + W))`, which leaves
/// both out.
pub(super) fn share_sentence(won: &[(&CellResult, &Outcome)]) -> Option<String> {
    let mean_low = |shares: &[f64]| {
        let mean = shares.iter().sum::<f64>() / shares.len() as f64;
        let low = shares.iter().copied().fold(f64::INFINITY, f64::min);
        (
            percent((mean * 100.0).round() / 100.0),
            percent((low * 100.0).round() / 100.0),
        )
    };
    let ideal: Vec<f64> = won
        .iter()
        .filter_map(|(_, o)| o.of_workload_bound())
        .collect();
    if ideal.is_empty() {
        return None;
    }
    let (ideal_mean, ideal_low) = mean_low(&ideal);
    let own: Vec<f64> = won
        .iter()
        .filter(|(_, o)| o.own_bound_rps().is_some())
        .filter_map(|(_, o)| o.of_bound())
        .collect();
    if own.is_empty() {
        return Some(format!(
            "The winners reach {ideal_mean} of the physical bound on average (lowest \
             {ideal_low})."
        ));
    }
    let (own_mean, own_low) = mean_low(&own);
    Some(format!(
        "The winners reach {own_mean} of their own bound on average (lowest {own_low}): what \
         a request cost each on the cores the load generator left it. Of the workload's \
         min(cores/C, N/(C+W)), which counts neither, they reach {ideal_mean} (lowest \
         {ideal_low})."
    ))
}

/// The model's error where it predicted a candidate that was then measured: per
/// architecture, the median and the worst miss (predicted against measured), and how many of
/// the measurements fell inside their intervals; and what it left out unmeasured.
pub(super) fn model_sentence(results: &MapResults) -> Option<String> {
    let rows: Vec<&crate::map::halving::PredictionRow> = results
        .cells
        .iter()
        .filter_map(|c| c.outcome.as_ref())
        .flat_map(|o| o.predictions.iter())
        .collect();
    let measured: Vec<_> = rows.iter().filter(|r| r.miss().is_some()).collect();
    if measured.is_empty() {
        return None;
    }
    let mut by_arch: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in &measured {
        let arch = r.label.split('/').next().unwrap_or(&r.label);
        by_arch
            .entry(arch)
            .or_default()
            .push(r.miss().unwrap_or(0.0).abs());
    }
    let per_arch: Vec<String> = by_arch
        .iter_mut()
        .map(|(arch, misses)| {
            misses.sort_by(f64::total_cmp);
            let median = misses[misses.len() / 2];
            let worst = misses[misses.len() - 1];
            format!(
                "{arch} {} (worst {}, {})",
                percent((median * 100.0).round() / 100.0),
                percent((worst * 100.0).round() / 100.0),
                misses.len()
            )
        })
        .collect();
    let inside = measured.iter().filter(|r| r.inside() == Some(true)).count();
    let left_out_by = |list: fn(&crate::map::halving::Outcome) -> &Vec<String>| -> usize {
        results
            .cells
            .iter()
            .filter_map(|c| c.outcome.as_ref())
            .map(|o| list(o).len())
            .sum()
    };
    let left_out = left_out_by(|o| &o.predicted_out);
    let over_budget = left_out_by(|o| &o.over_budget);
    let budget = results.spec.point_budget.map_or(String::new(), |b| {
        let total = b.points(results.full_grid_points);
        format!(
            " The run's budget, {} ({total} points), left {over_budget} more out, each \
             predicted and not measured; {}",
            b.text(),
            if results.points_measured > total {
                format!(
                    "it was passed by {} points: the servers the model did not know yet are \
                     measured whatever the budget, a cell it could not predict confirms its \
                     verdict in long runs, each cell is allowed at least 2, and one the model \
                     missed at least one more.",
                    results.points_measured - total
                )
            } else {
                format!("{} points were measured.", results.points_measured)
            }
        )
    });
    let p99 = p99_sentence(&measured);
    Some(format!(
        "The model predicted {} candidates that were then measured, {} of them inside their \
         intervals; its median miss by architecture: {}.{p99} It left {} candidates out \
         unmeasured.{budget}",
        measured.len(),
        inside,
        per_arch.join(", "),
        left_out
    ))
}

/// The model's miss on the p99s it predicted and were measured, a sentence (empty: none).
fn p99_sentence(measured: &[&&crate::map::halving::PredictionRow]) -> String {
    let mut p99_misses: Vec<f64> = measured
        .iter()
        .filter_map(|r| r.p99_miss())
        .map(f64::abs)
        .collect();
    p99_misses.sort_by(f64::total_cmp);
    if p99_misses.is_empty() {
        String::new()
    } else {
        format!(
            " Its p99, where it predicted one: a median miss of {} over {}, {} inside their \
             intervals.",
            percent((p99_misses[p99_misses.len() / 2] * 100.0).round() / 100.0),
            p99_misses.len(),
            measured
                .iter()
                .filter(|r| r.p99_inside() == Some(true))
                .count()
        )
    }
}
