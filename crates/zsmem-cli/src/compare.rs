//! `zsmem compare`: the untar/rm experiment of reference 004 on every
//! contestant available here, side by side, the kernel's zram among them.

use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use zsmem::Codec;
use zsmem_lab::contestants::forked::{Allocator, ForkedHeap};
use zsmem_lab::contestants::kernel::KernelContestant;
use zsmem_lab::contestants::kernel_zram::ZramError;
use zsmem_lab::contestants::zsmem::ZsmemContestant;
use zsmem_lab::contestants::{Figures, LabError, PageContestant};
use zsmem_lab::corpus::FileTree;
use zsmem_lab::report::{ReportContext, log2_histogram, write_report};
use zsmem_lab::text::{shown, shown_path};
use zsmem_lab::workloads::trace::TraceRecorder;
use zsmem_lab::workloads::untar_rm::{RunResult, UntarRm, slots_needed};

use crate::{CliError, CliResult};

/// The contestants `compare` runs by default (the peers are left out to
/// keep a default run short; name them with `--contestants`).
pub const DEFAULT_CONTESTANTS: &[&str] = &[
    "zsmem",
    "zsmem-kernel",
    "kernel-zram",
    "system",
    "jemalloc",
    "mimalloc",
];

/// Every contestant `compare` knows, in the order it runs them.
pub const CONTESTANTS: &[&str] = &[
    "zsmem",
    "zsmem-kernel",
    "zsmem-kernel-compact",
    "kernel-zram",
    "kernel-zram-compact",
    "system",
    "jemalloc",
    "mimalloc",
    "zbud",
    "z3fold",
    "zblock",
    "afmalloc",
    "afmalloc-compact",
];

/// Arguments of `zsmem compare`.
#[derive(clap::Args, Debug, Clone)]
pub struct CompareArgs {
    /// A directory or a .tar/.tar.gz/.tar.xz whose files are the workload;
    /// default: the embedded corpus.
    #[arg(long)]
    pub input: Option<std::path::PathBuf>,
    /// Use the anonymous memory of this running process as the pages
    /// (needs ptrace permission); at most --max-mib of it.
    #[arg(long, conflicts_with = "input")]
    pub pid: Option<u32>,
    /// With --pid: most MiB of the process's memory to take (1..=2^24).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1 << 24))]
    pub max_mib: u64,
    /// Seed of the embedded corpus.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Size of the embedded corpus (1.0 is about 300 MiB of files).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Top-level directories to delete one by one, in order, before the
    /// rest (default: the five largest). For the reference's steps on a
    /// kernel tree: drivers,arch,fs,sound,include.
    #[arg(long, value_delimiter = ',')]
    pub remove: Option<Vec<String>>,
    /// Rounds of untar and rm (the reference's churn used 10).
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Contestants, comma separated: zsmem, zsmem-kernel, kernel-zram,
    /// zsmem-kernel-compact and kernel-zram-compact (the same two compacted
    /// after every step, as `echo 1 > /sys/block/zramN/compact`),
    /// system, jemalloc, mimalloc (these three keep each compressed page
    /// as a plain heap allocation, each in a child process of its own;
    /// their memory is its RSS growth after the allocator's release),
    /// zbud, z3fold, zblock, afmalloc, afmalloc-compact (the peers, on
    /// zsmem's page source; see docs/peers.md).
    #[arg(long, value_delimiter = ',', default_values_t = DEFAULT_CONTESTANTS.iter().map(|s| s.to_string()))]
    pub contestants: Vec<String>,
    /// Codec: lz4 (default), zstd or zstd:LEVEL; the kernel is given the
    /// same algorithm.
    #[arg(long, default_value = "lz4")]
    pub codec: String,
    /// Output format: table, csv or json.
    #[arg(long, default_value = "table")]
    pub format: String,
    /// Directory for the report: a self-contained index.html with the
    /// tables and SVG plots.
    #[arg(long, default_value = "zsmem-report")]
    pub report: std::path::PathBuf,
    /// Write no report.
    #[arg(long)]
    pub no_report: bool,
    /// Print the log2 latency histograms of every contestant too.
    #[arg(long)]
    pub histograms: bool,
    /// Run the workload as files in a filesystem on each contestant's
    /// block device (only `ext4`: mkfs.ext4, mount -o discard, as the
    /// reference did); needs root, /dev/fuse and loop devices, and skips
    /// with the reason where they are missing.
    #[arg(long)]
    pub fs: Option<String>,
    /// Record the objects the workload makes (a size trace, see
    /// `zsmem replay`) while the first contestant runs, to this file.
    #[arg(long)]
    pub record_trace: Option<std::path::PathBuf>,
}

impl Default for CompareArgs {
    fn default() -> Self {
        CompareArgs {
            input: None,
            pid: None,
            max_mib: 1024,
            remove: None,
            seed: 1,
            scale: 1.0,
            rounds: 1,
            contestants: DEFAULT_CONTESTANTS.iter().map(|s| s.to_string()).collect(),
            codec: "lz4".into(),
            format: "table".into(),
            record_trace: None,
            fs: None,
            report: "zsmem-report".into(),
            no_report: false,
            histograms: false,
        }
    }
}

/// A contestant's results as printed in json.
#[derive(Serialize)]
struct JsonRun<'a> {
    contestant: &'a str,
    config: &'a str,
    steps: &'a [zsmem_lab::workloads::untar_rm::Step],
    store_ns: Percentiles,
    load_ns: Percentiles,
    discard_ns: Percentiles,
    wall_s: f64,
}

#[derive(Serialize, Clone, Copy)]
struct Percentiles {
    p50: u64,
    p90: u64,
    p99: u64,
    p999: u64,
}

fn percentiles(h: &hdrhistogram::Histogram<u64>) -> Percentiles {
    Percentiles {
        p50: h.value_at_quantile(0.5),
        p90: h.value_at_quantile(0.9),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
    }
}

pub(crate) fn make(
    name: &str,
    codec: Codec,
    slots: usize,
) -> Result<Box<dyn PageContestant>, LabError> {
    Ok(match name {
        "zsmem" => Box::new(ZsmemContestant::best(codec, slots)?),
        "zsmem-kernel" => Box::new(ZsmemContestant::kernel_faithful(codec, slots)?),
        "zsmem-kernel-compact" => Box::new(ZsmemContestant::kernel_compacted(codec, slots)?),
        "system" => Box::new(ForkedHeap::new(Allocator::System, slots)?),
        "jemalloc" => Box::new(ForkedHeap::new(Allocator::Jemalloc, slots)?),
        "mimalloc" => Box::new(ForkedHeap::new(Allocator::Mimalloc, slots)?),
        "kernel-zram" => Box::new(KernelContestant::new(kernel_algorithm(codec), slots)?),
        "kernel-zram-compact" => {
            Box::new(KernelContestant::compacted(kernel_algorithm(codec), slots)?)
        }
        other => match zsmem_lab::contestants::peers::make_peer_pages(other, slots) {
            Some(peer) => peer?,
            None => {
                return Err(LabError::Usage(format!(
                    "unknown contestant `{other}`: use {}",
                    CONTESTANTS.join(", ")
                )));
            }
        },
    })
}

/// The kernel's name of `codec`'s algorithm.
fn kernel_algorithm(codec: Codec) -> &'static str {
    match codec {
        Codec::Lz4 => "lz4",
        Codec::Zstd { .. } => "zstd",
    }
}

fn mb(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn step_line(label: &str, f: &Figures) -> String {
    let mut line = format!(
        "{label:<13} orig {:>9.2}MB compr {:>9.2}MB used {:>9.2}MB overhead {:>7.2}MB ratio {:>6.2}% all-in {:>9.2}MB ratio {:>6.2}% same {:>5} compacted {:>7} huge {:>5}",
        mb(f.orig),
        mb(f.compr),
        mb(f.pool),
        f.overhead() as f64 / (1 << 20) as f64,
        f.overhead_ratio() * 100.0,
        mb(f.all_in),
        f.all_in_ratio() * 100.0,
        f.same_pages,
        f.pages_compacted,
        f.huge_pages,
    );
    if let Some(w) = f.waste.filter(|_| f.compr > 0) {
        let pct = |b: usize| 100.0 * b as f64 / f.compr.max(1) as f64;
        line += &format!(
            " | rounding {:>5.2}% partial {:>5.2}% tail {:>5.2}% meta {:>5.2}% => {:>6.2}%",
            pct(w.rounding_bytes),
            pct(w.partial_bytes),
            pct(w.tail_bytes),
            pct(f.meta as usize),
            f.meta_ratio() * 100.0
        );
    }
    line
}

/// Run `zsmem compare`.
pub fn run(a: &CompareArgs) -> CliResult {
    let codec = Codec::parse(&a.codec)?;
    if a.rounds == 0 {
        return Err(CliError::Usage("--rounds must be at least 1".into()));
    }
    if !(a.scale > 0.0 && a.scale <= 64.0) {
        return Err(CliError::Usage(format!(
            "--scale {} must be in (0, 64]",
            a.scale
        )));
    }
    let format = a.format.as_str();
    if !["table", "csv", "json"].contains(&format) {
        return Err(CliError::Usage(format!(
            "unknown format `{}`: use table, csv or json",
            shown(format)
        )));
    }
    for c in &a.contestants {
        if !CONTESTANTS.contains(&c.as_str()) {
            return Err(CliError::Usage(format!(
                "unknown contestant `{}`: use {}",
                shown(c),
                CONTESTANTS.join(", ")
            )));
        }
    }
    if let Some(fs) = &a.fs {
        crate::compare_fs::check_fs(fs)?;
        if a.record_trace.is_some() || a.pid.is_some() {
            return Err(CliError::Usage(
                "--fs takes files: not with --record-trace or --pid".into(),
            ));
        }
    }
    if !a.no_report {
        // Found unwritable now, not after the whole run.
        probe_report_dir(&a.report)?;
    }
    let t = Instant::now();
    let (tree, source) = match (&a.input, a.pid) {
        (_, Some(pid)) => (
            zsmem_lab::workloads::procmem::process_tree(pid, a.max_mib.saturating_mul(1 << 20))
                .map_err(|e| CliError::Usage(e.to_string()))?,
            format!("anonymous memory of process {pid}"),
        ),
        (Some(p), None) => (
            FileTree::load(p).map_err(|e| CliError::Usage(e.to_string()))?,
            p.display().to_string(),
        ),
        (None, None) => (
            FileTree::generate(a.seed, a.scale),
            format!("embedded corpus (seed {}, scale {})", a.seed, a.scale),
        ),
    };
    let total = tree.total_pages() as u64;
    if total == 0 {
        return Err(CliError::Usage(format!(
            "{}: no pages to store (no regular file with contents)",
            shown(&source)
        )));
    }
    eprintln!(
        "workload: untar/rm, {} rounds, on {source}: {} files, {} pages ({:.1} MiB), loaded in {:.1}s",
        a.rounds,
        tree.files.len(),
        total,
        mb(total * 4096),
        t.elapsed().as_secs_f64()
    );
    if let Some(names) = &a.remove {
        let present: Vec<String> = tree.top_level_dirs().into_iter().map(|(d, _)| d).collect();
        if let Some(missing) = names.iter().find(|n| !present.contains(n)) {
            return Err(CliError::Usage(format!(
                "--remove: the input has no top-level directory `{}` (it has: {})",
                shown(missing),
                shown(&present.join(", "))
            )));
        }
    }
    let work = UntarRm {
        rounds: a.rounds,
        remove: a.remove.clone(),
        ..UntarRm::default()
    };
    let slots = slots_needed(&tree);
    let mut results: Vec<RunResult> = Vec::new();
    let mut skipped: Vec<(String, String)> = Vec::new();
    let fs_run = crate::compare_fs::FsRun::new(codec, kernel_algorithm(codec), &work, total);
    for name in &a.contestants {
        if a.fs.is_some() {
            fs_run.contestant(name, &tree, &mut results, &mut skipped)?;
            continue;
        }
        let mut c = match make(name, codec, slots) {
            Ok(c) => c,
            Err(LabError::Zram(ZramError::Unavailable(why))) => {
                eprintln!("skipping {name}: {why}");
                skipped.push((name.clone(), why));
                continue;
            }
            Err(e) => return Err(CliError::Usage(e.to_string())),
        };
        let bar = ProgressBar::new(total * a.rounds as u64);
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix:>14} [{bar:40}] {pos}/{len} pages {elapsed_precise}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_prefix(name.clone());
        let r = match (&a.record_trace, results.is_empty()) {
            (Some(path), true) => {
                let mut rec = TraceRecorder::new(c.as_mut(), codec);
                let r = work.run(&tree, &mut rec, |done| bar.set_position(done));
                let file = std::fs::File::create(path).map_err(|e| {
                    CliError::Usage(format!(
                        "cannot create trace file {}: {e}",
                        shown_path(path)
                    ))
                })?;
                rec.trace.write_to(std::io::BufWriter::new(file))?;
                eprintln!(
                    "  recorded {} operations to {}",
                    rec.trace.ops.len(),
                    path.display()
                );
                r
            }
            _ => work.run(&tree, c.as_mut(), |done| bar.set_position(done)),
        }
        .map_err(|e| CliError::Usage(format!("{name}: {e}")))?;
        bar.finish_and_clear();
        eprintln!("  {name}: done in {:.1}s", r.wall.as_secs_f64());
        results.push(r);
    }
    match format {
        "json" => {
            let runs: Vec<JsonRun> = results
                .iter()
                .map(|r| JsonRun {
                    contestant: &r.contestant,
                    config: &r.config,
                    steps: &r.steps,
                    store_ns: percentiles(&r.latency.store),
                    load_ns: percentiles(&r.latency.load),
                    discard_ns: percentiles(&r.latency.discard),
                    wall_s: r.wall.as_secs_f64(),
                })
                .collect();
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({
                    "workload": work, "fs": a.fs, "source": source, "pages": total,
                    "skipped": skipped, "runs": runs,
                    "all_in_terms": zsmem_lab::allin::explain(),
                }))
                .map_err(std::io::Error::other)?
            );
        }
        "csv" => {
            println!(
                "contestant,round,step,orig,compr,used,all_in,overhead_ratio,all_in_ratio,same_pages,huge_pages,pages_compacted"
            );
            for r in &results {
                for s in &r.steps {
                    let f = &s.figures;
                    println!(
                        "{},{},{},{},{},{},{},{:.6},{:.6},{},{},{}",
                        r.contestant,
                        s.round,
                        s.label,
                        f.orig,
                        f.compr,
                        f.pool,
                        f.all_in,
                        f.overhead_ratio(),
                        f.all_in_ratio(),
                        f.same_pages,
                        f.huge_pages,
                        f.pages_compacted
                    );
                }
            }
        }
        _ => {
            print_tables(&results, &skipped);
            if a.histograms {
                for r in &results {
                    println!("\n== {} latency (ns)", r.contestant);
                    for (what, h) in [
                        ("store", &r.latency.store),
                        ("load", &r.latency.load),
                        ("discard", &r.latency.discard),
                    ] {
                        println!("@{what}_ns:\n{}", log2_histogram(h, 52));
                    }
                }
            }
        }
    }
    if !a.no_report {
        let ctx = ReportContext {
            title: match &a.fs {
                Some(fs) => format!("zsmem compare: untar/rm on {fs}"),
                None => "zsmem compare: untar/rm".into(),
            },
            source: source.clone(),
            workload: format!(
                "untar/rm, {} round(s), removing {}",
                a.rounds,
                a.remove
                    .as_ref()
                    .map_or("the five largest top-level directories".to_string(), |r| r
                        .join(", "))
            ),
            generated_by: std::env::args().collect::<Vec<_>>().join(" "),
            skipped: skipped.clone(),
        };
        let index = write_report(&a.report, &ctx, &results).map_err(|e| {
            CliError::Usage(format!(
                "cannot write the report to {}: {e}",
                shown_path(&a.report)
            ))
        })?;
        eprintln!("report: {}", index.display());
    }
    Ok(())
}

/// Create the report directory and a probe file in it (then remove the
/// probe), so that an unwritable `--report` fails before the run, naming
/// the path.
fn probe_report_dir(dir: &std::path::Path) -> CliResult {
    let fail = |e: std::io::Error| {
        CliError::Usage(format!(
            "--report {}: cannot write there: {e}",
            shown_path(dir)
        ))
    };
    std::fs::create_dir_all(dir).map_err(fail)?;
    let probe = dir.join(format!(".zsmem-probe-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(fail)?;
    std::fs::remove_file(&probe).map_err(fail)
}

fn print_tables(results: &[RunResult], skipped: &[(String, String)]) {
    for r in results {
        println!("\n== {}: {}", r.contestant, r.config);
        for s in &r.steps {
            println!(
                "{}",
                step_line(&format!("r{}:{}", s.round, s.label), &s.figures)
            );
        }
    }
    for line in [
        "\nused = pool = pages the allocator holds for objects (zram's mem_used_total; for a malloc",
        "baseline its heap growth); ratio = (used - compr) / compr, split for zsmem into rounding (slot",
        "over object size), partial (free slots in held pages), tail (held bytes outside whole slots);",
        "meta = the allocator's metadata (handle tables, zspage descriptors, free bitmaps, owner arrays;",
        "the kernel's is not visible); => counts it too. all-in = everything held for the data, the",
        "same terms for every contestant; all-in ratio = (all-in - compr) / compr. The terms:",
    ] {
        println!("{line}");
    }
    for t in zsmem_lab::allin::explain() {
        println!("  {}: {} [{}]", t.name, t.formula, t.source);
    }
    println!(
        "\n{:<20} {:>11} {:>11} {:>10} {:>10} {:>10} {:>10} {:>17} {:>17} {:>10} {:>8}",
        "contestant",
        "peak used",
        "peak all-in",
        "max ratio",
        "last ratio",
        "max all-in",
        "last all-in",
        "store p50/p99 us",
        "load p50/p99 us",
        "free p50",
        "wall s"
    );
    for r in results {
        let (max_ratio, last_ratio) = r.overhead_ratios();
        let (all_max, all_last) = r.all_in_ratios();
        let l = &r.latency;
        println!(
            "{:<20} {:>9.2}MB {:>9.2}MB {:>9.2}% {:>9.2}% {:>9.2}% {:>9.2}% {:>8.2}/{:<8.2} {:>8.2}/{:<8.2} {:>8.2}us {:>8.1}",
            r.contestant,
            mb(r.peak_pool()),
            mb(r.peak_all_in()),
            max_ratio * 100.0,
            last_ratio * 100.0,
            all_max * 100.0,
            all_last * 100.0,
            us(l.store.value_at_quantile(0.5)),
            us(l.store.value_at_quantile(0.99)),
            us(l.load.value_at_quantile(0.5)),
            us(l.load.value_at_quantile(0.99)),
            us(l.discard.value_at_quantile(0.5)),
            r.wall.as_secs_f64()
        );
    }
    for (name, why) in skipped {
        println!("{name:<20} skipped: {why}");
    }
    let costs: Vec<_> = results
        .iter()
        .filter_map(|r| {
            let c = r.steps.last()?.figures.compaction?;
            Some((&r.contestant, c))
        })
        .collect();
    if !costs.is_empty() {
        println!(
            "
{:<14} {:>14} {:>12} {:>14} {:>14} {:>10}",
            "compaction",
            "objects moved",
            "MiB copied",
            "pages returned",
            "copied/freed",
            "max hold"
        );
    }
    for (name, c) in costs {
        println!(
            "{name:<14} {:>14} {:>12.2} {:>14} {:>14.3} {:>8.1}us",
            c.objects_moved,
            c.bytes_copied as f64 / (1 << 20) as f64,
            c.pages_compacted,
            c.copy_per_freed_byte(4096),
            c.max_lock_hold_ns as f64 / 1000.0
        );
    }
}
