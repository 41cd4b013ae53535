//! `tune.md`, and what the terminal shows: the pick, its limit, the measured table, the
//! rules of thumb and what limited each, the notes.

use super::*;
use crate::render::numbers::{duration_us, percent, thousands};
use crate::tune::spec::label;
use crate::tune::TuneResults;
use std::collections::BTreeSet;

/// The results in words and tables.
pub fn text(r: &TuneResults) -> String {
    let mut out = what_was_asked(r);
    out.push_str(&headline(r));
    out.push('\n');
    out.push_str(&pick_lines(r));
    out.push('\n');
    out.push_str(&table(r));
    out.push_str(&model_lines(r));
    out.push_str(&rules_table(r));
    out.push_str(&rule_limits(r));
    for line in notes(r) {
        out.push_str(&format!("\n{line}\n"));
    }
    out
}

/// The command, the load and the bound.
fn what_was_asked(r: &TuneResults) -> String {
    format!(
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
    )
}

/// What limited the pick, how it was chosen, and where it came from when a rule's or another
/// measured configuration beat the search's own.
fn pick_lines(r: &TuneResults) -> String {
    let mut out = String::new();
    if let Some(l) = r.pick.as_ref().and_then(|p| limit_at(r, &p.pick)) {
        out.push_str(&format!(
            "  what limited it: {}: {}\n",
            l.kind.name(),
            l.evidence
        ));
    }
    let Some(p) = r.pick.as_ref().filter(|p| p.level.rps.0 > 0.0) else {
        return out;
    };
    match &r.model {
        Some(m) => out.push_str(&format!(
            "  the smallest within 5% of the best measured whose p99 meets the bound; the model predicted all {} configurations, {} measured to decide\n",
            m.configurations, m.measured
        )),
        None => out.push_str(&format!(
            "  the smallest within 5% of the best measured whose p99 meets the bound; {} pass{} of coordinate search\n",
            p.passes,
            if p.passes == 1 { "" } else { "es" }
        )),
    }
    match p.adopted_from.as_deref() {
        Some("search") => out.push_str(
            "  (measured by the search, it beat the search's own pick by more than 5%, three runs each: it is the pick)\n",
        ),
        Some(rule) => out.push_str(&format!(
            "  ({rule}'s configuration beat the search's own pick by more than 5%, three runs each: it is the pick)\n"
        )),
        None => {}
    }
    out
}

/// The rules of thumb beside the pick, as a Markdown table (none without rules).
fn rules_table(r: &TuneResults) -> String {
    if r.rules.is_empty() {
        return String::new();
    }
    let mut out = String::from("\nBeside it, the rules of thumb:\n| rule | configuration | req/s | p99 | loses |\n|---|---|---|---|---|\n");
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
    out
}

/// What limited each rule's configuration, a line each.
fn rule_limits(r: &TuneResults) -> String {
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
    if limits.is_empty() {
        return String::new();
    }
    format!(
        "\nWhat limited each rule's configuration:\n{}\n",
        limits.join("\n")
    )
}

/// One knob: its curve, a row a value. Two: the first knob's values as rows, the second's as
/// columns, req/s in each measured cell (`-`: not measured; `x`: the p99 missed the bound).
pub(super) fn table(r: &TuneResults) -> String {
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

/// `--predict`: the model's reading of the knobs, its error where it was checked, and every
/// configuration it predicted beside what was measured (none without the model).
fn model_lines(r: &TuneResults) -> String {
    let Some(m) = &r.model else {
        return String::new();
    };
    let mut out = format!(
        "\nThe model: {}; intervals +/-{}\n",
        m.reading,
        percent(m.error)
    );
    if let (Some(median), Some(worst)) = (m.median_miss, m.worst_miss) {
        out.push_str(&format!(
            "  measured after it was predicted: {} of {} inside their intervals, median miss {}, worst {}\n",
            m.inside,
            m.checked,
            percent(median),
            percent(worst)
        ));
    }
    out.push_str(
        "\n| configuration | predicted req/s | interval | p99 predicted | binds | measured req/s | p99 measured | why measured |\n|---|---|---|---|---|---|---|---|\n",
    );
    for p in &r.predictions {
        let measured = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".to_string(), f);
        out.push_str(&format!(
            "| {} | {} | {}-{} | {} | {} | {} | {} | {} |\n",
            p.label,
            thousands(p.rps),
            thousands(p.low),
            thousands(p.high),
            duration_us(p.p99_us),
            p.binding,
            measured(p.measured_rps, &|x| thousands(x)),
            measured(p.measured_p99_us, &|x| duration_us(x)),
            p.why.as_deref().unwrap_or("-"),
        ));
    }
    out
}
