//! What can go wrong with a kernel zram device, and the one-line warnings of the cleanup paths.

use std::io::{self, Write};

/// What can go wrong with a kernel zram device.
#[derive(Debug, thiserror::Error)]
pub enum ZramError {
    /// zram cannot be used here; the text is a one-line reason to print
    /// when skipping ("not running as root", ...).
    #[error("kernel zram unavailable: {0}")]
    Unavailable(String),
    /// A system call or sysfs access failed; `what` names the file or the
    /// operation.
    #[error("{what}: {source}")]
    Io {
        /// The sysfs file or operation that failed.
        what: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The caller passed something unusable (a buffer that is not one page,
    /// an index past the device, a bad configuration).
    #[error("bad argument: {0}")]
    BadArgument(String),
}

impl ZramError {
    pub(super) fn io(what: impl Into<String>, source: io::Error) -> Self {
        ZramError::Io {
            what: what.into(),
            source,
        }
    }

    pub(super) fn parse(what: impl Into<String>, msg: impl Into<String>) -> Self {
        ZramError::Io {
            what: what.into(),
            source: io::Error::new(io::ErrorKind::InvalidData, msg.into()),
        }
    }
}

/// One line on stderr, ignoring failure: this runs in Drop and exit paths,
/// where a panic would abort.
pub(super) fn warn(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(io::stderr(), "zsmem-lab: {line}");
}
