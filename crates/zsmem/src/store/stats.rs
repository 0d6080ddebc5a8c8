//! The store's statistics, named and laid out as zram's sysfs files
//! (`mm_stat`, `io_stat`, `bd_stat`), plus what recompression did.

use std::sync::atomic::{AtomicU64, Ordering};

/// zram's `mm_stat`, field by field.
///
/// ```
/// use zsmem::{PageStore, PageStoreConfig};
/// let store = PageStore::new(PageStoreConfig { slots: 8, ..Default::default() })?;
/// store.write(0, &[0u8; 4096])?; // same-filled
/// store.write(1, &b"text ".repeat(820)[..4096])?;
/// let mm = store.mm_stat();
/// assert_eq!((mm.orig_data_size, mm.same_pages), (8192, 1));
/// assert!(mm.compr_data_size < 4096 && mm.mem_used_total >= 4096);
/// # Ok::<(), zsmem::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct MmStat {
    /// Bytes of pages stored, before compression (same-filled and written
    /// back pages included, as zram counts them).
    pub orig_data_size: u64,
    /// Bytes of the stored objects (huge pages count a whole page).
    pub compr_data_size: u64,
    /// Bytes of pool pages: the memory the store holds for data.
    pub mem_used_total: u64,
    /// The pool's memory limit in bytes, 0 if none.
    pub mem_limit: u64,
    /// Highest `mem_used_total` so far.
    pub mem_used_max: u64,
    /// Slots holding a same-filled page.
    pub same_pages: u64,
    /// Pages freed by compaction.
    pub pages_compacted: u64,
    /// Slots holding a huge (raw) page.
    pub huge_pages: u64,
    /// Huge pages stored since the store was made.
    pub huge_pages_since: u64,
}

/// zram's `io_stat`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct IoStat {
    /// Reads that failed (a corrupt object or backing block, an I/O error).
    pub failed_reads: u64,
    /// Writes that failed (the memory limit, the OS refusing memory).
    pub failed_writes: u64,
    /// Requests refused as malformed: a slot out of range, a buffer that is
    /// not one page.
    pub invalid_io: u64,
    /// Pages discarded (each page of a discard counts, as zram counts them).
    pub notify_free: u64,
}

/// zram's `bd_stat`, in pages (zram's 4 KiB units are this store's pages).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct BdStat {
    /// Pages held in the backing file now.
    pub bd_count: u64,
    /// Pages read back from the backing file.
    pub bd_reads: u64,
    /// Pages written to the backing file.
    pub bd_writes: u64,
}

/// What recompression has done since the store was made (or, returned by
/// [`PageStore::recompress`](crate::PageStore::recompress), in one call).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct RecompressStat {
    /// Slots that matched the request and were tried.
    pub examined: u64,
    /// Slots whose object was replaced by a smaller one.
    pub recompressed: u64,
    /// Object bytes saved: old lengths minus new ones.
    pub bytes_saved: u64,
    /// Slots marked incompressible: no secondary codec reached a smaller
    /// size class, so they are not tried again.
    pub marked_incompressible: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) pages_stored: AtomicU64,
    pub(crate) compr_bytes: AtomicU64,
    pub(crate) same_pages: AtomicU64,
    pub(crate) huge_pages: AtomicU64,
    pub(crate) huge_pages_since: AtomicU64,
    pub(crate) failed_reads: AtomicU64,
    pub(crate) failed_writes: AtomicU64,
    pub(crate) invalid_io: AtomicU64,
    pub(crate) notify_free: AtomicU64,
    pub(crate) bd_count: AtomicU64,
    pub(crate) bd_reads: AtomicU64,
    pub(crate) bd_writes: AtomicU64,
    pub(crate) examined: AtomicU64,
    pub(crate) recompressed: AtomicU64,
    pub(crate) bytes_saved: AtomicU64,
    pub(crate) marked_incompressible: AtomicU64,
    pub(crate) allocator_ns: AtomicU64,
}

/// Relaxed add: counters count quantities and publish no other memory.
pub(crate) fn add(c: &AtomicU64, v: u64) {
    c.fetch_add(v, Ordering::Relaxed);
}

/// Relaxed subtract.
pub(crate) fn sub(c: &AtomicU64, v: u64) {
    c.fetch_sub(v, Ordering::Relaxed);
}

pub(crate) fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

impl Counters {
    pub(crate) fn io_stat(&self) -> IoStat {
        IoStat {
            failed_reads: get(&self.failed_reads),
            failed_writes: get(&self.failed_writes),
            invalid_io: get(&self.invalid_io),
            notify_free: get(&self.notify_free),
        }
    }

    pub(crate) fn bd_stat(&self) -> BdStat {
        BdStat {
            bd_count: get(&self.bd_count),
            bd_reads: get(&self.bd_reads),
            bd_writes: get(&self.bd_writes),
        }
    }

    pub(crate) fn recompress_stat(&self) -> RecompressStat {
        RecompressStat {
            examined: get(&self.examined),
            recompressed: get(&self.recompressed),
            bytes_saved: get(&self.bytes_saved),
            marked_incompressible: get(&self.marked_incompressible),
        }
    }

    pub(crate) fn add_recompress(&self, r: &RecompressStat) {
        add(&self.examined, r.examined);
        add(&self.recompressed, r.recompressed);
        add(&self.bytes_saved, r.bytes_saved);
        add(&self.marked_incompressible, r.marked_incompressible);
    }
}
