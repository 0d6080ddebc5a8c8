//! `zsmem bench pool --threads 1,2,..`: the pool's alloc+write+free and
//! read at several thread counts, beside mimalloc and the system allocator.
//! zsmem's threads share one `Pool` (the way a multi-threaded store uses
//! it); each heap thread has its own contestant over the one process-wide
//! allocator (the way threads of a program share malloc). Every thread
//! keeps its own ring of live objects; the time is from the common start to
//! the last thread's end, reported as ns per operation per thread, so a
//! perfectly scaling contestant shows the same figure at every count.

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use serde::Serialize;
use zsmem::{Handle, Pool, PoolConfig};
use zsmem_lab::contestants::objects::make_object_contestant;

use super::ring::Ring;
use crate::{CliError, CliResult};

/// One figure: a contestant at an object size and a thread count.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadFigure {
    /// Object size in bytes.
    pub size: usize,
    /// `zsmem`, `mimalloc` or `system`.
    pub contestant: String,
    /// Threads working at once.
    pub threads: usize,
    /// Median ns per alloc+write+free, per thread (wall time x threads /
    /// operations).
    pub churn_ns: f64,
    /// Median ns per read (copy out), per thread.
    pub read_ns: f64,
}

/// The work of one thread: fill, then per repeat a timed churn and a timed
/// read, each started together with the other threads.
struct Phases<'a> {
    threads: usize,
    repeats: usize,
    start: &'a Barrier,
}

/// When a thread started and ended a phase.
type Span = (Instant, Instant);

impl Phases<'_> {
    /// Wait for the other threads, run `f`; when it started and ended, by
    /// this thread's clock (a thread that waits for a CPU after the
    /// barrier counts from when it ran, not from when another woke).
    fn step(&self, f: impl FnOnce()) -> Span {
        self.start.wait();
        let t = Instant::now();
        f();
        (t, Instant::now())
    }
}

/// A phase's time over all threads: first start to last end.
fn phase(spans: impl Iterator<Item = Span> + Clone) -> Duration {
    let first = spans.clone().map(|s| s.0).min().expect("threads >= 1");
    let last = spans.map(|s| s.1).max().expect("threads >= 1");
    last - first
}

/// Time `repeats` rounds of (churn, read) on `threads` threads; `make`
/// builds a thread's worker, whose `churn(n)` and `read(n)` do n ops.
fn measure<W>(
    threads: usize,
    repeats: usize,
    ops: usize,
    make: impl Fn() -> CliResult<W> + Sync,
) -> CliResult<(f64, f64)>
where
    W: Worker,
{
    let start = Barrier::new(threads);
    let ph = Phases {
        threads,
        repeats,
        start: &start,
    };
    let (churn, read) = std::thread::scope(|s| -> CliResult<(Vec<f64>, Vec<f64>)> {
        let workers: Vec<_> = (0..ph.threads)
            .map(|_| {
                let (ph, make) = (&ph, &make);
                s.spawn(move || -> CliResult<Vec<(Span, Span)>> {
                    let mut w = make()?;
                    let mut ends = Vec::new();
                    for _ in 0..ph.repeats {
                        let a = ph.step(|| w.churn(ops));
                        let b = ph.step(|| w.read(ops));
                        ends.push((a, b));
                    }
                    w.finish();
                    Ok(ends)
                })
            })
            .collect();
        let mut ends: Vec<Vec<(Span, Span)>> = Vec::new();
        for w in workers {
            ends.push(
                w.join()
                    .map_err(|_| CliError::Usage("a bench thread panicked".into()))??,
            );
        }
        let per_op = |d: Duration| d.as_nanos() as f64 / ops as f64;
        let mut churn = Vec::new();
        let mut read = Vec::new();
        for r in 0..repeats {
            churn.push(per_op(phase(ends.iter().map(|e| e[r].0))));
            read.push(per_op(phase(ends.iter().map(|e| e[r].1))));
        }
        Ok((churn, read))
    })?;
    Ok((median(churn), median(read)))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// What a thread does.
trait Worker {
    fn churn(&mut self, n: usize);
    fn read(&mut self, n: usize);
    fn finish(self);
}

/// A thread's ring over the shared pool.
struct PoolWorker<'a> {
    pool: &'a Pool,
    ring: Vec<Handle>,
    next: usize,
    data: Vec<u8>,
    buf: Vec<u8>,
    x: u64,
}

impl Worker for PoolWorker<'_> {
    fn churn(&mut self, n: usize) {
        for _ in 0..n {
            let slot = &mut self.ring[self.next];
            self.pool.free(*slot).expect("benchmark free");
            *slot = self
                .pool
                .store(black_box(&self.data))
                .expect("benchmark store");
            self.next = (self.next + 1) % self.ring.len();
        }
    }

    fn read(&mut self, n: usize) {
        for _ in 0..n {
            self.x ^= self.x << 13;
            self.x ^= self.x >> 7;
            self.x ^= self.x << 17;
            let h = self.ring[(self.x % self.ring.len() as u64) as usize];
            self.pool.read(h, &mut self.buf).expect("benchmark read");
            black_box(&self.buf);
        }
    }

    fn finish(self) {
        for h in self.ring {
            self.pool.free(h).expect("benchmark free");
        }
    }
}

/// A thread's ring over its own heap contestant.
struct HeapWorker {
    store: Box<dyn zsmem_lab::contestants::ObjectContestant>,
    ring: Ring,
    buf: Vec<u8>,
}

impl Worker for HeapWorker {
    fn churn(&mut self, n: usize) {
        self.ring.churn(self.store.as_mut(), n);
    }

    fn read(&mut self, n: usize) {
        self.ring.read(self.store.as_mut(), n, &mut self.buf);
    }

    fn finish(mut self) {
        self.ring.drain(self.store.as_mut());
    }
}

/// Every contestant at every size and thread count.
pub fn pool_threads(
    sizes: &[usize],
    threads: &[usize],
    live: usize,
    ops: usize,
    repeats: usize,
) -> CliResult<Vec<ThreadFigure>> {
    let mut out = Vec::new();
    for &size in sizes {
        for &n in threads {
            for (contestant, cfg) in [
                ("zsmem", PoolConfig::log()),
                ("zsmem-classes", PoolConfig::default()),
            ] {
                let pool = Pool::new(cfg)?;
                let data: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
                let (c, r) = measure(n, repeats, ops, || {
                    let ring = (0..live)
                        .map(|_| pool.store(&data))
                        .collect::<Result<Vec<_>, _>>()?;
                    Ok(PoolWorker {
                        pool: &pool,
                        ring,
                        next: 0,
                        data: data.clone(),
                        buf: vec![0; size],
                        x: 0x2545_F491_4F6C_DD1D,
                    })
                })?;
                out.push(ThreadFigure {
                    size,
                    contestant: contestant.into(),
                    threads: n,
                    churn_ns: c,
                    read_ns: r,
                });
            }
            for name in ["mimalloc", "system"] {
                let (c, r) = measure(n, repeats, ops, || {
                    let mut store =
                        make_object_contestant(name).map_err(|e| CliError::Usage(e.to_string()))?;
                    let ring = Ring::try_fill(store.as_mut(), live, size)?;
                    Ok(HeapWorker {
                        store,
                        ring,
                        buf: Vec::with_capacity(size),
                    })
                })?;
                out.push(ThreadFigure {
                    size,
                    contestant: name.into(),
                    threads: n,
                    churn_ns: c,
                    read_ns: r,
                });
            }
            eprintln!("  measured {size} bytes at {n} threads");
        }
    }
    Ok(out)
}

/// The figures as a table, with ratios to mimalloc at the same size and
/// thread count.
pub fn print(figures: &[ThreadFigure], live: usize, ops: usize, repeats: usize) -> CliResult {
    outln!(
        "bench pool --threads: {live} live objects and {ops} ops per thread per run, median of \
         {repeats} runs; ns per op per thread (wall time x threads / ops: equal figures at every \
         thread count mean perfect scaling)"
    );
    outln!(
        "{:>6} {:>7}  {:<13} {:>14} {:>8} {:>10} {:>8}",
        "size",
        "threads",
        "contestant",
        "alloc+wr+free",
        "vs mi",
        "read",
        "vs mi"
    );
    for f in figures {
        let mi = figures
            .iter()
            .find(|m| m.contestant == "mimalloc" && m.size == f.size && m.threads == f.threads)
            .expect("mimalloc runs at every cell");
        outln!(
            "{:>6} {:>7}  {:<13} {:>11.1} ns {:>7.2}x {:>7.1} ns {:>7.2}x",
            f.size,
            f.threads,
            f.contestant,
            f.churn_ns,
            f.churn_ns / mi.churn_ns,
            f.read_ns,
            f.read_ns / mi.read_ns
        );
    }
    Ok(())
}
