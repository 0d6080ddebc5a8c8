//! The pool: the public face of the allocator.
//!
//! A request of `len` bytes is served by the physical class for
//! `len + header` bytes, where `header` is 8 in the kernel-faithful
//! configuration (the kernel keeps the handle inside each non-huge object)
//! and 0 otherwise (zsmem keeps handles out of band). Each operation takes
//! exactly one lock, its class's; the handle names the class, so a free or a
//! read never needs a pool-wide lock. The page source's own lock is taken,
//! nested inside a class lock, only when a zspage is made or freed.
//!
//! Frees come in three modes ([`FreeMode`]): under the class lock (the
//! default), deferred (lock-free hand-off, batched drain: `deferred.rs`), and
//! an emulation of the kernel's older pool-wide reader lock, kept only so
//! `zsmem bench free` can show what the class index in the handle buys.
//!
//! In front of the class lock, with size classes, class-lock frees and
//! lock-free reads (the default), each thread keeps per class a magazine of
//! parked slots (`magazine.rs`): a free parks its slot there and a store or
//! alloc of the same class takes one back, both without any lock (one
//! compare-and-swap on the handle entry each way); only a miss takes the
//! class lock.

use std::mem::MaybeUninit;
use std::sync::Arc;

use crate::cells::{Cell, Cells};
use crate::class::{Class, GROUP_FULL, Migration};
use crate::compact::{self, CompactionPolicy, CompactionStats, Counters};
use crate::config::{
    FreeMode, MAX_CLASS_GRID, MAX_CLASS_SHARDS, MAX_LANES, MAX_PARKED_SLOTS, Placement, PoolConfig,
};
use crate::deferred::{DRAIN_STEP, Push, Shards};
use crate::error::{Error, HandleFault, Result};
use crate::handle::{CLASS_BITS, Directory, Handle, Location, PoolTag};
use crate::lane::{Lane, Owners, SEGMENT_PAGES};
use crate::magazine::{Freed, Magazines};
use crate::optimistic::Published;
use crate::os::PageSource;
use crate::remote::{MAX_QUEUED, RemoteFrees};
use crate::size_class::SizeClassTable;
use crate::spacing::Spacing;
use crate::stats::{ClassStats, PoolStats, Waste};
use crate::sync::{CachePadded, ReadGuard, WriteGuard};
use crate::words::Writes;

const NO_CLASS: u16 = u16::MAX;

/// A zsmalloc-design pool of variable-sized objects.
///
/// `Send + Sync`: share it between threads by reference or `Arc`.
///
/// Each live pool has a tag of its own that all its handles carry, so a
/// handle of one pool given to another is an [`Error::InvalidHandle`]
/// ([`HandleFault::ForeignPool`]), never the other pool's object. There are
/// 255 tags: at most 255 pools live at once in a process ([`Pool::new`]
/// fails with [`Error::TooManyPools`] beyond that). A dropped pool's tag is
/// given again only after every other free tag, so a handle of a dropped
/// pool is refused by the pools made soon after it, though not forever.
///
/// # Fork
///
/// A child made by `fork` may use every pool it inherited as the parent
/// left it at the fork: read the objects, store, free, compact, trim, drop
/// (the child's copy; the parent's is its own). zsmem's own thread (the
/// returner, `zsmem-return`, which gives freed pages back and faults pages
/// in ahead) holds no pool lock and has no pages in flight when a fork
/// copies the process (a `pthread_atfork` handler waits for its round in
/// progress, at most one batch of pages), and the child starts a returner
/// of its own at its first store or free, so its freed pages go back to the
/// OS as the parent's do. The pages are shared copy-on-write until either
/// process writes them. Threads of the application are the application's:
/// if another thread of the parent was inside a call on a pool at the fork,
/// the child may find that pool's locks held forever and must not use that
/// pool (nor make or drop a pool, if that call was `Pool::new` or a drop:
/// they share a process-wide lock). Fork at a moment no other thread is
/// inside zsmem, as with any library that takes locks.
///
/// ```
/// use zsmem::{Pool, PoolConfig};
/// let pool = Pool::new(PoolConfig::default()).unwrap();
/// let h = pool.alloc(1000).unwrap();
/// pool.write(h, &[7u8; 1000]).unwrap();
/// let mut buf = vec![0u8; 1000];
/// assert_eq!(pool.read(h, &mut buf).unwrap(), 1000);
/// assert!(buf.iter().all(|&b| b == 7));
/// let s = pool.stats();
/// assert_eq!((s.objects, s.bytes_stored, s.pages_held), (1, 1000, 1));
/// pool.free(h).unwrap();
/// assert_eq!(pool.stats().pages_held, 0);
/// ```
pub struct Pool {
    cfg: PoolConfig,
    table: SizeClassTable,
    header: usize,
    /// Class index (as carried in handles) less `dense_base` to position
    /// in `classes`: every class of every shard and every lane, or with log
    /// placement (which keeps no class) the lanes only. A handle's class
    /// field is `shard * table.len() + class`, its position `shard *
    /// physical + the class's rank among the physical classes`.
    dense: Box<[u16]>,
    dense_base: usize,
    /// Indexed as `dense`: what class or lane publishes for lock-free
    /// reads, set once when it does (empty in a pool without them). The
    /// read's first step: found from the handle's class field directly,
    /// where `dense`, the cell array and a `OnceLock` in the cell took five
    /// dependent loads.
    readers: Box<[std::sync::OnceLock<Arc<Published>>]>,
    /// Class shards in use (1 with log placement).
    shards: usize,
    /// The thread number of the first thread to allocate (`usize::MAX`
    /// until then): it takes shard 0, so a pool one thread uses makes no
    /// other shard whatever the thread's number.
    first_thread: std::sync::atomic::AtomicUsize,
    /// Physical classes per shard (0 with log placement).
    physical: usize,
    /// Per physical class and shard, and per lane: its lock and state (and
    /// with deferred free its lock-free handle directory). A class's state
    /// is made on its first allocation (a pool of a few MB uses half its
    /// classes, and a class's state is 400 bytes) and kept from then on
    /// (its handle table's generations must outlive its objects).
    cells: Cells<Option<Box<Space>>>,
    deferred: Option<Shards>,
    /// Where a sparse class's requests go (`None` with `class_grid` 1).
    spacing: Option<Spacing>,
    /// Taken by every free in `FreeMode::PoolLock` only.
    pool_lock: std::sync::RwLock<()>,
    /// The page source of shard 0's classes.
    pages: Arc<PageSource>,
    /// The page sources of class shards 1.., or with log placement of each
    /// lane (each its own lock and return queue), counting against
    /// `pages`' limit with it.
    more_pages: Box<[Arc<PageSource>]>,
    /// Positions in `classes` from here on are lanes: lane `k` is at
    /// `first_lane + k` (`dense` says so of the lanes' handle indices too).
    first_lane: usize,
    compaction: Counters,
    /// In every handle of this pool.
    tag: PoolTag,
    /// Log placement: who holds the places of objects stored with
    /// `store_owned` (a page store's slot table), set once.
    owners: std::sync::OnceLock<Arc<dyn Owners>>,
    /// Log placement, per lane: where its next new object would go
    /// ([`Lane::append_point`]), for [`Pool::prefetch_append`].
    append_hints: Box<[CachePadded<std::sync::atomic::AtomicUsize>]>,
    /// Log placement, per lane: frees of owned objects by other lanes'
    /// threads, made while the lane was locked (`remote.rs`), applied by
    /// the next holder of its write lock ([`Pool::drain_remote`]).
    remote: Box<[CachePadded<RemoteFrees>]>,
    /// Threads' magazines of parked slots (`magazine.rs`): with size
    /// classes, frees under the class lock, lock-free reads and
    /// `parked_slots` above 0.
    magazines: Option<Arc<Magazines>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("config", &self.cfg)
            .field("physical_classes", &self.physical)
            .field("class_shards", &self.shards)
            .field("pages_held", &self.pages.held_pages())
            .finish()
    }
}

impl Pool {
    /// Make a pool; fails with [`Error::InvalidConfig`] naming the bad
    /// parameter, or [`Error::TooManyPools`] if 255 pools are alive.
    pub fn new(cfg: PoolConfig) -> Result<Pool> {
        let table = SizeClassTable::new(cfg.size_classes())?;
        crate::os::check_page_size(cfg.page_size)?;
        if table.len() > 1 << CLASS_BITS {
            return Err(Error::InvalidConfig(format!(
                "{} size classes do not fit the handle's {CLASS_BITS}-bit class field",
                table.len()
            )));
        }
        if let CompactionPolicy::Auto {
            min_freeable_pages,
            max_moves,
        } = cfg.compaction
            && (min_freeable_pages == 0 || max_moves == 0)
        {
            return Err(Error::InvalidConfig(
                "automatic compaction needs min_freeable_pages and max_moves of at least 1".into(),
            ));
        }
        let deferred = match cfg.free_mode {
            FreeMode::Deferred { max_pending_bytes } => {
                let shards = std::thread::available_parallelism()
                    .map_or(2, |n| n.get() * 2)
                    .clamp(2, 64);
                // A shard and its backlog, each `batch` objects of at most
                // a page.
                let batch = max_pending_bytes / (2 * shards * cfg.page_size);
                if batch == 0 {
                    return Err(Error::InvalidConfig(format!(
                        "deferred free: max_pending_bytes {max_pending_bytes} is less than two \
                         pages per shard ({shards} shards, each a batch and a backlog of \
                         {}-byte pages)",
                        cfg.page_size
                    )));
                }
                Some(Shards::new(shards, batch.min(1024), DRAIN_STEP))
            }
            _ => None,
        };
        if !(1..=MAX_CLASS_SHARDS).contains(&cfg.class_shards) {
            return Err(Error::InvalidConfig(format!(
                "class_shards {} is not in 1..={MAX_CLASS_SHARDS}",
                cfg.class_shards
            )));
        }
        if !(1..=MAX_CLASS_GRID).contains(&cfg.class_grid) || !cfg.class_grid.is_power_of_two() {
            return Err(Error::InvalidConfig(format!(
                "class_grid {} is not a power of two in 1..={MAX_CLASS_GRID}",
                cfg.class_grid
            )));
        }
        if cfg.parked_slots > MAX_PARKED_SLOTS {
            return Err(Error::InvalidConfig(format!(
                "parked_slots {} is more than {MAX_PARKED_SLOTS}",
                cfg.parked_slots
            )));
        }
        if let crate::PageReturn::Delayed { delay, .. } = cfg.page_return
            && delay > crate::config::MAX_RETURN_DELAY
        {
            return Err(Error::InvalidConfig(format!(
                "page_return delay {delay:?} is longer than {:?}",
                crate::config::MAX_RETURN_DELAY
            )));
        }
        if cfg.memory_limit == Some(0) {
            return Err(Error::InvalidConfig(
                "memory limit of 0 bytes: use None for no limit".into(),
            ));
        }
        let lanes = cfg.placement.lanes();
        if let Placement::Log { lanes } = cfg.placement {
            if !(1..=MAX_LANES).contains(&lanes) {
                return Err(Error::InvalidConfig(format!(
                    "log placement: {lanes} lanes, not in 1..={MAX_LANES}"
                )));
            }
            if table.len() + lanes > 1 << CLASS_BITS {
                return Err(Error::InvalidConfig(format!(
                    "log placement: {} size classes and {lanes} lanes do not fit the handle's \
                     {CLASS_BITS}-bit class field",
                    table.len()
                )));
            }
            if !cfg.trim_pages || cfg.kernel_handle_header {
                return Err(Error::InvalidConfig(
                    "log placement needs trim_pages and no kernel_handle_header (segments \
                     commit pages as they fill; objects carry no handle)"
                        .into(),
                ));
            }
        }
        let tag = PoolTag::acquire()?;
        // Log placement keeps no class: only its lanes have cells.
        let physical = match cfg.placement {
            Placement::Classes => table.physical_indices().len(),
            Placement::Log { .. } => 0,
        };
        // As many shards as the config asks and the class field can name.
        let shards = match cfg.placement {
            Placement::Classes => cfg.class_shards.min((1 << CLASS_BITS) / table.len()).max(1),
            Placement::Log { .. } => 1,
        };
        let dense_base = if physical == 0 { table.len() } else { 0 };
        let first_lane_index = shards * table.len();
        let mut dense = vec![NO_CLASS; first_lane_index + lanes - dense_base].into_boxed_slice();
        let cells = Cells::new(physical, shards, lanes);
        for s in 0..shards {
            for (d, &i) in table.physical_indices()[..physical].iter().enumerate() {
                dense[s * table.len() + i] = (s * physical + d) as u16;
            }
        }
        for k in 0..lanes {
            dense[first_lane_index + k - dense_base] = (shards * physical + k) as u16;
        }
        let spacing = match cfg.placement {
            Placement::Classes => Spacing::new(&table, cfg.class_grid, cfg.page_size, shards),
            Placement::Log { .. } => None,
        };
        let pages = PageSource::for_pool(
            cfg.page_size,
            cfg.memory_limit,
            cfg.trim_pages,
            cfg.page_return,
            // Log placement only, a segment at least: see
            // `PoolConfig::prefault_bytes`.
            match cfg.placement {
                Placement::Log { .. } if cfg.prefault_bytes / cfg.page_size >= SEGMENT_PAGES => {
                    cfg.prefault_bytes / cfg.page_size
                }
                _ => 0,
            },
        );
        let more_pages = (1..shards)
            .chain(0..lanes)
            .map(|_| pages.sibling())
            .collect();
        // Empty in a pool without lock-free reads: nothing to find.
        let readers = (0..if cfg.lock_free_reads { dense.len() } else { 0 })
            .map(|_| std::sync::OnceLock::new())
            .collect();
        let magazines = (cfg.placement == Placement::Classes
            && cfg.free_mode == FreeMode::ClassLock
            && cfg.lock_free_reads
            && cfg.parked_slots > 0)
            .then(|| Arc::new(Magazines::new(shards * physical, cfg.parked_slots)));
        Ok(Pool {
            magazines,
            more_pages,
            shards,
            first_thread: std::sync::atomic::AtomicUsize::new(usize::MAX),
            physical,
            first_lane: shards * physical,
            cells,
            deferred,
            spacing,
            pool_lock: std::sync::RwLock::new(()),
            header: cfg.header(),
            pages,
            cfg,
            table,
            readers,
            dense,
            dense_base,
            compaction: Counters::default(),
            tag,
            owners: std::sync::OnceLock::new(),
            append_hints: (0..lanes).map(|_| CachePadded::default()).collect(),
            remote: (0..lanes)
                .map(|_| CachePadded(RemoteFrees::new()))
                .collect(),
        })
    }

    /// The configuration the pool was made with.
    pub fn config(&self) -> &PoolConfig {
        &self.cfg
    }

    /// The pool's size-class table.
    pub fn size_classes(&self) -> &SizeClassTable {
        &self.table
    }

    /// Class shards in use: [`PoolConfig::class_shards`], or fewer where
    /// the handle's class field cannot name that many copies of the
    /// classes; 1 with log placement.
    ///
    /// ```
    /// use zsmem::{Pool, PoolConfig};
    /// let cfg = |page_size| PoolConfig { page_size, class_shards: 16, ..PoolConfig::default() };
    /// assert_eq!(Pool::new(cfg(4096))?.class_shards(), 16);
    /// assert_eq!(Pool::new(cfg(65536))?.class_shards(), 1);
    /// # Ok::<(), zsmem::Error>(())
    /// ```
    pub fn class_shards(&self) -> usize {
        self.shards
    }

    /// The shard this thread allocates in: 0 for the pool's first
    /// allocating thread, then round-robin by thread number from it.
    fn my_shard(&self) -> usize {
        use std::sync::atomic::Ordering::Relaxed;
        if self.shards == 1 {
            return 0;
        }
        let n = thread_number();
        let first = match self.first_thread.load(Relaxed) {
            usize::MAX => self
                .first_thread
                .compare_exchange(usize::MAX, n, Relaxed, Relaxed)
                .map_or_else(|first| first, |_| n),
            first => first,
        };
        let k = n.wrapping_sub(first);
        // A mask where it can be (a division is tens of cycles, on every
        // allocation and every free with magazines).
        if self.shards.is_power_of_two() {
            k & (self.shards - 1)
        } else {
            k % self.shards
        }
    }

    /// The size class a class index (as carried in handles) names, of any
    /// shard; `None` for a lane or an index beyond them.
    fn class_info(&self, index: usize) -> Option<crate::size_class::ClassInfo> {
        (index < self.shards * self.table.len())
            .then(|| self.table.classes()[index % self.table.len()])
    }

    /// Largest object the pool accepts (its page size).
    pub fn max_object_size(&self) -> usize {
        self.cfg.page_size
    }

    /// Objects of this many bytes or more are stored one per page. With the
    /// kernel's handle header this is the kernel's `huge_class_size`.
    /// With log placement no object takes a page of its own: this is the
    /// page size.
    pub fn huge_class_size(&self) -> usize {
        match self.cfg.placement {
            Placement::Classes => self.table.huge_threshold(self.header),
            Placement::Log { .. } => self.cfg.page_size,
        }
    }

    /// The bytes an object of `len` bytes (1..=page size; a longer one is
    /// taken as a page) takes in the pool: its size class's slot (the
    /// in-object handle included in the kernel's configuration), or with
    /// log placement `len` rounded up to the lane's unit. What a smaller
    /// object saves.
    pub fn placed_size(&self, len: usize) -> usize {
        // Taken as at most a page: a length near usize::MAX overflowed
        // the rounding (a panic in a debug build, 0 in a release one).
        let len = len.min(self.cfg.page_size);
        match self.cfg.placement {
            Placement::Classes => {
                self.table
                    .physical_for((len + self.header).min(self.cfg.page_size))
                    .size
            }
            Placement::Log { .. } => Lane::placed_len(len, self.cfg.page_size),
        }
    }

    fn check_len(&self, len: usize) -> Result<()> {
        if len == 0 {
            return Err(Error::ZeroLength);
        }
        if len > self.cfg.page_size {
            return Err(Error::TooLarge {
                len,
                max: self.cfg.page_size,
            });
        }
        Ok(())
    }

    /// Allocate an object of `len` bytes in the class its size (and, with
    /// adaptive spacing, its class's load) gives, writing `data` if given.
    fn allocate(&self, len: usize, data: Option<&[u8]>) -> Result<Handle> {
        self.check_len(len)?;
        if let Placement::Log { .. } = self.cfg.placement {
            let alloc = || self.in_my_lane(|lane, src| lane.alloc(len, data, src));
            return self
                .at_limit_drain_and_retry(alloc)
                .map(|h| h.tagged(self.tag.get()));
        }
        let shard = self.my_shard();
        let logical = self.table.index_for(len + self.header);
        let own = self.table.classes()[logical].physical;
        let placed = self
            .spacing
            .as_ref()
            .map_or(own, |s| s.choose(logical, shard));
        let index = shard * self.table.len() + placed;
        let d = usize::from(self.dense[index - self.dense_base]);
        // A slot of this thread's magazine, without the class lock: it is
        // counted as live already (here and in the spacing).
        if let Some(m) = &self.magazines
            && let Some(p) = self.readers[index - self.dense_base].get()
            && let Some(h) = m.alloc(d, index, p, self.magazine_key(logical), len, data)
        {
            return Ok(h.tagged(self.tag.get()));
        }
        let alloc = || {
            let mut cell = self.cells.get_or_make(d).lock.write();
            let space = cell.get_or_insert_with(|| Box::new(self.make_space(d, index)));
            let src = self.source(d);
            if let (Some(m), Space::Class(c)) = (&self.magazines, &mut **space) {
                // Exited threads' parked slots: taken back here.
                for (slot, generation) in m.orphans_of(d) {
                    c.reclaim(slot, Some(generation), src);
                }
            }
            let h = space.alloc(index, len, data, src);
            self.uncount_reclaimed(d, index, space);
            let h = h?;
            // Counted under the class's lock (`Spacing::counted`).
            if let Some(s) = &self.spacing {
                s.counted(logical, shard, placed, 1);
            }
            Ok(h)
        };
        self.at_limit_drain_and_retry(alloc)
            .map(|h| h.tagged(self.tag.get()))
    }

    /// Slots class `d` (index `index`) took back from magazines since it
    /// was last asked: their objects were still counted as live, in the
    /// class and the spacing; uncount them there and count them in the
    /// magazines' ledger (which had counted them freed). The caller holds
    /// the class's lock.
    fn uncount_reclaimed(&self, d: usize, index: usize, space: &mut Space) {
        let (Some(m), Space::Class(c)) = (&self.magazines, space) else {
            return;
        };
        let Some(lens) = c.take_reclaimed() else {
            return;
        };
        let (mut objects, mut bytes) = (0, 0);
        for len in lens {
            self.freed(index, len);
            objects += 1;
            bytes += len as i64;
        }
        m.reclaimed(d, objects, bytes);
    }

    /// An object of `len` bytes was freed from class index `index`: its
    /// shard has one live object of its size fewer (adaptive spacing).
    /// The caller holds the class's lock (`Spacing::counted`).
    fn freed(&self, index: usize, len: usize) {
        if let Some(s) = &self.spacing {
            let logical = self.table.index_for(len + self.header);
            let (shard, physical) = (index / self.table.len(), index % self.table.len());
            s.counted(logical, shard, physical, -1);
        }
    }

    /// Position in `classes` of the class a handle names, after its tag is
    /// found to be this pool's (the first check of every use of a handle).
    fn dense_class(&self, h: Handle) -> Result<usize> {
        h.check_pool(self.tag.get())?;
        self.dense_of(h.class())
            .ok_or_else(|| h.fault(HandleFault::UnknownClass))
    }

    /// The length of dying `h`'s object (a deferred free pending), read
    /// from its class's or lane's directory.
    fn dying_len(&self, h: Handle) -> Option<usize> {
        let d = self.dense_of(h.class())?;
        self.cells.get(d)?.directory.get()?.dying_len(h)
    }

    /// Position in `classes` of class or lane `index`, if the pool keeps it.
    fn dense_of(&self, index: usize) -> Option<usize> {
        let d = *self.dense.get(index.checked_sub(self.dense_base)?)?;
        (d != NO_CLASS).then_some(usize::from(d))
    }

    /// The state of class or lane `d` (index `index` in handles), new;
    /// called once, under the cell's lock.
    fn make_space(&self, d: usize, index: usize) -> Space {
        let info = self.class_info(index);
        let publish = self.cfg.lock_free_reads;
        let directory = self.make_directory(d, publish);
        let mut space = match info {
            Some(info) => {
                let mut class = Class::new(
                    info,
                    self.cfg.page_size,
                    self.cfg.trim_pages,
                    directory,
                    publish,
                    Writes::racing(self.cfg.lock_free_reads),
                    self.cfg.parked_slots,
                );
                if self.magazines.is_some() && class.published().is_some() {
                    class.use_magazines();
                }
                Space::Class(class)
            }
            None => {
                let lane = Lane::new(
                    index,
                    index - self.shards * self.table.len(),
                    self.cfg.page_size,
                    directory,
                );
                Space::Lane(if publish { lane.publishing() } else { lane })
            }
        };
        let first = self.tag.first_generation();
        match &mut space {
            Space::Class(c) => c.start_generations_at(first),
            Space::Lane(l) => l.start_generations_at(first),
        }
        let published = match &space {
            Space::Class(c) => c.published(),
            Space::Lane(l) => l.published(),
        };
        if let (Some(p), Some(r)) = (published, self.readers.get(index - self.dense_base)) {
            // Made under the cell's lock, once: nothing set it before.
            let _ = r.set(p.clone());
        }
        space
    }

    /// The handle directory of class or lane `d`, made now (with the
    /// class): with deferred free, one its frees mark entries through;
    /// else, if the class publishes for lock-free reads, one they find
    /// entries through; else none (its handle chunks are then given back
    /// as they empty).
    fn make_directory(&self, d: usize, publish: bool) -> Option<Arc<Directory>> {
        let directory = if self.deferred.is_some() {
            Directory::new(self.tag.get())
        } else if publish {
            Directory::for_reads(self.tag.get())
        } else {
            return None;
        };
        let cell = self.cells.get(d)?;
        Some(cell.directory.get_or_init(|| Arc::new(directory)).clone())
    }

    /// The handle's class, locked alone (for changes); a class never used
    /// holds no slot a handle could name.
    fn lock_class(&self, h: Handle) -> Result<ClassWrite<'_>> {
        self.lock_dense(self.dense_class(h)?, h)
    }

    /// Class `d` (found from `h`), locked alone.
    fn lock_dense(&self, d: usize, h: Handle) -> Result<ClassWrite<'_>> {
        let fault = || h.fault(HandleFault::UnknownSlot);
        let cell = self.cells.get(d).ok_or_else(fault)?.lock.write();
        if cell.is_none() {
            return Err(h.fault(HandleFault::UnknownSlot));
        }
        Ok(ClassWrite(cell))
    }

    /// The handle's class, locked shared with other readers.
    fn read_class(&self, h: Handle) -> Result<ClassRead<'_>> {
        let cell = self
            .cells
            .get(self.dense_class(h)?)
            .ok_or_else(|| h.fault(HandleFault::UnknownSlot))?;
        lock_read(cell, h)
    }

    /// Allocate an object of `len` bytes (1..=page size). Its bytes are
    /// not cleared: until written they may be a freed object's old bytes
    /// (as `malloc`'s are); use [`Pool::store`] to allocate and write at
    /// once, and do not hand an unwritten object to someone who must not
    /// see earlier contents.
    pub fn alloc(&self, len: usize) -> Result<Handle> {
        self.allocate(len, None)
    }

    /// Allocate an object holding a copy of `data`, under one lock
    /// acquisition (what zram does per page).
    pub fn store(&self, data: &[u8]) -> Result<Handle> {
        self.allocate(data.len(), Some(data))
    }

    /// Refused at the memory limit with deferred frees pending: their
    /// memory is the pool's to reuse, so drain them and try once more
    /// (a store must not fail while the pool holds nothing live).
    fn at_limit_drain_and_retry(&self, alloc: impl Fn() -> Result<Handle>) -> Result<Handle> {
        match alloc() {
            Err(Error::MemoryLimit { .. }) if self.deferred.is_some() => {
                self.flush();
                alloc()
            }
            r => r,
        }
    }

    /// Write `data` to the start of the object.
    pub fn write(&self, h: Handle, data: &[u8]) -> Result<()> {
        self.write_at(h, 0, data)
    }

    /// Write `data` at `offset` in the object; the write must fit.
    pub fn write_at(&self, h: Handle, offset: usize, data: &[u8]) -> Result<()> {
        self.lock_class(h)?.write(h, offset, data)
    }

    /// Copy the object into `buf`, which must be at least as long; returns
    /// the object's length. With [`PoolConfig::lock_free_reads`] (the
    /// default), the object is copied without taking any lock (a copy that
    /// a move or a free raced is refused and made again, at most twice,
    /// then under the lock).
    pub fn read(&self, h: Handle, buf: &mut [u8]) -> Result<usize> {
        // SAFETY: `read_uninit` writes only initialised bytes, so `buf`
        // stays initialised.
        self.read_uninit(h, unsafe {
            &mut *(std::ptr::from_mut(buf) as *mut [MaybeUninit<u8>])
        })
    }

    /// [`Pool::read`] into a buffer that need not be initialised (a C
    /// caller's, or a `Vec`'s spare capacity): its first bytes, as many as
    /// the returned length, hold the object afterwards; the rest is as it
    /// was. On error `buf` holds no object's bytes: it is as it was, except
    /// where a free raced a lock-free copy, which then leaves zeros over
    /// the bytes it had copied (at most the object's length).
    pub fn read_uninit(&self, h: Handle, buf: &mut [MaybeUninit<u8>]) -> Result<usize> {
        // Without the lock if the class publishes for that and the copy
        // checks out (`optimistic.rs`); else under it.
        let mut written = 0;
        if let Some(p) = self.published(h) {
            match p.read(h, buf) {
                Ok(len) => return Ok(len),
                Err(w) => written = w,
            }
        }
        let cell = self
            .cells
            .get(self.dense_class(h)?)
            .ok_or_else(|| h.fault(HandleFault::UnknownSlot))?;
        let read = Self::read_locked(cell, h, buf);
        if read.is_err() && written > 0 {
            // A refused copy may hold a freed object's bytes, or its
            // successor's: none of them goes back with the error.
            buf[..written].fill(MaybeUninit::new(0));
        }
        read
    }

    /// What `h`'s class publishes for lock-free reads, if `h` is this
    /// pool's and its class publishes.
    #[inline]
    fn published(&self, h: Handle) -> Option<&Published> {
        h.check_pool(self.tag.get()).ok()?;
        self.readers
            .get(h.class().wrapping_sub(self.dense_base))?
            .get()
            .map(|p| &**p)
    }

    /// The locked half of [`Pool::read_uninit`].
    fn read_locked(
        cell: &Cell<Option<Box<Space>>>,
        h: Handle,
        buf: &mut [MaybeUninit<u8>],
    ) -> Result<usize> {
        let class = lock_read(cell, h)?;
        if let Space::Class(c) = &*class
            && c.magazines()
        {
            return c.load_live(h, buf);
        }
        let loc = class.resolve(h)?;
        if buf.len() < loc.len {
            return Err(Error::BufferTooSmall {
                len: buf.len(),
                object_len: loc.len,
            });
        }
        let bytes = class.bytes(loc);
        // SAFETY: `buf` has room for `bytes`, and is no pool memory (a
        // caller never holds a reference into a zspage).
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.as_mut_ptr().cast(), bytes.len())
        };
        Ok(loc.len)
    }

    /// A copy of the object: one copy, by [`Pool::read`]'s path (without
    /// the lock where the pool reads so), into a vector of the object's
    /// length (its capacity may be up to the slot size of the object's
    /// class).
    pub fn read_vec(&self, h: Handle) -> Result<Vec<u8>> {
        // Room for any object of the handle's class, known without a
        // look-up of the handle (under the class lock); a lane's objects
        // have any length up to a page: that one is looked up.
        let room = match self.class_info(h.class()) {
            Some(class) => class.size,
            None => self.object_len(h)?,
        };
        let mut v = Vec::with_capacity(room);
        let n = self.read_uninit(h, v.spare_capacity_mut())?;
        // SAFETY: `read_uninit` initialised the first `n` bytes.
        unsafe { v.set_len(n) };
        Ok(v)
    }

    /// Call `f` with the object's bytes in place, without copying (the
    /// kernel's `zs_map_object` for reading). The object's class is locked
    /// while `f` runs.
    ///
    /// **`f` must not call back into this pool: that deadlocks.** The class
    /// lock is not re-entrant, so a call from `f` that needs it (any
    /// operation on an object of the same class, a store routed to it,
    /// `flush`, `compact`, `trim`, `stats`, `class_stats`,
    /// `check_invariants`) blocks forever; it is not detected (see
    /// docs/DESIGN.md, "Locks and their order"). Copy the bytes out with
    /// [`read`](Pool::read) when the work needs the pool.
    ///
    /// In a pool whose threads park freed slots in magazines (the default
    /// configuration, see docs/DESIGN.md, "The object API's allocation
    /// path"), `f` is given a copy made under the lock: a racing free of
    /// the same handle could let another thread write the object's slot
    /// without the lock, which a reference into it must not see (such a
    /// free makes this call the freed handle's error).
    pub fn with_object<R>(&self, h: Handle, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        let class = self.read_class(h)?;
        if let Space::Class(c) = &*class
            && c.magazines()
        {
            let mut copy = Vec::with_capacity(c.resolve(h)?.len);
            let n = c.load_live(h, copy.spare_capacity_mut())?;
            // SAFETY: `load_live` initialised the first `n` bytes.
            unsafe { copy.set_len(n) };
            return Ok(f(&copy));
        }
        Ok(f(class.bytes(class.resolve(h)?)))
    }

    /// The object's length in bytes.
    pub fn object_len(&self, h: Handle) -> Result<usize> {
        Ok(self.read_class(h)?.resolve(h)?.len)
    }

    /// Log placement: the objects of [`Pool::store_owned`] are `owners`'
    /// (a page store's slots hold their places); cleaning asks them to
    /// move. Set once, before the first `store_owned`.
    pub(crate) fn set_owners(&self, owners: Arc<dyn Owners>) {
        let set = self.owners.set(owners);
        debug_assert!(set.is_ok(), "owners are set once");
    }

    fn owners(&self) -> Option<&dyn Owners> {
        self.owners.get().map(|o| &**o)
    }

    /// Log placement: store `data` for `owner` (a page store's slot), who
    /// keeps the place returned instead of a handle (no handle table entry)
    /// and lets cleaning move the object through [`Owners`].
    pub(crate) fn store_owned(&self, owner: u32, data: &[u8]) -> Result<u64> {
        self.check_len(data.len())?;
        let Placement::Log { lanes } = self.cfg.placement else {
            return Err(Error::InvalidConfig(
                "owned objects need log placement".into(),
            ));
        };
        debug_assert!(self.owners.get().is_some() && lanes > 0);
        let k = self.my_lane();
        let store = || {
            self.in_lane(k, |lane, src| {
                let place = lane.alloc_owned(owner, data, src)?;
                self.append_hints[k]
                    .store(lane.append_point(), std::sync::atomic::Ordering::Relaxed);
                Ok(place)
            })
        };
        match store() {
            // Frees queued for other lanes (`remote.rs`) may free enough.
            Err(Error::MemoryLimit { .. }) if self.remote.iter().any(|q| q.queued() > 0) => {
                self.drain_all_remote();
                store()
            }
            r => r,
        }
    }

    /// Log placement: prefetch, to be written, the `len` bytes where this
    /// thread's lane appends next, so that the copy of an object stored
    /// soon after (a page store calls this before it compresses) finds
    /// its lines in the cache instead of waiting for them under the lane's
    /// lock. A hint from the lane's last append: when the next object goes
    /// into a free extent instead, nothing is gained and nothing lost.
    pub(crate) fn prefetch_append(&self, len: usize) {
        let lanes = self.cfg.placement.lanes();
        if lanes == 0 {
            return;
        }
        let at = self.append_hints[self.my_lane()].load(std::sync::atomic::Ordering::Relaxed);
        if at != 0 {
            Lane::prefetch_for_write(at, len);
        }
    }

    /// Run `f` on this thread's lane (made at its first use), locked alone,
    /// with the lane's page source.
    fn in_my_lane<R>(&self, f: impl FnOnce(&mut Lane, &PageSource) -> Result<R>) -> Result<R> {
        self.in_lane(self.my_lane(), f)
    }

    /// Run `f` on lane `k` (made at its first use), locked alone, with the
    /// lane's page source.
    fn in_lane<R>(
        &self,
        k: usize,
        f: impl FnOnce(&mut Lane, &PageSource) -> Result<R>,
    ) -> Result<R> {
        let d = self.first_lane + k;
        let mut cell = self.cells.get_or_make(d).lock.write();
        let space = cell.get_or_insert_with(|| Box::new(self.make_space(d, self.table.len() + k)));
        let Space::Lane(lane) = &mut **space else {
            unreachable!("a lane's cell holds a lane");
        };
        self.drain_remote(k, lane, self.source(d));
        f(lane, self.source(d))
    }

    /// Position in `classes` of the lane an owned object's place names.
    fn owned_lane(&self, place: u64) -> Result<usize> {
        Lane::lane_of(place)
            .filter(|&k| k < self.cfg.placement.lanes())
            .and_then(|k| self.dense_of(self.table.len() + k))
            .filter(|&d| self.cells.get(d).is_some())
            .ok_or_else(|| no_lane(place))
    }

    /// The cell of lane `d` (from [`Pool::owned_lane`]).
    fn lane_cell(&self, d: usize) -> Result<&Cell<Option<Box<Space>>>> {
        self.cells
            .get(d)
            .ok_or_else(|| Error::InvariantViolated(format!("no lane at {d}")))
    }

    /// Call `f` with the bytes of the owned object of `len` bytes at
    /// `place`, its lane locked shared.
    pub(crate) fn with_owned<R>(
        &self,
        place: u64,
        len: usize,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R> {
        let cell = self.lane_cell(self.owned_lane(place)?)?.lock.read();
        let Some(Space::Lane(lane)) = cell.as_deref() else {
            return Err(no_lane(place));
        };
        let loc = lane.resolve_owned(place, len)?;
        Ok(f(lane.bytes(loc)))
    }

    /// Free the owned object of `len` bytes at `place`. A thread whose
    /// stores go to another lane queues the free if the object's lane is
    /// locked (`remote.rs`): it is applied by the lane's next writer, or
    /// here, waiting for the lock, once the queue is long.
    pub(crate) fn free_owned(&self, place: u64, len: usize) -> Result<()> {
        let d = self.owned_lane(place)?;
        let k = d - self.first_lane;
        let src = self.source(d);
        let lock = self.lane_cell(d)?;
        let mine = self.my_lane() == k;
        let (mut cell, queued) = match lock.lock.try_write() {
            Some(cell) => (cell, false),
            None if mine => (lock.lock.write(), false),
            None => {
                if self.remote[k].push(place, len) <= MAX_QUEUED {
                    return Ok(());
                }
                (lock.lock.write(), true)
            }
        };
        let Some(Space::Lane(lane)) = cell.as_deref_mut() else {
            return Err(no_lane(place));
        };
        self.drain_remote(k, lane, src);
        if !queued {
            lane.free_owned(place, len, src)?;
        }
        // Another lane's thread cleans only a lane overdue: its own
        // threads' stores would wait for the cleaning.
        if let Some((min_freeable_pages, max_moves)) = self.auto_policy() {
            let due = move |l: &Lane| {
                if mine {
                    l.auto_clean_due(min_freeable_pages)
                } else {
                    l.auto_clean_overdue(min_freeable_pages)
                }
            };
            if due(lane) {
                drop(self.clean_lane(lock, cell, max_moves, &due, src));
            }
        }
        Ok(())
    }

    /// Apply lane `k`'s queued frees (`remote.rs`); the caller holds the
    /// lane's write lock. The page store queued only frees of its own
    /// objects at their places, so none fails; one that did would be a
    /// fault of the store's, left as it is (checked in debug builds).
    fn drain_remote(&self, k: usize, lane: &mut Lane, src: &PageSource) {
        let Some(q) = self.remote.get(k) else { return };
        for (place, len) in q.take() {
            let freed = lane.free_owned(place, len, src);
            debug_assert!(freed.is_ok(), "a queued free: {freed:?}");
        }
    }

    /// The lane this thread's stores go to (log placement).
    pub(crate) fn my_lane(&self) -> usize {
        thread_number() % self.cfg.placement.lanes()
    }

    /// Lane `k`'s lock, held until the guard goes (tests of the queued
    /// frees), and the frees queued for it now.
    #[cfg(test)]
    pub(crate) fn hold_lane(&self, k: usize) -> (impl Sized + '_, &RemoteFrees) {
        let d = self.first_lane + k;
        (self.cells.get_or_make(d).lock.write(), &self.remote[k])
    }

    /// Apply every lane's queued frees, each under its lane's lock: before
    /// a figure, a check, `flush`, `compact` or `trim`, so that none counts
    /// a freed object.
    fn drain_all_remote(&self) {
        for (k, q) in self.remote.iter().enumerate() {
            if q.queued() == 0 {
                continue;
            }
            let d = self.first_lane + k;
            let Some(cell) = self.cells.get(d) else {
                continue;
            };
            let mut cell = cell.lock.write();
            if let Some(Space::Lane(lane)) = cell.as_deref_mut() {
                self.drain_remote(k, lane, self.source(d));
            }
        }
    }

    /// Clean the lane in `cell` (`lock` held as `cell`) as its policy or
    /// [`Pool::compact`] asks, running each plan's scan of the owners with
    /// the lock let go (see `lane/clean.rs`: the scan looks at every slot
    /// of the store); returns the lock, held again, and what moved.
    fn clean_lane<'a>(
        &self,
        lock: &'a Cell<Option<Box<Space>>>,
        mut cell: WriteGuard<'a, Option<Box<Space>>>,
        max_moves: usize,
        due: &dyn Fn(&Lane) -> bool,
        src: &PageSource,
    ) -> (WriteGuard<'a, Option<Box<Space>>>, Migration) {
        let mut total = Migration::default();
        while let Some(Space::Lane(lane)) = cell.as_deref_mut()
            && total.objects < max_moves
            && due(lane)
        {
            let owners = self.owners();
            let (m, scan) = lane.clean_step(
                max_moves - total.objects,
                due,
                owners,
                src,
                &self.compaction,
            );
            total.add(m);
            let Some(scan) = scan else {
                break;
            };
            drop(cell);
            let lists = owners.map(|o| scan.run(o)).unwrap_or_default();
            cell = lock.lock.write();
            if let Some(Space::Lane(lane)) = cell.as_deref_mut() {
                lane.end_plan(scan, lists);
            }
        }
        (cell, total)
    }

    /// Free the object. The handle is dead at once: any later use of it is
    /// an [`Error::InvalidHandle`]. With [`FreeMode::Deferred`] its memory
    /// is given back when its batch is drained (or at [`Pool::flush`]).
    pub fn free(&self, h: Handle) -> Result<()> {
        match (&self.deferred, self.cfg.free_mode) {
            (Some(shards), _) => self.free_deferred(shards, h),
            (None, FreeMode::PoolLock) => {
                let _pool = self.pool_lock.read().unwrap_or_else(|e| e.into_inner());
                self.free_locked(h, None)
            }
            (None, _) => match &self.magazines {
                Some(m) => match self.free_to_magazine(m, h)? {
                    Freed::Parked => Ok(()),
                    Freed::Full => self.free_locked(h, Some(m)),
                    Freed::Locked => self.free_locked(h, None),
                },
                None => self.free_locked(h, None),
            },
        }
    }

    /// Park `h`'s slot in this thread's magazine, without the class lock
    /// (`magazine.rs`); [`Freed::Locked`] when the locked free must free it
    /// (a class without magazines, a handle of another shard's class, a
    /// zspage holding few slots, the slot's last generation).
    #[inline]
    fn free_to_magazine(&self, m: &Arc<Magazines>, h: Handle) -> Result<Freed> {
        let d = self.dense_class(h)?;
        let index = h.class();
        let Some(p) = self.readers[index - self.dense_base].get() else {
            return Ok(Freed::Locked);
        };
        if self.shards > 1 && index / self.table.len() != self.my_shard() {
            // This thread never allocates there: the slot would wait.
            return Ok(Freed::Locked);
        }
        m.free(d, p, h, |len| {
            self.magazine_key(self.table.index_for(len + self.header))
        })
    }

    /// What a magazine's slot must match for an allocation to take it: the
    /// logical class of the object freed into it, where the spacing counts
    /// live objects per logical class (so an allocation taking the slot
    /// changes no count); else nothing.
    #[inline]
    fn magazine_key(&self, logical: usize) -> usize {
        if self.spacing.is_some() { logical } else { 0 }
    }

    /// Free `h` under its class's lock; with `full`, this thread's full
    /// magazine of the class gives its oldest slots back in the same lock
    /// hold (a slot another lock holder took back meanwhile is skipped).
    fn free_locked(&self, h: Handle, full: Option<&Arc<Magazines>>) -> Result<()> {
        let d = self.dense_class(h)?;
        let src = self.source(d);
        let mut class = self.lock_dense(d, h)?;
        if let (Some(m), Space::Class(c)) = (full, &mut *class) {
            m.give_back(d, |slot, generation| {
                c.reclaim(slot, Some(generation), src);
            });
        }
        let freed = class.free(h, src);
        if let Ok(len) = freed {
            self.freed(h.class(), len);
            self.auto_compact(&mut class, src);
        }
        self.uncount_reclaimed(d, h.class(), &mut class);
        freed.map(drop)
    }

    /// The page source of class or lane `d`: shard 0's classes share
    /// `pages`, every other shard and every lane has its own.
    fn source(&self, d: usize) -> &PageSource {
        let other = match d.checked_sub(self.first_lane) {
            Some(lane) => Some(lane),
            None => (d / self.physical).checked_sub(1),
        };
        other
            .and_then(|k| self.more_pages.get(k))
            .unwrap_or(&self.pages)
    }

    /// Every page source: the classes' and the lanes'.
    fn sources(&self) -> impl Iterator<Item = &PageSource> {
        std::iter::once(&*self.pages).chain(self.more_pages.iter().map(|p| &**p))
    }

    /// The automatic policy's `(min_freeable_pages, max_moves)`, if on.
    fn auto_policy(&self) -> Option<(usize, usize)> {
        match self.cfg.compaction {
            CompactionPolicy::Auto {
                min_freeable_pages,
                max_moves,
            } => Some((min_freeable_pages, max_moves)),
            _ => None,
        }
    }

    fn auto_compact(&self, space: &mut Space, src: &PageSource) {
        let Some((min_freeable_pages, max_moves)) = self.auto_policy() else {
            return;
        };
        match space {
            Space::Class(class) => {
                if class.compaction_due(min_freeable_pages) {
                    compact::step(class, max_moves, src, &self.compaction);
                }
            }
            Space::Lane(lane) => {
                if lane.auto_clean_due(min_freeable_pages) {
                    let due = |l: &Lane| l.auto_clean_due(min_freeable_pages);
                    lane.clean(max_moves, due, self.owners(), src, &self.compaction);
                }
            }
        }
    }

    fn free_deferred(&self, shards: &Shards, h: Handle) -> Result<()> {
        let d = self.dense_class(h)?;
        self.cells
            .get(d)
            .and_then(|c| c.directory.get())
            .ok_or_else(|| h.fault(HandleFault::UnknownSlot))?
            .mark_dying(h)?;
        let mut batch = Vec::new();
        let home = shards.home();
        let runs = match shards.push(home, h.to_raw(), &mut batch) {
            Push::Buffered => 0,
            Push::Drain => {
                let n = batch.len();
                let runs = self.drain(&mut batch);
                shards.freed(home, n);
                runs
            }
            Push::Closed => self.drain(&mut [h.to_raw()]),
        };
        if runs > 0 {
            shards.count_runs(home, runs);
        }
        Ok(())
    }

    /// Free a batch of handles marked dying: sorted by class, each class's
    /// lock taken once per run. Returns the runs, for the caller to count
    /// in its deferred shard (a counter shared by every drain would be a
    /// line both cores write on every few frees).
    fn drain(&self, batch: &mut [u64]) -> u64 {
        batch.sort_unstable_by_key(|&raw| Handle::from_raw(raw).class());
        let mut runs = 0;
        for run in
            batch.chunk_by(|a, b| Handle::from_raw(*a).class() == Handle::from_raw(*b).class())
        {
            let first = Handle::from_raw(run[0]);
            let Ok(d) = self.dense_class(first) else {
                continue;
            };
            let src = self.source(d);
            let Some(cell) = self.cells.get(d) else {
                continue;
            };
            let mut cell = cell.lock.write();
            let Some(class) = cell.as_deref_mut() else {
                continue;
            };
            for &raw in run {
                // Marked by `free_deferred`, which only this drain undoes:
                // cannot fail.
                let freed = class.free_dying(Handle::from_raw(raw), src);
                debug_assert!(freed.is_ok(), "{freed:?}");
                if let Ok(len) = freed {
                    self.freed(first.class(), len);
                }
            }
            runs += 1;
            self.auto_compact(class, src);
        }
        runs
    }

    /// Free every deferred free now, and take back every slot parked in a
    /// thread's magazine (no-op in pools with neither). On return, every
    /// free that returned before `flush` was called has given its memory
    /// back.
    pub fn flush(&self) {
        self.drain_all_remote();
        self.reclaim_magazines();
        if let Some(shards) = &self.deferred {
            let mut batch = Vec::new();
            for s in 0..shards.len() {
                shards.close(s, &mut batch);
            }
            let runs = self.drain(&mut batch);
            shards.count_runs(0, runs);
            // Handles other threads took from the shards before they were
            // closed: freed before this returns (they returned 21,026
            // times in a review's 3-second test with one object left).
            shards.wait_for_pushers();
        }
    }

    /// Compact every class as far as it goes (the kernel's `zs_compact`):
    /// returns the pages given back (net of pages committed in destination
    /// zspages when trimming). The class lock is released after every
    /// source zspage's worth of moves (8 pages' worth when trimming), so
    /// readers and writers wait for at most that.
    pub fn compact(&self) -> usize {
        self.drain_all_remote();
        let _pool = (self.cfg.free_mode == FreeMode::PoolLock)
            .then(|| self.pool_lock.write().unwrap_or_else(|e| e.into_inner()));
        let (mut freed, mut committed) = (0, 0);
        for (d, class) in self.cells.iter() {
            let src = self.source(d);
            let mut first = true;
            loop {
                let mut cell = class.lock.write();
                if let Some(Space::Class(c)) = cell.as_deref_mut()
                    && std::mem::take(&mut first)
                    && c.magazines()
                {
                    // Every slot parked in a magazine is a free slot to
                    // compaction: take them all back first.
                    c.reclaim_all(src);
                    let index = c.info.index + (d / self.physical) * self.table.len();
                    if let Some(space) = cell.as_deref_mut() {
                        self.uncount_reclaimed(d, index, space);
                    }
                }
                let m = if let Some(Space::Lane(_)) = cell.as_deref() {
                    // Its plans' scans run with the lock let go.
                    let due = |l: &Lane| l.compaction_due(1);
                    self.clean_lane(class, cell, SEGMENT_PAGES * 4, &due, src).1
                } else {
                    let Some(Space::Class(c)) = cell.as_deref_mut() else {
                        break;
                    };
                    if !c.compaction_due(1) {
                        break;
                    }
                    let budget = compact::step_budget(c);
                    let m = compact::step(c, budget, src, &self.compaction);
                    let index = c.info.index + (d / self.physical) * self.table.len();
                    if let Some(space) = cell.as_deref_mut() {
                        self.uncount_reclaimed(d, index, space);
                    }
                    m
                };
                freed += m.pages_freed;
                committed += m.pages_committed;
                if m.objects == 0 && m.pages_freed == 0 {
                    break;
                }
            }
        }
        freed.saturating_sub(committed)
    }

    /// What compaction has done so far.
    pub fn compaction_stats(&self) -> CompactionStats {
        self.compaction.snapshot()
    }

    /// Take back every slot parked in a thread's magazine, class by class
    /// under its lock (a zspage only they kept goes back to the OS).
    fn reclaim_magazines(&self) {
        let Some(m) = &self.magazines else {
            return;
        };
        // Only classes with slots parked (by the magazines' counts; a free
        // that returned before this call is in them), so a `flush` of a
        // pool with none scans nothing.
        let totals = m.totals();
        for (d, class) in self.cells.iter() {
            if totals.get(d).is_none_or(|t| t.2 == 0) && m.orphaned() == 0 {
                continue;
            }
            let mut cell = class.lock.write();
            if let Some(Space::Class(c)) = cell.as_deref_mut()
                && c.magazines()
            {
                if let Some(m) = &self.magazines {
                    // Off the orphan list too (they are taken back below).
                    m.orphans_of(d);
                }
                c.reclaim_all(self.source(d));
                let index = c.info.index + (d / self.physical) * self.table.len();
                if let Some(space) = cell.as_deref_mut() {
                    self.uncount_reclaimed(d, index, space);
                }
            }
        }
    }

    /// Return the pages of recently freed zspages, kept resident for quick
    /// reuse, to the OS as well.
    ///
    /// Slots parked in threads' magazines are taken back first (a zspage
    /// that only they kept goes back too): a thread's magazine may hold
    /// the slots of a zspage whose objects were all freed.
    pub fn trim(&self) {
        self.drain_all_remote();
        self.reclaim_magazines();
        for src in self.sources() {
            src.purge_cache();
        }
    }

    /// Per physical class statistics, smallest class first; a class's
    /// shards are summed (`freeable` is the sum of each shard's: compaction
    /// moves objects within a shard).
    pub fn class_stats(&self) -> Vec<ClassStats> {
        self.drain_all_remote();
        let totals = self.magazines.as_ref().map(|m| m.totals());
        self.table
            .physical_indices()
            .iter()
            .map(|&index| {
                let info = self.table.classes()[index];
                let mut st = ClassStats::unused(info);
                for shard in 0..self.shards {
                    let index = shard * self.table.len() + index;
                    // Log placement keeps no class.
                    let Some((d, c)) = self
                        .dense_of(index)
                        .and_then(|d| Some((d, self.cells.get(d)?)))
                    else {
                        continue;
                    };
                    let cell = c.lock.read();
                    let Some(Space::Class(c)) = cell.as_deref() else {
                        continue;
                    };
                    let (objects, bytes, parked) = Self::magazine_totals(&totals, d);
                    for (f, n) in st
                        .fullness
                        .iter_mut()
                        .zip(&c.group_counts()[1..=GROUP_FULL])
                    {
                        *f += n;
                    }
                    let obj_allocated = c.zspage_count() * info.objs_per_zspage;
                    let obj_used = c.objects().saturating_add_signed(objects as isize);
                    st.obj_allocated += obj_allocated;
                    st.obj_used += obj_used;
                    st.parked += c.parked_count() + parked;
                    st.pages_used += c.resident_pages();
                    st.freeable +=
                        (obj_allocated - obj_used) / info.objs_per_zspage * info.pages_per_zspage;
                    // Slots in magazines are free slots here too.
                    st.partial_bytes +=
                        (c.trimmable_bytes() as i64 - objects * info.size as i64).max(0) as usize;
                    st.bytes_stored = st
                        .bytes_stored
                        .wrapping_add(c.bytes_stored().wrapping_add_signed(bytes as isize));
                    st.metadata_bytes += std::mem::size_of::<Space>() + c.metadata_bytes();
                }
                st
            })
            .collect()
    }

    /// What threads' magazines add to class `d`'s own objects and bytes
    /// (its slots in magazines are free in every figure), and the slots
    /// they list (`totals` from `Magazines::totals`).
    fn magazine_totals(totals: &Option<Vec<(i64, i64, usize)>>, d: usize) -> (i64, i64, usize) {
        totals
            .as_ref()
            .and_then(|t| t.get(d).copied())
            .unwrap_or((0, 0, 0))
    }

    /// Pool totals. Classes are visited one at a time, so under concurrent
    /// use the totals are a sum of per-class snapshots.
    pub fn stats(&self) -> PoolStats {
        self.drain_all_remote();
        let mut s = PoolStats {
            page_size: self.cfg.page_size,
            pages_held: self.pages.held_pages(),
            max_pages_held: self.pages.max_held_pages(),
            cached_pages: self.sources().map(PageSource::cached_pages).sum(),
            objects: 0,
            bytes_stored: 0,
            huge_objects: 0,
            metadata_bytes: self.cells.metadata_bytes()
                + std::mem::size_of_val(&*self.dense)
                + std::mem::size_of_val(&*self.readers)
                + self.spacing.as_ref().map_or(0, Spacing::metadata_bytes),
            waste: Waste::default(),
            pages_compacted: self.compaction.snapshot().pages_compacted,
            reserved_bytes: self.sources().map(PageSource::reserved_bytes).sum(),
            pending_frees: 0,
            pending_free_bytes: 0,
            deferred_batches: self.deferred.as_ref().map_or(0, Shards::runs),
        };
        if let Some(shards) = &self.deferred {
            s.metadata_bytes += shards.metadata_bytes();
            s.pending_frees = shards.pending(|raw| {
                let h = Handle::from_raw(raw);
                s.pending_free_bytes += match self.class_info(h.class()) {
                    Some(c) => c.size,
                    // A lane's: the length its dying entry keeps, placed
                    // (counted as 0 before, whatever the objects held).
                    None => self
                        .dying_len(h)
                        .map_or(0, |len| Lane::placed_len(len, self.cfg.page_size)),
                };
            });
        }
        let totals = self.magazines.as_ref().map(|m| m.totals());
        if let Some(m) = &self.magazines {
            s.metadata_bytes += m.metadata_bytes();
        }
        for (d, c) in self.cells.iter() {
            let cell = c.lock.read();
            let c = match cell.as_deref() {
                None => continue,
                Some(Space::Class(c)) => c,
                Some(Space::Lane(l)) => {
                    s.objects += l.objects();
                    s.bytes_stored += l.bytes_stored();
                    s.metadata_bytes += std::mem::size_of::<Space>() + l.metadata_bytes();
                    let w = l.waste();
                    s.waste.rounding_bytes += w.rounding;
                    s.waste.partial_bytes += w.dead;
                    s.waste.tail_bytes += w.tail;
                    continue;
                }
            };
            let info = c.info;
            // Slots in magazines are free in every figure.
            let (more, more_bytes, _) = Self::magazine_totals(&totals, d);
            let objects = c.objects().saturating_add_signed(more as isize);
            let bytes = c.bytes_stored().wrapping_add_signed(more_bytes as isize);
            s.objects += objects;
            s.bytes_stored += bytes;
            // The class's state is a heap allocation of its own too.
            s.metadata_bytes += std::mem::size_of::<Space>() + c.metadata_bytes();
            if info.is_huge() {
                s.huge_objects += objects;
            }
            s.waste.rounding_bytes += (objects * info.size).saturating_sub(bytes);
            s.waste.partial_bytes += c.resident_slots().saturating_sub(objects) * info.size;
            s.waste.tail_bytes +=
                c.resident_pages() * self.cfg.page_size - c.resident_slots() * info.size;
        }
        s
    }

    /// Check every invariant of every class and of the page accounting.
    /// Meant for tests and debugging: it walks all metadata. Under
    /// concurrent use, run it while no other thread uses the pool.
    pub fn check_invariants(&self) -> Result<()> {
        self.drain_all_remote();
        let mut pages = 0;
        let totals = self.magazines.as_ref().map(|m| m.totals());
        let listed = match &self.magazines {
            Some(m) => Some(m.listed().map_err(Error::InvariantViolated)?),
            None => None,
        };
        for (d, c) in self.cells.iter() {
            let cell = c.lock.read();
            match cell.as_deref() {
                None => continue,
                Some(Space::Class(c)) => {
                    let (objects, bytes, _) = Self::magazine_totals(&totals, d);
                    let magazines = listed.as_ref().map(|l| crate::class::InMagazines {
                        listed: &l[d],
                        objects,
                        bytes,
                    });
                    c.check(c.info.index, magazines)
                        .map_err(Error::InvariantViolated)?;
                    pages += c.resident_pages();
                }
                Some(Space::Lane(l)) => {
                    l.check(self.owners()).map_err(Error::InvariantViolated)?;
                    pages += l.resident_pages();
                }
            }
        }
        let held = self.pages.held_pages();
        if pages != held {
            return Err(Error::InvariantViolated(format!(
                "zspages hold {pages} pages but the page source counts {held}"
            )));
        }
        Ok(())
    }
}

/// What a handle's class field names: a physical class, or with log
/// placement a lane. Both keep a handle table and give objects' bytes.
#[derive(Debug)]
enum Space {
    Class(Class),
    Lane(Lane),
}

impl Space {
    fn alloc(
        &mut self,
        index: usize,
        len: usize,
        data: Option<&[u8]>,
        src: &PageSource,
    ) -> Result<Handle> {
        match self {
            Space::Class(c) => c.alloc(index, len, data, src),
            Space::Lane(l) => l.alloc(len, data, src),
        }
    }

    fn resolve(&self, h: Handle) -> Result<Location> {
        match self {
            Space::Class(c) => c.resolve(h),
            Space::Lane(l) => l.resolve(h),
        }
    }

    fn bytes(&self, loc: Location) -> &[u8] {
        match self {
            Space::Class(c) => c.bytes(loc),
            Space::Lane(l) => l.bytes(loc),
        }
    }

    fn write(&mut self, h: Handle, offset: usize, data: &[u8]) -> Result<()> {
        match self {
            Space::Class(c) => c.write(h, offset, data),
            Space::Lane(l) => l.write(h, offset, data),
        }
    }

    fn free(&mut self, h: Handle, src: &PageSource) -> Result<usize> {
        match self {
            Space::Class(c) => c.free(h, src),
            Space::Lane(l) => l.free(h, src),
        }
    }

    fn free_dying(&mut self, h: Handle, src: &PageSource) -> Result<usize> {
        match self {
            Space::Class(c) => c.free_dying(h, src),
            Space::Lane(l) => l.free_dying(h, src),
        }
    }

    fn release_all(&mut self, src: &PageSource) {
        match self {
            Space::Class(c) => c.release_all(src),
            Space::Lane(l) => l.release_all(src),
        }
    }
}

/// The class or lane of `cell` (found from `h`), locked shared; a class
/// never used holds no slot a handle could name.
fn lock_read<'a>(cell: &'a Cell<Option<Box<Space>>>, h: Handle) -> Result<ClassRead<'a>> {
    let guard = cell.lock.read();
    if guard.is_none() {
        return Err(h.fault(HandleFault::UnknownSlot));
    }
    Ok(ClassRead(guard))
}

/// A place that names no lane: a page store's bug, never a client's input.
fn no_lane(place: u64) -> Error {
    Error::InvariantViolated(format!("no lane for place {place:#x}"))
}

/// This thread's number, handed out round-robin at its first allocation:
/// reduced by the lane count it is the lane the thread appends to, by the
/// shard count the class shard it allocates in, so threads spread over
/// both.
fn thread_number() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static LANE: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    LANE.with(|l| *l)
}

/// A class or lane that exists, locked alone.
struct ClassWrite<'a>(WriteGuard<'a, Option<Box<Space>>>);

/// A class or lane that exists, locked shared.
struct ClassRead<'a>(ReadGuard<'a, Option<Box<Space>>>);

impl std::ops::Deref for ClassWrite<'_> {
    type Target = Space;
    fn deref(&self) -> &Space {
        self.0.as_deref().expect("checked when locked")
    }
}

impl std::ops::DerefMut for ClassWrite<'_> {
    fn deref_mut(&mut self) -> &mut Space {
        self.0.as_deref_mut().expect("checked when locked")
    }
}

impl std::ops::Deref for ClassRead<'_> {
    type Target = Space;
    fn deref(&self) -> &Space {
        self.0.as_deref().expect("checked when locked")
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if let Some(m) = &self.magazines {
            m.close();
        }
        self.flush();
        // The regions are unmapped with the source: no pages to queue.
        for src in self.sources() {
            src.close();
        }
        for (d, c) in self.cells.iter() {
            if let Some(c) = c.lock.write().as_deref_mut() {
                c.release_all(self.source(d));
            }
        }
    }
}

/// The read protocol under loom: readers of one class share its lock, and
/// compaction, which takes it alone, never moves an object's bytes under a
/// reader (each read sees the object whole, before or after its move).
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::config::PageReturn;
    use crate::size_class::KERNEL_HANDLE_SIZE;
    use loom::sync::Arc;

    #[test]
    fn loom_readers_share_a_class_while_compaction_moves_their_object() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(|| {
            let pool = Arc::new(
                Pool::new(PoolConfig {
                    page_return: PageReturn::Immediate,
                    ..PoolConfig::kernel()
                })
                .unwrap(),
            );
            let len = 3000;
            let objs = pool
                .size_classes()
                .physical_for(len + KERNEL_HANDLE_SIZE)
                .objs_per_zspage;
            // Two full zspages; then the first keeps one object and the
            // second loses one: compaction moves the first's last object.
            let hs: Vec<Handle> = (0..2 * objs)
                .map(|i| pool.store(&vec![i as u8; len]).unwrap())
                .collect();
            for &h in &hs[1..objs] {
                pool.free(h).unwrap();
            }
            pool.free(hs[objs]).unwrap();
            let target = hs[0];
            let reader = |pool: Arc<Pool>| {
                move || {
                    let v = pool.read_vec(target).unwrap();
                    assert!(v.len() == len && v.iter().all(|&b| b == 0));
                }
            };
            let a = loom::thread::spawn(reader(pool.clone()));
            let b = loom::thread::spawn(reader(pool.clone()));
            let mover = {
                let pool = pool.clone();
                loom::thread::spawn(move || pool.compact())
            };
            a.join().unwrap();
            b.join().unwrap();
            assert!(mover.join().unwrap() > 0, "the object moved");
            assert_eq!(pool.read_vec(target).unwrap(), vec![0u8; len]);
            pool.check_invariants().unwrap();
        });
    }

    /// A lock-free read (`optimistic.rs`) racing compaction, which moves
    /// the object it reads, renumbers its new zspage and frees the old
    /// one: the read finds the object at its old place or its new one (by
    /// the zspage address published for the entry it loaded) or goes to
    /// the lock, and returns it whole.
    ///
    /// Loom sees the move count, the entries, the zspage addresses and the
    /// fences; the bytes are copied outside its view (raw memory), so a
    /// copy that reads bytes written after its first load gives loom no
    /// evidence of that write, and loom may then let the check load older
    /// values than the real model allows. So the old zspage waits in the
    /// return queue here (its bytes stay as they were) rather than being
    /// zeroed; a copy of changed bytes is what Miri (the word copies and
    /// fences as they are) and the stress tests check.
    #[test]
    fn loom_a_lock_free_read_racing_a_move_sees_the_object_whole() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        // More steps than the default 1,000: the set-up stores and frees.
        builder.max_branches = 20_000;
        builder.check(|| {
            let pool = Arc::new(
                Pool::new(PoolConfig {
                    page_return: PageReturn::Delayed {
                        delay: std::time::Duration::from_secs(3600),
                        max_pages: 1024,
                    },
                    lock_free_reads: true,
                    ..PoolConfig::kernel()
                })
                .unwrap(),
            );
            let len = 500;
            let objs = pool
                .size_classes()
                .physical_for(len + KERNEL_HANDLE_SIZE)
                .objs_per_zspage;
            let hs: Vec<Handle> = (0..2 * objs)
                .map(|i| pool.store(&vec![i as u8 + 0xA0; len]).unwrap())
                .collect();
            for &h in &hs[1..objs] {
                pool.free(h).unwrap();
            }
            // The second zspage's free slot is its second: the object moves
            // there, and that zspage is renumbered to the first's id, so the
            // object's place names another slot of the same id (whose old
            // bytes are another object's).
            pool.free(hs[objs + 1]).unwrap();
            let target = hs[0];
            let reader = {
                let pool = pool.clone();
                loom::thread::spawn(move || {
                    let mut buf = vec![0u8; len];
                    assert_eq!(pool.read(target, &mut buf).unwrap(), len);
                    assert!(buf.iter().all(|&b| b == 0xA0), "a torn or foreign copy");
                })
            };
            let mover = {
                let pool = pool.clone();
                loom::thread::spawn(move || pool.compact())
            };
            reader.join().unwrap();
            assert!(mover.join().unwrap() > 0, "the object moved");
            let mut buf = vec![0u8; len];
            assert_eq!(pool.read(target, &mut buf).unwrap(), len);
            assert!(buf.iter().all(|&b| b == 0xA0));
            pool.check_invariants().unwrap();
        });
    }

    /// A pool of one lane whose objects are owned by `owners` test slots:
    /// 44 objects of [`OWNED_LEN`] bytes, the `i`-th of owner `i` (the 44th
    /// seals the first segment: 43 fit in its 131,072 bytes), then those of
    /// `freed` freed, so the first segment is a victim. No compaction but
    /// the test's.
    fn owned_victim(
        owners: usize,
        freed: std::ops::Range<usize>,
    ) -> (Arc<Pool>, std::sync::Arc<crate::lane::TestOwners>) {
        use crate::lane::TestOwners;
        use crate::sync::Mutex;
        let pool = Arc::new(
            Pool::new(PoolConfig {
                placement: Placement::Log { lanes: 1 },
                compaction: CompactionPolicy::Off,
                page_return: PageReturn::Immediate,
                // Owned objects are a page store's, which reads under the
                // lock; and each word written by a store would be a loom
                // step more (its fence).
                lock_free_reads: false,
                ..PoolConfig::default()
            })
            .unwrap(),
        );
        // The pool keeps its owners in a std Arc (not a loom object).
        let slots = std::sync::Arc::new(TestOwners(
            (0..owners).map(|_| Mutex::new((0, 0))).collect(),
        ));
        pool.set_owners(slots.clone());
        for i in 0..44 {
            *slots.0[i].lock() = (
                pool.store_owned(i as u32, &[i as u8; OWNED_LEN]).unwrap(),
                OWNED_LEN,
            );
        }
        for i in freed {
            let (place, len) = std::mem::take(&mut *slots.0[i].lock());
            pool.free_owned(place, len).unwrap();
        }
        (pool, slots)
    }

    /// Bytes of each object of [`owned_victim`].
    const OWNED_LEN: usize = 3000;

    /// Log placement's owned objects (a page store's slots as handles):
    /// a reader holds the owner's lock, then the lane lock shared; cleaning
    /// holds the lane lock alone and only *tries* the owner's lock. Every
    /// interleaving ends (no deadlock), the reader sees the object whole
    /// at the place its owner holds, and cleaning either moves the object
    /// and the owner's place with it, or leaves both.
    ///
    /// The owner's lock is the crate's `Mutex`, under loom a flag taken by
    /// compare-and-swap, so the model sees cleaning's `try_lock` fail.
    #[test]
    fn loom_cleaning_tries_the_owner_of_an_object_a_reader_holds() {
        // Interleavings where cleaning left the object (its owner was
        // busy) and where it moved it: the model must see both.
        static OUTCOMES: [std::sync::atomic::AtomicUsize; 2] = [
            std::sync::atomic::AtomicUsize::new(0),
            std::sync::atomic::AtomicUsize::new(0),
        ];
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(|| {
            // The first segment keeps object 0 only: a victim.
            let (pool, slots) = owned_victim(44, 1..43);
            let before = slots.place(0);
            let reader = {
                let (pool, slots) = (pool.clone(), slots.clone());
                loom::thread::spawn(move || {
                    let held = slots.0[0].lock();
                    pool.with_owned(held.0, held.1, |b| b.iter().all(|&x| x == 0))
                        .unwrap()
                })
            };
            let cleaner = {
                let pool = pool.clone();
                loom::thread::spawn(move || pool.compact())
            };
            assert!(reader.join().unwrap(), "the reader saw the object whole");
            let freed = cleaner.join().unwrap();
            let after = slots.place(0);
            assert_eq!(
                freed > 0,
                after != before,
                "moved with its place, or not at all"
            );
            OUTCOMES[usize::from(freed > 0)].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            assert!(
                pool.with_owned(after, OWNED_LEN, |b| b.iter().all(|&x| x == 0))
                    .unwrap()
            );
            pool.check_invariants().unwrap();
        });
        let [kept, moved] = OUTCOMES
            .each_ref()
            .map(|o| o.load(std::sync::atomic::Ordering::Relaxed));
        assert!(kept > 0 && moved > 0, "kept {kept}, moved {moved}");
    }

    /// A plan's scan of the owners runs without the lane's lock
    /// (`lane/clean.rs`): an object stored meanwhile may land in a free
    /// extent of the victim being planned. Every interleaving ends, every
    /// object reads back whole at the place its owner holds, and the
    /// invariants hold, whether the store went into the victim (and
    /// joined its list) or elsewhere.
    #[test]
    fn loom_a_store_during_a_plans_scan_is_not_lost() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(2);
        builder.check(|| {
            // The first segment left with objects 0 and 42 (a victim with
            // free extents between them); one owner more for the store.
            let (pool, slots) = owned_victim(45, 1..42);
            let cleaner = {
                let pool = pool.clone();
                loom::thread::spawn(move || pool.compact())
            };
            let writer = {
                let (pool, slots) = (pool.clone(), slots.clone());
                loom::thread::spawn(move || {
                    let mut slot = slots.0[44].lock();
                    *slot = (pool.store_owned(44, &[44; OWNED_LEN]).unwrap(), OWNED_LEN);
                })
            };
            writer.join().unwrap();
            cleaner.join().unwrap();
            // What a busy owner kept in the victim moves now.
            pool.compact();
            for i in [0, 42, 43, 44] {
                let (place, len) = *slots.0[i].lock();
                assert!(
                    pool.with_owned(place, len, |b| b.iter().all(|&x| x == i as u8))
                        .unwrap(),
                    "object {i}"
                );
            }
            pool.check_invariants().unwrap();
        });
    }

    #[test]
    fn loom_two_readers_are_inside_one_class_at_once() {
        use loom::sync::atomic::{AtomicBool, Ordering};
        loom::model(|| {
            let pool = Arc::new(
                Pool::new(PoolConfig {
                    page_return: PageReturn::Immediate,
                    // `with_object` reads under the lock whatever this says;
                    // off, the stores set up in fewer loom steps.
                    lock_free_reads: false,
                    ..PoolConfig::default()
                })
                .unwrap(),
            );
            let h1 = pool.store(&[1u8; 700]).unwrap();
            let h2 = pool.store(&[2u8; 700]).unwrap();
            assert_eq!(h1.class(), h2.class());
            let inside = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
            // Each reader waits inside its read for the other to be inside
            // too: with readers taking turns this would never end.
            let reader = |me: usize, h: Handle| {
                let (pool, inside) = (pool.clone(), inside.clone());
                loom::thread::spawn(move || {
                    pool.with_object(h, |bytes| {
                        inside[me].store(true, Ordering::Release);
                        while !inside[1 - me].load(Ordering::Acquire) {
                            loom::thread::yield_now();
                        }
                        bytes[0]
                    })
                    .unwrap()
                })
            };
            let (a, b) = (reader(0, h1), reader(1, h2));
            assert_eq!((a.join().unwrap(), b.join().unwrap()), (1, 2));
        });
    }
}
