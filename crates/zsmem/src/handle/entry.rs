//! One slot of a handle table: the 8-byte atomic word drawn in the module
//! comment of `handle`, its encodings, the check of a handle against it,
//! and the dying mark (the one change made to it without the class lock).

use super::{DYING, GEN_SHIFT, Handle, LEN_SHIFT, LIVE, MAX_GENERATION, PLACE_MASK};
use crate::error::{HandleFault, Result};
use crate::sync::atomic::{AtomicU64, Ordering};

/// One slot of a handle table: the word drawn in the module comment.
///
/// Atomic, and only ever reached through a shared reference: the
/// deferred-free path reads and marks the word through the directory while
/// the class lock's holder updates it, and a `&mut Entry` would claim it
/// exclusively (undefined behaviour beside a concurrent reader, as Miri
/// reports). Accesses under the class lock that order nothing beyond the
/// lock are `Relaxed`: plain loads and stores on x86 and ARM.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(super) word: AtomicU64,
}

// The point of the layout: 8 bytes a slot (loom's atomics are larger).
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Entry>() == 8);

impl Entry {
    /// The word, for a lock-free read (`optimistic.rs`).
    pub(crate) fn load(&self, order: Ordering) -> u64 {
        self.word.load(order)
    }

    /// A free entry of generation `generation` whose free-list successor is
    /// `next`.
    pub(super) fn free(generation: u32, next: u32) -> Entry {
        Entry {
            word: AtomicU64::new(free_word(generation, next)),
        }
    }
}

/// The word of a free entry.
pub(super) fn free_word(generation: u32, next: u32) -> u64 {
    debug_assert!(generation != 0 && generation <= MAX_GENERATION);
    (u64::from(generation) << GEN_SHIFT) | u64::from(next)
}

/// The word of a live entry (not dying).
pub(super) fn live_word(generation: u32, len: usize, place: u32) -> u64 {
    debug_assert!(generation != 0 && generation <= MAX_GENERATION);
    debug_assert!((1..=1 << 16).contains(&len));
    LIVE | (u64::from(generation) << GEN_SHIFT)
        | (((len - 1) as u64) << LEN_SHIFT)
        | u64::from(place)
}

/// The entry's generation: of its object when live, of the next object when
/// free, 0 when retired.
pub(super) fn generation_of(word: u64) -> u32 {
    (word >> GEN_SHIFT) as u32 & MAX_GENERATION
}

/// The place of a live word, the next free slot of a free one.
pub(super) fn place_of(word: u64) -> u32 {
    (word & PLACE_MASK) as u32
}

pub(super) fn len_of(word: u64) -> usize {
    usize::from((word >> LEN_SHIFT) as u16) + 1
}

/// Check an entry's word against a handle: live, of the handle's
/// generation, and dying exactly when `dying` (a dying handle is dead for
/// every caller but the drain).
pub(super) fn check_state(h: Handle, word: u64, dying: bool) -> Result<()> {
    let g = h.generation();
    if g == 0 {
        return Err(h.fault(HandleFault::Null));
    }
    let current = generation_of(word);
    if word & LIVE == 0 {
        // The slot's generation moved on when it was freed (to 0 when it
        // was retired after the last one).
        let freed_next = if g == MAX_GENERATION { 0 } else { g + 1 };
        let fault = if current == freed_next {
            HandleFault::Freed
        } else {
            HandleFault::Stale
        };
        return Err(h.fault(fault));
    }
    if current != g {
        return Err(h.fault(HandleFault::Stale));
    }
    if (word & DYING != 0) != dying {
        let fault = if dying {
            HandleFault::Stale
        } else {
            HandleFault::Freed
        };
        return Err(h.fault(fault));
    }
    Ok(())
}

/// Set `DYING` on `e` if it is live, of `h`'s generation and not dying yet;
/// returns the word as marked. Every free goes through here (the locked one
/// too), so of any number of racing frees of one handle exactly one
/// succeeds.
pub(super) fn mark(e: &Entry, h: Handle) -> Result<u64> {
    // Acquire: pairs with the Release of the last state transition (a free),
    // as in `HandleTable::get`.
    let mut word = e.word.load(Ordering::Acquire);
    loop {
        check_state(h, word, false)?;
        // The whole word is compared, so the swap fails when anything in it
        // changed since the load: another mark won, the slot was freed, or a
        // relocate under the class lock moved the object. Then the state is
        // checked again on the new word; a relocate alone leaves it valid,
        // so a mark is never refused because the object moved.
        //
        // AcqRel: the drain that later frees this slot learns of the mark
        // through the deferred-free shard (Release/Acquire there); ordering
        // here keeps the mark and the state's history coherent for anyone who
        // reads the word directly.
        match e
            .word
            .compare_exchange_weak(word, word | DYING, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return Ok(word | DYING),
            Err(now) => word = now,
        }
    }
}

// The magazine's changes (`magazine.rs`), made without the class lock in a
// class whose frees park slots in threads' magazines. There an entry that
// is not live and has `PARKED` set is parked in a magazine (never on the
// class's own list: such a class parks nothing there), and its length
// field keeps the length of the object freed into it (the class counted
// that object; it uncounts it when it takes the slot back). A live entry
// with `DYING` set is *reviving*: its magazine's thread took it and is
// writing the new object; no one else changes its state.

/// The word of an entry parked in a magazine: the next object's
/// generation, the freed object's length and place.
pub(super) fn parked_word(generation: u32, len: usize, place: u32) -> u64 {
    (live_word(generation, len, place) & !LIVE) | DYING
}

/// Whether `word` is parked (in a magazine, in a class with magazines).
pub(super) fn is_parked(word: u64) -> bool {
    word & (LIVE | DYING) == DYING
}

/// Whether `word` is parked, at `generation` if given.
pub(super) fn is_parked_at(word: u64, generation: Option<u32>) -> bool {
    is_parked(word) && generation.is_none_or(|g| g == generation_of(word))
}

/// A magazine's free: change `e` from live (`h`'s generation, not dying)
/// to parked at the next generation, its place and length kept, by one
/// compare-and-swap: of two racing frees of one handle (or a free racing
/// the class lock's holder) exactly one succeeds, and the others get the
/// error of a freed handle. Returns the object's length, or `None` with
/// nothing changed when the generation is the last (the locked free then
/// retires the slot) or `admit` refuses the object's place.
pub(super) fn park(e: &Entry, h: Handle, admit: impl Fn(u32) -> bool) -> Result<Option<usize>> {
    // Acquire: as in `mark`.
    let mut word = e.word.load(Ordering::Acquire);
    loop {
        check_state(h, word, false)?;
        let generation = generation_of(word);
        if generation == MAX_GENERATION || !admit(place_of(word)) {
            return Ok(None);
        }
        let parked = parked_word(generation + 1, len_of(word), place_of(word));
        // The whole word is compared, as in `mark`: a relocation by the
        // lock's holder makes the swap fail and the state is checked again
        // on the new word. Release: whoever takes the parked slot (a
        // revive, the lock's holder) sees the free complete.
        match e
            .word
            .compare_exchange_weak(word, parked, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return Ok(Some(len_of(word))),
            Err(now) => word = now,
        }
    }
}

/// A magazine's allocation: change `e` from `expected` (parked at
/// `generation`, as loaded by the caller, who found the object's address
/// from it) to reviving with the new object's length (or straight to live
/// when nothing is to be written), by one compare-and-swap. `Err` with the
/// word found when it was not `expected`: the lock's holder took the slot
/// back, or relocated it (then the caller may look again).
pub(super) fn revive(
    e: &Entry,
    expected: u64,
    len: usize,
    writing: bool,
) -> std::result::Result<u64, u64> {
    debug_assert!(is_parked(expected));
    let live = live_word(generation_of(expected), len, place_of(expected));
    let new = if writing { live | DYING } else { live };
    // Acquire: the taker sees what the free that parked the slot (and any
    // relocation since) wrote. The bytes written next are ordered after
    // this by the `Release` fence every write of class memory begins with.
    e.word
        .compare_exchange(expected, new, Ordering::Acquire, Ordering::Acquire)
}

/// End a revive: the reviving entry (its object written) becomes live.
/// One read-modify-write that clears `DYING` alone, so a relocation by the
/// lock's holder meanwhile is kept.
pub(super) fn revived(e: &Entry) {
    // Release: whoever acquires the live word (the lock's holder waiting
    // for it, before it moves the object) sees the object's bytes.
    let before = e.word.fetch_and(!DYING, Ordering::Release);
    debug_assert_eq!(before & (LIVE | DYING), LIVE | DYING, "not reviving");
}
