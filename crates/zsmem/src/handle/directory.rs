//! The lock-free handle directory: chunk number to the chunk's entries, for
//! deferred free, which marks an entry dying without the class lock, for
//! lock-free reads, and for magazines (`magazine.rs`), which park and
//! revive entries without it.

use super::entry::{Entry, check_state, is_parked_at, len_of, mark, park, revive, revived};
use super::{CHUNK_BITS, Handle, SLOT_BITS, split};
use crate::error::{HandleFault, Result};
use crate::grow::GrowOnly;
use crate::sync::atomic::Ordering;

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
    /// Whether frees mark entries through it (deferred free): the class
    /// lock's holder then claims an entry by compare-and-swap; without
    /// such marks (a directory for lock-free reads alone, whose readers
    /// never write an entry) a load and a store do.
    marks: bool,
    chunks: GrowOnly<Entry, SEGMENTS>,
}

impl std::fmt::Debug for Directory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Directory").finish_non_exhaustive()
    }
}

impl Directory {
    /// An empty directory for the pool tagged `tag` (0 for a table tested
    /// alone, whose handles are untagged).
    pub(crate) fn new(tag: u8) -> Self {
        Directory {
            tag,
            marks: true,
            chunks: GrowOnly::new(),
        }
    }

    /// A directory only lock-free readers use (no deferred free marks
    /// through it).
    pub(crate) fn for_reads(tag: u8) -> Self {
        Directory {
            marks: false,
            ..Directory::new(tag)
        }
    }

    /// Whether deferred frees mark entries through this directory.
    pub(super) fn marks(&self) -> bool {
        self.marks
    }

    /// Make chunk `c`'s entries findable. Called under the class lock (one
    /// publisher at a time).
    pub(super) fn publish(&self, c: usize, entries: *const Entry) {
        self.chunks.publish(c, entries.cast_mut());
    }

    /// The entry of `slot`, if its chunk was ever made.
    #[inline]
    pub(crate) fn entry(&self, slot: u32) -> Option<&Entry> {
        let (c, i) = split(slot);
        let entries = self.chunks.get(c);
        if entries.is_null() {
            return None;
        }
        // SAFETY: a published chunk has `CHUNK` initialised entries (the
        // map's `Acquire` pairs with its `Release`), `i < CHUNK`, and it is
        // not freed while the directory lives.
        Some(unsafe { &*entries.add(i) })
    }

    /// Mark a live handle dying, without the class lock: the deferred free's
    /// first step. Exactly one of any number of racing marks (or a mark and
    /// a locked free) of one handle wins; the others get the error a freed
    /// handle gets.
    pub(crate) fn mark_dying(&self, h: Handle) -> Result<()> {
        debug_assert!(self.marks, "a read-only directory marks nothing");
        h.check_pool(self.tag)?;
        let e = self
            .entry(h.slot())
            .ok_or_else(|| h.fault(HandleFault::UnknownSlot))?;
        mark(e, h).map(drop)
    }

    /// The length of `h`'s object if `h` is dying (a deferred free not
    /// drained yet): for the statistics of pending frees.
    pub(crate) fn dying_len(&self, h: Handle) -> Option<usize> {
        let word = self.entry(h.slot())?.load(Ordering::Acquire);
        check_state(h, word, true).ok().map(|()| len_of(word))
    }

    /// A magazine's free (`magazine.rs`): park live `h`'s slot by one
    /// compare-and-swap, without the class lock. `Ok(Some(len))` with the
    /// freed object's length; `Ok(None)` when the slot cannot be parked
    /// here (its generation is the last, `admit` refuses its place, or its
    /// chunk was never made):
    /// then the locked free decides; `Err` for a freed or stale handle.
    pub(crate) fn park(&self, h: Handle, admit: impl Fn(u32) -> bool) -> Result<Option<usize>> {
        h.check_pool(self.tag)?;
        match self.entry(h.slot()) {
            Some(e) => park(e, h, admit),
            None => Ok(None),
        }
    }

    /// `slot`'s entry and word if it is parked at `generation` (for a
    /// magazine's allocation; `Acquire`, as every read of an entry's
    /// state).
    pub(crate) fn parked(&self, slot: u32, generation: u32) -> Option<(&Entry, u64)> {
        let e = self.entry(slot)?;
        let word = e.load(Ordering::Acquire);
        is_parked_at(word, Some(generation)).then_some((e, word))
    }

    /// A magazine's allocation: revive parked `e` from `expected` for an
    /// object of `len` bytes (reviving while `writing`, else live at once);
    /// `Err` with the word found if it was not `expected`.
    pub(crate) fn revive(
        e: &Entry,
        expected: u64,
        len: usize,
        writing: bool,
    ) -> std::result::Result<(), u64> {
        revive(e, expected, len, writing).map(drop)
    }

    /// The object of reviving `e` is written: the entry becomes live.
    pub(crate) fn revived(e: &Entry) {
        revived(e);
    }

    pub(super) fn metadata_bytes(&self) -> usize {
        self.chunks.metadata_bytes()
    }
}
