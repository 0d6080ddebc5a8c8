//! The peers: zbud, z3fold, zblock and afmalloc, written from their
//! published designs (the kernel's sources and the reference threads, read
//! for facts; no code carried over), on the same page source as zsmem's
//! pool (`zsmem::os::OsPages`), so that their memory figures compare.
//!
//! | module | concern |
//! |---|---|
//! | [`zbud`] | at most two objects per page, 64-byte chunks, unbuddied lists by free chunks |
//! | [`z3fold`] | up to three objects per page, headless pages, handle indirection, middle-object compaction |
//! | [`zblock`] | blocks of 1/2/4/8 pages of equal slots from a slot-size table, a free-slot bitmap per block |
//! | [`slab`] | a SLAB-style slab allocator: one cache per power of two, a stack of free indices per slab, slabinfo |
//! | [`afmalloc`] | objects as up to seven power-of-two chunks from [`slab`], a metadata entry holding them |
//!
//! The nouns shared by all four, defined once here:
//!
//! - **page source**: the `OsPages` every peer takes its pages from; a
//!   peer's `pool` figure is its page source's held pages times the page
//!   size, exactly as zsmem's.
//! - **handle**: the `u64` a peer returns for an object. In the kernel it is
//!   an address (zbud, zblock, afmalloc) or the address of a handle slot
//!   (z3fold). Here it names an entry of a [`HandleTable`]: the low 32 bits
//!   are the entry's index, bits 32..62 its generation, which changes every
//!   time the entry is freed, so a stale, double-freed or forged handle is
//!   an error, never another object's bytes. Bits 62 and 63 are free for
//!   tags (afmalloc's direct tag; [`PeerObjects`]' own-page tag).
//! - **meta**: what a peer keeps on the heap besides its pages (handle
//!   tables, list links, block descriptors), estimated from the capacities
//!   of its vectors. Metadata the real design keeps inside its pages (the
//!   zbud and z3fold headers, zblock's bitmap, afmalloc's metadata entries,
//!   the slab's on-slab free stacks) is kept inside the pages here too, so
//!   it is in the `pool` figure, as in the kernel.
//! - **list**: a set of pages or blocks by a small key (free chunks, block
//!   type, cache): [`Lists`], a vector per key with O(1) removal.

pub mod afmalloc;
pub mod slab;
pub mod z3fold;
pub mod zblock;
pub mod zbud;

use zsmem::os::{OsPages, PageBlock};

use crate::contestants::zram_front::ZramFront;
use crate::contestants::{LabError, PageConfig, PageContestant};
use crate::contestants::{ObjectContestant, ObjectMemory};
use crate::corpus::PAGE_SIZE;

/// Bits of a handle holding the entry's generation (above the 32 index
/// bits); the two top bits are left for tags.
const GEN_BITS: u32 = 30;

/// Tag of a handle of [`PeerObjects`] naming an object kept in a page of
/// its own.
const OWN_PAGE_TAG: u64 = 1 << 63;

/// The error for a handle that names no live object.
pub(crate) fn bad_handle(who: &str, handle: u64) -> LabError {
    LabError::Usage(format!(
        "{who}: handle {handle:#x} names no live object (freed, stale or forged)"
    ))
}

/// The error for an object over `who`'s limit of `max` bytes.
pub(crate) fn too_large(who: &str, len: usize, max: usize) -> LabError {
    LabError::Usage(format!(
        "{who}: an object of {len} bytes is larger than its limit of {max} bytes"
    ))
}

/// Refuse an empty object, or one over `who`'s limit of `max` bytes.
pub(crate) fn check_len(who: &str, len: usize, max: usize) -> Result<(), LabError> {
    if len == 0 {
        return Err(LabError::Zsmem(zsmem::Error::ZeroLength));
    }
    if len > max {
        return Err(too_large(who, len, max));
    }
    Ok(())
}

/// Bytes a vector's buffer takes on the heap.
pub(crate) fn vec_bytes<T>(v: &Vec<T>) -> u64 {
    (v.capacity() * std::mem::size_of::<T>()) as u64
}

/// Handles naming values of type `T`, with a generation per entry.
///
/// ```
/// use zsmem_lab::contestants::peers::HandleTable;
/// let mut t = HandleTable::new();
/// let h = t.insert(7u32);
/// assert_eq!(t.get(h), Some(&7));
/// assert_eq!(t.remove(h), Some(7));
/// assert_eq!(t.get(h), None); // stale now
/// ```
#[derive(Debug, Default)]
pub struct HandleTable<T> {
    entries: Vec<(u32, Option<T>)>,
    free: Vec<u32>,
    live: usize,
}

impl<T> HandleTable<T> {
    /// An empty table.
    pub fn new() -> Self {
        HandleTable {
            entries: Vec::new(),
            free: Vec::new(),
            live: 0,
        }
    }

    fn split(handle: u64) -> Option<(usize, u32)> {
        let gen_ = (handle >> 32) as u32;
        (gen_ != 0 && gen_ < 1 << GEN_BITS).then_some(((handle & 0xffff_ffff) as usize, gen_))
    }

    /// Keep `v`; returns its handle (never 0, top two bits clear).
    pub fn insert(&mut self, v: T) -> u64 {
        self.live += 1;
        match self.free.pop() {
            Some(i) => {
                let e = &mut self.entries[i as usize];
                e.1 = Some(v);
                (u64::from(e.0) << 32) | u64::from(i)
            }
            None => {
                self.entries.push((1, Some(v)));
                (1u64 << 32) | (self.entries.len() - 1) as u64
            }
        }
    }

    /// The value `handle` names, if it is live.
    pub fn get(&self, handle: u64) -> Option<&T> {
        let (i, g) = Self::split(handle)?;
        match self.entries.get(i) {
            Some((eg, Some(v))) if *eg == g => Some(v),
            _ => None,
        }
    }

    /// The value `handle` names, or the error `who` gives for a bad handle.
    pub fn lookup(&self, who: &str, handle: u64) -> Result<&T, LabError> {
        self.get(handle).ok_or_else(|| bad_handle(who, handle))
    }

    /// Forget `handle` and return its value, or the error `who` gives for a
    /// bad handle.
    pub fn take(&mut self, who: &str, handle: u64) -> Result<T, LabError> {
        self.remove(handle).ok_or_else(|| bad_handle(who, handle))
    }

    /// The value `handle` names, writable.
    pub fn get_mut(&mut self, handle: u64) -> Option<&mut T> {
        let (i, g) = Self::split(handle)?;
        match self.entries.get_mut(i) {
            Some((eg, Some(v))) if *eg == g => Some(v),
            _ => None,
        }
    }

    /// Forget `handle`; its value, if it was live. The entry's generation
    /// moves on, so the handle is stale from now on.
    pub fn remove(&mut self, handle: u64) -> Option<T> {
        let (i, g) = Self::split(handle)?;
        let e = self.entries.get_mut(i)?;
        if e.0 != g || e.1.is_none() {
            return None;
        }
        e.0 = e.0 % ((1 << GEN_BITS) - 1) + 1;
        self.free.push(i as u32);
        self.live -= 1;
        e.1.take()
    }

    /// Live handles and their values.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(i, (g, v))| v.as_ref().map(|v| ((u64::from(*g) << 32) | i as u64, v)))
    }

    /// Number of live handles.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True if no handle is live.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Heap bytes of the table.
    pub fn meta_bytes(&self) -> u64 {
        vec_bytes(&self.entries) + vec_bytes(&self.free)
    }
}

/// Values in numbered places, places reused after removal (the pages,
/// blocks and slabs of a peer, by id).
#[derive(Debug, Default)]
pub struct IdVec<T> {
    items: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> IdVec<T> {
    /// Empty.
    pub fn new() -> Self {
        IdVec {
            items: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Keep `v`; returns its id.
    pub fn insert(&mut self, v: T) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.items[i as usize] = Some(v);
                i
            }
            None => {
                self.items.push(Some(v));
                (self.items.len() - 1) as u32
            }
        }
    }

    /// The value of `id`.
    pub fn get(&self, id: u32) -> Option<&T> {
        self.items.get(id as usize).and_then(Option::as_ref)
    }

    /// The value of `id`, writable.
    pub fn get_mut(&mut self, id: u32) -> Option<&mut T> {
        self.items.get_mut(id as usize).and_then(Option::as_mut)
    }

    /// Take `id`'s value out.
    pub fn remove(&mut self, id: u32) -> Option<T> {
        let v = self.items.get_mut(id as usize)?.take()?;
        self.free.push(id);
        Some(v)
    }

    /// Live ids and values.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.items
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.as_ref().map(|v| (i as u32, v)))
    }

    /// Number of live values.
    pub fn len(&self) -> usize {
        self.items.len() - self.free.len()
    }

    /// One more than the highest id ever given.
    pub fn id_bound(&self) -> usize {
        self.items.len()
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes (the values' own heap parts not included).
    pub fn meta_bytes(&self) -> u64 {
        vec_bytes(&self.items) + vec_bytes(&self.free)
    }
}

const NOT_LISTED: (u32, u32) = (u32::MAX, u32::MAX);

/// Lists of ids by key (the kernel's list heads, without the links inside
/// the pages): each id is on at most one list; removal is O(1) (the last
/// entry takes the removed one's place). The "first" of a list is the one
/// added last, as with the kernel's `list_add` at the head.
#[derive(Debug)]
pub struct Lists {
    lists: Vec<Vec<u32>>,
    /// Per id: (list, position), or `NOT_LISTED`.
    at: Vec<(u32, u32)>,
}

impl Lists {
    /// `n` empty lists.
    pub fn new(n: usize) -> Self {
        Lists {
            lists: vec![Vec::new(); n],
            at: Vec::new(),
        }
    }

    /// Put `id` on list `key` (it must be on none).
    pub fn insert(&mut self, key: usize, id: u32) {
        let i = id as usize;
        if self.at.len() <= i {
            self.at.resize(i + 1, NOT_LISTED);
        }
        debug_assert_eq!(self.at[i], NOT_LISTED, "id {id} listed twice");
        let l = &mut self.lists[key];
        self.at[i] = (key as u32, l.len() as u32);
        l.push(id);
    }

    /// Take `id` off its list; false if it was on none.
    pub fn remove(&mut self, id: u32) -> bool {
        let Some(&(key, pos)) = self.at.get(id as usize) else {
            return false;
        };
        if key == u32::MAX {
            return false;
        }
        let l = &mut self.lists[key as usize];
        l.swap_remove(pos as usize);
        if let Some(&moved) = l.get(pos as usize) {
            self.at[moved as usize].1 = pos;
        }
        self.at[id as usize] = NOT_LISTED;
        true
    }

    /// The id added last to list `key`.
    pub fn first(&self, key: usize) -> Option<u32> {
        self.lists[key].last().copied()
    }

    /// The list `id` is on.
    pub fn key_of(&self, id: u32) -> Option<usize> {
        match self.at.get(id as usize) {
            Some(&(k, _)) if k != u32::MAX => Some(k as usize),
            _ => None,
        }
    }

    /// Ids on list `key`.
    pub fn list(&self, key: usize) -> &[u32] {
        &self.lists[key]
    }

    /// Heap bytes.
    pub fn meta_bytes(&self) -> u64 {
        vec_bytes(&self.lists) + self.lists.iter().map(vec_bytes).sum::<u64>() + vec_bytes(&self.at)
    }
}

/// What a peer allocator offers: keep, read, free objects by handle.
pub trait PeerAllocator {
    /// Short name.
    fn name(&self) -> &str;
    /// Layout parameters, one line.
    fn config(&self) -> String;
    /// Largest object accepted.
    fn max_size(&self) -> usize;
    /// Keep a copy of `data`; an error if it is empty or too large.
    fn alloc(&mut self, data: &[u8]) -> Result<u64, LabError>;
    /// Copy the object into `buf` (resized to its length).
    fn read(&self, handle: u64, buf: &mut Vec<u8>) -> Result<(), LabError>;
    /// Free the object.
    fn free(&mut self, handle: u64) -> Result<(), LabError>;
    /// The page source.
    fn pages(&self) -> &OsPages;
    /// Heap bytes of metadata.
    fn meta_bytes(&self) -> u64;
    /// Compact if the design can; pages given back.
    fn compact(&mut self) -> Result<u64, LabError> {
        Ok(0)
    }
    /// Pages given back by compaction so far, on request or automatic.
    fn pages_compacted(&self) -> u64 {
        0
    }
    /// Check the allocator's invariants (tests call it after operations).
    fn check_invariants(&self) -> Result<(), String>;
}

/// A peer as an object contestant: objects the peer refuses as too large
/// (zbud above 3968 bytes, zblock above 4080) are kept in a page of their
/// own from the peer's page source, as zram's huge pages are in zsmalloc,
/// and counted in `pool` like every other page. zswap would reject them
/// instead; the lab must keep them, and keeps them the cheapest honest way.
pub struct PeerObjects<P: PeerAllocator> {
    peer: P,
    own: HandleTable<(PageBlock, usize)>,
}

impl<P: PeerAllocator> PeerObjects<P> {
    /// Wrap `peer`.
    pub fn new(peer: P) -> Self {
        PeerObjects {
            peer,
            own: HandleTable::new(),
        }
    }

    /// The peer.
    pub fn peer(&self) -> &P {
        &self.peer
    }

    /// The peer, writable.
    pub fn peer_mut(&mut self) -> &mut P {
        &mut self.peer
    }

    /// Objects kept in pages of their own because the peer refused them.
    pub fn own_pages(&self) -> usize {
        self.own.len()
    }
}

impl<P: PeerAllocator> ObjectContestant for PeerObjects<P> {
    fn name(&self) -> &str {
        self.peer.name()
    }
    fn config(&self) -> String {
        format!(
            "{}; objects over {} B in a page of their own",
            self.peer.config(),
            self.peer.max_size()
        )
    }
    fn alloc(&mut self, data: &[u8]) -> Result<u64, LabError> {
        if data.len() <= self.peer.max_size() {
            return self.peer.alloc(data);
        }
        check_len(self.peer.name(), data.len(), self.peer.pages().page_size())?;
        let mut block = self.peer.pages().alloc(1)?;
        block.as_mut_slice()[..data.len()].copy_from_slice(data);
        Ok(self.own.insert((block, data.len())) | OWN_PAGE_TAG)
    }
    fn read(&mut self, id: u64, buf: &mut Vec<u8>) -> Result<(), LabError> {
        if id & OWN_PAGE_TAG == 0 {
            return self.peer.read(id, buf);
        }
        let (block, len) = self
            .own
            .get(id & !OWN_PAGE_TAG)
            .ok_or_else(|| bad_handle(self.peer.name(), id))?;
        buf.clear();
        buf.extend_from_slice(&block.as_slice()[..*len]);
        Ok(())
    }
    fn free(&mut self, id: u64) -> Result<(), LabError> {
        if id & OWN_PAGE_TAG == 0 {
            return self.peer.free(id);
        }
        self.own
            .remove(id & !OWN_PAGE_TAG)
            .map(drop)
            .ok_or_else(|| bad_handle(self.peer.name(), id))
    }
    fn memory(&mut self) -> Result<ObjectMemory, LabError> {
        let p = self.peer.pages();
        Ok(ObjectMemory {
            held: (p.held_pages() * p.page_size()) as u64,
            meta: self.peer.meta_bytes() + self.own.meta_bytes(),
            returning: 0,
        })
    }
    fn compact(&mut self) -> Result<u64, LabError> {
        self.peer.compact()
    }
    fn pages_compacted(&self) -> u64 {
        self.peer.pages_compacted()
    }
}

/// A fresh page source of 4 KiB pages for a peer. Freed pages go back to
/// the OS at once, so `held_pages` is all a peer holds whenever it is read
/// (zsmem's own pools return them after a delay, and the lab reads their
/// figures after it, counting what still waits).
pub(crate) fn page_source() -> Result<OsPages, LabError> {
    page_source_of(PAGE_SIZE)
}

/// A fresh page source of `page_size` pages for a peer, returning freed
/// pages at once.
pub(crate) fn page_source_of(page_size: usize) -> Result<OsPages, LabError> {
    Ok(OsPages::with_return(
        page_size,
        None,
        zsmem::PageReturn::Immediate,
    )?)
}

/// Why peer `name` does not run at pages of `page_size` bytes, or `None`
/// if it does (docs/peers.md gives the reasons at length).
pub fn page_size_skip(name: &str, page_size: usize) -> Option<String> {
    if page_size == PAGE_SIZE {
        return None;
    }
    match name {
        "zbud" | "z3fold" => Some(format!(
            "{name} is page-buddied (at most {} objects per page, its chunk geometry fixed per page size at build time); \
             the lab models its 4 KiB build only, not the {page_size}-byte one",
            if name == "zbud" { 2 } else { 3 }
        )),
        "zblock" => Some(format!(
            "zblock's block table is tuned per page size and the lab has the 2025 series' 4 KiB table only, not one for {page_size}-byte pages"
        )),
        _ => None,
    }
}

/// Every peer by name: "zbud", "z3fold", "zblock", "afmalloc" and
/// "afmalloc-compact" (afmalloc whose `compact()` runs the thread's
/// compaction).
pub const PEERS: &[&str] = &["zbud", "z3fold", "zblock", "afmalloc", "afmalloc-compact"];

/// Make a peer's object contestant by name; `None` for another name.
pub fn make_peer(name: &str) -> Option<Result<Box<dyn ObjectContestant + Send>, LabError>> {
    fn boxed<P: PeerAllocator + Send + 'static>(
        p: Result<P, LabError>,
    ) -> Result<Box<dyn ObjectContestant + Send>, LabError> {
        Ok(Box::new(PeerObjects::new(p?)))
    }
    Some(match name {
        "zbud" => boxed(zbud::Zbud::new()),
        "z3fold" => boxed(z3fold::Z3fold::new()),
        "zblock" => boxed(zblock::Zblock::new()),
        "afmalloc" => boxed(afmalloc::Afmalloc::new(false)),
        "afmalloc-compact" => boxed(afmalloc::Afmalloc::new(true)),
        _ => return None,
    })
}

/// Make a peer's page contestant (zram's page handling in front of it,
/// [`crate::contestants::zram_front::ZramFront`]) of `slots` pages by name; `None` for
/// another name.
pub fn make_peer_pages(
    name: &str,
    slots: usize,
) -> Option<Result<Box<dyn PageContestant + Send>, LabError>> {
    make_peer_pages_with(name, &PageConfig::default(), slots)
}

/// As [`make_peer_pages`], for pages of `cfg`'s size compressed with
/// `cfg`'s codec; [`LabError::Skipped`] with the reason where the peer's
/// design (as the lab has it) does not take that page size
/// ([`page_size_skip`]).
pub fn make_peer_pages_with(
    name: &str,
    cfg: &PageConfig,
    slots: usize,
) -> Option<Result<Box<dyn PageContestant + Send>, LabError>> {
    if !PEERS.contains(&name) {
        return None;
    }
    if let Some(why) = page_size_skip(name, cfg.page_size) {
        return Some(Err(LabError::Skipped(why)));
    }
    let objects = match name {
        "afmalloc" | "afmalloc-compact" => {
            afmalloc::Afmalloc::with_page_size(name == "afmalloc-compact", cfg.page_size)
                .map(|p| Box::new(PeerObjects::new(p)) as Box<dyn ObjectContestant + Send>)
        }
        _ => make_peer(name)?,
    };
    let make = |objects: Box<dyn ObjectContestant + Send>| {
        Ok(Box::new(ZramFront::with_config(objects, cfg, slots)?)
            as Box<dyn PageContestant + Send>)
    };
    Some(objects.and_then(make))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_go_stale_and_forgeries_fail() {
        let mut t = HandleTable::new();
        let a = t.insert('a');
        let b = t.insert('b');
        assert_eq!(t.remove(a), Some('a'));
        assert_eq!(t.remove(a), None, "double free");
        let c = t.insert('c');
        assert_ne!(a, c, "reused entry, new generation");
        assert_eq!(t.get(a), None);
        assert_eq!(t.get(c), Some(&'c'));
        for forged in [0, 1, b ^ (1 << 40), b | (3 << 62), u64::MAX, b + 5] {
            assert_eq!(t.get(forged), None, "{forged:#x}");
        }
        assert_eq!(t.len(), 2);
        assert_eq!(t.iter().count(), 2);
    }

    #[test]
    fn lists_remove_from_the_middle() {
        let mut l = Lists::new(3);
        for id in 0..5 {
            l.insert(1, id);
        }
        assert!(l.remove(1));
        assert!(!l.remove(1));
        assert_eq!(l.first(1), Some(3), "the last one moved into the hole");
        assert_eq!(l.key_of(4), Some(1));
        l.remove(4);
        l.insert(2, 4);
        assert_eq!(l.list(1).len(), 3);
        assert_eq!(l.first(2), Some(4));
        for id in l.list(1).to_vec() {
            assert!(l.remove(id));
        }
        assert_eq!(l.first(1), None);
    }
}
