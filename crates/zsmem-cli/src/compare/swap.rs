//! `zsmem compare --workload swap`: reference 001's experiment as it was
//! run. A real program (by default a build of real C code) in a
//! memory-limited cgroup, its swap going to each contestant in turn: the
//! kernel's zram, the kernel's zswap, and zsmem and the other page
//! contestants through the block device `--fs ext4` serves. Per
//! contestant: the program's wall, user and sys time, swap-outs and
//! swap-ins, the store's peak pool and all-in; median and range over runs.

use serde::Serialize;
use zsmem::Codec;
use zsmem_lab::blockdev::BlockDevError;
use zsmem_lab::contestants::PageConfig;
use zsmem_lab::report::log2_histogram;
use zsmem_lab::workloads::swap::{
    Program, Spread, Summary, SwapExperiment, SwapRun, SwapTarget, program, summarize,
    unavailable_reason,
};

use crate::compare::CompareArgs;
use crate::output::{Format, mib, print_csv, print_json, print_table, table};
use crate::{CliError, CliResult};

/// The default limit's share of the program's unlimited peak. Half the
/// peak (a working set twice the limit, as reference 001 sized its build)
/// got 4 of 8 default builds killed by the OOM killer on this 2-core
/// machine (session of 2026-11-26): the tmpfs the build writes is charged
/// to the cgroup too, and reclaim there could not keep up. At 60% the build
/// still swaps most of its working set out.
const LIMIT_SHARE: f64 = 0.6;

/// The contestants of the swap experiment by default.
pub const DEFAULT_SWAP_CONTESTANTS: &[&str] = &["kernel-zram", "zswap", "zsmem", "zsmem-classes"];

/// Smallest default swap device: 256 MiB.
const MIN_SWAP_BYTES: u64 = 256 << 20;

/// Largest `--limit-mib` and `--swap-mib`: 16 TiB (their bytes, `<< 20`,
/// must not wrap).
const MAX_MIB: u64 = 1 << 24;

/// Arguments of the swap workload (with `--workload swap`).
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct SwapArgs {
    /// With --workload swap: runs per contestant (median and range).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub runs: u64,
    /// With --workload swap: the contestants, comma separated: kernel-zram
    /// (a private zram device as swap), zswap (the kernel's zswap in front
    /// of a loop device over a sparse file), or any page contestant of
    /// --contestants but kernel-zram* (served as a block device: a FUSE file
    /// and a loop device).
    #[arg(long, value_delimiter = ',',
          default_values_t = DEFAULT_SWAP_CONTESTANTS.iter().map(|s| s.to_string()))]
    pub swap_contestants: Vec<String>,
    /// With --workload swap: the program's memory limit in MiB (default:
    /// 60% of the peak it reaches without a limit, measured by a first
    /// run).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_MIB))]
    pub limit_mib: Option<u64>,
    /// With --workload swap: the size of each swap device, MiB (default:
    /// twice the program's memory limit, at least 256 MiB; the kernel's
    /// zram keeps a table for its whole size, 16 MiB at 4 GiB).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_MIB))]
    pub swap_mib: Option<u64>,
    /// With --workload swap: C code the default program builds (default:
    /// zstd's library sources in the cargo registry).
    #[arg(long)]
    pub source: Option<std::path::PathBuf>,
    /// With --workload swap: parallel compilers of the default build.
    #[arg(long, default_value_t = 2, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024))]
    pub jobs: usize,
    /// With --workload swap: zswap's compressor (default: the codec's
    /// kernel name where zswap has it, else the one it is set to).
    #[arg(long)]
    pub zswap_compressor: Option<String>,
    /// With --workload swap: milliseconds between readings of the store's
    /// figures.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub sample_ms: u64,
    /// With --workload swap: the program to run instead of the default
    /// build (after `--`), in its tmpfs directory ($ZSMEM_SWAP_DIR).
    #[arg(last = true)]
    pub command: Vec<String>,
}

impl Default for SwapArgs {
    fn default() -> Self {
        SwapArgs {
            runs: 3,
            swap_contestants: DEFAULT_SWAP_CONTESTANTS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            limit_mib: None,
            swap_mib: None,
            source: None,
            jobs: 2,
            zswap_compressor: None,
            sample_ms: 100,
            command: Vec::new(),
        }
    }
}

/// The label of the sizing run (no limit, no swap of ours).
pub const SIZING: &str = "no-limit";

/// The swap contestants this build knows.
fn check_contestants(names: &[String]) -> CliResult {
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            return Err(CliError::Usage(format!(
                "--swap-contestants names {} twice: name each contestant once",
                zsmem_lab::text::shown(n)
            )));
        }
        let ok = n == "kernel-zram"
            || n == "zswap"
            || (crate::compare::CONTESTANTS.contains(&n.as_str()) && !n.starts_with("kernel-zram"));
        if !ok {
            return Err(CliError::Usage(format!(
                "--swap-contestants: unknown or unsupported contestant `{}`: use kernel-zram, zswap, or one of {}",
                zsmem_lab::text::shown(n),
                crate::compare::CONTESTANTS
                    .iter()
                    .filter(|c| !c.starts_with("kernel-zram"))
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    Ok(())
}

fn make_target(
    name: &str,
    codec: Codec,
    zswap_compressor: &str,
    bytes: u64,
) -> Result<SwapTarget, BlockDevError> {
    match name {
        "kernel-zram" => SwapTarget::kernel_zram(codec.kernel_name(), bytes),
        "zswap" => SwapTarget::zswap(zswap_compressor, bytes),
        other => {
            let owned = other.to_string();
            let slots = (bytes / 4096) as usize;
            SwapTarget::served(bytes, move || {
                let cfg = PageConfig {
                    codec,
                    ..Default::default()
                };
                crate::compare::make(&owned, &cfg, slots)
            })
        }
    }
}

#[derive(Serialize)]
struct JsonOut<'a> {
    workload: &'static str,
    program: String,
    limit_bytes: u64,
    sizing_peak_bytes: Option<u64>,
    codec: &'a str,
    skipped: &'a [(String, String)],
    configs: &'a [(String, String)],
    summaries: Vec<JsonSummary<'a>>,
    runs: &'a [SwapRun],
    not_timed: &'static str,
}

#[derive(Serialize)]
struct JsonSummary<'a> {
    #[serde(flatten)]
    summary: &'a Summary,
    store_ns: Option<[u64; 3]>,
    load_ns: Option<[u64; 3]>,
}

/// p50, p99, p99.9 of a histogram, ns.
fn quantiles(h: &hdrhistogram::Histogram<u64>) -> [u64; 3] {
    [
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.99),
        h.value_at_quantile(0.999),
    ]
}

/// What is said of the contestants whose latencies cannot be seen.
pub const NOT_TIMED: &str = "kernel-zram and zswap are called from the kernel's swap path: their store and load cannot be timed here (no BPF or kprobes on this machine); a served contestant times its own store and load (each call into it for a page; the FUSE and loop device path around it not included)";

/// Run the swap experiment with `a`'s codec and output format.
pub fn run(args: &SwapArgs, a: &CompareArgs) -> CliResult {
    let codec = Codec::parse(&a.codec)?;
    check_contestants(&args.swap_contestants)?;
    if args.jobs == 0 || args.swap_mib == Some(0) || args.sample_ms == 0 {
        return Err(CliError::Usage(
            "--jobs, --swap-mib and --sample-ms must be at least 1".into(),
        ));
    }
    if let Some(why) = unavailable_reason() {
        eprintln!("skipping the swap experiment: {why}");
        if a.format == Format::Json {
            print_json(&serde_json::json!({"workload": "swap", "skipped": why}))?;
        }
        return Ok(());
    }
    let program = if args.command.is_empty() {
        let source = match &args.source {
            Some(s) => s.clone(),
            None => program::find_default_source().ok_or_else(|| {
                CliError::Usage(
                    "no C code found to build (zstd's or lz4's sources in ~/.cargo/registry/src): give --source DIR or a command after --".into(),
                )
            })?,
        };
        Program::Build {
            source,
            jobs: args.jobs,
        }
    } else {
        Program::Command(args.command.clone())
    };
    let zswap_compressor = args
        .zswap_compressor
        .clone()
        .unwrap_or_else(|| codec.kernel_name().to_string());
    let mut exp = SwapExperiment {
        program,
        limit: args.limit_mib.map(|m| m << 20),
        tmpfs_bytes: 16 << 30,
        every: std::time::Duration::from_millis(args.sample_ms),
    };
    eprintln!("program: {}", exp.program.describe());
    let mut runs: Vec<SwapRun> = Vec::new();
    let mut sizing_peak = None;
    if exp.limit.is_none() {
        eprintln!("sizing run: no limit, no swap of ours");
        let r = exp
            .run(None, SIZING, 1)
            .map_err(|e| CliError::Usage(format!("sizing run: {e}")))?;
        report_run(&r);
        if !r.outcome.success {
            return Err(CliError::Usage(format!(
                "the program failed without a limit ({}): {}",
                r.outcome.status, r.outcome.stderr_tail
            )));
        }
        let peak = r.cgroup_peak.unwrap_or(0);
        if peak < 8 << 20 {
            return Err(CliError::Usage(format!(
                "the program's peak was only {:.1} MiB: too small to limit; give --limit-mib",
                mib(peak)
            )));
        }
        sizing_peak = Some(peak);
        exp.limit = Some(((peak as f64 * LIMIT_SHARE) as u64) >> 20 << 20);
        runs.push(r);
    }
    let limit = exp.limit.expect("set above");
    // Sized as a user would size it: enough for what the limit pushes out.
    // A 4 GiB default gave the kernel's zram a 16 MiB table the run never
    // needed, counted in its all-in.
    let swap_bytes = args
        .swap_mib
        .map_or_else(|| (2 * limit).max(MIN_SWAP_BYTES), |m| m << 20);
    eprintln!(
        "limit: {:.0} MiB{}",
        mib(limit),
        sizing_peak.map_or(String::new(), |p| format!(
            " ({:.0}% of the peak of {:.0} MiB without a limit)",
            LIMIT_SHARE * 100.0,
            mib(p)
        ))
    );
    let mut skipped: Vec<(String, String)> = Vec::new();
    let mut configs: Vec<(String, String)> = Vec::new();
    for run in 1..=args.runs as usize {
        for name in &args.swap_contestants {
            if skipped.iter().any(|(n, _)| n == name) {
                continue;
            }
            let target = match make_target(name, codec, &zswap_compressor, swap_bytes) {
                Ok(t) => t,
                Err(BlockDevError::Unavailable(why)) => {
                    eprintln!("skipping {name}: {why}");
                    skipped.push((name.clone(), why));
                    continue;
                }
                Err(e) => return Err(CliError::Usage(format!("{name}: {e}"))),
            };
            if !configs.iter().any(|(n, _)| n == name) {
                configs.push((name.clone(), target.config().to_string()));
            }
            eprintln!(
                "run {run}/{}: {name} on {}",
                args.runs,
                target.device().display()
            );
            let r = exp
                .run(Some(target), name, run)
                .map_err(|e| CliError::Usage(format!("{name}, run {run}: {e}")))?;
            report_run(&r);
            runs.push(r);
        }
    }
    let summaries = summarize(&runs);
    match a.format {
        Format::Json => {
            let summaries = summaries
                .iter()
                .map(|s| JsonSummary {
                    summary: s,
                    store_ns: s.latency.as_ref().map(|l| quantiles(&l.store)),
                    load_ns: s.latency.as_ref().map(|l| quantiles(&l.load)),
                })
                .collect();
            print_json(&JsonOut {
                workload: "swap",
                program: exp.program.describe(),
                limit_bytes: limit,
                sizing_peak_bytes: sizing_peak,
                codec: &a.codec,
                skipped: &skipped,
                configs: &configs,
                summaries,
                runs: &runs,
                not_timed: NOT_TIMED,
            })?;
        }
        Format::Csv => {
            let rows = runs.iter().map(|r| {
                vec![
                    r.contestant.clone(),
                    r.run.to_string(),
                    r.outcome.status.clone(),
                    format!("{:.3}", r.outcome.wall_s),
                    format!("{:.3}", r.outcome.user_s),
                    format!("{:.3}", r.outcome.sys_s),
                    r.swap.pswpout.to_string(),
                    r.swap.pswpin.to_string(),
                    r.swap.zswpout.to_string(),
                    r.swap.zswpin.to_string(),
                    r.peaks.pool.to_string(),
                    r.peaks.all_in.to_string(),
                    r.peaks.orig.to_string(),
                    r.peaks.slots_used.to_string(),
                    r.cgroup_peak.unwrap_or(0).to_string(),
                    r.oom_kills.map_or(String::new(), |n| n.to_string()),
                    r.limit.map_or(String::new(), |l| l.to_string()),
                    format!("{:.3}", r.swapoff_s),
                ]
            });
            print_csv(
                &[
                    "contestant",
                    "run",
                    "status",
                    "wall_s",
                    "user_s",
                    "sys_s",
                    "pswpout",
                    "pswpin",
                    "zswpout",
                    "zswpin",
                    "peak_pool",
                    "peak_all_in",
                    "peak_orig",
                    "peak_slots_used",
                    "cgroup_peak",
                    "oom_kills",
                    "limit",
                    "swapoff_s",
                ],
                rows,
            )?;
        }
        Format::Table => print_tables(&exp, &summaries, &configs, &skipped, a.histograms)?,
    }
    if !a.no_report {
        eprintln!("(no HTML report for the swap workload yet: use --format json)");
    }
    Ok(())
}

/// One line on stderr per run.
fn report_run(r: &SwapRun) {
    eprintln!(
        "  {} run {}: {} in {:.1}s (user {:.1}s, sys {:.1}s), pswpout {}, pswpin {}, zswpout {}, zswpin {}, peak pool {:.1} MiB, all-in {:.1} MiB, cgroup peak {:.0} MiB, OOM kills {}, swapoff {:.1}s",
        r.contestant,
        r.run,
        r.outcome.status,
        r.outcome.wall_s,
        r.outcome.user_s,
        r.outcome.sys_s,
        r.swap.pswpout,
        r.swap.pswpin,
        r.swap.zswpout,
        r.swap.zswpin,
        mib(r.peaks.pool),
        mib(r.peaks.all_in),
        mib(r.cgroup_peak.unwrap_or(0)),
        r.oom_kills.map_or("?".to_string(), |n| n.to_string()),
        r.swapoff_s
    );
    if !r.outcome.success && !r.outcome.stderr_tail.is_empty() {
        eprintln!("    {}", r.outcome.stderr_tail.replace('\n', "\n    "));
    }
}

/// `median (min-max)`.
fn spread(s: &Spread, scale: f64, digits: usize) -> String {
    format!(
        "{:.d$} ({:.d$}-{:.d$})",
        s.median / scale,
        s.min / scale,
        s.max / scale,
        d = digits
    )
}

fn print_tables(
    exp: &SwapExperiment,
    summaries: &[Summary],
    configs: &[(String, String)],
    skipped: &[(String, String)],
    histograms: bool,
) -> CliResult {
    let width = crate::output::terminal_width().unwrap_or(100);
    outln!(
        "\n== swap: {}",
        zsmem_lab::text::shown(&exp.program.describe())
    );
    if let Some(l) = exp.limit {
        outln!("memory limit of the program's cgroup: {:.0} MiB", mib(l));
    }
    for (name, config) in configs {
        out!(
            "{}",
            crate::output::wrap(&format!("- {name}: {config}"), width, "  ")
        );
    }
    let mut t = table(
        &[
            "contestant",
            "runs",
            "wall s\nmedian (range)",
            "user s",
            "sys s",
            "pswpout\npages",
            "pswpin\npages",
            "zswpout\npages",
            "zswpin\npages",
        ],
        1,
    );
    for s in summaries {
        t.add_row(vec![
            if s.failed > 0 {
                format!("{} ({} failed)", s.contestant, s.failed)
            } else {
                s.contestant.clone()
            },
            s.runs.to_string(),
            spread(&s.wall_s, 1.0, 1),
            spread(&s.user_s, 1.0, 1),
            spread(&s.sys_s, 1.0, 1),
            spread(&s.pswpout, 1.0, 0),
            spread(&s.pswpin, 1.0, 0),
            spread(&s.zswpout, 1.0, 0),
            spread(&s.zswpin, 1.0, 0),
        ]);
    }
    for (name, why) in skipped {
        t.add_row(vec![name.clone(), format!("skipped: {why}")]);
    }
    outln!();
    print_table(&t)?;
    let mut t = table(
        &[
            "contestant",
            "peak pool\nMiB",
            "peak all-in\nMiB",
            "peak stored\nMiB",
            "peak in use\nMiB",
            "store µs\np50 / p99",
            "load µs\np50 / p99",
        ],
        1,
    );
    let us = |ns: u64| ns as f64 / 1000.0;
    for s in summaries.iter().filter(|s| s.contestant != SIZING) {
        let lat = |h: Option<&hdrhistogram::Histogram<u64>>| match h {
            Some(h) if !h.is_empty() => format!(
                "{:.1} / {:.1}",
                us(h.value_at_quantile(0.5)),
                us(h.value_at_quantile(0.99))
            ),
            _ => "-".into(),
        };
        let m = 1_048_576.0;
        t.add_row(vec![
            s.contestant.clone(),
            spread(&s.peak_pool, m, 1),
            spread(&s.peak_all_in, m, 1),
            spread(&s.peak_orig, m, 1),
            spread(&s.peak_slots_used, m, 1),
            lat(s.latency.as_ref().map(|l| &l.store)),
            lat(s.latency.as_ref().map(|l| &l.load)),
        ]);
    }
    outln!();
    print_table(&t)?;
    out!(
        "{}",
        crate::output::wrap(
            &format!(
                "times: the program's (wait4's rusage: it and its waited-for children); pswpout/pswpin: \
                 /proc/vmstat's deltas over the run (the machine's; zswap's stores and loads are \
                 zswpout/zswpin, a page it rejects goes to its backing device and counts in pswpout); peak pool / all-in / stored: the \
                 store's figures read every {} ms while the program ran (kernel-zram: mm_stat; zswap: \
                 /proc/meminfo's Zswap and Zswapped, all-in with the kernel's estimates; zsmem: as \
                 compare reports them); peak in use: the swap area's slots in use as the kernel counts \
                 them (/proc/swaps, the slots of pages in the swap cache included; a freed slot of a loop \
                 device is discarded only once its 2 MiB cluster is free, so a store behind one holds \
                 more than this); latencies: {NOT_TIMED}.",
                exp.every.as_millis()
            ),
            width,
            ""
        )
    );
    if histograms {
        for s in summaries {
            if let Some(l) = &s.latency {
                outln!("\n== {} latency (ns)", s.contestant);
                for (what, h) in [("store", &l.store), ("load", &l.load)] {
                    outln!("@{what}_ns:\n{}", log2_histogram(h, 52));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swap_contestants_are_checked() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(check_contestants(&names(DEFAULT_SWAP_CONTESTANTS)).is_ok());
        assert!(check_contestants(&names(&["zbud", "zsmem-kernel"])).is_ok());
        assert!(check_contestants(&names(&["kernel-zram-compact"])).is_err());
        assert!(check_contestants(&names(&["nope"])).is_err());
        assert!(check_contestants(&names(&["zsmem", "kernel-zram", "zsmem"])).is_err());
    }

    #[test]
    fn spreads_print_median_and_range() {
        let s = Spread {
            median: 2.0,
            min: 1.0,
            max: 3.5,
        };
        assert_eq!(spread(&s, 1.0, 1), "2.0 (1.0-3.5)");
    }
}
