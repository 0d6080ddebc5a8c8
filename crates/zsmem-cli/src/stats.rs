//! `zsmem stats` (being written).
use crate::CliResult;

/// Arguments of `zsmem stats`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct StatsArgs {}

/// Run `zsmem stats`.
pub fn run(_a: &StatsArgs) -> CliResult {
    Ok(())
}
