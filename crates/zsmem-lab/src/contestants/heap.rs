//! The malloc baselines: heap objects from a general purpose allocator, and how their memory
//! is measured (what a user would do without zsmem).
//!
//! They keep pages behind [`ZramFront`], zram's page handling, which the
//! peers (`super::peers`) share. Each page is handled exactly as zram (and zsmem's `PageStore`) handles
//! it, so the comparison is about the allocator alone: a same-filled page
//! (every 8-byte word equal) keeps only its word and allocates nothing;
//! any other page is compressed with the run's codec (lz4 by default, the
//! codec the other contestants use) into at most the kernel's huge class
//! size ([`HUGE_CLASS_SIZE`](super::zram_front::HUGE_CLASS_SIZE) at 4 KiB), and a page
//! that does not compress under that is kept raw (a whole page, a "huge"
//! page). The compressed bytes are then kept as one plain heap allocation of
//! exactly their length (`Layout::from_size_align(len, 1)`) from a general
//! purpose allocator, and a slot table remembers where. Nothing is ever
//! compacted: [`PageContestant::compact`](super::PageContestant::compact) does nothing, because a heap
//! cannot move its blocks. The memory figures (`Figures::pool` and
//! `Figures::used`) are the growth, since the contestant was created, of
//! what the allocator itself says it holds from the OS; `meta` is 0 and
//! `waste` is `None` (the slot table is allocated before the first
//! measurement and is not counted, like zram's table).
//!
//! **system** ([`HeapContestant::system`]): Rust's `System` allocator, that
//! is glibc's malloc on Linux. Memory is glibc's `mallinfo2()`,
//! `arena + hblkhd`: the bytes every arena obtained from the OS with `sbrk`
//! or by growing a thread heap, plus the chunks served by `mmap`. Free chunks
//! inside an arena stay counted until glibc gives them back itself (it trims
//! only the top of a heap, past `M_TRIM_THRESHOLD`); this module never calls
//! `malloc_trim`, because what malloc keeps after frees, its fragmentation,
//! is the point of the measurement. `System` is also Rust's global
//! allocator, so the figure includes whatever else the process allocates or
//! frees meanwhile; the workload driver allocates its bookkeeping before it
//! starts, so the delta is mostly this contestant's, but small foreign
//! allocations may be in it (and it is clamped at 0 should the process free
//! more than the contestant holds). Conversely, chunks that were already
//! free in malloc's arenas when the contestant was made (the leftovers of
//! loading a corpus, say) are reused without the figure growing, so it may
//! fall short by up to that much; `config()` reports the amount
//! (`mallinfo2().fordblks` at creation). On targets without glibc the figure is
//! the process's resident set size from `/proc/self/statm`
//! ([`MemoryMethod::ProcessRss`]), polluted the same way.
//!
//! **jemalloc** ([`HeapContestant::jemalloc`]): `tikv_jemallocator::Jemalloc`
//! used as a plain allocator value, not the global allocator, so nothing but
//! heap contestants allocate from it and the delta since creation is exactly
//! theirs. Memory is `stats.resident` read after advancing `epoch`: the bytes
//! of physically resident data pages jemalloc maps (its metadata included,
//! and dirty pages it has not yet purged, whose decay takes 10 s by default
//! and runs only when jemalloc is called, as no background thread is
//! enabled). This statistic exists only when jemalloc is built with stats
//! (cargo feature `stats` of `tikv-jemalloc-ctl` or `tikv-jemallocator`); a
//! jemalloc built without it makes the contestant fall back to the process's
//! resident set size ([`MemoryMethod::ProcessRss`]), and `config()` says so.
//!
//! **mimalloc** ([`HeapContestant::mimalloc`]): `mimalloc::MiMalloc` (v3)
//! used as a plain allocator value, not the global allocator, so again the
//! delta is exactly the heap contestants'. Memory is `current_commit` of
//! `mi_process_info`: mimalloc's count of the bytes it has committed from
//! the OS (kept in its process-wide sub-process statistics, updated
//! atomically by every thread, so no merge of thread statistics is needed).
//! On Linux mimalloc commits arena memory as it hands it out (the figure
//! followed the process's resident set within a few percent in this
//! module's experiments) and decommits it with `MADV_DONTNEED` when it
//! purges free pages, which happens only after a delay (1 s by default) and
//! only when mimalloc is called again; until then freed pages stay counted.
//! mimalloc's own `current_rss` is not used: on Linux it is the same number,
//! and its `peak_rss` is the whole process's.
//!
//! Several heap contestants of one allocator alive at once share that
//! allocator, so each one's figure includes the others' growth. Memory an
//! earlier contestant left cached in the allocator, and that this one reuses,
//! does not show as growth. Measure one at a time.
//!
//! These in-process measures are kept for `zsmem replay` and `zsmem bench`;
//! `zsmem compare` runs each baseline in a child process of its own and
//! measures it after the allocator's release ([`crate::contestants::forked`]), which
//! sees what the release gives back and is never below the data.

use std::alloc::{GlobalAlloc, Layout, System};

use mimalloc::MiMalloc;
use tikv_jemallocator::Jemalloc;

use super::zram_front::{Parts, ZramFront};
use super::{LabError, ObjectContestant, ObjectMemory, PageConfig};

/// How a heap contestant's memory figure is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum MemoryMethod {
    /// glibc's `mallinfo2()`, `arena + hblkhd`: bytes obtained from the OS
    /// by `sbrk`, thread heaps and `mmap`'d chunks, freed chunks included
    /// until glibc trims them itself.
    GlibcMallinfo,
    /// jemalloc's `stats.resident` after `epoch` is advanced: resident pages
    /// jemalloc maps, metadata and unpurged dirty pages included.
    JemallocResident,
    /// mimalloc's `current_commit` from `mi_process_info`: bytes mimalloc
    /// has committed from the OS and not yet decommitted.
    MimallocCommit,
    /// The process's resident set size from `/proc/self/statm`: everything
    /// the process holds, so foreign allocations are included.
    ProcessRss,
}

impl MemoryMethod {
    /// glibc's statistics where they exist, else the process's RSS.
    pub fn for_system() -> Self {
        if glibc_held().is_ok() {
            MemoryMethod::GlibcMallinfo
        } else {
            MemoryMethod::ProcessRss
        }
    }

    /// jemalloc's `stats.resident`, or the process's RSS where jemalloc was
    /// built without statistics.
    pub fn for_jemalloc() -> Self {
        if jemalloc_resident().is_ok() {
            MemoryMethod::JemallocResident
        } else {
            MemoryMethod::ProcessRss
        }
    }

    /// The figure now, in bytes; an error where the method is not available
    /// on this system or build.
    pub fn read(self) -> Result<u64, String> {
        match self {
            MemoryMethod::GlibcMallinfo => glibc_held(),
            MemoryMethod::JemallocResident => jemalloc_resident(),
            MemoryMethod::MimallocCommit => Ok(mimalloc_commit()),
            MemoryMethod::ProcessRss => process_rss(),
        }
    }

    /// One line for reports: what the figure is.
    pub fn describe(self) -> &'static str {
        match self {
            MemoryMethod::GlibcMallinfo => {
                "glibc mallinfo2 arena+hblkhd delta (global allocator: may include other allocations; never trimmed)"
            }
            MemoryMethod::JemallocResident => "jemalloc stats.resident delta",
            MemoryMethod::MimallocCommit => "mimalloc mi_process_info current_commit delta",
            MemoryMethod::ProcessRss => "process RSS delta (/proc/self/statm; includes everything)",
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn glibc_held() -> Result<u64, String> {
    // SAFETY: mallinfo2 takes no arguments, only reads malloc's state under
    // its arena locks and returns a struct by value.
    let m = unsafe { libc::mallinfo2() };
    Ok((m.arena + m.hblkhd) as u64)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn glibc_held() -> Result<u64, String> {
    Err("mallinfo2 needs glibc".into())
}

/// Bytes in free chunks of glibc's arenas (`fordblks`): memory malloc holds
/// and may hand out again without growing.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn glibc_free() -> Option<u64> {
    // SAFETY: as in `glibc_held`.
    let m = unsafe { libc::mallinfo2() };
    Some(m.fordblks as u64)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn glibc_free() -> Option<u64> {
    None
}

fn jemalloc_resident() -> Result<u64, String> {
    // Statistics are cached; advancing the epoch refreshes them.
    tikv_jemalloc_ctl::epoch::advance().map_err(|e| format!("jemalloc epoch: {e}"))?;
    // SAFETY: `stats.resident` is a `size_t` mallctl, read as `usize`, and
    // the name is NUL-terminated; an absent statistic (jemalloc built
    // without stats) is an error return, not undefined behaviour.
    let r = unsafe { tikv_jemalloc_ctl::raw::read::<usize>(b"stats.resident\0") };
    r.map(|b| b as u64)
        .map_err(|e| format!("jemalloc stats.resident: {e} (jemalloc built without stats?)"))
}

// mimalloc's C API, linked through the `mimalloc` crate's `libmimalloc-sys`
// (which the `mimalloc` crate does not re-export). The signature is the one
// of `mimalloc.h` (v2 and v3).
unsafe extern "C" {
    fn mi_process_info(
        elapsed_msecs: *mut usize,
        user_msecs: *mut usize,
        system_msecs: *mut usize,
        current_rss: *mut usize,
        peak_rss: *mut usize,
        current_commit: *mut usize,
        peak_commit: *mut usize,
        page_faults: *mut usize,
    );
}

fn mimalloc_commit() -> u64 {
    let mut commit = 0usize;
    let none = std::ptr::null_mut();
    // SAFETY: every out-parameter of mi_process_info is optional (NULL is
    // skipped); `commit` is a valid, writable usize for the call's duration.
    unsafe { mi_process_info(none, none, none, none, none, &mut commit, none, none) };
    commit as u64
}

fn process_rss() -> Result<u64, String> {
    use std::io::Read;
    // A stack buffer and a short path: no heap allocation, so the reading
    // does not disturb the figure it reads.
    let mut buf = [0u8; 128];
    let mut f = std::fs::File::open("/proc/self/statm").map_err(|e| format!("statm: {e}"))?;
    let n = f.read(&mut buf).map_err(|e| format!("statm: {e}"))?;
    let pages: u64 = std::str::from_utf8(&buf[..n])
        .ok()
        .and_then(|s| s.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or("statm: unexpected format")?;
    // SAFETY: sysconf only reads a system constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Ok(pages * u64::try_from(page).unwrap_or(4096))
}

/// Compressed pages kept as plain heap allocations of the allocator `A`.
pub type HeapContestant<A> = ZramFront<HeapObjects<A>>;

impl ZramFront<HeapObjects<System>> {
    /// The system allocator (glibc malloc on Linux), named `system`.
    pub fn system(slots: usize) -> Result<Self, LabError> {
        Self::with_allocator("system", System, MemoryMethod::for_system(), slots)
    }
}

impl ZramFront<HeapObjects<tikv_jemallocator::Jemalloc>> {
    /// jemalloc as a plain (non-global) allocator, named `jemalloc`.
    pub fn jemalloc(slots: usize) -> Result<Self, LabError> {
        Self::with_allocator(
            "jemalloc",
            tikv_jemallocator::Jemalloc,
            MemoryMethod::for_jemalloc(),
            slots,
        )
    }
}

impl ZramFront<HeapObjects<mimalloc::MiMalloc>> {
    /// mimalloc as a plain (non-global) allocator, named `mimalloc`.
    pub fn mimalloc(slots: usize) -> Result<Self, LabError> {
        Self::with_allocator(
            "mimalloc",
            mimalloc::MiMalloc,
            MemoryMethod::MimallocCommit,
            slots,
        )
    }
}

impl<A: GlobalAlloc> ZramFront<HeapObjects<A>> {
    /// A contestant of `slots` pages named `name` that allocates from
    /// `alloc` and measures its memory with `method`. The slot table and
    /// the scratch buffer are allocated (from the global allocator) before
    /// the baseline is taken. Fails on zero slots or an unavailable method.
    pub fn with_allocator(
        name: &str,
        alloc: A,
        method: MemoryMethod,
        slots: usize,
    ) -> Result<Self, LabError> {
        Self::with_allocator_config(name, alloc, method, &PageConfig::default(), slots)
    }

    /// As [`ZramFront::with_allocator`], for pages of `cfg`'s size
    /// compressed with `cfg`'s codec.
    pub fn with_allocator_config(
        name: &str,
        alloc: A,
        method: MemoryMethod,
        cfg: &PageConfig,
        slots: usize,
    ) -> Result<Self, LabError> {
        if slots == 0 {
            return Err(LabError::Usage(format!("{name}: needs at least one slot")));
        }
        let mut front = Parts::new(slots, cfg)?;
        front.free_at_start = match method {
            MemoryMethod::GlibcMallinfo => glibc_free(),
            _ => None,
        };
        // Last, so the baseline is taken after our own tables exist.
        let heap = HeapObjects::new(name, alloc, method)?;
        Ok(front.with_objects(heap))
    }

    /// How the memory figures are measured.
    pub fn memory_method(&self) -> MemoryMethod {
        self.objects().method()
    }

    /// The measured figure when the contestant was made; `Figures::pool`
    /// is the growth from it.
    pub fn baseline_bytes(&self) -> u64 {
        self.objects().baseline()
    }

    /// For the glibc method: bytes in free chunks of malloc's arenas when
    /// the contestant was made (`mallinfo2().fordblks`). The contestant may
    /// fill them without the figure growing, so the figure can fall short
    /// by up to this much.
    pub fn free_at_start(&self) -> Option<u64> {
        self.free_at_start
    }
}

/// One heap allocation per object from a `GlobalAlloc`, memory measured by
/// the allocator's own statistics as growth since creation. The one place
/// the lab allocates from a heap directly: the page-level heap contestants
/// and `zsmem bench pool` keep their objects here too.
pub struct HeapObjects<A: GlobalAlloc> {
    name: String,
    alloc: A,
    method: MemoryMethod,
    baseline: u64,
    /// Live objects' blocks (null when the id is free).
    objects: Vec<(*mut u8, usize)>,
    spare: Vec<u64>,
}

// SAFETY: every block is owned by this value alone (no other reference to
// it exists), and `A: Send + Sync` lets the allocator be used, and blocks be
// freed, from whichever thread holds it.
unsafe impl<A: GlobalAlloc + Send + Sync> Send for HeapObjects<A> {}

impl<A: GlobalAlloc> HeapObjects<A> {
    /// Objects from `alloc`, measured by `method` from now on.
    pub fn new(name: &str, alloc: A, method: MemoryMethod) -> Result<Self, LabError> {
        let baseline = method
            .read()
            .map_err(|e| LabError::Usage(format!("{name}: {e}")))?;
        Ok(HeapObjects {
            name: name.into(),
            alloc,
            method,
            baseline,
            objects: Vec::new(),
            spare: Vec::new(),
        })
    }

    /// The name given at creation.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How memory is measured.
    pub fn method(&self) -> MemoryMethod {
        self.method
    }

    /// The measured figure at creation.
    pub fn baseline(&self) -> u64 {
        self.baseline
    }

    /// Make room for `n` live objects in the id tables, and write it, so
    /// that the tables' pages are resident now and storing up to `n`
    /// objects grows no table.
    pub fn reserve(&mut self, n: usize) {
        self.objects.reserve(n);
        for e in self.objects.spare_capacity_mut() {
            e.write((std::ptr::null_mut(), 0));
        }
        self.spare.reserve(n);
        for e in self.spare.spare_capacity_mut() {
            e.write(0);
        }
    }

    /// Growth of the measured figure since creation.
    pub fn held(&self) -> Result<u64, LabError> {
        let now = self
            .method
            .read()
            .map_err(|e| LabError::Usage(format!("{}: {e}", self.name)))?;
        Ok(now.saturating_sub(self.baseline))
    }

    fn slot(&self, id: u64) -> Result<(*mut u8, usize), LabError> {
        match self.objects.get(id as usize) {
            Some(&(p, len)) if !p.is_null() => Ok((p, len)),
            _ => Err(LabError::Usage(format!(
                "{}: no live object {id}",
                self.name
            ))),
        }
    }

    /// Copy `data` into a new block of exactly its length; returns its id.
    pub fn keep(&mut self, data: &[u8]) -> Result<u64, LabError> {
        if data.is_empty() {
            return Err(LabError::Zsmem(zsmem::Error::ZeroLength));
        }
        let layout =
            Layout::from_size_align(data.len(), 1).map_err(|e| LabError::Usage(e.to_string()))?;
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { self.alloc.alloc(layout) };
        if p.is_null() {
            return Err(LabError::Zsmem(zsmem::Error::OsOutOfMemory {
                bytes: data.len(),
                reason: format!("{} returned null", self.name),
            }));
        }
        // SAFETY: `p` holds `data.len()` fresh bytes of our own, disjoint
        // from `data`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        Ok(match self.spare.pop() {
            Some(id) => {
                self.objects[id as usize] = (p, data.len());
                id
            }
            None => {
                self.objects.push((p, data.len()));
                (self.objects.len() - 1) as u64
            }
        })
    }

    /// Call `f` with object `id`'s bytes in place.
    pub fn with_object<R>(&self, id: u64, f: impl FnOnce(&[u8]) -> R) -> Result<R, LabError> {
        let (p, len) = self.slot(id)?;
        // SAFETY: `p` is a live block of `len` bytes made by `keep`; nothing
        // writes it while the shared borrow of `self` lasts.
        Ok(f(unsafe { std::slice::from_raw_parts(p, len) }))
    }

    /// Free object `id`.
    pub fn free_object(&mut self, id: u64) -> Result<(), LabError> {
        let (p, len) = self.slot(id)?;
        self.objects[id as usize] = (std::ptr::null_mut(), 0);
        // SAFETY: made by `keep` from the same allocator with this layout,
        // and just unlisted, so it is freed once.
        unsafe {
            self.alloc
                .dealloc(p, Layout::from_size_align(len, 1).expect("valid layout"))
        };
        self.spare.push(id);
        Ok(())
    }
}

/// Whether contestant `name` is a malloc baseline (a heap allocation an
/// object, measured by its heap's growth).
pub fn is_malloc_baseline(name: &str) -> bool {
    matches!(name, "system" | "jemalloc" | "mimalloc")
}

/// glibc malloc (Rust's global allocator here).
pub fn system_objects() -> Result<HeapObjects<System>, LabError> {
    HeapObjects::new("system", System, MemoryMethod::for_system())
}

/// jemalloc, not the global allocator, so its statistics are ours alone.
pub fn jemalloc_objects() -> Result<HeapObjects<Jemalloc>, LabError> {
    HeapObjects::new("jemalloc", Jemalloc, MemoryMethod::for_jemalloc())
}

/// mimalloc, not the global allocator either.
pub fn mimalloc_objects() -> Result<HeapObjects<MiMalloc>, LabError> {
    HeapObjects::new("mimalloc", MiMalloc, MemoryMethod::MimallocCommit)
}

impl<A: GlobalAlloc> ObjectContestant for HeapObjects<A> {
    fn name(&self) -> &str {
        &self.name
    }
    fn config(&self) -> String {
        format!(
            "one heap allocation per object; memory: {}",
            self.method.describe()
        )
    }
    fn alloc(&mut self, data: &[u8]) -> Result<u64, LabError> {
        self.keep(data)
    }
    fn read(&mut self, id: u64, buf: &mut Vec<u8>) -> Result<(), LabError> {
        self.with_object(id, |b| {
            buf.clear();
            buf.extend_from_slice(b);
        })
    }
    fn free(&mut self, id: u64) -> Result<(), LabError> {
        self.free_object(id)
    }
    fn memory(&mut self) -> Result<ObjectMemory, LabError> {
        Ok(ObjectMemory {
            held: self.held()?,
            meta: 0,
            returning: 0,
        })
    }
}

impl<A: GlobalAlloc> Drop for HeapObjects<A> {
    fn drop(&mut self) {
        for id in 0..self.objects.len() as u64 {
            if self.slot(id).is_ok() {
                let _ = self.free_object(id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contestants::PageContestant;
    use crate::contestants::zram_front::HUGE_CLASS_SIZE;
    use crate::corpus::{PAGE_SIZE, Page};

    fn text(seed: u8) -> Box<Page> {
        let mut p = Box::new([0u8; PAGE_SIZE]);
        let s = format!("static int probe_{seed}(struct device *dev) {{ return -ENODEV; }}\n");
        for (d, b) in p.iter_mut().zip(s.bytes().cycle()) {
            *d = b;
        }
        p[0] = seed;
        p
    }

    fn noise(seed: u64) -> Box<Page> {
        let mut x = seed | 1 << 40;
        let mut p = Box::new([0u8; PAGE_SIZE]);
        for b in p.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = (x >> 24) as u8;
        }
        p
    }

    #[test]
    fn pages_round_trip_and_are_counted() {
        let mut c = HeapContestant::with_allocator(
            "mimalloc",
            mimalloc::MiMalloc,
            MemoryMethod::MimallocCommit,
            8,
        )
        .unwrap();
        c.store(0, &text(1)).unwrap();
        c.store(1, &noise(2)).unwrap();
        c.store(2, &[7u8; PAGE_SIZE]).unwrap();
        let f = c.figures().unwrap();
        assert_eq!(f.orig, 3 * 4096);
        assert_eq!((f.same_pages, f.huge_pages), (1, 1));
        assert!(f.compr > 4096 && f.compr < 4096 + HUGE_CLASS_SIZE as u64);
        let mut out = Box::new([0u8; PAGE_SIZE]);
        for (slot, want) in [(0, text(1)), (1, noise(2)), (2, Box::new([7u8; PAGE_SIZE]))] {
            c.load(slot, &mut out[..]).unwrap();
            assert!(out[..] == want[..], "slot {slot}");
        }
        c.discard(0, 8).unwrap();
        let f = c.figures().unwrap();
        assert_eq!((f.orig, f.compr, f.same_pages, f.huge_pages), (0, 0, 0, 0));
        assert!(c.store(8, &text(1)).is_err());
        assert!(c.discard(7, 2).is_err());
        assert!(c.discard(u64::MAX, 2).is_err());
        assert!(HeapContestant::system(0).is_err());
    }
}
