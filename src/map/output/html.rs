//! `report.html`: the map's verdict in one sentence, the winners and what limited each, the
//! rest of the reasoning folded, the heat maps, and every cell's candidates.

use super::*;
use crate::map::halving::CandidateRow;
use crate::map::results::{CellResult, MapResults};
use crate::render::html::{escape, page_start, PAGE_END};
use crate::render::numbers::{duration_us, percent, thousands};

/// A cell's candidates as an HTML table.
pub(super) fn candidates_html(c: &CellResult) -> String {
    let Some(o) = &c.outcome else {
        return String::new();
    };
    let mut html = format!(
        "<h3>{}</h3>\n<p class=\"note\">{} connections, {} us CPU and {} ms of {} wait a request{}; \
         the bound min(cores/C, N/(C+W{})) is {} req/s{}. Verdict: <b>{}</b>{}.</p>\n",
        escape(&c.cell.key),
        c.cell.concurrency,
        c.cell.cpu_us,
        c.cell.wait_ms,
        c.cell.wait.name(),
        c.cell.net
            .map(|n| format!(", across a path of {}", escape(&n.describe())))
            .unwrap_or_default(),
        if c.cell.net.is_some() { "+RTT" } else { "" },
        thousands(o.bound_rps),
        o.own_bound_rps()
            .map(|b| format!(
                "; the winner's own, counting what a request cost it and the load generator's \
                 share of the machine, {} req/s",
                thousands(b)
            ))
            .unwrap_or_default(),
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
        "<div class=\"scroll\"><table><tr><th>candidate</th><th>req/s</th><th>of its bound</th>\
         <th>of the workload's</th>\
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

pub(super) fn candidate_row_html(r: &CandidateRow, bound: f64) -> String {
    let p99 = if r.p99_lower_bound {
        format!("&ge; {}", duration_us(r.p99_us))
    } else {
        duration_us(r.p99_us)
    };
    let missed = r.rps.0 <= 0.0;
    let share = |bound: f64| {
        if bound > 0.0 {
            percent((r.measured_rps / bound * 100.0).round() / 100.0)
        } else {
            "-".into()
        }
    };
    format!(
        "<tr><td>{}</td><td class=\"num{}\">{}{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{p99}</td>\
         <td class=\"num\">{}</td><td class=\"num\">{:.1} MiB</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
         <td class=\"num\">{}</td></tr>\n",
        escape(&r.label),
        if missed { " failed" } else { "" },
        thousands(r.measured_rps),
        if missed { " (misses p99)" } else { "" },
        share(r.bound_rps),
        share(bound),
        duration_us(r.cpu_us),
        r.rss_kb / 1024.0,
        r.threads,
        r.processes,
        runs_text(r)
    )
}

pub(super) fn report_html(results: &MapResults, maps: &[(String, String)]) -> String {
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
    html.push_str(&why_html(results));
    for (_, svg) in maps {
        html.push_str(&format!("<figure>{svg}</figure>\n"));
    }
    html.push_str("<h2>Every cell's candidates</h2>\n");
    for c in &results.cells {
        html.push_str(&candidates_html(c));
    }
    html.push_str(&format!(
        "<p class=\"note\">{}.</p>\n{PAGE_END}",
        escape(&super::points_sentence(results))
    ));
    html
}

/// The map's "Why": its verdict in one sentence, a row a cell (the winner, req/s, its share of
/// the bound, p99, what decided it, what limited it with the evidence a click away, the points
/// it took), and the rest of the reasoning folded under it.
pub(super) fn why_html(results: &MapResults) -> String {
    let sentences = super::summary::sentences(results);
    let mut html = String::from("<h2>Why</h2>\n");
    if let Some(verdict) = sentences.first() {
        html.push_str(&format!("<p class=\"verdict\">{}</p>\n", escape(verdict)));
    }
    html.push_str(
        "<div class=\"scroll\"><table class=\"why\"><tr><th>cell</th><th>verdict</th>\
        <th>req/s</th><th>of bound</th><th>p99</th><th>decided by</th><th>limited by</th>\
        <th>points</th></tr>\n",
    );
    for c in &results.cells {
        html.push_str(&winner_row(c));
    }
    html.push_str("</table></div>\n");
    if sentences.len() > 1 {
        html.push_str("<details class=\"reasons\"><summary>The reasoning in full</summary>\n");
        for s in &sentences[1..] {
            html.push_str(&format!("<p>{}</p>\n", escape(s)));
        }
        html.push_str("</details>\n");
    }
    html
}

/// One cell's row of the "Why" table.
fn winner_row(c: &CellResult) -> String {
    let o = c.outcome.as_ref();
    let winner_row = o.and_then(|o| {
        let label = o.winner?.label();
        o.candidates.iter().find(|r| r.label == label)
    });
    let limit = winner_row
        .and_then(|r| r.limit.as_ref())
        .map_or("-".into(), |l| {
            crate::render::html::evidence_cell(l.kind.name(), &l.evidence)
        });
    format!(
        "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
         <td class=\"num\">{}</td><td>{}</td><td>{limit}</td><td class=\"num\">{} of {}</td></tr>\n",
        escape(&c.cell.key),
        escape(&cell_text(c)),
        o.map(|o| thousands(o.rps)).unwrap_or_default(),
        o.and_then(bound_share).unwrap_or_default(),
        o.map(|o| duration_us(o.p99_us)).unwrap_or_default(),
        o.and_then(|o| o.decided_by)
            .map(|f| f.name())
            .unwrap_or("-"),
        c.points_measured,
        c.full_grid_points
    )
}
