//! zblock (2025): blocks of 1, 2, 4 or 8 pages holding equal slots.
//!
//! A block type is a row of a fixed table: slots per block and the block's
//! order (2^order pages). Its slot size is the block's bytes less the block
//! header, divided by the slots, rounded down to 8 bytes. An object goes to
//! the block type of the smallest slot that holds it (the kernel finds it
//! in a tree of the table; a binary search here). Each block starts with
//! its header: list links (kept off-page here), a bitmap of occupied slots
//! and a count of free slots, 40 bytes with alignment. Per block type, the
//! blocks with a free slot are on a list; an allocation takes the first
//! such block, or a new one, and the first free slot of its bitmap. A block
//! whose last object is freed goes back to the OS. Nothing is ever moved:
//! zblock has no compaction. The largest object is the largest slot, 4080
//! bytes (a quarter of a 4-page block).

use zsmem::os::{OsPages, PageBlock};

use super::{HandleTable, IdVec, Lists, PeerAllocator, check_len, too_large};
use crate::contestants::LabError;
use crate::corpus::PAGE_SIZE;

/// The block header: list links (16 bytes), a 128-bit slot bitmap and a
/// 32-bit free count, rounded up to 8 bytes.
pub const ZBLOCK_HEADER_SIZE: usize = (16 + 16 + 4usize).next_multiple_of(8);
const BITMAP_AT: usize = 16;
const FREE_AT: usize = 32;

/// The 4 KiB-page table of the 2025 series: (slots per block, order).
pub const BLOCK_TYPES: [(usize, u32); 31] = [
    (63, 0),
    (32, 0),
    (21, 0),
    (15, 0),
    (12, 0),
    (10, 0),
    (9, 0),
    (8, 0),
    (29, 2),
    (13, 1),
    (6, 0),
    (11, 1),
    (5, 0),
    (9, 1),
    (8, 1),
    (29, 3),
    (13, 2),
    (12, 2),
    (11, 2),
    (10, 2),
    (9, 2),
    (17, 3),
    (8, 2),
    (15, 3),
    (14, 3),
    (13, 3),
    (6, 2),
    (11, 3),
    (10, 3),
    (9, 3),
    (4, 2),
];

/// Slot sizes of the block types, in table order (ascending).
pub const SLOT_SIZES: [usize; 31] = {
    let mut s = [0; 31];
    let mut i = 0;
    while i < 31 {
        s[i] = slot_size(BLOCK_TYPES[i].0, BLOCK_TYPES[i].1);
        i += 1;
    }
    s
};

/// The slot size of a block of `slots` slots and 2^`order` pages.
pub const fn slot_size(slots: usize, order: u32) -> usize {
    ((PAGE_SIZE << order) - ZBLOCK_HEADER_SIZE) / slots / 8 * 8
}

/// Slot size of block type `t`.
pub fn type_slot_size(t: usize) -> usize {
    SLOT_SIZES[t]
}

/// The largest object: the largest slot.
pub fn max_size() -> usize {
    type_slot_size(BLOCK_TYPES.len() - 1)
}

/// The block type for an object of `size` bytes: the smallest slot that
/// holds it.
pub fn block_type(size: usize) -> Option<usize> {
    let i = SLOT_SIZES.partition_point(|&s| s < size);
    (i < BLOCK_TYPES.len()).then_some(i)
}

struct Block {
    pages: PageBlock,
    block_type: u8,
}

impl Block {
    fn free_slots(&self) -> usize {
        let b = self.pages.as_slice();
        u32::from_ne_bytes(b[FREE_AT..FREE_AT + 4].try_into().expect("4 bytes")) as usize
    }

    fn set_free_slots(&mut self, n: usize) {
        self.pages.as_mut_slice()[FREE_AT..FREE_AT + 4].copy_from_slice(&(n as u32).to_ne_bytes());
    }

    fn occupied(&self, slot: usize) -> bool {
        self.pages.as_slice()[BITMAP_AT + slot / 8] & (1 << (slot % 8)) != 0
    }

    fn set_occupied(&mut self, slot: usize, on: bool) {
        let byte = &mut self.pages.as_mut_slice()[BITMAP_AT + slot / 8];
        if on {
            *byte |= 1 << (slot % 8);
        } else {
            *byte &= !(1 << (slot % 8));
        }
    }

    fn first_free_slot(&self) -> Option<usize> {
        let n = BLOCK_TYPES[self.block_type as usize].0;
        let bm = &self.pages.as_slice()[BITMAP_AT..BITMAP_AT + 16];
        let word = u128::from_le_bytes(bm.try_into().expect("16 bytes"));
        let slot = (!word).trailing_zeros() as usize;
        (slot < n).then_some(slot)
    }

    fn offset(&self, slot: usize) -> usize {
        ZBLOCK_HEADER_SIZE + slot * type_slot_size(self.block_type as usize)
    }
}

#[derive(Clone, Copy, Debug)]
struct Loc {
    block: u32,
    slot: u8,
    len: u32,
}

/// A zblock pool.
///
/// ```
/// use zsmem_lab::contestants::peers::{PeerAllocator, zblock::Zblock};
/// let mut z = Zblock::new().unwrap();
/// let hs: Vec<u64> = (0..63).map(|_| z.alloc(&[1; 60]).unwrap()).collect();
/// assert_eq!(z.pages().held_pages(), 1); // 63 slots of 64 bytes in one page
/// for h in hs {
///     z.free(h).unwrap();
/// }
/// assert_eq!(z.pages().held_pages(), 0);
/// ```
pub struct Zblock {
    os: OsPages,
    blocks: IdVec<Block>,
    /// Blocks with a free slot, by block type.
    lists: Lists,
    handles: HandleTable<Loc>,
}

impl Zblock {
    /// An empty pool on a page source of its own.
    pub fn new() -> Result<Self, LabError> {
        Ok(Zblock {
            os: super::page_source()?,
            blocks: IdVec::new(),
            lists: Lists::new(BLOCK_TYPES.len()),
            handles: HandleTable::new(),
        })
    }

    /// Blocks held now, by block type.
    pub fn blocks_by_type(&self) -> Vec<usize> {
        let mut v = vec![0; BLOCK_TYPES.len()];
        for (_, b) in self.blocks.iter() {
            v[b.block_type as usize] += 1;
        }
        v
    }
}

impl PeerAllocator for Zblock {
    fn name(&self) -> &str {
        "zblock"
    }

    fn config(&self) -> String {
        format!(
            "zblock: {} block types of 1-8 pages, slots {}..{} B, free-slot bitmaps, no compaction",
            BLOCK_TYPES.len(),
            type_slot_size(0),
            max_size()
        )
    }

    fn max_size(&self) -> usize {
        max_size()
    }

    fn alloc(&mut self, data: &[u8]) -> Result<u64, LabError> {
        check_len("zblock", data.len(), max_size())?;
        let t =
            block_type(data.len()).ok_or_else(|| too_large("zblock", data.len(), max_size()))?;
        let id = match self.lists.first(t) {
            Some(id) => id,
            None => {
                let (slots, order) = BLOCK_TYPES[t];
                let pages = self.os.alloc(1 << order)?;
                let mut b = Block {
                    pages,
                    block_type: t as u8,
                };
                b.pages.as_mut_slice()[..ZBLOCK_HEADER_SIZE].fill(0);
                b.set_free_slots(slots);
                let id = self.blocks.insert(b);
                self.lists.insert(t, id);
                id
            }
        };
        let b = self.blocks.get_mut(id).expect("listed block");
        let slot = b.first_free_slot().expect("a listed block has a free slot");
        b.set_occupied(slot, true);
        let free = b.free_slots() - 1;
        b.set_free_slots(free);
        let at = b.offset(slot);
        b.pages.as_mut_slice()[at..at + data.len()].copy_from_slice(data);
        // Invariant: a block is listed exactly when it has a free slot.
        if free == 0 {
            self.lists.remove(id);
        }
        Ok(self.handles.insert(Loc {
            block: id,
            slot: slot as u8,
            len: data.len() as u32,
        }))
    }

    fn read(&self, handle: u64, buf: &mut Vec<u8>) -> Result<(), LabError> {
        let l = *self.handles.lookup("zblock", handle)?;
        let b = self.blocks.get(l.block).expect("live block");
        let at = b.offset(l.slot as usize);
        buf.clear();
        buf.extend_from_slice(&b.pages.as_slice()[at..at + l.len as usize]);
        Ok(())
    }

    fn free(&mut self, handle: u64) -> Result<(), LabError> {
        let l = self.handles.take("zblock", handle)?;
        let b = self.blocks.get_mut(l.block).expect("live block");
        b.set_occupied(l.slot as usize, false);
        let free = b.free_slots() + 1;
        b.set_free_slots(free);
        let t = b.block_type as usize;
        if free == BLOCK_TYPES[t].0 {
            self.lists.remove(l.block);
            self.blocks.remove(l.block);
        } else if free == 1 {
            self.lists.insert(t, l.block);
        }
        Ok(())
    }

    fn pages(&self) -> &OsPages {
        &self.os
    }

    fn meta_bytes(&self) -> u64 {
        self.blocks.meta_bytes() + self.lists.meta_bytes() + self.handles.meta_bytes()
    }

    fn check_invariants(&self) -> Result<(), String> {
        let pages: usize = self.blocks.iter().map(|(_, b)| b.pages.pages()).sum();
        if pages != self.os.held_pages() {
            return Err("zblock: held pages differ from blocks".into());
        }
        let mut used = vec![0usize; self.blocks.id_bound()];
        for (_, l) in self.handles.iter() {
            let b = self
                .blocks
                .get(l.block)
                .ok_or("handle to a missing block")?;
            if !b.occupied(l.slot as usize)
                || l.len as usize > type_slot_size(b.block_type as usize)
            {
                return Err(format!("zblock: block {} slot {}", l.block, l.slot));
            }
            used[l.block as usize] += 1;
        }
        for (id, b) in self.blocks.iter() {
            let n = BLOCK_TYPES[b.block_type as usize].0;
            let bits = (0..n).filter(|&s| b.occupied(s)).count();
            if bits != used[id as usize] || bits == 0 || b.free_slots() != n - bits {
                return Err(format!(
                    "zblock: block {id}: {bits} bits, {} handles",
                    used[id as usize]
                ));
            }
            let want = (b.free_slots() > 0).then_some(b.block_type as usize);
            if self.lists.key_of(id) != want {
                return Err(format!(
                    "zblock: block {id} listed {:?}, want {want:?}",
                    self.lists.key_of(id)
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_table() {
        assert_eq!(ZBLOCK_HEADER_SIZE, 40);
        let sizes: Vec<usize> = (0..BLOCK_TYPES.len()).map(type_slot_size).collect();
        assert_eq!(
            sizes,
            [
                64, 120, 192, 264, 336, 400, 448, 504, 560, 624, 672, 736, 808, 904, 1016, 1128,
                1256, 1360, 1480, 1632, 1816, 1920, 2040, 2176, 2336, 2512, 2720, 2968, 3272, 3632,
                4080
            ]
        );
        assert!(sizes.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(max_size(), 4080);
        assert_eq!(block_type(1), Some(0));
        assert_eq!(block_type(64), Some(0));
        assert_eq!(block_type(65), Some(1));
        assert_eq!(block_type(3632), Some(29));
        assert_eq!(block_type(3633), Some(30));
        assert_eq!(block_type(4081), None);
        for (slots, order) in BLOCK_TYPES {
            assert!(slots <= 128 && order <= 3);
        }
    }

    #[test]
    fn blocks_fill_and_empty_blocks_go_back() {
        let mut z = Zblock::new().unwrap();
        // 1000 B goes to 1016-byte slots: 8 per 2-page block.
        let t = block_type(1000).unwrap();
        assert_eq!(BLOCK_TYPES[t], (8, 1));
        let hs: Vec<u64> = (0..9u8).map(|i| z.alloc(&[i; 1000]).unwrap()).collect();
        assert_eq!(z.blocks_by_type()[t], 2);
        assert_eq!(z.pages().held_pages(), 4);
        z.check_invariants().unwrap();
        let mut buf = Vec::new();
        for (i, h) in hs.iter().enumerate() {
            z.read(*h, &mut buf).unwrap();
            assert_eq!(buf, vec![i as u8; 1000]);
        }
        z.free(hs[8]).unwrap();
        assert_eq!(z.pages().held_pages(), 2, "the emptied block went back");
        z.free(hs[3]).unwrap();
        let again = z.alloc(&[42; 1010]).unwrap();
        assert_eq!(z.handles.get(again).unwrap().slot, 3, "the first free slot");
        z.check_invariants().unwrap();
    }
}
