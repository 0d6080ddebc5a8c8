//! "What the RFC saves": the 2026 zsmalloc RFC (000-zsmalloc-size-classes.txt) measured. The
//! kernel's current rules, the RFC's first patch (delta 16), both patches (delta 16 and the
//! RFC's chain rule) and zsmem's own configuration, side by side at one page size: pool and
//! all-in memory after every step, and store/load time. [`rfc_section`] for the report,
//! [`rfc_text`] for the terminal; both say nothing unless one of the RFC's variants ran beside
//! another of the four.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

use super::html::esc;
use crate::workloads::untar_rm::{RunResult, Step};

/// The four variants, in the RFC's order (see
/// [`crate::contestants::zsmem::variant_pool`]), and what each is.
pub const RFC_VARIANTS: [(&str, &str); 4] = [
    (
        "zsmem-kernel",
        "the kernel's current rules: class delta page/256, chain 8",
    ),
    ("zsmem-kernel-d16", "the RFC's first patch: delta 16"),
    (
        "zsmem-kernel-rfc",
        "both patches: delta 16 and the RFC's chain rule",
    ),
    ("zsmem", "zsmem's own configuration"),
];

/// The variants that ran, in [`RFC_VARIANTS`] order; empty unless one of
/// the RFC's own (`-d16`, `-rfc`) ran beside another (nothing to compare).
fn variants(runs: &[RunResult]) -> Vec<(&'static str, &RunResult)> {
    let v: Vec<_> = RFC_VARIANTS
        .iter()
        .filter_map(|(name, _)| Some((*name, runs.iter().find(|r| r.contestant == *name)?)))
        .collect();
    let rfc = v
        .iter()
        .any(|(n, _)| *n == "zsmem-kernel-d16" || *n == "zsmem-kernel-rfc");
    if v.len() < 2 || !rfc { Vec::new() } else { v }
}

fn mib(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

fn us(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

fn step_name(s: &Step) -> String {
    format!("r{}:{}", s.round, s.label)
}

/// "16 KiB" for 16384.
fn page_text(page_size: usize) -> String {
    format!("{} KiB", page_size.max(1) / 1024)
}

/// The steps as the first variant has them (every variant runs the same
/// workload, so the same steps).
fn steps<'a>(v: &[(&str, &'a RunResult)]) -> &'a [Step] {
    v.first().map_or(&[], |(_, r)| &r.steps[..])
}

/// `base` less `other` over `base`, in percent (0 when `base` is 0).
fn saving(base: u64, other: u64) -> f64 {
    if base == 0 {
        0.0
    } else {
        100.0 * (base as f64 - other as f64) / base as f64
    }
}

/// What a variant saves: its name, MiB and percent of the base's pool.
type Saving = (String, f64, f64);

/// The step with data where `zsmem-kernel` (or the first variant) holds
/// the most pool memory, and what each variant saves there against it.
fn worst_step_savings(v: &[(&str, &RunResult)]) -> Option<(String, Vec<Saving>)> {
    let (_, base) = v.first()?;
    let (i, s) = base
        .steps
        .iter()
        .enumerate()
        .filter(|(_, s)| s.figures.compr > 0)
        .max_by_key(|(_, s)| s.figures.pool)?;
    let rest = v[1..]
        .iter()
        .filter_map(|(name, r)| {
            let f = &r.steps.get(i)?.figures;
            let saved = s.figures.pool as f64 - f.pool as f64;
            Some((
                name.to_string(),
                saved / (1u64 << 20) as f64,
                saving(s.figures.pool, f.pool),
            ))
        })
        .collect();
    Some((step_name(s), rest))
}

/// Where the waste goes at the base's worst step, per variant: rounding
/// (what a finer class delta cuts) and free slots in held zspages (what
/// more classes, each with a zspage of its own, add), in % of compressed
/// bytes; `None` where a variant cannot tell.
fn waste_split(v: &[(&str, &RunResult)]) -> Option<String> {
    let (_, base) = v.first()?;
    let (i, _) = base
        .steps
        .iter()
        .enumerate()
        .filter(|(_, s)| s.figures.compr > 0)
        .max_by_key(|(_, s)| s.figures.pool)?;
    let parts: Vec<String> = v
        .iter()
        .filter_map(|(name, r)| {
            let f = &r.steps.get(i)?.figures;
            let w = f.waste?;
            let pct = |b: usize| 100.0 * b as f64 / f.compr.max(1) as f64;
            Some(format!(
                "{name} {:.2}% / {:.2}%",
                pct(w.rounding_bytes),
                pct(w.partial_bytes)
            ))
        })
        .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "there, rounding / free slots in held zspages (% of compr): {}",
            parts.join("; ")
        )
    })
}

/// The table as text, for `zsmem compare`'s terminal output; empty when
/// fewer than two of the four variants ran.
pub fn rfc_text(runs: &[RunResult], page_size: usize) -> String {
    let v = variants(runs);
    if v.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n== what the RFC saves at {} pages: pool / all-in MiB after each step",
        page_text(page_size)
    );
    for (name, _) in &v {
        if let Some((_, what)) = RFC_VARIANTS.iter().find(|(n, _)| n == name) {
            let _ = writeln!(out, "  {name}: {what}");
        }
    }
    // Wide enough for the longest step label (`r1:-Documentation`).
    let w = steps(&v)
        .iter()
        .map(|s| step_name(s).len())
        .chain([14])
        .max()
        .unwrap_or(14);
    let _ = write!(out, "{:<w$} {:>10}", "step", "compr MiB");
    for (name, _) in &v {
        let _ = write!(out, " | {name:>19}");
    }
    out.push('\n');
    for (i, s) in steps(&v).iter().enumerate() {
        let _ = write!(out, "{:<w$} {:>10.2}", step_name(s), mib(s.figures.compr));
        for (_, r) in &v {
            match r.steps.get(i) {
                Some(t) => {
                    let _ = write!(
                        out,
                        " | {:>9.2} / {:>7.2}",
                        mib(t.figures.pool),
                        mib(t.figures.all_in)
                    );
                }
                None => {
                    let _ = write!(out, " | {:>19}", "-");
                }
            }
        }
        out.push('\n');
    }
    for (what, pick) in [
        ("store p50/p99", |r: &RunResult| &r.latency.store),
        ("load p50/p99", |r: &RunResult| &r.latency.load),
    ] as [(&str, fn(&RunResult) -> &Histogram<u64>); 2]
    {
        let _ = write!(out, "{:<w$} {:>10}", what, "µs");
        for (_, r) in &v {
            let h = pick(r);
            let _ = write!(out, " | {:>9.2} / {:>7.2}", us(h, 0.5), us(h, 0.99));
        }
        out.push('\n');
    }
    let _ = write!(out, "{:<w$} {:>10}", "wall", "s");
    for (_, r) in &v {
        let _ = write!(out, " | {:>19.2}", r.wall.as_secs_f64());
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "compr is {}'s; the others' differ only by the pages each stores raw.",
        v[0].0
    );
    if let Some((step, rest)) = worst_step_savings(&v) {
        let _ = write!(
            out,
            "pool saved against {} at its worst step ({step}):",
            v[0].0
        );
        for (name, bytes, pct) in rest {
            let _ = write!(out, " {name} {bytes:.2} MiB ({pct:.2}%);");
        }
        out.push('\n');
    }
    if let Some(split) = waste_split(&v) {
        let _ = writeln!(out, "{split}");
    }
    let _ = writeln!(out, "{}", crate::workloads::untar_rm::LATENCY_NOTE);
    out
}

/// The table as an HTML section of the report; nothing when fewer than
/// two of the four variants ran.
pub(super) fn rfc_section(out: &mut String, runs: &[RunResult], page_size: usize) {
    let v = variants(runs);
    if v.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<section id=\"rfc\">\n<h2>What the RFC saves at {} pages</h2>\n<ul>",
        page_text(page_size)
    );
    for (name, _) in &v {
        if let Some((_, what)) = RFC_VARIANTS.iter().find(|(n, _)| n == name) {
            let _ = writeln!(out, "<li><b>{}</b>: {}</li>", esc(name), esc(what));
        }
    }
    out.push_str("</ul>\n<table class=\"steps\">\n<tr><th>round:step</th><th>compr MiB</th>");
    for (name, _) in &v {
        let _ = write!(
            out,
            "<th>{0} pool MiB</th><th>{0} all-in MiB</th>",
            esc(name)
        );
    }
    out.push_str("</tr>\n");
    for (i, s) in steps(&v).iter().enumerate() {
        let _ = write!(
            out,
            "<tr><td class=\"step\">{}</td><td class=\"n\">{:.2}</td>",
            esc(&step_name(s)),
            mib(s.figures.compr)
        );
        for (_, r) in &v {
            match r.steps.get(i) {
                Some(t) => {
                    let _ = write!(
                        out,
                        "<td class=\"n\">{:.2}</td><td class=\"n\">{:.2}</td>",
                        mib(t.figures.pool),
                        mib(t.figures.all_in)
                    );
                }
                None => out.push_str("<td colspan=\"2\"></td>"),
            }
        }
        out.push_str("</tr>\n");
    }
    for (what, pick) in [
        ("store p50 / p99 µs", |r: &RunResult| &r.latency.store),
        ("load p50 / p99 µs", |r: &RunResult| &r.latency.load),
    ] as [(&str, fn(&RunResult) -> &Histogram<u64>); 2]
    {
        let _ = write!(out, "<tr><td>{what}</td><td></td>");
        for (_, r) in &v {
            let h = pick(r);
            let _ = write!(
                out,
                "<td class=\"n\" colspan=\"2\">{:.2} / {:.2}</td>",
                us(h, 0.5),
                us(h, 0.99)
            );
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    let _ = writeln!(
        out,
        "<p class=\"note\">compr is {}'s; the others' differ only by the pages each stores raw.</p>",
        esc(v[0].0)
    );
    if let Some((step, rest)) = worst_step_savings(&v) {
        let _ = write!(
            out,
            "<p class=\"note\">Pool memory saved against {} at its worst step ({}):",
            esc(v[0].0),
            esc(&step)
        );
        for (name, bytes, pct) in rest {
            let _ = write!(out, " {} {bytes:.2} MiB ({pct:.2}%);", esc(&name));
        }
        if let Some(split) = waste_split(&v) {
            let _ = write!(out, " {}", esc(&split));
        }
        out.push_str("</p>\n");
    }
    let _ = writeln!(
        out,
        "<p class=\"note\">{}</p>\n</section>",
        esc(crate::workloads::untar_rm::LATENCY_NOTE)
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contestants::Figures;
    use crate::workloads::untar_rm::Latencies;

    fn run(name: &str, pools: &[u64]) -> RunResult {
        RunResult {
            contestant: name.into(),
            config: String::new(),
            steps: pools
                .iter()
                .enumerate()
                .map(|(i, &p)| Step {
                    round: 1,
                    label: format!("s{i}"),
                    figures: Figures {
                        compr: 100 << 20,
                        pool: p << 20,
                        all_in: (p + 1) << 20,
                        ..Figures::default()
                    },
                })
                .collect(),
            latency: Latencies::default(),
            wall: std::time::Duration::from_secs(1),
        }
    }

    #[test]
    fn needs_an_rfc_variant_and_another() {
        assert!(rfc_text(&[run("zsmem-kernel-rfc", &[110])], 16384).is_empty());
        let mut html = String::new();
        rfc_section(
            &mut html,
            &[run("zsmem", &[110]), run("zsmem-kernel", &[150])],
            16384,
        );
        assert!(html.is_empty(), "no RFC variant: today's tables only");
        rfc_section(
            &mut html,
            &[run("zsmem-kernel-rfc", &[110]), run("system", &[150])],
            16384,
        );
        assert!(html.is_empty());
    }

    #[test]
    fn rows_per_step_columns_per_variant_and_the_saving() {
        let runs = [
            run("zsmem", &[105, 101]),
            run("zsmem-kernel", &[120, 130]),
            run("zsmem-kernel-d16", &[112, 117]),
        ];
        let t = rfc_text(&runs, 16384);
        assert!(t.contains("at 16 KiB pages"), "{t}");
        let header = t.lines().find(|l| l.starts_with("step")).unwrap();
        // The RFC's order, not the runs' order.
        let k = header.find("zsmem-kernel ").unwrap();
        let d = header.find("zsmem-kernel-d16").unwrap();
        let z = header.rfind("zsmem").unwrap();
        assert!(k < d && d < z, "{header}");
        assert!(t.contains("r1:s1"), "{t}");
        assert!(t.contains("130.00 /  131.00"), "{t}");
        // Worst step of zsmem-kernel: s1, 130 MiB; d16 saves 13 (10%).
        assert!(
            t.contains("(r1:s1): zsmem-kernel-d16 13.00 MiB (10.00%)"),
            "{t}"
        );
        assert!(t.contains("syscall"), "{t}");
        let mut html = String::new();
        rfc_section(&mut html, &runs, 65536);
        assert!(
            html.contains("What the RFC saves at 64 KiB pages"),
            "{html}"
        );
        assert_eq!(html.matches("<tr><td class=\"step\">r1:").count(), 2);
    }
}
