//! Criterion: zsmem's pool beside the system allocator and mimalloc, one
//! allocation per object, for 64 B, 1 KiB and 3 KiB objects.
//! `cargo bench -p zsmem-cli --bench pool`; `zsmem bench pool` prints the
//! same comparison as a table with ratios.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use zsmem_cli::bench::{Ring, contestants};

const LIVE: usize = 4096;
const BATCH: usize = 1024;

fn alloc_write_free(c: &mut Criterion) {
    let mut g = c.benchmark_group("alloc_write_free");
    g.throughput(Throughput::Elements(BATCH as u64));
    for size in [64, 1024, 3072] {
        for mut store in contestants().expect("contestants") {
            let mut ring = Ring::fill(store.as_mut(), LIVE, size);
            let name = store.name().to_string();
            g.bench_function(BenchmarkId::new(name, size), |b| {
                b.iter(|| ring.churn(store.as_mut(), BATCH))
            });
            ring.drain(store.as_mut());
        }
    }
    g.finish();
}

fn read(c: &mut Criterion) {
    let mut g = c.benchmark_group("read");
    g.throughput(Throughput::Elements(BATCH as u64));
    for size in [64, 1024, 3072] {
        for mut store in contestants().expect("contestants") {
            let ring = Ring::fill(store.as_mut(), LIVE, size);
            let mut buf = Vec::with_capacity(size);
            let name = store.name().to_string();
            g.bench_function(BenchmarkId::new(name, size), |b| {
                b.iter(|| ring.read(store.as_mut(), BATCH, &mut buf))
            });
            ring.drain(store.as_mut());
        }
    }
    g.finish();
}

criterion_group!(benches, alloc_write_free, read);
criterion_main!(benches);
