//! Compressed-size statistics of a tree's pages: the same-filled test, LZ4 sizes, histograms.

use crate::corpus::tree::{FileTree, PAGE_SIZE, Page};

/// Compressed size at or above which a 4 KiB page counts as "huge": zram
/// would store it uncompressed. Three quarters of a page, a round figure
/// close to zsmalloc's huge class size (for other page sizes, three
/// quarters of theirs).
pub const HUGE_THRESHOLD: usize = PAGE_SIZE * 3 / 4;

/// Distribution of per-page compressed sizes over a tree.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Histogram {
    /// Bytes per page of the tree.
    pub page_size: usize,
    /// Width of one bucket in bytes.
    pub bucket_bytes: usize,
    /// Pages by compressed size (same-filled pages excluded): bucket `i`
    /// holds sizes in `[i * bucket_bytes, (i + 1) * bucket_bytes)`, sizes of
    /// a whole page or more (incompressible) fall in the last bucket.
    pub buckets: Vec<u64>,
    /// All pages.
    pub pages: u64,
    /// Pages whose 8-byte words are all equal: zram stores no data for them.
    pub same_filled: u64,
    /// Pages that compress to three quarters of a page or more
    /// ([`HUGE_THRESHOLD`] at 4 KiB; a subset of the top buckets): zram
    /// stores them as whole pages.
    pub huge: u64,
    /// Bytes as zram would store them: 0 per same-filled page, a page per
    /// huge page, the compressed size otherwise.
    pub stored_bytes: u64,
}

impl Histogram {
    /// Pages times the page size.
    pub fn orig_bytes(&self) -> u64 {
        self.pages * self.page_size as u64
    }

    /// Stored bytes over original bytes.
    pub fn ratio(&self) -> f64 {
        if self.pages == 0 {
            0.0
        } else {
            self.stored_bytes as f64 / self.orig_bytes() as f64
        }
    }

    /// Share of all pages, in percent, of a count.
    pub fn percent(&self, count: u64) -> f64 {
        if self.pages == 0 {
            0.0
        } else {
            100.0 * count as f64 / self.pages as f64
        }
    }
}

/// Whether every 8-byte word of the page is the same: zram's
/// `page_same_filled` on a 64-bit machine.
pub fn is_same_filled(page: &Page) -> bool {
    zsmem::store::same_filled(page).is_some()
}

/// Length of the page compressed with LZ4 (block format, as zram's lz4).
pub fn lz4_len(data: &[u8]) -> usize {
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUF.with(|buf| {
        let mut buf = buf.borrow_mut();
        let need = lz4_flex::block::get_maximum_output_size(data.len());
        if buf.len() < need {
            buf.resize(need, 0);
        }
        lz4_flex::block::compress_into(data, &mut buf).unwrap_or(usize::MAX)
    })
}

/// Histogram of the compressed sizes of every page of `tree`, `compress`
/// returning a page's compressed length, in buckets `bucket_bytes` wide.
///
/// # Panics
/// If `bucket_bytes` is 0.
pub fn compressed_size_histogram(
    tree: &FileTree,
    compress: impl Fn(&[u8]) -> usize,
    bucket_bytes: usize,
) -> Histogram {
    assert!(bucket_bytes > 0, "bucket width must be positive");
    let page_size = tree.page_size();
    let huge_threshold = page_size * 3 / 4;
    let n = page_size.div_ceil(bucket_bytes);
    let mut h = Histogram {
        page_size,
        bucket_bytes,
        buckets: vec![0; n],
        pages: 0,
        same_filled: 0,
        huge: 0,
        stored_bytes: 0,
    };
    for (_, _, page) in tree.pages() {
        h.pages += 1;
        if is_same_filled(page) {
            h.same_filled += 1;
            continue;
        }
        let c = compress(page).min(page_size);
        h.buckets[(c / bucket_bytes).min(n - 1)] += 1;
        if c >= huge_threshold {
            h.huge += 1;
            h.stored_bytes += page_size as u64;
        } else {
            h.stored_bytes += c as u64;
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_filled_means_equal_words() {
        let mut p = [0u8; PAGE_SIZE];
        assert!(is_same_filled(&p));
        for (i, b) in p.iter_mut().enumerate() {
            *b = (i % 8) as u8;
        }
        assert!(
            is_same_filled(&p),
            "a repeated 8-byte pattern is same-filled"
        );
        p[4095] = 9;
        assert!(!is_same_filled(&p));
    }
}
