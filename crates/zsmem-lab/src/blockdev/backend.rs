//! What serves the device file's bytes: the [`Backend`] trait, and zsmem's
//! `PageStore` as one ([`StoreBackend`], what `zsmem disk` runs on).
//! [`ContestantServer`](super::server::ContestantServer) is the other: any
//! page contestant (behind a mutex unless it is concurrent).

use std::sync::Arc;

use zsmem::PageStore;

use super::map::Block;
use super::map::{self, PageIo};
use crate::corpus::PAGE_SIZE;

/// Bytes of a device file, served from numbered 4 KiB pages. Called from
/// the FUSE threads, so it is `Send + Sync`; errors are text for the log
/// (the kernel only sees `EIO`).
pub trait Backend: Send + Sync + 'static {
    /// Size of the device in bytes, a multiple of 4096.
    fn size(&self) -> u64;
    /// Read `buf.len()` bytes at `offset` (inside the device).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), String>;
    /// Write `data` at `offset` (inside the device).
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), String>;
    /// Make `[offset, offset + len)` read as zeros, discarding the whole
    /// pages inside (fallocate's `PUNCH_HOLE`, a block device's discard).
    fn punch(&self, offset: u64, len: u64) -> Result<(), String>;
}

/// zsmem's `PageStore` as a [`Backend`]: one slot per page of the device.
/// The store is shared: its statistics can be read while the device runs.
pub struct StoreBackend {
    store: Arc<PageStore>,
}

impl StoreBackend {
    /// A device of `store.slots()` pages; the store's page size must be 4096.
    pub fn new(store: Arc<PageStore>) -> Result<Self, String> {
        if store.page_size() != PAGE_SIZE {
            return Err(format!(
                "the store's page size is {}, a device needs {PAGE_SIZE}",
                store.page_size()
            ));
        }
        Ok(StoreBackend { store })
    }

    /// The store.
    pub fn store(&self) -> &Arc<PageStore> {
        &self.store
    }
}

/// Page operations on a shared `PageStore`.
struct StoreIo<'a>(&'a PageStore);

impl PageIo for StoreIo<'_> {
    type Error = String;
    fn read_page(&mut self, page: u64, buf: &mut Block) -> Result<(), String> {
        self.0.read(page as usize, buf).map_err(|e| e.to_string())
    }
    fn write_page(&mut self, page: u64, data: &Block) -> Result<(), String> {
        self.0.write(page as usize, data).map_err(|e| e.to_string())
    }
    fn discard(&mut self, page: u64, count: u64) -> Result<(), String> {
        self.0
            .discard(page as usize, count as usize)
            .map_err(|e| e.to_string())
    }
}

impl Backend for StoreBackend {
    fn size(&self) -> u64 {
        (self.store.slots() * PAGE_SIZE) as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), String> {
        map::read_at(&mut StoreIo(&self.store), offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), String> {
        map::write_at(&mut StoreIo(&self.store), offset, data)
    }
    fn punch(&self, offset: u64, len: u64) -> Result<(), String> {
        map::punch_hole(&mut StoreIo(&self.store), offset, len)
    }
}

/// A shared backend is one too (the FUSE threads share it with the caller).
impl<T: Backend> Backend for Arc<T> {
    fn size(&self) -> u64 {
        (**self).size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), String> {
        (**self).read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), String> {
        (**self).write_at(offset, data)
    }
    fn punch(&self, offset: u64, len: u64) -> Result<(), String> {
        (**self).punch(offset, len)
    }
}
