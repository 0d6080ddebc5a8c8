//! Address space bookkeeping and the return queue, under the page source's
//! lock: regions reserved from the OS, free (discarded) runs by length, and
//! the pages waiting to be returned (freed runs and trimmed ranges of live
//! runs), oldest first.

use std::collections::{BTreeMap, VecDeque};
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::size_class::MAX_CHAIN_SIZE;

/// Pages taken fresh (or from the pre-faulted reserve) between two
/// returner rounds that make a source ask for a refill: a stream of new
/// zspages, not a few.
pub(super) const PREFAULT_MIN_PAGES: usize = 32;

/// A freed run waiting to be returned; its first `resident` pages are
/// resident (all of them for an eager source).
#[derive(Debug)]
pub(super) struct Waiting {
    pub(super) ptr: NonNull<u8>,
    pub(super) pages: usize,
    pub(super) resident: usize,
    since: Instant,
    /// Pre-faulted ahead of demand, not freed by a zspage: taking it is
    /// demand for fresh pages (see `PageSource::refill`).
    pub(super) prefaulted: bool,
}

/// Pages of a live run trimmed off it (a zspage's top, a log segment's
/// dead pages), waiting to be returned: a bit per page of the run. They go
/// back together when the oldest of them is due, so a page may go back
/// before its own delay has passed, never after.
#[derive(Debug)]
struct Tops {
    run: NonNull<u8>,
    mask: u32,
    since: Instant,
}

impl Tops {
    /// Push the byte ranges of these pages onto `ranges`; returns how many
    /// pages they are.
    fn ranges(&self, page_size: usize, ranges: &mut Vec<(NonNull<u8>, usize)>) -> usize {
        let mut pages = 0;
        for (first, n) in bit_runs(self.mask) {
            // SAFETY: a bit names a page of the run.
            ranges.push((unsafe { self.run.add(first * page_size) }, n * page_size));
            pages += n;
        }
        pages
    }
}

/// The runs of consecutive bits of `mask`: (first, length), lowest first.
pub(super) fn bit_runs(mask: u32) -> impl Iterator<Item = (usize, usize)> {
    let mut rest = mask;
    std::iter::from_fn(move || {
        if rest == 0 {
            return None;
        }
        let first = rest.trailing_zeros() as usize;
        let len = (rest >> first).trailing_ones() as usize;
        rest &= !span(first, len);
        Some((first, len))
    })
}

/// The bits of pages `first..first + pages` of a run.
pub(crate) fn span(first: usize, pages: usize) -> u32 {
    debug_assert!(first + pages <= MAX_CHAIN_SIZE && MAX_CHAIN_SIZE <= 32);
    (((1u64 << pages) - 1) << first) as u32
}

/// The resident pages of runs sorted by address, `(start, resident,
/// pages)` each with its resident pages first, as byte ranges: a run
/// wholly resident joins the next one when they touch, and runs with
/// nothing resident give no range (for one `madvise` per range).
pub(super) fn ranges(
    page_size: usize,
    runs: impl IntoIterator<Item = (NonNull<u8>, usize, usize)>,
) -> Vec<(NonNull<u8>, usize)> {
    let mut out: Vec<(NonNull<u8>, usize)> = Vec::new();
    let mut whole = false;
    for (p, resident, pages) in runs {
        let bytes = resident * page_size;
        match out.last_mut() {
            Some((start, b)) if whole && start.as_ptr() as usize + *b == p.as_ptr() as usize => {
                *b += bytes;
            }
            _ => out.push((p, bytes)),
        }
        whole = resident == pages;
    }
    out.retain(|&(_, b)| b > 0);
    out
}

/// Runs a source took fresh or from its pre-faulted reserve since the last
/// refill.
#[derive(Debug)]
pub(super) struct Demand {
    /// Runs by length in pages (index 0 unused).
    pub(super) runs: [u32; MAX_CHAIN_SIZE + 1],
    /// Their pages.
    pub(super) pages: usize,
    /// When the first of them was taken.
    pub(super) since: Instant,
}

impl Default for Demand {
    fn default() -> Self {
        Demand {
            runs: [0; MAX_CHAIN_SIZE + 1],
            pages: 0,
            since: Instant::now(),
        }
    }
}

pub(super) struct Arena {
    page_size: usize,
    regions: Vec<Region>,
    /// Next unused byte of the last region.
    bump: usize,
    /// Free, discarded runs by length in pages (index 0 unused).
    free_runs: [Vec<NonNull<u8>>; MAX_CHAIN_SIZE + 1],
    /// Freed runs waiting to be returned, by length, oldest first.
    waiting: [VecDeque<Waiting>; MAX_CHAIN_SIZE + 1],
    /// Trimmed pages of live runs waiting to be returned, by run start: a
    /// free or a commit finds its run's in log time, and a run freed whole
    /// takes them along in one step, however many of its pages wait (a log
    /// segment gives back single dead pages).
    tops: BTreeMap<usize, Tops>,
    /// Resident pages in `waiting` and `tops`.
    pub(super) waiting_pages: usize,
    /// Pages the returner (or a freeing thread past the bound) took and is
    /// discarding outside the lock.
    pub(super) returning_pages: usize,
    /// Runs taken fresh or pre-faulted since the last refill: the demand
    /// a refill replaces. The source has asked for a refill, not answered
    /// yet, while it holds `PREFAULT_MIN_PAGES` or more.
    demand: Demand,
    /// Moved on by a purge: a refill that began before it stops.
    pub(super) refill_generation: u64,
    /// Pages the returner is pre-faulting outside the lock (counted as
    /// cached: they become resident during the call).
    pub(super) filling_pages: usize,
}

// SAFETY: the arena only stores addresses of memory it reserved; it never
// dereferences them. It is only reached through the page source's mutex.
unsafe impl Send for Arena {}

impl Arena {
    pub(super) fn new(page_size: usize) -> Self {
        Arena {
            page_size,
            regions: Vec::new(),
            bump: 0,
            free_runs: std::array::from_fn(|_| Vec::new()),
            waiting: std::array::from_fn(|_| VecDeque::new()),
            tops: BTreeMap::new(),
            waiting_pages: 0,
            returning_pages: 0,
            demand: Demand::default(),
            refill_generation: 0,
            filling_pages: 0,
        }
    }

    /// A run of `pages` pages was taken fresh or pre-faulted. True when
    /// that makes the demand since the last refill reach
    /// `PREFAULT_MIN_PAGES`: the caller asks the returner for a refill.
    pub(super) fn note_demand(&mut self, pages: usize) -> bool {
        let d = &mut self.demand;
        if d.pages == 0 {
            d.since = Instant::now();
        }
        d.runs[pages] = d.runs[pages].saturating_add(1);
        let before = d.pages;
        d.pages += pages;
        before < PREFAULT_MIN_PAGES && d.pages >= PREFAULT_MIN_PAGES
    }

    /// The source asked for a refill that has not run yet.
    pub(super) fn asked(&self) -> bool {
        self.demand.pages >= PREFAULT_MIN_PAGES
    }

    /// The demand since the last refill, reset (which answers the ask).
    pub(super) fn take_demand(&mut self) -> Demand {
        std::mem::take(&mut self.demand)
    }

    /// Runs of `pages` pages waiting (freed or pre-faulted).
    pub(super) fn waiting_runs(&self, pages: usize) -> usize {
        self.waiting[pages].len()
    }

    /// Queue a run of `pages` pages the returner pre-faulted (all
    /// resident), as a freed run waits, dated `since` (or as the newest
    /// run of its length, if that is later: a queue stays oldest first):
    /// taken first by the next zspage of its length, returned after the
    /// delay if none comes.
    pub(super) fn queue_prefaulted(&mut self, p: NonNull<u8>, pages: usize, since: Instant) {
        let q = &mut self.waiting[pages];
        let since = q.back().map_or(since, |w| w.since.max(since));
        self.waiting_pages += pages;
        q.push_back(Waiting {
            ptr: p,
            pages,
            resident: pages,
            since,
            prefaulted: true,
        });
    }

    pub(super) fn reserved_bytes(&self) -> usize {
        self.regions.iter().map(|r| r.len).sum()
    }

    /// The newest waiting run of `pages` pages, if any (still resident).
    pub(super) fn take_waiting(&mut self, pages: usize) -> Option<Waiting> {
        let w = self.waiting[pages].pop_back()?;
        self.waiting_pages -= w.resident;
        Some(w)
    }

    /// Put back a run `take_waiting` gave out (the memory limit refused it).
    pub(super) fn untake_waiting(&mut self, w: Waiting) {
        self.waiting_pages += w.resident;
        self.waiting[w.pages].push_back(w);
    }

    /// A discarded run of `pages` pages as [`alloc`](Self::alloc) finds
    /// one, but never in a new region: `None` when that would take one.
    pub(super) fn alloc_in_place(&mut self, pages: usize) -> Option<NonNull<u8>> {
        let free = (pages..=MAX_CHAIN_SIZE).any(|n| !self.free_runs[n].is_empty());
        let fits = self
            .regions
            .last()
            .is_some_and(|r| self.bump + pages * self.page_size <= r.len);
        (free || fits).then(|| self.alloc(pages).ok()).flatten()
    }

    /// A discarded run of `pages` pages: a free one, a piece of a longer
    /// free one, or new address space.
    pub(super) fn alloc(&mut self, pages: usize) -> Result<NonNull<u8>> {
        if let Some(p) = self.free_runs[pages].pop() {
            return Ok(p);
        }
        // Split a longer free run rather than grow the address space.
        for longer in pages + 1..=MAX_CHAIN_SIZE {
            if let Some(p) = self.free_runs[longer].pop() {
                // SAFETY: `p` starts a free run of `longer` pages inside one
                // region, so `p + pages * page_size` is inside that run.
                let rest = unsafe { p.add(pages * self.page_size) };
                self.free_runs[longer - pages].push(rest);
                return Ok(p);
            }
        }
        let bytes = pages * self.page_size;
        let fits = self
            .regions
            .last()
            .is_some_and(|r| self.bump + bytes <= r.len);
        if !fits {
            // The tail of the old region is left unused: it was never
            // touched, so it costs address space only.
            self.regions.push(Region::reserve(bytes)?);
            self.bump = 0;
        }
        let region = self.regions.last().expect("a region was just ensured");
        // SAFETY: `bump + bytes <= region.len`, so the run lies in the region.
        let p = unsafe { region.base.add(self.bump) };
        self.bump += bytes;
        Ok(p)
    }

    /// A discarded run is free for reuse.
    pub(super) fn put_free(&mut self, p: NonNull<u8>, pages: usize) {
        self.free_runs[pages].push(p);
    }

    /// Queue a freed run of `pages` pages whose first `resident` are
    /// resident. Trimmed ranges of the run still waiting join it (they lie
    /// just above its resident pages), so a run never has a waiting top.
    pub(super) fn queue_run(
        &mut self,
        p: NonNull<u8>,
        pages: usize,
        resident: usize,
        now: Instant,
    ) {
        let mask = self
            .tops
            .remove(&(p.as_ptr() as usize))
            .map_or(0, |t| t.mask);
        let absorbed = mask.count_ones() as usize;
        debug_assert!(
            absorbed == 0 || mask == span(resident, absorbed),
            "a run's waiting pages lie just above its resident ones"
        );
        let mut resident = resident;
        // They were counted as waiting already; now as the run's.
        self.waiting_pages -= absorbed;
        resident += absorbed;
        debug_assert!(resident <= pages);
        self.waiting_pages += resident;
        self.waiting[pages].push_back(Waiting {
            ptr: p,
            pages,
            resident,
            since: now,
            prefaulted: false,
        });
    }

    /// Queue the pages of live run `run` that `mask` names, trimmed off it.
    pub(super) fn queue_top(&mut self, run: NonNull<u8>, mask: u32, now: Instant) {
        self.waiting_pages += mask.count_ones() as usize;
        let t = self.tops.entry(run.as_ptr() as usize).or_insert(Tops {
            run,
            mask: 0,
            since: now,
        });
        debug_assert_eq!(t.mask & mask, 0, "a page is queued once");
        t.mask |= mask;
    }

    /// Live run `run` commits the pages `mask` names again: those of them
    /// still waiting stay resident instead of being returned. Returns how
    /// many were waiting.
    pub(super) fn cancel_tops(&mut self, run: NonNull<u8>, mask: u32) -> usize {
        let key = run.as_ptr() as usize;
        let Some(t) = self.tops.get_mut(&key) else {
            return 0;
        };
        let cancelled = (t.mask & mask).count_ones() as usize;
        t.mask &= !mask;
        if t.mask == 0 {
            self.tops.remove(&key);
        }
        self.waiting_pages -= cancelled;
        cancelled
    }

    /// Take what is due for return at `now`: everything with `all`, else
    /// what has waited `delay`, then the oldest until at most half of
    /// `max_pages` wait if more than `max_pages` do (as
    /// [`take_excess`](Self::take_excess)). Due trimmed ranges are
    /// discarded here, under the lock (a commit of their run must not race
    /// the discard; they are few: the tops of zspages, and of pre-faulted
    /// log segments at the end of a stream); the runs are returned for the
    /// caller to discard outside it. Also returns when the oldest page
    /// left will be due.
    pub(super) fn take_due(
        &mut self,
        now: Instant,
        all: bool,
        delay: Duration,
        max_pages: usize,
    ) -> (Vec<Waiting>, Option<Instant>) {
        let due = |since: Instant| all || since + delay <= now;
        let ps = self.page_size;
        let mut discarded = 0;
        let mut ranges = Vec::new();
        self.tops.retain(|_, t| {
            if !due(t.since) {
                return true;
            }
            discarded += t.ranges(ps, &mut ranges);
            false
        });
        self.waiting_pages -= discarded;
        let mut out = Vec::new();
        for q in self.waiting.iter_mut() {
            while q.front().is_some_and(|w| due(w.since)) {
                out.push(q.pop_front().expect("checked"));
            }
        }
        let taken: usize = out.iter().map(|w| w.resident).sum();
        self.waiting_pages -= taken;
        self.evict_excess(max_pages, &mut out, &mut ranges);
        self.discard_taken(&ranges, &out);
        let oldest = self
            .waiting
            .iter()
            .filter_map(|q| q.front().map(|w| w.since))
            .chain(self.tops.values().map(|t| t.since))
            .min();
        (out, oldest.map(|t| t + delay))
    }

    /// If more than `max_pages` wait, take the oldest waiting runs and
    /// trimmed ranges, by age, until at most half of `max_pages` wait (so
    /// that a burst of frees returns pages once per half bound, not at
    /// every free past it). The trimmed ranges are discarded here, under
    /// the lock; the runs are returned for the caller to discard outside
    /// it, counted in `returning_pages` meanwhile.
    pub(super) fn take_excess(&mut self, max_pages: usize) -> Vec<Waiting> {
        let (mut out, mut ranges) = (Vec::new(), Vec::new());
        self.evict_excess(max_pages, &mut out, &mut ranges);
        self.discard_taken(&ranges, &out);
        out
    }

    /// Take the oldest runs (into `out`) and trimmed ranges (into
    /// `ranges`, for discarding under the lock) until at most half of
    /// `max_pages` wait, if more than `max_pages` do.
    fn evict_excess(
        &mut self,
        max_pages: usize,
        out: &mut Vec<Waiting>,
        ranges: &mut Vec<(NonNull<u8>, usize)>,
    ) {
        if self.waiting_pages <= max_pages {
            return;
        }
        // Trimmed ranges oldest first (a log lane may have many: dead
        // pages of live segments), merged with the runs' queues.
        let mut tops: Vec<(Instant, usize)> =
            self.tops.iter().map(|(&k, t)| (t.since, k)).collect();
        tops.sort_unstable();
        let mut tops = tops.into_iter().peekable();
        while self.waiting_pages > max_pages / 2 {
            let run = (1..=MAX_CHAIN_SIZE)
                .filter_map(|n| self.waiting[n].front().map(|w| (w.since, n)))
                .min();
            match (run, tops.peek().copied()) {
                (None, None) => break,
                (Some((since, n)), top) if top.is_none_or(|(t, _)| since <= t) => {
                    let w = self.waiting[n].pop_front().expect("non-empty");
                    self.waiting_pages -= w.resident;
                    out.push(w);
                }
                (_, top) => {
                    let (_, key) = top.expect("a run is taken when no range is left");
                    tops.next();
                    let t = self.tops.remove(&key).expect("listed above");
                    self.waiting_pages -= t.ranges(self.page_size, ranges);
                }
            }
        }
    }

    /// Discard the trimmed `ranges` taken (under the lock), and count the
    /// runs taken as being returned (the caller discards them outside it).
    fn discard_taken(&mut self, ranges: &[(NonNull<u8>, usize)], runs: &[Waiting]) {
        // Trimmed ranges of live runs: nobody uses one until it is
        // committed again, which waits for this lock. (With log placement
        // a pre-faulted segment's pages above its commit wait here too: at
        // the end of a stream of stores, up to a segment's worth a lane.)
        Region::discard_all(ranges);
        self.returning_pages += runs.iter().map(|w| w.resident).sum::<usize>();
    }

    /// Put runs [`take_due`](Self::take_due) gave out back in the queue,
    /// untouched, each in its place by age (a fork waits for the round
    /// that took them).
    pub(super) fn requeue(&mut self, runs: impl IntoIterator<Item = Waiting>) {
        for w in runs {
            self.returning_pages -= w.resident;
            self.waiting_pages += w.resident;
            let q = &mut self.waiting[w.pages];
            let at = q.partition_point(|x| x.since <= w.since);
            q.insert(at, w);
        }
    }

    /// Discard the resident pages of `runs` (outside the lock; sorted by
    /// address, so adjacent wholly resident runs go as one range), all
    /// ranges in one batch.
    pub(super) fn discard_runs(page_size: usize, runs: &[Waiting]) {
        debug_assert!(runs.is_sorted_by_key(|w| w.ptr.as_ptr() as usize));
        Region::discard_all(&ranges(
            page_size,
            runs.iter().map(|w| (w.ptr, w.resident, w.pages)),
        ));
    }
}

impl Arena {
    /// Discard every page of every region, the mappings kept (the source
    /// is closing; see `PageSource::close`).
    pub(super) fn discard_regions(&self) {
        let all: Vec<_> = self.regions.iter().map(|r| (r.base, r.len)).collect();
        Region::discard_all(&all);
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for r in self.regions.drain(..) {
            r.release();
        }
    }
}

/// One reservation of address space from the OS.
pub(super) struct Region {
    base: NonNull<u8>,
    len: usize,
}

/// Address space reserved per region: large, since untouched pages cost
/// nothing, and fewer regions mean fewer mappings for the kernel to track.
#[cfg(not(miri))]
const REGION_BYTES: usize = 256 << 20;

#[cfg(not(miri))]
impl Region {
    fn reserve(min_bytes: usize) -> Result<Region> {
        let len = REGION_BYTES.max(min_bytes);
        // SAFETY: an anonymous private mapping at an address of the kernel's
        // choosing; no existing memory is affected.
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
                reason: format!("mmap failed: {}", std::io::Error::last_os_error()),
            });
        }
        Ok(Region {
            base: NonNull::new(p.cast()).expect("mmap never returns null on success"),
            len,
        })
    }

    pub(super) fn discard(p: NonNull<u8>, bytes: usize) {
        // SAFETY: `p..p+bytes` is a whole run inside a live region that no
        // zspage owns any more; dropping its contents is what we want.
        let rc = unsafe { libc::madvise(p.as_ptr().cast(), bytes, libc::MADV_DONTNEED) };
        debug_assert_eq!(rc, 0, "madvise(MADV_DONTNEED) on a run of ours failed");
    }

    /// Fault in the pages of every range of `ranges` (runs nobody owns yet)
    /// for writing, without changing their contents:
    /// `madvise(MADV_POPULATE_WRITE)` (Linux 5.14), one call per range and
    /// no page fault per page. False if the kernel does not know the
    /// advice: it says so (`EINVAL`) on the first range, before faulting
    /// anything in, and the caller stops asking.
    /// Another failure (out of memory) leaves some pages resident: the
    /// caller counts the ranges as resident all the same, an over-count
    /// until they are discarded.
    pub(super) fn populate(ranges: &[(NonNull<u8>, usize)]) -> bool {
        for &(p, bytes) in ranges {
            // SAFETY: `p..p+bytes` lies in a live region, owned by the
            // caller; populating faults pages in and writes nothing.
            let rc = unsafe { libc::madvise(p.as_ptr().cast(), bytes, libc::MADV_POPULATE_WRITE) };
            if rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
                debug_assert_eq!(p, ranges[0].0, "EINVAL comes on the first range");
                return false;
            }
        }
        true
    }

    /// Discard every range of `ranges` (each as [`Region::discard`] takes
    /// it). Where the kernel takes `process_madvise(MADV_DONTNEED)` on the
    /// calling process named by `PIDFD_SELF_THREAD_GROUP` (recent kernels;
    /// this machine's 6.18 does), one call discards up to 1,024 ranges and
    /// the other CPUs running this process take one TLB shootdown for all
    /// of them, where a `madvise` per range sends one each (measured on
    /// Linux 6.18: 1,000 ranges, 1 shootdown against 1,000). Each one
    /// interrupts whatever thread of the process runs there. Else, and for
    /// whatever a call leaves, a `madvise` per range.
    pub(super) fn discard_all(ranges: &[(NonNull<u8>, usize)]) {
        use std::sync::atomic::{AtomicBool, Ordering};
        /// The kernel refused `process_madvise` on this process once:
        /// do not ask again.
        static REFUSED: AtomicBool = AtomicBool::new(false);
        /// `PIDFD_SELF_THREAD_GROUP`: this process, whatever its pid
        /// (so a child after `fork` names itself, not its parent).
        const PIDFD_SELF: libc::c_long = -10001;
        /// `UIO_MAXIOV`.
        const MAX_IOV: usize = 1024;
        let mut done = 0;
        while ranges.len() - done > 1 && !REFUSED.load(Ordering::Relaxed) {
            let batch = &ranges[done..ranges.len().min(done + MAX_IOV)];
            let iov: Vec<libc::iovec> = batch
                .iter()
                .map(|&(p, bytes)| libc::iovec {
                    iov_base: p.as_ptr().cast(),
                    iov_len: bytes,
                })
                .collect();
            let want: usize = batch.iter().map(|&(_, b)| b).sum();
            // SAFETY: every range is inside a live region and owned by
            // nobody (as for `discard`); `iov` lives across the call.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_process_madvise,
                    PIDFD_SELF,
                    iov.as_ptr(),
                    iov.len(),
                    libc::MADV_DONTNEED,
                    0,
                )
            };
            if rc < 0 {
                REFUSED.store(true, Ordering::Relaxed);
            }
            if usize::try_from(rc) != Ok(want) {
                // Refused or stopped part way: the batch again one range at
                // a time (discarding a discarded range changes nothing).
                break;
            }
            done += batch.len();
        }
        for &(p, bytes) in &ranges[done..] {
            Region::discard(p, bytes);
        }
    }

    fn release(self) {
        // SAFETY: the region was mapped by `reserve` with this length, and the
        // pool that owned its runs is being dropped.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

// Miri cannot run mmap/madvise: each region is one heap allocation, and
// "discarding" a run zeroes it, which is what MADV_DONTNEED's observable
// effect on a private anonymous mapping is.
#[cfg(miri)]
const REGION_BYTES: usize = 1 << 20;

#[cfg(miri)]
impl Region {
    fn layout(len: usize) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(len, 4096).expect("valid layout")
    }

    fn reserve(min_bytes: usize) -> Result<Region> {
        let len = REGION_BYTES.max(min_bytes);
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(Self::layout(len)) };
        NonNull::new(p)
            .map(|base| Region { base, len })
            .ok_or_else(|| Error::OsOutOfMemory {
                bytes: len,
                reason: "the global allocator returned null".into(),
            })
    }

    pub(super) fn discard(p: NonNull<u8>, bytes: usize) {
        // SAFETY: the run is inside a live region and owned by nobody; a
        // lock-free reader with a stale address may read it, by word, as
        // `words::zero` writes it.
        unsafe { crate::words::zero(p.as_ptr(), bytes) };
    }

    pub(super) fn discard_all(ranges: &[(NonNull<u8>, usize)]) {
        for &(p, bytes) in ranges {
            Region::discard(p, bytes);
        }
    }

    /// Nothing to fault in: the global allocator's memory is resident.
    pub(super) fn populate(_ranges: &[(NonNull<u8>, usize)]) -> bool {
        true
    }

    fn release(self) {
        // SAFETY: allocated by `reserve` with the same layout.
        unsafe { std::alloc::dealloc(self.base.as_ptr(), Self::layout(self.len)) };
    }
}
