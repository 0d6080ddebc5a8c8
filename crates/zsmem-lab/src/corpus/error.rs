//! What can go wrong loading a tree: [`CorpusError`], shared by the reader
//! and the tree (which refuses a bad page size).

use std::io;
use std::path::PathBuf;

use crate::text::{shown, shown_path};

/// What went wrong loading a tree. Every variant names the path involved.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// The path does not exist.
    #[error("{}: not found", shown_path(path))]
    NotFound {
        /// The path asked for.
        path: PathBuf,
    },
    /// The path exists but is neither a directory nor a regular file.
    #[error("{}: neither a directory nor a regular file", shown_path(path))]
    Unsupported {
        /// The path asked for.
        path: PathBuf,
    },
    /// Reading a file or directory failed.
    #[error("{}: {}", shown_path(path), shown(&source.to_string()))]
    Io {
        /// The file or directory that could not be read.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The file does not hold a tar archive at all.
    #[error("{}: not a tar archive: {reason}", shown_path(path))]
    NotATar {
        /// The file asked for.
        path: PathBuf,
        /// Why it was not recognised.
        reason: String,
    },
    /// The input holds more than the load may keep in memory (see
    /// [`default_input_limit`](super::default_input_limit)): refused before it is read, not after the
    /// memory is gone.
    #[error(
        "{}: {reason}: more than the input limit of {} MiB ({limit} bytes; by default half the memory available)",
        shown_path(path),
        limit >> 20
    )]
    TooLarge {
        /// The file, directory or archive.
        path: PathBuf,
        /// What would not fit.
        reason: String,
        /// The limit, in bytes.
        limit: u64,
    },
    /// A page size the lab cannot cut a tree into.
    #[error(
        "page size {page_size} must be a power of two from 4096 to {} (4K, 16K or 64K)",
        zsmem::size_class::MAX_PAGE_SIZE
    )]
    BadPageSize {
        /// The size asked for, in bytes.
        page_size: usize,
    },
    /// A page size that is not a number.
    #[error("page size `{text}` is not a size: use 4K, 16K or 64K (or a number of bytes)")]
    BadPageSizeText {
        /// The text given, escaped.
        text: String,
    },
    /// The archive started well but is damaged or cut short.
    #[error("{}: corrupt or truncated archive: {reason}", shown_path(path))]
    Corrupt {
        /// The archive.
        path: PathBuf,
        /// What was found wrong.
        reason: String,
    },
}
