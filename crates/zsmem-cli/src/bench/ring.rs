//! A ring of live objects over an object contestant: the kernel of `zsmem
//! bench pool` (on one thread, and on each thread of `--threads`) and of the
//! criterion bench in `benches/pool.rs`.

use std::hint::black_box;

use zsmem_lab::contestants::ObjectContestant;

use crate::{CliError, CliResult};

/// A ring of live objects: each `churn` frees the oldest and stores a new one.
pub struct Ring {
    pub(super) ids: Vec<u64>,
    next: usize,
    pub(super) data: Vec<u8>,
}

impl Ring {
    /// Fill `store` with `live` objects of `size` bytes; panics where
    /// [`Ring::try_fill`] returns an error (the criterion bench's sizes are
    /// fixed and small).
    pub fn fill(store: &mut dyn ObjectContestant, live: usize, size: usize) -> Ring {
        Ring::try_fill(store, live, size).expect("benchmark fill")
    }

    /// Fill `store` with `live` objects of `size` bytes; an error, not an
    /// abort, when the ring's ids or an object cannot be had.
    pub fn try_fill(store: &mut dyn ObjectContestant, live: usize, size: usize) -> CliResult<Ring> {
        let data: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
        let mut ids = Vec::new();
        ids.try_reserve_exact(live)
            .map_err(|_| CliError::Usage(format!("--live {live}: no memory for its ids")))?;
        for _ in 0..live {
            let id = store
                .alloc(&data)
                .map_err(|e| CliError::Usage(format!("{}: {e}", store.name())))?;
            ids.push(id);
        }
        Ok(Ring { ids, next: 0, data })
    }

    /// `n` times: free the oldest object, store a new one (alloc + write).
    pub fn churn(&mut self, store: &mut dyn ObjectContestant, n: usize) {
        for _ in 0..n {
            let slot = &mut self.ids[self.next];
            store.free(*slot).expect("benchmark free");
            *slot = store.alloc(black_box(&self.data)).expect("benchmark store");
            self.next = (self.next + 1) % self.ids.len();
        }
    }

    /// `n` reads (copies out) of pseudo-randomly chosen live objects.
    pub fn read(&self, store: &mut dyn ObjectContestant, n: usize, buf: &mut Vec<u8>) {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let id = self.ids[(x % self.ids.len() as u64) as usize];
            store.read(id, buf).expect("benchmark read");
            black_box(&buf);
        }
    }

    /// Free every object.
    pub fn drain(self, store: &mut dyn ObjectContestant) {
        for id in self.ids {
            store.free(id).expect("benchmark free");
        }
    }
}
