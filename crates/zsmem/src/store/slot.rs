//! One slot's state: 16 bytes as code sees it ([`Slot`]), 12 in the table
//! ([`Packed`]: value and meta; the access time, when the store tracks it,
//! in an array of its own beside), since the store keeps one per page and
//! its size is most of the store's own metadata.
//!
//! ```text
//! value (u64): the handle (stored), the word (same-filled), or
//!              generation (32) | block (32) (written back); 0 when empty
//! meta  (u32): bits  0..17 object length (up to 64 KiB + 1)
//!              bits 17..19 kind: empty, same-filled, stored, written back
//!              bit  19 idle       bit 20 huge
//!              bit  21 incompressible (recompression did not shrink it)
//!              bit  22 recompressed
//!              bits 23..27 codec: index in the store's codec table
//! atime (u32): last access, in seconds of the store's clock
//! ```

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

/// A slot as the table keeps it: value and meta in 12 bytes (4-byte
/// aligned), the access time kept apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Packed {
    lo: u32,
    hi: u32,
    meta: u32,
}

const _: () = assert!(std::mem::size_of::<Packed>() == 12);

impl Packed {
    pub(crate) fn pack(s: &Slot) -> Packed {
        Packed {
            lo: s.value as u32,
            hi: (s.value >> 32) as u32,
            meta: s.meta,
        }
    }

    /// The slot, with its access time.
    pub(crate) fn unpack(self, atime: u32) -> Slot {
        Slot {
            value: u64::from(self.hi) << 32 | u64::from(self.lo),
            meta: self.meta,
            atime,
        }
    }
}

impl Slot {
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
        assert_eq!(Packed::pack(&s).unpack(99), s);
        assert_eq!(Packed::pack(&w).unpack(5), w);
        assert_eq!(Packed::default().unpack(0), Slot::default());
    }
}
