//! All-in memory: every byte a contestant holds for the data, counted the
//! same way for everyone, as a sum of named terms.
//!
//! `pool` (zram's `mem_used_total`) counts only the pages an allocator
//! holds for objects. A user pays more: the allocator's metadata (handle
//! tables, zspage descriptors, free bitmaps), the front end's table of
//! slots, in the kernel slab objects zsmalloc allocates beside its pages,
//! and in a process the page-table entries that map its pages (the
//! kernel's own pages sit in its direct map). A page's `struct page` is
//! nobody's: the kernel keeps one for every frame of RAM, used or not.
//! [`Figures::all_in`] is the sum of [`Figures::all_in_terms`], each a
//! [`Term`] whose name is one of the names below; [`explain`] gives, for each, its formula and where it
//! comes from. That list is the one place the formulas are written: the
//! table footer of `zsmem compare`, its JSON and the HTML report all print
//! it.
//!
//! The kernel's zram shows only `mem_used_total`; the rest of its terms are
//! estimates from published structure sizes, never measured, and marked
//! so.
//!
//! [`Figures::all_in`]: crate::contestants::Figures::all_in
//! [`Figures::all_in_terms`]: crate::contestants::Figures::all_in_terms

use std::sync::OnceLock;

use serde::Serialize;
use zsmem::{PoolConfig, SizeClassTable};

/// Pages the allocator holds for objects (`pool`).
pub const POOL_PAGES: &str = "pool pages";
/// zsmem: pages of freed zspages still resident, held for quick reuse.
pub const CACHED_PAGES: &str = "cached pages";
/// The allocator's own metadata, where it is visible.
pub const ALLOCATOR_METADATA: &str = "allocator metadata";
/// The front end's per-slot table (and what goes with it).
pub const SLOT_TABLE: &str = "slot table";
/// A malloc baseline's memory: its process's anonymous RSS growth.
pub const HEAP_GROWTH: &str = "heap growth";
/// A malloc baseline's bytes in live blocks beyond its RSS growth: memory
/// resident before its baseline that the allocator reused.
pub const REUSED_AT_BASELINE: &str = "reused at baseline";
/// A process's estimate: the page-table entries mapping its pool pages.
pub const PAGE_TABLES: &str = "page tables (est.)";
/// Kernel estimate: zram's table, one entry per slot of the device.
pub const ZRAM_TABLE: &str = "zram table (est.)";
/// Kernel estimate: zsmalloc's handle per object, from its slab cache.
pub const ZS_HANDLE: &str = "zs_handle (est.)";
/// Kernel estimate: zsmalloc's `struct zspage` per zspage.
pub const ZSPAGE_DESCRIPTORS: &str = "zspage descriptors (est.)";

/// Bytes of page table a process needs per 4 KiB page it maps: one 8-byte
/// entry (a 4 KiB page-table page maps 512 pages; the levels above are a
/// 512th of that again, left out).
pub const PTE_BYTES: u64 = 8;

/// The page-table term of a process holding `bytes` of pages for the data
/// (zsmem and the peers: their pool; a malloc baseline: its heap).
pub fn page_tables(bytes: u64) -> Term {
    Term {
        name: PAGE_TABLES,
        bytes: bytes.div_ceil(4096) * PTE_BYTES,
    }
}
/// Bytes of one zsmalloc handle (`unsigned long` from the `zs_handle`
/// kmem_cache, `mm/zsmalloc.c`).
pub const ZS_HANDLE_BYTES: u64 = 8;
/// Bytes of `struct zspage` (`mm/zsmalloc.c`, Linux 6.18, no lockdep): a
/// 4-byte word of bitfields, `inuse`, `freeobj`, padding, `first_page`,
/// a `list_head`, `pool`, and the 8-byte `zspage_lock` (spinlock and
/// count): 4 + 4 + 4 + 4 + 8 + 16 + 8 + 8 = 56, a multiple of 8, so SLUB
/// keeps it at 56.
pub const ZSPAGE_BYTES: u64 = 56;

/// One term of a contestant's all-in memory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Term {
    /// One of this module's names.
    pub name: &'static str,
    /// Bytes.
    pub bytes: u64,
}

/// How a term is counted: printed under every table of figures.
#[derive(Clone, Debug, Serialize)]
pub struct TermInfo {
    /// The term's name, as in [`Term::name`].
    pub name: &'static str,
    /// How its bytes are counted.
    pub formula: String,
    /// Where the sizes come from.
    pub source: &'static str,
    /// An estimate rather than a measurement.
    pub estimated: bool,
}

/// Bytes of a zram table entry on the running kernel: `handle` (8) and
/// `flags` padded to 16, plus `ac_time` (8) with
/// `CONFIG_ZRAM_TRACK_ENTRY_ACTIME` (which `CONFIG_ZRAM_MEMORY_TRACKING`
/// selects), read from `/proc/config.gz` or `/boot/config-<release>`;
/// where neither is readable, 16: the smaller size, so the estimate
/// never flatters zsmem. The text says which.
pub fn zram_table_entry() -> (u64, &'static str) {
    static ENTRY: OnceLock<(u64, &'static str)> = OnceLock::new();
    *ENTRY.get_or_init(
        || match kernel_config_has("CONFIG_ZRAM_TRACK_ENTRY_ACTIME") {
            Some(true) => (
                24,
                "CONFIG_ZRAM_TRACK_ENTRY_ACTIME=y in the running kernel's config",
            ),
            Some(false) => (
                16,
                "CONFIG_ZRAM_TRACK_ENTRY_ACTIME off in the running kernel's config",
            ),
            None => (
                16,
                "kernel config unreadable: assumed without ac_time (the smaller size)",
            ),
        },
    )
}

/// Whether the running kernel's configuration sets `option` to `y`; `None`
/// where no configuration is readable. `/proc/config.gz` is gzip, read
/// with flate2; `/boot/config-<release>` is text.
fn kernel_config_has(option: &str) -> Option<bool> {
    use std::io::Read;
    let mut text = String::new();
    let gz = std::fs::File::open("/proc/config.gz").ok().and_then(|f| {
        flate2::read::GzDecoder::new(f)
            .read_to_string(&mut text)
            .ok()
    });
    if gz.is_none() {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
        text = std::fs::read_to_string(format!("/boot/config-{}", release.trim())).ok()?;
    }
    let set = format!("{option}=y");
    Some(text.lines().any(|l| l.trim() == set))
}

/// Mean pages per zspage over the physical classes of the kernel's class
/// table (4 KiB pages, chain 8, delta 16): the divisor of the zspage
/// estimate, since zram does not show how many zspages it holds.
pub fn kernel_pages_per_zspage() -> f64 {
    static MEAN: OnceLock<f64> = OnceLock::new();
    *MEAN.get_or_init(|| {
        SizeClassTable::new(PoolConfig::kernel().size_classes())
            .ok()
            .and_then(|t| {
                let ppz: Vec<usize> = t
                    .physical_indices()
                    .iter()
                    .filter_map(|&i| t.class(i))
                    .map(|c| c.pages_per_zspage)
                    .collect();
                (!ppz.is_empty()).then(|| ppz.iter().sum::<usize>() as f64 / ppz.len() as f64)
            })
            .unwrap_or(1.0)
    })
}

/// The kernel's all-in terms: `mem_used_total` as measured, then the
/// estimates, for a device of `slots` slots holding `objects` zsmalloc
/// objects (pages stored less same-filled ones) in `pool_bytes`.
pub fn kernel_terms(pool_bytes: u64, slots: u64, objects: u64) -> Vec<Term> {
    let pages = pool_bytes / 4096;
    // No `struct page` term (it was charged to the kernel alone, 1.5% of
    // its pool, though every contestant's pages have one: review,
    // 2026-11-29), and no page tables: the direct map holds its pages.
    let zspages = (pages as f64 / kernel_pages_per_zspage()).ceil() as u64;
    vec![
        Term {
            name: POOL_PAGES,
            bytes: pool_bytes,
        },
        Term {
            name: ZRAM_TABLE,
            bytes: slots * zram_table_entry().0,
        },
        Term {
            name: ZS_HANDLE,
            bytes: objects * ZS_HANDLE_BYTES,
        },
        Term {
            name: ZSPAGE_DESCRIPTORS,
            bytes: zspages * ZSPAGE_BYTES,
        },
    ]
}

/// The sum of `terms`.
pub fn total(terms: &[Term]) -> u64 {
    terms.iter().map(|t| t.bytes).sum()
}

/// Every term's formula and source, in a fixed order: the one text the
/// table footer, the JSON and the report print.
pub fn explain() -> Vec<TermInfo> {
    let (entry, entry_why) = zram_table_entry();
    vec![
        TermInfo {
            name: POOL_PAGES,
            formula: "pages the allocator holds for objects (zram's mem_used_total; zsmem: \
                      zspage pages; peers: pages from their page source)"
                .into(),
            source: "measured",
            estimated: false,
        },
        TermInfo {
            name: CACHED_PAGES,
            formula: "zsmem: cached_pages x page size (freed pages waiting to be returned to the OS; also in `pool`)".into(),
            source: "measured (PoolStats::cached_pages)",
            estimated: false,
        },
        TermInfo {
            name: ALLOCATOR_METADATA,
            formula: "zsmem: PoolStats::metadata_bytes (handle tables, zspage descriptors, free \
                      bitmaps, owner arrays, class array); peers: their handle tables, page and \
                      slab descriptors, lists"
                .into(),
            source: "measured (heap bytes of the metadata's vectors)",
            estimated: false,
        },
        TermInfo {
            name: SLOT_TABLE,
            formula: "the front end's per-slot table: zsmem: PageStore::metadata_bytes less the \
                      pool's (its table of 64-slot chunks present while a slot holds a page, \
                      about 9 B a slot: an 8-byte word, a lock shared by 16 and the chunk's \
                      pointer and side array for the rare wide slot; the lab keeps no access times, \
                      as zram keeps none without CONFIG_ZRAM_TRACK_ENTRY_ACTIME; plus the \
                      codec table); peers and malloc baselines: the same \
                      layout, 64-slot chunks holding a page x 64 x the front's entry size \
                      + 8 B per chunk"
                .into(),
            source: "measured (size of the tables)",
            estimated: false,
        },
        TermInfo {
            name: HEAP_GROWTH,
            formula: "malloc baselines: anonymous RSS growth (/proc/self/statm resident - shared) \
                      of the contestant's own child process since its baseline, each measured \
                      after the allocator's release (glibc malloc_trim(0), jemalloc tcache flush \
                      and arena.<all>.purge, mimalloc mi_collect(true)); includes the \
                      allocator's metadata"
                .into(),
            source: "measured",
            estimated: false,
        },
        TermInfo {
            name: REUSED_AT_BASELINE,
            formula: "malloc baselines: the bytes of live blocks (the larger of the growth of \
                      what the allocator says is in use - glibc mallinfo2 uordblks + hblkhd, \
                      jemalloc stats.allocated - and the bytes asked for, compr) beyond the heap \
                      growth: memory resident before the baseline that the allocator reused; \
                      shown only where it is not 0"
                .into(),
            source: "measured",
            estimated: false,
        },
        TermInfo {
            name: PAGE_TABLES,
            formula: format!(
                "zsmem, peers and malloc baselines: {PTE_BYTES} B x pool pages (their heap \
                 growth for a baseline): the page-table entry mapping each 4 KiB page in the \
                 process; the kernel's pool pages sit in its direct map and need none. No \
                 contestant is charged a `struct page`: the kernel keeps one for every frame \
                 of RAM, whether anything holds it or not"
            ),
            source: "x86-64 and arm64 4 KiB paging: 512 8-byte entries a page-table page",
            estimated: true,
        },
        TermInfo {
            name: ZRAM_TABLE,
            formula: format!(
                "kernel: {entry} B x slots of the device (zram allocates its table for the whole \
                 disksize); {entry_why}"
            ),
            source: "drivers/block/zram/zram_drv.h (struct zram_table_entry: handle, flags, \
                     ac_time with CONFIG_ZRAM_TRACK_ENTRY_ACTIME)",
            estimated: true,
        },
        TermInfo {
            name: ZS_HANDLE,
            formula: format!(
                "kernel: {ZS_HANDLE_BYTES} B x objects (pages stored - same-filled pages), slab \
                 overhead left out"
            ),
            source: "mm/zsmalloc.c (one handle per object from the zs_handle kmem_cache)",
            estimated: true,
        },
        TermInfo {
            name: ZSPAGE_DESCRIPTORS,
            formula: format!(
                "kernel: {ZSPAGE_BYTES} B x ceil(mem_used_total / 4096 / {:.2}); zram does not \
                 show the zspage count, so it is estimated with {:.2}, the mean pages per zspage \
                 over the classes of the kernel's layout (4 KiB, chain 8, delta 16)",
                kernel_pages_per_zspage(),
                kernel_pages_per_zspage()
            ),
            source: "mm/zsmalloc.c (struct zspage from the zspage kmem_cache)",
            estimated: true,
        },
    ]
}

/// The terms of [`explain`] that `figures` use (each figure's
/// `all_in_terms`), in its order: what a table of those figures needs
/// explained, and no term of a contestant that did not run.
pub fn explain_used<'a>(figures: impl IntoIterator<Item = &'a [Term]>) -> Vec<TermInfo> {
    let mut used: Vec<&str> = Vec::new();
    for terms in figures {
        for t in terms {
            if !used.contains(&t.name) {
                used.push(t.name);
            }
        }
    }
    explain()
        .into_iter()
        .filter(|t| used.contains(&t.name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_terms_add_up_and_are_explained() {
        let terms = kernel_terms(8 << 20, 10_000, 5_000);
        let names: Vec<&str> = explain().iter().map(|i| i.name).collect();
        for t in &terms {
            assert!(names.contains(&t.name), "{} unexplained", t.name);
        }
        assert_eq!(total(&terms), terms.iter().map(|t| t.bytes).sum::<u64>());
        assert_eq!(terms[0].bytes, 8 << 20);
        assert!(matches!(zram_table_entry().0, 16 | 24));
        assert_eq!(terms[1].bytes, 10_000 * zram_table_entry().0);
        assert_eq!(terms[2].bytes, 5_000 * 8);
        let ppz = kernel_pages_per_zspage();
        assert!((1.0..=8.0).contains(&ppz), "{ppz}");
        assert!(terms[3].bytes > 0);
        // No struct page for the kernel (nor anyone), no page tables.
        assert!(
            terms
                .iter()
                .all(|t| t.name != PAGE_TABLES && !t.name.contains("struct page"))
        );
        assert_eq!(page_tables(8 << 20).bytes, 2048 * 8);
        assert_eq!(page_tables(1).bytes, 8);
        assert_eq!(
            kernel_terms(0, 0, 0).iter().map(|t| t.bytes).sum::<u64>(),
            0
        );
    }
}
