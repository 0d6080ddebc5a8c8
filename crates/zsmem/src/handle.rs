//! Handles and the per-class handle table.
//!
//! A [`Handle`] is an opaque `u64` that names an object for as long as it
//! lives, wherever compaction moves it. Bit by bit:
//!
//! ```text
//!  63                42 41         30 29                      0
//! +--------------------+-------------+-------------------------+
//! | generation (22)    | class (12)  | slot (30)               |
//! +--------------------+-------------+-------------------------+
//! ```
//!
//! - `class` is the index of the physical size class holding the object. It
//!   never changes (compaction moves objects only within their class), so a
//!   free finds its class lock from the handle alone, with no pool-wide lock.
//! - `slot` indexes that class's handle table; the entry there says which
//!   zspage and which object index hold the bytes, and the object's length.
//! - `generation` is never 0 (so no handle is 0) and changes every time the
//!   slot is freed; a stale handle, a double free or a forged value is caught
//!   by comparing it with the entry's generation.
//!
//! An entry's tag is atomic so that a deferred free can mark it *dying*
//! without the class lock (see `deferred.rs`): through the [`Directory`],
//! a lock-free map from chunk number to the chunk's entries, which pools
//! with deferred free keep. Everything else about an entry is read and
//! written under the class lock only.

use std::ptr;

use crate::error::{Error, HandleFault, Result};
use std::sync::Arc;

use crate::sync::atomic::{AtomicPtr, AtomicU16, AtomicU32, Ordering};

/// Bits of the slot field.
pub const SLOT_BITS: u32 = 30;
/// Bits of the class field (64 KiB pages with 16-byte delta need 4095 classes).
pub const CLASS_BITS: u32 = 12;
/// Bits of the generation field.
pub const GEN_BITS: u32 = 64 - SLOT_BITS - CLASS_BITS;

const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
const CLASS_MASK: u64 = (1 << CLASS_BITS) - 1;
const GEN_MASK: u32 = (1 << GEN_BITS) - 1;
const LIVE: u32 = 1 << 31;
/// Set on a live entry whose object a deferred free has taken: the handle is
/// dead for every caller; the slot is freed when its batch is drained.
const DYING: u32 = 1 << 30;

/// An opaque reference to an object in a [`Pool`](crate::Pool).
///
/// Copyable and cheap; it stays valid across compaction until the object is
/// freed. Using it after that is an error, never another object's data.
///
/// ```
/// use zsmem::{Pool, PoolConfig};
/// let pool = Pool::new(PoolConfig::default()).unwrap();
/// let h = pool.store(b"compressed bytes").unwrap();
/// let raw = h.to_raw();
/// assert_eq!(pool.read_vec(zsmem::Handle::from_raw(raw)).unwrap(), b"compressed bytes");
/// pool.free(h).unwrap();
/// assert!(pool.free(h).is_err()); // double free is an error
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct Handle(u64);

impl Handle {
    /// The handle as a plain integer (for storing it elsewhere, or a C API).
    pub fn to_raw(self) -> u64 {
        self.0
    }

    /// A handle from an integer. Any value is accepted here; the pool checks
    /// it when it is used.
    pub fn from_raw(raw: u64) -> Handle {
        Handle(raw)
    }

    pub(crate) fn new(class: usize, slot: u32, generation: u32) -> Handle {
        debug_assert!((class as u64) <= CLASS_MASK);
        debug_assert!(u64::from(slot) <= SLOT_MASK);
        debug_assert!(generation != 0 && generation <= GEN_MASK);
        Handle(
            (u64::from(generation) << (SLOT_BITS + CLASS_BITS))
                | ((class as u64) << SLOT_BITS)
                | u64::from(slot),
        )
    }

    /// Index of the size class the handle claims.
    pub(crate) fn class(self) -> usize {
        ((self.0 >> SLOT_BITS) & CLASS_MASK) as usize
    }

    pub(crate) fn slot(self) -> u32 {
        (self.0 & SLOT_MASK) as u32
    }

    pub(crate) fn generation(self) -> u32 {
        (self.0 >> (SLOT_BITS + CLASS_BITS)) as u32
    }

    pub(crate) fn fault(self, fault: HandleFault) -> Error {
        Error::InvalidHandle {
            handle: self.0,
            fault,
        }
    }
}

/// Where a live object is: its zspage, its index there, its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Location {
    pub(crate) zspage: u32,
    pub(crate) obj: u16,
    pub(crate) len: usize,
}

/// One slot of a handle table.
///
/// Every field is atomic and an entry is only ever reached through a shared
/// reference: the deferred-free path reads `tag` through the directory
/// while the class lock's holder updates the entry, and a `&mut Entry`
/// would claim the whole entry exclusively (undefined behaviour beside a
/// concurrent reader, as Miri reports). The other fields are read and
/// written under the class lock only, so `Relaxed` is enough for them (the
/// lock orders them); on x86 and ARM such accesses are plain loads and
/// stores.
#[derive(Debug)]
struct Entry {
    /// Generation in the low bits; `LIVE` set while an object owns the slot,
    /// `DYING` too once a deferred free took it. Written under the class
    /// lock, except for the `DYING` bit, which `Directory::mark_dying` sets
    /// with a compare-and-swap without it.
    tag: AtomicU32,
    /// The object's zspage while live; the next free slot of the chunk
    /// (or `NIL`) while free.
    zspage: AtomicU32,
    obj: AtomicU16,
    /// Object length minus one (lengths are 1..=65536).
    len_m1: AtomicU16,
}

impl Entry {
    /// A free entry of generation `tag` whose free-list successor is `next`.
    fn free(tag: u32, next: u32) -> Entry {
        Entry {
            tag: AtomicU32::new(tag),
            zspage: AtomicU32::new(next),
            obj: AtomicU16::new(0),
            len_m1: AtomicU16::new(0),
        }
    }

    fn location(&self) -> Location {
        Location {
            zspage: self.zspage.load(Ordering::Relaxed),
            obj: self.obj.load(Ordering::Relaxed),
            len: usize::from(self.len_m1.load(Ordering::Relaxed)) + 1,
        }
    }

    fn set_place(&self, zspage: u32, obj: u16) {
        self.zspage.store(zspage, Ordering::Relaxed);
        self.obj.store(obj, Ordering::Relaxed);
    }

    /// The next free slot, while this one is free.
    fn next_free(&self) -> u32 {
        self.zspage.load(Ordering::Relaxed)
    }
}

/// Slots per chunk of a handle table (3 KiB of entries): small enough that
/// a class that shrinks gives its chunks back, large enough that the chunk
/// directory stays small.
const CHUNK_BITS: u32 = 8;
const CHUNK: usize = 1 << CHUNK_BITS;
const NIL: u32 = u32::MAX;

/// A chunk of slots with its own free list, threaded through the free
/// entries.
#[derive(Debug)]
struct Chunk {
    /// Shared, not boxed: a `Box` asserts unique ownership each time it
    /// moves, which would invalidate the directory's pointer into it.
    entries: Arc<[Entry]>,
    live: u32,
    free_head: u32,
}

/// Handle slots of one size class, protected by that class's lock.
///
/// Slots live in chunks of 256. A new object takes a slot in the lowest
/// chunk that has one, so live entries gather in low chunks; a chunk whose
/// last object is freed is released, so the table shrinks when the class
/// does. Generations survive a release: a chunk made again starts above the
/// highest generation it had, so old handles into it stay stale.
///
/// Invariants (checked by [`HandleTable::check`]): a present chunk's free
/// list holds exactly its entries that are not live, and `live` counts the
/// others; bit `c` of `with_room` is set exactly when chunk `c` is present
/// and has a free slot; no present chunk is empty; `live` is the sum over
/// chunks; no entry has generation 0.
#[derive(Debug)]
pub(crate) struct HandleTable {
    chunks: Vec<Option<Chunk>>,
    /// With deferred free: where the lock-free path finds each chunk's
    /// entries. Chunks are then never released (their entries must outlive
    /// any lock-free reader), which costs 3 KiB per chunk of peak use.
    directory: Option<std::sync::Arc<Directory>>,
    /// Per chunk: the generation its slots start from when it is made.
    base_gen: Vec<u32>,
    /// Bit per chunk: present with a free slot.
    with_room: Vec<u64>,
    /// Every word of `with_room` below this index is zero.
    room_hint: usize,
    live: usize,
}

fn next_generation(g: u32) -> u32 {
    let n = (g + 1) & GEN_MASK;
    if n == 0 { 1 } else { n }
}

fn split(slot: u32) -> (usize, usize) {
    ((slot >> CHUNK_BITS) as usize, slot as usize & (CHUNK - 1))
}

impl HandleTable {
    /// An empty table; with a directory, for pools with deferred free.
    pub(crate) fn new(directory: Option<std::sync::Arc<Directory>>) -> Self {
        HandleTable {
            chunks: Vec::new(),
            directory,
            base_gen: Vec::new(),
            with_room: Vec::new(),
            room_hint: 0,
            live: 0,
        }
    }

    fn set_room(&mut self, c: usize, room: bool) {
        let (w, b) = (c / 64, c % 64);
        if w >= self.with_room.len() {
            self.with_room.resize(w + 1, 0);
        }
        if room {
            self.with_room[w] |= 1 << b;
            self.room_hint = self.room_hint.min(w);
        } else {
            self.with_room[w] &= !(1 << b);
        }
    }

    fn lowest_with_room(&mut self) -> Option<usize> {
        let found = self.with_room[self.room_hint.min(self.with_room.len())..]
            .iter()
            .position(|w| *w != 0)
            .map(|i| i + self.room_hint);
        match found {
            Some(w) => {
                self.room_hint = w;
                Some(w * 64 + self.with_room[w].trailing_zeros() as usize)
            }
            None => {
                self.room_hint = self.with_room.len();
                None
            }
        }
    }

    /// Make chunk `c` (absent or new), all slots free.
    fn make_chunk(&mut self, c: usize) {
        if c == self.chunks.len() {
            self.chunks.push(None);
            self.base_gen.push(1);
        }
        let g = self.base_gen[c];
        let entries: Arc<[Entry]> = (0..CHUNK as u32)
            .map(|i| Entry::free(g, if i + 1 < CHUNK as u32 { i + 1 } else { NIL }))
            .collect();
        if let Some(d) = &self.directory {
            // The entries never move and, with a directory, are never freed
            // before the table.
            d.publish(c, Arc::as_ptr(&entries).cast::<Entry>());
        }
        self.chunks[c] = Some(Chunk {
            entries,
            live: 0,
            free_head: 0,
        });
        self.set_room(c, true);
    }

    /// Take a slot for a new object; returns the handle.
    pub(crate) fn insert(&mut self, class: usize, loc: Location) -> Result<Handle> {
        debug_assert!((1..=1 << 16).contains(&loc.len));
        let c = match self.lowest_with_room() {
            Some(c) => c,
            None => {
                let c = self
                    .chunks
                    .iter()
                    .position(Option::is_none)
                    .unwrap_or(self.chunks.len());
                if ((c as u64) << CHUNK_BITS) > SLOT_MASK {
                    return Err(Error::OsOutOfMemory {
                        bytes: 0,
                        reason: format!(
                            "handle table of class {class} is full (2^{SLOT_BITS} objects)"
                        ),
                    });
                }
                self.make_chunk(c);
                c
            }
        };
        let chunk = self.chunks[c].as_mut().expect("a chunk with room exists");
        let i = chunk.free_head as usize;
        let e = &chunk.entries[i];
        chunk.free_head = e.next_free();
        chunk.live += 1;
        let full = chunk.free_head == NIL;
        let generation = e.tag.load(Ordering::Relaxed) & GEN_MASK;
        e.set_place(loc.zspage, loc.obj);
        e.len_m1.store((loc.len - 1) as u16, Ordering::Relaxed);
        // Relaxed: the handle reaches other threads only through their own
        // synchronisation with this caller, which orders this store too.
        e.tag.store(generation | LIVE, Ordering::Relaxed);
        if full {
            self.set_room(c, false);
        }
        self.live += 1;
        Ok(Handle::new(
            class,
            ((c as u32) << CHUNK_BITS) | i as u32,
            generation,
        ))
    }

    fn entry(&self, slot: u32) -> Option<&Entry> {
        let (c, i) = split(slot);
        self.chunks.get(c)?.as_ref().map(|ch| &ch.entries[i])
    }

    /// Resolve a handle whose class has already been checked.
    pub(crate) fn get(&self, h: Handle) -> Result<Location> {
        let e = self.find(h)?;
        check_tag(h, e.tag.load(Ordering::Acquire), false)?;
        Ok(e.location())
    }

    /// Resolve a handle and mark it dying, for a free under the class lock:
    /// a lock-free deferred free racing for the same handle cannot also win.
    pub(crate) fn claim(&self, h: Handle) -> Result<Location> {
        let e = self.find(h)?;
        mark(e, h)?;
        Ok(e.location())
    }

    /// Resolve a handle that a deferred free marked dying (the drain's
    /// look-up): the entry must be live, dying and of this generation.
    pub(crate) fn get_dying(&self, h: Handle) -> Result<Location> {
        let e = self.find(h)?;
        check_tag(h, e.tag.load(Ordering::Acquire), true)?;
        Ok(e.location())
    }

    /// The entry a handle's slot names, before its tag is checked.
    fn find(&self, h: Handle) -> Result<&Entry> {
        if h.generation() == 0 {
            return Err(h.fault(HandleFault::Null));
        }
        let (c, i) = split(h.slot());
        match self.chunks.get(c) {
            None => Err(h.fault(HandleFault::UnknownSlot)),
            // Released: every object of the chunk was freed.
            Some(None) => Err(h.fault(HandleFault::Freed)),
            Some(Some(chunk)) => Ok(&chunk.entries[i]),
        }
    }

    /// Free a slot that `claim` (or `get_dying`) just resolved; release its
    /// chunk if that was the chunk's last object and the table has no
    /// directory.
    pub(crate) fn remove(&mut self, slot: u32) {
        let (c, i) = split(slot);
        let chunk = self.chunks[c]
            .as_mut()
            .expect("a live slot's chunk is present");
        let e = &chunk.entries[i];
        let tag = e.tag.load(Ordering::Relaxed);
        // Claimed: no lock-free mark can change a dying tag any more.
        debug_assert!(tag & LIVE != 0 && tag & DYING != 0);
        e.tag
            .store(next_generation(tag & GEN_MASK), Ordering::Release);
        e.zspage.store(chunk.free_head, Ordering::Relaxed);
        chunk.free_head = i as u32;
        chunk.live -= 1;
        self.live -= 1;
        if chunk.live == 0 && self.directory.is_none() {
            let max = chunk
                .entries
                .iter()
                .map(|e| e.tag.load(Ordering::Relaxed) & GEN_MASK)
                .max()
                .unwrap_or(0);
            self.base_gen[c] = next_generation(max);
            self.chunks[c] = None;
            self.set_room(c, false);
        } else {
            self.set_room(c, true);
        }
    }

    /// Point a live slot at the object's new place (compaction).
    pub(crate) fn relocate(&mut self, slot: u32, zspage: u32, obj: u16) {
        let (c, i) = split(slot);
        let e = &self.chunks[c].as_ref().expect("live slot").entries[i];
        debug_assert!(e.tag.load(Ordering::Relaxed) & LIVE != 0);
        e.set_place(zspage, obj);
    }

    /// The live entry of a slot, by slot number (for invariant checks).
    pub(crate) fn live_entry(&self, slot: u32) -> Option<Location> {
        let e = self.entry(slot)?;
        (e.tag.load(Ordering::Relaxed) & LIVE != 0).then(|| e.location())
    }

    pub(crate) fn live(&self) -> usize {
        self.live
    }

    /// Heap bytes the table holds.
    pub(crate) fn metadata_bytes(&self) -> usize {
        let present = self.chunks.iter().flatten().count();
        // Each chunk's entries, behind the `Arc`'s two counters.
        present * (CHUNK * std::mem::size_of::<Entry>() + 2 * std::mem::size_of::<usize>())
            + self.directory.as_ref().map_or(0, |d| d.metadata_bytes())
            + self.chunks.capacity() * std::mem::size_of::<Option<Chunk>>()
            + self.base_gen.capacity() * std::mem::size_of::<u32>()
            + self.with_room.capacity() * std::mem::size_of::<u64>()
    }

    /// Check the table's own invariants.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        let mut live = 0;
        for (c, chunk) in self.chunks.iter().enumerate() {
            let room_bit = self
                .with_room
                .get(c / 64)
                .is_some_and(|w| w & (1 << (c % 64)) != 0);
            let Some(chunk) = chunk else {
                if room_bit {
                    return Err(format!("released chunk {c} is marked as having room"));
                }
                continue;
            };
            let mut on_free = vec![false; CHUNK];
            let mut i = chunk.free_head;
            while i != NIL {
                let e = chunk
                    .entries
                    .get(i as usize)
                    .ok_or_else(|| format!("chunk {c}: free list leads to {i}"))?;
                if std::mem::replace(&mut on_free[i as usize], true) {
                    return Err(format!("chunk {c}: slot {i} is on the free list twice"));
                }
                if e.tag.load(Ordering::Relaxed) & LIVE != 0 {
                    return Err(format!("chunk {c}: slot {i} is live and on the free list"));
                }
                i = e.next_free();
            }
            let chunk_live = chunk
                .entries
                .iter()
                .filter(|e| e.tag.load(Ordering::Relaxed) & LIVE != 0)
                .count();
            let free = on_free.iter().filter(|&&f| f).count();
            if chunk_live != chunk.live as usize || chunk_live + free != CHUNK {
                return Err(format!(
                    "chunk {c}: {chunk_live} live entries, counter {}, {free} free",
                    chunk.live
                ));
            }
            if chunk_live == 0 && self.directory.is_none() {
                return Err(format!("chunk {c} is empty but was not released"));
            }
            if room_bit != (free > 0) {
                return Err(format!(
                    "chunk {c}: room bit {room_bit} with {free} free slots"
                ));
            }
            if let Some(i) = chunk
                .entries
                .iter()
                .position(|e| e.tag.load(Ordering::Relaxed) & GEN_MASK == 0)
            {
                return Err(format!("chunk {c}: slot {i} has generation 0"));
            }
            live += chunk_live;
        }
        if live != self.live {
            return Err(format!("{live} live entries, counter {}", self.live));
        }
        Ok(())
    }
}

/// Check an entry's tag against a handle: live, of the handle's
/// generation, and dying exactly when `dying` (a dying handle is dead for
/// every caller but the drain).
fn check_tag(h: Handle, tag: u32, dying: bool) -> Result<()> {
    let g = h.generation();
    if g == 0 {
        return Err(h.fault(HandleFault::Null));
    }
    let current = tag & GEN_MASK;
    if tag & LIVE == 0 {
        // The slot's generation moved on when it was freed.
        let fault = if next_generation(g) == current {
            HandleFault::Freed
        } else {
            HandleFault::Stale
        };
        return Err(h.fault(fault));
    }
    if current != g {
        return Err(h.fault(HandleFault::Stale));
    }
    if (tag & DYING != 0) != dying {
        let fault = if dying {
            HandleFault::Stale
        } else {
            HandleFault::Freed
        };
        return Err(h.fault(fault));
    }
    Ok(())
}

/// Set `DYING` on `e` if it is live, of `h`'s generation and not dying yet.
/// Every free goes through here (the locked one too), so of any number of
/// racing frees of one handle exactly one succeeds.
fn mark(e: &Entry, h: Handle) -> Result<()> {
    let mut tag = e.tag.load(Ordering::Acquire);
    loop {
        check_tag(h, tag, false)?;
        // AcqRel: the drain that later frees this slot learns of the mark
        // through the deferred-free shard (Release/Acquire there); ordering
        // here keeps the mark and the tag's history coherent for anyone who
        // reads the tag directly.
        match e
            .tag
            .compare_exchange_weak(tag, tag | DYING, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return Ok(()),
            Err(now) => tag = now,
        }
    }
}

/// Segments of the directory: segment `k` holds `2^k` chunk pointers,
/// enough for every chunk a 30-bit slot field can name.
const SEGMENTS: usize = (SLOT_BITS - CHUNK_BITS) as usize + 1;

/// A lock-free map from chunk number to that chunk's entries, for the
/// deferred-free path, which marks entries without the class lock.
///
/// It only grows: segments (of 1, 2, 4, ... pointers) are allocated under
/// the class lock and never moved; chunks published here are never freed
/// before the directory's table. So a pointer read here stays valid for as
/// long as the pool lives, which is what makes the lock-free read sound.
///
/// Orderings: `publish` stores with `Release` after the entries are
/// initialised; `mark_dying` loads with `Acquire`, so it sees initialised
/// entries whenever it sees the pointer.
pub(crate) struct Directory {
    segments: [AtomicPtr<AtomicPtr<Entry>>; SEGMENTS],
}

impl std::fmt::Debug for Directory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Directory").finish_non_exhaustive()
    }
}

impl Default for Directory {
    fn default() -> Self {
        Directory {
            segments: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
        }
    }
}

/// Segment and offset of chunk `c`.
fn locate(c: usize) -> (usize, usize) {
    let n = c + 1;
    let k = (usize::BITS - 1 - n.leading_zeros()) as usize;
    (k, n - (1 << k))
}

impl Directory {
    /// Make chunk `c`'s entries findable. Called under the class lock (one
    /// publisher at a time).
    fn publish(&self, c: usize, entries: *const Entry) {
        let (k, off) = locate(c);
        let mut seg = self.segments[k].load(Ordering::Acquire);
        if seg.is_null() {
            let fresh: Box<[AtomicPtr<Entry>]> = (0..1usize << k)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect();
            seg = Box::into_raw(fresh).cast::<AtomicPtr<Entry>>();
            self.segments[k].store(seg, Ordering::Release);
        }
        // SAFETY: segment `k` has `2^k` pointers and `off < 2^k`; it is never
        // freed before `self`.
        let slot = unsafe { &*seg.add(off) };
        slot.store(entries.cast_mut(), Ordering::Release);
    }

    /// The entry of `slot`, if its chunk was ever made.
    fn entry(&self, slot: u32) -> Option<&Entry> {
        let (c, i) = split(slot);
        let (k, off) = locate(c);
        let seg = self.segments.get(k)?.load(Ordering::Acquire);
        if seg.is_null() {
            return None;
        }
        // SAFETY: as in `publish`: in bounds, and alive as long as `self`.
        let entries = unsafe { &*seg.add(off) }.load(Ordering::Acquire);
        if entries.is_null() {
            return None;
        }
        // SAFETY: a published chunk has `CHUNK` initialised entries (the
        // `Acquire` above pairs with `publish`'s `Release`), `i < CHUNK`, and
        // it is not freed while the directory lives.
        Some(unsafe { &*entries.add(i) })
    }

    /// Mark a live handle dying, without the class lock: the deferred free's
    /// first step. Exactly one of any number of racing marks (or a mark and
    /// a locked free) of one handle wins; the others get the error a freed
    /// handle gets.
    pub(crate) fn mark_dying(&self, h: Handle) -> Result<()> {
        let e = self
            .entry(h.slot())
            .ok_or_else(|| h.fault(HandleFault::UnknownSlot))?;
        mark(e, h)
    }

    fn metadata_bytes(&self) -> usize {
        (0..SEGMENTS)
            .filter(|&k| !self.segments[k].load(Ordering::Relaxed).is_null())
            .map(|k| (1usize << k) * std::mem::size_of::<AtomicPtr<Entry>>())
            .sum()
    }
}

impl Drop for Directory {
    fn drop(&mut self) {
        for (k, seg) in self.segments.iter().enumerate() {
            let p = seg.load(Ordering::Relaxed);
            if !p.is_null() {
                // SAFETY: made by `Box::into_raw` of a `2^k` slice in
                // `publish`, freed only here.
                drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(p, 1 << k)) });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(len: usize) -> Location {
        Location {
            zspage: 3,
            obj: 7,
            len,
        }
    }

    #[test]
    fn encoding_round_trips_and_is_never_zero() {
        let h = Handle::new(4094, (1 << 30) - 1, GEN_MASK);
        assert_eq!(
            (h.class(), h.slot(), h.generation()),
            (4094, (1 << 30) - 1, GEN_MASK)
        );
        let h = Handle::new(0, 0, 1);
        assert_ne!(h.to_raw(), 0);
    }

    #[test]
    fn stale_double_free_and_forged_are_told_apart() {
        let mut t = HandleTable::new(None);
        let a = t.insert(5, loc(100)).unwrap();
        assert_eq!(t.get(a).unwrap(), loc(100));
        t.claim(a).unwrap();
        t.remove(a.slot());
        let fault = |r: Result<Location>| match r {
            Err(Error::InvalidHandle { fault, .. }) => fault,
            other => panic!("expected an invalid handle, got {other:?}"),
        };
        assert_eq!(fault(t.get(a)), HandleFault::Freed);
        let b = t.insert(5, loc(65536)).unwrap();
        assert_eq!(b.slot(), a.slot());
        assert_eq!(t.get(b).unwrap().len, 65536);
        assert_eq!(fault(t.get(a)), HandleFault::Stale);
        assert_eq!(fault(t.get(Handle::from_raw(0))), HandleFault::Null);
        assert_eq!(
            fault(t.get(Handle::new(5, 99 << CHUNK_BITS, 1))),
            HandleFault::UnknownSlot
        );
        t.check().unwrap();
    }

    #[test]
    fn empty_chunks_are_released_and_old_handles_stay_stale() {
        let mut t = HandleTable::new(None);
        let hs: Vec<Handle> = (0..3 * CHUNK)
            .map(|_| t.insert(1, loc(10)).unwrap())
            .collect();
        assert_eq!(t.chunks.iter().flatten().count(), 3);
        let before = t.metadata_bytes();
        // Free the middle chunk entirely: it goes away.
        for h in &hs[CHUNK..2 * CHUNK] {
            t.claim(*h).unwrap();
            t.remove(h.slot());
        }
        t.check().unwrap();
        assert_eq!(t.chunks.iter().flatten().count(), 2);
        assert!(t.metadata_bytes() < before);
        let fault = |r: Result<Location>| match r {
            Err(Error::InvalidHandle { fault, .. }) => fault,
            other => panic!("expected an invalid handle, got {other:?}"),
        };
        assert_eq!(fault(t.get(hs[CHUNK + 5])), HandleFault::Freed);
        // Free one slot in the first chunk: new objects go there first.
        t.claim(hs[7]).unwrap();
        t.remove(hs[7].slot());
        let n = t.insert(1, loc(20)).unwrap();
        assert_eq!(n.slot(), hs[7].slot());
        // Then the released chunk is made again; old handles into it are stale.
        let m = t.insert(1, loc(30)).unwrap();
        assert_eq!(m.slot() >> CHUNK_BITS, 1);
        assert!(
            t.get(hs[CHUNK + (m.slot() as usize & (CHUNK - 1))])
                .is_err()
        );
        assert_eq!(t.get(m).unwrap().len, 30);
        t.check().unwrap();
    }

    #[test]
    fn dying_handles_are_dead_to_all_but_the_drain() {
        let d = std::sync::Arc::new(Directory::default());
        let mut t = HandleTable::new(Some(d.clone()));
        let hs: Vec<Handle> = (0..CHUNK + 3)
            .map(|_| t.insert(2, loc(10)).unwrap())
            .collect();
        let fault = |r: Result<Location>| match r {
            Err(Error::InvalidHandle { fault, .. }) => fault,
            other => panic!("expected an invalid handle, got {other:?}"),
        };
        let h = hs[CHUNK + 1];
        d.mark_dying(h).unwrap();
        // Dead at once: a second free (deferred or locked) and a read fail.
        assert!(matches!(
            d.mark_dying(h),
            Err(Error::InvalidHandle {
                fault: HandleFault::Freed,
                ..
            })
        ));
        assert_eq!(fault(t.claim(h)), HandleFault::Freed);
        assert_eq!(fault(t.get(h)), HandleFault::Freed);
        // The drain finds it; a live, unmarked handle is not the drain's.
        assert_eq!(t.get_dying(h).unwrap(), loc(10));
        assert_eq!(fault(t.get_dying(hs[0])), HandleFault::Stale);
        t.remove(h.slot());
        assert_eq!(fault(t.get(h)), HandleFault::Freed);
        assert!(d.mark_dying(h).is_err());
        // Forged handles: unknown chunk, wrong generation.
        assert!(matches!(
            d.mark_dying(Handle::new(2, 40 << CHUNK_BITS, 1)),
            Err(Error::InvalidHandle {
                fault: HandleFault::UnknownSlot,
                ..
            })
        ));
        assert!(d.mark_dying(Handle::new(2, hs[3].slot(), 7)).is_err());
        // With a directory, an emptied chunk stays (lock-free readers may
        // still look at it).
        for &h in &hs {
            if h != hs[CHUNK + 1] {
                t.claim(h).unwrap();
                t.remove(h.slot());
            }
        }
        assert_eq!(t.chunks.iter().flatten().count(), 2);
        t.check().unwrap();
        assert!(t.metadata_bytes() > 2 * CHUNK * std::mem::size_of::<Entry>());
    }

    #[test]
    fn directory_segments_cover_every_chunk() {
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(1), (1, 0));
        assert_eq!(locate(2), (1, 1));
        assert_eq!(locate(6), (2, 3));
        let last = (1usize << (SLOT_BITS - CHUNK_BITS)) - 1;
        assert!(locate(last).0 < SEGMENTS);
    }

    #[test]
    fn generation_wraps_past_zero() {
        assert_eq!(next_generation(GEN_MASK), 1);
        assert_eq!(next_generation(1), 2);
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A deferred free (lock-free mark) races a free under the class lock
    /// and another deferred free of the same handle: exactly one wins, and
    /// the losers see the error a freed handle gets.
    #[test]
    fn loom_racing_frees_of_one_handle_one_wins() {
        loom::model(|| {
            let d = Arc::new(Directory::default());
            let mut t = HandleTable::new(Some(d.clone()));
            let h = t
                .insert(
                    0,
                    Location {
                        zspage: 0,
                        obj: 0,
                        len: 8,
                    },
                )
                .unwrap();
            let t = Arc::new(Mutex::new(t));
            let marker = {
                let d = d.clone();
                loom::thread::spawn(move || d.mark_dying(h).is_ok())
            };
            let marker2 = {
                let d = d.clone();
                loom::thread::spawn(move || d.mark_dying(h).is_ok())
            };
            let locked = {
                let t = t.clone();
                loom::thread::spawn(move || {
                    let mut t = t.lock().unwrap();
                    match t.claim(h) {
                        Ok(_) => {
                            t.remove(h.slot());
                            true
                        }
                        Err(_) => false,
                    }
                })
            };
            let wins = [marker, marker2, locked]
                .into_iter()
                .map(|j| j.join().unwrap())
                .filter(|&won| won)
                .count();
            assert_eq!(wins, 1);
        });
    }
}
