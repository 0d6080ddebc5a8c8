//! The pool tag: each live pool of the process holds one of `1..=MAX_POOLS`,
//! and every handle it hands out carries it, so a handle of another pool is
//! refused with one compare (see the module comment of `handle`).

use super::MAX_POOLS;
use crate::error::{Error, Result};

/// Tags of the live pools of this process: bit `t` of `taken` is set while
/// a pool holds tag `t` (tag 0 is never given). A plain mutex: it is taken
/// only when a pool is made or dropped.
struct TagRegistry {
    taken: [u64; 4],
    /// The tag given last: the search for a free one starts after it, so a
    /// dropped pool's tag is given again only after every other free one.
    last: u8,
}

static TAGS: std::sync::Mutex<TagRegistry> = std::sync::Mutex::new(TagRegistry {
    taken: [0; 4],
    last: 0,
});

fn tags() -> std::sync::MutexGuard<'static, TagRegistry> {
    // Nothing panics while the registry is locked; a poisoned lock still
    // guards consistent bits.
    TAGS.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A pool's tag (`1..=MAX_POOLS`), unique among the live pools of the
/// process, held for the pool's life and given back on drop. Every handle
/// the pool hands out carries it, so a handle of another pool is refused.
#[derive(Debug)]
pub(crate) struct PoolTag(u8);

impl PoolTag {
    /// The next free tag after the one given last, or
    /// [`Error::TooManyPools`] if all are taken.
    pub(crate) fn acquire() -> Result<PoolTag> {
        let mut r = tags();
        let start = usize::from(r.last);
        for step in 0..MAX_POOLS {
            // Runs through start + 1, ..., MAX_POOLS, 1, ..., start.
            let t = (start + step) % MAX_POOLS + 1;
            let (w, b) = (t / 64, t % 64);
            if r.taken[w] & (1 << b) == 0 {
                r.taken[w] |= 1 << b;
                r.last = t as u8;
                return Ok(PoolTag(t as u8));
            }
        }
        Err(Error::TooManyPools { max: MAX_POOLS })
    }

    pub(crate) fn get(&self) -> u8 {
        self.0
    }
}

impl Drop for PoolTag {
    fn drop(&mut self) {
        let t = usize::from(self.0);
        tags().taken[t / 64] &= !(1 << (t % 64));
    }
}
