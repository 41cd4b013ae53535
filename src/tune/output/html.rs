//! `report.html`: the verdict in one sentence, the pick and the rules of thumb with what
//! limited each (the evidence a click away), the heat map, every configuration measured, the
//! notes.

use super::*;
use crate::render::html::{escape, page_start, PAGE_END};
use crate::render::numbers::{duration_us, percent, thousands};
use crate::search::rank::Level;
use crate::tune::spec::label;
use crate::tune::TuneResults;

/// `report.html`: the verdict and its table, the heat map, every configuration measured with
/// its costs, the notes.
pub fn report_html(r: &TuneResults, svg: &str) -> String {
    let mut html = page_start("sweetspot tune");
    html.push_str(&format!(
        "<h1>tune</h1>\n<p class=\"note\"><code>{}</code> at <code>{}</code></p>\n",
        escape(&r.command),
        escape(&r.url)
    ));
    html.push_str(&why_html(r));
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
    html.push_str(&model_html(r));
    let notes = notes(r);
    if !notes.is_empty() {
        html.push_str("<details class=\"reasons\" open><summary>Notes</summary>\n");
        for line in notes {
            html.push_str(&format!("<p class=\"note\">{}</p>\n", escape(&line)));
        }
        html.push_str("</details>\n");
    }
    html.push_str(PAGE_END);
    html
}

/// The "Why": the pick's sentence, then the pick and each rule of thumb with its req/s, p99,
/// what it loses against the pick and what limited it (the evidence a click away).
pub(super) fn why_html(r: &TuneResults) -> String {
    let mut html = format!(
        "<h2>Why</h2>\n<p class=\"verdict\">{}</p>\n",
        escape(&headline(r))
    );
    let Some(pick) = &r.pick else {
        return html;
    };
    html.push_str(
        "<div class=\"scroll\"><table class=\"why\"><tr><th></th><th>configuration</th>\
         <th>req/s</th><th>p99</th><th>loses</th><th>limited by</th></tr>\n",
    );
    html.push_str(&why_row(
        r,
        "the pick",
        &pick.pick,
        (&pick.level, "-".into()),
    ));
    for rule in &r.rules {
        let loses = if rule.meets_bound {
            percent((rule.rps_loss * 100.0).round() / 100.0)
        } else {
            format!(
                "misses the p99 bound ({})",
                rule.missed_because.as_deref().unwrap_or("p99 over it")
            )
        };
        html.push_str(&why_row(r, &rule.rule, &rule.values, (&rule.level, loses)));
    }
    html.push_str("</table></div>\n");
    html
}

/// One row of the "Why" table: a configuration, its level and loss, its limit.
fn why_row(r: &TuneResults, who: &str, values: &[u32], (level, loses): (&Level, String)) -> String {
    let limit = limit_at(r, values).map_or("-".into(), |l| {
        crate::render::html::evidence_cell(l.kind.name(), &l.evidence)
    });
    format!(
        "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
         <td class=\"num\">{}</td><td>{limit}</td></tr>\n",
        escape(who),
        escape(&label(&r.knobs, values)),
        thousands(level.rps.0),
        duration_us(level.p99_us),
        escape(&loses)
    )
}

/// `--predict`: the model's reading and every configuration it predicted beside what was
/// measured (nothing without the model).
fn model_html(r: &TuneResults) -> String {
    let Some(m) = &r.model else {
        return String::new();
    };
    let mut html = format!(
        "<h2>The model</h2>\n<p class=\"note\">{}; intervals +/-{}; {} of {} configurations measured to decide{}</p>\n",
        escape(&m.reading),
        percent(m.error),
        m.measured,
        m.configurations,
        match (m.median_miss, m.worst_miss) {
            (Some(median), Some(worst)) => format!(
                "; measured after they were predicted, {} of {} inside their intervals (median miss {}, worst {})",
                m.inside, m.checked, percent(median), percent(worst)
            ),
            _ => String::new(),
        }
    );
    html.push_str(
        "<div class=\"scroll\"><table><tr><th>configuration</th><th>predicted req/s</th>\
         <th>interval</th><th>p99 predicted</th><th>binds</th><th>measured req/s</th>\
         <th>p99 measured</th><th>why measured</th></tr>\n",
    );
    for p in &r.predictions {
        let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
        html.push_str(&format!(
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{} to {}</td>\
             <td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td>{}</td></tr>\n",
            escape(&p.label),
            thousands(p.rps),
            thousands(p.low),
            thousands(p.high),
            duration_us(p.p99_us),
            p.binding,
            or_dash(p.measured_rps.map(thousands)),
            or_dash(p.measured_p99_us.map(duration_us)),
            escape(p.why.as_deref().unwrap_or("-")),
        ));
    }
    html.push_str("</table></div>\n");
    html
}
