//! A SLAB-style slab allocator: the chunk source of [`afmalloc`](super::afmalloc),
//! and a module of its own for anything else that wants one.
//!
//! - **cache**: objects of one size, a power of two from 32 bytes to the
//!   page size (`size-32` .. `size-4096`).
//! - **slab**: one page (objects larger than a page would take several) cut
//!   into `objperslab` equal objects.
//! - **free stack**: each slab's free objects are kept as a stack of object
//!   indices (the management of reference 003): an array `freelist` of
//!   `objperslab` indices and a count `active` of objects in use; the next
//!   free object is `freelist[active]` (take it and increment), and a freed
//!   object's index is written at `freelist[active - 1]` after the
//!   decrement. Allocation and free touch one array entry next to the last
//!   one touched, never a random position. For objects under 512 bytes the
//!   array lives in the slab itself, at its start, one byte per index (two
//!   where a slab holds more than 256 objects, as SLAB's `freelist_idx_t`
//!   on large pages), and costs the slab an object or so (`size-32`: 124
//!   objects instead of 128);
//!   from 512 bytes up it is kept off the slab (on the heap here, counted as
//!   meta), as SLAB did.
//! - **partial list**: per cache, the slabs with free and used objects; an
//!   allocation takes the first partial slab or makes a new one. A full slab
//!   is on no list; a slab whose last object is freed goes back to the OS at
//!   once (SLAB kept a few free slabs per cache; this one keeps none, so its
//!   held pages are exactly its slabs in use).
//! - **slabinfo**: per cache, `/proc/slabinfo`'s columns (`active_objs`,
//!   `num_objs`, `objsize`, `objperslab`, `pagesperslab`, active and total
//!   slabs).
//!
//! An object is named by a [`ChunkRef`]: its slab's id and its index.
//! The allocator trusts its caller not to free an object twice (the kernel's
//! does too); afmalloc's handle table makes sure of it.

use zsmem::os::{OsPages, PageBlock};

use super::{IdVec, Lists, vec_bytes};
use crate::contestants::LabError;

/// The smallest object, log2.
pub const MIN_SHIFT: u32 = 5;
/// Objects from this size up keep their free stack off the slab.
pub const OFF_SLAB_MIN: usize = 512;

/// A slab object: slab id in bits 16..48, index in bits 0..16.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkRef(pub u64);

impl ChunkRef {
    fn new(slab: u32, index: usize) -> Self {
        ChunkRef((u64::from(slab) << 16) | index as u64)
    }
    fn slab(self) -> u32 {
        (self.0 >> 16) as u32
    }
    fn index(self) -> usize {
        (self.0 & 0xffff) as usize
    }
}

/// The fixed shape of a cache's slabs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheShape {
    /// Object size in bytes.
    pub objsize: usize,
    /// Objects per slab.
    pub objperslab: usize,
    /// Pages per slab.
    pub pagesperslab: usize,
    /// True if the free stack is in the slab.
    pub on_slab: bool,
    /// Offset of the first object (past an on-slab free stack).
    pub first_object: usize,
    /// Bytes per index of an on-slab free stack: 1, or 2 for more than
    /// 256 objects per slab.
    pub index_bytes: usize,
}

impl CacheShape {
    /// The shape of a cache of `objsize` objects (a power of two) on pages
    /// of `page` bytes.
    pub fn new(objsize: usize, page: usize) -> Self {
        let pagesperslab = objsize.div_ceil(page).max(1);
        let bytes = pagesperslab * page;
        if objsize < OFF_SLAB_MIN {
            // One index byte per object (two past 256 objects), the objects
            // 8-byte aligned after.
            let fit = |w: usize| {
                let mut n = bytes / objsize;
                while (n * w).next_multiple_of(8) + n * objsize > bytes {
                    n -= 1;
                }
                n
            };
            let (n, w) = match fit(1) {
                n if n <= 256 => (n, 1),
                _ => (fit(2), 2),
            };
            CacheShape {
                objsize,
                objperslab: n,
                pagesperslab,
                on_slab: true,
                first_object: (n * w).next_multiple_of(8),
                index_bytes: w,
            }
        } else {
            CacheShape {
                objsize,
                objperslab: bytes / objsize,
                pagesperslab,
                on_slab: false,
                first_object: 0,
                index_bytes: 2,
            }
        }
    }
}

/// One line of slabinfo.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SlabInfo {
    /// Cache name, `size-N`.
    pub name: String,
    /// Objects in use.
    pub active_objs: usize,
    /// Objects in all slabs.
    pub num_objs: usize,
    /// Object size.
    pub objsize: usize,
    /// Objects per slab.
    pub objperslab: usize,
    /// Pages per slab.
    pub pagesperslab: usize,
    /// Slabs with an object in use (all of them: empty slabs are freed).
    pub active_slabs: usize,
    /// Slabs.
    pub num_slabs: usize,
}

struct Slab {
    pages: PageBlock,
    cache: u8,
    /// Objects in use; `freelist[active..]` are the free ones.
    active: u16,
    /// The free stack when kept off the slab.
    off_slab: Option<Box<[u16]>>,
}

#[derive(Default, Clone, Copy)]
struct CacheCounts {
    active_objs: usize,
    slabs: usize,
}

/// The slab allocator.
///
/// ```
/// use zsmem_lab::contestants::peers::slab::SlabAllocator;
/// let mut s = SlabAllocator::new(zsmem::os::OsPages::new(4096, None).unwrap());
/// let c = s.cache_for(100).unwrap(); // size-128
/// let r = s.alloc(c).unwrap();
/// s.bytes_mut(r).unwrap()[..3].copy_from_slice(b"abc");
/// let info = &s.slabinfo()[c];
/// assert_eq!((info.name.as_str(), info.active_objs, info.num_objs), ("size-128", 1, 31));
/// s.free(r).unwrap();
/// assert_eq!(s.pages().held_pages(), 0); // the empty slab went back
/// ```
pub struct SlabAllocator {
    os: OsPages,
    shapes: Vec<CacheShape>,
    counts: Vec<CacheCounts>,
    slabs: IdVec<Slab>,
    /// Partial slabs, by cache.
    partial: Lists,
}

impl SlabAllocator {
    /// Caches of 32 bytes up to the page size, on `os`.
    pub fn new(os: OsPages) -> Self {
        let page = os.page_size();
        let shapes: Vec<CacheShape> = (MIN_SHIFT..=page.trailing_zeros())
            .map(|s| CacheShape::new(1 << s, page))
            .collect();
        SlabAllocator {
            counts: vec![CacheCounts::default(); shapes.len()],
            partial: Lists::new(shapes.len()),
            shapes,
            slabs: IdVec::new(),
            os,
        }
    }

    /// The page source.
    pub fn pages(&self) -> &OsPages {
        &self.os
    }

    /// The cache of the smallest objects holding `size` bytes.
    pub fn cache_for(&self, size: usize) -> Option<usize> {
        let s = size
            .max(1)
            .next_power_of_two()
            .trailing_zeros()
            .max(MIN_SHIFT);
        let c = (s - MIN_SHIFT) as usize;
        (c < self.shapes.len()).then_some(c)
    }

    /// The shape of cache `c`.
    pub fn shape(&self, c: usize) -> &CacheShape {
        &self.shapes[c]
    }

    /// Number of caches.
    pub fn caches(&self) -> usize {
        self.shapes.len()
    }

    fn slab(&self, r: ChunkRef) -> Result<&Slab, LabError> {
        self.slabs
            .get(r.slab())
            .filter(|s| r.index() < self.shapes[s.cache as usize].objperslab)
            .ok_or_else(|| LabError::Usage(format!("slab: no object {:#x}", r.0)))
    }

    /// The free stack's entry `i` of `slab`.
    fn stack_get(&self, slab: &Slab, i: usize) -> usize {
        match &slab.off_slab {
            Some(v) => v[i] as usize,
            None if self.shapes[slab.cache as usize].index_bytes == 1 => {
                slab.pages.as_slice()[i] as usize
            }
            None => {
                let b = &slab.pages.as_slice()[2 * i..2 * i + 2];
                u16::from_ne_bytes([b[0], b[1]]) as usize
            }
        }
    }

    /// Set the free stack's entry `i` of `slab` (of `index_bytes` per
    /// entry when on the slab).
    fn stack_set(slab: &mut Slab, index_bytes: usize, i: usize, idx: usize) {
        match &mut slab.off_slab {
            Some(v) => v[i] = idx as u16,
            None => Self::stack_set_on(&mut slab.pages, index_bytes, i, idx),
        }
    }

    /// Entry `i` of a free stack kept at the start of `pages`.
    fn stack_set_on(pages: &mut PageBlock, index_bytes: usize, i: usize, idx: usize) {
        let b = pages.as_mut_slice();
        if index_bytes == 1 {
            b[i] = idx as u8;
        } else {
            b[2 * i..2 * i + 2].copy_from_slice(&(idx as u16).to_ne_bytes());
        }
    }

    /// An object of cache `c`.
    pub fn alloc(&mut self, c: usize) -> Result<ChunkRef, LabError> {
        let shape = *self
            .shapes
            .get(c)
            .ok_or_else(|| LabError::Usage(format!("slab: no cache {c}")))?;
        let id = match self.partial.first(c) {
            Some(id) => id,
            None => {
                let mut pages = self.os.alloc(shape.pagesperslab)?;
                let n = shape.objperslab;
                let off_slab = if shape.on_slab {
                    for i in 0..n {
                        Self::stack_set_on(&mut pages, shape.index_bytes, i, i);
                    }
                    None
                } else {
                    Some((0..n as u16).collect::<Box<[u16]>>())
                };
                let id = self.slabs.insert(Slab {
                    pages,
                    cache: c as u8,
                    active: 0,
                    off_slab,
                });
                self.partial.insert(c, id);
                self.counts[c].slabs += 1;
                id
            }
        };
        let slab = self.slabs.get(id).expect("listed slab");
        let idx = self.stack_get(slab, slab.active as usize);
        let slab = self.slabs.get_mut(id).expect("listed slab");
        slab.active += 1;
        // Invariant: a slab is on its cache's partial list exactly when it
        // has a free object.
        if slab.active as usize == shape.objperslab {
            self.partial.remove(id);
        }
        self.counts[c].active_objs += 1;
        Ok(ChunkRef::new(id, idx))
    }

    /// Give an object back; its slab goes back to the OS if it empties.
    pub fn free(&mut self, r: ChunkRef) -> Result<(), LabError> {
        let (c, n, w) = {
            let s = self.slab(r)?;
            let sh = &self.shapes[s.cache as usize];
            (s.cache as usize, sh.objperslab, sh.index_bytes)
        };
        let slab = self.slabs.get_mut(r.slab()).expect("checked");
        if slab.active == 0 {
            return Err(LabError::Usage(format!(
                "slab: free of {:#x} in an empty slab",
                r.0
            )));
        }
        slab.active -= 1;
        Self::stack_set(slab, w, slab.active as usize, r.index());
        let active = slab.active as usize;
        self.counts[c].active_objs -= 1;
        if active == 0 {
            self.partial.remove(r.slab());
            self.slabs.remove(r.slab());
            self.counts[c].slabs -= 1;
        } else if active == n - 1 {
            self.partial.insert(c, r.slab());
        }
        Ok(())
    }

    fn range(&self, r: ChunkRef) -> Result<(usize, usize), LabError> {
        let s = self.slab(r)?;
        let sh = &self.shapes[s.cache as usize];
        let at = sh.first_object + r.index() * sh.objsize;
        Ok((at, at + sh.objsize))
    }

    /// The object's bytes (its whole size).
    pub fn bytes(&self, r: ChunkRef) -> Result<&[u8], LabError> {
        let (a, b) = self.range(r)?;
        Ok(&self.slabs.get(r.slab()).expect("checked").pages.as_slice()[a..b])
    }

    /// The object's bytes, writable.
    pub fn bytes_mut(&mut self, r: ChunkRef) -> Result<&mut [u8], LabError> {
        let (a, b) = self.range(r)?;
        Ok(&mut self
            .slabs
            .get_mut(r.slab())
            .expect("checked")
            .pages
            .as_mut_slice()[a..b])
    }

    /// The object's address, for address-ordered work.
    pub fn addr(&self, r: ChunkRef) -> Result<usize, LabError> {
        let (a, _) = self.range(r)?;
        Ok(self.slab(r)?.pages.addr() + a)
    }

    /// The object's cache.
    pub fn cache_of(&self, r: ChunkRef) -> Result<usize, LabError> {
        Ok(self.slab(r)?.cache as usize)
    }

    /// True if the object's slab has free objects too.
    pub fn in_partial_slab(&self, r: ChunkRef) -> Result<bool, LabError> {
        let s = self.slab(r)?;
        Ok((s.active as usize) < self.shapes[s.cache as usize].objperslab)
    }

    /// `/proc/slabinfo`, one line per cache.
    pub fn slabinfo(&self) -> Vec<SlabInfo> {
        self.shapes
            .iter()
            .zip(&self.counts)
            .map(|(s, c)| SlabInfo {
                name: format!("size-{}", s.objsize),
                active_objs: c.active_objs,
                num_objs: c.slabs * s.objperslab,
                objsize: s.objsize,
                objperslab: s.objperslab,
                pagesperslab: s.pagesperslab,
                active_slabs: c.slabs,
                num_slabs: c.slabs,
            })
            .collect()
    }

    /// Heap bytes: slab descriptors, off-slab free stacks, lists.
    pub fn meta_bytes(&self) -> u64 {
        let off: u64 = self
            .slabs
            .iter()
            .filter_map(|(_, s)| s.off_slab.as_ref().map(|v| (v.len() * 2) as u64))
            .sum();
        self.slabs.meta_bytes()
            + off
            + self.partial.meta_bytes()
            + vec_bytes(&self.shapes)
            + vec_bytes(&self.counts)
    }

    /// Check every slab's free stack and the counts.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut counts = vec![CacheCounts::default(); self.shapes.len()];
        let mut pages = 0;
        for (id, s) in self.slabs.iter() {
            let c = s.cache as usize;
            let n = self.shapes[c].objperslab;
            let mut seen = vec![false; n];
            // Only the free part of the stack means anything.
            for i in s.active as usize..n {
                let idx = self.stack_get(s, i);
                if idx >= n || std::mem::replace(&mut seen[idx], true) {
                    return Err(format!("slab {id}: free stack repeats or overflows at {i}"));
                }
            }
            let a = s.active as usize;
            if a == 0 || (self.partial.key_of(id) == Some(c)) != (a < n) {
                return Err(format!(
                    "slab {id}: active {a} of {n}, listed {:?}",
                    self.partial.key_of(id)
                ));
            }
            counts[c].active_objs += a;
            counts[c].slabs += 1;
            pages += s.pages.pages();
        }
        for (c, (want, got)) in counts.iter().zip(&self.counts).enumerate() {
            if (want.active_objs, want.slabs) != (got.active_objs, got.slabs) {
                return Err(format!("cache {c}: counts differ"));
            }
        }
        if pages != self.os.held_pages() {
            return Err(format!(
                "slab: {pages} pages in slabs, {} held",
                self.os.held_pages()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slab() -> SlabAllocator {
        SlabAllocator::new(OsPages::new(4096, None).unwrap())
    }

    #[test]
    fn large_pages_take_two_byte_indices_past_256_objects() {
        // 16 KiB of 32-byte objects: 2-byte indices, 16384 = 2n + 32n + pad.
        let sh = CacheShape::new(32, 16384);
        assert_eq!(
            (sh.index_bytes, sh.objperslab, sh.first_object),
            (2, 481, 968)
        );
        assert_eq!(CacheShape::new(64, 16384).index_bytes, 1, "252 objects");
        let mut s = SlabAllocator::new(OsPages::new(16384, None).unwrap());
        let c = s.cache_for(32).unwrap();
        let refs: Vec<ChunkRef> = (0..1000).map(|_| s.alloc(c).unwrap()).collect();
        for (i, r) in refs.iter().enumerate() {
            s.bytes_mut(*r).unwrap().fill(i as u8);
        }
        for r in refs.iter().step_by(3) {
            s.free(*r).unwrap();
        }
        let again: Vec<ChunkRef> = (0..300).map(|_| s.alloc(c).unwrap()).collect();
        let mut seen = std::collections::HashSet::new();
        for (i, r) in refs.iter().enumerate() {
            if i % 3 != 0 {
                assert!(s.bytes(*r).unwrap().iter().all(|&b| b == i as u8));
                assert!(seen.insert(*r));
            }
        }
        assert!(
            again.iter().all(|r| seen.insert(*r)),
            "no object given twice"
        );
        s.check_invariants().unwrap();
    }

    #[test]
    fn slabinfo_shapes() {
        let s = slab();
        let got: Vec<(String, usize, usize, usize)> = s
            .slabinfo()
            .into_iter()
            .map(|i| (i.name, i.objsize, i.objperslab, i.pagesperslab))
            .collect();
        let want: Vec<(String, usize, usize, usize)> = [
            (32, 124),
            (64, 63),
            (128, 31),
            (256, 15),
            (512, 8),
            (1024, 4),
            (2048, 2),
            (4096, 1),
        ]
        .into_iter()
        .map(|(z, n)| (format!("size-{z}"), z, n, 1))
        .collect();
        assert_eq!(got, want);
        assert!(s.shape(0).on_slab && !s.shape(4).on_slab);
        assert_eq!(s.cache_for(1), Some(0));
        assert_eq!(s.cache_for(33), Some(1));
        assert_eq!(s.cache_for(4096), Some(7));
        assert_eq!(s.cache_for(4097), None);
    }

    #[test]
    fn free_stack_and_empty_slab_return() {
        let mut s = slab();
        let c = s.cache_for(32).unwrap();
        let refs: Vec<ChunkRef> = (0..130).map(|_| s.alloc(c).unwrap()).collect();
        let info = &s.slabinfo()[c];
        assert_eq!(
            (info.active_objs, info.num_objs, info.num_slabs),
            (130, 248, 2)
        );
        assert_eq!(s.pages().held_pages(), 2);
        // Objects come out in index order from a fresh slab, and a freed
        // one is the next handed out (the top of the stack).
        assert_eq!(refs[1].index(), 1);
        s.free(refs[7]).unwrap();
        let again = s.alloc(c).unwrap();
        assert_eq!(again, refs[7]);
        s.check_invariants().unwrap();
        // Empty the second slab: it goes back at once.
        for r in &refs[124..] {
            s.free(*r).unwrap();
        }
        assert_eq!(s.pages().held_pages(), 1);
        assert_eq!(s.slabinfo()[c].num_slabs, 1);
        for r in &refs[..124] {
            s.free(*r).unwrap();
        }
        assert_eq!(s.pages().held_pages(), 0);
        s.check_invariants().unwrap();
        assert!(s.free(refs[0]).is_err(), "its slab is gone");
    }

    #[test]
    fn objects_do_not_overlap_and_off_slab_stacks_work() {
        let mut s = slab();
        for c in 0..s.caches() {
            let n = s.shape(c).objperslab;
            let refs: Vec<ChunkRef> = (0..n + 1).map(|_| s.alloc(c).unwrap()).collect();
            for (i, r) in refs.iter().enumerate() {
                s.bytes_mut(*r).unwrap().fill(i as u8);
            }
            for (i, r) in refs.iter().enumerate() {
                assert!(
                    s.bytes(*r).unwrap().iter().all(|&b| b == i as u8),
                    "cache {c}"
                );
            }
            s.check_invariants().unwrap();
            for r in refs.iter().rev() {
                s.free(*r).unwrap();
            }
        }
        assert_eq!(s.pages().held_pages(), 0);
    }
}
