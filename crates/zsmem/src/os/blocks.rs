//! Pages straight from the page source for allocators built outside the
//! pool: [`OsPages`] and its blocks.

use std::sync::Arc;

use super::{PageSource, Run};
use crate::config::PageReturn;
use crate::error::{Error, Result};
use crate::size_class::MAX_CHAIN_SIZE;

/// Pages straight from the page source, for allocators built outside the
/// pool (the lab's zbud, z3fold, zblock and slab peers): the same regions,
/// return queue and `MADV_DONTNEED` as zspages get, so every allocator
/// compared pays the same price for its memory.
///
/// ```
/// let pages = zsmem::os::OsPages::new(4096, None).unwrap();
/// let mut block = pages.alloc(2).unwrap();
/// block.as_mut_slice()[8191] = 7;
/// assert_eq!(pages.held_pages(), 2);
/// drop(block);
/// assert_eq!(pages.held_pages(), 0);
/// ```
#[derive(Clone)]
pub struct OsPages {
    src: Arc<PageSource>,
}

impl std::fmt::Debug for OsPages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OsPages")
            .field("page_size", &self.src.page_size)
            .field("held_pages", &self.held_pages())
            .finish()
    }
}

impl OsPages {
    /// A source of `page_size`-byte pages (a power of two, at least 4096),
    /// holding at most `limit_bytes` if given, returning freed pages as
    /// pools do by default ([`PageReturn::default`]).
    pub fn new(page_size: usize, limit_bytes: Option<usize>) -> Result<OsPages> {
        Self::with_return(page_size, limit_bytes, PageReturn::default())
    }

    /// As [`new`](OsPages::new), with freed pages returned as `policy` says.
    pub fn with_return(
        page_size: usize,
        limit_bytes: Option<usize>,
        policy: PageReturn,
    ) -> Result<OsPages> {
        super::check_page_size(page_size)?;
        Ok(OsPages {
            src: PageSource::new(page_size, limit_bytes, false, policy),
        })
    }

    /// Bytes per page.
    pub fn page_size(&self) -> usize {
        self.src.page_size
    }

    /// Take `pages` (1..=32) contiguous pages; they read as zeros the first
    /// time and hold whatever was last written after reuse.
    pub fn alloc(&self, pages: usize) -> Result<PageBlock> {
        if !(1..=MAX_CHAIN_SIZE).contains(&pages) {
            return Err(Error::InvalidConfig(format!(
                "a page block is 1..={MAX_CHAIN_SIZE} pages, not {pages}"
            )));
        }
        let run = self.src.alloc_run(pages)?;
        Ok(PageBlock {
            src: self.src.clone(),
            run: std::mem::ManuallyDrop::new(run),
            pages,
        })
    }

    /// Pages of live blocks.
    pub fn held_pages(&self) -> usize {
        self.src.held_pages()
    }

    /// Highest `held_pages` so far.
    pub fn max_held_pages(&self) -> usize {
        self.src.max_held_pages()
    }

    /// Pages of freed blocks waiting to be returned to the OS (resident,
    /// reused first; not in `held_pages`).
    pub fn cached_pages(&self) -> usize {
        self.src.cached_pages()
    }

    /// Give the waiting pages back to the OS now.
    pub fn purge_cache(&self) {
        self.src.purge_cache();
    }
}

/// Contiguous pages owned by one allocator structure; given back to the OS
/// (at once or through the return queue) when dropped.
pub struct PageBlock {
    src: Arc<PageSource>,
    run: std::mem::ManuallyDrop<Run>,
    pages: usize,
}

impl std::fmt::Debug for PageBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageBlock")
            .field("addr", &self.run.as_ptr())
            .field("pages", &self.pages)
            .finish()
    }
}

impl PageBlock {
    /// Number of pages.
    pub fn pages(&self) -> usize {
        self.pages
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.pages * self.src.page_size
    }

    /// Never true: a block has at least one page.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Address of the first byte (page-aligned), for address-ordered
    /// bookkeeping; reach the bytes through the slices.
    pub fn addr(&self) -> usize {
        self.run.as_ptr() as usize
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the run is `len()` bytes of mapped memory owned by this
        // block alone (the page source hands each run out once until it is
        // freed, which only `drop` does), and the `Arc` keeps its region
        // mapped for as long as the block lives.
        unsafe { std::slice::from_raw_parts(self.run.as_ptr(), self.len()) }
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`; `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.run.as_ptr(), self.len()) }
    }
}

impl Drop for PageBlock {
    fn drop(&mut self) {
        // SAFETY: `run` is taken exactly once, here, and never used after.
        let run = unsafe { std::mem::ManuallyDrop::take(&mut self.run) };
        self.src.free_run(run, self.pages, self.pages);
    }
}
