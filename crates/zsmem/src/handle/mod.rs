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
//!                 allocation (see `HandleTable::park`)
//! ```
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

use std::ptr;

use crate::error::{Error, HandleFault, Result};
use std::sync::Arc;

use crate::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

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

/// Tags of the live pools of this process: bit `t` of `taken` is set while
/// a pool holds tag `t` (tag 0 is never given). A plain mutex: it is taken
/// only when a pool is made or dropped.
struct TagRegistry {
    taken: [u64; 4],
    /// The tag given last: the search for a free one starts after it, so a
    /// dropped pool's tag is given again only after every other free one.
    last: u8,
}

static TAGS: std::sync::Mutex<TagRegistry> = std::sync::Mutex::new(TagRegistry {
    taken: [0; 4],
    last: 0,
});

fn tags() -> std::sync::MutexGuard<'static, TagRegistry> {
    // Nothing panics while the registry is locked; a poisoned lock still
    // guards consistent bits.
    TAGS.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A pool's tag (`1..=MAX_POOLS`), unique among the live pools of the
/// process, held for the pool's life and given back on drop. Every handle
/// the pool hands out carries it, so a handle of another pool is refused.
#[derive(Debug)]
pub(crate) struct PoolTag(u8);

impl PoolTag {
    /// The next free tag after the one given last, or
    /// [`Error::TooManyPools`] if all are taken.
    pub(crate) fn acquire() -> Result<PoolTag> {
        let mut r = tags();
        let start = usize::from(r.last);
        for step in 0..MAX_POOLS {
            // Runs through start + 1, ..., MAX_POOLS, 1, ..., start.
            let t = (start + step) % MAX_POOLS + 1;
            let (w, b) = (t / 64, t % 64);
            if r.taken[w] & (1 << b) == 0 {
                r.taken[w] |= 1 << b;
                r.last = t as u8;
                return Ok(PoolTag(t as u8));
            }
        }
        Err(Error::TooManyPools { max: MAX_POOLS })
    }

    pub(crate) fn get(&self) -> u8 {
        self.0
    }
}

impl Drop for PoolTag {
    fn drop(&mut self) {
        let t = usize::from(self.0);
        tags().taken[t / 64] &= !(1 << (t % 64));
    }
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

/// One slot of a handle table: the word drawn in the module comment.
///
/// Atomic, and only ever reached through a shared reference: the
/// deferred-free path reads and marks the word through the directory while
/// the class lock's holder updates it, and a `&mut Entry` would claim it
/// exclusively (undefined behaviour beside a concurrent reader, as Miri
/// reports). Accesses under the class lock that order nothing beyond the
/// lock are `Relaxed`: plain loads and stores on x86 and ARM.
#[derive(Debug)]
struct Entry {
    word: AtomicU64,
}

// The point of the layout: 8 bytes a slot (loom's atomics are larger).
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Entry>() == 8);

impl Entry {
    /// A free entry of generation `generation` whose free-list successor is
    /// `next`.
    fn free(generation: u32, next: u32) -> Entry {
        Entry {
            word: AtomicU64::new(free_word(generation, next)),
        }
    }
}

/// The word of a free entry.
fn free_word(generation: u32, next: u32) -> u64 {
    debug_assert!(generation != 0 && generation <= MAX_GENERATION);
    (u64::from(generation) << GEN_SHIFT) | u64::from(next)
}

/// The word of a live entry (not dying).
fn live_word(generation: u32, len: usize, place: u32) -> u64 {
    debug_assert!(generation != 0 && generation <= MAX_GENERATION);
    debug_assert!((1..=1 << 16).contains(&len));
    LIVE | (u64::from(generation) << GEN_SHIFT)
        | (((len - 1) as u64) << LEN_SHIFT)
        | u64::from(place)
}

/// The entry's generation: of its object when live, of the next object when
/// free, 0 when retired.
fn generation_of(word: u64) -> u32 {
    (word >> GEN_SHIFT) as u32 & MAX_GENERATION
}

/// The place of a live word, the next free slot of a free one.
fn place_of(word: u64) -> u32 {
    (word & PLACE_MASK) as u32
}

fn len_of(word: u64) -> usize {
    usize::from((word >> LEN_SHIFT) as u16) + 1
}

/// Slots per chunk of a handle table (512 bytes of entries): small enough
/// that the chunks left partly used where a class freed a range cost little,
/// and that a class that shrinks gives its chunks back; large enough that
/// the chunk vector and the directory stay small (a few bytes a chunk).
const CHUNK_BITS: u32 = 6;
const CHUNK: usize = 1 << CHUNK_BITS;
/// End of a chunk's free list.
const NIL: u32 = u32::MAX;

/// A chunk of slots with its own free list, threaded through the free
/// entries.
#[derive(Debug)]
struct Chunk {
    /// Shared, not boxed: a `Box` asserts unique ownership each time it
    /// moves, which would invalidate the directory's pointer into it. A
    /// fixed-size array, so the pointer is thin.
    entries: Arc<[Entry; CHUNK]>,
    /// Entries held: live or parked (a chunk with a parked entry is not
    /// released).
    live: u32,
    free_head: u32,
}

/// Handle slots of one size class, protected by that class's lock.
///
/// Slots live in chunks of 64. A new object takes a slot in the lowest
/// chunk that has one, so live entries gather in low chunks; a chunk whose
/// last object is freed is released, so the table shrinks when the class
/// does.
///
/// Generations never repeat in a slot. A freed slot's generation goes up by
/// one; a slot freed at [`MAX_GENERATION`] is retired (its entry is
/// [`RETIRED`], on no free list) and never handed out again. A released
/// chunk leaves behind, in `base_gen`, the generation every slot of the
/// chunk starts from when it is made again: the highest next generation of
/// any of its slots, so above every generation any of them ever had. When
/// that would pass the maximum (a slot of the chunk was retired) the chunk
/// index is retired (`base_gen` 0) and never made again. A retired slot
/// costs its 8-byte entry as long as its chunk is present (always, with a
/// directory); a retired chunk index costs its place in `chunks` and
/// `base_gen` (20 bytes), as every released one does.
///
/// Invariants (checked by [`HandleTable::check`]): a present chunk's free
/// list holds exactly its entries that are neither live, parked nor
/// retired, and its count is its live and parked ones; no free entry is
/// dying; a retired entry is exactly [`RETIRED`]; every other entry's
/// generation is at least its chunk's `base_gen`, which is not 0; bit `c`
/// of `with_room` is set exactly when chunk `c` is present and has a free
/// slot; no present chunk is empty (without a directory); `live`,
/// `parked`, `retired_slots` and `retired_chunks` are the sums over
/// chunks.
#[derive(Debug)]
pub(crate) struct HandleTable {
    chunks: Vec<Option<Chunk>>,
    /// With deferred free: where the lock-free path finds each chunk's
    /// entries. Chunks are then never released (their entries must outlive
    /// any lock-free reader), which costs about half a KiB per chunk of peak
    /// use.
    directory: Option<Arc<Directory>>,
    /// Bits of a place that hold the object index; the zspage id is above.
    obj_bits: u32,
    /// Per chunk: the generation its slots start from when it is made; 0
    /// for a retired chunk index, never made again.
    base_gen: Vec<u32>,
    /// Bit per chunk: present with a free slot.
    with_room: Vec<u64>,
    /// Every word of `with_room` below this index is zero.
    room_hint: usize,
    /// Every chunk index below this one is present or retired.
    absent_hint: usize,
    live: usize,
    /// Parked entries (not counted in `live`).
    parked: usize,
    /// Retired entries of present chunks.
    retired_slots: usize,
    /// Retired chunk indices.
    retired_chunks: usize,
    /// Chunk indices the slot field can name (lower in tests).
    max_chunks: usize,
    /// One emptied chunk kept present instead of released (without a
    /// directory): an object allocated and freed over and over alone in its
    /// chunk then cycles through the chunk's 64 slots instead of retiring
    /// a chunk index every 16383 cycles (and allocating a chunk each time).
    spare: Option<usize>,
    /// Whether an emptied chunk may be kept as the spare (off only in tests
    /// of chunk release).
    keep_spare: bool,
}

/// `base_gen` of a retired chunk index.
const RETIRED_CHUNK: u32 = 0;

fn split(slot: u32) -> (usize, usize) {
    ((slot >> CHUNK_BITS) as usize, slot as usize & (CHUNK - 1))
}

impl HandleTable {
    /// An empty table; with a directory, for pools with deferred free.
    /// `obj_bits` (1..=16) is how many bits of a place name the object
    /// index: `ceil(log2(objs per zspage))`, at least 1.
    pub(crate) fn new(directory: Option<Arc<Directory>>, obj_bits: u32) -> Self {
        debug_assert!((1..=16).contains(&obj_bits));
        HandleTable {
            chunks: Vec::new(),
            directory,
            obj_bits,
            base_gen: Vec::new(),
            with_room: Vec::new(),
            room_hint: 0,
            absent_hint: 0,
            live: 0,
            parked: 0,
            retired_slots: 0,
            retired_chunks: 0,
            max_chunks: 1 << (SLOT_BITS - CHUNK_BITS),
            spare: None,
            keep_spare: true,
        }
    }

    /// A table that may use only `chunks` chunk indices, to reach the end of
    /// the slot space in a test.
    #[cfg(test)]
    fn with_chunk_limit(mut self, chunks: usize) -> Self {
        self.max_chunks = chunks;
        self
    }

    /// A table that releases every emptied chunk (no spare), to test
    /// release and re-make.
    #[cfg(test)]
    fn without_spare(mut self) -> Self {
        self.keep_spare = false;
        self
    }

    /// How many zspage ids a place can name (ids `0..max_zspages()`): the
    /// class must not make more zspages than this.
    pub(crate) fn max_zspages(&self) -> u32 {
        1 << (32 - self.obj_bits)
    }

    /// The place of object `obj` of zspage `zspage`.
    fn pack(&self, zspage: u32, obj: u16) -> u32 {
        debug_assert!(zspage < self.max_zspages(), "zspage id {zspage} too large");
        debug_assert!(
            u32::from(obj) < 1 << self.obj_bits,
            "object index {obj} too large"
        );
        (zspage << self.obj_bits) | u32::from(obj)
    }

    /// The location a live word holds.
    fn location(&self, word: u64) -> Location {
        let place = place_of(word);
        Location {
            zspage: place >> self.obj_bits,
            obj: (place & ((1 << self.obj_bits) - 1)) as u16,
            len: len_of(word),
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

    /// Whether a chunk other than `c` has a free slot.
    fn room_elsewhere(&self, c: usize) -> bool {
        self.with_room.iter().enumerate().any(|(w, &bits)| {
            let bits = if w == c / 64 {
                bits & !(1 << (c % 64))
            } else {
                bits
            };
            bits != 0
        })
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
            // Grow by an eighth, not double: the vectors never shrink (a
            // chunk's number is part of its handles), so slack would stay.
            let more = (c / 8).max(4);
            if self.chunks.len() == self.chunks.capacity() {
                self.chunks.reserve_exact(more);
            }
            if self.base_gen.len() == self.base_gen.capacity() {
                self.base_gen.reserve_exact(more);
            }
            self.chunks.push(None);
            self.base_gen.push(1);
        }
        let g = self.base_gen[c];
        debug_assert_ne!(g, RETIRED_CHUNK, "retired chunk index {c} made again");
        let entries: Arc<[Entry; CHUNK]> = Arc::new(std::array::from_fn(|i| {
            Entry::free(g, if i + 1 < CHUNK { i as u32 + 1 } else { NIL })
        }));
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
        let place = self.pack(loc.zspage, loc.obj);
        let c = match self.lowest_with_room() {
            Some(c) => c,
            None => {
                // The lowest released chunk index that is not retired, else
                // a new one. The search starts at `absent_hint`, so retired
                // indices are passed once, not at every new chunk.
                let c = (self.absent_hint..self.chunks.len())
                    .find(|&c| self.chunks[c].is_none() && self.base_gen[c] != RETIRED_CHUNK)
                    .unwrap_or(self.chunks.len());
                self.absent_hint = c + 1;
                if c >= self.max_chunks {
                    return Err(Error::HandlesExhausted { class });
                }
                self.make_chunk(c);
                c
            }
        };
        if self.spare == Some(c) {
            self.spare = None;
        }
        let chunk = self.chunks[c].as_mut().expect("a chunk with room exists");
        let i = chunk.free_head as usize;
        let e = &chunk.entries[i];
        let free = e.word.load(Ordering::Relaxed);
        chunk.free_head = place_of(free);
        chunk.live += 1;
        let full = chunk.free_head == NIL;
        let generation = generation_of(free);
        // A store, not a read-modify-write: a lock-free mark changes only
        // live words, so nothing can have changed this free one since the
        // load. Relaxed: the handle reaches other threads only through their
        // own synchronisation with this caller, which orders this store too.
        e.word
            .store(live_word(generation, loc.len, place), Ordering::Relaxed);
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

    /// The entry of a slot that holds an object, live or parked (its chunk
    /// is present: a chunk with a held entry is never released).
    fn held(&self, slot: u32) -> &Entry {
        self.entry(slot).expect("a held slot's chunk is present")
    }

    /// Resolve a handle whose class has already been checked.
    pub(crate) fn get(&self, h: Handle) -> Result<Location> {
        let e = self.find(h)?;
        // Acquire, as every read of an entry's state: it pairs with the Release of the
        // transition that wrote it (a free, a mark), so the entry is seen
        // as that writer left it.
        let word = e.word.load(Ordering::Acquire);
        check_state(h, word, false)?;
        Ok(self.location(word))
    }

    /// Resolve a handle and mark it dying, for a free under the class lock:
    /// a lock-free deferred free racing for the same handle cannot also win.
    pub(crate) fn claim(&self, h: Handle) -> Result<Location> {
        let e = self.find(h)?;
        // The marked word's place and length stay: only the lock's holder
        // (this caller) changes them.
        let word = mark(e, h)?;
        Ok(self.location(word))
    }

    /// Resolve a handle that a deferred free marked dying (the drain's
    /// look-up): the entry must be live, dying and of this generation.
    pub(crate) fn get_dying(&self, h: Handle) -> Result<Location> {
        let e = self.find(h)?;
        // Acquire: pairs with the mark's Release (as in `get`).
        let word = e.word.load(Ordering::Acquire);
        check_state(h, word, true)?;
        Ok(self.location(word))
    }

    /// The entry a handle's slot names, before its state is checked.
    fn find(&self, h: Handle) -> Result<&Entry> {
        if h.generation() == 0 {
            return Err(h.fault(HandleFault::Null));
        }
        let (c, i) = split(h.slot());
        match self.chunks.get(c) {
            None => Err(h.fault(HandleFault::UnknownSlot)),
            // Released (every object of the chunk was freed) or retired.
            Some(None) => Err(h.fault(
                if self.base_gen[c] == RETIRED_CHUNK || h.generation() < self.base_gen[c] {
                    HandleFault::Freed
                } else {
                    // Not yet handed out in this slot: forged.
                    HandleFault::Stale
                },
            )),
            Some(Some(chunk)) => Ok(&chunk.entries[i]),
        }
    }

    /// Free a slot that `claim` (or `get_dying`) just resolved, or retire
    /// it if its generation was the last; release its chunk if that was the
    /// chunk's last object and the table has no directory.
    pub(crate) fn remove(&mut self, slot: u32) {
        let (c, i) = split(slot);
        let chunk = self.chunks[c]
            .as_mut()
            .expect("a live slot's chunk is present");
        let e = &chunk.entries[i];
        let word = e.word.load(Ordering::Relaxed);
        // Claimed: no lock-free mark changes a dying word, so a store loses
        // nothing.
        debug_assert!(word & LIVE != 0 && word & DYING != 0);
        let generation = generation_of(word);
        // Release: a lock-free mark that loads this word (Acquire) and
        // reports the handle freed sees the free complete.
        if generation == MAX_GENERATION {
            // Invariant: no generation is handed out twice in a slot, so
            // this one is never handed out again.
            e.word.store(RETIRED, Ordering::Release);
            self.retired_slots += 1;
        } else {
            e.word.store(
                free_word(generation + 1, chunk.free_head),
                Ordering::Release,
            );
            chunk.free_head = i as u32;
        }
        self.live -= 1;
        self.entry_freed(c);
    }

    /// Park a slot that `claim` just resolved: its handle is dead (the
    /// generation moves on, so a use of it is refused as freed), and the
    /// slot keeps the object's place, for [`HandleTable::revive`] to hand
    /// out with the next allocation. Returns false, with nothing changed,
    /// when the generation was the last (the slot is then removed, and
    /// retired).
    pub(crate) fn park(&mut self, slot: u32) -> bool {
        let e = self.held(slot);
        let word = e.word.load(Ordering::Relaxed);
        // Claimed: no lock-free mark changes a dying word.
        debug_assert!(word & LIVE != 0 && word & DYING != 0);
        let generation = generation_of(word);
        if generation == MAX_GENERATION {
            return false;
        }
        // Release, as in `remove`: a mark that reads this word and reports
        // the handle freed sees the free complete.
        e.word.store(
            PARKED | (u64::from(generation + 1) << GEN_SHIFT) | (word & PLACE_MASK),
            Ordering::Release,
        );
        self.live -= 1;
        self.parked += 1;
        true
    }

    /// Hand out parked `slot` again, for a new object of `len` bytes at the
    /// place it kept; returns the handle and the place.
    pub(crate) fn revive(&mut self, class: usize, slot: u32, len: usize) -> (Handle, Location) {
        let e = self.held(slot);
        let word = e.word.load(Ordering::Relaxed);
        debug_assert_eq!(word & (LIVE | PARKED), PARKED, "slot {slot} is not parked");
        let generation = generation_of(word);
        // A store, as in `insert`: no lock-free mark changes a word that is
        // not live.
        e.word.store(
            live_word(generation, len, place_of(word)),
            Ordering::Relaxed,
        );
        self.parked -= 1;
        self.live += 1;
        let loc = Location {
            len,
            ..self.location(word)
        };
        (Handle::new(class, slot, generation), loc)
    }

    /// Free parked `slot` for good; returns the place it kept.
    pub(crate) fn unpark(&mut self, slot: u32) -> Location {
        let (c, i) = split(slot);
        let chunk = self.chunks[c]
            .as_mut()
            .expect("a parked slot's chunk is present");
        let e = &chunk.entries[i];
        let word = e.word.load(Ordering::Relaxed);
        debug_assert_eq!(word & (LIVE | PARKED), PARKED, "slot {slot} is not parked");
        // The generation moved on when the slot was parked.
        e.word.store(
            free_word(generation_of(word), chunk.free_head),
            Ordering::Release,
        );
        chunk.free_head = i as u32;
        self.parked -= 1;
        self.entry_freed(c);
        self.location(word)
    }

    /// The place parked `slot` keeps.
    pub(crate) fn parked_place(&self, slot: u32) -> Option<Location> {
        let word = self.entry(slot)?.word.load(Ordering::Relaxed);
        (word & (LIVE | PARKED) == PARKED).then(|| self.location(word))
    }

    /// An entry of chunk `c` was freed or retired: the chunk holds one
    /// fewer; keep it as the spare, release it, or mark its room.
    fn entry_freed(&mut self, c: usize) {
        let chunk = self.chunks[c]
            .as_mut()
            .expect("a held slot's chunk is present");
        chunk.live -= 1;
        let emptied = chunk.live == 0;
        let has_free = chunk.free_head != NIL;
        // An emptied chunk is kept as the spare only when no other chunk
        // has room: then the next object would make a chunk again. With
        // room elsewhere the next object goes there, and keeping the chunk
        // would cost half a KiB for nothing (127 classes' spares were a
        // fifth of the handle tables of a 17 MB pool).
        let keep = self.keep_spare
            && emptied
            && has_free
            && self.spare.is_none()
            && !self.room_elsewhere(c);
        let chunk = self.chunks[c]
            .as_mut()
            .expect("a live slot's chunk is present");
        if keep && self.directory.is_none() {
            self.spare = Some(c);
            self.set_room(c, true);
        } else if chunk.live == 0 && self.directory.is_none() {
            // Invariant: the chunk made again at `c` starts above every
            // generation any of its slots had (a free entry's generation is
            // one above its last object's; a retired one had the maximum).
            let mut retired = 0;
            let base = chunk
                .entries
                .iter()
                .map(|e| match generation_of(e.word.load(Ordering::Relaxed)) {
                    0 => {
                        retired += 1;
                        MAX_GENERATION + 1
                    }
                    g => g,
                })
                .max()
                .unwrap_or(MAX_GENERATION + 1);
            self.retired_slots -= retired;
            if base > MAX_GENERATION {
                self.base_gen[c] = RETIRED_CHUNK;
                self.retired_chunks += 1;
            } else {
                self.base_gen[c] = base;
                self.absent_hint = self.absent_hint.min(c);
            }
            self.chunks[c] = None;
            self.set_room(c, false);
        } else {
            let room = chunk.free_head != NIL;
            self.set_room(c, room);
        }
    }

    /// Point a live (or parked) slot at the object's new place
    /// (compaction, or a zspage renumbered when another is released).
    pub(crate) fn relocate(&mut self, slot: u32, zspage: u32, obj: u16) {
        let place = u64::from(self.pack(zspage, obj));
        let e = self.held(slot);
        // A read-modify-write, not a store: a lock-free mark may set DYING
        // between a load and a store, and a store of the older word would
        // undo it (the object would then never be freed, or freed twice).
        // The mark, in turn, retries its compare-and-swap when this changed
        // the word. Relaxed: the place is read only under the class lock,
        // which orders it; the mark reads only the state bits.
        let update = e
            .word
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                debug_assert!(w & (LIVE | PARKED) != 0, "slot {slot} holds no object");
                Some((w & !PLACE_MASK) | place)
            });
        debug_assert!(update.is_ok(), "the update function always applies");
    }

    /// The live entry of a slot, by slot number (for invariant checks).
    pub(crate) fn live_entry(&self, slot: u32) -> Option<Location> {
        let word = self.entry(slot)?.word.load(Ordering::Relaxed);
        (word & LIVE != 0).then(|| self.location(word))
    }

    /// Live objects (parked slots are not counted).
    pub(crate) fn live(&self) -> usize {
        self.live
    }

    /// Parked slots.
    pub(crate) fn parked(&self) -> usize {
        self.parked
    }

    /// Heap bytes the table holds.
    pub(crate) fn metadata_bytes(&self) -> usize {
        let present = self.chunks.iter().flatten().count();
        // Each chunk's entries, behind the `Arc`'s two counters.
        present * (std::mem::size_of::<[Entry; CHUNK]>() + 2 * std::mem::size_of::<usize>())
            + self.directory.as_ref().map_or(0, |d| d.metadata_bytes())
            + self.chunks.capacity() * std::mem::size_of::<Option<Chunk>>()
            + self.base_gen.capacity() * std::mem::size_of::<u32>()
            + self.with_room.capacity() * std::mem::size_of::<u64>()
    }

    /// Check the table's own invariants.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        if self.base_gen.len() != self.chunks.len() {
            return Err(format!(
                "{} chunk bases for {} chunks",
                self.base_gen.len(),
                self.chunks.len()
            ));
        }
        let (mut live, mut parked, mut retired_slots, mut retired_chunks) = (0, 0, 0, 0);
        for (c, chunk) in self.chunks.iter().enumerate() {
            let room_bit = self
                .with_room
                .get(c / 64)
                .is_some_and(|w| w & (1 << (c % 64)) != 0);
            let base = self.base_gen[c];
            if base > MAX_GENERATION {
                return Err(format!("chunk {c}: base generation {base}"));
            }
            let Some(chunk) = chunk else {
                if room_bit {
                    return Err(format!("released chunk {c} is marked as having room"));
                }
                if c < self.absent_hint && base != RETIRED_CHUNK {
                    return Err(format!(
                        "released chunk {c} is below the search start {}",
                        self.absent_hint
                    ));
                }
                retired_chunks += usize::from(base == RETIRED_CHUNK);
                continue;
            };
            if base == RETIRED_CHUNK {
                return Err(format!("retired chunk index {c} is present"));
            }
            let words: Vec<u64> = chunk
                .entries
                .iter()
                .map(|e| e.word.load(Ordering::Relaxed))
                .collect();
            let mut on_free = [false; CHUNK];
            let mut i = chunk.free_head;
            while i != NIL {
                let w = *words
                    .get(i as usize)
                    .ok_or_else(|| format!("chunk {c}: free list leads to {i}"))?;
                if std::mem::replace(&mut on_free[i as usize], true) {
                    return Err(format!("chunk {c}: slot {i} is on the free list twice"));
                }
                if w & LIVE != 0 {
                    return Err(format!("chunk {c}: slot {i} is live and on the free list"));
                }
                if w & DYING != 0 {
                    return Err(format!("chunk {c}: slot {i} is free and dying"));
                }
                if w == RETIRED {
                    return Err(format!(
                        "chunk {c}: slot {i} is retired and on the free list"
                    ));
                }
                i = place_of(w);
            }
            let chunk_live = words.iter().filter(|&&w| w & LIVE != 0).count();
            let chunk_parked = words
                .iter()
                .filter(|&&w| w & (LIVE | PARKED) == PARKED)
                .count();
            let retired = words.iter().filter(|&&w| w == RETIRED).count();
            let free = on_free.iter().filter(|&&f| f).count();
            if chunk_live + chunk_parked != chunk.live as usize
                || chunk_live + chunk_parked + free + retired != CHUNK
            {
                return Err(format!(
                    "chunk {c}: {chunk_live} live and {chunk_parked} parked entries, \
                     counter {}, {free} free, {retired} retired",
                    chunk.live
                ));
            }
            let chunk_live = chunk_live + chunk_parked;
            if chunk_live == 0 && self.directory.is_none() && self.spare != Some(c) {
                return Err(format!("chunk {c} is empty but was not released"));
            }
            if self.spare == Some(c) && chunk_live != 0 {
                return Err(format!("spare chunk {c} holds {chunk_live} objects"));
            }
            if room_bit != (free > 0) {
                return Err(format!(
                    "chunk {c}: room bit {room_bit} with {free} free slots"
                ));
            }
            // A retired entry is exactly `RETIRED` (counted above); every
            // other one has a generation its chunk can hand out.
            if let Some(i) = words
                .iter()
                .position(|&w| w != RETIRED && generation_of(w) < base)
            {
                return Err(format!(
                    "chunk {c}: slot {i} has generation {} below the chunk's base {base}",
                    generation_of(words[i])
                ));
            }
            live += chunk_live - chunk_parked;
            parked += chunk_parked;
            retired_slots += retired;
        }
        if (live, parked) != (self.live, self.parked) {
            return Err(format!(
                "{live} live and {parked} parked entries, counters {} and {}",
                self.live, self.parked
            ));
        }
        if (retired_slots, retired_chunks) != (self.retired_slots, self.retired_chunks) {
            return Err(format!(
                "{retired_slots} retired slots and {retired_chunks} retired chunks, \
                 counters {} and {}",
                self.retired_slots, self.retired_chunks
            ));
        }
        Ok(())
    }
}

/// Check an entry's word against a handle: live, of the handle's
/// generation, and dying exactly when `dying` (a dying handle is dead for
/// every caller but the drain).
fn check_state(h: Handle, word: u64, dying: bool) -> Result<()> {
    let g = h.generation();
    if g == 0 {
        return Err(h.fault(HandleFault::Null));
    }
    let current = generation_of(word);
    if word & LIVE == 0 {
        // The slot's generation moved on when it was freed (to 0 when it
        // was retired after the last one).
        let freed_next = if g == MAX_GENERATION { 0 } else { g + 1 };
        let fault = if current == freed_next {
            HandleFault::Freed
        } else {
            HandleFault::Stale
        };
        return Err(h.fault(fault));
    }
    if current != g {
        return Err(h.fault(HandleFault::Stale));
    }
    if (word & DYING != 0) != dying {
        let fault = if dying {
            HandleFault::Stale
        } else {
            HandleFault::Freed
        };
        return Err(h.fault(fault));
    }
    Ok(())
}

/// Set `DYING` on `e` if it is live, of `h`'s generation and not dying yet;
/// returns the word as marked. Every free goes through here (the locked one
/// too), so of any number of racing frees of one handle exactly one
/// succeeds.
fn mark(e: &Entry, h: Handle) -> Result<u64> {
    // Acquire: pairs with the Release of the last state transition (a free),
    // as in `HandleTable::get`.
    let mut word = e.word.load(Ordering::Acquire);
    loop {
        check_state(h, word, false)?;
        // The whole word is compared, so the swap fails when anything in it
        // changed since the load: another mark won, the slot was freed, or a
        // relocate under the class lock moved the object. Then the state is
        // checked again on the new word; a relocate alone leaves it valid,
        // so a mark is never refused because the object moved.
        //
        // AcqRel: the drain that later frees this slot learns of the mark
        // through the deferred-free shard (Release/Acquire there); ordering
        // here keeps the mark and the state's history coherent for anyone who
        // reads the word directly.
        match e
            .word
            .compare_exchange_weak(word, word | DYING, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return Ok(word | DYING),
            Err(now) => word = now,
        }
    }
}

/// Segments of the directory: segment `k` holds `2^k` chunk pointers, so
/// segments `0..SEGMENTS` hold `2^SEGMENTS - 1`, enough for every chunk a
/// 29-bit slot field can name (`2^23` chunks of 64: 24 segments).
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
    /// The pool's tag: `mark_dying` refuses another pool's handle first.
    tag: u8,
    segments: [AtomicPtr<AtomicPtr<Entry>>; SEGMENTS],
}

impl std::fmt::Debug for Directory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Directory").finish_non_exhaustive()
    }
}

/// Segment and offset of chunk `c`.
fn locate(c: usize) -> (usize, usize) {
    let n = c + 1;
    let k = (usize::BITS - 1 - n.leading_zeros()) as usize;
    (k, n - (1 << k))
}

impl Directory {
    /// An empty directory for the pool tagged `tag` (0 for a table tested
    /// alone, whose handles are untagged).
    pub(crate) fn new(tag: u8) -> Self {
        Directory {
            tag,
            segments: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
        }
    }

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
        h.check_pool(self.tag)?;
        let e = self
            .entry(h.slot())
            .ok_or_else(|| h.fault(HandleFault::UnknownSlot))?;
        mark(e, h).map(drop)
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
mod tests;

#[cfg(all(test, loom))]
mod loom_models;
