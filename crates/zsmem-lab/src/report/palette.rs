//! How each contestant is drawn: its colour and dash pattern, the same in every plot and table.
//!
//! zsmem is always the same blue and the kernel's zram always near-black;
//! the others take the colours of a 12-colour qualitative palette in the
//! order they ran. A `-compact` variant shares its contestant's colour and
//! is dashed; past 12 contestants the colours come round again, dotted.

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

/// The dots of a contestant past the palette's length.
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

/// The look of every run, in order.
pub(super) fn looks(runs: &[RunResult]) -> Vec<Look> {
    let mut bases: Vec<&str> = Vec::new();
    runs.iter()
        .map(|r| {
            let (b, compact) = base(&r.contestant);
            let (color, round) = match b {
                "zsmem" => (ZSMEM_BLUE, 0),
                "kernel-zram" => (KERNEL_BLACK, 0),
                _ => {
                    let k = bases.iter().position(|x| *x == b).unwrap_or_else(|| {
                        bases.push(b);
                        bases.len() - 1
                    });
                    (PALETTE[k % PALETTE.len()], k / PALETTE.len())
                }
            };
            let dash = if compact {
                Some(COMPACT_DASH)
            } else if round > 0 {
                Some(SECOND_ROUND_DASH)
            } else {
                None
            };
            Look { color, dash }
        })
        .collect()
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
        // More contestants than colours: the rest are dotted.
        let many: Vec<String> = (0..14).map(|i| format!("c{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let l = looks(&runs(&refs));
        assert_eq!(l[12].color, l[0].color);
        assert_eq!(l[12].dash, Some(SECOND_ROUND_DASH));
    }
}
