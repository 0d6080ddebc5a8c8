//! Unit tests of the store's basic paths; zram semantics at large are in
//! `tests/store.rs`.

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
        ..Default::default()
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
    // The slot named is the range's last, or its first when it is empty.
    assert!(matches!(
        s.discard(60, 5),
        Err(Error::SlotOutOfRange { index: 64, .. })
    ));
    assert!(matches!(
        s.discard(70, 0),
        Err(Error::SlotOutOfRange { index: 70, .. })
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

/// A log-placed store of two lanes, and a thread (other than the caller)
/// whose stores go to the lane the caller's do not.
fn two_lanes(slots: usize) -> PageStore {
    PageStore::new(PageStoreConfig {
        slots,
        pool: PoolConfig {
            placement: crate::Placement::Log { lanes: 2 },
            ..PoolConfig::log()
        },
        ..Default::default()
    })
    .unwrap()
}

/// Run `f` on a new thread whose lane is not `lane` (threads get lanes in
/// the order of their first store, so a few tries at most).
fn on_the_other_lane(s: &PageStore, lane: usize, f: impl Fn() + Sync) {
    for _ in 0..64 {
        let ran = std::thread::scope(|t| {
            t.spawn(|| {
                if s.pool().my_lane() == lane {
                    return false;
                }
                f();
                true
            })
            .join()
            .unwrap()
        });
        if ran {
            return;
        }
    }
    panic!("no thread of the other lane in 64 tries");
}

/// A store refused at the memory limit applies the frees queued for other
/// lanes and tries again: pages another lane's thread freed while that
/// lane was locked are not held against the limit.
#[test]
#[cfg_attr(miri, ignore = "calls liblz4/libzstd through FFI")]
fn a_store_at_the_memory_limit_applies_the_frees_queued_for_other_lanes() {
    let n = 48;
    let s = PageStore::new(PageStoreConfig {
        slots: 2 * n,
        pool: PoolConfig {
            placement: crate::Placement::Log { lanes: 2 },
            memory_limit: Some(n * 4096 + (64 << 10)),
            page_return: crate::PageReturn::Immediate,
            ..PoolConfig::log()
        },
        ..Default::default()
    })
    .unwrap();
    // Incompressible pages, a page each: this thread's lane fills the limit.
    let mut i = 0;
    while i < 2 * n && s.write(i, &noise(i as u32)).is_ok() {
        i += 1;
    }
    assert!((n / 2..2 * n).contains(&i), "{i} pages under the limit");
    let full = i;
    let lane = s.pool().my_lane();
    let (held, queue) = s.pool().hold_lane(lane);
    // Queued: the freeing thread's lane is the other one.
    on_the_other_lane(&s, lane, || s.discard(0, full / 2).unwrap());
    assert_eq!(queue.queued(), full / 2);
    drop(held);
    // A store to the other lane: refused at the limit, which the queued
    // objects hold until it applies them, then made.
    on_the_other_lane(&s, lane, || s.write(full, &noise(9999)).unwrap());
    assert_eq!(queue.queued(), 0);
    s.pool().check_invariants().unwrap();
    let mut out = vec![0u8; 4096];
    s.read(full, &mut out).unwrap();
    assert_eq!(out, noise(9999));
}

/// With `lane`'s lock held, run `free` on a thread of the other lane until
/// it returns or `enough` says so of the lane's queue (or ten seconds pass:
/// a free that waits for the lock must not hang the test); then let the
/// lock go and wait for `free`. Whether `free` returned with the lock held.
fn free_while_held(
    s: &PageStore,
    lane: usize,
    free: impl Fn() + Sync,
    enough: impl Fn(&crate::remote::RemoteFrees) -> bool,
) -> bool {
    let (held, queue) = s.pool().hold_lane(lane);
    std::thread::scope(|t| {
        let freer = t.spawn(|| on_the_other_lane(s, lane, &free));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !freer.is_finished() && !enough(queue) && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        let returned = freer.is_finished();
        drop(held);
        freer.join().unwrap();
        returned
    })
}

/// [`two_lanes`] with `pages` slots written by this thread: the store, the
/// objects it holds, and the lane they are in.
fn filled_lane(pages: usize) -> (PageStore, usize, usize) {
    let s = two_lanes(pages + 8);
    for i in 0..pages {
        s.write(i, &text(i as u8)).unwrap();
    }
    let (objects, lane) = (s.pool().stats().objects, s.pool().my_lane());
    (s, objects, lane)
}

/// Frees of objects of a locked lane by another lane's thread are queued,
/// not waited for (up to `MAX_QUEUED`); the lane's next writer, or any
/// figure, applies them, and every figure is then exact.
#[test]
#[cfg_attr(miri, ignore = "calls liblz4/libzstd through FFI")]
fn frees_into_a_locked_lane_are_queued_and_applied_by_its_next_writer() {
    let n = crate::remote::MAX_QUEUED;
    let (s, objects, lane) = filled_lane(2 * n);
    // The lane is locked: each discard queues its free and returns.
    assert!(
        free_while_held(&s, lane, || s.discard(0, n).unwrap(), |_| false),
        "a free waited for the locked lane"
    );
    assert_eq!(s.pool().hold_lane(lane).1.queued(), n);
    // The next store to the lane applies them (the caller's lane).
    s.write(2 * n, &text(7)).unwrap();
    assert_eq!(s.pool().hold_lane(lane).1.queued(), 0);
    assert_eq!(s.pool().stats().objects, objects - n + 1);
    s.pool().check_invariants().unwrap();
    let mut out = vec![0u8; 4096];
    for i in n..2 * n {
        s.read(i, &mut out).unwrap();
        assert_eq!(out, text(i as u8), "slot {i}");
    }
    for i in 0..n {
        assert!(s.read(i, &mut out).is_ok_and(|_| out == [0u8; 4096]));
    }
}

/// Past `MAX_QUEUED` queued frees, the free that finds the queue full waits
/// for the lane's lock and applies them all.
#[test]
#[cfg_attr(miri, ignore = "calls liblz4/libzstd through FFI")]
fn a_full_queue_of_frees_is_applied_by_the_free_that_fills_it() {
    let n = crate::remote::MAX_QUEUED;
    let (s, objects, lane) = filled_lane(2 * n);
    // One more free than the queue holds: the last one waits for the lock,
    // let go once the queue is full.
    let more = || s.discard(0, n + 1).unwrap();
    assert!(
        !free_while_held(&s, lane, more, |q| q.queued() > n),
        "the free past a full queue did not wait"
    );
    assert_eq!(s.pool().hold_lane(lane).1.queued(), 0);
    assert_eq!(s.pool().stats().objects, objects - n - 1);
    s.pool().check_invariants().unwrap();
}
