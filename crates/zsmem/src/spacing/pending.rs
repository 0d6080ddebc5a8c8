//! This thread's changes to pools' spacing counts, added to them in
//! batches.
//!
//! The object API's store counts its object in its class's live count and
//! its free uncounts it: an atomic add each, a third of the atomic
//! read-modify-writes of a store and free (DESIGN, "The object API's
//! allocation path"). A count only steers placement, so each thread keeps
//! its changes to each count in a batch of its own and adds a batch to the
//! shared count once it reaches [`BATCH`] objects either way; a thread that
//! ends adds what it holds. A shared count then lags its objects by less
//! than `BATCH` per thread, against thresholds of hundreds of objects
//! (`mod.rs`).
//!
//! A thread keeps one batch per pool it has used (a byte per count), in a
//! thread-local list; the pool's [`Spacing`] is shared with it, so a batch
//! never outlives what it adds to. A dropped pool's batches go at their
//! thread's next new batch or at its end.

use std::cell::RefCell;
use std::sync::Arc;

use super::Spacing;
use crate::sync::atomic::Ordering;

/// A batch is added to its shared count once it holds this many objects
/// either way.
pub(crate) const BATCH: i8 = 16;

/// One thread's changes to one pool's counts.
struct Batch {
    spacing: Arc<Spacing>,
    /// Per count of `spacing` (same positions), the change not yet added.
    deltas: Box<[i8]>,
}

impl Batch {
    fn new(spacing: Arc<Spacing>) -> Batch {
        let deltas: Box<[i8]> = vec![0; spacing.counts()].into();
        spacing
            .pending_bytes
            .fetch_add(deltas.len(), Ordering::Relaxed);
        Batch { spacing, deltas }
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        for (at, d) in self.deltas.iter().enumerate() {
            if *d != 0 {
                self.spacing.add_at(at, i32::from(*d));
            }
        }
        self.spacing
            .pending_bytes
            .fetch_sub(self.deltas.len(), Ordering::Relaxed);
    }
}

thread_local! {
    /// This thread's batches, one per pool it has used.
    static BATCHES: RefCell<Vec<Batch>> = const { RefCell::new(Vec::new()) };
}

/// Count `delta` (1 or -1) more live objects of logical class `logical` in
/// shard `shard` of `spacing`: in this thread's batch, added to the shared
/// count once the batch reaches [`BATCH`] either way (at once where the
/// thread is ending and keeps no batch).
pub(crate) fn add(spacing: &Arc<Spacing>, logical: usize, shard: usize, delta: i8) {
    let at = shard * spacing.row + logical;
    let batched = BATCHES
        .try_with(|batches| {
            let Ok(mut batches) = batches.try_borrow_mut() else {
                return false;
            };
            let i = match batches
                .iter()
                .position(|b| Arc::ptr_eq(&b.spacing, spacing))
            {
                Some(i) => i,
                None => {
                    batches.retain(|b| !b.spacing.retired.load(Ordering::Relaxed));
                    batches.push(Batch::new(spacing.clone()));
                    batches.len() - 1
                }
            };
            let d = &mut batches[i].deltas[at];
            *d += delta;
            if d.abs() >= BATCH {
                spacing.add_at(at, i32::from(*d));
                *d = 0;
            }
            true
        })
        .unwrap_or(false);
    if !batched {
        spacing.add_at(at, i32::from(delta));
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::size_class::{ChainRule, SizeClassConfig, SizeClassTable};

    fn spacing() -> Arc<Spacing> {
        let t = SizeClassTable::new(SizeClassConfig {
            page_size: 4096,
            chain_size: 8,
            class_delta: 16,
            chain_rule: ChainRule::Trim,
        })
        .unwrap();
        Arc::new(Spacing::new(&t, 2, 4096, 2).unwrap())
    }

    fn shared(s: &Spacing, logical: usize, shard: usize) -> i32 {
        s.live[shard * s.row + logical].load(Ordering::Relaxed) as i32
    }

    #[test]
    fn a_batch_is_added_when_it_is_full_either_way_and_when_its_thread_ends() {
        let s = spacing();
        for _ in 0..BATCH - 1 {
            add(&s, 10, 1, 1);
        }
        assert_eq!(shared(&s, 10, 1), 0, "not yet");
        add(&s, 10, 1, 1);
        assert_eq!(shared(&s, 10, 1), i32::from(BATCH));
        for _ in 0..BATCH {
            add(&s, 10, 1, -1);
        }
        assert_eq!(shared(&s, 10, 1), 0);
        assert!(s.metadata_bytes() >= s.counts(), "the batch is counted");
        // Another thread's changes: added when it ends.
        let s2 = s.clone();
        std::thread::spawn(move || {
            for _ in 0..5 {
                add(&s2, 3, 0, 1);
            }
            add(&s2, 4, 1, -1);
        })
        .join()
        .unwrap();
        assert_eq!((shared(&s, 3, 0), shared(&s, 4, 1)), (5, -1));
        assert_eq!(shared(&s, 10, 0), 0, "each shard its own count");
    }

    #[test]
    fn a_negative_count_places_as_an_empty_one() {
        let s = spacing();
        let sparse = s.choose(20, 0);
        s.add(20, 0, -3);
        assert_eq!(s.choose(20, 0), sparse);
    }

    #[test]
    fn a_retired_pools_batch_goes_at_the_next_new_batch() {
        let old = spacing();
        add(&old, 7, 0, 1);
        let bytes = old.pending_bytes.load(Ordering::Relaxed);
        assert!(bytes > 0);
        old.retire();
        let new = spacing();
        add(&new, 7, 0, 1);
        assert_eq!(old.pending_bytes.load(Ordering::Relaxed), 0, "dropped");
        assert_eq!(shared(&old, 7, 0), 1, "and added first");
        assert_eq!(Arc::strong_count(&old), 1);
    }
}
