//! Reading zsmem's statistics: the pool's totals (`PoolStats`) and where its
//! overhead goes, the kernel's per-class debugfs columns (`class_stats`),
//! and a page store's zram `mm_stat`, `io_stat` and `bd_stat`.
//!
//!     cargo run -p zsmem --example stats

use zsmem::stats::format_kernel_classes;
use zsmem::{PageStore, PageStoreConfig, Pool, PoolConfig};

fn main() -> Result<(), zsmem::Error> {
    // A pool of objects of compressed-page-like sizes, a third freed.
    let pool = Pool::new(PoolConfig::default())?;
    let mut handles = Vec::new();
    for i in 0..3000usize {
        let len = 200 + (i * 37) % 3000;
        handles.push(pool.store(&vec![(i % 251) as u8; len])?);
    }
    for h in handles.iter().step_by(3) {
        pool.free(*h)?;
    }

    let s = pool.stats();
    println!(
        "pool: {} objects, {} bytes stored in {} pages of {} bytes ({} bytes held)",
        s.objects,
        s.bytes_stored,
        s.pages_held,
        s.page_size,
        s.bytes_held()
    );
    println!(
        "overhead {:.3} (with {} bytes of metadata {:.3}); waste: rounding {}, free slots {}, tails {}",
        s.overhead_ratio(),
        s.metadata_bytes,
        s.overhead_ratio_with_metadata(),
        s.waste.rounding_bytes,
        s.waste.partial_bytes,
        s.waste.tail_bytes
    );
    let freed = pool.compact();
    let c = pool.compaction_stats();
    println!(
        "compaction freed {freed} pages, moved {} objects in all",
        c.objects_moved
    );

    // The kernel's /sys/kernel/debug/zsmalloc/<pool>/classes, for the
    // classes in use.
    let used: Vec<_> = pool
        .class_stats()
        .into_iter()
        .filter(|c| c.obj_allocated > 0)
        .collect();
    println!("{} classes in use:", used.len());
    print!("{}", format_kernel_classes(&used[..used.len().min(8)]));

    // A page store's zram statistics.
    let store = PageStore::new(PageStoreConfig {
        slots: 64,
        ..Default::default()
    })?;
    let mut page = vec![0u8; 4096];
    for i in 0..32 {
        page.iter_mut()
            .enumerate()
            .for_each(|(j, b)| *b = (j / (i + 1)) as u8);
        store.write(i, &page)?;
    }
    store.discard(0, 4)?;
    let _ = store.read(1000, &mut page); // out of range: counted in invalid_io
    let mm = store.mm_stat();
    let io = store.io_stat();
    let bd = store.bd_stat();
    println!(
        "mm_stat: {} {} {} {} {} {} {} {} {}",
        mm.orig_data_size,
        mm.compr_data_size,
        mm.mem_used_total,
        mm.mem_limit,
        mm.mem_used_max,
        mm.same_pages,
        mm.pages_compacted,
        mm.huge_pages,
        mm.huge_pages_since
    );
    println!(
        "io_stat: {} {} {} {}",
        io.failed_reads, io.failed_writes, io.invalid_io, io.notify_free
    );
    println!("bd_stat: {} {} {}", bd.bd_count, bd.bd_reads, bd.bd_writes);
    Ok(())
}
