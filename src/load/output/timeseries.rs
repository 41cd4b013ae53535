//! The time series of a run as files: `--csv` (one line per interval) and `--html` (one
//! self-contained page with latency and throughput over time). The intervals themselves are
//! made in [`crate::load::stats::series`]; the plots are drawn by [`crate::render::svg`].

use std::fmt::Write as _;

use crate::load::output::report::LoadReport;
use crate::load::stats::series::{IntervalLatency, SeriesPoint};
use crate::load::stats::LatencyKey;

/// The header line of `--csv`; the columns are documented in the README.
pub const CSV_HEADER: &str = "start_s,length_s,responses,responses_per_s,errors,connect,read,\
write,timeout,protocol,latency_samples,p50_us,p90_us,p99_us,max_us,censored";

/// The series as CSV: the header, then one line per point. Latency columns are empty for an
/// interval in which nothing completed.
pub fn csv(points: &[SeriesPoint]) -> String {
    let mut out = String::with_capacity(64 * (points.len() + 1));
    out.push_str(CSV_HEADER);
    out.push('\n');
    for p in points {
        let e = &p.errors;
        let _ = write!(
            out,
            "{:.3},{:.3},{},{:.1},{},{},{},{},{},{},",
            p.start_s,
            p.length_s,
            p.responses,
            p.responses_per_s,
            e.total(),
            e.connect,
            e.read,
            e.write,
            e.timeout,
            e.protocol
        );
        match &p.latency_us {
            Some(l) => {
                let _ = write!(out, "{},{},{},{},{}", l.count, l.p50, l.p90, l.p99, l.max);
            }
            None => out.push_str("0,,,,"),
        }
        let _ = writeln!(out, ",{}", p.censored);
    }
    out
}

/// `--html`: one self-contained page (inline CSS and SVG, no scripts, nothing fetched) with the
/// run's latency (p50, p99, max) and throughput (responses/s, errors/s) over time, drawn by
/// the sweep's plotting code.
pub fn html(report: &LoadReport, points: &[SeriesPoint]) -> anyhow::Result<String> {
    use crate::render::html::{escape, page_start, PAGE_END};

    let intervals: Vec<&SeriesPoint> = points.iter().filter(|p| p.censored == 0).collect();
    let tail = points.iter().find(|p| p.censored > 0);
    let (latency_plot, throughput_plot) = time_plots(&intervals, tail)?;
    let interval_s = intervals.first().map_or(0.0, |p| p.length_s);
    let mut out = String::new();
    out.push_str(&page_start(&format!("sweetspot load: {}", report.target)));
    let _ = writeln!(
        out,
        "<h1>sweetspot load <code>{}</code></h1>",
        escape(&report.target)
    );
    let _ = writeln!(out, "<p>{}</p>", run_sentence(report));
    let _ = writeln!(
        out,
        "<p class=\"note\">One point per interval of {interval_s:.3} s, at the interval's start. \
         A response counts in the interval in which it completed; an error in the one in which \
         it was detected. Latency is measured from the intended send time (in rate mode the \
         schedule's, so a stall shows as rising latency). An interval in which nothing \
         completed has no latency point (the line breaks); a hollow triangle at the end stands \
         for the requests still unanswered then, at their age: a lower bound.</p>"
    );
    for plot in [&latency_plot, &throughput_plot] {
        let _ = writeln!(out, "<figure>{}</figure>", plot.svg);
    }
    out.push_str(PAGE_END);
    Ok(out)
}

/// The run in one sentence: mode, connections, threads, duration, counts and latency.
fn run_sentence(report: &LoadReport) -> String {
    use crate::render::html::escape;
    use crate::render::numbers::{duration_us, thousands};
    let bound = |key| {
        if report.latency_us.lower_bound.contains(key) {
            " (lower bound)"
        } else {
            ""
        }
    };
    format!(
        "{} mode, {} connection{}, {} thread{}, {:.2} s: {} responses ({} /s), {} errors; \
         latency p50 {}, p99 {}{}, max {}{}.",
        escape(&report.mode),
        report.connections,
        if report.connections == 1 { "" } else { "s" },
        report.threads,
        if report.threads == 1 { "" } else { "s" },
        report.duration_s,
        thousands(report.requests as f64),
        thousands(report.rps),
        thousands(report.errors.total() as f64),
        duration_us(report.latency_us.p50),
        duration_us(report.latency_us.p99),
        bound(LatencyKey::P99),
        duration_us(report.latency_us.max),
        bound(LatencyKey::Max),
    )
}

/// Latency (p50, p99, max; the unanswered tail as lower bounds) and throughput (responses/s,
/// errors/s) over the intervals.
fn time_plots(
    intervals: &[&SeriesPoint],
    tail: Option<&SeriesPoint>,
) -> anyhow::Result<(crate::render::svg::Plot, crate::render::svg::Plot)> {
    use crate::render::svg::{time_plot, Line};

    // A latency line is broken where an interval had no sample: one line per stretch, the
    // first carrying the legend.
    let latency_lines = |label: &str, color: usize, pick: fn(&IntervalLatency) -> u64| {
        let mut lines: Vec<Line> = Vec::new();
        let mut stretch: Vec<(f64, f64)> = Vec::new();
        let flush = |stretch: &mut Vec<(f64, f64)>, lines: &mut Vec<Line>| {
            if !stretch.is_empty() {
                let label = if lines.is_empty() { label } else { "" };
                lines.push(Line::measured(label.into(), color, std::mem::take(stretch)));
            }
        };
        for p in intervals {
            match &p.latency_us {
                Some(l) => stretch.push((p.start_s, pick(l) as f64 / 1e3)),
                None => flush(&mut stretch, &mut lines),
            }
        }
        flush(&mut stretch, &mut lines);
        if let Some(l) = tail.and_then(|t| t.latency_us.map(|l| (t.start_s, l))) {
            let mut censored = Line::measured(
                if lines.is_empty() {
                    label.into()
                } else {
                    String::new()
                },
                color,
                vec![(l.0, pick(&l.1) as f64 / 1e3)],
            );
            censored.lower_bounds = vec![true];
            lines.push(censored);
        }
        lines
    };
    let mut latency = latency_lines("p50", 0, |l| l.p50);
    latency.extend(latency_lines("p99", 3, |l| l.p99));
    latency.extend(latency_lines("max", 6, |l| l.max));
    let latency_plot = time_plot(
        "Latency over time".into(),
        "seconds since start (interval start)",
        "latency (ms)",
        &latency,
        true,
    )?;
    let throughput = vec![
        Line::measured(
            "responses/s".into(),
            0,
            intervals
                .iter()
                .map(|p| (p.start_s, p.responses_per_s))
                .collect(),
        ),
        Line::measured(
            "errors/s".into(),
            3,
            intervals
                .iter()
                .map(|p| (p.start_s, p.errors_per_s()))
                .collect(),
        ),
    ];
    let throughput_plot = time_plot(
        "Throughput over time".into(),
        "seconds since start (interval start)",
        "per second",
        &throughput,
        false,
    )?;

    Ok((latency_plot, throughput_plot))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::error::FailureKind;
    use crate::load::stats::series::tests::point;
    use crate::load::stats::ErrorCounts;

    #[test]
    fn csv_text_is_exact() {
        let mut a = point(0.0, 1200, Some((1200, 180, 240, 900, 1500)));
        a.errors.add(FailureKind::Timeout, 2);
        a.errors.add(FailureKind::Read, 1);
        let b = point(1.0, 0, None);
        let mut c = point(
            2.0,
            7,
            Some((7, 2_000_000, 2_010_000, 2_010_000, 2_010_000)),
        );
        c.length_s = 0.25;
        c.responses_per_s = 28.0;
        let tail = SeriesPoint {
            start_s: 2.25,
            length_s: 0.0,
            responses: 0,
            responses_per_s: 0.0,
            errors: ErrorCounts::default(),
            latency_us: Some(IntervalLatency {
                count: 3,
                p50: 1000,
                p90: 1200,
                p99: 1200,
                max: 1200,
            }),
            censored: 3,
        };
        assert_eq!(
            csv(&[a, b, c, tail]),
            "start_s,length_s,responses,responses_per_s,errors,connect,read,write,timeout,\
             protocol,latency_samples,p50_us,p90_us,p99_us,max_us,censored\n\
             0.000,1.000,1200,1200.0,3,0,1,0,2,0,1200,180,240,900,1500,0\n\
             1.000,1.000,0,0.0,0,0,0,0,0,0,0,,,,,0\n\
             2.000,0.250,7,28.0,0,0,0,0,0,0,7,2000000,2010000,2010000,2010000,0\n\
             2.250,0.000,0,0.0,0,0,0,0,0,0,3,1000,1200,1200,1200,3\n"
        );
        assert_eq!(csv(&[]), format!("{CSV_HEADER}\n"));
    }

    #[test]
    fn the_page_is_self_contained_with_both_plots() {
        let points = vec![
            point(0.0, 1000, Some((1000, 200, 300, 900, 1500))),
            point(1.0, 0, None),
            point(2.0, 0, None),
            point(
                3.0,
                50,
                Some((50, 2_000_000, 2_000_000, 2_050_000, 2_050_000)),
            ),
            SeriesPoint {
                censored: 2,
                length_s: 0.0,
                ..point(4.0, 0, Some((2, 900_000, 900_000, 900_000, 900_000)))
            },
        ];
        let report = LoadReport {
            target: "http://127.0.0.1:1/<x>".into(),
            mode: "closed".into(),
            ..LoadReport::default()
        };
        let page = html(&report, &points).unwrap();
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert_eq!(page.matches("<svg").count(), 2, "{page}");
        assert!(page.contains("Latency over time") && page.contains("Throughput over time"));
        assert!(page.contains("&lt;x&gt;") && !page.contains("/<x>"));
        for external in ["<script", "<link", "src=\"http", "href=\"http", "url(http"] {
            assert!(!page.contains(external), "{external}");
        }
        // The legend names each line once, though the latency lines break over the stall.
        for label in ["p50", "p99", "max", "responses/s", "errors/s"] {
            let text = format!("\n{label}\n</text>");
            assert_eq!(page.matches(&text).count(), 1, "{label}");
        }
    }
}
