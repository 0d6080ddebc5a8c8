//! Reads with and without the class lock, side by side: one thread, a ring
//! of 4,096 live objects of one size, read at random, then churned (free the
//! oldest, store a new one); the same pool configuration with
//! `lock_free_reads` off and on, with size classes (the plain pool's
//! default) and log placement, several rounds. Prints ns per operation.
//! The figures in docs/DESIGN.md ("Reads without the lock") come from it.
//!
//!     cargo run --release -p zsmem --example read_modes [rounds]

use std::hint::black_box;
use std::time::Instant;

use zsmem::{Pool, PoolConfig};

/// The placements measured, by name.
fn placements() -> [(&'static str, PoolConfig); 2] {
    [
        ("classes", PoolConfig::default()),
        ("log", PoolConfig::log()),
    ]
}

const LIVE: usize = 4096;
const OPS: usize = 1_000_000;

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(3, |a| a.parse().expect("rounds: a number"));
    println!("round placement   size  lock_free_reads    read ns   churn ns");
    for round in 0..rounds {
        for (placement, cfg) in placements() {
            for size in [64usize, 256, 512, 1024, 2048, 3072] {
                for lock_free_reads in [false, true] {
                    let pool = Pool::new(PoolConfig {
                        lock_free_reads,
                        ..cfg.clone()
                    })
                    .expect("the default configurations are valid");
                    let data: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
                    let mut ring: Vec<_> = (0..LIVE)
                        .map(|_| pool.store(&data).expect("store"))
                        .collect();
                    let mut buf = vec![0u8; size];
                    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
                    let t = Instant::now();
                    for _ in 0..OPS {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let h = ring[(x % LIVE as u64) as usize];
                        pool.read(h, &mut buf).expect("read");
                        black_box(&buf);
                    }
                    let read = t.elapsed().as_nanos() as f64 / OPS as f64;
                    let t = Instant::now();
                    for i in 0..OPS {
                        let slot = &mut ring[i % LIVE];
                        pool.free(*slot).expect("free");
                        *slot = pool.store(black_box(&data)).expect("store");
                    }
                    let churn = t.elapsed().as_nanos() as f64 / OPS as f64;
                    assert_eq!(buf, data, "the last read is the object");
                    println!(
                        "{round:>5} {placement:<9} {size:>6}  {lock_free_reads:<15} {read:>10.1} {churn:>10.1}"
                    );
                }
            }
        }
    }
}
