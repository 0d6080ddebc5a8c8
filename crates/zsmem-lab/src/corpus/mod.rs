//! Page sources for the lab's workloads: a file tree held in memory, split
//! into 4 KiB pages the way a filesystem would store it.
//!
//! The tree comes from a directory ([`FileTree::from_dir`]), a tar archive,
//! plain or gzip/xz compressed ([`FileTree::from_tar`]), or the embedded
//! deterministic corpus ([`FileTree::generate`]), a synthetic kernel-like
//! source tree that needs no download. See `docs/corpus.md` for how the
//! generated corpus compares with the real linux-source-6.1 tree.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::text::{shown, shown_path};

/// Size of one page, as zram and the filesystem above it see it.
pub const PAGE_SIZE: usize = 4096;

/// One page of file data.
pub type Page = [u8; PAGE_SIZE];

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
    /// [`default_input_limit`]): refused before it is read, not after the
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
    /// The archive started well but is damaged or cut short.
    #[error("{}: corrupt or truncated archive: {reason}", shown_path(path))]
    Corrupt {
        /// The archive.
        path: PathBuf,
        /// What was found wrong.
        reason: String,
    },
}

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

    /// Load a directory or a tar archive, whichever `path` is, keeping at
    /// most [`default_input_limit`] bytes.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, CorpusError> {
        Self::load_limited(path, default_input_limit())
    }

    /// Load a directory or a tar archive, whichever `path` is, keeping at
    /// most `limit` bytes (file contents padded to whole pages, plus a
    /// little per file): more is [`CorpusError::TooLarge`], found before
    /// the memory is taken. A declared size is never trusted: contents are
    /// read in pieces of at most 1 MiB as they arrive.
    pub fn load_limited(path: impl AsRef<Path>, limit: u64) -> Result<Self, CorpusError> {
        let path = path.as_ref();
        let meta = std::fs::metadata(path).map_err(|e| io_error(path, e))?;
        if meta.is_dir() {
            Self::from_dir_limited(path, limit)
        } else if meta.is_file() {
            Self::from_tar_limited(path, limit)
        } else {
            Err(CorpusError::Unsupported {
                path: path.to_owned(),
            })
        }
    }

    /// Every regular file below `dir`, recursively, in sorted path order
    /// (so the result does not depend on the filesystem's readdir order).
    /// Symbolic links and special files are skipped.
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self, CorpusError> {
        Self::from_dir_limited(dir, default_input_limit())
    }

    /// [`FileTree::from_dir`] keeping at most `limit` bytes (see
    /// [`FileTree::load_limited`]).
    pub fn from_dir_limited(dir: impl AsRef<Path>, limit: u64) -> Result<Self, CorpusError> {
        let dir = dir.as_ref();
        let meta = std::fs::metadata(dir).map_err(|e| io_error(dir, e))?;
        if !meta.is_dir() {
            return Err(CorpusError::Io {
                path: dir.to_owned(),
                source: io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
            });
        }
        let mut found = Vec::new();
        walk(dir, String::new(), &mut found)?;
        found.sort_by(|a, b| a.0.cmp(&b.0));
        let mut budget = Budget::new(dir, limit);
        let mut files = Vec::new();
        for (rel, full) in found {
            let mut file = File::open(&full).map_err(|e| io_error(&full, e))?;
            let len = file.metadata().map_err(|e| io_error(&full, e))?.len();
            budget.take(&rel, len)?;
            // A file that grows while it is read is read as it was.
            let data = read_in_pieces(&mut file, len).map_err(|e| io_error(&full, e))?;
            files.push(FileEntry::new(rel, data));
        }
        Ok(Self::new(files))
    }

    /// The regular files of a tar archive, plain, gzip or xz compressed, in
    /// archive order. The compression is recognised by its magic bytes; a
    /// name ending in `.gz`/`.tgz`/`.xz`/`.txz` whose contents lack the
    /// matching magic is reported as corrupt. Directories, links and other
    /// special entries are skipped; a path that occurs twice keeps its last
    /// contents, as extraction would. A single top-level directory shared by
    /// every file (`linux-source-6.1/`) is stripped.
    pub fn from_tar(path: impl AsRef<Path>) -> Result<Self, CorpusError> {
        Self::from_tar_limited(path, default_input_limit())
    }

    /// [`FileTree::from_tar`] keeping at most `limit` bytes (see
    /// [`FileTree::load_limited`]): an entry declaring more than is left
    /// is refused from its header, and a small compressed archive cannot
    /// expand past the limit.
    pub fn from_tar_limited(path: impl AsRef<Path>, limit: u64) -> Result<Self, CorpusError> {
        let path = path.as_ref();
        let mut file = File::open(path).map_err(|e| io_error(path, e))?;
        let meta = file.metadata().map_err(|e| io_error(path, e))?;
        if !meta.is_file() {
            return Err(CorpusError::Unsupported {
                path: path.to_owned(),
            });
        }
        if meta.len() == 0 {
            return Err(CorpusError::NotATar {
                path: path.to_owned(),
                reason: "empty file".into(),
            });
        }
        let mut magic = [0u8; 6];
        let got = read_up_to(&mut file, &mut magic).map_err(|e| io_error(path, e))?;
        let magic = &magic[..got];
        let kind = Compression::from_magic(magic);
        // (No let-chains: the workspace's rust-version is 1.85.)
        let named = Compression::from_name(path).unwrap_or(Compression::None);
        if named != kind && named != Compression::None {
            return Err(CorpusError::Corrupt {
                path: path.to_owned(),
                reason: format!(
                    "the name says {} but the contents do not start with its magic bytes",
                    named.name()
                ),
            });
        }
        // Reopen rather than seek, so the decoders start from byte 0.
        let file = File::open(path).map_err(|e| io_error(path, e))?;
        let reader: Box<dyn Read> = match kind {
            Compression::None => Box::new(BufReader::with_capacity(1 << 20, file)),
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(
                BufReader::with_capacity(1 << 20, file),
            )),
            Compression::Xz => Box::new(xz2::read::XzDecoder::new_multi_decoder(
                BufReader::with_capacity(1 << 20, file),
            )),
        };
        read_tar(path, reader, kind, limit)
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
    fn strip_common_top(&mut self) {
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

fn io_error(path: &Path, e: io::Error) -> CorpusError {
    if e.kind() == io::ErrorKind::NotFound {
        CorpusError::NotFound {
            path: path.to_owned(),
        }
    } else {
        CorpusError::Io {
            path: path.to_owned(),
            source: e,
        }
    }
}

/// Recursively collect (relative path, full path) of regular files.
fn walk(dir: &Path, rel: String, out: &mut Vec<(String, PathBuf)>) -> Result<(), CorpusError> {
    let entries = std::fs::read_dir(dir).map_err(|e| io_error(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io_error(dir, e))?;
        let full = entry.path();
        // file_type() does not follow symlinks, which is what we want.
        let ft = entry.file_type().map_err(|e| io_error(&full, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let child = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        if ft.is_dir() {
            walk(&full, child, out)?;
        } else if ft.is_file() {
            out.push((child, full));
        }
    }
    Ok(())
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The most bytes [`FileTree::load`], [`FileTree::from_dir`] and
/// [`FileTree::from_tar`] keep: half of the memory available when called
/// (`MemAvailable` in `/proc/meminfo`), or 4 GiB where that cannot be read.
/// The `_limited` variants take another limit.
pub fn default_input_limit() -> u64 {
    let available = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        let line = m.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        kib.checked_mul(1024)
    });
    available.map_or(4 << 30, |b| b / 2)
}

/// What is left of a load's limit. A file costs its contents padded to
/// whole pages (what the tree holds) plus its name and bookkeeping, so
/// that many tiny files cannot hold more than the limit either.
struct Budget<'a> {
    path: &'a Path,
    limit: u64,
    left: u64,
}

impl<'a> Budget<'a> {
    /// Per file, beyond its pages: the entry and its name's allocation.
    const PER_FILE: u64 = 64;

    fn new(path: &'a Path, limit: u64) -> Self {
        Budget {
            path,
            limit,
            left: limit,
        }
    }

    /// Take what `name` of `len` bytes costs, or refuse it.
    fn take(&mut self, name: &str, len: u64) -> Result<(), CorpusError> {
        let cost = len
            .div_ceil(PAGE_SIZE as u64)
            .checked_mul(PAGE_SIZE as u64)
            .and_then(|c| c.checked_add(Self::PER_FILE + name.len() as u64));
        match cost {
            Some(c) if c <= self.left => {
                self.left -= c;
                Ok(())
            }
            _ => Err(CorpusError::TooLarge {
                path: self.path.to_owned(),
                reason: format!(
                    "{} holds {len} bytes, after {} bytes of earlier files",
                    shown(name),
                    self.limit - self.left
                ),
                limit: self.limit,
            }),
        }
    }
}

/// Read `len` bytes of `r` (fewer if it ends first) in pieces of at most
/// 1 MiB: memory grows with the bytes that arrive, never with a size a
/// header declares, and never past `len` rounded up to whole pages (so
/// [`FileEntry::new`]'s padding does not reallocate). `len` must be within
/// a [`Budget`], so it fits in memory.
fn read_in_pieces(r: &mut impl Read, len: u64) -> io::Result<Vec<u8>> {
    const PIECE: usize = 1 << 20;
    let len = usize::try_from(len).map_err(|_| io::Error::other("too large for memory"))?;
    let padded = len.div_ceil(PAGE_SIZE).saturating_mul(PAGE_SIZE);
    let mut data: Vec<u8> = Vec::new();
    while data.len() < len {
        let want = (len - data.len()).min(PIECE);
        if data.capacity() - data.len() < want {
            // Double, but never past the padded length.
            let target = (data.len() * 2).max(PIECE).min(padded);
            data.reserve_exact(target - data.len());
        }
        let start = data.len();
        data.resize(start + want, 0);
        let got = read_up_to(r, &mut data[start..])?;
        data.truncate(start + got);
        if got < want {
            break;
        }
    }
    Ok(data)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Compression {
    None,
    Gzip,
    Xz,
}

impl Compression {
    fn from_magic(magic: &[u8]) -> Self {
        if magic.starts_with(&[0x1f, 0x8b]) {
            Self::Gzip
        } else if magic.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
            Self::Xz
        } else {
            Self::None
        }
    }

    fn from_name(path: &Path) -> Option<Self> {
        let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
        if name.ends_with(".gz") || name.ends_with(".tgz") {
            Some(Self::Gzip)
        } else if name.ends_with(".xz") || name.ends_with(".txz") {
            Some(Self::Xz)
        } else if name.ends_with(".tar") {
            Some(Self::None)
        } else {
            None
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::None => "plain tar",
            Self::Gzip => "gzip",
            Self::Xz => "xz",
        }
    }
}

fn read_tar(
    path: &Path,
    reader: Box<dyn Read>,
    kind: Compression,
    limit: u64,
) -> Result<FileTree, CorpusError> {
    let mut budget = Budget::new(path, limit);
    let mut archive = tar::Archive::new(reader);
    let mut files: Vec<FileEntry> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut seen_entry = false;
    // An error before the first entry means this was never a tar (for a
    // plain file) or the compressed stream is bad from the start.
    let fail = |seen: bool, what: String| {
        let what = shown(&what);
        if !seen && kind == Compression::None {
            CorpusError::NotATar {
                path: path.to_owned(),
                reason: what,
            }
        } else {
            CorpusError::Corrupt {
                path: path.to_owned(),
                reason: what,
            }
        }
    };
    let entries = archive.entries().map_err(|e| fail(false, e.to_string()))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| fail(seen_entry, e.to_string()))?;
        seen_entry = true;
        let ty = entry.header().entry_type();
        if !(ty.is_file() || ty.is_contiguous()) {
            continue;
        }
        let name = entry
            .path()
            .map_err(|e| fail(true, format!("bad entry name: {e}")))?
            .to_string_lossy()
            .into_owned();
        let name = normalise(&name);
        if name.is_empty() {
            continue;
        }
        let size = entry.size();
        // The header's size is a claim: it is checked against what is left
        // of the limit, and the contents are read as they arrive.
        budget.take(&name, size)?;
        let data = read_in_pieces(&mut entry, size)
            .map_err(|e| fail(true, format!("{}: {e}", shown(&name))))?;
        // The tar crate ends an entry quietly at end of input: a short read
        // is how a truncated archive shows.
        if data.len() as u64 != size {
            return Err(fail(
                true,
                format!(
                    "{}: expected {size} bytes, archive ends after {}",
                    shown(&name),
                    data.len()
                ),
            ));
        }
        let file = FileEntry::new(name.clone(), data);
        match index.get(&name) {
            Some(&i) => files[i] = file,
            None => {
                index.insert(name, files.len());
                files.push(file);
            }
        }
    }
    if !seen_entry && kind == Compression::None {
        return Err(fail(false, "no tar header found".into()));
    }
    Ok(FileTree::new(files))
}

/// `./a//b/` -> `a/b`.
fn normalise(name: &str) -> String {
    name.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect::<Vec<_>>()
        .join("/")
}

// ---------------------------------------------------------------------------
// Compressed-size histogram
// ---------------------------------------------------------------------------

/// Compressed size at or above which a page counts as "huge": zram would
/// store it uncompressed. Three quarters of a page, a round figure close to
/// zsmalloc's huge class size.
pub const HUGE_THRESHOLD: usize = PAGE_SIZE * 3 / 4;

/// Distribution of per-page compressed sizes over a tree.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Histogram {
    /// Width of one bucket in bytes.
    pub bucket_bytes: usize,
    /// Pages by compressed size (same-filled pages excluded): bucket `i`
    /// holds sizes in `[i * bucket_bytes, (i + 1) * bucket_bytes)`, sizes of
    /// a whole page or more (incompressible) fall in the last bucket.
    pub buckets: Vec<u64>,
    /// All pages.
    pub pages: u64,
    /// Pages whose 8-byte words are all equal: zram stores no data for them.
    pub same_filled: u64,
    /// Pages that compress to [`HUGE_THRESHOLD`] bytes or more (a subset of
    /// the top buckets): zram stores them as whole pages.
    pub huge: u64,
    /// Bytes as zram would store them: 0 per same-filled page, a page per
    /// huge page, the compressed size otherwise.
    pub stored_bytes: u64,
}

impl Histogram {
    /// Pages times [`PAGE_SIZE`].
    pub fn orig_bytes(&self) -> u64 {
        self.pages * PAGE_SIZE as u64
    }

    /// Stored bytes over original bytes.
    pub fn ratio(&self) -> f64 {
        if self.pages == 0 {
            0.0
        } else {
            self.stored_bytes as f64 / self.orig_bytes() as f64
        }
    }

    /// Share of all pages, in percent, of a count.
    pub fn percent(&self, count: u64) -> f64 {
        if self.pages == 0 {
            0.0
        } else {
            100.0 * count as f64 / self.pages as f64
        }
    }
}

/// Whether every 8-byte word of the page is the same: zram's
/// `page_same_filled` on a 64-bit machine.
pub fn is_same_filled(page: &Page) -> bool {
    zsmem::store::same_filled(page).is_some()
}

/// Length of the page compressed with LZ4 (block format, as zram's lz4).
pub fn lz4_len(data: &[u8]) -> usize {
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUF.with(|buf| {
        let mut buf = buf.borrow_mut();
        let need = lz4_flex::block::get_maximum_output_size(data.len());
        if buf.len() < need {
            buf.resize(need, 0);
        }
        lz4_flex::block::compress_into(data, &mut buf).unwrap_or(usize::MAX)
    })
}

/// Histogram of the compressed sizes of every page of `tree`, `compress`
/// returning a page's compressed length, in buckets `bucket_bytes` wide.
///
/// # Panics
/// If `bucket_bytes` is 0.
pub fn compressed_size_histogram(
    tree: &FileTree,
    compress: impl Fn(&[u8]) -> usize,
    bucket_bytes: usize,
) -> Histogram {
    assert!(bucket_bytes > 0, "bucket width must be positive");
    let n = PAGE_SIZE.div_ceil(bucket_bytes);
    let mut h = Histogram {
        bucket_bytes,
        buckets: vec![0; n],
        pages: 0,
        same_filled: 0,
        huge: 0,
        stored_bytes: 0,
    };
    for (_, _, page) in tree.pages() {
        h.pages += 1;
        if is_same_filled(page) {
            h.same_filled += 1;
            continue;
        }
        let c = compress(page).min(PAGE_SIZE);
        h.buckets[(c / bucket_bytes).min(n - 1)] += 1;
        if c >= HUGE_THRESHOLD {
            h.huge += 1;
            h.stored_bytes += PAGE_SIZE as u64;
        } else {
            h.stored_bytes += c as u64;
        }
    }
    h
}

// ---------------------------------------------------------------------------
// The embedded corpus
// ---------------------------------------------------------------------------

/// File data generated at scale 1.0: 300 MiB.
pub const GENERATED_BYTES_AT_SCALE_1: u64 = 300 << 20;

impl FileTree {
    /// The embedded corpus: a synthetic kernel-like source tree of about
    /// `scale` x [`GENERATED_BYTES_AT_SCALE_1`] bytes, identical for equal
    /// `seed` and `scale` whatever the machine or thread count.
    ///
    /// Top-level directories carry linux-source-6.1's shares, except that
    /// fs, sound and include are nudged up and Documentation and tools down
    /// so that the five largest are drivers, arch, fs, sound, include: the
    /// directories 004-afmalloc.txt deletes. The file mix (C sources,
    /// headers, huge register-definition headers, documentation, device
    /// trees, a few binaries) and file sizes follow the real tree, so that
    /// per-page LZ4 sizes are distributed alike (see `docs/corpus.md`).
    ///
    /// # Panics
    /// If `scale` is not finite and positive.
    pub fn generate(seed: u64, scale: f64) -> FileTree {
        assert!(
            scale.is_finite() && scale > 0.0,
            "scale must be positive, got {scale}"
        );
        let plan = synth::plan(seed, scale);
        let data = synth::contents(&plan);
        let files = plan
            .into_iter()
            .zip(data)
            .map(|(p, d)| FileEntry::new(p.path, d))
            .collect();
        // No common top: the corpus has files at its root.
        FileTree { files }
    }
}

mod synth {
    //! The generator. Text is made of tokens drawn with a skewed (Zipf-like)
    //! choice from vocabularies, most of them local to a file, so that a
    //! page repeats identifiers and phrases about as often as real code
    //! does: LZ4 works within one page, and that repetition is what it
    //! finds.

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::HashSet;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::{GENERATED_BYTES_AT_SCALE_1, PAGE_SIZE};

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(super) enum Kind {
        C,
        Header,
        RegHeader,
        Doc,
        Translation,
        DevTree,
        Yaml,
        Json,
        Asm,
        Kconfig,
        Makefile,
        Script,
        Binary,
    }

    impl Kind {
        /// (mean, sigma) of log2(file size), from the real tree.
        fn size_law(self) -> (f64, f64) {
            match self {
                Kind::C => (13.2, 1.6),
                Kind::Header => (11.8, 1.7),
                Kind::RegHeader => (20.0, 1.8),
                Kind::Doc => (12.6, 1.4),
                Kind::Translation => (13.0, 1.0),
                Kind::DevTree => (12.2, 1.7),
                Kind::Yaml => (11.3, 0.8),
                Kind::Json => (13.5, 1.5),
                Kind::Asm => (12.5, 1.4),
                Kind::Kconfig => (11.0, 1.6),
                Kind::Makefile => (9.5, 1.4),
                Kind::Script => (12.0, 1.5),
                Kind::Binary => (13.0, 2.0),
            }
        }

        fn ext(self, r: &mut StdRng) -> &'static str {
            match self {
                Kind::C => ".c",
                Kind::Header | Kind::RegHeader => ".h",
                Kind::Doc | Kind::Translation => {
                    if r.random_range(0..4) == 0 {
                        ".txt"
                    } else {
                        ".rst"
                    }
                }
                Kind::DevTree => {
                    if r.random_range(0..2) == 0 {
                        ".dts"
                    } else {
                        ".dtsi"
                    }
                }
                Kind::Yaml => ".yaml",
                Kind::Json => ".json",
                Kind::Asm => ".S",
                Kind::Kconfig | Kind::Makefile => "",
                Kind::Script => [".sh", ".py", ".pl"][r.random_range(0..3)],
                Kind::Binary => [".bin", ".gif", ".png", ".fw"][r.random_range(0..4)],
            }
        }
    }

    /// One file to generate.
    pub(super) struct Planned {
        pub path: String,
        pub kind: Kind,
        pub size: usize,
        pub seed: u64,
        /// Driver-like name prefix that the file's identifiers share.
        pub prefix: String,
        /// 0.0 = very repetitive, 1.5 = dense: how often fresh identifiers,
        /// numbers and prose appear instead of already used ones.
        pub density: f64,
    }

    /// A top-level directory: percent of all bytes, file kinds with their
    /// shares of the directory's bytes, and the density of its C code
    /// (core code such as mm or kernel compresses worse than drivers).
    struct TopDir {
        name: &'static str,
        percent: f64,
        mix: &'static [(Kind, f64)],
        density: f64,
    }

    const CORE: &[(Kind, f64)] = &[
        (Kind::C, 0.9),
        (Kind::Header, 0.08),
        (Kind::Kconfig, 0.01),
        (Kind::Makefile, 0.01),
    ];

    const DRIVERS: &[(Kind, f64)] = &[
        (Kind::C, 0.43),
        (Kind::RegHeader, 0.43),
        (Kind::Header, 0.115),
        (Kind::Kconfig, 0.01),
        (Kind::Makefile, 0.004),
        (Kind::Asm, 0.005),
        (Kind::Binary, 0.0003),
    ];

    const ARCH: &[(Kind, f64)] = &[
        (Kind::C, 0.4),
        (Kind::Header, 0.21),
        (Kind::DevTree, 0.29),
        (Kind::Asm, 0.07),
        (Kind::Kconfig, 0.015),
        (Kind::Makefile, 0.015),
    ];

    const SOUND: &[(Kind, f64)] = &[
        (Kind::C, 0.76),
        (Kind::Header, 0.21),
        (Kind::Kconfig, 0.02),
        (Kind::Makefile, 0.01),
    ];

    const DOCS: &[(Kind, f64)] = &[
        (Kind::Doc, 0.65),
        (Kind::Yaml, 0.3),
        (Kind::Translation, 0.02),
        (Kind::Binary, 0.005),
        (Kind::Makefile, 0.025),
    ];

    const TOOLS: &[(Kind, f64)] = &[
        (Kind::C, 0.45),
        (Kind::Header, 0.15),
        (Kind::Json, 0.27),
        (Kind::Script, 0.1),
        (Kind::Makefile, 0.03),
    ];

    const SCRIPTS: &[(Kind, f64)] = &[(Kind::Script, 0.5), (Kind::C, 0.4), (Kind::Makefile, 0.1)];

    /// linux-source-6.1's page shares, fs/sound/include nudged above
    /// Documentation/tools (see [`super::FileTree::generate`]).
    #[rustfmt::skip]
    const TOP: &[TopDir] = &[
        TopDir { name: "drivers", percent: 65.8, mix: DRIVERS, density: 0.7 },
        TopDir { name: "arch", percent: 9.9, mix: ARCH, density: 0.7 },
        TopDir { name: "fs", percent: 4.2, mix: CORE, density: 0.9 },
        TopDir { name: "sound", percent: 4.0, mix: SOUND, density: 0.7 },
        TopDir { name: "include", percent: 3.8, mix: &[(Kind::Header, 1.0)], density: 0.7 },
        TopDir { name: "Documentation", percent: 3.4, mix: DOCS, density: 0.5 },
        TopDir { name: "tools", percent: 3.2, mix: TOOLS, density: 0.5 },
        TopDir { name: "net", percent: 2.5, mix: CORE, density: 0.9 },
        TopDir { name: "kernel", percent: 0.88, mix: CORE, density: 1.0 },
        TopDir { name: "lib", percent: 0.54, mix: CORE, density: 0.6 },
        TopDir { name: "mm", percent: 0.37, mix: CORE, density: 1.1 },
        TopDir { name: "crypto", percent: 0.26, mix: CORE, density: 1.0 },
        TopDir { name: "scripts", percent: 0.26, mix: SCRIPTS, density: 0.5 },
        TopDir { name: "security", percent: 0.23, mix: CORE, density: 0.9 },
        TopDir { name: "block", percent: 0.14, mix: CORE, density: 1.0 },
        TopDir { name: "samples", percent: 0.11, mix: CORE, density: 0.45 },
        TopDir { name: "io_uring", percent: 0.04, mix: CORE, density: 0.9 },
        TopDir { name: "rust", percent: 0.03, mix: CORE, density: 0.6 },
        TopDir { name: "virt", percent: 0.02, mix: CORE, density: 0.9 },
        TopDir { name: "ipc", percent: 0.02, mix: CORE, density: 1.0 },
        TopDir { name: "LICENSES", percent: 0.02, mix: &[(Kind::Doc, 1.0)], density: 0.7 },
        TopDir { name: "init", percent: 0.01, mix: CORE, density: 1.0 },
        TopDir { name: "certs", percent: 0.005, mix: CORE, density: 0.5 },
        TopDir { name: "usr", percent: 0.005, mix: CORE, density: 0.5 },
    ];

    /// Files at the root of the tree: (name, kind, size at scale 1).
    const ROOT_FILES: &[(&str, Kind, usize)] = &[
        (".gitignore", Kind::Makefile, 2_000),
        ("COPYING", Kind::Doc, 500),
        ("CREDITS", Kind::Translation, 100_000),
        ("Kbuild", Kind::Makefile, 2_500),
        ("Kconfig", Kind::Kconfig, 600),
        ("MAINTAINERS", Kind::Doc, 600_000),
        ("Makefile", Kind::Makefile, 70_000),
        ("README", Kind::Doc, 700),
    ];

    fn normal(r: &mut StdRng) -> f64 {
        // Box-Muller: rand 0.9 alone has no normal distribution.
        let u1: f64 = r.random_range(f64::EPSILON..1.0);
        let u2: f64 = r.random();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Skewed index into a list of `n`: small indices are much likelier.
    #[inline]
    pub(super) fn zipf(r: &mut StdRng, n: usize, skew: i32) -> usize {
        let u: f64 = r.random();
        ((u.powi(skew) * n as f64) as usize).min(n - 1)
    }

    #[inline]
    fn pick<'a>(r: &mut StdRng, list: &[&'a str], skew: i32) -> &'a str {
        list[zipf(r, list.len(), skew)]
    }

    /// File bytes per page of the generated tree (the real tree has 3580:
    /// 1298681992 bytes in 362734 pages): converts the byte target into a
    /// page budget.
    const BYTES_PER_PAGE: f64 = 3530.0;

    pub(super) fn plan(seed: u64, scale: f64) -> Vec<Planned> {
        let mut r = StdRng::seed_from_u64(seed);
        // Budgets are in pages, not bytes: the shares being matched are page
        // shares, and whole-page budgets make the directory order exact.
        let total_pages = GENERATED_BYTES_AT_SCALE_1 as f64 * scale / BYTES_PER_PAGE;
        let mut out = Vec::new();
        let mut taken: HashSet<String> = HashSet::new();
        for &(name, kind, size) in ROOT_FILES {
            out.push(Planned {
                path: name.to_owned(),
                kind,
                size: ((size as f64 * scale) as usize).max(64),
                seed: r.random(),
                prefix: "linux".into(),
                density: 0.6,
            });
            taken.insert(name.to_owned());
        }
        let sum: f64 = TOP.iter().map(|d| d.percent).sum();
        for top in TOP {
            let dir_pages = ((total_pages * top.percent / sum).round() as usize).max(1);
            // Floor each kind's share; the first kind takes the remainder.
            let mut budgets: Vec<usize> = top
                .mix
                .iter()
                .map(|&(_, share)| (dir_pages as f64 * share) as usize)
                .collect();
            budgets[0] += dir_pages - budgets.iter().sum::<usize>().min(dir_pages);
            let mut dirs = DirPool::new(top.name);
            for (&(kind, _), &budget) in top.mix.iter().zip(&budgets) {
                let mut used = 0usize;
                while used < budget {
                    let (mut mu, mut sigma) = kind.size_law();
                    // A source tree has a second population of tiny files
                    // (stubs, small headers, Kconfig fragments).
                    if kind != Kind::RegHeader && r.random_range(0..5) == 0 {
                        (mu, sigma) = (9.3, 1.2);
                    }
                    let mut size = 2f64.powf(mu + sigma * normal(&mut r)).max(1.0) as usize;
                    if kind == Kind::RegHeader {
                        // Keep several register headers even at small scales.
                        size = size.min(budget * PAGE_SIZE / 3 + 1);
                    } else {
                        size = size.min(1 << 20);
                    }
                    // The last file takes exactly the pages that are left.
                    let left = budget - used;
                    if size.div_ceil(PAGE_SIZE) > left {
                        size = (left - 1) * PAGE_SIZE + r.random_range(1..=PAGE_SIZE);
                    }
                    used += size.div_ceil(PAGE_SIZE);
                    let (dir, prefix) = dirs.choose(&mut r, kind);
                    let ext = kind.ext(&mut r);
                    let path = unique_path(&mut r, &mut taken, &dir, &prefix, kind, ext);
                    out.push(Planned {
                        path,
                        kind,
                        size,
                        seed: r.random(),
                        prefix,
                        density: (top.density + 0.45 * normal(&mut r)).clamp(0.0, 1.5),
                    });
                }
            }
        }
        // Archive order: the Debian tarball lists paths sorted.
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }

    fn unique_path(
        r: &mut StdRng,
        taken: &mut HashSet<String>,
        dir: &str,
        prefix: &str,
        kind: Kind,
        ext: &str,
    ) -> String {
        loop {
            let stem = match kind {
                Kind::Kconfig => "Kconfig".to_owned(),
                Kind::Makefile => "Makefile".to_owned(),
                Kind::RegHeader => {
                    let v = format!(
                        "{}_{}_{}",
                        r.random_range(1..12),
                        r.random_range(0..5),
                        r.random_range(0..4)
                    );
                    let tail = if r.random_range(0..3) == 0 {
                        "offset"
                    } else {
                        "sh_mask"
                    };
                    format!("{prefix}_{v}_{tail}")
                }
                _ => format!("{prefix}-{}", pick(r, WORDS_ID, 1)),
            };
            let mut path = format!("{dir}/{stem}{ext}");
            if taken.contains(&path) {
                path = format!("{dir}/{stem}{}{ext}", r.random_range(0..1000));
            }
            if taken.insert(path.clone()) {
                return path;
            }
        }
    }

    /// The subdirectories of one top-level directory, created on demand and
    /// reused with a skew so that some grow big, like drivers/gpu.
    struct DirPool {
        top: &'static str,
        dirs: Vec<(String, String)>,
        reg_dirs: Vec<(String, String)>,
    }

    impl DirPool {
        fn new(top: &'static str) -> Self {
            Self {
                top,
                dirs: Vec::new(),
                reg_dirs: Vec::new(),
            }
        }

        fn choose(&mut self, r: &mut StdRng, kind: Kind) -> (String, String) {
            if kind == Kind::RegHeader {
                if self.reg_dirs.is_empty() || r.random_range(0..8) == 0 {
                    let blk = pick(r, REG_BLOCKS, 1).to_owned();
                    self.reg_dirs.push((
                        format!("{}/gpu/drm/amd/include/asic_reg/{blk}", self.top),
                        blk,
                    ));
                }
                let i = r.random_range(0..self.reg_dirs.len());
                return self.reg_dirs[i].clone();
            }
            if self.dirs.is_empty() || r.random_range(0..12) == 0 {
                let prefix = format!("{}{}", pick(r, PREFIXES, 1), maybe_digits(r));
                let depth = r.random_range(1..4);
                let mut path = self.top.to_owned();
                for _ in 0..depth - 1 {
                    path.push('/');
                    path.push_str(pick(r, SUBDIRS, 2));
                }
                path.push('/');
                path.push_str(&prefix);
                self.dirs.push((path, prefix));
            }
            let i = zipf(r, self.dirs.len(), 2);
            self.dirs[i].clone()
        }
    }

    fn maybe_digits(r: &mut StdRng) -> String {
        match r.random_range(0..3) {
            0 => String::new(),
            1 => r.random_range(0..10).to_string(),
            _ => r.random_range(100..10000).to_string(),
        }
    }

    /// Generate every planned file's contents, in parallel: each file
    /// depends only on its own seed, so the result is the same for any
    /// number of threads.
    pub(super) fn contents(plan: &[Planned]) -> Vec<Vec<u8>> {
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(8);
        // Biggest first, so that one large file does not finish last.
        let mut order: Vec<usize> = (0..plan.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(plan[i].size));
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<Vec<u8>>> = Mutex::new(vec![Vec::new(); plan.len()]);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    let mut scratch = Vec::new();
                    let mut done = Vec::new();
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&i) = order.get(k) else { break };
                        scratch.clear();
                        file(&plan[i], &mut scratch);
                        scratch.truncate(plan[i].size);
                        // Exact capacity (padded), so FileEntry::new does
                        // not reallocate and no slack is kept.
                        let mut data =
                            Vec::with_capacity(plan[i].size.div_ceil(PAGE_SIZE) * PAGE_SIZE);
                        data.extend_from_slice(&scratch);
                        done.push((i, data));
                        if done.len() >= 64 {
                            let mut res = results.lock().expect("no panics while held");
                            for (i, d) in done.drain(..) {
                                res[i] = d;
                            }
                        }
                    }
                    let mut res = results.lock().expect("no panics while held");
                    for (i, d) in done.drain(..) {
                        res[i] = d;
                    }
                });
            }
        });
        results.into_inner().expect("no panics while held")
    }

    /// Write at least `p.size` bytes of `p.kind` content into `out`.
    fn file(p: &Planned, out: &mut Vec<u8>) {
        let mut r = StdRng::seed_from_u64(p.seed);
        let mut w = W {
            r: &mut r,
            o: out,
            size: p.size,
            density: p.density,
            words: Vec::new(),
            copy: (0, 0),
            lines: Vec::new(),
        };
        match p.kind {
            Kind::C => w.c_source(&p.prefix, false),
            Kind::Header => w.c_source(&p.prefix, true),
            Kind::RegHeader => w.reg_header(&p.prefix, p.path.ends_with("_offset.h")),
            Kind::Doc => w.doc(false),
            Kind::Translation => w.doc(true),
            Kind::DevTree => w.devtree(&p.prefix),
            Kind::Yaml => w.yaml(&p.prefix),
            Kind::Json => w.json(),
            Kind::Asm => w.asm(&p.prefix),
            Kind::Kconfig => w.kconfig(&p.prefix),
            Kind::Makefile => w.makefile(&p.prefix),
            Kind::Script => w.script(&p.prefix),
            Kind::Binary => w.binary(),
        }
    }

    /// Identifiers local to one C file.
    struct Locals {
        funcs: Vec<String>,
        macros: Vec<String>,
        fields: Vec<String>,
        structs: Vec<String>,
        vars: Vec<String>,
        prefix: String,
    }

    impl Locals {
        /// The few identifiers one function works with: a function
        /// touches the same handful of fields and helpers again and again.
        fn scope(&self, r: &mut StdRng, density: f64) -> Locals {
            let mut sub = |v: &[String], lo: f64, hi: f64| -> Vec<String> {
                let n = (lo + (hi - lo) * density) as usize + r.random_range(0..3);
                (0..n.max(1))
                    .map(|_| v[zipf(r, v.len(), 2)].clone())
                    .collect()
            };
            Locals {
                funcs: sub(&self.funcs, 1.0, 8.0),
                macros: sub(&self.macros, 1.0, 10.0),
                fields: sub(&self.fields, 1.0, 9.0),
                structs: self.structs.clone(),
                vars: sub(&self.vars, 1.0, 6.0),
                prefix: self.prefix.clone(),
            }
        }
    }

    struct W<'a> {
        r: &'a mut StdRng,
        o: &'a mut Vec<u8>,
        size: usize,
        density: f64,
        /// Recent prose words, for repeating phrases.
        words: Vec<&'static str>,
        /// A phrase being repeated: (next index in `words`, words left).
        copy: (usize, usize),
        /// Byte ranges of recent single-line statements, for repeating them.
        lines: Vec<(usize, usize)>,
    }

    impl W<'_> {
        fn full(&self) -> bool {
            self.o.len() >= self.size
        }

        fn s(&mut self, s: &str) {
            self.o.extend_from_slice(s.as_bytes());
        }

        fn tabs(&mut self, n: usize) {
            for _ in 0..n {
                self.o.push(b'\t');
            }
        }

        /// A count below `max`, usually small, sometimes large: block
        /// lengths vary that way, which spreads per-page sizes.
        fn long_tail(&mut self, max: usize) -> usize {
            zipf(self.r, max, 3)
        }

        fn chance(&mut self, p: f64) -> bool {
            self.r.random::<f64>() < p
        }

        fn word(&mut self, list: &[&str], skew: i32) {
            let w = pick(self.r, list, skew);
            self.s(w);
        }

        /// Words of prose, space separated, `n` of them.
        fn prose(&mut self, n: usize) {
            for i in 0..n {
                if i > 0 {
                    self.o.push(b' ');
                }
                let w = self.en_word();
                self.s(w);
            }
        }

        /// The next prose word. Technical prose repeats its phrases ("the
        /// device", "is not supported"): now and then a run of recent words
        /// is repeated, less often the denser the text.
        fn en_word(&mut self) -> &'static str {
            if self.copy.1 > 0 {
                let w = self.words[self.copy.0];
                self.copy.0 += 1;
                self.copy.1 -= 1;
                self.words.push(w);
                return w;
            }
            let n = self.words.len();
            if n > 16 && self.chance(0.6 - 0.4 * self.density) {
                let k = self.r.random_range(2..7).min(n);
                let back = k + zipf(self.r, (n - k).min(300), 2);
                self.copy = (n - back, k);
                return self.en_word();
            }
            // Denser text draws from the long tail more often.
            let skew = if self.chance(self.density * 0.5) {
                1
            } else {
                3
            };
            let w = pick(self.r, WORDS_EN, skew);
            if n >= 4096 {
                self.words.drain(..2048);
            }
            self.words.push(w);
            w
        }

        /// Repeat one of the recent single-line statements, if any, at
        /// indentation `d`.
        fn repeat_line(&mut self, d: usize) -> bool {
            let n = self.lines.len();
            if n == 0 {
                return false;
            }
            let (a, b) = self.lines[n - 1 - zipf(self.r, n, 2)];
            self.tabs(d);
            self.o.extend_from_within(a..b);
            true
        }

        /// Remember the line written since `start`, without its indentation.
        fn remember_line(&mut self, start: usize) {
            let tabs = self.o[start..].iter().take_while(|&&b| b == b'\t').count();
            if self.lines.len() >= 32 {
                self.lines.remove(0);
            }
            self.lines.push((start + tabs, self.o.len()));
        }

        /// Prose wrapped at about `width` columns, each line led by `lead`.
        fn paragraph(&mut self, lead: &str, words: usize, width: usize) {
            self.s(lead);
            let mut col = lead.len();
            for i in 0..words {
                let w = self.en_word();
                if i > 0 {
                    if col + 1 + w.len() > width {
                        self.o.push(b'\n');
                        self.s(lead);
                        col = lead.len();
                    } else {
                        self.o.push(b' ');
                        col += 1;
                    }
                }
                self.s(w);
                col += w.len();
            }
            self.s(".\n");
        }

        fn ident_parts(&mut self, n: usize, upper: bool) -> String {
            let mut s = String::new();
            for i in 0..n {
                if i > 0 {
                    s.push('_');
                }
                let w = pick(self.r, WORDS_ID, 2);
                if upper {
                    s.push_str(&w.to_ascii_uppercase());
                } else {
                    s.push_str(w);
                }
            }
            s
        }

        fn number(&mut self) {
            if self.chance(self.density * 0.35) {
                let v: u32 = self.r.random_range(0..0x10000);
                let s = format!("0x{v:x}");
                self.s(&s);
            } else {
                let v = zipf(self.r, 64, 3);
                let s = v.to_string();
                self.s(&s);
            }
        }

        fn locals(&mut self, prefix: &str) -> Locals {
            let d = self.density;
            let n = |w: &mut Self, lo: f64, hi: f64| -> usize {
                (lo + (hi - lo) * d) as usize + w.r.random_range(0..8)
            };
            let nf = n(self, 12.0, 60.0);
            let nm = n(self, 10.0, 60.0);
            let nfi = n(self, 10.0, 40.0);
            let ns = n(self, 2.0, 8.0);
            let up = prefix.to_ascii_uppercase();
            let mut funcs = Vec::with_capacity(nf);
            for _ in 0..nf {
                let k = self.r.random_range(1..3);
                let tail = self.ident_parts(k, false);
                funcs.push(format!("{prefix}_{tail}"));
            }
            let mut macros = Vec::with_capacity(nm);
            for _ in 0..nm {
                let k = self.r.random_range(1..4);
                let tail = self.ident_parts(k, true);
                macros.push(format!("{up}_{tail}"));
            }
            let mut fields = Vec::with_capacity(nfi);
            for _ in 0..nfi {
                let k = self.r.random_range(1..3);
                fields.push(self.ident_parts(k, false));
            }
            let mut structs = Vec::with_capacity(ns);
            for _ in 0..ns {
                let tail = self.ident_parts(1, false);
                structs.push(format!("{prefix}_{tail}"));
            }
            let vars = VARS.iter().map(|v| (*v).to_owned()).collect();
            Locals {
                funcs,
                macros,
                fields,
                structs,
                vars,
                prefix: prefix.to_owned(),
            }
        }

        fn license(&mut self, c_style: bool) {
            let spdx = pick(self.r, SPDX, 2);
            if c_style {
                self.s("// SPDX-License-Identifier: ");
            } else {
                self.s("/* SPDX-License-Identifier: ");
            }
            self.s(spdx);
            self.s(if c_style { "\n" } else { " */\n" });
            if self.chance(0.7) {
                self.s("/*\n * ");
                self.prose(6);
                self.s("\n *\n * Copyright (C) ");
                let y = self.r.random_range(1995..2023).to_string();
                self.s(&y);
                self.s(" ");
                self.word(NAMES, 1);
                self.s(" ");
                self.word(NAMES, 1);
                self.s(" <");
                self.word(NAMES, 1);
                self.s("@");
                self.word(PREFIXES, 1);
                self.s(".com>\n");
                if self.chance(0.4) {
                    self.s(GPL_BOILERPLATE);
                }
                self.s(" */\n");
            }
            self.s("\n");
        }

        fn c_source(&mut self, prefix: &str, header: bool) {
            let l = self.locals(prefix);
            self.license(!header);
            if header {
                let guard = format!(
                    "_{}_{}_H",
                    l.prefix.to_ascii_uppercase(),
                    self.ident_parts(1, true)
                );
                self.s(&format!("#ifndef {guard}\n#define {guard}\n\n"));
            }
            let incs = self.r.random_range(2..14);
            for _ in 0..incs {
                self.s("#include <");
                self.word(INCLUDES, 2);
                self.s(">\n");
            }
            self.s("\n");
            // Each file has its own mix of sections: some are mostly
            // functions, some mostly register definitions or init tables,
            // which is what spreads real pages' compressed sizes so widely.
            let u: f64 = self.r.random();
            let v: f64 = self.r.random();
            let (w_def, w_tab) = if header {
                // A third of headers are register definitions only.
                if u < 0.35 {
                    (1.0, 0.0)
                } else {
                    (0.2 + 0.5 * u, 0.05 * v)
                }
            } else {
                (0.03 + 0.55 * u * u, 0.02 + 0.5 * v * v)
            };
            while !self.full() {
                let x: f64 = self.r.random();
                if x < w_def {
                    self.defines(&l);
                } else if x < w_def + w_tab {
                    self.table(&l);
                } else if header {
                    // Denser headers are the documented ones: more prose.
                    if self.chance(0.1 + 0.25 * self.density) {
                        self.block_comment(0);
                        continue;
                    }
                    match self.r.random_range(0..9) {
                        0..=3 => self.struct_def(&l),
                        4..=6 => self.prototypes(&l),
                        7 => self.function(&l),
                        _ => self.enum_def(&l),
                    }
                } else {
                    match self.r.random_range(0..20) {
                        0 => self.struct_def(&l),
                        1 => self.block_comment(0),
                        _ => self.function(&l),
                    }
                }
            }
            if header {
                self.s("#endif\n");
            }
        }

        /// A run of register definitions: one register's offset, then its
        /// fields with shifts or masks, tab-aligned as in driver headers.
        fn defines(&mut self, l: &Locals) {
            let up = l.prefix.to_ascii_uppercase();
            let regs = 1 + self.long_tail(30);
            let mut off: u32 = self.r.random_range(0..0x400) * 4;
            let style = self.r.random_range(0..4);
            let max_fields = self.r.random_range(2..24);
            // Documented registers carry a comment per line.
            let comments = (0.4 * (self.density - 0.3)).clamp(0.0, 0.5);
            for _ in 0..regs {
                let k = self.r.random_range(1..3);
                let reg = self.ident_parts(k, true);
                let name = format!("#define {up}_{reg}");
                self.s(&name);
                self.def_pad(name.len());
                self.s(&format!("0x{off:04x}\n"));
                off += 4 * self.r.random_range(1..4);
                let n = self.r.random_range(0..max_fields);
                let mut bit = 0u32;
                for _ in 0..n {
                    if bit > 31 {
                        break;
                    }
                    let f = self.ident_parts(1, true);
                    let name = format!("#define {up}_{reg}_{f}");
                    self.s(&name);
                    self.def_pad(name.len());
                    let width = 1 + zipf(self.r, 8, 3) as u32;
                    match style {
                        0 => self.s(&format!("BIT({bit})")),
                        1 => self.s(&format!("GENMASK({}, {bit})", (bit + width - 1).min(31))),
                        2 => {
                            let mask = (((1u64 << width) - 1) << bit) as u32;
                            self.s(&format!("0x{mask:08x}"));
                        }
                        _ => self.s(&format!("{bit}")),
                    }
                    if self.chance(comments) {
                        self.s("\t/* ");
                        let n = self.r.random_range(2..8);
                        self.prose(n);
                        self.s(" */");
                    }
                    self.s("\n");
                    bit += width;
                }
            }
            self.s("\n");
        }

        /// Tabs to column 48, as kernel headers align their values.
        fn def_pad(&mut self, used: usize) {
            let n = 1 + 48usize.saturating_sub(used + 1) / 8;
            self.tabs(n);
        }

        fn struct_def(&mut self, l: &Locals) {
            self.s("struct ");
            let name = pick(self.r, &strs(&l.structs), 1).to_owned();
            self.s(&name);
            self.s(" {\n");
            let n = self.r.random_range(3..16);
            for _ in 0..n {
                self.tabs(1);
                if self.chance(0.3) {
                    self.s("struct ");
                    self.word(KSTRUCTS, 2);
                    let star = if self.chance(0.5) { " *" } else { " " };
                    self.s(star);
                } else {
                    self.word(TYPES, 2);
                    self.s(" ");
                }
                self.local(&l.fields, 2);
                if self.chance(0.2) {
                    self.s("[");
                    self.local(&l.macros, 2);
                    self.s("]");
                }
                self.s(";");
                if self.chance(0.15) {
                    self.s("\t/* ");
                    self.prose(4);
                    self.s(" */");
                }
                self.s("\n");
            }
            self.s("};\n\n");
        }

        fn enum_def(&mut self, l: &Locals) {
            self.s("enum ");
            self.local(&l.structs, 1);
            self.s(" {\n");
            let n = self.r.random_range(3..20);
            let base = self.ident_parts(1, true);
            let up = l.prefix.to_ascii_uppercase();
            for _ in 0..n {
                self.s(&format!("\t{up}_{base}_"));
                let p = self.ident_parts(1, true);
                self.s(&p);
                self.s(",\n");
            }
            self.s("};\n\n");
        }

        fn prototypes(&mut self, l: &Locals) {
            let n = self.r.random_range(2..10);
            for _ in 0..n {
                self.word(TYPES, 2);
                self.s(" ");
                self.local(&l.funcs, 1);
                self.s("(struct ");
                self.local(&l.structs, 1);
                self.s(" *");
                self.word(VARS, 2);
                if self.chance(0.6) {
                    self.s(", ");
                    self.word(TYPES, 2);
                    self.s(" ");
                    self.word(VARS, 2);
                }
                self.s(");\n");
            }
            self.s("\n");
        }

        fn local(&mut self, list: &[String], skew: i32) {
            let i = zipf(self.r, list.len(), skew);
            self.o.extend_from_slice(list[i].as_bytes());
        }

        fn block_comment(&mut self, indent: usize) {
            self.tabs(indent);
            self.s("/*\n");
            let lines = 1 + self.long_tail(40);
            for _ in 0..lines {
                self.tabs(indent);
                self.s(" * ");
                let n = self.r.random_range(6..12);
                self.prose(n);
                self.s("\n");
            }
            self.tabs(indent);
            self.s(" */\n");
        }

        /// An initialisation table: register/value pairs with rising
        /// addresses, or rows of macros and small numbers.
        fn table(&mut self, l: &Locals) {
            self.s("static const struct ");
            self.local(&l.structs, 1);
            self.s(" ");
            self.local(&l.fields, 1);
            self.s("[] = {\n");
            let n = 4 + self.long_tail(300);
            let regs = self.chance(0.6);
            let mut addr: u32 = self.r.random_range(0..0x4000) * 4;
            for _ in 0..n {
                if regs {
                    let v: u32 = if self.chance(0.5) {
                        0
                    } else {
                        self.r.random_range(0..0x10000)
                    };
                    self.s(&format!("\t{{ 0x{addr:04x}, 0x{v:04x} }},\n"));
                    addr += 4 * (1 + zipf(self.r, 4, 3) as u32);
                    continue;
                }
                self.s("\t{ ");
                let k = self.r.random_range(2..5);
                for j in 0..k {
                    if j > 0 {
                        self.s(", ");
                    }
                    if self.chance(0.5) {
                        self.local(&l.macros, 2);
                    } else {
                        self.number();
                    }
                }
                self.s(" },\n");
            }
            self.s("};\n\n");
        }

        fn function(&mut self, l: &Locals) {
            let name = pick(self.r, &strs(&l.funcs), 1).to_owned();
            let arg_struct = pick(self.r, &strs(&l.structs), 1).to_owned();
            let arg = pick(self.r, VARS, 2);
            if self.chance(0.35) {
                self.s("/**\n * ");
                self.s(&name);
                self.s(" - ");
                self.prose(6);
                self.s("\n * @");
                self.s(arg);
                self.s(": ");
                self.prose(4);
                self.s("\n *\n");
                let n = self.r.random_range(10..40);
                self.paragraph(" * ", n, 76);
                self.s(" */\n");
            }
            if self.chance(0.7) {
                self.s("static ");
            }
            let ret = pick(self.r, TYPES, 2);
            self.s(ret);
            self.s(" ");
            self.s(&name);
            self.s("(struct ");
            self.s(&arg_struct);
            self.s(" *");
            self.s(arg);
            if self.chance(0.5) {
                self.s(", ");
                self.word(TYPES, 2);
                self.s(" ");
                self.local(&l.vars, 2);
            }
            self.s(")\n{\n");
            // Declarations.
            let decls = self.r.random_range(0..4);
            for _ in 0..decls {
                self.tabs(1);
                if self.chance(0.4) {
                    self.s("struct ");
                    self.local(&l.structs, 1);
                    self.s(" *");
                    self.local(&l.vars, 2);
                    self.s(" = ");
                    self.s(arg);
                    self.s("->");
                    self.local(&l.fields, 2);
                } else {
                    self.word(TYPES, 2);
                    self.s(" ");
                    self.local(&l.vars, 2);
                }
                self.s(";\n");
            }
            if decls > 0 {
                self.s("\n");
            }
            let scope = l.scope(self.r, self.density);
            let n = 2 + self.long_tail(60);
            for _ in 0..n {
                self.statement(&scope, arg, 1);
            }
            self.s("\treturn ");
            if self.chance(0.5) {
                self.s("0");
            } else {
                self.local(&l.vars, 2);
            }
            self.s(";\n}\n\n");
            if self.chance(0.1) {
                self.s("EXPORT_SYMBOL_GPL(");
                self.s(&name);
                self.s(");\n\n");
            }
        }

        fn operand(&mut self, l: &Locals, obj: &str) {
            // Dense code names more distinct things.
            if self.chance(0.4 * (self.density - 0.5).max(0.0)) {
                let k = self.r.random_range(1..3);
                let upper = self.chance(0.3);
                let id = self.ident_parts(k, upper);
                self.s(&id);
                return;
            }
            match self.r.random_range(0..6) {
                0 | 1 => self.local(&l.vars, 2),
                2 => {
                    self.s(obj);
                    self.s("->");
                    self.local(&l.fields, 2);
                }
                3 => self.local(&l.macros, 2),
                4 => self.number(),
                _ => {
                    self.s("&");
                    self.s(obj);
                    self.s("->");
                    self.local(&l.fields, 2);
                }
            }
        }

        fn call(&mut self, l: &Locals, obj: &str) {
            if self.chance(0.5) {
                self.local(&l.funcs, 2);
            } else {
                self.word(KAPI, 2);
            }
            self.s("(");
            let n = self.r.random_range(0..4);
            for i in 0..n {
                if i > 0 {
                    self.s(", ");
                }
                self.operand(l, obj);
            }
            self.s(")");
        }

        fn cond(&mut self, l: &Locals, obj: &str) {
            match self.r.random_range(0..6) {
                0 => self.s("ret"),
                1 => self.s("ret < 0"),
                2 => {
                    self.s("!");
                    self.operand(l, obj);
                }
                3 => {
                    self.operand(l, obj);
                    self.s(" & ");
                    self.local(&l.macros, 2);
                }
                4 => {
                    self.s("IS_ERR(");
                    self.local(&l.vars, 2);
                    self.s(")");
                }
                _ => {
                    self.operand(l, obj);
                    let op = [" == ", " != ", " > ", " < "][self.r.random_range(0..4)];
                    self.s(op);
                    self.operand(l, obj);
                }
            }
        }

        fn statement(&mut self, l: &Locals, obj: &str, d: usize) {
            if self.chance(0.4 - 0.27 * self.density) && self.repeat_line(d) {
                return;
            }
            let start = self.o.len();
            let x = self.r.random_range(0..100);
            match x {
                0..=19 => {
                    self.tabs(d);
                    self.local(&l.vars, 2);
                    self.s(" = ");
                    self.call(l, obj);
                    self.s(";\n");
                    self.remember_line(start);
                }
                20..=31 => {
                    self.tabs(d);
                    self.s(obj);
                    self.s("->");
                    self.local(&l.fields, 2);
                    let op = [" = ", " |= ", " &= ~", " += "][zipf(self.r, 4, 2)];
                    self.s(op);
                    self.operand(l, obj);
                    self.s(";\n");
                    self.remember_line(start);
                }
                32..=43 => {
                    self.tabs(d);
                    self.s("if (");
                    self.cond(l, obj);
                    self.s(")\n");
                    self.tabs(d + 1);
                    self.s("return ");
                    if self.chance(0.6) {
                        self.s("ret");
                    } else {
                        self.s("-");
                        self.word(ERRNO, 2);
                    }
                    self.s(";\n\n");
                }
                44..=53 if d < 4 => {
                    self.tabs(d);
                    self.s("if (");
                    self.cond(l, obj);
                    self.s(") {\n");
                    let n = self.r.random_range(1..5);
                    for _ in 0..n {
                        self.statement(l, obj, d + 1);
                    }
                    self.tabs(d);
                    self.s("}\n");
                }
                54..=58 if d < 4 => {
                    self.tabs(d);
                    self.s("for (i = 0; i < ");
                    self.operand(l, obj);
                    self.s("; i++) {\n");
                    let n = self.r.random_range(1..4);
                    for _ in 0..n {
                        self.statement(l, obj, d + 1);
                    }
                    self.tabs(d);
                    self.s("}\n");
                }
                59..=70 => {
                    self.tabs(d);
                    self.call(l, obj);
                    self.s(";\n");
                    self.remember_line(start);
                }
                71..=77 => {
                    self.tabs(d);
                    let f = pick(
                        self.r,
                        &[
                            "dev_err(",
                            "dev_dbg(",
                            "dev_warn(",
                            "pr_err(",
                            "netdev_err(",
                        ],
                        2,
                    );
                    self.s(f);
                    if self.chance(0.7) {
                        self.s("&");
                        self.s(obj);
                        self.s("->dev, ");
                    }
                    self.s("\"");
                    let n = self.r.random_range(2..8);
                    self.prose(n);
                    self.s(": %d\\n\", ret);\n");
                    self.remember_line(start);
                }
                78..=85 => {
                    self.tabs(d);
                    self.s("/* ");
                    let n = self.r.random_range(3..12);
                    self.prose(n);
                    self.s(" */\n");
                }
                86..=88 => self.block_comment(d),
                89..=92 => {
                    let lock = pick(
                        self.r,
                        &[
                            "spin_lock",
                            "mutex_lock",
                            "spin_lock_irqsave",
                            "rcu_read_lock",
                        ],
                        2,
                    );
                    self.tabs(d);
                    self.s(lock);
                    self.s("(&");
                    self.s(obj);
                    self.s("->lock);\n");
                    let n = self.r.random_range(1..4);
                    for _ in 0..n {
                        self.statement(l, obj, d);
                    }
                    self.tabs(d);
                    self.s(&lock.replace("lock", "unlock"));
                    self.s("(&");
                    self.s(obj);
                    self.s("->lock);\n");
                }
                93..=95 if d < 3 => {
                    self.tabs(d);
                    self.s("switch (");
                    self.operand(l, obj);
                    self.s(") {\n");
                    let n = self.r.random_range(2..6);
                    for _ in 0..n {
                        self.tabs(d);
                        self.s("case ");
                        self.local(&l.macros, 1);
                        self.s(":\n");
                        self.statement(l, obj, d + 1);
                        self.tabs(d + 1);
                        self.s("break;\n");
                    }
                    self.tabs(d);
                    self.s("default:\n");
                    self.tabs(d + 1);
                    self.s("break;\n");
                    self.tabs(d);
                    self.s("}\n");
                }
                _ => self.s("\n"),
            }
        }

        fn reg_header(&mut self, block: &str, offsets: bool) {
            let col = 110;
            self.s(AMD_BOILERPLATE);
            let up = block.to_ascii_uppercase();
            self.s(&format!(
                "#ifndef _{block}_SH_MASK_HEADER\n#define _{block}_SH_MASK_HEADER\n\n\n"
            ));
            let mut addr: u32 = self.r.random_range(0..0x1000);
            while !self.full() {
                // One address block: a shared prefix over many registers.
                self.s("// addressBlock: ");
                self.s(block);
                self.s("_");
                let ab = self.ident_parts(2, false);
                self.s(&ab);
                self.s("\n");
                let unit = format!(
                    "{up}{}_{}",
                    self.r.random_range(0..4),
                    self.ident_parts(1, true)
                );
                let regs = self.r.random_range(4..40);
                for _ in 0..regs {
                    let nparts = self.r.random_range(1..4);
                    let reg = format!("{unit}_{}", self.ident_parts(nparts, true));
                    if offsets {
                        addr += self.r.random_range(1..4);
                        let l1 = format!("#define reg{reg}");
                        self.s(&l1);
                        self.pad(l1.len(), col - 14);
                        self.s(&format!("0x{addr:04x}\n"));
                        let l2 = format!("#define reg{reg}_BASE_IDX");
                        self.s(&l2);
                        self.pad(l2.len(), col - 14);
                        let v = self.r.random_range(0..4).to_string();
                        self.s(&v);
                        self.s("\n");
                        continue;
                    }
                    self.s("//");
                    self.s(&reg);
                    self.s("\n");
                    let nf = self.r.random_range(1..20);
                    let mut fields = Vec::with_capacity(nf);
                    let mut shift = 0u32;
                    while fields.len() < nf && shift < 32 {
                        let k = self.r.random_range(1..3);
                        let name = if self.chance(0.5) {
                            format!("{}_{}", unit, self.ident_parts(k, true))
                        } else {
                            self.ident_parts(k + 1, true)
                        };
                        // Numbered series (DTO0_EN, DTO1_EN, ...) are common.
                        let series = if self.chance(0.3) {
                            self.r.random_range(2..7)
                        } else {
                            1
                        };
                        let tail = if series > 1 {
                            self.ident_parts(1, true)
                        } else {
                            String::new()
                        };
                        for j in 0..series {
                            if shift >= 32 {
                                break;
                            }
                            let width = (1 + zipf(self.r, 8, 3) as u32).min(32 - shift);
                            let name = if series > 1 {
                                format!("{name}{j}_{tail}")
                            } else {
                                name.clone()
                            };
                            fields.push((name, shift, width));
                            shift += width + zipf(self.r, 4, 3) as u32;
                        }
                    }
                    for (name, shift, _) in &fields {
                        let l1 = format!("#define {reg}__{name}__SHIFT");
                        self.s(&l1);
                        self.pad(l1.len(), col);
                        self.s(&format!("0x{shift:x}\n"));
                    }
                    for (name, shift, width) in &fields {
                        let l1 = format!("#define {reg}__{name}_MASK");
                        self.s(&l1);
                        self.pad(l1.len(), col);
                        let mask = (((1u64 << width) - 1) << shift) as u32;
                        self.s(&format!("0x{mask:08X}L\n"));
                    }
                }
                self.s("\n");
            }
        }

        fn pad(&mut self, used: usize, col: usize) {
            let n = col.saturating_sub(used).max(1);
            self.o.resize(self.o.len() + n, b' ');
        }

        fn doc(&mut self, translation: bool) {
            let title = {
                let n = self.r.random_range(2..6);
                let mut t = String::new();
                for i in 0..n {
                    if i > 0 {
                        t.push(' ');
                    }
                    t.push_str(pick(self.r, WORDS_EN, 2));
                }
                t
            };
            self.s(".. SPDX-License-Identifier: GPL-2.0\n\n");
            self.s(&"=".repeat(title.len()));
            self.s("\n");
            self.s(&title);
            self.s("\n");
            self.s(&"=".repeat(title.len()));
            self.s("\n\n");
            while !self.full() {
                let x = self.r.random_range(0..100);
                if translation && x < 70 {
                    self.cjk_paragraph();
                    continue;
                }
                match x {
                    0..=59 => {
                        let n = self.r.random_range(15..90);
                        self.paragraph("", n, 78);
                        self.s("\n");
                    }
                    60..=69 => {
                        let h = self.ident_parts(2, false).replace('_', " ");
                        self.s(&h);
                        self.s("\n");
                        self.s(&"-".repeat(h.len()));
                        self.s("\n\n");
                    }
                    70..=84 => {
                        let n = self.r.random_range(2..8);
                        for _ in 0..n {
                            let k = self.r.random_range(5..25);
                            self.paragraph("- ", k, 78);
                        }
                        self.s("\n");
                    }
                    _ => {
                        self.s("::\n\n");
                        let n = self.r.random_range(2..10);
                        for _ in 0..n {
                            self.s("\t");
                            self.word(VARS, 2);
                            self.s(" = ");
                            self.word(KAPI, 2);
                            self.s("(");
                            self.word(VARS, 2);
                            self.s(");\n");
                        }
                        self.s("\n");
                    }
                }
            }
        }

        /// Text in CJK ideographs: three bytes a character and little
        /// repetition, the reason real translations make huge pages.
        fn cjk_paragraph(&mut self) {
            let n = self.r.random_range(40..200);
            let mut col = 0;
            for _ in 0..n {
                let c = 0x4e00 + zipf(self.r, 3000, 2) as u32;
                let ch = char::from_u32(c).unwrap_or('?');
                let mut b = [0u8; 4];
                self.s(ch.encode_utf8(&mut b));
                col += 2;
                if col >= 76 {
                    self.s("\n");
                    col = 0;
                }
            }
            self.s("。\n\n");
        }

        fn devtree(&mut self, prefix: &str) {
            self.s("// SPDX-License-Identifier: (GPL-2.0+ OR MIT)\n/*\n * Copyright (c) ");
            let y = self.r.random_range(2012..2023).to_string();
            self.s(&y);
            self.s(" ");
            self.word(NAMES, 1);
            self.s("\n */\n\n#include <dt-bindings/interrupt-controller/arm-gic.h>\n\n/ {\n\tsoc: soc@0 {\n");
            let clocks: Vec<String> = (0..20)
                .map(|_| {
                    format!(
                        "{}_{}",
                        prefix.to_ascii_uppercase(),
                        self.ident_parts(2, true)
                    )
                })
                .collect();
            let mut addr: u32 = self.r.random_range(0x100..0x1000) << 12;
            while !self.full() {
                let node = pick(self.r, DT_NODES, 2);
                let idx = self.r.random_range(0..20);
                addr += self.r.random_range(1..64) << 12;
                self.s(&format!(
                    "\t\t{node}{idx}: {node}@{addr:x} {{\n\t\t\tcompatible = \"{prefix},"
                ));
                self.s(node);
                self.s("\";\n");
                let len = 0x1000 << self.r.random_range(0..4);
                self.s(&format!("\t\t\treg = <0 0x{addr:08x} 0 0x{len:x}>;\n"));
                let props = self.r.random_range(3..10);
                for _ in 0..props {
                    match self.r.random_range(0..6) {
                        0 => {
                            let c = pick(self.r, &strs(&clocks), 2).to_owned();
                            self.s(&format!("\t\t\tclocks = <&gcc {c}>;\n"));
                        }
                        1 => {
                            let irq = self.r.random_range(0..600);
                            self.s(&format!(
                                "\t\t\tinterrupts = <GIC_SPI {irq} IRQ_TYPE_LEVEL_HIGH>;\n"
                            ));
                        }
                        2 => self.s("\t\t\t#address-cells = <1>;\n\t\t\t#size-cells = <0>;\n"),
                        3 => {
                            self.s("\t\t\tpinctrl-names = \"default\";\n\t\t\tpinctrl-0 = <&");
                            self.s(node);
                            self.s(&format!("{idx}_default>;\n"));
                        }
                        4 => self.s("\t\t\tdma-names = \"tx\", \"rx\";\n"),
                        _ => {
                            self.s("\t\t\tpower-domains = <&rpmhpd ");
                            let c = pick(self.r, &strs(&clocks), 2).to_owned();
                            self.s(&c);
                            self.s(">;\n");
                        }
                    }
                }
                self.s("\t\t\tstatus = \"disabled\";\n\t\t};\n\n");
            }
        }

        fn yaml(&mut self, prefix: &str) {
            self.s("# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)\n%YAML 1.2\n---\n$id: http://devicetree.org/schemas/");
            self.s(prefix);
            self.s(".yaml#\n$schema: http://devicetree.org/meta-schemas/core.yaml#\n\ntitle: ");
            self.prose(4);
            self.s("\n\nmaintainers:\n  - ");
            self.word(NAMES, 1);
            self.s(" <");
            self.word(NAMES, 1);
            self.s("@kernel.org>\n\ndescription:\n");
            let n = self.r.random_range(10..40);
            self.paragraph("  ", n, 76);
            self.s("\nproperties:\n  compatible:\n    enum:\n");
            let n = self.r.random_range(2..10);
            for _ in 0..n {
                let (p, n) = (pick(self.r, PREFIXES, 1), self.r.random_range(100..9999));
                self.s(&format!("      - {prefix},{p}{n}\n"));
            }
            while !self.full() {
                self.s("\n  ");
                let p = self.ident_parts(2, false).replace('_', "-");
                self.s(&p);
                self.s(":\n    ");
                match self.r.random_range(0..3) {
                    0 => self.s("$ref: /schemas/types.yaml#/definitions/uint32\n"),
                    1 => self.s("maxItems: 1\n"),
                    _ => self.s("type: boolean\n"),
                }
                self.s("    description:\n");
                let n = self.r.random_range(5..25);
                self.paragraph("      ", n, 76);
            }
        }

        fn json(&mut self) {
            self.s("[\n");
            while !self.full() {
                self.s("    {\n        \"BriefDescription\": \"");
                let n = self.r.random_range(3..12);
                self.prose(n);
                self.s("\",\n        \"Counter\": \"0,1,2,3\",\n        \"EventCode\": \"");
                let v = format!("0x{:x}", self.r.random_range(0..256));
                self.s(&v);
                self.s("\",\n        \"EventName\": \"");
                let e = self.ident_parts(2, true);
                self.s(&e);
                self.s(".");
                let e = self.ident_parts(1, true);
                self.s(&e);
                self.s("\",\n        \"PublicDescription\": \"");
                let n = self.r.random_range(5..40);
                self.prose(n);
                self.s(".\",\n        \"SampleAfterValue\": \"2000003\",\n        \"UMask\": \"");
                let v = format!("0x{:x}", self.r.random_range(0..16));
                self.s(&v);
                self.s("\"\n    },\n");
            }
            self.s("]\n");
        }

        fn asm(&mut self, prefix: &str) {
            self.license(false);
            self.s("#include <linux/linkage.h>\n#include <asm/assembler.h>\n\n");
            while !self.full() {
                self.s("SYM_FUNC_START(");
                self.s(prefix);
                self.s("_");
                let n = self.ident_parts(2, false);
                self.s(&n);
                self.s(")\n");
                let k = self.r.random_range(4..30);
                for _ in 0..k {
                    self.s("\t");
                    self.word(ASM_OPS, 2);
                    self.s("\t");
                    let regs = self.r.random_range(1..4);
                    for j in 0..regs {
                        if j > 0 {
                            self.s(", ");
                        }
                        if self.chance(0.2) {
                            self.s("#");
                            self.number();
                        } else {
                            let reg = ["x", "w", "r"][zipf(self.r, 3, 2)];
                            self.s(reg);
                            let v = zipf(self.r, 31, 2).to_string();
                            self.s(&v);
                        }
                    }
                    if self.chance(0.15) {
                        self.s("\t\t// ");
                        self.prose(4);
                    }
                    self.s("\n");
                }
                self.s("\tret\nSYM_FUNC_END(");
                self.s(prefix);
                self.s("_");
                self.s(&n);
                self.s(")\n\n");
            }
        }

        fn kconfig(&mut self, prefix: &str) {
            self.s("# SPDX-License-Identifier: GPL-2.0-only\n");
            let up = prefix.to_ascii_uppercase();
            while !self.full() {
                let name = self.ident_parts(2, true);
                self.s(&format!("\nconfig {up}_{name}\n\ttristate \""));
                self.prose(4);
                self.s("\"\n\tdepends on ");
                self.s(&up);
                if self.chance(0.5) {
                    self.s(" || COMPILE_TEST");
                }
                self.s("\n\thelp\n");
                let n = self.r.random_range(15..60);
                self.paragraph("\t  ", n, 72);
                self.s("\n\t  To compile this driver as a module, choose M here: the module\n\t  will be called ");
                self.s(prefix);
                self.s(".\n");
            }
        }

        fn makefile(&mut self, prefix: &str) {
            self.s("# SPDX-License-Identifier: GPL-2.0\n");
            let up = prefix.to_ascii_uppercase();
            while !self.full() {
                let name = self.ident_parts(1, false);
                let cfg = self.ident_parts(1, true);
                self.s(&format!("obj-$(CONFIG_{up}_{cfg})\t+= {prefix}_{name}.o\n"));
                if self.chance(0.2) {
                    self.s(&format!("{prefix}-y\t\t\t\t:= {name}.o "));
                    let n = self.ident_parts(1, false);
                    self.s(&n);
                    self.s(".o\n");
                }
            }
        }

        fn script(&mut self, prefix: &str) {
            self.s("#!/bin/sh\n# SPDX-License-Identifier: GPL-2.0\n#\n# ");
            self.prose(8);
            self.s("\n\n");
            while !self.full() {
                match self.r.random_range(0..5) {
                    0 => {
                        self.s("# ");
                        let n = self.r.random_range(4..14);
                        self.prose(n);
                        self.s("\n");
                    }
                    1 => {
                        let v = self.ident_parts(1, false);
                        self.s(&format!("if [ -z \"${v}\" ]; then\n\techo \""));
                        self.prose(5);
                        self.s("\" >&2\n\texit 1\nfi\n");
                    }
                    2 => {
                        let f = self.ident_parts(2, false);
                        self.s(&format!("{prefix}_{f}()\n{{\n\tlocal "));
                        self.word(VARS, 2);
                        self.s("=$1\n\n\t");
                        self.word(SHELL_CMDS, 2);
                        self.s(" \"$");
                        self.word(VARS, 2);
                        self.s("\" | ");
                        self.word(SHELL_CMDS, 2);
                        self.s("\n}\n\n");
                    }
                    _ => {
                        self.word(SHELL_CMDS, 2);
                        self.s(" ");
                        self.word(VARS, 2);
                        self.s(" \"$");
                        self.word(VARS, 2);
                        self.s("\"\n");
                    }
                }
            }
        }

        /// Firmware blobs and images: from nearly random (huge pages) to
        /// palette-like data with runs, some with zero-filled stretches
        /// (same-filled pages).
        fn binary(&mut self) {
            let style = self.r.random_range(0..4);
            // Half the blobs end in zero padding, like firmware images
            // rounded up to an erase block: zram's same-filled pages.
            let tail = if self.chance(0.5) {
                (self.size / 2).min(self.r.random_range(8192..16384))
            } else {
                0
            };
            let body = self.size - tail;
            while self.o.len() < body {
                match style {
                    0 => {
                        let start = self.o.len();
                        self.o.resize(start + 4096, 0);
                        self.r.fill(&mut self.o[start..]);
                    }
                    1 => {
                        // Palette image: few symbols, short runs.
                        for _ in 0..1024 {
                            let v = zipf(self.r, 16, 2) as u8 * 17;
                            let run = 1 + zipf(self.r, 6, 2);
                            for _ in 0..run {
                                self.o.push(v);
                            }
                        }
                    }
                    2 => {
                        // Firmware: code-like random words between tables.
                        let start = self.o.len();
                        self.o.resize(start + 2048, 0);
                        self.r.fill(&mut self.o[start..]);
                        for _ in 0..128 {
                            let w = (zipf(self.r, 64, 3) as u32).to_le_bytes();
                            self.o.extend_from_slice(&w);
                            self.o.extend_from_slice(&[0, 0, 0, 0]);
                        }
                        self.o.extend_from_slice(&[0u8; 1024]);
                    }
                    _ => {
                        // Padded image: random data, then an erased stretch.
                        let start = self.o.len();
                        self.o.resize(start + 6144, 0);
                        self.r.fill(&mut self.o[start..]);
                        let pad = self.o.len();
                        self.o.resize(pad + 8192, 0xff);
                    }
                }
            }
            self.o.truncate(body);
            self.o.resize(self.size, 0);
        }
    }

    fn strs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }

    const SPDX: &[&str] = &[
        "GPL-2.0",
        "GPL-2.0-only",
        "GPL-2.0-or-later",
        "GPL-2.0+",
        "(GPL-2.0 OR MIT)",
        "BSD-3-Clause OR GPL-2.0",
        "MIT",
    ];

    const GPL_BOILERPLATE: &str = " *\n * This program is free software; you can redistribute it and/or modify\n * it under the terms of the GNU General Public License version 2 as\n * published by the Free Software Foundation.\n *\n * This program is distributed in the hope that it will be useful,\n * but WITHOUT ANY WARRANTY; without even the implied warranty of\n * MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.  See the\n * GNU General Public License for more details.\n";

    const AMD_BOILERPLATE: &str = "/*\n * Copyright (C) 2021  Advanced Micro Devices, Inc.\n *\n * Permission is hereby granted, free of charge, to any person obtaining a\n * copy of this software and associated documentation files (the \"Software\"),\n * to deal in the Software without restriction, including without limitation\n * the rights to use, copy, modify, merge, publish, distribute, sublicense,\n * and/or sell copies of the Software, and to permit persons to whom the\n * Software is furnished to do so, subject to the following conditions:\n *\n * The above copyright notice and this permission notice shall be included\n * in all copies or substantial portions of the Software.\n *\n * THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND, EXPRESS\n * OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,\n * FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT.  IN NO EVENT SHALL\n * THE COPYRIGHT HOLDER(S) BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN\n * AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN\n * CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.\n */\n";

    #[rustfmt::skip]
    const REG_BLOCKS: &[&str] = &[
        "dcn", "nbio", "dpcs", "gc", "mmhub", "dce", "bif", "oss", "sdma", "vcn", "smuio", "athub", "hdp", "mp",
        "thm", "umc", "lsdma", "xgmi",
    ];

    #[rustfmt::skip]
    const PREFIXES: &[&str] = &[
        "mlx", "e1000", "ath", "rtw", "amdgpu", "i915", "nouveau", "brcm", "qcom", "mtk", "sun", "imx", "tegra",
        "rockchip", "stm32", "bnx", "ixgbe", "iwl", "hns", "sdhci", "dwc", "xhci", "ehci", "wm", "rt", "cs", "tas",
        "ad", "max", "ltc", "ina", "bq", "mpu", "bmi", "hid", "usb", "uart", "spi", "i2c", "gpio", "pinctrl", "clk",
        "regulator", "pwm", "rtc", "wdt", "nvme", "scsi", "ata", "mmc", "nand", "cxl", "vfio", "kvm", "drm", "fb",
        "v4l2", "dvb", "btrfs", "ext4", "xfs", "nfs", "cifs", "f2fs", "ocfs2", "tcp", "udp", "ipv6", "sctp", "nf",
        "mptcp", "bpf", "sched", "cgroup", "lpfc", "qla", "megasas", "mpt3sas", "ice", "igb", "tg3", "bnxt", "mt76",
        "rtl", "b43", "ath10k", "ath11k", "venus", "vc4", "msm", "mdp", "dsi", "hdmi", "dp", "panel", "tcpm", "typec",
        "phy", "serdes", "pcie", "dma", "edma", "sdma", "ipu", "isp", "camss", "hfi", "gmu", "adreno", "panfrost",
        "lima", "etnaviv",
    ];

    #[rustfmt::skip]
    const SUBDIRS: &[&str] = &[
        "net", "gpu", "media", "staging", "scsi", "usb", "ethernet", "wireless", "drm", "platform", "phy", "pinctrl",
        "clk", "iio", "input", "hid", "mfd", "misc", "soc", "infiniband", "hw", "crypto", "char", "tty", "serial",
        "mmc", "mtd", "power", "supply", "regulator", "thermal", "video", "fbdev", "i2c", "busses", "spi", "gpio",
        "pci", "controller", "acpi", "firmware", "block", "md", "nvme", "host", "target", "core", "boot", "dts",
        "mach", "kernel", "mm", "lib", "include", "asm", "uapi", "codecs", "soc", "intel", "amd", "qcom", "arm64",
        "x86", "powerpc", "mips", "riscv", "s390",
    ];

    #[rustfmt::skip]
    const WORDS_ID: &[&str] = &[
        "reg", "ctrl", "status", "config", "init", "reset", "enable", "disable", "irq", "dma", "buf", "desc", "ring",
        "queue", "tx", "rx", "data", "len", "count", "index", "mask", "shift", "mode", "state", "flags", "clock",
        "rate", "freq", "power", "mem", "addr", "base", "offset", "size", "port", "link", "phy", "mac", "hw", "priv",
        "dev", "info", "ops", "cmd", "resp", "req", "msg", "event", "timer", "work", "lock", "list", "entry", "node",
        "table", "map", "page", "cache", "fw", "version", "id", "type", "val", "value", "channel", "stream", "pipe",
        "cfg", "param", "stats", "error", "timeout", "retry", "handler", "probe", "remove", "suspend", "resume",
        "open", "close", "read", "write", "get", "set", "update", "alloc", "free", "start", "stop", "setup", "check",
        "wait", "poll", "submit", "complete", "handle", "process", "parse", "register", "unregister", "attach",
        "detach", "query", "fill", "prepare", "release", "destroy", "create", "find", "lookup", "add", "del", "clear",
        "flush", "sync", "commit", "apply", "vblank", "crtc", "plane", "encoder", "connector", "mode", "pll", "gate",
        "mux", "div", "lane", "link", "training", "calib", "thermal", "fan", "volt", "current", "limit", "threshold",
        "level", "gain", "sample", "frame", "pixel", "format", "width", "height", "stride", "fence", "job", "ctx",
        "vm", "pte", "pde", "tlb", "mmu", "iommu", "bar", "msi", "intr", "vector", "cpu", "core", "cluster", "domain",
        "group", "slot", "bus", "host",
    ];

    #[rustfmt::skip]
    const VARS: &[&str] = &[
        "ret", "i", "dev", "priv", "val", "data", "reg", "len", "err", "hw", "adapter", "flags", "count", "ctx",
        "buf", "idx", "mask", "status", "tmp", "j", "info", "cfg", "pdev", "skb", "page", "size", "offset", "state",
        "entry", "node", "res", "np", "rc", "id", "value", "port", "chan",
    ];

    #[rustfmt::skip]
    const TYPES: &[&str] = &[
        "int", "u32", "void", "bool", "u8", "u16", "u64", "unsigned int", "unsigned long", "size_t", "char", "s32",
        "long", "dma_addr_t", "irqreturn_t", "ssize_t", "loff_t", "__le32", "uint32_t", "phys_addr_t", "gfp_t",
    ];

    #[rustfmt::skip]
    const KSTRUCTS: &[&str] = &[
        "device", "platform_device", "pci_dev", "net_device", "sk_buff", "work_struct", "list_head", "mutex", "file",
        "inode", "page", "clk", "regmap", "i2c_client", "resource", "timer_list", "completion", "delayed_work",
        "seq_file", "kobject", "device_node", "dma_chan", "scatterlist", "napi_struct", "drm_device", "drm_crtc",
        "snd_soc_component", "gpio_desc", "reset_control", "regulator", "iio_dev", "input_dev", "usb_device", "urb",
    ];

    #[rustfmt::skip]
    const KAPI: &[&str] = &[
        "kfree", "kzalloc", "dev_err", "readl", "writel", "memcpy", "memset", "spin_lock", "spin_unlock",
        "mutex_lock", "mutex_unlock", "devm_kzalloc", "kmalloc", "WARN_ON", "ARRAY_SIZE", "BIT", "GENMASK",
        "FIELD_PREP", "FIELD_GET", "udelay", "msleep", "usleep_range", "list_add_tail", "list_del", "container_of",
        "unlikely", "likely", "schedule_work", "cancel_work_sync", "platform_get_drvdata", "of_property_read_u32",
        "clk_prepare_enable", "clk_disable_unprepare", "regmap_read", "regmap_write", "regmap_update_bits",
        "dma_alloc_coherent", "dma_free_coherent", "dma_map_single", "atomic_inc", "atomic_dec_and_test",
        "copy_from_user", "copy_to_user", "min_t", "max_t", "le32_to_cpu", "cpu_to_le32", "netdev_priv", "skb_put",
        "pm_runtime_get_sync", "pm_runtime_put", "request_irq", "free_irq", "wake_up", "wait_event_timeout",
        "msecs_to_jiffies", "mod_timer", "del_timer_sync", "READ_ONCE", "WRITE_ONCE", "IS_ERR", "PTR_ERR", "ERR_PTR",
        "devm_ioremap_resource", "ioread32", "iowrite32",
    ];

    #[rustfmt::skip]
    const ERRNO: &[&str] = &[
        "EINVAL", "ENOMEM", "EIO", "ENODEV", "EBUSY", "ETIMEDOUT", "EAGAIN", "EOPNOTSUPP", "EFAULT", "ENOENT",
        "EPERM", "ENOSPC", "ERANGE", "EPROBE_DEFER",
    ];

    #[rustfmt::skip]
    const INCLUDES: &[&str] = &[
        "linux/module.h", "linux/kernel.h", "linux/slab.h", "linux/init.h", "linux/platform_device.h", "linux/of.h",
        "linux/device.h", "linux/io.h", "linux/delay.h", "linux/interrupt.h", "linux/clk.h", "linux/err.h",
        "linux/errno.h", "linux/types.h", "linux/pci.h", "linux/dma-mapping.h", "linux/spinlock.h", "linux/mutex.h",
        "linux/regmap.h", "linux/i2c.h", "linux/gpio/consumer.h", "linux/pm_runtime.h", "linux/netdevice.h",
        "linux/list.h", "linux/bitfield.h", "linux/workqueue.h", "linux/uaccess.h", "linux/fs.h", "linux/mm.h",
        "linux/sched.h",
    ];

    #[rustfmt::skip]
    const DT_NODES: &[&str] = &[
        "i2c", "spi", "serial", "gpio", "mmc", "usb", "pcie", "dma-controller", "clock-controller",
        "interrupt-controller", "watchdog", "thermal-sensor", "phy", "iommu", "memory",
    ];

    #[rustfmt::skip]
    const ASM_OPS: &[&str] = &[
        "mov", "ldr", "str", "add", "sub", "cmp", "b.ne", "b.eq", "bl", "ldp", "stp", "and", "orr", "lsl", "lsr",
        "cbz", "cbnz", "msr", "mrs", "isb", "dsb", "eor", "tst", "adr",
    ];

    #[rustfmt::skip]
    const SHELL_CMDS: &[&str] = &[
        "echo", "grep", "sed", "awk", "cat", "test", "printf", "cut", "sort", "uniq", "ip", "ping", "tc", "modprobe",
        "sleep", "wc", "tr",
    ];

    #[rustfmt::skip]
    const NAMES: &[&str] = &[
        "linus", "greg", "andrew", "david", "arnd", "mark", "thomas", "peter", "ingo", "jens", "christoph", "dan",
        "paul", "steven", "al", "jan", "ted", "chris", "michael", "kees", "daniel", "alex", "sasha", "jakub", "eric",
        "herbert", "rafael", "bjorn", "dmitry", "shawn", "rob", "krzysztof",
    ];

    /// English words, most frequent first.
    #[rustfmt::skip]
    const WORDS_EN: &[&str] = &[
        "the", "to", "of", "a", "is", "and", "in", "be", "for", "this", "that", "it", "if", "not", "on", "with",
        "are", "as", "by", "can", "we", "an", "or", "when", "will", "from", "which", "so", "all", "at", "has", "only",
        "used", "should", "have", "no", "there", "must", "but", "use", "one", "may", "been", "any", "then", "they",
        "these", "also", "into", "do", "than", "other", "more", "each", "need", "data", "device", "driver", "kernel",
        "memory", "page", "buffer", "register", "value", "set", "check", "call", "function", "time", "first", "new",
        "list", "case", "number", "would", "after", "before", "support", "state", "make", "some", "does", "done",
        "out", "up", "its", "where", "while", "because", "still", "now", "same", "without", "already", "here", "two",
        "them", "last", "possible", "currently", "interrupt", "hardware", "firmware", "mode", "reset", "enable",
        "disable", "clock", "power", "queue", "request", "lock", "context", "address", "size", "bit", "bits", "field",
        "mask", "status", "error", "return", "returns", "read", "write", "access", "allocate", "free", "release",
        "handle", "current", "valid", "invalid", "default", "configuration", "information", "structure", "pointer",
        "length", "count", "index", "entry", "table", "map", "cache", "flush", "update", "complete", "pending",
        "wait", "timeout", "retry", "active", "idle", "suspend", "resume", "probe", "remove", "initialize",
        "transfer", "message", "command", "response", "event", "channel", "stream", "frame", "packet", "header",
        "payload", "offset", "range", "start", "stop", "begin", "end", "next", "previous", "local", "global",
        "shared", "private", "public", "internal", "external", "user", "space", "system", "process", "thread", "task",
        "cpu", "core", "node", "zone", "region", "object", "reference", "counter", "flag", "option", "parameter",
        "argument", "variable", "constant", "instance", "type", "format", "version", "feature", "capability", "limit",
        "maximum", "minimum", "level", "threshold", "priority", "order", "sequence", "operation", "transaction",
        "protocol", "interface", "controller", "bus", "port", "link", "lane", "phy", "host", "client", "server",
        "network", "socket", "connection", "session", "policy", "rule", "filter", "match", "key", "hash", "tree",
        "root", "parent", "child", "sibling", "path", "name", "file", "directory", "inode", "block", "sector", "disk",
        "volume", "partition", "mount", "filesystem", "journal", "transaction", "commit", "rollback", "snapshot",
        "backup", "always", "never", "usually", "typically", "probably", "actually", "simply", "just", "even",
        "however", "therefore", "otherwise", "instead", "either", "neither", "both", "every", "several", "many",
        "few", "most", "least", "much", "little", "large", "small", "big", "long", "short", "high", "low", "fast",
        "slow", "early", "late", "correct", "wrong", "safe", "unsafe", "atomic", "concurrent", "serialized",
        "ordered", "guarantee", "ensure", "avoid", "prevent", "allow", "require", "expect", "assume", "note", "see",
        "described", "following", "above", "below", "between", "within", "across", "against", "during", "until",
        "since", "through", "under", "over", "about", "again", "further", "once", "workaround", "errata", "silicon",
        "revision", "vendor", "specific", "generic", "legacy", "compatible", "obsolete", "deprecated", "broken",
        "quirk", "corruption", "overflow", "underflow", "race", "deadlock", "livelock", "starvation", "fairness",
        "latency", "throughput", "bandwidth",
    ];
}

#[cfg(test)]
mod tests {
    use super::synth::{Kind, Planned};
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn names_are_normalised() {
        assert_eq!(normalise("./a//b/"), "a/b");
        assert_eq!(normalise("linux/./mm/x.c"), "linux/mm/x.c");
        assert_eq!(normalise("./"), "");
    }

    #[test]
    fn compression_is_told_by_magic_and_name() {
        assert_eq!(Compression::from_magic(&[0x1f, 0x8b, 8]), Compression::Gzip);
        assert_eq!(
            Compression::from_magic(&[0xfd, b'7', b'z', b'X', b'Z', 0]),
            Compression::Xz
        );
        assert_eq!(
            Compression::from_magic(&[0xfd, b'7', b'z', b'X', b'Z']),
            Compression::None
        );
        assert_eq!(Compression::from_magic(b""), Compression::None);
        let name = |n: &str| Compression::from_name(Path::new(n));
        assert_eq!(name("/x/linux.TAR.XZ"), Some(Compression::Xz));
        assert_eq!(name("a.txz"), Some(Compression::Xz));
        assert_eq!(name("a.tgz"), Some(Compression::Gzip));
        assert_eq!(name("a.tar.gz"), Some(Compression::Gzip));
        assert_eq!(name("a.tar"), Some(Compression::None));
        assert_eq!(name("a.zip"), None);
    }

    #[test]
    fn same_filled_means_equal_words() {
        let mut p = [0u8; PAGE_SIZE];
        assert!(is_same_filled(&p));
        for (i, b) in p.iter_mut().enumerate() {
            *b = (i % 8) as u8;
        }
        assert!(
            is_same_filled(&p),
            "a repeated 8-byte pattern is same-filled"
        );
        p[4095] = 9;
        assert!(!is_same_filled(&p));
    }

    #[test]
    fn zipf_stays_in_range_and_favours_small() {
        let mut r = rand::rngs::StdRng::seed_from_u64(1);
        let mut low = 0;
        for _ in 0..10_000 {
            let i = synth::zipf(&mut r, 10, 2);
            assert!(i < 10);
            low += usize::from(i < 3);
        }
        assert!(low > 5000, "{low}");
    }

    #[test]
    fn page_budgets_are_met_exactly() {
        let plan = synth::plan(5, 0.03);
        let tree = FileTree {
            files: plan
                .iter()
                .map(|p| FileEntry::new(p.path.clone(), vec![0; p.size]))
                .collect(),
        };
        let dirs = tree.top_level_dirs();
        let fs = dirs.iter().find(|d| d.0 == "fs").unwrap().1;
        let sound = dirs.iter().find(|d| d.0 == "sound").unwrap().1;
        // 0.03 * 300 MiB / 3530 bytes a page = 2673.5 pages; fs 4.2 of 99.74.
        let total = GENERATED_BYTES_AT_SCALE_1 as f64 * 0.03 / 3530.0;
        assert_eq!(fs, (total * 4.2 / 99.74).round() as usize);
        assert_eq!(sound, (total * 4.0 / 99.74).round() as usize);
        // Sorted, unique paths.
        assert!(plan.windows(2).all(|w| w[0].path < w[1].path));
    }

    /// Tuning aid: full-page LZ4 size of each kind at several densities.
    #[test]
    #[ignore = "prints a table; run with --nocapture in release"]
    fn kind_ratios() {
        let kinds = [
            Kind::C,
            Kind::Header,
            Kind::RegHeader,
            Kind::Doc,
            Kind::Translation,
            Kind::DevTree,
            Kind::Yaml,
            Kind::Json,
            Kind::Asm,
            Kind::Kconfig,
            Kind::Makefile,
            Kind::Script,
            Kind::Binary,
        ];
        for kind in kinds {
            for density in [0.0, 0.3, 0.6, 0.9, 1.2, 1.5] {
                let plan: Vec<Planned> = (0..40)
                    .map(|i| Planned {
                        path: format!("f{i}"),
                        kind,
                        size: 64 << 10,
                        seed: i,
                        prefix: "mlx5".into(),
                        density,
                    })
                    .collect();
                let data = synth::contents(&plan);
                let tree = FileTree {
                    files: data
                        .into_iter()
                        .enumerate()
                        .map(|(i, d)| FileEntry::new(format!("f{i}"), d))
                        .collect(),
                };
                let h = compressed_size_histogram(&tree, lz4_len, 512);
                let pct: Vec<String> = h
                    .buckets
                    .iter()
                    .map(|c| format!("{:3.0}", h.percent(*c)))
                    .collect();
                println!(
                    "{kind:?} d={density} ratio {:.1}% | {}",
                    100.0 * h.ratio(),
                    pct.join(" ")
                );
            }
        }
    }
}
