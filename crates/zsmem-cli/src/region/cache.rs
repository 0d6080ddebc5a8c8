//! The document cache of `zsmem region`: documents laid out in memory,
//! served under a zipfian pattern with a share of updates, in plain memory
//! (all resident) or in a [`Region`] at a budget.

use std::time::Instant;
use zsmem_lab::workloads::churn::process_cpu;

use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use zsmem::region::{Region, RegionStats};

use super::docs::Zipf;

/// How the cache is driven.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Measured requests.
    pub ops: usize,
    /// Unmeasured requests first.
    pub warmup: usize,
    /// Zipf exponent.
    pub zipf: f64,
    /// Share of requests that update their document, in percent.
    pub write_percent: u32,
    /// Seed of the pattern (the same for every run).
    pub seed: u64,
}

/// What one run measured.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Outcome {
    /// Requests per second.
    pub ops_per_sec: f64,
    /// Request latency quantiles, ns: p50, p99, p99.9.
    pub latency_ns: [u64; 3],
    /// CPU seconds of the process (all threads) over the measured part.
    pub cpu_secs: f64,
    /// Fingerprint of everything served, to compare runs.
    pub served: u64,
    /// The region's statistics at the end (None for plain memory).
    #[serde(skip_deserializing)]
    pub stats: Option<RegionStats>,
}

/// Serve the workload from `mem`, which holds the documents at `spans`
/// (the caller copied them in). `region`, if given, owns `mem`.
pub fn run(
    mem: &mut [u8],
    spans: &[(usize, usize)],
    w: &Workload,
    region: Option<&Region>,
) -> Outcome {
    let zipf = Zipf::new(spans.len(), w.zipf);
    let mut rng = StdRng::seed_from_u64(w.seed);
    // Hot documents spread over the memory, not packed at its start.
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.shuffle(&mut rng);
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
    let mut served = 0u64;
    let mut out = Vec::with_capacity(1 << 20);
    let mut request = |rng: &mut StdRng, mem: &mut [u8], served: &mut u64| {
        let (off, len) = spans[order[zipf.sample(rng)]];
        let update = rng.random_range(0..100) < w.write_percent;
        let doc = &mut mem[off..off + len];
        if update {
            // An update: a version stamp over the document's first bytes.
            let stamp = rng.random::<u64>().to_le_bytes();
            let n = doc.len().min(8);
            doc[..n].copy_from_slice(&stamp[..n]);
        }
        out.clear();
        out.extend_from_slice(doc);
        *served = served.rotate_left(5).wrapping_add(
            out.iter()
                .fold(len as u64, |a, &b| a.wrapping_mul(31) ^ b as u64),
        );
    };
    for _ in 0..w.warmup {
        request(&mut rng, mem, &mut served);
    }
    let cpu = process_cpu();
    let t0 = Instant::now();
    for _ in 0..w.ops {
        let t = Instant::now();
        request(&mut rng, mem, &mut served);
        hist.record(t.elapsed().as_nanos().max(1) as u64).ok();
    }
    let elapsed = t0.elapsed();
    let cpu_secs = (process_cpu() - cpu).as_secs_f64();
    Outcome {
        ops_per_sec: w.ops as f64 / elapsed.as_secs_f64(),
        latency_ns: [0.5, 0.99, 0.999].map(|q| hist.value_at_quantile(q)),
        cpu_secs,
        served,
        stats: region.map(Region::stats),
    }
}
