//! A self-contained HTML report of a side-by-side run (`zsmem compare`).
//!
//! [`write_report`] turns the [`RunResult`]s of the contestants into one
//! directory:
//!
//! | file | content |
//! |---|---|
//! | `index.html` | the whole report, one page with no external CSS, JS or fonts; the plots below are inlined as `<svg>` elements |
//! | `overhead.svg` | overhead `(pool - compr) / compr` after each step, one line per contestant, on a log axis when the contestants' overheads differ by orders of magnitude |
//! | `memory.svg` | all-in memory after each step of zsmem, the reference and the nearest rival, compressed bytes dashed |
//! | `relative.svg` | all-in memory relative to the reference (the kernel's zram, else its simulation, else the nearest rival) after each step, in % |
//! | `latency.svg` | every contestant's store/load/discard p50 and p99, one plot |
//! | `latency-<contestant>.svg` | store/load/discard latency, log2 buckets, grouped bars |
//!
//! The page holds a header (title, source, workload, command, codec, page
//! size, zsmem's version, host, kernel, date, contestants skipped and why),
//! the verdict (zsmem's all-in memory against the kernel's zram, compacted
//! and not, or without it its simulation in userspace, else the nearest
//! rival; its nearest rival and its other placement, each at the peak,
//! step by step and after the last step, ties called ties: `verdict.rs`),
//! the summary table `zsmem compare` prints with each contestant's peak
//! all-in relative to the reference and the best figure of each column
//! marked, the compaction costs, the plots, and per contestant, folded
//! away in `<details>`, its step table (with zsmem's split of the overhead
//! into rounding, partial, tail and metadata where the contestant can
//! tell) and its latency histograms, as a plot and in the bpftrace log2
//! style of reference 001, made by [`log2_histogram`].
//!
//! Each contestant keeps one colour and dash pattern, fixed by its name,
//! across the page and from one report to the next (`palette.rs`: zsmem
//! always blue). The malloc baselines, whose overhead is 6-7 times the
//! others', would flatten every other line: runs over 100% overhead are
//! left off the step plots and their figures written in the legend
//! instead. Steps where no contestant has a figure take no room on the x
//! axis, and each step plot has an HTML legend under it.
//!
//! Plots are drawn with plotters' SVG backend into memory. Their ranges are
//! guarded so that one contestant, one step, empty histograms or all-zero
//! figures draw an (empty) plot rather than panic.
//!
//! The page is put together here from `verdict.rs`, `tables.rs`,
//! `plots.rs`, `palette.rs`, `meta.rs` and `histogram.rs`, with the pieces
//! of `html.rs`.

mod histogram;
mod html;
mod meta;
mod palette;
mod plots;
mod rfc;
mod tables;
mod verdict;

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

pub use histogram::log2_histogram;
use html::{STYLE, esc, figure, unique_slugs};
use palette::{legend_html, looks};
use plots::{
    Scale, latency_comparison, latency_plot, memory_plot, off_scale, overhead_plot, overhead_scale,
    relative_plot, x_labels,
};
pub use rfc::{RFC_VARIANTS, rfc_text};
use tables::{compaction_table, step_table, summary_table};
pub use verdict::{
    Call, Comparison, Measure, Reference, StepTally, TIE_THRESHOLD, VERDICT_NOTE, Verdict, compare,
    verdict_of,
};
use verdict::{nearest_rival, references, verdict_html};

use crate::corpus::PAGE_SIZE;
use crate::workloads::untar_rm::{LATENCY_NOTE, RunResult, latency_note};

/// Width of the bars of the `<pre>` histograms in the report.
const PRE_BAR_WIDTH: usize = 52;

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
    /// The codec the contestants compressed with, e.g. `lz4`.
    pub codec: String,
    /// The page size of the pages stored, in bytes (0: the default,
    /// 4 KiB).
    pub page_size: usize,
    /// Contestants that did not run: `(name, reason)`.
    pub skipped: Vec<(String, String)>,
    /// CPU time a call of each contestant, `(name, calls made, ns a call)`, for
    /// a workload that measures it (churn), with how it was measured;
    /// empty otherwise.
    pub cpu: Vec<(String, u64, f64)>,
    /// How `cpu` was measured (printed under its table).
    pub cpu_note: String,
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
         <dt>command</dt><dd><code>{}</code></dd>\n",
        esc(&ctx.title),
        STYLE,
        esc(&ctx.title),
        esc(&ctx.source),
        esc(&ctx.workload),
        esc(&ctx.generated_by),
    );
    if !ctx.codec.is_empty() {
        let _ = writeln!(out, "<dt>codec</dt><dd>{}</dd>", esc(&ctx.codec));
    }
    if ctx.page_size > 0 {
        let _ = writeln!(out, "<dt>page size</dt><dd>{} bytes</dd>", ctx.page_size);
    }
    for (name, value) in meta::machine_facts() {
        let _ = writeln!(out, "<dt>{name}</dt><dd>{}</dd>", esc(&value));
    }
    out.push_str("</dl>\n");
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

    let looks = looks(runs);
    verdict_html(&mut out, &verdict_of(runs));

    out.push_str("<section id=\"summary\">\n<h2>Summary</h2>\n");
    summary_table(&mut out, runs, &looks, &ctx.skipped);
    let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(LATENCY_NOTE));
    out.push_str("<h3>Compaction cost</h3>\n");
    compaction_table(&mut out, runs, &looks);
    if !ctx.cpu.is_empty() {
        cpu_table(&mut out, ctx);
    }
    out.push_str("</section>\n");
    let page_size = if ctx.page_size == 0 {
        PAGE_SIZE
    } else {
        ctx.page_size
    };
    rfc::rfc_section(&mut out, runs, page_size);

    let labels = x_labels(runs);
    let off: Vec<&str> = runs
        .iter()
        .zip(off_scale(runs))
        .filter(|(_, o)| *o)
        .map(|(r, _)| r.contestant.as_str())
        .collect();
    let left_off = if off.is_empty() {
        String::new()
    } else {
        format!(
            "; not drawn, their overhead over 100% and 4 times the median contestant's, and written in the legend instead: {}",
            esc(&off.join(", "))
        )
    };
    let off_flags = off_scale(runs);
    let drawn = |keep: &dyn Fn(usize) -> bool| {
        legend_html(
            runs.iter()
                .zip(&looks)
                .enumerate()
                .filter(|(i, _)| !off_flags[*i] && keep(*i))
                .map(|(_, (r, l))| (r.contestant.as_str(), *l)),
        )
    };
    let overhead = overhead_plot(runs, &looks, &labels)?;
    std::fs::write(dir.join("overhead.svg"), &overhead)?;
    let refs = references(runs);
    let rival = nearest_rival(runs);
    let shown: Vec<bool> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| r.contestant == "zsmem" || refs.contains(&i) || rival == Some(i))
        .collect();
    let memory = memory_plot(runs, &looks, &labels, &shown)?;
    std::fs::write(dir.join("memory.svg"), &memory)?;
    let latency = latency_comparison(runs)?;
    std::fs::write(dir.join("latency.svg"), &latency)?;
    out.push_str("<section id=\"plots\">\n<h2>Overhead, memory and latency</h2>\n");
    figure(
        &mut out,
        &overhead,
        "overhead.svg",
        &format!(
            "Overhead (pool − compr) / compr in % after each step{}; steps without \
             compressed data are left out{left_off}",
            if overhead_scale(runs, &off_flags) == Scale::Log {
                ", on a log scale: the contestants' overheads differ by orders of magnitude"
            } else {
                ""
            }
        ),
        &drawn(&|_| true),
    );
    figure(
        &mut out,
        &memory,
        "memory.svg",
        &format!(
            "All-in memory in MiB after each step of zsmem, the reference and the nearest \
             rival (every contestant is in the relative plot below and the summary); dashed \
             grey: the compressed bytes{left_off}"
        ),
        &drawn(&|i| shown[i]),
    );
    if let Some(&base) = references(runs).first() {
        let relative = relative_plot(runs, &looks, &labels, base)?;
        std::fs::write(dir.join("relative.svg"), &relative)?;
        figure(
            &mut out,
            &relative,
            "relative.svg",
            &format!(
                "All-in memory of each contestant relative to {}'s after each step, in %; \
                 steps where either holds no data are left out{left_off}",
                esc(&runs[base].contestant)
            ),
            &drawn(&|_| true),
        );
    }
    figure(
        &mut out,
        &latency,
        "latency.svg",
        "Store, load and discard latency of every contestant: the bar reaches the p50, \
         the whisker the p99, on a log scale",
        "",
    );
    out.push_str("</section>\n");

    for (r, s) in runs.iter().zip(&slugs) {
        let _ = writeln!(
            out,
            "<section class=\"contestant\" id=\"c-{s}\">\n<h2>{}</h2>\n<p>{}</p>",
            esc(&r.contestant),
            esc(&r.config)
        );
        let _ = writeln!(
            out,
            "<details><summary>Steps ({} after each step)</summary>",
            r.steps.len()
        );
        step_table(&mut out, r);
        out.push_str("</details>\n");
        out.push_str("<details><summary>Latency histograms</summary>\n");
        let _ = writeln!(
            out,
            "<p class=\"note\">{}</p>",
            esc(&latency_note(&r.contestant))
        );
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
            "",
        );
        out.push_str(
            "<details><summary>The same as text, with the counts (bpftrace's log2 \
             style)</summary>\n",
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
        out.push_str("</details>\n</details>\n");
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

/// The CPU time a call of each contestant and, where the kernel's zram
/// ran, its ratio to the kernel's.
fn cpu_table(out: &mut String, ctx: &ReportContext) {
    let kernel = ctx
        .cpu
        .iter()
        .find(|(n, _, _)| n == "kernel-zram")
        .map(|&(_, _, ns)| ns);
    out.push_str(
        "<h3>CPU a call</h3>\n<table>\n<thead><tr><th>contestant</th><th>calls made</th>\
         <th>CPU a call (µs)</th>",
    );
    if kernel.is_some() {
        out.push_str("<th>x kernel-zram</th>");
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for (name, calls, ns) in &ctx.cpu {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{calls}</td><td>{:.2}</td>",
            esc(name),
            ns / 1000.0
        );
        if let Some(k) = kernel {
            let ratio = if k > 0.0 {
                format!("{:.2}", ns / k)
            } else {
                "-".to_string()
            };
            let _ = write!(out, "<td>{ratio}</td>");
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
    let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(&ctx.cpu_note));
}
