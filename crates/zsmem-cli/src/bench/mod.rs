//! `zsmem bench pool`: the pool's alloc+write+free and read beside the
//! system allocator and mimalloc doing the same work, one heap allocation per
//! object (what a program would do without zsmem). The same kernels drive
//! the criterion bench in `benches/pool.rs`.

use std::time::Instant;

use serde::Serialize;
use zsmem::PoolConfig;
use zsmem_lab::contestants::ObjectContestant;
use zsmem_lab::contestants::objects::make_object_contestant;

use crate::{CliError, CliResult, units::parse_size};

pub mod free;
pub mod pool_threads;
pub mod ring;
pub mod store;
pub mod threads;

pub use ring::Ring;

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
    /// Store then load the same pages through PageStore and the kernel's
    /// zram with the same codec: throughput, per-page p50/p99/p99.9,
    /// memory held, the allocator's share of store time.
    Store(store::StoreBenchArgs),
    /// N threads store objects, then all free at once, in four modes side
    /// by side: Base (a pool-wide lock before the class lock),
    /// ClassIdx-only (the class lock alone, zsmem's default free mode),
    /// Deferred (a lock-free hand-off, drained in batches) and Log (log
    /// placement, the page store's default: a lane per thread); free time
    /// and speed-up over Base, scaling, throughput and per-free latency.
    Free(free::FreeBenchArgs),
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
    /// Output format (sizes in MiB in the table, in bytes in csv and json).
    #[arg(long, value_enum, default_value_t = crate::output::Format::Table)]
    pub format: crate::output::Format,
}

/// One mode of `zsmem bench compact`, as csv and json print it.
#[derive(Debug, Clone, Serialize)]
pub struct CompactFigure {
    /// Pool configuration and compaction policy.
    pub mode: String,
    /// The pool after the stores, bytes.
    pub pool_bytes: u64,
    /// The pool after the discards (and the compaction asked for), bytes.
    pub pool_after_bytes: u64,
    /// Pages compaction returned.
    pub pages_compacted: u64,
    /// Objects compaction moved.
    pub objects_moved: u64,
    /// Object bytes compaction copied.
    pub bytes_copied: u64,
    /// Bytes copied per byte of memory returned.
    pub copied_per_freed: f64,
    /// Longest time one compaction step held a class lock, ns.
    pub max_lock_hold_ns: u64,
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
    /// Operations per measurement (at most 2^40).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_OPS))]
    pub ops: usize,
    /// Measurements per figure; the median is reported.
    #[arg(long, default_value_t = 5, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1000))]
    pub repeats: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = crate::output::Format::Table)]
    pub format: crate::output::Format,
    /// Thread counts, comma-separated: zsmem (one shared pool), mimalloc
    /// and the system allocator at each, per-thread rings.
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=256))]
    pub threads: Vec<usize>,
}

/// The most `--ops` of `bench pool`, as `compare --ops`: 2^40.
pub const MAX_OPS: u64 = 1 << 40;

/// Bytes a heap contestant spends beside each object, at most (its
/// allocation's header and rounding, the id's entry): for the estimate of
/// [`check_live`].
const OBJECT_EXTRA: usize = 64;

/// Refuse a ring of `live` objects of up to `largest` bytes on each of
/// `threads` threads when it would take more than `limit` bytes, before
/// anything is stored: an absurd `--live` is an error, not an abort or the
/// OOM killer.
fn check_live(live: usize, largest: usize, threads: usize, limit: u64) -> CliResult {
    let need = live as u128 * threads as u128 * (largest + OBJECT_EXTRA) as u128;
    crate::units::within_memory(&format!("--live {live}"), need, "objects at once", limit)
}

/// Run a benchmark.
pub fn run(b: &BenchCommand) -> CliResult {
    match b {
        BenchCommand::Pool(a) => bench_pool(a),
        BenchCommand::Compact(a) => bench_compact(a),
        BenchCommand::Store(a) => store::bench_store(a),
        BenchCommand::Free(a) => free::bench_free(a),
    }
}

/// The contestants of `bench pool`, fresh.
pub fn contestants() -> CliResult<Vec<Box<dyn ObjectContestant>>> {
    [
        "zsmem",
        "zsmem-classes",
        "zsmem-kernel",
        "system",
        "mimalloc",
    ]
    .into_iter()
    .map(|n| make_object_contestant(n).map_err(|e| CliError::Usage(e.to_string())))
    .collect()
}

/// One figure of the benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    /// Object size in bytes.
    pub size: usize,
    /// Contestant.
    pub contestant: String,
    /// Median ns per alloc+write+free.
    pub churn_ns: f64,
    /// Median ns per read (copy out).
    pub read_ns: f64,
}

/// `v` without its repeats, first occurrences in order.
fn dedup_in_order<T: PartialEq + Copy>(v: &mut Vec<T>) {
    let mut kept = Vec::with_capacity(v.len());
    for &x in v.iter() {
        if !kept.contains(&x) {
            kept.push(x);
        }
    }
    *v = kept;
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
    let mut sizes = a
        .sizes
        .iter()
        .map(|s| parse_size(s).map_err(CliError::Usage))
        .collect::<CliResult<Vec<_>>>()?;
    // A size (or thread count) given twice is measured once: each row of
    // the tables is one measurement, compared with mimalloc's of its size.
    dedup_in_order(&mut sizes);
    let mut threads = a.threads.clone();
    dedup_in_order(&mut threads);
    if let Some(bad) = sizes.iter().find(|&&s| s == 0 || s > 4096) {
        return Err(CliError::Usage(format!(
            "object size {bad} must be 1..=4096 (the pools use 4 KiB pages)"
        )));
    }
    check_live(
        a.live,
        sizes.iter().copied().max().unwrap_or(0),
        threads.iter().copied().max().unwrap_or(1),
        zsmem_lab::corpus::default_input_limit(),
    )?;
    if !threads.is_empty() {
        let figures = pool_threads::pool_threads(&sizes, &threads, a.live, a.ops, a.repeats)?;
        return match a.format {
            crate::output::Format::Json => crate::output::print_json(&figures),
            crate::output::Format::Csv => crate::output::print_serialized(&figures),
            crate::output::Format::Table => pool_threads::print(&figures, a.live, a.ops, a.repeats),
        };
    }
    let mut figures = Vec::new();
    for &size in &sizes {
        for mut store in contestants()? {
            let mut ring = Ring::try_fill(store.as_mut(), a.live, size)?;
            let mut buf = Vec::with_capacity(size);
            // Warm up, then time.
            ring.churn(store.as_mut(), a.live);
            let mut churn = Vec::new();
            let mut read = Vec::new();
            for _ in 0..a.repeats {
                let t = Instant::now();
                ring.churn(store.as_mut(), a.ops);
                churn.push(t.elapsed().as_nanos() as f64 / a.ops as f64);
                let t = Instant::now();
                ring.read(store.as_mut(), a.ops, &mut buf);
                read.push(t.elapsed().as_nanos() as f64 / a.ops as f64);
            }
            ring.drain(store.as_mut());
            eprintln!("  measured {} at {size} bytes", store.name());
            figures.push(Figure {
                size,
                contestant: store.name().to_string(),
                churn_ns: median(churn),
                read_ns: median(read),
            });
        }
    }
    match a.format {
        crate::output::Format::Json => return crate::output::print_json(&figures),
        crate::output::Format::Csv => return crate::output::print_serialized(&figures),
        crate::output::Format::Table => {}
    }
    outln!(
        "bench pool: {} live objects, {} ops per run, median of {} runs (lower is better)",
        a.live,
        a.ops,
        a.repeats
    );
    let mut t = crate::output::table(
        &[
            "size",
            "contestant",
            "alloc+wr+free\nns",
            "vs\nmimalloc",
            "read\nns",
            "vs\nmimalloc",
        ],
        2,
    );
    for &size in &sizes {
        let row: Vec<&Figure> = figures.iter().filter(|f| f.size == size).collect();
        let mi = row
            .iter()
            .find(|f| f.contestant == "mimalloc")
            .expect("mimalloc runs");
        for f in &row {
            t.add_row(vec![
                size.to_string(),
                f.contestant.clone(),
                format!("{:.1}", f.churn_ns),
                format!("{:.2}x", f.churn_ns / mi.churn_ns),
                format!("{:.1}", f.read_ns),
                format!("{:.2}x", f.read_ns / mi.read_ns),
            ]);
        }
    }
    crate::output::print_table(&t)?;
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
    let spin = crate::progress::spinner("generating the embedded corpus");
    let tree = zsmem_lab::corpus::FileTree::generate(a.seed, a.scale);
    spin.finish_and_clear();
    let pages: Vec<&zsmem_lab::corpus::Page> = tree.pages().map(|(_, _, p)| p).collect();
    let bar = crate::progress::bar(6 * 2 * pages.len() as u64, "bench compact", "pages");
    let mut rows: Vec<CompactFigure> = Vec::new();
    // zsmem's pool in the kernel's configuration (`PoolConfig::kernel()`:
    // the kernel's zspages, chain 8, all or nothing; labelled
    // `zsmem-kernel`, as `compare` names it, not the running kernel) and
    // zsmem's own (chain 32, trimmed page by page), each compacted on
    // request and automatically.
    let kernel = |compaction| PoolConfig {
        compaction,
        ..PoolConfig::kernel()
    };
    let zsmem = |compaction| PoolConfig {
        compaction,
        ..PoolConfig::default()
    };
    for (label, pool, explicit) in [
        (
            "zsmem-kernel: off, then compact()",
            kernel(CompactionPolicy::Off),
            true,
        ),
        (
            "zsmem-kernel: auto",
            kernel(CompactionPolicy::default()),
            false,
        ),
        (
            "zsmem-kernel: auto, then compact()",
            kernel(CompactionPolicy::default()),
            true,
        ),
        (
            "zsmem: off, then compact()",
            zsmem(CompactionPolicy::Off),
            true,
        ),
        (
            "zsmem: auto (default)",
            zsmem(CompactionPolicy::default()),
            false,
        ),
        (
            "zsmem: auto, then compact()",
            zsmem(CompactionPolicy::default()),
            true,
        ),
    ] {
        let store = PageStore::new(PageStoreConfig {
            slots: pages.len(),
            codec: Codec::Lz4,
            pool,
            ..Default::default()
        })?;
        for (i, p) in pages.iter().enumerate() {
            store.write(i, &p[..])?;
            if i % 4096 == 0 {
                bar.inc(4096);
            }
        }
        let held = store.mm_stat().mem_used_total;
        let mut rng = rand::rngs::StdRng::seed_from_u64(a.seed);
        for i in 0..pages.len() {
            if rng.random_range(0..100) < a.discard_percent {
                store.discard(i, 1)?;
            }
            if i % 4096 == 0 {
                bar.inc(4096);
            }
        }
        if explicit {
            store.compact();
        }
        let after = store.mm_stat().mem_used_total;
        let c = store.pool().compaction_stats();
        rows.push(CompactFigure {
            mode: label.to_string(),
            pool_bytes: held,
            pool_after_bytes: after,
            pages_compacted: c.pages_compacted,
            objects_moved: c.objects_moved,
            bytes_copied: c.bytes_copied,
            copied_per_freed: c.copy_per_freed_byte(store.page_size()),
            max_lock_hold_ns: c.max_lock_hold_ns,
        });
    }
    bar.finish_and_clear();
    match a.format {
        crate::output::Format::Json => return crate::output::print_json(&rows),
        crate::output::Format::Csv => return crate::output::print_serialized(&rows),
        crate::output::Format::Table => {}
    }
    outln!(
        "bench compact: {} pages of the embedded corpus (seed {}, scale {}), {}% discarded at random",
        pages.len(),
        a.seed,
        a.scale,
        a.discard_percent
    );
    let mib = |b: u64| format!("{:.2}", crate::output::mib(b));
    let mut t = crate::output::table(
        &[
            "mode",
            "pool\nMiB",
            "pool after\nMiB",
            "pages\nfreed",
            "objects\nmoved",
            "MiB\ncopied",
            "copied\nper freed",
            "max hold\nµs",
        ],
        1,
    );
    for r in &rows {
        t.add_row(vec![
            r.mode.clone(),
            mib(r.pool_bytes),
            mib(r.pool_after_bytes),
            r.pages_compacted.to_string(),
            r.objects_moved.to_string(),
            mib(r.bytes_copied),
            format!("{:.3}", r.copied_per_freed),
            format!("{:.1}", r.max_lock_hold_ns as f64 / 1000.0),
        ]);
    }
    crate::output::print_table(&t)?;
    outln!(
        "copied per freed: object bytes copied per byte of memory returned; max hold: the \
         longest time one compaction step held a class lock; zsmem-kernel: zsmem's pool in the \
         kernel's configuration (PoolConfig::kernel(): chain 8, zspages all or nothing), not \
         the running kernel's zsmalloc"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_beyond_the_limit_are_refused() {
        assert!(check_live(4096, 3072, 1, 1 << 30).is_ok());
        assert!(check_live(1 << 20, 4096, 1, 1 << 30).is_err());
        assert!(check_live(1 << 16, 4096, 256, 1 << 30).is_err());
        assert!(check_live(usize::MAX, 4096, 256, u64::MAX).is_err());
    }

    #[test]
    fn every_contestant_keeps_bytes() {
        for mut s in contestants().unwrap() {
            let mut ring = Ring::fill(s.as_mut(), 64, 1000);
            ring.churn(s.as_mut(), 500);
            let mut buf = Vec::new();
            for &id in &ring.ids {
                s.read(id, &mut buf).unwrap();
                assert_eq!(buf.len(), 1000);
                assert_eq!(buf, ring.data, "{}", s.name());
            }
            ring.read(s.as_mut(), 100, &mut buf);
            ring.drain(s.as_mut());
        }
    }
}
