//! The report's tables: the summary of all contestants, the all-in terms, each contestant's steps.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

use super::histogram::us;
use super::html::esc;
use super::palette::{Look, swatch};
use super::plots::{mib, step_label};
use super::verdict::{references, relative_peak};
use crate::corpus::tree::PAGE_SIZE;
use crate::workloads::untar_rm::RunResult;
use zsmem::CompactionStats;

/// One numeric column of the summary: its heading, a value per run (`None`
/// where the run has none), how a value is written.
struct Column {
    head: String,
    values: Vec<Option<f64>>,
    fmt: fn(f64) -> String,
}

fn two(v: f64) -> String {
    format!("{v:.2}")
}

fn percent(v: f64) -> String {
    format!("{:.2}%", v * 100.0)
}

fn signed_percent(v: f64) -> String {
    // No "-0.0%" for a difference that rounds to nothing.
    if (v * 1000.0).round() == 0.0 {
        "0.0%".to_string()
    } else {
        format!("{:+.1}%", v * 100.0)
    }
}

fn quantile_us(h: &Histogram<u64>, q: f64) -> Option<f64> {
    (!h.is_empty()).then(|| us(h.value_at_quantile(q)))
}

/// The summary: one row per run, the best (smallest) figure of each column
/// marked, each run's peak all-in relative to the references (the kernel's
/// zram, else its simulation, else the nearest rival; see
/// [`super::verdict::references`]).
pub(super) fn summary_table(
    out: &mut String,
    runs: &[RunResult],
    looks: &[Look],
    skipped: &[(String, String)],
) {
    let mut cols = vec![
        Column {
            head: "peak pool MiB".into(),
            values: runs.iter().map(|r| Some(mib(r.peak_pool()))).collect(),
            fmt: two,
        },
        Column {
            head: "peak all-in MiB".into(),
            values: runs.iter().map(|r| Some(mib(r.peak_all_in()))).collect(),
            fmt: two,
        },
    ];
    for i in references(runs) {
        cols.push(Column {
            head: format!("all-in vs {}", esc(&runs[i].contestant)),
            values: runs
                .iter()
                .enumerate()
                .map(|(j, r)| {
                    if j == i {
                        None
                    } else {
                        relative_peak(r, &runs[i])
                    }
                })
                .collect(),
            fmt: signed_percent,
        });
    }
    let ratios: Vec<((f64, f64), (f64, f64))> = runs
        .iter()
        .map(|r| (r.overhead_ratios(), r.all_in_ratios()))
        .collect();
    for (head, pick) in [
        (
            "max overhead",
            (|x| x.0.0) as fn(&((f64, f64), (f64, f64))) -> f64,
        ),
        ("last overhead", |x| x.0.1),
        ("max all-in overhead", |x| x.1.0),
        ("last all-in overhead", |x| x.1.1),
    ] {
        cols.push(Column {
            head: head.into(),
            values: ratios.iter().map(|x| Some(pick(x))).collect(),
            fmt: percent,
        });
    }
    for (op, q, name) in [
        (0, 0.5, "store p50 µs"),
        (0, 0.99, "store p99 µs"),
        (1, 0.5, "load p50 µs"),
        (1, 0.99, "load p99 µs"),
        (2, 0.5, "discard p50 µs"),
    ] {
        cols.push(Column {
            head: name.into(),
            values: runs
                .iter()
                .map(|r| {
                    let l = &r.latency;
                    quantile_us([&l.store, &l.load, &l.discard][op], q)
                })
                .collect(),
            fmt: two,
        });
    }
    cols.push(Column {
        head: "wall time s".into(),
        values: runs.iter().map(|r| Some(r.wall.as_secs_f64())).collect(),
        fmt: two,
    });

    out.push_str("<div class=\"wide\"><table class=\"summary\">\n<tr><th>contestant</th>");
    for c in &cols {
        let _ = write!(out, "<th>{}</th>", c.head);
    }
    out.push_str("</tr>\n");
    // The best of a column: the smallest value as written, so that a tie
    // on the page is a tie in the marks.
    let best: Vec<Option<String>> = cols
        .iter()
        .map(|c| {
            let v = c
                .values
                .iter()
                .flatten()
                .copied()
                .filter(|v| v.is_finite())
                .fold(f64::INFINITY, f64::min);
            let text = (c.fmt)(v);
            // A column where every run ties has no best.
            let ties = c.values.iter().flatten().all(|&x| (c.fmt)(x) == text);
            (runs.len() > 1 && v.is_finite() && !ties).then_some(text)
        })
        .collect();
    for (i, r) in runs.iter().enumerate() {
        let _ = write!(
            out,
            "<tr><td class=\"name\">{}{}</td>",
            swatch(looks[i]),
            esc(&r.contestant)
        );
        for (c, b) in cols.iter().zip(&best) {
            match c.values[i] {
                Some(v) => {
                    let text = (c.fmt)(v);
                    if b.as_deref() == Some(text.as_str()) {
                        let _ = write!(out, "<td class=\"n best\">{text}</td>");
                    } else {
                        let _ = write!(out, "<td class=\"n\">{text}</td>");
                    }
                }
                None => out.push_str("<td class=\"n\">–</td>"),
            }
        }
        out.push_str("</tr>\n");
    }
    for (name, why) in skipped {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"skip\" colspan=\"{}\">skipped: {}</td></tr>",
            esc(name),
            cols.len(),
            esc(why)
        );
    }
    out.push_str("</table></div>\n");
    out.push_str(
        "<p class=\"note\"><span class=\"best\">Marked</span>: the best (smallest) figure of \
         each column. pool = pages the allocator holds for objects (zram's \
         <code>mem_used_total</code>; for a malloc baseline its heap growth); all-in = \
         everything held for the data, the sum of the terms below, counted the same way for \
         every contestant; all-in vs X = this contestant's peak all-in over X's, minus \
         one; overhead = (pool − compr) / compr and all-in overhead = \
         (all-in − compr) / compr, over the steps with data, the final compaction left \
         out.</p>\n",
    );
    all_in_terms(out, runs);
}

/// What the final compaction cost each contestant that reports it: the
/// table `zsmem compare` prints in the terminal.
pub(super) fn compaction_table(out: &mut String, runs: &[RunResult], looks: &[Look]) {
    let costs: Vec<(usize, CompactionStats)> = runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((i, r.steps.last()?.figures.compaction?)))
        .collect();
    if costs.is_empty() {
        out.push_str("<p class=\"note\">No contestant reported what its compaction cost.</p>\n");
        return;
    }
    out.push_str(
        "<div class=\"wide\"><table class=\"compaction\">\n<tr><th>contestant</th>\
         <th>objects moved</th><th>MiB copied</th><th>pages returned</th>\
         <th>bytes copied per byte freed</th><th>longest lock hold µs</th></tr>\n",
    );
    for (i, c) in costs {
        let _ = writeln!(
            out,
            "<tr><td class=\"name\">{}{}</td><td class=\"n\">{}</td><td class=\"n\">{:.2}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{:.3}</td><td class=\"n\">{:.1}</td></tr>",
            swatch(looks[i]),
            esc(&runs[i].contestant),
            c.objects_moved,
            mib(c.bytes_copied),
            c.pages_compacted,
            c.copy_per_freed_byte(PAGE_SIZE),
            us(c.max_lock_hold_ns),
        );
    }
    out.push_str("</table></div>\n");
    out.push_str(
        "<p class=\"note\">Over the whole run, automatic compaction and the final \
         one together: pages returned are net of the pages compaction took for its \
         destinations.</p>\n",
    );
}

/// The all-in terms of the contestants that ran, with their formulas and
/// sources ([`crate::allin::explain_used`]), folded away.
fn all_in_terms(out: &mut String, runs: &[RunResult]) {
    let terms = crate::allin::explain_used(
        runs.iter()
            .flat_map(|r| &r.steps)
            .map(|s| s.figures.all_in_terms.as_slice()),
    );
    if terms.is_empty() {
        return;
    }
    out.push_str(
        "<details><summary>The all-in terms: how each is counted</summary>\n\
         <div class=\"wide\"><table class=\"terms\">\n<tr><th>all-in term</th><th>formula</th><th>source</th></tr>\n",
    );
    for t in terms {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(t.name),
            esc(&t.formula),
            esc(t.source)
        );
    }
    out.push_str("</table></div>\n</details>\n");
}

pub(super) fn step_table(out: &mut String, r: &RunResult) {
    let with_waste = r.steps.iter().any(|s| s.figures.waste.is_some());
    out.push_str(
        "<div class=\"wide\"><table class=\"steps\">\n<tr><th>round:step</th><th>orig MiB</th><th>compr MiB</th>\
         <th>pool MiB</th><th>all-in MiB</th>",
    );
    out.push_str(
        "<th>overhead MiB</th><th>overhead</th><th>all-in overhead</th><th>same</th><th>huge</th>\
         <th>pages compacted (total so far)</th>",
    );
    if with_waste {
        out.push_str(
            "<th>rounding</th><th>partial</th><th>tail</th><th>meta</th><th>overhead with meta</th>",
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
    out.push_str("</table></div>\n");
    if with_waste {
        out.push_str(
            "<p class=\"note\">In % of compressed bytes: rounding = slots larger than their \
             objects; partial = free slots in partly used zspages (what compaction recovers); \
             tail = end of each zspage no slot can use; meta = the allocator's metadata \
             (handle tables, zspage descriptors, free stacks); overhead with meta = \
             (pool + meta − compr) / compr. overhead = (pool − compr) / compr and all-in \
             overhead = (all-in − compr) / compr, in %; pages compacted: the total since the \
             start of the run.</p>\n",
        );
    }
}
