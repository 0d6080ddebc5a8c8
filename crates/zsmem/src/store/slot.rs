//! One slot's state: 16 bytes as code sees it ([`Slot`]), 8 in the table
//! for most slots ([`Word`]), since the store keeps one per page and its
//! size is most of the store's own metadata.
//!
//! As code sees it:
//!
//! ```text
//! value (u64): the handle (stored; with log placement the object's place),
//!              the word (same-filled), or generation (32) | block (32)
//!              (written back); 0 when empty
//! meta  (u32): bits  0..17 object length (up to 64 KiB + 1)
//!              bits 17..19 kind: empty, same-filled, stored, written back
//!              bit  19 idle       bit 20 huge
//!              bit  21 incompressible (recompression did not shrink it)
//!              bit  22 recompressed
//!              bits 23..27 codec: index in the store's codec table
//! atime (u32): last access, in seconds of the store's clock
//! ```
//!
//! In the table a slot is a *narrow* word when it fits one, else *wide*:
//! its value in the word and its meta (never 0: the kind is not empty) in
//! its chunk's side array, made the first time a slot of the chunk needs
//! it. The access time, when the store tracks it, is in an array of its
//! own. A side entry of 0 means the word is narrow:
//!
//! ```text
//! empty:   0
//! same:    bits 0..2 kind (1), bit 2 idle, bits 3..64 the word (< 2^61)
//! stored:  bits 0..2 kind (2), bits 2..18 length - 1 (length 1..=65536),
//!          bits 18..25 meta bits 19..26 (idle, huge, incompressible,
//!          recompressed, codec < 8), bits 25..64 value (< 2^39: a log
//!          placement's place, lane 7 | segment 16 | offset 16)
//! ```
//!
//! So with log placement a stored page costs 8 bytes of slot; a class
//! placement's handle (63 bits) is wide, 12 bytes, as is a page written
//! back or a same-filled word of 2^61 or more.

use crate::handle::Handle;

const LEN_BITS: u32 = 17;
const LEN_MASK: u32 = (1 << LEN_BITS) - 1;
const KIND_SHIFT: u32 = 17;
const KIND_MASK: u32 = 0b11 << KIND_SHIFT;
const IDLE: u32 = 1 << 19;
const HUGE: u32 = 1 << 20;
const INCOMPRESSIBLE: u32 = 1 << 21;
const RECOMPRESSED: u32 = 1 << 22;
const CODEC_SHIFT: u32 = 23;
const CODEC_MASK: u32 = 0b1111 << CODEC_SHIFT;

/// Most codecs a store's table may hold (the slot has 4 bits for it).
pub(crate) const MAX_CODECS: usize = 16;

/// What a slot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Nothing: reads as zeros.
    Empty = 0,
    /// A same-filled page: the word, no object.
    Same = 1,
    /// An object in the pool.
    Stored = 2,
    /// A page in the backing file.
    WrittenBack = 3,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Slot {
    value: u64,
    meta: u32,
    atime: u32,
}

const _: () = assert!(std::mem::size_of::<Slot>() == 16);

/// A slot's word in the table (8 bytes, 4-byte aligned so that a stripe
/// of them shares its lock's alignment).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Word {
    lo: u32,
    hi: u32,
}

impl Word {
    fn new(v: u64) -> Word {
        Word {
            lo: v as u32,
            hi: (v >> 32) as u32,
        }
    }

    fn get(self) -> u64 {
        u64::from(self.hi) << 32 | u64::from(self.lo)
    }
}

/// Narrow: bits of the kind.
const N_KIND_BITS: u32 = 2;
/// Narrow same-filled: the idle bit, and where the word starts.
const N_SAME_IDLE: u64 = 1 << 2;
const N_SAME_SHIFT: u32 = 3;
/// Narrow stored: where length - 1 (16 bits), the meta flags and the
/// value start.
const N_LEN_SHIFT: u32 = 2;
const N_LEN_MASK: u64 = 0xFFFF;
const N_FLAGS_SHIFT: u32 = 18;
const N_VALUE_SHIFT: u32 = 25;
/// The meta bits that may be set, and those a narrow stored word keeps
/// (idle to the codec's low 3 bits).
const FLAGS_SHIFT: u32 = 19;
const FLAGS_MASK: u32 = IDLE | HUGE | INCOMPRESSIBLE | RECOMPRESSED | CODEC_MASK;
const N_FLAGS_MASK: u32 = (1 << (N_VALUE_SHIFT - N_FLAGS_SHIFT)) - 1;

impl Slot {
    /// The slot as the table keeps it: its word and, for a wide slot, its
    /// meta for the side array (0 for a narrow one). An empty slot packs
    /// as the word 0 whatever else it held.
    pub(crate) fn pack(&self) -> (Word, u32) {
        match self.narrow() {
            Some(w) => (Word::new(w), 0),
            None => (Word::new(self.value), self.meta),
        }
    }

    fn narrow(&self) -> Option<u64> {
        let flags = self.meta & FLAGS_MASK;
        if self.meta & !(LEN_MASK | KIND_MASK | FLAGS_MASK) != 0 {
            return None;
        }
        match self.kind() {
            Kind::Empty => Some(0),
            Kind::Same => {
                let fits = self.len() == 0 && flags & !IDLE == 0 && self.value >> 61 == 0;
                let idle = if flags & IDLE != 0 { N_SAME_IDLE } else { 0 };
                fits.then_some(Kind::Same as u64 | idle | self.value << N_SAME_SHIFT)
            }
            Kind::Stored => {
                let len = self.len() as u64;
                let fits = (1..=N_LEN_MASK + 1).contains(&len)
                    && flags >> FLAGS_SHIFT <= N_FLAGS_MASK
                    && self.value >> (64 - N_VALUE_SHIFT) == 0;
                fits.then(|| {
                    Kind::Stored as u64
                        | (len - 1) << N_LEN_SHIFT
                        | u64::from(flags >> FLAGS_SHIFT) << N_FLAGS_SHIFT
                        | self.value << N_VALUE_SHIFT
                })
            }
            Kind::WrittenBack => None,
        }
    }

    /// The value of a stored slot's table word (with log placement, its
    /// object's place), `None` for any other kind: what
    /// [`Slot::unpack`]`(..).place()` gives a stored slot, without making
    /// the slot.
    #[inline]
    pub(crate) fn stored_place(word: Word, side: u32) -> Option<u64> {
        let w = word.get();
        if side != 0 {
            ((side & KIND_MASK) >> KIND_SHIFT == Kind::Stored as u32).then_some(w)
        } else {
            (w & ((1 << N_KIND_BITS) - 1) == Kind::Stored as u64).then_some(w >> N_VALUE_SHIFT)
        }
    }

    /// The slot of a table word, its side entry (0 if none) and its
    /// access time.
    pub(crate) fn unpack(word: Word, side: u32, atime: u32) -> Slot {
        let w = word.get();
        if side != 0 {
            return Slot {
                value: w,
                meta: side,
                atime,
            };
        }
        let kind = (w & ((1 << N_KIND_BITS) - 1)) as u32;
        let (value, meta) = if kind == Kind::Same as u32 {
            let idle = if w & N_SAME_IDLE != 0 { IDLE } else { 0 };
            (w >> N_SAME_SHIFT, idle)
        } else if kind == Kind::Stored as u32 {
            let len = ((w >> N_LEN_SHIFT) & N_LEN_MASK) as u32 + 1;
            let flags = ((w >> N_FLAGS_SHIFT) as u32 & N_FLAGS_MASK) << FLAGS_SHIFT;
            (w >> N_VALUE_SHIFT, len | flags)
        } else {
            // The word 0 (nothing else is narrow).
            return Slot {
                atime,
                ..Slot::default()
            };
        };
        Slot {
            value,
            meta: meta | kind << KIND_SHIFT,
            atime,
        }
    }

    pub(crate) fn same(word: u64, atime: u32) -> Slot {
        Slot {
            value: word,
            meta: (Kind::Same as u32) << KIND_SHIFT,
            atime,
        }
    }

    /// An object of `len` bytes (`len <= 65536`) under `handle`, coded by
    /// codec table entry `codec` (`< MAX_CODECS`).
    #[cfg(test)]
    pub(crate) fn stored(handle: Handle, len: usize, huge: bool, codec: u8, atime: u32) -> Slot {
        Slot::stored_at(handle.to_raw(), len, huge, codec, atime)
    }

    /// An object of `len` bytes whose handle (or, with log placement, its
    /// place) is `value`.
    pub(crate) fn stored_at(value: u64, len: usize, huge: bool, codec: u8, atime: u32) -> Slot {
        debug_assert!(len as u32 <= LEN_MASK && usize::from(codec) < MAX_CODECS);
        Slot {
            value,
            meta: len as u32
                | (Kind::Stored as u32) << KIND_SHIFT
                | if huge { HUGE } else { 0 }
                | u32::from(codec) << CODEC_SHIFT,
            atime,
        }
    }

    /// A page in block `block` of the backing file, written with `generation`.
    /// Flags are cleared: the slot holds no memory any more.
    pub(crate) fn written_back(block: u32, generation: u32, atime: u32) -> Slot {
        Slot {
            value: u64::from(generation) << 32 | u64::from(block),
            meta: (Kind::WrittenBack as u32) << KIND_SHIFT,
            atime,
        }
    }

    pub(crate) fn kind(&self) -> Kind {
        match (self.meta & KIND_MASK) >> KIND_SHIFT {
            0 => Kind::Empty,
            1 => Kind::Same,
            2 => Kind::Stored,
            _ => Kind::WrittenBack,
        }
    }

    pub(crate) fn len(&self) -> usize {
        (self.meta & LEN_MASK) as usize
    }

    pub(crate) fn handle(&self) -> Handle {
        Handle::from_raw(self.value)
    }

    /// The object's place, for a store whose pool places by log (the slot
    /// is then the object's handle).
    pub(crate) fn place(&self) -> u64 {
        self.value
    }

    /// Cleaning moved the object: its new place.
    pub(crate) fn set_place(&mut self, place: u64) {
        debug_assert_eq!(self.kind(), Kind::Stored);
        self.value = place;
    }

    pub(crate) fn word(&self) -> u64 {
        self.value
    }

    pub(crate) fn block(&self) -> u32 {
        self.value as u32
    }

    pub(crate) fn generation(&self) -> u32 {
        (self.value >> 32) as u32
    }

    pub(crate) fn codec(&self) -> u8 {
        ((self.meta & CODEC_MASK) >> CODEC_SHIFT) as u8
    }

    pub(crate) fn atime(&self) -> u32 {
        self.atime
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.meta & IDLE != 0
    }

    pub(crate) fn is_huge(&self) -> bool {
        self.meta & HUGE != 0
    }

    pub(crate) fn is_incompressible(&self) -> bool {
        self.meta & INCOMPRESSIBLE != 0
    }

    pub(crate) fn is_recompressed(&self) -> bool {
        self.meta & RECOMPRESSED != 0
    }

    pub(crate) fn set_idle(&mut self, idle: bool) {
        self.set(IDLE, idle);
    }

    pub(crate) fn set_incompressible(&mut self) {
        self.set(INCOMPRESSIBLE, true);
    }

    pub(crate) fn set_recompressed(&mut self) {
        self.set(RECOMPRESSED, true);
    }

    /// An access: not idle any more, accessed now.
    pub(crate) fn touch(&mut self, now: u32) {
        self.set(IDLE, false);
        self.atime = now;
    }

    fn set(&mut self, bit: u32, on: bool) {
        if on {
            self.meta |= bit;
        } else {
            self.meta &= !bit;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_pack_and_unpack() {
        let h = Handle::from_raw(0xABCD_0000_1234_5678);
        let mut s = Slot::stored(h, 65536, true, 15, 77);
        assert_eq!(s.kind(), Kind::Stored);
        assert_eq!(
            (s.handle(), s.len(), s.codec(), s.atime()),
            (h, 65536, 15, 77)
        );
        assert!(s.is_huge() && !s.is_idle() && !s.is_incompressible());
        s.set_idle(true);
        s.set_incompressible();
        s.set_recompressed();
        assert!(s.is_idle() && s.is_incompressible() && s.is_recompressed());
        assert_eq!((s.len(), s.codec()), (65536, 15));
        s.touch(99);
        assert!(!s.is_idle() && s.atime() == 99);
        let w = Slot::written_back(u32::MAX, 7, 5);
        assert_eq!(
            (w.kind(), w.block(), w.generation()),
            (Kind::WrittenBack, u32::MAX, 7)
        );
        assert_eq!(Slot::same(9, 0).kind(), Kind::Same);
        assert_eq!(Slot::default().kind(), Kind::Empty);
        // Packed and back: all but the access time, kept apart.
        let round = |s: &Slot| {
            let (w, side) = s.pack();
            Slot::unpack(w, side, s.atime())
        };
        assert_eq!(round(&s), s);
        assert_eq!(round(&w), w);
        assert_eq!(Slot::unpack(Word::default(), 0, 0), Slot::default());
    }

    /// Which slots are narrow, and every slot packs and unpacks to itself.
    #[test]
    fn narrow_where_it_fits_wide_elsewhere() {
        let place = (64u64 << 32) | (0xFFFF << 16) | 0xFFFF;
        let cases = [
            (Slot::stored_at(place, 1, false, 0, 3), true),
            (Slot::stored_at(place, 65536, true, 7, 3), true),
            (Slot::stored_at(place, 65536, true, 8, 3), false),
            (Slot::stored_at(1 << 39, 100, false, 0, 3), false),
            (Slot::stored_at(place, 0, false, 0, 3), false),
            (Slot::stored_at(place, 65537, false, 0, 3), false),
            (Slot::same(0, 1), true),
            (Slot::same((1 << 61) - 1, 1), true),
            (Slot::same(1 << 61, 1), false),
            (Slot::same(u64::MAX, 1), false),
            (Slot::written_back(1, 1, 1), false),
            (Slot::default(), true),
        ];
        for (mut s, narrow) in cases {
            for idle in [false, true] {
                if s.kind() == Kind::Stored {
                    s.set_idle(idle);
                    s.set_recompressed();
                }
                let (w, side) = s.pack();
                assert_eq!(side == 0, narrow, "{s:?}");
                assert_eq!(Slot::unpack(w, side, s.atime()), s, "{s:?}");
                // A cleaning plan's scan reads the place from the word.
                assert_eq!(
                    Slot::stored_place(w, side),
                    (s.kind() == Kind::Stored).then(|| s.place()),
                    "{s:?}"
                );
            }
        }
        // A class placement's handle is wide, whatever its bits.
        let h = Handle::from_raw(0x7FFF_FFFF_FFFF_FFFF);
        let s = Slot::stored(h, 4096, true, 3, 0);
        let (w, side) = s.pack();
        assert_ne!(side, 0);
        assert_eq!(Slot::unpack(w, side, 0), s);
    }
}
