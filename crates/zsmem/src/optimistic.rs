//! Reads without the class lock: what a class publishes for them (its
//! handle directory, its zspages' addresses, a count of relocations) and
//! the sequence-checked copy.
//!
//! A read loads the class's move count (even: no relocation under way),
//! the handle's entry (live, of its generation, not dying), the address of
//! its zspage, copies the bytes (`words.rs`: whole 64-byte blocks by
//! 16-byte vector loads where the processor makes them atomic, the rest
//! word by word), and loads the
//! entry and the count again after an `Acquire` fence. Equal words and
//! equal counts mean the copy is the object's as it was when the entry was
//! first loaded:
//! - a free changes the entry (its generation moves on, never to repeat in
//!   the slot), and whoever writes that object's bytes afterwards (a new
//!   object in the slot, or in a zspage made again in the same run) does
//!   so after a `Release` fence (`words::store`), so a copy that saw any of
//!   those bytes sees the changed entry;
//! - a relocation (compaction, or a zspage renumbered when another is
//!   released) and a write in place happen between [`Published::begin`]
//!   and [`Published::end`], which make the count odd and then even again;
//!   a copy that saw anything written meanwhile sees a count other than
//!   its first (this also catches an object moved away and back, which
//!   would leave its entry as it was).
//!
//! Anything else (a count odd, an entry not the handle's, a zspage not
//! published, a buffer too small, the check failing twice) sends the
//! caller to the locked path, which waits for the writer and says exactly
//! what is wrong with the handle. Class memory stays mapped while the pool
//! lives (runs are returned with `MADV_DONTNEED`, never unmapped), so a
//! copy from an address that went stale reads harmless bytes.
//!
//! A class that publishes keeps every handle chunk it made (the directory's
//! rule): 8 bytes an object of its peak.

use std::mem::MaybeUninit;
use std::sync::Arc;

use crate::grow::GrowOnly;
use crate::handle::{Directory, Handle};
use crate::sync::atomic::{AtomicU64, Ordering, fence};

/// Attempts before a read goes to the lock.
const TRIES: usize = 2;

/// The top bit of a zspage's published use count: a magazine may have
/// parked one of its slots since the class last scanned it
/// ([`Published::note_parked`]). Set by magazines' frees without the lock
/// and kept by the class's updates of the count, both by plain stores, so
/// a race may lose it (or the count's update): a hint, whose loss keeps a
/// zspage of parked slots until they are taken back otherwise (a store,
/// compaction, `flush`, `trim`), never a correctness matter.
const MAYBE_PARKED: usize = 1 << (usize::BITS - 1);

/// What a class publishes for lock-free reads; written under its lock.
#[derive(Debug)]
pub(crate) struct Published {
    handles: Arc<Directory>,
    /// Zspage id to the start of its run (null for no zspage).
    bases: GrowOnly<u8, 32>,
    /// With magazines: zspage id to its use count (slots held, live or
    /// parked), as an address without provenance: what a magazine's free
    /// reads to leave a zspage's last slots to the locked free; its top
    /// bit, [`MAYBE_PARKED`], set by a magazine's free that parked one of
    /// the zspage's slots.
    held: GrowOnly<u8, 32>,
    /// Odd while a relocation or a write in place is under way.
    moves: AtomicU64,
    /// How a place's object index becomes an offset in its run.
    geometry: Geometry,
    /// Bits of a place that hold the object index.
    obj_bits: u32,
}

/// Where object `obj` of a run lies, and how far a run reaches.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Geometry {
    /// A class's zspage: `objs` slots of `size` bytes (a multiple of 8).
    Slots { size: usize, objs: usize },
    /// A lane's segment of `span` bytes (a multiple of 8): an object at
    /// `obj << shift`, anywhere an object of its length fits.
    Units { shift: u32, span: usize },
}

impl Geometry {
    /// The offset of an object of `len` bytes at index `obj`, if it lies
    /// inside a run (so do the words it lies in).
    fn offset(self, obj: usize, len: usize) -> Option<usize> {
        match self {
            Geometry::Slots { size, objs } => (obj < objs && len <= size).then_some(obj * size),
            Geometry::Units { shift, span } => {
                let off = obj << shift;
                (off + len <= span).then_some(off)
            }
        }
    }
}

impl Published {
    /// For a class (or lane) whose runs are laid out as `geometry` says
    /// and whose handle table's places keep the object index in `obj_bits`
    /// bits; `None` where slots or spans are not whole words (then read
    /// under the lock).
    pub(crate) fn new(
        handles: Arc<Directory>,
        geometry: Geometry,
        obj_bits: u32,
    ) -> Option<Published> {
        let whole = match geometry {
            Geometry::Slots { size, .. } => size,
            Geometry::Units { span, .. } => span,
        };
        whole.is_multiple_of(8).then(|| Published {
            handles,
            bases: GrowOnly::new(),
            held: GrowOnly::new(),
            moves: AtomicU64::new(0),
            geometry,
            obj_bits,
        })
    }

    /// The handle directory the class publishes.
    pub(crate) fn directory(&self) -> &Directory {
        &self.handles
    }

    /// Zspage `id` starts at `base` (null: there is no zspage `id`).
    pub(crate) fn set_base(&self, id: u32, base: *mut u8) {
        self.bases.publish(id as usize, base);
    }

    /// Zspage `id` holds `n` slots (live or parked; a class with
    /// magazines, under its lock); its [`MAYBE_PARKED`] mark is kept.
    pub(crate) fn set_held(&self, id: u32, n: usize) {
        let mark = self.held.get(id as usize).addr() & MAYBE_PARKED;
        self.set_held_marked(id, n, mark != 0);
    }

    /// Zspage `id` holds `n` slots, with or without the mark that a
    /// magazine may hold one of them (a renumbering moves a zspage's mark
    /// with it; under the class's lock).
    pub(crate) fn set_held_marked(&self, id: u32, n: usize, marked: bool) {
        let mark = if marked { MAYBE_PARKED } else { 0 };
        self.held
            .publish(id as usize, std::ptr::without_provenance_mut(n | mark));
    }

    /// Whether the zspage `place` lies in held more than `n` slots when
    /// last published (a hint: a renumbering may make it another
    /// zspage's count; a wrong answer costs a lock or a parked slot more,
    /// never correctness).
    #[inline]
    pub(crate) fn holds_more_than(&self, place: u32, n: usize) -> bool {
        self.held.get((place >> self.obj_bits) as usize).addr() & !MAYBE_PARKED > n
    }

    /// A magazine's free parked a slot at `place`: mark its zspage, so that
    /// the locked free that may be its last live object's looks for parked
    /// slots there (without the lock: see [`MAYBE_PARKED`]).
    #[inline]
    pub(crate) fn note_parked(&self, place: u32) {
        let id = (place >> self.obj_bits) as usize;
        let word = self.held.get(id).addr();
        if word & MAYBE_PARKED == 0 {
            self.held
                .store_if_made(id, std::ptr::without_provenance_mut(word | MAYBE_PARKED));
        }
    }

    /// Whether zspage `id` is marked: a magazine may hold one of its slots.
    pub(crate) fn maybe_parked(&self, id: u32) -> bool {
        self.held.get(id as usize).addr() & MAYBE_PARKED != 0
    }

    /// Begin a stretch of relocations or writes in place; false if one is
    /// already under way (nested: only the outer one ends it).
    pub(crate) fn begin(&self) -> bool {
        let n = self.moves.load(Ordering::Relaxed);
        if n & 1 != 0 {
            return false;
        }
        self.moves.store(n + 1, Ordering::Relaxed);
        // Orders the odd count before every write of the stretch: a read
        // that sees one of them (through its own `Acquire` fence) sees the
        // count odd or later.
        fence(Ordering::Release);
        true
    }

    /// End the stretch [`Published::begin`] began.
    pub(crate) fn end(&self) {
        let n = self.moves.load(Ordering::Relaxed);
        debug_assert!(n & 1 == 1, "end without begin");
        // Release: a read that loads the even count sees every write of the
        // stretch (relocated entries, zspage addresses).
        self.moves.store(n + 1, Ordering::Release);
    }

    /// Copy `h`'s object into `buf` without the lock: `Ok` with its
    /// length, or `Err` for the locked path to decide, with how many bytes
    /// at the start of `buf` a refused copy wrote (the handle's class is
    /// this one, checked by the caller).
    #[inline]
    pub(crate) fn read(&self, h: Handle, buf: &mut [MaybeUninit<u8>]) -> Result<usize, usize> {
        let Some(entry) = self.handles.entry(h.slot()) else {
            return Err(0);
        };
        let mut written = 0;
        for _ in 0..TRIES {
            // Acquire: pairs with `end`'s Release.
            let n = self.moves.load(Ordering::Acquire);
            if n & 1 != 0 {
                return Err(written);
            }
            // Acquire: pairs with a free's Release store (a stale handle
            // then sees the free) and with `publish`.
            let word = entry.load(Ordering::Acquire);
            let Some((place, len)) = crate::handle::live_place(h, word) else {
                return Err(written);
            };
            let (zspage, obj) = (place >> self.obj_bits, place & ((1 << self.obj_bits) - 1));
            if buf.len() < len {
                return Err(written);
            }
            let Some(off) = self.geometry.offset(obj as usize, len) else {
                return Err(written);
            };
            let base = self.bases.get(zspage as usize);
            if base.is_null() {
                return Err(written);
            }
            // SAFETY: `base` is the start of a run of this class (published
            // under the class lock, alive until the pool's source closes,
            // which needs the pool that `self` belongs to); the object's
            // words lie in the run (`Geometry::offset`: runs and slots are
            // whole words); its memory is accessed only through `words`
            // while this class publishes; `buf` has `len` bytes to write.
            unsafe { crate::words::load_at(base, off, buf.as_mut_ptr().cast(), len) }
            written = written.max(len);
            // Acquire: a copy that saw any later write sees, below, the
            // entry or the count that write's writer changed first.
            fence(Ordering::Acquire);
            if entry.load(Ordering::Relaxed) == word && self.moves.load(Ordering::Relaxed) == n {
                return Ok(len);
            }
        }
        Err(written)
    }

    /// Where the object a parked entry's `word` names lies (for a
    /// magazine's allocation, which writes it without the lock): the same
    /// sequence check as a read's, on the entry's word alone. `None` if a
    /// relocation was under way or the entry changed (then the caller
    /// looks again or takes the lock). The address stays right as long as
    /// the entry keeps `word`: a zspage's run never moves, and its id only
    /// goes down (a renumbering gives the last zspage a lower one), so an
    /// entry that names the same id names the same zspage.
    pub(crate) fn parked_object(&self, entry: &crate::handle::Entry, word: u64) -> Option<*mut u8> {
        // Acquire: pairs with `end`'s Release.
        let n = self.moves.load(Ordering::Acquire);
        if n & 1 != 0 {
            return None;
        }
        let place = (word & 0xffff_ffff) as u32;
        let (zspage, obj) = (place >> self.obj_bits, place & ((1 << self.obj_bits) - 1));
        let off = self.geometry.offset(obj as usize, 1)?;
        let base = self.bases.get(zspage as usize);
        // Acquire: a base or entry written by a relocation that began after
        // the first load of the count makes the loads below see it.
        fence(Ordering::Acquire);
        if base.is_null()
            || entry.load(Ordering::Relaxed) != word
            || self.moves.load(Ordering::Relaxed) != n
        {
            return None;
        }
        // SAFETY: `off` lies inside the run `base` starts (`Geometry::offset`).
        Some(unsafe { base.add(off) })
    }

    /// Heap bytes of the zspage address map.
    pub(crate) fn metadata_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.bases.metadata_bytes() + self.held.metadata_bytes()
    }
}
