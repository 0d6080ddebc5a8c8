//! The fault thread: reads the userfaultfd and resolves each fault.
//!
//! - A missing page in an **evicted** unit: the unit is decompressed from
//!   its slot and installed whole, write-protected (UFFDIO_COPY with
//!   `MODE_WP`); the slot keeps its copy, which stays current until the
//!   program writes (the swap cache's trick: a clean unit is dropped again
//!   without compressing).
//! - A missing page in an **empty** unit (never written): zeros,
//!   installed write-protected as a clean unit whose copy is the empty
//!   slot (UFFDIO_COPY; not the shared zero page, whose writes would not
//!   trap).
//! - A missing page in a **resident** unit: either a second message for a
//!   unit just installed (the page is there: `EEXIST`, the thread is woken)
//!   or a page the program dropped with `madvise`: it is mapped to the zero
//!   page, as the kernel would, and the unit's stored copy, now stale, is
//!   discarded.
//! - A **write-protect** fault: the first write to a clean unit. The
//!   stored copy is discarded, the unit's generation bumped (an evictor
//!   compressing it will find out), the protection lifted (which wakes the
//!   writer). If the unit was evicted meanwhile, the writer is only woken:
//!   it retries and faults on the missing page.
//!
//! Before installing, the fault thread makes room itself if the region is
//! at its budget (the evictor thread fell behind), so resident never passes
//! the budget. It holds one unit lock at a time, never with the clock's.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::Shared;
use super::evict;
use super::policy::Kind;
use super::stats::{add, get};
use super::uffd::{self, Fault};

/// The fault thread's body: until the stop signal. After serving faults
/// it keeps reading the descriptor for `spin` before it sleeps in `poll`,
/// so that a burst of faults does not pay a wake-up each.
pub(super) fn run(sh: &Shared) {
    let mut faults = Vec::with_capacity(16);
    let mut buf = vec![0u8; sh.unit];
    let zeros = vec![0u8; sh.unit];
    loop {
        match uffd::wait(&sh.uffd, &sh.stop) {
            Ok(true) => {}
            // Stopped, or the descriptor is broken: in both cases the
            // region's owner closes it, which releases every waiter.
            Ok(false) | Err(_) => return,
        }
        #[cfg(test)]
        while sh.paused.load(Ordering::Acquire) {
            if sh.stopping.load(Ordering::Acquire) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let mut last = Instant::now();
        loop {
            if sh.uffd.read_faults(&mut faults).is_err() {
                add(&sh.counters.errors, 1);
                break;
            }
            if faults.is_empty() {
                if last.elapsed() >= sh.spin || sh.stopping.load(Ordering::Relaxed) {
                    break;
                }
                // Give the CPU to a runnable thread (the one just woken,
                // on a busy machine) while waiting.
                std::thread::yield_now();
                continue;
            }
            for &f in &faults {
                let t = Instant::now();
                resolve(sh, f, &mut buf, &zeros);
                sh.latency.record(t.elapsed().as_nanos() as u64);
            }
            last = Instant::now();
        }
    }
}

/// Resolve one fault; the faulting thread is woken whatever happens (an
/// error is counted, and the thread retries its access).
fn resolve(sh: &Shared, f: Fault, buf: &mut [u8], zeros: &[u8]) {
    let Some(index) = sh.unit_of(f.address) else {
        return;
    };
    let start = sh.base + index * sh.unit;
    let result = if f.write_protect {
        add(&sh.counters.write_faults, 1);
        write_fault(sh, index, start, f.address)
    } else {
        add(&sh.counters.missing_faults, 1);
        missing(sh, index, start, f.address, buf, zeros)
    };
    if result.is_err() {
        add(&sh.counters.errors, 1);
        let _ = sh.uffd.wake(f.address, sh.os_page);
    }
}

fn missing(
    sh: &Shared,
    index: usize,
    start: usize,
    page: usize,
    buf: &mut [u8],
    zeros: &[u8],
) -> std::io::Result<()> {
    // Room first, before taking the unit's lock (the clock locks units).
    if sh.units[index].lock().kind != Kind::Resident {
        let mut room = 0;
        while get(&sh.counters.resident_units) as usize >= sh.budget_units() && room < 4 {
            if !evict::evict_one(sh, buf) {
                room += 1;
            } else {
                add(&sh.counters.sync_evictions, 1);
            }
        }
    }
    let mut u = sh.units[index].lock();
    match u.kind {
        Kind::Evicted => {
            let t = Instant::now();
            sh.store
                .read(index, buf)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            add(&sh.counters.decompress_ns, t.elapsed().as_nanos() as u64);
            sh.uffd.copy(start, buf, sh.os_page, true)?;
            u.installed(true);
            add(&sh.counters.restores, 1);
            sh.counters.evicted_units.fetch_sub(1, Ordering::Relaxed);
            add(&sh.counters.resident_units, 1);
        }
        Kind::Empty => {
            // Zeros, installed write-protected like a restored unit: its
            // empty slot is its current copy (it reads as zeros), so until
            // it is written it is dropped without compressing.
            sh.uffd.copy(start, zeros, sh.os_page, true)?;
            u.installed(false);
            u.stored = true;
            add(&sh.counters.zero_fills, 1);
            add(&sh.counters.resident_units, 1);
        }
        Kind::Resident => {
            if sh.uffd.zeropage(page, sh.os_page)? {
                // The program dropped this page: it reads as zeros now,
                // and the stored copy no longer matches.
                add(&sh.counters.dropped_by_program, 1);
                u.generation = u.generation.wrapping_add(1);
                if u.stored {
                    u.stored = false;
                    let _ = sh.store.discard(index, 1);
                }
            }
        }
    }
    drop(u);
    sh.wake_evictor();
    Ok(())
}

fn write_fault(sh: &Shared, index: usize, start: usize, page: usize) -> std::io::Result<()> {
    let mut u = sh.units[index].lock();
    if u.kind != Kind::Resident {
        // Evicted after the write trapped: the writer retries and faults
        // on the missing page.
        return sh.uffd.wake(page, sh.os_page);
    }
    u.generation = u.generation.wrapping_add(1);
    u.written();
    if u.stored {
        u.stored = false;
        let _ = sh.store.discard(index, 1);
    }
    sh.uffd.write_protect(start, sh.unit, false)
}
