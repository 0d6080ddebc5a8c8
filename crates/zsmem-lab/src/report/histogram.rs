//! Latency histograms in bpftrace's log2 style: buckets, their labels, and the text form.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

/// Units of the bucket bounds, powers of 1024 as bpftrace prints them.
const UNITS: [&str; 7] = ["", "K", "M", "G", "T", "P", "E"];

/// The power-of-two buckets of `h` that hold counts, as `(key, count)`
/// sorted by key: key 0 holds the value 0, key `k >= 1` the values in
/// `[2^(k-1), 2^k)`.
pub(super) fn log2_buckets(h: &Histogram<u64>) -> Vec<(u32, u64)> {
    let mut counts = [0u64; 65];
    for v in h.iter_recorded() {
        let value = h.lowest_equivalent(v.value_iterated_to());
        let key = if value == 0 {
            0
        } else {
            64 - value.leading_zeros()
        };
        counts[key as usize] += v.count_at_value();
    }
    counts
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0)
        .map(|(k, c)| (k as u32, *c))
        .collect()
}

/// `2^exp` with a K/M/G... unit (1K = 1024), as bpftrace labels buckets.
fn pow2_label(exp: u32) -> String {
    format!("{}{}", 1u64 << (exp % 10), UNITS[(exp / 10) as usize])
}

/// The bpftrace label of bucket `key` (see [`log2_buckets`]).
fn bucket_label(key: u32) -> String {
    match key {
        0 => "[0]".to_string(),
        1 => "[1]".to_string(),
        k => format!("[{}, {})", pow2_label(k - 1), pow2_label(k)),
    }
}

/// The lower bound of bucket `key`, for plot axes.
pub(super) fn bucket_lower(key: u32) -> String {
    match key {
        0 => "0".to_string(),
        k => pow2_label(k - 1),
    }
}

pub(super) fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// A histogram of nanoseconds in the style of bpftrace's `hist()` (as in
/// reference 001): one line per power-of-two bucket that holds counts,
///
/// ```text
/// [512, 1K)     12345 |@@@@@                    |
/// ```
///
/// bounds with K/M/G units (powers of 1024), bars `width` characters wide
/// scaled to the largest bucket, then a line with the sample count and the
/// p50, p90, p99, p99.9 and max in µs with two decimals. An empty histogram
/// gives the single line `(no samples)`.
pub fn log2_histogram(h: &Histogram<u64>, width: usize) -> String {
    let buckets = log2_buckets(h);
    if buckets.is_empty() {
        return "(no samples)\n".to_string();
    }
    let labels: Vec<String> = buckets.iter().map(|&(k, _)| bucket_label(k)).collect();
    let label_width = labels.iter().map(String::len).max().unwrap_or(0);
    let count_width = buckets
        .iter()
        .map(|&(_, c)| c.to_string().len())
        .max()
        .unwrap_or(1);
    let max = buckets.iter().map(|&(_, c)| c).max().unwrap_or(1).max(1);
    let mut out = String::new();
    for (label, &(_, count)) in labels.iter().zip(&buckets) {
        let n = (u128::from(count) * width as u128 / u128::from(max)) as usize;
        let bar = "@".repeat(n);
        let _ = writeln!(
            out,
            "{label:<label_width$} {count:>count_width$} |{bar:<width$}|"
        );
    }
    let _ = writeln!(
        out,
        "n {}  p50 {:.2} µs  p90 {:.2} µs  p99 {:.2} µs  p99.9 {:.2} µs  max {:.2} µs",
        h.len(),
        us(h.value_at_quantile(0.5)),
        us(h.value_at_quantile(0.9)),
        us(h.value_at_quantile(0.99)),
        us(h.value_at_quantile(0.999)),
        us(h.max()),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist() -> Histogram<u64> {
        Histogram::new_with_bounds(1, 60_000_000_000, 3).unwrap()
    }

    #[test]
    fn bucket_labels_follow_bpftrace() {
        assert_eq!(bucket_label(0), "[0]");
        assert_eq!(bucket_label(1), "[1]");
        assert_eq!(bucket_label(2), "[2, 4)");
        assert_eq!(bucket_label(10), "[512, 1K)");
        assert_eq!(bucket_label(11), "[1K, 2K)");
        assert_eq!(bucket_label(21), "[1M, 2M)");
        assert_eq!(bucket_label(31), "[1G, 2G)");
        assert_eq!(bucket_label(64), "[8E, 16E)");
    }

    #[test]
    fn buckets_split_at_powers_of_two() {
        let mut h = hist();
        for v in [1023u64, 1024, 2047, 2048, 4095, 4096, 1 << 20] {
            h.record(v).unwrap();
        }
        assert_eq!(
            log2_buckets(&h),
            vec![(10, 1), (11, 2), (12, 2), (13, 1), (21, 1)]
        );
    }

    #[test]
    fn bars_scale_to_the_largest_bucket() {
        let mut h = hist();
        h.record_n(1500, 100).unwrap();
        h.record_n(3000, 50).unwrap();
        let s = log2_histogram(&h, 10);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "[1K, 2K) 100 |@@@@@@@@@@|");
        assert_eq!(lines[1], "[2K, 4K)  50 |@@@@@     |");
        assert!(lines[2].starts_with("n 150  p50 1.50 µs"), "{}", lines[2]);
    }
}
