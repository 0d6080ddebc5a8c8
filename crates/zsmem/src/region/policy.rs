//! Which unit to evict: a unit's state, and a CLOCK over the units.
//!
//! A program's reads of a resident unit are invisible without privileges
//! (no accessed bits in userspace), so the policy learns from what the
//! region does see: faults. Each unit has a **heat** (0..=3) that survives
//! its evictions: a promotion (a fault on an evicted unit) raises it by one,
//! and every pass of the hand while the unit is out lowers it by one. A
//! unit brought in gets as many **credits** as its heat (at least one); a
//! write-protect fault (its first write) gives it one if it had none.
//!
//! The hand sweeps the units in address order (a generalised CLOCK): a
//! resident unit with credits loses one and is passed, the first resident
//! unit without credit is the victim. A unit that keeps coming back soon
//! after its eviction (it is hot, its reads unseen) thus stays up to four
//! sweeps; one read once and never again goes at the next sweep. Every
//! return counts as a promotion; the promotion rate (promotions per
//! eviction) says how well the policy guesses.

/// Most heat, and so most credits, a unit can have.
pub(crate) const MAX_HEAT: u8 = 3;

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
/// - `Empty` implies `!stored`;
/// - `copy > 0` implies `Resident` and `stored`; the units' `copy` sum to
///   the `copy_bytes` counter, at most `RegionConfig::keep_copies`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Unit {
    pub kind: Kind,
    /// The store holds a current copy.
    pub stored: bool,
    /// Sweeps of the hand it may still survive while resident.
    pub credit: u8,
    /// How often it came back lately (0..=MAX_HEAT); kept while evicted.
    pub heat: u8,
    /// An evictor is compressing it (outside the lock).
    pub evicting: bool,
    /// Queued in an evictor's batch: its pages are being dropped (it is
    /// still `Resident` until the batch is done; faults wait for it).
    pub dropping: bool,
    /// Bumped at every write fault and every page the program dropped:
    /// an evictor that finds it changed after compressing knows its copy
    /// is stale.
    pub generation: u32,
    /// Bytes of its slot's object counted as a copy of a resident unit
    /// (copies.rs); 0 when none is counted.
    pub copy: u32,
}

/// What the hand found at a unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Visit {
    /// Not a candidate (not resident, or being evicted).
    Skip,
    /// Resident with a credit: one was taken, the hand moves on.
    SecondChance,
    /// Resident without credit: evict it.
    Victim,
}

/// A CLOCK hand over `n` units.
#[derive(Debug, Default)]
pub(crate) struct Clock {
    hand: usize,
}

impl Clock {
    /// Move the hand until `visit` names a victim, which is returned (the
    /// hand then rests just past it). At most `MAX_HEAT + 1` sweeps: after
    /// them every resident unit has spent its credits; `None` if no unit is
    /// a candidate.
    pub(crate) fn next_victim(
        &mut self,
        n: usize,
        mut visit: impl FnMut(usize) -> Visit,
    ) -> Option<usize> {
        if n == 0 {
            return None;
        }
        for _ in 0..(MAX_HEAT as usize + 1) * n {
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

/// The visit of a unit's state: a resident unit with credit spends one,
/// an evicted unit cools by one.
pub(crate) fn visit(u: &mut Unit) -> Visit {
    match u.kind {
        Kind::Resident if !u.evicting && !u.dropping => {
            if u.credit > 0 {
                u.credit -= 1;
                Visit::SecondChance
            } else {
                Visit::Victim
            }
        }
        Kind::Evicted => {
            u.heat = u.heat.saturating_sub(1);
            Visit::Skip
        }
        _ => Visit::Skip,
    }
}

impl Unit {
    /// Brought in by a fault: from the store (`promoted`) or as zeros.
    pub(crate) fn installed(&mut self, promoted: bool) {
        if promoted {
            self.heat = (self.heat + 1).min(MAX_HEAT);
        }
        self.credit = self.heat.max(1);
        self.kind = Kind::Resident;
    }

    /// Written for the first time since it was installed clean.
    pub(crate) fn written(&mut self) {
        self.credit = self.credit.max(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The specification, stated without a hand that moves: resident unit
    /// i (credit c) is reached for the (c+1)th time after `c * n + d(i)`
    /// steps, d(i) its distance from the hand; the victim is the resident
    /// unit reached first so. Every unit passed k times before that loses
    /// k credits (resident) or k heat (evicted).
    fn model(hand: usize, units: &[Unit]) -> (Option<usize>, Vec<Unit>) {
        let n = units.len();
        let dist = |i: usize| (i + n - hand) % n;
        let victim = (0..n)
            .filter(|&i| units[i].kind == Kind::Resident)
            .min_by_key(|&i| units[i].credit as usize * n + dist(i));
        let mut after = units.to_vec();
        let steps = victim.map_or((MAX_HEAT as usize + 1) * n, |v| {
            units[v].credit as usize * n + dist(v)
        });
        for (i, a) in after.iter_mut().enumerate() {
            if Some(i) == victim {
                a.credit = 0;
                continue;
            }
            let passes = if steps > dist(i) {
                (steps - dist(i) - 1) / n + 1
            } else {
                0
            };
            let passes = passes.min(255) as u8;
            match a.kind {
                Kind::Resident => a.credit = a.credit.saturating_sub(passes),
                Kind::Evicted => a.heat = a.heat.saturating_sub(passes),
                Kind::Empty => {}
            }
        }
        (victim, after)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]
        /// The clock against the model over random sequences of fault-ins,
        /// writes and evictions.
        #[test]
        #[cfg_attr(miri, ignore = "safe code (the clock and its model): 2 minutes of Miri for nothing unsafe")]
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
                        if units[i].kind != Kind::Resident {
                            let promoted = units[i].kind == Kind::Evicted;
                            units[i].installed(promoted);
                        }
                    }
                    1 => {
                        if units[i].kind == Kind::Resident {
                            units[i].written();
                        }
                    }
                    _ => {
                        let (want, want_after) = model(clock.hand(), &units);
                        let got = clock.next_victim(n, |k| visit(&mut units[k]));
                        prop_assert_eq!(got, want);
                        if let Some(v) = got {
                            prop_assert_eq!(units[v].kind, Kind::Resident);
                            units[v].kind = Kind::Evicted;
                            prop_assert_eq!(clock.hand(), (v + 1) % n);
                        }
                        for (k, u) in units.iter().enumerate() {
                            prop_assert_eq!((u.credit, u.heat), (want_after[k].credit, want_after[k].heat), "unit {}", k);
                        }
                    }
                }
            }
        }
    }
}
