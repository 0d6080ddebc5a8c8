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
//! (18 bytes a page instead of 24 with a lock each; zram keeps a lock bit
//! in each 16-byte entry): locks are held for a copy or a swap, never across
//! compression, so neighbours rarely wait. A chunk's presence is behind a reader-
//! writer lock: every slot access holds it as a reader (so a chunk never
//! goes away under a slot lock), a writer makes a missing chunk, and the
//! access that empties a chunk frees it if it can take the lock as a
//! writer at once (`try_write`; if another access holds it, the chunk
//! stays until the next access that finds it empty). Order: **chunk lock, then slot
//! lock**, and no one holds two chunk locks.
//!
//! Invariant (checked by `PageStore::check_invariants`): a present chunk's
//! `live` counts its slots that are not empty.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{RwLock, RwLockReadGuard};

use super::slot::{Kind, Packed, Slot};
use crate::error::Result;
use crate::lane::Owners;
use crate::sync::{Mutex, MutexGuard};

/// Slots per chunk: 1.5 KiB of slots, few enough that the chunks left
/// partly used where pages were deleted cost little, many enough that the
/// chunk array (24 bytes a chunk) stays small.
pub(crate) const CHUNK_SLOTS: usize = 64;

/// Slots per lock.
pub(crate) const STRIPE: usize = 4;

/// A chunk of slots, [`STRIPE`] to a lock.
struct Chunk {
    slots: [Mutex<[Packed; STRIPE]>; CHUNK_SLOTS / STRIPE],
    /// Each slot's last access, if the table tracks it (written and read
    /// under the slot's lock; atomics only so that they sit apart).
    atimes: Option<Box<[AtomicU32; CHUNK_SLOTS]>>,
    /// Slots that are not empty.
    live: AtomicU32,
}

impl Chunk {
    /// Heap bytes of a chunk of a table that does or does not track access
    /// times.
    fn bytes(atimes: bool) -> usize {
        std::mem::size_of::<Chunk>()
            + if atimes {
                std::mem::size_of::<[AtomicU32; CHUNK_SLOTS]>()
            } else {
                0
            }
    }
}

type ChunkCell = RwLock<Option<Box<Chunk>>>;

/// All slots of a store.
pub(crate) struct SlotTable {
    len: usize,
    chunks: Box<[ChunkCell]>,
    /// Keep each slot's last access time (4 bytes a slot).
    atimes: bool,
}

impl SlotTable {
    /// A table of `len` slots, all empty (no chunk made yet); the chunk
    /// array is the one allocation sized by the caller, and failing it is
    /// an error, not an abort.
    pub(crate) fn new(len: usize, atimes: bool) -> Result<SlotTable> {
        let chunks = super::try_table(len.div_ceil(CHUNK_SLOTS), "the slot table", || {
            RwLock::new(None)
        })?;
        Ok(SlotTable {
            len,
            chunks,
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
        let guard = read(&self.chunks[c]);
        guard.is_some().then(|| SlotRef {
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
            let cell = &self.chunks[index / CHUNK_SLOTS];
            let mut w = cell.write().unwrap_or_else(|e| e.into_inner());
            if w.is_none() {
                *w = Some(Box::new(Chunk {
                    slots: std::array::from_fn(|_| Mutex::new(Default::default())),
                    atimes: self
                        .atimes
                        .then(|| Box::new(std::array::from_fn(|_| AtomicU32::new(0)))),
                    live: AtomicU32::new(0),
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
        (0..self.chunks.len())
            .filter(|&c| read(&self.chunks[c]).is_some())
            .flat_map(move |c| c * CHUNK_SLOTS..((c + 1) * CHUNK_SLOTS).min(self.len))
    }

    /// Heap bytes: the chunk array and the present chunks.
    pub(crate) fn metadata_bytes(&self) -> usize {
        let present = self.chunks.iter().filter(|c| read(c).is_some()).count();
        std::mem::size_of_val(&*self.chunks) + present * Chunk::bytes(self.atimes)
    }

    /// Check each present chunk's `live` against its slots (while no other
    /// thread uses the store).
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        for (c, cell) in self.chunks.iter().enumerate() {
            if let Some(chunk) = read(cell).as_ref() {
                let live: usize = chunk
                    .slots
                    .iter()
                    .map(|s| {
                        s.lock()
                            .iter()
                            .filter(|s| s.unpack(0).kind() != Kind::Empty)
                            .count()
                    })
                    .sum();
                let counted = chunk.live.load(Ordering::Relaxed) as usize;
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
        if let Ok(mut w) = self.chunks[c].try_write()
            && w.as_ref()
                .is_some_and(|ch| ch.live.load(Ordering::Relaxed) == 0)
        {
            *w = None;
        }
    }
}

/// With log placement the slots are the objects' handles: a stored slot
/// holds its object's place, and cleaning moves objects through here.
/// Called under a lane lock, so nothing may block: a chunk or slot lock
/// held by someone else means busy (the kernel's migration trylocks the
/// same way).
impl Owners for SlotTable {
    fn relocate(&self, owner: u32, mv: &mut dyn FnMut(u64, usize) -> Option<u64>) -> bool {
        let index = owner as usize;
        if index >= self.len {
            return true;
        }
        let Ok(guard) = self.chunks[index / CHUNK_SLOTS].try_read() else {
            return false;
        };
        let Some(chunk) = guard.as_ref() else {
            // No slot of the chunk holds a page: the object is not its.
            return true;
        };
        let i = index % CHUNK_SLOTS;
        let Some(mut stripe) = chunk.slots[i / STRIPE].try_lock() else {
            return false;
        };
        let packed = &mut stripe[i % STRIPE];
        let mut s = packed.unpack(0);
        if s.kind() == Kind::Stored
            && let Some(place) = mv(s.place(), s.len())
        {
            s.set_place(place);
            *packed = Packed::pack(&s);
        }
        true
    }

    fn place(&self, owner: u32) -> Option<(u64, usize)> {
        let index = owner as usize;
        if index >= self.len {
            return None;
        }
        let guard = read(&self.chunks[index / CHUNK_SLOTS]);
        let chunk = guard.as_ref()?;
        let i = index % CHUNK_SLOTS;
        let s = chunk.slots[i / STRIPE].lock()[i % STRIPE].unpack(0);
        (s.kind() == Kind::Stored).then(|| (s.place(), s.len()))
    }
}

fn read(cell: &ChunkCell) -> RwLockReadGuard<'_, Option<Box<Chunk>>> {
    // A panic while a chunk lock is held can only come from a codec or a
    // caller's bug; the chunk's slots are consistent either way.
    cell.read().unwrap_or_else(|e| e.into_inner())
}

/// A slot of a present chunk; the chunk stays present while this lives.
pub(crate) struct SlotRef<'a> {
    table: &'a SlotTable,
    c: usize,
    i: usize,
    guard: Option<RwLockReadGuard<'a, Option<Box<Chunk>>>>,
}

impl SlotRef<'_> {
    fn chunk(&self) -> &Chunk {
        self.guard
            .as_ref()
            .and_then(|g| g.as_deref())
            .expect("a slot reference holds its present chunk")
    }

    /// Lock the slot (and the others of its stripe).
    pub(crate) fn lock(&self) -> SlotGuard<'_> {
        let chunk = self.chunk();
        let guard = chunk.slots[self.i / STRIPE].lock();
        let i = self.i % STRIPE;
        let atime = chunk.atimes.as_ref().map(|a| &a[self.i]);
        // Relaxed: written and read under the slot's lock.
        let slot = guard[i].unpack(atime.map_or(0, |a| a.load(Ordering::Relaxed)));
        SlotGuard {
            was_empty: slot.kind() == Kind::Empty,
            live: &chunk.live,
            guard,
            i,
            slot,
            atime,
        }
    }
}

impl Drop for SlotRef<'_> {
    fn drop(&mut self) {
        let empty = self.chunk().live.load(Ordering::Relaxed) == 0;
        drop(self.guard.take());
        if empty {
            self.table.try_free(self.c);
        }
    }
}

/// A locked slot; keeps its chunk's `live` count as the slot fills or
/// empties.
pub(crate) struct SlotGuard<'a> {
    guard: MutexGuard<'a, [Packed; STRIPE]>,
    /// The slot's place in its stripe.
    i: usize,
    live: &'a AtomicU32,
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
        self.guard[self.i] = Packed::pack(&self.slot);
        if let Some(a) = self.atime {
            a.store(self.slot.atime(), Ordering::Relaxed);
        }
        let empty = self.slot.kind() == Kind::Empty;
        // Relaxed: the count changes under the slot's lock and is read to
        // decide a free under the chunk's write lock, which orders both.
        match (self.was_empty, empty) {
            (true, false) => {
                self.live.fetch_add(1, Ordering::Relaxed);
            }
            (false, true) => {
                self.live.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_made_on_write_and_freed_when_empty() {
        let t = SlotTable::new(3 * CHUNK_SLOTS + 5, true).unwrap();
        let bare = t.metadata_bytes();
        assert!(t.get(70).is_none(), "no chunk before a write");
        *t.get_or_make(70).lock() = Slot::same(7, 0);
        *t.get_or_make(71).lock() = Slot::same(8, 0);
        *t.get_or_make(3 * CHUNK_SLOTS + 4).lock() = Slot::same(9, 0);
        assert_eq!(t.metadata_bytes(), bare + 2 * Chunk::bytes(true));
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
    fn threads_filling_and_emptying_one_chunk_lose_nothing() {
        // Four threads own a quarter of one chunk each and fill and empty
        // their slots over and over, so the chunk is freed and made again
        // under them; every slot must always read what its owner wrote.
        let t = SlotTable::new(CHUNK_SLOTS, false).unwrap();
        let rounds = if cfg!(miri) { 20 } else { 2_000 };
        std::thread::scope(|s| {
            for th in 0..4usize {
                let t = &t;
                s.spawn(move || {
                    let mine = th * CHUNK_SLOTS / 4..(th + 1) * CHUNK_SLOTS / 4;
                    for r in 0..rounds {
                        for i in mine.clone() {
                            let word = (th * 1_000_000 + r * 100 + i) as u64 + 1;
                            *t.get_or_make(i).lock() = Slot::same(word, 0);
                        }
                        for i in mine.clone() {
                            let word = (th * 1_000_000 + r * 100 + i) as u64 + 1;
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
        // the chunk; the next access that finds it empty frees it.
        drop(t.get(0));
        assert!(t.present().next().is_none(), "the empty chunk is freed");
    }
}
