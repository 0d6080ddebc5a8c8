//! The pool tag: each live pool of the process holds one of `1..=MAX_POOLS`,
//! and every handle it hands out carries it, so a handle of another pool is
//! refused with one compare (see the module comment of `handle`).
//!
//! A dropped pool's tag is given again once every other free one has been
//! (after 254 more pools), and the new holder's handles would name the same
//! classes and slots as the old one's: a stale handle of the dropped pool
//! would then read or free the new pool's object. So each holding of a tag
//! has an *epoch* (how many pools held it before, modulo [`EPOCHS`]), and a
//! pool's handle generations start at its epoch's quarter of the range
//! ([`PoolTag::first_generation`]: 1, 4097, 8193 or 12289). A slot of the
//! new pool then never carries a generation a slot of the last three
//! holders did while that slot was freed fewer than 4,096 times; past that
//! (or from a holder four or more epochs back) a stale handle of a dropped
//! pool can still match, as it could before, and is not caught.

use super::{MAX_GENERATION, MAX_POOLS};
use crate::error::{Error, Result};

/// Tags of the live pools of this process: bit `t` of `taken` is set while
/// a pool holds tag `t` (tag 0 is never given). A plain mutex: it is taken
/// only when a pool is made or dropped.
struct TagRegistry {
    taken: [u64; 4],
    /// Per tag, how many pools have held it (wrapping).
    holders: [u8; MAX_POOLS + 1],
    /// The tag given last: the search for a free one starts after it, so a
    /// dropped pool's tag is given again only after every other free one.
    last: u8,
}

static TAGS: std::sync::Mutex<TagRegistry> = std::sync::Mutex::new(TagRegistry {
    taken: [0; 4],
    holders: [0; MAX_POOLS + 1],
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
pub(crate) struct PoolTag {
    tag: u8,
    /// How many pools held the tag before this one, modulo [`EPOCHS`].
    epoch: u8,
}

/// Epochs of a tag: the generation range is cut in this many parts.
const EPOCHS: u32 = 4;

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
                let epoch = (u32::from(r.holders[t]) % EPOCHS) as u8;
                r.holders[t] = r.holders[t].wrapping_add(1);
                return Ok(PoolTag {
                    tag: t as u8,
                    epoch,
                });
            }
        }
        Err(Error::TooManyPools { max: MAX_POOLS })
    }

    pub(crate) fn get(&self) -> u8 {
        self.tag
    }

    /// The generation every handle slot of this pool starts from: the
    /// start of its epoch's part of `1..=MAX_GENERATION`.
    pub(crate) fn first_generation(&self) -> u32 {
        1 + u32::from(self.epoch) * (MAX_GENERATION + 1) / EPOCHS
    }
}

impl Drop for PoolTag {
    fn drop(&mut self) {
        let t = usize::from(self.tag);
        tags().taken[t / 64] &= !(1 << (t % 64));
    }
}
