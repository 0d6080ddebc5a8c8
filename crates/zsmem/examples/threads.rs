//! Many threads sharing one `PageStore`: each writes, reads and rewrites its
//! own slots, and every byte read is checked. The store takes one lock per
//! slot, so threads on different slots run in parallel.
//!
//!     cargo run -p zsmem --example threads

use std::sync::Arc;
use std::thread;

use zsmem::{PageStore, PageStoreConfig};

const PAGE: usize = 4096;
const THREADS: usize = 4;
const SLOTS_PER_THREAD: usize = 64;
const ROUNDS: usize = 4;

/// The page thread `t` writes to its slot `s` in round `r`: compressible,
/// and different for every (t, s, r), so a mix-up would be seen.
fn page(t: usize, s: usize, r: usize) -> Vec<u8> {
    let mut p = format!("thread {t} slot {s} round {r}; ").into_bytes();
    p.resize(PAGE / 2, b'.');
    p.extend((0..PAGE / 2).map(|i| (i * (t + 1) + s * 7 + r * 13) as u8));
    p
}

fn main() -> Result<(), zsmem::Error> {
    let store = Arc::new(PageStore::new(PageStoreConfig {
        slots: THREADS * SLOTS_PER_THREAD,
        ..Default::default()
    })?);

    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let store = Arc::clone(&store);
            thread::spawn(move || -> Result<usize, zsmem::Error> {
                let mut buf = vec![0u8; PAGE];
                let mut checked = 0;
                for r in 0..ROUNDS {
                    for s in 0..SLOTS_PER_THREAD {
                        store.write(t * SLOTS_PER_THREAD + s, &page(t, s, r))?;
                    }
                    for s in 0..SLOTS_PER_THREAD {
                        store.read(t * SLOTS_PER_THREAD + s, &mut buf)?;
                        assert_eq!(buf, page(t, s, r), "thread {t} slot {s} round {r}");
                        checked += PAGE;
                    }
                }
                Ok(checked)
            })
        })
        .collect();

    let mut checked = 0;
    for w in workers {
        checked += w.join().expect("a worker panicked")?;
    }
    store.check_invariants()?;
    let mm = store.mm_stat();
    println!(
        "{THREADS} threads checked {} KiB; {} pages held in {} KiB of pool pages",
        checked / 1024,
        mm.orig_data_size / PAGE as u64,
        mm.mem_used_total / 1024
    );
    Ok(())
}
