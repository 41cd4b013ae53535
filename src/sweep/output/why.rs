//! The "Why" of a sweep's report, as an engineer reads it: for each workload its verdict in one
//! sentence, then a table of every architecture at its best level (req/s with its range over
//! the repetitions, p99, server CPU a request, what limited it in a word, the evidence a hover
//! or a click away), the architectures that met no bound below it, and the reasoning in full
//! folded under it. Sentences about no one workload follow, one a line. `table.md` takes the
//! same verdicts and tables ([`why_markdown`]).

use std::fmt::Write as _;

use super::{duration_us, thousands};
use crate::render::html::escape;
use crate::sweep::analysis::findings::{BestChoice, RankedArch, WorkloadAnalysis};
use crate::sweep::results::SweepResults;

/// Whether a sentence of the recommendation is about `workload`: it starts `workload:` or
/// `For workload,`.
fn about(line: &str, workload: &str) -> bool {
    line.strip_prefix(workload)
        .is_some_and(|rest| rest.starts_with(':'))
        || line
            .strip_prefix("For ")
            .and_then(|rest| rest.strip_prefix(workload))
            .is_some_and(|rest| rest.starts_with(','))
}

/// The one-sentence verdict of a workload: its summary line, without the workload's name.
fn verdict<'a>(results: &'a SweepResults, workload: &str) -> Option<&'a str> {
    results
        .recommendation
        .summary
        .iter()
        .find(|l| about(l, workload))
        .map(|l| l[workload.len() + 1..].trim())
}

/// A ranked architecture's figures as the tables show them: connections, req/s, its range
/// over the repetitions, p99, server CPU a request.
fn figures(r: &RankedArch) -> [String; 5] {
    [
        thousands(f64::from(r.concurrency)),
        thousands(r.rps),
        format!("{}..{}", thousands(r.rps_min), thousands(r.rps_max)),
        duration_us(r.p99_us),
        if r.cpu_us_per_request > 0.0 {
            duration_us(r.cpu_us_per_request)
        } else {
            "-".into()
        },
    ]
}

/// The sentences of the recommendation about `workload`.
fn reasons_of<'a>(
    results: &'a SweepResults,
    workload: &'a str,
) -> impl Iterator<Item = &'a String> {
    results
        .recommendation
        .details
        .iter()
        .filter(move |l| about(l, workload))
}

/// The sentences about no one workload.
fn general(results: &SweepResults) -> Vec<&String> {
    let workloads = &results.analysis.workloads;
    results
        .recommendation
        .details
        .iter()
        .filter(|l| !workloads.iter().any(|w| about(l, &w.workload)))
        .collect()
}

/// The "Why" in Markdown (`table.md`): per workload its verdict, the same table, then its
/// reasons; the sentences about no one workload last.
pub fn why_markdown(results: &SweepResults) -> String {
    let mut out = String::from("## Why\n\n");
    for w in &results.analysis.workloads {
        let _ = writeln!(out, "### {}\n", w.workload);
        if let Some(v) = verdict(results, &w.workload) {
            let _ = writeln!(out, "{v}.\n");
        }
        if let Some(best) = w.best.as_ref().filter(|b| !b.ranking.is_empty()) {
            out.push_str(
                "| architecture | connections | req/s | range | p99 | CPU a request | limited by |\n\
                 |---|---|---|---|---|---|---|\n",
            );
            for r in &best.ranking {
                let [conns, rps, range, p99, cpu] = figures(r);
                let limit = r.limit.as_ref().map_or("-", |l| l.kind.name());
                let _ = writeln!(
                    out,
                    "| {} | {conns} | {rps} | {range} | {p99} | {cpu} | {limit} |",
                    r.arch
                );
            }
            out.push('\n');
        }
        for line in reasons_of(results, &w.workload) {
            let _ = writeln!(out, "{line}\n");
        }
    }
    for line in general(results) {
        let _ = writeln!(out, "{line}\n");
    }
    out
}

/// The table of a workload's architectures at their best levels; empty without a ranking.
pub fn ranking_table(best: &BestChoice) -> String {
    if best.ranking.is_empty() && best.excluded.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<div class=\"scroll\"><table class=\"why\">\n<tr><th>architecture</th><th>connections</th>\
         <th>req/s</th><th>range</th><th>p99</th><th>CPU a request</th><th>limited by</th></tr>\n",
    );
    for r in &best.ranking {
        let (word, evidence) = match &r.limit {
            Some(l) => (l.kind.name(), l.evidence.as_str()),
            None => ("-", ""),
        };
        let limit = crate::render::html::evidence_cell(word, evidence);
        let won = r.arch == best.arch || best.indistinguishable.contains(&r.arch);
        let [conns, rps, range, p99, cpu] = figures(r);
        let _ = writeln!(
            out,
            "<tr{}><td>{}</td><td class=\"num\">{conns}</td><td class=\"num\">{rps}</td>\
             <td class=\"num\">{range}</td><td class=\"num\">{p99}</td><td class=\"num\">{cpu}</td>\
             <td>{limit}</td></tr>",
            if won { " class=\"won\"" } else { "" },
            escape(&r.arch),
        );
    }
    for (arch, why) in &best.excluded {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td colspan=\"6\" class=\"note\">not a candidate: {}</td></tr>",
            escape(arch),
            escape(why)
        );
    }
    out.push_str("</table></div>\n");
    out
}

/// One workload's verdict, table and folded reasoning.
fn workload_why(results: &SweepResults, w: &WorkloadAnalysis) -> String {
    let name = &w.workload;
    let mut out = format!("<h3>{}</h3>\n", escape(name));
    if let Some(v) = verdict(results, name) {
        let _ = writeln!(out, "<p class=\"verdict\">{}.</p>", escape(v));
    }
    if let Some(best) = &w.best {
        out.push_str(&ranking_table(best));
    }
    let reasons: Vec<&String> = reasons_of(results, name).collect();
    if !reasons.is_empty() {
        out.push_str("<details class=\"reasons\"><summary>The reasoning in full</summary>\n");
        for line in reasons {
            let _ = writeln!(out, "<p>{}</p>", escape(line));
        }
        out.push_str("</details>\n");
    }
    out
}

/// The whole "Why" section.
pub fn why_html(results: &SweepResults) -> String {
    let mut out = String::from("<h2>Why</h2>\n");
    let workloads = &results.analysis.workloads;
    for w in workloads {
        out.push_str(&workload_why(results, w));
    }
    let general = general(results);
    if !general.is_empty() {
        out.push_str("<ul class=\"note\">\n");
        for line in general {
            let _ = writeln!(out, "<li>{}</li>", escape(line));
        }
        out.push_str("</ul>\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::analysis::finalize;
    use crate::sweep::output::fixture::small_sweep;

    #[test]
    fn the_markdown_has_each_verdict_a_row_an_architecture_and_every_reason() {
        let mut r = small_sweep();
        finalize(&mut r);
        let md = why_markdown(&r);
        let rows: usize = r
            .analysis
            .workloads
            .iter()
            .map(|w| w.best.as_ref().map_or(0, |b| b.ranking.len()))
            .sum();
        let tables = r
            .analysis
            .workloads
            .iter()
            .filter(|w| w.best.is_some())
            .count();
        // A header and a rule a table, a row an architecture.
        assert_eq!(
            md.lines().filter(|l| l.starts_with("| ")).count(),
            tables + rows,
            "{md}"
        );
        for line in &r.recommendation.details {
            assert!(md.contains(line.as_str()), "lost: {line}");
        }
    }

    #[test]
    fn a_sentence_belongs_to_the_workload_it_names_first() {
        assert!(about("hello: epoll wins", "hello"));
        assert!(about("For hello, pick epoll", "hello"));
        assert!(!about("hello2: epoll wins", "hello"));
        assert!(!about("For hello2, pick", "hello"));
        assert!(!about("9 of 99 points were the lab's limit", "hello"));
    }

    #[test]
    fn each_workload_has_its_verdict_a_row_an_architecture_and_its_reasons_folded() {
        let mut r = small_sweep();
        finalize(&mut r);
        let html = why_html(&r);
        for w in &r.analysis.workloads {
            assert!(html.contains(&format!("<h3>{}</h3>", escape(&w.workload))));
            let best = w.best.as_ref().unwrap();
            let rows = html
                .split(&format!("<h3>{}</h3>", escape(&w.workload)))
                .nth(1)
                .unwrap()
                .split("<h3>")
                .next()
                .unwrap()
                .matches("<tr")
                .count();
            // The header, one row a ranked architecture, one an excluded one.
            assert_eq!(rows, 1 + best.ranking.len() + best.excluded.len(), "{html}");
            let verdict = verdict(&r, &w.workload).unwrap();
            assert!(html.contains(&escape(verdict)), "{html}");
        }
        assert!(html.contains("<summary>The reasoning in full</summary>"));
        // No reason is lost: every sentence of the recommendation's details is on the page.
        for line in &r.recommendation.details {
            assert!(html.contains(&escape(line)), "lost: {line}");
        }
    }
}
