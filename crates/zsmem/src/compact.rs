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
//! **Trimming** (`PoolConfig::trim_pages`, on by default) goes further than
//! the kernel can. A zspage is a range of our address space, so it need not
//! be all or nothing: objects are allocated lowest first, a zspage commits
//! its pages as objects reach into them, and whenever objects leave a
//! zspage (moved, or by compaction inside it) the pages above its highest
//! remaining object go back to the OS (`madvise(MADV_DONTNEED)`, under the
//! class lock, before any of those pages can be committed again). So a
//! class's free slots cost memory only while they lie in committed pages,
//! and compaction runs while they add up to at least a page: it moves the
//! emptiest zspage's highest objects into the fullest zspage with room,
//! and when one partly used zspage is left, its highest objects into its
//! own lowest free slots. What a class holds beyond its objects is then
//! less than one page, not one zspage, which lets zspages be long (tail
//! waste falls with length) without paying for it in free slots.
//!
//! Readers never see an object torn or moved under them: a read holds its
//! class's lock from resolving the handle to the end of the copy, and
//! compaction moves objects only under that same lock. `Pool::compact`
//! releases the lock after every source zspage's worth of moves (for a
//! trimming class, whose zspages are longer, [`STEP_PAGES`] pages' worth),
//! so a reader waits for at most one zspage's migration.
//!
//! The automatic policy runs on the freeing thread: after a free leaves its
//! class able to give back `min_freeable_pages` pages (whole zspages' worth
//! of free slots, or with trimming pages' worth in committed pages), that
//! free also moves up to `max_moves` objects, under the lock it already
//! holds. The work per free
//! is bounded, it needs no background thread (so nothing runs when the pool
//! is idle), and compaction happens exactly where the fragmentation comes
//! from: in the classes being freed from.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::class::{Class, Migration};
use crate::os::PageSource;

/// Pages' worth of objects a trimming class moves per lock hold in
/// `Pool::compact` (its zspages are up to 32 pages long).
pub(crate) const STEP_PAGES: usize = 8;

/// Objects `Pool::compact` moves per lock hold: one zspage's worth (the
/// kernel's unit), or for a trimming class [`STEP_PAGES`] pages' worth.
pub(crate) fn step_budget(class: &Class) -> usize {
    let objs = class.info.objs_per_zspage;
    if class.trims() {
        (STEP_PAGES * class.page_size() / class.info.size).clamp(1, objs)
    } else {
        objs
    }
}

/// When the pool compacts by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
#[non_exhaustive]
pub enum CompactionPolicy {
    /// Only when asked, through `Pool::compact` (the kernel's behaviour:
    /// zram compacts on request or under memory pressure).
    Off,
    /// After a free, when compaction could give back at least
    /// `min_freeable_pages` pages of its class (in whole zspages, the
    /// kernel's `freeable`, or with `trim_pages` in pages), that free moves
    /// up to `max_moves` objects of the class.
    Auto {
        /// Pages compaction must be able to give back before it runs.
        min_freeable_pages: usize,
        /// Most objects moved by one free.
        max_moves: usize,
    },
}

/// In words, for a reader: `off (on request only)`, or `automatic (...)`.
impl std::fmt::Display for CompactionPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompactionPolicy::Off => f.write_str("off (on request only)"),
            CompactionPolicy::Auto {
                min_freeable_pages,
                max_moves,
            } => write!(
                f,
                "automatic (a free that leaves {min_freeable_pages} page(s) to give back moves up to {max_moves} objects)"
            ),
        }
    }
}

impl Default for CompactionPolicy {
    /// Compact as soon as a class could give back a page (a zspage without
    /// trimming), a few dozen objects (tens of KiB of copying) per free at
    /// most.
    fn default() -> Self {
        CompactionPolicy::Auto {
            min_freeable_pages: 1,
            max_moves: 32,
        }
    }
}

/// What compaction has done since the pool was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct CompactionStats {
    /// Pages returned by compaction (zram's `pages_compacted`), net of the
    /// pages it committed in destination zspages (with `trim_pages`).
    pub pages_compacted: u64,
    /// Pages compaction committed in destination zspages (with
    /// `trim_pages`; already subtracted from `pages_compacted`).
    pub pages_committed: u64,
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
    pages_freed: AtomicU64,
    pages_committed: AtomicU64,
    objects_moved: AtomicU64,
    bytes_copied: AtomicU64,
    steps: AtomicU64,
    max_lock_hold_ns: AtomicU64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> CompactionStats {
        CompactionStats {
            pages_compacted: self
                .pages_freed
                .load(Ordering::Relaxed)
                .saturating_sub(self.pages_committed.load(Ordering::Relaxed)),
            pages_committed: self.pages_committed.load(Ordering::Relaxed),
            objects_moved: self.objects_moved.load(Ordering::Relaxed),
            bytes_copied: self.bytes_copied.load(Ordering::Relaxed),
            steps: self.steps.load(Ordering::Relaxed),
            max_lock_hold_ns: self.max_lock_hold_ns.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn record(&self, m: Migration, held_ns: u64) {
        self.pages_freed
            .fetch_add(m.pages_freed as u64, Ordering::Relaxed);
        self.pages_committed
            .fetch_add(m.pages_committed as u64, Ordering::Relaxed);
        self.objects_moved
            .fetch_add(m.objects as u64, Ordering::Relaxed);
        self.bytes_copied
            .fetch_add(m.bytes as u64, Ordering::Relaxed);
        self.steps.fetch_add(1, Ordering::Relaxed);
        self.max_lock_hold_ns.fetch_max(held_ns, Ordering::Relaxed);
    }
}

/// One compaction step on a locked class: move at most `max_moves` objects,
/// from the emptiest zspages into the fullest (and, trimming, inside the
/// last partly used one), while the class could give back a page. The time
/// the step takes is recorded as a lock hold time.
pub(crate) fn step(
    class: &mut Class,
    max_moves: usize,
    src: &PageSource,
    counters: &Counters,
) -> Migration {
    let started = Instant::now();
    let mut total = Migration::default();
    // Parked slots are free slots: compaction fills and empties zspages
    // with them freed.
    class.unpark_all(src);
    while total.objects < max_moves && class.compaction_due(1) {
        // Without trimming, a zspage's worth of free slots means at least
        // two non-full zspages: a destination and a source. With trimming,
        // a page's worth of free committed slots in a single partly used
        // zspage means free slots below its highest object, or committed
        // pages above it.
        let Some(to) = class.fullest_with_room() else {
            break;
        };
        let budget = max_moves - total.objects;
        let m = match class.emptiest_except(to) {
            Some(from) => {
                let m = class.migrate(from, to, budget, src);
                if m.blocked && !m.released && m.objects < budget && class.trims() {
                    // The destination needs a page the memory limit refuses:
                    // the source can still fill its own holes and give back
                    // its top pages.
                    let within = class.migrate(from, from, budget - m.objects, src);
                    Migration {
                        objects: m.objects + within.objects,
                        bytes: m.bytes + within.bytes,
                        pages_freed: m.pages_freed + within.pages_freed,
                        ..m
                    }
                } else {
                    m
                }
            }
            None if class.trims() => class.migrate(to, to, budget, src),
            None => break,
        };
        if m.objects == 0 && m.pages_freed == 0 {
            break;
        }
        total.objects += m.objects;
        total.bytes += m.bytes;
        total.pages_freed += m.pages_freed;
        total.pages_committed += m.pages_committed;
    }
    let held = started.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
    counters.record(total, held);
    total
}
