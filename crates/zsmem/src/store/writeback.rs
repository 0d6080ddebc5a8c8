//! Writeback: pages moved out of memory into a backing file, as zram's
//! `writeback` to its `backing_dev`. Reads fetch them back transparently
//! (the slot stays in the file, as in zram); an overwrite or a discard frees
//! the block.
//!
//! # The file
//!
//! ```text
//! offset 0      file header, 64 bytes (FILE_HEADER), then zeros up to 4096
//! offset 4096   block 0: block header (64 bytes) + one page
//!        4096 + b * (64 + page_size): block b
//!
//! block header, little-endian:
//!   0..8    magic  "ZSMBLK01"
//!   8..16   slot index
//!   16..24  generation (store-wide counter, one per block written)
//!   24..28  page length
//!   28..32  CRC-32 of bytes 0..28, 32..64 and the page
//!   32..40  store nonce (random per backing file)
//!   40..56  tag: BLAKE3 keyed with the store's key, of bytes 0..28,
//!           32..40 and the page, its first 16 bytes
//!   56..64  zero
//! ```
//!
//! A read checks the magic, the CRC, the nonce, the tag, the slot and the
//! generation the slot recorded: a block from an older write, another
//! slot, another file, a corrupted one or one forged by whoever can write
//! the file is [`Error::CorruptBlock`], never wrong data. The CRC alone
//! caught corruption, but anyone could recompute it over a page of their
//! own; the tag's key (32 random bytes from `getrandom`) lives only in the
//! store's memory, so a block the store did not write fails it. Which
//! blocks are free is a bitmap held in memory (the file's content does not
//! outlive the store, as a zram backing device's does not).
//!
//! Lock order: slot lock, then the bitmap lock (held only to find or clear
//! a bit, never across I/O). A block's I/O happens under its slot's lock
//! only, never under a pool class lock.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::slot::{Kind, Slot};
use super::stats::{add, sub};
use super::{PageStore, Selection};
use crate::error::{Error, Result};
use crate::sync::Mutex;

const FILE_MAGIC: &[u8; 8] = b"ZSMEMWB1";
const BLOCK_MAGIC: &[u8; 8] = b"ZSMBLK01";
const FILE_HEADER: u64 = 4096;
const BLOCK_HEADER: usize = 64;

/// What [`PageStore::writeback`] should write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WritebackRequest {
    /// Which slots: zram's `idle`, `huge`, `huge_idle`, `incompressible`,
    /// or every slot holding an object.
    pub which: Selection,
    /// Most pages to write in this call (`None`: no bound but the store's
    /// writeback limit).
    pub max_pages: Option<u64>,
}

/// What one [`PageStore::writeback`] call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WritebackReport {
    /// Pages written to the backing file.
    pub written: u64,
    /// The store's writeback limit ran out before every selected slot was
    /// written.
    pub limit_reached: bool,
}

#[derive(Debug)]
pub(crate) struct Backing {
    file: File,
    path: PathBuf,
    block_size: u64,
    nonce: u64,
    /// Keys each block's tag.
    key: TagKey,
    generation: AtomicU64,
    bitmap: Mutex<Bitmap>,
}

/// The key of the blocks' tags: random, never written anywhere, not shown
/// by `Debug`.
struct TagKey([u8; 32]);

impl std::fmt::Debug for TagKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TagKey(..)")
    }
}

impl TagKey {
    /// 32 bytes from the kernel's random source.
    fn new(path: &Path) -> Result<TagKey> {
        let mut key = [0u8; 32];
        let mut got = 0;
        while got < key.len() {
            // SAFETY: writes at most `key.len() - got` bytes into `key`
            // from offset `got`, memory we own.
            let n = unsafe { libc::getrandom(key[got..].as_mut_ptr().cast(), key.len() - got, 0) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(io_error(path, "cannot make a key for the blocks of", e));
            }
            got += n as usize;
        }
        Ok(TagKey(key))
    }

    /// The tag of a block: its header's first 40 bytes but the CRC
    /// (which covers the tag), and its page.
    fn tag(&self, header: &[u8], page: &[u8]) -> [u8; TAG_LEN] {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(&header[..28]);
        h.update(&header[32..TAG_AT]);
        h.update(page);
        let mut tag = [0u8; TAG_LEN];
        tag.copy_from_slice(&h.finalize().as_bytes()[..TAG_LEN]);
        tag
    }
}

/// Where a block header's tag starts, and its length.
const TAG_AT: usize = 40;
const TAG_LEN: usize = 16;

#[derive(Debug)]
struct Bitmap {
    words: Vec<u64>,
    /// No free bit below this word.
    hint: usize,
    blocks: usize,
}

impl Bitmap {
    fn alloc(&mut self) -> Option<u32> {
        for w in self.hint..self.words.len() {
            let free = !self.words[w];
            if free != 0 {
                let b = w * 64 + free.trailing_zeros() as usize;
                if b >= self.blocks {
                    return None;
                }
                self.words[w] |= 1 << (b % 64);
                self.hint = w;
                return Some(b as u32);
            }
        }
        None
    }

    fn free(&mut self, b: u32) {
        let b = b as usize;
        debug_assert!(
            self.words[b / 64] & 1 << (b % 64) != 0,
            "double free of block {b}"
        );
        self.words[b / 64] &= !(1 << (b % 64));
        self.hint = self.hint.min(b / 64);
    }

    fn used(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }
}

fn io_error(path: &Path, what: &str, e: std::io::Error) -> Error {
    Error::BackingFile(format!("{what} {}: {e}", path.display()))
}

/// Open `path` as a backing file the store owns alone:
///
/// - it must be a regular file (created, mode 0600, if missing) or a block
///   device; a character device (`/dev/null`, `/dev/zero`), a directory or
///   a FIFO is refused;
/// - it is locked with `flock(LOCK_EX | LOCK_NB)` for the store's life, so
///   a second store (in this process or another) given the same path is
///   refused instead of overwriting the first one's blocks;
/// - an existing regular file is reused (truncated) only when it is empty
///   or starts with a backing file's magic, i.e. is a backing file left by
///   an earlier store; any other file is refused, never truncated. A block
///   device is used as it is (pointing a store at one is explicit).
fn open_exclusive(path: &Path) -> Result<File> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    use std::os::unix::io::AsRawFd;
    let usable = |kind: std::fs::FileType| kind.is_file() || kind.is_block_device();
    // Looked at before it is opened for writing as well as after: opening a
    // device is itself an act (a terminal may become the controlling one,
    // a watchdog starts), so a path that names anything else is refused
    // untouched; `O_NOCTTY` covers one swapped in between.
    if let Ok(m) = std::fs::metadata(path)
        && !usable(m.file_type())
    {
        return Err(not_usable(path));
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| io_error(path, "cannot open backing file", e))?;
    let kind = file
        .metadata()
        .map_err(|e| io_error(path, "cannot stat backing file", e))?
        .file_type();
    if !usable(kind) {
        return Err(not_usable(path));
    }
    // SAFETY: flock on a descriptor this function owns; no memory involved.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(if e.kind() == std::io::ErrorKind::WouldBlock {
            Error::BackingFile(format!(
                "{} is in use: another page store holds its lock",
                path.display()
            ))
        } else {
            io_error(path, "cannot lock backing file", e)
        });
    }
    if kind.is_file() {
        let mut magic = [0u8; 8];
        let got = file.read_at(&mut magic, 0).unwrap_or(0);
        if got > 0 && (got < magic.len() || &magic != FILE_MAGIC) {
            return Err(Error::BackingFile(format!(
                "{} exists and is not a zsmem backing file: refusing to overwrite it",
                path.display()
            )));
        }
        file.set_len(0)
            .map_err(|e| io_error(path, "cannot truncate backing file", e))?;
    }
    Ok(file)
}

/// The error for a backing path that is neither a regular file nor a block
/// device.
fn not_usable(path: &Path) -> Error {
    Error::BackingFile(format!(
        "{} is not a regular file or a block device (a character device such as \
         /dev/null or /dev/zero, a FIFO or a socket cannot hold pages)",
        path.display()
    ))
}

impl Backing {
    /// Take the file at `path` (see [`open_exclusive`]) for up to `blocks`
    /// pages.
    fn create(path: &Path, page_size: usize, blocks: usize) -> Result<Backing> {
        let file = open_exclusive(path)?;
        let key = TagKey::new(path)?;
        let nonce = {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos()),
            );
            h.finish()
        };
        let mut header = [0u8; 64];
        header[..8].copy_from_slice(FILE_MAGIC);
        header[8..12].copy_from_slice(&1u32.to_le_bytes());
        header[12..16].copy_from_slice(&(page_size as u32).to_le_bytes());
        header[16..24].copy_from_slice(&nonce.to_le_bytes());
        file.write_all_at(&header, 0)
            .map_err(|e| io_error(path, "cannot write the header of", e))?;
        Ok(Backing {
            file,
            path: path.to_path_buf(),
            block_size: (BLOCK_HEADER + page_size) as u64,
            nonce,
            key,
            generation: AtomicU64::new(1),
            bitmap: Mutex::new(Bitmap {
                words: super::try_table(blocks.div_ceil(64), "the backing file's bitmap", || 0)?
                    .into_vec(),
                hint: 0,
                blocks,
            }),
        })
    }

    fn offset(&self, block: u32) -> u64 {
        FILE_HEADER + u64::from(block) * self.block_size
    }

    fn checksum(header: &[u8], page: &[u8]) -> u32 {
        let mut h = crc32fast::Hasher::new();
        h.update(&header[..28]);
        h.update(&header[32..BLOCK_HEADER]);
        h.update(page);
        h.finalize()
    }

    /// Write `page` for `slot` into a free block; returns (block,
    /// generation). `buf` is scratch of `block_size` bytes.
    fn write(&self, slot: usize, page: &[u8], buf: &mut Vec<u8>) -> Result<(u32, u32)> {
        let block = self
            .bitmap
            .lock()
            .alloc()
            .ok_or_else(|| Error::BackingFile(format!("{} is full", self.path.display())))?;
        let generation = self.generation.fetch_add(1, Ordering::Relaxed);
        buf.clear();
        buf.resize(BLOCK_HEADER, 0);
        buf[..8].copy_from_slice(BLOCK_MAGIC);
        buf[8..16].copy_from_slice(&(slot as u64).to_le_bytes());
        buf[16..24].copy_from_slice(&generation.to_le_bytes());
        buf[24..28].copy_from_slice(&(page.len() as u32).to_le_bytes());
        buf[32..40].copy_from_slice(&self.nonce.to_le_bytes());
        let tag = self.key.tag(buf, page);
        buf[TAG_AT..TAG_AT + TAG_LEN].copy_from_slice(&tag);
        let crc = Self::checksum(buf, page);
        buf[28..32].copy_from_slice(&crc.to_le_bytes());
        buf.extend_from_slice(page);
        if let Err(e) = self.file.write_all_at(buf, self.offset(block)) {
            self.bitmap.lock().free(block);
            return Err(io_error(&self.path, "cannot write to backing file", e));
        }
        Ok((block, generation as u32))
    }

    /// Read `slot`'s page from `block` into `page`, checking it is the block
    /// the slot wrote with `generation`, intact.
    fn read(
        &self,
        slot: usize,
        block: u32,
        generation: u32,
        page: &mut [u8],
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        buf.resize(BLOCK_HEADER + page.len(), 0);
        let corrupt = |reason: String| Error::CorruptBlock {
            slot,
            block: u64::from(block),
            reason,
        };
        self.file
            .read_exact_at(buf, self.offset(block))
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::UnexpectedEof => corrupt("the file is truncated".into()),
                _ => io_error(&self.path, "cannot read from backing file", e),
            })?;
        let (header, data) = buf.split_at(BLOCK_HEADER);
        let u64_at = |o: usize| u64::from_le_bytes(header[o..o + 8].try_into().expect("8 bytes"));
        let u32_at = |o: usize| u32::from_le_bytes(header[o..o + 4].try_into().expect("4 bytes"));
        if &header[..8] != BLOCK_MAGIC {
            return Err(corrupt("bad block magic".into()));
        }
        if u32_at(28) != Self::checksum(header, data) {
            return Err(corrupt("checksum mismatch".into()));
        }
        // The nonce before the tag, so that a block of another file says
        // so (its tag fails too).
        if u64_at(32) != self.nonce {
            return Err(corrupt("block of another backing file".into()));
        }
        // Every byte compared, whatever differs first: the time taken
        // tells a forger nothing.
        let tag = self.key.tag(header, data);
        let differs = tag
            .iter()
            .zip(&header[TAG_AT..TAG_AT + TAG_LEN])
            .fold(0u8, |d, (a, b)| d | (a ^ b));
        if differs != 0 {
            return Err(corrupt(
                "the block's tag does not match: not written by this store".into(),
            ));
        }
        if u64_at(8) != slot as u64 || u64_at(16) as u32 != generation {
            return Err(corrupt(format!(
                "block holds slot {} generation {}, expected generation {generation}",
                u64_at(8),
                u64_at(16)
            )));
        }
        if u32_at(24) as usize != page.len() {
            return Err(corrupt("wrong page length".into()));
        }
        page.copy_from_slice(data);
        Ok(())
    }

    fn free(&self, block: u32) {
        self.bitmap.lock().free(block);
    }

    pub(crate) fn blocks_used(&self) -> u64 {
        self.bitmap.lock().used()
    }

    pub(crate) fn metadata_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.bitmap.lock().words.len() * 8
    }
}

/// zram's `writeback_limit` with `writeback_limit_enable`.
#[derive(Debug, Default)]
pub(crate) struct Limit {
    enabled: AtomicBool,
    pages: AtomicU64,
}

impl Limit {
    /// Take one page of budget; false if the limit is on and spent.
    fn take(&self) -> bool {
        !self.enabled.load(Ordering::Relaxed)
            || self
                .pages
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |p| p.checked_sub(1))
                .is_ok()
    }

    fn give_back(&self) {
        if self.enabled.load(Ordering::Relaxed) {
            self.pages.fetch_add(1, Ordering::Relaxed);
        }
    }
}

thread_local! {
    static BLOCK_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl PageStore {
    /// Use the file at `path` (created, or truncated) as the backing file,
    /// with room for one block per slot. Once per store, as zram's
    /// `backing_dev`.
    pub fn set_backing_file(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        if self.backing.get().is_some() {
            return Err(Error::InvalidConfig(
                "the store already has a backing file".into(),
            ));
        }
        if u32::try_from(self.slots.len()).is_err() {
            return Err(Error::InvalidConfig(
                "writeback needs a store of fewer than 2^32 slots".into(),
            ));
        }
        let b = Backing::create(path, self.page_size, self.slots.len())?;
        self.backing
            .set(b)
            .map_err(|_| Error::InvalidConfig("the store already has a backing file".into()))
    }

    /// The backing file's path, if the store has one.
    pub fn backing_file(&self) -> Option<&Path> {
        self.backing.get().map(|b| b.path.as_path())
    }

    /// Bound writeback to `pages` more pages (zram's `writeback_limit`
    /// with `writeback_limit_enable` = 1), or lift the bound (`None`).
    pub fn set_writeback_limit(&self, pages: Option<u64>) {
        self.limit
            .pages
            .store(pages.unwrap_or(0), Ordering::Relaxed);
        self.limit.enabled.store(pages.is_some(), Ordering::Relaxed);
    }

    /// Pages writeback may still write, `None` if unbounded.
    pub fn writeback_limit(&self) -> Option<u64> {
        self.limit
            .enabled
            .load(Ordering::Relaxed)
            .then(|| self.limit.pages.load(Ordering::Relaxed))
    }

    /// Write the selected slots' pages to the backing file and free their
    /// memory (zram's `echo idle|huge|huge_idle|incompressible >
    /// writeback`). Only slots holding an object are written. Stops at
    /// `max_pages`, at the writeback limit, or when the file is full.
    ///
    /// Each slot is handled under its own lock: decode, write the block,
    /// free the object. An I/O error stops the call and leaves that slot
    /// as it was.
    pub fn writeback(&self, req: WritebackRequest) -> Result<WritebackReport> {
        let backing = self.backing.get().ok_or(Error::NoBackingFile)?;
        let mut report = WritebackReport::default();
        let mut page = vec![0u8; self.page_size];
        BLOCK_BUF.with(|buf| {
            let mut buf = buf.borrow_mut();
            for index in self.slots.present() {
                let Some(slot) = self.slots.get(index) else {
                    continue;
                };
                if req.max_pages.is_some_and(|m| report.written >= m) {
                    break;
                }
                let mut s = slot.lock();
                if s.kind() != Kind::Stored || !req.which.matches(&s) {
                    continue;
                }
                if !self.limit.take() {
                    report.limit_reached = true;
                    break;
                }
                let written = self
                    .decode(index, &s, &mut page)
                    .and_then(|()| backing.write(index, &page, &mut buf));
                let (block, generation) = match written {
                    Ok(w) => w,
                    Err(e) => {
                        self.limit.give_back();
                        if matches!(e, Error::BackingFile(ref m) if m.ends_with("is full")) {
                            break;
                        }
                        return Err(e);
                    }
                };
                let new = Slot::written_back(block, generation, s.atime());
                let old = std::mem::replace(&mut *s, new);
                self.account(&s, 1);
                self.release(old);
                add(&self.counters.bd_writes, 1);
                add(&self.counters.bd_count, 1);
                report.written += 1;
            }
            Ok(report)
        })
    }

    /// Read a written-back slot's page from the backing file.
    pub(crate) fn read_back(&self, index: usize, s: &Slot, page: &mut [u8]) -> Result<()> {
        let backing = self.backing.get().ok_or(Error::NoBackingFile)?;
        BLOCK_BUF.with(|buf| {
            backing.read(
                index,
                s.block(),
                s.generation(),
                page,
                &mut buf.borrow_mut(),
            )
        })?;
        add(&self.counters.bd_reads, 1);
        Ok(())
    }

    /// Free a written-back slot's block.
    pub(crate) fn free_block(&self, s: &Slot) {
        if let Some(b) = self.backing.get() {
            b.free(s.block());
            sub(&self.counters.bd_count, 1);
        }
    }
}
