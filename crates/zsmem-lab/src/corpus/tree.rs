//! The file tree held in memory, split into 4 KiB pages the way a filesystem would store it.

use std::collections::HashMap;

/// Size of one page, as zram and the filesystem above it see it.
pub const PAGE_SIZE: usize = 4096;

/// One page of file data.
pub type Page = [u8; PAGE_SIZE];

/// One regular file: its path and its contents, kept padded with zeros to a
/// whole number of pages so that pages can be lent out without copying.
#[derive(Clone, PartialEq, Eq)]
pub struct FileEntry {
    path: String,
    len: usize,
    /// `len` bytes of content, then zeros up to a multiple of [`PAGE_SIZE`].
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
    /// A file at `path` (relative, `/`-separated) with contents `data`.
    pub fn new(path: impl Into<String>, mut data: Vec<u8>) -> Self {
        let len = data.len();
        data.resize(len.div_ceil(PAGE_SIZE) * PAGE_SIZE, 0);
        Self {
            path: path.into(),
            len,
            data,
        }
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
        self.data.len() / PAGE_SIZE
    }

    /// Page `index` of the file; the last one is zero-padded.
    ///
    /// # Panics
    /// If `index >= self.page_count()`.
    pub fn page(&self, index: usize) -> &Page {
        self.data[index * PAGE_SIZE..(index + 1) * PAGE_SIZE]
            .try_into()
            .expect("page-sized slice")
    }

    /// The file's pages in order; the last one is zero-padded.
    pub fn pages(&self) -> impl ExactSizeIterator<Item = &Page> + '_ {
        self.data
            .chunks_exact(PAGE_SIZE)
            .map(|c| c.try_into().expect("page-sized chunk"))
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
