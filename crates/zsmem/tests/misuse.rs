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

#[test]
fn forged_handles_are_refused() {
    let (pool, objs) = populated();
    let live: std::collections::HashSet<u64> = objs.iter().map(|(h, _)| h.to_raw()).collect();
    assert_eq!(fault(pool.read_vec(Handle::from_raw(0))), HandleFault::Null);
    // Class 4095 does not exist in a 4K pool (255 classes).
    let bad_class = (1u64 << 42) | (4095 << 30);
    assert_eq!(
        fault(pool.free(Handle::from_raw(bad_class))),
        HandleFault::UnknownClass
    );
    // A real class, a slot far beyond anything handed out.
    let real = objs[0].0.to_raw();
    let far_slot = (real & !((1 << 30) - 1)) | ((1 << 30) - 1);
    assert_eq!(
        fault(pool.free(Handle::from_raw(far_slot))),
        HandleFault::UnknownSlot
    );
    // A merged (non-physical) class index is refused too: class 1 (48 bytes)
    // is merged into a larger one with 4K pages and chain 8? Find one.
    let t = pool.size_classes();
    if let Some(merged) = t.classes().iter().find(|c| c.physical != c.index) {
        let raw = (1u64 << 42) | ((merged.index as u64) << 30);
        assert_eq!(
            fault(pool.read_vec(Handle::from_raw(raw))),
            HandleFault::UnknownClass
        );
    }
    // Random values: never a panic, never a live object's data.
    let mut r = Rng(42);
    for _ in 0..if cfg!(miri) { 300 } else { 100_000 } {
        let raw = r.next();
        if live.contains(&raw) {
            continue;
        }
        assert!(pool.read_vec(Handle::from_raw(raw)).is_err());
        assert!(pool.free(Handle::from_raw(raw)).is_err());
    }
    all_intact(&pool, &objs);
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
    ] {
        assert!(matches!(Pool::new(cfg), Err(Error::InvalidConfig(_))));
    }
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
