//! The OS page source: where zspages' memory comes from and goes back to.
//!
//! Memory is reserved from the OS in large regions of address space
//! (`mmap` with `MAP_NORESERVE`: no memory is committed until touched) and
//! carved into runs of 1..=32 pages, one run per zspage. A freed run is
//! handed back with `madvise(MADV_DONTNEED)`, so the process's resident
//! memory falls at once, and its address range is kept on a free list for
//! the next zspage of that length (or split for a shorter one).
//!
//! A few freed runs (at most `RUN_CACHE_PAGES` pages in all) are kept
//! resident instead, so a class that empties and refills a zspage in a
//! tight loop does not pay a `madvise` and a page fault per page each time.
//! They are reported as cached pages, never hidden.
//!
//! A *lazy* page source (pools that trim pages, see `compact.rs`) commits a
//! run's pages one by one as its zspage grows into them and can give single
//! pages of a live run back (`PageSource::decommit`); its freed runs skip
//! the cache, so a reused run holds no resident page nobody counts.
//!
//! "Pages held" counts exactly the committed pages of live runs (every page
//! of every run for an eager source), nothing else. Under Miri, which has no `mmap`, runs come from the
//! Rust allocator instead, with the same accounting.
//!
//! Invariant: `held_pages` equals the committed pages of runs handed out and
//! not yet freed (their whole lengths for an eager source); it never passes
//! `limit_pages`.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, Result};
use crate::size_class::MAX_CHAIN_SIZE;
use crate::sync::Mutex;

/// Most pages of freed runs kept resident for reuse.
pub(crate) const RUN_CACHE_PAGES: usize = 64;

/// Freed runs beyond the cache are discarded in batches of up to this many
/// pages: sorted by address, adjacent runs merged, one `madvise` per merged
/// range, and outside the arena lock. Freeing a whole pool in allocation
/// order then costs a few system calls per megabyte instead of one per
/// zspage.
const DISCARD_BATCH_PAGES: usize = 256;

/// A batch is at most `1 / DISCARD_BATCH_SHARE` of the pages held (but at
/// least [`MIN_DISCARD_BATCH_PAGES`]): the pages waiting in it are held
/// too, and a fixed megabyte was 3.4% of the Go tree's 18 MB pool. Smaller
/// batches cost more `madvise` calls on the freeing thread: 1/512 with 8
/// pages at least took `zsmem bench free`'s p99 from 0.35 to 7.9 us, 1/128
/// with 32 at least to 0.63 us (and its p99.9 from 70 to 33 us).
const DISCARD_BATCH_SHARE: usize = 128;
const MIN_DISCARD_BATCH_PAGES: usize = 32;

/// Pages a discard batch collects before it is discarded, for a source
/// holding `held` pages.
fn discard_batch_pages(held: usize) -> usize {
    (held / DISCARD_BATCH_SHARE).clamp(MIN_DISCARD_BATCH_PAGES, DISCARD_BATCH_PAGES)
}

/// Refuse a page size that is not a power of two at least as large as the
/// system's: `madvise` gives back whole OS pages, so a smaller page could
/// take a neighbour's bytes with it.
pub(crate) fn check_page_size(page_size: usize) -> Result<()> {
    let os = system_page_size();
    if !page_size.is_power_of_two() || page_size < os {
        return Err(Error::InvalidConfig(format!(
            "page size {page_size} is not a power of two of at least {os} (the system's page size)"
        )));
    }
    Ok(())
}

/// The operating system's page size.
fn system_page_size() -> usize {
    #[cfg(not(miri))]
    {
        // SAFETY: sysconf has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(n).unwrap_or(4096).max(4096)
    }
    #[cfg(miri)]
    {
        4096
    }
}

/// A run of pages handed to one zspage.
#[derive(Debug)]
pub(crate) struct Run(NonNull<u8>);

// SAFETY: a run is a plain range of process memory owned by exactly one
// zspage; moving that ownership between threads is fine. All access to the
// bytes happens under the owning class's lock.
unsafe impl Send for Run {}

impl Run {
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.0.as_ptr()
    }
}

/// Where zspages get their pages.
pub(crate) struct PageSource {
    page_size: usize,
    /// Runs are committed page by page and freed runs are never cached.
    lazy: bool,
    limit_pages: Option<usize>,
    held_pages: AtomicUsize,
    max_held_pages: AtomicUsize,
    arena: Mutex<Arena>,
}

impl PageSource {
    pub(crate) fn new(page_size: usize, limit_bytes: Option<usize>, lazy: bool) -> Self {
        PageSource {
            page_size,
            lazy,
            limit_pages: limit_bytes.map(|b| b / page_size),
            held_pages: AtomicUsize::new(0),
            max_held_pages: AtomicUsize::new(0),
            arena: Mutex::new(Arena::new(page_size)),
        }
    }

    /// Pages of live zspages.
    pub(crate) fn held_pages(&self) -> usize {
        self.held_pages.load(Ordering::Relaxed)
    }

    /// Highest `held_pages` seen (zram's `mem_used_max`).
    pub(crate) fn max_held_pages(&self) -> usize {
        self.max_held_pages.load(Ordering::Relaxed)
    }

    /// Bytes of address space reserved from the OS (resident or not).
    pub(crate) fn reserved_bytes(&self) -> usize {
        self.arena.lock().reserved_bytes()
    }

    /// Pages of freed runs still resident: kept for reuse, or waiting for
    /// their batch to be discarded.
    pub(crate) fn cached_pages(&self) -> usize {
        let a = self.arena.lock();
        a.cached_pages + a.to_discard_pages
    }

    /// Give the cached runs' pages back to the OS too.
    pub(crate) fn purge_cache(&self) {
        self.arena.lock().purge_cache();
    }

    /// Take `pages` pages for a zspage.
    pub(crate) fn alloc_run(&self, pages: usize) -> Result<Run> {
        debug_assert!(!self.lazy);
        self.take_run(pages, pages)
    }

    /// Take a run of `pages` pages of which only the first `commit` are
    /// counted as held (a lazy source: the run's pages are all discarded).
    pub(crate) fn alloc_lazy_run(&self, pages: usize, commit: usize) -> Result<Run> {
        debug_assert!(self.lazy && (1..=pages).contains(&commit));
        self.take_run(pages, commit)
    }

    fn take_run(&self, pages: usize, commit: usize) -> Result<Run> {
        debug_assert!((1..=MAX_CHAIN_SIZE).contains(&pages));
        self.reserve(commit)?;
        match self.arena.lock().alloc(pages) {
            Ok(run) => Ok(run),
            Err(e) => {
                self.held_pages.fetch_sub(commit, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    /// Count `pages` more pages of a live run as held (a lazy source's zspage
    /// growing into them), or refuse at the memory limit.
    pub(crate) fn commit(&self, pages: usize) -> Result<()> {
        debug_assert!(self.lazy);
        self.reserve(pages)
    }

    /// Give `pages` pages of a live run, from `start`, back to the OS now:
    /// they read as zeros afterwards. The caller owns them and touches them
    /// again only after committing them again.
    pub(crate) fn decommit(&self, start: NonNull<u8>, pages: usize) {
        debug_assert!(self.lazy && pages > 0);
        Region::discard(start, pages * self.page_size);
        self.held_pages.fetch_sub(pages, Ordering::Relaxed);
    }

    /// Give a zspage's pages back to the OS; `committed` of its `pages` were
    /// counted as held (all of them for an eager source).
    pub(crate) fn free_run(&self, run: Run, pages: usize, committed: usize) {
        debug_assert!(committed <= pages && (self.lazy || committed == pages));
        let limit = discard_batch_pages(self.held_pages.load(Ordering::Relaxed));
        let batch = self
            .arena
            .lock()
            .free(run, pages, committed, self.lazy, limit);
        self.held_pages.fetch_sub(committed, Ordering::Relaxed);
        if let Some(batch) = batch {
            self.discard_batch(batch);
        }
    }

    /// Discard a batch of freed runs, then make them allocatable again.
    fn discard_batch(&self, mut batch: Vec<(NonNull<u8>, usize)>) {
        batch.sort_unstable_by_key(|(p, _)| p.as_ptr() as usize);
        let page = self.page_size;
        let mut i = 0;
        while i < batch.len() {
            let (start, mut bytes) = (batch[i].0, batch[i].1 * page);
            let mut j = i + 1;
            while j < batch.len() && start.as_ptr() as usize + bytes == batch[j].0.as_ptr() as usize
            {
                bytes += batch[j].1 * page;
                j += 1;
            }
            Region::discard(start, bytes);
            i = j;
        }
        let mut arena = self.arena.lock();
        for (p, pages) in batch {
            arena.free_runs[pages].push(p);
        }
    }

    /// Count `pages` as held, or refuse if the limit would be passed.
    fn reserve(&self, pages: usize) -> Result<()> {
        // Relaxed is enough: the counter guards a quantity, not other memory.
        let mut held = self.held_pages.load(Ordering::Relaxed);
        loop {
            if let Some(limit) = self.limit_pages
                && held + pages > limit
            {
                return Err(Error::MemoryLimit {
                    limit: limit * self.page_size,
                    held: held * self.page_size,
                    needed: pages * self.page_size,
                });
            }
            match self.held_pages.compare_exchange_weak(
                held,
                held + pages,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    self.max_held_pages
                        .fetch_max(held + pages, Ordering::Relaxed);
                    return Ok(());
                }
                Err(now) => held = now,
            }
        }
    }
}

/// Pages straight from the page source, for allocators built outside the
/// pool (the lab's zbud, z3fold, zblock and slab peers): the same regions,
/// `MADV_DONTNEED` on free and run cache as zspages get, so every allocator
/// compared pays the same price for its memory.
///
/// ```
/// let pages = zsmem::os::OsPages::new(4096, None).unwrap();
/// let mut block = pages.alloc(2).unwrap();
/// block.as_mut_slice()[8191] = 7;
/// assert_eq!(pages.held_pages(), 2);
/// drop(block);
/// assert_eq!(pages.held_pages(), 0);
/// ```
#[derive(Clone)]
pub struct OsPages {
    src: std::sync::Arc<PageSource>,
}

impl std::fmt::Debug for OsPages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OsPages")
            .field("page_size", &self.src.page_size)
            .field("held_pages", &self.held_pages())
            .finish()
    }
}

impl OsPages {
    /// A source of `page_size`-byte pages (a power of two, at least 4096),
    /// holding at most `limit_bytes` if given.
    pub fn new(page_size: usize, limit_bytes: Option<usize>) -> Result<OsPages> {
        check_page_size(page_size)?;
        Ok(OsPages {
            src: std::sync::Arc::new(PageSource::new(page_size, limit_bytes, false)),
        })
    }

    /// Bytes per page.
    pub fn page_size(&self) -> usize {
        self.src.page_size
    }

    /// Take `pages` (1..=32) contiguous pages; they read as zeros the first
    /// time and hold whatever was last written after reuse.
    pub fn alloc(&self, pages: usize) -> Result<PageBlock> {
        if !(1..=MAX_CHAIN_SIZE).contains(&pages) {
            return Err(Error::InvalidConfig(format!(
                "a page block is 1..={MAX_CHAIN_SIZE} pages, not {pages}"
            )));
        }
        let run = self.src.alloc_run(pages)?;
        Ok(PageBlock {
            src: self.src.clone(),
            run: std::mem::ManuallyDrop::new(run),
            pages,
        })
    }

    /// Pages of live blocks.
    pub fn held_pages(&self) -> usize {
        self.src.held_pages()
    }

    /// Highest `held_pages` so far.
    pub fn max_held_pages(&self) -> usize {
        self.src.max_held_pages()
    }

    /// Pages of freed blocks kept resident for reuse (not in `held_pages`).
    pub fn cached_pages(&self) -> usize {
        self.src.cached_pages()
    }

    /// Give the cached pages back to the OS too.
    pub fn purge_cache(&self) {
        self.src.purge_cache();
    }
}

/// Contiguous pages owned by one allocator structure; given back to the OS
/// (or the run cache) when dropped.
pub struct PageBlock {
    src: std::sync::Arc<PageSource>,
    run: std::mem::ManuallyDrop<Run>,
    pages: usize,
}

impl std::fmt::Debug for PageBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageBlock")
            .field("addr", &self.run.as_ptr())
            .field("pages", &self.pages)
            .finish()
    }
}

impl PageBlock {
    /// Number of pages.
    pub fn pages(&self) -> usize {
        self.pages
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.pages * self.src.page_size
    }

    /// Never true: a block has at least one page.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Address of the first byte (page-aligned), for address-ordered
    /// bookkeeping; reach the bytes through the slices.
    pub fn addr(&self) -> usize {
        self.run.as_ptr() as usize
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the run is `len()` bytes of mapped memory owned by this
        // block alone (the page source hands each run out once until it is
        // freed, which only `drop` does), and the `Arc` keeps its region
        // mapped for as long as the block lives.
        unsafe { std::slice::from_raw_parts(self.run.as_ptr(), self.len()) }
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`; `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.run.as_ptr(), self.len()) }
    }
}

impl Drop for PageBlock {
    fn drop(&mut self) {
        // SAFETY: `run` is taken exactly once, here, and never used after.
        let run = unsafe { std::mem::ManuallyDrop::take(&mut self.run) };
        self.src.free_run(run, self.pages, self.pages);
    }
}

/// Address space bookkeeping, under the page source's lock.
struct Arena {
    page_size: usize,
    regions: Vec<Region>,
    /// Next unused byte of the last region.
    bump: usize,
    /// Free, discarded runs by length in pages (index 0 unused).
    free_runs: [Vec<NonNull<u8>>; MAX_CHAIN_SIZE + 1],
    /// Free runs still resident, by length; at most `RUN_CACHE_PAGES` pages.
    cached: [Vec<NonNull<u8>>; MAX_CHAIN_SIZE + 1],
    cached_pages: usize,
    /// Freed runs waiting to be discarded in one batch (still resident).
    to_discard: Vec<(NonNull<u8>, usize)>,
    /// Resident pages of those runs.
    to_discard_pages: usize,
}

// SAFETY: the arena only stores addresses of memory it reserved; it never
// dereferences them. It is only reached through the page source's mutex.
unsafe impl Send for Arena {}

impl Arena {
    fn new(page_size: usize) -> Self {
        Arena {
            page_size,
            regions: Vec::new(),
            bump: 0,
            free_runs: std::array::from_fn(|_| Vec::new()),
            cached: std::array::from_fn(|_| Vec::new()),
            cached_pages: 0,
            to_discard: Vec::new(),
            to_discard_pages: 0,
        }
    }

    fn purge_cache(&mut self) {
        for pages in 1..=MAX_CHAIN_SIZE {
            while let Some(p) = self.cached[pages].pop() {
                Region::discard(p, pages * self.page_size);
                self.free_runs[pages].push(p);
            }
        }
        self.cached_pages = 0;
        for (p, pages) in std::mem::take(&mut self.to_discard) {
            Region::discard(p, pages * self.page_size);
            self.free_runs[pages].push(p);
        }
        self.to_discard_pages = 0;
    }

    fn reserved_bytes(&self) -> usize {
        self.regions.iter().map(|r| r.len).sum()
    }

    fn alloc(&mut self, pages: usize) -> Result<Run> {
        if let Some(p) = self.cached[pages].pop() {
            self.cached_pages -= pages;
            return Ok(Run(p));
        }
        if let Some(p) = self.free_runs[pages].pop() {
            return Ok(Run(p));
        }
        // Split a longer free run rather than grow the address space.
        for longer in pages + 1..=MAX_CHAIN_SIZE {
            if let Some(p) = self.free_runs[longer].pop() {
                // SAFETY: `p` starts a free run of `longer` pages inside one
                // region, so `p + pages * page_size` is inside that run.
                let rest = unsafe { p.add(pages * self.page_size) };
                self.free_runs[longer - pages].push(rest);
                return Ok(Run(p));
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
        Ok(Run(p))
    }

    /// Take back a run with `resident` of its `pages` pages resident: into
    /// the cache if it has room (never for a lazy source), else onto the
    /// discard list; a discard list of `batch_pages` pages is returned for
    /// the caller to discard outside the lock.
    fn free(
        &mut self,
        run: Run,
        pages: usize,
        resident: usize,
        lazy: bool,
        batch_pages: usize,
    ) -> Option<Vec<(NonNull<u8>, usize)>> {
        if !lazy && self.cached_pages + pages <= RUN_CACHE_PAGES {
            self.cached[pages].push(run.0);
            self.cached_pages += pages;
            return None;
        }
        self.to_discard.push((run.0, pages));
        self.to_discard_pages += resident;
        if self.to_discard_pages < batch_pages {
            return None;
        }
        self.to_discard_pages = 0;
        Some(std::mem::take(&mut self.to_discard))
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
struct Region {
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

    fn discard(p: NonNull<u8>, bytes: usize) {
        // SAFETY: `p..p+bytes` is a whole run inside a live region that no
        // zspage owns any more; dropping its contents is what we want.
        let rc = unsafe { libc::madvise(p.as_ptr().cast(), bytes, libc::MADV_DONTNEED) };
        debug_assert_eq!(rc, 0, "madvise(MADV_DONTNEED) on a run of ours failed");
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

    fn discard(p: NonNull<u8>, bytes: usize) {
        // SAFETY: the run is inside a live region and owned by nobody.
        unsafe { std::ptr::write_bytes(p.as_ptr(), 0, bytes) };
    }

    fn release(self) {
        // SAFETY: allocated by `reserve` with the same layout.
        unsafe { std::alloc::dealloc(self.base.as_ptr(), Self::layout(self.len)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_reused_split_and_counted() {
        let src = PageSource::new(4096, None, false);
        let a = src.alloc_run(8).unwrap();
        let a_addr = a.as_ptr() as usize;
        assert_eq!(src.held_pages(), 8);
        src.free_run(a, 8, 8);
        assert_eq!(src.held_pages(), 0);
        assert_eq!(src.cached_pages(), 8);
        src.purge_cache();
        assert_eq!(src.cached_pages(), 0);
        // A 3-page run is cut from the freed 8-page one.
        let b = src.alloc_run(3).unwrap();
        assert_eq!(b.as_ptr() as usize, a_addr);
        let c = src.alloc_run(5).unwrap();
        assert_eq!(c.as_ptr() as usize, a_addr + 3 * 4096);
        assert_eq!(src.held_pages(), 8);
        assert_eq!(src.max_held_pages(), 8);
        src.free_run(b, 3, 3);
        src.free_run(c, 5, 5);
        assert_eq!(src.held_pages(), 0);
    }

    #[test]
    fn cache_is_bounded_and_reused_first() {
        let src = PageSource::new(4096, None, false);
        // 8 runs fill the cache; with so few pages held, a discard batch is
        // the smallest one (32 pages): every 4th later run completes one.
        let runs: Vec<Run> = (0..12).map(|_| src.alloc_run(8).unwrap()).collect();
        let first = runs[0].as_ptr();
        for (i, r) in runs.into_iter().enumerate() {
            src.free_run(r, 8, 8);
            let n = i + 1;
            let want = if n <= 8 {
                n * 8
            } else {
                RUN_CACHE_PAGES + (n - 8) % 4 * 8
            };
            assert_eq!(src.cached_pages(), want, "after {n} frees");
        }
        let again = src.alloc_run(8).unwrap();
        assert_ne!(
            again.as_ptr(),
            first,
            "a cached (resident) run comes back first"
        );
        assert_eq!(src.cached_pages(), RUN_CACHE_PAGES - 8);
        src.free_run(again, 8, 8);
        src.purge_cache();
        assert_eq!(src.cached_pages(), 0);
        assert_eq!(src.held_pages(), 0);
    }

    #[test]
    fn discard_batches_grow_with_the_pages_held() {
        // The pages waiting for a batch are held too: a batch is a small
        // share of the pool, from 8 pages up to 256.
        assert_eq!(discard_batch_pages(0), MIN_DISCARD_BATCH_PAGES);
        assert_eq!(discard_batch_pages(64 * DISCARD_BATCH_SHARE), 64);
        assert_eq!(discard_batch_pages(usize::MAX), DISCARD_BATCH_PAGES);
        let n = if cfg!(miri) { 40 } else { 2000 };
        let src = PageSource::new(4096, None, true);
        let runs: Vec<Run> = (0..n).map(|_| src.alloc_lazy_run(8, 8).unwrap()).collect();
        let mut most = 0;
        for r in runs {
            src.free_run(r, 8, 8);
            let pending = src.cached_pages();
            most = most.max(pending);
            assert!(
                pending < discard_batch_pages(src.held_pages() + pending).max(8) + 8,
                "{pending} pages wait with {} held",
                src.held_pages()
            );
        }
        assert!(most > 0 && src.held_pages() == 0);
    }

    #[test]
    fn limit_refuses_and_loses_nothing() {
        let src = PageSource::new(4096, Some(4 * 4096), false);
        let a = src.alloc_run(3).unwrap();
        let e = src.alloc_run(2).unwrap_err();
        assert!(matches!(e, Error::MemoryLimit { .. }), "{e}");
        assert_eq!(src.held_pages(), 3);
        src.free_run(a, 3, 3);
        let b = src.alloc_run(4).unwrap();
        src.free_run(b, 4, 4);
    }

    #[test]
    fn discarded_runs_read_back_as_zero() {
        let src = PageSource::new(4096, None, false);
        let a = src.alloc_run(1).unwrap();
        let p = a.as_ptr();
        // SAFETY: the run is ours and 4096 bytes long.
        unsafe { p.write_bytes(0xAB, 4096) };
        src.free_run(a, 1, 1);
        src.purge_cache();
        let b = src.alloc_run(1).unwrap();
        assert_eq!(b.as_ptr(), p);
        // SAFETY: as above.
        let bytes = unsafe { std::slice::from_raw_parts(b.as_ptr(), 4096) };
        assert!(bytes.iter().all(|&x| x == 0));
        src.free_run(b, 1, 1);
    }

    #[test]
    fn lazy_runs_commit_and_decommit_page_by_page() {
        let src = PageSource::new(4096, Some(6 * 4096), true);
        let a = src.alloc_lazy_run(8, 1).unwrap();
        assert_eq!(src.held_pages(), 1);
        src.commit(4).unwrap();
        assert_eq!(src.held_pages(), 5);
        // SAFETY: the run is ours and 8 pages long; 5 are committed.
        unsafe { a.as_ptr().write_bytes(0xCD, 5 * 4096) };
        assert!(matches!(src.commit(2), Err(Error::MemoryLimit { .. })));
        assert_eq!(src.held_pages(), 5, "a refused commit counts nothing");
        // SAFETY: pages 3 and 4 are inside the run.
        let tail = unsafe { NonNull::new_unchecked(a.as_ptr().add(3 * 4096)) };
        src.decommit(tail, 2);
        assert_eq!(src.held_pages(), 3);
        // SAFETY: as above; a decommitted page reads as zeros.
        let bytes = unsafe { std::slice::from_raw_parts(a.as_ptr(), 5 * 4096) };
        assert!(bytes[..3 * 4096].iter().all(|&x| x == 0xCD));
        assert!(bytes[3 * 4096..].iter().all(|&x| x == 0));
        src.free_run(a, 8, 3);
        assert_eq!(src.held_pages(), 0);
        assert_eq!(
            src.cached_pages(),
            3,
            "resident pages waiting for their batch"
        );
        src.purge_cache();
        assert_eq!((src.cached_pages(), src.max_held_pages()), (0, 5));
    }

    #[test]
    fn page_blocks_count_and_return_their_pages() {
        let os = OsPages::new(4096, Some(8 * 4096)).unwrap();
        assert!(OsPages::new(1000, None).is_err());
        assert!(os.alloc(0).is_err() && os.alloc(MAX_CHAIN_SIZE + 1).is_err());
        let mut a = os.alloc(3).unwrap();
        assert_eq!((a.len(), a.pages(), a.addr() % 4096), (3 * 4096, 3, 0));
        a.as_mut_slice().fill(0x5A);
        let b = os.alloc(5).unwrap();
        assert!(matches!(os.alloc(1), Err(Error::MemoryLimit { .. })));
        assert!(a.as_slice().iter().all(|&x| x == 0x5A));
        assert!(b.as_slice().iter().all(|&x| x == 0));
        drop(a);
        assert_eq!(os.held_pages(), 5);
        let clone = os.clone();
        drop(os);
        drop(b); // the block keeps the source alive
        assert_eq!(clone.held_pages(), 0);
        assert_eq!(clone.max_held_pages(), 8);
    }
}
