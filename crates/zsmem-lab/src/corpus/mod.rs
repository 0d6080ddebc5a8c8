//! Page sources for the lab's workloads: a file tree held in memory, split
//! into pages (4 KiB by default, 16 or 64 KiB for a large-page system) the way a filesystem
//! would store it.
//!
//! The tree comes from a directory ([`FileTree::from_dir`]), a tar archive,
//! plain or gzip/xz compressed ([`FileTree::from_tar`]), or the embedded
//! deterministic corpus ([`FileTree::generate`]), a synthetic kernel-like
//! source tree that needs no download. See `docs/corpus.md` for how the
//! generated corpus compares with the real linux-source-6.1 tree.
//!
//! | module | concern |
//! |---|---|
//! | [`tree`] | the file tree held in memory, split into pages |
//! | [`read`] | a directory or a tar archive (plain, gzip, xz), under an input limit |
//! | [`error`] | [`CorpusError`], what can go wrong loading a tree (the reader's and the tree's) |
//! | [`synth`] | the embedded corpus: a generated kernel-like tree, one module per kind of content |
//! | [`stats`] | per-page compressed sizes: same-filled pages, LZ4 lengths, histograms |
//!
//! The nouns are re-exported here: `corpus::FileTree`, `corpus::Page`, ... .

pub mod error;
pub mod read;
pub mod stats;
pub mod synth;
pub mod tree;

pub use error::CorpusError;
pub use read::default_input_limit;
pub use stats::{HUGE_THRESHOLD, Histogram, compressed_size_histogram, is_same_filled, lz4_len};
pub use synth::GENERATED_BYTES_AT_SCALE_1;
pub use tree::{
    FileEntry, FileTree, MAX_PAGE_SIZE, PAGE_SIZE, Page, check_page_size, parse_page_size,
};
