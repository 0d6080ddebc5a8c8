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

use crate::error::{Error, HandleFault, Result};

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
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// Generation in the low bits; `LIVE` set while an object owns the slot.
    tag: u32,
    /// The object's zspage while live; the next free slot of the chunk
    /// (or `NIL`) while free.
    zspage: u32,
    obj: u16,
    /// Object length minus one (lengths are 1..=65536).
    len_m1: u16,
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
    entries: Box<[Entry]>,
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
#[derive(Debug, Default)]
pub(crate) struct HandleTable {
    chunks: Vec<Option<Chunk>>,
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
        let entries = (0..CHUNK as u32)
            .map(|i| Entry {
                tag: g,
                zspage: if i + 1 < CHUNK as u32 { i + 1 } else { NIL },
                obj: 0,
                len_m1: 0,
            })
            .collect();
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
        let e = &mut chunk.entries[i];
        chunk.free_head = e.zspage;
        chunk.live += 1;
        let full = chunk.free_head == NIL;
        let generation = e.tag & GEN_MASK;
        *e = Entry {
            tag: generation | LIVE,
            zspage: loc.zspage,
            obj: loc.obj,
            len_m1: (loc.len - 1) as u16,
        };
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
        let g = h.generation();
        if g == 0 {
            return Err(h.fault(HandleFault::Null));
        }
        let (c, _) = split(h.slot());
        let e = match self.chunks.get(c) {
            None => return Err(h.fault(HandleFault::UnknownSlot)),
            // Released: every object of the chunk was freed.
            Some(None) => return Err(h.fault(HandleFault::Freed)),
            Some(Some(_)) => self.entry(h.slot()).expect("present chunk"),
        };
        let current = e.tag & GEN_MASK;
        if e.tag & LIVE == 0 {
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
        Ok(Location {
            zspage: e.zspage,
            obj: e.obj,
            len: usize::from(e.len_m1) + 1,
        })
    }

    /// Free a slot that `get` just resolved; release its chunk if that was
    /// the chunk's last object.
    pub(crate) fn remove(&mut self, slot: u32) {
        let (c, i) = split(slot);
        let chunk = self.chunks[c]
            .as_mut()
            .expect("a live slot's chunk is present");
        let e = &mut chunk.entries[i];
        debug_assert!(e.tag & LIVE != 0);
        e.tag = next_generation(e.tag & GEN_MASK);
        e.zspage = chunk.free_head;
        chunk.free_head = i as u32;
        chunk.live -= 1;
        self.live -= 1;
        if chunk.live == 0 {
            let max = chunk
                .entries
                .iter()
                .map(|e| e.tag & GEN_MASK)
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
        let e = &mut self.chunks[c].as_mut().expect("live slot").entries[i];
        debug_assert!(e.tag & LIVE != 0);
        e.zspage = zspage;
        e.obj = obj;
    }

    /// The live entry of a slot, by slot number (for invariant checks).
    pub(crate) fn live_entry(&self, slot: u32) -> Option<Location> {
        let e = self.entry(slot)?;
        (e.tag & LIVE != 0).then(|| Location {
            zspage: e.zspage,
            obj: e.obj,
            len: usize::from(e.len_m1) + 1,
        })
    }

    pub(crate) fn live(&self) -> usize {
        self.live
    }

    /// Heap bytes the table holds.
    pub(crate) fn metadata_bytes(&self) -> usize {
        let present = self.chunks.iter().flatten().count();
        present * CHUNK * std::mem::size_of::<Entry>()
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
                if e.tag & LIVE != 0 {
                    return Err(format!("chunk {c}: slot {i} is live and on the free list"));
                }
                i = e.zspage;
            }
            let chunk_live = chunk.entries.iter().filter(|e| e.tag & LIVE != 0).count();
            let free = on_free.iter().filter(|&&f| f).count();
            if chunk_live != chunk.live as usize || chunk_live + free != CHUNK {
                return Err(format!(
                    "chunk {c}: {chunk_live} live entries, counter {}, {free} free",
                    chunk.live
                ));
            }
            if chunk_live == 0 {
                return Err(format!("chunk {c} is empty but was not released"));
            }
            if room_bit != (free > 0) {
                return Err(format!(
                    "chunk {c}: room bit {room_bit} with {free} free slots"
                ));
            }
            if let Some(i) = chunk.entries.iter().position(|e| e.tag & GEN_MASK == 0) {
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
        let mut t = HandleTable::default();
        let a = t.insert(5, loc(100)).unwrap();
        assert_eq!(t.get(a).unwrap(), loc(100));
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
        let mut t = HandleTable::default();
        let hs: Vec<Handle> = (0..3 * CHUNK)
            .map(|_| t.insert(1, loc(10)).unwrap())
            .collect();
        assert_eq!(t.chunks.iter().flatten().count(), 3);
        let before = t.metadata_bytes();
        // Free the middle chunk entirely: it goes away.
        for h in &hs[CHUNK..2 * CHUNK] {
            t.get(*h).unwrap();
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
    fn generation_wraps_past_zero() {
        assert_eq!(next_generation(GEN_MASK), 1);
        assert_eq!(next_generation(1), 2);
    }
}
