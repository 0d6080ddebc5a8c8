//! A grow-only, lock-free array of pointers: index to pointer, published
//! under a lock and read without one, never moved.

use std::ptr;

use crate::sync::atomic::{AtomicPtr, Ordering};

/// A map from index to a pointer that only grows: `S` segments (of 1, 2,
/// 4, ... pointers, so indices `0..2^S - 1`) are allocated by the publisher and never moved or freed before
/// the map, so a reader finds an index's pointer with two loads and no
/// lock. What the pointers point to is the owner's business: it keeps it
/// alive for as long as a reader may use it.
///
/// Orderings: [`GrowOnly::publish`] stores with `Release` after the
/// pointee is initialised; [`GrowOnly::get`] loads with `Acquire`, so a
/// reader that sees the pointer sees what it points to as published.
pub(crate) struct GrowOnly<T, const S: usize> {
    segments: [AtomicPtr<AtomicPtr<T>>; S],
}

impl<T, const S: usize> std::fmt::Debug for GrowOnly<T, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrowOnly").finish_non_exhaustive()
    }
}

/// Segment and offset of index `i`.
pub(crate) fn locate(i: usize) -> (usize, usize) {
    let n = i + 1;
    let k = (usize::BITS - 1 - n.leading_zeros()) as usize;
    (k, n - (1 << k))
}

impl<T, const S: usize> GrowOnly<T, S> {
    pub(crate) fn new() -> Self {
        GrowOnly {
            segments: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
        }
    }

    /// Set index `i`'s pointer. Called by one publisher at a time (under
    /// its owner's lock); `i` is below `2^S - 1`.
    pub(crate) fn publish(&self, i: usize, p: *mut T) {
        let (k, off) = locate(i);
        let mut seg = self.segments[k].load(Ordering::Acquire);
        if seg.is_null() {
            let fresh: Box<[AtomicPtr<T>]> = (0..1usize << k)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect();
            seg = Box::into_raw(fresh).cast::<AtomicPtr<T>>();
            self.segments[k].store(seg, Ordering::Release);
        }
        // SAFETY: segment `k` has `2^k` pointers and `off < 2^k`; it is never
        // freed before `self`.
        unsafe { &*seg.add(off) }.store(p, Ordering::Release);
    }

    /// Index `i`'s cell, if its segment is made.
    #[inline]
    fn cell(&self, i: usize) -> Option<&AtomicPtr<T>> {
        let (k, off) = locate(i);
        let seg = self.segments.get(k)?.load(Ordering::Acquire);
        // SAFETY: as in `publish`: in bounds, alive as long as `self`.
        (!seg.is_null()).then(|| unsafe { &*seg.add(off) })
    }

    /// Set index `i`'s pointer if its segment is made, from any thread
    /// without the owner's lock (the store is one atomic store and a
    /// segment never moves); false, with nothing set, if it is not made. A
    /// store racing [`GrowOnly::publish`] of the same index leaves one of
    /// the two: for hints whose loss costs no correctness.
    pub(crate) fn store_if_made(&self, i: usize, p: *mut T) -> bool {
        self.cell(i)
            .map(|c| c.store(p, Ordering::Release))
            .is_some()
    }

    /// Index `i`'s pointer: null if never published (or published null).
    #[inline]
    pub(crate) fn get(&self, i: usize) -> *mut T {
        self.cell(i)
            .map_or(ptr::null_mut(), |c| c.load(Ordering::Acquire))
    }

    /// Heap bytes of the segments made.
    pub(crate) fn metadata_bytes(&self) -> usize {
        (0..S)
            .filter(|&k| !self.segments[k].load(Ordering::Relaxed).is_null())
            .map(|k| (1usize << k) * std::mem::size_of::<AtomicPtr<T>>())
            .sum()
    }
}

impl<T, const S: usize> Drop for GrowOnly<T, S> {
    fn drop(&mut self) {
        for (k, seg) in self.segments.iter().enumerate() {
            let p = seg.load(Ordering::Relaxed);
            if !p.is_null() {
                // SAFETY: made by `Box::into_raw` of a `2^k` slice in
                // `publish`, freed only here.
                drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(p, 1 << k)) });
            }
        }
    }
}

// SAFETY: the map holds only atomics; what its pointers point to is shared
// by the owner's own rules (a `GrowOnly<T>` hands out raw pointers, never
// references).
unsafe impl<T, const S: usize> Send for GrowOnly<T, S> {}
// SAFETY: as for `Send`.
unsafe impl<T, const S: usize> Sync for GrowOnly<T, S> {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn indices_map_to_segments_without_gaps() {
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(1), (1, 0));
        assert_eq!(locate(2), (1, 1));
        assert_eq!(locate(3), (2, 0));
        assert_eq!(locate(6), (2, 3));
        assert_eq!(locate(7), (3, 0));
        assert_eq!(locate((1 << 31) - 2).0, 30);
        assert_eq!(locate(u32::MAX as usize - 1).0, 31);
    }

    #[test]
    fn a_published_pointer_is_found_and_others_are_null() {
        let g = GrowOnly::<u8, 32>::new();
        let mut a = [1u8, 2, 3];
        assert!(g.get(5).is_null());
        g.publish(5, &mut a[1]);
        // SAFETY: the pointer published is into `a`, alive here.
        assert_eq!(unsafe { *g.get(5) }, 2);
        assert!(g.get(4).is_null() && g.get(6).is_null() && g.get(1000).is_null());
        g.publish(5, ptr::null_mut());
        assert!(g.get(5).is_null());
        assert_eq!(g.metadata_bytes(), 4 * std::mem::size_of::<usize>());
    }
}
