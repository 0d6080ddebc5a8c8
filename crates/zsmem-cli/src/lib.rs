//! The `zsmem` command's subcommands, as a library so that benches and tests
//! can reuse them.

pub mod bench;
pub mod classes;
pub mod compare;
pub mod disk;
pub mod output;
pub mod progress;
#[cfg(target_os = "linux")]
pub mod region;
pub mod replay;
pub mod report_dir;
pub mod stats;
pub mod units;

/// Errors of the command line tool.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A bad argument value.
    #[error("{0}")]
    Usage(String),
    /// An error from the zsmem library.
    #[error(transparent)]
    Zsmem(#[from] zsmem::Error),
    /// An I/O error writing output.
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// Result of a subcommand.
pub type CliResult<T = ()> = Result<T, CliError>;
