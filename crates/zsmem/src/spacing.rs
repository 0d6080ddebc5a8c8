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
//! - the classes at multiples of 2, 4, .. `grid` are *anchors*: class `i`
//!   has the levels `i` itself, then `ceil(i / 2) * 2`, `ceil(i / 4) * 4`,
//!   .. up to `ceil(i / grid) * grid`;
//! - a level is used when the live objects of its window (the logical
//!   classes it is the anchor for, `i` alone at level 0) reach its
//!   threshold, else the next level is tried; the last level is always
//!   used;
//! - a level's threshold weighs the two costs: the floor a class of its
//!   own costs, counted as a page and a slot (about twice its average,
//!   half a page and half a slot: a class that just earned its slots keeps
//!   part of its objects in the anchor, and both keep a floor), over the
//!   extra rounding an object pays one level up. A class far from its
//!   anchor (large extra) earns its own slots sooner.
//!
//! Measured with `zsmem compare --contestants zsmem` (pool overhead at the
//! worst step; Go tree / Python 3.12 library / perl / node_modules /
//! /usr/include / cargo registry / linux-source-6.1 with the reference's
//! steps):
//!
//! | `class_grid` | Go | Python | perl | node | include | cargo | linux |
//! |---|---|---|---|---|---|---|---|
//! | 1 (off) | 4.15% | | | | | | 1.33% |
//! | 2 (default) | 2.96% | 2.62% | 7.24% | 37.66% | 3.35% | 1.86% | 1.37% |
//! | 4 | 2.80% | 2.81% | 4.70% | 23.54% | 3.62% | 2.24% | 1.62% |
//! | 8 | 2.71% | 3.03% | 5.19% | 17.37% | 4.19% | 2.49% | 1.81% |
//!
//! Coarser grids help the smallest pools (perl, node_modules: a few MB)
//! and cost the large one: its first objects of each class, placed while
//! the class was sparse, stay in coarser slots. Grid 2 keeps linux-source
//! where it was. Half the threshold at grid 2 gave 3.70% on the Go tree.
//!
//! Objects stay where they were put (no object moves for this): objects
//! stored while their class was sparse keep the larger slot until freed.
//! Huge classes are never anchors for smaller ones (an object stored raw in
//! a page of its own would waste far more than it saves).
//!
//! The live counts are per logical class and per physical class its
//! objects are placed in (its own or an anchor): the count of objects of
//! logical class `i` placed in physical class `p` is written only by
//! allocations and frees in `p`, under `p`'s lock, so it is a relaxed load
//! and store there, no atomic read-modify-write; placement reads the counts
//! without any lock (relaxed loads: a stale read costs at most a slot of
//! rounding, never correctness) and sums a logical class's over the classes
//! it was placed in. A pool with class shards (one class state per thread
//! group, see `pool.rs`) keeps a row of counts per shard, a spare cache
//! line between rows, and each shard places by its own demand: two threads
//! allocating in different shards never write the same line.

use crate::size_class::SizeClassTable;
use crate::sync::atomic::{AtomicU32, Ordering};

/// One level of a class's anchors: the physical class its requests go to
/// at this level, the window of logical classes whose live objects count
/// as that level's demand, the demand from which this level is used
/// rather than the next (0: always, the last level), and which of the
/// class's counts its objects are counted in (one per distinct anchor).
#[derive(Clone, Copy, Debug)]
struct Level {
    anchor: u16,
    first: u16,
    last: u16,
    threshold: u32,
    count: u8,
}

/// Per logical class: where its requests go while it is sparse.
#[derive(Debug)]
pub(crate) struct Spacing {
    /// Every class's levels, finest first; class `i`'s are
    /// `levels[start[i]..start[i + 1]]`.
    levels: Box<[Level]>,
    start: Box<[u32]>,
    /// Per shard, a row of `row` counts: for each logical class, `per`
    /// counts, live objects whose request size maps to it, one per physical
    /// class it places them in (its levels' distinct anchors).
    live: Box<[AtomicU32]>,
    /// Counts per logical class: the most distinct anchors of any.
    per: usize,
    /// Counts per row: the classes' rounded up to whole cache lines, and a
    /// line more, so no line holds counts of two rows however the array is
    /// aligned.
    row: usize,
}

/// Counts in a cache line.
const LINE_COUNTS: usize = 64 / std::mem::size_of::<AtomicU32>();

impl Spacing {
    /// Spacing for `table` whose coarsest anchors are every `grid`-th
    /// class (a power of two): a class's anchors are the classes at
    /// multiples of 2, 4, .. `grid` at or above it. `None` for a grid of 1
    /// (every class its own: the kernel's behaviour). `shards` rows of
    /// counts (at least 1).
    pub(crate) fn new(
        table: &SizeClassTable,
        grid: usize,
        page_size: usize,
        shards: usize,
    ) -> Option<Spacing> {
        if grid <= 1 {
            return None;
        }
        debug_assert!(grid.is_power_of_two());
        let classes = table.classes();
        let last = classes.len() - 1;
        let anchor_at = |i: usize, w: usize| (i.div_ceil(w) * w).min(last);
        let mut levels = Vec::new();
        let mut start = Vec::with_capacity(classes.len() + 1);
        for c in classes {
            start.push(levels.len() as u32);
            let mut w = 1;
            loop {
                let at = anchor_at(c.index, w);
                let here = &classes[classes[at].physical];
                let level = |threshold: usize| Level {
                    anchor: here.index as u16,
                    first: (at + 1 - w.min(at + 1)) as u16,
                    last: at as u16,
                    threshold: threshold.min(u32::MAX as usize) as u32,
                    count: 0,
                };
                if w >= grid || here.is_huge() {
                    levels.push(level(0));
                    break;
                }
                let next = &classes[classes[anchor_at(c.index, 2 * w)].physical];
                if next.is_huge() {
                    levels.push(level(0));
                    break;
                }
                if next.index != here.index {
                    // Worth its own slots once the floor it costs (a page
                    // and a slot) is less than the extra rounding its
                    // objects would pay one level up.
                    let extra = next.size - here.size;
                    levels.push(level((page_size + here.size).div_ceil(extra)));
                }
                w *= 2;
            }
        }
        start.push(levels.len() as u32);
        // Each level's count: the first level with the same anchor's.
        let mut per = 1;
        for w in start.windows(2) {
            let class = &mut levels[w[0] as usize..w[1] as usize];
            let mut anchors: Vec<u16> = Vec::new();
            for l in class.iter_mut() {
                l.count = match anchors.iter().position(|&a| a == l.anchor) {
                    Some(k) => k as u8,
                    None => {
                        anchors.push(l.anchor);
                        (anchors.len() - 1) as u8
                    }
                };
            }
            per = per.max(anchors.len());
        }
        let row = (classes.len() * per).next_multiple_of(LINE_COUNTS) + LINE_COUNTS;
        Some(Spacing {
            levels: levels.into(),
            start: start.into(),
            live: (0..row * shards.max(1))
                .map(|_| AtomicU32::new(0))
                .collect(),
            per,
            row,
        })
    }

    fn levels(&self, logical: usize) -> &[Level] {
        &self.levels[self.start[logical] as usize..self.start[logical + 1] as usize]
    }

    /// Shard `shard`'s counts.
    fn live(&self, shard: usize) -> &[AtomicU32] {
        &self.live[shard * self.row..][..self.row]
    }

    /// Live objects of logical classes `first..=last` in a shard's counts
    /// `live`, wherever they were placed: a class's counts lie side by side
    /// (`per` a class), so a window's are one run of the row.
    fn live_in(&self, live: &[AtomicU32], first: usize, last: usize) -> u64 {
        live[first * self.per..(last + 1) * self.per]
            .iter()
            .map(|n| u64::from(n.load(Ordering::Relaxed)))
            .sum()
    }

    /// The physical class a new object of logical class `logical` goes to
    /// in shard `shard`: the finest level whose window has enough live
    /// objects in the shard, the new one included. It is counted once it
    /// is made ([`Spacing::counted`]).
    pub(crate) fn choose(&self, logical: usize, shard: usize) -> usize {
        let live = self.live(shard);
        let levels = self.levels(logical);
        // The last level (threshold 0) is taken without summing its window.
        // A window holds `logical`: the new object is counted in it.
        let chosen = levels.iter().find(|l| {
            l.threshold == 0
                || self.live_in(live, usize::from(l.first), usize::from(l.last)) + 1
                    >= u64::from(l.threshold)
        });
        // The last level's threshold is 0, so one is always found.
        usize::from(chosen.or(levels.last()).map_or(0, |l| l.anchor))
    }

    /// Count `delta` (1: made, -1: freed) objects of logical class
    /// `logical` in physical class `physical` of shard `shard`. The caller
    /// holds that class's lock: the one count this changes is written under
    /// it alone, so a load and a store change it (no read-modify-write).
    pub(crate) fn counted(&self, logical: usize, shard: usize, physical: usize, delta: i32) {
        // An object is placed at one of its class's levels; if the tables
        // ever disagreed, its own count would still balance.
        let level = self
            .levels(logical)
            .iter()
            .find(|l| usize::from(l.anchor) == physical);
        debug_assert!(
            level.is_some(),
            "class {logical} is never placed in {physical}"
        );
        let k = level.map_or(0, |l| usize::from(l.count));
        let n = &self.live(shard)[logical * self.per + k];
        // Two's complement: adding a negative delta's bits subtracts.
        n.store(
            n.load(Ordering::Relaxed).wrapping_add(delta as u32),
            Ordering::Relaxed,
        );
    }

    /// Heap bytes of the tables.
    pub(crate) fn metadata_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.levels)
            + std::mem::size_of_val(&*self.start)
            + std::mem::size_of_val(&*self.live)
    }
}

// Not under Miri: safe code (no unsafe in this file), 30 s of Miri a test
// for nothing.
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;
    use crate::size_class::{ChainRule, SizeClassConfig};

    impl Spacing {
        /// Place an object as an allocation does, and count it.
        fn place(&self, logical: usize, shard: usize) -> usize {
            let p = self.choose(logical, shard);
            self.counted(logical, shard, p, 1);
            p
        }
    }

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
    fn sparse_classes_climb_to_coarser_anchors_until_they_earn_their_own() {
        let t = table();
        let s = Spacing::new(&t, 8, 4096, 1).unwrap();
        let c = |i: usize| t.classes()[t.classes()[i].physical];
        // Logical class 61 (1008 bytes): its anchors are 62, 64 and 64 (the
        // multiples of 2, 4 and 8 at or above it).
        let levels = s.levels(61).to_vec();
        assert_eq!(levels.first().unwrap().anchor as usize, c(61).index);
        assert_eq!(levels.last().unwrap().anchor as usize, c(64).index);
        assert_eq!(levels.last().unwrap().threshold, 0);
        // An empty pool: the first object goes to the coarsest anchor.
        assert_eq!(s.place(61, 0), c(64).index);
        // Enough objects of class 61 alone earn it its own slots: a page
        // and a slot of floor over the 16 bytes more of class 62.
        let own = (4096 + c(61).size).div_ceil(c(62).size - c(61).size);
        while s.live_in(s.live(0), 61, 61) < own as u64 - 1 {
            s.place(61, 0);
        }
        assert_eq!(
            s.place(61, 0),
            c(61).index,
            "the class has earned its own slots"
        );
        // Two objects freed from the anchor they were placed in.
        s.counted(61, 0, c(64).index, -1);
        s.counted(61, 0, c(64).index, -1);
        assert_ne!(s.place(61, 0), c(61).index, "sparse again");
        assert_eq!(s.live_in(s.live(0), 61, 61), own as u64 - 1);
    }

    #[test]
    fn neighbours_open_an_anchor_together() {
        let t = table();
        let s = Spacing::new(&t, 8, 4096, 1).unwrap();
        let c = |i: usize| t.classes()[t.classes()[i].physical];
        // Classes 57..=60 share the level-2 anchor 60: their objects
        // together pay for its floor before any of them alone would.
        let level2 = s
            .levels(57)
            .iter()
            .find(|l| usize::from(l.last) == 60)
            .copied()
            .unwrap();
        let mut placed = 0;
        while placed < level2.threshold {
            for i in 57..=60 {
                s.place(i, 0);
                placed += 1;
            }
        }
        assert_eq!(s.place(58, 0), c(60).index, "the shared anchor is open");
    }

    #[test]
    fn each_shard_places_by_its_own_demand() {
        let t = table();
        let s = Spacing::new(&t, 8, 4096, 2).unwrap();
        let c = |i: usize| t.classes()[t.classes()[i].physical];
        let own = (4096 + c(61).size).div_ceil(c(62).size - c(61).size);
        for _ in 0..own {
            s.place(61, 1);
        }
        assert_eq!(s.place(61, 1), c(61).index, "shard 1 has earned it");
        assert_eq!(s.place(61, 0), c(64).index, "shard 0 is still sparse");
        assert!(
            s.row >= t.len() * s.per + LINE_COUNTS,
            "a spare line between rows"
        );
    }

    #[test]
    fn huge_classes_are_never_anchors_and_grid_one_is_off() {
        let t = table();
        assert!(Spacing::new(&t, 1, 4096, 1).is_none());
        let s = Spacing::new(&t, 8, 4096, 1).unwrap();
        for c in t.classes() {
            let own = t.classes()[c.physical];
            for l in s.levels(c.index) {
                let a = t.classes()[usize::from(l.anchor)];
                assert!(a.size >= own.size);
                if !own.is_huge() {
                    assert!(!a.is_huge(), "class {} sent to the huge class", c.index);
                }
            }
            assert_eq!(s.levels(c.index).last().unwrap().threshold, 0);
        }
    }

    /// Each count is written by one physical class only (under its lock):
    /// a class's objects placed in its anchor and in itself are counted
    /// apart, and summed for placement.
    #[test]
    fn a_class_counts_its_objects_apart_per_class_they_are_in() {
        let t = table();
        let s = Spacing::new(&t, 8, 4096, 1).unwrap();
        let c = |i: usize| t.classes()[t.classes()[i].physical];
        let counts: Vec<u8> = s.levels(61).iter().map(|l| l.count).collect();
        // Anchors 61 (itself), 62 and 64: a count each.
        assert_eq!(counts, vec![0, 1, 2]);
        assert!(s.per >= 3);
        s.counted(61, 0, c(61).index, 1);
        s.counted(61, 0, c(64).index, 1);
        s.counted(61, 0, c(64).index, 1);
        let at = |k: usize| s.live(0)[61 * s.per + k].load(Ordering::Relaxed);
        assert_eq!((at(0), at(1), at(2)), (1, 0, 2));
        assert_eq!(s.live_in(s.live(0), 61, 61), 3);
        s.counted(61, 0, c(64).index, -1);
        assert_eq!(s.live_in(s.live(0), 61, 61), 2);
    }
}
