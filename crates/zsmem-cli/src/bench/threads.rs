//! `zsmem bench store --threads 1,2,..`: store and load throughput at each
//! thread count, for zsmem's `PageStore` (one store shared by the threads),
//! the kernel's zram (a private device; each thread its own `O_DIRECT` file
//! descriptor, one 4 KiB `pwrite`/`pread` per page) and the codec alone
//! (compress into, and decompress from, per-thread buffers): the floor
//! under both. Each thread stores and loads its own slots (page `i` goes to
//! thread `i % threads`), every loaded page is compared with the original,
//! and the time is from the moment all threads start until the last ends.
//!
//! With `--churn X`, each run goes on after the load with a churn phase
//! of `X` times as many calls as there are pages, split among the threads:
//! each thread's calls come from the lab's churn workload
//! ([`ChurnCalls`], its default shares: 80% writes of a random page of the
//! input, a quarter of them rewriting the slot discarded longest ago, the
//! others overwriting a random slot; 20% discards of a stored slot) over
//! the thread's own slots, drawn before the clock starts, the same calls
//! for every contestant and repeat. The phase is timed as the others and
//! reported as MB/s of pages written (a discard takes time, writes no
//! bytes) and as a ratio to the codec alone's (which compresses each page
//! written into its slot of a per-thread buffer made before the clock: no
//! allocation in its timed loops). Every slot is read back and checked
//! after it, untimed. zsmem runs twice then: with the pool `--pool` names
//! (the page store's default placement unless told) and with zsmem's
//! classes. Each repeat runs every contestant once, in turn.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use serde::Serialize;
use zsmem::{Codec, PageStore, PageStoreConfig, PoolConfig};
use zsmem_lab::contestants::kernel_zram::{KernelZram, ZramConfig, ZramError, discard_pages};
use zsmem_lab::corpus::{PAGE_SIZE, Page};
use zsmem_lab::workloads::churn::{Churn, ChurnCall, ChurnCalls};

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
    /// Churn throughput (`--churn`): MB/s of pages written by the churn's
    /// calls (its discards take time, write no bytes), median.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub churn_mb_s: Option<f64>,
    /// That over the codec alone's at the same thread count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub churn_x_codec: Option<f64>,
}

/// A run's phases: the fill (store), the load, and the churn if asked for.
struct Phases {
    store: Duration,
    load: Duration,
    churn: Option<Duration>,
}

/// The churn phase's calls at one thread count, drawn before any clock
/// starts: per thread, `(slot, Some(page))` for a write of page `page` to
/// slot `slot` and `(slot, None)` for a discard (slots and pages are the
/// run's own numbers: thread `t` has slots `t, t + threads, ..`).
pub struct ChurnPlan {
    calls: Vec<Vec<(usize, Option<usize>)>>,
    /// The page each slot holds after the churn (`None`: discarded).
    last: Vec<Option<usize>>,
    /// Pages written by the calls.
    writes: usize,
}

impl ChurnPlan {
    /// After the churn, every slot still holding a page reads back as that
    /// page: `read` fills the slot's bytes into the buffer it is given.
    fn check(
        &self,
        pages: &[&[u8]],
        who: &str,
        mut read: impl FnMut(usize, &mut [u8]) -> CliResult<()>,
    ) -> CliResult<()> {
        let mut buf = vec![0u8; page_len(pages)];
        for (slot, page) in self.last.iter().enumerate() {
            if let Some(p) = *page {
                read(slot, &mut buf)?;
                if buf[..] != pages[p][..] {
                    return Err(wrong(&format!("{who} after the churn"), slot));
                }
            }
        }
        Ok(())
    }
}

/// The calls of a churn of `calls` calls over `pages` slots and pages, at
/// `threads` threads.
pub fn churn_plan(pages: usize, threads: usize, calls: u64) -> CliResult<ChurnPlan> {
    let lab = |e: zsmem_lab::contestants::LabError| CliError::Usage(format!("churn: {e}"));
    let n = u32::try_from(pages).map_err(|_| CliError::Usage("churn: too many pages".into()))?;
    let mut plan = ChurnPlan {
        calls: Vec::with_capacity(threads),
        last: (0..pages).map(Some).collect(),
        writes: 0,
    };
    let threads64 = threads as u64;
    for t in 0..threads {
        let slots = pages.saturating_sub(t).div_ceil(threads);
        let mine = calls / threads64 + u64::from((t as u64) < calls % threads64);
        let mut list = Vec::with_capacity(mine as usize);
        if slots > 0 {
            let mut drawn =
                ChurnCalls::new(&Churn::default(), slots, n, 1 + t as u64).map_err(lab)?;
            for k in 0..slots as u64 {
                drawn.fill(k);
            }
            for _ in 0..mine {
                let (slot, page) = match drawn.next_call() {
                    ChurnCall::Write { slot, page } => (slot, Some(page as usize)),
                    ChurnCall::Discard { slot } => (slot, None),
                };
                let slot = t + slot as usize * threads;
                plan.writes += usize::from(page.is_some());
                plan.last[slot] = page;
                list.push((slot, page));
            }
        }
        plan.calls.push(list);
    }
    Ok(plan)
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
    churn: Option<&ChurnPlan>,
) -> CliResult<Phases> {
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
    let churn = match churn {
        None => None,
        Some(plan) => {
            let c = timed(threads, |t| {
                for &(slot, page) in &plan.calls[t] {
                    match page {
                        Some(p) => store.write(slot, pages[p])?,
                        None => store.discard(slot, 1)?,
                    }
                }
                Ok(())
            })?;
            plan.check(pages, "zsmem", |slot, buf| {
                store.read(slot, buf)?;
                Ok(())
            })?;
            Some(c)
        }
    };
    Ok(Phases {
        store: w,
        load: r,
        churn,
    })
}

/// One page, aligned for `O_DIRECT`.
#[repr(C, align(4096))]
struct Aligned([u8; PAGE_SIZE]);

/// The kernel's store and load times at `threads`, on `dev`.
fn kernel_run(
    dev: &KernelZram,
    pages: &[&Page],
    threads: usize,
    churn: Option<&ChurnPlan>,
) -> CliResult<Phases> {
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
    let churn = match churn {
        None => None,
        Some(plan) => {
            let c = timed(threads, |t| {
                let mut page = Box::new(Aligned([0; PAGE_SIZE]));
                for &(slot, p) in &plan.calls[t] {
                    match p {
                        Some(p) => {
                            page.0.copy_from_slice(pages[p]);
                            files[t]
                                .write_all_at(&page.0, (slot * PAGE_SIZE) as u64)
                                .map_err(io)?;
                        }
                        None => discard_pages(&files[t], slot as u64, 1).map_err(io)?,
                    }
                }
                Ok(())
            })?;
            let mut page = Box::new(Aligned([0; PAGE_SIZE]));
            plan.check(pages, "kernel zram", |slot, buf| {
                // O_DIRECT: read into the aligned page, then copy.
                files[0]
                    .read_exact_at(&mut page.0, (slot * PAGE_SIZE) as u64)
                    .map_err(io)?;
                buf.copy_from_slice(&page.0[..buf.len()]);
                Ok(())
            })?;
            Some(c)
        }
    };
    Ok(Phases {
        store: w,
        load: r,
        churn,
    })
}

/// Thread `t`'s compressed pages in the codec alone's runs: page-sized
/// slots in one buffer made and touched before any clock starts, so that
/// the timed loops hold the codec and one copy, no allocation (a `Vec` per
/// page put glibc's arena locks into the timed path: with two threads half
/// of the run's context switches were frees waiting on the other thread's
/// arena).
struct Flat {
    bytes: Vec<u8>,
    /// Each slot's length (the page's length: kept raw).
    lens: Vec<usize>,
    page: usize,
}

impl Flat {
    fn new(slots: usize, page: usize) -> Flat {
        Flat {
            // Not zeros: a zeroed allocation may be pages never touched,
            // whose first-touch faults would land in the timed loop.
            bytes: vec![0xA5; slots * page],
            lens: vec![0; slots],
            page,
        }
    }

    /// Compress `data` into slot `k` (raw if it does not shrink).
    fn put(&mut self, k: usize, data: &[u8], codec: Codec) {
        let out = &mut self.bytes[k * self.page..(k + 1) * self.page];
        self.lens[k] = match codec.compress(data, out) {
            Some(n) if n < self.page => n,
            _ => {
                out.copy_from_slice(data);
                self.page
            }
        };
    }

    /// Slot `k`'s page into `buf`.
    fn get(&self, k: usize, buf: &mut [u8], codec: Codec) -> CliResult<()> {
        let kept = &self.bytes[k * self.page..k * self.page + self.lens[k]];
        if kept.len() == buf.len() {
            buf.copy_from_slice(kept);
        } else {
            codec.decompress(kept, buf)?;
        }
        Ok(())
    }
}

/// The codec alone at `threads`: compress every page, then decompress.
fn codec_run(
    pages: &[&Page],
    codec: Codec,
    threads: usize,
    churn: Option<&ChurnPlan>,
) -> CliResult<Phases> {
    let page = page_len(pages);
    let compressed: Vec<std::sync::Mutex<Flat>> = (0..threads)
        .map(|t| {
            std::sync::Mutex::new(Flat::new(
                pages.len().saturating_sub(t).div_ceil(threads),
                page,
            ))
        })
        .collect();
    let w = timed(threads, |t| {
        let mut mine = compressed[t].lock().unwrap_or_else(|e| e.into_inner());
        for (k, i) in (t..pages.len()).step_by(threads).enumerate() {
            mine.put(k, pages[i], codec);
        }
        Ok(())
    })?;
    let r = timed(threads, |t| {
        let mine = compressed[t].lock().unwrap_or_else(|e| e.into_inner());
        let mut buf = vec![0u8; page];
        for (k, i) in (t..pages.len()).step_by(threads).enumerate() {
            mine.get(k, &mut buf, codec)?;
            if buf[..] != pages[i][..] {
                return Err(wrong("the codec", i));
            }
        }
        Ok(())
    })?;
    let churn = match churn {
        None => None,
        Some(plan) => {
            let c = timed(threads, |t| {
                let mut mine = compressed[t].lock().unwrap_or_else(|e| e.into_inner());
                for &(slot, p) in &plan.calls[t] {
                    // Thread t's k-th slot is slot t + k * threads.
                    let k = slot / threads;
                    match p {
                        Some(p) => mine.put(k, pages[p], codec),
                        None => mine.lens[k] = 0,
                    }
                }
                Ok(())
            })?;
            plan.check(pages, "the codec", |slot, buf| {
                compressed[slot % threads]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(slot / threads, buf, codec)
            })?;
            Some(c)
        }
    };
    Ok(Phases {
        store: w,
        load: r,
        churn,
    })
}

/// One contestant's run at a thread count.
type Run<'a> = Box<dyn Fn() -> CliResult<Phases> + 'a>;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Every contestant at every thread count, `repeats` times each (medians):
/// zsmem with each of `pools` (name, configuration), the kernel's zram
/// unless `no_kernel` or it is unavailable (the reason is returned), the
/// codec alone; with a churn phase of `churn` calls after the fill and the
/// load if given.
pub fn store_threads(
    pages: &[&Page],
    codec: Codec,
    pools: &[(&str, PoolConfig)],
    threads: &[usize],
    repeats: usize,
    no_kernel: bool,
    churn: Option<u64>,
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
    let mut rows: Vec<ThreadRow> = Vec::new();
    for &n in threads {
        let plan = churn.map(|c| churn_plan(pages.len(), n, c)).transpose()?;
        let plan = plan.as_ref();
        let first = rows.len();
        // Every contestant once per repeat, in turn (a drift of the
        // machine's speed then reaches all alike), medians at the end.
        let mut runs: Vec<(&str, Run<'_>)> = Vec::new();
        for (name, pool) in pools {
            runs.push((
                name,
                Box::new(move || zsmem_run(pages, codec, pool, n, plan)),
            ));
        }
        if let Some(k) = &kernel {
            runs.push((
                "kernel-zram",
                Box::new(move || kernel_run(k, pages, n, plan)),
            ));
        }
        runs.push((
            "codec-alone",
            Box::new(move || codec_run(pages, codec, n, plan)),
        ));
        let mut figures = vec![(Vec::new(), Vec::new(), Vec::new()); runs.len()];
        for _ in 0..repeats {
            for ((_, run), (st, ld, ch)) in runs.iter().zip(&mut figures) {
                let p = run()?;
                st.push(mb_s(pages.len() * page, p.store));
                ld.push(mb_s(pages.len() * page, p.load));
                if let (Some(c), Some(plan)) = (p.churn, plan) {
                    ch.push(mb_s(plan.writes * page, c));
                }
            }
        }
        for ((name, _), (st, ld, ch)) in runs.iter().zip(figures) {
            rows.push(ThreadRow {
                contestant: (*name).into(),
                threads: n,
                store_mb_s: median(st),
                load_mb_s: median(ld),
                churn_mb_s: (!ch.is_empty()).then(|| median(ch)),
                churn_x_codec: None,
            });
        }
        let codec_churn = rows.last().and_then(|r| r.churn_mb_s);
        for r in &mut rows[first..] {
            r.churn_x_codec = r.churn_mb_s.zip(codec_churn).map(|(x, c)| x / c);
        }
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
    /// Calls of the churn phase at each thread count (`--churn`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub churn_calls: Option<u64>,
}

/// The rows as a table, with each contestant's scaling over its first
/// thread count and zsmem's ratios to the others.
pub fn print_rows(rows: &[ThreadRow]) -> CliResult {
    let find = |c: &str, n: usize| rows.iter().find(|r| r.contestant == c && r.threads == n);
    outln!(
        "{:<14} {:>7} {:>11} {:>11} {:>10} {:>10} {:>12} {:>12}",
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
        outln!(
            "{:<14} {:>7} {:>11.1} {:>11.1} {:>9.2}x {:>9.2}x {:>12.2}x {:>12.2}x",
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
    Ok(())
}

/// The churn phase's rows (`--churn`): each contestant's MB/s of pages
/// written and its ratio to the codec alone at the same thread count.
pub fn print_churn_rows(rows: &[ThreadRow], calls: u64) -> CliResult {
    outln!();
    outln!(
        "churn phase: {calls} calls after the fill at each thread count (80% writes of a random \
         page, 20% discards, rewritten later); MB/s of pages written"
    );
    outln!(
        "{:<14} {:>7} {:>11} {:>14}",
        "contestant",
        "threads",
        "churn MB/s",
        "x codec-alone"
    );
    for r in rows {
        let (Some(mb_s), Some(x)) = (r.churn_mb_s, r.churn_x_codec) else {
            continue;
        };
        outln!(
            "{:<14} {:>7} {:>11.1} {:>13.2}x",
            r.contestant,
            r.threads,
            mb_s,
            x
        );
    }
    Ok(())
}
