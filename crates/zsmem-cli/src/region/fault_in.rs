//! Fault-in latency, stored size and CPU by unit size: a region filled
//! with real documents, all evicted, then each unit touched once, the
//! touch timed from the access to its return in the touching thread.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use zsmem::Codec;
use zsmem::region::{FaultMode, Region, RegionConfig};

use crate::CliResult;

/// One unit size's figures.
#[derive(Debug, serde::Serialize)]
pub struct UnitFigures {
    /// Unit size in bytes.
    pub unit: usize,
    /// Touch of an evicted unit, access to return, ns: p50, p99, p99.9.
    pub fault_in_ns: [u64; 3],
    /// The service time (the fault thread's read to wake, or the signal
    /// handler's entry to return), ns: p50, p99.
    pub service_ns: [u64; 2],
    /// Stored bytes over data bytes.
    pub stored_ratio: f64,
    /// Memory the store holds (all in) over the compressed bytes, less 1.
    pub store_overhead: f64,
    /// Compression (and store) time per unit, ns.
    pub compress_ns: f64,
    /// Decompression (and store read) time per unit, ns.
    pub decompress_ns: f64,
    /// How fast the evictor thread brought resident memory down to a
    /// quarter (units written, so compressed), MiB/s.
    pub reclaim_mib_s: f64,
}

/// Measure one unit size over `data` (its length rounded down to units).
pub fn measure(
    data: &[u8],
    unit: usize,
    codec: Codec,
    faults: FaultMode,
) -> CliResult<UnitFigures> {
    let size = data.len() / unit * unit;
    let region = Region::new(RegionConfig {
        size,
        budget: size,
        unit,
        codec,
        faults,
        ..Default::default()
    })?;
    // SAFETY: the region's bytes are this thread's alone while it lives.
    let mem = unsafe { std::slice::from_raw_parts_mut(region.as_ptr(), region.len()) };
    mem.copy_from_slice(&data[..size]);

    // Budget restore: down to a quarter, by the evictor thread.
    let t = Instant::now();
    region.set_budget(size / 4)?;
    while region.stats().resident_bytes > (size / 4) as u64 && t.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_micros(200));
    }
    let reclaim_mib_s = (size - size / 4) as f64 / (1 << 20) as f64 / t.elapsed().as_secs_f64();
    region.set_budget(size)?;
    region.reclaim(0);
    // Everything evicted (dirty units compressed, clean ones dropped).
    let before = region.stats();

    let n = size / unit;
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut StdRng::seed_from_u64(7));
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
    let base = region.as_ptr();
    for &u in &order {
        let t = Instant::now();
        // SAFETY: inside the mapping; a volatile read so the touch happens.
        let b = unsafe { std::ptr::read_volatile(base.add(u * unit + 100)) };
        let ns = t.elapsed().as_nanos() as u64;
        std::hint::black_box(b);
        hist.record(ns.max(1)).ok();
    }
    let s = region.stats();
    let compressions = s.compressions.max(1) as f64;
    let promotions = (s.promotions - before.promotions).max(1) as f64;
    Ok(UnitFigures {
        unit,
        fault_in_ns: [0.5, 0.99, 0.999].map(|q| hist.value_at_quantile(q)),
        service_ns: [
            s.fault_latency.quantile(0.5),
            s.fault_latency.quantile(0.99),
        ],
        stored_ratio: before.stored_bytes as f64 / size as f64,
        store_overhead: before.store_memory as f64 / before.stored_bytes.max(1) as f64 - 1.0,
        compress_ns: s.compress_ns as f64 / compressions,
        decompress_ns: (s.decompress_ns - before.decompress_ns) as f64 / promotions,
        reclaim_mib_s,
    })
}
