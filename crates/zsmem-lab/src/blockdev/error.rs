//! What can go wrong with a block device made here, and the one-line warnings of the cleanup paths.

use std::io::{self, Write};

/// What can go wrong with a block device made here.
#[derive(Debug, thiserror::Error)]
pub enum BlockDevError {
    /// A block device cannot be made here; the text is a one-line reason
    /// to print when skipping ("not running as root", "no /dev/fuse", ...).
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// A system call or a command failed; `what` names it.
    #[error("{what}: {source}")]
    Io {
        /// The operation that failed.
        what: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The contestant behind the device failed.
    #[error("contestant: {0}")]
    Contestant(String),
    /// A bad argument.
    #[error("{0}")]
    Usage(String),
}

impl BlockDevError {
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Self {
        BlockDevError::Io {
            what: what.into(),
            source,
        }
    }

    /// `source` for `what`, or [`BlockDevError::Unavailable`] if it is a
    /// refusal (`EPERM`, `EACCES`: a container without `CAP_SYS_ADMIN`).
    pub(crate) fn io_or_refused(what: impl Into<String>, source: io::Error) -> Self {
        let what = what.into();
        match source.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => {
                BlockDevError::Unavailable(format!("{what}: not permitted here ({source})"))
            }
            _ => Self::io(what, source),
        }
    }

    /// The last OS error, for `what`.
    pub(crate) fn last_os(what: impl Into<String>) -> Self {
        Self::io(what, io::Error::last_os_error())
    }
}

impl From<crate::contestants::LabError> for BlockDevError {
    fn from(e: crate::contestants::LabError) -> Self {
        BlockDevError::Contestant(e.to_string())
    }
}

/// One line on stderr, ignoring failure: this runs in Drop and exit paths.
pub(crate) fn warn(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(io::stderr(), "zsmem-lab: {line}");
}
