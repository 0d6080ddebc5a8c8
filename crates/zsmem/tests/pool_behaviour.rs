//! The pool's observable behaviour: huge objects, class choice, fullness
//! groups, statistics, and concurrent use.

mod common;

use std::sync::Arc;

use common::{Rng, compressed_len, pattern};
use zsmem::{Pool, PoolConfig, stats::format_kernel_classes};

#[test]
fn huge_objects_take_a_page_each() {
    let pool = Pool::new(PoolConfig::kernel()).unwrap();
    assert_eq!(pool.huge_class_size(), 3625);
    let below = pool.store(&vec![1; 3624]).unwrap();
    assert_eq!(pool.stats().huge_objects, 0);
    let hs: Vec<_> = (0..5)
        .map(|_| pool.store(&vec![2; 3625]).unwrap())
        .collect();
    let s = pool.stats();
    assert_eq!(s.huge_objects, 5);
    // 3624 + 8 = 3632 is the largest non-huge class; it chains pages.
    let c3632 = pool.size_classes().physical_for(3632);
    assert_eq!(s.pages_held, 5 + c3632.pages_per_zspage);
    for h in hs {
        pool.free(h).unwrap();
    }
    pool.free(below).unwrap();
    assert_eq!(pool.stats().pages_held, 0);
    // Without the kernel's header, 3632-byte objects are not huge.
    let native = Pool::new(PoolConfig {
        kernel_handle_header: false,
        ..PoolConfig::kernel()
    })
    .unwrap();
    assert_eq!(native.huge_class_size(), 3633);
    // Longer chains keep larger objects out of the one-per-page class.
    let long = Pool::new(PoolConfig::default()).unwrap();
    assert_eq!(long.huge_class_size(), 4081);
}

#[test]
fn fullest_zspage_is_filled_first_and_stats_match_the_kernel_formula() {
    let pool = Pool::new(PoolConfig {
        compaction: zsmem::CompactionPolicy::Off,
        // Every object in its own class (no adaptive spacing).
        class_grid: 1,
        // Every free frees its slot (a parked slot counts as used in its
        // zspage's fullness group).
        parked_slots: 0,
        ..PoolConfig::default()
    })
    .unwrap();
    // 1000-byte objects: class 1008.
    let c = *pool.size_classes().physical_for(1000);
    let per = c.objs_per_zspage;
    let hs: Vec<_> = (0..per * 3)
        .map(|i| pool.store(&pattern(i as u64, 1000)).unwrap())
        .collect();
    // Empty most of the first zspage and a little of the second.
    for h in &hs[..per - 1] {
        pool.free(*h).unwrap();
    }
    pool.free(hs[per]).unwrap();
    let cs = pool
        .class_stats()
        .into_iter()
        .find(|s| s.size == c.size)
        .unwrap();
    assert_eq!(cs.obj_allocated, 3 * per);
    assert_eq!(cs.obj_used, 2 * per);
    assert_eq!(cs.pages_used, 3 * c.pages_per_zspage);
    assert_eq!(cs.freeable, (per / per) * c.pages_per_zspage);
    assert_eq!(cs.fullness[10], 1, "one full zspage");
    // A new object goes to the 99% zspage, not the nearly empty one.
    let n = pool.store(&[9; 1000]).unwrap();
    let cs = pool
        .class_stats()
        .into_iter()
        .find(|s| s.size == c.size)
        .unwrap();
    assert_eq!(cs.fullness[10], 2);
    assert_eq!(cs.pages_used, 3 * c.pages_per_zspage);
    pool.free(n).unwrap();
    let table = format_kernel_classes(&pool.class_stats());
    assert!(table.contains("obj_allocated") && table.contains("Total"));
    pool.check_invariants().unwrap();
}

#[test]
fn pages_are_accounted_exactly() {
    let pool = Pool::new(PoolConfig::kernel()).unwrap();
    let mut r = Rng(3);
    let mut hs = Vec::new();
    // Under Miri, 40 (142 s with 100): every freed zspage is zeroed word
    // by word there.
    for i in 0..if cfg!(miri) { 40 } else { 20_000u64 } {
        hs.push(
            pool.store(&pattern(i, compressed_len(&mut r, 4096)))
                .unwrap(),
        );
    }
    let s = pool.stats();
    let from_classes: usize = pool.class_stats().iter().map(|c| c.pages_used).sum();
    assert_eq!(s.pages_held, from_classes);
    assert_eq!(s.max_pages_held, s.pages_held);
    assert!(s.metadata_bytes > 0);
    for h in hs {
        pool.free(h).unwrap();
    }
    let s = pool.stats();
    assert_eq!((s.pages_held, s.objects, s.bytes_stored), (0, 0, 0));
}

/// Threads store, read, write and free at random, handing some objects to
/// each other to free; every byte is checked; at the end the pool is empty
/// and holds no pages.
#[test]
fn threads_share_a_pool_and_every_byte_survives() {
    let pool = Arc::new(
        Pool::new(PoolConfig {
            chain_size: 4,
            ..PoolConfig::kernel()
        })
        .unwrap(),
    );
    let threads = 4;
    let (tx, rx) = std::sync::mpsc::channel::<(zsmem::Handle, u64, usize)>();
    let rx = Arc::new(std::sync::Mutex::new(rx));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let pool = Arc::clone(&pool);
            let tx = tx.clone();
            let rx = Arc::clone(&rx);
            std::thread::spawn(move || {
                let mut r = Rng(t as u64 * 1000 + 1);
                let mut mine: Vec<(zsmem::Handle, u64, usize)> = Vec::new();
                let ops = if cfg!(miri) { 30 } else { 40_000 };
                for _ in 0..ops {
                    match r.range(0, 9) {
                        0..=3 => {
                            let seed = r.next();
                            let len = compressed_len(&mut r, 4096);
                            mine.push((pool.store(&pattern(seed, len)).unwrap(), seed, len));
                        }
                        4..=5 if !mine.is_empty() => {
                            let (h, seed, len) = mine[r.range(0, mine.len() - 1)];
                            assert_eq!(pool.read_vec(h).unwrap(), pattern(seed, len));
                        }
                        6 if !mine.is_empty() => {
                            let i = r.range(0, mine.len() - 1);
                            let (h, _, len) = mine[i];
                            let seed = r.next();
                            pool.write(h, &pattern(seed, len)).unwrap();
                            mine[i].1 = seed;
                        }
                        7 if !mine.is_empty() => {
                            // Hand one to another thread.
                            let i = r.range(0, mine.len() - 1);
                            tx.send(mine.swap_remove(i)).unwrap();
                        }
                        _ => {
                            let theirs = rx.lock().unwrap().try_recv().ok();
                            let victim = theirs.or_else(|| {
                                (!mine.is_empty())
                                    .then(|| mine.swap_remove(r.range(0, mine.len() - 1)))
                            });
                            if let Some((h, seed, len)) = victim {
                                assert_eq!(pool.read_vec(h).unwrap(), pattern(seed, len));
                                pool.free(h).unwrap();
                            }
                        }
                    }
                }
                mine
            })
        })
        .collect();
    drop(tx);
    let mut left: Vec<_> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    left.extend(rx.lock().unwrap().try_iter());
    pool.check_invariants().unwrap();
    assert_eq!(pool.stats().objects, left.len());
    for (h, seed, len) in left {
        assert_eq!(pool.read_vec(h).unwrap(), pattern(seed, len));
        pool.free(h).unwrap();
    }
    let s = pool.stats();
    assert_eq!((s.objects, s.pages_held), (0, 0));
    pool.check_invariants().unwrap();
}

/// Class shards: threads allocate in shards of their own (objects of one
/// size land in different zspages and handle tables), frees and reads cross
/// shards, the statistics sum the shards, and a pool one thread uses makes
/// one shard's cells only.
#[test]
fn threads_allocate_in_their_own_class_shards() {
    let cfg = PoolConfig {
        class_shards: 4,
        ..PoolConfig::default()
    };
    let pool = Pool::new(cfg.clone()).unwrap();
    assert_eq!(pool.class_shards(), 4);
    let empty_metadata = pool.stats().metadata_bytes;
    // Objects per thread (fewer under Miri, which interprets every byte).
    let each = if cfg!(miri) { 12 } else { 200 };
    let handles: Vec<Vec<zsmem::Handle>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..4u8)
            .map(|t| {
                let pool = &pool;
                s.spawn(move || {
                    (0..each)
                        .map(|_| pool.store(&[t; 1000]).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    // Four threads, four different round-robin numbers (tests running
    // beside this one may take numbers in between): at least two shards,
    // so at least two class fields for the same object size.
    let mut classes: Vec<usize> = handles
        .iter()
        .map(|hs| {
            let raw = hs[0].to_raw();
            ((raw >> 29) & 0xFFF) as usize
        })
        .collect();
    classes.sort_unstable();
    classes.dedup();
    assert!(
        classes.len() >= 2,
        "threads spread over shards: {classes:?}"
    );
    for (t, hs) in handles.iter().enumerate() {
        for &h in hs {
            assert_eq!(pool.read_vec(h).unwrap(), vec![t as u8; 1000]);
        }
    }
    pool.check_invariants().unwrap();
    let s = pool.stats();
    assert_eq!((s.objects, s.bytes_stored), (4 * each, 4 * each * 1000));
    assert!(
        s.metadata_bytes > empty_metadata + 3 * 128 * 100,
        "three more shards' cells are counted once made"
    );
    let cs = pool.class_stats();
    assert_eq!(cs.iter().map(|c| c.obj_used).sum::<usize>(), 4 * each);
    assert_eq!(
        cs.iter().map(|c| c.pages_used).sum::<usize>(),
        s.pages_held,
        "the class table sums the shards"
    );
    // Freed from one thread, across all four shards.
    for h in handles.into_iter().flatten() {
        pool.free(h).unwrap();
        assert!(pool.free(h).is_err());
    }
    pool.trim();
    let s = pool.stats();
    assert_eq!((s.objects, s.pages_held, s.cached_pages), (0, 0, 0));
    pool.check_invariants().unwrap();
    // One thread: one shard, and no other shard's cells, whatever the
    // thread's number (four threads in turn, consecutive numbers: at most
    // one of them falls on shard 0 by its number alone).
    for _ in 0..4 {
        let cfg = cfg.clone();
        std::thread::spawn(move || {
            let single = Pool::new(cfg).unwrap();
            let h = single.store(&[1; 1000]).unwrap();
            assert_eq!(
                single.stats().metadata_bytes,
                empty_metadata + pool_class_state(&single),
                "a single thread makes no other shard"
            );
            single.free(h).unwrap();
        })
        .join()
        .unwrap();
    }
}

/// Metadata of the one class state a pool with one object holds.
fn pool_class_state(pool: &Pool) -> usize {
    pool.class_stats().iter().map(|c| c.metadata_bytes).sum()
}

/// A handle forged to name a class of a shard the pool never made, or one
/// beyond its shards, is refused like any unknown slot.
#[test]
fn a_handle_naming_an_unused_shard_is_refused() {
    let pool = Pool::new(PoolConfig {
        class_shards: 2,
        ..PoolConfig::default()
    })
    .unwrap();
    let h = pool.store(&[7; 100]).unwrap();
    let raw = h.to_raw();
    let class = (raw >> 29) & 0xFFF;
    let classes = pool.size_classes().len() as u64;
    for other in [class ^ classes, class + 2 * classes, 0xFFF] {
        let forged = zsmem::Handle::from_raw(raw & !(0xFFF << 29) | other << 29);
        assert!(matches!(
            pool.read_vec(forged),
            Err(zsmem::Error::InvalidHandle { .. })
        ));
        assert!(pool.free(forged).is_err());
    }
    assert_eq!(pool.read_vec(h).unwrap(), vec![7; 100]);
    pool.free(h).unwrap();
    assert!(
        Pool::new(PoolConfig {
            class_shards: 17,
            ..PoolConfig::default()
        })
        .is_err()
    );
}

#[test]
fn pool_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Pool>();
}

/// Issue 16: with deferred free, a pool at its memory limit refused stores
/// while every object was already freed (pending in the shards) until a
/// manual flush; now the store drains what is pending and retries once.
#[test]
fn deferred_frees_are_drained_before_the_memory_limit_refuses() {
    let pool = Pool::new(PoolConfig {
        memory_limit: Some(64 << 10),
        free_mode: zsmem::FreeMode::deferred(),
        ..PoolConfig::default()
    })
    .unwrap();
    let obj = vec![7u8; 3000];
    let mut live = Vec::new();
    loop {
        match pool.store(&obj) {
            Ok(h) => live.push(h),
            Err(zsmem::Error::MemoryLimit { .. }) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(live.len() >= 10);
    for h in live.drain(..) {
        pool.free(h).unwrap();
    }
    assert!(pool.stats().pending_frees > 0, "the frees are pending");
    for _ in 0..10 {
        live.push(pool.store(&obj).unwrap());
        live.push(pool.alloc(3000).unwrap());
    }
    pool.check_invariants().unwrap();
}

/// The same through a page store over such a pool, overwriting at half its
/// limit: every overwrite frees the slot's old object (deferred) and stores
/// anew.
#[test]
#[cfg_attr(miri, ignore = "calls liblz4 through FFI")]
fn a_page_store_over_a_deferred_pool_is_not_refused_at_half_its_limit() {
    let store = zsmem::PageStore::new(zsmem::PageStoreConfig {
        slots: 16,
        pool: PoolConfig {
            memory_limit: Some(64 << 10),
            free_mode: zsmem::FreeMode::deferred(),
            ..PoolConfig::default()
        },
        ..Default::default()
    })
    .unwrap();
    let mut refused = 0;
    for round in 0..10u8 {
        for slot in 0..8 {
            let page: Vec<u8> = (0..4096u32)
                .map(|i| (i.wrapping_mul(2654435761) >> (round % 7 + 3)) as u8)
                .collect();
            if store.write(slot, &page).is_err() {
                refused += 1;
            }
        }
    }
    assert_eq!(refused, 0, "overwrites refused at half the limit");
}

/// A log lane fed a stream of stores gets its next segments faulted in
/// ahead by the returner: they are counted as cached pages, within the
/// bound, and nothing is left once everything is freed.
#[test]
#[cfg(not(miri))]
fn a_log_lanes_next_segments_are_faulted_in_ahead_and_counted() {
    use std::time::{Duration, Instant};
    let pool = Pool::new(PoolConfig {
        // An hour's delay: runs faulted in ahead wait until taken or trimmed.
        page_return: zsmem::PageReturn::Delayed {
            delay: Duration::from_secs(3600),
            max_pages: 1024,
        },
        ..PoolConfig::log()
    })
    .unwrap();
    let mut live = Vec::new();
    let store_mib = |live: &mut Vec<_>| {
        for _ in 0..1024 {
            let data = pattern(live.len() as u64, 1024);
            live.push((pool.store(&data).unwrap(), data));
        }
    };
    // A stream of 1 MiB asks for a refill; the returner answers it (at
    // idle priority: poll with a generous limit).
    store_mib(&mut live);
    let end = Instant::now() + Duration::from_secs(60);
    while pool.stats().cached_pages == 0 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(2));
    }
    let ahead = pool.stats().cached_pages;
    assert!(ahead > 0, "no pages were faulted in ahead within a minute");
    // At most `prefault_bytes` for the one lane used (and half of
    // `max_pages`).
    assert!(ahead <= 256, "{ahead} pages ahead");
    // More stores take them (os::tests checks that they come first; here
    // the returner may fault more in meanwhile), every byte kept.
    store_mib(&mut live);
    pool.check_invariants().unwrap();
    for (h, data) in live {
        assert_eq!(pool.read_vec(h).unwrap(), data);
        pool.free(h).unwrap();
    }
    pool.trim();
    let s = pool.stats();
    assert_eq!((s.objects, s.pages_held, s.cached_pages), (0, 0, 0));
    pool.check_invariants().unwrap();
}
