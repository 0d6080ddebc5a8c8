//! Copies of resident units: which units installed from their slot keep
//! the slot (installed write-protected, **clean**: evicting them again only
//! drops them) and which give it up (installed writable, **dirty**: their
//! next eviction compresses them again, as zram's swap-in frees its slot).
//!
//! `RegionConfig::keep_copies` is the most bytes of stored objects kept as
//! copies of resident units (`copy_bytes`, counted per unit in
//! `Unit::copy`, changed only under the unit's lock): a unit keeps its copy
//! when it fits (**admission**, at install); when no room for another unit's
//! copy is left, the clock's hand discards the copies of the units it
//! passes with credit (**trim**: they stay resident at least one more
//! sweep, so their copies would sit the longest), which makes room for the
//! copies of units installed since. An empty or same-filled slot costs no
//! pool memory and is kept whenever copies are kept at all (and a unit
//! never written, installed as zeros, keeps its empty slot in every case).

use std::sync::atomic::Ordering;

use super::Shared;
use super::policy::Unit;
use super::stats::add;
use crate::store::SlotInfo;

/// Bytes of pool memory slot `index` holds (0: empty or same-filled).
fn stored_len(sh: &Shared, index: usize) -> u64 {
    match sh.store.slot_info(index) {
        Ok(SlotInfo::Stored { len, .. }) => len as u64,
        _ => 0,
    }
}

/// Unit `index` (locked as `u`, resident from now on, its slot current)
/// may keep its slot as its copy: counts the copy and returns `true` if it
/// fits within `keep_copies`.
pub(super) fn admit(sh: &Shared, index: usize, u: &mut Unit) -> bool {
    debug_assert_eq!(u.copy, 0);
    if sh.keep_copies == 0 {
        return false;
    }
    let len = stored_len(sh, index);
    if len == 0 {
        return true;
    }
    let fits = sh
        .counters
        .copy_bytes
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
            held.checked_add(len).filter(|&h| h <= sh.keep_copies)
        })
        .is_ok();
    if fits {
        // A stored object is at most a unit (64 KiB): it fits a u32.
        u.copy = len as u32;
    }
    fits
}

/// The copy unit `u` held is no longer a copy of a resident unit (the unit
/// was dropped and the slot is now its only copy, or the slot was
/// discarded): uncount it.
pub(super) fn release(sh: &Shared, u: &mut Unit) {
    if u.copy > 0 {
        sh.counters
            .copy_bytes
            .fetch_sub(u64::from(u.copy), Ordering::Relaxed);
        u.copy = 0;
    }
}

/// Unit `index` (locked as `u`, resident) no longer has a copy, if it
/// had one: uncount it and discard its slot (a write came, the program
/// dropped a page, or the copy is not kept).
pub(super) fn forget(sh: &Shared, index: usize, u: &mut Unit) {
    if u.stored {
        release(sh, u);
        u.stored = false;
        let _ = sh.store.discard(index, 1);
    }
}

/// Give up resident unit `index`'s copy (locked as `u`, clean): discard
/// its slot, lift the write protection; it is dirty from now on. A failed
/// ioctl leaves it protected: its next write traps and finds no copy, as
/// after a write fault.
pub(super) fn discard(sh: &Shared, index: usize, u: &mut Unit) {
    forget(sh, index, u);
    add(&sh.counters.copies_dropped, 1);
    if sh
        .uffd
        .write_protect(sh.unit_start(index), sh.unit, false)
        .is_err()
    {
        add(&sh.counters.errors, 1);
    }
}

/// No room is left for another unit's copy: the hand trims copies as it
/// passes units (never when copies are kept without a cap).
pub(super) fn full(sh: &Shared) -> bool {
    sh.keep_copies != u64::MAX
        && sh.counters.copy_bytes.load(Ordering::Relaxed) + sh.unit as u64 > sh.keep_copies
}
