//! `zsmem replay`: replay a size trace (`alloc ID SIZE` / `free ID`) on
//! every object contestant: zsmem's pool with log placement (`zsmem`, the
//! page store's default), with size classes (`zsmem-classes`) and in the
//! kernel's configuration, the peers and the malloc baselines.

use zsmem_lab::contestants::objects::{OBJECT_CONTESTANTS, make_object_contestant};
use zsmem_lab::workloads::trace::{ReplayFigures as Sample, Trace, replay};

use crate::output::{Format, print_json, print_table, table};
use crate::{CliError, CliResult};

/// Arguments of `zsmem replay`.
#[derive(clap::Args, Debug, Clone)]
pub struct ReplayArgs {
    /// The trace file (format: docs in `zsmem_lab::workloads::trace`; record one with
    /// `zsmem compare --record-trace FILE`).
    pub trace: std::path::PathBuf,
    /// Print figures every this many operations (0: only at the end).
    #[arg(long, default_value_t = 0)]
    pub sample_every: usize,
    /// Contestants, comma separated.
    #[arg(long, value_delimiter = ',',
          default_values_t = OBJECT_CONTESTANTS.iter().map(|s| s.to_string()),
          value_parser = clap::builder::PossibleValuesParser::new(OBJECT_CONTESTANTS))]
    pub contestants: Vec<String>,
    /// Output format (sizes in MiB in the table, in bytes in csv and json).
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// One line of figures, as csv and json print it.
#[derive(serde::Serialize)]
struct Row<'a> {
    contestant: &'a str,
    ops: u64,
    objects: u64,
    stored_bytes: u64,
    pool_bytes: u64,
    peak_pool_bytes: u64,
    /// `(pool - stored) / stored`; `None` where nothing is stored.
    overhead_ratio: Option<f64>,
}

/// What a contestant is, in a few words, beside its configuration.
fn what(name: &str) -> &'static str {
    match name {
        "zsmem" => "log placement, the page store's default (PoolConfig::log())",
        "zsmem-classes" => "size classes, as zsmalloc (PoolConfig::default())",
        "zsmem-kernel" => "the kernel's size classes and rules (PoolConfig::kernel())",
        "system" | "jemalloc" | "mimalloc" => "a malloc baseline: one allocation per object",
        _ => "a peer (docs/peers.md)",
    }
}

/// Run `zsmem replay`.
pub fn run(a: &ReplayArgs) -> CliResult {
    let trace = Trace::read(&a.trace).map_err(|e| CliError::Usage(e.to_string()))?;
    eprintln!("{}: {} operations", a.trace.display(), trace.ops.len());
    let mut rows: Vec<(String, Vec<Sample>, String)> = Vec::new();
    for name in &a.contestants {
        let mut c = make_object_contestant(name).map_err(|e| CliError::Usage(e.to_string()))?;
        let spin = crate::progress::spinner(&format!("replaying on {name}"));
        let samples = replay(&trace, c.as_mut(), a.sample_every)
            .map_err(|e| CliError::Usage(e.to_string()))?;
        spin.finish_and_clear();
        rows.push((name.clone(), samples, c.config()));
    }
    let overhead =
        |s: &Sample| (s.bytes > 0).then(|| (s.held as f64 - s.bytes as f64) / s.bytes as f64);
    let flat: Vec<Row> = rows
        .iter()
        .flat_map(|(name, samples, _)| {
            samples.iter().map(move |s| Row {
                contestant: name,
                ops: s.ops,
                objects: s.objects,
                stored_bytes: s.bytes,
                pool_bytes: s.held,
                peak_pool_bytes: s.peak_held,
                overhead_ratio: overhead(s),
            })
        })
        .collect();
    match a.format {
        Format::Json => return print_json(&flat),
        Format::Csv => return crate::output::print_serialized(&flat),
        Format::Table => {}
    }
    let mib = |b: u64| format!("{:.2}", crate::output::mib(b));
    let mut t = table(
        &[
            "contestant",
            "ops",
            "objects",
            "stored\nMiB",
            "pool\nMiB",
            "peak pool\nMiB",
            "overhead",
        ],
        1,
    );
    for r in &flat {
        t.add_row(vec![
            r.contestant.to_string(),
            r.ops.to_string(),
            r.objects.to_string(),
            mib(r.stored_bytes),
            mib(r.pool_bytes),
            mib(r.peak_pool_bytes),
            r.overhead_ratio
                .map_or("-".to_string(), |o| format!("{:.2}%", o * 100.0)),
        ]);
    }
    print_table(&t)?;
    outln!(
        "pool = the pages the allocator holds for objects (for a malloc baseline its heap \
         growth); overhead = (pool - stored) / stored, - where nothing is stored."
    );
    for (name, _, config) in &rows {
        outln!("{name}: {}; {config}", what(name));
    }
    Ok(())
}
