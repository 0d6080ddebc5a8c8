//! Bounded multi-threaded stress: threads alloc, write, read, free and
//! compact at random, every byte of every live object checked; one thread
//! frees objects other threads made (cross-thread frees), and a reader
//! thread keeps reading a set of objects that live throughout, while
//! compaction moves them and freed pages pass through the return queue
//! (a 1 ms delay and a 16-page bound, so it is busy). At the end, after
//! freeing everything, the pool holds no object and no page. Run for every
//! free mode.

mod common;

use std::sync::Mutex;

use common::{Rng, compressed_len, pattern};
use zsmem::{
    CompactionPolicy, Error, FreeMode, Handle, HandleFault, PageReturn, Placement, Pool, PoolConfig,
};

const THREADS: u64 = 4;

fn ops() -> usize {
    if cfg!(miri) { 40 } else { 60_000 }
}

/// One live object: its handle, the seed of its content, its length.
#[derive(Clone, Copy)]
struct Obj {
    h: Handle,
    seed: u64,
    len: usize,
}

fn check(pool: &Pool, o: &Obj, buf: &mut [u8]) {
    let n = pool.read(o.h, buf).expect("a live handle reads");
    assert_eq!(n, o.len);
    assert_eq!(
        &buf[..n],
        &pattern(o.seed, o.len)[..],
        "object bytes differ"
    );
}

fn stress(mode: FreeMode) {
    stress_with(mode, Placement::Classes);
}

fn stress_with(mode: FreeMode, placement: Placement) {
    let pool = Pool::new(PoolConfig {
        chain_size: 4,
        placement,
        free_mode: mode,
        compaction: CompactionPolicy::Auto {
            min_freeable_pages: 1,
            max_moves: 8,
        },
        page_return: PageReturn::Delayed {
            delay: std::time::Duration::from_millis(1),
            max_pages: 16,
        },
        // Four class shards whatever the core count: each thread allocates
        // in its own (up to four), and frees and reads cross them (the
        // hand-over pile, the pinned objects).
        class_shards: 4,
        ..PoolConfig::default()
    })
    .unwrap();
    let page = pool.max_object_size();
    // Objects the reader thread reads over and over, never freed until the
    // end: all in a few classes, so their readers share class locks with
    // the churn.
    let mut r = Rng(0xBEEF);
    let pinned: Vec<Obj> = (0..64)
        .map(|_| {
            let len = compressed_len(&mut r, page);
            let seed = r.next();
            let h = pool.store(&pattern(seed, len)).unwrap();
            Obj { h, seed, len }
        })
        .collect();
    let done = std::sync::atomic::AtomicBool::new(false);
    // Objects any thread may free: the hand-over pile.
    let shared: Mutex<Vec<Obj>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        let (pool_ref, pinned_ref, done_ref) = (&pool, &pinned, &done);
        s.spawn(move || {
            let mut buf = vec![0u8; page];
            let mut r = Rng(7);
            loop {
                let o = pinned_ref[r.range(0, pinned_ref.len() - 1)];
                check(pool_ref, &o, &mut buf);
                if cfg!(miri) || done_ref.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
            }
        });
        let mut workers = Vec::new();
        for t in 0..THREADS {
            let (pool, shared) = (&pool, &shared);
            workers.push(s.spawn(move || {
                let mut r = Rng(0xC0FFEE + t);
                let mut mine: Vec<Obj> = Vec::new();
                let mut buf = vec![0u8; page];
                for step in 0..ops() {
                    match r.range(0, 99) {
                        0..=34 => {
                            let len = compressed_len(&mut r, page);
                            let seed = r.next();
                            let h = pool.store(&pattern(seed, len)).unwrap();
                            mine.push(Obj { h, seed, len });
                        }
                        35..=59 if !mine.is_empty() => {
                            let o = mine[r.range(0, mine.len() - 1)];
                            check(pool, &o, &mut buf);
                        }
                        60..=69 if !mine.is_empty() => {
                            // Rewrite in place with new content.
                            let i = r.range(0, mine.len() - 1);
                            let seed = r.next();
                            pool.write(mine[i].h, &pattern(seed, mine[i].len)).unwrap();
                            mine[i].seed = seed;
                        }
                        70..=89 if !mine.is_empty() => {
                            let o = mine.swap_remove(r.range(0, mine.len() - 1));
                            check(pool, &o, &mut buf);
                            pool.free(o.h).unwrap();
                            // Dead at once, deferred or not (Stale once another
                            // thread reuses the slot).
                            assert!(matches!(
                                pool.read(o.h, &mut buf),
                                Err(Error::InvalidHandle {
                                    fault: HandleFault::Freed | HandleFault::Stale,
                                    ..
                                })
                            ));
                            assert!(pool.free(o.h).is_err(), "double free accepted");
                        }
                        90..=94 if !mine.is_empty() => {
                            // Hand one over to another thread to free.
                            let o = mine.swap_remove(r.range(0, mine.len() - 1));
                            shared.lock().unwrap().push(o);
                        }
                        95..=96 => {
                            let taken = shared.lock().unwrap().pop();
                            if let Some(o) = taken {
                                check(pool, &o, &mut buf);
                                pool.free(o.h).unwrap();
                            }
                        }
                        97 if t == 0 => {
                            pool.compact();
                        }
                        98 if step % 7 == 0 => {
                            pool.flush();
                            let _ = pool.stats();
                        }
                        _ => {}
                    }
                }
                // Every byte of what is left, then free it.
                for o in &mine {
                    check(pool, o, &mut buf);
                }
                for o in mine {
                    pool.free(o.h).unwrap();
                }
            }));
        }
        for w in workers {
            w.join().unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let mut buf = vec![0u8; page];
    for o in pinned {
        check(&pool, &o, &mut buf);
        pool.free(o.h).unwrap();
    }
    for o in shared.into_inner().unwrap() {
        check(&pool, &o, &mut buf);
        pool.free(o.h).unwrap();
    }
    pool.flush();
    pool.check_invariants().unwrap();
    pool.trim();
    let st = pool.stats();
    assert_eq!(
        (st.objects, st.pending_frees, st.pages_held, st.cached_pages),
        (0, 0, 0, 0)
    );
}

#[test]
fn stress_class_lock() {
    stress(FreeMode::ClassLock);
}

#[test]
fn stress_deferred() {
    // Small batches so shards fill, hand off and drain often.
    stress(FreeMode::Deferred {
        max_pending_bytes: 128 << 10,
    });
}

/// Log placement: the churning threads append to two lanes, frees cross
/// lanes, cleaning moves objects the reader is reading.
#[test]
fn stress_log_placement() {
    stress_with(FreeMode::ClassLock, Placement::Log { lanes: 2 });
}

#[test]
fn stress_log_placement_deferred() {
    stress_with(
        FreeMode::Deferred {
            max_pending_bytes: 128 << 10,
        },
        Placement::Log { lanes: 3 },
    );
}

#[test]
fn stress_pool_lock() {
    stress(FreeMode::PoolLock);
}

/// `Pool::flush` promises that every free that returned before it was
/// called is done when it returns. A thread stores and frees in a loop
/// (deferred, batches of 2) while another flushes and then counts the
/// objects: never more than stored less freed-before-the-flush. A pusher
/// that collected a batch held it while it freed, and a flush meanwhile
/// returned with a free that had returned still pending (21,026 times in
/// a review's 3-second run).
#[test]
fn a_flush_waits_for_every_free_that_returned_before_it() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    let shards = 2 * std::thread::available_parallelism().map_or(1, |n| n.get());
    let pool = Pool::new(PoolConfig {
        // Two places a shard (`batch` is max_pending_bytes / (2 shards
        // page)), so pushers collect all the time.
        free_mode: FreeMode::Deferred {
            max_pending_bytes: 2 * 2 * shards.clamp(2, 64) * 4096,
        },
        compaction: CompactionPolicy::Off,
        ..PoolConfig::default()
    })
    .unwrap();
    let (stored, freed, done) = (
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicBool::new(false),
    );
    let mut late = 0;
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..if cfg!(miri) { 50 } else { 100_000 } {
                // Counted before the store: `stored` is never behind.
                stored.fetch_add(1, SeqCst);
                let h = pool.store(&[1u8; 100]).unwrap();
                pool.free(h).unwrap();
                freed.fetch_add(1, SeqCst);
            }
            done.store(true, SeqCst);
        });
        while !done.load(SeqCst) {
            let f = freed.load(SeqCst);
            pool.flush();
            let objects = pool.stats().objects;
            if objects + f > stored.load(SeqCst) {
                late += 1;
            }
        }
    });
    assert_eq!(late, 0, "flushes that returned with earlier frees pending");
    pool.flush();
    assert_eq!(pool.stats().objects, 0);
    pool.check_invariants().unwrap();
}

/// Pending frees' bytes with log placement: a lane's object is counted at
/// its placed length (it was 0 whatever the objects held).
#[test]
fn pending_free_bytes_are_counted_in_every_placement() {
    for placement in [Placement::Classes, Placement::Log { lanes: 1 }] {
        let pool = Pool::new(PoolConfig {
            placement,
            free_mode: FreeMode::deferred(),
            compaction: CompactionPolicy::Off,
            ..PoolConfig::default()
        })
        .unwrap();
        let hs: Vec<_> = (0..10).map(|_| pool.store(&[3u8; 1000]).unwrap()).collect();
        for h in hs {
            pool.free(h).unwrap();
        }
        let s = pool.stats();
        assert_eq!(s.pending_frees, 10, "{placement:?}");
        assert!(
            (10 * 1000..=10 * 1100).contains(&s.pending_free_bytes),
            "{placement:?}: {} bytes pending",
            s.pending_free_bytes
        );
        pool.flush();
        assert_eq!(pool.stats().pending_free_bytes, 0);
    }
}

/// Magazines (the default configuration's frees, `magazine.rs`): threads
/// keep rings of objects across small and large classes and store, read
/// and free them (so their frees park slots and their stores revive
/// them, without the class lock), also freeing objects another thread
/// made, while another thread compacts all the time (taking parked slots
/// back and moving live objects under the magazines' feet) and a reader
/// reads the objects that live throughout. Every byte is checked, the
/// figures are exact after each round, and every page goes back at the
/// end.
#[test]
fn stress_magazines_with_a_compacting_thread() {
    let pool = Pool::new(PoolConfig {
        class_shards: 1,
        compaction: CompactionPolicy::Off,
        page_return: PageReturn::Delayed {
            delay: std::time::Duration::from_millis(1),
            max_pages: 16,
        },
        ..PoolConfig::default()
    })
    .unwrap();
    let mut r = Rng(0xACE);
    let fixed: Vec<Obj> = (0..64)
        .map(|i| {
            let len = r.range(1, 3000);
            Obj {
                h: pool.store(&pattern(i, len)).unwrap(),
                seed: i,
                len,
            }
        })
        .collect();
    // Objects a thread made for another to free.
    let handoff = Mutex::new(Vec::<Obj>::new());
    let done = std::sync::atomic::AtomicBool::new(false);
    let rounds = if cfg!(miri) { 1 } else { 4 };
    for round in 0..rounds {
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..3u64)
                .map(|t| {
                    let (pool, handoff) = (&pool, &handoff);
                    s.spawn(move || {
                        let mut r = Rng(round * 10 + t + 1);
                        let mut ring: Vec<Obj> = Vec::new();
                        let mut buf = vec![0u8; 4096];
                        for i in 0..ops() / 4 {
                            let len = match r.range(0, 3) {
                                0 => r.range(1, 64),
                                1 => r.range(100, 300),
                                2 => r.range(900, 1100),
                                _ => compressed_len(&mut r, 4096),
                            };
                            let seed = (round << 48) | (t << 40) | i as u64;
                            let h = if r.chance(50) {
                                pool.store(&pattern(seed, len)).unwrap()
                            } else {
                                let h = pool.alloc(len).unwrap();
                                pool.write(h, &pattern(seed, len)).unwrap();
                                h
                            };
                            ring.push(Obj { h, seed, len });
                            if ring.len() > 32 {
                                let o = ring.swap_remove(r.range(0, ring.len() - 1));
                                check(pool, &o, &mut buf);
                                if r.chance(10) {
                                    handoff.lock().unwrap().push(o);
                                } else {
                                    pool.free(o.h).unwrap();
                                    // Dead at once, whatever took the slot.
                                    match pool.read(o.h, &mut buf) {
                                        Err(Error::InvalidHandle {
                                            fault: HandleFault::Freed | HandleFault::Stale,
                                            ..
                                        }) => {}
                                        other => panic!("a freed handle read {other:?}"),
                                    }
                                }
                            }
                            if r.chance(5) {
                                let theirs = handoff.lock().unwrap().pop();
                                if let Some(o) = theirs {
                                    check(pool, &o, &mut buf);
                                    pool.free(o.h).unwrap();
                                }
                            }
                        }
                        ring
                    })
                })
                .collect();
            {
                let (pool, done) = (&pool, &done);
                s.spawn(move || {
                    while !done.load(std::sync::atomic::Ordering::Relaxed) {
                        pool.compact();
                        std::thread::yield_now();
                    }
                });
            }
            {
                let (pool, done, fixed) = (&pool, &done, &fixed);
                s.spawn(move || {
                    let mut buf = vec![0u8; 4096];
                    while !done.load(std::sync::atomic::Ordering::Relaxed) {
                        for o in fixed {
                            check(pool, o, &mut buf);
                        }
                    }
                });
            }
            let rings: Vec<Vec<Obj>> = workers.into_iter().map(|w| w.join().unwrap()).collect();
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            // The rings live on: check them and free them in the next
            // step, after the threads that parked slots are gone.
            let mut buf = vec![0u8; 4096];
            for o in rings.iter().flatten() {
                check(&pool, o, &mut buf);
            }
            handoff.lock().unwrap().extend(rings.into_iter().flatten());
        });
        done.store(false, std::sync::atomic::Ordering::Relaxed);
        pool.check_invariants().unwrap();
        let live = handoff.lock().unwrap();
        let s = pool.stats();
        assert_eq!(s.objects, fixed.len() + live.len());
        assert_eq!(
            s.bytes_stored,
            fixed
                .iter()
                .chain(live.iter())
                .map(|o| o.len)
                .sum::<usize>()
        );
        drop(live);
        let mut buf = vec![0u8; 4096];
        for o in handoff.lock().unwrap().drain(..) {
            check(&pool, &o, &mut buf);
            pool.free(o.h).unwrap();
        }
    }
    let mut buf = vec![0u8; 4096];
    for o in &fixed {
        check(&pool, o, &mut buf);
        pool.free(o.h).unwrap();
    }
    pool.flush();
    pool.trim();
    pool.check_invariants().unwrap();
    let s = pool.stats();
    assert_eq!((s.objects, s.bytes_stored, s.pages_held), (0, 0, 0));
}
