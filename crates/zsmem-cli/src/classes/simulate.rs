//! `zsmem classes`: the size-class simulator.
//!
//! For a range of request sizes it shows which physical class serves each
//! request, that class's zspage shape, and what it wastes, optionally next
//! to a second configuration that differs in exactly one parameter. This is
//! the table the 2026 RFC ("drop hard limit on the number of size classes")
//! argues with.
//!
//! The computation ([`simulate`]) is a pure function returning a
//! [`Simulation`]; rendering it as a table, CSV or JSON is separate.

use std::fmt::Write as _;
use std::io::{self, Write as _};

use serde::Serialize;
use zsmem::{ChainRule, SizeClassConfig, SizeClassTable};

use crate::units::parse_size;
use crate::{CliError, CliResult};

/// The class delta as given on the command line: bytes, or `legacy`.
///
/// `legacy` is kept symbolic rather than resolved at parse time so that it
/// follows the page size of each configuration (`--vs-page-size` with a
/// legacy delta compares `4K/16` against `16K/64`, as the kernel would).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delta {
    /// `page_size >> 8`, the kernel's delta before the RFC.
    Legacy,
    /// A fixed number of bytes.
    Bytes(usize),
}

impl Delta {
    /// The delta in bytes for a given page size.
    pub fn resolve(self, page_size: usize) -> usize {
        match self {
            Delta::Legacy => SizeClassConfig::legacy_delta(page_size),
            Delta::Bytes(b) => b,
        }
    }
}

/// Output format of `zsmem classes`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Format {
    /// Aligned table followed by a summary.
    #[default]
    Table,
    /// One header line and one line per request size; no summary.
    Csv,
    /// One pretty-printed JSON object with rows and summaries.
    Json,
}

fn parse_size_arg(s: &str) -> Result<usize, String> {
    parse_size(s)
}

fn parse_delta(s: &str) -> Result<Delta, String> {
    if s.trim().eq_ignore_ascii_case("legacy") {
        return Ok(Delta::Legacy);
    }
    parse_size(s).map(Delta::Bytes).map_err(|_| {
        format!(
            "`{s}` is not a class delta: give bytes (a multiple of 8) or `legacy` (page size / 256)"
        )
    })
}

fn parse_rule(s: &str) -> Result<ChainRule, String> {
    ChainRule::parse(s).map_err(|e| match e {
        zsmem::Error::InvalidConfig(m) => m,
        other => other.to_string(),
    })
}

/// Arguments of `zsmem classes`.
#[derive(clap::Args, Debug, Clone, PartialEq)]
#[command(
    group(clap::ArgGroup::new("vs").multiple(false)),
    after_help = "Rows are request sizes from --from to --to in steps of --step. Columns: \
Req = request size; Phys = size of the physical class serving it; Chain = pages per zspage; \
Objs/zspage = objects per zspage; TailWaste = bytes at the end of a zspage no object can use; \
MergeWaste = (Phys - Req) * Objs/zspage; Span = objects per zspage straddling a page boundary.\n\n\
With one --vs-* option, configuration B is A with that parameter changed, shown side by side \
with a B - A difference column in the summary.\n\n\
--format csv prints only the rows (a header line, then one line per request; columns prefixed \
a_/b_ when comparing, empty cells where a request exceeds that configuration's page size); \
it omits the summary. Use --format json for rows and summaries together."
)]
pub struct ClassesArgs {
    /// Page size: a power of two from 4K to 64K.
    #[arg(long, value_name = "SIZE", default_value = "4K", value_parser = parse_size_arg)]
    pub page_size: usize,
    /// Most pages a zspage may chain (CONFIG_ZSMALLOC_CHAIN_SIZE), 1 to 32.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub chain: usize,
    /// Class delta in bytes (a multiple of 8), or `legacy` for page size / 256.
    #[arg(long, value_name = "BYTES|legacy", default_value = "16", value_parser = parse_delta)]
    pub delta: Delta,
    /// Chain-length rule: min-waste (kernel since 6.3), used-percent (before
    /// 6.3) or span-aware (the RFC's second patch).
    #[arg(long, value_name = "RULE", default_value = "min-waste", value_parser = parse_rule)]
    pub rule: ChainRule,
    /// First request size shown.
    #[arg(long, value_name = "SIZE", default_value = "32", value_parser = parse_size_arg)]
    pub from: usize,
    /// Last request size shown [default: the (largest) page size].
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    pub to: Option<usize>,
    /// Distance between request rows [default: the smallest class delta
    /// compared, at most 16].
    #[arg(long, value_name = "BYTES", value_parser = parse_size_arg)]
    pub step: Option<usize>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Compare with configuration B using this class delta (or `legacy`).
    #[arg(long, value_name = "BYTES|legacy", value_parser = parse_delta, group = "vs")]
    pub vs_delta: Option<Delta>,
    /// Compare with configuration B using this chain size.
    #[arg(long, value_name = "N", group = "vs")]
    pub vs_chain: Option<usize>,
    /// Compare with configuration B using this chain-length rule.
    #[arg(long, value_name = "RULE", value_parser = parse_rule, group = "vs")]
    pub vs_rule: Option<ChainRule>,
    /// Compare with configuration B using this page size.
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg, group = "vs")]
    pub vs_page_size: Option<usize>,
}

impl Default for ClassesArgs {
    /// The same values as clap's defaults (checked by a test), so that
    /// `zsmem` with no subcommand prints the default table.
    fn default() -> Self {
        ClassesArgs {
            page_size: 4096,
            chain: 8,
            delta: Delta::Bytes(16),
            rule: ChainRule::MinWaste,
            from: 32,
            to: None,
            step: None,
            format: Format::Table,
            vs_delta: None,
            vs_chain: None,
            vs_rule: None,
            vs_page_size: None,
        }
    }
}

/// One simulated configuration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Config {
    /// Short human label, e.g. `16K chain 8 delta 64 min-waste`.
    pub label: String,
    /// The resolved parameters.
    #[serde(flatten)]
    pub params: SizeClassConfig,
}

/// How one configuration serves one request size.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cell {
    /// Size of the physical class serving the request.
    pub phys: usize,
    /// Pages per zspage of that class.
    pub chain: usize,
    /// Objects per zspage of that class.
    pub objs_per_zspage: usize,
    /// Bytes at the end of each zspage no object can use.
    pub tail_waste: usize,
    /// `(phys - req) * objs_per_zspage`: bytes lost per zspage to rounding
    /// the request up to its physical class.
    pub merge_waste: usize,
    /// Objects per zspage that straddle a page boundary.
    pub span: usize,
    /// Fraction of a zspage not holding requested bytes when it is full of
    /// requests of exactly this size.
    pub effective_waste: f64,
}

/// One request size and how each configuration serves it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// Request size in bytes.
    pub req: usize,
    /// Configuration A; `None` if the request exceeds A's page size.
    pub a: Option<Cell>,
    /// Configuration B; `None` without a comparison or if the request
    /// exceeds B's page size.
    pub b: Option<Cell>,
}

/// Whole-table facts about one configuration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Number of logical classes.
    pub logical_classes: usize,
    /// Number of physical classes after merging.
    pub physical_classes: usize,
    /// The kernel's `huge_class_size`.
    pub huge_class_size: usize,
    /// Size of the largest class that is not huge, if any.
    pub largest_non_huge: Option<usize>,
    /// Rows of the simulation this configuration serves.
    pub rows_served: usize,
    /// Mean of [`Cell::effective_waste`] over the rows served; `None` if no
    /// row is served.
    pub avg_effective_waste: Option<f64>,
    /// Spanning objects of one zspage, summed over non-huge physical classes.
    pub spanning_objects: usize,
    /// Object slots of one zspage, summed over non-huge physical classes.
    pub object_slots: usize,
    /// `spanning_objects / object_slots` (0 if there are no slots).
    pub spanning_share: f64,
}

/// The result of a simulation: rows and per-configuration summaries.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Simulation {
    /// The configuration given by `--page-size`, `--chain`, `--delta`, `--rule`.
    pub config_a: Config,
    /// The comparison configuration, if a `--vs-*` option was given.
    pub config_b: Option<Config>,
    /// One row per request size.
    pub rows: Vec<Row>,
    /// Summary of configuration A.
    pub summary_a: Summary,
    /// Summary of configuration B, if any.
    pub summary_b: Option<Summary>,
}

/// Largest number of rows a simulation produces; more is a typo, not a
/// question (64K pages at step 1 is 65536 rows and still fits).
const MAX_ROWS: usize = 1 << 20;

fn page_label(page: usize) -> String {
    if page % 1024 == 0 {
        format!("{}K", page / 1024)
    } else {
        page.to_string()
    }
}

fn config_label(cfg: &SizeClassConfig, delta: Delta) -> String {
    let legacy = if delta == Delta::Legacy {
        " (legacy)"
    } else {
        ""
    };
    format!(
        "{} chain {} delta {}{} {}",
        page_label(cfg.page_size),
        cfg.chain_size,
        cfg.class_delta,
        legacy,
        cfg.chain_rule.name()
    )
}

/// A built table plus what rows need from it, computed once.
struct Model {
    config: Config,
    table: SizeClassTable,
    /// Spanning objects per zspage, by class index (physical classes only).
    span: Vec<usize>,
}

impl Model {
    fn new(cfg: SizeClassConfig, delta: Delta) -> zsmem::Result<Self> {
        let table = SizeClassTable::new(cfg)?;
        let mut span = vec![0; table.len()];
        for &i in table.physical_indices() {
            span[i] = table.classes()[i].spanning_objects(cfg.page_size);
        }
        Ok(Model {
            config: Config {
                label: config_label(&cfg, delta),
                params: cfg,
            },
            table,
            span,
        })
    }

    fn page(&self) -> usize {
        self.config.params.page_size
    }

    fn cell(&self, req: usize) -> Option<Cell> {
        // Requests above the page size are not served by any size class;
        // `index_for` would silently clamp them.
        if req > self.page() {
            return None;
        }
        let p = self.table.physical_for(req);
        Some(Cell {
            phys: p.size,
            chain: p.pages_per_zspage,
            objs_per_zspage: p.objs_per_zspage,
            tail_waste: p.tail_waste(self.page()),
            merge_waste: self.table.merge_waste(req),
            span: self.span[p.index],
            effective_waste: self.table.effective_waste(req),
        })
    }

    fn summary<'a>(&self, cells: impl Iterator<Item = Option<&'a Cell>>) -> Summary {
        let (n, sum) = cells
            .flatten()
            .fold((0usize, 0f64), |(n, s), c| (n + 1, s + c.effective_waste));
        let (spanning, slots) = self
            .table
            .physical_indices()
            .iter()
            .map(|&i| &self.table.classes()[i])
            .filter(|c| !c.is_huge())
            .fold((0, 0), |(s, o), c| {
                (s + self.span[c.index], o + c.objs_per_zspage)
            });
        Summary {
            logical_classes: self.table.len(),
            physical_classes: self.table.physical_count(),
            huge_class_size: self.table.huge_class_size(),
            largest_non_huge: self.table.largest_non_huge_size(),
            rows_served: n,
            avg_effective_waste: (n > 0).then(|| sum / n as f64),
            spanning_objects: spanning,
            object_slots: slots,
            spanning_share: if slots == 0 {
                0.0
            } else {
                spanning as f64 / slots as f64
            },
        }
    }
}

/// Configuration B's parameters and the option that produced them.
fn config_b(a: &ClassesArgs) -> CliResult<Option<(SizeClassConfig, Delta, String)>> {
    let given = [
        a.vs_delta.is_some(),
        a.vs_chain.is_some(),
        a.vs_rule.is_some(),
        a.vs_page_size.is_some(),
    ];
    // clap enforces this through the `vs` group; checked again for callers
    // that build `ClassesArgs` by hand.
    if given.iter().filter(|g| **g).count() > 1 {
        return Err(CliError::Usage(
            "give at most one of --vs-delta, --vs-chain, --vs-rule, --vs-page-size: \
             configuration B differs from A in exactly one parameter"
                .into(),
        ));
    }
    let (page, chain, delta, rule, flag) = if let Some(d) = a.vs_delta {
        let shown = match d {
            Delta::Legacy => "legacy".to_string(),
            Delta::Bytes(b) => b.to_string(),
        };
        (
            a.page_size,
            a.chain,
            d,
            a.rule,
            format!("--vs-delta {shown}"),
        )
    } else if let Some(c) = a.vs_chain {
        (a.page_size, c, a.delta, a.rule, format!("--vs-chain {c}"))
    } else if let Some(r) = a.vs_rule {
        (
            a.page_size,
            a.chain,
            a.delta,
            r,
            format!("--vs-rule {}", r.name()),
        )
    } else if let Some(p) = a.vs_page_size {
        (p, a.chain, a.delta, a.rule, format!("--vs-page-size {p}"))
    } else {
        return Ok(None);
    };
    let cfg = SizeClassConfig {
        page_size: page,
        chain_size: chain,
        class_delta: delta.resolve(page),
        chain_rule: rule,
    };
    Ok(Some((cfg, delta, flag)))
}

/// Compute the rows and summaries for `a`; no output.
pub fn simulate(a: &ClassesArgs) -> CliResult<Simulation> {
    let cfg_a = SizeClassConfig {
        page_size: a.page_size,
        chain_size: a.chain,
        class_delta: a.delta.resolve(a.page_size),
        chain_rule: a.rule,
    };
    let model_a = Model::new(cfg_a, a.delta)?;
    let model_b = match config_b(a)? {
        Some((cfg, delta, flag)) => Some(
            Model::new(cfg, delta)
                .map_err(|e| CliError::Usage(format!("configuration B ({flag}): {e}")))?,
        ),
        None => None,
    };

    let max_page = model_b
        .as_ref()
        .map_or(model_a.page(), |b| b.page().max(model_a.page()));
    let to = a.to.unwrap_or(max_page);
    if a.from == 0 {
        return Err(CliError::Usage(
            "--from must be at least 1: a request holds at least 1 byte".into(),
        ));
    }
    if a.from > to {
        let whence = if a.to.is_none() {
            " (the page size)"
        } else {
            ""
        };
        return Err(CliError::Usage(format!(
            "--from {} is larger than --to {to}{whence}",
            a.from
        )));
    }
    if to > max_page {
        return Err(CliError::Usage(format!(
            "--to {to} is larger than the page size {max_page}: \
             larger requests are not served by size classes"
        )));
    }
    let min_delta = model_b.as_ref().map_or(cfg_a.class_delta, |b| {
        b.config.params.class_delta.min(cfg_a.class_delta)
    });
    let step = a.step.unwrap_or(min_delta.min(16));
    if step == 0 {
        return Err(CliError::Usage("--step must be at least 1".into()));
    }
    let count = (to - a.from) / step + 1;
    if count > MAX_ROWS {
        return Err(CliError::Usage(format!(
            "--from {} --to {to} --step {step} gives {count} rows, more than {MAX_ROWS}: \
             raise --step or narrow the range",
            a.from
        )));
    }

    let rows: Vec<Row> = (a.from..=to)
        .step_by(step)
        .map(|req| Row {
            req,
            a: model_a.cell(req),
            b: model_b.as_ref().and_then(|m| m.cell(req)),
        })
        .collect();
    let summary_a = model_a.summary(rows.iter().map(|r| r.a.as_ref()));
    let summary_b = model_b
        .as_ref()
        .map(|m| m.summary(rows.iter().map(|r| r.b.as_ref())));
    Ok(Simulation {
        config_a: model_a.config,
        config_b: model_b.map(|m| m.config),
        rows,
        summary_a,
        summary_b,
    })
}

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
         spanning share = spanning objects / object slots."
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

/// Run `zsmem classes`.
pub fn run(a: &ClassesArgs) -> CliResult {
    let sim = simulate(a)?;
    let text = match a.format {
        Format::Table => render_table(&sim),
        Format::Csv => render_csv(&sim),
        Format::Json => render_json(&sim),
    };
    match io::stdout().lock().write_all(text.as_bytes()) {
        // The reader (e.g. `head`) has what it wanted: not an error.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: ClassesArgs,
    }

    /// Parse a space-separated argument line as `zsmem classes` would.
    fn try_parse(args: &str) -> Result<ClassesArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("classes").chain(args.split_whitespace())).map(|c| c.a)
    }

    fn parse(args: &str) -> ClassesArgs {
        try_parse(args).unwrap()
    }

    fn cell(c: &Cell) -> (usize, usize, usize, usize, usize) {
        (
            c.phys,
            c.chain,
            c.objs_per_zspage,
            c.tail_waste,
            c.merge_waste,
        )
    }

    const RFC: &str = "--page-size 16K --chain 8 --delta 64 --from 1072 --to 1120 --vs-delta 16";

    #[test]
    fn default_matches_clap_defaults() {
        assert_eq!(parse(""), ClassesArgs::default());
    }

    #[test]
    fn rfc_example_16k_delta_64_vs_16() {
        let sim = simulate(&parse(RFC)).unwrap();
        let reqs: Vec<usize> = sim.rows.iter().map(|r| r.req).collect();
        assert_eq!(reqs, [1072, 1088, 1104, 1120]);
        let want_a = [5616, 3744, 1872, 0];
        let want_b = [
            (1072, 4, 61, 144, 0),
            (1088, 1, 15, 64, 0),
            (1104, 6, 89, 48, 0),
            (1120, 8, 117, 32, 0),
        ];
        for ((r, merge), b) in sim.rows.iter().zip(want_a).zip(want_b) {
            let a = r.a.as_ref().unwrap();
            assert_eq!(cell(a), (1120, 8, 117, 32, merge), "A {}", r.req);
            assert_eq!(cell(r.b.as_ref().unwrap()), b, "B {}", r.req);
        }
        assert_eq!(sim.config_a.label, "16K chain 8 delta 64 min-waste");
        assert_eq!(
            sim.config_b.unwrap().label,
            "16K chain 8 delta 16 min-waste"
        );
    }

    #[test]
    fn legacy_delta_follows_page_size() {
        let sim = simulate(&parse(
            "--page-size 16K --delta legacy --from 1072 --to 1120",
        ))
        .unwrap();
        assert_eq!(sim.config_a.params.class_delta, 64);
        assert!(sim.config_a.label.contains("delta 64 (legacy)"));
        assert_eq!(sim.rows.len(), 4, "default step is 16 even for delta 64");
        let b = simulate(&parse("--delta legacy --vs-page-size 64K")).unwrap();
        assert_eq!(b.config_a.params.class_delta, 16);
        assert_eq!(b.config_b.unwrap().params.class_delta, 256);
        // 4K cannot serve requests above 4096; they are still rows for 64K.
        let last = b.rows.last().unwrap();
        assert_eq!(last.req, 65536);
        assert!(last.a.is_none() && last.b.is_some());
        assert!(b.summary_a.rows_served < b.summary_b.unwrap().rows_served);
    }

    #[test]
    fn four_k_summaries_match_kernel() {
        for (chain, phys, huge) in [
            (4, 69, 3257),
            (8, 119, 3625),
            (10, 141, 3705),
            (16, 192, 3833),
        ] {
            let a = ClassesArgs {
                chain,
                ..Default::default()
            };
            let s = simulate(&a).unwrap().summary_a;
            assert_eq!(s.logical_classes, 255, "chain {chain}");
            assert_eq!(s.physical_classes, phys, "chain {chain}");
            assert_eq!(s.huge_class_size, huge, "chain {chain}");
            assert!(s.spanning_objects > 0 && s.spanning_objects <= s.object_slots);
        }
    }

    #[test]
    fn default_rows_cover_the_page() {
        let sim = simulate(&ClassesArgs::default()).unwrap();
        assert_eq!(sim.rows.len(), 255);
        assert_eq!(sim.rows.first().unwrap().req, 32);
        assert_eq!(sim.rows.last().unwrap().req, 4096);
        assert_eq!(sim.summary_a.rows_served, 255);
        let w = sim.summary_a.avg_effective_waste.unwrap();
        assert!(w > 0.0 && w < 0.5, "{w}");
        assert!(sim.config_b.is_none() && sim.summary_b.is_none());
    }

    #[test]
    fn smaller_delta_wastes_less_on_16k() {
        let sim = simulate(&parse("--page-size 16K --delta 64 --vs-delta 16")).unwrap();
        let (a, b) = (sim.summary_a, sim.summary_b.unwrap());
        assert!(b.logical_classes > a.logical_classes);
        assert!(b.avg_effective_waste.unwrap() < a.avg_effective_waste.unwrap());
    }

    #[test]
    fn span_column_counts_straddling_objects() {
        let sim = simulate(&parse("--from 1632 --to 1632")).unwrap();
        let c = sim.rows[0].a.as_ref().unwrap();
        let want = zsmem::size_class::spanning_objects(c.phys, c.objs_per_zspage, 4096);
        assert_eq!(c.span, want);
        // 1120 in 8 pages of 16K: 117 objects, every inner boundary crossed.
        let sim = simulate(&parse("--page-size 16K --from 1120 --to 1120")).unwrap();
        assert_eq!(sim.rows[0].a.as_ref().unwrap().span, 7);
    }

    #[test]
    fn bad_arguments_are_usage_or_config_errors() {
        let cases = [
            ("--page-size 5000", "page size"),
            ("--page-size 2K", "page size"),
            ("--page-size 128K", "page size"),
            ("--chain 0", "chain size"),
            ("--chain 33", "chain size"),
            ("--delta 12", "class delta"),
            ("--from 2000 --to 1000", "--from"),
            ("--from 0", "--from"),
            ("--step 0", "--step"),
            ("--to 8K", "--to"),
            ("--vs-chain 33", "--vs-chain"),
            ("--vs-delta 12", "--vs-delta"),
            ("--vs-page-size 3K", "--vs-page-size"),
        ];
        for (args, needle) in cases {
            let e = simulate(&parse(args)).unwrap_err().to_string();
            assert!(e.contains(needle), "{args}: {e}");
        }
    }

    #[test]
    fn more_than_one_vs_is_rejected() {
        let e = try_parse("--vs-chain 4 --vs-delta 64").unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict);
        let a = ClassesArgs {
            vs_chain: Some(4),
            vs_rule: Some(ChainRule::SpanAware),
            ..Default::default()
        };
        let e = simulate(&a).unwrap_err().to_string();
        assert!(e.contains("at most one"), "{e}");
    }

    #[test]
    fn parsers_reject_bad_values() {
        for args in [
            "--rule fastest",
            "--format xml",
            "--delta big",
            "--page-size 4X",
        ] {
            assert!(try_parse(args).is_err(), "{args}");
        }
        assert_eq!(parse("--rule rfc").rule, ChainRule::SpanAware);
        assert_eq!(parse("--delta 64").delta, Delta::Bytes(64));
    }

    #[test]
    fn table_is_aligned() {
        let t = render_table(&simulate(&parse(RFC)).unwrap());
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].contains("A: 16K chain 8 delta 64 min-waste"));
        assert!(lines[0].contains("B: 16K chain 8 delta 16 min-waste"));
        // Title, header, rule and the four rows: the last group separator
        // (`||`, or `++` in the rule) at one column on every line.
        let pos: Vec<Option<usize>> = lines[..7]
            .iter()
            .map(|l| l.rfind("||").or_else(|| l.rfind("++")))
            .collect();
        assert!(pos.iter().all(|p| p.is_some() && *p == pos[0]), "{t}");
        let fields: Vec<&str> = lines[3]
            .split('|')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .collect();
        assert_eq!(
            &fields[..7],
            ["1072", "1120", "8", "117", "32", "5616", "7"]
        );
        assert_eq!(&fields[7..], ["1072", "4", "61", "144", "0", "3"]);
        assert!(t.contains("B - A"));
    }

    #[test]
    fn csv_and_json_shapes() {
        let sim = simulate(&parse("--from 32 --to 64 --vs-chain 4")).unwrap();
        let csv = render_csv(&sim);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1 + 3);
        assert!(lines[0].starts_with("req,a_phys,") && lines[0].ends_with(",b_span"));
        assert!(lines.iter().all(|l| l.split(',').count() == 13));
        let v: serde_json::Value = serde_json::from_str(&render_json(&sim)).unwrap();
        assert_eq!(v["config_b"]["chain_size"], 4);
        assert_eq!(v["config_a"]["chain_rule"], "min-waste");
        assert_eq!(v["rows"].as_array().unwrap().len(), 3);
    }
}
