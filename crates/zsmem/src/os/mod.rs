//! The OS page source: where zspages' memory comes from and goes back to.
//!
//! Memory is reserved from the OS in large regions of address space
//! (`mmap` with `MAP_NORESERVE`: no memory is committed until touched) and
//! carved into runs of 1..=32 pages, one run per zspage (`arena.rs`).
//!
//! A freed run goes back as the pool's [`PageReturn`] says: at once, with
//! `madvise(MADV_DONTNEED)` on the freeing thread, or (the default) into
//! the return queue, from which new zspages take their runs first and the
//! returner thread (`page_return.rs`) discards what has waited long enough.
//! Its address range is then kept free for the next zspage of that length
//! (or split for a shorter one).
//!
//! A *lazy* page source (pools that trim pages, see `compact.rs`) commits a
//! run's pages one by one as its zspage grows into them and can give single
//! pages of a live run back (`PageSource::decommit`), at once or through
//! the queue; a commit of pages still waiting there takes them back out
//! (they were never discarded), and the returner discards waiting trimmed
//! pages under the source's lock, so no discard races a commit.
//!
//! A source fed a stream of new runs (log placement) asks the returner to
//! fault runs in ahead of it (`PageSource::refill`); they wait in the
//! queue as freed runs do, so the next runs are resident when taken.
//!
//! A free never waits for the source's lock: if another thread holds it,
//! the free leaves its entry in the *inbox*, which the lock's next holder
//! applies before anything else (docs/DESIGN.md, "Page return").
//!
//! The page bound: a free that leaves more than `max_pages` waiting returns
//! the oldest waiting runs and trimmed ranges, down to half the bound, on
//! its own thread; pages a free left in the inbox past the bound are
//! returned by the lock's holder, which looks at the inbox after every
//! release (`PageSource::look_after_inbox`).
//!
//! "Pages held" counts exactly the committed pages of live runs (every page
//! of every run for an eager source); pages in the queue or being returned
//! are `cached_pages`, never hidden. Under Miri, which has no `mmap`, runs
//! come from the Rust allocator instead, with the same accounting.
//!
//! Invariant: `held_pages` equals the committed pages of runs handed out and
//! not yet freed by the source and its siblings (`sibling`: they share one
//! budget; their whole lengths for an eager source); it never passes
//! `limit_pages` but by a `recount`, for pages freed in the same breath.
//! `cached_pages` equals the resident pages of this source's queued runs
//! and ranges, in the arena or the inbox, plus those being discarded or
//! faulted in ahead; the queued ones (arena and inbox) are at most
//! `max_pages` whenever no call on the source is in progress;
//! queued trimmed ranges never overlap and each lies in one run; a source
//! with pages queued, or whose demand since its last refill holds
//! `PREFAULT_MIN_PAGES` (an ask not yet answered), is registered with the
//! returner exactly once.

mod arena;
mod budget;
pub(crate) use arena::span;
mod blocks;
#[cfg(all(test, loom))]
mod loom_models;
pub(crate) mod returner;
#[cfg(all(test, not(loom)))]
mod tests;

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

pub use blocks::{OsPages, PageBlock};

use crate::config::PageReturn;
use crate::error::{Error, Result};
use crate::size_class::MAX_CHAIN_SIZE;
use crate::sync::atomic::{AtomicUsize as SyncCount, Ordering as SyncOrdering};
use crate::sync::{Mutex, MutexGuard};
use arena::{Arena, PREFAULT_MIN_PAGES, Region};
use budget::Budget;
use returner::{Returner, Served};

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
// SAFETY: shared access to a run only reads its bytes (readers of a class
// hold its lock shared); every write goes through the class's exclusive
// lock, so no write races a read.
unsafe impl Sync for Run {}

impl Run {
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.0.as_ptr()
    }
}

/// Where zspages get their pages.
pub(crate) struct PageSource {
    page_size: usize,
    /// Runs are committed page by page.
    lazy: bool,
    policy: PageReturn,
    limit_pages: Option<usize>,
    /// Held pages, shared with this source's siblings (one memory limit).
    budget: Arc<Budget>,
    /// This source's cell of spare pages in `budget` (`None` with a limit:
    /// every page is counted on the shared count, so the limit is exact).
    cell: Option<usize>,
    arena: Mutex<Arena>,
    /// Pages frees queued while another thread held `arena` (applied by
    /// whoever next holds it, before anything else), and the registration
    /// flag. Taken after `arena` when both are, held only for a push, a
    /// swap or a look.
    inbox: Mutex<Inbox>,
    /// Entries in the inbox (read without its lock, to see whether to
    /// look).
    inbox_ops: SyncCount,
    /// Resident pages in the inbox, counted as cached.
    inbox_pages: AtomicUsize,
    /// Resident pages in the arena's queue when its lock was last
    /// released: with `inbox_pages`, what a free that could not take the
    /// lock compares with the bound (`look_after_inbox`).
    queued_hint: AtomicUsize,
    /// For registering with the returner thread.
    me: Weak<PageSource>,
    /// Who gives this source's waiting pages back.
    returner: Arc<Returner>,
    /// The owner is dropping: freed runs skip the queue (the regions are
    /// about to be unmapped).
    closing: std::sync::atomic::AtomicBool,
    /// Most pages the returner keeps pre-faulted ahead of demand (0: none;
    /// see [`PageSource::refill`]).
    prefault_pages: usize,
}

/// Most pages faulted in per call before the returner yields (two log
/// segments: about 60 us on this project's machine), so that where the
/// scheduler lets it onto a CPU a storing thread wants, it holds it
/// briefly.
const PREFAULT_BATCH: usize = 64;

/// The kernel refused `MADV_POPULATE_WRITE` once (before Linux 5.14): no
/// source pre-faults again.
static PREFAULT_REFUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Pre-faulting runs only in real builds: Miri has no `mmap` and no
/// returner thread, and the loom models leave it out (it is the returner's
/// own work, outside the hand-off they check).
const PREFAULT_BUILT: bool = !cfg!(miri) && !cfg!(loom);

/// The returner serves a source through these three calls.
impl Served for PageSource {
    fn closing(&self) -> bool {
        PageSource::closing(self)
    }

    fn refill(&self, yielding: bool) {
        PageSource::refill(self, yielding)
    }

    fn return_due_yielding(&self, now: Instant) -> Option<Instant> {
        PageSource::return_due_yielding(self, now)
    }
}

impl PageSource {
    pub(crate) fn new(
        page_size: usize,
        limit_bytes: Option<usize>,
        lazy: bool,
        policy: PageReturn,
    ) -> Arc<Self> {
        Self::for_pool(page_size, limit_bytes, lazy, policy, 0)
    }

    /// As [`new`](Self::new), keeping up to `prefault_pages` pages
    /// pre-faulted ahead of a stream of new zspages (with a delayed
    /// policy; see [`refill`](Self::refill)). Its siblings do the same.
    pub(crate) fn for_pool(
        page_size: usize,
        limit_bytes: Option<usize>,
        lazy: bool,
        policy: PageReturn,
        prefault_pages: usize,
    ) -> Arc<Self> {
        Self::with_budget(
            page_size,
            lazy,
            policy,
            limit_bytes.map(|b| b / page_size),
            Arc::new(Budget::default()),
            Returner::global(),
            prefault_pages,
        )
    }

    /// A source of its own (its own arena, lock and return queue) that
    /// counts its pages with this one's against the same limit: a log lane
    /// gets one, so that lanes committing and giving back pages on
    /// different threads never meet on a lock.
    pub(crate) fn sibling(&self) -> Arc<PageSource> {
        Self::with_budget(
            self.page_size,
            self.lazy,
            self.policy,
            self.limit_pages,
            self.budget.clone(),
            self.returner.clone(),
            self.prefault_pages,
        )
    }

    fn with_budget(
        page_size: usize,
        lazy: bool,
        policy: PageReturn,
        limit_pages: Option<usize>,
        budget: Arc<Budget>,
        returner: Arc<Returner>,
        prefault_pages: usize,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| PageSource {
            page_size,
            lazy,
            policy,
            limit_pages,
            cell: limit_pages.is_none().then(|| budget.cell()),
            budget,
            arena: Mutex::new(Arena::new(page_size)),
            inbox: Mutex::new(Inbox::default()),
            inbox_ops: SyncCount::new(0),
            inbox_pages: AtomicUsize::new(0),
            queued_hint: AtomicUsize::new(0),
            me: me.clone(),
            returner,
            closing: Default::default(),
            prefault_pages: if PREFAULT_BUILT && matches!(policy, PageReturn::Delayed { .. }) {
                prefault_pages
            } else {
                0
            },
        })
    }

    /// Pages of live zspages.
    pub(crate) fn held_pages(&self) -> usize {
        self.budget.held()
    }

    /// Highest `held_pages` seen (zram's `mem_used_max`).
    pub(crate) fn max_held_pages(&self) -> usize {
        self.budget.max_held()
    }

    /// Bytes of address space reserved from the OS (resident or not).
    pub(crate) fn reserved_bytes(&self) -> usize {
        self.lock().reserved_bytes()
    }

    /// Pages freed and still resident, waiting in the return queue or
    /// being returned, and pages being faulted in ahead (resident by the
    /// end of the call that faults them in).
    pub(crate) fn cached_pages(&self) -> usize {
        let a = self.lock();
        a.waiting_pages
            + a.returning_pages
            + a.filling_pages
            + self.inbox_pages.load(Ordering::Relaxed)
    }

    /// Give every waiting page back to the OS now; on return none is
    /// waiting or being returned (pages the returner thread took are
    /// waited for: it discards them outside the lock).
    pub(crate) fn purge_cache(&self) {
        let mut round = 0;
        // No refill may start or go on (its ask is answered, a running one
        // stops before its next batch), and the batch being faulted in
        // joins the queue first, all seen under one lock.
        loop {
            let mut arena = self.lock();
            arena.take_demand();
            arena.refill_generation += 1;
            if arena.filling_pages == 0 {
                break;
            }
            drop(arena);
            crate::sync::spin_wait(&mut round);
        }
        self.return_due(Instant::now(), true);
        while self.lock().returning_pages > 0 {
            crate::sync::spin_wait(&mut round);
        }
    }

    /// The owner is being dropped: freed runs go straight to the free
    /// lists, and every page goes back to the OS now. The page returner
    /// may hold this source for a round, and at idle priority on a busy
    /// machine a round can last 100 ms or more: the regions are unmapped
    /// only when it lets go, but their pages are discarded here, by the
    /// thread that drops the pool (measured: a destroyed 64K-slot store's
    /// 22 MB stayed resident for 100 ms without this). The mappings stay
    /// until then, so a discard the returner makes outside the lock never
    /// lands on another mapping.
    pub(crate) fn close(&self) {
        self.closing.store(true, Ordering::Relaxed);
        if !cfg!(miri) {
            self.lock().discard_regions();
        }
    }

    /// Whether the owner is being dropped.
    pub(crate) fn closing(&self) -> bool {
        self.closing.load(Ordering::Relaxed)
    }

    /// Take `pages` pages for a zspage, all committed.
    pub(crate) fn alloc_run(&self, pages: usize) -> Result<Run> {
        debug_assert!(!self.lazy);
        self.take_run(pages, pages).map(|(run, _)| run)
    }

    /// Take a run of `pages` pages with its first `commit` committed;
    /// returns the run and how many of its first pages are committed
    /// (always `commit`: resident pages of a reused run beyond them wait in
    /// the queue as the run's top).
    pub(crate) fn alloc_lazy_run(&self, pages: usize, commit: usize) -> Result<(Run, usize)> {
        debug_assert!(self.lazy && (1..=pages).contains(&commit));
        self.take_run(pages, commit)
    }

    fn take_run(&self, pages: usize, commit: usize) -> Result<(Run, usize)> {
        debug_assert!((1..=MAX_CHAIN_SIZE).contains(&pages));
        // A forked child's first new zspage starts its returner.
        self.returner.resume();
        let mut arena = self.lock();
        if let Some(w) = arena.take_waiting(pages) {
            if self.reserve(commit).is_ok() {
                let ask = w.prefaulted && self.note_demand(&mut arena, pages);
                if w.resident > commit {
                    // Resident pages beyond what the new zspage needs wait
                    // on as its top: returned after the delay unless it
                    // grows into them first (a commit takes them back).
                    let top = arena::span(commit, w.resident - commit);
                    arena.queue_top(w.ptr, top, Instant::now());
                }
                drop(arena);
                if ask {
                    self.ensure_registered(Instant::now());
                }
                return Ok((Run(w.ptr), commit));
            }
            arena.untake_waiting(w);
        }
        self.reserve(commit)?;
        match arena.alloc(pages) {
            Ok(p) => {
                if self.note_demand(&mut arena, pages) {
                    drop(arena);
                    self.ensure_registered(Instant::now());
                }
                Ok((Run(p), commit))
            }
            Err(e) => {
                self.budget.give(self.cell, commit);
                Err(e)
            }
        }
    }

    /// Count `pages` more pages of live run `run`, from its page `first`,
    /// as held (a lazy source's zspage growing into them), or refuse at the
    /// memory limit. Those of them still waiting to be returned stay
    /// resident.
    pub(crate) fn commit(&self, run: &Run, first: usize, pages: usize) -> Result<()> {
        debug_assert!(self.lazy);
        self.reserve(pages)?;
        if !matches!(self.policy, PageReturn::Immediate) {
            self.lock().cancel_tops(run.0, arena::span(first, pages));
        }
        Ok(())
    }

    /// Count the pages of live run `run` that `mask` names (a bit per
    /// page) as held again, past the memory limit if need be (and not as a
    /// new peak): pages given back from the middle of a run (a log
    /// segment's dead pages) just before the whole run is freed, so that
    /// the run's held pages are a prefix when it is. Those still waiting to
    /// be returned stay resident; those returned already are counted until
    /// the run's pages are returned (an over-count for at most the return
    /// delay). One step however many pages: it is on the free path.
    pub(crate) fn recount(&self, run: &Run, mask: u32) {
        debug_assert!(self.lazy);
        self.budget.recount(mask.count_ones() as usize);
        if !matches!(self.policy, PageReturn::Immediate) {
            // On the free path (a segment's last object went): applied in
            // order with the frees around it, never waiting for the lock.
            self.apply_or_defer(Deferred::Recount { run: run.0, mask });
            self.look_after_inbox();
        }
    }

    /// Give the pages of live run `run` that `mask` names (a bit per page)
    /// back: at once or through the queue; they may read as zeros
    /// afterwards. The caller owns them and touches them again only after
    /// committing them again.
    pub(crate) fn decommit(&self, run: &Run, mask: u32) {
        debug_assert!(self.lazy && mask != 0);
        self.budget.give(self.cell, mask.count_ones() as usize);
        match self.policy {
            PageReturn::Immediate => {
                for (first, pages) in arena::bit_runs(mask) {
                    // SAFETY: a bit names a page of the run.
                    let start = unsafe { run.0.add(first * self.page_size) };
                    Region::discard(start, pages * self.page_size);
                }
            }
            PageReturn::Delayed { .. } => self.queue(Deferred::Top {
                run: run.0,
                mask,
                since: Instant::now(),
            }),
        }
    }

    /// Give a zspage's pages back; `committed` of its `pages` were counted
    /// as held (all of them for an eager source), and are its first ones.
    pub(crate) fn free_run(&self, run: Run, pages: usize, committed: usize) {
        debug_assert!(committed <= pages && (self.lazy || committed == pages));
        if committed > 0 {
            self.budget.give(self.cell, committed);
        }
        if self.closing.load(Ordering::Relaxed) {
            return;
        }
        match self.policy {
            PageReturn::Immediate => {
                if committed > 0 {
                    Region::discard(run.0, committed * self.page_size);
                }
                self.lock().put_free(run.0, pages);
            }
            PageReturn::Delayed { .. } => self.queue(Deferred::Run {
                ptr: run.0,
                pages,
                resident: committed,
                since: Instant::now(),
            }),
        }
    }

    /// The arena, locked, with what frees left in the inbox applied first;
    /// its release looks after the inbox (`Locked`).
    fn lock(&self) -> Locked<'_> {
        let mut arena = self.arena.lock();
        self.drain(&mut arena);
        Locked {
            src: self,
            arena: Some(arena),
        }
    }

    /// Release the arena lock, publishing how many pages its queue holds
    /// for the frees that cannot take it (`look_after_inbox`). The caller
    /// looks after the inbox afterwards (or leaves it to its own caller).
    fn release(&self, arena: MutexGuard<'_, Arena>) {
        self.queued_hint
            .store(arena.waiting_pages, Ordering::Relaxed);
        drop(arena);
    }

    /// Queue freed pages without waiting for the arena lock: applied at
    /// once if it is free, else left in the inbox for whoever takes it next
    /// (a free never sleeps on the lock while the returner or an
    /// allocation holds it: issue 13's p99.9). Either way the source is
    /// then registered, so the returner's next round takes them. No more
    /// than the bound waits once the free is done (`keep_bound`,
    /// `look_after_inbox`).
    fn queue(&self, op: Deferred) {
        let now = op.since();
        self.apply_or_defer(op);
        // The look at the inbox this takes its lock for is this free's
        // look after its release or its push (see `look_after_inbox`).
        if self.ensure_registered(now) {
            self.look_after_inbox();
        }
    }

    /// Apply `op` now if the arena lock is free (then keep the bound:
    /// `keep_bound`), else leave it in the inbox for the lock's holder. The
    /// caller then looks after the inbox.
    fn apply_or_defer(&self, op: Deferred) {
        match self.arena.try_lock() {
            Some(mut arena) => {
                self.drain(&mut arena);
                op.apply(&mut arena);
                self.keep_bound(arena);
            }
            None => self.defer(op),
        }
    }

    /// Leave `op` in the inbox for the arena lock's holder.
    fn defer(&self, op: Deferred) {
        let pages = op.resident();
        let mut inbox = self.inbox.lock();
        inbox.ops.push(op);
        self.inbox_ops.fetch_add(1, SyncOrdering::Release);
        self.inbox_pages.fetch_add(pages, Ordering::Relaxed);
    }

    /// Release the arena lock after frees were applied (by this call or,
    /// from the inbox, by whoever holds it): if more than `max_pages` now
    /// wait, return the oldest, down to half the bound, on this thread and
    /// now (the returner runs at idle priority and may get no CPU, and no
    /// later free may come); else one comparison. Takes the lock again,
    /// without waiting, to put the returned runs back on the free lists;
    /// the caller then looks after the inbox.
    fn keep_bound(&self, mut arena: MutexGuard<'_, Arena>) {
        let PageReturn::Delayed { max_pages, .. } = self.policy else {
            return self.release(arena);
        };
        if arena.waiting_pages <= max_pages {
            return self.release(arena);
        }
        let runs = arena.take_excess(max_pages);
        self.release(arena);
        self.discard(runs, false);
    }

    /// Bring the queue back within its bound if frees that found the arena
    /// lock held left pages past it in the inbox: take the lock if it is
    /// free (never wait for it), apply the inbox and return the excess
    /// (`keep_bound`), and look again. If another thread holds the lock,
    /// that thread looks after it releases.
    ///
    /// Every release of the arena lock and every push to the inbox is
    /// followed by this look: after a `SeqCst` fence, or (a free) after a
    /// section under the inbox lock. A free that pushes and the lock's
    /// holder that releases cannot both miss the other: either the
    /// holder's look sees the entry, or the pusher's look comes after the
    /// release and finds the lock free (or held by a later holder, which
    /// looks in its turn). The comparison uses the queue's size the last
    /// holder published (`queued_hint`).
    fn look_after_inbox(&self) {
        let PageReturn::Delayed { max_pages, .. } = self.policy else {
            return;
        };
        loop {
            crate::sync::atomic::fence(SyncOrdering::SeqCst);
            if self.inbox_ops.load(SyncOrdering::Relaxed) == 0
                || self.inbox_pages.load(Ordering::Relaxed)
                    + self.queued_hint.load(Ordering::Relaxed)
                    <= max_pages
            {
                return;
            }
            let Some(mut arena) = self.arena.try_lock() else {
                return;
            };
            self.drain(&mut arena);
            self.keep_bound(arena);
        }
    }

    /// Apply the inbox to `arena` (locked), if it holds anything.
    fn drain(&self, arena: &mut Arena) {
        if self.inbox_ops.load(SyncOrdering::Acquire) > 0 {
            self.drain_into(arena, &mut self.inbox.lock());
        }
    }

    /// Apply `inbox` (locked) to `arena` (locked).
    fn drain_into(&self, arena: &mut Arena, inbox: &mut Inbox) {
        self.inbox_ops
            .fetch_sub(inbox.ops.len(), SyncOrdering::Relaxed);
        for op in inbox.ops.drain(..) {
            self.inbox_pages.fetch_sub(op.resident(), Ordering::Relaxed);
            op.apply(arena);
        }
    }

    /// Pages were just queued: register with the returner unless the source
    /// is registered, or return due pages here if no returner serves it.
    /// The flag is set and cleared under the inbox lock, after the pages
    /// are queued (here) and after the arena and inbox are seen empty (in
    /// `return_due`), so a source with pages waiting is never left
    /// unregistered, nor registered twice. Returns whether the inbox held
    /// entries at that look.
    fn ensure_registered(&self, now: Instant) -> bool {
        let (registered, pending) = {
            let mut inbox = self.inbox.lock();
            let pending = !inbox.ops.is_empty();
            (std::mem::replace(&mut inbox.registered, true), pending)
        };
        if registered {
            // Registered in a forked child's parent: its thread is not here.
            self.returner.resume();
            return pending;
        }
        if !self.returner.register(self.me.clone() as Weak<dyn Served>) {
            // No thread serves the source: return what is due ourselves,
            // now and at every later queueing (the flag stays clear).
            self.return_due(now, false);
            self.inbox.lock().registered = false;
        }
        pending
    }

    /// Return the pages that are due at `now` (all of them with `all`);
    /// returns when the oldest page left will be due, or `None` when none
    /// is left (the source is then no longer registered).
    pub(crate) fn return_due(&self, now: Instant, all: bool) -> Option<std::time::Instant> {
        self.return_due_paced(now, all, false)
    }

    /// The returner's [`return_due`](Self::return_due): it yields its CPU
    /// between batches (docs/DESIGN.md, "The returner runs at idle
    /// priority").
    pub(crate) fn return_due_yielding(&self, now: Instant) -> Option<std::time::Instant> {
        self.return_due_paced(now, false, true)
    }

    fn return_due_paced(&self, now: Instant, all: bool, yielding: bool) -> Option<Instant> {
        let (delay, max_pages) = match self.policy {
            PageReturn::Immediate => return None,
            PageReturn::Delayed { delay, max_pages } => (delay, max_pages),
        };
        let next = self.discard_due(now, all, delay, max_pages, yielding);
        if next.is_some() {
            return next;
        }
        // Nothing waited: unregister, unless a free queued meanwhile or an
        // allocation asked for a refill (it did so before this look, or it
        // finds the flag clear after it and registers again).
        let mut arena = Locked {
            src: self,
            arena: Some(self.arena.lock()),
        };
        let mut inbox = self.inbox.lock();
        self.drain_into(&mut arena, &mut inbox);
        if arena.waiting_pages > 0 || arena.asked() {
            return Some(now);
        }
        inbox.registered = false;
        None
    }

    /// Give back the runs that are due at `now` (all with `all`) and the
    /// oldest beyond the page bound (`discard`), yielding the CPU between
    /// batches with `yielding`; returns when the oldest run left is due.
    /// Leaves the registration alone.
    fn discard_due(
        &self,
        now: Instant,
        all: bool,
        delay: std::time::Duration,
        max_pages: usize,
        yielding: bool,
    ) -> Option<Instant> {
        let (runs, next) = self.lock().take_due(now, all, delay, max_pages);
        let done = self.discard(runs, yielding);
        self.look_after_inbox();
        if done { next } else { Some(now) }
    }

    /// Discard `runs` (taken off the queue, counted in `returning_pages`)
    /// outside the arena lock, in batches of at most `RETURN_BATCH` pages,
    /// each batch's runs free for reuse as soon as it is back (the later
    /// batches' runs wait off the queue), yielding the CPU between batches
    /// with `yielding` (the returner, which also stops for a fork waiting:
    /// the runs left go back in the queue untouched; false then). Takes the
    /// lock without waiting for it; the caller looks after the inbox.
    fn discard(&self, mut runs: Vec<arena::Waiting>, yielding: bool) -> bool {
        runs.sort_unstable_by_key(|w| w.ptr.as_ptr() as usize);
        let mut done = 0;
        while done < runs.len() {
            if yielding && self.returner.fork_waiting() {
                // A fork waits for this round (the returner's).
                self.lock().requeue(runs.drain(done..));
                return false;
            }
            let mut pages = 0;
            let n = runs[done..]
                .iter()
                .take_while(|w| {
                    pages += w.resident;
                    pages <= RETURN_BATCH
                })
                .count()
                .max(1);
            let batch = &runs[done..done + n];
            Arena::discard_runs(self.page_size, batch);
            match self.arena.try_lock() {
                Some(mut arena) => {
                    self.drain(&mut arena);
                    for w in batch {
                        Deferred::returned(w).apply(&mut arena);
                    }
                    self.release(arena);
                }
                // Whoever holds the lock puts them back with the inbox.
                None => batch.iter().for_each(|w| self.defer(Deferred::returned(w))),
            }
            done += n;
            if yielding && done < runs.len() {
                std::thread::yield_now();
            }
        }
        true
    }

    /// Note a run of `pages` pages taken fresh or from the pre-faulted
    /// reserve (`arena` locked); true when the caller, after unlocking,
    /// must ask the returner for a refill.
    fn note_demand(&self, arena: &mut Arena, pages: usize) -> bool {
        self.prefault_pages > 0 && arena.note_demand(pages)
    }

    /// Pre-fault runs ahead of a stream of new zspages (the returner's
    /// round, before it returns what is due). For each run length taken
    /// fresh or from this reserve since the last refill, it makes twice as
    /// many runs wait resident, less those of that length waiting already,
    /// within `prefault_pages` and half the return bound in all. Runs are
    /// taken as a new zspage's would be (a free discarded run first, then
    /// fresh address space of the current region; never a new region,
    /// which a storing thread maps when it needs one), up to
    /// `PREFAULT_BATCH` pages at a time: taken under the lock and counted
    /// as cached at once (`filling_pages`), faulted in with one
    /// `MADV_POPULATE_WRITE` per range outside it, then queued as freed
    /// runs are, dated from the first demand of the refill's period so
    /// that they are due no later than a page freed then. The next zspages
    /// take them first, so the thread that stores makes no page fault;
    /// what no zspage takes is returned with the queue. A `purge_cache`
    /// meanwhile stops the refill before its next batch. Yields between
    /// batches with `yielding`.
    pub(crate) fn refill(&self, yielding: bool) {
        let PageReturn::Delayed { delay, max_pages } = self.policy else {
            return;
        };
        if self.prefault_pages == 0 {
            return;
        }
        let (mut want, since, generation) = {
            let mut arena = self.lock();
            // The demand is taken (and the ask answered) even when nothing
            // will be faulted in: an ask left standing keeps the source
            // registered (`return_due_paced`).
            let demand = arena.take_demand();
            // A round later than the delay (no idle CPU for that long)
            // would fault in runs due at once: none is wanted then.
            if demand.pages < PREFAULT_MIN_PAGES
                || demand.since + delay <= Instant::now()
                || PREFAULT_REFUSED.load(Ordering::Relaxed)
            {
                return;
            }
            let queued = arena.waiting_pages + arena.filling_pages;
            let mut room = self
                .prefault_pages
                .min(max_pages / 2)
                .saturating_sub(queued);
            let mut want = Vec::new();
            for (len, &n) in demand.runs.iter().enumerate().skip(1) {
                let runs = (2 * n as usize)
                    .saturating_sub(arena.waiting_runs(len))
                    .min(room / len);
                want.extend(std::iter::repeat_n(len, runs));
                room -= runs * len;
            }
            (want, demand.since, arena.refill_generation)
        };
        while !want.is_empty() {
            let mut batch: Vec<(NonNull<u8>, usize)> = Vec::new();
            {
                let mut arena = self.lock();
                if arena.refill_generation != generation || self.closing.load(Ordering::Relaxed) {
                    return;
                }
                let mut pages = 0;
                while let Some(&len) = want.last() {
                    if pages + len > PREFAULT_BATCH && pages > 0 {
                        break;
                    }
                    want.pop();
                    let Some(p) = arena.alloc_in_place(len) else {
                        want.clear();
                        break;
                    };
                    batch.push((p, len));
                    pages += len;
                }
                arena.filling_pages += pages;
            }
            if batch.is_empty() {
                return;
            }
            batch.sort_unstable_by_key(|&(p, _)| p.as_ptr() as usize);
            let populated = Region::populate(&arena::ranges(
                self.page_size,
                batch.iter().map(|&(p, len)| (p, len, len)),
            ));
            let mut arena = self.lock();
            for &(p, len) in &batch {
                arena.filling_pages -= len;
                if populated {
                    arena.queue_prefaulted(p, len, since);
                } else {
                    arena.put_free(p, len);
                }
            }
            drop(arena);
            if !populated {
                // An old kernel: nothing was faulted in. The runs went back
                // to the free lists, and no source asks again.
                PREFAULT_REFUSED.store(true, Ordering::Relaxed);
                return;
            }
            if yielding && !want.is_empty() {
                if self.returner.fork_waiting() {
                    // A fork waits for this round: the rest is not needed.
                    return;
                }
                std::thread::yield_now();
            }
        }
    }

    /// Count `pages` as held, or refuse if the limit would be passed.
    fn reserve(&self, pages: usize) -> Result<()> {
        self.budget
            .take(self.cell, pages, self.limit_pages)
            .map_err(|held| Error::MemoryLimit {
                limit: self.limit_pages.unwrap_or(0) * self.page_size,
                held: held * self.page_size,
                needed: pages * self.page_size,
            })
    }
}

/// The arena lock, held (with what frees left in the inbox applied at
/// its acquisition). Its release keeps the bound (`PageSource::keep_bound`:
/// the frees it applied may have passed it), publishes the queue's size
/// and looks after the inbox (`PageSource::look_after_inbox`): frees that
/// found the lock held may have left pages past the bound there, for the
/// holder to return.
struct Locked<'a> {
    src: &'a PageSource,
    arena: Option<MutexGuard<'a, Arena>>,
}

impl std::ops::Deref for Locked<'_> {
    type Target = Arena;
    fn deref(&self) -> &Arena {
        self.arena.as_deref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Arena {
        self.arena.as_deref_mut().expect("held until dropped")
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        if let Some(arena) = self.arena.take() {
            // What the acquisition applied from the inbox may pass the
            // bound: the holder returns the excess.
            self.src.keep_bound(arena);
            self.src.look_after_inbox();
        }
    }
}

/// Most pages given back in one batch, one `process_madvise` call and so
/// one TLB shootdown on the freeing threads' CPUs, before the returner
/// yields: smaller batches give the CPU back sooner but lengthen the tail
/// of a free (docs/DESIGN.md, "The returner runs at idle priority", has
/// the figures for 256, 512 and 1024). Under Miri 4, so its few-page
/// tests split rounds into batches too.
pub(super) const RETURN_BATCH: usize = if cfg!(miri) { 4 } else { 512 };

/// What frees left for the arena lock's next holder, and whether the
/// source is registered with the returner.
#[derive(Default)]
struct Inbox {
    ops: Vec<Deferred>,
    /// The source is in the returner's registry (or returns its own
    /// pages): set by whoever queues pages and finds it clear, who then
    /// registers; cleared by the round that finds nothing waiting.
    registered: bool,
}

/// Freed pages a free could not queue at once (the arena lock was held).
enum Deferred {
    /// The pages of live run `run` that `mask` names, trimmed off it.
    Top {
        run: NonNull<u8>,
        mask: u32,
        since: Instant,
    },
    /// A freed run whose first `resident` pages are resident.
    Run {
        ptr: NonNull<u8>,
        pages: usize,
        resident: usize,
        since: Instant,
    },
    /// Pages of a live run counted as held again (`recount`): those of
    /// them waiting are taken back out of the queue.
    Recount { run: NonNull<u8>, mask: u32 },
    /// A run whose `resident` pages a freeing thread gave back (counted in
    /// `returning_pages` until applied): free for reuse.
    Returned {
        ptr: NonNull<u8>,
        pages: usize,
        resident: usize,
    },
}

// SAFETY: an entry names pages of this source's regions that their freer
// gave up; whoever applies it (under the arena lock) owns them, as the
// arena does its queued runs.
unsafe impl Send for Deferred {}

impl Deferred {
    /// A run given back by `discard`.
    fn returned(w: &arena::Waiting) -> Deferred {
        Deferred::Returned {
            ptr: w.ptr,
            pages: w.pages,
            resident: w.resident,
        }
    }

    /// When the pages were freed (a recount frees none: now).
    fn since(&self) -> Instant {
        match *self {
            Deferred::Top { since, .. } | Deferred::Run { since, .. } => since,
            Deferred::Recount { .. } | Deferred::Returned { .. } => Instant::now(),
        }
    }

    /// Resident pages waiting to be returned (a returned run's are back
    /// with the OS already; they count in `returning_pages` until applied).
    fn resident(&self) -> usize {
        match *self {
            Deferred::Top { mask, .. } => mask.count_ones() as usize,
            Deferred::Run { resident, .. } => resident,
            Deferred::Recount { .. } | Deferred::Returned { .. } => 0,
        }
    }

    fn apply(&self, arena: &mut Arena) {
        match *self {
            Deferred::Top { run, mask, since } => arena.queue_top(run, mask, since),
            Deferred::Run {
                ptr,
                pages,
                resident,
                since,
            } => arena.queue_run(ptr, pages, resident, since),
            Deferred::Recount { run, mask } => {
                arena.cancel_tops(run, mask);
            }
            Deferred::Returned {
                ptr,
                pages,
                resident,
            } => {
                arena.returning_pages -= resident;
                arena.put_free(ptr, pages);
            }
        }
    }
}
