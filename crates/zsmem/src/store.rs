//! PageStore: a zram-like compressed store of page-sized blocks, addressed by
//! slot index, on top of a [`Pool`].
//!
//! zram's page handling, re-derived:
//! - a page whose machine words are all equal ("same-filled", usually zero)
//!   stores the word alone, no object;
//! - otherwise it is compressed; if the compressed size reaches the pool's
//!   `huge_class_size` the page is stored raw (one page, a "huge" page);
//! - a slot never written reads as zeros; a discarded slot too.
//!
//! Each slot has its own lock: readers and writers of different slots run in
//! parallel. Lock order: slot lock, then the pool's class lock (reads decode
//! under the slot lock); a write compresses and stores its new object before
//! taking the slot lock, and frees the old object after releasing it.
//!
//! Invariants: `pages_stored` counts slots holding a page (same-filled
//! included, as zram counts them); `compr_bytes` is the sum of the stored
//! objects' lengths; `same_pages` and `huge_pages` count the slots in those
//! states.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use crate::codec::Codec;
use crate::error::{Error, Result};
use crate::handle::Handle;
use crate::pool::{Pool, PoolConfig};
use crate::sync::Mutex;

/// How to build a [`PageStore`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageStoreConfig {
    /// Number of slots (zram's disksize / page size).
    pub slots: usize,
    /// The codec used for every page.
    pub codec: Codec,
    /// The pool under the store; its `page_size` is the block size.
    pub pool: PoolConfig,
}

impl Default for PageStoreConfig {
    fn default() -> Self {
        PageStoreConfig {
            slots: 1 << 18,
            codec: Codec::Lz4,
            pool: PoolConfig::default(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
enum Slot {
    #[default]
    Empty,
    Same(u64),
    Stored {
        handle: Handle,
        len: u32,
        huge: bool,
    },
}

/// zram's `mm_stat`, field by field.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MmStat {
    /// Bytes of pages stored, before compression (same-filled included).
    pub orig_data_size: u64,
    /// Bytes of the stored objects (huge pages count a whole page).
    pub compr_data_size: u64,
    /// Bytes of pool pages: the memory the store holds for data.
    pub mem_used_total: u64,
    /// The pool's memory limit in bytes, 0 if none.
    pub mem_limit: u64,
    /// Highest `mem_used_total` so far.
    pub mem_used_max: u64,
    /// Slots holding a same-filled page.
    pub same_pages: u64,
    /// Pages freed by compaction.
    pub pages_compacted: u64,
    /// Slots holding a huge (raw) page.
    pub huge_pages: u64,
    /// Huge pages stored since the store was made.
    pub huge_pages_since: u64,
}

#[derive(Debug, Default)]
struct Counters {
    pages_stored: AtomicU64,
    compr_bytes: AtomicU64,
    same_pages: AtomicU64,
    huge_pages: AtomicU64,
    huge_pages_since: AtomicU64,
}

/// A zram-like compressed page store.
///
/// ```
/// use zsmem::{PageStore, PageStoreConfig};
/// let store = PageStore::new(PageStoreConfig { slots: 16, ..Default::default() }).unwrap();
/// let page: Vec<u8> = b"hello, compressed world\n".iter().cycle().take(4096).copied().collect();
/// store.write(3, &page).unwrap();
/// let mut out = vec![0u8; 4096];
/// store.read(3, &mut out).unwrap();
/// assert_eq!(out, page);
/// store.read(4, &mut out).unwrap(); // never written: zeros
/// assert!(out.iter().all(|&b| b == 0));
/// assert_eq!(store.mm_stat().orig_data_size, 4096);
/// ```
pub struct PageStore {
    codec: Codec,
    pool: Pool,
    page_size: usize,
    huge_threshold: usize,
    slots: Box<[Mutex<Slot>]>,
    counters: Counters,
}

impl std::fmt::Debug for PageStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageStore")
            .field("codec", &self.codec)
            .field("slots", &self.slots.len())
            .field("pool", &self.pool)
            .finish()
    }
}

/// The word every 8-byte word of `page` equals, if there is one: zram's
/// same-filled test. `None` for pages shorter than a word.
pub fn same_filled(page: &[u8]) -> Option<u64> {
    let word = |c: &[u8]| u64::from_ne_bytes(c.try_into().expect("8-byte chunk"));
    let first = word(page.get(..8)?);
    page.chunks_exact(8)
        .all(|c| word(c) == first)
        .then_some(first)
}

impl PageStore {
    /// Make a store; fails on a bad pool configuration or zero slots.
    pub fn new(cfg: PageStoreConfig) -> Result<PageStore> {
        if cfg.slots == 0 {
            return Err(Error::InvalidConfig(
                "a page store needs at least one slot".into(),
            ));
        }
        let pool = Pool::new(cfg.pool)?;
        let page_size = pool.max_object_size();
        Ok(PageStore {
            codec: cfg.codec,
            huge_threshold: pool.huge_class_size(),
            page_size,
            pool,
            slots: (0..cfg.slots).map(|_| Mutex::new(Slot::Empty)).collect(),
            counters: Counters::default(),
        })
    }

    /// The pool under the store.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Bytes per slot.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Number of slots.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    fn slot(&self, index: usize) -> Result<&Mutex<Slot>> {
        self.slots.get(index).ok_or(Error::SlotOutOfRange {
            index,
            slots: self.slots.len(),
        })
    }

    fn check_page(&self, len: usize) -> Result<()> {
        if len != self.page_size {
            return Err(Error::WrongPageSize {
                len,
                page_size: self.page_size,
            });
        }
        Ok(())
    }

    /// Store `page` in slot `index`, replacing what was there. If the pool
    /// refuses (memory limit), the slot keeps its previous content.
    pub fn write(&self, index: usize, page: &[u8]) -> Result<()> {
        let slot = self.slot(index)?;
        self.check_page(page.len())?;
        let new = match same_filled(page) {
            Some(word) => Slot::Same(word),
            None => self.store_object(page)?,
        };
        let old = std::mem::replace(&mut *slot.lock(), new);
        self.account(new, 1);
        self.release(old);
        Ok(())
    }

    fn store_object(&self, page: &[u8]) -> Result<Slot> {
        thread_local! {
            static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        SCRATCH.with(|scratch| {
            let mut buf = scratch.borrow_mut();
            buf.resize(self.page_size, 0);
            // Anything at or over the huge threshold is stored raw anyway:
            // let the codec stop there.
            let limit = self.huge_threshold.min(self.page_size);
            let (bytes, huge) = match self.codec.compress(page, &mut buf[..limit]) {
                Some(n) if n < self.huge_threshold => (&buf[..n], false),
                _ => (page, true),
            };
            let handle = self.pool.store(bytes)?;
            Ok(Slot::Stored {
                handle,
                len: bytes.len() as u32,
                huge,
            })
        })
    }

    fn account(&self, s: Slot, sign: i64) {
        let add = |c: &AtomicU64, v: u64| {
            if sign > 0 {
                c.fetch_add(v, Ordering::Relaxed);
            } else {
                c.fetch_sub(v, Ordering::Relaxed);
            }
        };
        match s {
            Slot::Empty => return,
            Slot::Same(_) => add(&self.counters.same_pages, 1),
            Slot::Stored { len, huge, .. } => {
                add(&self.counters.compr_bytes, u64::from(len));
                if huge {
                    add(&self.counters.huge_pages, 1);
                    if sign > 0 {
                        self.counters
                            .huge_pages_since
                            .fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        add(&self.counters.pages_stored, 1);
    }

    /// Uncount and free what a slot held.
    fn release(&self, old: Slot) {
        self.account(old, -1);
        if let Slot::Stored { handle, .. } = old {
            // The slot owned this handle alone; freeing it cannot fail.
            let freed = self.pool.free(handle);
            debug_assert!(freed.is_ok(), "{freed:?}");
        }
    }

    /// Read slot `index` into `buf` (exactly one page).
    pub fn read(&self, index: usize, buf: &mut [u8]) -> Result<()> {
        let slot = self.slot(index)?;
        self.check_page(buf.len())?;
        let s = slot.lock();
        match *s {
            Slot::Empty => buf.fill(0),
            Slot::Same(word) => {
                for c in buf.chunks_exact_mut(8) {
                    c.copy_from_slice(&word.to_ne_bytes());
                }
            }
            Slot::Stored { handle, huge, .. } => {
                self.pool.with_object(handle, |bytes| {
                    if huge {
                        buf.copy_from_slice(bytes);
                        Ok(())
                    } else {
                        self.codec.decompress(bytes, buf)
                    }
                })??;
            }
        }
        Ok(())
    }

    /// Discard slots `index .. index + count`: they read as zeros after.
    pub fn discard(&self, index: usize, count: usize) -> Result<()> {
        let end = index
            .checked_add(count)
            .filter(|&e| e <= self.slots.len())
            .ok_or(Error::SlotOutOfRange {
                index: index.saturating_add(count).saturating_sub(1),
                slots: self.slots.len(),
            })?;
        for s in &self.slots[index..end] {
            let old = std::mem::take(&mut *s.lock());
            self.release(old);
        }
        Ok(())
    }

    /// Heap bytes of the slot table and the pool's metadata.
    pub fn metadata_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.slots) + self.pool.stats().metadata_bytes
    }

    /// Compact the pool; returns the pages freed.
    pub fn compact(&self) -> usize {
        self.pool.compact()
    }

    /// zram's `mm_stat`.
    pub fn mm_stat(&self) -> MmStat {
        let p = self.pool.stats();
        let c = &self.counters;
        let page = self.page_size as u64;
        MmStat {
            orig_data_size: c.pages_stored.load(Ordering::Relaxed) * page,
            compr_data_size: c.compr_bytes.load(Ordering::Relaxed),
            mem_used_total: p.pages_held as u64 * page,
            mem_limit: self.pool.config().memory_limit.unwrap_or(0) as u64,
            mem_used_max: p.max_pages_held as u64 * page,
            same_pages: c.same_pages.load(Ordering::Relaxed),
            pages_compacted: p.pages_compacted,
            huge_pages: c.huge_pages.load(Ordering::Relaxed),
            huge_pages_since: c.huge_pages_since.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> PageStore {
        PageStore::new(PageStoreConfig {
            slots: 64,
            ..Default::default()
        })
        .unwrap()
    }

    fn text(seed: u8) -> Vec<u8> {
        let mut v: Vec<u8> = format!("int f{seed}(void) {{ return {seed}; }}\n")
            .bytes()
            .cycle()
            .take(4096)
            .collect();
        v[0] = seed;
        v
    }

    fn noise(seed: u32) -> Vec<u8> {
        let mut x = u64::from(seed) | 1 << 40;
        (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    #[test]
    #[cfg_attr(miri, ignore = "calls liblz4/libzstd through FFI")]
    fn same_filled_huge_and_compressed_pages_are_counted_as_zram_does() {
        let s = store();
        s.write(0, &[0u8; 4096]).unwrap();
        s.write(1, &[0xABu8; 4096]).unwrap();
        s.write(2, &text(1)).unwrap();
        s.write(3, &noise(7)).unwrap();
        let m = s.mm_stat();
        assert_eq!(m.orig_data_size, 4 * 4096);
        assert_eq!((m.same_pages, m.huge_pages, m.huge_pages_since), (2, 1, 1));
        assert!(m.compr_data_size > 4096 && m.compr_data_size < 4096 + 400);
        let mut out = vec![0u8; 4096];
        for (i, want) in [vec![0u8; 4096], vec![0xAB; 4096], text(1), noise(7)]
            .iter()
            .enumerate()
        {
            s.read(i, &mut out).unwrap();
            assert_eq!(&out, want, "slot {i}");
        }
        // Overwrite and discard keep the counters exact.
        s.write(3, &text(2)).unwrap();
        s.discard(0, 2).unwrap();
        let m = s.mm_stat();
        assert_eq!(m.orig_data_size, 2 * 4096);
        assert_eq!((m.same_pages, m.huge_pages, m.huge_pages_since), (0, 0, 1));
        s.read(0, &mut out).unwrap();
        assert!(out.iter().all(|&b| b == 0));
        s.discard(0, 64).unwrap();
        let m = s.mm_stat();
        assert_eq!(
            (m.orig_data_size, m.compr_data_size, m.mem_used_total),
            (0, 0, 0)
        );
        assert!(m.mem_used_max >= 4096);
    }

    #[test]
    #[cfg_attr(miri, ignore = "calls liblz4/libzstd through FFI")]
    fn limit_failure_keeps_the_old_content() {
        let s = PageStore::new(PageStoreConfig {
            slots: 64,
            codec: Codec::Lz4,
            pool: PoolConfig {
                memory_limit: Some(4 * 4096),
                ..PoolConfig::default()
            },
        })
        .unwrap();
        let mut stored = 0;
        let mut err = None;
        for i in 0..64 {
            match s.write(i, &noise(i as u32)) {
                Ok(()) => stored += 1,
                Err(e) => {
                    err = Some((i, e));
                    break;
                }
            }
        }
        let (i, e) = err.expect("the limit must bite");
        assert!(matches!(e, Error::MemoryLimit { .. }));
        assert_eq!(stored, 4);
        // Slot 0 still holds its page after a refused overwrite.
        assert!(s.write(0, &noise(99)).is_err());
        let mut out = vec![0u8; 4096];
        s.read(0, &mut out).unwrap();
        assert_eq!(out, noise(0));
        s.read(i, &mut out).unwrap();
        assert!(out.iter().all(|&b| b == 0), "the refused slot stays empty");
    }

    #[test]
    fn bad_arguments_are_errors() {
        let s = store();
        assert!(matches!(
            s.write(64, &[0; 4096]),
            Err(Error::SlotOutOfRange { .. })
        ));
        assert!(matches!(
            s.write(0, &[0; 100]),
            Err(Error::WrongPageSize { .. })
        ));
        assert!(matches!(
            s.read(0, &mut [0; 4095]),
            Err(Error::WrongPageSize { .. })
        ));
        assert!(matches!(
            s.discard(60, 5),
            Err(Error::SlotOutOfRange { .. })
        ));
        assert!(matches!(
            s.discard(usize::MAX, 2),
            Err(Error::SlotOutOfRange { .. })
        ));
    }

    #[test]
    fn same_filled_detects_words() {
        let mut p = vec![0u8; 4096];
        assert_eq!(same_filled(&p), Some(0));
        p[4095] = 1;
        assert_eq!(same_filled(&p), None);
        let pattern: Vec<u8> = [1u8, 2, 3, 4, 5, 6, 7, 8]
            .iter()
            .cycle()
            .take(4096)
            .copied()
            .collect();
        assert_eq!(
            same_filled(&pattern),
            Some(u64::from_ne_bytes([1, 2, 3, 4, 5, 6, 7, 8]))
        );
        let mut almost = pattern.clone();
        almost[2048] ^= 1;
        assert_eq!(same_filled(&almost), None);
    }
}
