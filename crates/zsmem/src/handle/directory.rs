//! The lock-free handle directory: chunk number to the chunk's entries, for
//! deferred free, which marks an entry dying without the class lock.

use std::ptr;

use super::entry::{Entry, mark};
use super::{CHUNK_BITS, Handle, SLOT_BITS, split};
use crate::error::{HandleFault, Result};
use crate::sync::atomic::{AtomicPtr, Ordering};

/// Segments of the directory: segment `k` holds `2^k` chunk pointers, so
/// segments `0..SEGMENTS` hold `2^SEGMENTS - 1`, enough for every chunk a
/// 29-bit slot field can name (`2^23` chunks of 64: 24 segments).
pub(super) const SEGMENTS: usize = (SLOT_BITS - CHUNK_BITS) as usize + 1;

/// A lock-free map from chunk number to that chunk's entries, for the
/// deferred-free path, which marks entries without the class lock.
///
/// It only grows: segments (of 1, 2, 4, ... pointers) are allocated under
/// the class lock and never moved; chunks published here are never freed
/// before the directory's table. So a pointer read here stays valid for as
/// long as the pool lives, which is what makes the lock-free read sound.
///
/// Orderings: `publish` stores with `Release` after the entries are
/// initialised; `mark_dying` loads with `Acquire`, so it sees initialised
/// entries whenever it sees the pointer.
pub(crate) struct Directory {
    /// The pool's tag: `mark_dying` refuses another pool's handle first.
    tag: u8,
    segments: [AtomicPtr<AtomicPtr<Entry>>; SEGMENTS],
}

impl std::fmt::Debug for Directory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Directory").finish_non_exhaustive()
    }
}

/// Segment and offset of chunk `c`.
pub(super) fn locate(c: usize) -> (usize, usize) {
    let n = c + 1;
    let k = (usize::BITS - 1 - n.leading_zeros()) as usize;
    (k, n - (1 << k))
}

impl Directory {
    /// An empty directory for the pool tagged `tag` (0 for a table tested
    /// alone, whose handles are untagged).
    pub(crate) fn new(tag: u8) -> Self {
        Directory {
            tag,
            segments: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
        }
    }

    /// Make chunk `c`'s entries findable. Called under the class lock (one
    /// publisher at a time).
    pub(super) fn publish(&self, c: usize, entries: *const Entry) {
        let (k, off) = locate(c);
        let mut seg = self.segments[k].load(Ordering::Acquire);
        if seg.is_null() {
            let fresh: Box<[AtomicPtr<Entry>]> = (0..1usize << k)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect();
            seg = Box::into_raw(fresh).cast::<AtomicPtr<Entry>>();
            self.segments[k].store(seg, Ordering::Release);
        }
        // SAFETY: segment `k` has `2^k` pointers and `off < 2^k`; it is never
        // freed before `self`.
        let slot = unsafe { &*seg.add(off) };
        slot.store(entries.cast_mut(), Ordering::Release);
    }

    /// The entry of `slot`, if its chunk was ever made.
    fn entry(&self, slot: u32) -> Option<&Entry> {
        let (c, i) = split(slot);
        let (k, off) = locate(c);
        let seg = self.segments.get(k)?.load(Ordering::Acquire);
        if seg.is_null() {
            return None;
        }
        // SAFETY: as in `publish`: in bounds, and alive as long as `self`.
        let entries = unsafe { &*seg.add(off) }.load(Ordering::Acquire);
        if entries.is_null() {
            return None;
        }
        // SAFETY: a published chunk has `CHUNK` initialised entries (the
        // `Acquire` above pairs with `publish`'s `Release`), `i < CHUNK`, and
        // it is not freed while the directory lives.
        Some(unsafe { &*entries.add(i) })
    }

    /// Mark a live handle dying, without the class lock: the deferred free's
    /// first step. Exactly one of any number of racing marks (or a mark and
    /// a locked free) of one handle wins; the others get the error a freed
    /// handle gets.
    pub(crate) fn mark_dying(&self, h: Handle) -> Result<()> {
        h.check_pool(self.tag)?;
        let e = self
            .entry(h.slot())
            .ok_or_else(|| h.fault(HandleFault::UnknownSlot))?;
        mark(e, h).map(drop)
    }

    pub(super) fn metadata_bytes(&self) -> usize {
        (0..SEGMENTS)
            .filter(|&k| !self.segments[k].load(Ordering::Relaxed).is_null())
            .map(|k| (1usize << k) * std::mem::size_of::<AtomicPtr<Entry>>())
            .sum()
    }
}

impl Drop for Directory {
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
