//! `zsmem bench pool`: the pool's alloc+write+free and read beside the
//! system allocator and mimalloc doing the same work, one heap allocation per
//! object (what a program would do without zsmem). The same kernels drive
//! the criterion bench in `benches/pool.rs`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::time::Instant;

use mimalloc::MiMalloc;
use serde::Serialize;
use zsmem::{Handle, Pool, PoolConfig};

use crate::{CliError, CliResult, units::parse_size};

/// Benchmarks.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum BenchCommand {
    /// Pool alloc+write+free and read beside the system allocator and
    /// mimalloc (one allocation per object); prints ns per operation and the
    /// ratio to mimalloc.
    Pool(PoolBenchArgs),
    /// Compaction cost: store the embedded corpus's pages, discard a share
    /// at random, compact (on request, and automatically during the
    /// discards); prints bytes copied per byte returned and the longest
    /// class-lock hold.
    Compact(CompactBenchArgs),
}

/// Arguments of `zsmem bench compact`.
#[derive(clap::Args, Debug, Clone)]
pub struct CompactBenchArgs {
    /// Size of the embedded corpus (1.0 is about 300 MiB of files).
    #[arg(long, default_value_t = 0.5)]
    pub scale: f64,
    /// Share of the pages discarded, in percent.
    #[arg(long, default_value_t = 75)]
    pub discard_percent: u8,
    /// Seed of the corpus and of the choice of pages.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Arguments of `zsmem bench pool`.
#[derive(clap::Args, Debug, Clone)]
pub struct PoolBenchArgs {
    /// Object sizes, comma separated (K suffix allowed).
    #[arg(long, default_value = "64,1K,3K", value_delimiter = ',')]
    pub sizes: Vec<String>,
    /// Live objects kept while measuring (a ring: each op frees the oldest).
    #[arg(long, default_value_t = 4096)]
    pub live: usize,
    /// Operations per measurement.
    #[arg(long, default_value_t = 1_000_000)]
    pub ops: usize,
    /// Measurements per figure; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub repeats: usize,
    /// Output format: table or json.
    #[arg(long, default_value = "table")]
    pub format: String,
}

/// Run a benchmark.
pub fn run(b: &BenchCommand) -> CliResult {
    match b {
        BenchCommand::Pool(a) => bench_pool(a),
        BenchCommand::Compact(a) => bench_compact(a),
    }
}

/// Something that keeps objects: the operations the benchmark times.
pub trait ObjectStore {
    /// Contestant name.
    fn name(&self) -> &'static str;
    /// Keep a copy of `data`, returning its id.
    fn put(&mut self, data: &[u8]) -> u64;
    /// Copy object `id` into `buf`; returns its length.
    fn get(&self, id: u64, buf: &mut [u8]) -> usize;
    /// Drop object `id`.
    fn del(&mut self, id: u64);
}

/// zsmem's pool as a contestant.
pub struct ZsmemStore {
    name: &'static str,
    pool: Pool,
}

impl ZsmemStore {
    /// A pool with `cfg`, reported as `name`.
    pub fn new(name: &'static str, cfg: PoolConfig) -> zsmem::Result<Self> {
        Ok(ZsmemStore {
            name,
            pool: Pool::new(cfg)?,
        })
    }
}

impl ObjectStore for ZsmemStore {
    fn name(&self) -> &'static str {
        self.name
    }
    fn put(&mut self, data: &[u8]) -> u64 {
        self.pool.store(data).expect("benchmark store").to_raw()
    }
    fn get(&self, id: u64, buf: &mut [u8]) -> usize {
        self.pool
            .read(Handle::from_raw(id), buf)
            .expect("benchmark read")
    }
    fn del(&mut self, id: u64) {
        self.pool
            .free(Handle::from_raw(id))
            .expect("benchmark free");
    }
}

/// One heap allocation per object from a `GlobalAlloc`.
pub struct HeapStore<A: GlobalAlloc> {
    name: &'static str,
    alloc: A,
    objects: Vec<(*mut u8, usize)>,
    spare: Vec<u64>,
}

impl<A: GlobalAlloc> HeapStore<A> {
    /// Objects allocated from `alloc`, reported as `name`.
    pub fn new(name: &'static str, alloc: A) -> Self {
        HeapStore {
            name,
            alloc,
            objects: Vec::new(),
            spare: Vec::new(),
        }
    }
}

/// The system allocator (glibc malloc on Linux).
pub fn system_store() -> HeapStore<System> {
    HeapStore::new("system", System)
}

/// mimalloc.
pub fn mimalloc_store() -> HeapStore<MiMalloc> {
    HeapStore::new("mimalloc", MiMalloc)
}

impl<A: GlobalAlloc> ObjectStore for HeapStore<A> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn put(&mut self, data: &[u8]) -> u64 {
        let layout = Layout::from_size_align(data.len().max(1), 1).expect("valid layout");
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { self.alloc.alloc(layout) };
        assert!(!p.is_null(), "{} out of memory", self.name);
        // SAFETY: `p` points to `data.len()` fresh bytes of our own.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        match self.spare.pop() {
            Some(id) => {
                self.objects[id as usize] = (p, data.len());
                id
            }
            None => {
                self.objects.push((p, data.len()));
                (self.objects.len() - 1) as u64
            }
        }
    }
    fn get(&self, id: u64, buf: &mut [u8]) -> usize {
        let (p, len) = self.objects[id as usize];
        // SAFETY: `p` is a live allocation of `len` bytes made by `put`.
        buf[..len].copy_from_slice(unsafe { std::slice::from_raw_parts(p, len) });
        len
    }
    fn del(&mut self, id: u64) {
        let (p, len) = std::mem::replace(&mut self.objects[id as usize], (std::ptr::null_mut(), 0));
        let layout = Layout::from_size_align(len.max(1), 1).expect("valid layout");
        // SAFETY: allocated by `put` from the same allocator with this layout.
        unsafe { self.alloc.dealloc(p, layout) };
        self.spare.push(id);
    }
}

impl<A: GlobalAlloc> Drop for HeapStore<A> {
    fn drop(&mut self) {
        let ids: Vec<u64> = (0..self.objects.len() as u64)
            .filter(|&i| !self.objects[i as usize].0.is_null())
            .collect();
        for id in ids {
            self.del(id);
        }
    }
}

/// A ring of live objects: each `churn` frees the oldest and stores a new one.
pub struct Ring {
    ids: Vec<u64>,
    next: usize,
    data: Vec<u8>,
}

impl Ring {
    /// Fill `store` with `live` objects of `size` bytes.
    pub fn fill(store: &mut dyn ObjectStore, live: usize, size: usize) -> Ring {
        let data: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
        let ids = (0..live).map(|_| store.put(&data)).collect();
        Ring { ids, next: 0, data }
    }

    /// `n` times: free the oldest object, store a new one (alloc + write).
    pub fn churn(&mut self, store: &mut dyn ObjectStore, n: usize) {
        for _ in 0..n {
            let slot = &mut self.ids[self.next];
            store.del(*slot);
            *slot = store.put(black_box(&self.data));
            self.next = (self.next + 1) % self.ids.len();
        }
    }

    /// `n` reads of pseudo-randomly chosen live objects.
    pub fn read(&self, store: &dyn ObjectStore, n: usize, buf: &mut [u8]) {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let id = self.ids[(x % self.ids.len() as u64) as usize];
            black_box(store.get(id, buf));
        }
    }

    /// Free every object.
    pub fn drain(self, store: &mut dyn ObjectStore) {
        for id in self.ids {
            store.del(id);
        }
    }
}

/// The contestants of `bench pool`, fresh.
pub fn contestants() -> CliResult<Vec<Box<dyn ObjectStore>>> {
    Ok(vec![
        Box::new(ZsmemStore::new("zsmem", PoolConfig::default())?),
        Box::new(ZsmemStore::new("zsmem-kernel", PoolConfig::kernel())?),
        Box::new(system_store()),
        Box::new(mimalloc_store()),
    ])
}

/// One figure of the benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    /// Object size in bytes.
    pub size: usize,
    /// Contestant.
    pub contestant: &'static str,
    /// Median ns per alloc+write+free.
    pub churn_ns: f64,
    /// Median ns per read (copy out).
    pub read_ns: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn bench_pool(a: &PoolBenchArgs) -> CliResult {
    if a.live == 0 || a.ops == 0 || a.repeats == 0 {
        return Err(CliError::Usage(
            "--live, --ops and --repeats must be at least 1".into(),
        ));
    }
    let sizes = a
        .sizes
        .iter()
        .map(|s| parse_size(s).map_err(CliError::Usage))
        .collect::<CliResult<Vec<_>>>()?;
    if let Some(bad) = sizes.iter().find(|&&s| s == 0 || s > 4096) {
        return Err(CliError::Usage(format!(
            "object size {bad} must be 1..=4096 (the pools use 4 KiB pages)"
        )));
    }
    let json = match a.format.as_str() {
        "table" => false,
        "json" => true,
        f => {
            return Err(CliError::Usage(format!(
                "unknown format `{f}`: use table or json"
            )));
        }
    };
    let mut figures = Vec::new();
    for &size in &sizes {
        for mut store in contestants()? {
            let mut ring = Ring::fill(store.as_mut(), a.live, size);
            let mut buf = vec![0u8; size];
            // Warm up, then time.
            ring.churn(store.as_mut(), a.live);
            let mut churn = Vec::new();
            let mut read = Vec::new();
            for _ in 0..a.repeats {
                let t = Instant::now();
                ring.churn(store.as_mut(), a.ops);
                churn.push(t.elapsed().as_nanos() as f64 / a.ops as f64);
                let t = Instant::now();
                ring.read(store.as_ref(), a.ops, &mut buf);
                read.push(t.elapsed().as_nanos() as f64 / a.ops as f64);
            }
            ring.drain(store.as_mut());
            eprintln!("  measured {} at {size} bytes", store.name());
            figures.push(Figure {
                size,
                contestant: store.name(),
                churn_ns: median(churn),
                read_ns: median(read),
            });
        }
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&figures).map_err(std::io::Error::other)?
        );
        return Ok(());
    }
    println!(
        "bench pool: {} live objects, {} ops per run, median of {} runs (lower is better)",
        a.live, a.ops, a.repeats
    );
    println!(
        "{:>6}  {:<13} {:>14} {:>10} {:>10} {:>10}",
        "size", "contestant", "alloc+wr+free", "vs mi", "read", "vs mi"
    );
    for &size in &sizes {
        let row: Vec<&Figure> = figures.iter().filter(|f| f.size == size).collect();
        let mi = row
            .iter()
            .find(|f| f.contestant == "mimalloc")
            .expect("mimalloc runs");
        for f in &row {
            println!(
                "{:>6}  {:<13} {:>11.1} ns {:>9.2}x {:>7.1} ns {:>9.2}x",
                size,
                f.contestant,
                f.churn_ns,
                f.churn_ns / mi.churn_ns,
                f.read_ns,
                f.read_ns / mi.read_ns
            );
        }
    }
    Ok(())
}

fn bench_compact(a: &CompactBenchArgs) -> CliResult {
    use rand::{Rng, SeedableRng};
    use zsmem::{Codec, CompactionPolicy, PageStore, PageStoreConfig};

    if a.discard_percent > 100 || !(a.scale > 0.0 && a.scale <= 64.0) {
        return Err(CliError::Usage(
            "--discard-percent must be 0..=100 and --scale in (0, 64]".into(),
        ));
    }
    let tree = zsmem_lab::corpus::FileTree::generate(a.seed, a.scale);
    let pages: Vec<&zsmem_lab::corpus::Page> = tree.pages().map(|(_, _, p)| p).collect();
    println!(
        "bench compact: {} pages of the embedded corpus (seed {}, scale {}), {}% discarded at random",
        pages.len(),
        a.seed,
        a.scale,
        a.discard_percent
    );
    println!(
        "{:<22} {:>10} {:>10} {:>12} {:>14} {:>12} {:>14} {:>10}",
        "mode",
        "held MiB",
        "after MiB",
        "pages freed",
        "objects moved",
        "MiB copied",
        "copied/freed",
        "max hold"
    );
    for (label, policy, explicit) in [
        ("off, then compact()", CompactionPolicy::Off, true),
        ("auto (default)", CompactionPolicy::default(), false),
        ("auto, then compact()", CompactionPolicy::default(), true),
    ] {
        let store = PageStore::new(PageStoreConfig {
            slots: pages.len(),
            codec: Codec::Lz4,
            pool: PoolConfig {
                compaction: policy,
                ..PoolConfig::kernel()
            },
        })?;
        for (i, p) in pages.iter().enumerate() {
            store.write(i, &p[..])?;
        }
        let held = store.mm_stat().mem_used_total;
        let mut rng = rand::rngs::StdRng::seed_from_u64(a.seed);
        for i in 0..pages.len() {
            if rng.random_range(0..100) < a.discard_percent {
                store.discard(i, 1)?;
            }
        }
        if explicit {
            store.compact();
        }
        let after = store.mm_stat().mem_used_total;
        let c = store.pool().compaction_stats();
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        println!(
            "{:<22} {:>10.2} {:>10.2} {:>12} {:>14} {:>12.2} {:>14.3} {:>8.1}us",
            label,
            mib(held),
            mib(after),
            c.pages_compacted,
            c.objects_moved,
            mib(c.bytes_copied),
            c.copy_per_freed_byte(store.page_size()),
            c.max_lock_hold_ns as f64 / 1000.0
        );
    }
    println!(
        "copied/freed: object bytes copied per byte of memory returned; max hold: longest time one compaction step held a class lock"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_contestant_keeps_bytes() {
        for mut s in contestants().unwrap() {
            let mut ring = Ring::fill(s.as_mut(), 64, 1000);
            ring.churn(s.as_mut(), 500);
            let mut buf = vec![0u8; 1000];
            for &id in &ring.ids {
                assert_eq!(s.get(id, &mut buf), 1000);
                assert_eq!(buf, ring.data, "{}", s.name());
            }
            ring.read(s.as_ref(), 100, &mut buf);
            ring.drain(s.as_mut());
        }
    }
}
