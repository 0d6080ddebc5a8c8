//! The page store under churn at several threads, for a profiler: a store
//! of one slot per page of a tree (default `/usr/local/go/src`, at most
//! 150 MiB), filled by the threads, then each thread makes 4 calls a slot
//! over its own slots (`slot % threads == thread`): 80% writes of a random
//! page of the tree, 20% discards. Placements: `log` (the page store's
//! default), `log-nocomp` (log placement without automatic cleaning),
//! `classes` (`PoolConfig::default()`), and `codec` (the codec alone, each
//! call compressing into one buffer: the floor). Prints ns a call per
//! thread and the pages the pool holds after the churn, three rounds.
//! The figures in docs/DESIGN.md ("Churn at two threads") come from it.
//!
//!     cargo run --release -p zsmem --example churn_threads [THREADS] [PLACEMENT] [DIR]

use std::time::Instant;

use zsmem::{Codec, CompactionPolicy, PageStore, PageStoreConfig, PoolConfig};

/// Up to `max` bytes of the files under `p`.
fn walk(p: &std::path::Path, out: &mut Vec<u8>, max: usize) {
    let Ok(rd) = std::fs::read_dir(p) else { return };
    for e in rd.flatten() {
        let Ok(t) = e.file_type() else { continue };
        if t.is_dir() {
            walk(&e.path(), out, max);
        } else if t.is_file()
            && let Ok(b) = std::fs::read(e.path())
        {
            out.extend_from_slice(&b);
        }
        if out.len() > max {
            return;
        }
    }
}

fn main() {
    let threads: usize = std::env::args()
        .nth(1)
        .map_or(2, |a| a.parse().expect("threads: a number"));
    let only = std::env::args().nth(2);
    let dir = std::env::args()
        .nth(3)
        .unwrap_or_else(|| "/usr/local/go/src".into());
    let mut data = Vec::new();
    walk(std::path::Path::new(&dir), &mut data, 150 << 20);
    let pages: Vec<&[u8]> = data.chunks_exact(4096).collect();
    let n = pages.len();
    assert!(n >= 2 * threads, "{dir}: too few pages ({n})");
    let placements = [
        ("log", PoolConfig::log()),
        (
            "log-nocomp",
            PoolConfig {
                compaction: CompactionPolicy::Off,
                ..PoolConfig::log()
            },
        ),
        ("classes", PoolConfig::default()),
        ("codec", PoolConfig::default()),
    ];
    for round in 0..3 {
        for (name, pool) in placements.iter().cloned() {
            if only.as_deref().is_some_and(|o| o != name) {
                continue;
            }
            let store = PageStore::new(PageStoreConfig {
                slots: n,
                codec: Codec::Lz4,
                pool,
                ..Default::default()
            })
            .expect("a page store");
            std::thread::scope(|s| {
                for t in 0..threads {
                    let (store, pages) = (&store, &pages);
                    s.spawn(move || {
                        for i in (t..n).step_by(threads) {
                            store.write(i, pages[i]).expect("write");
                        }
                    });
                }
            });
            let calls = 4 * n / threads;
            let start = Instant::now();
            std::thread::scope(|s| {
                for t in 0..threads {
                    let (store, pages) = (&store, &pages);
                    s.spawn(move || {
                        let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ t as u64;
                        let mut out = vec![0u8; 8192];
                        for _ in 0..calls {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            let slot = t + threads * ((x >> 20) as usize % (n / threads));
                            let p = (x >> 40) as usize % n;
                            if name == "codec" {
                                std::hint::black_box(Codec::Lz4.compress(pages[p], &mut out));
                            } else if x.is_multiple_of(5) {
                                store.discard(slot, 1).expect("discard");
                            } else {
                                store.write(slot, pages[p]).expect("write");
                            }
                        }
                    });
                }
            });
            let ns = start.elapsed().as_nanos() as f64 / calls as f64;
            let held = store.pool().stats().pages_held as f64 * 4096.0 / f64::from(1 << 20);
            println!(
                "round {round} {name:10} {threads} thread(s): {ns:7.1} ns a call a thread, pool {held:.1} MiB"
            );
        }
    }
}
