//! The report's SVG plots: overhead and memory after each step, and latency per contestant.

use std::io;

use hdrhistogram::Histogram;
use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::histogram::{bucket_lower, log2_buckets};
use super::palette::{Look, ZSMEM_BLUE};
use crate::workloads::untar_rm::RunResult;

/// Colours of the store, load and discard bars.
const OP_COLORS: [RGBColor; 3] = [
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
];

/// Font size of axis labels and legends, as plotters takes it: its SVG
/// writes 0.8 of it, 14.5 px in a 960-pixel plot, 11-12 px on the page
/// where the plot is drawn at 75-80% (13 once made 8 px there).
const LABEL_FONT: u32 = 18;

/// Font size of axis descriptions.
const DESC_FONT: u32 = 19;

/// Size of the per-step plots.
const STEP_PLOT: (u32, u32) = (960, 540);

/// Size of a latency plot.
const LATENCY_PLOT: (u32, u32) = (960, 420);

pub(super) fn step_label(round: usize, label: &str) -> String {
    format!("r{round}:{label}")
}

pub(super) fn mib(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

/// A `[lo, hi)` range with `hi > lo`, both finite, with some headroom.
fn guarded_range(values: impl Iterator<Item = f64>, include_zero: bool) -> (f64, f64) {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    if include_zero {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    let span = hi - lo;
    if span <= f64::EPSILON * hi.abs().max(1.0) {
        if lo == 0.0 {
            return (0.0, 1.0);
        }
        return (lo - 0.5, hi + 0.5);
    }
    let pad = span * 0.06;
    (if lo < 0.0 { lo - pad } else { lo }, hi + pad)
}

/// An f64 axis whose ticks (and vertical mesh lines) sit exactly at the
/// given points: step indices or log2 bucket keys. plotters' own
/// `with_key_points` lacks a value formatter for f64, so it cannot be
/// given to `configure_mesh`.
struct KeyAxis {
    inner: RangedCoordf64,
    keys: Vec<f64>,
}

impl KeyAxis {
    fn new(lo: f64, hi: f64, keys: Vec<f64>) -> Self {
        KeyAxis {
            inner: (lo..hi).into(),
            keys,
        }
    }
}

impl Ranged for KeyAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if self.keys.is_empty() {
            return self.inner.key_points(hint);
        }
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.keys.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }
}

/// `v` with as many decimals as an axis spanning `span` needs.
fn axis_number(v: f64, span: f64) -> String {
    let decimals = if span >= 20.0 {
        0
    } else if span >= 2.0 {
        1
    } else if span >= 0.2 {
        2
    } else {
        3
    };
    format!("{v:.decimals$}")
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type DrawResult = Result<(), DrawingAreaErrorKind<io::Error>>;

/// Draw into an SVG of `size` in memory.
fn render(size: (u32, u32), draw: impl FnOnce(&Area) -> DrawResult) -> io::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(io::Error::other)?;
        draw(&root).map_err(io::Error::other)?;
        root.present().map_err(io::Error::other)?;
    }
    Ok(svg)
}

/// The step labels of the x axis: those of the run with the most steps.
pub(super) fn x_labels(runs: &[RunResult]) -> Vec<String> {
    runs.iter()
        .max_by_key(|r| r.steps.len())
        .map(|r| {
            r.steps
                .iter()
                .map(|s| step_label(s.round, &s.label))
                .collect()
        })
        .unwrap_or_default()
}

/// How a legend entry is marked.
#[derive(Clone, Copy)]
enum Mark {
    /// A solid line.
    Line,
    /// A dashed line.
    Dashed,
    /// A filled square.
    Bar,
    /// No mark: a note in the legend's place.
    Note,
}

/// One entry of a plot's legend.
struct LegendEntry {
    label: String,
    color: RGBColor,
    mark: Mark,
}

/// Longest legend label drawn; longer ones are cut with `…`.
const LEGEND_CHARS: usize = 36;

fn legend_label(s: &str) -> String {
    if s.chars().count() <= LEGEND_CHARS {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(LEGEND_CHARS - 1).collect();
        t.push('…');
        t
    }
}

/// Draw `caption` over `root` and split the rest into the plot's area and,
/// on the right, a strip for the legend wide enough for its labels (so the
/// legend never hides data).
fn split_legend<'a>(
    root: &Area<'a>,
    caption: &str,
    legend: &[LegendEntry],
) -> Result<(Area<'a>, Area<'a>), DrawingAreaErrorKind<io::Error>> {
    let body = root.titled(caption, ("sans-serif", 22))?;
    // Notes start where the marks do, 32 pixels left of the labels.
    let longest = legend
        .iter()
        .map(|e| match e.mark {
            Mark::Note => e.label.chars().count().saturating_sub(4),
            _ => legend_label(&e.label).chars().count(),
        })
        .max()
        .unwrap_or(0) as i32;
    let width = body.dim_in_pixel().0 as i32;
    let strip = if legend.is_empty() {
        0
    } else {
        (longest * 9 + 50).clamp(100, width / 3)
    };
    Ok(body.split_horizontally(width - strip))
}

/// A grey note centred at `at` (a plot with nothing to draw says why).
fn draw_note(root: &Area, text: &str, at: (i32, i32)) -> DrawResult {
    root.draw(&Text::new(
        text,
        at,
        TextStyle::from(("sans-serif", 18).into_font())
            .color(&RGBColor(120, 120, 120))
            .pos(Pos::new(HPos::Center, VPos::Center)),
    ))?;
    Ok(())
}

/// Draw the legend down the strip made by [`split_legend`].
fn draw_legend(area: &Area, legend: &[LegendEntry]) -> DrawResult {
    let font = TextStyle::from(("sans-serif", LABEL_FONT).into_font())
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, e) in legend.iter().enumerate() {
        let (x, y) = (4, 24 + 24 * i as i32);
        let line = e.color.stroke_width(2);
        match e.mark {
            Mark::Line => {
                area.draw(&PathElement::new(vec![(x, y), (x + 24, y)], line))?;
                area.draw(&Circle::new((x + 12, y), 3, e.color.filled()))?;
            }
            Mark::Dashed => {
                area.draw(&PathElement::new(vec![(x, y), (x + 9, y)], line))?;
                area.draw(&PathElement::new(vec![(x + 15, y), (x + 24, y)], line))?;
            }
            Mark::Bar => {
                area.draw(&Rectangle::new(
                    [(x + 6, y - 6), (x + 18, y + 6)],
                    e.color.filled(),
                ))?;
            }
            Mark::Note => {}
        }
        let (text, at, color) = match e.mark {
            Mark::Note => (e.label.clone(), x, e.color),
            _ => (legend_label(&e.label), x + 32, RGBColor(34, 34, 34)),
        };
        area.draw(&Text::new(text, (at, y), font.clone().color(&color)))?;
    }
    Ok(())
}

/// One line of a step plot.
struct StepLine {
    /// Legend entry.
    label: String,
    /// Colour and dashes.
    look: Look,
    /// `(step index, value)`, `None` where the step has no value (the line
    /// is broken there).
    points: Vec<Option<f64>>,
}

/// The y axis of a step plot.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Scale {
    /// Linear, from 0 or below.
    Linear,
    /// Logarithmic: for figures spanning orders of magnitude, where a
    /// linear axis would flatten the small ones onto it. Figures at or
    /// below 0 are not drawn.
    Log,
}

/// Ticks of a log axis over `[lo, hi]` (log10 units): 1, 2 and 5 times
/// the powers of ten in it, as log10.
fn log_keys(lo: f64, hi: f64) -> Vec<f64> {
    let mut keys = Vec::new();
    let (first, last) = (lo.floor() as i32, hi.ceil() as i32);
    for e in first..=last {
        for m in [1.0, 2.0, 5.0] {
            let k = (m * 10f64.powi(e)).log10();
            if (lo..=hi).contains(&k) {
                keys.push(k);
            }
        }
    }
    keys
}

/// A figure for a log axis's tick: 0.05, 0.1, 2, 500.
fn log_label(v: f64) -> String {
    let x = 10f64.powf(v);
    if x >= 1.0 {
        format!("{x:.0}")
    } else {
        let s = format!("{x:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The steps at which some line has a point: the others take no room on
/// the x axis (a run's first and last steps often hold no data).
fn steps_with_points(lines: &[StepLine], n: usize) -> Vec<usize> {
    let keep: Vec<usize> = (0..n)
        .filter(|&i| {
            lines.iter().any(|l| {
                l.points
                    .get(i)
                    .copied()
                    .flatten()
                    .is_some_and(f64::is_finite)
            })
        })
        .collect();
    if keep.is_empty() {
        (0..n).collect()
    } else {
        keep
    }
}

/// A plot of values after each step: x = step index labelled with
/// `labels` (rotated), one line per entry of `lines`, on a linear or a log
/// y axis. Steps where no line has a point are left off the x axis.
fn step_plot(
    caption: &str,
    y_desc: &str,
    labels: &[String],
    lines: &[StepLine],
    notes: &[String],
    empty_note: &str,
    scale: Scale,
) -> io::Result<String> {
    // On a log axis, the log10 of the positive figures.
    let lines: Vec<StepLine> = lines
        .iter()
        .map(|l| StepLine {
            label: l.label.clone(),
            look: l.look,
            points: l
                .points
                .iter()
                .map(|p| match scale {
                    Scale::Linear => *p,
                    Scale::Log => p.filter(|v| *v > 0.0).map(f64::log10),
                })
                .collect(),
        })
        .collect();
    let keep = steps_with_points(&lines, labels.len());
    let labels: Vec<String> = keep.iter().map(|&i| labels[i].clone()).collect();
    let lines: Vec<StepLine> = lines
        .into_iter()
        .map(|l| StepLine {
            points: keep
                .iter()
                .map(|&i| l.points.get(i).copied().flatten())
                .collect(),
            ..l
        })
        .collect();
    let n = labels.len().max(1);
    let values = lines
        .iter()
        .flat_map(|l| l.points.iter().flatten().copied());
    let (y_lo, y_hi, y_keys) = match scale {
        Scale::Linear => {
            let (lo, hi) = guarded_range(values, true);
            (lo, hi, Vec::new())
        }
        Scale::Log => {
            let (lo, hi) = guarded_range(values, false);
            let (lo, hi) = (lo - 0.1, hi + 0.1);
            (lo, hi, log_keys(lo, hi))
        }
    };
    let any_point = lines.iter().any(|l| l.points.iter().any(Option::is_some));
    // Rotated labels of about 8.5 pixels a character.
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    let label_area = (longest as u32 * 17 / 2 + 24).clamp(40, 200);
    let legend: Vec<LegendEntry> = lines
        .iter()
        .filter(|l| l.points.iter().any(Option::is_some))
        .map(|l| LegendEntry {
            label: l.label.clone(),
            color: l.look.color,
            mark: match l.look.dash {
                None => Mark::Line,
                Some(_) => Mark::Dashed,
            },
        })
        .chain(notes.iter().map(|n| LegendEntry {
            label: n.clone(),
            color: RGBColor(120, 120, 120),
            mark: Mark::Note,
        }))
        .collect();
    render(STEP_PLOT, |root| {
        let (plot, key) = split_legend(root, caption, &legend)?;
        let mut chart = ChartBuilder::on(&plot)
            .margin(12)
            .x_label_area_size(label_area)
            .y_label_area_size(70)
            .build_cartesian_2d(
                KeyAxis::new(-0.5, n as f64 - 0.5, (0..n).map(|i| i as f64).collect()),
                KeyAxis::new(y_lo, y_hi, y_keys),
            )?;
        chart
            .configure_mesh()
            .x_label_formatter(&|_| String::new())
            .y_desc(y_desc)
            .y_label_formatter(&|v| match scale {
                Scale::Linear => axis_number(*v, y_hi - y_lo),
                Scale::Log => log_label(*v),
            })
            .label_style(("sans-serif", LABEL_FONT))
            .axis_desc_style(("sans-serif", DESC_FONT))
            .max_light_lines(1)
            .light_line_style(RGBColor(240, 240, 240))
            .bold_line_style(RGBColor(210, 210, 210))
            .draw()?;
        // Zero line where the range crosses it.
        if scale == Scale::Linear && y_lo < 0.0 && y_hi > 0.0 {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(-0.5, 0.0), (n as f64 - 0.5, 0.0)],
                BLACK.mix(0.4),
            )))?;
        }
        // zsmem's line last, on top of any it coincides with.
        let order = lines
            .iter()
            .filter(|l| l.look.color != ZSMEM_BLUE)
            .chain(lines.iter().filter(|l| l.look.color == ZSMEM_BLUE));
        for line in order.filter(|l| l.points.iter().any(Option::is_some)) {
            let color = line.look.color;
            // zsmem's line stands out a little.
            let width = if color == ZSMEM_BLUE { 3 } else { 2 };
            let mut segments: Vec<Vec<(f64, f64)>> = Vec::new();
            let mut current: Vec<(f64, f64)> = Vec::new();
            for (i, p) in line.points.iter().enumerate() {
                match p {
                    Some(v) if v.is_finite() => current.push((i as f64, *v)),
                    _ => {
                        if !current.is_empty() {
                            segments.push(std::mem::take(&mut current));
                        }
                    }
                }
            }
            if !current.is_empty() {
                segments.push(current);
            }
            for seg in &segments {
                let style = ShapeStyle::from(color).stroke_width(width);
                match line.look.dash {
                    Some((dash, gap)) => {
                        chart.draw_series(DashedLineSeries::new(
                            seg.iter().copied(),
                            dash,
                            gap,
                            style,
                        ))?;
                    }
                    None => {
                        chart.draw_series(LineSeries::new(seg.iter().copied(), style))?;
                        chart.draw_series(
                            seg.iter()
                                .map(|&p| Circle::new(p, 3, ShapeStyle::from(color).filled())),
                        )?;
                    }
                }
            }
        }
        draw_legend(&key, &legend)?;
        // Step labels, rotated, below the axis; thinned out where they
        // would overlap.
        let (x0, _) = chart.backend_coord(&(0.0, y_lo));
        let (x1, _) = chart.backend_coord(&(1.0, y_lo));
        let spacing = (x1 - x0).max(1);
        let stride = (LABEL_FONT as i32 + 2 + spacing - 1) / spacing;
        let style = TextStyle::from(("sans-serif", LABEL_FONT).into_font())
            .transform(FontTransform::Rotate270)
            .pos(Pos::new(HPos::Right, VPos::Center));
        for (i, label) in labels.iter().enumerate() {
            if i as i32 % stride != 0 {
                continue;
            }
            let (x, y) = chart.backend_coord(&(i as f64, y_lo));
            root.draw(&Text::new(label.as_str(), (x, y + 8), style.clone()))?;
        }
        if !any_point {
            let (cx, cy) = chart.backend_coord(&((n as f64 - 1.0) / 2.0, (y_lo + y_hi) / 2.0));
            draw_note(root, empty_note, (cx, cy))?;
        }
        Ok(())
    })
}

/// The runs too far above the others to share their axis: those whose
/// highest overhead ratio is over 100% (the pool holds more than twice the
/// compressed bytes; the malloc baselines hold 6-7 times on the full
/// corpus) and over 4 times the median of the runs' highest ratios (on a
/// small corpus every contestant's last steps hold little data and reach
/// 100%, and the kernel must stay on the plot). Their figures are written
/// in the plots' legends instead.
pub(super) fn off_scale(runs: &[RunResult]) -> Vec<bool> {
    let max: Vec<f64> = runs.iter().map(|r| r.overhead_ratios().0).collect();
    let mut sorted: Vec<f64> = max.iter().copied().filter(|m| m.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
    max.iter()
        .map(|&m| m > OFF_SCALE_RATIO && m > OFF_SCALE_MEDIANS * median)
        .collect()
}

/// The overhead ratio above which a run may be drawn off the plots.
const OFF_SCALE_RATIO: f64 = 1.0;

/// How many times the median's overhead ratio a run must reach to be
/// drawn off the plots.
const OFF_SCALE_MEDIANS: f64 = 4.0;

/// Legend notes for the runs left off a plot, with `what` of each.
fn off_scale_notes(
    runs: &[RunResult],
    off: &[bool],
    what: impl Fn(&RunResult) -> String,
) -> Vec<String> {
    let mut notes: Vec<String> = runs
        .iter()
        .zip(off)
        .filter(|(_, o)| **o)
        .map(|(r, _)| format!("{}: {}", legend_label(&r.contestant), what(r)))
        .collect();
    if !notes.is_empty() {
        notes.insert(0, "Not drawn (off the scale):".to_string());
    }
    notes
}

/// One line per run not left off the scale (`off`), its points `points(run)`.
fn on_scale_lines(
    runs: &[RunResult],
    looks: &[Look],
    off: &[bool],
    points: impl Fn(&RunResult) -> Vec<Option<f64>>,
) -> Vec<StepLine> {
    runs.iter()
        .zip(looks)
        .zip(off)
        .filter(|(_, o)| !**o)
        .map(|((r, look), _)| StepLine {
            label: r.contestant.clone(),
            look: *look,
            points: points(r),
        })
        .collect()
}

/// Plot 1: overhead ratio in % after each step, steps without compressed
/// data left out, the runs [`off_scale`] left out and noted.
pub(super) fn overhead_plot(
    runs: &[RunResult],
    looks: &[Look],
    labels: &[String],
) -> io::Result<String> {
    let off = off_scale(runs);
    let lines = on_scale_lines(runs, looks, &off, |r| {
        r.steps
            .iter()
            .map(|s| (s.figures.compr > 0).then(|| s.figures.overhead_ratio() * 100.0))
            .collect()
    });
    let notes = off_scale_notes(runs, &off, |r| {
        format!("max {:.0}%", r.overhead_ratios().0 * 100.0)
    });
    let scale = overhead_scale(runs, &off);
    step_plot(
        "Overhead (pool - compr) / compr after each step",
        match scale {
            Scale::Linear => "overhead (%)",
            Scale::Log => "overhead (%, log scale)",
        },
        labels,
        &lines,
        &notes,
        "no step with compressed data",
        scale,
    )
}

/// How many times the smallest contestant's highest overhead the largest's
/// may be on a linear axis; past that the small ones would lie flat on the
/// axis (mimalloc's 53% beside zsmem's 0.4%), and the axis is logarithmic.
const LOG_SPAN: f64 = 30.0;

/// The overhead plot's scale: log when the drawn runs' highest overheads
/// span more than [`LOG_SPAN`] times.
pub(super) fn overhead_scale(runs: &[RunResult], off: &[bool]) -> Scale {
    let maxima: Vec<f64> = runs
        .iter()
        .zip(off)
        .filter(|(_, o)| !**o)
        .map(|(r, _)| r.overhead_ratios().0)
        .filter(|m| m.is_finite() && *m > 0.0)
        .collect();
    let lo = maxima.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = maxima.iter().copied().fold(0.0, f64::max);
    if maxima.len() > 1 && hi > LOG_SPAN * lo {
        Scale::Log
    } else {
        Scale::Linear
    }
}

/// Plot 2: all-in memory in MiB after each step, one line for each run
/// `shown` (zsmem, the references and the nearest rival: seven lines of
/// nearly the same figures hid one another; the relative plot has them
/// all), the compressed bytes of the first run drawn dashed grey, the runs
/// [`off_scale`] left out and noted.
pub(super) fn memory_plot(
    runs: &[RunResult],
    looks: &[Look],
    labels: &[String],
    shown: &[bool],
) -> io::Result<String> {
    let off: Vec<bool> = off_scale(runs)
        .into_iter()
        .zip(shown)
        .map(|(o, s)| o || !s)
        .collect();
    let mut lines = on_scale_lines(runs, looks, &off, |r| {
        r.steps
            .iter()
            .map(|s| Some(mib(s.figures.all_in)))
            .collect()
    });
    // The contestants store the same pages with the same codec: their
    // compressed bytes differ by a few in a million, one line shows them.
    if let Some(first) = runs.first() {
        lines.push(StepLine {
            label: "compressed bytes".into(),
            look: Look {
                color: RGBColor(150, 150, 150),
                dash: Some((4, 4)),
            },
            points: first
                .steps
                .iter()
                .map(|s| Some(mib(s.figures.compr)))
                .collect(),
        });
    }
    let too_high: Vec<bool> = off_scale(runs)
        .into_iter()
        .zip(shown)
        .map(|(o, s)| o && *s)
        .collect();
    let notes = off_scale_notes(runs, &too_high, |r| {
        format!("peak {:.1} MiB", mib(r.peak_all_in()))
    });
    step_plot(
        "All-in memory after each step",
        "MiB",
        labels,
        &lines,
        &notes,
        "no steps",
        Scale::Linear,
    )
}

/// Plot 2b: each contestant's all-in memory relative to the reference's
/// (the kernel's zram, else its simulation, else the nearest rival: see
/// `verdict::references`) after each step, in %: the verdict step by step.
/// Steps where either holds no data are left out, and the runs
/// [`off_scale`] left out and noted.
pub(super) fn relative_plot(
    runs: &[RunResult],
    looks: &[Look],
    labels: &[String],
    reference: usize,
) -> io::Result<String> {
    let off = off_scale(runs);
    let base = &runs[reference];
    let relative = |r: &RunResult| -> Vec<Option<f64>> {
        r.steps
            .iter()
            .zip(&base.steps)
            .map(|(s, b)| {
                let same = s.round == b.round && s.label == b.label;
                let data = |x: &crate::workloads::untar_rm::Step| {
                    x.figures.compr > 0 && x.label != "compact" && x.figures.all_in > 0
                };
                (same && data(s) && data(b))
                    .then(|| (s.figures.all_in as f64 / b.figures.all_in as f64 - 1.0) * 100.0)
            })
            .collect()
    };
    let lines = on_scale_lines(runs, looks, &off, relative);
    let notes = off_scale_notes(runs, &off, |r| {
        let peak = relative(r)
            .into_iter()
            .flatten()
            .fold(f64::NEG_INFINITY, f64::max);
        format!("up to {peak:+.0}%")
    });
    step_plot(
        &format!(
            "All-in memory relative to {} after each step",
            legend_label(&base.contestant)
        ),
        "% (below 0: less memory)",
        labels,
        &lines,
        &notes,
        "no step with data",
        Scale::Linear,
    )
}

/// Plot 3: a contestant's store/load/discard latencies, log2 buckets as
/// grouped bars, in % of each operation's samples.
pub(super) fn latency_plot(r: &RunResult) -> io::Result<String> {
    let ops: [(&str, &Histogram<u64>); 3] = [
        ("store", &r.latency.store),
        ("load", &r.latency.load),
        ("discard", &r.latency.discard),
    ];
    let buckets: Vec<Vec<(u32, u64)>> = ops.iter().map(|(_, h)| log2_buckets(h)).collect();
    let keys = buckets.iter().flatten().map(|&(k, _)| k);
    let (mut k_lo, mut k_hi) = match (keys.clone().min(), keys.max()) {
        (Some(a), Some(b)) => (a, b),
        _ => (10, 14),
    };
    // At least six buckets wide, so that a lone bar is not a wall.
    while k_hi - k_lo < 5 {
        k_lo = k_lo.saturating_sub(1);
        k_hi += 1;
    }
    let shares: Vec<Vec<(u32, f64)>> = ops
        .iter()
        .zip(&buckets)
        .map(|((_, h), b)| {
            let total = h.len().max(1) as f64;
            b.iter()
                .map(|&(k, c)| (k, 100.0 * c as f64 / total))
                .collect()
        })
        .collect();
    let (_, y_hi) = guarded_range(shares.iter().flatten().map(|&(_, s)| s), true);
    let n_keys = (k_hi - k_lo + 1) as usize;
    let stride = n_keys.div_ceil(24).max(1);
    let key_points: Vec<f64> = (k_lo..=k_hi)
        .filter(|k| ((k - k_lo) as usize).is_multiple_of(stride))
        .map(f64::from)
        .collect();
    let caption = format!("{}: latency (ns, log2 buckets)", r.contestant);
    let empty = buckets.iter().all(Vec::is_empty);
    let legend: Vec<LegendEntry> = ops
        .iter()
        .zip(OP_COLORS)
        .map(|((name, h), color)| LegendEntry {
            label: format!("{name} (n={})", h.len()),
            color,
            mark: Mark::Bar,
        })
        .collect();
    render(LATENCY_PLOT, |root| {
        let (plot, key) = split_legend(root, &caption, &legend)?;
        let mut chart = ChartBuilder::on(&plot)
            .margin(12)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d(
                KeyAxis::new(f64::from(k_lo) - 0.5, f64::from(k_hi) + 0.5, key_points),
                0.0..y_hi,
            )?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_label_formatter(&|v| bucket_lower(v.round().max(0.0) as u32))
            .x_desc("bucket lower bound (ns, 1K = 1024)")
            .y_desc("% of the operation's samples")
            .y_label_formatter(&|v| axis_number(*v, y_hi))
            .label_style(("sans-serif", LABEL_FONT))
            .axis_desc_style(("sans-serif", DESC_FONT))
            .max_light_lines(1)
            .light_line_style(RGBColor(240, 240, 240))
            .bold_line_style(RGBColor(210, 210, 210))
            .draw()?;
        let group = 0.8;
        let bar = group / ops.len() as f64;
        for (j, share) in shares.iter().enumerate() {
            let color = OP_COLORS[j];
            let offset = -group / 2.0 + j as f64 * bar;
            chart.draw_series(share.iter().map(|&(k, s)| {
                let x = f64::from(k) + offset;
                // A bucket with samples stays visible however few it has.
                let s = s.max(y_hi * 0.006);
                Rectangle::new([(x, 0.0), (x + bar * 0.92, s)], color.filled())
            }))?;
        }
        draw_legend(&key, &legend)?;
        if empty {
            let (cx, cy) =
                chart.backend_coord(&((f64::from(k_lo) + f64::from(k_hi)) / 2.0, y_hi / 2.0));
            draw_note(root, "no samples", (cx, cy))?;
        }
        Ok(())
    })
}

/// Size of the latency comparison.
const COMPARISON_PLOT: (u32, u32) = (960, 500);

/// Plot 4: every contestant's store, load and discard latency in one plot:
/// a bar up to the p50 and a whisker from there to the p99, on a log axis
/// of µs.
pub(super) fn latency_comparison(runs: &[RunResult]) -> io::Result<String> {
    let ops = ["store", "load", "discard"];
    // (p50, p99) in µs per run and operation; None without samples.
    let figures: Vec<[Option<(f64, f64)>; 3]> = runs
        .iter()
        .map(|r| {
            [&r.latency.store, &r.latency.load, &r.latency.discard].map(|h| {
                (!h.is_empty()).then(|| {
                    (
                        h.value_at_quantile(0.5).max(1) as f64 / 1000.0,
                        h.value_at_quantile(0.99).max(1) as f64 / 1000.0,
                    )
                })
            })
        })
        .collect();
    let all = figures
        .iter()
        .flatten()
        .flatten()
        .flat_map(|&(a, b)| [a, b]);
    let lo = all.clone().fold(f64::INFINITY, f64::min);
    let hi = all.fold(f64::NEG_INFINITY, f64::max);
    let (y_lo, y_hi) = if lo.is_finite() && hi.is_finite() {
        // Whole powers of ten around the figures.
        (
            10f64.powf(lo.log10().floor()),
            10f64.powf((hi * 1.01).log10().ceil()),
        )
    } else {
        (0.1, 10.0)
    };
    let n = runs.len().max(1);
    let labels: Vec<String> = runs.iter().map(|r| legend_label(&r.contestant)).collect();
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    let label_area = (longest as u32 * 9 + 24).clamp(40, 240);
    let legend: Vec<LegendEntry> = ops
        .iter()
        .zip(OP_COLORS)
        .map(|(name, color)| LegendEntry {
            label: format!("{name} p50"),
            color,
            mark: Mark::Bar,
        })
        .chain(std::iter::once(LegendEntry {
            label: "whisker: to the p99".into(),
            color: RGBColor(90, 90, 90),
            mark: Mark::Note,
        }))
        .collect();
    let empty = figures.iter().flatten().all(Option::is_none);
    render(COMPARISON_PLOT, |root| {
        let (plot, key) = split_legend(
            root,
            "Latency per contestant: p50 (bar) and p99 (whisker)",
            &legend,
        )?;
        let mut chart = ChartBuilder::on(&plot)
            .margin(12)
            .x_label_area_size(label_area)
            .y_label_area_size(70)
            .build_cartesian_2d(
                KeyAxis::new(-0.5, n as f64 - 0.5, (0..n).map(|i| i as f64).collect()),
                (y_lo..y_hi).log_scale(),
            )?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_label_formatter(&|_| String::new())
            .y_desc("µs (log scale)")
            .label_style(("sans-serif", LABEL_FONT))
            .axis_desc_style(("sans-serif", DESC_FONT))
            .y_label_formatter(&|v| {
                if *v >= 1.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v:.3}").trim_end_matches('0').to_string()
                }
            })
            .light_line_style(RGBColor(240, 240, 240))
            .bold_line_style(RGBColor(210, 210, 210))
            .draw()?;
        let group = 0.75;
        let bar = group / ops.len() as f64;
        for (i, per_op) in figures.iter().enumerate() {
            for (j, f) in per_op.iter().enumerate() {
                let Some((p50, p99)) = *f else { continue };
                let color = OP_COLORS[j];
                let x = i as f64 - group / 2.0 + j as f64 * bar;
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(x, y_lo), (x + bar * 0.9, p50)],
                    color.filled(),
                )))?;
                let mid = x + bar * 0.45;
                let whisker = RGBColor(60, 60, 60).stroke_width(1);
                chart.draw_series([
                    PathElement::new(vec![(mid, p50), (mid, p99)], whisker),
                    PathElement::new(vec![(x + bar * 0.2, p99), (x + bar * 0.7, p99)], whisker),
                ])?;
            }
        }
        draw_legend(&key, &legend)?;
        let style = TextStyle::from(("sans-serif", LABEL_FONT).into_font())
            .transform(FontTransform::Rotate270)
            .pos(Pos::new(HPos::Right, VPos::Center));
        for (i, label) in labels.iter().enumerate() {
            let (x, y) = chart.backend_coord(&(i as f64, y_lo));
            root.draw(&Text::new(label.as_str(), (x, y + 8), style.clone()))?;
        }
        if empty {
            let (cx, cy) = chart.backend_coord(&((n as f64 - 1.0) / 2.0, (y_lo * y_hi).sqrt()));
            draw_note(root, "no samples", (cx, cy))?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_never_empty() {
        assert_eq!(guarded_range(std::iter::empty(), true), (0.0, 1.0));
        assert_eq!(guarded_range([0.0, 0.0].into_iter(), true), (0.0, 1.0));
        let (lo, hi) = guarded_range([5.0].into_iter(), false);
        assert!(hi > lo && lo <= 5.0 && hi >= 5.0);
        let (lo, hi) = guarded_range([f64::NAN, -3.0, 2.0].into_iter(), true);
        assert!(lo < -3.0 && hi > 2.0);
    }

    #[test]
    fn log_ticks_are_one_two_five() {
        let keys: Vec<String> = log_keys(-1.5, 1.8).into_iter().map(log_label).collect();
        assert_eq!(
            keys,
            ["0.05", "0.1", "0.2", "0.5", "1", "2", "5", "10", "20", "50"]
        );
    }

    #[test]
    fn steps_without_points_take_no_room() {
        let line = |points: Vec<Option<f64>>| StepLine {
            label: String::new(),
            look: Look {
                color: ZSMEM_BLUE,
                dash: None,
            },
            points,
        };
        let lines = [
            line(vec![None, Some(1.0), None, Some(2.0), None]),
            line(vec![None, None, Some(f64::NAN), Some(3.0)]),
        ];
        assert_eq!(steps_with_points(&lines, 5), vec![1, 3]);
        assert_eq!(steps_with_points(&[], 3), vec![0, 1, 2]);
    }
}
