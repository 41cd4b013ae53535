//! The sweep's SVG plots: throughput and p99 against concurrency, throughput against workers
//! (with the USL fit drawn through the points), and a bar chart per workload when there is a
//! single concurrency level, drawn with [`crate::render::svg`]. The same SVG text is written
//! to files and inlined in the HTML report.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::{file_stem, levels_of, points_of, repeated, series_of, Exporter};
use crate::load::LatencyKey;
use crate::render::svg::{bar_plot, line_plot, Bar, Line};
pub use crate::render::svg::{Plot, LAB_LABEL, LOWER_BOUND_LABEL, SPREAD_LABEL, STARVED_LABEL};
use crate::sweep::analysis::recommend::lab_limit;
use crate::sweep::analysis::{series_label, WorkloadAnalysis};
use crate::sweep::results::{PointResult, SweepResults};

/// Writes the plots as `<workload>-<kind>.svg`.
pub struct SvgExporter;

impl Exporter for SvgExporter {
    fn name(&self) -> &'static str {
        "svg"
    }

    fn export(&self, results: &SweepResults, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
        let mut written = Vec::new();
        for plot in render_plots(results)? {
            let path = dir.join(&plot.file_name);
            std::fs::write(&path, &plot.svg)
                .with_context(|| format!("writing {}", path.display()))?;
            written.push(path);
        }
        Ok(written)
    }
}

/// Every plot of a sweep.
pub fn render_plots(results: &SweepResults) -> anyhow::Result<Vec<Plot>> {
    let mut plots = Vec::new();
    for workload in &results.experiment.workloads {
        let points: Vec<&PointResult> = points_of(results, &workload.name)
            .into_iter()
            .filter(|p| p.ok)
            .collect();
        if points.is_empty() {
            continue;
        }
        let stem = file_stem(&workload.name);
        let levels = levels_of(&points);
        if levels.len() > 1 {
            plots.extend(concurrency_plots(&workload.name, &stem, &points)?);
        }
        let analysed = results
            .analysis
            .workloads
            .iter()
            .find(|w| w.workload == workload.name);
        if let Some(plot) = workers_plot(&workload.name, &stem, &points, analysed)? {
            plots.push(plot);
        }
        if levels.len() == 1 {
            let bars: Vec<Bar> = points
                .iter()
                .map(|p| Bar {
                    label: series_label(&p.arch, p.workers),
                    value: p.figures.rps,
                    range: repeated(p).then_some((p.spread.rps_min, p.spread.rps_max)),
                    lab: lab_limit(p).is_some(),
                })
                .collect();
            plots.push(bar_plot(
                format!("{stem}-bars.svg"),
                format!(
                    "{name}: throughput at {} connections",
                    levels[0],
                    name = workload.name
                ),
                &bars,
            )?);
        }
    }
    Ok(plots)
}

/// Throughput and p99 against concurrency, one line per series (arch, workers).
fn concurrency_plots(name: &str, stem: &str, points: &[&PointResult]) -> anyhow::Result<[Plot; 2]> {
    let mut throughput = Vec::new();
    let mut p99 = Vec::new();
    for (i, key) in series_of(points).iter().enumerate() {
        let mine: Vec<&PointResult> = points
            .iter()
            .copied()
            .filter(|p| p.series_key() == *key)
            .collect();
        let label = series_label(&key.0, key.1);
        let x = |p: &PointResult| f64::from(p.concurrency);
        let starved: Vec<bool> = mine.iter().map(|p| p.starved).collect();
        let lab: Vec<bool> = mine.iter().map(|p| lab_limit(p).is_some()).collect();
        throughput.push(Line {
            starved: starved.clone(),
            lab: lab.clone(),
            ranges: mine
                .iter()
                .map(|p| repeated(p).then_some((p.spread.rps_min, p.spread.rps_max)))
                .collect(),
            ..Line::measured(
                label.clone(),
                i,
                mine.iter().map(|p| (x(p), p.figures.rps)).collect(),
            )
        });
        p99.push(Line {
            starved,
            lab,
            ranges: mine
                .iter()
                .map(|p| {
                    repeated(p).then_some((p.spread.p99_min / 1000.0, p.spread.p99_max / 1000.0))
                })
                .collect(),
            lower_bounds: mine
                .iter()
                .map(|p| p.figures.latency_us.lower_bound.contains(LatencyKey::P99))
                .collect(),
            ..Line::measured(
                label,
                i,
                mine.iter()
                    .map(|p| (x(p), p.figures.latency_us.p99 / 1000.0))
                    .collect(),
            )
        });
    }
    Ok([
        line_plot(
            format!("{stem}-throughput.svg"),
            format!("{name}: throughput vs concurrency"),
            "concurrent connections",
            "requests / second",
            &throughput,
            false,
        )?,
        line_plot(
            format!("{stem}-p99.svg"),
            format!("{name}: p99 latency vs concurrency"),
            "concurrent connections",
            "p99 latency (ms)",
            &p99,
            true,
        )?,
    ])
}

/// Throughput against workers, one line per (arch, concurrency) with several counts, with
/// the analysis' USL fit of that series when there is one; none when no series has two.
fn workers_plot(
    name: &str,
    stem: &str,
    points: &[&PointResult],
    analysed: Option<&WorkloadAnalysis>,
) -> anyhow::Result<Option<Plot>> {
    let mut lines = Vec::new();
    let mut fitted = false;
    let groups: BTreeSet<(String, u32)> = points
        .iter()
        .filter(|p| p.workers.is_some())
        .map(|p| (p.arch.clone(), p.concurrency))
        .collect();
    for (i, (arch, concurrency)) in groups.iter().enumerate() {
        let mut mine: Vec<&PointResult> = points
            .iter()
            .copied()
            .filter(|p| &p.arch == arch && p.concurrency == *concurrency && p.workers.is_some())
            .collect();
        mine.sort_by_key(|p| p.workers);
        if mine.len() < 2 {
            continue;
        }
        let data: Vec<(f64, f64)> = mine
            .iter()
            .filter_map(|p| Some((f64::from(p.workers?), p.figures.rps)))
            .collect();
        let fit = analysed.and_then(|w| {
            w.usl
                .iter()
                .find(|u| u.axis == "workers" && &u.arch == arch && u.fixed == Some(*concurrency))
                .and_then(|u| u.fit)
        });
        if let Some(fit) = fit {
            let max_n = data.last().map_or(1.0, |p| p.0);
            let curve = (0..=60)
                .map(|k| 1.0 + (max_n - 1.0) * f64::from(k) / 60.0)
                .map(|n| (n, fit.throughput(n)))
                .collect();
            lines.push(Line {
                model: true,
                ..Line::measured(String::new(), i, curve)
            });
            fitted = true;
        }
        lines.push(Line {
            ranges: mine
                .iter()
                .map(|p| repeated(p).then_some((p.spread.rps_min, p.spread.rps_max)))
                .collect(),
            lab: mine.iter().map(|p| lab_limit(p).is_some()).collect(),
            ..Line::measured(format!("{arch}, {concurrency} connections"), i, data)
        });
    }
    if lines.is_empty() {
        return Ok(None);
    }
    let title = format!(
        "{name}: throughput vs workers{}",
        if fitted { " (thin: USL fit)" } else { "" }
    );
    line_plot(
        format!("{stem}-workers.svg"),
        title,
        "workers",
        "requests / second",
        &lines,
        false,
    )
    .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::svg::*;
    use crate::sweep::analysis::finalize;
    use crate::sweep::output::fixture::small_sweep;

    /// The stroke colour and the points of every `<polyline>` of an SVG.
    fn polylines(svg: &str) -> Vec<(String, Vec<(i32, i32)>)> {
        let attribute = |tag: &str, name: &str| -> Option<String> {
            let start = tag.find(&format!("{name}=\""))? + name.len() + 2;
            let end = start + tag[start..].find('"')?;
            Some(tag[start..end].to_string())
        };
        svg.split("<polyline")
            .skip(1)
            .filter_map(|tag| {
                let points = attribute(tag, "points")?
                    .split_whitespace()
                    .filter_map(|xy| {
                        let (x, y) = xy.split_once(',')?;
                        Some((x.parse().ok()?, y.parse().ok()?))
                    })
                    .collect();
                Some((attribute(tag, "stroke")?, points))
            })
            .collect()
    }

    /// Closed three-sided paths with the apex on top: the lower-bound marker (in the series'
    /// colour, or black in the legend).
    fn triangles(svg: &str) -> usize {
        polylines(svg)
            .iter()
            .filter(|(_, p)| p.len() == 4 && p[0] == p[3] && p[0].1 < p[1].1 && p[1].1 == p[2].1)
            .count()
    }

    /// Error bars of the data: vertical two-point paths in a series' colour (axes, ticks and
    /// the legend's sample are black). A bar may be zero pixels tall on a wide axis.
    fn error_bars(svg: &str) -> usize {
        polylines(svg)
            .iter()
            .filter(|(stroke, p)| stroke != "#000000" && p.len() == 2 && p[0].0 == p[1].0)
            .count()
    }

    /// Every vertical two-point path, whatever its colour.
    fn vertical_paths(svg: &str) -> usize {
        polylines(svg)
            .iter()
            .filter(|(_, p)| p.len() == 2 && p[0].0 == p[1].0 && p[0].1 != p[1].1)
            .count()
    }

    /// A point in an SVG's pixels.
    type Pixel = (f64, f64);

    /// The quick preset's results, as `sweetspot report` reads them.
    fn quick_sweep() -> SweepResults {
        let text = include_str!("../../../tests/data/quick-results.json");
        let mut results: SweepResults = serde_json::from_str(text).expect("the fixture parses");
        finalize(&mut results);
        results
    }

    /// The `(x, y)` pairs of an attribute list such as `points="1,2 3,4 "`.
    fn pairs(text: &str) -> Vec<(f64, f64)> {
        text.split_whitespace()
            .filter_map(|xy| {
                let (x, y) = xy.split_once(',')?;
                Some((x.parse().ok()?, y.parse().ok()?))
            })
            .collect()
    }

    fn attribute(tag: &str, name: &str) -> Option<String> {
        let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        let end = start + tag[start..].find('"')?;
        Some(tag[start..end].to_string())
    }

    /// The attributes of every `<name ...>` element, each list starting with a space.
    fn tags(svg: &str, name: &str) -> Vec<String> {
        svg.split(&format!("<{name} "))
            .skip(1)
            .map(|t| format!(" {}", &t[..t.find('>').unwrap_or(t.len())]))
            .collect()
    }

    /// The centre of every point marker in an SVG: circles, filled shapes (polygons) and closed
    /// outlines (hollow shapes and the lower-bound triangles), legend samples included.
    fn marker_centres(svg: &str) -> Vec<(f64, f64)> {
        let centre = |p: &[(f64, f64)]| {
            let n = p.len() as f64;
            (
                p.iter().map(|q| q.0).sum::<f64>() / n,
                p.iter().map(|q| q.1).sum::<f64>() / n,
            )
        };
        let mut centres: Vec<(f64, f64)> = tags(svg, "circle")
            .iter()
            .filter_map(|t| {
                Some((
                    attribute(t, "cx")?.parse().ok()?,
                    attribute(t, "cy")?.parse().ok()?,
                ))
            })
            .collect();
        for t in tags(svg, "polygon") {
            centres.push(centre(&pairs(&attribute(&t, "points").unwrap())));
        }
        for t in tags(svg, "polyline") {
            let p = pairs(&attribute(&t, "points").unwrap());
            if p.len() >= 4 && p.first() == p.last() {
                centres.push(centre(&p[..p.len() - 1]));
            }
        }
        centres
    }

    /// The legend's frame: the one unfilled rectangle, as (left, top, right, bottom).
    fn legend_box(svg: &str) -> (f64, f64, f64, f64) {
        let frames: Vec<String> = tags(svg, "rect")
            .into_iter()
            .filter(|t| attribute(t, "fill").as_deref() == Some("none"))
            .collect();
        assert_eq!(frames.len(), 1, "one legend frame");
        let n = |name: &str| -> f64 { attribute(&frames[0], name).unwrap().parse().unwrap() };
        (n("x"), n("y"), n("x") + n("width"), n("y") + n("height"))
    }

    /// The y axis line: (top, bottom) in pixels; its bottom is where the x axis (the zero line
    /// of a linear axis) runs.
    fn y_axis(svg: &str) -> (f64, f64) {
        tags(svg, "polyline")
            .into_iter()
            .filter(|t| attribute(t, "stroke").as_deref() == Some("#000000"))
            .map(|t| pairs(&attribute(&t, "points").unwrap()))
            .find(|p| p.len() == 2 && p[0].0 == p[1].0 && (p[1].1 - p[0].1).abs() > 100.0)
            .map(|p| (p[0].1.min(p[1].1), p[0].1.max(p[1].1)))
            .expect("a y axis")
    }

    #[test]
    fn the_quick_reports_latency_axes_span_the_data_and_no_legend_covers_a_point() {
        let results = quick_sweep();
        let plots = render_plots(&results).unwrap();
        let mut checked = 0;
        for plot in plots.iter().filter(|p| {
            p.file_name.ends_with("-p99.svg") || p.file_name.ends_with("-throughput.svg")
        }) {
            let svg = &plot.svg;
            let workload = plot.file_name.split('-').next().unwrap();
            let points = results
                .points
                .iter()
                .filter(|p| p.workload == workload)
                .count();
            let series = 11;
            let (left, top, right, bottom) = legend_box(svg);
            let (inside, outside): (Vec<Pixel>, Vec<Pixel>) = marker_centres(svg)
                .into_iter()
                .partition(|&(x, y)| x > left && x < right && y > top && y < bottom);
            // Every data point is drawn, and none within a marker's reach of the legend.
            assert_eq!(outside.len(), points, "{}", plot.file_name);
            for &(x, y) in &outside {
                let clear = x + 6.0 < left || x - 6.0 > right || y + 6.0 < top || y - 6.0 > bottom;
                assert!(
                    clear,
                    "{}: a point at ({x}, {y}) touches the legend",
                    plot.file_name
                );
            }
            // The legend holds one sample per series (and the lower-bound one, if any).
            let lower_bound_sample = usize::from(svg.contains(LOWER_BOUND_LABEL));
            assert_eq!(
                inside.len(),
                series + lower_bound_sample,
                "{}",
                plot.file_name
            );
            if plot.file_name.ends_with("-p99.svg") {
                // From 70 us to a 1 s lower bound: a log axis, and the smallest value well off
                // the bottom of the plot instead of on a zero line.
                assert!(svg.contains("log scale"), "{}", plot.file_name);
                let (axis_top, axis_bottom) = y_axis(svg);
                let lowest = outside.iter().map(|p| p.1).fold(f64::MIN, f64::max);
                let highest = outside.iter().map(|p| p.1).fold(f64::MAX, f64::min);
                let height = axis_bottom - axis_top;
                assert!(
                    axis_bottom - lowest >= 0.05 * height,
                    "{}: the smallest value is {} px above the axis of {height} px",
                    plot.file_name,
                    axis_bottom - lowest
                );
                assert!(
                    lowest - highest >= 0.5 * height,
                    "{}: the data spans {} of {height} px",
                    plot.file_name,
                    lowest - highest
                );
            }
            checked += 1;
        }
        assert_eq!(checked, 6, "throughput and p99 for hello, fib and sleep");
    }

    #[test]
    fn series_differ_in_colour_and_marker() {
        let colours: BTreeSet<(u8, u8, u8)> = PALETTE.iter().copied().collect();
        assert_eq!(colours.len(), 12);
        let markers: BTreeSet<String> = (0..12).map(|i| format!("{:?}", marker(i))).collect();
        assert_eq!(
            markers.len(),
            12,
            "the first twelve series have twelve markers"
        );
        let pairs: BTreeSet<String> = (0..144)
            .map(|i| format!("{:?} {:?}", color(i), marker(i)))
            .collect();
        assert_eq!(pairs.len(), 144);
    }

    #[test]
    fn small_values_keep_their_digits_on_an_axis() {
        crate::render::numbers::tests::writes(
            axis_number,
            &[(0.05, "0.05"), (0.2, "0.2"), (1.0, "1"), (2000.0, "2,000")],
        );
    }

    #[test]
    fn lower_bounds_are_hollow_triangles_and_spreads_error_bars() {
        let mut results = small_sweep();
        finalize(&mut results);
        let plots = render_plots(&results).unwrap();
        let plot = |name: &str| plots.iter().find(|p| p.file_name == name).unwrap();
        let p99 = &plot("hello-p99.svg").svg;
        // One censored point, plus the legend's sample.
        assert_eq!(triangles(p99), 2, "{p99}");
        assert!(p99.contains(LOWER_BOUND_LABEL));
        // Epoll's two repeated points.
        assert_eq!(error_bars(p99), 2, "{p99}");
        assert!(p99.contains(SPREAD_LABEL));
        // Throughput is never a lower bound here: no triangle, but the same error bars.
        let throughput = &plot("hello-throughput.svg").svg;
        assert_eq!(triangles(throughput), 0);
        assert!(!throughput.contains(LOWER_BOUND_LABEL));
        assert_eq!(error_bars(throughput), 2);
        // Without lower bounds or repetitions, neither mark nor legend entry.
        for p in &mut results.points {
            p.spread = Default::default();
            p.figures.latency_us.lower_bound = Default::default();
        }
        let plots = render_plots(&results).unwrap();
        let p99 = &plots
            .iter()
            .find(|p| p.file_name == "hello-p99.svg")
            .unwrap()
            .svg;
        assert_eq!((triangles(p99), error_bars(p99)), (0, 0));
        assert!(!p99.contains(LOWER_BOUND_LABEL) && !p99.contains(SPREAD_LABEL));
    }

    /// A bar of one run the server set.
    fn bar(label: &str, value: f64) -> Bar {
        Bar {
            label: label.into(),
            value,
            range: None,
            lab: false,
        }
    }

    #[test]
    fn bars_carry_error_bars_for_repeated_points() {
        let bars = vec![
            Bar {
                range: Some((1100.0, 1300.0)),
                ..bar("epoll", 1200.0)
            },
            bar("threaded", 3400.0),
        ];
        let with = bar_plot("b.svg".into(), "bars".into(), &bars).unwrap();
        let mut single = bars;
        single[0].range = None;
        let without = bar_plot("b.svg".into(), "bars".into(), &single).unwrap();
        assert_eq!(
            vertical_paths(&with.svg),
            vertical_paths(&without.svg) + 1,
            "{}",
            with.svg
        );
    }

    #[test]
    fn log_axes_label_one_two_five() {
        let labelled: Vec<f64> = [
            1.0,
            2.0,
            3.0,
            5.0,
            9.0,
            9.999_999_9,
            10.0,
            20.0,
            40.0,
            500.0,
        ]
        .into_iter()
        .filter(|&v| is_log_label(v))
        .collect();
        assert_eq!(labelled, [1.0, 2.0, 5.0, 10.0, 20.0, 500.0]);
    }

    #[test]
    fn line_plots_have_text_axes_and_legend() {
        let lines = vec![
            Line::measured("epoll".into(), 0, vec![(1.0, 10.0), (100.0, 900.0)]),
            Line {
                model: true,
                ..Line::measured(String::new(), 0, vec![(1.0, 9.0), (100.0, 800.0)])
            },
        ];
        let plot = line_plot(
            "t.svg".into(),
            "title here".into(),
            "connections",
            "req/s",
            &lines,
            false,
        )
        .unwrap();
        assert!(
            plot.svg.starts_with("<svg"),
            "{}",
            &plot.svg[..80.min(plot.svg.len())]
        );
        for text in ["title here", "connections", "req/s", "epoll"] {
            assert!(plot.svg.contains(text), "missing {text}");
        }
    }

    #[test]
    fn bar_plots_name_their_bars() {
        let bars = vec![bar("epoll", 1200.0), bar("threaded", 3400.0)];
        let plot = bar_plot("b.svg".into(), "bars".into(), &bars).unwrap();
        assert!(
            plot.svg.contains("epoll")
                && plot.svg.contains("threaded")
                && plot.svg.contains("3,400")
        );
        assert!(!plot.svg.contains("\nlab\n</text>") && !plot.svg.contains(LAB_LABEL));
    }

    /// A figure the lab set (its generator or path) is marked `lab` in bars and on lines, with
    /// the note or legend entry saying what that means; the others are not.
    #[test]
    fn the_labs_figures_are_marked_lab() {
        let count = |svg: &str| svg.matches("\nlab\n</text>").count();
        let bars = [("epoll", false), ("h2o", true), ("nginx", true)].map(|(label, lab)| Bar {
            lab,
            ..bar(label, 1000.0)
        });
        let plot = bar_plot("b.svg".into(), "bars".into(), &bars).unwrap();
        assert_eq!(count(&plot.svg), 2, "{}", plot.svg);
        assert!(plot.svg.contains(&format!("faded, {LAB_LABEL}")));
        let line = Line {
            lab: vec![false, true, false],
            ..Line::measured(
                "h2o".into(),
                0,
                vec![(1.0, 10.0), (10.0, 90.0), (100.0, 95.0)],
            )
        };
        let plot = line_plot("l.svg".into(), "t".into(), "c", "r", &[line], false).unwrap();
        assert_eq!(count(&plot.svg), 1, "{}", plot.svg);
        assert!(plot.svg.contains(LAB_LABEL));
    }
}
