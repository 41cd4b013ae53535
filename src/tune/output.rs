//! What `tune` prints and writes: `tune.md` (the pick with its costs, the measured curve of one
//! knob or the workers x threads table of two, the rules of thumb beside the pick, the points
//! measured against the grid, the grid's check), `tune.svg` (the heat map) and `report.html`.

use std::collections::BTreeSet;

use super::spec::label;
use super::TuneResults;
use crate::render::html::{escape, page_start, PAGE_END};
use crate::render::numbers::{duration_us, percent, thousands};
use crate::render::svg::{heat_map, HeatCell};
use crate::search::points_sentence;
use crate::search::Miss;

/// The results in words and tables.
pub fn text(r: &TuneResults) -> String {
    let mut out = format!(
        "tune: {}\n  {} at {}, p99 bound {}\n\n",
        r.command,
        match &r.urls {
            Some(urls) => format!("the requests of {urls}"),
            None => r.url.clone(),
        },
        match (&r.plan, r.rate) {
            (Some(plan), _) => format!("the plan {plan} ({} connections)", r.concurrency),
            (None, Some(rate)) => {
                format!("{} req/s ({} connections)", thousands(rate), r.concurrency)
            }
            (None, None) => format!("{} connections", r.concurrency),
        },
        duration_us(r.p99_bound_ms * 1000.0)
    );
    out.push_str(&headline(r));
    out.push('\n');
    if let Some(l) = r.pick.as_ref().and_then(|p| limit_at(r, &p.pick)) {
        out.push_str(&format!(
            "  what limited it: {}: {}\n",
            l.kind.name(),
            l.evidence
        ));
    }
    match &r.pick {
        Some(p) if p.level.rps.0 > 0.0 => {
            out.push_str(&format!(
                "  the smallest within 5% of the best measured whose p99 meets the bound; {} pass{} of coordinate search\n",
                p.passes,
                if p.passes == 1 { "" } else { "es" }
            ));
            match p.adopted_from.as_deref() {
                Some("search") => out.push_str(
                    "  (measured by the search, it beat the search's own pick by more than 5%, three runs each: it is the pick)\n",
                ),
                Some(rule) => out.push_str(&format!(
                    "  ({rule}'s configuration beat the search's own pick by more than 5%, three runs each: it is the pick)\n"
                )),
                None => {}
            }
        }
        _ => {}
    }
    out.push('\n');
    out.push_str(&table(r));
    if !r.rules.is_empty() {
        out.push_str("\nBeside it, the rules of thumb:\n| rule | configuration | req/s | p99 | loses |\n|---|---|---|---|---|\n");
        for rule in &r.rules {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                rule.rule,
                label(&r.knobs, &rule.values),
                if rule.meets_bound {
                    thousands(rule.level.rps.0)
                } else {
                    format!(
                        "misses the p99 bound ({})",
                        rule.missed_because.as_deref().unwrap_or("p99 over it")
                    )
                },
                duration_us(rule.level.p99_us),
                if rule.meets_bound {
                    percent((rule.rps_loss * 100.0).round() / 100.0)
                } else {
                    "all".into()
                }
            ));
        }
    }
    let limits: Vec<String> = r
        .rules
        .iter()
        .filter_map(|rule| {
            let l = limit_at(r, &rule.values)?;
            Some(format!(
                "- {} ({}): {}: {}",
                rule.rule,
                label(&r.knobs, &rule.values),
                l.kind.name(),
                l.evidence
            ))
        })
        .collect();
    if !limits.is_empty() {
        out.push_str(&format!(
            "\nWhat limited each rule's configuration:\n{}\n",
            limits.join("\n")
        ));
    }
    for line in notes(r) {
        out.push_str(&format!("\n{line}\n"));
    }
    out
}

/// What limited the last run of the configuration `values`, where it was measured.
pub fn limit_at<'r>(r: &'r TuneResults, values: &[u32]) -> Option<&'r crate::lab::limit::Limit> {
    r.measured
        .iter()
        .find(|c| c.values == values)?
        .samples
        .last()?
        .limit
        .as_ref()
}

/// The pick in one line (or why there is none).
fn headline(r: &TuneResults) -> String {
    match &r.pick {
        Some(p) if p.level.rps.0 > 0.0 => {
            let row = r.measured.iter().find(|c| c.values == p.pick);
            format!(
                "sweet spot: {} ({} req/s, p99 {}, {} of server CPU a request, {:.0} MB peak RSS{})",
                label(&r.knobs, &p.pick),
                thousands(p.level.rps.0),
                duration_us(p.level.p99_us),
                duration_us(p.level.cpu_us),
                p.level.rss_kb / 1024.0,
                row.and_then(|c| c.samples.last())
                    .map(|s| format!(", {} threads in {} processes", s.threads, s.processes))
                    .unwrap_or_default()
            )
        }
        Some(_) => "no configuration met the p99 bound".into(),
        None => "interrupted before a pick".into(),
    }
}

/// The profile behind Goetz's pool, the points measured against the grid, and the grid's
/// check: a line each, for the text and the report.
fn notes(r: &TuneResults) -> Vec<String> {
    let mut out = Vec::new();
    if r.replicas > 1 {
        out.push(format!(
            "{} copies of the server ran side by side, each on its own port{}, the connections \
             spread over them in turn; the figures are theirs together.",
            r.replicas,
            if r.budget.given() {
                " in a budget of its own (below)"
            } else {
                ""
            }
        ));
    }
    if r.budget.given() {
        let mut what: Vec<String> = r
            .budget
            .cpus
            .map(|q| {
                format!(
                    "a CPU quota of {} (--cpus)",
                    crate::lab::budget::cores_words(q)
                )
            })
            .into_iter()
            .collect();
        what.extend(
            r.budget
                .cpuset
                .as_ref()
                .map(|l| format!("CPUs {l} only (--cpuset)")),
        );
        out.push(format!(
            "The server ran under {}, the load generator outside it: Goetz's pool counts {}, \
             and 2n+1 takes n = {}.",
            what.join(" on "),
            crate::lab::budget::cores_words(r.budget.cores),
            r.budget.whole_cores
        ));
    }
    for line in crate::lab::budget::oversized_lines(&r.oversized) {
        out.push(format!("Over its quota at once: {line}."));
    }
    if let Some(p) = &r.profile {
        out.push(format!(
            "Profile at one connection ({}): {} of CPU a request, mean latency {}{}, so a wait of {}: Goetz's pool {} requests at once.",
            label(&r.knobs, &p.values),
            duration_us(p.cpu_us),
            duration_us(p.mean_latency_ms * 1000.0),
            if p.runqueue_us >= 1.0 {
                format!(" ({} of it on a run queue)", duration_us(p.runqueue_us))
            } else {
                String::new()
            },
            if p.wait_ms * 1000.0 >= 1.0 {
                duration_us(p.wait_ms * 1000.0)
            } else {
                "0".into()
            },
            p.goetz
        ));
    }
    out.push(points_sentence(r.points_measured, r.wall_s, r.grid_points));
    if let Some(v) = &r.verify {
        out.push(format!(
            "Checked against the full grid ({} points): its best is {} ({} req/s, p99 {}); the pick measured {} req/s there: {}",
            v.points,
            label(&r.knobs, &v.best),
            thousands(v.best_level.rps.0),
            duration_us(v.best_level.p99_us),
            thousands(v.pick_level.rps.0),
            if v.inside {
                "the pick is inside the best's spread"
            } else {
                "the pick is OUTSIDE the best's spread"
            }
        ));
    }
    out
}

/// One knob: its curve, a row a value. Two: the first knob's values as rows, the second's as
/// columns, req/s in each measured cell (`-`: not measured; `x`: the p99 missed the bound).
fn table(r: &TuneResults) -> String {
    let bound_us = r.p99_bound_ms * 1000.0;
    let pick = r
        .pick
        .as_ref()
        .filter(|p| p.level.rps.0 > 0.0)
        .map(|p| p.pick.clone())
        .unwrap_or_default();
    let cell = |values: &[u32]| -> String {
        let mark = if values == pick.as_slice() { " *" } else { "" };
        match r.measured.iter().find(|c| c.values == values) {
            None => "-".into(),
            Some(c) if c.level.rps.0 <= 0.0 => {
                format!("{}{mark}", c.miss(bound_us).map_or("x", |miss| miss.mark()))
            }
            Some(c) => format!("{}{mark}", thousands(c.level.rps.0)),
        }
    };
    if r.knobs.len() == 1 {
        let mut out = format!(
            "| {} | req/s | p99 | CPU / request | peak RSS |\n|---|---|---|---|---|\n",
            r.knobs[0].name
        );
        for c in &r.measured {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {:.0} MB |\n",
                c.values[0],
                cell(&c.values),
                duration_us(c.level.p99_us),
                duration_us(c.level.cpu_us),
                c.level.rss_kb / 1024.0
            ));
        }
        return out;
    }
    let rows: BTreeSet<u32> = r.measured.iter().map(|c| c.values[0]).collect();
    let cols: BTreeSet<u32> = r.measured.iter().map(|c| c.values[1]).collect();
    let mut out = format!(
        "req/s by {} (rows) and {} (columns); *: the pick, -: not measured; missing the p99 bound: x p99 over it, u requests left unanswered, e over 1% errors, l the lab (generator or path) set the figure\n| {} \\ {} |",
        r.knobs[0].name, r.knobs[1].name, r.knobs[0].name, r.knobs[1].name
    );
    for c in &cols {
        out.push_str(&format!(" {c} |"));
    }
    out.push_str(&format!("\n|---|{}\n", "---|".repeat(cols.len())));
    for row in &rows {
        out.push_str(&format!("| {row} |"));
        for col in &cols {
            out.push_str(&format!(" {} |", cell(&[*row, *col])));
        }
        out.push('\n');
    }
    out
}

/// The heat map of the measured configurations (two knobs: the first as rows, the second as
/// columns; one knob: a row): each labelled with its req/s and p99, the pick in one colour,
/// those within 5% of it in another, p99 misses hatched.
pub fn heat_map_svg(r: &TuneResults) -> anyhow::Result<String> {
    let two = r.knobs.len() == 2;
    let axis = |i: usize| -> Vec<u32> {
        r.measured
            .iter()
            .map(|c| c.values[i])
            .collect::<BTreeSet<u32>>()
            .into_iter()
            .collect()
    };
    let cols = axis(r.knobs.len() - 1);
    let rows = if two { axis(0) } else { vec![0] };
    let pick = r
        .pick
        .as_ref()
        .filter(|p| p.level.rps.0 > 0.0)
        .map(|p| (p.pick.clone(), p.level.rps.0));
    let mut cells = Vec::new();
    for c in &r.measured {
        let column = cols.iter().position(|v| *v == c.values[r.knobs.len() - 1]);
        let row = if two {
            rows.iter().position(|v| *v == c.values[0])
        } else {
            Some(0)
        };
        let (Some(column), Some(row)) = (column, row) else {
            continue;
        };
        let missed = c.level.rps.0 <= 0.0;
        let color = match &pick {
            Some((p, _)) if *p == c.values => Some(0),
            Some((_, best)) if !missed && c.level.rps.0 >= best * 0.95 => Some(2),
            _ => None,
        };
        cells.push(HeatCell {
            column,
            row,
            color,
            hatched: missed,
            lines: vec![
                if missed {
                    match c.miss(r.p99_bound_ms * 1000.0) {
                        Some(Miss::Unanswered) => "unanswered".into(),
                        Some(Miss::Errors) => "errors".into(),
                        Some(Miss::Lab(kind)) => format!("lab: {}", kind.name()),
                        _ => "misses p99".into(),
                    }
                } else {
                    format!("{} req/s", thousands(c.level.rps.0))
                },
                format!("p99 {}", duration_us(c.level.p99_us)),
            ],
        });
    }
    let title = format!(
        "tune: req/s and p99 of each configuration measured, {} connections",
        r.concurrency
    );
    let (y_title, row_names) = if two {
        (
            r.knobs[0].name.clone(),
            rows.iter().map(u32::to_string).collect(),
        )
    } else {
        (String::new(), vec![String::new()])
    };
    heat_map(
        &title,
        &r.knobs[r.knobs.len() - 1].name,
        &cols.iter().map(u32::to_string).collect::<Vec<_>>(),
        &y_title,
        &row_names,
        &cells,
        &[
            ("the pick".to_string(), 0),
            ("within 5% of it".to_string(), 2),
        ],
    )
}

/// `report.html`: the pick, the heat map, every configuration measured with its costs, the
/// rules of thumb and the grid's check.
pub fn report_html(r: &TuneResults, svg: &str) -> String {
    let mut html = page_start("sweetspot tune");
    html.push_str(&format!(
        "<h1>tune</h1>\n<p class=\"note\"><code>{}</code> at <code>{}</code></p>\n",
        escape(&r.command),
        escape(&r.url)
    ));
    html.push_str(&format!(
        "<p class=\"summary\">{}</p>\n",
        escape(&headline(r))
    ));
    html.push_str(&format!("<figure>{svg}</figure>\n"));
    html.push_str("<h2>Every configuration measured</h2>\n<div class=\"scroll\"><table><tr>");
    for k in &r.knobs {
        html.push_str(&format!("<th>{}</th>", escape(&k.name)));
    }
    html.push_str(
        "<th>req/s</th><th>p99</th><th>CPU / request</th><th>peak RSS</th><th>threads</th>\
         <th>processes</th><th>runs</th></tr>\n",
    );
    for c in &r.measured {
        html.push_str("<tr>");
        for v in &c.values {
            html.push_str(&format!("<td class=\"num\">{v}</td>"));
        }
        let last = c.samples.last();
        html.push_str(&format!(
            "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{:.1} MiB</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td></tr>\n",
            match c.miss(r.p99_bound_ms * 1000.0) {
                None => thousands(c.level.rps.0),
                Some(miss) => escape(&format!("misses ({})", miss.text(r.p99_bound_ms * 1000.0))),
            },
            duration_us(c.level.p99_us),
            duration_us(c.level.cpu_us),
            c.level.rss_kb / 1024.0,
            last.map_or(0, |s| s.threads),
            last.map_or(0, |s| s.processes),
            c.samples.len()
        ));
    }
    html.push_str("</table></div>\n");
    if !r.rules.is_empty() {
        html.push_str(
            "<h2>The rules of thumb</h2>\n<table><tr><th>rule</th><th>configuration</th>\
             <th>req/s</th><th>p99</th><th>loses</th></tr>\n",
        );
        for rule in &r.rules {
            html.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td></tr>\n",
                escape(&rule.rule),
                escape(&label(&r.knobs, &rule.values)),
                thousands(rule.level.rps.0),
                duration_us(rule.level.p99_us),
                if rule.meets_bound {
                    percent((rule.rps_loss * 100.0).round() / 100.0)
                } else {
                    escape(&format!(
                        "misses the p99 bound ({})",
                        rule.missed_because.as_deref().unwrap_or("p99 over it")
                    ))
                }
            ));
        }
        html.push_str("</table>\n");
    }
    for line in notes(r) {
        html.push_str(&format!("<p class=\"note\">{}</p>\n", escape(&line)));
    }
    html.push_str(PAGE_END);
    html
}
