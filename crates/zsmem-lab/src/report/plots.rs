//! A self-contained HTML report of a side-by-side run (`zsmem compare`).
//!
//! [`write_report`] turns the [`RunResult`]s of the contestants into one
//! directory:
//!
//! | file | content |
//! |---|---|
//! | `index.html` | the whole report, one page with no external CSS, JS or fonts; the plots below are inlined as `<svg>` elements |
//! | `overhead.svg` | overhead ratio `(pool - compr) / compr` after each step, one line per contestant |
//! | `memory.svg` | pool memory after each step per contestant, compressed bytes dashed |
//! | `latency-<contestant>.svg` | store/load/discard latency, log2 buckets, grouped bars |
//!
//! The page holds a header (title, source, workload, command, contestants
//! skipped and why), the summary table `zsmem compare` prints, the plots,
//! and per contestant its step table (with zsmem's split of the overhead
//! into rounding, partial, tail and metadata where the contestant can tell)
//! and its latency histograms in the bpftrace log2 style of reference 001,
//! made by [`log2_histogram`].
//!
//! Plots are drawn with plotters' SVG backend into memory. Their ranges are
//! guarded so that one contestant, one step, empty histograms or all-zero
//! figures draw an (empty) plot rather than panic.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;
use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::workloads::untar_rm::RunResult;

/// Units of the bucket bounds, powers of 1024 as bpftrace prints them.
const UNITS: [&str; 7] = ["", "K", "M", "G", "T", "P", "E"];

/// Line colours of the contestants, in the order of the runs.
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// Colours of the store, load and discard bars.
const OP_COLORS: [RGBColor; 3] = [
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
];

/// Width of the bars of the `<pre>` histograms in the report.
const PRE_BAR_WIDTH: usize = 52;

/// Size of the per-step plots.
const STEP_PLOT: (u32, u32) = (960, 540);

/// Size of a latency plot.
const LATENCY_PLOT: (u32, u32) = (960, 420);

/// Describes a report: everything on the page that is not in the runs.
#[derive(Clone, Debug, Default)]
pub struct ReportContext {
    /// Page title, e.g. `zsmem compare: untar/rm`.
    pub title: String,
    /// Where the pages came from (a path or the embedded corpus).
    pub source: String,
    /// The workload and its parameters.
    pub workload: String,
    /// The command line that produced the runs.
    pub generated_by: String,
    /// Contestants that did not run: `(name, reason)`.
    pub skipped: Vec<(String, String)>,
}

/// The power-of-two buckets of `h` that hold counts, as `(key, count)`
/// sorted by key: key 0 holds the value 0, key `k >= 1` the values in
/// `[2^(k-1), 2^k)`.
fn log2_buckets(h: &Histogram<u64>) -> Vec<(u32, u64)> {
    let mut counts = [0u64; 65];
    for v in h.iter_recorded() {
        let value = h.lowest_equivalent(v.value_iterated_to());
        let key = if value == 0 {
            0
        } else {
            64 - value.leading_zeros()
        };
        counts[key as usize] += v.count_at_value();
    }
    counts
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0)
        .map(|(k, c)| (k as u32, *c))
        .collect()
}

/// `2^exp` with a K/M/G... unit (1K = 1024), as bpftrace labels buckets.
fn pow2_label(exp: u32) -> String {
    format!("{}{}", 1u64 << (exp % 10), UNITS[(exp / 10) as usize])
}

/// The bpftrace label of bucket `key` (see [`log2_buckets`]).
fn bucket_label(key: u32) -> String {
    match key {
        0 => "[0]".to_string(),
        1 => "[1]".to_string(),
        k => format!("[{}, {})", pow2_label(k - 1), pow2_label(k)),
    }
}

/// The lower bound of bucket `key`, for plot axes.
fn bucket_lower(key: u32) -> String {
    match key {
        0 => "0".to_string(),
        k => pow2_label(k - 1),
    }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// A histogram of nanoseconds in the style of bpftrace's `hist()` (as in
/// reference 001): one line per power-of-two bucket that holds counts,
///
/// ```text
/// [512, 1K)     12345 |@@@@@                    |
/// ```
///
/// bounds with K/M/G units (powers of 1024), bars `width` characters wide
/// scaled to the largest bucket, then a line with the sample count and the
/// p50, p90, p99, p99.9 and max in µs with two decimals. An empty histogram
/// gives the single line `(no samples)`.
pub fn log2_histogram(h: &Histogram<u64>, width: usize) -> String {
    let buckets = log2_buckets(h);
    if buckets.is_empty() {
        return "(no samples)\n".to_string();
    }
    let labels: Vec<String> = buckets.iter().map(|&(k, _)| bucket_label(k)).collect();
    let label_width = labels.iter().map(String::len).max().unwrap_or(0);
    let count_width = buckets
        .iter()
        .map(|&(_, c)| c.to_string().len())
        .max()
        .unwrap_or(1);
    let max = buckets.iter().map(|&(_, c)| c).max().unwrap_or(1).max(1);
    let mut out = String::new();
    for (label, &(_, count)) in labels.iter().zip(&buckets) {
        let n = (u128::from(count) * width as u128 / u128::from(max)) as usize;
        let bar = "@".repeat(n);
        let _ = writeln!(
            out,
            "{label:<label_width$} {count:>count_width$} |{bar:<width$}|"
        );
    }
    let _ = writeln!(
        out,
        "n {}  p50 {:.2} µs  p90 {:.2} µs  p99 {:.2} µs  p99.9 {:.2} µs  max {:.2} µs",
        h.len(),
        us(h.value_at_quantile(0.5)),
        us(h.value_at_quantile(0.9)),
        us(h.value_at_quantile(0.99)),
        us(h.value_at_quantile(0.999)),
        us(h.max()),
    );
    out
}

/// `s` with `&`, `<`, `>`, `"` and `'` escaped for HTML text and attributes.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A file-name- and id-safe form of a contestant name.
fn slug(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() { "_".to_string() } else { s }
}

/// Slugs of all runs, made unique by a `-2`, `-3`... suffix.
fn unique_slugs(runs: &[RunResult]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::with_capacity(runs.len());
    for r in runs {
        let base = slug(&r.contestant);
        let mut s = base.clone();
        let mut i = 2;
        while seen.contains(&s) {
            s = format!("{base}-{i}");
            i += 1;
        }
        seen.push(s);
    }
    seen
}

fn step_label(round: usize, label: &str) -> String {
    format!("r{round}:{label}")
}

fn mib(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

fn color_of(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

fn hex(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
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
fn x_labels(runs: &[RunResult]) -> Vec<String> {
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
    let body = root.titled(caption, ("sans-serif", 20))?;
    let longest = legend
        .iter()
        .map(|e| legend_label(&e.label).chars().count())
        .max()
        .unwrap_or(0) as i32;
    let width = body.dim_in_pixel().0 as i32;
    let strip = if legend.is_empty() {
        0
    } else {
        (longest * 7 + 50).clamp(100, width / 3)
    };
    Ok(body.split_horizontally(width - strip))
}

/// Draw the legend down the strip made by [`split_legend`].
fn draw_legend(area: &Area, legend: &[LegendEntry]) -> DrawResult {
    let font =
        TextStyle::from(("sans-serif", 15).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, e) in legend.iter().enumerate() {
        let (x, y) = (4, 24 + 22 * i as i32);
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
        }
        area.draw(&Text::new(
            legend_label(&e.label),
            (x + 32, y),
            font.clone(),
        ))?;
    }
    Ok(())
}

/// One line of a step plot.
struct StepLine {
    /// Legend entry.
    label: String,
    /// Colour.
    color: RGBColor,
    /// Dashed (a reference line) rather than solid.
    dashed: bool,
    /// `(step index, value)`, `None` where the step has no value (the line
    /// is broken there).
    points: Vec<Option<f64>>,
}

/// A plot of values after each step: x = step index labelled with
/// `labels` (rotated), one line per entry of `lines`.
fn step_plot(
    caption: &str,
    y_desc: &str,
    labels: &[String],
    lines: &[StepLine],
    empty_note: &str,
) -> io::Result<String> {
    let n = labels.len().max(1);
    let (y_lo, y_hi) = guarded_range(
        lines
            .iter()
            .flat_map(|l| l.points.iter().flatten().copied()),
        true,
    );
    let any_point = lines.iter().any(|l| l.points.iter().any(Option::is_some));
    // Rotated labels of about 6.5 pixels a character.
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    let label_area = (longest as u32 * 13 / 2 + 24).clamp(40, 160);
    let legend: Vec<LegendEntry> = lines
        .iter()
        .filter(|l| l.points.iter().any(Option::is_some))
        .map(|l| LegendEntry {
            label: l.label.clone(),
            color: l.color,
            mark: if l.dashed { Mark::Dashed } else { Mark::Line },
        })
        .collect();
    render(STEP_PLOT, |root| {
        let (plot, key) = split_legend(root, caption, &legend)?;
        let mut chart = ChartBuilder::on(&plot)
            .margin(12)
            .x_label_area_size(label_area)
            .y_label_area_size(70)
            .build_cartesian_2d(
                KeyAxis::new(-0.5, n as f64 - 0.5, (0..n).map(|i| i as f64).collect()),
                y_lo..y_hi,
            )?;
        chart
            .configure_mesh()
            .x_label_formatter(&|_| String::new())
            .y_desc(y_desc)
            .y_label_formatter(&|v| axis_number(*v, y_hi - y_lo))
            .max_light_lines(1)
            .light_line_style(RGBColor(240, 240, 240))
            .bold_line_style(RGBColor(210, 210, 210))
            .draw()?;
        // Zero line where the range crosses it.
        if y_lo < 0.0 && y_hi > 0.0 {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(-0.5, 0.0), (n as f64 - 0.5, 0.0)],
                BLACK.mix(0.4),
            )))?;
        }
        for line in lines {
            let color = line.color;
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
                let style = ShapeStyle::from(color).stroke_width(2);
                if line.dashed {
                    chart.draw_series(DashedLineSeries::new(seg.iter().copied(), 8, 5, style))?;
                } else {
                    chart.draw_series(LineSeries::new(seg.iter().copied(), style))?;
                }
                if !line.dashed {
                    chart.draw_series(
                        seg.iter()
                            .map(|&p| Circle::new(p, 3, ShapeStyle::from(color).filled())),
                    )?;
                }
            }
        }
        draw_legend(&key, &legend)?;
        // Step labels, rotated, below the axis; thinned out where they
        // would overlap.
        let (x0, _) = chart.backend_coord(&(0.0, y_lo));
        let (x1, _) = chart.backend_coord(&(1.0, y_lo));
        let spacing = (x1 - x0).max(1);
        let stride = (14 + spacing - 1) / spacing;
        let style = TextStyle::from(("sans-serif", 13).into_font())
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
            root.draw(&Text::new(
                empty_note,
                (cx, cy),
                TextStyle::from(("sans-serif", 18).into_font())
                    .color(&RGBColor(120, 120, 120))
                    .pos(Pos::new(HPos::Center, VPos::Center)),
            ))?;
        }
        Ok(())
    })
}

/// Plot 1: overhead ratio in % after each step, steps without compressed
/// data left out.
fn overhead_plot(runs: &[RunResult], labels: &[String]) -> io::Result<String> {
    let lines: Vec<StepLine> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| StepLine {
            label: r.contestant.clone(),
            color: color_of(i),
            dashed: false,
            points: r
                .steps
                .iter()
                .map(|s| (s.figures.compr > 0).then(|| s.figures.overhead_ratio() * 100.0))
                .collect(),
        })
        .collect();
    step_plot(
        "Overhead ratio (pool - compr) / compr after each step",
        "overhead ratio (%)",
        labels,
        &lines,
        "no step with compressed data",
    )
}

/// Plot 2: pool memory in MiB after each step, compressed bytes dashed.
fn memory_plot(runs: &[RunResult], labels: &[String]) -> io::Result<String> {
    let mut lines: Vec<StepLine> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| StepLine {
            label: format!("{} pool", r.contestant),
            color: color_of(i),
            dashed: false,
            points: r.steps.iter().map(|s| Some(mib(s.figures.pool))).collect(),
        })
        .collect();
    let compr: Vec<Vec<u64>> = runs
        .iter()
        .map(|r| r.steps.iter().map(|s| s.figures.compr).collect())
        .collect();
    let mut compr_lines: Vec<StepLine> = Vec::new();
    if compr.windows(2).all(|w| w[0] == w[1]) {
        // Every contestant stored the same compressed bytes: one line.
        if let Some(c) = compr.first() {
            compr_lines.push(StepLine {
                label: "compressed".into(),
                color: RGBColor(60, 60, 60),
                dashed: true,
                points: c.iter().map(|&b| Some(mib(b))).collect(),
            });
        }
    } else {
        for (i, (r, c)) in runs.iter().zip(&compr).enumerate() {
            compr_lines.push(StepLine {
                label: format!("{} compressed", r.contestant),
                color: color_of(i),
                dashed: true,
                points: c.iter().map(|&b| Some(mib(b))).collect(),
            });
        }
    }
    lines.extend(compr_lines);
    step_plot(
        "Pool memory after each step (dashed: compressed bytes)",
        "MiB",
        labels,
        &lines,
        "no steps",
    )
}

/// Plot 3: a contestant's store/load/discard latencies, log2 buckets as
/// grouped bars, in % of each operation's samples.
fn latency_plot(r: &RunResult) -> io::Result<String> {
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
        .filter(|k| (k - k_lo) as usize % stride == 0)
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
            root.draw(&Text::new(
                "no samples",
                (cx, cy),
                TextStyle::from(("sans-serif", 18).into_font())
                    .color(&RGBColor(120, 120, 120))
                    .pos(Pos::new(HPos::Center, VPos::Center)),
            ))?;
        }
        Ok(())
    })
}

const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0 auto;max-width:1200px;padding:1em 2em;color:#222;background:#fff}
h1{margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
dl.meta{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}dl.meta dt{font-weight:600}dl.meta dd{margin:0}
code,pre{font-family:ui-monospace,'SFMono-Regular',Menlo,Consolas,monospace;font-size:.9em}
pre{background:#f6f8fa;border:1px solid #e1e4e8;padding:.6em;overflow-x:auto;line-height:1.25}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}
th,td{border:1px solid #ddd;padding:.25em .6em}th{background:#f3f3f3}
td.n{text-align:right;font-variant-numeric:tabular-nums}td.skip{color:#a33}
tr:nth-child(even) td{background:#fafafa}
.swatch{display:inline-block;width:.9em;height:.9em;border-radius:2px;margin-right:.4em;vertical-align:-.1em}
figure{margin:1em 0}figure svg{max-width:100%;height:auto;border:1px solid #eee}
figcaption,.note{color:#555;font-size:.9em}.empty{font-size:1.2em;color:#a33}
.skipped li{color:#a33}
";

fn lat_cell(h: &Histogram<u64>, quantiles: &[f64]) -> String {
    if h.is_empty() {
        return "–".to_string();
    }
    quantiles
        .iter()
        .map(|&q| format!("{:.2}", us(h.value_at_quantile(q))))
        .collect::<Vec<_>>()
        .join(" / ")
}

fn summary_table(out: &mut String, runs: &[RunResult], skipped: &[(String, String)]) {
    out.push_str(
        "<table class=\"summary\">\n<tr><th>contestant</th><th>peak used (pool) MiB</th>\
         <th>peak all-in MiB</th><th>max overhead ratio</th><th>last overhead ratio</th>\
         <th>max all-in ratio</th><th>last all-in ratio</th><th>store p50 / p99 µs</th><th>load p50 / p99 µs</th><th>discard p50 µs</th>\
         <th>wall time s</th></tr>\n",
    );
    for (i, r) in runs.iter().enumerate() {
        let (max, last) = r.overhead_ratios();
        let (all_max, all_last) = r.all_in_ratios();
        let l = &r.latency;
        let _ = writeln!(
            out,
            "<tr><td><span class=\"swatch\" style=\"background:{}\"></span>{}</td>\
             <td class=\"n\">{:.2}</td><td class=\"n\">{:.2}</td><td class=\"n\">{:.2}%</td>\
             <td class=\"n\">{:.2}%</td><td class=\"n\">{:.2}%</td><td class=\"n\">{:.2}%</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{:.2}</td></tr>",
            hex(color_of(i)),
            esc(&r.contestant),
            mib(r.peak_pool()),
            mib(r.peak_all_in()),
            max * 100.0,
            last * 100.0,
            all_max * 100.0,
            all_last * 100.0,
            lat_cell(&l.store, &[0.5, 0.99]),
            lat_cell(&l.load, &[0.5, 0.99]),
            lat_cell(&l.discard, &[0.5]),
            r.wall.as_secs_f64(),
        );
    }
    for (name, why) in skipped {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"skip\" colspan=\"10\">skipped: {}</td></tr>",
            esc(name),
            esc(why)
        );
    }
    out.push_str("</table>\n");
    out.push_str(
        "<p class=\"note\">used (pool) = pages the allocator holds for objects (zram's \
         <code>mem_used_total</code>; for a malloc baseline its heap growth); all-in = \
         everything held for the data, the sum of the terms below, counted the same way for \
         every contestant; overhead ratio = (pool − compr) / compr and all-in ratio = \
         (all-in − compr) / compr, over the steps with data, the final compaction left \
         out.</p>\n",
    );
    all_in_terms(out);
}

/// The all-in terms with their formulas and sources ([`crate::allin::explain`]).
fn all_in_terms(out: &mut String) {
    out.push_str(
        "<table class=\"terms\">\n<tr><th>all-in term</th><th>formula</th><th>source</th></tr>\n",
    );
    for t in crate::allin::explain() {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(t.name),
            esc(&t.formula),
            esc(t.source)
        );
    }
    out.push_str("</table>\n");
}

fn step_table(out: &mut String, r: &RunResult) {
    let with_waste = r.steps.iter().any(|s| s.figures.waste.is_some());
    out.push_str(
        "<table class=\"steps\">\n<tr><th>round:step</th><th>orig MiB</th><th>compr MiB</th>\
         <th>used MiB</th><th>all-in MiB</th>",
    );
    out.push_str(
        "<th>overhead MiB</th><th>ratio</th><th>all-in ratio</th><th>same</th><th>huge</th>\
         <th>compacted</th>",
    );
    if with_waste {
        out.push_str(
            "<th>rounding</th><th>partial</th><th>tail</th><th>meta</th><th>ratio with meta</th>",
        );
    }
    out.push_str("</tr>\n");
    for s in &r.steps {
        let f = &s.figures;
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"n\">{:.2}</td><td class=\"n\">{:.2}</td>\
             <td class=\"n\">{:.2}</td>",
            esc(&step_label(s.round, &s.label)),
            mib(f.orig),
            mib(f.compr),
            mib(f.pool),
        );
        let _ = write!(out, "<td class=\"n\">{:.2}</td>", mib(f.all_in));
        // Shares of compressed bytes mean nothing without compressed bytes.
        let pct = |b: u64| {
            if f.compr == 0 {
                "–".to_string()
            } else {
                format!("{:.2}%", 100.0 * b as f64 / f.compr as f64)
            }
        };
        let ratio = |r: f64| {
            if f.compr == 0 {
                "–".to_string()
            } else {
                format!("{:.2}%", r * 100.0)
            }
        };
        let _ = write!(
            out,
            "<td class=\"n\">{:.2}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>",
            f.overhead() as f64 / (1u64 << 20) as f64,
            ratio(f.overhead_ratio()),
            ratio(f.all_in_ratio()),
            f.same_pages,
            f.huge_pages,
            f.pages_compacted,
        );
        if with_waste {
            match f.waste {
                Some(w) => {
                    let _ = write!(
                        out,
                        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                         <td class=\"n\">{}</td><td class=\"n\">{}</td>",
                        pct(w.rounding_bytes as u64),
                        pct(w.partial_bytes as u64),
                        pct(w.tail_bytes as u64),
                        pct(f.meta),
                        ratio(f.meta_ratio()),
                    );
                }
                None => out.push_str("<td colspan=\"5\"></td>"),
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    if with_waste {
        out.push_str(
            "<p class=\"note\">In % of compressed bytes: rounding = slots larger than their \
             objects; partial = free slots in partly used zspages (what compaction recovers); \
             tail = end of each zspage no slot can use; meta = the allocator's metadata \
             (handle tables, zspage descriptors, free stacks); ratio with meta = \
             (pool + meta − compr) / compr.</p>\n",
        );
    }
}

fn figure(out: &mut String, svg: &str, file: &str, caption: &str) {
    let _ = writeln!(
        out,
        "<figure>\n{}\n<figcaption>{} (also <code>{}</code>)</figcaption>\n</figure>",
        svg.trim_end(),
        caption,
        esc(file)
    );
}

/// Write the report of `runs` to `dir/index.html` (creating `dir` and its
/// parents), with the plots also written as `overhead.svg`, `memory.svg`
/// and `latency-<contestant>.svg` next to it (contestant names made
/// file-name safe). Returns the path of `index.html`.
///
/// With no runs the page says so, lists the skipped contestants, and no
/// plot is written.
pub fn write_report(dir: &Path, ctx: &ReportContext, runs: &[RunResult]) -> io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let mut out = String::with_capacity(64 * 1024);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{}</style>\n</head>\n<body>\n<header>\n<h1>{}</h1>\n\
         <dl class=\"meta\">\n<dt>source</dt><dd>{}</dd>\n<dt>workload</dt><dd>{}</dd>\n\
         <dt>command</dt><dd><code>{}</code></dd>\n</dl>\n",
        esc(&ctx.title),
        STYLE,
        esc(&ctx.title),
        esc(&ctx.source),
        esc(&ctx.workload),
        esc(&ctx.generated_by),
    );
    if !ctx.skipped.is_empty() {
        out.push_str("<p>Skipped contestants:</p>\n<ul class=\"skipped\">\n");
        for (name, why) in &ctx.skipped {
            let _ = writeln!(out, "<li><b>{}</b>: {}</li>", esc(name), esc(why));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</header>\n");

    if runs.is_empty() {
        out.push_str(
            "<p class=\"empty\">There were no runs: no contestant produced results.</p>\n",
        );
        out.push_str("</body>\n</html>\n");
        let index = dir.join("index.html");
        std::fs::write(&index, out)?;
        return Ok(index);
    }

    let slugs = unique_slugs(runs);
    out.push_str("<nav><p>Contestants: ");
    let links: Vec<String> = runs
        .iter()
        .zip(&slugs)
        .map(|(r, s)| format!("<a href=\"#c-{s}\">{}</a>", esc(&r.contestant)))
        .collect();
    out.push_str(&links.join(" · "));
    out.push_str("</p></nav>\n");

    out.push_str("<section id=\"summary\">\n<h2>Summary</h2>\n");
    summary_table(&mut out, runs, &ctx.skipped);
    out.push_str("</section>\n");

    let labels = x_labels(runs);
    let overhead = overhead_plot(runs, &labels)?;
    std::fs::write(dir.join("overhead.svg"), &overhead)?;
    let memory = memory_plot(runs, &labels)?;
    std::fs::write(dir.join("memory.svg"), &memory)?;
    out.push_str("<section id=\"plots\">\n<h2>Overhead and memory</h2>\n");
    figure(
        &mut out,
        &overhead,
        "overhead.svg",
        "Overhead ratio (pool − compr) / compr in % after each step; steps without \
         compressed data are left out",
    );
    figure(
        &mut out,
        &memory,
        "memory.svg",
        "Pool memory in MiB after each step; dashed: compressed bytes",
    );
    out.push_str("</section>\n");

    for (r, s) in runs.iter().zip(&slugs) {
        let _ = writeln!(
            out,
            "<section class=\"contestant\" id=\"c-{s}\">\n<h2>{}</h2>\n<p>{}</p>",
            esc(&r.contestant),
            esc(&r.config)
        );
        out.push_str("<h3>Steps</h3>\n");
        step_table(&mut out, r);
        out.push_str("<h3>Latency</h3>\n");
        let file = format!("latency-{s}.svg");
        let svg = latency_plot(r)?;
        std::fs::write(dir.join(&file), &svg)?;
        figure(
            &mut out,
            &svg,
            &file,
            "Store, load and discard latency: share of each operation's samples per \
             power-of-two bucket of nanoseconds (a bucket with any samples is drawn at \
             least a hair tall; the counts are in the histograms below)",
        );
        for (name, h) in [
            ("store", &r.latency.store),
            ("load", &r.latency.load),
            ("discard", &r.latency.discard),
        ] {
            let _ = writeln!(
                out,
                "<pre>@{name}_ns:\n{}</pre>",
                esc(&log2_histogram(h, PRE_BAR_WIDTH))
            );
        }
        out.push_str("</section>\n");
    }
    out.push_str(
        "<footer><p class=\"note\">Generated by zsmem-lab's report module.</p></footer>\n\
         </body>\n</html>\n",
    );
    let index = dir.join("index.html");
    std::fs::write(&index, out)?;
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist() -> Histogram<u64> {
        Histogram::new_with_bounds(1, 60_000_000_000, 3).unwrap()
    }

    #[test]
    fn escapes_html() {
        assert_eq!(esc(r#"a<b&"c"'d>"#), "a&lt;b&amp;&quot;c&quot;&#39;d&gt;");
        assert_eq!(esc("plain µs"), "plain µs");
    }

    #[test]
    fn slugs_are_safe_and_unique() {
        assert_eq!(slug("zsmem-kernel"), "zsmem-kernel");
        assert_eq!(slug("a<b&\"c\""), "a_b__c_");
        assert_eq!(slug("../x"), "___x");
        assert_eq!(slug(""), "_");
    }

    #[test]
    fn bucket_labels_follow_bpftrace() {
        assert_eq!(bucket_label(0), "[0]");
        assert_eq!(bucket_label(1), "[1]");
        assert_eq!(bucket_label(2), "[2, 4)");
        assert_eq!(bucket_label(10), "[512, 1K)");
        assert_eq!(bucket_label(11), "[1K, 2K)");
        assert_eq!(bucket_label(21), "[1M, 2M)");
        assert_eq!(bucket_label(31), "[1G, 2G)");
        assert_eq!(bucket_label(64), "[8E, 16E)");
    }

    #[test]
    fn buckets_split_at_powers_of_two() {
        let mut h = hist();
        for v in [1023u64, 1024, 2047, 2048, 4095, 4096, 1 << 20] {
            h.record(v).unwrap();
        }
        assert_eq!(
            log2_buckets(&h),
            vec![(10, 1), (11, 2), (12, 2), (13, 1), (21, 1)]
        );
    }

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
    fn bars_scale_to_the_largest_bucket() {
        let mut h = hist();
        h.record_n(1500, 100).unwrap();
        h.record_n(3000, 50).unwrap();
        let s = log2_histogram(&h, 10);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "[1K, 2K) 100 |@@@@@@@@@@|");
        assert_eq!(lines[1], "[2K, 4K)  50 |@@@@@     |");
        assert!(lines[2].starts_with("n 150  p50 1.50 µs"), "{}", lines[2]);
    }
}
