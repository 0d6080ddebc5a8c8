//! Tests that need the region's insides: stopping it with faults in flight.

use std::sync::atomic::{AtomicU64, Ordering};

use super::*;

/// Threads blocked on faults the fault thread does not serve (it is
/// paused) are released when the region stops: stopping never waits for
/// the program, and no thread hangs.
#[test]
fn stop_releases_threads_waiting_on_faults() {
    let mut r = Region::new(RegionConfig {
        size: 4 << 20,
        budget: 1 << 20,
        faults: FaultMode::Thread,
        ..Default::default()
    })
    .unwrap();
    let base = r.as_ptr() as usize;
    let n = r.len() / 4096;
    for u in 0..n {
        // SAFETY: inside the mapping; no other thread touches it yet.
        unsafe { *(r.as_ptr().add(u * 4096)) = 1 };
    }
    r.reclaim(0);
    r.shared().paused.store(true, Ordering::Release);
    let waiters: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let mut sum = 0;
                for u in (t..n).step_by(4).take(8) {
                    // SAFETY: the mapping stays until the region is dropped,
                    // after these threads are joined.
                    let w = unsafe { &*((base + u * 4096) as *const AtomicU64) };
                    sum += w.load(Ordering::Relaxed);
                }
                sum
            })
        })
        .collect();
    // Give them time to block (nothing is asserted on it).
    std::thread::sleep(std::time::Duration::from_millis(50));
    let stats = r.stats();
    r.stop();
    for w in waiters {
        // Released: each sees its unit's bytes or, once the descriptor is
        // closed, zeros.
        assert!(w.join().unwrap() <= 8);
    }
    // The stop ended no fault in error (units brought back before the
    // pause, while the machine was loaded, may be resident: not asserted).
    assert_eq!(stats.errors, 0, "{stats:?}");
    drop(r);
}
