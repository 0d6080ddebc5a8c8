//! How each contestant is drawn: its colour and dash pattern, the same in every plot and table.
//!
//! A contestant's colour is fixed by its name, so that afmalloc is the same
//! colour in every report whatever ran beside it: zsmem is always the same
//! blue, the kernel's zram always near-black, and every other contestant
//! `zsmem compare` knows has a colour of a 12-colour qualitative palette of
//! its own ([`NAMED`]). A `-compact` variant shares its contestant's colour
//! and is dashed. A name not in the list (a new contestant) takes a palette
//! colour from a hash of its name, dotted, so it is never mistaken for a
//! known one.

use plotters::style::RGBColor;

use crate::workloads::untar_rm::RunResult;

/// zsmem's colour, in every report.
pub(super) const ZSMEM_BLUE: RGBColor = RGBColor(31, 95, 205);

/// The kernel's zram's colour.
const KERNEL_BLACK: RGBColor = RGBColor(34, 34, 34);

/// The other contestants' colours: distinct hues, none close to zsmem's
/// blue or the kernel's black.
const PALETTE: [RGBColor; 12] = [
    RGBColor(214, 39, 40),   // red
    RGBColor(44, 160, 44),   // green
    RGBColor(255, 127, 14),  // orange
    RGBColor(148, 103, 189), // purple
    RGBColor(140, 86, 75),   // brown
    RGBColor(227, 119, 194), // pink
    RGBColor(127, 127, 127), // grey
    RGBColor(188, 189, 34),  // olive
    RGBColor(23, 190, 207),  // cyan
    RGBColor(0, 128, 118),   // teal
    RGBColor(196, 154, 0),   // gold
    RGBColor(120, 20, 60),   // wine
];

/// A dash pattern: `(dash, gap)` in pixels.
pub(super) type Dash = (u32, u32);

/// A compacted variant's dashes.
const COMPACT_DASH: Dash = (9, 5);

/// The dots of a contestant not in [`NAMED`].
const SECOND_ROUND_DASH: Dash = (3, 4);

/// How one contestant is drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Look {
    /// Line and swatch colour.
    pub color: RGBColor,
    /// `None`: a solid line.
    pub dash: Option<Dash>,
}

/// The contestant a name belongs to: `kernel-zram-compact` is drawn as
/// `kernel-zram`, dashed.
fn base(name: &str) -> (&str, bool) {
    match name.strip_suffix("-compact") {
        Some(b) if !b.is_empty() => (b, true),
        _ => (name, false),
    }
}

/// The contestants with a colour of their own: `PALETTE[i]` is `NAMED[i]`'s.
const NAMED: [&str; 12] = [
    "afmalloc",
    "zsmem-kernel",
    "mimalloc",
    "zsmem-classes",
    "zbud",
    "jemalloc",
    "system",
    "z3fold",
    "zblock",
    "zsmem-kernel-rfc",
    "zsmem-kernel-d16",
    "zswap",
];

/// A stable hash of a name (FNV-1a), for a colour that does not change
/// from one build or run to the next.
fn name_hash(name: &str) -> usize {
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    (h % PALETTE.len() as u64) as usize
}

/// The look of one contestant, by its name alone.
pub(super) fn look(name: &str) -> Look {
    let (b, compact) = base(name);
    let (color, known) = match b {
        "zsmem" => (ZSMEM_BLUE, true),
        "kernel-zram" => (KERNEL_BLACK, true),
        _ => match NAMED.iter().position(|n| *n == b) {
            Some(k) => (PALETTE[k], true),
            None => (PALETTE[name_hash(b)], false),
        },
    };
    let dash = if compact {
        Some(COMPACT_DASH)
    } else if !known {
        Some(SECOND_ROUND_DASH)
    } else {
        None
    };
    Look { color, dash }
}

/// The look of every run, in order.
pub(super) fn looks(runs: &[RunResult]) -> Vec<Look> {
    runs.iter().map(|r| look(&r.contestant)).collect()
}

pub(super) fn hex(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// A CSS swatch for a look: a filled square, or a dashed bar.
pub(super) fn swatch(l: Look) -> String {
    match l.dash {
        None => format!(
            "<span class=\"swatch\" style=\"background:{}\"></span>",
            hex(l.color)
        ),
        Some(_) => format!(
            "<span class=\"swatch dashed\" style=\"border-color:{}\"></span>",
            hex(l.color)
        ),
    }
}

/// A legend in HTML under a plot: a swatch and the name of each
/// contestant drawn, wrapped to the page's width (the plot's own legend,
/// on its right, is out of sight when a narrow screen scrolls the plot).
pub(super) fn legend_html<'a>(drawn: impl IntoIterator<Item = (&'a str, Look)>) -> String {
    let items: Vec<String> = drawn
        .into_iter()
        .map(|(name, l)| format!("<li>{}{}</li>", swatch(l), super::html::esc(name)))
        .collect();
    if items.is_empty() {
        String::new()
    } else {
        format!("<ul class=\"legend\">{}</ul>", items.concat())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::untar_rm::Latencies;
    use std::time::Duration;

    fn runs(names: &[&str]) -> Vec<RunResult> {
        names
            .iter()
            .map(|n| RunResult {
                contestant: n.to_string(),
                config: String::new(),
                steps: Vec::new(),
                latency: Latencies::default(),
                wall: Duration::ZERO,
            })
            .collect()
    }

    #[test]
    fn zsmem_is_always_blue_and_nobody_else_is() {
        for names in [
            &["zsmem", "system"][..],
            &["system", "jemalloc", "zsmem"][..],
        ] {
            let l = looks(&runs(names));
            let z = names.iter().position(|n| *n == "zsmem").unwrap();
            assert_eq!(l[z].color, ZSMEM_BLUE);
            assert_eq!(l.iter().filter(|x| x.color == ZSMEM_BLUE).count(), 1);
        }
    }

    #[test]
    fn thirteen_contestants_are_told_apart() {
        let names = [
            "zsmem",
            "zsmem-kernel",
            "zsmem-kernel-compact",
            "kernel-zram",
            "kernel-zram-compact",
            "system",
            "jemalloc",
            "mimalloc",
            "zbud",
            "z3fold",
            "zblock",
            "afmalloc",
            "afmalloc-compact",
        ];
        let l = looks(&runs(&names));
        for i in 0..l.len() {
            for j in i + 1..l.len() {
                assert_ne!(l[i], l[j], "{} and {}", names[i], names[j]);
            }
        }
        // A compacted variant: its contestant's colour, dashed.
        assert_eq!(l[3].color, l[4].color);
        assert_eq!((l[3].dash, l[4].dash), (None, Some(COMPACT_DASH)));
        // mimalloc no longer gets zsmem's colour (it did with 8 colours).
        assert_ne!(l[7].color, ZSMEM_BLUE);
        // A name not known: a palette colour, dotted, the same every time.
        let l = looks(&runs(&["c0", "c1"]));
        assert_eq!(l[0].dash, Some(SECOND_ROUND_DASH));
        assert_eq!(l, looks(&runs(&["c0", "c1"])));
    }

    /// A contestant keeps its colour whatever runs beside it and in
    /// whatever order (afmalloc was red in one report and zsmem-classes in
    /// another).
    #[test]
    fn colours_are_fixed_by_name() {
        let one = ["zsmem", "afmalloc", "zsmem-classes", "system"];
        let two = [
            "system",
            "zsmem-classes",
            "kernel-zram",
            "jemalloc",
            "afmalloc",
        ];
        let (a, b) = (looks(&runs(&one)), looks(&runs(&two)));
        for (i, n) in one.iter().enumerate() {
            if let Some(j) = two.iter().position(|m| m == n) {
                assert_eq!(a[i], b[j], "{n}");
            }
        }
        assert_ne!(look("afmalloc").color, look("zsmem-classes").color);
        // Every known name has a colour no other known name has.
        let mut all: Vec<&str> = NAMED.to_vec();
        all.extend(["zsmem", "kernel-zram"]);
        for (i, x) in all.iter().enumerate() {
            for y in &all[i + 1..] {
                assert_ne!(look(x).color, look(y).color, "{x} and {y}");
            }
        }
    }
}
