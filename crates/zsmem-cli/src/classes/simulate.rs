//! The simulation: which physical class serves each request size, in one or two configurations, and their summaries.

use serde::Serialize;
use zsmem::{SizeClassConfig, SizeClassTable};

use super::args::{ClassesArgs, Delta};
use crate::{CliError, CliResult};

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
    /// Span of every logical class's physical class, summed over all
    /// logical classes (a merged class counts its physical class's span
    /// again): the RFC simulator's "Total Span (All Logicals)".
    pub logical_span: usize,
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
    if page.is_multiple_of(1024) {
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
        let logical_span = self
            .table
            .classes()
            .iter()
            .map(|c| self.span[c.physical])
            .sum();
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
            logical_span,
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
