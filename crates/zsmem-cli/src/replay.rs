//! `zsmem replay`: replay a size trace (`alloc ID SIZE` / `free ID`) on
//! every object contestant: zsmem's pool in its best and its
//! kernel-faithful configuration, and the malloc baselines.

use zsmem_lab::contestants::objects::{OBJECT_CONTESTANTS, make_object_contestant};
use zsmem_lab::workloads::trace::{Trace, replay};

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
    /// Contestants, comma separated: zsmem, zsmem-kernel, system, jemalloc, mimalloc.
    #[arg(long, value_delimiter = ',', default_values_t = OBJECT_CONTESTANTS.iter().map(|s| s.to_string()))]
    pub contestants: Vec<String>,
}

/// Run `zsmem replay`.
pub fn run(a: &ReplayArgs) -> CliResult {
    let trace = Trace::read(&a.trace).map_err(|e| CliError::Usage(e.to_string()))?;
    println!("{}: {} operations", a.trace.display(), trace.ops.len());
    println!(
        "{:<14} {:>10} {:>10} {:>12} {:>12} {:>12} {:>10}",
        "contestant", "ops", "objects", "stored MiB", "held MiB", "peak MiB", "overhead"
    );
    for name in &a.contestants {
        let mut c = make_object_contestant(name).map_err(|e| CliError::Usage(e.to_string()))?;
        let samples = replay(&trace, c.as_mut(), a.sample_every)
            .map_err(|e| CliError::Usage(e.to_string()))?;
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        for s in &samples {
            let overhead = if s.bytes == 0 {
                0.0
            } else {
                (s.held as f64 - s.bytes as f64) / s.bytes as f64 * 100.0
            };
            println!(
                "{name:<14} {:>10} {:>10} {:>12.2} {:>12.2} {:>12.2} {:>9.2}%",
                s.ops,
                s.objects,
                mib(s.bytes),
                mib(s.held),
                mib(s.peak_held),
                overhead
            );
        }
        println!("{:<14} {}", "", c.config());
    }
    Ok(())
}
