//! What `tune` prints and writes to `tune.md`: the pick with its costs, the measured curve (one
//! knob) or the workers x threads table (two), the rules of thumb beside the pick, the points
//! measured against the grid, and the grid's check.

use std::collections::BTreeSet;

use super::spec::label;
use super::TuneResults;
use crate::render::units::{duration_us, percent, thousands, wall_time};

/// The results in words and tables.
pub fn text(r: &TuneResults) -> String {
    let mut out = format!(
        "tune: {}\n  {} at {}, p99 bound {}\n\n",
        r.command,
        r.url,
        match r.rate {
            Some(rate) => format!("{} req/s ({} connections)", thousands(rate), r.concurrency),
            None => format!("{} connections", r.concurrency),
        },
        duration_us(r.p99_bound_ms * 1000.0)
    );
    match &r.pick {
        Some(p) if p.level.rps.0 > 0.0 => {
            let row = r.measured.iter().find(|c| c.values == p.pick);
            out.push_str(&format!(
                "sweet spot: {} ({} req/s, p99 {}, {} of server CPU a request, {:.0} MB peak RSS{})\n",
                label(&r.knobs, &p.pick),
                thousands(p.level.rps.0),
                duration_us(p.level.p99_us),
                duration_us(p.level.cpu_us),
                p.level.rss_kb / 1024.0,
                row.and_then(|c| c.samples.last())
                    .map(|s| format!(", {} threads in {} processes", s.threads, s.processes))
                    .unwrap_or_default()
            ));
            out.push_str(&format!(
                "  the smallest within 5% of the best measured whose p99 meets the bound; {} pass{} of coordinate search\n",
                p.passes,
                if p.passes == 1 { "" } else { "es" }
            ));
        }
        Some(_) => out.push_str("no configuration met the p99 bound\n"),
        None => out.push_str("interrupted before a pick\n"),
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
                    "misses the p99 bound".into()
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
    if let Some(p) = &r.profile {
        out.push_str(&format!(
            "\nProfile at one connection ({}): {} of CPU a request, mean latency {}, so a wait of {}: Goetz's pool {} requests at once.\n",
            label(&r.knobs, &p.values),
            duration_us(p.cpu_us),
            duration_us(p.mean_latency_ms * 1000.0),
            duration_us(p.wait_ms * 1000.0),
            p.goetz
        ));
    }
    out.push_str(&format!(
        "\n{} points measured in {}, where the full grid needs {} ({:.1}% of it)\n",
        r.points_measured,
        wall_time(r.wall_s),
        r.grid_points,
        100.0 * r.points_measured as f64 / r.grid_points.max(1) as f64
    ));
    if let Some(v) = &r.verify {
        out.push_str(&format!(
            "Checked against the full grid ({} points): its best is {} ({} req/s, p99 {}); the pick measured {} req/s there: {}\n",
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
    let pick = r.pick.as_ref().map(|p| p.pick.clone()).unwrap_or_default();
    let cell = |values: &[u32]| -> String {
        let mark = if values == pick.as_slice() { " *" } else { "" };
        match r.measured.iter().find(|c| c.values == values) {
            None => "-".into(),
            Some(c) if c.level.rps.0 <= 0.0 => format!("x{mark}"),
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
        "req/s by {} (rows) and {} (columns); *: the pick, -: not measured, x: p99 over the bound\n| {} \\ {} |",
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
