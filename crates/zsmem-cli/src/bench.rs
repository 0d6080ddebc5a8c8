//! `zsmem bench` (being written).
use crate::CliResult;

/// Benchmarks.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum BenchCommand {
    /// Pool alloc/write/free and read beside the system allocator and mimalloc.
    Pool,
}

/// Run a benchmark.
pub fn run(_b: &BenchCommand) -> CliResult {
    Ok(())
}
