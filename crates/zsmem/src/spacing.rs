//! Adaptive class spacing: while few objects of a size class are alive, its
//! requests go to a coarser class, so a sparse class does not keep a page
//! of its own.
//!
//! Every class in use keeps up to a page beyond its objects (the free slots
//! and the tail of its last committed page, see `compact.rs`): on a pool of
//! 20 MB over ~240 classes that floor is most of the overhead, while on a
//! pool of 500 MB it is nothing. Classes 16 bytes apart cost little
//! rounding but many floors; classes 64 bytes apart the reverse. So the
//! spacing follows the load, class by class:
//!
//! - every `grid`-th logical class is an *anchor* (class `i` rounds up to
//!   anchor `ceil(i / grid) * grid`);
//! - a request whose class has fewer than `threshold` live objects goes to
//!   its anchor's physical class; once the class has that many, to its own;
//! - `threshold` weighs the two costs: the floor a class of its own costs,
//!   counted as a page and a slot (about twice its average, half a page and
//!   half a slot: a class that just earned its slots keeps part of its
//!   objects in the anchor, and both keep a floor), over the extra rounding
//!   an object pays in the anchor's larger slot. A class far from its
//!   anchor (large extra) earns its own slots sooner.
//!
//! Measured with `zsmem compare --contestants zsmem` on the Go tree, the
//! Python 3.12 library and linux-source-6.1 (pool overhead at the worst
//! step): grid 1 (off) 4.15% / - / 1.33%; grid 2 with this threshold 2.96%
//! / 2.60% / 1.37%; grid 4: 3.03% / 2.70% / 1.71%; half this threshold at
//! grid 2: 3.70% on the Go tree. Grid 2 is the default
//! (`PoolConfig::class_grid`).
//!
//! Objects stay where they were put (no object moves for this): objects
//! stored while their class was sparse keep the larger slot until freed.
//! Huge classes are never anchors for smaller ones (an object stored raw in
//! a page of its own would waste far more than it saves).
//!
//! The live counts are relaxed atomics per logical class, changed on every
//! allocation and free: a count only steers placement, so a stale read
//! costs at most a slot of rounding, never correctness.

use crate::size_class::SizeClassTable;
use crate::sync::atomic::{AtomicU32, Ordering};

/// Per logical class: where its requests go while it is sparse.
#[derive(Debug)]
pub(crate) struct Spacing {
    /// Physical class index used while the class is sparse.
    anchor: Box<[u16]>,
    /// Live objects from which the class's own physical class is used.
    threshold: Box<[u32]>,
    /// Live objects whose request size maps to the class, wherever placed.
    live: Box<[AtomicU32]>,
}

impl Spacing {
    /// Spacing for `table` with every `grid`-th class an anchor; `None` for
    /// a grid of 1 (every class its own: the kernel's behaviour).
    pub(crate) fn new(table: &SizeClassTable, grid: usize, page_size: usize) -> Option<Spacing> {
        if grid <= 1 {
            return None;
        }
        let classes = table.classes();
        let last = classes.len() - 1;
        let (anchor, threshold): (Vec<u16>, Vec<u32>) = classes
            .iter()
            .map(|c| {
                let own = &classes[c.physical];
                let a = &classes[classes[(c.index.div_ceil(grid) * grid).min(last)].physical];
                if a.index == own.index || a.is_huge() || own.is_huge() {
                    return (own.index as u16, 0);
                }
                let extra = (a.size - own.size).max(1);
                let floor = page_size + own.size;
                (a.index as u16, floor.div_ceil(extra) as u32)
            })
            .unzip();
        Some(Spacing {
            anchor: anchor.into(),
            threshold: threshold.into(),
            live: classes.iter().map(|_| AtomicU32::new(0)).collect(),
        })
    }

    /// The physical class a new object of logical class `logical` goes to,
    /// `own` being the class's own physical class; counts the object.
    pub(crate) fn place(&self, logical: usize, own: usize) -> usize {
        let live = self.live[logical].fetch_add(1, Ordering::Relaxed);
        if live >= self.threshold[logical] {
            own
        } else {
            usize::from(self.anchor[logical])
        }
    }

    /// Undo [`Spacing::place`]'s count: the object was not made.
    pub(crate) fn unplace(&self, logical: usize) {
        self.live[logical].fetch_sub(1, Ordering::Relaxed);
    }

    /// An object of logical class `logical` was freed.
    pub(crate) fn freed(&self, logical: usize) {
        self.live[logical].fetch_sub(1, Ordering::Relaxed);
    }

    /// Heap bytes of the tables.
    pub(crate) fn metadata_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.anchor)
            + std::mem::size_of_val(&*self.threshold)
            + std::mem::size_of_val(&*self.live)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::size_class::{ChainRule, SizeClassConfig};

    fn table() -> SizeClassTable {
        SizeClassTable::new(SizeClassConfig {
            page_size: 4096,
            chain_size: 32,
            class_delta: 16,
            chain_rule: ChainRule::Trim,
        })
        .unwrap()
    }

    #[test]
    fn sparse_classes_use_their_anchor_until_they_earn_their_own() {
        let t = table();
        let s = Spacing::new(&t, 4, 4096).unwrap();
        // Logical class 61 (1008 bytes) rounds up to anchor 64 (1056).
        let c = &t.classes()[61];
        let own = c.physical;
        let anchor = t.classes()[t.classes()[64].physical].index;
        assert_ne!(own, anchor);
        let threshold = s.threshold[61] as usize;
        // (4096 + 1008) / (1056 - 1008) objects: a page and a slot of floor
        // in rounding.
        let (own_size, anchor_size) = (t.classes()[own].size, t.classes()[anchor].size);
        assert_eq!(
            threshold,
            (4096 + own_size).div_ceil(anchor_size - own_size)
        );
        for _ in 0..threshold {
            assert_eq!(s.place(61, own), anchor);
        }
        assert_eq!(s.place(61, own), own, "the class has earned its own slots");
        s.freed(61);
        s.freed(61);
        assert_eq!(s.place(61, own), anchor, "sparse again");
        // An anchor class is always its own.
        let a = &t.classes()[64];
        assert_eq!(s.place(64, a.physical), a.physical);
    }

    #[test]
    fn huge_classes_are_never_anchors_and_grid_one_is_off() {
        let t = table();
        assert!(Spacing::new(&t, 1, 4096).is_none());
        let s = Spacing::new(&t, 4, 4096).unwrap();
        for c in t.classes() {
            let a = &t.classes()[usize::from(s.anchor[c.index])];
            assert!(a.size >= t.classes()[c.physical].size);
            if !t.classes()[c.physical].is_huge() {
                assert!(!a.is_huge(), "class {} sent to the huge class", c.index);
            }
        }
    }
}
