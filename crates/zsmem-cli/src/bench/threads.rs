//! `zsmem bench store --threads 1,2,..`: store and load throughput at each
//! thread count, for zsmem's `PageStore` (one store shared by the threads),
//! the kernel's zram (a private device; each thread its own `O_DIRECT` file
//! descriptor, one 4 KiB `pwrite`/`pread` per page) and the codec alone
//! (compress into, and decompress from, per-thread buffers): the floor
//! under both. Each thread stores and loads its own slots (page `i` goes to
//! thread `i % threads`), every loaded page is compared with the original,
//! and the time is from the moment all threads start until the last ends.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use serde::Serialize;
use zsmem::{Codec, PageStore, PageStoreConfig, PoolConfig};
use zsmem_lab::contestants::kernel_zram::{KernelZram, ZramConfig, ZramError};
use zsmem_lab::corpus::{PAGE_SIZE, Page};

/// Bytes per page of the run (every page has the tree's size).
fn page_len(pages: &[&Page]) -> usize {
    pages.first().map_or(PAGE_SIZE, |p| p.len())
}

use crate::{CliError, CliResult};

/// One row: a contestant at a thread count.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadRow {
    /// `zsmem`, `kernel-zram` or `codec-alone`.
    pub contestant: String,
    /// Threads storing (then loading) at once.
    pub threads: usize,
    /// Store throughput, MB/s of pages (10^6 bytes), median of the repeats.
    pub store_mb_s: f64,
    /// Load throughput, MB/s.
    pub load_mb_s: f64,
}

/// Run `work(thread, threads)` on `threads` threads at once; the wall time
/// from the first thread's start to the last one's end, each by the
/// thread's own clock (a thread that waits for a CPU after the barrier
/// counts from when it ran, not from when another woke).
fn timed<F>(threads: usize, work: F) -> CliResult<Duration>
where
    F: Fn(usize) -> CliResult + Sync,
{
    let start = Barrier::new(threads);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (start, work) = (&start, &work);
                s.spawn(move || -> CliResult<(Instant, Instant)> {
                    start.wait();
                    let t0 = Instant::now();
                    work(t)?;
                    Ok((t0, Instant::now()))
                })
            })
            .collect();
        let mut spans = Vec::new();
        for w in workers {
            spans.push(
                w.join()
                    .map_err(|_| CliError::Usage("a bench thread panicked".into()))??,
            );
        }
        let first = spans.iter().map(|s| s.0).min().expect("threads >= 1");
        let last = spans.iter().map(|s| s.1).max().expect("threads >= 1");
        Ok(last - first)
    })
}

fn mb_s(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64().max(1e-9)
}

fn wrong(who: &str, i: usize) -> CliError {
    CliError::Usage(format!("{who} returned wrong data for page {i}"))
}

/// zsmem's store and load times at `threads`.
fn zsmem_run(
    pages: &[&Page],
    codec: Codec,
    pool: &PoolConfig,
    threads: usize,
) -> CliResult<(Duration, Duration)> {
    let store = PageStore::new(PageStoreConfig {
        slots: pages.len(),
        codec,
        pool: pool.clone(),
        ..Default::default()
    })?;
    let w = timed(threads, |t| {
        for i in (t..pages.len()).step_by(threads) {
            store.write(i, pages[i])?;
        }
        Ok(())
    })?;
    let r = timed(threads, |t| {
        let mut buf = vec![0u8; page_len(pages)];
        for i in (t..pages.len()).step_by(threads) {
            store.read(i, &mut buf)?;
            if buf[..] != pages[i][..] {
                return Err(wrong("zsmem", i));
            }
        }
        Ok(())
    })?;
    Ok((w, r))
}

/// One page, aligned for `O_DIRECT`.
#[repr(C, align(4096))]
struct Aligned([u8; PAGE_SIZE]);

/// The kernel's store and load times at `threads`, on `dev`.
fn kernel_run(
    dev: &KernelZram,
    pages: &[&Page],
    threads: usize,
) -> CliResult<(Duration, Duration)> {
    let open = || -> CliResult<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(dev.device_path())
            .map_err(|e| CliError::Usage(format!("kernel zram: open: {e}")))
    };
    let io = |e: std::io::Error| CliError::Usage(format!("kernel zram: {e}"));
    let files: Vec<File> = (0..threads).map(|_| open()).collect::<CliResult<_>>()?;
    let w = timed(threads, |t| {
        let mut page = Box::new(Aligned([0; PAGE_SIZE]));
        for i in (t..pages.len()).step_by(threads) {
            page.0.copy_from_slice(pages[i]);
            files[t]
                .write_all_at(&page.0, (i * PAGE_SIZE) as u64)
                .map_err(io)?;
        }
        Ok(())
    })?;
    let r = timed(threads, |t| {
        let mut page = Box::new(Aligned([0; PAGE_SIZE]));
        for i in (t..pages.len()).step_by(threads) {
            files[t]
                .read_exact_at(&mut page.0, (i * PAGE_SIZE) as u64)
                .map_err(io)?;
            if page.0[..] != pages[i][..] {
                return Err(wrong("kernel zram", i));
            }
        }
        Ok(())
    })?;
    Ok((w, r))
}

/// The codec alone at `threads`: compress every page, then decompress.
fn codec_run(pages: &[&Page], codec: Codec, threads: usize) -> CliResult<(Duration, Duration)> {
    let compressed: Vec<std::sync::Mutex<Vec<Vec<u8>>>> =
        (0..threads).map(|_| Default::default()).collect();
    let w = timed(threads, |t| {
        let mut out = Vec::new();
        let page = page_len(pages);
        let mut scratch = vec![0u8; page];
        for i in (t..pages.len()).step_by(threads) {
            // What does not compress is kept raw, as the stores keep it.
            match codec.compress(pages[i], &mut scratch) {
                Some(n) if n < page => out.push(scratch[..n].to_vec()),
                _ => out.push(pages[i].to_vec()),
            }
        }
        *compressed[t].lock().unwrap_or_else(|e| e.into_inner()) = out;
        Ok(())
    })?;
    let r = timed(threads, |t| {
        let mine = compressed[t].lock().unwrap_or_else(|e| e.into_inner());
        let mut buf = vec![0u8; page_len(pages)];
        for (k, i) in (t..pages.len()).step_by(threads).enumerate() {
            if mine[k].len() == buf.len() {
                buf.copy_from_slice(&mine[k]);
            } else {
                codec.decompress(&mine[k], &mut buf)?;
            }
            if buf[..] != pages[i][..] {
                return Err(wrong("the codec", i));
            }
        }
        Ok(())
    })?;
    Ok((w, r))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Every contestant at every thread count, `repeats` times each (medians).
/// The kernel's zram runs unless `no_kernel` or it is unavailable (the
/// reason is returned).
pub fn store_threads(
    pages: &[&Page],
    codec: Codec,
    pool: &PoolConfig,
    threads: &[usize],
    repeats: usize,
    no_kernel: bool,
) -> CliResult<(Vec<ThreadRow>, Option<String>)> {
    let algorithm = codec.kernel_name();
    let page = page_len(pages);
    let (kernel, skipped) = if no_kernel {
        (None, Some("--no-kernel".to_string()))
    } else if page != PAGE_SIZE {
        (
            None,
            Some(format!(
                "the kernel's zram takes {PAGE_SIZE}-byte pages here, not {page}"
            )),
        )
    } else {
        let cfg = ZramConfig {
            algorithm: algorithm.into(),
            disksize_bytes: (pages.len() * PAGE_SIZE) as u64,
            mem_limit_bytes: None,
        };
        match KernelZram::create(&cfg) {
            Ok(k) => (Some(k), None),
            Err(ZramError::Unavailable(why)) => (None, Some(why)),
            Err(e) => return Err(CliError::Usage(format!("kernel zram: {e}"))),
        }
    };
    let mut rows = Vec::new();
    for &n in threads {
        let mut add = |name: &str, run: &dyn Fn() -> CliResult<(Duration, Duration)>| {
            let mut st = Vec::new();
            let mut ld = Vec::new();
            for _ in 0..repeats {
                let (w, r) = run()?;
                st.push(mb_s(pages.len() * page, w));
                ld.push(mb_s(pages.len() * page, r));
            }
            rows.push(ThreadRow {
                contestant: name.into(),
                threads: n,
                store_mb_s: median(st),
                load_mb_s: median(ld),
            });
            CliResult::Ok(())
        };
        add("zsmem", &|| zsmem_run(pages, codec, pool, n))?;
        if let Some(k) = &kernel {
            add("kernel-zram", &|| kernel_run(k, pages, n))?;
        }
        add("codec-alone", &|| codec_run(pages, codec, n))?;
    }
    Ok((rows, skipped))
}

/// The threaded result, as `--format json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadBench {
    /// Where the pages came from.
    pub source: String,
    /// Codec of every contestant.
    pub codec: String,
    /// Pages stored and loaded at each thread count.
    pub pages: usize,
    /// Every contestant at every thread count.
    pub rows: Vec<ThreadRow>,
    /// Why the kernel's zram did not run.
    pub kernel_skipped: Option<String>,
}

/// The rows as a table, with each contestant's scaling over its first
/// thread count and zsmem's ratios to the others.
pub fn print_rows(rows: &[ThreadRow]) {
    let find = |c: &str, n: usize| rows.iter().find(|r| r.contestant == c && r.threads == n);
    println!(
        "{:<12} {:>7} {:>11} {:>11} {:>10} {:>10} {:>12} {:>12}",
        "contestant",
        "threads",
        "store MB/s",
        "load MB/s",
        "store x1",
        "load x1",
        "zsmem/this st",
        "zsmem/this ld"
    );
    for r in rows {
        let first = rows
            .iter()
            .find(|x| x.contestant == r.contestant)
            .expect("r itself");
        let z = find("zsmem", r.threads).expect("zsmem runs at every count");
        println!(
            "{:<12} {:>7} {:>11.1} {:>11.1} {:>9.2}x {:>9.2}x {:>12.2}x {:>12.2}x",
            r.contestant,
            r.threads,
            r.store_mb_s,
            r.load_mb_s,
            r.store_mb_s / first.store_mb_s,
            r.load_mb_s / first.load_mb_s,
            z.store_mb_s / r.store_mb_s,
            z.load_mb_s / r.load_mb_s,
        );
    }
}
