//! Which unit to evict: a unit's state, and a CLOCK over the units.
//!
//! A program's reads of a resident unit are invisible without privileges
//! (no accessed bits in userspace), so the reference bit is set by what the
//! region does see: a unit's fault-in and its first write after a clean
//! install (a write-protect fault). The hand sweeps the units in address
//! order; a resident unit with its bit set loses the bit and is passed (its
//! second chance), the first resident unit without it is the victim. A unit
//! read often but never written is thus evicted every second sweep; it
//! comes back by a fault, cheaply when its stored copy is current (a clean
//! drop costs no compression), and each return counts as a promotion.

/// Where a unit's data is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum Kind {
    /// Never touched since the region was made (or since the program
    /// dropped all of it): reads as zeros, nothing stored.
    #[default]
    Empty,
    /// Mapped in the region.
    Resident,
    /// Dropped from the region; the store's slot holds it.
    Evicted,
}

/// One unit's state, under its lock.
///
/// Invariants (checked by `Region::check_invariants`):
/// - `stored` means the store's slot is the unit's current copy (an empty
///   slot stands for zeros); `!stored` means the slot is empty (no stale
///   copy is kept);
/// - `Evicted` implies `stored` (the slot is its only copy);
/// - `Resident` with `stored` means the unit is write-protected: it may be
///   dropped without compressing again;
/// - `Empty` implies `!stored`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Unit {
    pub kind: Kind,
    /// The store holds a current copy.
    pub stored: bool,
    /// CLOCK's reference bit.
    pub referenced: bool,
    /// An evictor is compressing it (outside the lock).
    pub evicting: bool,
    /// Bumped at every write fault and every page the program dropped:
    /// an evictor that finds it changed after compressing knows its copy
    /// is stale.
    pub generation: u32,
}

/// What the hand found at a unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Visit {
    /// Not a candidate (not resident, or being evicted).
    Skip,
    /// Resident and referenced: the bit was cleared, the hand moves on.
    SecondChance,
    /// Resident and not referenced: evict it.
    Victim,
}

/// A CLOCK hand over `n` units.
#[derive(Debug, Default)]
pub(crate) struct Clock {
    hand: usize,
}

impl Clock {
    /// Move the hand until `visit` names a victim, which is returned (the
    /// hand then rests just past it). At most two sweeps: after one, every
    /// resident unit has lost its bit; `None` if no unit is a candidate.
    pub(crate) fn next_victim(
        &mut self,
        n: usize,
        mut visit: impl FnMut(usize) -> Visit,
    ) -> Option<usize> {
        if n == 0 {
            return None;
        }
        for _ in 0..2 * n {
            let i = self.hand % n;
            self.hand = (i + 1) % n;
            if visit(i) == Visit::Victim {
                return Some(i);
            }
        }
        None
    }

    /// Where the hand is.
    #[cfg(test)]
    pub(crate) fn hand(&self) -> usize {
        self.hand
    }
}

/// The visit of a unit's state: clears the reference bit of a referenced
/// resident unit.
pub(crate) fn visit(u: &mut Unit) -> Visit {
    if u.kind != Kind::Resident || u.evicting {
        Visit::Skip
    } else if u.referenced {
        u.referenced = false;
        Visit::SecondChance
    } else {
        Visit::Victim
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The specification, stated without a loop over a hand: the victim is
    /// the first resident unit, in cyclic order from the hand, that was not
    /// referenced; if every resident unit was, the first resident unit from
    /// the hand. Every resident unit passed before the victim loses its bit.
    fn model(hand: usize, units: &[(bool, bool)]) -> (Option<usize>, Vec<(bool, bool)>) {
        let n = units.len();
        let order: Vec<usize> = (0..n).map(|k| (hand + k) % n).collect();
        let victim = order
            .iter()
            .copied()
            .find(|&i| units[i].0 && !units[i].1)
            .or_else(|| order.iter().copied().find(|&i| units[i].0));
        let mut after = units.to_vec();
        if let Some(v) = victim {
            // Passed: those before the victim in the first sweep, and if
            // the victim was only found in the second sweep, all of them.
            let first_sweep = units[v].0 && !units[v].1;
            for &i in &order {
                if i == v && first_sweep {
                    break;
                }
                if after[i].0 {
                    after[i].1 = false;
                }
                if i == v {
                    break;
                }
            }
            if !first_sweep {
                for a in after.iter_mut() {
                    if a.0 {
                        a.1 = false;
                    }
                }
            }
        }
        (victim, after)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]
        /// The clock against the model over random sequences of fault-ins,
        /// writes and evictions.
        #[test]
        fn clock_matches_model(
            n in 1usize..24,
            ops in proptest::collection::vec((0u8..3, 0usize..24), 1..200),
        ) {
            let mut units = vec![Unit::default(); n];
            let mut clock = Clock::default();
            for (op, i) in ops {
                let i = i % n;
                match op {
                    0 => {
                        // fault-in
                        units[i].kind = Kind::Resident;
                        units[i].referenced = true;
                    }
                    1 => {
                        // a write-protect fault on a resident unit
                        if units[i].kind == Kind::Resident {
                            units[i].referenced = true;
                        }
                    }
                    _ => {
                        let before: Vec<(bool, bool)> = units
                            .iter()
                            .map(|u| (u.kind == Kind::Resident, u.referenced))
                            .collect();
                        let (want, want_after) = model(clock.hand(), &before);
                        let got = clock.next_victim(n, |k| visit(&mut units[k]));
                        prop_assert_eq!(got, want);
                        if let Some(v) = got {
                            prop_assert_eq!(units[v].kind, Kind::Resident);
                            units[v].kind = Kind::Evicted;
                            prop_assert_eq!(clock.hand(), (v + 1) % n);
                        }
                        // The reference bits after, but for the victim's.
                        for (k, u) in units.iter().enumerate() {
                            if Some(k) != got && u.kind == Kind::Resident {
                                prop_assert_eq!(u.referenced, want_after[k].1, "unit {}", k);
                            }
                        }
                    }
                }
            }
        }
    }
}
