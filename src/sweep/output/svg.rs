//! SVG plots with plotters: throughput and p99 against concurrency, throughput against workers
//! (with the USL fit drawn through the points), and a bar chart per workload when there is a
//! single concurrency level. The same SVG text is written to files and inlined in the HTML
//! report, so the report needs nothing beside itself.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use plotters::coord::ranged1d::{AsRangedCoord, Ranged, SegmentValue, ValueFormatter};
use plotters::prelude::*;

use super::{file_stem, levels_of, points_of, series_of, thousands, Exporter};
use crate::sweep::analysis::series_label;
use crate::sweep::results::{PointResult, SweepResults};
use crate::sweep::usl::fit_usl;

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

/// A line to draw: label, colour index, points, and whether to mark the points.
struct Line {
    label: String,
    color: usize,
    points: Vec<(f64, f64)>,
    /// A model curve: thin, unmarked, not in the legend.
    model: bool,
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
                let xy = |f: fn(&PointResult) -> f64| {
                    mine.iter()
                        .map(|p| (f64::from(p.concurrency), f(p)))
                        .collect::<Vec<_>>()
                };
                throughput.push(Line {
                    label: label.clone(),
                    color: i,
                    points: xy(|p| p.rps),
                    model: false,
                });
                p99.push(Line {
                    label,
                    color: i,
                    points: xy(|p| p.latency_us.p99 / 1000.0),
                    model: false,
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
        // Throughput against workers, one line per (arch, concurrency) with several counts.
        let mut worker_lines = Vec::new();
        let groups: BTreeSet<(String, u32)> = points
            .iter()
            .filter(|p| p.workers.is_some())
            .map(|p| (p.arch.clone(), p.concurrency))
            .collect();
        for (i, (arch, concurrency)) in groups.iter().enumerate() {
            let mut data: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| &p.arch == arch && p.concurrency == *concurrency)
                .filter_map(|p| Some((f64::from(p.workers?), p.rps)))
                .collect();
            data.sort_by(|a, b| a.0.total_cmp(&b.0));
            if data.len() < 2 {
                continue;
            }
            if let Some(fit) = fit_usl(&data) {
                let max_n = data.last().map_or(1.0, |p| p.0);
                let curve = (0..=60)
                    .map(|k| 1.0 + (max_n - 1.0) * f64::from(k) / 60.0)
                    .map(|n| (n, fit.throughput(n)))
                    .collect();
                worker_lines.push(Line {
                    label: String::new(),
                    color: i,
                    points: curve,
                    model: true,
                });
            }
            worker_lines.push(Line {
                label: format!("{arch}, {concurrency} connections"),
                color: i,
                points: data,
                model: false,
            });
        }
        if !worker_lines.is_empty() {
            plots.push(line_plot(
                format!("{stem}-workers.svg"),
                format!("{}: throughput vs workers (thin: USL fit)", workload.name),
                "workers",
                "requests / second",
                &worker_lines,
            )?);
        }
        if levels.len() == 1 {
            let bars: Vec<(String, f64)> = points
                .iter()
                .map(|p| (series_label(&p.arch, p.workers), p.rps))
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
            &mut svg, &title, x_desc, y_desc, x_range, y_range, lines, true,
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
fn draw_lines<XR>(
    svg: &mut String,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    x_range: XR,
    y_range: std::ops::Range<f64>,
    lines: &[Line],
    log_x: bool,
) -> anyhow::Result<()>
where
    XR: AsRangedCoord<Value = f64>,
    XR::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
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
        .y_label_formatter(&|v| thousands(*v))
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
        chart
            .draw_series(LineSeries::new(line.points.clone(), c.stroke_width(2)))
            .map_err(draw_error)?
            .label(line.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
        chart
            .draw_series(line.points.iter().map(|&p| Circle::new(p, 3, c.filled())))
            .map_err(draw_error)?;
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

fn bar_plot(file_name: String, title: String, bars: &[(String, f64)]) -> anyhow::Result<Plot> {
    let mut svg = String::new();
    {
        let y_max = bars.iter().map(|b| b.1).fold(0.0f64, f64::max) * 1.15;
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
        let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
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
        for (i, (_, rps)) in bars.iter().enumerate() {
            let c = color(i);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [
                        (SegmentValue::Exact(i), 0.0),
                        (SegmentValue::Exact(i + 1), *rps),
                    ],
                    c.mix(0.8).filled(),
                )))
                .map_err(draw_error)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    thousands(*rps),
                    (SegmentValue::CenterOf(i), *rps),
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
            Line {
                label: "epoll".into(),
                color: 0,
                points: vec![(1.0, 10.0), (100.0, 900.0)],
                model: false,
            },
            Line {
                label: String::new(),
                color: 0,
                points: vec![(1.0, 9.0), (100.0, 800.0)],
                model: true,
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
            ("epoll".to_string(), 1200.0),
            ("threaded".to_string(), 3400.0),
        ];
        let plot = bar_plot("b.svg".into(), "bars".into(), &bars).unwrap();
        assert!(
            plot.svg.contains("epoll")
                && plot.svg.contains("threaded")
                && plot.svg.contains("3,400")
        );
    }
}
