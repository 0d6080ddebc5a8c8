//! Compaction: move objects out of the emptiest zspages of a class into the
//! fullest ones, so the emptied zspages go back to the OS.
//!
//! The kernel's semantics are the baseline: per class, the destination is
//! the first zspage of the fullest non-full group, the source the first of
//! the emptiest group; objects move until the source is empty (it is freed
//! and its pages counted as compacted) or the destination is full (the next
//! fullest takes over); a class is done when it could not free a whole
//! zspage any more (`freeable` is 0).
//!
//! Readers never see an object torn or moved under them: a read holds its
//! class's lock from resolving the handle to the end of the copy, and
//! compaction moves objects only under that same lock. `Pool::compact`
//! releases the lock after every [`STEP_ZSPAGES`] source zspage's worth of
//! moves, so a reader waits for at most one zspage's migration.
//!
//! The automatic policy runs on the freeing thread: after a free leaves its
//! class able to free `min_freeable_zspages` zspages, that free also moves up
//! to `max_moves` objects, under the lock it already holds. The work per free
//! is bounded, it needs no background thread (so nothing runs when the pool
//! is idle), and compaction happens exactly where the fragmentation comes
//! from: in the classes being freed from.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde::Serialize;

use crate::class::{Class, Migration};
use crate::os::PageSource;

/// Source zspages emptied per lock hold by `Pool::compact`.
pub(crate) const STEP_ZSPAGES: usize = 1;

/// When the pool compacts by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CompactionPolicy {
    /// Only when asked, through `Pool::compact` (the kernel's behaviour:
    /// zram compacts on request or under memory pressure).
    Off,
    /// After a free, when its class could free at least
    /// `min_freeable_zspages` whole zspages, that free moves up to
    /// `max_moves` objects of the class.
    Auto {
        /// Zspages' worth of free slots a class may hold before compacting.
        min_freeable_zspages: usize,
        /// Most objects moved by one free.
        max_moves: usize,
    },
}

impl Default for CompactionPolicy {
    /// Compact as soon as a class could free one zspage, a few dozen objects
    /// (tens of KiB of copying) per free at most.
    fn default() -> Self {
        CompactionPolicy::Auto {
            min_freeable_zspages: 1,
            max_moves: 32,
        }
    }
}

/// What compaction has done since the pool was made.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CompactionStats {
    /// Pages returned by compaction (zram's `pages_compacted`).
    pub pages_compacted: u64,
    /// Objects moved.
    pub objects_moved: u64,
    /// Object bytes copied.
    pub bytes_copied: u64,
    /// Compaction steps run (automatic ones and `Pool::compact`'s).
    pub steps: u64,
    /// Longest time one compaction step held a class lock, in nanoseconds.
    pub max_lock_hold_ns: u64,
}

impl CompactionStats {
    /// Bytes copied per byte of memory returned (0 if none returned).
    pub fn copy_per_freed_byte(&self, page_size: usize) -> f64 {
        let freed = self.pages_compacted as f64 * page_size as f64;
        if freed == 0.0 {
            0.0
        } else {
            self.bytes_copied as f64 / freed
        }
    }
}

/// Counters shared by all classes; relaxed atomics, as they only count.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pages_compacted: AtomicU64,
    objects_moved: AtomicU64,
    bytes_copied: AtomicU64,
    steps: AtomicU64,
    max_lock_hold_ns: AtomicU64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> CompactionStats {
        CompactionStats {
            pages_compacted: self.pages_compacted.load(Ordering::Relaxed),
            objects_moved: self.objects_moved.load(Ordering::Relaxed),
            bytes_copied: self.bytes_copied.load(Ordering::Relaxed),
            steps: self.steps.load(Ordering::Relaxed),
            max_lock_hold_ns: self.max_lock_hold_ns.load(Ordering::Relaxed),
        }
    }

    fn record(&self, m: Migration, held_ns: u64) {
        self.pages_compacted
            .fetch_add(m.pages_freed as u64, Ordering::Relaxed);
        self.objects_moved
            .fetch_add(m.objects as u64, Ordering::Relaxed);
        self.bytes_copied
            .fetch_add(m.bytes as u64, Ordering::Relaxed);
        self.steps.fetch_add(1, Ordering::Relaxed);
        self.max_lock_hold_ns.fetch_max(held_ns, Ordering::Relaxed);
    }
}

/// One compaction step on a locked class: move at most `max_moves` objects,
/// from the emptiest zspages into the fullest, while the class could free a
/// whole zspage. The time the step takes is recorded as a lock hold time.
pub(crate) fn step(
    class: &mut Class,
    max_moves: usize,
    src: &PageSource,
    counters: &Counters,
) -> Migration {
    let started = Instant::now();
    let mut total = Migration::default();
    while total.objects < max_moves && class.freeable_pages() > 0 {
        // freeable > 0 means a zspage's worth of free slots exists, so there
        // are at least two non-full zspages: a destination and a source.
        let Some(to) = class.fullest_with_room() else {
            break;
        };
        let Some(from) = class.emptiest_except(to) else {
            break;
        };
        let m = class.migrate(from, to, max_moves - total.objects, src);
        if m.objects == 0 {
            break;
        }
        total.objects += m.objects;
        total.bytes += m.bytes;
        total.pages_freed += m.pages_freed;
    }
    let held = started.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
    counters.record(total, held);
    total
}
