//! The slot table: slots in chunks of [`CHUNK_SLOTS`], a chunk made when a
//! page is first written into it and freed when its last page goes.
//!
//! zram's table (and this store's before) is one entry per slot of the
//! whole device, whatever it holds: a store sized for 150 MB of pages
//! keeps 24 bytes for each of them after all but 17 MB were deleted, 5% of
//! what it holds. Here a slot costs memory only while its chunk holds a
//! page; an absent chunk reads as empty slots.
//!
//! Slots share a lock with their neighbours, [`STRIPE`] slots to a lock
//! (zram keeps a lock bit in each 16-byte entry); locks are held for a
//! copy or a swap, never across compression, so neighbours rarely wait. A
//! slot is an 8-byte word in its stripe, and a slot that does not fit one
//! keeps the rest in its chunk's side array (see `slot.rs`): with log
//! placement a chunk of stored pages costs 8.5 bytes a page, with class
//! placement (whose handles are wide) 12.5. The locks are a byte each,
//! side by side (`stripes.rs`); with `std`'s `Mutex` a stripe, four slots
//! to a lock made it 10.5 (the lock and its padding were 8 bytes of every
//! 40) and sixteen 9.
//!
//! The presence of [`GROUP`] consecutive chunks is behind one
//! reader-writer lock: every slot access holds its group's as a reader (so
//! a chunk never goes away under a slot lock), a writer makes a missing
//! chunk, and the access that empties a chunk frees it if it can take the
//! lock as a writer at once (`try_write`; if another access holds it, the
//! chunk stays until the next access that finds it empty). Order: **group
//! lock, then slot lock**, and no one holds two group locks.
//!
//! Invariant (checked by `PageStore::check_invariants`): a present chunk's
//! `live` counts its slots that are not empty.

use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use std::sync::{RwLock, RwLockReadGuard};

use super::slot::{Kind, Slot, Word};
use super::stripes::{StripeGuard, Stripes};
use crate::error::Result;
use crate::lane::Owners;

/// Slots per chunk: 1.5 KiB of slots, few enough that the chunks left
/// partly used where pages were deleted cost little, many enough that the
/// chunk array (24 bytes a chunk) stays small.
pub(crate) const CHUNK_SLOTS: usize = 64;

/// Slots per lock: 16, a quarter of a chunk. At 4 a chunk's locks cost
/// 1.5 bytes a slot more, 0.1-0.3 points of all-in under churn
/// (docs/DESIGN.md, "The slot table's locks"); with one-byte locks
/// (`stripes.rs`) one lock per chunk would save nothing (the bytes the
/// locks take are padding before the words either way).
pub(crate) const STRIPE: usize = 16;

/// A chunk's stripes: [`STRIPE`] slot words to a lock.
/// The header beside the locks counts the chunk's slots that are not
/// empty.
type ChunkSlots = Stripes<AtomicU32, [Word; STRIPE], { CHUNK_SLOTS / STRIPE }>;

/// A locked stripe of a chunk.
type StripeWords<'a> = StripeGuard<'a, AtomicU32, [Word; STRIPE], { CHUNK_SLOTS / STRIPE }>;

/// Side entries of a chunk's wide slots (0: the slot is narrow).
type Side = [AtomicU32; CHUNK_SLOTS];

/// A chunk's side array: made at most once, by the first writer of a wide
/// slot of the chunk (under that slot's stripe lock, so writers of two
/// stripes may race to make it), and freed with the chunk. A pointer, 8
/// bytes, where a `OnceLock<Box<..>>` took 16 (its `Once` beside the box):
/// a quarter of a byte a slot.
struct SideArray(AtomicPtr<Side>);

impl SideArray {
    fn new() -> SideArray {
        SideArray(AtomicPtr::new(std::ptr::null_mut()))
    }

    /// The array, if made.
    fn get(&self) -> Option<&Side> {
        // Acquire: pairs with the `Release` that published it, so its
        // zeros are seen.
        let p = self.0.load(Ordering::Acquire);
        // SAFETY: a non-null pointer came from `Box::into_raw` below and
        // is freed only when `self` is dropped.
        unsafe { p.as_ref() }
    }

    /// The array, made now if it was not.
    fn get_or_make(&self) -> &Side {
        if let Some(a) = self.get() {
            return a;
        }
        let fresh = Box::into_raw(Box::new(std::array::from_fn(|_| AtomicU32::new(0))));
        match self.0.compare_exchange(
            std::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: just published; freed only with `self`.
            Ok(_) => unsafe { &*fresh },
            Err(made) => {
                // SAFETY: `fresh` was never published; `made` was, by the
                // writer that won, and lives as long as `self`.
                unsafe {
                    drop(Box::from_raw(fresh));
                    &*made
                }
            }
        }
    }
}

impl Drop for SideArray {
    fn drop(&mut self) {
        let p = *self.0.get_mut();
        if !p.is_null() {
            // SAFETY: made by `Box::into_raw` and published once; nothing
            // else frees it.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

/// A chunk of slots, [`STRIPE`] to a lock.
struct Chunk {
    slots: ChunkSlots,
    /// The meta of each wide slot, made when the first is written (written
    /// and read under the slot's lock; atomics only so that they sit
    /// apart).
    side: SideArray,
    /// Each slot's last access, if the table tracks it (written and read
    /// under the slot's lock; atomics only so that they sit apart).
    atimes: Option<Box<[AtomicU32; CHUNK_SLOTS]>>,
}

impl Chunk {
    /// Heap bytes of this chunk.
    fn bytes(&self) -> usize {
        let array = std::mem::size_of::<[AtomicU32; CHUNK_SLOTS]>();
        std::mem::size_of::<Chunk>()
            + if self.atimes.is_some() { array } else { 0 }
            + if self.side.get().is_some() { array } else { 0 }
    }

    /// How many of its slots are not empty (the header beside the locks).
    fn live(&self) -> &AtomicU32 {
        self.slots.head()
    }

    /// The side entry of slot `i` (0 if narrow); under the slot's lock.
    fn side(&self, i: usize) -> u32 {
        // Relaxed: written and read under the slot's lock.
        self.side.get().map_or(0, |s| s[i].load(Ordering::Relaxed))
    }

    /// Store slot `i` in its `stripe`, whose lock the caller holds.
    fn put(&self, stripe: &mut StripeWords<'_>, i: usize, s: &Slot) {
        let (word, side) = s.pack();
        stripe[i % STRIPE] = word;
        if side != 0 {
            self.side.get_or_make()[i].store(side, Ordering::Relaxed);
        } else if let Some(a) = self.side.get() {
            a[i].store(0, Ordering::Relaxed);
        }
    }
}

/// Chunks per presence lock: a group of [`GROUP`] chunk pointers costs 9
/// bytes a chunk where a lock of its own made it 24 (for a store of 4,472
/// slots holding 287 pages, 0.3% of what they hold).
pub(crate) const GROUP: usize = 16;

/// The presence of [`GROUP`] consecutive chunks, behind one lock.
type Group = RwLock<[Option<Box<Chunk>>; GROUP]>;

type GroupRead<'a> = RwLockReadGuard<'a, [Option<Box<Chunk>>; GROUP]>;

/// All slots of a store.
pub(crate) struct SlotTable {
    len: usize,
    groups: Box<[Group]>,
    /// Keep each slot's last access time (4 bytes a slot).
    atimes: bool,
}

impl SlotTable {
    /// A table of `len` slots, all empty (no chunk made yet); the chunk
    /// array is the one allocation sized by the caller, and failing it is
    /// an error, not an abort.
    pub(crate) fn new(len: usize, atimes: bool) -> Result<SlotTable> {
        let groups = len.div_ceil(CHUNK_SLOTS * GROUP);
        let groups =
            super::try_table(groups, "the slot table", || RwLock::new(Default::default()))?;
        Ok(SlotTable {
            len,
            groups,
            atimes,
        })
    }

    /// Whether slots keep their last access time.
    pub(crate) fn tracks_atime(&self) -> bool {
        self.atimes
    }

    /// Number of slots.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Slot `index` (`< len`), if its chunk is present; an absent chunk's
    /// slots are empty.
    pub(crate) fn get(&self, index: usize) -> Option<SlotRef<'_>> {
        debug_assert!(index < self.len);
        let c = index / CHUNK_SLOTS;
        let guard = self.read(c);
        guard[c % GROUP].is_some().then(|| SlotRef {
            table: self,
            c,
            i: index % CHUNK_SLOTS,
            guard: Some(guard),
        })
    }

    /// Slot `index` (`< len`), making its chunk if it is absent.
    pub(crate) fn get_or_make(&self, index: usize) -> SlotRef<'_> {
        loop {
            if let Some(s) = self.get(index) {
                return s;
            }
            let c = index / CHUNK_SLOTS;
            let mut w = self.groups[c / GROUP]
                .write()
                .unwrap_or_else(|e| e.into_inner());
            let cell = &mut w[c % GROUP];
            if cell.is_none() {
                *cell = Some(Box::new(Chunk {
                    slots: Stripes::new(AtomicU32::new(0), |_| [Word::default(); STRIPE]),
                    side: SideArray::new(),
                    atimes: self
                        .atimes
                        .then(|| Box::new(std::array::from_fn(|_| AtomicU32::new(0)))),
                }));
            }
            // Dropped, then taken again as a reader: an access that empties
            // the chunk meanwhile may free it, and the loop makes it again.
        }
    }

    /// Indices of the slots of present chunks, chunk by chunk (a chunk made
    /// or freed meanwhile may be missed or visited: callers lock each slot
    /// and look at what it holds).
    pub(crate) fn present(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.chunk_count())
            .filter(|&c| self.read(c)[c % GROUP].is_some())
            .flat_map(move |c| c * CHUNK_SLOTS..((c + 1) * CHUNK_SLOTS).min(self.len))
    }

    /// Heap bytes: the chunk array and the present chunks.
    pub(crate) fn metadata_bytes(&self) -> usize {
        let chunks: usize = self
            .groups
            .iter()
            .map(|g| {
                read(g)
                    .iter()
                    .map(|c| c.as_ref().map_or(0, |c| c.bytes()))
                    .sum::<usize>()
            })
            .sum();
        std::mem::size_of_val(&*self.groups) + chunks
    }

    /// Check each present chunk's `live` against its slots (while no other
    /// thread uses the store).
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        for c in 0..self.chunk_count() {
            if let Some(chunk) = self.read(c)[c % GROUP].as_ref() {
                let live = (0..CHUNK_SLOTS)
                    .filter(|&i| {
                        let word = chunk.slots.lock(i / STRIPE)[i % STRIPE];
                        Slot::unpack(word, chunk.side(i), 0).kind() != Kind::Empty
                    })
                    .count();
                let counted = chunk.live().load(Ordering::Relaxed) as usize;
                if live != counted {
                    return Err(format!(
                        "slot chunk {c} counts {counted} slots in use, holds {live}"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Free chunk `c` if it is empty and no one else is using it.
    fn try_free(&self, c: usize) {
        if let Ok(mut w) = self.groups[c / GROUP].try_write()
            && w[c % GROUP]
                .as_ref()
                .is_some_and(|ch| ch.live().load(Ordering::Relaxed) == 0)
        {
            w[c % GROUP] = None;
        }
    }

    /// Chunks of the table, present or not.
    fn chunk_count(&self) -> usize {
        self.len.div_ceil(CHUNK_SLOTS)
    }

    /// The presence of chunk `c`'s group, locked shared.
    fn read(&self, c: usize) -> GroupRead<'_> {
        read(&self.groups[c / GROUP])
    }
}

/// With log placement the slots are the objects' handles: a stored slot
/// holds its object's place, and cleaning moves objects through here.
/// Called under a lane lock, so nothing may block: a group or slot lock
/// held by someone else means busy (the kernel's migration trylocks the
/// same way).
impl Owners for SlotTable {
    fn relocate(&self, owner: u32, mv: &mut dyn FnMut(u64, usize) -> Option<u64>) -> bool {
        let index = owner as usize;
        if index >= self.len {
            return true;
        }
        let c = index / CHUNK_SLOTS;
        let Ok(guard) = self.groups[c / GROUP].try_read() else {
            return false;
        };
        let Some(chunk) = guard[c % GROUP].as_ref() else {
            // No slot of the chunk holds a page: the object is not its.
            return true;
        };
        let i = index % CHUNK_SLOTS;
        let Some(mut stripe) = chunk.slots.try_lock(i / STRIPE) else {
            return false;
        };
        let mut s = Slot::unpack(stripe[i % STRIPE], chunk.side(i), 0);
        if s.kind() == Kind::Stored
            && let Some(place) = mv(s.place(), s.len())
        {
            s.set_place(place);
            chunk.put(&mut stripe, i, &s);
        }
        true
    }

    fn scan(&self, wait: bool, f: &mut dyn FnMut(u32, u64, usize)) -> bool {
        self.each_stored(wait, |index, s| f(index, s.place(), s.len()))
    }

    /// [`Owners::find`] without a call through a pointer for each slot
    /// (half the scan's cost under churn).
    fn find(&self, sought: &crate::lane::Sought, out: &mut [Vec<u32>]) -> bool {
        self.each_word(false, |index, word, side| {
            if let Some(i) = Slot::stored_place(word, side).and_then(|p| sought.which(p)) {
                out[i].push(index);
            }
        })
    }
}

impl SlotTable {
    /// Call `f` with the index and contents of each stored slot of the
    /// present chunks, each stripe locked while its slots are read (a side
    /// entry is written under that lock too). With `wait` the locks are
    /// taken; without, only tried: a busy group or stripe is skipped and
    /// the call returns false.
    fn each_stored(&self, wait: bool, mut f: impl FnMut(u32, &Slot)) -> bool {
        self.each_word(wait, |index, word, side| {
            let s = Slot::unpack(word, side, 0);
            if s.kind() == Kind::Stored {
                f(index, &s);
            }
        })
    }

    /// [`SlotTable::each_stored`]'s walk: `f` gets each slot's index, word
    /// and side entry (0 if narrow), empty ones too. The side array is
    /// looked up once a stripe (a cleaning plan's scan reads every slot:
    /// 6.5% of the `phase` churn run's cycles, 5.1% so).
    fn each_word(&self, wait: bool, mut f: impl FnMut(u32, Word, u32)) -> bool {
        let mut whole = true;
        for (g, group) in self.groups.iter().enumerate() {
            let guard = if wait {
                read(group)
            } else if let Ok(guard) = group.try_read() {
                guard
            } else {
                whole = false;
                continue;
            };
            for (k, chunk) in guard.iter().enumerate() {
                let Some(chunk) = chunk else { continue };
                let base = (g * GROUP + k) * CHUNK_SLOTS;
                for (t, words) in chunk.slots.each(wait).enumerate() {
                    let Some(words) = words else {
                        whole = false;
                        continue;
                    };
                    // After the stripe's lock: a writer makes the side
                    // array under a slot's lock.
                    let side = chunk.side.get();
                    for (j, &word) in words.iter().enumerate() {
                        let i = t * STRIPE + j;
                        // Relaxed: written and read under the slot's lock.
                        let side = side.map_or(0, |a| a[i].load(Ordering::Relaxed));
                        f((base + i) as u32, word, side);
                    }
                }
            }
        }
        whole
    }
}

fn read(cell: &Group) -> GroupRead<'_> {
    // A panic while a group lock is held can only come from a codec or a
    // caller's bug; the chunk's slots are consistent either way.
    cell.read().unwrap_or_else(|e| e.into_inner())
}

/// A slot of a present chunk; the chunk stays present while this lives.
pub(crate) struct SlotRef<'a> {
    table: &'a SlotTable,
    c: usize,
    i: usize,
    guard: Option<GroupRead<'a>>,
}

impl SlotRef<'_> {
    fn chunk(&self) -> &Chunk {
        self.guard
            .as_ref()
            .and_then(|g| g[self.c % GROUP].as_deref())
            .expect("a slot reference holds its present chunk")
    }

    /// Lock the slot (and the others of its stripe).
    pub(crate) fn lock(&self) -> SlotGuard<'_> {
        let chunk = self.chunk();
        let guard = chunk.slots.lock(self.i / STRIPE);
        let atime = chunk.atimes.as_ref().map(|a| &a[self.i]);
        // Relaxed: written and read under the slot's lock.
        let slot = Slot::unpack(
            guard[self.i % STRIPE],
            chunk.side(self.i),
            atime.map_or(0, |a| a.load(Ordering::Relaxed)),
        );
        SlotGuard {
            was_empty: slot.kind() == Kind::Empty,
            chunk,
            guard,
            i: self.i,
            slot,
            atime,
        }
    }
}

impl Drop for SlotRef<'_> {
    fn drop(&mut self) {
        let empty = self.chunk().live().load(Ordering::Relaxed) == 0;
        drop(self.guard.take());
        if empty {
            self.table.try_free(self.c);
        }
    }
}

/// A locked slot; keeps its chunk's `live` count as the slot fills or
/// empties.
pub(crate) struct SlotGuard<'a> {
    guard: StripeWords<'a>,
    /// The slot's place in its chunk.
    i: usize,
    chunk: &'a Chunk,
    was_empty: bool,
    /// The slot, unpacked; packed back when the guard goes.
    slot: Slot,
    /// Where its access time is kept, if the table tracks it.
    atime: Option<&'a AtomicU32>,
}

impl std::ops::Deref for SlotGuard<'_> {
    type Target = Slot;
    fn deref(&self) -> &Slot {
        &self.slot
    }
}

impl std::ops::DerefMut for SlotGuard<'_> {
    fn deref_mut(&mut self) -> &mut Slot {
        &mut self.slot
    }
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        self.chunk.put(&mut self.guard, self.i, &self.slot);
        if let Some(a) = self.atime {
            a.store(self.slot.atime(), Ordering::Relaxed);
        }
        let empty = self.slot.kind() == Kind::Empty;
        // Relaxed: the count changes under the slot's lock and is read to
        // decide a free under the chunk's write lock, which orders both.
        match (self.was_empty, empty) {
            (true, false) => {
                self.chunk.live().fetch_add(1, Ordering::Relaxed);
            }
            (false, true) => {
                self.chunk.live().fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk is its 64 slot words, their four one-byte locks and the
    /// live count in one word, and two pointers: 536 bytes, which the
    /// system allocator serves from a 544-byte chunk (with `std`'s
    /// `Mutex` a stripe it was 568 in 576).
    #[cfg(all(not(loom), target_pointer_width = "64"))]
    #[test]
    fn a_chunk_is_its_words_its_locks_and_two_pointers() {
        assert_eq!(std::mem::size_of::<Chunk>(), CHUNK_SLOTS * 8 + 8 + 16);
        assert_eq!(std::mem::size_of::<Chunk>(), 536);
    }

    #[test]
    fn chunks_are_made_on_write_and_freed_when_empty() {
        let t = SlotTable::new(3 * CHUNK_SLOTS + 5, true).unwrap();
        let bare = t.metadata_bytes();
        let chunk = std::mem::size_of::<Chunk>() + 4 * CHUNK_SLOTS;
        assert!(t.get(70).is_none(), "no chunk before a write");
        *t.get_or_make(70).lock() = Slot::same(7, 0);
        *t.get_or_make(71).lock() = Slot::same(8, 0);
        *t.get_or_make(3 * CHUNK_SLOTS + 4).lock() = Slot::same(9, 0);
        assert_eq!(t.metadata_bytes(), bare + 2 * chunk);
        let present: Vec<usize> = t.present().collect();
        assert_eq!(
            present.len(),
            CHUNK_SLOTS + 5,
            "chunk 1 and the short last one"
        );
        t.check().unwrap();
        assert_eq!(t.get(71).unwrap().lock().word(), 8);
        std::mem::take(&mut *t.get(70).unwrap().lock());
        assert!(t.get(71).is_some(), "a chunk with a page stays");
        std::mem::take(&mut *t.get(71).unwrap().lock());
        assert!(t.get(71).is_none(), "the emptied chunk is freed");
        std::mem::take(&mut *t.get(3 * CHUNK_SLOTS + 4).unwrap().lock());
        assert_eq!(t.metadata_bytes(), bare);
        t.check().unwrap();
    }

    #[test]
    fn a_wide_slot_makes_its_chunk_side_array() {
        let t = SlotTable::new(CHUNK_SLOTS, false).unwrap();
        let bare = t.metadata_bytes();
        *t.get_or_make(1).lock() = Slot::same(1, 0);
        let narrow = t.metadata_bytes();
        assert_eq!(narrow - bare, std::mem::size_of::<Chunk>());
        *t.get_or_make(2).lock() = Slot::written_back(5, 6, 0);
        assert_eq!(t.metadata_bytes() - narrow, 4 * CHUNK_SLOTS);
        *t.get_or_make(3).lock() = Slot::same(u64::MAX, 0);
        // Narrow again: the side entry is cleared, the neighbours keep theirs.
        *t.get_or_make(2).lock() = Slot::same(2, 0);
        let s = |i| *t.get(i).unwrap().lock();
        assert_eq!((s(1).word(), s(2).word(), s(3).word()), (1, 2, u64::MAX));
        assert_eq!(s(3).kind(), Kind::Same);
        t.check().unwrap();
    }

    #[test]
    fn threads_filling_and_emptying_chunks_of_a_group_lose_nothing() {
        // Four threads own half a chunk each, of two chunks of one group,
        // and fill and empty their slots over and over, so the chunks are
        // freed and made again under them and under each other's group
        // lock; every slot must always read what its owner wrote. Odd
        // threads write wide words, so the side array is made under the
        // others too.
        let t = SlotTable::new(2 * CHUNK_SLOTS, false).unwrap();
        let word = |th: usize, r: usize, i: usize| {
            let w = (th * 1_000_000 + r * 100 + i) as u64 + 1;
            if th % 2 == 1 { u64::MAX - w } else { w }
        };
        let rounds = if cfg!(miri) { 20 } else { 2_000 };
        std::thread::scope(|s| {
            for th in 0..4usize {
                let t = &t;
                s.spawn(move || {
                    let mine = th * CHUNK_SLOTS / 2..(th + 1) * CHUNK_SLOTS / 2;
                    for r in 0..rounds {
                        for i in mine.clone() {
                            let word = word(th, r, i);
                            *t.get_or_make(i).lock() = Slot::same(word, 0);
                        }
                        for i in mine.clone() {
                            let word = word(th, r, i);
                            let slot = t.get(i).expect("a chunk with my pages is present");
                            let mut g = slot.lock();
                            assert_eq!(g.word(), word);
                            std::mem::take(&mut *g);
                        }
                    }
                });
            }
        });
        t.check().unwrap();
        // The last emptying may have raced another thread's access and kept
        // a chunk; the next access that finds it empty frees it.
        drop(t.get(0));
        drop(t.get(CHUNK_SLOTS));
        assert!(t.present().next().is_none(), "the empty chunks are freed");
    }
}
