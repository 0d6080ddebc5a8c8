//! Random sequences of pool operations, including misuse (stale, forged and
//! double-freed handles, wrong lengths), checked against a model: every read
//! must return exactly what was written, every misuse must be an error, and
//! the pool's invariants must hold after every step.
//!
//! Run: `cd fuzz && cargo +nightly fuzz run api_sequence -- -max_total_time=60`

#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;

mod common;
use common::Bytes;
use zsmem::{
    ChainRule, CompactionPolicy, FreeMode, Handle, PageReturn, Placement, Pool, PoolConfig,
};

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let cfg = PoolConfig {
        page_size: [4096, 16384, 65536][usize::from(b.u8() % 3)],
        chain_size: usize::from(b.u8() % 32) + 1,
        class_delta: 8 * (usize::from(b.u8() % 8) + 1),
        chain_rule: [
            ChainRule::MinWaste,
            ChainRule::UsedPercent,
            ChainRule::SpanAware,
            ChainRule::Trim,
        ][usize::from(b.u8() % 4)],
        kernel_handle_header: b.u8() & 1 == 1,
        memory_limit: match b.u8() % 4 {
            0 => Some(usize::from(b.u16()) * 4096 + 4096),
            _ => None,
        },
        compaction: match b.u8() % 3 {
            0 => CompactionPolicy::Off,
            n => CompactionPolicy::Auto {
                min_freeable_pages: usize::from(n),
                max_moves: usize::from(b.u8() % 64) + 1,
            },
        },
        free_mode: match b.u8() % 3 {
            0 => FreeMode::ClassLock,
            1 => FreeMode::PoolLock,
            _ => FreeMode::Deferred {
                max_pending_bytes: (usize::from(b.u8()) + 1) << 16,
            },
        },
        trim_pages: b.u8() & 1 == 1,
        class_grid: usize::from(b.u8() % 9),
        page_return: match b.u8() % 3 {
            0 => PageReturn::Immediate,
            n => PageReturn::Delayed {
                delay: std::time::Duration::from_micros(u64::from(n) * 500),
                max_pages: usize::from(b.u8()) + 1,
            },
        },
        // Pages faulted in ahead of new segments: none, two segments at
        // 4 KiB pages (none at 16 KiB and up), the default.
        prefault_bytes: match b.u8() % 3 {
            0 => 0,
            1 => 256 << 10,
            _ => zsmem::DEFAULT_PREFAULT_BYTES,
        },
        // Log placement (refused without trim_pages or with the kernel's
        // header: those are Pool::new's errors to check too).
        placement: match b.u8() % 3 {
            0 => Placement::Log {
                lanes: usize::from(b.u8() % 4),
            },
            _ => Placement::Classes,
        },
        // 0 and 17 are refused.
        class_shards: usize::from(b.u8() % 18),
        // Parked slots: none, one, the default, and past the maximum
        // (refused).
        parked_slots: [
            0,
            1,
            zsmem::DEFAULT_PARKED_SLOTS,
            zsmem::MAX_PARKED_SLOTS + 1,
        ][usize::from(b.u8() % 4)],
    };
    let Ok(pool) = Pool::new(cfg) else { return };
    let page = pool.max_object_size();
    let mut live: HashMap<u64, Vec<u8>> = HashMap::new();
    let mut order: Vec<u64> = Vec::new();
    let mut dead: Vec<u64> = Vec::new();
    let mut steps = 0;
    while !b.0.is_empty() && steps < 2000 {
        steps += 1;
        let pick = |order: &Vec<u64>, i: u16| {
            (!order.is_empty()).then(|| order[usize::from(i) % order.len()])
        };
        match b.u8() % 9 {
            8 => {
                pool.compact();
            }
            0 | 1 => {
                let len = usize::from(b.u16()) % (page + 2);
                let fill = b.u8();
                let bytes = vec![fill; len];
                // Some stores from a thread of their own: a new thread
                // number, so another class shard (or lane).
                let stored = if b.u8() & 3 == 0 {
                    std::thread::scope(|s| s.spawn(|| pool.store(&bytes)).join().unwrap())
                } else {
                    pool.store(&bytes)
                };
                match stored {
                    Ok(h) => {
                        assert!(len >= 1 && len <= page);
                        live.insert(h.to_raw(), bytes);
                        order.push(h.to_raw());
                    }
                    Err(_) => {
                        assert!(len == 0 || len > page || pool.config().memory_limit.is_some())
                    }
                }
            }
            2 => {
                let i = b.u16();
                let off = usize::from(b.u16());
                let len = usize::from(b.u16() % 512);
                let fill = b.u8();
                if let Some(raw) = pick(&order, i) {
                    let obj = live.get_mut(&raw).unwrap();
                    let r = pool.write_at(Handle::from_raw(raw), off, &vec![fill; len]);
                    if off + len <= obj.len() {
                        r.unwrap();
                        obj[off..off + len].fill(fill);
                    } else {
                        assert!(r.is_err());
                    }
                }
            }
            3 | 4 => {
                if let Some(raw) = pick(&order, b.u16()) {
                    assert_eq!(&pool.read_vec(Handle::from_raw(raw)).unwrap(), &live[&raw]);
                }
            }
            5 => {
                if let Some(raw) = pick(&order, b.u16()) {
                    pool.free(Handle::from_raw(raw)).unwrap();
                    live.remove(&raw);
                    order.retain(|&x| x != raw);
                    dead.push(raw);
                }
            }
            6 => {
                if !dead.is_empty() {
                    let raw = dead[usize::from(b.u16()) % dead.len()];
                    assert!(pool.free(Handle::from_raw(raw)).is_err());
                    assert!(pool.read_vec(Handle::from_raw(raw)).is_err());
                }
            }
            _ => {
                let raw = b.u64();
                if !live.contains_key(&raw) {
                    assert!(pool.read_vec(Handle::from_raw(raw)).is_err());
                    assert!(pool.write(Handle::from_raw(raw), b"x").is_err());
                    assert!(pool.free(Handle::from_raw(raw)).is_err());
                }
            }
        }
        pool.check_invariants().unwrap();
    }
    for raw in order {
        pool.free(Handle::from_raw(raw)).unwrap();
    }
    pool.flush();
    assert_eq!(pool.stats().pages_held, 0);
});
