//! What `sweetspot limiters` writes: `results.json` (everything, series included), `table.md`
//! (a row per controller and phase), `report.html` (per scenario the verdicts, the table, L(t)
//! beside the knee and goodput(t) beside the capacity) and the summary on stdout.

use std::fmt::Write as _;
use std::path::Path;

use super::controllers::Kind;
use super::judge::Knee;
use super::scenario::SCENARIOS;
use super::{ControllerRun, LimitersResults, ScenarioResult};
use crate::render::html::{escape, page_start, PAGE_END};
use crate::render::numbers::duration_us;
use crate::render::svg::{time_plot, Line};

/// `--list`.
pub fn list() -> String {
    let mut text = String::from("scenarios:\n");
    for s in SCENARIOS {
        let _ = writeln!(text, "  {:<12} {}", s.name, s.about);
    }
    text.push_str("controllers:\n");
    for k in Kind::ALL {
        let _ = writeln!(text, "  {:<20} {}", k.name(), k.title());
    }
    text
}

/// The best of the static limits: the most goodput (mean over the phases), and among those
/// within 5% of it the lowest p99.
pub fn best_static(runs: &[ControllerRun]) -> Option<&ControllerRun> {
    let statics: Vec<&ControllerRun> = runs.iter().filter(|r| r.kind == Kind::Static).collect();
    let goodput = |r: &ControllerRun| {
        r.phases.iter().map(|p| p.goodput_rps).sum::<f64>() / r.phases.len().max(1) as f64
    };
    let p99 = |r: &ControllerRun| r.phases.first().map_or(f64::MAX, |p| p.p99_us);
    let best = statics.iter().map(|r| goodput(r)).fold(0.0f64, f64::max);
    statics
        .into_iter()
        .filter(|r| goodput(r) >= 0.95 * best)
        .min_by(|a, b| p99(a).total_cmp(&p99(b)))
}

/// One run in a line, for the progress on stderr: the limit, goodput and p99 of each phase.
pub fn brief(r: &ControllerRun) -> String {
    r.phases
        .iter()
        .map(|p| {
            let limit = p
                .limit
                .map_or("-".into(), |l| format!("{:.0} ± {:.0}", l.median, l.spread));
            format!(
                "L {limit} (knee {}), {:.0} req/s, p99 {}",
                p.knee.map_or("-".into(), |k| k.concurrency.to_string()),
                p.goodput_rps,
                duration_us(p.p99_us)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The scenario's answer in a sentence: which controllers kept p99 within 2x the knee's at
/// 95% of the best static limit's goodput in every phase, which fell under half of that
/// goodput somewhere, and the worst p99.
pub fn headline(s: &ScenarioResult) -> String {
    let best = s
        .best_static
        .as_ref()
        .and_then(|b| s.runs.iter().find(|r| &r.name == b));
    // In every phase: at 95% of the best static limit's goodput there, p99 within 2x the knee's.
    let holds = |r: &ControllerRun| {
        r.phases.iter().enumerate().all(|(i, p)| {
            let floor = best
                .and_then(|b| b.phases.get(i))
                .map_or(0.0, |b| 0.95 * b.goodput_rps);
            p.goodput_rps >= floor && p.p99_ratio().is_some_and(|x| x <= 2.0)
        })
    };
    let adaptive: Vec<&ControllerRun> = s.runs.iter().filter(|r| r.kind != Kind::Static).collect();
    let good: Vec<String> = adaptive
        .iter()
        .filter(|r| holds(r))
        .map(|r| r.name.clone())
        .collect();
    let worst = adaptive.iter().max_by(|a, b| {
        let p = |r: &&ControllerRun| r.phases.first().and_then(|p| p.p99_ratio()).unwrap_or(0.0);
        p(a).total_cmp(&p(b))
    });
    let kept = match good.len() {
        0 => format!(
            "none of {} controllers kept p99 within 2x the knee's",
            adaptive.len()
        ),
        n => format!(
            "{n} of {} kept p99 within 2x the knee's at 95% of the best static limit's goodput \
             throughout: {}",
            adaptive.len(),
            good.join(", ")
        ),
    };
    // Under half the best static limit's goodput in some phase: the limit cost the answers.
    let starved: Vec<String> = adaptive
        .iter()
        .filter_map(|r| {
            let worst_share = r
                .phases
                .iter()
                .enumerate()
                .filter_map(|(i, p)| {
                    let b = best?.phases.get(i)?.goodput_rps;
                    (b > 0.0).then(|| p.goodput_rps / b)
                })
                .fold(f64::MAX, f64::min);
            (worst_share < 0.5).then(|| format!("{} ({worst_share:.2}x)", r.name))
        })
        .collect();
    let mut sentence = kept;
    if !starved.is_empty() {
        sentence.push_str(&format!(
            "; under half the best static limit's goodput: {}",
            starved.join(", ")
        ));
    }
    if let Some((w, p)) = worst.and_then(|w| Some((w, w.phases.first()?))) {
        if p.p99_ratio().is_some() {
            sentence.push_str(&format!(
                "; the worst p99 was {}'s, {} the knee's at L {}",
                w.name,
                ratio(p.p99_ratio()),
                p.limit.map_or("-".into(), |l| format!("{:.0}", l.median))
            ));
        }
    }
    sentence.push('.');
    let mut chars = sentence.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn ratio(r: Option<f64>) -> String {
    r.map_or("-".into(), |r| format!("{r:.2}x"))
}

/// The rows of one scenario's table (Markdown).
fn table(s: &ScenarioResult) -> String {
    let mut t = String::from(
        "| controller | phase | settled L | knee | settled after | goodput | vs knee | p50 | p99 | p99 vs knee | shed | timeouts |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in &s.runs {
        for p in &r.phases {
            let settled = p
                .limit
                .map_or("-".into(), |l| format!("{:.0} ± {:.0}", l.median, l.spread));
            let after = match (p.limit, p.settle_s) {
                (Some(_), Some(s)) => format!("{s:.1} s"),
                (Some(_), None) => "never".into(),
                _ => "-".into(),
            };
            let _ = writeln!(
                t,
                "| {} | {:.0}-{:.0} s | {settled} | {} | {after} | {:.0} | {} | {} | {} | {} | {:.1}% | {} |",
                r.name,
                p.from_s,
                p.to_s,
                p.knee.map_or("-".into(), |k| k.concurrency.to_string()),
                p.goodput_rps,
                ratio(p.goodput_ratio()),
                duration_us(p.p50_us),
                duration_us(p.p99_us),
                ratio(p.p99_ratio()),
                r.shed_share * 100.0,
                r.counts.timeouts,
            );
        }
    }
    t
}

fn knee_line(s: &ScenarioResult) -> String {
    s.knees
        .iter()
        .map(|k| match k.knee {
            Some(knee) => format!(
                "`{}`: knee N = {} at {:.0} req/s, p99 {} (capacity {:.0} req/s)",
                k.path,
                knee.concurrency,
                knee.rps,
                duration_us(knee.p99_us),
                knee.capacity_rps
            ),
            None => format!("`{}`: no knee (no throughput)", k.path),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `table.md`.
pub fn markdown(results: &LimitersResults) -> String {
    let mut md = String::from("# Adaptive concurrency limiters against the measured knee\n\n");
    for s in &results.scenarios {
        let _ = writeln!(md, "## {}\n\n{}\n", s.name, s.about);
        let _ = writeln!(
            md,
            "Offered {:.0} req/s (Poisson), timeout {:.0} ms, {:.0} s a run. {}.\n",
            s.rate,
            s.timeout_ms,
            s.duration_s,
            knee_line(s)
        );
        if let Some(best) = &s.best_static {
            let _ = writeln!(md, "Best static limit: {best}.\n");
        }
        let _ = writeln!(md, "**{}**\n", headline(s));
        md.push_str(&table(s));
        md.push('\n');
        for r in &s.runs {
            let _ = writeln!(md, "- {}", r.verdict);
        }
        md.push('\n');
    }
    md
}

/// The summary on stdout: a verdict per controller and where the files are.
pub fn summary(results: &LimitersResults, out: &Path) -> String {
    let mut text = String::new();
    for s in &results.scenarios {
        let _ = writeln!(text, "{}: {}", s.name, knee_line(s).replace('`', ""));
        let _ = writeln!(text, "  {}", headline(s));
        for r in &s.runs {
            let _ = writeln!(text, "  {:<20} {}", r.name, r.verdict);
        }
    }
    if results.interrupted {
        text.push_str("interrupted: the figures cover what ran\n");
    }
    let _ = writeln!(text, "results: {}", out.display());
    text
}

/// The runs a plot draws: every adaptive controller and the best static limit.
fn plotted(s: &ScenarioResult) -> Vec<&ControllerRun> {
    s.runs
        .iter()
        .filter(|r| r.kind != Kind::Static || s.best_static.as_deref() == Some(&r.name))
        .collect()
}

/// A plot over time: one line a plotted run (`points` of it), and beside them a reference per
/// phase from its knee (`reference`, named `name`).
fn over_time(
    s: &ScenarioResult,
    title: &str,
    y_desc: &str,
    log_y: bool,
    points: fn(&ControllerRun) -> Vec<(f64, f64)>,
    (name, reference): (&str, fn(&Knee) -> f64),
) -> anyhow::Result<String> {
    let runs = plotted(s);
    let mut lines: Vec<Line> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| Line::measured(r.name.clone(), i + 1, points(r)))
        .collect();
    let mut steps = Vec::new();
    for p in runs.first().map_or(&[][..], |r| &r.phases[..]) {
        if let Some(k) = &p.knee {
            steps.push((p.from_s, reference(k)));
            steps.push((p.to_s, reference(k)));
        }
    }
    lines.push(Line::measured(name.into(), 0, steps));
    let plot = time_plot(
        format!("{}: {title}", s.name),
        "seconds",
        y_desc,
        &lines,
        log_y,
    )?;
    Ok(plot.svg)
}

/// The limit every quarter of a second (each fifth step of the series), for a plot.
pub fn limit_points(r: &ControllerRun) -> Vec<(f64, f64)> {
    r.counts
        .series
        .iter()
        .skip(4)
        .step_by(5)
        .map(|t| (t.t_s, t.limit as f64))
        .collect()
}

/// Answered-2xx per second, in whole seconds of the series.
pub fn per_second(r: &ControllerRun) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    for t in &r.counts.series {
        let second = (t.t_s - 1e-9).floor() + 1.0;
        match out.last_mut() {
            Some(last) if last.0 == second => last.1 += t.ok as f64,
            _ => out.push((second, t.ok as f64)),
        }
    }
    out
}

/// `report.html`.
pub fn html(results: &LimitersResults) -> anyhow::Result<String> {
    let mut h = page_start("sweetspot limiters");
    h.push_str("<h1>Adaptive concurrency limiters against the measured knee</h1>\n");
    let _ = writeln!(
        h,
        "<p class=\"note\">{} · {} cores · {}</p>",
        escape(&results.started),
        results.machine.cores,
        escape(&results.machine.cpu_model)
    );
    for s in &results.scenarios {
        let _ = writeln!(
            h,
            "<h2>{}</h2>\n<p>{}</p>",
            escape(&s.name),
            escape(&s.about)
        );
        let _ = writeln!(h, "<p><b>{}</b></p>", escape(&headline(s)));
        let _ = writeln!(
            h,
            "<p class=\"summary\">Offered {:.0} req/s, timeout {:.0} ms. {}.{}</p>",
            s.rate,
            s.timeout_ms,
            escape(&knee_line(s).replace('`', "")),
            s.best_static
                .as_ref()
                .map(|b| format!(" Best static limit: {}.", escape(b)))
                .unwrap_or_default()
        );
        h.push_str("<ul>\n");
        for r in &s.runs {
            let _ = writeln!(h, "<li>{}</li>", escape(&r.verdict));
        }
        h.push_str("</ul>\n<div class=\"scroll\">");
        h.push_str(&table_html(s));
        h.push_str("</div>\n");
        let limit = over_time(
            s,
            "the limit over time",
            "limit",
            true,
            limit_points,
            ("knee", |k| k.concurrency as f64),
        )?;
        let goodput = over_time(
            s,
            "goodput over time",
            "answered 2xx a second",
            false,
            per_second,
            ("capacity", |k| k.capacity_rps),
        )?;
        let _ = writeln!(h, "<figure>{limit}</figure>\n<figure>{goodput}</figure>");
    }
    h.push_str(PAGE_END);
    Ok(h)
}

fn table_html(s: &ScenarioResult) -> String {
    let mut t = String::from(
        "<table><tr><th>controller</th><th>phase</th><th>settled L</th><th>knee</th>\
         <th>settled after</th><th>goodput</th><th>vs knee</th><th>p50</th><th>p99</th>\
         <th>p99 vs knee</th><th>shed</th><th>timeouts</th></tr>\n",
    );
    for line in table(s).lines().skip(2) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        t.push_str("<tr>");
        for (i, c) in cells.iter().enumerate() {
            let class = if i >= 2 { " class=\"num\"" } else { "" };
            let _ = write!(t, "<td{class}>{}</td>", escape(c));
        }
        t.push_str("</tr>\n");
    }
    t.push_str("</table>");
    t
}

/// Writes `results.json`, `table.md` and `report.html` into `out` (each whole or not at all).
pub fn write(out: &Path, results: &LimitersResults) -> anyhow::Result<()> {
    crate::render::json::write_record(out, results)?;
    crate::render::json::write_file(&out.join("table.md"), &markdown(results))?;
    crate::render::json::write_file(&out.join("report.html"), &html(results)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::gate::{GateCounts, Tick};

    fn run(name: &str, kind: Kind, goodput: f64, p99: f64) -> ControllerRun {
        ControllerRun {
            name: name.into(),
            kind,
            static_limit: None,
            counts: GateCounts::default(),
            phases: vec![crate::limiter::judge::PhaseVerdict {
                from_s: 0.0,
                to_s: 10.0,
                path: "/".into(),
                knee: None,
                limit: None,
                settle_s: None,
                goodput_rps: goodput,
                p50_us: p99 / 2.0,
                p99_us: p99,
            }],
            shed_share: 0.0,
            lab: crate::limiter::LabShare::default(),
            verdict: String::new(),
        }
    }

    #[test]
    fn the_best_static_limit_is_the_lowest_p99_within_five_percent_of_the_most_goodput() {
        let runs = [
            run("static-4", Kind::Static, 200.0, 21e3),
            run("static-8", Kind::Static, 392.0, 24e3),
            run("static-16", Kind::Static, 399.0, 45e3),
            run("vegas", Kind::Vegas, 500.0, 1e3),
        ];
        assert_eq!(best_static(&runs).unwrap().name, "static-8");
        assert!(best_static(&runs[3..]).is_none());
    }

    #[test]
    fn goodput_per_second_adds_the_steps_of_each_second() {
        let mut r = run("x", Kind::Vegas, 0.0, 0.0);
        r.counts.series = (1..=40)
            .map(|i| Tick {
                t_s: i as f64 * 0.05,
                limit: 1,
                inflight: 0,
                offered: 0,
                admitted: 0,
                shed: 0,
                ok: 3,
            })
            .collect();
        assert_eq!(per_second(&r), vec![(1.0, 60.0), (2.0, 60.0)]);
    }
}
