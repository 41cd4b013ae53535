//! The `--html` page of `sweetspot merge`: the merged figures and one row per worker, as plain
//! tables in one self-contained file (no scripts, no external styles).

use std::fmt::Write;

use super::MergedReport;
use crate::load::LatencyKey;
use crate::render::html::{escape, page_start, PAGE_END};

/// The whole page.
pub fn render(m: &MergedReport) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "{start}<h1>Distributed load run: {segments} segments</h1>\n\
         <p>Target <code>{target}</code>, {mode} mode, {conns} connections{rate}. \
         Percentiles come from the workers' histograms added together (never averaged); \
         a value marked &ge; is a lower bound.</p>\n",
        start = page_start(&format!("sweetspot merge: {}", m.target)),
        target = escape(&m.target),
        segments = m.segments,
        mode = escape(&m.mode),
        conns = m.connections,
        rate = m
            .target_rate
            .map_or(String::new(), |r| format!(", {r} req/s asked")),
    );
    let _ = write!(
        o,
        "<table><tr><th>requests</th><th>req/s (common interval)</th><th>common interval s</th>\
         <th>first start to last end s</th><th>errors</th><th>unanswered</th><th>generator CPU s</th></tr>\
         <tr><td>{}</td><td>{:.1}</td><td>{:.3}</td><td>{:.3}</td><td>{}</td><td>{}</td><td>{:.3}</td></tr></table>",
        m.requests,
        m.rps,
        m.common_interval_s,
        m.duration_s,
        m.errors.total(),
        m.unanswered,
        m.client_cpu_s
    );
    o.push('\n');
    latency_table(&mut o, m);
    if let Some(h2) = &m.http2 {
        let mut text = String::new();
        crate::load::scaleout::h2_block(&mut text, h2, m.connections as usize);
        let _ = write!(
            o,
            "<h2>HTTP/2</h2>\n<pre>{}</pre>\n",
            escape(text.trim_end())
        );
    }
    if let Some(tls) = &m.tls {
        let mut text = String::new();
        crate::load::scaleout::tls_block(&mut text, tls, true);
        let _ = write!(o, "<h2>TLS</h2>\n<pre>{}</pre>\n", escape(text.trim_end()));
    }
    o.push_str("<h2>Errors and status codes</h2>\n<table><tr>");
    let e = &m.errors;
    for (name, n) in [
        ("connect", e.connect),
        ("read", e.read),
        ("write", e.write),
        ("timeout", e.timeout),
        ("protocol", e.protocol),
    ] {
        let _ = write!(o, "<th>{name}</th><td>{n}</td>");
    }
    for (code, n) in &m.status {
        let _ = write!(o, "<th>{}</th><td>{n}</td>", escape(code));
    }
    o.push_str("</tr></table>\n");
    workers_table(&mut o, m);
    o.push_str(PAGE_END);
    o
}

/// The merged latency, and the uncorrected view where there is one, a row each.
fn latency_table(o: &mut String, m: &MergedReport) {
    o.push_str("<h2>Latency (&micro;s)</h2>\n<table><tr><th>view</th>");
    for k in LatencyKey::ALL {
        let _ = write!(o, "<th>{}</th>", k.name());
    }
    o.push_str("</tr>\n");
    let mut row = |name: &str, s: &crate::load::LatencySummary| {
        let _ = write!(o, "<tr><th>{name}</th>");
        for k in LatencyKey::ALL {
            let v = s.get(k);
            let mark = if s.lower_bound.contains(k) {
                "&ge;"
            } else {
                ""
            };
            let _ = write!(o, "<td>{mark}{v:.0}</td>");
        }
        o.push_str("</tr>\n");
    };
    row("merged", &m.latency_us);
    if let Some(u) = &m.latency_uncorrected_us {
        row("uncorrected", u);
    }
    o.push_str("</table>\n");
}

/// One row per worker: its segment, share, figures, CPU and start.
fn workers_table(o: &mut String, m: &MergedReport) {
    o.push_str(
        "<h2>Workers</h2>\n<table><tr><th>segment</th><th>source</th><th>host</th>\
         <th>connections</th><th>share</th><th>requests</th><th>share of requests</th><th>req/s</th>\
         <th>errors</th><th>generator CPU s</th><th>busy</th><th>started +s</th><th>late s</th></tr>\n",
    );
    for w in &m.workers {
        let _ = write!(
            o,
            "<tr{cls}><td>{}/{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}%</td><td>{}</td>\
             <td>{:.1}%</td><td>{:.1}</td><td>{}</td><td>{:.3}</td><td>{:.0}%{sat}</td><td>{:.3}</td><td>{}</td></tr>",
            w.index,
            m.segments,
            escape(&w.source),
            escape(&w.host),
            w.connections,
            w.share * 100.0,
            w.requests,
            w.requests_share * 100.0,
            w.rps,
            w.errors,
            w.client_cpu_s,
            w.client_busy * 100.0,
            w.start_offset_s,
            w.start_late_s.map_or("-".to_string(), |l| format!("{l:.3}")),
            cls = if w.saturated { " class=\"sat\"" } else { "" },
            sat = if w.saturated { " saturated" } else { "" },
        );
        o.push('\n');
    }
    o.push_str("</table>\n");
}
