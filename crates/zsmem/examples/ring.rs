//! The object path alone, for a profiler: each thread keeps a ring of 4,096
//! live objects of one size in one shared pool and, `ops` times, frees the
//! oldest and stores a new one (alloc+write+free). Prints ns per pair per
//! thread. Under callgrind its instruction counts are exact and repeatable
//! where this machine's timings are not: run it once with `ops` 0 (the
//! pool made and the rings filled and emptied) and once with `ops` N, and
//! the difference over N is the instructions of one pair. The counts in
//! docs/DESIGN.md ("The free and store path's bookkeeping", "The object
//! API's allocation path") come from it.
//!
//!     cargo build --release -p zsmem --example ring
//!     valgrind --tool=callgrind target/release/examples/ring 64 log 0
//!     valgrind --tool=callgrind target/release/examples/ring 64 log 200000
//!
//! Arguments: size in bytes (64), `log` or `classes` (`log`: the page
//! store's placement; `classes`: `PoolConfig::default()`), pairs per thread
//! (1,000,000), threads (1), and `pair` (the default) or `read`: with
//! `read`, each of the `ops` steps reads a live object of the ring chosen
//! at random (as `zsmem bench pool`'s read) instead of a pair.

use std::hint::black_box;
use std::time::Instant;

use zsmem::{Pool, PoolConfig};

const LIVE: usize = 4096;

fn arg<T: std::str::FromStr>(i: usize, name: &str, default: T) -> T {
    std::env::args().nth(i).map_or(default, |a| {
        a.parse()
            .unwrap_or_else(|_| panic!("{name}: expected a number or a placement, got {a:?}"))
    })
}

fn main() {
    let size: usize = arg(1, "size", 64);
    let placement: String = arg(2, "placement", "log".to_string());
    let ops: usize = arg(3, "pairs", 1_000_000);
    let threads: usize = arg(4, "threads", 1);
    let op: String = arg(5, "op", "pair".to_string());
    assert!(
        op == "pair" || op == "read",
        "op: `pair` or `read`, not {op:?}"
    );
    let reads = op == "read";
    let cfg = match placement.as_str() {
        "log" => PoolConfig::log(),
        "classes" => PoolConfig::default(),
        other => panic!("placement: `log` or `classes`, not {other:?}"),
    };
    let pool = Pool::new(cfg).expect("a pool");
    let data: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                let mut ring: Vec<_> = (0..LIVE)
                    .map(|_| pool.store(&data).expect("store"))
                    .collect();
                let mut buf = vec![0u8; size];
                let mut x = 0x2545_F491_4F6C_DD1Du64;
                for i in 0..ops {
                    if reads {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let h = ring[(x % LIVE as u64) as usize];
                        pool.read(h, black_box(&mut buf)).expect("read");
                        continue;
                    }
                    let slot = i % LIVE;
                    pool.free(ring[slot]).expect("free");
                    ring[slot] = pool.store(black_box(&data)).expect("store");
                }
                for h in ring {
                    pool.free(h).expect("free");
                }
            });
        }
    });
    let ns = start.elapsed().as_nanos() as f64 / ops.max(1) as f64;
    println!(
        "{size} B, {placement}, {threads} thread(s): {ns:.1} ns a{} a thread (rings filled and emptied included)",
        if reads { " read" } else { " pair" }
    );
}
