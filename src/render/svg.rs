//! Plotting primitives over plotters: line plots (linear or log axes, error bars, hollow
//! triangles for lower bounds, `~` for load that fell short, a legend in its own column), bar
//! charts and plots over time. The sweep's plots and `load --html`'s time series draw with
//! these.

use anyhow::anyhow;
use plotters::coord::ranged1d::{
    AsRangedCoord, Ranged, SegmentValue, SegmentedCoord, ValueFormatter,
};
use plotters::coord::types::{RangedCoordf64, RangedCoordusize};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::numbers::thousands;

/// One rendered plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Plot {
    /// File name, e.g. `hello-throughput.svg`.
    pub file_name: String,
    pub title: String,
    pub svg: String,
}

pub const WIDTH: u32 = 980;
pub const HEIGHT: u32 = 440;
/// The legend's own column, right of the plot area, so it never covers a data point.
pub const LEGEND_WIDTH: u32 = 230;

/// Twelve colours that stay apart for colour-blind readers: the eight of Okabe and Ito
/// ("Color Universal Design", 2008) less yellow, which vanishes on white, then four of Paul
/// Tol's "muted" and "bright" schemes. Each series also has its own marker shape
/// ([`Shape`]), so a print in grey still tells them apart.
pub const PALETTE: [(u8, u8, u8); 12] = [
    (0, 114, 178),   // blue
    (230, 159, 0),   // orange
    (0, 158, 115),   // bluish green
    (213, 94, 0),    // vermillion
    (204, 121, 167), // reddish purple
    (86, 180, 233),  // sky blue
    (0, 0, 0),       // black
    (51, 34, 136),   // indigo
    (153, 153, 51),  // olive
    (136, 34, 85),   // wine
    (204, 187, 68),  // yellow (dark)
    (119, 119, 119), // grey
];

pub fn color(index: usize) -> RGBColor {
    let (r, g, b) = PALETTE[index % PALETTE.len()];
    RGBColor(r, g, b)
}

/// A series' marker: one of six shapes, filled or hollow. The upward triangle is not among
/// them: hollow, it marks a lower bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Circle,
    Square,
    Diamond,
    TriangleDown,
    Plus,
    Cross,
}

/// Series `i`'s marker: twelve markers (six shapes, filled then hollow) against twelve
/// colours, so the first twelve series differ in both and a print in grey still tells them
/// apart; past twelve the pairing shifts (`(i + i / 12) % 12`), so no two of the first 144
/// series share both colour and marker.
pub fn marker(index: usize) -> (Shape, bool) {
    const SHAPES: [Shape; 6] = [
        Shape::Circle,
        Shape::Square,
        Shape::Diamond,
        Shape::TriangleDown,
        Shape::Plus,
        Shape::Cross,
    ];
    let k = (index + index / PALETTE.len()) % (2 * SHAPES.len());
    (SHAPES[k % SHAPES.len()], k >= SHAPES.len())
}

/// The outline of a shape around (0, 0), in pixels (the circle is drawn as a circle).
pub fn outline(shape: Shape) -> Vec<(i32, i32)> {
    match shape {
        Shape::Circle | Shape::Square => vec![(-4, -4), (4, -4), (4, 4), (-4, 4)],
        Shape::Diamond => vec![(0, -5), (5, 0), (0, 5), (-5, 0)],
        Shape::TriangleDown => vec![(-5, -4), (5, -4), (0, 5)],
        Shape::Plus => plus_outline(false),
        Shape::Cross => plus_outline(true),
    }
}

/// The outline of a plus sign of half-length 5 and arm half-width 2 around (0, 0), optionally
/// turned by 45 degrees (a cross).
pub fn plus_outline(turned: bool) -> Vec<(i32, i32)> {
    let arm = [
        (-2.0, -5.0),
        (2.0, -5.0),
        (2.0, -2.0),
        (5.0, -2.0),
        (5.0, 2.0),
        (2.0, 2.0),
        (2.0, 5.0),
        (-2.0, 5.0),
        (-2.0, 2.0),
        (-5.0, 2.0),
        (-5.0, -2.0),
        (-2.0, -2.0),
    ];
    let (sin, cos) = if turned {
        std::f64::consts::FRAC_PI_4.sin_cos()
    } else {
        (0.0, 1.0)
    };
    arm.iter()
        .map(|&(x, y): &(f64, f64)| {
            (
                (x * cos - y * sin).round() as i32,
                (x * sin + y * cos).round() as i32,
            )
        })
        .collect()
}

/// Draws series `index`'s marker centred on the pixel `at` of `area` (in that area's pixels).
pub fn draw_marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    at: (i32, i32),
    index: usize,
) -> anyhow::Result<()> {
    let c = color(index);
    let (shape, hollow) = marker(index);
    let (x, y) = at;
    let mut points: Vec<(i32, i32)> = outline(shape)
        .into_iter()
        .map(|(dx, dy)| (x + dx, y + dy))
        .collect();
    match (shape, hollow) {
        (Shape::Circle, false) => area.draw(&Circle::new(at, 4, c.filled())),
        (Shape::Circle, true) => area.draw(&Circle::new(at, 4, c.stroke_width(2))),
        (_, false) => area.draw(&Polygon::new(points, c.filled())),
        (_, true) => {
            points.push(points[0]);
            area.draw(&PathElement::new(points, c.stroke_width(2)))
        }
    }
    .map_err(draw_error)
}

pub fn draw_error<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing a plot: {e:?}")
}

/// A line to draw: label, colour index, points, and how to mark each point. (Also drawn by
/// `load --html`'s time series, see [`time_plot`].)
pub struct Line {
    /// Empty: the line is not in the legend (a further segment of a line that has a gap).
    pub label: String,
    pub color: usize,
    pub points: Vec<(f64, f64)>,
    /// Per point (or empty): its min..max over the repetitions, drawn as an error bar.
    pub ranges: Vec<Option<(f64, f64)>>,
    /// Per point (or empty): the value is only a lower bound, drawn as a hollow triangle.
    pub lower_bounds: Vec<bool>,
    /// Per point (or empty): the load fell short of what was offered, labelled `~`.
    pub starved: Vec<bool>,
    /// Per point (or empty): the lab (its load generator or path), not the server, set the
    /// figure, labelled `lab`.
    pub lab: Vec<bool>,
    /// A model curve: thin, unmarked, not in the legend.
    pub model: bool,
}

impl Line {
    pub fn measured(label: String, color: usize, points: Vec<(f64, f64)>) -> Line {
        Line {
            label,
            color,
            points,
            ranges: Vec::new(),
            lower_bounds: Vec::new(),
            starved: Vec::new(),
            lab: Vec::new(),
            model: false,
        }
    }

    pub fn range(&self, i: usize) -> Option<(f64, f64)> {
        self.ranges.get(i).copied().flatten()
    }

    pub fn lower_bound(&self, i: usize) -> bool {
        self.lower_bounds.get(i).copied().unwrap_or(false)
    }

    pub fn starved(&self, i: usize) -> bool {
        self.starved.get(i).copied().unwrap_or(false)
    }

    pub fn lab(&self, i: usize) -> bool {
        self.lab.get(i).copied().unwrap_or(false)
    }
}

/// The legend's text for the hollow-triangle marker.
pub const LOWER_BOUND_LABEL: &str = "lower bound";
/// The legend's text for the `~` label.
pub const STARVED_LABEL: &str = "~ load fell short";
/// The legend's text for the `lab` label (and the bar chart's note for a faded bar).
pub const LAB_LABEL: &str = "lab: set by the lab, not the server";
/// The legend's text for the error bars.
pub const SPREAD_LABEL: &str = "min..max of repetitions";

/// The hollow triangle, pointing up, centred on a pixel offset of (0, 0).
pub fn triangle_path() -> Vec<(i32, i32)> {
    vec![(0, -6), (-5, 4), (5, 4), (0, -6)]
}

/// One axis of a line plot: its range, and whether it is logarithmic.
#[derive(Debug, Clone)]
pub struct Axis {
    pub range: std::ops::Range<f64>,
    pub log: bool,
}

impl Axis {
    /// Linear from zero to a little above `max`.
    pub fn from_zero(max: f64, head_room: f64) -> Axis {
        Axis {
            range: 0.0..(max * head_room).max(1.0),
            log: false,
        }
    }

    /// Logarithmic around the positive values `min..max` when they span `factor` or more,
    /// else linear from zero.
    pub fn log_if_spread(min: f64, max: f64, factor: f64) -> Axis {
        if min > 0.0 && min.is_finite() && max / min >= factor {
            Axis {
                range: min * 0.5..max * 1.6,
                log: true,
            }
        } else {
            Axis::from_zero(max, 1.1)
        }
    }
}

/// A plot over time (`load --html`): x linear from 0, y on a log scale when `log_y` and the
/// values span a factor of 20 or more (latency), else linear from 0 (throughput).
pub fn time_plot(
    title: String,
    x_desc: &str,
    y_desc: &str,
    lines: &[Line],
    log_y: bool,
) -> anyhow::Result<Plot> {
    let all = || lines.iter().flat_map(|l| l.points.iter().copied());
    let x_max = all().map(|(x, _)| x).fold(0.0f64, f64::max).max(1.0);
    let (y_min, y_max) = y_extent(lines);
    let x = Axis {
        range: 0.0..x_max * 1.02,
        log: false,
    };
    let y = if log_y {
        Axis::log_if_spread(y_min, y_max, 20.0)
    } else {
        Axis::from_zero(y_max, 1.1)
    };
    let mut svg = String::new();
    draw_on_axes(&mut svg, &title, x_desc, y_desc, x, y, lines)?;
    Ok(Plot {
        file_name: String::new(),
        title,
        svg,
    })
}

/// The smallest positive and the largest value of the lines, spreads included.
pub fn y_extent(lines: &[Line]) -> (f64, f64) {
    let values = lines.iter().flat_map(|l| {
        l.points
            .iter()
            .map(|p| p.1)
            .chain(l.ranges.iter().flatten().flat_map(|r| [r.0, r.1]))
    });
    values.fold((f64::MAX, 0.0f64), |(lo, hi), v| {
        (if v > 0.0 { lo.min(v) } else { lo }, hi.max(v))
    })
}

/// A plot against concurrency or workers: x logarithmic when it spans a factor of 20; y from
/// zero, or logarithmic when `log_y` (latency) and the values span a factor of 10, so that a
/// 0.1 ms series and a 1 s lower bound are both readable in one picture.
pub fn line_plot(
    file_name: String,
    title: String,
    x_desc: &str,
    y_desc: &str,
    lines: &[Line],
    log_y: bool,
) -> anyhow::Result<Plot> {
    let (mut x_min, mut x_max) = (f64::MAX, f64::MIN);
    for (x, _) in lines.iter().flat_map(|l| l.points.iter().copied()) {
        x_min = x_min.min(x);
        x_max = x_max.max(x);
    }
    if x_min > x_max {
        (x_min, x_max) = (1.0, 2.0);
    }
    if x_max <= x_min {
        x_max = x_min + 1.0;
    }
    let x = if x_min > 0.0 && x_max / x_min >= 20.0 {
        Axis {
            range: x_min * 0.8..x_max * 1.25,
            log: true,
        }
    } else {
        let pad = (x_max - x_min) * 0.05;
        Axis {
            range: (x_min - pad)..(x_max + pad),
            log: false,
        }
    };
    let (y_min, y_max) = y_extent(lines);
    let y = if log_y {
        Axis::log_if_spread(y_min, y_max, 10.0)
    } else {
        Axis::from_zero(y_max, 1.1)
    };
    let y_desc = if y.log {
        format!("{y_desc}, log scale")
    } else {
        y_desc.to_string()
    };
    let mut svg = String::new();
    draw_on_axes(&mut svg, &title, x_desc, &y_desc, x, y, lines)?;
    Ok(Plot {
        file_name,
        title,
        svg,
    })
}

/// [`draw_lines`] on the coordinate types the two axes call for.
pub fn draw_on_axes(
    svg: &mut String,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    x: Axis,
    y: Axis,
    lines: &[Line],
) -> anyhow::Result<()> {
    let text = (title, x_desc, y_desc);
    match (x.log, y.log) {
        (false, false) => draw_lines(svg, text, x.range, y.range, lines, (false, false)),
        (true, false) => draw_lines(
            svg,
            text,
            x.range.log_scale(),
            y.range,
            lines,
            (true, false),
        ),
        (false, true) => draw_lines(
            svg,
            text,
            x.range,
            y.range.log_scale(),
            lines,
            (false, true),
        ),
        (true, true) => draw_lines(
            svg,
            text,
            x.range.log_scale(),
            y.range.log_scale(),
            lines,
            (true, true),
        ),
    }
}

/// Whether a log-scale tick is worth a label: 1, 2 and 5 times a power of ten. (Labelling
/// every tick crowds the axis, and ticks a hair apart, such as 9.9999 and 10, both read "10".)
pub fn is_log_label(v: f64) -> bool {
    if v <= 0.0 {
        return false;
    }
    let mantissa = v / 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0]
        .iter()
        .any(|m| (mantissa - m).abs() < 1e-6 * m)
}

/// An axis label: thousands separators from 1 up, and just the digits a small value needs
/// below it (`0.05`, `0.2`).
pub fn axis_number(v: f64) -> String {
    if v.abs() >= 1.0 || v == 0.0 {
        return thousands(v);
    }
    let decimals = (-v.abs().log10()).ceil().max(1.0) as usize;
    let text = format!("{v:.*}", decimals + 1);
    let text = text.trim_end_matches('0');
    text.trim_end_matches('.').to_string()
}

/// What the legend lists, in its own column right of the plot area.
pub enum LegendEntry {
    Series { label: String, color: usize },
    LowerBound,
    Spread,
    Starved,
    Lab,
}

/// Draws `lines` into `svg`: the mesh, the measured levels as x ticks, each line with its
/// spreads, `~` and lower-bound markers, and the legend in its own column.
pub fn draw_lines<XR, YR>(
    svg: &mut String,
    (title, x_desc, y_desc): (&str, &str, &str),
    x_range: XR,
    y_range: YR,
    lines: &[Line],
    (log_x, log_y): (bool, bool),
) -> anyhow::Result<()>
where
    XR: AsRangedCoord<Value = f64>,
    XR::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    YR: AsRangedCoord<Value = f64>,
    YR::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let root = SVGBackend::with_string(svg, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_error)?;
    let (plot_area, legend_area) = root.split_horizontally(WIDTH - LEGEND_WIDTH);
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(x_range, y_range)
        .map_err(draw_error)?;
    let levels = measured_levels(lines);
    let level_ticks = !levels.is_empty() && levels.len() <= 12;
    let label = |log: bool, hide: bool| {
        move |v: &f64| {
            if !hide && (!log || is_log_label(*v)) {
                axis_number(*v)
            } else {
                String::new()
            }
        }
    };
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .axis_desc_style(("sans-serif", 17))
        .label_style(("sans-serif", 15))
        .y_label_formatter(&label(log_y, false))
        .x_label_formatter(&label(log_x, level_ticks))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(draw_error)?;
    if level_ticks {
        draw_level_ticks(&root, &chart, &levels)?;
    }
    let mut marks = Marks::default();
    let mut legend = Vec::new();
    for line in lines {
        draw_line(&root, &mut chart, line, &mut marks)?;
        if !line.model && !line.label.is_empty() {
            legend.push(LegendEntry::Series {
                label: line.label.clone(),
                color: line.color,
            });
        }
    }
    legend.extend(marks.legend());
    drop(chart);
    draw_legend(&legend_area, &legend)?;
    root.present().map_err(draw_error)?;
    Ok(())
}

/// The x values the measured (not model) lines have, sorted, once each. The measured levels
/// (1, 4, 64 connections) are the x labels when there are a dozen or fewer: a reader looks up
/// the points, not round numbers. Past that (a time series) the axis' own ticks do.
fn measured_levels(lines: &[Line]) -> Vec<f64> {
    let mut levels: Vec<f64> = lines
        .iter()
        .filter(|l| !l.model)
        .flat_map(|l| l.points.iter().map(|p| p.0))
        .collect();
    levels.sort_by(f64::total_cmp);
    levels.dedup();
    levels
}

type Root<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
type Chart<'a, 'b, X, Y> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, Y>>;

/// A tick and a label under the x axis at each measured level.
fn draw_level_ticks<X, Y>(root: &Root, chart: &Chart<X, Y>, levels: &[f64]) -> anyhow::Result<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let bottom = chart.y_range().start;
    let font = ("sans-serif", 15)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for &level in levels {
        let (x, y) = chart.plotting_area().map_coordinate(&(level, bottom));
        root.draw(&PathElement::new(vec![(x, y), (x, y + 5)], BLACK))
            .map_err(draw_error)?;
        root.draw(&Text::new(axis_number(level), (x, y + 8), font.clone()))
            .map_err(draw_error)?;
    }
    Ok(())
}

/// Which of the special marks some line drew, for the legend.
#[derive(Default)]
struct Marks {
    lower_bound: bool,
    range: bool,
    starved: bool,
    lab: bool,
}

impl Marks {
    fn legend(&self) -> impl Iterator<Item = LegendEntry> {
        [
            self.lower_bound.then_some(LegendEntry::LowerBound),
            self.range.then_some(LegendEntry::Spread),
            self.starved.then_some(LegendEntry::Starved),
            self.lab.then_some(LegendEntry::Lab),
        ]
        .into_iter()
        .flatten()
    }
}

/// Writes `text` (at `size`) right of each point of `line` that `marked` picks, `dy` pixels
/// above or below it as `v` anchors it; returns whether it wrote any.
fn label_points<X, Y>(
    root: &Root,
    chart: &Chart<X, Y>,
    line: &Line,
    marked: impl Fn(usize) -> bool,
    ((text, size), v, dy): ((&str, u32), VPos, i32),
) -> anyhow::Result<bool>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let font = ("sans-serif", size)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, v));
    let mut any = false;
    for i in (0..line.points.len()).filter(|&i| marked(i)) {
        any = true;
        let (x, y) = chart.plotting_area().map_coordinate(&line.points[i]);
        root.draw(&Text::new(text, (x + 5, y + dy), font.clone()))
            .map_err(draw_error)?;
    }
    Ok(any)
}

/// One line: a thin unmarked curve for a model; else the line, its spread bars, a `~` by
/// each point whose load fell short and `lab` by each the lab set, and a marker per point
/// (hollow: a lower bound).
fn draw_line<X, Y>(
    root: &Root,
    chart: &mut Chart<X, Y>,
    line: &Line,
    marks: &mut Marks,
) -> anyhow::Result<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let c = color(line.color);
    if line.model {
        chart
            .draw_series(LineSeries::new(
                line.points.clone(),
                c.mix(0.45).stroke_width(1),
            ))
            .map_err(draw_error)?;
        return Ok(());
    }
    chart
        .draw_series(LineSeries::new(line.points.clone(), c.stroke_width(2)))
        .map_err(draw_error)?;
    for (i, &(x, _)) in line.points.iter().enumerate() {
        if let Some((low, high)) = line.range(i) {
            marks.range = true;
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
    let above = (("~", 16), VPos::Bottom, -3);
    marks.starved |= label_points(root, chart, line, |i| line.starved(i), above)?;
    let below = (("lab", 12), VPos::Top, 3);
    marks.lab |= label_points(root, chart, line, |i| line.lab(i), below)?;
    let (hollow, filled): (Vec<usize>, Vec<usize>) =
        (0..line.points.len()).partition(|&i| line.lower_bound(i));
    for i in filled {
        let at = chart.plotting_area().map_coordinate(&line.points[i]);
        draw_marker(root, at, line.color)?;
    }
    if !hollow.is_empty() {
        marks.lower_bound = true;
        chart
            .draw_series(hollow.into_iter().map(|i| {
                EmptyElement::at(line.points[i])
                    + PathElement::new(triangle_path(), c.stroke_width(2))
            }))
            .map_err(draw_error)?;
    }
    Ok(())
}

/// The legend, in its own area: a framed list of line samples with their markers.
pub fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    entries: &[LegendEntry],
) -> anyhow::Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    let (width, height) = area.dim_in_pixel();
    let top = 44;
    let row = ((height as i32 - top - 24) / entries.len() as i32).clamp(12, 20);
    let bottom = top + row * entries.len() as i32 + 10;
    let (left, right) = (6, width as i32 - 6);
    area.draw(&Rectangle::new(
        [(left, top), (right, bottom)],
        BLACK.mix(0.3).stroke_width(1),
    ))
    .map_err(draw_error)?;
    let font = ("sans-serif", 15)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (k, entry) in entries.iter().enumerate() {
        let y = top + 5 + row * k as i32 + row / 2;
        let sample = (left + 8, left + 32);
        let text = match entry {
            LegendEntry::Series { label, color: i } => {
                let c = color(*i);
                area.draw(&PathElement::new(
                    vec![(sample.0, y), (sample.1, y)],
                    c.stroke_width(2),
                ))
                .map_err(draw_error)?;
                draw_marker(area, ((sample.0 + sample.1) / 2, y), *i)?;
                label.as_str()
            }
            LegendEntry::LowerBound => {
                let apex: Vec<(i32, i32)> = triangle_path()
                    .into_iter()
                    .map(|(dx, dy)| ((sample.0 + sample.1) / 2 + dx, y + dy))
                    .collect();
                area.draw(&PathElement::new(apex, BLACK.stroke_width(2)))
                    .map_err(draw_error)?;
                LOWER_BOUND_LABEL
            }
            LegendEntry::Spread => {
                let x = (sample.0 + sample.1) / 2;
                for path in [
                    vec![(x, y - 6), (x, y + 6)],
                    vec![(x - 4, y - 6), (x + 4, y - 6)],
                    vec![(x - 4, y + 6), (x + 4, y + 6)],
                ] {
                    area.draw(&PathElement::new(path, BLACK.stroke_width(1)))
                        .map_err(draw_error)?;
                }
                SPREAD_LABEL
            }
            LegendEntry::Starved => STARVED_LABEL,
            LegendEntry::Lab => LAB_LABEL,
        };
        area.draw(&Text::new(
            text.to_string(),
            (sample.1 + 8, y),
            font.clone(),
        ))
        .map_err(draw_error)?;
    }
    Ok(())
}

/// One bar: its label, height and min..max over the repetitions.
pub struct Bar {
    pub label: String,
    pub value: f64,
    pub range: Option<(f64, f64)>,
    /// The lab set the figure: the bar is faded and labelled `lab`, with [`LAB_LABEL`] as a note.
    pub lab: bool,
}

pub fn bar_plot(file_name: String, title: String, bars: &[Bar]) -> anyhow::Result<Plot> {
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
            draw_bar(&mut chart, i, bar)?;
        }
        if bars.iter().any(|b| b.lab) {
            root.draw(&Text::new(
                format!("faded, {LAB_LABEL}"),
                (WIDTH as i32 - 12, 34),
                ("sans-serif", 12)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Right, VPos::Top)),
            ))
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

/// One bar of a [`bar_plot`]: faded and labelled `lab` when the lab set it, its min..max as an
/// error bar, and its figure centred above it.
fn draw_bar(
    chart: &mut Chart<SegmentedCoord<RangedCoordusize>, RangedCoordf64>,
    i: usize,
    bar: &Bar,
) -> anyhow::Result<()> {
    let c = color(i);
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [
                (SegmentValue::Exact(i), 0.0),
                (SegmentValue::Exact(i + 1), bar.value),
            ],
            c.mix(if bar.lab { 0.25 } else { 0.8 }).filled(),
        )))
        .map_err(draw_error)?;
    if bar.lab {
        chart
            .draw_series(std::iter::once(Text::new(
                "lab",
                (SegmentValue::CenterOf(i), bar.value / 2.0),
                ("sans-serif", 13)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Center)),
            )))
            .map_err(draw_error)?;
    }
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
            ("sans-serif", 13)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Bottom)),
        )))
        .map_err(draw_error)?;
    Ok(())
}

/// One cell of a [`heat_map`]: its column and row, its colour (a [`color`] index, `None` for
/// an empty cell) and up to three lines of text.
#[derive(Debug, Clone, PartialEq)]
pub struct HeatCell {
    pub column: usize,
    pub row: usize,
    pub color: Option<usize>,
    /// Drawn hatched: the best were indistinguishable (a tie).
    pub hatched: bool,
    pub lines: Vec<String>,
}

/// A heat map's cell, in pixels.
const HEAT_CELL_W: i32 = 150;
const HEAT_CELL_H: i32 = 70;
/// Room for the row names on the left and the title above.
const HEAT_LEFT: i32 = 110;
const HEAT_TOP: i32 = 50;
const HEAT_LEGEND_W: i32 = 170;

/// A heat map: columns and rows named on their axes, each cell coloured and labelled, and a
/// legend of the colours. Rows are drawn bottom up (row 0 at the bottom), as a y axis runs.
pub fn heat_map(
    title: &str,
    x_title: &str,
    columns: &[String],
    y_title: &str,
    rows: &[String],
    cells: &[HeatCell],
    legend: &[(String, usize)],
) -> anyhow::Result<String> {
    let width = HEAT_LEFT + HEAT_CELL_W * columns.len() as i32 + HEAT_LEGEND_W;
    let height = (HEAT_TOP + HEAT_CELL_H * rows.len() as i32 + 60)
        .max(HEAT_TOP + 22 * legend.len() as i32 + 20);
    let mut svg = String::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (width as u32, height as u32)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        root.draw(&Text::new(
            title.to_string(),
            (HEAT_LEFT, 18),
            ("sans-serif", 18).into_font(),
        ))
        .map_err(draw_error)?;
        let grid_bottom = HEAT_TOP + HEAT_CELL_H * rows.len() as i32;
        for cell in cells {
            let x0 = HEAT_LEFT + HEAT_CELL_W * cell.column as i32;
            let y0 = grid_bottom - HEAT_CELL_H * (cell.row as i32 + 1);
            draw_heat_cell(&root, cell, (x0, y0))?;
        }
        draw_heat_axes(&root, (x_title, columns), (y_title, rows), grid_bottom)?;
        let legend_x = HEAT_LEFT + HEAT_CELL_W * columns.len() as i32 + 16;
        for (i, (name, c)) in legend.iter().enumerate() {
            let y = HEAT_TOP + 22 * i as i32;
            root.draw(&Rectangle::new(
                [(legend_x, y), (legend_x + 14, y + 14)],
                color(*c).mix(0.55).filled(),
            ))
            .map_err(draw_error)?;
            root.draw(&Text::new(
                name.clone(),
                (legend_x + 20, y + 1),
                ("sans-serif", 13).into_font(),
            ))
            .map_err(draw_error)?;
        }
    }
    Ok(svg)
}

/// Text of `size` centred on its point.
fn centred(root: &Root<'_>, size: i32) -> TextStyle<'static> {
    ("sans-serif", size)
        .into_font()
        .into_text_style(root)
        .pos(Pos::new(HPos::Center, VPos::Center))
}

/// One cell of a heat map at its top-left corner: its fill (hatched for a tie), its border and
/// its lines of text.
fn draw_heat_cell(root: &Root<'_>, cell: &HeatCell, (x0, y0): (i32, i32)) -> anyhow::Result<()> {
    let fill = cell.color.map(color).unwrap_or(RGBColor(238, 238, 238));
    let corners = [(x0, y0), (x0 + HEAT_CELL_W, y0 + HEAT_CELL_H)];
    root.draw(&Rectangle::new(corners, fill.mix(0.55).filled()))
        .map_err(draw_error)?;
    if cell.hatched {
        for k in (0..HEAT_CELL_W + HEAT_CELL_H).step_by(12) {
            let (a, b) = (
                (x0 + k.min(HEAT_CELL_W), y0 + (k - HEAT_CELL_W).max(0)),
                (x0 + (k - HEAT_CELL_H).max(0), y0 + k.min(HEAT_CELL_H)),
            );
            root.draw(&PathElement::new(vec![a, b], WHITE.stroke_width(2)))
                .map_err(draw_error)?;
        }
    }
    root.draw(&Rectangle::new(corners, WHITE.stroke_width(2)))
        .map_err(draw_error)?;
    let n = cell.lines.len() as i32;
    for (i, line) in cell.lines.iter().enumerate() {
        let y = y0 + HEAT_CELL_H / 2 + (2 * i as i32 - (n - 1)) * 9;
        let size = if i == 0 { 15 } else { 12 };
        root.draw(&Text::new(
            line.clone(),
            (x0 + HEAT_CELL_W / 2, y),
            centred(root, size),
        ))
        .map_err(draw_error)?;
    }
    Ok(())
}

/// A heat map's column names and title under the grid, its row names and title beside it.
fn draw_heat_axes(
    root: &Root<'_>,
    (x_title, columns): (&str, &[String]),
    (y_title, rows): (&str, &[String]),
    grid_bottom: i32,
) -> anyhow::Result<()> {
    for (i, name) in columns.iter().enumerate() {
        let x = HEAT_LEFT + HEAT_CELL_W * i as i32 + HEAT_CELL_W / 2;
        root.draw(&Text::new(
            name.clone(),
            (x, grid_bottom + 14),
            centred(root, 13),
        ))
        .map_err(draw_error)?;
    }
    let x_mid = HEAT_LEFT + HEAT_CELL_W * columns.len() as i32 / 2;
    root.draw(&Text::new(
        x_title.to_string(),
        (x_mid, grid_bottom + 38),
        centred(root, 14),
    ))
    .map_err(draw_error)?;
    for (i, name) in rows.iter().enumerate() {
        let y = grid_bottom - HEAT_CELL_H * i as i32 - HEAT_CELL_H / 2;
        root.draw(&Text::new(
            name.clone(),
            (HEAT_LEFT - 40, y),
            centred(root, 13),
        ))
        .map_err(draw_error)?;
    }
    root.draw(&Text::new(
        y_title.to_string(),
        (8, HEAT_TOP - 14),
        ("sans-serif", 14).into_font(),
    ))
    .map_err(draw_error)?;
    Ok(())
}
