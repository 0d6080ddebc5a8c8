//! z3fold: up to three objects per page (first, middle, last), and
//! headless pages for large objects.
//!
//! Chunks are page size / 64 (64 bytes). A page starts with its header,
//! rounded up to whole chunks: the kernel's `struct z3fold_header` (list
//! links, lock, refcount, a work item, pointers, the three sizes in chunks,
//! `start_middle`, `first_num`) is 88 bytes on x86-64 since 4.x, so two
//! chunks, leaving `NCHUNKS` = 62 for objects. The first object follows the
//! header, the last is right-aligned at the page end, the middle starts at
//! `start_middle` chunks. A page with a free place is on the unbuddied list
//! indexed by its free chunks: without a middle object, all chunks between
//! first and last; with one, the larger gap before or after it. An object
//! larger than a page less the header and one chunk (3904 bytes) gets a
//! headless page of its own, the whole page.
//!
//! **Handles** go through an indirection, so that the middle object can
//! move. In the kernel a handle is the address of a slot in a per-page
//! `z3fold_buddy_slots`, and the slot holds the page address plus the
//! buddy's index, stored as `(buddy + first_num) & 3`. Here the handle
//! names a [`HandleTable`] entry holding the page and the same encoded
//! index; the buddy is `(index - first_num) & 3`, with `first_num` read
//! from the page header.
//!
//! **Compaction** in a page, after every free (the kernel queues it to a
//! work item; here it runs at once): a middle object alone in its page
//! moves to the first place and `first_num` goes up by one, so its handle
//! now decodes as the first buddy; a middle object next to only a first
//! (or only a last) object moves against it when that frees at least
//! three chunks (`BIG_CHUNK_GAP`).

use zsmem::os::{OsPages, PageBlock};

use super::{HandleTable, IdVec, Lists, PeerAllocator, check_len};
use crate::contestants::LabError;
use crate::corpus::PAGE_SIZE;

/// Bytes per chunk.
pub const CHUNK_SIZE: usize = PAGE_SIZE / 64;
/// Chunks of the header.
pub const ZHDR_CHUNKS: usize = 88usize.div_ceil(CHUNK_SIZE);
/// Chunks per page.
pub const TOTAL_CHUNKS: usize = PAGE_SIZE / CHUNK_SIZE;
/// Chunks for objects (and number of unbuddied lists).
pub const NCHUNKS: usize = TOTAL_CHUNKS - ZHDR_CHUNKS;
/// Objects above this get a headless page.
pub const MAX_BUDDY_SIZE: usize = PAGE_SIZE - ZHDR_CHUNKS * CHUNK_SIZE - CHUNK_SIZE;
/// Least gain, in chunks, for which a middle object is moved.
pub const BIG_CHUNK_GAP: usize = 3;

/// Which place of a page; the numbers are the kernel's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buddy {
    /// A page of its own, no header.
    Headless = 0,
    /// Right after the header.
    First = 1,
    /// Between first and last, at `start_middle`.
    Middle = 2,
    /// Right-aligned at the page end.
    Last = 3,
}

const HEADLESS_INDEX: u8 = 0xff;

#[derive(Clone, Copy, Debug)]
struct Loc {
    page: u32,
    /// `(buddy + first_num) & 3`, or `HEADLESS_INDEX`.
    index: u8,
    len: u32,
}

/// The page header's fields, kept in the page's first bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Header {
    first: usize,
    middle: usize,
    last: usize,
    start_middle: usize,
    first_num: u8,
}

impl Header {
    fn read(p: &PageBlock) -> Header {
        let b = p.as_slice();
        Header {
            first: b[0] as usize,
            middle: b[1] as usize,
            last: b[2] as usize,
            start_middle: b[3] as usize,
            first_num: b[4],
        }
    }

    fn write(&self, p: &mut PageBlock) {
        let b = p.as_mut_slice();
        b[..5].copy_from_slice(&[
            self.first as u8,
            self.middle as u8,
            self.last as u8,
            self.start_middle as u8,
            self.first_num,
        ]);
    }

    /// Free chunks, as the lists count them.
    fn free_chunks(&self) -> usize {
        if self.middle != 0 {
            let before = if self.first != 0 {
                0
            } else {
                self.start_middle - ZHDR_CHUNKS
            };
            let after = if self.last != 0 {
                0
            } else {
                TOTAL_CHUNKS - (self.start_middle + self.middle)
            };
            before.max(after)
        } else {
            NCHUNKS - self.first - self.last
        }
    }

    fn is_full(&self) -> bool {
        self.first != 0 && self.middle != 0 && self.last != 0
    }

    fn is_empty(&self) -> bool {
        self.first == 0 && self.middle == 0 && self.last == 0
    }

    fn buddy(&self, index: u8) -> Buddy {
        match index.wrapping_sub(self.first_num) & 3 {
            1 => Buddy::First,
            2 => Buddy::Middle,
            3 => Buddy::Last,
            _ => Buddy::Headless,
        }
    }

    /// Byte offset of a buddy.
    fn offset(&self, b: Buddy) -> usize {
        match b {
            Buddy::Headless => 0,
            Buddy::First => ZHDR_CHUNKS * CHUNK_SIZE,
            Buddy::Middle => self.start_middle * CHUNK_SIZE,
            Buddy::Last => PAGE_SIZE - self.last * CHUNK_SIZE,
        }
    }
}

/// Chunks an object of `size` bytes takes.
pub fn size_to_chunks(size: usize) -> usize {
    size.div_ceil(CHUNK_SIZE)
}

/// A z3fold pool.
///
/// ```
/// use zsmem_lab::contestants::peers::{PeerAllocator, z3fold::Z3fold};
/// let mut z = Z3fold::new().unwrap();
/// let h: Vec<u64> = [1000, 1000, 1000].iter().map(|&n| z.alloc(&vec![7; n]).unwrap()).collect();
/// assert_eq!(z.pages().held_pages(), 1); // three buddies in one page
/// let big = z.alloc(&[1; 4096]).unwrap(); // headless
/// assert_eq!(z.pages().held_pages(), 2);
/// for x in h.into_iter().chain([big]) {
///     z.free(x).unwrap();
/// }
/// assert_eq!(z.pages().held_pages(), 0);
/// ```
pub struct Z3fold {
    os: OsPages,
    pages: IdVec<PageBlock>,
    unbuddied: Lists,
    handles: HandleTable<Loc>,
    /// Middle objects moved by in-page compaction.
    moves: u64,
}

impl Z3fold {
    /// An empty pool on a page source of its own.
    pub fn new() -> Result<Self, LabError> {
        Ok(Z3fold {
            os: super::page_source()?,
            pages: IdVec::new(),
            unbuddied: Lists::new(NCHUNKS + 1),
            handles: HandleTable::new(),
            moves: 0,
        })
    }

    /// Middle objects moved by in-page compaction so far.
    pub fn moves(&self) -> u64 {
        self.moves
    }

    /// Which place of its page `handle`'s object is in now.
    pub fn buddy_of(&self, handle: u64) -> Result<Buddy, LabError> {
        let l = *self.handles.lookup("z3fold", handle)?;
        if l.index == HEADLESS_INDEX {
            return Ok(Buddy::Headless);
        }
        Ok(Header::read(self.pages.get(l.page).expect("live page")).buddy(l.index))
    }

    fn add_to_unbuddied(&mut self, id: u32, h: &Header) {
        if !h.is_full() {
            self.unbuddied.insert(h.free_chunks(), id);
        }
    }

    /// Move a middle object when the kernel would; true if it moved.
    fn compact_page(&mut self, id: u32) -> bool {
        let page = self.pages.get_mut(id).expect("live page");
        let mut h = Header::read(page);
        if h.middle == 0 {
            return false;
        }
        let to = if h.first == 0 && h.last == 0 {
            ZHDR_CHUNKS
        } else if h.first != 0
            && h.last == 0
            && h.start_middle - (h.first + ZHDR_CHUNKS) >= BIG_CHUNK_GAP
        {
            h.first + ZHDR_CHUNKS
        } else if h.last != 0
            && h.first == 0
            && TOTAL_CHUNKS - (h.last + h.start_middle + h.middle) >= BIG_CHUNK_GAP
        {
            TOTAL_CHUNKS - h.last - h.middle
        } else {
            return false;
        };
        let from = h.start_middle * CHUNK_SIZE;
        page.as_mut_slice()
            .copy_within(from..from + h.middle * CHUNK_SIZE, to * CHUNK_SIZE);
        if h.first == 0 && h.last == 0 {
            // The middle becomes the first: its handle's stored index now
            // decodes as `First`.
            h.first = h.middle;
            h.middle = 0;
            h.start_middle = 0;
            h.first_num = (h.first_num + 1) & 3;
        } else {
            h.start_middle = to;
        }
        h.write(page);
        self.moves += 1;
        true
    }
}

impl PeerAllocator for Z3fold {
    fn name(&self) -> &str {
        "z3fold"
    }

    fn config(&self) -> String {
        format!(
            "z3fold: three buddies per {PAGE_SIZE} B page, {CHUNK_SIZE} B chunks, header {ZHDR_CHUNKS} chunks, headless above {MAX_BUDDY_SIZE} B, in-page compaction"
        )
    }

    fn max_size(&self) -> usize {
        PAGE_SIZE
    }

    fn alloc(&mut self, data: &[u8]) -> Result<u64, LabError> {
        check_len("z3fold", data.len(), PAGE_SIZE)?;
        if data.len() > MAX_BUDDY_SIZE {
            let mut block = self.os.alloc(1)?;
            block.as_mut_slice()[..data.len()].copy_from_slice(data);
            let page = self.pages.insert(block);
            return Ok(self.handles.insert(Loc {
                page,
                index: HEADLESS_INDEX,
                len: data.len() as u32,
            }));
        }
        let chunks = size_to_chunks(data.len());
        let found = (chunks..=NCHUNKS).find_map(|i| self.unbuddied.first(i));
        let (id, mut h, bud) = match found {
            Some(id) => {
                self.unbuddied.remove(id);
                let h = Header::read(self.pages.get(id).expect("listed page"));
                let bud = if h.first == 0 {
                    if h.middle != 0 && chunks > h.start_middle - ZHDR_CHUNKS {
                        Buddy::Last
                    } else {
                        Buddy::First
                    }
                } else if h.last == 0 {
                    Buddy::Last
                } else {
                    Buddy::Middle
                };
                (id, h, bud)
            }
            None => {
                let block = self.os.alloc(1)?;
                (self.pages.insert(block), Header::default(), Buddy::First)
            }
        };
        match bud {
            Buddy::First => h.first = chunks,
            Buddy::Last => h.last = chunks,
            _ => {
                h.middle = chunks;
                h.start_middle = h.first + ZHDR_CHUNKS;
            }
        }
        let page = self.pages.get_mut(id).expect("page");
        h.write(page);
        let at = h.offset(bud);
        page.as_mut_slice()[at..at + data.len()].copy_from_slice(data);
        self.add_to_unbuddied(id, &h);
        Ok(self.handles.insert(Loc {
            page: id,
            index: (bud as u8 + h.first_num) & 3,
            len: data.len() as u32,
        }))
    }

    fn read(&self, handle: u64, buf: &mut Vec<u8>) -> Result<(), LabError> {
        let l = *self.handles.lookup("z3fold", handle)?;
        let page = self.pages.get(l.page).expect("live page");
        let at = if l.index == HEADLESS_INDEX {
            0
        } else {
            let h = Header::read(page);
            h.offset(h.buddy(l.index))
        };
        buf.clear();
        buf.extend_from_slice(&page.as_slice()[at..at + l.len as usize]);
        Ok(())
    }

    fn free(&mut self, handle: u64) -> Result<(), LabError> {
        let l = self.handles.take("z3fold", handle)?;
        if l.index == HEADLESS_INDEX {
            self.pages.remove(l.page);
            return Ok(());
        }
        let page = self.pages.get_mut(l.page).expect("live page");
        let mut h = Header::read(page);
        match h.buddy(l.index) {
            Buddy::First => h.first = 0,
            Buddy::Middle => h.middle = 0,
            Buddy::Last => h.last = 0,
            Buddy::Headless => unreachable!("a page with a header has no headless buddy"),
        }
        h.write(page);
        self.unbuddied.remove(l.page);
        if h.is_empty() {
            self.pages.remove(l.page);
            return Ok(());
        }
        self.compact_page(l.page);
        let h = Header::read(self.pages.get(l.page).expect("live page"));
        self.add_to_unbuddied(l.page, &h);
        Ok(())
    }

    fn pages(&self) -> &OsPages {
        &self.os
    }

    fn meta_bytes(&self) -> u64 {
        self.pages.meta_bytes() + self.unbuddied.meta_bytes() + self.handles.meta_bytes()
    }

    fn check_invariants(&self) -> Result<(), String> {
        if self.os.held_pages() != self.pages.len() {
            return Err("z3fold: held pages differ from pages known".into());
        }
        let mut seen = vec![[false; 4]; self.pages.id_bound()];
        for (_, l) in self.handles.iter() {
            let page = self.pages.get(l.page).ok_or("handle to a missing page")?;
            if l.index == HEADLESS_INDEX {
                seen[l.page as usize][0] = true;
                continue;
            }
            let h = Header::read(page);
            let b = h.buddy(l.index);
            let chunks = match b {
                Buddy::First => h.first,
                Buddy::Middle => h.middle,
                Buddy::Last => h.last,
                Buddy::Headless => return Err(format!("z3fold: page {} decodes headless", l.page)),
            };
            if chunks != size_to_chunks(l.len as usize) || seen[l.page as usize][b as usize] {
                return Err(format!("z3fold: page {} buddy {b:?}: {h:?}", l.page));
            }
            seen[l.page as usize][b as usize] = true;
        }
        for (id, page) in self.pages.iter() {
            let s = seen[id as usize];
            if s[0] {
                if self.unbuddied.key_of(id).is_some() {
                    return Err(format!("z3fold: headless page {id} listed"));
                }
                continue;
            }
            let h = Header::read(page);
            let places = [h.first != 0, h.middle != 0, h.last != 0];
            if places != [s[1], s[2], s[3]] || h.is_empty() {
                return Err(format!("z3fold: page {id} header {h:?}, handles {s:?}"));
            }
            // No overlap: first | middle | last in this order.
            let first_end = ZHDR_CHUNKS + h.first;
            let last_start = TOTAL_CHUNKS - h.last;
            if first_end > last_start
                || (h.middle != 0
                    && (h.start_middle < first_end || h.start_middle + h.middle > last_start))
            {
                return Err(format!("z3fold: page {id} overlaps: {h:?}"));
            }
            let want = (!h.is_full()).then(|| h.free_chunks());
            if self.unbuddied.key_of(id) != want {
                return Err(format!(
                    "z3fold: page {id} on list {:?}, want {want:?}",
                    self.unbuddied.key_of(id)
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(z: &Z3fold, h: u64) -> Vec<u8> {
        let mut b = Vec::new();
        z.read(h, &mut b).unwrap();
        b
    }

    #[test]
    fn chunk_math() {
        assert_eq!(
            (CHUNK_SIZE, ZHDR_CHUNKS, NCHUNKS, MAX_BUDDY_SIZE),
            (64, 2, 62, 3904)
        );
    }

    #[test]
    fn a_lone_middle_object_becomes_the_first() {
        let mut z = Z3fold::new().unwrap();
        let a = z.alloc(&[1; 640]).unwrap();
        let c = z.alloc(&[3; 640]).unwrap();
        let b = z.alloc(&[2; 640]).unwrap();
        assert_eq!(
            [
                z.buddy_of(a).unwrap(),
                z.buddy_of(c).unwrap(),
                z.buddy_of(b).unwrap()
            ],
            [Buddy::First, Buddy::Last, Buddy::Middle]
        );
        assert_eq!(z.pages().held_pages(), 1);
        // Freeing the first moves the middle against the last (a gain of
        // 32 chunks); freeing the last then leaves it alone: it moves to
        // the first place, and its handle follows.
        z.free(a).unwrap();
        assert_eq!((z.buddy_of(b).unwrap(), z.moves()), (Buddy::Middle, 1));
        z.free(c).unwrap();
        assert_eq!(z.buddy_of(b).unwrap(), Buddy::First);
        assert_eq!(z.moves(), 2);
        assert_eq!(read(&z, b), vec![2; 640]);
        z.check_invariants().unwrap();
    }

    #[test]
    fn a_middle_object_moves_against_the_first_when_it_gains_three_chunks() {
        let mut z = Z3fold::new().unwrap();
        let a = z.alloc(&[1; 64 * 5]).unwrap();
        let c = z.alloc(&[3; 64]).unwrap();
        let b = z.alloc(&[2; 64 * 4]).unwrap();
        assert_eq!(z.buddy_of(b).unwrap(), Buddy::Middle);
        // Freeing the first leaves middle and last: the middle moves
        // against the last (a gain of 52 chunks).
        z.free(a).unwrap();
        assert_eq!(z.moves(), 1);
        let a2 = z.alloc(&[4; 64]).unwrap();
        assert_eq!(z.buddy_of(a2).unwrap(), Buddy::First);
        let before = z.moves();
        // Freeing the last leaves first and middle: the middle moves
        // against the first.
        z.free(c).unwrap();
        assert_eq!(z.moves(), before + 1);
        let page = z.pages.get(z.handles.get(b).unwrap().page).unwrap();
        assert_eq!(Header::read(page).start_middle, ZHDR_CHUNKS + 1);
        assert_eq!(read(&z, b), vec![2; 256]);
        assert_eq!(read(&z, a2), vec![4; 64]);
        z.check_invariants().unwrap();
    }

    #[test]
    fn headless_pages_for_large_objects() {
        let mut z = Z3fold::new().unwrap();
        let h = z.alloc(&[5; MAX_BUDDY_SIZE + 1]).unwrap();
        assert_eq!(z.buddy_of(h).unwrap(), Buddy::Headless);
        let s = z.alloc(&[6; 10]).unwrap();
        assert_eq!(z.pages().held_pages(), 2, "nothing shares a headless page");
        assert_eq!(read(&z, h), vec![5; MAX_BUDDY_SIZE + 1]);
        z.free(h).unwrap();
        z.free(s).unwrap();
        assert!(z.free(s).is_err());
        assert_eq!(z.pages().held_pages(), 0);
    }
}
