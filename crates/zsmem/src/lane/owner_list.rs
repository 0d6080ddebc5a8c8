//! A segment's owner list: the owner of every object appended to it, in
//! order, kept as runs of consecutive owners.
//!
//! Owners come in runs: a page store writes a file's pages into
//! consecutive slots, a fresh handle table hands out consecutive slots, and
//! cleaning, which moves the last appended object first, appends a run
//! backwards. A run of any length costs 8 bytes where a plain list costs 4
//! bytes an object (0.5% of a pool of 800-byte objects).
//!
//! The list is a stack: cleaning reads and pops the last entry. Entries of
//! dead objects stay until cleaning pops them (it asks each owner whether
//! its object is still here) or the list is pruned, so an owner may appear
//! more than once. Objects placed in a segment's free extents are pushed
//! too, in any order: the list says who may own an object here, not where.

/// `first..=last` upwards, or downwards when `last < first`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    first: u32,
    last: u32,
}

impl Run {
    fn len(self) -> usize {
        self.first.abs_diff(self.last) as usize + 1
    }

    /// The run's `i`-th entry (`i < len`).
    fn at(self, i: usize) -> u32 {
        if self.last >= self.first {
            self.first + i as u32
        } else {
            self.first - i as u32
        }
    }

    /// Extend by `owner` if it continues the run: the next one up or down
    /// (a single-entry run takes either direction) and on the same side of
    /// `boundary` (owners of two kinds never share a run).
    fn extend(&mut self, owner: u32, boundary: u32) -> bool {
        if (owner & boundary) != (self.last & boundary) {
            return false;
        }
        let up = self.last.checked_add(1) == Some(owner);
        let down = self.last.checked_sub(1) == Some(owner);
        let ok = if self.first == self.last {
            up || down
        } else if self.last > self.first {
            up
        } else {
            down
        };
        if ok {
            self.last = owner;
        }
        ok
    }
}

#[derive(Debug, Default)]
pub(super) struct OwnerList {
    runs: Vec<Run>,
}

impl OwnerList {
    /// Append `owner`; `boundary` is a bit no run may cross (the mark of
    /// an external owner).
    pub(super) fn push(&mut self, owner: u32, boundary: u32) {
        if let Some(r) = self.runs.last_mut()
            && r.extend(owner, boundary)
        {
            return;
        }
        if self.runs.len() == self.runs.capacity() {
            // By a quarter, not double: a sealed segment's list is cut to
            // fit, and most lists stay a few runs long.
            self.runs.reserve_exact((self.runs.len() / 4).max(2));
        }
        self.runs.push(Run {
            first: owner,
            last: owner,
        });
    }

    /// The last entry appended and not popped.
    pub(super) fn last(&self) -> Option<u32> {
        self.runs.last().map(|r| r.last)
    }

    /// Drop the last entry.
    pub(super) fn pop(&mut self) {
        let Some(r) = self.runs.last_mut() else {
            return;
        };
        if r.first == r.last {
            self.runs.pop();
        } else if r.last > r.first {
            r.last -= 1;
        } else {
            r.last += 1;
        }
    }

    /// Every entry, first appended first.
    pub(super) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.runs
            .iter()
            .flat_map(|&r| (0..r.len()).map(move |i| r.at(i)))
    }

    pub(super) fn shrink_to_fit(&mut self) {
        self.runs.shrink_to_fit();
    }

    /// Heap bytes.
    pub(super) fn heap_bytes(&self) -> usize {
        self.runs.capacity() * std::mem::size_of::<Run>()
    }

    /// Runs kept (what the list costs, 8 bytes each).
    pub(super) fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Keep only the entries `keep` accepts, in order.
    pub(super) fn retain(&mut self, boundary: u32, mut keep: impl FnMut(u32) -> bool) {
        let old = std::mem::take(&mut self.runs);
        for r in old {
            for i in 0..r.len() {
                let owner = r.at(i);
                if keep(owner) {
                    self.push(owner, boundary);
                }
            }
        }
        self.runs.shrink_to_fit();
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
        assert!(l.heap_bytes() <= 4 * 8);
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
