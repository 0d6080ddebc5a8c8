//! Handles and the per-class handle table.
//!
//! A [`Handle`] is an opaque `u64` that names an object for as long as it
//! lives, wherever compaction moves it. Bit by bit:
//!
//! ```text
//!  63 62      55 54          41 40        29 28                    0
//! +--+----------+--------------+------------+-----------------------+
//! |0 | tag (8)  | generation   | class (12) | slot (29)             |
//! |  |          |    (14)      |            |                       |
//! +--+----------+--------------+------------+-----------------------+
//! ```
//!
//! - `tag` names the pool (1..=255, unique among live pools: [`PoolTag`]).
//!   A pool refuses a handle whose tag is not its own before it looks at
//!   anything else, with one compare of bits 55..64; bit 63 is spare, 0 in
//!   every handle, and read with the tag, so a handle with it set is
//!   refused by the same compare.
//! - `class` is the index of the physical size class holding the object. It
//!   never changes (compaction moves objects only within their class), so a
//!   free finds its class lock from the handle alone, with no pool-wide lock.
//! - `slot` indexes that class's handle table; the entry there says which
//!   zspage and which object index hold the bytes, and the object's length.
//! - `generation` is never 0 (so no handle is 0) and goes up by one every
//!   time the slot is freed; a stale handle, a double free or a forged value
//!   is caught by comparing it with the entry's generation. It never wraps:
//!   a slot whose generation would pass [`MAX_GENERATION`] is *retired*,
//!   never handed out again. A chunk of slots made again after its release
//!   starts every slot above the highest generation any slot of the chunk
//!   ever had, and a chunk index whose next start would pass the maximum is
//!   retired too. So no (slot, generation) pair is ever handed out twice: a
//!   stale handle is refused for as long as the pool lives.
//!
//! Each slot of the table is one 8-byte entry, a single atomic word:
//!
//! ```text
//!  63   62    61        48 47          32 31                             0
//! +----+-----+------------+--------------+--------------------------------+
//! |LIVE|DYING| generation | len - 1 (16) | place (32)                     |
//! |    |     |    (14)    |              |                                |
//! +----+-----+------------+--------------+--------------------------------+
//!  live entry:    place = zspage << obj_bits | obj
//!  free entry:    place = next free slot of the chunk (or NIL); LIVE,
//!                 DYING, len - 1 are 0; generation is the next object's
//!  retired entry: the word 0 (generation 0): on no free list, never
//!                 handed out again
//!  parked entry:  LIVE 0, bit 62 set (`PARKED`), place = the freed
//!                 object's; generation is the next object's; on no free
//!                 list: the slot and its place wait for the class's next
//!                 allocation (see `HandleTable::park`); in a class whose
//!                 frees park slots in threads' magazines (`magazine.rs`)
//!                 every parked entry is a magazine's, and keeps the freed
//!                 object's len - 1
//!  reviving:      LIVE and DYING set, in a class with magazines (where no
//!                 deferred free marks entries): a magazine's thread took
//!                 the parked slot and is writing the new object (its
//!                 generation and length are the entry's); it becomes live
//!                 when written. Dead to every caller meanwhile.
//! ```
//!
//! In a class with magazines, entries change without the class lock by
//! compare-and-swap: live to parked (a free), parked to reviving or live
//! (an allocation); and the lock's holder takes a parked entry back to
//! free by compare-and-swap too, claims a live one for a locked free by
//! compare-and-swap, and moves a live object only by compare-and-swap
//! from the live word it read (`HandleTable::relocate_live`). So of a
//! magazine and the lock's holder exactly one gets a parked slot, and of
//! two frees of one handle exactly one wins (loom models in
//! `loom_models.rs`).
//!
//! `obj_bits` is fixed per table (the class's `ceil(log2(objs per zspage))`,
//! 1..=16), so a class can name `2^(32 - obj_bits)` zspages
//! ([`HandleTable::max_zspages`]).
//!
//! The state bits (`LIVE`, `DYING`, generation) are what a deferred free
//! reads and changes without the class lock (see `deferred.rs`): through
//! the [`Directory`], a lock-free map from chunk number to the chunk's
//! entries, which pools with deferred free keep, it sets `DYING` by a
//! compare-and-swap of the whole word, after checking the handle's pool
//! tag against the directory's. Everything else about an entry is
//! written under the class lock only, and every such write either finds the
//! entry free (no lock-free mark changes a free word) or is itself a
//! read-modify-write, so a concurrently set `DYING` bit is never lost.
//!
//! | file | concern |
//! |---|---|
//! | `mod.rs` | the handle's bits and the entry word's, [`Handle`], [`Location`] |
//! | `tag.rs` | [`PoolTag`]: the tag each live pool holds |
//! | `entry.rs` | one entry: its word's encodings, the check of a handle against it, the dying mark |
//! | `table.rs` | [`HandleTable`]: chunks, free lists, generations, parked slots; `table/check.rs` its invariants |
//! | `directory.rs` | [`Directory`]: the lock-free map deferred free marks entries through |
//! | `tests.rs`, `loom_models.rs` | unit tests; loom models of the dying mark and of the magazines' changes |

mod directory;
mod entry;
mod table;
mod tag;

pub(crate) use directory::Directory;
pub(crate) use entry::Entry;
pub(crate) use table::{HandleTable, Held};
pub(crate) use tag::PoolTag;

use crate::error::{Error, HandleFault, Result};

/// Bits of the slot field.
pub const SLOT_BITS: u32 = 29;
/// Bits of the class field (64 KiB pages with 16-byte delta need 4095 classes).
pub const CLASS_BITS: u32 = 12;
/// Bits of the generation field, in a handle and in an entry alike.
pub const GEN_BITS: u32 = 14;
/// Bits of the pool tag; [`PoolTag`]s are `1..=MAX_POOLS`.
pub const TAG_BITS: u32 = 8;
/// The highest generation; a slot that reached it is retired when freed.
pub const MAX_GENERATION: u32 = (1 << GEN_BITS) - 1;
/// Most pools alive at once in a process: one per non-zero tag.
pub const MAX_POOLS: usize = (1 << TAG_BITS) - 1;

const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
const CLASS_MASK: u64 = (1 << CLASS_BITS) - 1;
const HANDLE_GEN_SHIFT: u32 = SLOT_BITS + CLASS_BITS;
/// The tag's place in a handle; bits from here up are the tag and the spare
/// bit, compared with the pool's tag as one value.
const TAG_SHIFT: u32 = HANDLE_GEN_SHIFT + GEN_BITS;
// One bit spare, above the tag.
const _: () = assert!(TAG_SHIFT + TAG_BITS == 63);

/// Set while an object owns the slot.
const LIVE: u64 = 1 << 63;
/// Set on a live entry whose object a deferred free has taken: the handle is
/// dead for every caller; the slot is freed when its batch is drained.
const DYING: u64 = 1 << 62;
/// The same bit on an entry that is not live: the entry is parked. Its
/// object was freed (the handle is dead, as for a free entry: the
/// generation moved on), but the slot keeps the object's place for the
/// class's next allocation. No lock-free mark changes it (a mark changes
/// only live words).
const PARKED: u64 = DYING;
const GEN_SHIFT: u32 = 48;
const LEN_SHIFT: u32 = 32;
const PLACE_MASK: u64 = (1 << LEN_SHIFT) - 1;
const _: () = assert!(GEN_SHIFT + GEN_BITS == 62);
/// A retired entry: not live, generation 0.
const RETIRED: u64 = 0;

/// An opaque reference to an object in a [`Pool`](crate::Pool).
///
/// Copyable and cheap; it stays valid across compaction until the object is
/// freed. Using it after that, however often its slot has been reused since,
/// is an error, never another object's data; so is using it with another
/// pool.
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

    /// A handle with tag 0, as a handle table makes it: the pool gives it
    /// its tag ([`Handle::tagged`]) before handing it out.
    pub(crate) fn new(class: usize, slot: u32, generation: u32) -> Handle {
        debug_assert!((class as u64) <= CLASS_MASK);
        debug_assert!(u64::from(slot) <= SLOT_MASK);
        debug_assert!(generation != 0 && generation <= MAX_GENERATION);
        Handle(
            (u64::from(generation) << HANDLE_GEN_SHIFT)
                | ((class as u64) << SLOT_BITS)
                | u64::from(slot),
        )
    }

    /// The handle with pool tag `tag` (its tag was 0).
    pub(crate) fn tagged(self, tag: u8) -> Handle {
        debug_assert_eq!(self.0 >> TAG_SHIFT, 0);
        Handle(self.0 | u64::from(tag) << TAG_SHIFT)
    }

    /// Refuse a handle that is not tagged `tag` (or whose spare bit is set):
    /// the first check of every use, one compare.
    pub(crate) fn check_pool(self, tag: u8) -> Result<()> {
        if self.0 >> TAG_SHIFT == u64::from(tag) {
            return Ok(());
        }
        Err(self.fault(if self.0 == 0 {
            HandleFault::Null
        } else {
            HandleFault::ForeignPool
        }))
    }

    /// Index of the size class the handle claims.
    pub(crate) fn class(self) -> usize {
        ((self.0 >> SLOT_BITS) & CLASS_MASK) as usize
    }

    pub(crate) fn slot(self) -> u32 {
        (self.0 & SLOT_MASK) as u32
    }

    pub(crate) fn generation(self) -> u32 {
        (self.0 >> HANDLE_GEN_SHIFT) as u32 & MAX_GENERATION
    }

    pub(crate) fn fault(self, fault: HandleFault) -> Error {
        Error::InvalidHandle {
            handle: self.0,
            fault,
        }
    }
}

/// For a lock-free read: the place and length of `h`'s object if `word`
/// (its slot's entry) holds it: live, not dying, of its generation.
pub(crate) fn live_place(h: Handle, word: u64) -> Option<(u32, usize)> {
    (word & (LIVE | DYING) == LIVE && entry::generation_of(word) == h.generation())
        .then(|| (entry::place_of(word), entry::len_of(word)))
}

/// Slots per chunk of a handle table (512 bytes of entries): small enough
/// that the chunks left partly used where a class freed a range cost little,
/// and that a class that shrinks gives its chunks back; large enough that
/// the chunk vector and the directory stay small (a few bytes a chunk).
const CHUNK_BITS: u32 = 6;
const CHUNK: usize = 1 << CHUNK_BITS;

/// A slot's chunk and its index in the chunk.
fn split(slot: u32) -> (usize, usize) {
    ((slot >> CHUNK_BITS) as usize, slot as usize & (CHUNK - 1))
}

/// Where a live object is: its zspage, its index there, its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Location {
    pub(crate) zspage: u32,
    pub(crate) obj: u16,
    pub(crate) len: usize,
}

impl Location {
    /// A write of `len` bytes at `offset` must fit the object.
    pub(crate) fn check_write(&self, offset: usize, len: usize) -> crate::error::Result<()> {
        if offset.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(crate::error::Error::WriteTooLong {
                len,
                offset,
                object_len: self.len,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

#[cfg(all(test, loom))]
mod loom_models;
