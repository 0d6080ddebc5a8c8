//! The per-class handle table: slots in chunks of 64, each chunk with its
//! own free list; generations that never repeat in a slot; parked slots.
//! Its invariant check is `table/check.rs`.

use std::sync::Arc;

use super::directory::Directory;
use super::entry::{
    Entry, check_state, free_word, generation_of, is_parked, is_parked_at, len_of, live_word, mark,
    place_of,
};
use super::{
    CHUNK, CHUNK_BITS, DYING, GEN_SHIFT, Handle, LIVE, Location, MAX_GENERATION, PARKED,
    PLACE_MASK, RETIRED, SLOT_BITS, split,
};
use crate::error::{Error, HandleFault, Result};
use crate::sync::atomic::Ordering;

mod check;

/// End of a chunk's free list.
const NIL: u32 = u32::MAX;

/// A chunk of slots with its own free list, threaded through the free
/// entries.
#[derive(Debug)]
pub(super) struct Chunk {
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
    pub(super) chunks: Vec<Option<Chunk>>,
    /// With deferred free: where the lock-free path finds each chunk's
    /// entries. Chunks are then never released (their entries must outlive
    /// any lock-free reader), which costs about half a KiB per chunk of peak
    /// use.
    directory: Option<Arc<Directory>>,
    /// Bits of a place that hold the object index; the zspage id is above.
    obj_bits: u32,
    /// Per chunk: the generation its slots start from when it is made; 0
    /// for a retired chunk index, never made again.
    pub(super) base_gen: Vec<u32>,
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
    pub(super) retired_slots: usize,
    /// Retired chunk indices.
    pub(super) retired_chunks: usize,
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
    /// The generation a chunk index's slots start from the first time it is
    /// made: 1, or the pool tag's epoch's (`PoolTag::first_generation`).
    first_gen: u32,
    /// Frees park slots in threads' magazines (`magazine.rs`): entries
    /// change without the lock (live to parked, parked to reviving to
    /// live), so the lock's holder claims an entry by compare-and-swap and
    /// takes a parked one back by compare-and-swap ([`HandleTable::reclaim`]).
    /// A slot parked in a magazine (or reviving) is held: counted in
    /// `live` and its chunk's count, as the class counts it in its zspage.
    magazines: bool,
}

/// What a held slot's entry says, for the class lock's holder of a class
/// with magazines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Held {
    /// A live object, and the entry's word (for
    /// [`HandleTable::relocate_live`]).
    Live(Location, u64),
    /// Parked in a magazine at this generation (the next object's); the
    /// location and length of the object freed into it.
    Parked(Location, u32),
    /// Taken by its magazine's thread, which is writing the new object.
    Reviving,
}

/// `base_gen` of a retired chunk index.
pub(super) const RETIRED_CHUNK: u32 = 0;

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
            first_gen: 1,
            magazines: false,
        }
    }

    /// Frees will park slots in threads' magazines (needs the directory
    /// they find entries through).
    pub(crate) fn use_magazines(&mut self) {
        debug_assert!(self.directory.is_some());
        self.magazines = true;
    }

    /// Start every slot's generations at `first` (`1..=MAX_GENERATION`)
    /// instead of 1: the pool tag's epoch (`PoolTag::first_generation`).
    /// Only before the first allocation.
    pub(crate) fn start_generations_at(&mut self, first: u32) {
        debug_assert!(self.base_gen.is_empty(), "slots were made already");
        debug_assert!((1..=MAX_GENERATION).contains(&first));
        self.first_gen = first.clamp(1, MAX_GENERATION);
    }

    /// A table that may use only `chunks` chunk indices, to reach the end of
    /// the slot space in a test.
    #[cfg(test)]
    pub(super) fn with_chunk_limit(mut self, chunks: usize) -> Self {
        self.max_chunks = chunks;
        self
    }

    /// A table that releases every emptied chunk (no spare), to test
    /// release and re-make.
    #[cfg(test)]
    pub(super) fn without_spare(mut self) -> Self {
        self.keep_spare = false;
        self
    }

    /// The lock-free directory of this table's chunks, if it has one.
    pub(crate) fn directory(&self) -> Option<Arc<Directory>> {
        self.directory.clone()
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
            self.base_gen.push(self.first_gen);
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

    /// [`HandleTable::get`], and the entry's word it resolved (for a copy
    /// that must find the word unchanged after it: see
    /// `Class::load_live`).
    pub(crate) fn get_with_word(&self, h: Handle) -> Result<(Location, u64)> {
        let e = self.find(h)?;
        // Acquire: as in `get`.
        let word = e.word.load(Ordering::Acquire);
        check_state(h, word, false)?;
        Ok((self.location(word), word))
    }

    /// `h`'s entry's word now, if its slot has an entry (after a copy
    /// whose object a free of `h` may have raced: `Class::load_live`).
    pub(crate) fn word_now(&self, h: Handle) -> Option<u64> {
        // Relaxed: the caller's Acquire fence orders it after its copy.
        self.find(h).ok().map(|e| e.word.load(Ordering::Relaxed))
    }

    /// Resolve a handle and mark it dying, for a free under the class lock:
    /// a lock-free deferred free racing for the same handle cannot also win.
    pub(crate) fn claim(&self, h: Handle) -> Result<Location> {
        let e = self.find(h)?;
        if !self.magazines && !self.directory.as_ref().is_some_and(|d| d.marks()) {
            // No lock-free mark can race (no deferred free): the lock's
            // holder alone writes entries, so a load and a store do what
            // the compare-and-swap would, one atomic read-modify-write
            // fewer per free. Relaxed: `remove` or `park` publishes the
            // free with Release.
            let word = e.word.load(Ordering::Relaxed);
            check_state(h, word, false)?;
            e.word.store(word | DYING, Ordering::Relaxed);
            return Ok(self.location(word));
        }
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

    /// What held `slot`'s entry says (a class with magazines).
    pub(crate) fn held_state(&self, slot: u32) -> Held {
        // Acquire: a live word a revive published comes with the object's
        // bytes (`entry::revived`).
        let word = self.held(slot).word.load(Ordering::Acquire);
        if is_parked(word) {
            Held::Parked(self.location(word), generation_of(word))
        } else if word & (LIVE | DYING) == LIVE {
            Held::Live(self.location(word), word)
        } else {
            debug_assert_eq!(
                word & (LIVE | DYING),
                LIVE | DYING,
                "slot {slot} is not held"
            );
            Held::Reviving
        }
    }

    /// Whether `slot`'s entry is parked (in a magazine), at `generation`
    /// if given; the slot may be held or not (an exited thread's slot that
    /// its class took back since).
    pub(crate) fn parked_at(&self, slot: u32, generation: Option<u32>) -> bool {
        self.entry(slot)
            .map(|e| e.word.load(Ordering::Acquire))
            .is_some_and(|w| is_parked_at(w, generation))
    }

    /// What held `slot`'s entry says once it is not reviving: a reviving
    /// slot's thread writes one object and takes no lock meanwhile, so the
    /// wait is short. (By then the object may have been freed into a
    /// magazine again: parked.)
    pub(crate) fn settled_state(&self, slot: u32) -> Held {
        let mut round = 0;
        loop {
            match self.held_state(slot) {
                Held::Reviving => crate::sync::spin_wait(&mut round),
                settled => return settled,
            }
        }
    }

    /// Take back `slot`, parked in a magazine, by compare-and-swap from
    /// parked to free: `None`, with nothing changed, if its thread revived
    /// it first (that thread's swap then fails and it drops the slot, so
    /// exactly one of the two gets it). Returns the location and length of
    /// the object freed into it (the class still counts that object).
    pub(crate) fn reclaim(&mut self, slot: u32) -> Option<Location> {
        debug_assert!(self.magazines);
        let (c, i) = split(slot);
        let chunk = self.chunks[c]
            .as_mut()
            .expect("a parked slot's chunk is present");
        let e = &chunk.entries[i];
        let mut word = e.word.load(Ordering::Acquire);
        loop {
            if !is_parked(word) {
                return None;
            }
            // The generation moved on when the slot was parked. Release, as
            // in `remove`; a relocation since (only this lock's holder
            // makes them) cannot race, so a failure is a revive.
            match e.word.compare_exchange(
                word,
                free_word(generation_of(word), chunk.free_head),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => word = now,
            }
        }
        chunk.free_head = i as u32;
        self.live -= 1;
        self.entry_freed(c);
        Some(self.location(word))
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
                // A magazine's revive may change the state meanwhile: the
                // update keeps whatever state it finds.
                Some((w & !PLACE_MASK) | place)
            });
        debug_assert!(update.is_ok(), "the update function always applies");
    }

    /// Point `slot` at the object's new place if its entry is still `live`
    /// (a class with magazines, whose moved object a magazine's free and
    /// revive may have replaced meanwhile: then nothing changes and the
    /// caller drops its copy). One compare-and-swap.
    pub(crate) fn relocate_live(&mut self, slot: u32, live: u64, zspage: u32, obj: u16) -> bool {
        let place = u64::from(self.pack(zspage, obj));
        // Relaxed, as in `relocate`; the swap fails on any change of state.
        self.held(slot)
            .word
            .compare_exchange(
                live,
                (live & !PLACE_MASK) | place,
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok()
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
            // The directory, behind its `Arc`'s two counters, and its
            // segments.
            + self.directory.as_ref().map_or(0, |d| {
                std::mem::size_of::<Directory>() + 2 * std::mem::size_of::<usize>() + d.metadata_bytes()
            })
            + self.chunks.capacity() * std::mem::size_of::<Option<Chunk>>()
            + self.base_gen.capacity() * std::mem::size_of::<u32>()
            + self.with_room.capacity() * std::mem::size_of::<u64>()
    }
}
