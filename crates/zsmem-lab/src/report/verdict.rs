//! Who wins: zsmem's all-in memory against the kernel's zram, step by step, and the nearest rival.
//!
//! Every sentence is computed from the runs: the reference is the kernel's
//! zram (`kernel-zram`, and `kernel-zram-compact` when it ran too), or the
//! first contestant when the kernel's zram did not run; when zsmem holds
//! more, the verdict says so.

use std::fmt::Write as _;

use super::html::esc;
use crate::workloads::untar_rm::{RunResult, Step};

/// The contestant the verdict is about.
pub(super) const ZSMEM: &str = "zsmem";

/// The kernel's zram, as `zsmem compare` names it, uncompacted then compacted.
const KERNEL: [&str; 2] = ["kernel-zram", "kernel-zram-compact"];

/// The runs the others are measured against: the kernel's zram runs that
/// are present, else the first run that is not zsmem (else zsmem's).
/// Indices into `runs`.
pub(super) fn references(runs: &[RunResult]) -> Vec<usize> {
    let kernel: Vec<usize> = KERNEL
        .iter()
        .filter_map(|k| runs.iter().position(|r| r.contestant == *k))
        .collect();
    if !kernel.is_empty() {
        return kernel;
    }
    runs.iter()
        .position(|r| r.contestant != ZSMEM)
        .or((!runs.is_empty()).then_some(0))
        .into_iter()
        .collect()
}

/// A step that holds data: compressed bytes present, not the final
/// compaction (as in [`RunResult::all_in_ratios`]).
fn holds_data(s: &Step) -> bool {
    s.figures.compr > 0 && s.label != "compact"
}

/// zsmem against one reference, over the steps both ran.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct StepCount {
    /// Steps compared (both hold data, same round and label).
    pub steps: usize,
    /// Steps where zsmem's all-in is below the reference's.
    pub less: usize,
    /// Smallest and largest saving `1 - zsmem / reference` over those steps
    /// (negative: zsmem holds more).
    pub range: (f64, f64),
    /// Saving at the peaks: `1 - peak(zsmem) / peak(reference)`.
    pub at_peak: f64,
}

/// Compare `a`'s all-in memory with `b`'s, step by step.
pub(super) fn step_count(a: &RunResult, b: &RunResult) -> Option<StepCount> {
    let mut steps = 0;
    let mut less = 0;
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for (x, y) in a.steps.iter().zip(&b.steps) {
        if x.round != y.round || x.label != y.label || !holds_data(x) || !holds_data(y) {
            continue;
        }
        if y.figures.all_in == 0 {
            continue;
        }
        steps += 1;
        if x.figures.all_in < y.figures.all_in {
            less += 1;
        }
        let saving = 1.0 - x.figures.all_in as f64 / y.figures.all_in as f64;
        lo = lo.min(saving);
        hi = hi.max(saving);
    }
    let peak = b.peak_all_in();
    (steps > 0 && peak > 0).then(|| StepCount {
        steps,
        less,
        range: (lo, hi),
        at_peak: 1.0 - a.peak_all_in() as f64 / peak as f64,
    })
}

/// `r`'s peak all-in relative to `reference`'s, as a signed fraction
/// (`-0.1`: 10% less); `None` when the reference held nothing.
pub(super) fn relative_peak(r: &RunResult, reference: &RunResult) -> Option<f64> {
    let base = reference.peak_all_in();
    (base > 0).then(|| r.peak_all_in() as f64 / base as f64 - 1.0)
}

fn pct(f: f64) -> String {
    format!("{:.1}%", f.abs() * 100.0)
}

/// "at every step (12 of 12)" or "at 7 of 12 steps".
fn how_often(c: &StepCount) -> String {
    if c.less == c.steps {
        format!("at every step ({} of {})", c.less, c.steps)
    } else {
        format!("at {} of {} steps", c.less, c.steps)
    }
}

/// The sentence about zsmem against one reference.
fn against(c: &StepCount, name: &str) -> String {
    let name = format!("<b>{}</b>", esc(name));
    let (lo, hi) = c.range;
    let word = |f: f64| if f >= 0.0 { "less" } else { "more" };
    let spread = if pct(lo) == pct(hi) && word(lo) == word(hi) {
        format!("{} {} at each", pct(lo), word(lo))
    } else {
        format!("from {} {} to {} {}", pct(lo), word(lo), pct(hi), word(hi))
    };
    if c.at_peak >= 0.0 {
        format!(
            "holds <b>{} less</b> memory (all-in, at the peak) than {name}, and less {} \
             (per step: {spread})",
            pct(c.at_peak),
            how_often(c),
        )
    } else {
        format!(
            "holds <b>{} more</b> memory (all-in, at the peak) than {name}; it holds less \
             only {} (per step: {spread})",
            pct(c.at_peak),
            how_often(c),
        )
    }
}

/// The verdict paragraph(s), as HTML.
pub(super) fn verdict(out: &mut String, runs: &[RunResult]) {
    out.push_str("<section id=\"verdict\">\n<h2>Verdict</h2>\n");
    let Some(z) = runs.iter().position(|r| r.contestant == ZSMEM) else {
        out.push_str(
            "<p>zsmem did not run, so there is no verdict about it; the table below ranks \
             the contestants that did by their peak all-in memory.</p>\n</section>\n",
        );
        return;
    };
    let refs: Vec<usize> = references(runs).into_iter().filter(|&i| i != z).collect();
    let kernel_ran = runs.iter().any(|r| KERNEL.contains(&r.contestant.as_str()));
    let mut parts: Vec<String> = Vec::new();
    for &i in &refs {
        if let Some(c) = step_count(&runs[z], &runs[i]) {
            parts.push(against(&c, &runs[i].contestant));
        }
    }
    out.push_str("<p class=\"verdict\">zsmem ");
    if parts.is_empty() {
        out.push_str("ran alone: there is nothing to compare it with");
    } else {
        out.push_str(&parts.join("; and it "));
    }
    out.push('.');
    if !kernel_ran && let Some(&i) = refs.first() {
        let _ = write!(
            out,
            " The kernel's zram did not run here (see the skipped contestants), so the \
             figures are relative to <b>{}</b>.",
            esc(&runs[i].contestant)
        );
    }
    // The nearest rival: the other allocator with the smallest peak all-in
    // (zsmem's own kernel configurations are zsmem, not rivals).
    let rival = runs
        .iter()
        .filter(|r| !r.contestant.starts_with("zsmem") && r.peak_all_in() > 0)
        .min_by_key(|r| r.peak_all_in());
    if let Some(r) = rival {
        let zp = runs[z].peak_all_in() as f64;
        let rp = r.peak_all_in() as f64;
        if rp >= zp {
            let _ = write!(
                out,
                " The nearest rival is <b>{}</b>, which holds {} more at its peak.",
                esc(&r.contestant),
                pct(rp / zp.max(1.0) - 1.0)
            );
        } else {
            let _ = write!(
                out,
                " <b>{}</b> beats zsmem: it holds {} less at its peak.",
                esc(&r.contestant),
                pct(1.0 - rp / zp)
            );
        }
    }
    // zsmem's other placement, when it ran: the two configurations side
    // by side, so a reader sees what the default buys.
    if let Some(l) = runs.iter().find(|r| r.contestant == "zsmem-classes") {
        let (zp, lp) = (runs[z].peak_all_in() as f64, l.peak_all_in() as f64);
        if zp > 0.0 && lp > 0.0 {
            let _ = write!(
                out,
                " Placed by size class as zsmalloc does (<b>zsmem-classes</b>), zsmem \
                 holds {} {} at its peak than with its default log placement.",
                pct((1.0 - lp / zp).abs()),
                if lp <= zp { "less" } else { "more" }
            );
        }
    }
    out.push_str("</p>\n");
    out.push_str(
        "<p class=\"note\">All-in memory counts everything held for the data the same way for \
         every contestant (the terms are listed under the summary); steps are compared where \
         both contestants held data, the final compaction left out.</p>\n</section>\n",
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contestants::Figures;
    use crate::workloads::untar_rm::Latencies;
    use std::time::Duration;

    fn run(name: &str, all_in: &[u64]) -> RunResult {
        RunResult {
            contestant: name.into(),
            config: String::new(),
            steps: all_in
                .iter()
                .enumerate()
                .map(|(i, &a)| Step {
                    round: 1,
                    label: format!("s{i}"),
                    figures: Figures {
                        compr: 100,
                        all_in: a,
                        ..Figures::default()
                    },
                })
                .collect(),
            latency: Latencies::default(),
            wall: Duration::ZERO,
        }
    }

    fn text(runs: &[RunResult]) -> String {
        let mut s = String::new();
        verdict(&mut s, runs);
        s
    }

    #[test]
    fn zsmem_winning_everywhere() {
        let runs = [
            run("zsmem", &[90, 180]),
            run("kernel-zram", &[100, 200]),
            run("kernel-zram-compact", &[95, 190]),
            run("system", &[700, 1400]),
        ];
        let c = step_count(&runs[0], &runs[1]).unwrap();
        assert_eq!((c.steps, c.less), (2, 2));
        assert!((c.at_peak - 0.1).abs() < 1e-9);
        let t = text(&runs);
        assert!(t.contains("<b>10.0% less</b>"), "{t}");
        assert!(t.contains("at every step (2 of 2)"), "{t}");
        assert!(t.contains("<b>5.3% less</b>"), "{t}");
        assert!(
            t.contains("nearest rival is <b>kernel-zram-compact</b>"),
            "{t}"
        );
    }

    #[test]
    fn class_placement_is_set_beside_zsmem_and_is_no_rival() {
        let runs = [
            run("zsmem", &[90, 150]),
            run("zsmem-classes", &[100, 200]),
            run("kernel-zram", &[300, 400]),
        ];
        let t = text(&runs);
        assert!(t.contains("<b>zsmem-classes</b>"), "{t}");
        assert!(t.contains("holds 33.3% more at its peak"), "{t}");
        assert!(t.contains("nearest rival is <b>kernel-zram</b>"), "{t}");
    }

    #[test]
    fn zsmem_losing_is_said() {
        let runs = [run("kernel-zram", &[100, 200]), run("zsmem", &[110, 190])];
        let t = text(&runs);
        assert!(t.contains("<b>5.0% less</b>"), "{t}");
        assert!(t.contains("at 1 of 2 steps"), "{t}");
        let runs = [run("kernel-zram", &[100, 200]), run("zsmem", &[110, 220])];
        let t = text(&runs);
        assert!(t.contains("<b>10.0% more</b>"), "{t}");
        assert!(t.contains("beats zsmem"), "{t}");
    }

    #[test]
    fn without_the_kernel_the_first_contestant_is_the_reference() {
        let runs = [run("jemalloc", &[300]), run("zsmem", &[100])];
        assert_eq!(references(&runs), vec![0]);
        let t = text(&runs);
        assert!(t.contains("did not run"), "{t}");
        assert!(t.contains("than <b>jemalloc</b>"), "{t}");
        assert!(text(&[run("kernel-zram", &[1])]).contains("zsmem did not run"));
        assert!(text(&[run("zsmem", &[1])]).contains("ran alone"));
        // zsmem first: the reference is the first other contestant.
        let runs = [run("zsmem", &[100]), run("system", &[700])];
        assert_eq!(references(&runs), vec![1]);
        let t = text(&runs);
        assert!(t.contains("<b>85.7% less</b>"), "{t}");
        assert!(t.contains("relative to <b>system</b>"), "{t}");
    }
}
