//! SVG plots with plotters: throughput and p99 against concurrency, throughput against workers
//! (with the analysis' USL fit drawn through the points), and a bar chart per workload when
//! there is a single concurrency level. The same SVG text is written to files and inlined in
//! the HTML report, so the report needs nothing beside itself.
//!
//! Two marks keep the plots as honest as the tables: a point measured more than once carries
//! an error bar from the minimum to the maximum of its repetitions, and a percentile that is
//! only a lower bound is drawn as a hollow triangle pointing up (the true value is at or above
//! it) instead of a dot, with a "lower bound" legend entry.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use plotters::coord::ranged1d::{AsRangedCoord, Ranged, SegmentValue, ValueFormatter};
use plotters::prelude::*;

use super::{file_stem, levels_of, points_of, repeated, series_of, thousands, Exporter};
use crate::sweep::analysis::series_label;
use crate::sweep::results::{PointResult, SweepResults};

/// Writes the plots as `<workload>-<kind>.svg`.
pub struct SvgExporter;

/// One rendered plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Plot {
    /// File name, e.g. `hello-throughput.svg`.
    pub file_name: String,
    pub title: String,
    pub svg: String,
}

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

const WIDTH: u32 = 760;
const HEIGHT: u32 = 440;

/// Distinct colours (Okabe-Ito, then a few more), picked by series index.
fn color(index: usize) -> RGBColor {
    const PALETTE: [(u8, u8, u8); 12] = [
        (0, 114, 178),
        (230, 159, 0),
        (0, 158, 115),
        (213, 94, 0),
        (204, 121, 167),
        (86, 180, 233),
        (120, 120, 120),
        (240, 228, 66),
        (0, 0, 0),
        (153, 79, 0),
        (0, 90, 50),
        (110, 50, 160),
    ];
    let (r, g, b) = PALETTE[index % PALETTE.len()];
    RGBColor(r, g, b)
}

fn draw_error<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing a plot: {e:?}")
}

/// A line to draw: label, colour index, points, and how to mark each point. (Also drawn by
/// `load --html`'s time series, see [`time_plot`].)
pub(crate) struct Line {
    /// Empty: the line is not in the legend (a further segment of a line that has a gap).
    pub(crate) label: String,
    pub(crate) color: usize,
    pub(crate) points: Vec<(f64, f64)>,
    /// Per point (or empty): its min..max over the repetitions, drawn as an error bar.
    ranges: Vec<Option<(f64, f64)>>,
    /// Per point (or empty): the value is only a lower bound, drawn as a hollow triangle.
    pub(crate) lower_bounds: Vec<bool>,
    /// A model curve: thin, unmarked, not in the legend.
    model: bool,
}

impl Line {
    pub(crate) fn measured(label: String, color: usize, points: Vec<(f64, f64)>) -> Line {
        Line {
            label,
            color,
            points,
            ranges: Vec::new(),
            lower_bounds: Vec::new(),
            model: false,
        }
    }

    fn range(&self, i: usize) -> Option<(f64, f64)> {
        self.ranges.get(i).copied().flatten()
    }

    fn lower_bound(&self, i: usize) -> bool {
        self.lower_bounds.get(i).copied().unwrap_or(false)
    }
}

/// The legend's text for the hollow-triangle marker.
pub const LOWER_BOUND_LABEL: &str = "lower bound";
/// The legend's text for the error bars.
pub const SPREAD_LABEL: &str = "min..max of repetitions";

/// The hollow triangle, pointing up, centred on a pixel offset of (0, 0).
fn triangle_path() -> Vec<(i32, i32)> {
    vec![(0, -6), (-5, 4), (5, 4), (0, -6)]
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
        let series = series_of(&points);
        let levels = levels_of(&points);
        if levels.len() > 1 {
            let mut throughput = Vec::new();
            let mut p99 = Vec::new();
            for (i, key) in series.iter().enumerate() {
                let mine: Vec<&PointResult> = points
                    .iter()
                    .copied()
                    .filter(|p| p.series_key() == *key)
                    .collect();
                let label = series_label(&key.0, key.1);
                let x = |p: &PointResult| f64::from(p.concurrency);
                throughput.push(Line {
                    ranges: mine
                        .iter()
                        .map(|p| repeated(p).then_some((p.spread.rps_min, p.spread.rps_max)))
                        .collect(),
                    ..Line::measured(
                        label.clone(),
                        i,
                        mine.iter().map(|p| (x(p), p.rps)).collect(),
                    )
                });
                p99.push(Line {
                    ranges: mine
                        .iter()
                        .map(|p| {
                            repeated(p)
                                .then_some((p.spread.p99_min / 1000.0, p.spread.p99_max / 1000.0))
                        })
                        .collect(),
                    lower_bounds: mine
                        .iter()
                        .map(|p| p.latency_us.lower_bound.contains("p99"))
                        .collect(),
                    ..Line::measured(
                        label,
                        i,
                        mine.iter()
                            .map(|p| (x(p), p.latency_us.p99 / 1000.0))
                            .collect(),
                    )
                });
            }
            plots.push(line_plot(
                format!("{stem}-throughput.svg"),
                format!("{}: throughput vs concurrency", workload.name),
                "concurrent connections",
                "requests / second",
                &throughput,
            )?);
            plots.push(line_plot(
                format!("{stem}-p99.svg"),
                format!("{}: p99 latency vs concurrency", workload.name),
                "concurrent connections",
                "p99 latency (ms)",
                &p99,
            )?);
        }
        // Throughput against workers, one line per (arch, concurrency) with several counts,
        // with the analysis' USL fit of that series when there is one.
        let analysed = results
            .analysis
            .workloads
            .iter()
            .find(|w| w.workload == workload.name);
        let mut worker_lines = Vec::new();
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
                .filter_map(|p| Some((f64::from(p.workers?), p.rps)))
                .collect();
            let fit = analysed.and_then(|w| {
                w.usl
                    .iter()
                    .find(|u| {
                        u.axis == "workers" && &u.arch == arch && u.fixed == Some(*concurrency)
                    })
                    .and_then(|u| u.fit)
            });
            if let Some(fit) = fit {
                let max_n = data.last().map_or(1.0, |p| p.0);
                let curve = (0..=60)
                    .map(|k| 1.0 + (max_n - 1.0) * f64::from(k) / 60.0)
                    .map(|n| (n, fit.throughput(n)))
                    .collect();
                worker_lines.push(Line {
                    model: true,
                    ..Line::measured(String::new(), i, curve)
                });
                fitted = true;
            }
            worker_lines.push(Line {
                ranges: mine
                    .iter()
                    .map(|p| repeated(p).then_some((p.spread.rps_min, p.spread.rps_max)))
                    .collect(),
                ..Line::measured(format!("{arch}, {concurrency} connections"), i, data)
            });
        }
        if !worker_lines.is_empty() {
            plots.push(line_plot(
                format!("{stem}-workers.svg"),
                format!(
                    "{}: throughput vs workers{}",
                    workload.name,
                    if fitted { " (thin: USL fit)" } else { "" }
                ),
                "workers",
                "requests / second",
                &worker_lines,
            )?);
        }
        if levels.len() == 1 {
            let bars: Vec<Bar> = points
                .iter()
                .map(|p| Bar {
                    label: series_label(&p.arch, p.workers),
                    value: p.rps,
                    range: repeated(p).then_some((p.spread.rps_min, p.spread.rps_max)),
                })
                .collect();
            plots.push(bar_plot(
                format!("{stem}-bars.svg"),
                format!("{}: throughput at {} connections", workload.name, levels[0]),
                &bars,
            )?);
        }
    }
    Ok(plots)
}

/// A plot over time (`load --html`): x linear from 0, y on a log scale when `log_y` and the
/// values span a factor of 20 or more (latency), else linear from 0 (throughput).
pub(crate) fn time_plot(
    title: String,
    x_desc: &str,
    y_desc: &str,
    lines: &[Line],
    log_y: bool,
) -> anyhow::Result<Plot> {
    let all = || lines.iter().flat_map(|l| l.points.iter().copied());
    let x_max = all().map(|(x, _)| x).fold(0.0f64, f64::max).max(1.0);
    let y_max = all().map(|(_, y)| y).fold(0.0f64, f64::max);
    let y_min = all()
        .map(|(_, y)| y)
        .filter(|y| *y > 0.0)
        .fold(f64::MAX, f64::min);
    let x_range = 0.0..x_max * 1.02;
    let mut svg = String::new();
    // Head room above the data for the legend (upper right).
    if log_y && y_min < f64::MAX && y_max / y_min >= 20.0 {
        let y_range = (y_min * 0.8..y_max * 4.0).log_scale();
        draw_lines(
            &mut svg, &title, x_desc, y_desc, x_range, y_range, lines, false, true,
        )?;
    } else {
        let y_range = 0.0..(y_max * 1.3).max(1.0);
        draw_lines(
            &mut svg, &title, x_desc, y_desc, x_range, y_range, lines, false, false,
        )?;
    }
    Ok(Plot {
        file_name: String::new(),
        title,
        svg,
    })
}

fn line_plot(
    file_name: String,
    title: String,
    x_desc: &str,
    y_desc: &str,
    lines: &[Line],
) -> anyhow::Result<Plot> {
    let all = lines.iter().flat_map(|l| l.points.iter().copied());
    let (mut x_min, mut x_max, mut y_max) = (f64::MAX, f64::MIN, 0.0f64);
    for (x, y) in all {
        x_min = x_min.min(x);
        x_max = x_max.max(x);
        y_max = y_max.max(y);
    }
    for (_, high) in lines.iter().flat_map(|l| l.ranges.iter().flatten()) {
        y_max = y_max.max(*high);
    }
    if x_min > x_max {
        (x_min, x_max) = (1.0, 2.0);
    }
    if x_max <= x_min {
        x_max = x_min + 1.0;
    }
    let y_range = 0.0..(y_max * 1.1).max(1.0);
    let mut svg = String::new();
    if x_min > 0.0 && x_max / x_min >= 20.0 {
        let x_range = (x_min * 0.9..x_max * 1.1).log_scale();
        draw_lines(
            &mut svg, &title, x_desc, y_desc, x_range, y_range, lines, true, false,
        )?;
    } else {
        let pad = (x_max - x_min) * 0.05;
        draw_lines(
            &mut svg,
            &title,
            x_desc,
            y_desc,
            (x_min - pad)..(x_max + pad),
            y_range,
            lines,
            false,
            false,
        )?;
    }
    Ok(Plot {
        file_name,
        title,
        svg,
    })
}

/// Whether a log-scale tick is worth a label: 1, 2 and 5 times a power of ten. (Labelling
/// every tick crowds the axis, and ticks a hair apart, such as 9.9999 and 10, both read "10".)
fn is_log_label(v: f64) -> bool {
    if v <= 0.0 {
        return false;
    }
    let mantissa = v / 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0]
        .iter()
        .any(|m| (mantissa - m).abs() < 1e-6 * m)
}

#[allow(clippy::too_many_arguments)]
fn draw_lines<XR, YR>(
    svg: &mut String,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    x_range: XR,
    y_range: YR,
    lines: &[Line],
    log_x: bool,
    log_y: bool,
) -> anyhow::Result<()>
where
    XR: AsRangedCoord<Value = f64>,
    XR::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    YR: AsRangedCoord<Value = f64>,
    YR::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let root = SVGBackend::with_string(svg, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_error)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(x_range, y_range)
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .axis_desc_style(("sans-serif", 15))
        .label_style(("sans-serif", 12))
        .y_label_formatter(&|v| {
            if !log_y || is_log_label(*v) {
                thousands(*v)
            } else {
                String::new()
            }
        })
        .x_label_formatter(&|v| {
            if !log_x || is_log_label(*v) {
                thousands(*v)
            } else {
                String::new()
            }
        })
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(draw_error)?;
    let mut any_lower_bound = false;
    let mut any_range = false;
    for line in lines {
        let c = color(line.color);
        if line.model {
            chart
                .draw_series(LineSeries::new(
                    line.points.clone(),
                    c.mix(0.45).stroke_width(1),
                ))
                .map_err(draw_error)?;
            continue;
        }
        let series = chart
            .draw_series(LineSeries::new(line.points.clone(), c.stroke_width(2)))
            .map_err(draw_error)?;
        if !line.label.is_empty() {
            series.label(line.label.clone()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
            });
        }
        for (i, &(x, _)) in line.points.iter().enumerate() {
            if let Some((low, high)) = line.range(i) {
                any_range = true;
                let style = c.stroke_width(1);
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(x, low), (x, high)],
                        style,
                    )))
                    .map_err(draw_error)?;
                chart
                    .draw_series([low, high].map(|y| {
                        EmptyElement::at((x, y)) + PathElement::new(vec![(-4, 0), (4, 0)], style)
                    }))
                    .map_err(draw_error)?;
            }
        }
        let (hollow, filled): (Vec<usize>, Vec<usize>) =
            (0..line.points.len()).partition(|&i| line.lower_bound(i));
        chart
            .draw_series(
                filled
                    .into_iter()
                    .map(|i| Circle::new(line.points[i], 3, c.filled())),
            )
            .map_err(draw_error)?;
        if !hollow.is_empty() {
            any_lower_bound = true;
            chart
                .draw_series(hollow.into_iter().map(|i| {
                    EmptyElement::at(line.points[i])
                        + PathElement::new(triangle_path(), c.stroke_width(2))
                }))
                .map_err(draw_error)?;
        }
    }
    if any_lower_bound {
        chart
            .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
            .map_err(draw_error)?
            .label(LOWER_BOUND_LABEL)
            .legend(|(x, y)| {
                EmptyElement::at((x + 9, y))
                    + PathElement::new(triangle_path(), BLACK.stroke_width(2))
            });
    }
    if any_range {
        chart
            .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
            .map_err(draw_error)?
            .label(SPREAD_LABEL)
            .legend(|(x, y)| {
                EmptyElement::at((x + 9, y))
                    + PathElement::new(vec![(0, -6), (0, 6)], BLACK.stroke_width(1))
                    + PathElement::new(vec![(-4, -6), (4, -6)], BLACK.stroke_width(1))
                    + PathElement::new(vec![(-4, 6), (4, 6)], BLACK.stroke_width(1))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(draw_error)?;
    root.present().map_err(draw_error)?;
    drop(chart);
    drop(root);
    Ok(())
}

/// One bar: its label, height and min..max over the repetitions.
struct Bar {
    label: String,
    value: f64,
    range: Option<(f64, f64)>,
}

fn bar_plot(file_name: String, title: String, bars: &[Bar]) -> anyhow::Result<Plot> {
    let mut svg = String::new();
    {
        let y_max = bars
            .iter()
            .map(|b| b.range.map_or(b.value, |r| r.1.max(b.value)))
            .fold(0.0f64, f64::max)
            * 1.15;
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        let count = bars.len().max(1);
        let mut chart = ChartBuilder::on(&root)
            .caption(&title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d((0..count).into_segmented(), 0.0..y_max.max(1.0))
            .map_err(draw_error)?;
        let names: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc("architecture")
            .y_desc("requests / second")
            .axis_desc_style(("sans-serif", 15))
            .label_style(("sans-serif", 12))
            .x_labels(count)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                    names.get(*i).cloned().unwrap_or_default()
                }
                SegmentValue::Last => String::new(),
            })
            .y_label_formatter(&|v| thousands(*v))
            .draw()
            .map_err(draw_error)?;
        for (i, bar) in bars.iter().enumerate() {
            let c = color(i);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [
                        (SegmentValue::Exact(i), 0.0),
                        (SegmentValue::Exact(i + 1), bar.value),
                    ],
                    c.mix(0.8).filled(),
                )))
                .map_err(draw_error)?;
            let label_at = match bar.range {
                Some((low, high)) => {
                    let style = BLACK.stroke_width(1);
                    let x = SegmentValue::CenterOf(i);
                    chart
                        .draw_series(std::iter::once(PathElement::new(
                            vec![(x.clone(), low), (x.clone(), high)],
                            style,
                        )))
                        .map_err(draw_error)?;
                    chart
                        .draw_series([low, high].map(|y| {
                            EmptyElement::at((x.clone(), y))
                                + PathElement::new(vec![(-4, 0), (4, 0)], style)
                        }))
                        .map_err(draw_error)?;
                    high.max(bar.value)
                }
                None => bar.value,
            };
            chart
                .draw_series(std::iter::once(Text::new(
                    thousands(bar.value),
                    (SegmentValue::CenterOf(i), label_at),
                    ("sans-serif", 13).into_font().color(&BLACK),
                )))
                .map_err(draw_error)?;
        }
        root.present().map_err(draw_error)?;
    }
    Ok(Plot {
        file_name,
        title,
        svg,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
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
            p.latency_us.lower_bound = Default::default();
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

    #[test]
    fn bars_carry_error_bars_for_repeated_points() {
        let bars = vec![
            Bar {
                label: "epoll".into(),
                value: 1200.0,
                range: Some((1100.0, 1300.0)),
            },
            Bar {
                label: "threaded".into(),
                value: 3400.0,
                range: None,
            },
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
        let bars = vec![
            Bar {
                label: "epoll".into(),
                value: 1200.0,
                range: None,
            },
            Bar {
                label: "threaded".into(),
                value: 3400.0,
                range: None,
            },
        ];
        let plot = bar_plot("b.svg".into(), "bars".into(), &bars).unwrap();
        assert!(
            plot.svg.contains("epoll")
                && plot.svg.contains("threaded")
                && plot.svg.contains("3,400")
        );
    }
}
