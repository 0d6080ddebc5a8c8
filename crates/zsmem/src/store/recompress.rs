//! Recompression, as zram's `recompress`: objects of idle or huge slots
//! made again with a secondary codec (a slower, stronger one), kept only if
//! the new object lands in a smaller size class, so that memory is
//! actually returned. A slot no secondary codec could shrink is marked
//! incompressible and not tried again (until it is rewritten); writeback
//! can pick those.
//!
//! Each slot is handled under its own lock (decode, compress, store the new
//! object, free the old): recompression holds a slot lock across
//! compression, as zram does, but never two slot locks, and takes a class
//! lock only inside the slot lock (the store's order).

use super::slot::{Kind, Slot};
use super::stats::{RecompressStat, sub};
use super::{PageStore, Selection};
use crate::error::{Error, Result};

/// What [`PageStore::recompress`] should do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecompressRequest {
    /// Which slots: zram's `type=idle|huge|huge_idle`, or every slot
    /// holding an object.
    pub which: Selection,
    /// Only objects of at least this many bytes (zram's `threshold`).
    pub threshold: Option<usize>,
    /// Only the secondary codec of this priority (1 is the first
    /// configured; zram's `priority`); `None` tries them in priority order
    /// until one shrinks the object.
    pub priority: Option<usize>,
}

impl Default for RecompressRequest {
    fn default() -> Self {
        RecompressRequest {
            which: Selection::Idle,
            threshold: None,
            priority: None,
        }
    }
}

impl PageStore {
    /// The bytes an object of `len` bytes takes in the pool: its size
    /// class's slot, or with log placement its length rounded to the unit.
    fn class_size(&self, len: usize) -> usize {
        self.pool.placed_size(len)
    }

    /// Recompress the selected slots with the secondary codecs. Returns
    /// what this call did; [`recompress_stat`](PageStore::recompress_stat)
    /// keeps the totals.
    pub fn recompress(&self, req: RecompressRequest) -> Result<RecompressStat> {
        let secondary = self.codecs.secondary();
        let candidates: Vec<u8> = match req.priority {
            None => secondary.to_vec(),
            Some(p) => vec![*secondary.get(p.wrapping_sub(1)).ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "no secondary codec of priority {p}: the store has {}",
                    secondary.len()
                ))
            })?],
        };
        if candidates.is_empty() {
            return Err(Error::InvalidConfig(
                "recompression needs a secondary codec (PageStoreConfig::recompress)".into(),
            ));
        }
        let mut stat = RecompressStat::default();
        let mut page = vec![0u8; self.page_size];
        let mut buf = vec![0u8; self.page_size];
        for index in self.slots.present() {
            let Some(slot) = self.slots.get(index) else {
                continue;
            };
            let mut s = slot.lock();
            if s.kind() != Kind::Stored
                || s.is_incompressible()
                || !req.which.matches(&s)
                || req.threshold.is_some_and(|t| s.len() < t)
            {
                continue;
            }
            let current = self.codecs.priority(s.codec());
            let mut tried = false;
            let old_class = self.class_size(s.len());
            let mut found = None;
            for &c in &candidates {
                if self.codecs.priority(c) <= current {
                    continue;
                }
                if !tried {
                    self.decode(index, &s, &mut page)?;
                    tried = true;
                }
                let limit = self.huge_threshold.min(self.page_size);
                if let Some(n) = self.codecs.get(c).compress(&page, &mut buf[..limit])
                    && n < self.huge_threshold
                    && self.class_size(n) < old_class
                {
                    found = Some((c, n));
                    break;
                }
            }
            if !tried {
                continue;
            }
            stat.examined += 1;
            let Some((codec, n)) = found else {
                s.set_incompressible();
                stat.marked_incompressible += 1;
                continue;
            };
            // The memory limit may refuse the new object: keep the old one.
            let Ok(value) = self.pool_store(index, &buf[..n]) else {
                continue;
            };
            let mut new = Slot::stored_at(value, n, false, codec, s.atime());
            new.set_idle(s.is_idle());
            new.set_recompressed();
            let old = std::mem::replace(&mut *s, new);
            stat.recompressed += 1;
            stat.bytes_saved += (old.len() - n) as u64;
            if old.is_huge() {
                sub(&self.counters.huge_pages, 1);
            }
            sub(&self.counters.compr_bytes, (old.len() - n) as u64);
            let freed = self.free_pool_object(&old);
            debug_assert!(freed.is_ok(), "{freed:?}");
        }
        self.counters.add_recompress(&stat);
        Ok(stat)
    }

    /// What recompression has done since the store was made.
    pub fn recompress_stat(&self) -> RecompressStat {
        self.counters.recompress_stat()
    }
}
