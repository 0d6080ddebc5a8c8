//! A segment's free extents: the dead ranges below its end that new
//! objects may take, sorted by offset, neighbours merged.
//!
//! Under swap-like churn objects die at random, so dead bytes are spread
//! over every segment, a few objects' worth each, and cleaning would have
//! to copy a segment's live data to win any of it back (20 bytes copied per
//! byte freed, measured). A new object placed in a dead range reuses that
//! memory without copying anything, as a size class reuses a freed slot.
//! An extent never covers a page given back (those ranges are cut out when
//! the page is punched), so placing an object there commits nothing.
//!
//! Offsets and lengths are in placement units (a segment holds 2^16 of
//! them), each extent one `u32`: offset in the high half, length in the low.

/// Extents' room a segment's vector keeps however few it holds (16
/// bytes: the smallest block the C allocator hands out holds 24).
const KEPT: usize = 4;

/// The free extents of one segment.
#[derive(Debug, Default)]
pub(super) struct Extents {
    /// `offset << 16 | length`, sorted by offset (so by value), disjoint,
    /// never adjacent (merged), every length at least 1.
    v: Vec<u32>,
    /// The longest extent's length, 0 if none: kept as extents change
    /// (found again only when the longest shrinks), since cleaning and
    /// every free ask for it (a search of every extent cost 2.6% of a
    /// churn run's cycles).
    longest: u32,
}

fn pack(off: u32, len: u32) -> u32 {
    debug_assert!(off < 1 << 16 && (1..1 << 16).contains(&len));
    off << 16 | len
}

fn off(e: u32) -> u32 {
    e >> 16
}

fn len(e: u32) -> u32 {
    e & 0xFFFF
}

impl Extents {
    /// The longest extent's length, 0 if none.
    pub(super) fn largest(&self) -> u32 {
        self.longest
    }

    /// Find the longest extent again.
    fn relength(&mut self) {
        self.longest = self.v.iter().map(|&e| len(e)).max().unwrap_or(0);
    }

    /// Add the dead range `off..off + n` (disjoint from every extent),
    /// merged with the extents it touches. The merged length stays below
    /// 2^16: a segment that still holds an object is never all dead.
    pub(super) fn insert(&mut self, at: u32, n: u32) {
        let i = self.v.partition_point(|&e| off(e) < at);
        let (mut start, mut end) = (at, at + n);
        let mut lo = i;
        if i > 0 && off(self.v[i - 1]) + len(self.v[i - 1]) == at {
            lo = i - 1;
            start = off(self.v[i - 1]);
        }
        let mut hi = i;
        if i < self.v.len() && off(self.v[i]) == end {
            end += len(self.v[i]);
            hi = i + 1;
        }
        debug_assert!(i == 0 || off(self.v[i - 1]) + len(self.v[i - 1]) <= at);
        debug_assert!(i == self.v.len() || off(self.v[i]) >= at + n);
        if lo == hi && self.v.len() == self.v.capacity() {
            // A quarter more, not double: under churn a segment holds
            // hundreds of extents, and doubling left a third of the
            // vectors' room unused (70 KB of 172 KB in a store of 104 MB).
            self.v.reserve_exact((self.v.len() / 4).max(2));
        }
        // Into the place of the extents merged (none, one or two): no
        // `splice`, whose general case cost a tenth of a free.
        let merged = pack(start, end - start);
        match hi - lo {
            0 => self.v.insert(lo, merged),
            1 => self.v[lo] = merged,
            _ => {
                self.v[lo] = merged;
                self.v.remove(lo + 1);
            }
        }
        self.longest = self.longest.max(end - start);
    }

    /// Take `n` units from the shortest extent that holds them (best fit),
    /// at its start; the rest stays an extent. Returns the offset.
    pub(super) fn take(&mut self, n: u32) -> Option<u32> {
        // The first of the shortest that hold `n`: an exact fit ends the
        // search (none is shorter, and the first is taken).
        let mut best: Option<(usize, u32)> = None;
        for (i, &e) in self.v.iter().enumerate() {
            if len(e) >= n && best.is_none_or(|(_, b)| len(e) < len(b)) {
                best = Some((i, e));
                if len(e) == n {
                    break;
                }
            }
        }
        let (i, e) = best?;
        if len(e) == n {
            self.v.remove(i);
            self.shrink();
        } else {
            self.v[i] = pack(off(e) + n, len(e) - n);
        }
        if len(e) == self.longest {
            self.relength();
        }
        Some(off(e))
    }

    /// Remove `from..to` from every extent (a page given back).
    pub(super) fn cut(&mut self, from: u32, to: u32) {
        let first = self.v.partition_point(|&e| off(e) + len(e) <= from);
        let last = self.v.partition_point(|&e| off(e) < to);
        if first >= last {
            return;
        }
        let mut kept = [0u32; 2];
        let mut k = 0;
        let (a, b) = (self.v[first], self.v[last - 1]);
        let shortened = self.v[first..last].iter().any(|&e| len(e) == self.longest);
        if off(a) < from {
            kept[k] = pack(off(a), from - off(a));
            k += 1;
        }
        if off(b) + len(b) > to {
            kept[k] = pack(to, off(b) + len(b) - to);
            k += 1;
        }
        self.v.splice(first..last, kept[..k].iter().copied());
        self.shrink();
        if shortened {
            self.relength();
        }
    }

    /// Give back room once the vector is less than half used (after a
    /// burst of objects placed, say), keeping a quarter more than its
    /// length: what it holds, not the most it ever held.
    fn shrink(&mut self) {
        // Not below `KEPT` extents' room: a segment whose one extent is
        // made by a free and taken by the next object (a ring of frees and
        // stores) would otherwise allocate and free its vector each time.
        if self.v.capacity() > KEPT && self.v.len() < self.v.capacity() / 2 {
            self.v
                .shrink_to((self.v.len() + self.v.len() / 4).max(KEPT));
        }
    }

    /// Every extent as (offset, length), by offset.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.v.iter().map(|&e| (off(e), len(e)))
    }

    /// Units in extents.
    #[cfg(test)]
    pub(super) fn total(&self) -> u32 {
        self.v.iter().map(|&e| len(e)).sum()
    }

    /// Heap bytes.
    pub(super) fn heap_bytes(&self) -> usize {
        self.v.capacity() * std::mem::size_of::<u32>()
    }

    /// Check sortedness, disjointness and merging; `Err` names the fault.
    pub(super) fn check(&self) -> Result<(), String> {
        for w in self.v.windows(2) {
            if off(w[0]) + len(w[0]) >= off(w[1]) {
                return Err(format!(
                    "extents {:?} and {:?} overlap, touch or are out of order",
                    (off(w[0]), len(w[0])),
                    (off(w[1]), len(w[1]))
                ));
            }
        }
        if self.v.iter().any(|&e| len(e) == 0) {
            return Err("an empty extent".into());
        }
        let longest = self.v.iter().map(|&e| len(e)).max().unwrap_or(0);
        if longest != self.longest {
            return Err(format!(
                "the longest extent is {longest} units, {} kept",
                self.longest
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The reference: a bit per unit of a small segment.
    fn model_free(x: &Extents, units: usize) -> Vec<bool> {
        let mut m = vec![false; units];
        for (o, l) in x.iter() {
            for u in o..o + l {
                m[u as usize] = true;
            }
        }
        m
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "safe code (the extents' own vectors): 90 s of Miri for nothing unsafe"
    )]
    fn room_follows_the_extents_held() {
        let mut x = Extents::default();
        for i in 0..400 {
            x.insert(i * 10, 5);
        }
        assert!(
            x.heap_bytes() <= 400 * 4 * 5 / 4 + 16,
            "{} bytes",
            x.heap_bytes()
        );
        for _ in 0..390 {
            x.take(5).unwrap();
        }
        assert!(
            x.heap_bytes() <= 4 * 20,
            "{} bytes for 10 extents",
            x.heap_bytes()
        );
        x.check().unwrap();
        assert_eq!(x.total(), 50);
    }

    #[test]
    fn neighbours_merge() {
        let mut x = Extents::default();
        x.insert(10, 5);
        x.insert(20, 5);
        x.insert(15, 5);
        assert_eq!(x.iter().collect::<Vec<_>>(), vec![(10, 15)]);
        x.insert(0, 10);
        assert_eq!(x.iter().collect::<Vec<_>>(), vec![(0, 25)]);
        x.check().unwrap();
    }

    #[test]
    fn take_is_best_fit_and_keeps_the_rest() {
        let mut x = Extents::default();
        x.insert(0, 100);
        x.insert(200, 30);
        x.insert(300, 50);
        assert_eq!(x.take(40), Some(300));
        assert_eq!(
            x.iter().collect::<Vec<_>>(),
            vec![(0, 100), (200, 30), (340, 10)]
        );
        assert_eq!(x.take(30), Some(200));
        assert_eq!(x.take(101), None);
        assert_eq!(x.largest(), 100);
    }

    #[test]
    fn cut_splits_and_trims() {
        let mut x = Extents::default();
        x.insert(0, 100);
        x.insert(150, 100);
        x.cut(50, 170);
        assert_eq!(x.iter().collect::<Vec<_>>(), vec![(0, 50), (170, 80)]);
        x.cut(60, 70);
        assert_eq!(x.iter().collect::<Vec<_>>(), vec![(0, 50), (170, 80)]);
        x.cut(180, 190);
        assert_eq!(
            x.iter().collect::<Vec<_>>(),
            vec![(0, 50), (170, 10), (190, 60)]
        );
        x.cut(0, 1000);
        assert_eq!(x.iter().count(), 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 2 } else { 256 }))]
        /// Any sequence of inserts of free ranges, takes and cuts leaves
        /// the same free units as a bitmap does, kept sorted and merged.
        #[test]
        #[cfg_attr(miri, ignore = "safe code (extents against a bitmap): nothing for Miri to check")]
        fn matches_a_bitmap(ops in proptest::collection::vec((0u8..3, 0u32..500, 1u32..60), 1..200)) {
            const UNITS: usize = 600;
            let mut x = Extents::default();
            let mut m = vec![false; UNITS];
            for (op, a, n) in ops {
                match op {
                    0 => {
                        // Insert only a range that is wholly not free.
                        let r = a as usize..(a + n) as usize;
                        if m[r.clone()].iter().all(|f| !f) {
                            x.insert(a, n);
                            m[r].fill(true);
                        }
                    }
                    1 => {
                        let best = x.iter().filter(|&(_, l)| l >= n).map(|(_, l)| l).min();
                        match x.take(n) {
                            Some(o) => {
                                prop_assert!(best.is_some());
                                let r = o as usize..(o + n) as usize;
                                prop_assert!(m[r.clone()].iter().all(|&f| f));
                                m[r].fill(false);
                            }
                            None => prop_assert!(best.is_none()),
                        }
                    }
                    _ => {
                        x.cut(a, a + n);
                        m[a as usize..(a + n) as usize].fill(false);
                    }
                }
                prop_assert!(x.check().is_ok(), "{:?}", x.check());
                prop_assert_eq!(x.largest(), x.iter().map(|(_, l)| l).max().unwrap_or(0));
                prop_assert_eq!(model_free(&x, UNITS), m.clone());
                prop_assert_eq!(x.total() as usize, m.iter().filter(|&&f| f).count());
            }
        }
    }
}
