//! When freed pages go back to the OS: the policy, and the background
//! thread that returns delayed pages.
//!
//! With [`PageReturn::Delayed`](crate::PageReturn::Delayed) (the default) a freed zspage's run, or the
//! pages trimming cuts off a live zspage, are not given back on the freeing
//! thread: they wait in their page source's *return queue*, counted as
//! `cached_pages`. A new zspage takes the newest waiting run of its length
//! first (its pages are still resident: no page faults on the store path).
//! One process-wide thread, `zsmem-return`, gives waiting pages back with
//! `madvise(MADV_DONTNEED)` once they have waited `delay`. This is
//! jemalloc's and mimalloc's answer (decay, purge delay): the freeing
//! thread makes no system call, and two freeing threads do not shoot down
//! each other's TLBs. The thread runs at idle priority, so it never takes
//! a CPU from the threads that free. The page bound does not wait for it:
//! a free that leaves more than `max_pages` waiting in its source returns
//! the oldest, down to half the bound, itself (`PageSource::keep_bound`),
//! so no more wait whatever CPU the thread gets.
//!
//! The same thread keeps a log lane's next segments faulted in ahead of a
//! stream of stores (`PageSource::refill`, `PoolConfig::prefault_bytes`):
//! runs it faults in wait in the return queue as freed runs do, counted,
//! taken first, returned after the delay when unused.
//!
//! The hand-off: a source with waiting pages is *registered* (a flag under
//! its inbox lock, and a weak reference in the registry below). The
//! returner takes the whole registry, asks each source to return what is
//! due, and keeps the sources that still have pages waiting (or a refill
//! asked for); a source that reports an empty queue clears its flag under
//! the same locks that checked the queue and its inbox, so the next enqueue
//! registers it again (never twice: the flag is set by whoever registers).
//! The thread starts on the first registration and ends after a second
//! with nothing registered. Under Miri
//! there is no thread: the freeing thread returns what is due itself.
//!
//! Fork: the thread does all its work on sources (their locks, the runs it
//! discards or faults in outside them) inside a *round*, holding the
//! returner's `working` lock shared; a fork's prepare handler
//! (`pthread_atfork`) takes it alone, then the registry lock, so the thread
//! holds no lock of zsmem's and has no pages in flight when the process is
//! copied (a round stops at its next batch when a fork waits). The child,
//! which has no thread, marks the returner as not running, and its first
//! queueing or new zspage starts one for the sources its parent's thread
//! served ([`Returner::resume`]).

#[cfg(not(loom))]
use std::sync::OnceLock;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::sync::{Condvar, Mutex, RwLock};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// What the returner serves: a page source with pages waiting. A trait, so
/// that this file needs nothing of the source's (the source registers
/// itself here, and the returner sits below it).
pub(crate) trait Served: Send + Sync {
    /// Its pool is being dropped: let go of it at once.
    fn closing(&self) -> bool;
    /// Fault in the pages it keeps ready ahead of a stream of stores
    /// (`yielding`: between batches, as the returner does).
    fn refill(&self, yielding: bool);
    /// Return what is due by `now`, yielding between batches; when the
    /// next pages are due, or `None` with nothing left waiting.
    fn return_due_yielding(&self, now: Instant) -> Option<Instant>;
}

/// Sources with pages waiting, and whether the returner thread runs.
#[derive(Default)]
pub(crate) struct Registry {
    pub(crate) sources: Vec<Weak<dyn Served>>,
    running: bool,
    /// The thread waits with nothing registered: a registration must
    /// signal it (else it looks again within [`POLL`]).
    idle: bool,
}

/// The returner: its registry, and the thread that serves it. One per
/// process ([`Returner::global`]); the loom model makes its own and plays
/// the thread's part itself.
pub(crate) struct Returner {
    pub(crate) registry: Mutex<Registry>,
    wake: Condvar,
    /// Start a thread on the first registration (false in the loom model).
    spawn: bool,
    /// Held shared by a round (everything the thread does to sources:
    /// their locks, and runs it discards or faults in outside them), alone
    /// by a fork's prepare handler, so that no fork copies the process
    /// while the thread holds a page source's lock or pages in flight.
    working: RwLock<()>,
    /// Forks waiting for `working`: a round stops at its next batch. A
    /// hint under no lock's protection (std's atomic even under loom).
    forks: AtomicUsize,
    /// In a forked child: sources registered in the parent wait with no
    /// thread to serve them; the next queueing or new zspage starts one.
    orphaned: AtomicBool,
}

/// How long the thread lingers with nothing registered before it ends.
const IDLE_EXIT: Duration = Duration::from_secs(1);

/// Longest the thread sleeps while pages wait: how soon a source
/// registered meanwhile, or a refill asked for, is served. Waking the
/// thread instead would be a system call on the freeing thread (a futex
/// wake, and an interrupt to the sleeping thread's CPU): 5-10 us on this
/// machine, the p99.9 of a free when it came every 1,024 pages (`zsmem
/// bench free --mib 64`).
pub(crate) const POLL: Duration = Duration::from_millis(1);

/// The process's returner (made by the first page source).
#[cfg(not(loom))]
static GLOBAL: OnceLock<Arc<Returner>> = OnceLock::new();

impl Returner {
    fn with_spawn(spawn: bool) -> Returner {
        Returner {
            registry: Mutex::new(Registry::default()),
            wake: Condvar::default(),
            spawn,
            working: RwLock::new(()),
            forks: AtomicUsize::new(0),
            orphaned: AtomicBool::new(false),
        }
    }

    /// The process's returner.
    #[cfg(not(loom))]
    pub(crate) fn global() -> Arc<Returner> {
        GLOBAL
            .get_or_init(|| {
                #[cfg(not(miri))]
                fork::install();
                Arc::new(Returner::with_spawn(true))
            })
            .clone()
    }

    /// A returner with no thread: rounds run when [`round`](Self::round)
    /// is called (the loom model's returner, and a starved one in tests).
    #[cfg(any(loom, test))]
    pub(crate) fn without_thread() -> Arc<Returner> {
        Arc::new(Returner::with_spawn(false))
    }

    /// Under loom there is no process-wide returner: each source gets one
    /// that nobody serves unless the model does.
    #[cfg(loom)]
    pub(crate) fn global() -> Arc<Returner> {
        Self::without_thread()
    }

    /// Register a source that just got its first waiting pages (its flag
    /// is set by the caller). Starts the thread if it is not running.
    /// False when no thread serves it (under Miri, or the thread could not
    /// be started): the caller then returns its due pages itself.
    pub(crate) fn register(self: &Arc<Self>, src: Weak<dyn Served>) -> bool {
        if cfg!(miri) {
            return false;
        }
        let mut reg = self.registry.lock();
        reg.sources.push(src);
        if self.spawn && !reg.running && !self.start(&mut reg) {
            // No thread: the source returns its own pages when it next
            // queues some (see `PageSource::ensure_registered`); try again
            // then.
            reg.sources.pop();
            return false;
        }
        // Only an idle thread needs the signal: a busy one looks at the
        // registry again within `POLL`, before these pages are due.
        let idle = std::mem::replace(&mut reg.idle, false);
        drop(reg);
        if idle {
            self.wake.notify_one();
        }
        true
    }

    /// Start the thread (`reg` locked, no thread running); false if it
    /// could not be started.
    fn start(self: &Arc<Self>, reg: &mut Registry) -> bool {
        reg.running = true;
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("zsmem-return".into())
            .spawn(move || me.run());
        if spawned.is_err() {
            reg.running = false;
        }
        reg.running
    }

    /// In a forked child, start a thread for the sources the parent's
    /// thread served (they are registered, so their frees do not register
    /// them again): called by every queueing and every new zspage, a
    /// relaxed load unless the process was just forked. If the thread
    /// cannot be started, the next call tries again.
    pub(crate) fn resume(self: &Arc<Self>) {
        if !self.orphaned.load(Ordering::Relaxed) {
            return;
        }
        let mut reg = self.registry.lock();
        if reg.running || reg.sources.is_empty() || self.start(&mut reg) {
            self.orphaned.store(false, Ordering::Relaxed);
        }
    }

    /// A fork waits for the round in progress: it stops at its next batch
    /// (leaving what it has not done queued, its sources registered).
    pub(crate) fn fork_waiting(&self) -> bool {
        self.forks.load(Ordering::Relaxed) > 0
    }

    /// Play a fork waiting for the round (`true`) or done (`false`).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn set_fork_waiting(&self, waiting: bool) {
        self.forks.store(usize::from(waiting), Ordering::Relaxed);
    }

    /// One round: take every registered source, return what is due, keep
    /// those with pages still waiting. Returns when the next is due.
    pub(crate) fn round(&self) -> Option<Instant> {
        // Everything below is done with no fork in progress (see `fork`).
        let _working = self.working.read();
        let sources = std::mem::take(&mut self.registry.lock().sources);
        let now = Instant::now();
        let mut keep = Vec::with_capacity(sources.len());
        let mut next: Option<Instant> = None;
        for weak in sources {
            if self.fork_waiting() {
                // Left for the next round, after the fork.
                keep.push(weak);
                next = Some(now);
                continue;
            }
            let Some(src) = weak.upgrade() else { continue };
            if src.closing() {
                // Its pool is being dropped: let go of it at once, so
                // that it is unmapped now.
                continue;
            }
            src.refill(true);
            if let Some(due) = src.return_due_yielding(now) {
                next = Some(next.map_or(due, |n| n.min(due)));
                keep.push(weak);
            }
        }
        self.registry.lock().sources.extend(keep);
        next
    }

    /// Whether `src` is registered (for the loom model's checks).
    #[cfg(loom)]
    pub(crate) fn holds<S: Served>(&self, src: &Arc<S>) -> bool {
        self.registry
            .lock()
            .sources
            .iter()
            .any(|w| std::ptr::addr_eq(w.as_ptr(), Arc::as_ptr(src)))
    }

    /// The thread: rounds over the registered sources until none is left.
    fn run(&self) {
        lower_priority();
        loop {
            {
                let mut reg = self.registry.lock();
                if reg.sources.is_empty() {
                    reg.idle = true;
                    reg = self.wake.wait_timeout(reg, IDLE_EXIT);
                    reg.idle = false;
                    if reg.sources.is_empty() {
                        reg.running = false;
                        return;
                    }
                }
            }
            let next = self.round();
            let reg = self.registry.lock();
            if reg.sources.is_empty() {
                continue;
            }
            if let Some(next) = next {
                // A little slack batches the returns of neighbouring frees;
                // at most `POLL`, to see new sources and refills asked for.
                let wait =
                    next.saturating_duration_since(Instant::now()) + Duration::from_micros(200);
                drop(self.wake.wait_timeout(reg, wait.min(POLL)));
            }
        }
    }
}

/// Fork safety (`pthread_atfork`): the prepare handler waits for the
/// returner's round in progress (it stops at its next batch) and holds the
/// `working` lock alone and the registry lock across the fork, so the
/// thread holds none of zsmem's locks and no pages are in flight: every
/// page source's arena and inbox lock, the registry lock, and the runs
/// being returned or faulted in ahead are as no round had begun. The
/// parent's handler releases both. The child's (it has no returner thread)
/// marks the thread as not running and the registered sources as orphaned
/// ([`Returner::resume`] starts their thread on demand), then releases
/// them. Locks held by the parent's other threads at the fork (a pool
/// call in progress) are the application's to avoid, as with any library.
#[cfg(not(any(loom, miri)))]
mod fork {
    use std::cell::RefCell;
    use std::sync::atomic::Ordering;

    use super::{GLOBAL, Registry, Returner};
    use crate::sync::{MutexGuard, WriteGuard};

    type Held = (WriteGuard<'static, ()>, MutexGuard<'static, Registry>);

    thread_local! {
        /// The locks the prepare handler took, for the parent's or the
        /// child's handler (the same thread, or its copy) to release.
        static HELD: RefCell<Option<Held>> = const { RefCell::new(None) };
    }

    /// Register the handlers (once: with the process's returner).
    pub(super) fn install() {
        // SAFETY: the handlers are plain functions that live as long as
        // the process; a failure (out of memory) leaves fork as unsafe as
        // it was, nothing worse.
        unsafe {
            libc::pthread_atfork(Some(prepare), Some(parent), Some(child));
        }
    }

    fn returner() -> Option<&'static Returner> {
        GLOBAL.get().map(|r| &**r)
    }

    extern "C" fn prepare() {
        let Some(r) = returner() else { return };
        r.forks.fetch_add(1, Ordering::Relaxed);
        // Order: `working`, then the registry (as a round takes them).
        let working = r.working.write();
        let registry = r.registry.lock();
        HELD.with(|h| *h.borrow_mut() = Some((working, registry)));
    }

    extern "C" fn parent() {
        let Some(r) = returner() else { return };
        if let Some((working, registry)) = HELD.with(|h| h.borrow_mut().take()) {
            drop(registry);
            drop(working);
        }
        r.forks.fetch_sub(1, Ordering::Relaxed);
    }

    extern "C" fn child() {
        let Some(r) = returner() else { return };
        if let Some((working, mut registry)) = HELD.with(|h| h.borrow_mut().take()) {
            // The parent's thread is not in the child.
            registry.running = false;
            registry.idle = false;
            r.orphaned
                .store(!registry.sources.is_empty(), Ordering::Relaxed);
            drop(registry);
            drop(working);
        }
        r.forks.store(0, Ordering::Relaxed);
    }
}

/// Run the returner at idle priority (Linux's `SCHED_IDLE`): it mostly
/// takes a CPU nothing else wants (two threads freeing 64 MiB each on a
/// 2-core machine took 2.3 or 4.6 ms from run to run at normal priority or
/// nice 19, as one thread's 2.3 ms at idle priority; docs/DESIGN.md), and
/// where the scheduler gives it a wanted CPU all the same it yields after
/// each batch of pages it gives back (`PageSource::return_due_yielding`).
/// The page bound does not depend on it: the free that passes `max_pages`
/// returns the excess itself (`PageSource::keep_bound`).
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: a plain system call on this thread (pid 0: the caller); a
    // failure leaves the priority as it was.
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
    }
}
