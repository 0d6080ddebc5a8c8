//! Region: compressed memory a program uses as ordinary memory (Linux).
//!
//! # The nouns
//!
//! - **region**: an anonymous mapping registered with a user-mode-only
//!   userfaultfd; the program reads and writes it as any memory.
//! - **unit**: 4, 16 or 64 KiB of the region, the grain of eviction: one
//!   object in the [`PageStore`] (whose page size is the unit), one slot
//!   per unit.
//! - **budget**: the most bytes of units mapped at once ("resident").
//! - **evict**: compress a unit into its slot and drop its pages
//!   (`MADV_DONTNEED`, in batches); the next access faults and the
//!   faulting thread itself (in a `SIGBUS` handler) or the **fault
//!   thread** decompresses and installs it (a *promotion*).
//! - **clean** unit: installed from its slot and not written since,
//!   write-protected; its slot's copy is current, so evicting it again
//!   only drops it (the swap cache's trick). A write lifts the protection
//!   and makes it **dirty** (the copy is discarded). Whether a unit
//!   installed from its slot keeps it is [`RegionConfig::keep_copies`].
//!
//! | file | concern |
//! |---|---|
//! | `mod.rs` | [`Region`], [`RegionConfig`], the mapping, start and stop |
//! | `uffd.rs` | userfaultfd's ABI, by raw `ioctl`s |
//! | `fault.rs` | serving a fault: install, zero fill, write faults; the fault thread |
//! | `signal.rs` | faults served in the faulting thread: the `SIGBUS` handler |
//! | `evict.rs` | eviction and the evictor thread |
//! | `policy.rs` | a unit's state; the CLOCK that picks victims |
//! | `copies.rs` | which resident units keep a stored copy (`keep_copies`) |
//! | `stats.rs` | counters, [`RegionStats`], the latency histogram |
//!
//! The fault path, the locks and the invariants are in docs/DESIGN.md,
//! "Region".

mod copies;
mod evict;
mod fault;
mod policy;
mod signal;
mod stats;
#[cfg(all(test, not(miri)))]
mod tests;
mod uffd;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::codec::Codec;
use crate::config::PoolConfig;
use crate::error::{Error, Result};
use crate::store::{PageStore, PageStoreConfig, SlotInfo};

pub use stats::{LatencyHistogram, RegionStats};

use policy::{Clock, Kind, Unit};
use stats::{Counters, Histogram, get};

/// Smallest and largest unit.
pub const MIN_UNIT: usize = 4096;
/// Largest unit: 64 KiB.
pub const MAX_UNIT: usize = 65536;

/// Who serves a region's faults.
///
/// A fault on an evicted unit must be served before the faulting access
/// can go on. Served by another thread, it costs two scheduler hand-offs
/// (the faulting thread sleeps, the serving thread is woken or spins, the
/// faulting thread is woken): most of a fault's time on this design.
/// Served by the faulting thread itself, it costs a signal's delivery and
/// return instead. Measured figures for both are in docs/DESIGN.md
/// ("Region").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum FaultMode {
    /// The faulting thread serves its own fault: the kernel raises
    /// `SIGBUS` in it (`UFFD_FEATURE_SIGBUS`) and zsmem's handler
    /// decompresses and installs the unit before the access is retried.
    /// The handler is installed for the whole process at the first such
    /// region and stays; a `SIGBUS` at any other address goes on to the
    /// handler installed before it (or the default action). The program
    /// must not block `SIGBUS` in a thread that touches the region, must
    /// not install a `SIGBUS` handler of its own that does not chain to
    /// the one it replaces, and must not touch evicted region memory from
    /// inside its allocator or its own signal handlers. At most 64 such
    /// regions at once in a process.
    #[default]
    Signal,
    /// A fault-handling thread (`zsmem-fault`) reads the userfaultfd and
    /// serves the faults; the faulting thread sleeps in the kernel until
    /// it is woken. Nothing process-wide is changed.
    Thread,
}

impl FaultMode {
    /// The mode named `signal` or `thread` (as [`FaultMode::name`] gives).
    ///
    /// ```
    /// use zsmem::region::FaultMode;
    /// assert_eq!(FaultMode::parse("thread")?, FaultMode::Thread);
    /// assert_eq!(FaultMode::parse(FaultMode::Signal.name())?, FaultMode::Signal);
    /// assert!(FaultMode::parse("threads").is_err());
    /// # Ok::<(), zsmem::Error>(())
    /// ```
    pub fn parse(s: &str) -> Result<FaultMode> {
        [FaultMode::Signal, FaultMode::Thread]
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                Error::InvalidConfig(format!("unknown fault mode `{s}`: use signal or thread"))
            })
    }

    /// `signal` or `thread`.
    pub fn name(self) -> &'static str {
        match self {
            FaultMode::Signal => "signal",
            FaultMode::Thread => "thread",
        }
    }
}

/// How to make a [`Region`].
///
/// ```
/// use zsmem::region::RegionConfig;
/// let cfg = RegionConfig { size: 64 << 20, budget: 16 << 20, unit: 16384, ..Default::default() };
/// assert_eq!(cfg.codec, zsmem::Codec::Lz4);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionConfig {
    /// Bytes of the region, rounded up to a whole unit; at least 1.
    pub size: usize,
    /// Most bytes of units resident at once, rounded down to whole units;
    /// at least one unit.
    pub budget: usize,
    /// Bytes of a unit: 4096, 16384 or 65536 (any power of two from the
    /// system's page size to [`MAX_UNIT`]).
    pub unit: usize,
    /// The codec units are compressed with.
    pub codec: Codec,
    /// When resident memory passes the budget less half this, the evictor
    /// thread evicts down to the budget less this (so faults rarely wait
    /// for an eviction, and each wake-up drops at least half of it in
    /// batches): the reclaim's batch, and the budget's slack. Default 0: a
    /// 64th of the budget, at least one unit.
    pub headroom: usize,
    /// With [`FaultMode::Thread`]: how long the fault thread keeps reading
    /// for more faults after serving some, before it sleeps: a fault that
    /// comes meanwhile is served without waking the thread (a few
    /// microseconds less), at the price of that much CPU after each burst.
    /// Default 50 µs; zero sleeps at once.
    pub spin: std::time::Duration,
    /// Readahead: after a fault restores the unit just past the one the
    /// previous restore brought back (a sequential read, such as a copy of
    /// a document spanning units), the serving thread also restores up to
    /// this many bytes of units after it that are evicted (the fault
    /// thread once the faulting thread is woken, a signal handler before
    /// it returns), and only within the budget (it never evicts for
    /// them). Default 16 KiB; zero turns it off.
    pub readahead: usize,
    /// The most bytes of stored objects kept as copies of resident units.
    ///
    /// A unit installed from its slot may keep the slot: it is installed
    /// write-protected (clean), and if it is evicted before it is written
    /// it is only dropped, without compressing (the swap cache's trick).
    /// The price is memory: the store then holds a compressed copy of
    /// units that are also resident. With a cap, a unit keeps its copy
    /// only if the copies fit, and once they fill it the clock's hand
    /// discards the copies of the units it passes with credit (they make
    /// room for the copies of units installed since); a unit that keeps
    /// none is installed writable (dirty), its slot discarded, and its
    /// next eviction compresses it again.
    ///
    /// - `usize::MAX`: always keep (all of the data may be held twice:
    ///   resident, and compressed).
    /// - `0`: never (as the kernel's zram swap-in frees its slot): the
    ///   store holds only the evicted units.
    /// - anything between: a cap in bytes.
    ///
    /// Default `usize::MAX`. [`RegionStats::copy_bytes`] and
    /// [`RegionStats::copies_dropped`] say what it held and what it cost.
    pub keep_copies: usize,
    /// Who serves faults: the faulting thread in a `SIGBUS` handler
    /// (default), or a fault-handling thread.
    pub faults: FaultMode,
    /// The pool under the store (its `page_size` is set to the unit).
    /// Default [`PoolConfig::log`]: log placement holds objects of any
    /// size up to the unit without a size class per size.
    pub pool: PoolConfig,
}

impl Default for RegionConfig {
    fn default() -> Self {
        RegionConfig {
            size: 64 << 20,
            budget: 16 << 20,
            unit: 4096,
            codec: Codec::Lz4,
            headroom: 0,
            spin: std::time::Duration::from_micros(50),
            readahead: 16 << 10,
            keep_copies: usize::MAX,
            faults: FaultMode::default(),
            pool: PoolConfig::log(),
        }
    }
}

/// What the evictor thread, the fault thread or signal handlers, and the
/// `Region` share.
pub(crate) struct Shared {
    base: usize,
    unit: usize,
    os_page: usize,
    units: Box<[crate::sync::Mutex<Unit>]>,
    budget_units: AtomicUsize,
    /// Resident units and places claimed by faults installing one
    /// (`fault::claim`): what a fault's room is judged by.
    occupied: AtomicUsize,
    headroom_units: AtomicUsize,
    /// `RegionConfig::headroom` (bytes; 0, a 64th of the budget).
    headroom: usize,
    uffd: uffd::Uffd,
    stop: uffd::StopSignal,
    stopping: AtomicBool,
    store: PageStore,
    clock: crate::sync::Mutex<Clock>,
    counters: Counters,
    latency: Histogram,
    wake: (Mutex<()>, Condvar),
    asleep: AtomicBool,
    spin: std::time::Duration,
    /// Units restored ahead of a sequential fault (`readahead` in units).
    readahead_units: usize,
    /// `RegionConfig::keep_copies` (`u64::MAX`: no cap).
    keep_copies: u64,
    /// A unit of zeros, installed for a unit never written.
    zeros: Box<[u8]>,
    /// Buffers for faults served in the faulting thread (none with
    /// `FaultMode::Thread`).
    buffers: signal::Buffers,
    /// The unit the last restore (by a fault or ahead of one) brought back,
    /// to tell a sequential read (`usize::MAX` at first).
    last_restore: AtomicUsize,
    /// This process, for `process_madvise` (`None` if it could not be
    /// opened: units are then dropped one `madvise` each).
    pidfd: Option<std::os::fd::OwnedFd>,
    /// Whether `process_madvise` drops our pages (cleared the first time
    /// the kernel refuses it).
    batch_drops: AtomicBool,
    #[cfg(test)]
    paused: AtomicBool,
}

impl Shared {
    /// The unit `address` lies in, if the region holds it.
    fn unit_of(&self, address: usize) -> Option<usize> {
        let i = address.checked_sub(self.base)? / self.unit;
        (i < self.units.len()).then_some(i)
    }

    /// The address of unit `index`'s first byte.
    fn unit_start(&self, index: usize) -> usize {
        self.base + index * self.unit
    }

    fn budget_units(&self) -> usize {
        self.budget_units.load(Ordering::Relaxed)
    }

    /// What the evictor evicts down to: the budget less the headroom.
    fn low_units(&self) -> usize {
        self.budget_units()
            .saturating_sub(self.headroom_units.load(Ordering::Relaxed))
    }

    /// What wakes the evictor: the budget less half the headroom, so that
    /// each wake-up evicts at least half the headroom, in full batches,
    /// rather than a unit a fault.
    fn high_units(&self) -> usize {
        self.budget_units()
            .saturating_sub(self.headroom_units.load(Ordering::Relaxed) / 2)
    }

    /// Tell the evictor thread to run if it sleeps and there is work.
    fn wake_evictor(&self) {
        if self.asleep.load(Ordering::SeqCst)
            && get(&self.counters.resident_units) as usize > self.high_units()
        {
            let _g = self.wake.0.lock().unwrap_or_else(|p| p.into_inner());
            self.wake.1.notify_one();
        }
    }
}

/// Compressed memory a program uses as ordinary memory: a mapping of
/// `size` bytes of which at most `budget` stay resident, the coldest units
/// compressed in a [`PageStore`] and brought back on their next access by
/// the faulting thread itself or a fault-handling thread ([`FaultMode`]).
/// No privilege and no kernel setting is needed
/// (user-mode-only userfaultfd, Linux 5.11 or newer).
///
/// ```no_run
/// use zsmem::region::{Region, RegionConfig};
/// let region = Region::new(RegionConfig { size: 256 << 20, budget: 64 << 20, ..Default::default() })?;
/// // SAFETY: the region's bytes are ours for its lifetime.
/// let mem = unsafe { std::slice::from_raw_parts_mut(region.as_ptr(), region.len()) };
/// mem[..11].copy_from_slice(b"hello world");
/// println!("{:?}", region.stats());
/// # Ok::<(), zsmem::Error>(())
/// ```
///
/// # What the program must know
///
/// - **System calls** given region memory that is not resident fail with
///   `EFAULT` (user-mode-only userfaultfd: faults taken by the kernel are
///   not forwarded). Touch the bytes first, or copy through a resident
///   buffer.
/// - **Fork**: the mapping is `MADV_DONTFORK`: a child has nothing at the
///   region's addresses (an access there is a `SIGSEGV`, never another
///   process's stale data). Without `UFFD_FEATURE_EVENT_FORK` a child's
///   copy would not be registered, and the units evicted at the fork would
///   read as zeros there. The child may drop its `Region` value: it
///   touches nothing the parent uses.
/// - **madvise** by the program: a page dropped with `MADV_DONTNEED` reads
///   as zeros after, as in plain memory, if it is touched before its unit
///   is evicted; once evicted, the unit comes back as it was at its last
///   compression, which may predate the drop (the drop is taken as a
///   hint).
/// - **Signals**: a thread waiting on a fault takes its signals; the
///   access is retried after the handler returns (which may itself touch
///   the region). With [`FaultMode::Signal`] zsmem owns a `SIGBUS`
///   handler for the process (see there for what the program must
///   leave to it).
/// - **Drop**: threads waiting on faults are released (they see zeros)
///   and the mapping goes away: as with freeing memory, no thread may
///   touch the region after. Drop never waits for the program.
pub struct Region {
    /// `Some` until the region stops (in `drop`, or a test).
    shared: Option<Arc<Shared>>,
    /// With `FaultMode::Signal`: the region's place in the handler's
    /// table, until it stops.
    registration: Option<signal::Registration>,
    threads: Vec<JoinHandle<()>>,
    base: usize,
    len: usize,
    /// The process that made the region: a forked child's copy of this
    /// value leaves the parent's threads and descriptors alone.
    owner: u32,
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("base", &(self.base as *const u8))
            .field("len", &self.len)
            .finish()
    }
}

fn os_page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).unwrap_or(4096).max(4096)
}

/// A pidfd of this process, for `process_madvise` on our own pages.
fn own_pidfd() -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor
    // or -1; no memory is passed.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    // SAFETY: a descriptor the kernel just gave us, owned by no one else.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as std::os::fd::RawFd) })
}

/// The headroom in units of a budget of `budget_units` (at least 1):
/// `headroom` bytes (0: a 64th of the budget), at least one unit and less
/// than the budget.
fn headroom_units(budget_units: usize, headroom: usize, unit: usize) -> usize {
    if headroom == 0 {
        (budget_units / 64).max(1)
    } else {
        units_of(headroom, unit).max(1)
    }
    .min(budget_units - 1)
}

fn units_of(bytes: usize, unit: usize) -> usize {
    bytes / unit
}

impl Region {
    /// Map and register the region and start its evictor thread
    /// (`zsmem-evict`), and with [`FaultMode::Thread`] its fault thread
    /// (`zsmem-fault`); with [`FaultMode::Signal`] put it in the `SIGBUS`
    /// handler's table (installing the handler at the first). Fails with
    /// [`Error::InvalidConfig`] on a bad size, unit or budget (or a 65th
    /// region with signal faults alive at once), with
    /// [`Error::Userfaultfd`] when the kernel refuses userfaultfd (the
    /// message says why and which sysctl governs it), and
    /// [`Error::OsOutOfMemory`] when the mapping cannot be had.
    pub fn new(cfg: RegionConfig) -> Result<Region> {
        let os_page = os_page_size();
        if !cfg.unit.is_power_of_two() || cfg.unit < os_page || cfg.unit > MAX_UNIT {
            return Err(Error::InvalidConfig(format!(
                "a region's unit of {} bytes is not a power of two from {os_page} (the page size) to {MAX_UNIT}",
                cfg.unit
            )));
        }
        if cfg.size == 0 {
            return Err(Error::InvalidConfig(
                "a region needs at least one byte".into(),
            ));
        }
        let len = cfg
            .size
            .checked_next_multiple_of(cfg.unit)
            .filter(|&l| l <= isize::MAX as usize / 2)
            .ok_or_else(|| {
                Error::InvalidConfig(format!("a region of {} bytes is too large", cfg.size))
            })?;
        let n = len / cfg.unit;
        let budget_units = units_of(cfg.budget, cfg.unit);
        if budget_units == 0 {
            return Err(Error::InvalidConfig(format!(
                "a budget of {} bytes holds no unit of {} bytes: give at least one unit",
                cfg.budget, cfg.unit
            )));
        }
        let headroom_units = headroom_units(budget_units, cfg.headroom, cfg.unit);
        if n > crate::store::MAX_LOG_SLOTS {
            return Err(Error::InvalidConfig(format!(
                "a region of {n} units is more than a store can hold ({} slots)",
                crate::store::MAX_LOG_SLOTS
            )));
        }
        let store = PageStore::new(PageStoreConfig {
            slots: n,
            codec: cfg.codec,
            pool: PoolConfig {
                page_size: cfg.unit,
                // Size classes scale with the page, so that a 64 KiB unit's
                // table fits the handle's class field (log placement keeps
                // the table for its statistics).
                class_delta: cfg.pool.class_delta.max(cfg.unit / 256),
                ..cfg.pool
            },
            track_access_time: false,
            ..Default::default()
        })?;
        let signals = cfg.faults == FaultMode::Signal;
        let uffd = uffd::Uffd::open(signals)?;
        let stop = uffd::StopSignal::new()?;
        let units = crate::store::try_table(n, "the region's unit table", || {
            crate::sync::Mutex::new(Unit::default())
        })?;
        let base = map(len)?;
        if let Err(e) = uffd.register(base, len) {
            unmap(base, len);
            return Err(e);
        }
        let shared = Arc::new(Shared {
            base,
            unit: cfg.unit,
            os_page,
            units,
            budget_units: AtomicUsize::new(budget_units),
            occupied: AtomicUsize::new(0),
            headroom_units: AtomicUsize::new(headroom_units),
            headroom: cfg.headroom,
            uffd,
            stop,
            stopping: AtomicBool::new(false),
            store,
            clock: crate::sync::Mutex::new(Clock::default()),
            counters: Counters::default(),
            latency: Histogram::default(),
            wake: (Mutex::new(()), Condvar::new()),
            asleep: AtomicBool::new(false),
            spin: cfg.spin,
            readahead_units: cfg.readahead / cfg.unit,
            // usize::MAX (no cap) is u64::MAX whatever the width of usize.
            keep_copies: if cfg.keep_copies == usize::MAX {
                u64::MAX
            } else {
                cfg.keep_copies as u64
            },
            zeros: vec![0u8; cfg.unit].into_boxed_slice(),
            buffers: signal::Buffers::new(
                if signals {
                    std::thread::available_parallelism().map_or(2, |n| 2 * n.get().min(32))
                } else {
                    0
                },
                cfg.unit,
            ),
            last_restore: AtomicUsize::new(usize::MAX),
            pidfd: own_pidfd(),
            batch_drops: AtomicBool::new(true),
            #[cfg(test)]
            paused: AtomicBool::new(false),
        });
        let mut region = Region {
            shared: Some(shared.clone()),
            registration: None,
            threads: Vec::new(),
            base,
            len,
            owner: std::process::id(),
        };
        if signals {
            region.registration = Some(signal::register(&shared)?);
        }
        let fault_thread = ("zsmem-fault", fault::run as fn(&Shared));
        let evictor = ("zsmem-evict", evict::run as fn(&Shared));
        for (name, body) in (!signals)
            .then_some(fault_thread)
            .into_iter()
            .chain([evictor])
        {
            let sh = shared.clone();
            let t = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || body(&sh))
                .map_err(|e| Error::OsOutOfMemory {
                    bytes: 0,
                    reason: format!("thread {name} could not start: {e}"),
                })?;
            region.threads.push(t);
        }
        Ok(region)
    }

    // Invariant: `shared` is `Some` from `new` until `stop`, which only
    // `drop` and the module's tests call.
    fn shared(&self) -> &Shared {
        self.shared.as_ref().expect("the region runs until dropped")
    }

    /// The region's first byte. Valid for [`len`](Region::len) bytes until
    /// the region is dropped; the program orders its own accesses as with
    /// any shared memory.
    pub fn as_ptr(&self) -> *mut u8 {
        self.base as *mut u8
    }

    /// Bytes of the region (its size rounded up to whole units).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never: a region has at least one unit.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of a unit.
    pub fn unit(&self) -> usize {
        self.shared().unit
    }

    /// The store the evicted units are in.
    pub fn store(&self) -> &PageStore {
        &self.shared().store
    }

    /// The resident budget in bytes (whole units).
    pub fn budget(&self) -> usize {
        self.shared().budget_units() * self.unit()
    }

    /// Change the budget (rounded down to whole units, at least one); the
    /// evictor thread restores it if resident memory is above.
    pub fn set_budget(&self, bytes: usize) -> Result<()> {
        let sh = self.shared();
        let units = units_of(bytes, sh.unit);
        if units == 0 {
            return Err(Error::InvalidConfig(format!(
                "a budget of {bytes} bytes holds no unit of {} bytes",
                sh.unit
            )));
        }
        sh.budget_units.store(units, Ordering::Relaxed);
        // The configured headroom, as at the start (it was reset to a 64th
        // of the budget here, whatever the configuration said).
        let headroom = headroom_units(units, sh.headroom, sh.unit);
        sh.headroom_units.store(headroom, Ordering::Relaxed);
        sh.asleep.store(true, Ordering::SeqCst);
        sh.wake_evictor();
        Ok(())
    }

    /// Evict, on the calling thread, until at most `target` bytes are
    /// resident or no unit can be evicted; returns the units evicted. The
    /// budget is not changed. The reference bits are honoured, so a busy
    /// unit may survive one sweep.
    pub fn reclaim(&self, target: usize) -> usize {
        let sh = self.shared();
        let target = units_of(target, sh.unit);
        let mut buf = vec![0u8; sh.unit];
        let mut done = 0;
        loop {
            let resident = get(&sh.counters.resident_units) as usize;
            if resident <= target {
                break done;
            }
            match evict::evict_some(sh, resident - target, &mut buf) {
                0 => break done,
                n => done += n,
            }
        }
    }

    /// A snapshot of the statistics.
    pub fn stats(&self) -> RegionStats {
        let sh = self.shared();
        let c = &sh.counters;
        let mm = sh.store.mm_stat();
        RegionStats {
            size: self.len,
            unit: sh.unit,
            budget: sh.budget_units() * sh.unit,
            resident_bytes: get(&c.resident_units) * sh.unit as u64,
            compressed_units: get(&c.evicted_units),
            stored_bytes: mm.compr_data_size,
            store_memory: mm.mem_used_total + sh.store.metadata_bytes() as u64,
            faults: get(&c.missing_faults),
            write_faults: get(&c.write_faults),
            zero_fills: get(&c.zero_fills),
            promotions: get(&c.restores),
            readahead: get(&c.readahead),
            evictions: get(&c.evictions),
            clean_drops: get(&c.clean_drops),
            compressions: get(&c.compressions),
            compress_ns: get(&c.compress_ns),
            decompress_ns: get(&c.decompress_ns),
            eviction_races: get(&c.eviction_races),
            sync_evictions: get(&c.sync_evictions),
            dropped_by_program: get(&c.dropped_by_program),
            copy_bytes: get(&c.copy_bytes),
            copies_dropped: get(&c.copies_dropped),
            errors: get(&c.errors),
            fault_latency: sh.latency.snapshot(),
        }
    }

    /// Check the units' states against the counters and the store (call it
    /// when no thread is touching the region; it holds every unit's lock
    /// meanwhile): an evicted unit's slot holds
    /// its copy, an empty unit's slot nothing, the resident and
    /// evicted counts match, and the copies of resident units are counted
    /// and within `keep_copies`.
    pub fn check_invariants(&self) -> Result<()> {
        let sh = self.shared();
        // Every unit's lock, in order, for a consistent picture: the fault
        // and evictor threads hold one unit lock at a time (and the clock's,
        // which is taken first), so this cannot deadlock with them. Taken
        // when no unit is being compressed: then the store is still (every
        // other store operation runs under a unit's lock), and its own
        // check, which must not run beside a write, is made under them.
        let held = loop {
            let held: Vec<_> = sh.units.iter().map(|m| m.lock()).collect();
            if !held.iter().any(|u| u.evicting || u.dropping) {
                break held;
            }
            drop(held);
            std::thread::yield_now();
        };
        let (mut resident, mut evicted, mut copies) = (0u64, 0u64, 0u64);
        for (i, u) in held.iter().enumerate() {
            let u = **u;
            let slot = sh.store.slot_info(i)?;
            let holds = !matches!(slot, SlotInfo::Empty);
            let bad = |why: &str| {
                Err(Error::InvariantViolated(format!(
                    "region unit {i}: {why} ({u:?}, slot {slot:?})"
                )))
            };
            match u.kind {
                Kind::Resident => resident += 1,
                Kind::Evicted => evicted += 1,
                Kind::Empty => {}
            }
            copies += u64::from(u.copy);
            if u.copy > 0 && !(u.kind == Kind::Resident && u.stored) {
                return bad("a copy counted for a unit that is not resident and clean");
            }
            if u.kind == Kind::Evicted && !u.stored {
                return bad("evicted without a stored copy");
            }
            if !u.stored && holds {
                return bad("a stale copy in the store");
            }
            if u.kind == Kind::Empty && (u.stored || holds) {
                return bad("empty but stored");
            }
        }
        let c = &sh.counters;
        if resident != get(&c.resident_units) || evicted != get(&c.evicted_units) {
            return Err(Error::InvariantViolated(format!(
                "region counts {resident} resident and {evicted} evicted units, the counters {} and {}",
                get(&c.resident_units),
                get(&c.evicted_units)
            )));
        }
        let occupied = sh.occupied.load(Ordering::Relaxed) as u64;
        if occupied < resident {
            return Err(Error::InvariantViolated(format!(
                "{resident} units resident, {occupied} places taken (resident and claimed)"
            )));
        }
        if copies != get(&c.copy_bytes) || copies > sh.keep_copies {
            return Err(Error::InvariantViolated(format!(
                "region units count {copies} bytes of copies, the counter {}, the cap {}",
                get(&c.copy_bytes),
                sh.keep_copies
            )));
        }
        // Over the budget only if a fault had to take a place over it
        // (nothing could be evicted: units the program locked, a store
        // refusing at its memory limit).
        if resident as usize > sh.budget_units() && get(&c.over_budget) == 0 {
            return Err(Error::InvariantViolated(format!(
                "{resident} units resident, over the budget of {}",
                sh.budget_units()
            )));
        }
        let store = sh.store.check_invariants();
        drop(held);
        store
    }

    /// Stop the threads and close the userfaultfd (releasing every thread
    /// waiting on a fault); the mapping stays until drop.
    fn stop(&mut self) {
        if let Some(r) = self.registration.take() {
            r.withdraw();
        }
        let Some(sh) = self.shared.take() else {
            return;
        };
        sh.stopping.store(true, Ordering::Release);
        sh.stop.raise();
        {
            let _g = sh.wake.0.lock().unwrap_or_else(|p| p.into_inner());
            sh.wake.1.notify_all();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // The last reference: the descriptor closes here.
        drop(sh);
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if std::process::id() != self.owner {
            // A forked child's copy: the threads are the parent's, the
            // eventfd is shared with it, the mapping is not here
            // (MADV_DONTFORK). Leave it all.
            std::mem::forget(self.shared.take());
            std::mem::forget(std::mem::take(&mut self.threads));
            return;
        }
        self.stop();
        unmap(self.base, self.len);
    }
}

/// A fresh anonymous mapping of `len` bytes, not inherited by children,
/// without transparent huge pages (units are installed page by page).
fn map(len: usize) -> Result<usize> {
    // SAFETY: a new private anonymous mapping; no existing memory is named.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(Error::OsOutOfMemory {
            bytes: len,
            reason: format!("mmap of the region: {}", std::io::Error::last_os_error()),
        });
    }
    for advice in [libc::MADV_DONTFORK, libc::MADV_NOHUGEPAGE] {
        // SAFETY: `p .. p + len` is the mapping just made; advice only.
        unsafe { libc::madvise(p, len, advice) };
    }
    Ok(p as usize)
}

fn unmap(base: usize, len: usize) {
    // SAFETY: `base .. base + len` is a mapping this region made and no
    // longer uses (its threads are stopped).
    unsafe { libc::munmap(base as *mut libc::c_void, len) };
}
