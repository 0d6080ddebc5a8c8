//! `zsmem region`: a real program on a [`Region`]: an in-memory cache of
//! documents read from this machine, served under a zipfian pattern, side
//! by side all resident (the speed limit), in a region at several budgets,
//! and the kernel's way at the same budgets (plain memory in a child
//! process in a memory-limited cgroup swapping to a private zram device:
//! `kernel`); then fault-in latency, stored size and CPU by unit size.

mod cache;
mod docs;
mod fault_in;
mod kernel;

use std::path::PathBuf;

use zsmem::Codec;
use zsmem::region::{FaultMode, Region, RegionConfig};

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
    /// Unit of the cache's region: a power of two from the system's page
    /// size to 64K (4K, 8K, 16K, 32K or 64K with 4 KiB pages).
    #[arg(long, default_value = "4K", value_parser = unit_value)]
    pub unit: usize,
    /// Codec: lz4, or zstd / zstd:LEVEL.
    #[arg(long, default_value = "lz4")]
    pub codec: String,
    /// Measured requests per run (at most 2^40).
    #[arg(long, default_value_t = 400_000, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_OPS))]
    pub ops: usize,
    /// Zipf exponent of the request pattern: a finite number, 0 or more
    /// (0: every document alike).
    #[arg(long, default_value_t = 0.99, value_parser = zipf_value)]
    pub zipf: f64,
    /// Share of requests that update their document, percent (0..=100).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub write_percent: u32,
    /// Unit sizes for the fault-in measurement, comma-separated, each as
    /// `--unit` takes it (empty: skip it); checked before anything runs.
    #[arg(long, default_value = "4K,16K,64K", value_parser = fault_units_value)]
    pub fault_units: FaultUnits,
    /// The region's readahead: bytes of evicted units restored after a
    /// sequential fault (0: off).
    #[arg(long, default_value = "16K", value_parser = parse_size)]
    pub readahead: usize,
    /// What the region's store keeps of copies of resident units
    /// (`RegionConfig::keep_copies`): `all` (a unit brought back keeps its
    /// compressed copy, so evicting it unwritten costs no compression),
    /// `none` (its slot is freed when it comes back, as zram's swap-in
    /// does), a cap in bytes (`8M`), or a cap as a fraction of each budget
    /// (`1/4`).
    #[arg(long, default_value = "all", value_parser = KeepCopies::parse)]
    pub keep_copies: KeepCopies,
    /// Who serves the region's faults: `signal` (the faulting thread, in
    /// a SIGBUS handler: the default) or `thread` (a fault-handling
    /// thread).
    #[arg(long, default_value = "signal", value_parser = |s: &str| FaultMode::parse(s.trim()).map_err(|e| e.to_string()))]
    pub faults: FaultMode,
    /// Skip the kernel's way (plain memory in a memory-limited cgroup
    /// swapping to a private zram device; needs root, a cgroup memory
    /// controller and zram).
    #[arg(long)]
    pub no_kernel: bool,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Internal: serve the cache in plain memory only and write the
    /// outcome as JSON to this file (the kernel's way runs this as its
    /// child).
    #[arg(long, hide = true)]
    pub plain_child: Option<PathBuf>,
}

/// The most `--ops`, as `compare --ops`: 2^40.
pub const MAX_OPS: u64 = 1 << 40;

/// A region unit as `--unit` and `--fault-units` take it: a size that is a
/// power of two from the system's page size to [`zsmem::region::MAX_UNIT`]
/// (the rule `Region::new` applies, checked before anything runs).
fn unit_value(s: &str) -> Result<usize, String> {
    let unit = parse_size(s)?;
    // SAFETY: sysconf has no preconditions.
    let os_page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let max = zsmem::region::MAX_UNIT;
    if unit.is_power_of_two() && (os_page..=max).contains(&unit) {
        Ok(unit)
    } else {
        Err(format!(
            "a unit of {unit} bytes: give a power of two from {} (the page size) to {}",
            size_text(os_page),
            size_text(max)
        ))
    }
}

/// `n` bytes as `4K` when a whole number of KiB.
fn size_text(n: usize) -> String {
    if n.is_multiple_of(1024) {
        format!("{}K", n / 1024)
    } else {
        n.to_string()
    }
}

/// `--fault-units`: unit sizes, each checked as `--unit` is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultUnits(pub Vec<usize>);

fn fault_units_value(s: &str) -> Result<FaultUnits, String> {
    s.split(',')
        .filter(|u| !u.trim().is_empty())
        .map(|u| unit_value(u.trim()))
        .collect::<Result<_, _>>()
        .map(FaultUnits)
}

/// `--zipf`: a finite exponent, 0 or more.
fn zipf_value(s: &str) -> Result<f64, String> {
    let z: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number"))?;
    if z.is_finite() && z >= 0.0 {
        Ok(z)
    } else {
        Err(format!("{z}: give a finite exponent, 0 or more"))
    }
}

/// What the counter of evictions made while serving a fault (the region
/// at its budget, the evictor thread behind) is called: who made them
/// depends on who serves faults.
fn sync_evictions_text(n: u64, faults: FaultMode) -> String {
    match faults {
        FaultMode::Thread => format!("{n} by the fault thread"),
        FaultMode::Signal => format!("{n} by faulting threads in their SIGBUS handler"),
        // A mode to come: who serves its faults is not known here.
        _ => format!("{n} made while serving a fault"),
    }
}

/// `--keep-copies`: a cap on the copies of resident units (in JSON
/// `"all"`, `{"bytes": N}` or `{"of_budget": F}`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeepCopies {
    /// No cap.
    All,
    /// Bytes, at every budget.
    Bytes(usize),
    /// A fraction of each budget.
    OfBudget(f64),
}

impl KeepCopies {
    fn parse(s: &str) -> Result<KeepCopies, String> {
        match s.trim() {
            "all" => Ok(KeepCopies::All),
            "none" => Ok(KeepCopies::Bytes(0)),
            t if t.contains('/') => fraction(t)
                .map(KeepCopies::OfBudget)
                .map_err(|e| e.to_string()),
            t => parse_size(t).map(KeepCopies::Bytes).map_err(|e| {
                format!("{e}; --keep-copies takes all, none, a size (8M) or a fraction of the budget (1/4)")
            }),
        }
    }

    /// `RegionConfig::keep_copies` at `budget` bytes.
    fn bytes(self, budget: usize) -> usize {
        match self {
            KeepCopies::All => usize::MAX,
            KeepCopies::Bytes(b) => b,
            KeepCopies::OfBudget(f) => (budget as f64 * f) as usize,
        }
    }
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
    let fault_units = &a.fault_units.0;
    if a.data == 0 || a.ops == 0 {
        return Err(CliError::Usage("--data and --ops must be above 0".into()));
    }
    let w = cache::Workload {
        ops: a.ops,
        warmup: a.ops / 4,
        zipf: a.zipf,
        write_percent: a.write_percent,
        seed: 1,
    };
    if let Some(path) = &a.plain_child {
        return plain_child(a, &w, path);
    }
    let kernel_skip = if a.no_kernel {
        Some("--no-kernel".to_string())
    } else {
        kernel::unavailable_reason()
    };
    let docs = docs::read(&a.dir, a.data)?;
    let data = docs.bytes.len();
    if !a.json {
        outln!(
            "documents: {} files, {:.1} MiB from {}; {} requests (zipf {}, {}% updates), unit {} B, codec {}, faults: {}",
            docs.spans.len(),
            mib(data as f64),
            a.dir.display(),
            a.ops,
            a.zipf,
            a.write_percent,
            a.unit,
            codec.name(),
            a.faults.name()
        );
        outln!(
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
    let mut plain = docs.bytes.clone();
    let resident = cache::run(&mut plain, &docs.spans, &w, None);
    if !a.json {
        print_row(
            "all resident",
            "-",
            &resident,
            mib(data as f64),
            0,
            Some(0.0),
            resident.ops_per_sec,
        )?;
    }
    for (name, f) in &budgets {
        let budget = budget_bytes(data, *f, a.unit);
        let region = Region::new(RegionConfig {
            size: data,
            budget,
            unit: a.unit,
            codec,
            readahead: a.readahead,
            keep_copies: a.keep_copies.bytes(budget),
            faults: a.faults,
            ..Default::default()
        })?;
        // SAFETY: the region's bytes are this thread's alone while it lives.
        let mem = unsafe { std::slice::from_raw_parts_mut(region.as_ptr(), region.len()) };
        mem[..data].copy_from_slice(&docs.bytes);
        let o = cache::run(mem, &docs.spans, &w, Some(&region));
        let same = mem[..data] == plain[..] && o.served == resident.served;
        if !same {
            return Err(CliError::Usage(format!(
                "the region at budget {name} served other bytes than plain memory: a bug in zsmem"
            )));
        }
        let s = o.stats.as_ref().expect("a region run");
        let held = mib((s.resident_bytes + s.store_memory) as f64);
        if !a.json {
            print_row(
                "region",
                name,
                &o,
                held,
                s.faults,
                Some(s.promotion_rate()),
                resident.ops_per_sec,
            )?;
        }
        rows.push((name.clone(), budget, o));
    }
    let kernel = match kernel_skip {
        Some(why) => {
            if !a.json {
                outln!("{:<14} skipped: {why}", "kernel zram");
            }
            KernelColumn {
                skipped: Some(why),
                ..KernelColumn::default()
            }
        }
        None => kernel_column(a, data, codec, &budgets, &resident)?,
    };
    if !a.json && kernel.skipped.is_none() {
        print_kernel(&kernel, &rows, resident.ops_per_sec)?;
    }
    let mut units = Vec::new();
    for &unit in fault_units {
        units.push(fault_in::measure(&docs.bytes, unit, codec, a.faults)?);
    }
    if a.json {
        let v = serde_json::json!({
            "documents": docs.spans.len(),
            "data_bytes": data,
            "keep_copies": a.keep_copies,
            "faults": a.faults.name(),
            "all_resident": resident,
            "region": rows.iter().map(|(n, b, o)| serde_json::json!({"budget": n, "budget_bytes": b, "outcome": o})).collect::<Vec<_>>(),
            "kernel_zram": kernel,
            "region_vs_kernel": compare_rows(&rows, &kernel),
            "fault_in": units,
        });
        outln!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(std::io::Error::other)?
        );
        return Ok(());
    }
    for (name, _, o) in &rows {
        let s = o.stats.as_ref().expect("a region run");
        outln!(
            "  budget {name}: resident {:.1} MiB of budget {:.1}, store {:.1} MiB all-in for {:.1} MiB compressed ({:.1} MiB of it copies of resident units), {} evictions ({} clean drops, {}), {} compressions, {} copies dropped for --keep-copies, {} units read ahead, fault service p50 {:.1} us p99 {:.1} us",
            mib(s.resident_bytes as f64),
            mib(s.budget as f64),
            mib(s.store_memory as f64),
            mib(s.stored_bytes as f64),
            mib(s.copy_bytes as f64),
            s.evictions,
            s.clean_drops,
            sync_evictions_text(s.sync_evictions, a.faults),
            s.compressions,
            s.copies_dropped,
            s.readahead,
            s.fault_latency.quantile(0.5) as f64 / 1e3,
            s.fault_latency.quantile(0.99) as f64 / 1e3,
        );
    }
    if !units.is_empty() {
        outln!(
            "\nfault-in by unit size ({}; every unit evicted, then each touched once, access to return):",
            codec.name()
        );
        outln!(
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
            outln!(
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

/// The region's budget at fraction `f` of `data` bytes: at least a unit.
fn budget_bytes(data: usize, f: f64, unit: usize) -> usize {
    ((data as f64 * f) as usize).max(unit)
}

/// One row of the table: a run's requests per second, latencies, memory
/// held (MiB), CPU, faults, promotion rate (`-` where it has none) and
/// slowdown against `base` req/s (all resident).
fn print_row(
    name: &str,
    budget: &str,
    o: &cache::Outcome,
    held_mib: f64,
    faults: u64,
    promo: Option<f64>,
    base: f64,
) -> CliResult {
    outln!(
        "{:<14} {:>9} {:>10.0} {:>8.2} {:>8.2} {:>9.2} {:>10.1} {:>7.2} {:>9} {:>7} {:>8.2}",
        name,
        budget,
        o.ops_per_sec,
        o.latency_ns[0] as f64 / 1e3,
        o.latency_ns[1] as f64 / 1e3,
        o.latency_ns[2] as f64 / 1e3,
        held_mib,
        o.cpu_secs,
        faults,
        promo.map_or("-".to_string(), |p| format!("{p:.2}")),
        base / o.ops_per_sec,
    );
    Ok(())
}

/// The child of the kernel's way: the cache in plain memory, its outcome
/// written as JSON to `path` (relative to the working directory, the
/// child's tmpfs).
fn plain_child(a: &RegionArgs, w: &cache::Workload, path: &std::path::Path) -> CliResult {
    let docs = docs::read(&a.dir, a.data)?;
    let mut mem = docs.bytes;
    let o = cache::run(&mut mem, &docs.spans, w, None);
    let text = serde_json::to_vec(&o).map_err(std::io::Error::other)?;
    std::fs::write(path, text)
        .map_err(|e| CliError::Usage(format!("writing {}: {e}", path.display())))?;
    Ok(())
}

/// Runs of the kernel's way at one budget before its row is called failed
/// when the OOM killer ends each.
const KERNEL_TRIES: u32 = 5;

/// One budget of the kernel's way (`Default`: nothing measured).
#[derive(Debug, Default, serde::Serialize)]
struct KernelRow {
    /// The budget as given.
    budget: String,
    /// The region's budget, bytes.
    budget_bytes: usize,
    /// The cgroup's limit: the budget plus the program's own needs.
    limit_bytes: u64,
    /// The child's outcome (None: it failed, `failed` says why).
    outcome: Option<cache::Outcome>,
    /// Why it failed.
    failed: Option<String>,
    /// Runs at this budget the OOM killer ended (each is run again, up to
    /// [`KERNEL_TRIES`] runs in all).
    oom_killed_runs: u32,
    /// Peak of the cgroup's charge plus zram's all-in, read together.
    held_bytes: u64,
    /// The cgroup's peak charge.
    cgroup_peak_bytes: u64,
    /// zram's peak all-in and peak pool (mem_used_total).
    zram_all_in_bytes: u64,
    /// zram's peak pool.
    zram_pool_bytes: u64,
    /// Pages swapped out and in during the run (the machine's counters).
    pswpout: u64,
    /// Pages swapped in.
    pswpin: u64,
    /// The child's whole run (loading, warm-up and requests): user and
    /// system CPU seconds.
    child_user_s: f64,
    /// System CPU seconds.
    child_sys_s: f64,
}

/// The kernel's way at every budget.
#[derive(Debug, Default, serde::Serialize)]
struct KernelColumn {
    /// Why it did not run.
    skipped: Option<String>,
    /// The child without a limit or swap: its peak charge.
    sizing_peak_bytes: u64,
    /// What the program needs beyond its data (the sizing peak less the
    /// data), added to each budget to make the cgroup's limit.
    program_overhead_bytes: u64,
    /// The child without a limit (plain memory in a child process).
    unlimited: Option<cache::Outcome>,
    /// The zram device's configuration.
    config: String,
    /// One per budget.
    rows: Vec<KernelRow>,
}

fn kernel_column(
    a: &RegionArgs,
    data: usize,
    codec: Codec,
    budgets: &[(String, f64)],
    resident: &cache::Outcome,
) -> CliResult<KernelColumn> {
    kernel::reap_stale();
    let ca = kernel::ChildArgs {
        dir: &a.dir,
        data: a.data,
        ops: a.ops,
        zipf: a.zipf,
        write_percent: a.write_percent,
    };
    let mut col = KernelColumn::default();
    let same = |o: &cache::Outcome, what: &str| {
        if o.served == resident.served {
            Ok(())
        } else {
            Err(CliError::Usage(format!(
                "the plain-memory child {what} served other bytes than this process did: its documents differ (a file under --dir changed?)"
            )))
        }
    };
    let sizing = match kernel::run(&ca, None, codec.kernel_name(), 0)? {
        Ok(r) => r,
        Err(kernel::Failed::Unavailable(why) | kernel::Failed::Child { why, .. }) => {
            col.skipped = Some(why);
            return Ok(col);
        }
    };
    same(&sizing.outcome, "without a limit")?;
    col.sizing_peak_bytes = sizing.swap.cgroup_peak.unwrap_or(0);
    col.program_overhead_bytes = col.sizing_peak_bytes.saturating_sub(data as u64);
    col.unlimited = Some(sizing.outcome);
    // zram's disk size is virtual: room for all the data twice over.
    let zram_bytes = (2 * data as u64 + (64 << 20)).next_multiple_of(1 << 20);
    for (name, f) in budgets {
        let budget = budget_bytes(data, *f, a.unit);
        let limit = (budget as u64 + col.program_overhead_bytes).next_multiple_of(4096);
        let mut row = KernelRow {
            budget: name.clone(),
            budget_bytes: budget,
            limit_bytes: limit,
            ..KernelRow::default()
        };
        // The OOM killer may end a run in a tight cgroup at random: try
        // again, up to KERNEL_TRIES runs, and say how many it ended.
        loop {
            match kernel::run(&ca, Some(limit), codec.kernel_name(), zram_bytes)? {
                Ok(r) => {
                    same(&r.outcome, &format!("at budget {name}"))?;
                    row.held_bytes = r.swap.peaks.held;
                    row.cgroup_peak_bytes = r.swap.cgroup_peak.unwrap_or(0);
                    row.zram_all_in_bytes = r.swap.peaks.all_in;
                    row.zram_pool_bytes = r.swap.peaks.pool;
                    row.pswpout = r.swap.swap.pswpout;
                    row.pswpin = r.swap.swap.pswpin;
                    row.child_user_s = r.swap.outcome.user_s;
                    row.child_sys_s = r.swap.outcome.sys_s;
                    row.outcome = Some(r.outcome);
                    break;
                }
                Err(kernel::Failed::Child { why, oom }) => {
                    row.oom_killed_runs += u32::from(oom);
                    if !oom || row.oom_killed_runs == KERNEL_TRIES {
                        row.failed = Some(why);
                        break;
                    }
                }
                Err(kernel::Failed::Unavailable(why)) => {
                    col.skipped = Some(why);
                    return Ok(col);
                }
            }
        }
        col.rows.push(row);
    }
    col.config = format!(
        "a private zram device ({}, {} MiB disk size) as the only swap in use (priority {}), zswap off for the run",
        codec.kernel_name(),
        zram_bytes >> 20,
        zsmem_lab::workloads::swap::area::PRIORITY
    );
    Ok(col)
}

/// The region against the kernel's way: at the same budget, and at the
/// same memory held (the kernel's throughput interpolated along its curve
/// at the region's held, counting the kernel's held without the program's
/// own overhead, which the region's figure does not include either).
#[derive(Debug, serde::Serialize)]
struct Versus {
    budget: String,
    /// Region req/s over kernel req/s at the same budget.
    same_budget: Option<f64>,
    /// Region req/s over the kernel's at the region's memory held
    /// (None: outside the kernel's curve).
    same_held: Option<f64>,
}

fn compare_rows(rows: &[(String, usize, cache::Outcome)], k: &KernelColumn) -> Vec<Versus> {
    // (data held, req/s) of the kernel's runs, by held.
    let mut curve: Vec<(f64, f64)> = k
        .rows
        .iter()
        .filter_map(|r| {
            let o = r.outcome.as_ref()?;
            Some((
                r.held_bytes.saturating_sub(k.program_overhead_bytes) as f64,
                o.ops_per_sec,
            ))
        })
        .collect();
    curve.sort_by(|a, b| a.0.total_cmp(&b.0));
    let at = |held: f64| -> Option<f64> {
        let i = curve.partition_point(|p| p.0 < held);
        if i == 0 || i == curve.len() {
            // Exactly the lowest point, or outside the curve.
            return curve
                .first()
                .filter(|p| (p.0 - held).abs() < 1.0)
                .map(|p| p.1);
        }
        let (a, b) = (curve[i - 1], curve[i]);
        Some(a.1 + (b.1 - a.1) * (held - a.0) / (b.0 - a.0))
    };
    rows.iter()
        .map(|(name, _, o)| {
            let s = o.stats.as_ref();
            let held = s.map_or(0.0, |s| (s.resident_bytes + s.store_memory) as f64);
            let same_budget = k
                .rows
                .iter()
                .find(|r| &r.budget == name)
                .and_then(|r| r.outcome.as_ref())
                .map(|ko| o.ops_per_sec / ko.ops_per_sec);
            Versus {
                budget: name.clone(),
                same_budget,
                same_held: at(held).map(|t| o.ops_per_sec / t),
            }
        })
        .collect()
}

fn print_kernel(
    k: &KernelColumn,
    rows: &[(String, usize, cache::Outcome)],
    resident: f64,
) -> CliResult {
    if let Some(u) = &k.unlimited {
        print_row(
            "plain child",
            "no limit",
            u,
            mib(k.sizing_peak_bytes as f64),
            0,
            None,
            resident,
        )?;
    }
    for r in &k.rows {
        match &r.outcome {
            Some(o) => print_row(
                "kernel zram",
                &r.budget,
                o,
                mib(r.held_bytes as f64),
                r.pswpin,
                None,
                resident,
            )?,
            None => outln!(
                "{:<14} {:>9} failed: {}",
                "kernel zram",
                r.budget,
                r.failed.as_deref().unwrap_or("?")
            ),
        }
    }
    for r in k.rows.iter().filter(|r| r.oom_killed_runs > 0) {
        outln!(
            "  kernel budget {}: the OOM killer ended {} of its {} runs (each run again; the figures are the last run's)",
            r.budget,
            r.oom_killed_runs,
            r.oom_killed_runs + u32::from(r.outcome.is_some())
        );
    }
    outln!(
        "  kernel zram: the same cache in plain memory in a child process, in a memory cgroup limited to the budget + {:.1} MiB (the program's own needs: its peak without a limit, {:.1} MiB, less the data), swapping to {}; held = the cgroup's charge + zram's all-in, peak of readings every 50 ms; faults = pages swapped in (pswpin); CPU = the child's own over the requests",
        mib(k.program_overhead_bytes as f64),
        mib(k.sizing_peak_bytes as f64),
        k.config
    );
    for r in &k.rows {
        if r.outcome.is_some() {
            outln!(
                "  kernel budget {}: limit {:.1} MiB, cgroup peak {:.1} MiB, zram {:.1} MiB all-in ({:.1} MiB pool), {} pages out, {} in; child CPU over its whole run {:.2} s user, {:.2} s sys",
                r.budget,
                mib(r.limit_bytes as f64),
                mib(r.cgroup_peak_bytes as f64),
                mib(r.zram_all_in_bytes as f64),
                mib(r.zram_pool_bytes as f64),
                r.pswpout,
                r.pswpin,
                r.child_user_s,
                r.child_sys_s
            );
        }
    }
    let show = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.2}x"));
    for v in compare_rows(rows, k) {
        outln!(
            "  region vs kernel zram, budget {}: {} the kernel's req/s at the same memory held (the kernel's held less the program's own needs, interpolated along its curve; - where the region's held is outside it), {} at the same budget (where the two may hold different memory: see the held figures above)",
            v.budget,
            show(v.same_held),
            show(v.same_budget)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(ops_per_sec: f64, held: Option<u64>) -> cache::Outcome {
        cache::Outcome {
            ops_per_sec,
            latency_ns: [1, 2, 3],
            cpu_secs: 1.0,
            served: 7,
            stats: held.map(|h| {
                let mut s = zsmem::region::RegionStats::default();
                s.resident_bytes = h / 2;
                s.store_memory = h - h / 2;
                s
            }),
        }
    }

    fn kernel_row(budget: &str, held: u64, ops: f64) -> KernelRow {
        KernelRow {
            budget: budget.into(),
            budget_bytes: 0,
            limit_bytes: 0,
            outcome: Some(outcome(ops, None)),
            held_bytes: held,
            ..KernelRow::default()
        }
    }

    #[test]
    fn the_kernel_is_compared_at_the_same_budget_and_the_same_held() {
        // The kernel's held counts 10 of the program's own; without them its
        // curve is (100, 1000 req/s) and (200, 3000 req/s).
        let k = KernelColumn {
            program_overhead_bytes: 10,
            rows: vec![
                kernel_row("1/2", 210, 3000.0),
                kernel_row("1/4", 110, 1000.0),
            ],
            ..KernelColumn::default()
        };
        let rows = vec![
            ("1/2".to_string(), 0, outcome(6000.0, Some(150))),
            ("1/4".to_string(), 0, outcome(4000.0, Some(300))),
        ];
        let v = compare_rows(&rows, &k);
        assert_eq!(v[0].same_budget, Some(2.0));
        // At 150 the kernel's curve gives 2000 req/s.
        assert_eq!(v[0].same_held, Some(3.0));
        assert_eq!(v[1].same_budget, Some(4.0));
        // 300 is past the kernel's curve: no figure, not an extrapolation.
        assert_eq!(v[1].same_held, None);
    }

    #[test]
    fn keep_copies_parses() {
        assert_eq!(KeepCopies::parse("all").unwrap().bytes(100), usize::MAX);
        assert_eq!(KeepCopies::parse("none").unwrap().bytes(100), 0);
        assert_eq!(KeepCopies::parse("8K").unwrap().bytes(100), 8192);
        assert_eq!(KeepCopies::parse("1/4").unwrap().bytes(100), 25);
        for bad in ["some", "2/1", "-1"] {
            assert!(KeepCopies::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn units_zipf_and_evictions_text() {
        assert_eq!(unit_value("16K"), Ok(16384));
        assert_eq!(
            fault_units_value("4K, 64K").unwrap(),
            FaultUnits(vec![4096, 65536])
        );
        assert_eq!(fault_units_value("").unwrap(), FaultUnits(Vec::new()));
        for bad in ["3K", "128K", "0", "2048", "x"] {
            assert!(unit_value(bad).is_err(), "{bad}");
            assert!(fault_units_value(&format!("4K,{bad}")).is_err(), "{bad}");
        }
        assert_eq!(zipf_value("0"), Ok(0.0));
        for bad in ["nan", "inf", "-inf", "-0.5", "x"] {
            assert!(zipf_value(bad).is_err(), "{bad}");
        }
        assert!(!sync_evictions_text(3, FaultMode::Signal).contains("fault thread"));
        assert_eq!(
            sync_evictions_text(3, FaultMode::Thread),
            "3 by the fault thread"
        );
    }

    #[test]
    fn budgets_parse_as_fractions() {
        assert_eq!(fraction("1/3").unwrap(), 1.0 / 3.0);
        assert_eq!(fraction(" 0.25 ").unwrap(), 0.25);
        for bad in ["0", "2", "1/0", "x", "1/x", "-1/2"] {
            assert!(fraction(bad).is_err(), "{bad}");
        }
    }
}
