//! Eviction: dropping a unit from the region, and the evictor thread that
//! keeps resident memory under the budget.
//!
//! A **clean** unit (write-protected, its stored copy current) is dropped
//! under its lock with `MADV_DONTNEED`: no compression. A **dirty** unit is
//! first write-protected (so that its bytes cannot change unseen), then,
//! outside its lock, read with `process_vm_readv` (a kernel-mode read: a
//! page the program dropped is an `EFAULT` to us and reads as zeros, never
//! a fault we would have to serve ourselves), compressed and stored; under
//! the lock again it is dropped if its generation did not move, else the
//! copy is discarded (a write came in) and the unit stays.
//!
//! While copies of resident units fill `RegionConfig::keep_copies`, the
//! hand also discards the copy of each clean unit it passes with credit
//! (copies.rs), under the clock's lock and that unit's.
//!
//! Lock order: the clock's lock, then one unit's. Eviction of a unit holds
//! no other lock while compressing.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Shared;
use super::copies;
use super::policy::{Kind, Visit, visit};
use super::stats::{add, get};

/// Evict one unit chosen by the clock; `false` if none could be.
pub(super) fn evict_one(sh: &Shared, buf: &mut [u8]) -> bool {
    for _ in 0..4 {
        let victim = {
            let mut clock = sh.clock.lock();
            clock.next_victim(sh.units.len(), |i| {
                let mut u = sh.units[i].lock();
                let v = visit(&mut u);
                if v == Visit::SecondChance && u.copy > 0 && copies::full(sh) {
                    copies::discard(sh, i, &mut u);
                }
                v
            })
        };
        let Some(index) = victim else {
            return false;
        };
        if evict(sh, index, buf) {
            return true;
        }
    }
    false
}

/// Evict unit `index` if it is still a resident unit without credit that
/// no one else is evicting.
pub(super) fn evict(sh: &Shared, index: usize, buf: &mut [u8]) -> bool {
    let start = sh.base + index * sh.unit;
    let mut u = sh.units[index].lock();
    if u.kind != Kind::Resident || u.evicting || u.credit > 0 {
        return false;
    }
    if u.stored {
        if !drop_unit(sh, start) {
            return false;
        }
        // The slot is its only copy now.
        copies::release(sh, &mut u);
        u.kind = Kind::Evicted;
        add(&sh.counters.clean_drops, 1);
        finish(sh);
        return true;
    }
    // Freeze it: from now on a write traps and bumps the generation.
    if sh.uffd.write_protect(start, sh.unit, true).is_err() {
        add(&sh.counters.errors, 1);
        return false;
    }
    let generation = u.generation;
    u.evicting = true;
    drop(u);

    let t = Instant::now();
    read_unit(start, buf, sh.os_page);
    let stored = sh.store.write(index, buf).is_ok();
    add(&sh.counters.compress_ns, t.elapsed().as_nanos() as u64);
    add(&sh.counters.compressions, 1);

    let mut u = sh.units[index].lock();
    u.evicting = false;
    if !stored {
        // The store refused (its memory limit): the unit stays, dirty.
        add(&sh.counters.errors, 1);
        return false;
    }
    if u.generation != generation || u.kind != Kind::Resident {
        add(&sh.counters.eviction_races, 1);
        let _ = sh.store.discard(index, 1);
        return false;
    }
    u.stored = true;
    if u.credit > 0 {
        // Given a credit while compressed: it stays, clean if its copy
        // fits within `keep_copies` (it is write-protected), else dirty.
        if !copies::admit(sh, index, &mut u) {
            copies::discard(sh, index, &mut u);
        }
        return false;
    }
    if !drop_unit(sh, start) {
        return false;
    }
    u.kind = Kind::Evicted;
    finish(sh);
    true
}

/// Count an eviction; called under the unit's lock, so that the counts
/// match the states whenever no unit lock is held.
fn finish(sh: &Shared) {
    add(&sh.counters.evictions, 1);
    add(&sh.counters.evicted_units, 1);
    sh.counters.resident_units.fetch_sub(1, Ordering::Relaxed);
}

/// `MADV_DONTNEED` over a unit: its pages are gone, the next access
/// faults to us.
fn drop_unit(sh: &Shared, start: usize) -> bool {
    // SAFETY: `start .. start + unit` lies inside the region's mapping,
    // which lives as long as `sh` does; dropping its pages is what the
    // region is for (the program sees them again through faults).
    let r = unsafe { libc::madvise(start as *mut libc::c_void, sh.unit, libc::MADV_DONTNEED) };
    if r != 0 {
        add(&sh.counters.errors, 1);
    }
    r == 0
}

/// Read the unit at `start` into `buf` by a kernel-mode copy; pages that
/// are not there (dropped by the program) read as zeros.
fn read_unit(start: usize, buf: &mut [u8], page: usize) {
    if read_remote(start, buf) == buf.len() {
        return;
    }
    for (k, chunk) in buf.chunks_mut(page).enumerate() {
        if read_remote(start + k * page, chunk) != chunk.len() {
            chunk.fill(0);
        }
    }
}

fn read_remote(start: usize, buf: &mut [u8]) -> usize {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: start as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `local` is our own writable buffer of its length; `remote`
    // names memory of this process, which the kernel reads with its own
    // checks (an unmapped or missing page is an error, not a fault).
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    usize::try_from(n).unwrap_or(0)
}

/// The evictor thread's body: whenever resident memory is above the low
/// mark (the budget less the headroom), evict down to it.
pub(super) fn run(sh: &Shared) {
    let mut buf = vec![0u8; sh.unit];
    while !sh.stopping.load(Ordering::Acquire) {
        if get(&sh.counters.resident_units) as usize > sh.low_units() {
            if !evict_one(sh, &mut buf) {
                std::thread::yield_now();
            }
            continue;
        }
        let guard = sh.wake.0.lock().unwrap_or_else(|p| p.into_inner());
        sh.asleep.store(true, Ordering::SeqCst);
        if get(&sh.counters.resident_units) as usize <= sh.low_units()
            && !sh.stopping.load(Ordering::Acquire)
        {
            let _ = sh.wake.1.wait_timeout(guard, Duration::from_millis(100));
        }
        sh.asleep.store(false, Ordering::SeqCst);
    }
}
