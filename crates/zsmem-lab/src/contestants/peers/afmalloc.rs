//! afmalloc (reference 004, 2014): an object as the concatenation of
//! power-of-two chunks from a slab allocator.
//!
//! - **level**: how many chunks an object takes. While the remaining length
//!   is not a power of two and rounding it up would waste more than the
//!   smallest chunk (32 bytes), the largest power of two under it is split
//!   off; the rest is one last chunk, rounded up to a power of two (at least
//!   32). At most seven chunks: 400 = 256 + 128 + 16, the 16 in a 32-byte
//!   chunk.
//! - **metadata entry**: for more than one chunk, a slab object of
//!   `8 + 8 * level` bytes (rounded up to its cache) holding the level and
//!   the chunks' references; the handle names the entry. Kept in the slab,
//!   as the kernel kept it in kmalloc memory, so it is in the pool figure.
//! - **direct**: a one-chunk object (a power of two, or one within 32 bytes
//!   of the next) is one chunk, and its handle is tagged as direct (the
//!   kernel set the pointer's low bit; here bit 62 of the handle), so no
//!   entry is needed. When the entry plus the pieces would take as much as
//!   the rounded-up single chunk, the object is stored directly too.
//! - **load and store** copy piecewise: no chunk is mapped as a whole.
//!
//! Chunks and entries come from [`SlabAllocator`]: caches of 32 bytes to a
//! page (the kernel used kmalloc, whose 96- and 192-byte caches this
//! allocator does not have), one-page slabs, empty slabs returned at once.
//!
//! **Compaction** (optional: [`Afmalloc::new`]`(true)`, the contestant
//! `afmalloc-compact`; the RFC had none; the idea is Joonsoo Kim's reply in
//! the thread), on `compact()` and automatically after a free once more
//! than an eighth of the slabs' bytes (and at least 256 KiB) are free and
//! 256 KiB were freed since the last run: take every chunk and
//! entry that sits in a partly used slab, in address order; copy them out
//! to a buffer; free them all, so their slabs empty and go back to the OS;
//! allocate them again, which fills slabs densely; copy back and fix the
//! references (the handle table's, and the entries' own).

use std::collections::HashMap;

use zsmem::os::OsPages;

use super::slab::{ChunkRef, SlabAllocator};
use super::{HandleTable, PeerAllocator, bad_handle, check_len};
use crate::contestants::LabError;

/// The smallest chunk.
pub const MIN_CHUNK: usize = 32;
/// Most chunks per object.
pub const MAX_LEVEL: usize = 7;
/// Handle tag of a direct object.
const DIRECT_TAG: u64 = 1 << 62;

fn round_down_pow2(n: usize) -> usize {
    1 << (usize::BITS - 1 - n.leading_zeros())
}

/// Chunks for an object of `len` bytes (the RFC's `calculate_level`).
pub fn level(len: usize) -> usize {
    let mut len = len;
    let mut level = 1;
    if len > MIN_CHUNK {
        loop {
            let down = round_down_pow2(len);
            if down >= len || len.next_power_of_two() - len <= MIN_CHUNK {
                break;
            }
            len -= down;
            level += 1;
        }
    }
    level.min(MAX_LEVEL)
}

/// The chunk sizes of an object of `len` bytes in `level` pieces: powers
/// of two rounded down, the last one rounded up (at least [`MIN_CHUNK`]).
pub fn pieces(len: usize, level: usize) -> Vec<usize> {
    let mut rest = len;
    let mut v = Vec::with_capacity(level);
    for _ in 1..level {
        let d = round_down_pow2(rest);
        v.push(d);
        rest -= d;
    }
    v.push(rest.next_power_of_two().max(MIN_CHUNK));
    v
}

/// Size of the metadata entry for `level` chunks.
pub fn entry_size(level: usize) -> usize {
    8 + 8 * level
}

/// How an object of `len` bytes is stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// One chunk of this size.
    Direct(usize),
    /// A metadata entry (from the cache of this size) and these chunks.
    Pieces {
        /// The entry's slab object size.
        entry: usize,
        /// The chunks.
        chunks: Vec<usize>,
    },
}

/// How an object of `len` bytes is stored.
pub fn plan(len: usize) -> Plan {
    let direct = Plan::Direct(len.next_power_of_two().max(MIN_CHUNK));
    let l = level(len);
    if l == 1 {
        return direct;
    }
    let entry = entry_size(l).next_power_of_two().max(MIN_CHUNK);
    let chunks = pieces(len, l);
    if entry + chunks.iter().sum::<usize>() >= len.next_power_of_two() {
        return direct;
    }
    Plan::Pieces { entry, chunks }
}

#[derive(Clone, Copy, Debug)]
struct Object {
    /// The chunk (direct) or the metadata entry.
    at: ChunkRef,
    len: u32,
    direct: bool,
}

/// What compaction did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CompactionStats {
    /// Compaction runs.
    pub runs: u64,
    /// Chunks and entries moved.
    pub moved: u64,
    /// Bytes copied out and back (each counted once).
    pub bytes_copied: u64,
    /// Pages given back.
    pub pages_freed: u64,
}

/// An afmalloc pool.
///
/// ```
/// use zsmem_lab::contestants::peers::{PeerAllocator, afmalloc::Afmalloc};
/// let mut a = Afmalloc::new(false).unwrap();
/// let data: Vec<u8> = (0..400).map(|i| i as u8).collect();
/// let h = a.alloc(&data).unwrap(); // 256 + 128 + 32-byte chunks and an entry
/// let mut buf = Vec::new();
/// a.read(h, &mut buf).unwrap();
/// assert_eq!(buf, data);
/// a.free(h).unwrap();
/// assert_eq!(a.pages().held_pages(), 0);
/// ```
pub struct Afmalloc {
    slab: SlabAllocator,
    handles: HandleTable<Object>,
    compaction: bool,
    stats: CompactionStats,
    /// Bytes freed since the last compaction.
    freed_since: usize,
}

/// Automatic compaction runs when the slabs' free bytes pass both this
/// share of the held bytes (1/8) ...
const AUTO_FREE_SHARE: usize = 8;
/// ... and this many bytes, and this many bytes were freed since the last
/// run (so a pool that cannot do better is not compacted again and again).
const AUTO_MIN_BYTES: usize = 256 << 10;

impl Afmalloc {
    /// An empty pool on a page source of its own; `compaction` makes
    /// `compact()` run the thread's compaction.
    pub fn new(compaction: bool) -> Result<Self, LabError> {
        Self::with_page_size(compaction, crate::corpus::PAGE_SIZE)
    }

    /// As [`Afmalloc::new`], on pages of `page_size` bytes: one-page slabs
    /// of that size, chunks up to a page.
    pub fn with_page_size(compaction: bool, page_size: usize) -> Result<Self, LabError> {
        Ok(Afmalloc {
            slab: SlabAllocator::new(super::page_source_of(page_size)?),
            handles: HandleTable::new(),
            compaction,
            stats: CompactionStats::default(),
            freed_since: 0,
        })
    }

    /// The slab allocator underneath.
    pub fn slab(&self) -> &SlabAllocator {
        &self.slab
    }

    /// What compaction did so far.
    pub fn compaction_stats(&self) -> CompactionStats {
        self.stats
    }

    fn object(&self, handle: u64) -> Result<Object, LabError> {
        self.handles
            .get(handle & !DIRECT_TAG)
            .copied()
            .filter(|o| o.direct == (handle & DIRECT_TAG != 0))
            .ok_or_else(|| bad_handle("afmalloc", handle))
    }

    /// The chunk references held by an entry.
    fn entry_refs(&self, entry: ChunkRef) -> Result<Vec<ChunkRef>, LabError> {
        let b = self.slab.bytes(entry)?;
        let level = b[0] as usize;
        Ok((0..level)
            .map(|i| {
                let at = 8 + 8 * i;
                ChunkRef(u64::from_ne_bytes(
                    b[at..at + 8].try_into().expect("8 bytes"),
                ))
            })
            .collect())
    }

    fn alloc_size(&mut self, size: usize) -> Result<ChunkRef, LabError> {
        let c = self
            .slab
            .cache_for(size)
            .ok_or_else(|| LabError::Usage(format!("afmalloc: no cache for {size} bytes")))?;
        self.slab.alloc(c)
    }

    /// Free bytes in the slabs: held less objects in use.
    pub fn slab_free_bytes(&self) -> usize {
        let held = self.slab.pages().held_pages() * self.slab.pages().page_size();
        let used: usize = self
            .slab
            .slabinfo()
            .iter()
            .map(|i| i.active_objs * i.objsize)
            .sum();
        held - used
    }

    fn auto_compact(&mut self) -> Result<(), LabError> {
        if !self.compaction || self.freed_since < AUTO_MIN_BYTES {
            return Ok(());
        }
        let held = self.slab.pages().held_pages() * self.slab.pages().page_size();
        let free = self.slab_free_bytes();
        if free >= AUTO_MIN_BYTES && free * AUTO_FREE_SHARE >= held {
            self.compact_now()?;
        }
        Ok(())
    }

    /// The thread's compaction; returns pages given back.
    pub fn compact_now(&mut self) -> Result<u64, LabError> {
        enum Owner {
            Handle(u64),
            Piece { entry: ChunkRef, i: usize },
        }
        let before = self.slab.pages().held_pages();
        let mut movers: Vec<(usize, ChunkRef, Owner)> = Vec::new();
        for (h, o) in self.handles.iter() {
            if self.slab.in_partial_slab(o.at)? {
                movers.push((self.slab.addr(o.at)?, o.at, Owner::Handle(h)));
            }
            if !o.direct {
                for (i, r) in self.entry_refs(o.at)?.into_iter().enumerate() {
                    if self.slab.in_partial_slab(r)? {
                        movers.push((self.slab.addr(r)?, r, Owner::Piece { entry: o.at, i }));
                    }
                }
            }
        }
        movers.sort_unstable_by_key(|m| m.0);
        // Copy out in address order, then free all: whole slabs empty.
        let mut saved: Vec<(usize, Vec<u8>)> = Vec::with_capacity(movers.len());
        let mut index: HashMap<ChunkRef, usize> = HashMap::with_capacity(movers.len());
        for (k, (_, r, _)) in movers.iter().enumerate() {
            saved.push((self.slab.cache_of(*r)?, self.slab.bytes(*r)?.to_vec()));
            index.insert(*r, k);
        }
        for (_, r, _) in &movers {
            self.slab.free(*r)?;
        }
        // Allocate again (filling the partly used slabs first, then new
        // dense ones) and fix the references.
        let mut new = Vec::with_capacity(movers.len());
        for (c, _) in &saved {
            new.push(self.slab.alloc(*c)?);
        }
        for (k, (_, _, owner)) in movers.iter().enumerate() {
            if let Owner::Piece { entry, i } = owner {
                let at = 8 + 8 * i;
                let bytes = new[k].0.to_ne_bytes();
                match index.get(entry) {
                    Some(&e) => saved[e].1[at..at + 8].copy_from_slice(&bytes),
                    None => self.slab.bytes_mut(*entry)?[at..at + 8].copy_from_slice(&bytes),
                }
            }
        }
        for (k, (_, data)) in saved.iter().enumerate() {
            self.slab.bytes_mut(new[k])?.copy_from_slice(data);
            self.stats.bytes_copied += data.len() as u64;
            if let Owner::Handle(h) = movers[k].2 {
                self.handles.get_mut(h).expect("live handle").at = new[k];
            }
        }
        let freed = before.saturating_sub(self.slab.pages().held_pages()) as u64;
        self.freed_since = 0;
        self.stats.runs += 1;
        self.stats.moved += movers.len() as u64;
        self.stats.pages_freed += freed;
        Ok(freed)
    }
}

impl PeerAllocator for Afmalloc {
    fn name(&self) -> &str {
        if self.compaction {
            "afmalloc-compact"
        } else {
            "afmalloc"
        }
    }

    fn config(&self) -> String {
        format!(
            "afmalloc: up to {MAX_LEVEL} power-of-two chunks of {MIN_CHUNK}..{} B per object from a slab allocator (one-page slabs, free stacks), metadata entries in the slab{}",
            self.slab.pages().page_size(),
            if self.compaction {
                "; compaction (on compact(), and automatically when over 1/8 of the slabs' bytes are free) copies out the chunks of partly used slabs in address order, frees and reallocates them"
            } else {
                "; no compaction"
            }
        )
    }

    fn max_size(&self) -> usize {
        self.slab.pages().page_size()
    }

    fn alloc(&mut self, data: &[u8]) -> Result<u64, LabError> {
        check_len("afmalloc", data.len(), self.max_size())?;
        let (at, direct) = match plan(data.len()) {
            Plan::Direct(size) => {
                let r = self.alloc_size(size)?;
                self.slab.bytes_mut(r)?[..data.len()].copy_from_slice(data);
                (r, true)
            }
            Plan::Pieces { entry, chunks } => {
                let mut refs = Vec::with_capacity(chunks.len());
                let mut rest = data;
                for &size in &chunks {
                    let r = match self.alloc_size(size) {
                        Ok(r) => r,
                        Err(e) => {
                            for r in refs {
                                self.slab.free(r)?;
                            }
                            return Err(e);
                        }
                    };
                    let n = size.min(rest.len());
                    self.slab.bytes_mut(r)?[..n].copy_from_slice(&rest[..n]);
                    rest = &rest[n..];
                    refs.push(r);
                }
                let e = self.alloc_size(entry)?;
                let b = self.slab.bytes_mut(e)?;
                b[0] = refs.len() as u8;
                for (i, r) in refs.iter().enumerate() {
                    b[8 + 8 * i..16 + 8 * i].copy_from_slice(&r.0.to_ne_bytes());
                }
                (e, false)
            }
        };
        let h = self.handles.insert(Object {
            at,
            len: data.len() as u32,
            direct,
        });
        Ok(if direct { h | DIRECT_TAG } else { h })
    }

    fn read(&self, handle: u64, buf: &mut Vec<u8>) -> Result<(), LabError> {
        let o = self.object(handle)?;
        let len = o.len as usize;
        buf.clear();
        if o.direct {
            buf.extend_from_slice(&self.slab.bytes(o.at)?[..len]);
            return Ok(());
        }
        for r in self.entry_refs(o.at)? {
            let b = self.slab.bytes(r)?;
            let n = b.len().min(len - buf.len());
            buf.extend_from_slice(&b[..n]);
        }
        Ok(())
    }

    fn free(&mut self, handle: u64) -> Result<(), LabError> {
        let o = self.object(handle)?;
        self.handles.remove(handle & !DIRECT_TAG);
        if !o.direct {
            for r in self.entry_refs(o.at)? {
                self.slab.free(r)?;
            }
        }
        self.slab.free(o.at)?;
        self.freed_since += o.len as usize;
        self.auto_compact()
    }

    fn pages(&self) -> &OsPages {
        self.slab.pages()
    }

    fn meta_bytes(&self) -> u64 {
        self.slab.meta_bytes() + self.handles.meta_bytes()
    }

    fn compact(&mut self) -> Result<u64, LabError> {
        if self.compaction {
            self.compact_now()
        } else {
            Ok(0)
        }
    }

    fn pages_compacted(&self) -> u64 {
        self.stats.pages_freed
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.slab.check_invariants()?;
        let mut objs = 0usize;
        for (_, o) in self.handles.iter() {
            objs += 1;
            let len = o.len as usize;
            match plan(len) {
                Plan::Direct(size) => {
                    if !o.direct || self.slab.bytes(o.at).map_err(|e| e.to_string())?.len() != size
                    {
                        return Err(format!("afmalloc: direct object of {len} B misplaced"));
                    }
                }
                Plan::Pieces { chunks, .. } => {
                    let refs = self.entry_refs(o.at).map_err(|e| e.to_string())?;
                    let sizes: Vec<usize> = refs
                        .iter()
                        .map(|r| self.slab.bytes(*r).map(<[u8]>::len).unwrap_or(0))
                        .collect();
                    if o.direct || sizes != chunks {
                        return Err(format!("afmalloc: {len} B in {sizes:?}, want {chunks:?}"));
                    }
                    objs += refs.len();
                }
            }
        }
        let active: usize = self.slab.slabinfo().iter().map(|i| i.active_objs).sum();
        if active != objs {
            return Err(format!(
                "afmalloc: {objs} slab objects referenced, {active} in use"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decomposition() {
        assert_eq!(level(400), 3);
        assert_eq!(pieces(400, 3), [256, 128, 32], "400 = 256 + 128 + 16");
        assert_eq!(
            plan(400),
            Plan::Pieces {
                entry: 32,
                chunks: vec![256, 128, 32]
            }
        );
        // Powers of two and sizes within 32 bytes of one are direct.
        assert_eq!(plan(1024), Plan::Direct(1024));
        assert_eq!(plan(1000), Plan::Direct(1024));
        assert_eq!(plan(20), Plan::Direct(32));
        // At most seven pieces; the last one rounds up.
        assert_eq!(level(4095), 1, "within 32 bytes of 4096: direct");
        assert_eq!(level(4033), 7);
        assert_eq!(pieces(4033, 7), [2048, 1024, 512, 256, 128, 64, 32]);
        assert!((1..=4096).all(|n| level(n) <= MAX_LEVEL));
        // An entry plus pieces that would not beat one chunk: direct.
        // 80 = 64 + 16 -> 64 + 32 chunks + a 32-byte entry = 128 >= 128.
        assert_eq!(level(80), 2);
        assert_eq!(plan(80), Plan::Direct(128));
        assert_eq!(
            plan(2100),
            Plan::Pieces {
                entry: 32,
                chunks: vec![2048, 64]
            }
        );
    }

    #[test]
    fn piecewise_copies_round_trip_and_tags_are_checked() {
        let mut a = Afmalloc::new(false).unwrap();
        let mut hs = Vec::new();
        for len in [1, 31, 32, 33, 97, 400, 1000, 1500, 2100, 3000, 4095, 4096] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            hs.push((a.alloc(&data).unwrap(), data));
        }
        a.check_invariants().unwrap();
        let mut buf = Vec::new();
        for (h, d) in &hs {
            a.read(*h, &mut buf).unwrap();
            assert_eq!(&buf, d);
            assert!(a.read(*h ^ DIRECT_TAG, &mut buf).is_err(), "a forged tag");
        }
        for (h, _) in &hs {
            a.free(*h).unwrap();
            assert!(a.free(*h).is_err());
        }
        assert_eq!(a.pages().held_pages(), 0);
    }

    /// Fill, free three of every four, compact; `(held pages, pool)`.
    fn sparse(compaction: bool) -> (usize, Afmalloc, Vec<(u64, Vec<u8>)>) {
        let mut a = Afmalloc::new(compaction).unwrap();
        let hs: Vec<(u64, Vec<u8>)> = (0..2000usize)
            .map(|i| {
                let len = 100 + (i * 37) % 1900;
                let d: Vec<u8> = (0..len).map(|j| (i ^ j) as u8).collect();
                (a.alloc(&d).unwrap(), d)
            })
            .collect();
        let mut keep = Vec::new();
        for (k, x) in hs.into_iter().enumerate() {
            if k % 4 == 0 {
                keep.push(x);
            } else {
                a.free(x.0).unwrap();
            }
        }
        a.compact().unwrap();
        (a.pages().held_pages(), a, keep)
    }

    #[test]
    fn compaction_empties_sparse_slabs_and_keeps_bytes() {
        let (plain, _, _) = sparse(false);
        let (compacted, a, keep) = sparse(true);
        assert!(compacted * 4 < plain * 3, "{plain} -> {compacted}");
        a.check_invariants().unwrap();
        let mut buf = Vec::new();
        for (h, d) in &keep {
            a.read(*h, &mut buf).unwrap();
            assert_eq!(&buf, d);
        }
        let s = a.compaction_stats();
        assert!(s.runs >= 1 && s.moved > 0 && s.bytes_copied > 0, "{s:?}");
        assert_eq!(a.pages_compacted(), s.pages_freed);
        assert!(s.pages_freed as usize >= plain - compacted);
    }
}
