//! The HTML pieces of the report: escaping, contestant slugs, the style sheet, figures.

use std::fmt::Write as _;

use crate::workloads::untar_rm::RunResult;

/// `s` with `&`, `<`, `>`, `"` and `'` escaped for HTML text and attributes.
pub(super) fn esc(s: &str) -> String {
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
pub(super) fn unique_slugs(runs: &[RunResult]) -> Vec<String> {
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

pub(super) const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0 auto;max-width:1360px;padding:1em 2em;color:#222;background:#fff}
h1{margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
dl.meta{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}dl.meta dt{font-weight:600}dl.meta dd{margin:0}
code,pre{font-family:ui-monospace,'SFMono-Regular',Menlo,Consolas,monospace;font-size:.9em}
pre{background:#f6f8fa;border:1px solid #e1e4e8;padding:.6em;overflow-x:auto;line-height:1.25}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}table.summary{font-size:.82em}
th,td{border:1px solid #ddd;padding:.25em .6em}th{background:#f3f3f3}
td.n{text-align:right;font-variant-numeric:tabular-nums}td.skip{color:#a33}
tr:nth-child(even) td{background:#fafafa}
.swatch{display:inline-block;width:.9em;height:.9em;border-radius:2px;margin-right:.4em;vertical-align:-.1em}
.swatch.dashed{height:0;border-top:3px dashed;vertical-align:.25em}
td.name{white-space:nowrap}
/* More specific than the striped rows' rule above (tests check), so every best cell shows. */
table tr td.n.best,span.best{font-weight:700;background:#dff3df}
.wide{overflow-x:auto;max-width:100%}
p.verdict{font-size:1.15em;line-height:1.5;background:#f3f7ff;border-left:4px solid #1f5fcd;padding:.6em 1em}
figure{margin:1em 0;overflow-x:auto}figure svg{max-width:100%;height:auto;border:1px solid #eee}
figcaption,.note{color:#555;font-size:.9em}.empty{font-size:1.2em;color:#a33}
.skipped li{color:#a33}
/* Last, to win over the rules above at phone widths. */
details{margin:.6em 0}details>summary{cursor:pointer;font-weight:600}
ul.legend{list-style:none;padding:0;margin:.3em 0;display:flex;flex-wrap:wrap;gap:.2em 1.2em;font-size:.9em}
@media (max-width:600px){body{padding:.5em .8em}h1{font-size:1.4em}dl.meta{gap:.1em .6em;font-size:.9em}dl.meta dd{overflow-wrap:anywhere;min-width:0}p.verdict{font-size:1em}}
";

/// A plot as a figure: the SVG, then `legend` (HTML, may be empty), then
/// the caption naming the plot's file.
pub(super) fn figure(out: &mut String, svg: &str, file: &str, caption: &str, legend: &str) {
    let _ = writeln!(
        out,
        "<figure>\n{}\n{legend}<figcaption>{} (also <code>{}</code>)</figcaption>\n</figure>",
        svg.trim_end(),
        caption,
        esc(file)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_html() {
        assert_eq!(esc(r#"a<b&"c"'d>"#), "a&lt;b&amp;&quot;c&quot;&#39;d&gt;");
        assert_eq!(esc("plain µs"), "plain µs");
    }

    /// A selector's specificity: (ids, classes and pseudo-classes, types),
    /// enough for the simple selectors of [`STYLE`].
    fn specificity(selector: &str) -> (usize, usize, usize) {
        let (mut ids, mut classes, mut types) = (0, 0, 0);
        for part in selector
            .split([' ', '>', '+', '~'])
            .filter(|p| !p.is_empty())
        {
            let mut chars = part.chars().peekable();
            if chars.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
                types += 1;
            }
            let mut depth = 0;
            for c in part.chars() {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    '#' if depth == 0 => ids += 1,
                    '.' | ':' | '[' if depth == 0 => classes += 1,
                    _ => {}
                }
            }
        }
        (ids, classes, types)
    }

    /// Every rule of [`STYLE`] outside `@media`: (selector, declarations).
    fn rules() -> Vec<(String, String)> {
        let mut out = Vec::new();
        let css: String = STYLE
            .lines()
            .filter(|l| !l.starts_with("@media") && !l.starts_with("/*"))
            .collect();
        for rule in css.split('}') {
            if let Some((sel, body)) = rule.split_once('{') {
                for s in sel.split(',') {
                    out.push((s.trim().to_string(), body.to_string()));
                }
            }
        }
        out
    }

    /// The best cell's background is not overridden by a more specific
    /// rule on table cells (the striped rows' once was, so only the best
    /// cells of odd rows showed).
    #[test]
    fn the_best_cell_rule_wins_over_every_cell_background() {
        let rules = rules();
        let best = rules
            .iter()
            .find(|(s, _)| s.ends_with(".best") && s.contains("td"))
            .expect("a rule for td.best");
        assert!(best.1.contains("background"), "{best:?}");
        let mine = specificity(&best.0);
        for (sel, body) in &rules {
            let on_cells = sel.ends_with("td") || sel.contains("td.") || sel.ends_with("th,td");
            if sel != &best.0 && on_cells && body.contains("background") {
                assert!(
                    specificity(sel) < mine,
                    "`{sel}` {:?} overrides `{}` {mine:?}",
                    specificity(sel),
                    best.0
                );
            }
        }
        assert_eq!(specificity("tr:nth-child(even) td"), (0, 1, 2));
        assert_eq!(specificity("table tr td.n.best"), (0, 2, 3));
    }

    /// At a phone's width a plot is scaled to the screen, not given a fixed
    /// width that scrolled its legend out of sight.
    #[test]
    fn narrow_screens_scale_the_plots() {
        let narrow = &STYLE[STYLE.find("@media (max-width:600px)").unwrap()..];
        assert!(!narrow.contains("svg"), "{narrow}");
        assert!(STYLE.contains("figure svg{max-width:100%"));
        assert!(STYLE.contains("ul.legend{"));
    }

    #[test]
    fn slugs_are_safe_and_unique() {
        assert_eq!(slug("zsmem-kernel"), "zsmem-kernel");
        assert_eq!(slug("a<b&\"c\""), "a_b__c_");
        assert_eq!(slug("../x"), "___x");
        assert_eq!(slug(""), "_");
    }
}
