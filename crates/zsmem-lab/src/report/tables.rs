//! The report's tables: the summary of all contestants, the all-in terms, each contestant's steps.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

use super::histogram::us;
use super::html::esc;
use super::plots::{color_of, hex, mib, step_label};
use crate::workloads::untar_rm::RunResult;

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

pub(super) fn summary_table(out: &mut String, runs: &[RunResult], skipped: &[(String, String)]) {
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

pub(super) fn step_table(out: &mut String, r: &RunResult) {
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
