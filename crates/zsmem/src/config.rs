//! How a pool is configured: [`PoolConfig`], its placement, free modes and
//! page return, their defaults and limits, and the kernel's configuration.

use crate::compact::CompactionPolicy;
use std::time::Duration;

#[cfg(doc)]
use crate::Pool;

use crate::size_class::{ChainRule, KERNEL_HANDLE_SIZE, SizeClassConfig};

/// How to build a [`Pool`].
///
/// ```
/// use zsmem::{Pool, PoolConfig};
/// let cfg = PoolConfig { page_size: 16384, ..PoolConfig::default() };
/// let pool = Pool::new(cfg).unwrap();
/// assert_eq!(pool.size_classes().len(), 1023);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    /// Page size in bytes (power of two, 4 KiB..=64 KiB). Also the largest
    /// object.
    pub page_size: usize,
    /// Most pages per zspage, 1..=32.
    pub chain_size: usize,
    /// Distance between class sizes, a multiple of 8.
    pub class_delta: usize,
    /// How each class's chain length is chosen.
    pub chain_rule: ChainRule,
    /// Size every non-huge object as the kernel does, 8 bytes larger for the
    /// handle it stores in the object, so that page counts match the
    /// kernel's for the same objects.
    pub kernel_handle_header: bool,
    /// Most bytes of zspage memory the pool may hold; `None` for no limit.
    pub memory_limit: Option<usize>,
    /// When the pool compacts by itself.
    pub compaction: CompactionPolicy,
    /// Commit a zspage's pages only as objects reach into them, and let
    /// compaction give back the pages above a zspage's highest object, not
    /// only whole zspages (see `compact.rs`). Off in the kernel's
    /// configuration, whose zspages are all or nothing.
    pub trim_pages: bool,
    /// How `free` does its work.
    pub free_mode: FreeMode,
    /// Adaptive class spacing (see `spacing.rs`), a power of two: the
    /// classes at multiples of 2, 4, .. `class_grid` are anchors, and a
    /// request whose class (or anchor's neighbourhood) has too few live
    /// objects to pay for a page of its own goes to the next coarser
    /// anchor. 1 turns it off (every class its own, the kernel's
    /// behaviour).
    pub class_grid: usize,
    /// When freed pages go back to the OS: after a bounded delay by a
    /// background thread (the default), or at once on the freeing thread.
    pub page_return: PageReturn,
    /// Log placement with [`PageReturn::Delayed`]: most bytes of pages
    /// per lane that the returner thread keeps faulted in ahead of a
    /// stream of new segments, so that the threads that store write to
    /// resident pages instead of taking a page fault on each new one (the
    /// kernel's zsmalloc gets its pages from the page allocator; a process
    /// gets them from page faults). They are counted as cached pages,
    /// taken before fresh ones, and returned after the delay when no
    /// segment comes for them; at most half of `max_pages`. Less than a
    /// segment (32 pages: 128 KiB at 4 KiB pages, 2 MiB at 64 KiB) turns
    /// it off, as does [`PageReturn::Immediate`]. Default 1 MiB. Like
    /// pages waiting to be returned, they are not held pages: a pool with
    /// a `memory_limit` may be resident up to this much beyond it per lane
    /// meanwhile. Size classes ignore it: their zspages have many lengths
    /// and fill page by page, often over longer than the delay, so runs
    /// faulted in ahead were mostly returned unused (measured: no faster
    /// store, 8% more CPU; docs/DESIGN.md, "Pages faulted in ahead").
    pub prefault_bytes: usize,
    /// Where objects go: size classes (zsmalloc's design, the default) or
    /// append-only segments ([`Placement::Log`]).
    pub placement: Placement,
    /// Class placement: how many copies of each class's state (lock,
    /// zspages, handle table, page source) threads spread over, 1..=16. A
    /// thread allocates in its own shard (assigned round-robin at its first
    /// allocation); a free or a read goes to the shard its handle names.
    /// Threads in different shards share no lock and no cache line, so
    /// frees and reads scale with cores; each shard in use keeps its own
    /// partly filled zspages, so a pool used by N threads can hold up to N
    /// times a single thread's floor (at most a page per class in use, with
    /// `trim_pages`). One thread alone uses one shard and pays nothing. 1 is
    /// the kernel's design (one state per class). The pool uses fewer where
    /// the handle's class field cannot name them all ([`Pool::class_shards`]:
    /// 16 at 4 KiB pages, 4 at 16 KiB, 1 at 64 KiB); log placement ignores
    /// it (its lanes are per thread already).
    pub class_shards: usize,
    /// Size classes: most freed slots each class (each shard's) keeps
    /// *parked* for its next allocations, 0..=[`MAX_PARKED_SLOTS`]. A free
    /// that parks its slot kills the handle at once, as every free does,
    /// but leaves the slot allocated in its zspage with its place in the
    /// handle entry, and the class's next allocation takes it back as it
    /// is: a free followed by a store skips the zspage's bitmap, use count
    /// and fullness group and the handle table's free list (measured with
    /// `zsmem bench pool --sizes 1K`: about a fifth off an
    /// alloc+write+free). Slots are parked only in zspages that keep a
    /// live object, and compaction frees them first, so they hold no page
    /// that live objects do not; in every figure a parked slot is a free
    /// one (`ClassStats::parked` counts them). A class parks at most as
    /// many at once as its allocations have lately taken back (one to
    /// start), so a long run of frees with no allocation between them
    /// parks one at a time. Default 16; 0 is the kernel's behaviour (every
    /// free frees its slot). Deferred frees and log placement do not park.
    ///
    /// With [`lock_free_reads`](PoolConfig::lock_free_reads) (the default)
    /// slots are parked per thread instead, in the freeing thread's
    /// *magazine* of the class, without the class lock, and taken back by
    /// that thread's next allocations in the class (docs/DESIGN.md,
    /// "Magazines"): at most `parked_slots` per thread and class (as many
    /// as its allocations lately took back, one to start, and up to 4 more
    /// that a run of frees parks before it gives them back to the class
    /// under one lock). A magazine
    /// never holds all of a zspage's slots, but several threads' magazines
    /// together may keep a zspage none of whose objects is live, until an
    /// allocation, compaction, [`Pool::flush`](crate::Pool::flush) or
    /// [`Pool::trim`](crate::Pool::trim) takes them back.
    pub parked_slots: usize,
    /// [`Pool::read`](crate::Pool::read) copies an object out without
    /// taking its class's (or lane's) lock, checked against a count of its
    /// relocations instead (docs/DESIGN.md, "Reads without the lock"): no
    /// atomic read-modify-write on the way, so readers of one class never
    /// write a shared cache line. It costs every class and lane keeping the
    /// handle chunks of its peak (8 bytes an object), and every write of an
    /// object's bytes going by whole words (and 16-byte vector stores).
    /// Default on; [`PoolConfig::kernel`] and the page store (which
    /// decompresses in place, under the lock) turn it off.
    pub lock_free_reads: bool,
}

/// Most [`PoolConfig::parked_slots`].
pub const MAX_PARKED_SLOTS: usize = 64;

/// Slots a class keeps parked by default ([`PoolConfig::parked_slots`]).
pub const DEFAULT_PARKED_SLOTS: usize = 16;

/// Where a [`Pool`] puts objects.
///
/// ```
/// use zsmem::{Placement, Pool, PoolConfig};
/// let pool = Pool::new(PoolConfig { placement: Placement::log(), ..PoolConfig::default() })?;
/// let h = pool.store(&[5u8; 1000])?;
/// assert_eq!(pool.read_vec(h)?, vec![5u8; 1000]);
/// let s = pool.stats();
/// assert_eq!((s.pages_held, s.waste.rounding_bytes), (1, 0));
/// # Ok::<(), zsmem::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Placement {
    /// Objects are rounded up to a size class and stored in zspages of
    /// equal slots, one class per zspage (zsmalloc's design).
    #[default]
    Classes,
    /// Objects are appended, rounded only to a small unit (2 bytes at 4 KiB
    /// pages), to the open segment of their thread's lane (runs of 32 pages
    /// committed as they fill); a segment is given back when its last
    /// object goes, and compaction (*cleaning*) copies the live objects of
    /// the sealed segments with the most dead bytes to the open one. No
    /// class keeps a page of its own, so small pools waste less; needs
    /// `trim_pages`, not `kernel_handle_header` (docs/DESIGN.md, "Log
    /// placement").
    Log {
        /// Lanes, each with its own lock and open segment; a thread appends
        /// to one lane (assigned round-robin at its first allocation), a
        /// free goes to its object's lane. 1..=64.
        lanes: usize,
    },
}

impl Placement {
    /// Log placement with a lane per CPU (at most 8).
    pub fn log() -> Placement {
        let lanes = std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 8));
        Placement::Log { lanes }
    }

    pub(crate) fn lanes(self) -> usize {
        match self {
            Placement::Classes => 0,
            Placement::Log { lanes } => lanes,
        }
    }
}

/// Most lanes a log-placed pool may have.
pub const MAX_LANES: usize = 64;

/// Most class shards a pool may have ([`PoolConfig::class_shards`]).
pub const MAX_CLASS_SHARDS: usize = 16;

/// Class shards of zsmem's own configuration: one per CPU, at most 8.
pub fn default_class_shards() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 8))
}

/// How [`Pool::free`] frees.
///
/// ```
/// use zsmem::{FreeMode, Pool, PoolConfig};
/// let pool = Pool::new(PoolConfig { free_mode: FreeMode::deferred(), ..PoolConfig::default() })?;
/// let h = pool.store(&[1u8; 500])?;
/// pool.free(h)?;
/// assert!(pool.read_vec(h).is_err()); // dead at once
/// pool.flush(); // and freed now
/// assert_eq!(pool.stats().objects, 0);
/// # Ok::<(), zsmem::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum FreeMode {
    /// At once, under the object's class lock alone (the class index is in
    /// the handle, so no pool-wide lock is needed).
    #[default]
    ClassLock,
    /// Deferred: the handle is marked dead at once without any lock and
    /// handed to a per-thread shard; full shards are drained in batches
    /// sorted by class, one lock acquisition per run of a class. At most
    /// `max_pending_bytes` of objects wait (the batch size is derived from
    /// it); [`Pool::flush`] drains everything now.
    Deferred {
        /// Bound on the bytes of objects waiting to be freed.
        max_pending_bytes: usize,
    },
    /// The kernel before the class index was in the handle: every free
    /// takes a pool-wide lock as a reader (compaction as a writer) before its
    /// class lock. Only for `zsmem bench free`'s comparison.
    PoolLock,
}

impl FreeMode {
    /// Deferred free with a 4 MiB bound on pending objects.
    pub const fn deferred() -> FreeMode {
        FreeMode::Deferred {
            max_pending_bytes: 4 << 20,
        }
    }
}

/// Chain length of zsmem's own configuration: with trimming, long zspages
/// cost no free slots, and their tails waste less (see `compact.rs` and
/// `cargo run --release -p zsmem-lab --example tune`).
pub const DEFAULT_CHAIN_SIZE: usize = 32;

/// Coarsest anchor spacing of zsmem's own configuration: a sparse class's
/// requests go to the class at the next even index (16 bytes larger at
/// 16-byte spacing). Coarser grids help pools of a few MB more and cost
/// large pools more (see `spacing.rs` for the measurements).
pub const DEFAULT_CLASS_GRID: usize = 2;

/// Pages kept faulted in ahead of new zspages per page source
/// ([`PoolConfig::prefault_bytes`]): about 4 ms of a single thread's
/// stores at zsmem's rate on this project's machine (a returner round
/// comes every millisecond while pages wait).
pub const DEFAULT_PREFAULT_BYTES: usize = 1 << 20;

/// Largest `class_grid` accepted.
pub const MAX_CLASS_GRID: usize = 64;

impl Default for PoolConfig {
    /// zsmem's configuration: 4 KiB pages, 16-byte classes, zspages of up
    /// to 32 pages (the `Trim` chain rule) committed page by page, automatic
    /// compaction.
    fn default() -> Self {
        let s = SizeClassConfig::default();
        PoolConfig {
            page_size: s.page_size,
            chain_size: DEFAULT_CHAIN_SIZE,
            class_delta: s.class_delta,
            chain_rule: ChainRule::Trim,
            kernel_handle_header: false,
            memory_limit: None,
            compaction: CompactionPolicy::default(),
            trim_pages: true,
            free_mode: FreeMode::ClassLock,
            class_grid: DEFAULT_CLASS_GRID,
            page_return: PageReturn::default(),
            prefault_bytes: DEFAULT_PREFAULT_BYTES,
            placement: Placement::Classes,
            class_shards: default_class_shards(),
            parked_slots: DEFAULT_PARKED_SLOTS,
            lock_free_reads: true,
        }
    }
}

impl PoolConfig {
    /// zsmem's configuration with log placement ([`Placement::log`]: a lane
    /// per CPU, no size classes): the page store's default, and the least
    /// memory on every tree measured (docs/DESIGN.md, "Log placement").
    /// Objects allocated and freed at a high rate cost more CPU than with
    /// classes (a page committed or given back as objects reach or leave
    /// it), which is why the plain pool's default stays with classes.
    ///
    /// ```
    /// let cfg = zsmem::PoolConfig::log();
    /// assert!(matches!(cfg.placement, zsmem::Placement::Log { .. }));
    /// assert_eq!(zsmem::PageStoreConfig::default().pool, cfg);
    /// ```
    pub fn log() -> Self {
        PoolConfig {
            placement: Placement::log(),
            ..PoolConfig::default()
        }
    }

    /// The kernel's zsmalloc as configured on Linux 6.18 with 4 KiB pages:
    /// chain size 8, 16-byte classes, the handle counted in each object,
    /// compaction only when asked, freed pages returned at once, reads
    /// under the class lock.
    pub fn kernel() -> Self {
        PoolConfig {
            chain_size: SizeClassConfig::default().chain_size,
            chain_rule: SizeClassConfig::default().chain_rule,
            kernel_handle_header: true,
            compaction: CompactionPolicy::Off,
            trim_pages: false,
            class_grid: 1,
            page_return: PageReturn::Immediate,
            prefault_bytes: 0,
            class_shards: 1,
            parked_slots: 0,
            lock_free_reads: false,
            ..PoolConfig::default()
        }
    }

    /// The size-class part of the configuration.
    pub fn size_classes(&self) -> SizeClassConfig {
        SizeClassConfig {
            page_size: self.page_size,
            chain_size: self.chain_size,
            class_delta: self.class_delta,
            chain_rule: self.chain_rule,
        }
    }

    pub(crate) fn header(&self) -> usize {
        if self.kernel_handle_header {
            KERNEL_HANDLE_SIZE
        } else {
            0
        }
    }
}

/// When a pool gives freed pages back to the OS.
///
/// ```
/// use std::time::Duration;
/// use zsmem::{PageReturn, Pool, PoolConfig};
/// let pool = Pool::new(PoolConfig {
///     page_return: PageReturn::Delayed { delay: Duration::from_secs(60), max_pages: 256 },
///     ..PoolConfig::default()
/// })?;
/// let h = pool.store(&[9u8; 3000])?;
/// pool.free(h)?;
/// // The zspage's page waits to be returned: held from the OS, not by a zspage.
/// let s = pool.stats();
/// assert_eq!((s.pages_held, s.cached_pages), (0, 1));
/// pool.trim(); // or wait: the returner gives it back after a minute
/// assert_eq!(pool.stats().cached_pages, 0);
/// # Ok::<(), zsmem::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum PageReturn {
    /// On the freeing thread, at once: one `madvise` per freed zspage (and
    /// per trimmed range). The kernel's zsmalloc frees its pages at once
    /// too; `PoolConfig::kernel()` uses this.
    Immediate,
    /// Queued, reused first, and returned by a background thread once they
    /// have waited `delay`; never more than `max_pages` wait.
    Delayed {
        /// Longest a freed page waits before it is returned (plus the
        /// returner's scheduling delay); at most [`MAX_RETURN_DELAY`].
        delay: Duration,
        /// Most pages that may wait in one page source (a class shard's, a
        /// log lane's): the free that would leave more gives back the
        /// oldest, down to half of it, on its own thread.
        max_pages: usize,
    },
}

/// Longest `PageReturn::Delayed::delay` a pool takes: an hour. A longer
/// one is an `InvalidConfig` (`Duration::MAX` overflowed the returner's
/// clock arithmetic: its thread, shared by every pool of the process,
/// panicked, and no pool's pages were returned after that).
pub const MAX_RETURN_DELAY: Duration = Duration::from_secs(3600);

/// Default wait of a freed page: mimalloc's purge delay.
pub const DEFAULT_RETURN_DELAY: Duration = Duration::from_millis(10);

/// Default most pages waiting (4 MiB of 4 KiB pages).
pub const DEFAULT_RETURN_MAX_PAGES: usize = 1024;

impl Default for PageReturn {
    fn default() -> Self {
        PageReturn::Delayed {
            delay: DEFAULT_RETURN_DELAY,
            max_pages: DEFAULT_RETURN_MAX_PAGES,
        }
    }
}

impl PageReturn {
    /// The longest a freed page waits before the returner is due to give it
    /// back (zero for `Immediate`): read figures after this much time has
    /// passed since the last free to see them settled.
    pub fn bound(&self) -> Duration {
        match *self {
            PageReturn::Immediate => Duration::ZERO,
            PageReturn::Delayed { delay, .. } => delay,
        }
    }
}
