//! `zsmem replay`: replay a size trace (`alloc ID SIZE` / `free ID`) on
//! zsmem's pool in its kernel-faithful and its best configuration.

use zsmem::{Pool, PoolConfig};
use zsmem_lab::trace::{Trace, replay_on_pool};

use crate::{CliError, CliResult};

/// Arguments of `zsmem replay`.
#[derive(clap::Args, Debug, Clone)]
pub struct ReplayArgs {
    /// The trace file (format: docs in `zsmem_lab::trace`; record one with
    /// `zsmem compare --record-trace FILE`).
    pub trace: std::path::PathBuf,
    /// Print figures every this many operations (0: only at the end).
    #[arg(long, default_value_t = 0)]
    pub sample_every: usize,
}

/// Run `zsmem replay`.
pub fn run(a: &ReplayArgs) -> CliResult {
    let trace = Trace::read(&a.trace).map_err(|e| CliError::Usage(e.to_string()))?;
    println!("{}: {} operations", a.trace.display(), trace.ops.len());
    println!(
        "{:<14} {:>10} {:>12} {:>12} {:>12} {:>10}",
        "pool", "objects", "stored MiB", "held MiB", "peak MiB", "overhead"
    );
    for (name, cfg) in [
        ("zsmem", PoolConfig::default()),
        ("zsmem-kernel", PoolConfig::kernel()),
    ] {
        let pool = Pool::new(cfg)?;
        let samples = replay_on_pool(&trace, &pool, a.sample_every)
            .map_err(|e| CliError::Usage(e.to_string()))?;
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        for s in &samples {
            let overhead = if s.bytes == 0 {
                0.0
            } else {
                (s.held as f64 - s.bytes as f64) / s.bytes as f64 * 100.0
            };
            println!(
                "{name:<14} {:>10} {:>12.2} {:>12.2} {:>12.2} {:>9.2}%",
                s.objects,
                mib(s.bytes),
                mib(s.held),
                mib(s.peak_held),
                overhead
            );
        }
    }
    Ok(())
}
