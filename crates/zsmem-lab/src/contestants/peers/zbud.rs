//! zbud: at most two objects ("buddies") per page.
//!
//! A page is 64 chunks of 64 bytes (page size / 64). The first chunk is the
//! page's header (in the kernel: list links and the two buddies' sizes in
//! chunks; here the sizes, in its first two bytes). The first buddy starts
//! right after the header; the last buddy is right-aligned at the end of
//! the page, so the free space is always one run in the middle. A page with
//! one free buddy is on the unbuddied list indexed by its free chunks; an
//! allocation of `n` chunks takes the first page of the first non-empty
//! list from `n` up, or a new page. A page with both buddies used is on no
//! list; a page with none is given back to the OS at once. The largest
//! object is a page less two chunks (3968 bytes): the header and one chunk
//! kept so that a page always has room for a second buddy.

use zsmem::os::{OsPages, PageBlock};

use super::{HandleTable, IdVec, Lists, PeerAllocator, check_len};
use crate::contestants::LabError;
use crate::corpus::PAGE_SIZE;

/// Bytes per chunk: page size / 64.
pub const CHUNK_SIZE: usize = PAGE_SIZE / 64;
/// The header, rounded up to a chunk.
pub const ZHDR_SIZE_ALIGNED: usize = CHUNK_SIZE;
/// Chunks a page has for buddies (and number of unbuddied lists).
pub const NCHUNKS: usize = (PAGE_SIZE - ZHDR_SIZE_ALIGNED) / CHUNK_SIZE;
/// The largest object: a page less the header chunk and one more chunk.
pub const MAX_SIZE: usize = PAGE_SIZE - ZHDR_SIZE_ALIGNED - CHUNK_SIZE;

/// Chunks an object of `size` bytes takes.
pub fn size_to_chunks(size: usize) -> usize {
    size.div_ceil(CHUNK_SIZE)
}

/// Which buddy of a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Buddy {
    First,
    Last,
}

/// What a handle names.
#[derive(Clone, Copy, Debug)]
struct Loc {
    page: u32,
    buddy: Buddy,
    len: u32,
}

// The header's bytes: first_chunks at 0, last_chunks at 1.
fn chunks_of(page: &PageBlock, b: Buddy) -> usize {
    page.as_slice()[b as usize] as usize
}

fn set_chunks(page: &mut PageBlock, b: Buddy, n: usize) {
    page.as_mut_slice()[b as usize] = n as u8;
}

fn free_chunks(page: &PageBlock) -> usize {
    NCHUNKS - chunks_of(page, Buddy::First) - chunks_of(page, Buddy::Last)
}

/// Byte offset of a buddy in its page.
fn offset(page: &PageBlock, b: Buddy) -> usize {
    match b {
        Buddy::First => ZHDR_SIZE_ALIGNED,
        Buddy::Last => PAGE_SIZE - chunks_of(page, Buddy::Last) * CHUNK_SIZE,
    }
}

/// A zbud pool.
///
/// ```
/// use zsmem_lab::contestants::peers::{PeerAllocator, zbud::Zbud};
/// let mut z = Zbud::new().unwrap();
/// let a = z.alloc(&[1; 1000]).unwrap();
/// let b = z.alloc(&[2; 2000]).unwrap();
/// assert_eq!(z.pages().held_pages(), 1); // two buddies, one page
/// assert!(z.alloc(&[3; 3969]).is_err()); // more than a page less two chunks
/// let mut buf = Vec::new();
/// z.read(b, &mut buf).unwrap();
/// assert_eq!(buf, vec![2; 2000]);
/// z.free(a).unwrap();
/// z.free(b).unwrap();
/// assert_eq!(z.pages().held_pages(), 0);
/// ```
pub struct Zbud {
    os: OsPages,
    pages: IdVec<PageBlock>,
    /// Pages with one free buddy, by free chunks.
    unbuddied: Lists,
    handles: HandleTable<Loc>,
}

impl Zbud {
    /// An empty pool on a page source of its own.
    pub fn new() -> Result<Self, LabError> {
        Ok(Zbud {
            os: super::page_source()?,
            pages: IdVec::new(),
            unbuddied: Lists::new(NCHUNKS + 1),
            handles: HandleTable::new(),
        })
    }
}

impl PeerAllocator for Zbud {
    fn name(&self) -> &str {
        "zbud"
    }

    fn config(&self) -> String {
        format!(
            "zbud: two buddies per {PAGE_SIZE} B page, {CHUNK_SIZE} B chunks, {NCHUNKS} unbuddied lists, objects up to {MAX_SIZE} B"
        )
    }

    fn max_size(&self) -> usize {
        MAX_SIZE
    }

    fn alloc(&mut self, data: &[u8]) -> Result<u64, LabError> {
        check_len("zbud", data.len(), MAX_SIZE)?;
        let chunks = size_to_chunks(data.len());
        let found = (chunks..=NCHUNKS).find_map(|i| self.unbuddied.first(i));
        let (id, buddy) = match found {
            Some(id) => {
                self.unbuddied.remove(id);
                let page = self.pages.get(id).expect("listed pages exist");
                let b = if chunks_of(page, Buddy::First) == 0 {
                    Buddy::First
                } else {
                    Buddy::Last
                };
                (id, b)
            }
            None => {
                let mut block = self.os.alloc(1)?;
                set_chunks(&mut block, Buddy::First, 0);
                set_chunks(&mut block, Buddy::Last, 0);
                (self.pages.insert(block), Buddy::First)
            }
        };
        let page = self.pages.get_mut(id).expect("page exists");
        set_chunks(page, buddy, chunks);
        let at = offset(page, buddy);
        page.as_mut_slice()[at..at + data.len()].copy_from_slice(data);
        // Invariant: a page is on a list exactly when one buddy is free.
        if chunks_of(page, Buddy::First) == 0 || chunks_of(page, Buddy::Last) == 0 {
            let free = free_chunks(page);
            self.unbuddied.insert(free, id);
        }
        Ok(self.handles.insert(Loc {
            page: id,
            buddy,
            len: data.len() as u32,
        }))
    }

    fn read(&self, handle: u64, buf: &mut Vec<u8>) -> Result<(), LabError> {
        let l = *self.handles.lookup("zbud", handle)?;
        let page = self.pages.get(l.page).expect("a live handle's page");
        let at = offset(page, l.buddy);
        buf.clear();
        buf.extend_from_slice(&page.as_slice()[at..at + l.len as usize]);
        Ok(())
    }

    fn free(&mut self, handle: u64) -> Result<(), LabError> {
        let l = self.handles.take("zbud", handle)?;
        let page = self.pages.get_mut(l.page).expect("a live handle's page");
        set_chunks(page, l.buddy, 0);
        let free = free_chunks(page);
        self.unbuddied.remove(l.page);
        if free == NCHUNKS {
            self.pages.remove(l.page);
        } else {
            self.unbuddied.insert(free, l.page);
        }
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
            return Err(format!(
                "zbud: {} pages held, {} known",
                self.os.held_pages(),
                self.pages.len()
            ));
        }
        let mut used = vec![0usize; self.pages.id_bound()];
        for (_, l) in self.handles.iter() {
            let page = self.pages.get(l.page).ok_or("handle to a missing page")?;
            let c = chunks_of(page, l.buddy);
            if c != size_to_chunks(l.len as usize) {
                return Err(format!(
                    "zbud: page {} buddy {:?} has {c} chunks",
                    l.page, l.buddy
                ));
            }
            used[l.page as usize] += 1;
        }
        for (id, page) in self.pages.iter() {
            let (f, la) = (chunks_of(page, Buddy::First), chunks_of(page, Buddy::Last));
            let objects = usize::from(f > 0) + usize::from(la > 0);
            if objects == 0 || objects != used[id as usize] || f + la > NCHUNKS {
                return Err(format!(
                    "zbud: page {id}: first {f}, last {la}, handles {}",
                    used[id as usize]
                ));
            }
            let want = (objects == 1).then(|| free_chunks(page));
            if self.unbuddied.key_of(id) != want {
                return Err(format!(
                    "zbud: page {id} on list {:?}, want {want:?}",
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

    #[test]
    fn chunk_math_is_the_kernels() {
        assert_eq!((CHUNK_SIZE, NCHUNKS, MAX_SIZE), (64, 63, 3968));
        assert_eq!(size_to_chunks(1), 1);
        assert_eq!(size_to_chunks(64), 1);
        assert_eq!(size_to_chunks(65), 2);
        assert_eq!(size_to_chunks(MAX_SIZE), 62);
    }

    #[test]
    fn first_after_header_last_at_page_end() {
        let mut z = Zbud::new().unwrap();
        let a = z.alloc(&[1; 100]).unwrap();
        let b = z.alloc(&[2; 200]).unwrap();
        let (la, lb) = (*z.handles.get(a).unwrap(), *z.handles.get(b).unwrap());
        assert_eq!(la.page, lb.page);
        let page = z.pages.get(la.page).unwrap();
        assert_eq!(offset(page, Buddy::First), 64);
        assert_eq!(offset(page, Buddy::Last), PAGE_SIZE - 4 * 64);
        assert!(page.as_slice()[PAGE_SIZE - 256..PAGE_SIZE - 56] == [2; 200]);
        // A third object needs a new page: zbud never holds three.
        let c = z.alloc(&[3; 64]).unwrap();
        assert_eq!(z.pages().held_pages(), 2);
        z.check_invariants().unwrap();
        // Freeing the first buddy puts the page on the list of its free
        // chunks, and the next fitting object goes there.
        z.free(a).unwrap();
        assert_eq!(z.unbuddied.key_of(la.page), Some(NCHUNKS - 4));
        let d = z.alloc(&[4; 3000]).unwrap();
        assert_eq!(z.handles.get(d).unwrap().page, la.page);
        for h in [b, c, d] {
            z.free(h).unwrap();
        }
        assert_eq!(z.pages().held_pages(), 0);
        z.check_invariants().unwrap();
    }

    #[test]
    fn the_largest_object_fits_with_room_for_one_chunk() {
        let mut z = Zbud::new().unwrap();
        let big = z.alloc(&[9; MAX_SIZE]).unwrap();
        let small = z.alloc(&[8; 64]).unwrap();
        assert_eq!(z.pages().held_pages(), 1);
        let e = z.alloc(&[0; MAX_SIZE + 1]).unwrap_err().to_string();
        assert!(e.contains("3968"), "{e}");
        let mut buf = Vec::new();
        z.read(big, &mut buf).unwrap();
        assert_eq!(buf, vec![9; MAX_SIZE]);
        z.read(small, &mut buf).unwrap();
        assert_eq!(buf, vec![8; 64]);
    }
}
