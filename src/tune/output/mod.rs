//! What `tune` prints and writes, one file per format: `tune.md` and the terminal
//! ([`markdown`]: the pick with its costs, the measured curve of one knob or the workers x
//! threads table of two, the rules of thumb beside the pick, the points measured against the
//! grid, the grid's check), `tune.svg` ([`svg`]: the heat map) and `report.html` ([`html`]: the
//! verdict, the pick and the rules with what limited each, every configuration). Here: what
//! they share, and [`write_all`].

pub mod html;
pub mod markdown;
pub mod svg;

use std::path::Path;

use super::spec::label;
use super::TuneResults;
use crate::render::numbers::{duration_us, thousands};
use crate::search::points_sentence;

pub use html::report_html;
pub use markdown::text;
pub use svg::heat_map_svg;

/// `results.json` (through the one writer of a run's record), `tune.md`, `tune.svg` and
/// `report.html` in `dir`, each whole or not at all.
pub fn write_all(dir: &Path, results: &TuneResults) -> anyhow::Result<()> {
    crate::render::json::write_record(dir, results)?;
    crate::render::json::write_file(&dir.join("tune.md"), &text(results))?;
    let svg = heat_map_svg(results)?;
    crate::render::json::write_file(&dir.join("tune.svg"), &svg)?;
    crate::render::json::write_file(&dir.join("report.html"), &report_html(results, &svg))
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
pub(super) fn headline(r: &TuneResults) -> String {
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
pub(super) fn notes(r: &TuneResults) -> Vec<String> {
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
