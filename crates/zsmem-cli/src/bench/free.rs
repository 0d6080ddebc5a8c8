//! `zsmem bench free`: the experiment of the reference thread on `zs_free()`
//! latency, in userspace.
//!
//! Each of N threads stores `--mib` MiB of objects whose sizes are drawn
//! from the lz4 sizes of real compressed pages (the embedded corpus), then
//! all N free everything at once. The time from the start of the frees until
//! the last thread is done is taken for three free modes of size-class
//! placement and for log placement:
//! - Base: every free takes a pool-wide lock as a reader before its class
//!   lock (the kernel before the class index went into the handle);
//! - ClassIdx-only: the class lock alone (zsmem's default free mode);
//! - Deferred: a lock-free hand-off to per-thread shards, drained in batches
//!   sorted by class; the time until `flush()` has returned all memory is
//!   printed too;
//! - Log: log placement (the page store's default: no classes, a lane per
//!   thread), each free under its lane's lock.
//!
//! Freed pages go back to the OS as the pool's default says (after a
//! bounded delay, by the returner thread, off the freeing threads): the
//! time until the last page is back with the OS is printed too.
//!
//! Compaction is off in every mode, so a free does only its own work.
//! A second pass, one thread per mode, times every free for the latency
//! percentiles; the cost of reading the clock is printed beside them.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;
use zsmem::{CompactionPolicy, FreeMode, Handle, Placement, Pool, PoolConfig};

use crate::{CliError, CliResult};

/// Arguments of `zsmem bench free`.
#[derive(clap::Args, Debug, Clone)]
pub struct FreeBenchArgs {
    /// Thread counts, comma-separated (default: 1, 2, 4 up to the core count).
    #[arg(long, value_delimiter = ',')]
    pub threads: Vec<usize>,
    /// MiB of objects each thread stores before the frees.
    #[arg(long, default_value_t = 256, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1 << 20))]
    pub mib: usize,
    /// Runs per cell; the median is printed.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Seed of the embedded corpus the object sizes come from.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output format (csv: one line per mode and thread count).
    #[arg(long, value_enum, default_value_t = crate::output::Format::Table)]
    pub format: crate::output::Format,
}

/// The three free modes, in the reference's column order, then log
/// placement (no classes: a lane per thread) freeing under its lane lock.
const MODES: [(&str, FreeMode, Placement); 4] = [
    ("Base", FreeMode::PoolLock, Placement::Classes),
    ("ClassIdx-only", FreeMode::ClassLock, Placement::Classes),
    ("Deferred", FreeMode::deferred(), Placement::Classes),
    ("Log", FreeMode::ClassLock, Placement::Log { lanes: 8 }),
];

/// One cell: a mode at a thread count.
#[derive(Debug, Clone, Serialize)]
pub struct FreeFigure {
    /// Free mode.
    pub mode: String,
    /// Threads freeing at once.
    pub threads: usize,
    /// Objects each thread freed.
    pub objects_per_thread: usize,
    /// Median ms from the start of the frees until the last thread returned.
    pub free_ms: f64,
    /// Deferred only: median ms until `flush()` had freed every object.
    pub until_flushed_ms: Option<f64>,
    /// Median ms from the start of the frees until every freed page was
    /// back with the OS (`cached_pages` 0: the return delay included).
    pub until_os_ms: f64,
    /// Median ms the threads took to store their objects.
    pub store_ms: f64,
    /// Millions of objects allocated, written and freed per second, over
    /// both phases.
    pub alloc_free_mops: f64,
}

/// Free latency of one mode, one thread.
#[derive(Debug, Clone, Serialize)]
pub struct FreeLatency {
    /// Free mode.
    pub mode: String,
    /// Percentiles in ns, clock reading included.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Cost of one pair of clock readings, ns (median).
    pub clock_ns: u64,
}

/// The whole result.
#[derive(Debug, Clone, Serialize)]
pub struct FreeBench {
    /// Cells.
    pub figures: Vec<FreeFigure>,
    /// Per-free latency.
    pub latency: Vec<FreeLatency>,
}

/// Object sizes: lz4 sizes of the embedded corpus's pages, same-filled pages
/// left out (zram stores no object for them), huge ones as whole pages.
fn object_sizes(seed: u64) -> Vec<usize> {
    let tree = zsmem_lab::corpus::FileTree::generate(seed, 0.02);
    let huge = Pool::new(PoolConfig::default())
        .map(|p| p.huge_class_size())
        .unwrap_or(3257);
    tree.pages()
        .filter(|(_, _, p)| zsmem::store::same_filled(&p[..]).is_none())
        .map(|(_, _, p)| {
            let n = zsmem_lab::corpus::lz4_len(p);
            if n >= huge { p.len() } else { n.max(1) }
        })
        .collect()
}

fn pool(mode: FreeMode, placement: Placement) -> CliResult<Pool> {
    Ok(Pool::new(PoolConfig {
        compaction: CompactionPolicy::Off,
        free_mode: mode,
        placement,
        ..PoolConfig::default()
    })?)
}

/// Store `bytes` worth of objects with sizes from `sizes` (starting at
/// `offset`); returns the handles.
fn fill(pool: &Pool, sizes: &[usize], offset: usize, bytes: usize) -> CliResult<Vec<Handle>> {
    let data = vec![0x5Au8; 4096];
    let mut handles = Vec::new();
    let mut stored = 0;
    let mut i = offset;
    while stored < bytes {
        let len = sizes[i % sizes.len()];
        handles.push(pool.store(&data[..len])?);
        stored += len;
        i += 1;
    }
    Ok(handles)
}

struct Run {
    store: Duration,
    free: Duration,
    flushed: Duration,
    returned: Duration,
    objects: usize,
}

/// Wait until every freed page of `pool` is back with the OS (polled; the
/// returner's bound is milliseconds), for at most a minute.
fn wait_returned(pool: &Pool) -> CliResult {
    let end = Instant::now() + Duration::from_secs(60);
    while pool.stats().cached_pages > 0 {
        if Instant::now() > end {
            return Err(CliError::Usage(format!(
                "{} freed pages were not returned to the OS within a minute",
                pool.stats().cached_pages
            )));
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    Ok(())
}

fn run_once(
    (mode, placement): (FreeMode, Placement),
    threads: usize,
    sizes: &[usize],
    bytes: usize,
) -> CliResult<Run> {
    let pool = pool(mode, placement)?;
    // The workers alone meet at the barriers, and each times its phases by
    // its own clock: a phase runs from the first thread's start to the
    // last one's end (the main thread, a third on a 2-core machine, might
    // run only after the workers it woke, and see a phase shorter than it
    // was).
    let fill_barrier = Barrier::new(threads);
    let free_barrier = Barrier::new(threads);
    let results = std::thread::scope(|s| -> CliResult<Run> {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (pool, fill_barrier, free_barrier) = (&pool, &fill_barrier, &free_barrier);
                s.spawn(move || -> CliResult<(usize, [Instant; 4])> {
                    fill_barrier.wait();
                    let a = Instant::now();
                    let handles = fill(pool, sizes, t * 7919, bytes);
                    let b = Instant::now();
                    free_barrier.wait();
                    let c = Instant::now();
                    let handles = handles?;
                    for &h in &handles {
                        pool.free(h)?;
                    }
                    Ok((handles.len(), [a, b, c, Instant::now()]))
                })
            })
            .collect();
        let mut objects = 0;
        let mut times = Vec::new();
        for w in workers {
            let (n, t) = w
                .join()
                .map_err(|_| CliError::Usage("a bench thread panicked".into()))??;
            objects += n;
            times.push(t);
        }
        let first = |i: usize| times.iter().map(|t| t[i]).min().expect("threads >= 1");
        let last = |i: usize| times.iter().map(|t| t[i]).max().expect("threads >= 1");
        let frees_start = first(2);
        pool.flush();
        let flushed = frees_start.elapsed();
        wait_returned(&pool)?;
        Ok(Run {
            store: last(1) - first(0),
            free: last(3) - frees_start,
            flushed,
            returned: frees_start.elapsed(),
            objects,
        })
    })?;
    let s = pool.stats();
    if s.objects != 0 || s.pages_held != 0 {
        return Err(CliError::Usage(format!(
            "after freeing everything the pool still holds {} objects in {} pages",
            s.objects, s.pages_held
        )));
    }
    Ok(results)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn latency(
    (mode, placement): (FreeMode, Placement),
    sizes: &[usize],
    bytes: usize,
) -> CliResult<(Histogram<u64>, u64)> {
    let pool = pool(mode, placement)?;
    let handles = fill(&pool, sizes, 0, bytes)?;
    let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let mut clock = Vec::with_capacity(1001);
    for _ in 0..1001 {
        let t = Instant::now();
        clock.push(t.elapsed().as_nanos() as u64);
    }
    clock.sort_unstable();
    for &x in &handles {
        let t = Instant::now();
        pool.free(x)?;
        h.saturating_record(t.elapsed().as_nanos() as u64);
    }
    pool.flush();
    Ok((h, clock[clock.len() / 2]))
}

/// Run `zsmem bench free`.
pub fn bench_free(a: &FreeBenchArgs) -> CliResult {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = if a.threads.is_empty() {
        [1, 2, 4]
            .into_iter()
            .filter(|&n| n == 1 || n <= cores)
            .collect()
    } else {
        a.threads.clone()
    };
    if !(1..=1 << 20).contains(&a.mib)
        || a.repeats == 0
        || threads.iter().any(|&n| n == 0 || n > 256)
    {
        return Err(CliError::Usage(
            "--mib must be 1..=1048576, --repeats at least 1, --threads 1..=256".into(),
        ));
    }
    // Every thread holds its --mib at once: refused up front where that
    // passes the limit the other commands' inputs have (50 GiB a thread
    // grew towards the OOM killer).
    let most = threads.iter().max().copied().unwrap_or(1);
    crate::units::within_memory(
        &format!("--mib {} at {most} threads", a.mib),
        (a.mib as u128 * most as u128) << 20,
        "objects at once",
        zsmem_lab::corpus::default_input_limit(),
    )?;
    let sizes = object_sizes(a.seed);
    let bytes = a.mib << 20;
    let bar = crate::progress::bar(
        (threads.len() * MODES.len() * a.repeats) as u64,
        "bench free",
        "runs",
    );
    let mut figures = Vec::new();
    for &n in &threads {
        for (name, mode, placement) in MODES {
            bar.set_prefix(format!("{name} x{n}"));
            let mut runs = Vec::new();
            for _ in 0..a.repeats {
                runs.push(run_once((mode, placement), n, &sizes, bytes)?);
                bar.inc(1);
            }
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            let objects = runs[0].objects;
            let free_ms = median(runs.iter().map(|r| ms(r.free)).collect());
            let store_ms = median(runs.iter().map(|r| ms(r.store)).collect());
            figures.push(FreeFigure {
                mode: name.into(),
                threads: n,
                objects_per_thread: objects / n,
                free_ms,
                until_flushed_ms: matches!(mode, FreeMode::Deferred { .. })
                    .then(|| median(runs.iter().map(|r| ms(r.flushed)).collect())),
                until_os_ms: median(runs.iter().map(|r| ms(r.returned)).collect()),
                store_ms,
                alloc_free_mops: objects as f64 / ((free_ms + store_ms) * 1e3),
            });
        }
    }
    bar.set_prefix("latency");
    let mut lat = Vec::new();
    for (name, mode, placement) in MODES {
        let (h, clock_ns) = latency((mode, placement), &sizes, bytes)?;
        lat.push(FreeLatency {
            mode: name.into(),
            p50_ns: h.value_at_quantile(0.5),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            clock_ns,
        });
    }
    bar.finish_and_clear();
    let result = FreeBench {
        figures,
        latency: lat,
    };
    match a.format {
        crate::output::Format::Json => crate::output::print_json(&result)?,
        crate::output::Format::Csv => crate::output::print_serialized(&result.figures)?,
        crate::output::Format::Table => print_table(&result, a, &threads, sizes.len())?,
    }
    Ok(())
}

/// `mode`'s cell at `n` threads.
fn cell<'a>(r: &'a FreeBench, mode: &str, n: usize) -> &'a FreeFigure {
    r.figures
        .iter()
        .find(|f| f.mode == mode && f.threads == n)
        .expect("every cell was measured")
}

/// How many times faster than Base a mode freed: Base's time over the
/// mode's (above 1x the mode is faster).
fn speed_up(base_ms: f64, mode_ms: f64) -> f64 {
    base_ms / mode_ms
}

/// The first table: each mode's free time at each thread count, and each
/// mode's speed-up over Base.
fn free_time_table(r: &FreeBench, threads: &[usize]) -> comfy_table::Table {
    let mut head = vec!["threads".to_string()];
    head.extend(MODES.iter().map(|(name, ..)| format!("{name}\nms")));
    head.extend(
        MODES[1..]
            .iter()
            .map(|(name, ..)| format!("{name}\nspeed-up\nvs Base")),
    );
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    let mut t = crate::output::table(&head, 1);
    for &n in threads {
        let base = cell(r, MODES[0].0, n).free_ms;
        let label = if n == 1 {
            "single".to_string()
        } else {
            format!("multi {n}p")
        };
        let mut row = vec![label];
        row.extend(
            MODES
                .iter()
                .map(|(name, ..)| format!("{:.1}", cell(r, name, n).free_ms)),
        );
        row.extend(
            MODES[1..]
                .iter()
                .map(|(name, ..)| format!("{:.2}x", speed_up(base, cell(r, name, n).free_ms))),
        );
        t.add_row(row);
    }
    t
}

fn print_table(r: &FreeBench, a: &FreeBenchArgs, threads: &[usize], nsizes: usize) -> CliResult {
    let cell = |mode: &str, n: usize| cell(r, mode, n);
    outln!(
        "bench free: each thread stores {} MiB of objects (lz4 sizes of {nsizes} corpus pages), \
         then all free at once; median of {} runs, compaction off",
        a.mib,
        a.repeats
    );
    outln!(
        "time until the last thread's frees return (speed-up vs Base: Base's time over the \
         mode's; above 1x the mode frees faster):"
    );
    outln!("{}", free_time_table(r, threads));
    outln!();
    let mut t = crate::output::table(
        &[
            "mode",
            "threads",
            "objects",
            "free\nms",
            "x vs\n1 thread",
            "until\nflushed ms",
            "until\nOS ms",
            "alloc+free\nMops/s",
        ],
        1,
    );
    for f in &r.figures {
        let one = cell(&f.mode, threads[0]);
        // Free throughput relative to the first thread count: N threads
        // free N times the objects.
        let scaling = (f.threads as f64 / one.threads as f64) * one.free_ms / f.free_ms;
        t.add_row(vec![
            f.mode.clone(),
            f.threads.to_string(),
            (f.objects_per_thread * f.threads).to_string(),
            format!("{:.1}", f.free_ms),
            format!("{scaling:.2}x"),
            f.until_flushed_ms
                .map_or("-".to_string(), |m| format!("{m:.1}")),
            format!("{:.1}", f.until_os_ms),
            format!("{:.2}", f.alloc_free_mops),
        ]);
    }
    outln!("{t}");
    outln!();
    outln!(
        "per-free latency, 1 thread, {} MiB (clock reading included):",
        a.mib
    );
    for l in &r.latency {
        outln!(
            "  {:<14} p50 {:>6} ns  p99 {:>6} ns  p99.9 {:>7} ns   (clock pair: {} ns)",
            l.mode,
            l.p50_ns,
            l.p99_ns,
            l.p999_ns,
            l.clock_ns
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(mode: &str, free_ms: f64) -> FreeFigure {
        FreeFigure {
            mode: mode.into(),
            threads: 1,
            objects_per_thread: 1,
            free_ms,
            until_flushed_ms: None,
            until_os_ms: 0.0,
            store_ms: 1.0,
            alloc_free_mops: 1.0,
        }
    }

    /// ClassIdx-only freeing in half Base's time is a 2x speed-up (the
    /// column used to be headed "ClassIdx/Base" over Base/ClassIdx), and
    /// Log has its columns too.
    #[test]
    fn the_first_table_shows_each_mode_s_speed_up_over_base() {
        let r = FreeBench {
            figures: vec![
                figure("Base", 2.0),
                figure("ClassIdx-only", 1.0),
                figure("Deferred", 4.0),
                figure("Log", 0.5),
            ],
            latency: Vec::new(),
        };
        let text = free_time_table(&r, &[1]).to_string();
        assert!(text.contains("speed-up") && text.contains("Log"), "{text}");
        let row = text.lines().find(|l| l.starts_with("single")).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "single", "2.0", "1.0", "4.0", "0.5", "2.00x", "0.50x", "4.00x"
            ],
            "{text}"
        );
    }
}
