//! A region's counters and its fault latency histogram.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Sub-buckets per power of two: values are kept to within 1/8 (12.5%).
const SUB: usize = 8;
const BUCKETS: usize = 64 * SUB;

/// A histogram of nanoseconds, log-linear (8 buckets per power of two),
/// filled without locks.
#[derive(Debug)]
pub(crate) struct Histogram {
    counts: Box<[AtomicU64]>,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

fn bucket(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    let log = 63 - ns.leading_zeros() as usize; // >= 3
    let sub = ((ns >> (log - 3)) as usize) & (SUB - 1);
    (log - 2) * SUB + sub
}

/// The largest value of bucket `b`.
fn bucket_high(b: usize) -> u64 {
    if b < SUB {
        return b as u64;
    }
    let log = b / SUB + 2;
    let sub = (b % SUB) as u64;
    ((SUB as u64 + sub + 1) << (log - 3)) - 1
}

impl Histogram {
    pub(crate) fn record(&self, ns: u64) {
        self.counts[bucket(ns).min(BUCKETS - 1)].fetch_add(1, Relaxed);
    }

    pub(crate) fn snapshot(&self) -> LatencyHistogram {
        let mut buckets = Vec::new();
        for (b, c) in self.counts.iter().enumerate() {
            let c = c.load(Relaxed);
            if c > 0 {
                buckets.push((bucket_high(b), c));
            }
        }
        LatencyHistogram { buckets }
    }
}

/// Fault service times: from the moment the fault thread reads the fault
/// to the moment the unit is installed and its waiters are woken.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct LatencyHistogram {
    /// (bucket's upper bound in ns, count), by increasing bound; buckets
    /// are 1/8 of a power of two wide.
    pub buckets: Vec<(u64, u64)>,
}

impl LatencyHistogram {
    /// Number of values.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.1).sum()
    }

    /// The value at quantile `q` (0..=1), as its bucket's upper bound (at
    /// most 12.5% above the true value); 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        let total = self.count();
        if total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for &(high, c) in &self.buckets {
            seen += c;
            if seen >= rank {
                return high;
            }
        }
        self.buckets.last().map_or(0, |b| b.0)
    }
}

/// A region's counters, updated as it runs.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub resident_units: AtomicU64,
    /// Places faults took over the budget, finding nothing to evict
    /// (`fault::claim`); not in the statistics.
    pub over_budget: AtomicU64,
    pub evicted_units: AtomicU64,
    pub missing_faults: AtomicU64,
    pub write_faults: AtomicU64,
    pub zero_fills: AtomicU64,
    pub restores: AtomicU64,
    pub readahead: AtomicU64,
    pub evictions: AtomicU64,
    pub clean_drops: AtomicU64,
    pub compressions: AtomicU64,
    pub compress_ns: AtomicU64,
    pub decompress_ns: AtomicU64,
    pub eviction_races: AtomicU64,
    pub dropped_by_program: AtomicU64,
    pub sync_evictions: AtomicU64,
    pub copy_bytes: AtomicU64,
    pub copies_dropped: AtomicU64,
    pub errors: AtomicU64,
}

pub(crate) fn add(c: &AtomicU64, v: u64) {
    c.fetch_add(v, Relaxed);
}

pub(crate) fn get(c: &AtomicU64) -> u64 {
    c.load(Relaxed)
}

/// A snapshot of a [`Region`](super::Region)'s statistics.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct RegionStats {
    /// The region's size in bytes.
    pub size: usize,
    /// The unit size in bytes.
    pub unit: usize,
    /// The resident budget in bytes.
    pub budget: usize,
    /// Bytes of units mapped now (resident units times the unit size;
    /// units mapped to the shared zero page included).
    pub resident_bytes: u64,
    /// Units evicted now: their only copy is in the store.
    pub compressed_units: u64,
    /// Bytes of the compressed objects the store holds (its
    /// `compr_data_size`; copies of clean resident units included).
    pub stored_bytes: u64,
    /// Bytes of memory the store holds for them (its `mem_used_total`)
    /// plus its metadata: the compressed part, all in.
    pub store_memory: u64,
    /// Faults on missing pages (installs, zero fills, duplicates).
    pub faults: u64,
    /// Write-protect faults: first writes to a unit installed clean.
    pub write_faults: u64,
    /// Units never written installed as zeros.
    pub zero_fills: u64,
    /// Evicted units brought back (decompressed and installed) by a fault
    /// on them.
    pub promotions: u64,
    /// Evicted units brought back ahead of a sequential read, without a
    /// fault on them (see `RegionConfig::readahead`).
    pub readahead: u64,
    /// Units dropped from the region.
    pub evictions: u64,
    /// Of those, dropped without compressing (the stored copy was current).
    pub clean_drops: u64,
    /// Units compressed into the store.
    pub compressions: u64,
    /// Nanoseconds spent compressing (and storing).
    pub compress_ns: u64,
    /// Nanoseconds spent decompressing (and reading from the store).
    pub decompress_ns: u64,
    /// Evictions abandoned because the unit was written while it was
    /// being compressed.
    pub eviction_races: u64,
    /// Evictions the fault thread made itself, the region being at its
    /// budget when a fault came (the evictor thread had fallen behind).
    pub sync_evictions: u64,
    /// Missing pages found in resident units: the program dropped them
    /// (`madvise`); they read as zeros.
    pub dropped_by_program: u64,
    /// Bytes of the stored objects that are copies of resident (clean)
    /// units, now: what the store holds beyond the evicted units' data, at
    /// most `RegionConfig::keep_copies`.
    pub copy_bytes: u64,
    /// Copies of resident units discarded for `RegionConfig::keep_copies`:
    /// not kept when the unit was installed, or trimmed later to make room.
    /// Each makes a unit dirty that would have been clean, so its next
    /// eviction compresses it.
    pub copies_dropped: u64,
    /// Operations the kernel refused (the fault thread goes on; a stuck
    /// fault is released with zeros).
    pub errors: u64,
    /// Fault service times (see [`LatencyHistogram`]).
    pub fault_latency: LatencyHistogram,
}

impl RegionStats {
    /// Promotions per eviction: how often an evicted unit came back.
    pub fn promotion_rate(&self) -> f64 {
        if self.evictions == 0 {
            0.0
        } else {
            self.promotions as f64 / self.evictions as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(
        miri,
        ignore = "safe arithmetic over 100,000 values: nothing for Miri to check"
    )]
    fn buckets_are_ordered_and_tight() {
        let mut last = 0;
        for ns in (0..100_000u64).chain([1 << 40, u64::MAX / 2]) {
            let b = bucket(ns);
            assert!(b >= last, "{ns}");
            last = b;
            let high = bucket_high(b);
            assert!(
                high >= ns && (high - ns) as f64 <= ns as f64 / 8.0 + 1.0,
                "{ns} {high}"
            );
        }
        let h = Histogram::default();
        for ns in 1..=1000 {
            h.record(ns);
        }
        let s = h.snapshot();
        assert_eq!(s.count(), 1000);
        let p50 = s.quantile(0.5);
        assert!((500..=563).contains(&p50), "{p50}");
    }
}
