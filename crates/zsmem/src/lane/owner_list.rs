//! A segment's owner list: the owner of every object appended to it, in
//! order, kept as runs of consecutive owners.
//!
//! Owners come in runs: a page store writes a file's pages into
//! consecutive slots, a fresh handle table hands out consecutive slots, and
//! cleaning, which moves the last appended object first, appends a run
//! backwards. A run of any length costs 8 bytes, a single owner 4 and a
//! bit (where a plain list costs 4 bytes an object, 0.5% of a pool of
//! 800-byte objects).
//!
//! The list is a stack: cleaning reads and pops the last entry. Entries of
//! dead objects stay until cleaning pops them (it asks each owner whether
//! its object is still here) or the list is pruned, so an owner may appear
//! more than once. Objects placed in a segment's free extents are pushed
//! too, in any order: the list says who may own an object here, not where.

/// Whether `owner` continues a run that ends at `last` and started at
/// `first` (`first == last`: a single owner, which either direction
/// continues), on the same side of `boundary` (owners of two kinds never
/// share a run).
fn continues(first: u32, last: u32, owner: u32, boundary: u32) -> bool {
    if (owner & boundary) != (last & boundary) {
        return false;
    }
    let up = last.checked_add(1) == Some(owner);
    let down = last.checked_sub(1) == Some(owner);
    if first == last {
        up || down
    } else if last > first {
        up
    } else {
        down
    }
}

/// An owner list: a single owner costs 4 bytes (and a bit), a run of any
/// length 8 (its first and last owners, the first's bit set). Under swap-like
/// churn, where a segment's objects belong to slots at random, most items
/// are single owners: 4 bytes an object where 8-byte runs cost 8.
#[derive(Debug, Default)]
pub(super) struct OwnerList {
    /// Items in order: a single owner, or a run's first and last owners.
    v: Vec<u32>,
    /// Bit `i` set: `v[i]` is a run's first owner and `v[i + 1]` its last.
    pairs: Vec<u64>,
    /// Runs in `v` (so items are `v.len() - runs`).
    runs: usize,
}

impl OwnerList {
    fn pair_at(&self, i: usize) -> bool {
        self.pairs
            .get(i / 64)
            .is_some_and(|w| w >> (i % 64) & 1 == 1)
    }

    fn set_pair(&mut self, i: usize, on: bool) {
        if self.pairs.len() <= i / 64 {
            if !on {
                return;
            }
            self.pairs.resize(i / 64 + 1, 0);
        }
        if on {
            self.pairs[i / 64] |= 1 << (i % 64);
        } else {
            self.pairs[i / 64] &= !(1 << (i % 64));
        }
    }

    /// The last item's first owner and its index, if any.
    fn last_item(&self) -> Option<(u32, usize)> {
        let n = self.v.len();
        if n >= 2 && self.pair_at(n - 2) {
            Some((self.v[n - 2], n - 2))
        } else {
            self.v.last().map(|&o| (o, n - 1))
        }
    }

    /// Append `owner`; `boundary` is a bit no run may cross (the mark of
    /// an external owner).
    pub(super) fn push(&mut self, owner: u32, boundary: u32) {
        if let Some((first, at)) = self.last_item() {
            let last = *self.v.last().expect("an item");
            if continues(first, last, owner, boundary) {
                if at + 1 == self.v.len() {
                    // A single owner becomes a run.
                    self.set_pair(at, true);
                    self.runs += 1;
                    self.grow();
                    self.v.push(owner);
                } else {
                    *self.v.last_mut().expect("an item") = owner;
                }
                return;
            }
        }
        self.grow();
        self.v.push(owner);
    }

    /// Room for one more owner: by a quarter, not double, since a sealed
    /// segment's list is cut to fit and most lists stay short.
    fn grow(&mut self) {
        if self.v.len() == self.v.capacity() {
            self.v.reserve_exact((self.v.len() / 4).max(2));
        }
    }

    /// The last entry appended and not popped.
    pub(super) fn last(&self) -> Option<u32> {
        self.v.last().copied()
    }

    /// Drop the last entry.
    pub(super) fn pop(&mut self) {
        let Some((first, at)) = self.last_item() else {
            return;
        };
        if at + 1 == self.v.len() {
            self.v.pop();
            return;
        }
        let last = self.v[at + 1];
        let next = if last > first { last - 1 } else { last + 1 };
        if next == first {
            // Down to its first owner: a single owner again.
            self.set_pair(at, false);
            self.runs -= 1;
            self.v.pop();
        } else {
            self.v[at + 1] = next;
        }
    }

    /// Every entry, first appended first. No allocation (pruning walks
    /// a list of thousands of single owners on the allocation path).
    pub(super) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        let mut i = 0;
        // The item being walked: its next owner, its last, its direction
        // (None between items).
        let mut run: Option<(u32, u32, bool)> = None;
        std::iter::from_fn(move || {
            let (next, last, down) = match run {
                Some(r) => r,
                None => {
                    let first = *self.v.get(i)?;
                    let last = if self.pair_at(i) {
                        i += 2;
                        self.v[i - 1]
                    } else {
                        i += 1;
                        first
                    };
                    (first, last, last < first)
                }
            };
            run = (next != last).then(|| (if down { next - 1 } else { next + 1 }, last, down));
            Some(next)
        })
    }

    pub(super) fn shrink_to_fit(&mut self) {
        self.v.shrink_to_fit();
        self.pairs.truncate(self.v.len().div_ceil(64));
        self.pairs.shrink_to_fit();
    }

    /// Heap bytes.
    pub(super) fn heap_bytes(&self) -> usize {
        self.v.capacity() * std::mem::size_of::<u32>()
            + self.pairs.capacity() * std::mem::size_of::<u64>()
    }

    /// Items kept: single owners and runs.
    pub(super) fn runs(&self) -> usize {
        self.v.len() - self.runs
    }

    /// Keep only the entries `keep` accepts, in order.
    pub(super) fn retain(&mut self, boundary: u32, mut keep: impl FnMut(u32) -> bool) {
        let old = std::mem::take(self);
        // Room for every entry at once (the list is cut to fit below):
        // growing by a quarter reallocated it dozens of times.
        self.v.reserve_exact(old.v.len());
        for owner in old.iter() {
            if keep(owner) {
                self.push(owner, boundary);
            }
        }
        self.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: u32 = 1 << 31;

    /// A list against a plain vector: the same entries after every push
    /// and pop.
    fn check(ops: &[Option<u32>]) {
        let (mut list, mut model) = (OwnerList::default(), Vec::new());
        for op in ops {
            match *op {
                Some(o) => {
                    list.push(o, B);
                    model.push(o);
                }
                None => {
                    list.pop();
                    model.pop();
                }
            }
            assert_eq!(list.last(), model.last().copied());
            assert_eq!(list.iter().collect::<Vec<_>>(), model);
        }
    }

    #[test]
    fn consecutive_owners_up_or_down_share_a_run() {
        let mut l = OwnerList::default();
        for o in 10..1000 {
            l.push(o, B);
        }
        assert_eq!(l.runs(), 1);
        for o in (0..=500).rev() {
            l.push(o, B);
        }
        assert_eq!(l.runs(), 2, "a backward run after a forward one");
        assert_eq!(l.iter().count(), 990 + 501);
        assert!(l.heap_bytes() <= 48, "{} bytes, {:?}", l.heap_bytes(), l);
        let mut l = OwnerList::default();
        for o in [7, 3, 11, 5, 9] {
            l.push(o, B);
        }
        assert_eq!(l.runs(), 5, "single owners");
        l.shrink_to_fit();
        assert!(l.heap_bytes() <= 5 * 4 + 8, "{} bytes", l.heap_bytes());
    }

    #[test]
    fn runs_never_cross_the_boundary_nor_overflow() {
        let mut l = OwnerList::default();
        l.push(B - 1, B);
        l.push(B, B);
        assert_eq!(l.runs(), 2);
        l.push(u32::MAX, B);
        l.push(0, B);
        assert_eq!(l.runs(), 4);
        check(&[
            Some(B - 2),
            Some(B - 1),
            Some(B),
            Some(B + 1),
            None,
            None,
            None,
        ]);
        check(&[Some(u32::MAX), Some(0), Some(u32::MAX - 1), None]);
    }

    #[test]
    fn pops_and_pushes_match_a_vector() {
        check(&[
            Some(5),
            Some(6),
            Some(7),
            None,
            Some(7),
            Some(8),
            None,
            None,
            Some(5),
            Some(4),
            Some(3),
            None,
            None,
            None,
            None,
            None,
            None,
            Some(9),
            Some(9),
            Some(8),
        ]);
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn random_sequences_match_a_vector() {
        use proptest::prelude::*;
        proptest!(|(ops in proptest::collection::vec(
            prop_oneof![
                3 => (0u32..8).prop_map(Some),
                3 => ((B - 4)..(B + 4)).prop_map(Some),
                1 => Just(None),
            ],
            0..200,
        ))| {
            check(&ops);
        });
    }
}
