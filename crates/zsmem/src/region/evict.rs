//! Eviction: dropping a unit from the region, and the evictor thread that
//! keeps resident memory under the budget.
//!
//! A **clean** unit (write-protected, its stored copy current) is dropped
//! without compression. A **dirty** unit is first write-protected (so that
//! its bytes cannot change unseen), then, outside its lock, read with
//! `process_vm_readv` (a kernel-mode read: a page the program dropped is an
//! `EFAULT` to us and reads as zeros, never a fault we would have to serve
//! ourselves), compressed and stored; under the lock again it is dropped if
//! its generation did not move, else the copy is discarded (a write came
//! in) and the unit stays.
//!
//! Dropping is batched: a unit to drop is marked `dropping` under its lock
//! and queued; up to 32 are dropped by one `process_madvise`
//! (`MADV_DONTNEED`), then marked evicted. Meanwhile a fault on one of them
//! waits for the batch (`lock_settled`).
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
use super::policy::{Kind, Unit, Visit, visit};
use super::stats::{add, get};

/// Units whose pages one `process_madvise` call drops at most.
pub(super) const BATCH: usize = 32;

/// Units chosen for eviction whose pages are not dropped yet: each is
/// marked `dropping` (a fault on it waits, see [`lock_settled`]) until
/// [`flush`] drops them all with one call, so one TLB flush serves them
/// all (a `MADV_DONTNEED` per unit interrupts every other CPU running the
/// program once per unit: 24 us a unit on this machine, against 1.4 us in
/// batches of 32).
pub(super) struct Batch {
    /// Unit index, and whether it was clean (dropped without compressing).
    units: [(usize, bool); BATCH],
    len: usize,
}

impl Batch {
    pub(super) fn new() -> Batch {
        Batch {
            units: [(0, false); BATCH],
            len: 0,
        }
    }

    fn push(&mut self, index: usize, clean: bool) {
        self.units[self.len] = (index, clean);
        self.len += 1;
    }

    fn is_full(&self) -> bool {
        self.len == BATCH
    }
}

/// Evict up to `want` units chosen by the clock, their pages dropped in
/// batches; returns how many were evicted (fewer if the clock finds no
/// more victims).
///
/// Stops early when a whole batch could not be dropped (the program
/// locked those pages, `mlock`: the clock would only pick them again, and
/// `reclaim`, the evictor and a faulting thread looped there for ever) or
/// when the region is being dropped.
pub(super) fn evict_some(sh: &Shared, want: usize, buf: &mut [u8]) -> usize {
    let mut batch = Batch::new();
    let mut done = 0;
    while done + batch.len < want && !sh.stopping.load(Ordering::Acquire) {
        if !evict_one(sh, buf, &mut batch) {
            break;
        }
        if batch.is_full() {
            match flush(sh, &mut batch, buf) {
                0 => return done,
                n => done += n,
            }
        }
    }
    done + flush(sh, &mut batch, buf)
}

/// Choose one unit by the clock and queue it in `batch` (compressing it
/// first if it is dirty); `false` if none could be.
fn evict_one(sh: &Shared, buf: &mut [u8], batch: &mut Batch) -> bool {
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
        if evict(sh, index, buf, batch) {
            return true;
        }
    }
    false
}

/// Queue unit `index` in `batch` if it is still a resident unit without
/// credit that no one else is evicting: a clean unit at once, a dirty one
/// once compressed (if no write came in meanwhile).
fn evict(sh: &Shared, index: usize, buf: &mut [u8], batch: &mut Batch) -> bool {
    let start = sh.unit_start(index);
    let mut u = sh.units[index].lock();
    if u.kind != Kind::Resident || u.evicting || u.dropping || u.credit > 0 {
        return false;
    }
    if u.stored {
        u.dropping = true;
        batch.push(index, true);
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
    u.dropping = true;
    batch.push(index, false);
    true
}

/// Drop the pages of every unit in `batch` and mark them evicted; returns
/// how many were. A unit whose pages could not all be dropped stays
/// resident and clean (write-protected, its copy current), made whole
/// again from its copy ([`refill`]).
fn flush(sh: &Shared, batch: &mut Batch, buf: &mut [u8]) -> usize {
    let queued = &batch.units[..batch.len];
    if queued.is_empty() {
        return 0;
    }
    let mut ranges = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; BATCH];
    for (r, &(index, _)) in ranges.iter_mut().zip(queued) {
        r.iov_base = sh.unit_start(index) as *mut libc::c_void;
        r.iov_len = sh.unit;
    }
    let dropped = drop_units(sh, &ranges[..queued.len()]);
    let mut done = 0;
    for (k, &(index, clean)) in queued.iter().enumerate() {
        let mut u = sh.units[index].lock();
        u.dropping = false;
        if dropped & (1 << k) == 0 {
            refill(sh, index, buf);
            continue;
        }
        // The slot is its only copy now.
        copies::release(sh, &mut u);
        u.kind = Kind::Evicted;
        if clean {
            add(&sh.counters.clean_drops, 1);
        }
        finish(sh);
        done += 1;
    }
    batch.len = 0;
    done
}

/// Unit `index` (locked by the caller) could not be dropped whole: a
/// `madvise` stops at a locked page (`mlock`) with the pages before it
/// gone. Its copy is current (it was write-protected before it was
/// stored), so they are put back from it, write-protected: the unit is
/// whole and clean again. Left missing, the next access took them for
/// pages the program had dropped, mapped zeros and forgot the copy, the
/// only one (31 of 64 units read wrong in the review's test); one whole
/// batch failing used to leave all its units so.
fn refill(sh: &Shared, index: usize, buf: &mut [u8]) {
    let put_back = sh.store.read(index, buf).is_ok()
        && sh
            .uffd
            .copy(sh.unit_start(index), buf, sh.os_page, true)
            .is_ok();
    if !put_back {
        add(&sh.counters.errors, 1);
    }
}

/// Lock unit `index` once no batch is dropping its pages: while one is,
/// its pages may or may not be there, so a fault waits (the batch is one
/// system call away from done) rather than take a page dropped under it
/// for one the program dropped, or lift the protection of a unit whose
/// pages are going.
pub(super) fn lock_settled(sh: &Shared, index: usize) -> crate::sync::MutexGuard<'_, Unit> {
    let mut round = 0;
    loop {
        let u = sh.units[index].lock();
        if !u.dropping {
            return u;
        }
        drop(u);
        crate::sync::spin_wait(&mut round);
    }
}

/// Count an eviction; called under the unit's lock, so that the counts
/// match the states whenever no unit lock is held.
fn finish(sh: &Shared) {
    add(&sh.counters.evictions, 1);
    add(&sh.counters.evicted_units, 1);
    sh.counters.resident_units.fetch_sub(1, Ordering::Relaxed);
    sh.occupied.fetch_sub(1, Ordering::Relaxed);
}

/// `MADV_DONTNEED` over the units `ranges` name: their pages are gone, the
/// next access faults to us. One `process_madvise` for all where the
/// kernel takes it on our own process (Linux 6.13), else a `madvise` each.
/// Returns a bit per range, set where the range was dropped whole.
fn drop_units(sh: &Shared, ranges: &[libc::iovec]) -> u64 {
    use std::sync::atomic::Ordering::Relaxed;
    const { assert!(BATCH <= 64) };
    let total = ranges.len() * sh.unit;
    // The bits of the first `k` ranges.
    let first = |k: usize| u64::MAX.checked_shr((64 - k) as u32).unwrap_or(0);
    let all = first(ranges.len());
    let (mut from, mut refused) = (0, false);
    if let Some(pidfd) = &sh.pidfd
        && sh.batch_drops.load(Relaxed)
    {
        use std::os::fd::AsRawFd;
        // SAFETY: `ranges` name units inside the region's mapping, which
        // lives as long as `sh` does; the kernel reads the array and drops
        // those pages of our own process, which is what eviction is for.
        let n = unsafe {
            libc::syscall(
                libc::SYS_process_madvise,
                pidfd.as_raw_fd(),
                ranges.as_ptr(),
                ranges.len(),
                libc::MADV_DONTNEED,
                0,
            )
        };
        match usize::try_from(n) {
            Ok(n) if n == total => return all,
            // A short count: the kernel stopped at a range it refused,
            // having dropped the ranges before it whole. The rest by a
            // madvise each below (dropping a page twice is harmless).
            Ok(n) => from = n / sh.unit,
            Err(_) => refused = true,
        }
    }
    let mut dropped = first(from);
    for (k, r) in ranges.iter().enumerate().skip(from) {
        // SAFETY: as above, one unit.
        let rc = unsafe { libc::madvise(r.iov_base, r.iov_len, libc::MADV_DONTNEED) };
        if rc == 0 {
            dropped |= 1 << k;
        } else {
            add(&sh.counters.errors, 1);
        }
    }
    if refused && dropped == all {
        // Every range could be dropped, not the call: `MADV_DONTNEED` on a
        // process is refused before Linux 6.13 (EINVAL). A madvise each
        // from now on. (A range refused too, a locked page, says nothing
        // of the call: it is tried again with the next batch.)
        sh.batch_drops.store(false, Relaxed);
    }
    dropped
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

/// The evictor thread's body: whenever resident memory is above the high
/// mark (the budget less half the headroom), evict down to the low mark
/// (the budget less the headroom).
///
/// When a round evicts nothing while resident memory is above the mark
/// (the store refuses every copy at its memory limit, or the program
/// locked the candidates), it waits before the next, 1 ms and twice as
/// long each time up to 100 ms, or until woken: it used to try again at
/// once, compressing some 285,000 units a second for nothing while the
/// program sat idle.
pub(super) fn run(sh: &Shared) {
    let mut buf = vec![0u8; sh.unit];
    let mut backoff = Duration::ZERO;
    while !sh.stopping.load(Ordering::Acquire) {
        let resident = get(&sh.counters.resident_units) as usize;
        if resident > sh.high_units() {
            if evict_some(sh, resident - sh.low_units(), &mut buf) > 0 {
                backoff = Duration::ZERO;
                continue;
            }
            backoff = (backoff * 2).clamp(Duration::from_millis(1), MAX_BACKOFF);
            sleep(sh, backoff, |_| true);
            continue;
        }
        backoff = Duration::ZERO;
        sleep(sh, Duration::from_millis(100), |sh| {
            get(&sh.counters.resident_units) as usize <= sh.high_units()
        });
    }
}

/// Longest wait of the evictor between rounds that evict nothing.
const MAX_BACKOFF: Duration = Duration::from_millis(100);

/// Wait on the evictor's condition for `timeout` or a wake-up, if `still`
/// holds (looked at under its lock, after saying so in `asleep`, so that a
/// wake-up after the look is not missed) and the region is not stopping.
fn sleep(sh: &Shared, timeout: Duration, still: impl Fn(&Shared) -> bool) {
    let guard = sh.wake.0.lock().unwrap_or_else(|p| p.into_inner());
    sh.asleep.store(true, Ordering::SeqCst);
    if still(sh) && !sh.stopping.load(Ordering::Acquire) {
        let _ = sh.wake.1.wait_timeout(guard, timeout);
    }
    sh.asleep.store(false, Ordering::SeqCst);
}
