//! `zsmem region`: a real program on a [`Region`]: an in-memory cache of
//! documents read from this machine, served under a zipfian pattern, side
//! by side all resident (the speed limit) and in a region at several
//! budgets; then fault-in latency, stored size and CPU by unit size.
//!
//! The kernel's way (plain memory in a memory-limited cgroup swapping to
//! zram) is not run here yet: see the report's note.

mod cache;
mod docs;
mod fault_in;

use std::path::PathBuf;

use zsmem::Codec;
use zsmem::region::{Region, RegionConfig};

use crate::units::parse_size;
use crate::{CliError, CliResult};

/// Arguments of `zsmem region`.
#[derive(clap::Args, Debug, Clone)]
pub struct RegionArgs {
    /// Directory of documents (read recursively, files up to 1 MiB).
    #[arg(long, default_value = "/usr/include")]
    pub dir: PathBuf,
    /// Bytes of documents to load.
    #[arg(long, default_value = "96M", value_parser = parse_size)]
    pub data: usize,
    /// Budgets as fractions of the data, comma-separated (1/3 is a third).
    #[arg(long, default_value = "1/2,1/3,1/4,1/6")]
    pub budgets: String,
    /// Unit of the cache's region: 4K, 16K or 64K.
    #[arg(long, default_value = "4K", value_parser = parse_size)]
    pub unit: usize,
    /// Codec: lz4, or zstd / zstd:LEVEL.
    #[arg(long, default_value = "lz4")]
    pub codec: String,
    /// Measured requests per run.
    #[arg(long, default_value_t = 400_000)]
    pub ops: usize,
    /// Zipf exponent of the request pattern.
    #[arg(long, default_value_t = 0.99)]
    pub zipf: f64,
    /// Share of requests that update their document, percent.
    #[arg(long, default_value_t = 5)]
    pub write_percent: u32,
    /// Unit sizes for the fault-in measurement (empty: skip it).
    #[arg(long, default_value = "4K,16K,64K")]
    pub fault_units: String,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

fn fraction(s: &str) -> CliResult<f64> {
    let bad = || CliError::Usage(format!("budget {s:?} is not a fraction like 1/3 or 0.25"));
    let v = match s.split_once('/') {
        Some((a, b)) => {
            a.trim().parse::<f64>().map_err(|_| bad())?
                / b.trim().parse::<f64>().map_err(|_| bad())?
        }
        None => s.trim().parse::<f64>().map_err(|_| bad())?,
    };
    if !(v > 0.0 && v <= 1.0) {
        return Err(bad());
    }
    Ok(v)
}

fn mib(b: f64) -> f64 {
    b / (1 << 20) as f64
}

/// Run `zsmem region`.
pub fn run(a: &RegionArgs) -> CliResult {
    let codec = Codec::parse(&a.codec)?;
    let budgets: Vec<(String, f64)> = a
        .budgets
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| fraction(s).map(|f| (s.trim().to_string(), f)))
        .collect::<CliResult<_>>()?;
    let fault_units: Vec<usize> = a
        .fault_units
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| parse_size(s.trim()).map_err(CliError::Usage))
        .collect::<CliResult<_>>()?;
    let docs = docs::read(&a.dir, a.data)?;
    let data = docs.bytes.len();
    let w = cache::Workload {
        ops: a.ops,
        warmup: a.ops / 4,
        zipf: a.zipf,
        write_percent: a.write_percent,
        seed: 1,
    };
    if !a.json {
        println!(
            "documents: {} files, {:.1} MiB from {}; {} requests (zipf {}, {}% updates), unit {} B, codec {}",
            docs.spans.len(),
            mib(data as f64),
            a.dir.display(),
            a.ops,
            a.zipf,
            a.write_percent,
            a.unit,
            codec.name()
        );
        println!(
            "{:<14} {:>9} {:>10} {:>8} {:>8} {:>9} {:>10} {:>7} {:>9} {:>7} {:>8}",
            "run",
            "budget",
            "req/s",
            "p50 us",
            "p99 us",
            "p99.9 us",
            "held MiB",
            "CPU s",
            "faults",
            "promo",
            "x resid"
        );
    }
    let mut rows = Vec::new();
    let mut plain = vec![0u8; data];
    let resident = cache::run(&mut plain, &docs, &w, None);
    let print = |name: &str, budget: &str, o: &cache::Outcome, held: f64, base: f64| {
        let s = o.stats.as_ref();
        println!(
            "{:<14} {:>9} {:>10.0} {:>8.2} {:>8.2} {:>9.2} {:>10.1} {:>7.2} {:>9} {:>7.2} {:>8.2}",
            name,
            budget,
            o.ops_per_sec,
            o.latency_ns[0] as f64 / 1e3,
            o.latency_ns[1] as f64 / 1e3,
            o.latency_ns[2] as f64 / 1e3,
            held,
            o.cpu_secs,
            s.map_or(0, |s| s.faults),
            s.map_or(0.0, |s| s.promotion_rate()),
            base / o.ops_per_sec,
        );
    };
    if !a.json {
        print(
            "all resident",
            "-",
            &resident,
            mib(data as f64),
            resident.ops_per_sec,
        );
    }
    for (name, f) in &budgets {
        let budget = ((data as f64 * f) as usize).max(a.unit);
        let region = Region::new(RegionConfig {
            size: data,
            budget,
            unit: a.unit,
            codec,
            ..Default::default()
        })?;
        // SAFETY: the region's bytes are this thread's alone while it lives.
        let mem = unsafe { std::slice::from_raw_parts_mut(region.as_ptr(), region.len()) };
        let o = cache::run(mem, &docs, &w, Some(&region));
        let same = mem[..data] == plain[..] && o.served == resident.served;
        if !same {
            return Err(CliError::Usage(format!(
                "the region at budget {name} served other bytes than plain memory: a bug in zsmem"
            )));
        }
        let s = o.stats.as_ref().expect("a region run");
        let held = mib((s.resident_bytes + s.store_memory) as f64);
        if !a.json {
            print("region", name, &o, held, resident.ops_per_sec);
        }
        rows.push((name.clone(), budget, o));
    }
    let mut units = Vec::new();
    for &unit in &fault_units {
        units.push(fault_in::measure(&docs.bytes, unit, codec)?);
    }
    if a.json {
        let v = serde_json::json!({
            "documents": docs.spans.len(),
            "data_bytes": data,
            "all_resident": resident,
            "region": rows.iter().map(|(n, b, o)| serde_json::json!({"budget": n, "budget_bytes": b, "outcome": o})).collect::<Vec<_>>(),
            "fault_in": units,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(std::io::Error::other)?
        );
        return Ok(());
    }
    for (name, _, o) in &rows {
        let s = o.stats.as_ref().expect("a region run");
        println!(
            "  budget {name}: resident {:.1} MiB of budget {:.1}, store {:.1} MiB all-in for {:.1} MiB compressed, {} evictions ({} clean drops, {} by the fault thread), fault service p50 {:.1} us p99 {:.1} us",
            mib(s.resident_bytes as f64),
            mib(s.budget as f64),
            mib(s.store_memory as f64),
            mib(s.stored_bytes as f64),
            s.evictions,
            s.clean_drops,
            s.sync_evictions,
            s.fault_latency.quantile(0.5) as f64 / 1e3,
            s.fault_latency.quantile(0.99) as f64 / 1e3,
        );
    }
    if !units.is_empty() {
        println!(
            "\nfault-in by unit size ({}; every unit evicted, then each touched once, access to return):",
            codec.name()
        );
        println!(
            "{:>7} {:>8} {:>8} {:>9} {:>11} {:>11} {:>9} {:>10} {:>10} {:>11}",
            "unit",
            "p50 us",
            "p99 us",
            "p99.9 us",
            "svc p50 us",
            "svc p99 us",
            "stored %",
            "store +%",
            "comp us",
            "decomp us"
        );
        for u in &units {
            println!(
                "{:>7} {:>8.2} {:>8.2} {:>9.2} {:>11.2} {:>11.2} {:>9.1} {:>10.2} {:>10.2} {:>11.2}   reclaim {:.0} MiB/s",
                u.unit,
                u.fault_in_ns[0] as f64 / 1e3,
                u.fault_in_ns[1] as f64 / 1e3,
                u.fault_in_ns[2] as f64 / 1e3,
                u.service_ns[0] as f64 / 1e3,
                u.service_ns[1] as f64 / 1e3,
                u.stored_ratio * 100.0,
                u.store_overhead * 100.0,
                u.compress_ns / 1e3,
                u.decompress_ns / 1e3,
                u.reclaim_mib_s
            );
        }
    }
    Ok(())
}
