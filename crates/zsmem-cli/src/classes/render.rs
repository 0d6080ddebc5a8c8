//! Rendering a simulation: the aligned text table with its summary (side by side with `--vs-*`), CSV, JSON.

use std::fmt::Write as _;

use super::simulate::{Cell, Row, Simulation, Summary};

/// Column headers of the table, in order.
const HEADERS: [&str; 6] = [
    "Phys",
    "Chain",
    "Objs/zspage",
    "TailWaste",
    "MergeWaste",
    "Span",
];
/// Column names of the CSV output, matching [`HEADERS`].
const CSV_HEADERS: [&str; 6] = [
    "phys",
    "chain",
    "objs_per_zspage",
    "tail_waste",
    "merge_waste",
    "span",
];

fn cell_values(c: Option<&Cell>) -> [String; 6] {
    match c {
        Some(c) => [
            c.phys,
            c.chain,
            c.objs_per_zspage,
            c.tail_waste,
            c.merge_waste,
            c.span,
        ]
        .map(|v| v.to_string()),
        None => Default::default(),
    }
}

/// A column of a text grid.
struct Col {
    head: String,
    cells: Vec<String>,
    left: bool,
}

/// Columns shown under one title.
struct Group {
    title: String,
    cols: Vec<Col>,
}

fn col(head: &str, cells: Vec<String>) -> Col {
    Col {
        head: head.to_string(),
        cells,
        left: false,
    }
}

/// Render groups of columns as an aligned text grid: an optional title line,
/// a header line, a rule, then the cells. Groups are separated by `||`.
fn render_grid(groups: &[Group], out: &mut String) {
    let mut widths: Vec<Vec<usize>> = groups
        .iter()
        .map(|g| {
            g.cols
                .iter()
                .map(|c| {
                    c.cells
                        .iter()
                        .map(String::len)
                        .fold(c.head.len(), usize::max)
                })
                .collect()
        })
        .collect();
    // A title longer than its columns widens the group's last column, so
    // the group separators stay straight.
    for (g, w) in groups.iter().zip(&mut widths) {
        let inner = w.iter().sum::<usize>() + 3 * (w.len() - 1);
        if g.title.len() > inner {
            *w.last_mut().unwrap() += g.title.len() - inner;
        }
    }
    let line = |f: &dyn Fn(&Col, usize) -> String, within: &str, between: &str| -> String {
        let parts: Vec<String> = groups
            .iter()
            .zip(&widths)
            .map(|(g, w)| {
                let cols: Vec<String> = g.cols.iter().zip(w).map(|(c, &w)| f(c, w)).collect();
                cols.join(within)
            })
            .collect();
        parts.join(between).trim_end().to_string()
    };
    if groups.iter().any(|g| !g.title.is_empty()) {
        let titles: Vec<String> = groups
            .iter()
            .zip(&widths)
            .map(|(g, w)| {
                let inner = w.iter().sum::<usize>() + 3 * (w.len() - 1);
                format!("{:<inner$}", g.title)
            })
            .collect();
        let _ = writeln!(out, "{}", titles.join(" || ").trim_end());
    }
    let pad = |s: &str, c: &Col, w: usize| {
        if c.left {
            format!("{s:<w$}")
        } else {
            format!("{s:>w$}")
        }
    };
    let _ = writeln!(out, "{}", line(&|c, w| pad(&c.head, c, w), " | ", " || "));
    let _ = writeln!(out, "{}", line(&|_, w| "-".repeat(w), "-+-", "-++-"));
    let rows = groups
        .iter()
        .flat_map(|g| g.cols.iter().map(|c| c.cells.len()))
        .max()
        .unwrap_or(0);
    for r in 0..rows {
        let cell = |c: &Col, w: usize| pad(c.cells.get(r).map_or("", String::as_str), c, w);
        let _ = writeln!(out, "{}", line(&cell, " | ", " || "));
    }
}

fn pct(f: f64) -> String {
    format!("{:.2}%", f * 100.0)
}

fn signed(b: usize, a: usize) -> String {
    let d = b as i128 - a as i128;
    if d == 0 { "0".into() } else { format!("{d:+}") }
}

fn pp(b: f64, a: f64) -> String {
    format!("{:+.2} pp", (b - a) * 100.0)
}

/// Summary lines: (metric, value as text).
fn summary_lines(s: &Summary) -> Vec<(&'static str, String)> {
    vec![
        ("logical classes", s.logical_classes.to_string()),
        ("physical classes", s.physical_classes.to_string()),
        ("huge_class_size", s.huge_class_size.to_string()),
        (
            "largest non-huge class",
            s.largest_non_huge.map_or("none".into(), |v| v.to_string()),
        ),
        (
            "avg effective waste",
            s.avg_effective_waste.map_or("-".into(), pct),
        ),
        ("spanning objects", s.spanning_objects.to_string()),
        ("object slots", s.object_slots.to_string()),
        ("spanning share", pct(s.spanning_share)),
        ("span, all logical classes", s.logical_span.to_string()),
    ]
}

fn summary_diffs(a: &Summary, b: &Summary) -> Vec<String> {
    vec![
        signed(b.logical_classes, a.logical_classes),
        signed(b.physical_classes, a.physical_classes),
        signed(b.huge_class_size, a.huge_class_size),
        match (a.largest_non_huge, b.largest_non_huge) {
            (Some(x), Some(y)) => signed(y, x),
            _ => "-".into(),
        },
        match (a.avg_effective_waste, b.avg_effective_waste) {
            (Some(x), Some(y)) => pp(y, x),
            _ => "-".into(),
        },
        signed(b.spanning_objects, a.spanning_objects),
        signed(b.object_slots, a.object_slots),
        pp(b.spanning_share, a.spanning_share),
        signed(b.logical_span, a.logical_span),
    ]
}

/// Render a simulation as an aligned table followed by its summary.
pub fn render_table(sim: &Simulation) -> String {
    let mut out = String::new();
    let req = Col {
        head: "Req".into(),
        cells: sim.rows.iter().map(|r| r.req.to_string()).collect(),
        left: false,
    };
    let group_of = |title: String, pick: &dyn Fn(&Row) -> Option<&Cell>| {
        let values: Vec<[String; 6]> = sim.rows.iter().map(|r| cell_values(pick(r))).collect();
        Group {
            title,
            cols: (0..6)
                .map(|i| col(HEADERS[i], values.iter().map(|v| v[i].clone()).collect()))
                .collect(),
        }
    };
    let groups = match &sim.config_b {
        None => {
            // One configuration: its label heads the table and Req sits in
            // the same group as the other columns.
            let _ = writeln!(out, "{}", sim.config_a.label);
            let mut g = group_of(String::new(), &|r| r.a.as_ref());
            g.cols.insert(0, req);
            vec![g]
        }
        Some(b) => vec![
            Group {
                title: String::new(),
                cols: vec![req],
            },
            group_of(format!("A: {}", sim.config_a.label), &|r| r.a.as_ref()),
            group_of(format!("B: {}", b.label), &|r| r.b.as_ref()),
        ],
    };
    render_grid(&groups, &mut out);
    out.push('\n');

    let lines_a = summary_lines(&sim.summary_a);
    let metric = Col {
        head: "Summary".into(),
        cells: lines_a.iter().map(|(m, _)| m.to_string()).collect(),
        left: true,
    };
    let mut cols = vec![metric];
    match &sim.summary_b {
        None => cols.push(col("Value", lines_a.into_iter().map(|(_, v)| v).collect())),
        Some(sb) => {
            cols.push(col("A", lines_a.into_iter().map(|(_, v)| v).collect()));
            cols.push(col(
                "B",
                summary_lines(sb).into_iter().map(|(_, v)| v).collect(),
            ));
            cols.push(col("B - A", summary_diffs(&sim.summary_a, sb)));
        }
    }
    render_grid(
        &[Group {
            title: String::new(),
            cols,
        }],
        &mut out,
    );
    // The metrics are easy to misread; say what they mean under the table.
    let _ = writeln!(
        out,
        "\navg effective waste: share of a zspage not holding requested bytes when it is full\n  \
         of objects of exactly Req bytes (tail waste plus rounding up to Phys), averaged over\n  \
         the {} rows shown.",
        sim.rows.len()
    );
    let _ = writeln!(
        out,
        "spanning objects, object slots: of one zspage per non-huge physical class, summed;\n  \
         spanning share = spanning objects / object slots.\n\
         span, all logical classes: Span of each logical class's physical class, summed over\n  \
         all logical classes (the RFC simulator's \"Total Span (All Logicals)\")."
    );
    out
}

/// Render the rows as CSV: a header line and one line per request. The
/// summary is left out so that every line after the header is a row.
pub fn render_csv(sim: &Simulation) -> String {
    let mut out = String::from("req");
    let prefixes: &[&str] = if sim.config_b.is_some() {
        &["a_", "b_"]
    } else {
        &[""]
    };
    for p in prefixes {
        for h in CSV_HEADERS {
            let _ = write!(out, ",{p}{h}");
        }
    }
    out.push('\n');
    for r in &sim.rows {
        let _ = write!(out, "{}", r.req);
        let mut cells = vec![cell_values(r.a.as_ref())];
        if sim.config_b.is_some() {
            cells.push(cell_values(r.b.as_ref()));
        }
        for v in cells.iter().flatten() {
            let _ = write!(out, ",{v}");
        }
        out.push('\n');
    }
    out
}

/// Render the whole simulation as pretty-printed JSON.
pub fn render_json(sim: &Simulation) -> String {
    // Serializing plain structs of numbers and strings cannot fail.
    let mut s = serde_json::to_string_pretty(sim).expect("simulation serializes");
    s.push('\n');
    s
}
