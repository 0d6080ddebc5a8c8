//! The file tree held in memory, split into pages the way a filesystem would store it: 4 KiB
//! pages by default, 16 KiB or 64 KiB ones for a large-page system ([`FileTree::with_page_size`]).

use std::collections::HashMap;

use super::error::CorpusError;

/// The default page size, as zram and the filesystem above it see it on a
/// 4 KiB-page system.
pub const PAGE_SIZE: usize = 4096;

/// The largest page size a tree may be cut into (zsmem's largest).
pub const MAX_PAGE_SIZE: usize = zsmem::size_class::MAX_PAGE_SIZE;

/// One page of file data: [`FileTree::page_size`] bytes, the unit every
/// contestant compresses and stores.
pub type Page = [u8];

/// Check a page size the lab can cut a tree into: a power of two from
/// [`PAGE_SIZE`] to [`MAX_PAGE_SIZE`].
pub fn check_page_size(page_size: usize) -> Result<(), CorpusError> {
    if page_size.is_power_of_two() && (PAGE_SIZE..=MAX_PAGE_SIZE).contains(&page_size) {
        Ok(())
    } else {
        Err(CorpusError::BadPageSize { page_size })
    }
}

/// Parse a page size as the command line gives it: `4K`, `16K`, `64K` (or
/// a number of bytes, `16384`); checked by [`check_page_size`].
pub fn parse_page_size(s: &str) -> Result<usize, CorpusError> {
    let t = s.trim();
    let (digits, unit) = match t.strip_suffix(['K', 'k']) {
        Some(d) => (d, 1024),
        None => (t, 1),
    };
    let n = digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| CorpusError::BadPageSizeText {
            text: crate::text::shown(s),
        })?;
    check_page_size(n)?;
    Ok(n)
}

/// One regular file: its path and its contents, kept padded with zeros to a
/// whole number of pages so that pages can be lent out without copying.
#[derive(Clone, PartialEq, Eq)]
pub struct FileEntry {
    path: String,
    len: usize,
    /// The size of the pages the file is cut into.
    page_size: usize,
    /// `len` bytes of content, then zeros up to a multiple of `page_size`.
    data: Vec<u8>,
}

impl std::fmt::Debug for FileEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileEntry")
            .field("path", &self.path)
            .field("len", &self.len)
            .finish()
    }
}

impl FileEntry {
    /// A file at `path` (relative, `/`-separated) with contents `data`, cut
    /// into pages of [`PAGE_SIZE`].
    pub fn new(path: impl Into<String>, mut data: Vec<u8>) -> Self {
        let len = data.len();
        data.resize(len.div_ceil(PAGE_SIZE) * PAGE_SIZE, 0);
        Self {
            path: path.into(),
            len,
            page_size: PAGE_SIZE,
            data,
        }
    }

    /// The same file cut into pages of `page_size` bytes (checked by
    /// [`check_page_size`]): the padding after the contents grows or
    /// shrinks to the new page size.
    pub fn with_page_size(mut self, page_size: usize) -> Result<Self, CorpusError> {
        check_page_size(page_size)?;
        // Invariant: `data` is `len` bytes, then zeros to a whole page.
        self.data
            .resize(self.len.div_ceil(page_size) * page_size, 0);
        self.data.shrink_to_fit();
        self.page_size = page_size;
        Ok(self)
    }

    /// The size of the pages the file is cut into.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Relative `/`-separated path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The file's contents, without the padding.
    pub fn data(&self) -> &[u8] {
        &self.data[..self.len]
    }

    /// Length of the contents in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the file is empty (and so has no pages).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of pages the file occupies.
    pub fn page_count(&self) -> usize {
        self.data.len() / self.page_size
    }

    /// Page `index` of the file; the last one is zero-padded.
    ///
    /// # Panics
    /// If `index >= self.page_count()`.
    pub fn page(&self, index: usize) -> &Page {
        &self.data[index * self.page_size..(index + 1) * self.page_size]
    }

    /// The file's pages in order, each [`FileEntry::page_size`] bytes; the
    /// last one is zero-padded.
    pub fn pages(&self) -> impl ExactSizeIterator<Item = &Page> + '_ {
        self.data.chunks_exact(self.page_size)
    }

    /// The first path component when the file lies inside a directory,
    /// `None` for a file at the top of the tree.
    pub fn top_level_dir(&self) -> Option<&str> {
        self.path.split_once('/').map(|(dir, _)| dir)
    }
}

/// A tree of regular files in the order they would be written (archive
/// order for a tar, path order for a directory, generation order for the
/// embedded corpus).
///
/// Its files are cut into pages of one size, [`PAGE_SIZE`] unless the tree
/// was made with [`FileTree::with_page_size`]; that size is the unit every
/// contestant of a workload on the tree compresses and stores.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileTree {
    /// The files, in write order.
    pub files: Vec<FileEntry>,
}

impl FileTree {
    /// A tree of `files`, kept in the given order. A single top-level
    /// directory shared by every file is stripped (see [`FileTree::from_tar`]).
    pub fn new(files: Vec<FileEntry>) -> Self {
        let mut tree = Self { files };
        tree.strip_common_top();
        tree
    }

    /// The tree cut into pages of `page_size` bytes (a power of two from 4
    /// KiB to 64 KiB, else [`CorpusError::BadPageSize`]). Each file holds at
    /// most one page of padding, so a tree of many small files takes more
    /// memory at 64 KiB than at 4 KiB.
    pub fn with_page_size(self, page_size: usize) -> Result<Self, CorpusError> {
        check_page_size(page_size)?;
        let files = self
            .files
            .into_iter()
            .map(|f| f.with_page_size(page_size))
            .collect::<Result<_, _>>()?;
        Ok(FileTree { files })
    }

    /// The size of the tree's pages: its files' ([`PAGE_SIZE`] for a tree
    /// without files). Invariant: every file of a tree made by
    /// [`FileTree::with_page_size`] has this page size.
    pub fn page_size(&self) -> usize {
        self.files.first().map_or(PAGE_SIZE, FileEntry::page_size)
    }

    /// Total number of pages over all files.
    pub fn total_pages(&self) -> usize {
        self.files.iter().map(FileEntry::page_count).sum()
    }

    /// Total file bytes (without page padding).
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.len() as u64).sum()
    }

    /// Every page of every file, as (file index, page index within the
    /// file, page), in write order. Empty files contribute no pages.
    pub fn pages(&self) -> impl Iterator<Item = (usize, usize, &Page)> + '_ {
        self.files
            .iter()
            .enumerate()
            .flat_map(|(fi, f)| f.pages().enumerate().map(move |(pi, p)| (fi, pi, p)))
    }

    /// The top-level directories with their page counts, largest first
    /// (ties by name). Files lying directly at the top are not counted.
    pub fn top_level_dirs(&self) -> Vec<(String, usize)> {
        let mut by_dir: HashMap<&str, usize> = HashMap::new();
        for f in &self.files {
            if let Some(d) = f.top_level_dir() {
                *by_dir.entry(d).or_default() += f.page_count();
            }
        }
        let mut dirs: Vec<(String, usize)> =
            by_dir.into_iter().map(|(d, n)| (d.to_owned(), n)).collect();
        dirs.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        dirs
    }

    /// Indices of the files below top-level directory `dir`.
    pub fn files_in_dir<'a>(&'a self, dir: &'a str) -> impl Iterator<Item = usize> + 'a {
        self.files
            .iter()
            .enumerate()
            .filter(move |(_, f)| f.top_level_dir() == Some(dir))
            .map(|(i, _)| i)
    }

    /// Strip the first path component when every file has it in common and
    /// lies below it: a tarball's `linux-source-6.1/` wrapper.
    pub(super) fn strip_common_top(&mut self) {
        let Some(first) = self.files.first().and_then(FileEntry::top_level_dir) else {
            return;
        };
        let prefix_len = first.len() + 1;
        let first = first.to_owned();
        if self.files.iter().all(|f| f.top_level_dir() == Some(&first)) {
            for f in &mut self.files {
                f.path.drain(..prefix_len);
            }
        }
    }
}
