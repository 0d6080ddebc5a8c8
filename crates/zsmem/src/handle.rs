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
    zspage: u32,
    obj: u16,
    /// Object length minus one (lengths are 1..=65536).
    len_m1: u16,
}

/// Handle slots of one size class, protected by that class's lock.
///
/// Invariants: a slot is on `free` exactly when its entry is not live;
/// `live` counts live entries.
#[derive(Debug, Default)]
pub(crate) struct HandleTable {
    entries: Vec<Entry>,
    free: Vec<u32>,
    live: usize,
}

fn next_generation(g: u32) -> u32 {
    let n = (g + 1) & GEN_MASK;
    if n == 0 { 1 } else { n }
}

impl HandleTable {
    /// Take a slot for a new object; returns the handle.
    pub(crate) fn insert(&mut self, class: usize, loc: Location) -> Result<Handle> {
        debug_assert!((1..=1 << 16).contains(&loc.len));
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                if self.entries.len() as u64 > SLOT_MASK {
                    return Err(Error::OsOutOfMemory {
                        bytes: 0,
                        reason: format!(
                            "handle table of class {class} is full (2^{SLOT_BITS} objects)"
                        ),
                    });
                }
                self.entries.push(Entry {
                    tag: 1,
                    zspage: 0,
                    obj: 0,
                    len_m1: 0,
                });
                (self.entries.len() - 1) as u32
            }
        };
        let e = &mut self.entries[slot as usize];
        let generation = e.tag & GEN_MASK;
        *e = Entry {
            tag: generation | LIVE,
            zspage: loc.zspage,
            obj: loc.obj,
            len_m1: (loc.len - 1) as u16,
        };
        self.live += 1;
        Ok(Handle::new(class, slot, generation))
    }

    /// Resolve a handle whose class has already been checked.
    pub(crate) fn get(&self, h: Handle) -> Result<Location> {
        let g = h.generation();
        if g == 0 {
            return Err(h.fault(HandleFault::Null));
        }
        let e = self
            .entries
            .get(h.slot() as usize)
            .ok_or_else(|| h.fault(HandleFault::UnknownSlot))?;
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

    /// Free a slot that `get` just resolved.
    pub(crate) fn remove(&mut self, slot: u32) {
        let e = &mut self.entries[slot as usize];
        debug_assert!(e.tag & LIVE != 0);
        e.tag = next_generation(e.tag & GEN_MASK);
        self.free.push(slot);
        self.live -= 1;
    }

    /// Point a live slot at the object's new place (compaction).
    pub(crate) fn relocate(&mut self, slot: u32, zspage: u32, obj: u16) {
        let e = &mut self.entries[slot as usize];
        debug_assert!(e.tag & LIVE != 0);
        e.zspage = zspage;
        e.obj = obj;
    }

    /// The live entry of a slot, by slot number (for invariant checks).
    pub(crate) fn live_entry(&self, slot: u32) -> Option<Location> {
        let e = self.entries.get(slot as usize)?;
        (e.tag & LIVE != 0).then(|| Location {
            zspage: e.zspage,
            obj: e.obj,
            len: usize::from(e.len_m1) + 1,
        })
    }

    pub(crate) fn live(&self) -> usize {
        self.live
    }

    pub(crate) fn slots(&self) -> usize {
        self.entries.len()
    }

    /// Heap bytes the table holds.
    pub(crate) fn metadata_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<Entry>()
            + self.free.capacity() * std::mem::size_of::<u32>()
    }

    /// Check the table's own invariants.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        let mut on_free = vec![false; self.entries.len()];
        for &s in &self.free {
            let s = s as usize;
            if s >= self.entries.len() {
                return Err(format!(
                    "free slot {s} beyond table of {}",
                    self.entries.len()
                ));
            }
            if std::mem::replace(&mut on_free[s], true) {
                return Err(format!("slot {s} is on the free list twice"));
            }
            if self.entries[s].tag & LIVE != 0 {
                return Err(format!("slot {s} is live and on the free list"));
            }
        }
        let live = self.entries.iter().filter(|e| e.tag & LIVE != 0).count();
        if live != self.live || live + self.free.len() != self.entries.len() {
            return Err(format!(
                "handle table counts: {live} live entries, counter {}, {} free of {}",
                self.live,
                self.free.len(),
                self.entries.len()
            ));
        }
        if let Some((i, _)) = self
            .entries
            .iter()
            .enumerate()
            .find(|(_, e)| e.tag & GEN_MASK == 0)
        {
            return Err(format!("slot {i} has generation 0"));
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
            fault(t.get(Handle::new(5, 99, 1))),
            HandleFault::UnknownSlot
        );
        t.check().unwrap();
    }

    #[test]
    fn generation_wraps_past_zero() {
        assert_eq!(next_generation(GEN_MASK), 1);
        assert_eq!(next_generation(1), 2);
    }
}
