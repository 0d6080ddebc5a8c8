//! PageStore: a zram-like compressed store of page-sized blocks, addressed by
//! slot index, on top of a [`Pool`].
//!
//! # Pages and slots
//!
//! zram's page handling, re-derived:
//! - a page whose machine words are all equal ("same-filled", usually zero)
//!   stores the word alone, no object;
//! - otherwise it is compressed with the store's primary codec; if the
//!   compressed size reaches the pool's `huge_class_size` the page is stored
//!   raw (one page, a "huge" page);
//! - a slot never written reads as zeros; a discarded slot too.
//!
//! A slot is in one of four states (`slot.rs` packs them in 16 bytes):
//! **empty**, **same-filled** (the word), **stored** (a pool handle, the
//! object's length, the codec it was made with) or **written back** (a
//! block of the backing file and its generation). A stored slot carries
//! flags: *idle* (marked by [`PageStore::mark_idle`], cleared by any read
//! or write), *huge* (stored raw), *incompressible* (recompression could
//! not shrink it); and every slot keeps its last access time.
//!
//! Beyond storing pages, as zram does:
//! - [`mark_idle`](PageStore::mark_idle): all slots, or those not accessed
//!   for a while (`idle.rs`);
//! - [`recompress`](PageStore::recompress) idle or huge slots with a
//!   secondary codec, kept only when the object lands in a smaller size
//!   class (`recompress.rs`);
//! - [`writeback`](PageStore::writeback) idle, huge or incompressible
//!   slots to a backing file with checksummed blocks, read back
//!   transparently (`writeback.rs`);
//! - zstd dictionaries trained from the stored pages (`codecs.rs`);
//! - zram's `mm_stat`, `io_stat` and `bd_stat` (`stats.rs`).
//!
//! # Locks and their order
//!
//! Each slot has its own lock: readers and writers of different slots run
//! in parallel. The order is **slot lock, then a pool class lock or the
//! backing file's bitmap lock**; no operation holds two slot locks, and
//! none takes a slot lock inside another lock.
//! - A write compresses and stores its new object before taking the slot
//!   lock, swaps the slot under it, and frees the old object (or backing
//!   block) after releasing it: a write never holds a slot lock across
//!   compression.
//! - A read decodes under its slot lock (the object's bytes under its class
//!   lock, the block's under no other lock).
//! - Recompression and writeback handle one slot at a time under its lock,
//!   compression and file I/O included; file I/O never happens under a
//!   class lock.
//!
//! # Invariants
//!
//! `pages_stored` counts slots holding a page (same-filled and written back
//! included, as zram counts them); `compr_bytes` is the sum of the stored
//! objects' lengths; `same_pages` and `huge_pages` count the slots in those
//! states; `bd_count` counts written-back slots and equals the blocks used
//! in the backing file. [`PageStore::check_invariants`] checks them.

mod codecs;
mod idle;
mod recompress;
mod slot;
mod stats;
mod stripes;
mod table;
mod writeback;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use crate::codec::{Codec, CodecSpec, ZstdDictionary};
use crate::config::PoolConfig;
use crate::error::{Error, Result};
use crate::pool::Pool;

pub use idle::{Clock, ManualClock, MonotonicClock};
pub use recompress::RecompressRequest;
pub use stats::{BdStat, IoStat, MmStat, RecompressStat};
pub use writeback::{WritebackReport, WritebackRequest};

use slot::{Kind, Slot};
use stats::{add, get, sub};

/// Most slots of a [`PageStore`] over a log-placed pool
/// ([`Placement::Log`](crate::Placement), the default): 2^31, 8 TiB of
/// 4 KiB pages. Cleaning names the owner of each object it moves in 32
/// bits whose top bit tells a slot from a handle; a slot at or above 2^31
/// could not be named there.
/// [`PageStore::new`] refuses more. A store placed by size class has no
/// such limit (only memory for its slot table).
pub const MAX_LOG_SLOTS: usize = 1 << 31;

const _: () = assert!(MAX_LOG_SLOTS == crate::lane::MAX_OWNERS);

/// How to build a [`PageStore`].
///
/// ```
/// use zsmem::{Codec, PageStore, PageStoreConfig, PoolConfig};
/// let store = PageStore::new(PageStoreConfig {
///     slots: 256,
///     codec: Codec::Zstd { level: 3 },
///     recompress: vec![Codec::Zstd { level: 12 }.into()],
///     pool: PoolConfig { memory_limit: Some(1 << 20), ..PoolConfig::log() },
///     ..Default::default()
/// })?;
/// assert_eq!((store.slots(), store.page_size()), (256, 4096));
/// # Ok::<(), zsmem::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageStoreConfig {
    /// Number of slots (zram's disksize / page size), at least 1; at most
    /// [`MAX_LOG_SLOTS`] (2^31) with log placement.
    pub slots: usize,
    /// The codec new pages are compressed with.
    pub codec: Codec,
    /// A zstd dictionary for `codec` (which must then be zstd).
    pub dictionary: Option<ZstdDictionary>,
    /// Secondary codecs for recompression, by priority: the first is
    /// priority 1 (zram's `recomp_algorithm`). At most 15.
    pub recompress: Vec<CodecSpec>,
    /// A backing file for writeback, created (or truncated) now; or set one
    /// later with [`PageStore::set_backing_file`].
    pub backing_file: Option<PathBuf>,
    /// Time the allocator's part of each write (the pool's store and free)
    /// and add it up in [`PageStore::allocator_ns`]: costs two clock reads
    /// per write, so off by default.
    pub measure_allocator: bool,
    /// The pool under the store; its `page_size` is the block size.
    /// Default: [`PoolConfig::log`] (log placement, the least memory);
    /// [`PoolConfig::default`] places by size class, as zsmalloc does.
    /// Its `lock_free_reads` is turned off: the store decompresses each
    /// page in place, under the class lock.
    pub pool: PoolConfig,
    /// Keep each slot's last access time (4 bytes a page, zram's
    /// `CONFIG_ZRAM_TRACK_ENTRY_ACTIME`): needed to mark slots idle by age
    /// ([`PageStore::mark_idle`] with `Some(age)`); marking all works
    /// without it. On by default.
    pub track_access_time: bool,
}

impl Default for PageStoreConfig {
    fn default() -> Self {
        PageStoreConfig {
            slots: 1 << 18,
            codec: Codec::Lz4,
            dictionary: None,
            recompress: Vec::new(),
            backing_file: None,
            measure_allocator: false,
            pool: PoolConfig::log(),
            track_access_time: true,
        }
    }
}

/// Which slots an idle/huge operation picks (zram's `type=` of
/// `recompress` and the mode of `writeback`). Only slots holding an object
/// are ever picked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Selection {
    /// Every slot holding an object.
    All,
    /// Slots marked idle.
    Idle,
    /// Huge slots (stored raw).
    Huge,
    /// Slots both huge and idle.
    HugeIdle,
    /// Slots recompression marked incompressible (writeback only:
    /// recompression skips them by definition).
    Incompressible,
}

impl Selection {
    fn matches(self, s: &Slot) -> bool {
        match self {
            Selection::All => true,
            Selection::Idle => s.is_idle(),
            Selection::Huge => s.is_huge(),
            Selection::HugeIdle => s.is_huge() && s.is_idle(),
            Selection::Incompressible => s.is_incompressible(),
        }
    }
}

/// What one slot holds, for tests and tools.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SlotInfo {
    /// Nothing; reads as zeros.
    Empty,
    /// A same-filled page of this word.
    Same(u64),
    /// An object in the pool.
    Stored {
        /// Its length in bytes.
        len: usize,
        /// Stored raw.
        huge: bool,
        /// Marked idle.
        idle: bool,
        /// Recompression could not shrink it.
        incompressible: bool,
        /// Made by recompression.
        recompressed: bool,
        /// The codec it was made with, as [`CodecSpec::name`] gives it.
        codec: String,
    },
    /// A page in the backing file.
    WrittenBack {
        /// Its block in the file.
        block: u64,
    },
}

/// A zram-like compressed page store.
///
/// ```
/// use zsmem::{PageStore, PageStoreConfig};
/// let store = PageStore::new(PageStoreConfig { slots: 16, ..Default::default() }).unwrap();
/// let page: Vec<u8> = b"hello, compressed world\n".iter().cycle().take(4096).copied().collect();
/// store.write(3, &page).unwrap();
/// let mut out = vec![0u8; 4096];
/// store.read(3, &mut out).unwrap();
/// assert_eq!(out, page);
/// store.read(4, &mut out).unwrap(); // never written: zeros
/// assert!(out.iter().all(|&b| b == 0));
/// assert_eq!(store.mm_stat().orig_data_size, 4096);
/// ```
///
/// Idle pages, recompression and writeback:
///
/// ```
/// use zsmem::{Codec, PageStore, PageStoreConfig};
/// use zsmem::store::{RecompressRequest, Selection, WritebackRequest};
/// let dir = std::env::temp_dir().join(format!("zsmem-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let store = PageStore::new(PageStoreConfig {
///     slots: 16,
///     recompress: vec![Codec::Zstd { level: 9 }.into()],
///     backing_file: Some(dir.join("backing")),
///     ..Default::default()
/// }).unwrap();
/// let page: Vec<u8> = (0..4096u32).map(|i| (i * i % 251) as u8).collect();
/// store.write(0, &page).unwrap();
/// assert_eq!(store.mark_idle(None).unwrap(), 1);
/// store.recompress(RecompressRequest { which: Selection::Idle, ..Default::default() }).unwrap();
/// let w = store.writeback(WritebackRequest { which: Selection::Idle, max_pages: None }).unwrap();
/// assert_eq!((w.written, store.bd_stat().bd_count), (1, 1));
/// let mut out = vec![0u8; 4096];
/// store.read(0, &mut out).unwrap(); // from the backing file, checked
/// assert_eq!(out, page);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
///
/// # Fork
///
/// A forked child may use a store it inherited as it may a [`Pool`] (see
/// "Fork" there): every slot reads as at the fork, and writes, discards,
/// compaction and the rest work on the child's copy, its freed pages
/// returned by the child's own returner. Two exceptions: the parent's other
/// threads that were inside a call on the store at the fork (the child must
/// not use that store), and a backing file, which stays one file shared by
/// both processes, each with its own map of the blocks in use and its own
/// count of the blocks written. **After a fork, write back in one of the
/// two processes at most**: the other's pages written back before the fork
/// read back until the writer reuses their blocks, then fail with
/// [`Error::CorruptBlock`] (its checks refuse a
/// block written since, never return it). If both wrote back, each could
/// overwrite a block the other just wrote for the same slot with the same
/// count, and a read could return the other process's page.
pub struct PageStore {
    codecs: codecs::Codecs,
    pool: Pool,
    /// Log placement: each stored slot holds its object's place, not a
    /// handle (the slots are the objects' handles; no handle table).
    owned: bool,
    page_size: usize,
    huge_threshold: usize,
    slots: Arc<table::SlotTable>,
    counters: stats::Counters,
    clock: Arc<dyn Clock>,
    backing: OnceLock<writeback::Backing>,
    limit: writeback::Limit,
    measure_allocator: bool,
}

impl std::fmt::Debug for PageStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageStore")
            .field("codec", &self.codec().name())
            .field("slots", &self.slots.len())
            .field("backing_file", &self.backing_file())
            .field("pool", &self.pool)
            .finish()
    }
}

/// The word every 8-byte word of `page` equals, if there is one: zram's
/// same-filled test. `None` for pages shorter than a word.
pub fn same_filled(page: &[u8]) -> Option<u64> {
    let word = |c: &[u8]| u64::from_ne_bytes(c.try_into().expect("8-byte chunk"));
    let first = word(page.get(..8)?);
    page.chunks_exact(8)
        .all(|c| word(c) == first)
        .then_some(first)
}

/// Most bytes a write prefetches at its lane's append point.
const PREFETCH_BYTES: usize = 2048;

/// Largest page a read decompresses in place, under its class's or lane's
/// lock held shared ([`PageStore::read`]); larger ones are copied out and
/// decompressed outside every lock. Copying cold compressed bytes out does
/// not overlap the decompression's work as reading them in place does:
/// measured with `examples/load.rs` (one thread reading the 31,143 stored
/// pages of a Go source tree in order, best of 15 passes, three runs of
/// each build), 1,880-2,224 ns a page copying out first, 1,674-1,718 in
/// place, against 1,573-1,593 for the codec alone on the same pages
/// (0.83x -> 0.92-0.94x its pace). A writer of that lane then waits for a
/// decompression, about 1.5 us for 4 KiB; for the 16 and 64 KiB units of a
/// region it would be 5-20 us, so those are still copied out.
const IN_PLACE_MAX: usize = 4096;

thread_local! {
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A table of `n` entries, `n` chosen by the caller: memory that cannot be
/// had is [`Error::OsOutOfMemory`], not an abort of the host process (nor
/// a capacity-overflow panic for an `n` no memory could hold).
pub(crate) fn try_table<T>(n: usize, what: &str, make: impl FnMut() -> T) -> Result<Box<[T]>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|e| Error::OsOutOfMemory {
        bytes: n.saturating_mul(std::mem::size_of::<T>()),
        reason: format!("{what} of {n} entries: {e}"),
    })?;
    v.extend(std::iter::repeat_with(make).take(n));
    Ok(v.into_boxed_slice())
}

thread_local! {
    /// A reader's copy of a compressed page, decompressed outside the locks.
    static COMPRESSED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl PageStore {
    /// Make a store; fails on a bad pool configuration, zero slots, more
    /// than [`MAX_LOG_SLOTS`] with log placement, a dictionary without
    /// zstd, too many secondary codecs, a backing file that cannot be
    /// created, or a slot table the OS will not give memory for
    /// ([`Error::OsOutOfMemory`]).
    pub fn new(cfg: PageStoreConfig) -> Result<PageStore> {
        Self::with_clock(cfg, Arc::new(MonotonicClock::default()))
    }

    /// As [`new`](PageStore::new), with the clock idle ages are measured
    /// by (tests use a [`ManualClock`]).
    pub fn with_clock(cfg: PageStoreConfig, clock: Arc<dyn Clock>) -> Result<PageStore> {
        if cfg.slots == 0 {
            return Err(Error::InvalidConfig(
                "a page store needs at least one slot".into(),
            ));
        }
        // With log placement the slots are the objects' handles, named in
        // an owner's 31 bits in cleaning. Checked before the slot table is
        // made: a count past the limit may ask for gigabytes of it.
        let owned = matches!(cfg.pool.placement, crate::Placement::Log { .. });
        if owned && cfg.slots > MAX_LOG_SLOTS {
            return Err(Error::InvalidConfig(format!(
                "{} slots is more than a page store with log placement can name: at most {MAX_LOG_SLOTS} (2^31; size classes have no such limit)",
                cfg.slots
            )));
        }
        let codecs = codecs::Codecs::new(
            CodecSpec {
                codec: cfg.codec,
                dictionary: cfg.dictionary,
            },
            &cfg.recompress,
        )?;
        // The store reads in place under the class lock (`with_object`):
        // lock-free reads would cost the handle chunks of the peak for
        // nothing.
        let pool = Pool::new(PoolConfig {
            lock_free_reads: false,
            ..cfg.pool
        })?;
        let page_size = pool.max_object_size();
        let slots = Arc::new(table::SlotTable::new(cfg.slots, cfg.track_access_time)?);
        if owned {
            pool.set_owners(slots.clone());
        }
        let store = PageStore {
            codecs,
            huge_threshold: pool.huge_class_size(),
            page_size,
            pool,
            owned,
            slots,
            counters: stats::Counters::default(),
            clock,
            backing: OnceLock::new(),
            limit: writeback::Limit::default(),
            measure_allocator: cfg.measure_allocator,
        };
        if let Some(path) = cfg.backing_file {
            store.set_backing_file(path)?;
        }
        Ok(store)
    }

    /// The pool under the store.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Whether slots keep their last access time
    /// ([`PageStoreConfig::track_access_time`]).
    pub fn tracks_access_time(&self) -> bool {
        self.slots.tracks_atime()
    }

    /// Bytes per slot.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Number of slots.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// The checks of a [`read`](PageStore::read) or
    /// [`write`](PageStore::write) of slot `index` with a buffer of `len`
    /// bytes, counted in `io_stat().invalid_io` when refused as those
    /// calls count them: for a caller that must refuse a request before it
    /// touches the buffer (the C API zeroes a read's buffer first).
    pub fn check_request(&self, index: usize, len: usize) -> Result<()> {
        self.check_index(index)?;
        self.check_page(len)
    }

    fn check_index(&self, index: usize) -> Result<()> {
        if index < self.slots.len() {
            return Ok(());
        }
        add(&self.counters.invalid_io, 1);
        Err(Error::SlotOutOfRange {
            index,
            slots: self.slots.len(),
        })
    }

    fn check_page(&self, len: usize) -> Result<()> {
        if len != self.page_size {
            add(&self.counters.invalid_io, 1);
            return Err(Error::WrongPageSize {
                len,
                page_size: self.page_size,
            });
        }
        Ok(())
    }

    /// Store `page` in slot `index`, replacing what was there. If the pool
    /// refuses (memory limit), the slot keeps its previous content.
    pub fn write(&self, index: usize, page: &[u8]) -> Result<()> {
        self.check_index(index)?;
        self.check_page(page.len())?;
        let now = self.now_secs();
        let old = match same_filled(page) {
            Some(word) => self.replace(
                &mut self.slots.get_or_make(index).lock(),
                Slot::same(word, now),
            ),
            None => self.store_object(index, page, now).inspect_err(|_| {
                add(&self.counters.failed_writes, 1);
            })?,
        };
        self.free_old(old);
        Ok(())
    }

    /// Compress `page` and store it in slot `index`; returns the slot's
    /// old contents, uncounted, to be freed. The slot is locked before the object is
    /// stored (slot locks come before lane locks): with log placement the
    /// object names the slot as its owner from the moment it is placed,
    /// and cleaning, which asks the slot where its object is, must find it
    /// busy until the slot holds the new place (else it would drop the
    /// owner entry of an object it cannot see yet).
    fn store_object(&self, index: usize, page: &[u8], now: u32) -> Result<Slot> {
        if self.owned {
            // The lines the object will likely be copied to arrive while
            // the page compresses: its first 2 KiB (half a 4 KiB page, more
            // than most objects). No more at larger pages: 32 KiB of
            // prefetches for a 64 KiB unit pushed the page being compressed
            // out of L1 (the region's 64 KiB faults 61-67 -> 73-75 us p50).
            self.pool
                .prefetch_append(PREFETCH_BYTES.min(self.page_size / 2));
        }
        SCRATCH.with(|scratch| {
            let mut buf = scratch.borrow_mut();
            buf.resize(self.page_size, 0);
            // Anything at or over the huge threshold is stored raw anyway:
            // let the codec stop there.
            let limit = self.huge_threshold.min(self.page_size);
            let codec = self.codecs.primary();
            let (bytes, huge) = match self.codecs.get(codec).compress(page, &mut buf[..limit]) {
                Some(n) if n < self.huge_threshold => (&buf[..n], false),
                _ => (page, true),
            };
            let slot = self.slots.get_or_make(index);
            let mut held = slot.lock();
            let value = self.in_allocator(|| self.pool_store(index, bytes))?;
            let new = Slot::stored_at(value, bytes.len(), huge, codec, now);
            Ok(self.replace(&mut held, new))
        })
    }

    /// Store an object for slot `index`: its handle, or with log
    /// placement its place (the slot is its handle).
    fn pool_store(&self, index: usize, bytes: &[u8]) -> Result<u64> {
        if self.owned {
            self.pool.store_owned(index as u32, bytes)
        } else {
            self.pool.store(bytes).map(crate::Handle::to_raw)
        }
    }

    /// Call `f` with the bytes of the object stored slot `s` holds.
    fn with_pool_object<R>(&self, s: &Slot, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        if self.owned {
            self.pool.with_owned(s.place(), s.len(), f)
        } else {
            self.pool.with_object(s.handle(), f)
        }
    }

    /// Free the object of a stored slot the store no longer holds.
    fn free_pool_object(&self, s: &Slot) -> Result<()> {
        if self.owned {
            self.pool.free_owned(s.place(), s.len())
        } else {
            self.pool.free(s.handle())
        }
    }

    /// Run a pool call, adding its time to `allocator_ns` if the store
    /// measures its allocator.
    fn in_allocator<T>(&self, f: impl FnOnce() -> T) -> T {
        if !self.measure_allocator {
            return f();
        }
        let t = Instant::now();
        let r = f();
        add(&self.counters.allocator_ns, t.elapsed().as_nanos() as u64);
        r
    }

    /// Count (`sign > 0`) or uncount what a slot holds.
    fn account(&self, s: &Slot, sign: i64) {
        let c = &self.counters;
        let change = |counter: &std::sync::atomic::AtomicU64, v: u64| {
            if sign > 0 {
                add(counter, v);
            } else {
                sub(counter, v);
            }
        };
        match s.kind() {
            Kind::Empty => return,
            Kind::Same => change(&c.same_pages, 1),
            Kind::WrittenBack => {}
            Kind::Stored => {
                change(&c.compr_bytes, s.len() as u64);
                if s.is_huge() {
                    change(&c.huge_pages, 1);
                    if sign > 0 {
                        add(&c.huge_pages_since, 1);
                    }
                }
            }
        }
        change(&c.pages_stored, 1);
    }

    /// Put `new` in the slot `held` (its lock held) and count the change:
    /// the old contents out, then the new in, under the slot's lock. Done
    /// after the lock was let go, a discard of the slot could uncount the
    /// new contents before they were counted, and `mm_stat` read figures
    /// near 2^64 meanwhile (`a_slot_written_and_discarded_at_once_never_reads_as_wrapped`).
    /// Returns the old contents, to be freed ([`PageStore::free_old`])
    /// once the lock is let go.
    fn replace(&self, held: &mut Slot, new: Slot) -> Slot {
        let old = std::mem::replace(held, new);
        self.account(&old, -1);
        self.account(&new, 1);
        old
    }

    /// Uncount and free what a slot held (its object or its block).
    fn release(&self, old: Slot) {
        self.account(&old, -1);
        self.free_old(old);
    }

    /// Free what a slot held, already uncounted.
    fn free_old(&self, old: Slot) {
        match old.kind() {
            Kind::Stored => {
                // The slot owned this handle alone; freeing it cannot fail.
                let freed = self.in_allocator(|| self.free_pool_object(&old));
                debug_assert!(freed.is_ok(), "{freed:?}");
            }
            Kind::WrittenBack => self.free_block(&old),
            Kind::Empty | Kind::Same => {}
        }
    }

    /// Read slot `index` into `buf` (exactly one page). A read is an
    /// access: it clears the slot's idle mark.
    pub fn read(&self, index: usize, buf: &mut [u8]) -> Result<()> {
        self.check_index(index)?;
        self.check_page(buf.len())?;
        let now = self.now_secs();
        let Some(slot) = self.slots.get(index) else {
            // Its chunk holds no page: never written, or discarded.
            buf.fill(0);
            return Ok(());
        };
        let mut s = slot.lock();
        s.touch(now);
        let r = if s.kind() == Kind::Stored && !s.is_huge() {
            let (stored, codec) = (*s, self.codecs.get(s.codec()));
            if self.page_size <= IN_PLACE_MAX {
                // Decompress from the pool's memory, its class or lane
                // locked shared (readers do not wait for each other; a
                // writer of that class or lane waits for the
                // decompression), the slot let go first (readers and
                // writers of the slot's neighbours do not wait). The object
                // cannot move or be freed while the lock is held.
                self.with_pool_object(&stored, move |b| {
                    drop(s);
                    codec.decompress(b, buf)
                })
                .and_then(|r| r)
            } else {
                // Larger pages (a region's 16 or 64 KiB units, 5-20 us to
                // decompress): copy the compressed bytes out (the lock
                // held shared, for a copy), let the slot go, and
                // decompress outside every lock, so that no writer waits
                // that long.
                COMPRESSED.with_borrow_mut(|scratch| {
                    scratch.resize(self.page_size, 0);
                    let n = self.with_pool_object(&stored, |b| {
                        scratch[..b.len()].copy_from_slice(b);
                        b.len()
                    });
                    drop(s);
                    codec.decompress(&scratch[..n?], buf)
                })
            }
        } else {
            self.decode(index, &s, buf)
        };
        r.inspect_err(|_| {
            add(&self.counters.failed_reads, 1);
        })
    }

    /// The page slot `s` (at `index`) holds, into `buf`, under the slot's
    /// lock (and, for a stored page, its class's lock, shared).
    fn decode(&self, index: usize, s: &Slot, buf: &mut [u8]) -> Result<()> {
        match s.kind() {
            Kind::Empty => buf.fill(0),
            Kind::Same => {
                for c in buf.chunks_exact_mut(8) {
                    c.copy_from_slice(&s.word().to_ne_bytes());
                }
            }
            Kind::Stored => {
                let huge = s.is_huge();
                let codec = self.codecs.get(s.codec());
                self.with_pool_object(s, |bytes| {
                    if huge {
                        buf.copy_from_slice(bytes);
                        Ok(())
                    } else {
                        codec.decompress(bytes, buf)
                    }
                })??;
            }
            Kind::WrittenBack => self.read_back(index, s, buf)?,
        }
        Ok(())
    }

    /// Discard slots `index .. index + count`: they read as zeros after,
    /// and their memory or backing blocks are freed.
    pub fn discard(&self, index: usize, count: usize) -> Result<()> {
        let end = index
            .checked_add(count)
            .filter(|&e| e <= self.slots.len())
            .ok_or_else(|| {
                add(&self.counters.invalid_io, 1);
                // The range's last slot; with no slots, the first (a
                // review saw `discard(70, 0)` name slot 69).
                Error::SlotOutOfRange {
                    index: index.saturating_add(count.max(1)).saturating_sub(1),
                    slots: self.slots.len(),
                }
            })?;
        for i in index..end {
            let old = match self.slots.get(i) {
                Some(slot) => self.replace(&mut slot.lock(), Slot::default()),
                None => continue,
            };
            self.free_old(old);
        }
        add(&self.counters.notify_free, count as u64);
        Ok(())
    }

    /// What slot `index` holds.
    pub fn slot_info(&self, index: usize) -> Result<SlotInfo> {
        self.check_index(index)?;
        let s = match self.slots.get(index) {
            Some(slot) => *slot.lock(),
            None => Slot::default(),
        };
        Ok(match s.kind() {
            Kind::Empty => SlotInfo::Empty,
            Kind::Same => SlotInfo::Same(s.word()),
            Kind::Stored => SlotInfo::Stored {
                len: s.len(),
                huge: s.is_huge(),
                idle: s.is_idle(),
                incompressible: s.is_incompressible(),
                recompressed: s.is_recompressed(),
                codec: self.codecs.get(s.codec()).name(),
            },
            Kind::WrittenBack => SlotInfo::WrittenBack {
                block: u64::from(s.block()),
            },
        })
    }

    /// Heap bytes of the store's own metadata (slot table, codec table and
    /// dictionaries, the backing file's bitmap) and the pool's.
    pub fn metadata_bytes(&self) -> usize {
        self.slots.metadata_bytes()
            + self.codecs.metadata_bytes()
            + self
                .backing
                .get()
                .map_or(0, writeback::Backing::metadata_bytes)
            + self.pool.stats().metadata_bytes
    }

    /// Compact the pool; returns the pages freed.
    pub fn compact(&self) -> usize {
        self.pool.compact()
    }

    /// Nanoseconds spent in the pool (store and free) by writes, discards
    /// and overwrites, if the store was made with `measure_allocator`.
    pub fn allocator_ns(&self) -> u64 {
        get(&self.counters.allocator_ns)
    }

    /// zram's `mm_stat`.
    pub fn mm_stat(&self) -> MmStat {
        let p = self.pool.stats();
        let c = &self.counters;
        let page = self.page_size as u64;
        MmStat {
            orig_data_size: get(&c.pages_stored) * page,
            compr_data_size: get(&c.compr_bytes),
            mem_used_total: p.pages_held as u64 * page,
            mem_limit: self.pool.config().memory_limit.unwrap_or(0) as u64,
            mem_used_max: p.max_pages_held as u64 * page,
            same_pages: get(&c.same_pages),
            pages_compacted: p.pages_compacted,
            huge_pages: get(&c.huge_pages),
            huge_pages_since: get(&c.huge_pages_since),
        }
    }

    /// zram's `io_stat`.
    pub fn io_stat(&self) -> IoStat {
        self.counters.io_stat()
    }

    /// zram's `bd_stat`, in pages.
    pub fn bd_stat(&self) -> BdStat {
        self.counters.bd_stat()
    }

    /// Check the store's counters against its slots, the backing file's
    /// bitmap against the written-back slots, and the pool's invariants.
    /// Walks every slot: for tests, while no other thread uses the store.
    pub fn check_invariants(&self) -> Result<()> {
        let (mut stored, mut compr, mut same, mut huge, mut wb) = (0u64, 0u64, 0u64, 0u64, 0u64);
        self.slots.check().map_err(Error::InvariantViolated)?;
        for i in self.slots.present() {
            let Some(slot) = self.slots.get(i) else {
                continue;
            };
            let s = *slot.lock();
            match s.kind() {
                Kind::Empty => continue,
                Kind::Same => same += 1,
                Kind::WrittenBack => wb += 1,
                Kind::Stored => {
                    compr += s.len() as u64;
                    huge += u64::from(s.is_huge());
                    let len = self.with_pool_object(&s, <[u8]>::len)?;
                    if len != s.len() {
                        return Err(Error::InvariantViolated(format!(
                            "a slot records {} bytes, its object has {len}",
                            s.len()
                        )));
                    }
                }
            }
            stored += 1;
        }
        let c = &self.counters;
        let counted = (
            get(&c.pages_stored),
            get(&c.compr_bytes),
            get(&c.same_pages),
            get(&c.huge_pages),
            get(&c.bd_count),
        );
        if counted != (stored, compr, same, huge, wb) {
            return Err(Error::InvariantViolated(format!(
                "store counters (stored, compr, same, huge, bd_count) = {counted:?}, slots say {:?}",
                (stored, compr, same, huge, wb)
            )));
        }
        let used = self
            .backing
            .get()
            .map_or(0, writeback::Backing::blocks_used);
        if used != wb {
            return Err(Error::InvariantViolated(format!(
                "the backing file has {used} blocks in use for {wb} written-back slots"
            )));
        }
        self.pool.check_invariants()
    }
}

#[cfg(test)]
mod tests;
