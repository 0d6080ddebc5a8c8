//! Bounded multi-threaded stress: threads alloc, write, read, free and
//! compact at random, every byte of every live object checked; one thread
//! frees objects other threads made (cross-thread frees). At the end, after
//! freeing everything, the pool holds no object and no page. Run for every
//! free mode.

mod common;

use std::sync::Mutex;

use common::{Rng, compressed_len, pattern};
use zsmem::{CompactionPolicy, Error, FreeMode, Handle, HandleFault, Pool, PoolConfig};

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
    let pool = Pool::new(PoolConfig {
        chain_size: 4,
        free_mode: mode,
        compaction: CompactionPolicy::Auto {
            min_freeable_pages: 1,
            max_moves: 8,
        },
        ..PoolConfig::default()
    })
    .unwrap();
    let page = pool.max_object_size();
    // Objects any thread may free: the hand-over pile.
    let shared: Mutex<Vec<Obj>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (pool, shared) = (&pool, &shared);
            s.spawn(move || {
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
            });
        }
    });
    let mut buf = vec![0u8; page];
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

#[test]
fn stress_pool_lock() {
    stress(FreeMode::PoolLock);
}
