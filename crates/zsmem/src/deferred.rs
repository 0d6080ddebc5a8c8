//! Deferred free: frees handed off without a lock, drained in batches.
//!
//! The experiment of the reference thread on `zs_free()` latency, in
//! userspace. A deferred free does two lock-free steps and returns:
//!
//! 1. it marks the handle's entry *dying* with one compare-and-swap through
//!    the class's handle directory (`handle/directory.rs`): from then on the handle is
//!    dead for every caller, and a read or a second free of it gets
//!    [`HandleFault::Freed`](crate::HandleFault::Freed), exactly as after a
//!    free under the lock;
//! 2. it appends the handle to one of a few *shards*, fixed arrays of
//!    handles, picked per thread (the userspace stand-in for the kernel's
//!    per-CPU buffers).
//!
//! The push that fills a shard's last place collects the whole shard into
//! the shard's *backlog* and frees the first `step` handles of it (8);
//! every later push to the shard frees `step` more, so no free pays for a
//! whole batch (a batch of 256 freed at once took 15 us, the p99.9 of
//! `zsmem bench free`'s deferred frees). The pool frees each handful sorted
//! by class, taking each class's lock once per run. A backlog is freed in
//! `batch / step` pushes and refilled only after `batch`, so it is empty
//! when its shard fills again (if not, the collector frees what is left).
//! The backlog is a mutex the pushers only *try*: a push that finds it
//! taken frees nothing more. `Pool::flush` closes every shard and empties
//! every backlog.
//!
//! # The shard protocol
//!
//! A shard is `len` (an atomic counter) and `batch` places (atomic `u64`s,
//! 0 meaning empty; no handle is 0).
//! - push: `i = len.fetch_add(1)`. If `i >= batch` the shard is being
//!   drained: the caller frees its handle itself (under the class lock).
//!   Otherwise it stores the handle in place `i` (`Release`); if `i` is the
//!   last place, it becomes the shard's collector.
//! - collect `n` places: for each place wait until it is non-zero (a pusher
//!   may be between its `fetch_add` and its store: a few instructions),
//!   take it with `swap(0, Acquire)`; then `len.store(0, Release)` reopens
//!   the shard.
//! - close (flush): compare-and-swap `len` from its value `n` (below
//!   `batch`) to `batch`, then collect `n` places. While it is at or above
//!   `batch`, another collector is at work: wait for it.
//!
//! Why it is right: places `0..batch` are handed out once per cycle by the
//! `fetch_add`s that read `0..batch`; only the collector (the pusher that
//! read `batch - 1`, or the closer whose compare-and-swap moved `len` to
//! `batch`) reads them, and it reopens the shard only after taking every
//! place it owns. Pushes that read `batch` or more wrote nothing. The
//! `Release` store of `len = 0` and the `AcqRel` `fetch_add` that reads it
//! order the collector's `swap(0)` before the next cycle's stores. Waits
//! use read-modify-writes, which always read the latest value, so no wait
//! can spin on a stale one. The loom
//! models below check these interleavings.
//!
//! A collector can wait for a pusher preempted between its two steps, so
//! the hand-off is lock-free for pushers and blocking only for the rare
//! collector; the kernel's per-CPU buffers have the same shape (a CPU's
//! buffer is only drained after its writer is done).
//!
//! Bound: at most `2 * shards * batch` handles are pending (a full shard and
//! its backlog), each at most a page: `batch` is derived from the
//! configured `max_pending_bytes` so that this product stays within it.

use std::cell::Cell;

use crate::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use crate::sync::spin_wait;
use crate::sync::{CachePadded, Mutex};

/// The outcome of a push.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Push {
    /// Buffered; nothing else to do.
    Buffered,
    /// Buffered, and handles of an earlier batch are in `out`, to be freed
    /// now.
    Drain,
    /// The shard is being drained: free this handle directly.
    Closed,
}

struct Shard {
    len: AtomicUsize,
    places: Box<[AtomicU64]>,
    /// A collected batch not yet freed, taken from its end `step` at a time.
    backlog: Mutex<Vec<u64>>,
    /// The backlog's length, so that a push finds an empty one without
    /// trying its lock (relaxed: a stale read only delays a step).
    backlog_len: AtomicUsize,
    /// Handles a pusher took from this shard (a collected batch, a
    /// backlog's step) and has not freed yet: counted under the backlog's
    /// lock as they leave it, uncounted once freed ([`Shards::freed`]).
    /// `flush` waits for it to reach 0: a free that returned while its
    /// handle sat in another thread's hands is then done too.
    in_flight: AtomicUsize,
    /// Class runs drained by this shard's pushers: a statistic beside the
    /// line they write anyway (std's atomic even under loom).
    runs: std::sync::atomic::AtomicU64,
}

/// The shards of one pool.
pub(crate) struct Shards {
    shards: Box<[CachePadded<Shard>]>,
    batch: usize,
    step: usize,
}

/// Handles a push frees of its shard's backlog: at about 60 ns a free, a
/// push that collects pays half a microsecond.
pub(crate) const DRAIN_STEP: usize = 8;

impl std::fmt::Debug for Shards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shards")
            .field("shards", &self.shards.len())
            .field("batch", &self.batch)
            .finish()
    }
}

impl Shards {
    /// `shards` shards of `batch` places each, a push freeing `step` of a
    /// backlog (all at least 1).
    pub(crate) fn new(shards: usize, batch: usize, step: usize) -> Self {
        debug_assert!(shards >= 1 && batch >= 1 && step >= 1);
        Shards {
            shards: (0..shards)
                .map(|_| {
                    CachePadded(Shard {
                        len: AtomicUsize::new(0),
                        places: (0..batch).map(|_| AtomicU64::new(0)).collect(),
                        backlog: Mutex::new(Vec::with_capacity(batch)),
                        backlog_len: AtomicUsize::new(0),
                        in_flight: AtomicUsize::new(0),
                        runs: Default::default(),
                    })
                })
                .collect(),
            batch,
            step,
        }
    }

    /// Move `step` handles (or all that are left) from `backlog` to `out`.
    fn take_step(&self, shard: &Shard, backlog: &mut Vec<u64>, out: &mut Vec<u64>) {
        let keep = backlog.len().saturating_sub(self.step);
        out.extend(backlog.drain(keep..));
        shard.backlog_len.store(backlog.len(), Ordering::Relaxed);
    }

    /// Number of shards.
    pub(crate) fn len(&self) -> usize {
        self.shards.len()
    }

    /// The shard this thread pushes to: threads are spread round-robin in
    /// the order they first free, so up to `len()` threads never share one.
    pub(crate) fn home(&self) -> usize {
        thread_local! {
            static HOME: Cell<usize> = const { Cell::new(usize::MAX) };
        }
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        HOME.with(|h| {
            if h.get() == usize::MAX {
                h.set(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
            }
            h.get() % self.shards.len()
        })
    }

    /// Push handle `raw` (non-zero) to shard `s`; on [`Push::Drain`]
    /// handles to free now have been appended to `out`.
    pub(crate) fn push(&self, s: usize, raw: u64, out: &mut Vec<u64>) -> Push {
        debug_assert_ne!(raw, 0);
        let shard = &self.shards[s];
        let i = shard.len.fetch_add(1, Ordering::AcqRel);
        if i >= self.batch {
            return Push::Closed;
        }
        // Release: the collector's Acquire swap sees the handle, and with it
        // the dying mark this thread set before pushing.
        shard.places[i].store(raw, Ordering::Release);
        if i + 1 == self.batch {
            let mut backlog = shard.backlog.lock();
            // Left of the last batch (pushes could not keep up): now.
            out.append(&mut backlog);
            self.collect(shard, self.batch, &mut backlog);
            self.take_step(shard, &mut backlog, out);
            // Before the lock goes: a close that finds the backlog empty
            // then finds these counted.
            shard.in_flight.fetch_add(out.len(), Ordering::AcqRel);
            return Push::Drain;
        }
        if shard.backlog_len.load(Ordering::Relaxed) > 0
            && let Some(mut backlog) = shard.backlog.try_lock()
        {
            self.take_step(shard, &mut backlog, out);
            shard.in_flight.fetch_add(out.len(), Ordering::AcqRel);
        }
        if out.is_empty() {
            Push::Buffered
        } else {
            Push::Drain
        }
    }

    /// Take every buffered handle of shard `s`, and its backlog, into
    /// `out` (flush).
    pub(crate) fn close(&self, s: usize, out: &mut Vec<u64>) {
        let shard = &self.shards[s];
        self.close_places(shard, out);
        // After the places: a collector that took handles pushed before
        // this close holds the backlog's lock until they are in it.
        let mut backlog = shard.backlog.lock();
        out.append(&mut backlog);
        shard.backlog_len.store(0, Ordering::Relaxed);
    }

    /// The `n` handles a [`Push::Drain`] of shard `s` gave out are freed.
    pub(crate) fn freed(&self, s: usize, n: usize) {
        // Release: a flush that sees the count fall sees the frees.
        self.shards[s].in_flight.fetch_sub(n, Ordering::AcqRel);
    }

    /// Wait until no pusher holds handles it took from a shard (after the
    /// shards were closed: what `flush` promises of earlier frees).
    pub(crate) fn wait_for_pushers(&self) {
        for shard in self.shards.iter() {
            let mut round = 0;
            // Acquire: pairs with `freed`.
            while shard.in_flight.load(Ordering::Acquire) != 0 {
                spin_wait(&mut round);
            }
        }
    }

    fn close_places(&self, shard: &Shard, out: &mut Vec<u64>) {
        let mut round = 0;
        // Guess empty; a failed compare-and-swap reads the current length
        // (always the latest: it is part of a read-modify-write).
        let mut n = 0;
        loop {
            match shard
                .len
                .compare_exchange(n, self.batch, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    // Closing an empty shard collects nothing and reopens it.
                    self.collect(shard, n, out);
                    return;
                }
                Err(now) if now >= self.batch => {
                    // Another collector owns the shard until it stores 0.
                    spin_wait(&mut round);
                    n = 0;
                }
                Err(now) => n = now,
            }
        }
    }

    fn collect(&self, shard: &Shard, n: usize, out: &mut Vec<u64>) {
        for place in &shard.places[..n] {
            let mut round = 0;
            loop {
                // Acquire pairs with the pusher's Release store. The place is
                // this collector's alone until `len` is reset, so emptying it
                // with a plain store after the load is race-free.
                let raw = place.load(Ordering::Acquire);
                if raw != 0 {
                    place.store(0, Ordering::Relaxed);
                    out.push(raw);
                    break;
                }
                // Its pusher has counted itself but not stored yet.
                spin_wait(&mut round);
            }
        }
        // Release: pushers of the next cycle (whose fetch_add reads this 0)
        // see every place emptied. A swap rather than a store, so the reset
        // is ordered with the late pushers' increments as a read-modify-write
        // (loom, like the memory model, orders read-modify-writes totally).
        shard.len.swap(0, Ordering::AcqRel);
    }

    /// Handles buffered or in a backlog now (a snapshot; exact when nobody
    /// pushes).
    pub(crate) fn pending(&self, mut each: impl FnMut(u64)) -> usize {
        let mut n = 0;
        for shard in self.shards.iter() {
            for &raw in shard.backlog.lock().iter() {
                each(raw);
                n += 1;
            }
            for place in shard.places.iter() {
                let raw = place.load(Ordering::Acquire);
                if raw != 0 {
                    each(raw);
                    n += 1;
                }
            }
        }
        n
    }

    /// Heap bytes of the shards (places and backlogs).
    /// Count `runs` class runs drained by a pusher of shard `s`.
    pub(crate) fn count_runs(&self, s: usize, runs: u64) {
        self.shards[s]
            .runs
            .fetch_add(runs, std::sync::atomic::Ordering::Relaxed);
    }

    /// Class runs drained so far.
    pub(crate) fn runs(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.runs.load(std::sync::atomic::Ordering::Relaxed))
            .sum()
    }

    pub(crate) fn metadata_bytes(&self) -> usize {
        self.shards.len() * (std::mem::size_of::<CachePadded<Shard>>() + 2 * self.batch * 8)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_full_shard_hands_over_its_batch_and_reopens() {
        let s = Shards::new(2, 3, 8);
        let mut out = Vec::new();
        assert_eq!(s.push(0, 11, &mut out), Push::Buffered);
        assert_eq!(s.push(0, 12, &mut out), Push::Buffered);
        assert_eq!(s.push(1, 21, &mut out), Push::Buffered);
        assert_eq!(s.pending(|_| {}), 3);
        assert_eq!(s.push(0, 13, &mut out), Push::Drain);
        assert_eq!(out, [11, 12, 13]);
        out.clear();
        assert_eq!(s.push(0, 14, &mut out), Push::Buffered);
        s.close(0, &mut out);
        s.close(1, &mut out);
        assert_eq!(out, [14, 21]);
        assert_eq!(s.pending(|_| {}), 0);
        out.clear();
        s.close(0, &mut out);
        assert!(out.is_empty());
    }

    /// A full shard's batch goes to the backlog; its collector and each
    /// later push free `step` of it, newest first; a close takes the rest.
    #[test]
    fn pushes_free_a_backlog_a_step_at_a_time() {
        let s = Shards::new(1, 4, 2);
        let mut out = Vec::new();
        for raw in 1..=3 {
            assert_eq!(s.push(0, raw, &mut out), Push::Buffered);
        }
        assert_eq!(s.push(0, 4, &mut out), Push::Drain);
        assert_eq!(out, [3, 4]);
        assert_eq!(s.pending(|_| {}), 2);
        out.clear();
        assert_eq!(s.push(0, 5, &mut out), Push::Drain);
        assert_eq!(out, [1, 2], "the rest of the backlog");
        out.clear();
        assert_eq!(s.push(0, 6, &mut out), Push::Buffered, "backlog empty");
        assert_eq!(s.pending(|_| {}), 2);
        // Fill again: the new batch becomes the backlog.
        assert_eq!(s.push(0, 7, &mut out), Push::Buffered);
        assert_eq!(s.push(0, 8, &mut out), Push::Drain);
        assert_eq!(out, [7, 8]);
        out.clear();
        s.close(0, &mut out);
        assert_eq!(out, [5, 6]);
        assert_eq!(s.pending(|_| {}), 0);
    }

    #[test]
    fn threads_lose_and_duplicate_nothing() {
        const N: u64 = if cfg!(miri) { 50 } else { 5000 };
        let s = Shards::new(2, 8, 3);
        let taken = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|sc| {
            for t in 0..4u64 {
                let (s, taken) = (&s, &taken);
                sc.spawn(move || {
                    let mut out = Vec::new();
                    let mut direct = Vec::new();
                    for i in 1..=N {
                        let raw = t << 32 | i;
                        if s.push((t % 2) as usize, raw, &mut out) == Push::Closed {
                            direct.push(raw);
                        }
                        if i % 97 == 0 {
                            s.close(((t + 1) % 2) as usize, &mut out);
                        }
                    }
                    out.extend(direct);
                    taken.lock().unwrap().extend(out);
                });
            }
        });
        let mut out = Vec::new();
        s.close(0, &mut out);
        s.close(1, &mut out);
        let mut all = taken.into_inner().unwrap();
        all.extend(out);
        all.sort_unstable();
        let want: Vec<u64> = (0..4u64)
            .flat_map(|t| (1..=N).map(move |i| t << 32 | i))
            .collect();
        assert_eq!(all, want);
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;

    /// Collectors wait for pushers (by yielding): allow the extra branches
    /// those waits take.
    fn model(f: impl Fn() + Sync + Send + 'static) {
        let mut b = loom::model::Builder::new();
        b.max_branches = 10_000;
        b.check(f);
    }

    /// Two pushers fill a 2-place shard while a third thread flushes it:
    /// every handle comes out exactly once, through a full batch, a flush or
    /// a direct free.
    #[test]
    fn loom_push_push_close() {
        // The main thread is the second pusher: a model's cost grows with
        // its threads, and a main thread that only joined cost 6.5 minutes.
        model(|| {
            let s = Arc::new(Shards::new(1, 2, 2));
            let push = |s: &Shards, raw: u64| {
                let mut out = Vec::new();
                match s.push(0, raw, &mut out) {
                    Push::Closed => vec![raw],
                    _ => out,
                }
            };
            let pusher = {
                let s = s.clone();
                loom::thread::spawn(move || push(&s, 1))
            };
            let closer = {
                let s = s.clone();
                loom::thread::spawn(move || {
                    let mut out = Vec::new();
                    s.close(0, &mut out);
                    out
                })
            };
            let mut all = push(&s, 2);
            all.extend(pusher.join().unwrap());
            all.extend(closer.join().unwrap());
            let mut rest = Vec::new();
            s.close(0, &mut rest);
            all.extend(rest);
            all.sort_unstable();
            assert_eq!(all, [1, 2]);
        });
    }

    /// What `flush` promises: a free that returned before it began is done
    /// when it returns, even when another thread took that free's handle
    /// with its own batch and is still freeing it. Handle 1 is pushed
    /// (and its push returns) before the flush starts; handle 2's push
    /// fills the shard and takes both; the flush closes the shard, frees
    /// what it finds and waits for the pushers: handle 1 is freed by then.
    /// Without the wait (the count of handles in flight) it fails.
    #[test]
    fn loom_a_flush_waits_for_a_pusher_freeing_an_earlier_handle() {
        use loom::sync::atomic::AtomicBool;
        model(|| {
            let s = Arc::new(Shards::new(1, 2, 2));
            let freed: Arc<[AtomicBool; 3]> = Arc::new(Default::default());
            let free = |freed: &[AtomicBool; 3], raws: &[u64]| {
                for &r in raws {
                    assert!(
                        !freed[r as usize].swap(true, Ordering::Relaxed),
                        "{r} twice"
                    );
                }
            };
            let mut out = Vec::new();
            assert_eq!(s.push(0, 1, &mut out), Push::Buffered);
            let pusher = {
                let (s, freed) = (s.clone(), freed.clone());
                loom::thread::spawn(move || {
                    let mut out = Vec::new();
                    match s.push(0, 2, &mut out) {
                        Push::Closed => free(&freed, &[2]),
                        Push::Drain => {
                            free(&freed, &out);
                            s.freed(0, out.len());
                        }
                        Push::Buffered => {}
                    }
                })
            };
            let mut found = Vec::new();
            s.close(0, &mut found);
            free(&freed, &found);
            s.wait_for_pushers();
            assert!(
                freed[1].load(Ordering::Relaxed),
                "flush returned before 1 was freed"
            );
            pusher.join().unwrap();
            let mut rest = Vec::new();
            s.close(0, &mut rest);
            free(&freed, &rest);
            assert!(freed[1].load(Ordering::Relaxed) && freed[2].load(Ordering::Relaxed));
        });
    }

    #[test]
    fn loom_push_close_small() {
        model(|| {
            let s = Arc::new(Shards::new(1, 2, 2));
            let a = {
                let s = s.clone();
                loom::thread::spawn(move || {
                    let mut out = Vec::new();
                    match s.push(0, 1, &mut out) {
                        Push::Closed => vec![1],
                        _ => out,
                    }
                })
            };
            let mut out = Vec::new();
            s.close(0, &mut out);
            out.extend(a.join().unwrap());
            let mut rest = Vec::new();
            s.close(0, &mut rest);
            out.extend(rest);
            assert_eq!(out, [1]);
        });
    }

    /// A full cycle and the next: the collector's reopening never loses a
    /// push of the next cycle.
    #[test]
    fn loom_collect_then_reuse() {
        model(|| {
            let s = Arc::new(Shards::new(1, 1, 1));
            let t = {
                let s = s.clone();
                loom::thread::spawn(move || {
                    let mut out = Vec::new();
                    let a = s.push(0, 7, &mut out);
                    (a, out)
                })
            };
            let mut out = Vec::new();
            let b = s.push(0, 9, &mut out);
            let (a, out_a) = t.join().unwrap();
            let mut all = out.clone();
            all.extend(out_a);
            if a == Push::Closed {
                all.push(7);
            }
            if b == Push::Closed {
                all.push(9);
            }
            all.sort_unstable();
            assert_eq!(all, [7, 9]);
        });
    }
}
