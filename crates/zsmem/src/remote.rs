//! Frees of a page store's objects (owned objects, log placement) by a
//! thread whose stores go to another lane, made while that lane's lock was
//! held: queued here, and applied by the next holder of the lane's write
//! lock (`Pool::drain_remote`), so that the freeing thread never waits for
//! the lane's own thread or its cleaning.
//!
//! Why: with two threads, one writing a slot and the other overwriting or
//! discarding it later (a swap device's writer and its faulting threads),
//! every free lands in the other thread's lane; waiting there for the lock
//! (held through up to 32 of cleaning's moves) cost 40% of the churn's
//! throughput in `examples/churn_threads.rs` (docs/DESIGN.md, "Churn at
//! two threads").
//!
//! A queued free is a dead object the lane still counts as live until it
//! is applied: every figure and check of the pool applies the queues
//! first (`Pool::stats`, `check_invariants`, `flush`, `compact`, `trim`;
//! a store refused at the memory limit too, before it tries again),
//! and a queue longer than [`MAX_QUEUED`] is applied by the thread that
//! makes it so, waiting for the lock, so no more than that many objects a
//! lane ever wait.

// `std`'s atomic even under loom: the hint is only ever a hint (a stale
// read leaves a queued free to a later holder of the lane's lock), and
// loom's models of a lane (`pool.rs`) would take a branch for each look.
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use crate::sync::Mutex;

/// Most frees a lane's queue holds before a free waits for the lane's lock
/// and applies them (at most this many objects, up to a page each, wait
/// to be freed).
pub(crate) const MAX_QUEUED: usize = 64;

/// One lane's queue of frees made by other threads while it was locked.
pub(crate) struct RemoteFrees {
    /// Entries in `list`, read without its lock to skip an empty queue (a
    /// push racing that read is applied by a later holder of the lane's
    /// lock, or by the pusher itself past `MAX_QUEUED`).
    len: AtomicUsize,
    /// (place, length) of each queued free.
    list: Mutex<Vec<(u64, usize)>>,
}

impl std::fmt::Debug for RemoteFrees {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteFrees")
            .field("queued", &self.queued())
            .finish_non_exhaustive()
    }
}

impl RemoteFrees {
    pub(crate) fn new() -> RemoteFrees {
        RemoteFrees {
            len: AtomicUsize::new(0),
            list: Mutex::new(Vec::new()),
        }
    }

    /// Queue the free of the owned object of `len` bytes at `place`;
    /// returns the queue's length after it.
    pub(crate) fn push(&self, place: u64, len: usize) -> usize {
        let mut list = self.list.lock();
        list.push((place, len));
        self.len.store(list.len(), Relaxed);
        list.len()
    }

    /// Every queued free, the queue emptied (nothing, without a lock, when
    /// it looks empty).
    pub(crate) fn take(&self) -> Vec<(u64, usize)> {
        if self.len.load(Relaxed) == 0 {
            return Vec::new();
        }
        let mut list = self.list.lock();
        self.len.store(0, Relaxed);
        std::mem::take(&mut *list)
    }

    /// Frees queued now (a hint without the queue's lock).
    pub(crate) fn queued(&self) -> usize {
        self.len.load(Relaxed)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn pushed_frees_are_taken_once_in_order() {
        let q = RemoteFrees::new();
        assert!(q.take().is_empty());
        assert_eq!(q.push(1, 10), 1);
        assert_eq!(q.push(2, 20), 2);
        assert_eq!(q.queued(), 2);
        assert_eq!(q.take(), vec![(1, 10), (2, 20)]);
        assert_eq!(q.queued(), 0);
        assert!(q.take().is_empty());
    }
}
