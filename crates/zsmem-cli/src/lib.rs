//! The `zsmem` command's subcommands, as a library so that benches and tests
//! can reuse them.

/// `println!` for a command's output: a failed write (a full disk, a
/// file closed under it) is the command's error, returned with `?`, not
/// a panic. The calling function returns a [`CliResult`].
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*).map_err($crate::CliError::from)?
    }};
}

/// `print!` as [`outln!`] is `println!`.
#[allow(unused_macros)]
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*).map_err($crate::CliError::from)?
    }};
}

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
