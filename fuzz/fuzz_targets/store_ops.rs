//! Random sequences of PageStore operations (writes of text, half-random,
//! random and same-filled pages, reads, discards, idle marking on a manual
//! clock, recompression, writeback under a limit, compaction, malformed
//! requests) checked against a model: every read returns exactly what was
//! written last (or zeros), every malformed request is an error, and the
//! store's invariants hold after every step.
//!
//! Run: `cd fuzz && cargo +nightly fuzz run store_ops -- -max_total_time=120`

#![no_main]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;

mod common;
use common::Bytes;
use zsmem::store::ManualClock;
use zsmem::{
    Codec, CompactionPolicy, Error, PageStore, PageStoreConfig, PoolConfig, RecompressRequest,
    Selection, WritebackRequest,
};

const PAGE: usize = 4096;
const SLOTS: usize = 32;


fn page(kind: u8, seed: u16) -> Vec<u8> {
    let mut x = u64::from(seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    match kind % 5 {
        0 => {
            let words: [&[u8]; 6] = [
                b"static ", b"int ", b"zs_pool", b"->lock", b"();\n", b"0x1f",
            ];
            let mut p = Vec::with_capacity(PAGE + 8);
            while p.len() < PAGE {
                p.extend_from_slice(words[(next() % 6) as usize]);
            }
            p.truncate(PAGE);
            p
        }
        1 => {
            let mut p: Vec<u8> = (0..PAGE).map(|_| next() as u8).collect();
            p[PAGE / 2..].fill(seed as u8);
            p
        }
        2 => (0..PAGE).map(|_| next() as u8).collect(),
        3 => vec![seed as u8; PAGE],
        _ => {
            let w = next().to_ne_bytes();
            (0..PAGE).map(|i| w[i % 8]).collect()
        }
    }
}

fn selection(b: u8) -> Selection {
    [
        Selection::All,
        Selection::Idle,
        Selection::Huge,
        Selection::HugeIdle,
        Selection::Incompressible,
    ][usize::from(b % 5)]
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let clock = Arc::new(ManualClock::default());
    let path = std::env::temp_dir().join(format!("zsmem-fuzz-store-{}", std::process::id()));
    let cfg = PageStoreConfig {
        slots: SLOTS,
        codec: if b.u8() & 1 == 0 {
            Codec::Lz4
        } else {
            Codec::Zstd { level: 1 }
        },
        recompress: vec![
            Codec::Zstd { level: 3 }.into(),
            Codec::Zstd { level: 9 }.into(),
        ],
        backing_file: Some(path),
        pool: PoolConfig {
            kernel_handle_header: b.u8() & 1 == 1,
            memory_limit: match b.u8() % 3 {
                0 => Some((usize::from(b.u8() % 16) + 1) * PAGE),
                _ => None,
            },
            compaction: if b.u8() & 1 == 0 {
                CompactionPolicy::Off
            } else {
                CompactionPolicy::default()
            },
            ..PoolConfig::default()
        },
        track_access_time: b.u8() & 1 == 0,
        ..Default::default()
    };
    // Log placement: the slots are the objects' handles (not with the
    // kernel's header, which it refuses).
    let cfg = if !cfg.pool.kernel_handle_header && b.u8() & 1 == 1 {
        PageStoreConfig {
            pool: PoolConfig {
                placement: zsmem::Placement::Log { lanes: 2 },
                ..cfg.pool
            },
            ..cfg
        }
    } else {
        cfg
    };
    let s = PageStore::with_clock(cfg, clock.clone()).expect("valid configuration");
    let mut model: HashMap<usize, Vec<u8>> = HashMap::new();
    let mut out = vec![0u8; PAGE];
    let mut steps = 0;
    while !b.0.is_empty() && steps < 300 {
        steps += 1;
        match b.u8() % 12 {
            0..=3 => {
                let slot = usize::from(b.u8()) % SLOTS;
                let p = page(b.u8(), b.u16());
                match s.write(slot, &p) {
                    Ok(()) => {
                        model.insert(slot, p);
                    }
                    Err(Error::MemoryLimit { .. }) => assert!(s.mm_stat().mem_limit > 0),
                    Err(e) => panic!("write: {e}"),
                }
            }
            4 | 5 => {
                let slot = usize::from(b.u8()) % SLOTS;
                s.read(slot, &mut out).unwrap();
                match model.get(&slot) {
                    Some(p) => assert_eq!(&out, p, "slot {slot}"),
                    None => assert!(out.iter().all(|&x| x == 0), "slot {slot}"),
                }
            }
            6 => {
                let slot = usize::from(b.u8()) % (SLOTS + 4);
                let n = usize::from(b.u8() % 4);
                let r = s.discard(slot, n);
                if slot + n <= SLOTS {
                    r.unwrap();
                    for i in slot..slot + n {
                        model.remove(&i);
                    }
                } else {
                    assert!(matches!(r, Err(Error::SlotOutOfRange { .. })));
                }
            }
            7 => {
                match b.u8() % 3 {
                    0 => {
                        s.mark_idle(None).expect("marking all idle never fails");
                    }
                    1 => {
                        let r = s.mark_idle(Some(Duration::from_secs(u64::from(b.u8()))));
                        // By age only with access times; else an error.
                        assert_eq!(r.is_ok(), s.tracks_access_time(), "{r:?}");
                    }
                    _ => clock.advance(Duration::from_secs(u64::from(b.u8()))),
                };
            }
            8 => {
                let req = RecompressRequest {
                    which: selection(b.u8()),
                    threshold: (b.u8() & 1 == 1).then(|| usize::from(b.u16()) % (PAGE + 1)),
                    priority: match b.u8() % 4 {
                        0 => Some(1),
                        1 => Some(2),
                        _ => None,
                    },
                };
                s.recompress(req).unwrap();
            }
            9 => {
                if b.u8() % 4 == 0 {
                    s.set_writeback_limit(Some(u64::from(b.u8() % 8)));
                } else if b.u8() % 4 == 0 {
                    s.set_writeback_limit(None);
                }
                let req = WritebackRequest {
                    which: selection(b.u8()),
                    max_pages: (b.u8() & 1 == 1).then(|| u64::from(b.u8() % 8)),
                };
                s.writeback(req).unwrap();
            }
            10 => {
                s.compact();
            }
            _ => {
                // Malformed requests: errors that change nothing.
                let slot = SLOTS + usize::from(b.u8());
                assert!(s.write(slot, &out).is_err());
                assert!(s.read(slot, &mut out).is_err());
                assert!(
                    s.write(0, &out[..PAGE - 1 - usize::from(b.u8()) % 8])
                        .is_err()
                );
                assert!(s.read(0, &mut out[..8]).is_err());
            }
        }
        s.check_invariants().unwrap();
    }
    for slot in 0..SLOTS {
        s.read(slot, &mut out).unwrap();
        match model.get(&slot) {
            Some(p) => assert_eq!(&out, p, "slot {slot}"),
            None => assert!(out.iter().all(|&x| x == 0), "slot {slot}"),
        }
    }
    let m = s.mm_stat();
    assert_eq!(m.orig_data_size, (model.len() * PAGE) as u64);
    assert_eq!(s.io_stat().failed_reads, 0);
    s.discard(0, SLOTS).unwrap();
    assert_eq!(s.mm_stat().mem_used_total, 0);
    assert_eq!(s.bd_stat().bd_count, 0);
});
