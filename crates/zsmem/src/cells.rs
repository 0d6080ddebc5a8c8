//! Where the pool keeps each class's and lane's lock: shard 0 and the lanes
//! made with the pool, every further class shard at its first use.
//!
//! A *cell* is a lock over a class's (or lane's) state, with deferred
//! free or lock-free reads the handle directory of that class (what a class
//! publishes for lock-free reads is the pool's `readers`); each cell has cache lines of
//! its own, so two classes' locks never false-share. Positions: class
//! shard `s`'s classes are `s * physical ..`, the lanes come after every
//! shard's classes. A pool that one thread uses allocates in one shard
//! only, so the other shards' cells (128 bytes a class) are not made.

use std::sync::{Arc, OnceLock};

use crate::handle::Directory;
use crate::sync::{CachePadded, RwLock};

/// A class's or lane's lock and, with deferred free or lock-free reads,
/// its directory.
#[derive(Debug)]
pub(crate) struct Cell<T> {
    pub(crate) lock: RwLock<T>,
    /// Set once, when the class is made (under the lock), if deferred
    /// frees mark its entries or lock-free reads find them.
    pub(crate) directory: OnceLock<Arc<Directory>>,
}

type Padded<T> = CachePadded<Cell<T>>;

/// One shard's cells, one per class.
type ShardCells<T> = Box<[Padded<T>]>;

/// Every cell of a pool.
#[derive(Debug)]
pub(crate) struct Cells<T> {
    /// Shard 0's classes, then the lanes.
    base: Box<[Padded<T>]>,
    /// Shards 1..'s classes, each made at its first use.
    more: Box<[OnceLock<ShardCells<T>>]>,
    physical: usize,
}

impl<T: Default> Cells<T> {
    /// Cells for `shards` shards of `physical` classes, then `lanes` lanes.
    pub(crate) fn new(physical: usize, shards: usize, lanes: usize) -> Self {
        Cells {
            base: Self::make(physical + lanes),
            more: (1..shards).map(|_| OnceLock::new()).collect(),
            physical,
        }
    }

    fn make(n: usize) -> Box<[Padded<T>]> {
        (0..n)
            .map(|_| {
                CachePadded(Cell {
                    lock: RwLock::new(T::default()),
                    directory: OnceLock::new(),
                })
            })
            .collect()
    }

    /// The shard of position `d`, if it is a class of shard 1.. (and its
    /// place in that shard).
    fn split(&self, d: usize) -> Option<(usize, usize)> {
        // Shard 0 (every class of a pool one thread uses) without a
        // division: this runs on every operation.
        if d < self.physical {
            return None;
        }
        let s = d.checked_div(self.physical)?;
        (1..=self.more.len())
            .contains(&s)
            .then(|| (s - 1, d % self.physical))
    }

    /// Position in `base` of `d`, a shard-0 class or a lane.
    fn base_index(&self, d: usize) -> usize {
        if d < self.physical {
            d
        } else {
            // A lane: after all shards' classes.
            d - self.more.len() * self.physical
        }
    }

    /// The cell at `d`, if it is made; `None` for a shard never used (it
    /// holds no object a handle could name) or a position beyond them.
    pub(crate) fn get(&self, d: usize) -> Option<&Cell<T>> {
        match self.split(d) {
            Some((s, i)) => self.more[s].get().map(|c| &*c[i]),
            None => self.base.get(self.base_index(d)).map(|c| &**c),
        }
    }

    /// The cell at `d` (a position the pool's class map gave), its shard
    /// made now if it is the shard's first use.
    pub(crate) fn get_or_make(&self, d: usize) -> &Cell<T> {
        match self.split(d) {
            Some((s, i)) => &self.more[s].get_or_init(|| Self::make(self.physical))[i],
            None => &self.base[self.base_index(d)],
        }
    }

    /// Every cell made, with its position.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, &Cell<T>)> {
        let lanes = self.base.len() - self.physical;
        let classes = self.physical * (1 + self.more.len());
        let class_cells = self.base[..self.physical].iter().chain(
            self.more
                .iter()
                .filter_map(OnceLock::get)
                .flat_map(|s| s.iter()),
        );
        // Positions: shard 0's, then each made shard's at its own offset.
        let made = std::iter::once(0).chain(
            self.more
                .iter()
                .enumerate()
                .filter(|(_, s)| s.get().is_some())
                .map(|(k, _)| k + 1),
        );
        let positions = made.flat_map(move |s| s * self.physical..(s + 1) * self.physical);
        positions
            .zip(class_cells)
            .chain((classes..classes + lanes).zip(&self.base[self.physical..]))
            .map(|(d, c)| (d, &**c))
    }

    /// Heap bytes of the cells made (and of the table of shards).
    pub(crate) fn metadata_bytes(&self) -> usize {
        // A cell's directory is its class's handle table's to count.
        let made = self.more.iter().filter(|s| s.get().is_some()).count();
        let cells = self.base.len() + made * self.physical;
        cells * std::mem::size_of::<Padded<T>>() + std::mem::size_of_val(&*self.more)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn shards_are_made_at_first_use_and_positions_hold() {
        let c: Cells<u32> = Cells::new(3, 3, 2);
        // Shard 0's classes and the lanes exist; shards 1 and 2 do not.
        let made: Vec<usize> = c.iter().map(|(d, _)| d).collect();
        assert_eq!(made, [0, 1, 2, 9, 10]);
        assert!(c.get(4).is_none() && c.get(7).is_none());
        assert!(c.get(11).is_none(), "beyond the lanes");
        *c.get_or_make(7).lock.write() = 7;
        *c.get_or_make(9).lock.write() = 9;
        let made: Vec<usize> = c.iter().map(|(d, _)| d).collect();
        assert_eq!(made, [0, 1, 2, 6, 7, 8, 9, 10]);
        assert!(c.get(4).is_none(), "shard 1 still unused");
        assert_eq!(*c.get(7).unwrap().lock.read(), 7);
        assert_eq!(*c.get(9).unwrap().lock.read(), 9, "a lane");
        for (d, cell) in c.iter() {
            let v = *cell.lock.read();
            assert!(v == 0 || v as usize == d);
        }
        let one = std::mem::size_of::<Padded<u32>>();
        assert_eq!(
            c.metadata_bytes(),
            8 * one + std::mem::size_of_val(&*c.more)
        );
    }

    #[test]
    fn a_log_pool_has_lanes_only() {
        let c: Cells<u32> = Cells::new(0, 1, 4);
        assert_eq!(c.iter().count(), 4);
        assert!(
            c.get(3).unwrap().directory.get().is_none(),
            "made with its lane"
        );
        assert!(c.get(4).is_none());
    }
}
