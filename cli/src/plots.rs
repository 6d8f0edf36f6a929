//! The report's charts as SVG (plotters). Every series is drawn in its own colour so that,
//! once drawn, its elements can be tagged `data-series` (see [`tag_series`]): a test or a
//! reader can find each variant's line and count its points.
use anyhow::{anyhow, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::paired_rows::RatioRow;

/// Variant colours, in `status.variants` order (at most 6 variants). Axes and grid are grey or
/// black, so no chart element but a series carries these.
const PALETTE: [(u8, u8, u8); 6] = [
    (0x1F, 0x77, 0xB4),
    (0xD6, 0x27, 0x28),
    (0x2C, 0xA0, 0x2C),
    (0xFF, 0x7F, 0x0E),
    (0x94, 0x67, 0xBD),
    (0x8C, 0x56, 0x4B),
];

/// Series `i`'s colour; `nudge` shifts it invisibly so rows sharing a variant stay distinct.
pub fn colour(i: usize, nudge: u8) -> RGBColor {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    RGBColor(r.saturating_sub(nudge), g, b)
}

/// A line chart's series: its contiguous runs of points (a gap where there is no data).
pub struct Line {
    pub name: String,
    pub colour: RGBColor,
    pub segments: Vec<Vec<(f64, f64)>>,
}

const SIZE: (u32, u32) = (960, 420);
const FONT: &str = "sans-serif";

/// Draws into an SVG string and tags each series' elements.
fn render(
    size: (u32, u32),
    tags: &[(RGBColor, String)],
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<()>,
) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
        draw(&root)?;
        root.present().map_err(|e| anyhow!("{e}"))?;
    }
    Ok(crate::tagging::tag_series(&svg, tags))
}

fn plot_err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing: {e}")
}

/// `0%`, `90%`, `99%`, `99.9%`, … for decade `k` of 1/(1−q).
pub fn percentile_label(k: f64) -> String {
    match k.round() as u32 {
        0 => "0%".into(),
        1 => "90%".into(),
        k => format!("99.{}%", "9".repeat(k as usize - 2)).replace(".%", "%"),
    }
}

/// An axis number without a trailing `.0` (plotters' default prints `1000.0`).
fn number_label(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Latency against percentile on the log axis x = log10(1/(1−q)), `decades` wide.
pub fn percentile_chart(lines: &[Line], decades: u32) -> Result<String> {
    let y_max = y_top(lines);
    render(SIZE, &tags(lines), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption("End-to-end latency by percentile", (FONT, 20))
            .margin(14)
            .margin_right(40)
            .x_label_area_size(48)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..f64::from(decades), 0f64..y_max)
            .map_err(plot_err)?;
        // One tick per decade (0%, 90%, 99%, …): plotters would pick "nice" fractions.
        for k in 0..=decades {
            let x = f64::from(k);
            let grid = PathElement::new([(x, 0.0), (x, y_max)], BLACK.mix(0.15));
            chart.draw_series([grid]).map_err(plot_err)?;
            let (px, py) = chart.backend_coord(&(x, 0.0));
            let font =
                TextStyle::from((FONT, 14).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
            let label = Text::new(percentile_label(x), (px, py + 6), font);
            root.draw(&label).map_err(plot_err)?;
        }
        chart
            .configure_mesh()
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 15))
            .disable_x_mesh()
            .x_labels(0)
            .y_label_formatter(&|y| number_label(*y))
            .x_desc("percentile (log scale of 1/(1−q); merged histogram)")
            .y_desc("latency (ms)")
            .draw()
            .map_err(plot_err)?;
        draw_lines(&mut chart, lines)?;
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    })
}

/// A per-second chart (x = second of the measured phase); fault markers would be drawn on
/// the same chart after the lines.
pub fn timeline_chart(title: &str, y_desc: &str, lines: &[Line]) -> Result<String> {
    let x_max = lines
        .iter()
        .flat_map(|l| l.segments.iter().flatten())
        .map(|p| p.0)
        .fold(0.0, f64::max)
        + 1.0;
    let y_max = y_top(lines);
    render(SIZE, &tags(lines), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 20))
            .margin(14)
            .x_label_area_size(48)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..x_max, 0f64..y_max)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 15))
            .x_label_formatter(&|x| number_label(*x))
            .y_label_formatter(&|y| number_label(*y))
            .x_desc("second of the measured phase")
            .y_desc(y_desc)
            .draw()
            .map_err(plot_err)?;
        draw_lines(&mut chart, lines)?;
        legend(&mut chart, SeriesLabelPosition::LowerRight)
    })
}

fn draw_lines(chart: &mut Chart2d, lines: &[Line]) -> Result<()> {
    for l in lines {
        let c = l.colour;
        for (k, seg) in l.segments.iter().enumerate() {
            // A lone point between gaps gets a dot, or it would not show.
            let dot = if seg.len() == 1 { 3 } else { 0 };
            let series = LineSeries::new(seg.iter().copied(), c.stroke_width(2)).point_size(dot);
            let drawn = chart.draw_series(series).map_err(plot_err)?;
            if k == 0 {
                drawn.label(l.name.as_str()).legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 18, y + 5)], c.filled())
                });
            }
        }
    }
    Ok(())
}

fn legend<'a, 'b: 'a>(chart: &mut Chart2d<'a, 'b>, at: SeriesLabelPosition) -> Result<()> {
    chart
        .configure_series_labels()
        .position(at)
        .label_font((FONT, 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()
        .map_err(plot_err)
}

fn y_top(lines: &[Line]) -> f64 {
    let max = lines
        .iter()
        .flat_map(|l| l.segments.iter().flatten())
        .map(|p| p.1)
        .fold(0.0, f64::max);
    if max > 0.0 {
        max * 1.12
    } else {
        1.0
    }
}

fn tags(lines: &[Line]) -> Vec<(RGBColor, String)> {
    lines.iter().map(|l| (l.colour, l.name.clone())).collect()
}

/// Paired ratios: per row, the rounds' ratios (hollow dots), the 95 % interval (a line) and the
/// estimate (a box), against a reference line at 1 (no change).
pub fn ratio_chart(rows: &[RatioRow], colours: &[RGBColor]) -> Result<String> {
    let n = rows.len().max(1) as f64;
    let (lo, hi) = ratio_range(rows);
    let labels: Vec<String> = rows.iter().map(RatioRow::label).collect();
    let tags: Vec<_> = colours
        .iter()
        .copied()
        .zip(labels.iter().cloned())
        .collect();
    let height = 120 + 46 * rows.len() as u32;
    render((SIZE.0, height), &tags, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(
                "Paired ratios against the baseline variant (95 % interval)",
                (FONT, 20),
            )
            .margin(14)
            .x_label_area_size(48)
            .y_label_area_size(170)
            .build_cartesian_2d(lo..hi, -0.5f64..n - 0.5)
            .map_err(plot_err)?;
        // Row names as the y axis's labels, one per row.
        for (i, label) in labels.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(lo, row_y(i, rows.len())));
            let font =
                TextStyle::from((FONT, 14).into_font()).pos(Pos::new(HPos::Right, VPos::Center));
            let text = Text::new(label.clone(), (px - 8, py), font);
            root.draw(&text).map_err(plot_err)?;
        }
        chart
            .configure_mesh()
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 15))
            .disable_y_mesh()
            .y_labels(0)
            .x_label_formatter(&|x| number_label(*x))
            .x_desc("variant ÷ baseline (dots: rounds; box: estimate; bar: 95 % interval)")
            .draw()
            .map_err(plot_err)?;
        let grey = RGBColor(0x80, 0x80, 0x80);
        chart
            .draw_series([PathElement::new(
                [(1.0, -0.5), (1.0, n - 0.5)],
                grey.stroke_width(1),
            )])
            .map_err(plot_err)?;
        for (i, (row, c)) in rows.iter().zip(colours).enumerate() {
            draw_ratio_row(&mut chart, row_y(i, rows.len()), row, *c)?;
        }
        Ok(())
    })
}

/// Row `i` of `n` from the top, in the order of the tables.
fn row_y(i: usize, n: usize) -> f64 {
    (n - 1 - i) as f64
}

type Chart2d<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

fn draw_ratio_row(chart: &mut Chart2d, y: f64, row: &RatioRow, c: RGBColor) -> Result<()> {
    let r = &row.figure.ratio;
    if let (Some(lo), Some(hi)) = (r.ci95_low, r.ci95_high) {
        chart
            .draw_series([PathElement::new([(lo, y), (hi, y)], c.stroke_width(3))])
            .map_err(plot_err)?;
    }
    let dots = row
        .rounds
        .iter()
        .map(|&(_, v)| Circle::new((v, y + 0.18), 5, c.stroke_width(2)));
    chart.draw_series(dots).map_err(plot_err)?;
    let est = EmptyElement::at((r.estimate, y)) + Rectangle::new([(-4, -9), (4, 9)], c.filled());
    chart.draw_series([est]).map_err(plot_err)?;
    Ok(())
}

/// The x range holding every ratio, interval and 1, with a margin.
fn ratio_range(rows: &[RatioRow]) -> (f64, f64) {
    let values = rows.iter().flat_map(|r| {
        let e = &r.figure.ratio;
        let bounds = [Some(e.estimate), e.ci95_low, e.ci95_high];
        bounds
            .into_iter()
            .flatten()
            .chain(r.rounds.iter().map(|p| p.1))
    });
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((1.0f64, 1.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let pad = ((hi - lo) * 0.1).max(0.02);
    ((lo - pad).max(0.0), hi + pad)
}
