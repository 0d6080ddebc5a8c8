//! Reading a real tree: a directory or a tar archive (plain, gzip or xz), under an input limit.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::corpus::error::CorpusError;
use crate::corpus::tree::{FileEntry, FileTree, PAGE_SIZE};
use crate::text::shown;

impl FileTree {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
