//! Deliberate misuse: every wrong call gets its own error and leaves every
//! other object intact.

mod common;

use common::{Rng, pattern};
use zsmem::{Error, Handle, HandleFault, Pool, PoolConfig};

fn fault(r: zsmem::Result<impl std::fmt::Debug>) -> HandleFault {
    match r {
        Err(Error::InvalidHandle { fault, .. }) => fault,
        other => panic!("expected InvalidHandle, got {other:?}"),
    }
}

/// A pool with a few hundred objects whose contents we know.
fn populated() -> (Pool, Vec<(Handle, Vec<u8>)>) {
    let pool = Pool::new(PoolConfig::default()).unwrap();
    let mut r = Rng(7);
    let objs = (0..if cfg!(miri) { 40 } else { 300 })
        .map(|i| {
            let data = pattern(i, r.range(1, 4096));
            (pool.store(&data).unwrap(), data)
        })
        .collect();
    (pool, objs)
}

fn all_intact(pool: &Pool, objs: &[(Handle, Vec<u8>)]) {
    pool.check_invariants().unwrap();
    for (h, data) in objs {
        assert_eq!(&pool.read_vec(*h).unwrap(), data, "neighbour {h:?} damaged");
    }
}

#[test]
fn double_free_and_use_after_free_are_errors() {
    let (pool, mut objs) = populated();
    let (h, _) = objs.swap_remove(10);
    pool.free(h).unwrap();
    assert_eq!(fault(pool.free(h)), HandleFault::Freed);
    assert_eq!(fault(pool.read_vec(h)), HandleFault::Freed);
    assert_eq!(fault(pool.write(h, b"hello")), HandleFault::Freed);
    assert_eq!(fault(pool.object_len(h)), HandleFault::Freed);
    all_intact(&pool, &objs);
}

#[test]
fn stale_handle_never_reads_the_new_object() {
    let (pool, mut objs) = populated();
    let (old, old_data) = objs.swap_remove(0);
    pool.free(old).unwrap();
    // The same length lands in the same class and reuses the slot.
    let len = old_data.len();
    let data = pattern(999, len);
    let new = pool.store(&data).unwrap();
    objs.push((new, data));
    assert_eq!(fault(pool.read_vec(old)), HandleFault::Stale);
    assert_eq!(fault(pool.free(old)), HandleFault::Stale);
    all_intact(&pool, &objs);
}

/// The handle layout (docs/DESIGN.md), for forging handles:
/// `spare (1) | tag (8) | generation (14) | class (12) | slot (29)`.
const SLOT_BITS: u32 = 29;
const CLASS_SHIFT: u32 = SLOT_BITS;
const GEN_SHIFT: u32 = CLASS_SHIFT + 12;
const TAG_SHIFT: u32 = GEN_SHIFT + 14;

#[test]
fn forged_handles_are_refused() {
    let (pool, objs) = populated();
    let live: std::collections::HashSet<u64> = objs.iter().map(|(h, _)| h.to_raw()).collect();
    assert_eq!(fault(pool.read_vec(Handle::from_raw(0))), HandleFault::Null);
    let real = objs[0].0.to_raw();
    let tag = real & (0xff << TAG_SHIFT);
    // Class 4095 does not exist in a 4K pool (255 classes).
    let bad_class = tag | (1u64 << GEN_SHIFT) | (4095 << CLASS_SHIFT);
    assert_eq!(
        fault(pool.free(Handle::from_raw(bad_class))),
        HandleFault::UnknownClass
    );
    // Generation 0 with the pool's tag.
    assert_eq!(
        fault(pool.read_vec(Handle::from_raw(real & !(0x3fff << GEN_SHIFT)))),
        HandleFault::Null
    );
    // The spare bit set: refused with the tag, before anything else.
    assert_eq!(
        fault(pool.read_vec(Handle::from_raw(real | 1 << 63))),
        HandleFault::ForeignPool
    );
    // A real class, a slot far beyond anything handed out.
    let far_slot = (real & !((1 << SLOT_BITS) - 1)) | ((1 << SLOT_BITS) - 1);
    assert_eq!(
        fault(pool.free(Handle::from_raw(far_slot))),
        HandleFault::UnknownSlot
    );
    // A merged (non-physical) class index is refused too: class 1 (48 bytes)
    // is merged into a larger one with 4K pages and chain 8? Find one.
    let t = pool.size_classes();
    if let Some(merged) = t.classes().iter().find(|c| c.physical != c.index) {
        let raw = tag | (1u64 << GEN_SHIFT) | ((merged.index as u64) << CLASS_SHIFT);
        assert_eq!(
            fault(pool.read_vec(Handle::from_raw(raw))),
            HandleFault::UnknownClass
        );
    }
    // Random values: never a panic, never a live object's data. Half of
    // them carry the pool's tag, so they get past its check.
    let mut r = Rng(42);
    for i in 0..if cfg!(miri) { 300 } else { 100_000 } {
        let mut raw = r.next();
        if i % 2 == 0 {
            raw = raw & !(0x1ff << TAG_SHIFT) | tag;
        }
        if live.contains(&raw) {
            continue;
        }
        assert!(pool.read_vec(Handle::from_raw(raw)).is_err());
        assert!(pool.free(Handle::from_raw(raw)).is_err());
    }
    all_intact(&pool, &objs);
}

/// Alloc and free one slot `cycles` times, keeping the first handle: it is
/// refused every time, never reads or frees the new object.
fn reuse_one_slot(pool: &Pool, cycles: usize) {
    let first_data = pattern(1, 100);
    let first = pool.store(&first_data).unwrap();
    pool.free(first).unwrap();
    pool.flush();
    let slot = |h: Handle| h.to_raw() & ((1 << SLOT_BITS) - 1);
    let mut previous = first;
    let mut same_slot = 0;
    for i in 0..cycles {
        let data = [(i % 251) as u8; 100];
        let h = pool.store(&data).unwrap();
        assert_ne!(h, first, "cycle {i}: the first handle came back");
        same_slot += usize::from(slot(h) == slot(first));
        assert!(
            matches!(
                fault(pool.read_vec(first)),
                HandleFault::Stale | HandleFault::Freed
            ),
            "cycle {i}"
        );
        assert!(pool.write(first, b"overwrite").is_err(), "cycle {i}");
        assert!(pool.object_len(first).is_err(), "cycle {i}");
        assert!(pool.free(first).is_err(), "cycle {i}");
        assert!(pool.free(previous).is_err(), "cycle {i}");
        assert_eq!(pool.read_vec(h).unwrap(), data, "cycle {i}");
        pool.free(h).unwrap();
        pool.flush();
        previous = h;
    }
    // The slot was reused until its last generation (16383, the first
    // handle had 1), past where a generation used to repeat; then retired.
    assert_eq!(same_slot, cycles.min(16382));
    pool.check_invariants().unwrap();
}

/// Past the old limits: a generation used to repeat after 16383 reuses of
/// a slot (8191 when alone in its chunk, which skipped one at every
/// release). Now a slot is retired instead.
const REUSES: usize = if cfg!(miri) { 200 } else { 40_000 };

/// A neighbour keeps the slot's chunk of handles present.
#[test]
fn a_stale_handle_stays_refused_past_every_reuse() {
    let pool = Pool::new(PoolConfig::default()).unwrap();
    let neighbour = pool.store(&[0x5a; 100]).unwrap();
    reuse_one_slot(&pool, REUSES);
    assert_eq!(pool.read_vec(neighbour).unwrap(), [0x5a; 100]);
}

/// Alone, the slot's chunk of handles is released and made again at every
/// cycle.
#[test]
fn a_stale_handle_alone_in_its_chunk_stays_refused() {
    let pool = Pool::new(PoolConfig::default()).unwrap();
    reuse_one_slot(&pool, REUSES);
    // Deferred free (flushed at every cycle): the lock-free mark refuses it
    // too; chunks are never released in this mode.
    let pool = Pool::new(PoolConfig {
        free_mode: zsmem::FreeMode::deferred(),
        ..PoolConfig::default()
    })
    .unwrap();
    reuse_one_slot(&pool, REUSES / 4);
}

#[test]
fn a_handle_of_another_pool_is_refused() {
    for free_mode in [zsmem::FreeMode::ClassLock, zsmem::FreeMode::deferred()] {
        let cfg = PoolConfig {
            free_mode,
            ..PoolConfig::default()
        };
        let (a, b) = (Pool::new(cfg.clone()).unwrap(), Pool::new(cfg).unwrap());
        // The same sizes in the same order: the same class, slot and
        // generation in both pools.
        let objs_a: Vec<(Handle, Vec<u8>)> = (0..20)
            .map(|i| {
                let d = pattern(i, 300 + i as usize);
                (a.store(&d).unwrap(), d)
            })
            .collect();
        let objs_b: Vec<(Handle, Vec<u8>)> = (0..20)
            .map(|i| {
                let d = pattern(100 + i, 300 + i as usize);
                (b.store(&d).unwrap(), d)
            })
            .collect();
        for ((ha, _), (hb, _)) in objs_a.iter().zip(&objs_b) {
            assert_ne!(ha, hb);
            let mut buf = [0u8; 4096];
            assert_eq!(fault(b.read(*ha, &mut buf)), HandleFault::ForeignPool);
            assert_eq!(fault(b.read_vec(*ha)), HandleFault::ForeignPool);
            assert_eq!(fault(b.write(*ha, b"x")), HandleFault::ForeignPool);
            assert_eq!(fault(b.write_at(*ha, 1, b"x")), HandleFault::ForeignPool);
            assert_eq!(fault(b.object_len(*ha)), HandleFault::ForeignPool);
            assert_eq!(
                fault(b.with_object(*ha, |o| o.len())),
                HandleFault::ForeignPool
            );
            assert_eq!(fault(b.free(*ha)), HandleFault::ForeignPool);
            let msg = b.free(*ha).unwrap_err().to_string();
            assert!(msg.contains("another pool"), "{msg}");
        }
        b.flush();
        all_intact(&b, &objs_b);
        all_intact(&a, &objs_a);
        // A handle of a dropped pool is refused by the pools after it.
        let (h, _) = objs_a[0];
        drop(a);
        let c = Pool::new(PoolConfig::default()).unwrap();
        c.store(&[1; 300]).unwrap();
        assert_eq!(fault(c.read_vec(h)), HandleFault::ForeignPool);
    }
}

#[test]
fn wrong_lengths_are_errors() {
    let (pool, objs) = populated();
    assert_eq!(pool.alloc(0), Err(Error::ZeroLength));
    assert_eq!(pool.store(&[]), Err(Error::ZeroLength));
    assert_eq!(
        pool.alloc(4097),
        Err(Error::TooLarge {
            len: 4097,
            max: 4096
        })
    );
    let (h, data) = &objs[3];
    let len = data.len();
    let too_long = vec![0xEE; len + 1];
    assert!(matches!(
        pool.write(*h, &too_long),
        Err(Error::WriteTooLong { .. })
    ));
    assert!(matches!(
        pool.write_at(*h, len, b"x"),
        Err(Error::WriteTooLong { .. })
    ));
    assert!(matches!(
        pool.write_at(*h, usize::MAX, b"x"),
        Err(Error::WriteTooLong { .. })
    ));
    let mut small = vec![0u8; len - 1];
    assert_eq!(
        pool.read(*h, &mut small),
        Err(Error::BufferTooSmall {
            len: len - 1,
            object_len: len
        })
    );
    // Writing exactly to the end is fine and touches only this object.
    pool.write_at(*h, len - 1, &[data[len - 1]]).unwrap();
    all_intact(&pool, &objs);
}

#[test]
fn memory_limit_refuses_and_loses_nothing() {
    let pool = Pool::new(PoolConfig {
        memory_limit: Some(16 * 4096),
        ..PoolConfig::default()
    })
    .unwrap();
    let mut objs = Vec::new();
    let err = loop {
        let data = pattern(objs.len() as u64, 3000);
        match pool.store(&data) {
            Ok(h) => objs.push((h, data)),
            Err(e) => break e,
        }
    };
    assert!(
        matches!(err, Error::MemoryLimit { limit: 65536, .. }),
        "{err}"
    );
    assert!(pool.stats().pages_held <= 16);
    all_intact(&pool, &objs);
    // Freeing makes room again.
    for (h, _) in objs.drain(..8) {
        pool.free(h).unwrap();
    }
    objs.push((pool.store(&[1; 3000]).unwrap(), vec![1; 3000]));
    all_intact(&pool, &objs);
}

#[test]
fn bad_configs_are_errors() {
    for cfg in [
        PoolConfig {
            page_size: 3000,
            ..PoolConfig::default()
        },
        PoolConfig {
            chain_size: 0,
            ..PoolConfig::default()
        },
        PoolConfig {
            chain_size: zsmem::size_class::MAX_CHAIN_SIZE + 1,
            ..PoolConfig::default()
        },
        PoolConfig {
            class_delta: 20,
            ..PoolConfig::default()
        },
        PoolConfig {
            memory_limit: Some(0),
            ..PoolConfig::default()
        },
        // Overflowed the returner's clock: its thread, every pool's,
        // panicked at the first free, and no pool returned pages after.
        PoolConfig {
            page_return: zsmem::PageReturn::Delayed {
                delay: std::time::Duration::MAX,
                max_pages: 16,
            },
            ..PoolConfig::default()
        },
        PoolConfig {
            page_return: zsmem::PageReturn::Delayed {
                delay: zsmem::MAX_RETURN_DELAY + std::time::Duration::from_nanos(1),
                max_pages: 16,
            },
            ..PoolConfig::default()
        },
    ] {
        assert!(matches!(Pool::new(cfg), Err(Error::InvalidConfig(_))));
    }
    let longest = Pool::new(PoolConfig {
        page_return: zsmem::PageReturn::Delayed {
            delay: zsmem::MAX_RETURN_DELAY,
            max_pages: 16,
        },
        ..PoolConfig::default()
    })
    .unwrap();
    let h = longest.store(&[1u8; 3000]).unwrap();
    longest.free(h).unwrap();
    longest.trim();
    assert_eq!(longest.stats().cached_pages, 0);
}

#[test]
fn errors_have_actionable_messages() {
    let pool = Pool::new(PoolConfig::default()).unwrap();
    assert!(
        pool.alloc(5000)
            .unwrap_err()
            .to_string()
            .contains("maximum object size of 4096")
    );
    let h = pool.store(b"abc").unwrap();
    pool.free(h).unwrap();
    let msg = pool.free(h).unwrap_err().to_string();
    assert!(msg.contains("already freed"), "{msg}");
}

/// `placed_size` of a length past a page is a page's (near usize::MAX it
/// overflowed the rounding: a panic in a debug build, 0 in a release one).
#[test]
fn placed_size_of_any_length_is_at_most_a_pages() {
    for cfg in [
        PoolConfig::default(),
        PoolConfig::log(),
        PoolConfig::kernel(),
    ] {
        let pool = Pool::new(cfg).unwrap();
        let page = pool.placed_size(4096);
        for len in [4097, usize::MAX / 2, usize::MAX - 1, usize::MAX] {
            assert_eq!(pool.placed_size(len), page, "{len}");
        }
    }
}
