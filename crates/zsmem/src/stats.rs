//! Statistics: per class the kernel's debugfs columns, and pool totals.

use std::fmt::Write as _;

/// One physical class, as `/sys/kernel/debug/zsmalloc/<pool>/classes`
/// shows it, plus the bytes its objects hold.
///
/// ```
/// use zsmem::{Pool, PoolConfig};
/// let pool = Pool::new(PoolConfig::kernel())?;
/// pool.store(&[1u8; 100])?;
/// let used: Vec<_> = pool.class_stats().into_iter().filter(|c| c.obj_used > 0).collect();
/// assert_eq!(used.len(), 1);
/// assert!(used[0].size >= 100 && used[0].pages_used >= 1);
/// print!("{}", zsmem::stats::format_kernel_classes(&used));
/// # Ok::<(), zsmem::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ClassStats {
    /// Class index (the kernel's `class->index`).
    pub index: usize,
    /// Object slot size in bytes.
    pub size: usize,
    /// Zspages in the fullness groups 10%, 20%, ..., 90%, 99%, 100%. A
    /// zspage's group counts its parked slots (`PoolConfig::parked_slots`)
    /// as used, as the allocator does; `obj_used` and `freeable` count them
    /// as free. With `parked_slots: 0` (the kernel's configuration) the two
    /// agree as in the kernel's debugfs.
    pub fullness: [usize; 11],
    /// Object slots in all zspages of the class.
    pub obj_allocated: usize,
    /// Objects in use.
    pub obj_used: usize,
    /// Freed slots parked for the class's next allocations
    /// (`PoolConfig::parked_slots`): free in `obj_used`, `freeable` and
    /// `partial_bytes`, used in `fullness`.
    pub parked: usize,
    /// Pages the class's zspages hold: all their pages, or with
    /// `trim_pages` the committed ones.
    pub pages_used: usize,
    /// Pages per zspage.
    pub pages_per_zspage: usize,
    /// Objects per zspage.
    pub objs_per_zspage: usize,
    /// The kernel's estimate of pages compaction could free:
    /// `(obj_allocated - obj_used) / objs_per_zspage * pages_per_zspage`.
    pub freeable: usize,
    /// Bytes of free slots inside the pages held (what compaction can
    /// recover; without `trim_pages`, all free slots).
    pub partial_bytes: usize,
    /// Sum of the lengths of the objects in use.
    pub bytes_stored: usize,
    /// Heap bytes of the class's metadata (handle table, zspage
    /// descriptors, free bitmaps, owner arrays).
    pub metadata_bytes: usize,
}

impl ClassStats {
    /// A class no object was ever allocated in.
    pub(crate) fn unused(info: crate::size_class::ClassInfo) -> Self {
        ClassStats {
            index: info.index,
            size: info.size,
            fullness: [0; 11],
            obj_allocated: 0,
            obj_used: 0,
            parked: 0,
            pages_used: 0,
            pages_per_zspage: info.pages_per_zspage,
            objs_per_zspage: info.objs_per_zspage,
            freeable: 0,
            partial_bytes: 0,
            bytes_stored: 0,
            metadata_bytes: 0,
        }
    }
}

/// Totals for a pool.
///
/// ```
/// use zsmem::{Pool, PoolConfig};
/// let pool = Pool::new(PoolConfig::default())?;
/// let h = pool.store(&[7u8; 1000])?;
/// let s = pool.stats();
/// assert_eq!((s.objects, s.bytes_stored), (1, 1000));
/// assert!(s.bytes_held() >= s.bytes_stored && s.metadata_bytes > 0);
/// pool.free(h)?;
/// # Ok::<(), zsmem::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct PoolStats {
    /// Page size of the pool.
    pub page_size: usize,
    /// Pages of all zspages (with `trim_pages`, their committed pages): the
    /// memory the pool holds for objects (what zram reports as
    /// `mem_used_total`, in pages).
    pub pages_held: usize,
    /// Highest `pages_held` since the pool was made (`mem_used_max`).
    pub max_pages_held: usize,
    /// Pages freed and still resident: waiting in the return queue for
    /// the returner thread (at most `PageReturn::Delayed`'s delay, or its
    /// `max_pages`), or being returned; held from the OS but not by any
    /// zspage, and reused first by new zspages. `Pool::trim` returns them.
    pub cached_pages: usize,
    /// Live objects.
    pub objects: usize,
    /// Sum of the live objects' lengths.
    pub bytes_stored: usize,
    /// Live objects in huge classes (one per page).
    pub huge_objects: usize,
    /// Heap bytes of allocator metadata: handle tables, zspage descriptors,
    /// free bitmaps, owner arrays, the class array.
    pub metadata_bytes: usize,
    /// Where the bytes of `pages_held` that hold no object byte go.
    pub waste: Waste,
    /// Pages freed by compaction so far (zram's `pages_compacted`).
    pub pages_compacted: u64,
    /// Address space reserved from the OS (not all of it resident).
    pub reserved_bytes: usize,
    /// Deferred frees not drained yet: their objects still hold memory
    /// (and are counted in `objects`) though their handles are dead.
    pub pending_frees: usize,
    /// Bytes of class slots those pending frees hold.
    pub pending_free_bytes: usize,
    /// Runs of deferred frees drained so far, each under one class lock.
    pub deferred_batches: u64,
}

/// The bytes of zspages that hold no object byte, by cause. The three parts
/// add up to `bytes_held - bytes_stored`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Waste {
    /// Rounding: used slots are larger than their objects (class size minus
    /// object length, the kernel's in-object handle included).
    pub rounding_bytes: usize,
    /// Free slots in partly used zspages (what compaction recovers); with
    /// `trim_pages`, those inside committed pages only.
    pub partial_bytes: usize,
    /// Tail of each zspage that no slot can use; with `trim_pages`, the part
    /// of committed pages outside whole slots (the tail of the last
    /// committed page, beyond its last whole slot).
    pub tail_bytes: usize,
}

impl Waste {
    /// Sum of the parts.
    pub fn total(&self) -> usize {
        self.rounding_bytes + self.partial_bytes + self.tail_bytes
    }
}

impl PoolStats {
    /// `pages_held` in bytes.
    pub fn bytes_held(&self) -> usize {
        self.pages_held * self.page_size
    }

    /// Bytes held for objects but not holding object bytes, as a fraction of
    /// the bytes stored (the reference's "overhead ratio"). 0 when empty.
    pub fn overhead_ratio(&self) -> f64 {
        ratio(self.waste.total(), self.bytes_stored)
    }

    /// As `overhead_ratio`, with the metadata counted as overhead too.
    pub fn overhead_ratio_with_metadata(&self) -> f64 {
        ratio(self.waste.total() + self.metadata_bytes, self.bytes_stored)
    }
}

/// Render class stats in the layout of the kernel's debugfs `classes` file,
/// with its `Total` line.
pub fn format_kernel_classes(classes: &[ClassStats]) -> String {
    let mut out = String::new();
    let _ = write!(out, " {:>5} {:>5} ", "class", "size");
    for g in [
        "10%", "20%", "30%", "40%", "50%", "60%", "70%", "80%", "90%", "99%", "100%",
    ] {
        let _ = write!(out, "{g:>9} ");
    }
    let _ = writeln!(
        out,
        "{:>13} {:>10} {:>10} {:>16} {:>8}",
        "obj_allocated", "obj_used", "pages_used", "pages_per_zspage", "freeable"
    );
    let mut total = [0usize; 11];
    let (mut alloc, mut used, mut pages, mut freeable) = (0, 0, 0, 0);
    for c in classes {
        let _ = write!(out, " {:>5} {:>5} ", c.index, c.size);
        for (g, n) in c.fullness.iter().enumerate() {
            let _ = write!(out, "{n:>9} ");
            total[g] += n;
        }
        let _ = writeln!(
            out,
            "{:>13} {:>10} {:>10} {:>16} {:>8}",
            c.obj_allocated, c.obj_used, c.pages_used, c.pages_per_zspage, c.freeable
        );
        alloc += c.obj_allocated;
        used += c.obj_used;
        pages += c.pages_used;
        freeable += c.freeable;
    }
    let _ = write!(out, "\n {:>5} {:>5} ", "Total", "");
    for n in total {
        let _ = write!(out, "{n:>9} ");
    }
    let _ = writeln!(
        out,
        "{alloc:>13} {used:>10} {pages:>10} {:>16} {freeable:>8}",
        ""
    );
    out
}

fn ratio(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}
