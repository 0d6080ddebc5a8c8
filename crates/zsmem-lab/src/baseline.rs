//! The malloc baselines: what a user would do without zsmem; and
//! [`ZramFront`], zram's page handling in front of any object store, which
//! the baselines and the peers (`crate::peers`) share.
//!
//! Each page is handled exactly as zram (and zsmem's `PageStore`) handles
//! it, so the comparison is about the allocator alone: a same-filled page
//! (every 8-byte word equal) keeps only its word and allocates nothing;
//! any other page is compressed with lz4 (`zsmem::Codec::Lz4`, the codec the
//! other contestants use) into at most [`HUGE_CLASS_SIZE`] bytes, and a page
//! that does not compress under that is kept raw (4096 bytes, a "huge"
//! page). The compressed bytes are then kept as one plain heap allocation of
//! exactly their length (`Layout::from_size_align(len, 1)`) from a general
//! purpose allocator, and a slot table remembers where. Nothing is ever
//! compacted: [`PageContestant::compact`] does nothing, because a heap
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
//! measures it after the allocator's release ([`crate::forked`]), which
//! sees what the release gives back and is never below the data.

use std::alloc::{GlobalAlloc, System};

use crate::allin::{self, Term};
use crate::contestant::{Figures, LabError, PageContestant};
use crate::corpus::{PAGE_SIZE, Page};
use crate::objects::{HeapObjects, ObjectContestant};
use zsmem::store::same_filled;

/// The compressed size from which a page is stored raw: the kernel's
/// `huge_class_size` for 4 KiB pages and zsmalloc chain size 8 (the largest
/// non-huge class, 3632 bytes, less zsmalloc's 8-byte in-object handle, plus
/// one). A page whose lz4 output would be this long or longer is "huge".
pub const HUGE_CLASS_SIZE: usize = 3625;

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

/// What a slot holds.
#[derive(Clone, Copy, Debug, Default)]
enum Entry {
    #[default]
    Empty,
    /// A same-filled page: the word, no allocation.
    Same(u64),
    /// `len` bytes of lz4 output (or the raw page if `huge`), object `id`
    /// of the object store.
    Object { id: u64, len: u32, huge: bool },
}

/// zram's page handling in front of any object store `S`: same-filled
/// pages kept as their word, other pages compressed with lz4 and kept as
/// one object each, raw (4096 bytes, "huge") when the compressed size would
/// be [`HUGE_CLASS_SIZE`] or more. The malloc baselines
/// ([`HeapContestant`]) and the peers (`crate::peers`) are this front on
/// their object stores, so the page handling is the same code for all.
/// Memory figures are the store's: `pool` is `ObjectMemory::held`, `meta`
/// its metadata, `used` the two together; `compact` asks the store.
pub struct ZramFront<S: ObjectContestant> {
    /// The objects, and the memory they cost.
    objects: S,
    /// For glibc: bytes free in its arenas at creation, which this
    /// contestant may reuse without the figure growing.
    free_at_start: Option<u64>,
    slots: Vec<Entry>,
    scratch: Box<Page>,
    /// An object read back, before decompression.
    buf: Vec<u8>,
    pages_stored: u64,
    compr_bytes: u64,
    same_pages: u64,
    huge_pages: u64,
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
        if slots == 0 {
            return Err(LabError::Usage(format!("{name}: needs at least one slot")));
        }
        let mut front = Parts::new(slots);
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
        self.objects.method()
    }

    /// The measured figure when the contestant was made; `Figures::pool`
    /// is the growth from it.
    pub fn baseline_bytes(&self) -> u64 {
        self.objects.baseline()
    }

    /// For the glibc method: bytes in free chunks of malloc's arenas when
    /// the contestant was made (`mallinfo2().fordblks`). The contestant may
    /// fill them without the figure growing, so the figure can fall short
    /// by up to this much.
    pub fn free_at_start(&self) -> Option<u64> {
        self.free_at_start
    }
}

/// A front's tables before its store exists.
struct Parts {
    slots: Vec<Entry>,
    scratch: Box<Page>,
    buf: Vec<u8>,
    free_at_start: Option<u64>,
}

impl Parts {
    fn new(slots: usize) -> Parts {
        Parts {
            slots: vec![Entry::Empty; slots],
            scratch: Box::new([0u8; PAGE_SIZE]),
            buf: Vec::with_capacity(PAGE_SIZE),
            free_at_start: None,
        }
    }

    fn with_objects<S: ObjectContestant>(self, objects: S) -> ZramFront<S> {
        ZramFront {
            objects,
            free_at_start: self.free_at_start,
            slots: self.slots,
            scratch: self.scratch,
            buf: self.buf,
            pages_stored: 0,
            compr_bytes: 0,
            same_pages: 0,
            huge_pages: 0,
        }
    }
}

impl<S: ObjectContestant> ZramFront<S> {
    /// `slots` pages kept in `objects`; fails on zero slots.
    pub fn new(objects: S, slots: usize) -> Result<Self, LabError> {
        if slots == 0 {
            return Err(LabError::Usage(format!(
                "{}: needs at least one slot",
                objects.name()
            )));
        }
        Ok(Parts::new(slots).with_objects(objects))
    }

    /// The object store.
    pub fn objects(&self) -> &S {
        &self.objects
    }

    /// Number of slots.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Bytes of the per-slot table, the front end's own cost, counted as
    /// zsmem's `PageStore` holds its table: 64-slot chunks, present only
    /// while one of their slots holds a page, plus a pointer per chunk. The
    /// front keeps a dense table, allocated before the run so that a malloc
    /// baseline's heap figure never includes it; counting it as dense would
    /// charge the peers for the lab's choice, not theirs.
    pub fn slot_table_bytes(&self) -> u64 {
        const CHUNK: usize = 64;
        let present = self
            .slots
            .chunks(CHUNK)
            .filter(|c| c.iter().any(|e| !matches!(e, Entry::Empty)))
            .count();
        (present * CHUNK * std::mem::size_of::<Entry>()
            + self.slots.len().div_ceil(CHUNK) * std::mem::size_of::<usize>()) as u64
    }

    fn index(&self, slot: u64) -> Result<usize, LabError> {
        usize::try_from(slot)
            .ok()
            .filter(|&i| i < self.slots.len())
            .ok_or(LabError::Zsmem(zsmem::Error::SlotOutOfRange {
                index: usize::try_from(slot).unwrap_or(usize::MAX),
                slots: self.slots.len(),
            }))
    }

    /// Compress `page` and keep the result as one object.
    fn allocate(&mut self, page: &Page) -> Result<Entry, LabError> {
        let limit = HUGE_CLASS_SIZE.min(PAGE_SIZE);
        let (bytes, huge): (&[u8], bool) =
            match zsmem::Codec::Lz4.compress(page, &mut self.scratch[..limit]) {
                Some(n) if n > 0 && n < HUGE_CLASS_SIZE => (&self.scratch[..n], false),
                _ => (page, true),
            };
        let len = bytes.len() as u32;
        let id = self.objects.alloc(bytes)?;
        Ok(Entry::Object { id, len, huge })
    }

    fn account(&mut self, e: Entry, add: bool) {
        let step = |c: &mut u64, v: u64| {
            if add {
                *c += v;
            } else {
                *c -= v;
            }
        };
        match e {
            Entry::Empty => return,
            Entry::Same(_) => step(&mut self.same_pages, 1),
            Entry::Object { len, huge, .. } => {
                step(&mut self.compr_bytes, u64::from(len));
                if huge {
                    step(&mut self.huge_pages, 1);
                }
            }
        }
        step(&mut self.pages_stored, 1);
    }

    /// Uncount and free what a slot held.
    fn release(&mut self, e: Entry) {
        self.account(e, false);
        if let Entry::Object { id, .. } = e {
            // The slot owned this object alone; freeing it cannot fail.
            let freed = self.objects.free(id);
            debug_assert!(freed.is_ok(), "{freed:?}");
        }
    }
}

impl<S: ObjectContestant> PageContestant for ZramFront<S> {
    fn name(&self) -> &str {
        self.objects.name()
    }

    fn config(&self) -> String {
        let free = match self.free_at_start {
            Some(b) => format!(
                "; {} KiB were free in malloc's arenas at creation (their reuse is not counted)",
                b / 1024
            ),
            None => String::new(),
        };
        format!(
            "{}: zram's pages (same-filled as a word, lz4, raw from {} B), one object per page; {}{free}",
            self.objects.name(),
            HUGE_CLASS_SIZE,
            self.objects.config()
        )
    }

    fn store(&mut self, slot: u64, page: &Page) -> Result<(), LabError> {
        let i = self.index(slot)?;
        let new = match same_filled(page) {
            Some(word) => Entry::Same(word),
            None => self.allocate(page)?,
        };
        let old = std::mem::replace(&mut self.slots[i], new);
        self.account(new, true);
        self.release(old);
        Ok(())
    }

    fn load(&mut self, slot: u64, buf: &mut Page) -> Result<(), LabError> {
        let i = self.index(slot)?;
        match self.slots[i] {
            Entry::Empty => buf.fill(0),
            Entry::Same(word) => {
                for c in buf.chunks_exact_mut(8) {
                    c.copy_from_slice(&word.to_ne_bytes());
                }
            }
            Entry::Object { id, huge, .. } => {
                self.objects.read(id, &mut self.buf)?;
                if huge {
                    if self.buf.len() != PAGE_SIZE {
                        return Err(LabError::Mismatch {
                            contestant: self.objects.name().to_string(),
                            slot,
                        });
                    }
                    buf.copy_from_slice(&self.buf);
                } else {
                    zsmem::Codec::Lz4.decompress(&self.buf, buf)?;
                }
            }
        }
        Ok(())
    }

    fn discard(&mut self, slot: u64, pages: u64) -> Result<(), LabError> {
        let start = self.index(slot)?;
        let end = usize::try_from(pages)
            .ok()
            .and_then(|p| start.checked_add(p))
            .filter(|&e| e <= self.slots.len())
            .ok_or(LabError::Zsmem(zsmem::Error::SlotOutOfRange {
                index: usize::try_from(slot.saturating_add(pages).saturating_sub(1))
                    .unwrap_or(usize::MAX),
                slots: self.slots.len(),
            }))?;
        for i in start..end {
            let old = std::mem::take(&mut self.slots[i]);
            self.release(old);
        }
        Ok(())
    }

    fn figures(&mut self) -> Result<Figures, LabError> {
        let m = self.objects.memory()?;
        let terms = vec![
            Term {
                name: allin::POOL_PAGES,
                bytes: m.held,
            },
            Term {
                name: allin::ALLOCATOR_METADATA,
                bytes: m.meta,
            },
            Term {
                name: allin::SLOT_TABLE,
                bytes: self.slot_table_bytes(),
            },
        ];
        let f = Figures {
            orig: self.pages_stored * PAGE_SIZE as u64,
            compr: self.compr_bytes,
            pool: m.held,
            meta: m.meta,
            waste: None,
            same_pages: self.same_pages,
            huge_pages: self.huge_pages,
            pages_compacted: self.objects.pages_compacted(),
            compaction: None,
            ..Figures::default()
        };
        Ok(f.with_terms(terms))
    }

    /// Whatever the store can do (a heap cannot move its blocks: nothing).
    fn compact(&mut self) -> Result<(), LabError> {
        self.objects.compact()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn huge_class_size_is_the_kernel_pools() {
        let pool = zsmem::Pool::new(zsmem::PoolConfig::kernel()).unwrap();
        assert_eq!(pool.huge_class_size(), HUGE_CLASS_SIZE);
    }

    #[test]
    fn same_filled_is_per_8_byte_word() {
        let mut p = [0u8; PAGE_SIZE];
        assert_eq!(same_filled(&p), Some(0));
        for (i, b) in p.iter_mut().enumerate() {
            *b = (i % 8) as u8;
        }
        assert!(same_filled(&p).is_some());
        p[4095] ^= 1;
        assert_eq!(same_filled(&p), None);
    }

    #[test]
    fn entries_are_two_words() {
        assert_eq!(std::mem::size_of::<Entry>(), 16);
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
            c.load(slot, &mut out).unwrap();
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
