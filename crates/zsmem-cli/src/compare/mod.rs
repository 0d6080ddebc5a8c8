//! `zsmem compare`: the untar/rm experiment of reference 004 on every
//! contestant available here, side by side, the kernel's zram among them.

use std::time::Instant;

use serde::Serialize;
use zsmem::Codec;
use zsmem_lab::contestants::kernel_zram::ZramError;
use zsmem_lab::contestants::{Figures, LabError, PageConfig};
use zsmem_lab::corpus::FileTree;
use zsmem_lab::report::{
    ReportContext, VERDICT_NOTE, log2_histogram, rfc_text, verdict_of, write_report,
};
use zsmem_lab::text::{shown, shown_path};
use zsmem_lab::workloads::trace::TraceRecorder;
use zsmem_lab::workloads::untar_rm::{
    LATENCY_NOTE, RunResult, UntarRm, latency_note, slots_needed,
};

use crate::output::{Format, mib, print_csv, print_json, print_table, table};
use crate::{CliError, CliResult, progress};

pub mod churn;
pub mod contestants;
pub mod fs;
mod slots_memory;
pub mod swap;

pub use contestants::{CONTESTANTS, DEFAULT_CONTESTANTS};
use contestants::{contestant_error, kernel_algorithm, make};

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
    /// With --pid: most MiB of the process's memory to take (1..=2^24);
    /// an error without --pid.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1 << 24))]
    pub max_mib: u64,
    /// Seed of the embedded corpus (and of the churn's calls); an error
    /// with --input or --pid, except for the churn.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Size of the embedded corpus (1.0 is about 300 MiB of files); an
    /// error with --input or --pid, which bring their own pages.
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Top-level directories to delete one by one, in order, before the
    /// rest (default: the five largest). For the reference's steps on a
    /// kernel tree: drivers,arch,fs,sound,include.
    #[arg(long, value_delimiter = ',')]
    pub remove: Option<Vec<String>>,
    /// Rounds of untar and rm (the reference's churn used 10).
    #[arg(long, default_value_t = 1, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000))]
    pub rounds: usize,
    /// Page size: a power of two from 4K (default) to 64K, as `4K` or
    /// bytes; 16K and 64K are the kernel's other page sizes. The files are cut into pages
    /// of this size, each compressed as a unit and stored by pools of this
    /// page size; the kernel's zram runs only where the running kernel's
    /// pages are this size.
    #[arg(long, default_value = "4K", value_parser = parse_page_size)]
    pub page_size: usize,
    /// Contestants, comma separated: zsmem (the page store's default: log
    /// placement), zsmem-classes (zsmem placing by size class, as
    /// zsmalloc does), zsmem-kernel (the kernel's
    /// rules at the page size: delta page/256), zsmem-kernel-d16 (the
    /// RFC's first patch, delta 16), zsmem-kernel-rfc (both patches: delta
    /// 16 and the RFC's chain rule), kernel-zram,
    /// zsmem-kernel-compact and kernel-zram-compact (the same two compacted
    /// after every step, as `echo 1 > /sys/block/zramN/compact`),
    /// system, jemalloc, mimalloc (these three keep each compressed page
    /// as a plain heap allocation, each in a child process of its own;
    /// their memory is its RSS growth after the allocator's release),
    /// zbud, z3fold, zblock, afmalloc, afmalloc-compact (the peers, on
    /// zsmem's page source; see docs/peers.md).
    #[arg(long, value_delimiter = ',',
          default_values_t = DEFAULT_CONTESTANTS.iter().map(|s| s.to_string()),
          value_parser = clap::builder::PossibleValuesParser::new(CONTESTANTS))]
    pub contestants: Vec<String>,
    /// Codec: lz4 (default), zstd or zstd:LEVEL (LEVEL 1..=22), lzo or
    /// lzo-rle (built with `--features lzo`); the kernel is given the same
    /// algorithm.
    #[arg(long, default_value = "lz4", value_parser = codec_value)]
    pub codec: String,
    /// Output format. In every format `pool` is the bytes of the pages the
    /// allocator holds for objects (zram's mem_used_total).
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Directory for the reports: each run writes a new numbered
    /// directory in it (001/, 002/, ...: a self-contained index.html with
    /// the tables and SVG plots), never over an earlier one, and points
    /// DIR/latest at it.
    #[arg(long, default_value = "zsmem-report")]
    pub report: std::path::PathBuf,
    /// Write no report (an error with --report).
    #[arg(long)]
    pub no_report: bool,
    /// Print the log2 latency histograms of every contestant too.
    #[arg(long)]
    pub histograms: bool,
    /// Explain the all-in terms in full under the tables (each term's
    /// formula and source; only the terms of the contestants that ran).
    #[arg(long)]
    pub explain: bool,
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
    /// The workload: untar-rm (the default: reference 004's untar/rm),
    /// churn (swap-like: every slot filled with the input's pages, then
    /// random overwrites and discards; CPU time per call reported for every
    /// contestant) or swap (reference 001's experiment: a program in a
    /// memory-limited cgroup swapping to each contestant; see the --swap-*
    /// options).
    #[arg(long, value_enum, default_value_t = Workload::UntarRm)]
    pub workload: Workload,
    /// With --workload churn: uniform (every slot alike), hot-cold (80% of
    /// the calls on a fifth of the slots) or phase (uniform, with half the
    /// slots discarded at once halfway and written again).
    #[arg(long, default_value = "uniform", value_parser = churn::parse_variant)]
    pub variant: zsmem_lab::workloads::churn::Variant,
    /// With --workload churn: slots (default: one per page of the input).
    /// At most 2^31 (2147483648) for zsmem's log placement (the `zsmem`
    /// contestant; size classes have no such limit); refused before the
    /// fill when holding them would take more than half the memory
    /// available.
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=u64::from(u32::MAX)))]
    pub slots: Option<usize>,
    /// With --workload churn: calls after the fill (default: 4 per slot).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1 << 40))]
    pub ops: Option<u64>,
    /// With --workload churn: readings of the figures over the calls.
    #[arg(long, default_value_t = zsmem_lab::workloads::churn::Churn::default().readings, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000))]
    pub readings: usize,
    /// With --workload churn: share of the calls that discard a slot.
    #[arg(long, default_value_t = zsmem_lab::workloads::churn::Churn::default().discard_share)]
    pub discard_share: f64,
    /// With --workload churn: share of the pages written that are
    /// zero-filled.
    #[arg(long, default_value_t = 0.0)]
    pub zero_share: f64,
    /// With --workload churn: share of the pages written that are random
    /// bytes (incompressible).
    #[arg(long, default_value_t = 0.0)]
    pub incompressible_share: f64,
    /// The swap workload's options.
    #[command(flatten)]
    pub swap: Box<swap::SwapArgs>,
}

/// What `--workload` takes.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Workload {
    /// Reference 004's untar/rm.
    #[default]
    UntarRm,
    /// Swap-like churn (`compare/churn.rs`).
    Churn,
    /// Reference 001's swap experiment (`compare/swap.rs`).
    Swap,
}

impl Default for CompareArgs {
    fn default() -> Self {
        let churn = zsmem_lab::workloads::churn::Churn::default();
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
            format: Format::Table,
            record_trace: None,
            fs: None,
            report: "zsmem-report".into(),
            no_report: false,
            histograms: false,
            explain: false,
            page_size: zsmem_lab::corpus::PAGE_SIZE,
            workload: Workload::UntarRm,
            variant: churn.variant,
            slots: churn.slots,
            ops: churn.ops,
            readings: churn.readings,
            discard_share: churn.discard_share,
            zero_share: churn.zero_share,
            incompressible_share: churn.incompressible_share,
            swap: Box::default(),
        }
    }
}

/// Options given that the run would ignore are refused, each named:
/// `--workload swap` ran with `--input`, `--rounds`, `--contestants` and
/// the like silently left out, and the swap options silently did nothing
/// without it; `--scale` with `--input` ran the whole input, `--max-mib`
/// without `--pid` and `--report` with `--no-report` did nothing.
fn check_options_apply(a: &CompareArgs) -> CliResult {
    let d = CompareArgs::default();
    let mut ignored = Vec::new();
    let mut not = |given: bool, name: &'static str| {
        if given {
            ignored.push(name);
        }
    };
    let (churn, swap) = (a.workload == Workload::Churn, a.workload == Workload::Swap);
    if churn || swap {
        // Untar/rm's own: its rounds and directory order, ext4 on top.
        not(a.remove.is_some(), "--remove");
        not(a.rounds != d.rounds, "--rounds");
        not(a.fs.is_some(), "--fs");
    }
    if swap {
        not(a.input.is_some(), "--input");
        not(a.pid.is_some(), "--pid");
        not(a.seed != d.seed, "--seed");
        not(a.scale != d.scale, "--scale");
        not(a.page_size != d.page_size, "--page-size");
        not(
            a.contestants != d.contestants,
            "--contestants (use --swap-contestants)",
        );
        not(a.record_trace.is_some(), "--record-trace");
        not(a.histograms, "--histograms");
        not(
            a.report != d.report,
            "--report (the swap workload writes no report)",
        );
    } else {
        not(
            *a.swap != *d.swap,
            "the swap options (--swap-contestants, --limit-mib, --swap-mib, --source, --jobs, --zswap-compressor, --sample-ms, a command after --)",
        );
    }
    if !churn {
        not(a.variant != d.variant, "--variant");
        not(a.slots != d.slots, "--slots");
        not(a.ops != d.ops, "--ops");
        not(a.readings != d.readings, "--readings");
        not(a.discard_share != d.discard_share, "--discard-share");
        not(a.zero_share != d.zero_share, "--zero-share");
        not(
            a.incompressible_share != d.incompressible_share,
            "--incompressible-share",
        );
    }
    let mut clauses = Vec::new();
    if !ignored.is_empty() {
        clauses.push(format!(
            "--workload {}: {} would be ignored",
            clap::ValueEnum::to_possible_value(&a.workload)
                .map_or_else(String::new, |v| v.get_name().to_string()),
            ignored.join(", ")
        ));
    }
    clauses.extend(source_options_ignored(a));
    if a.no_report && a.report != d.report {
        clauses.push("--report would be ignored (--no-report writes no report)".into());
    }
    if clauses.is_empty() {
        return Ok(());
    }
    let options = ignored.len() + clauses.len() - usize::from(!ignored.is_empty());
    Err(CliError::Usage(format!(
        "{}; leave {} out",
        clauses.join("; "),
        if options > 1 { "them" } else { "it" }
    )))
}

/// The options of the pages' source given where they do nothing, each in
/// words: `--scale` and `--seed` size and seed the embedded corpus (and
/// `--seed` the churn's calls too), `--max-mib` caps `--pid`. (The swap
/// workload takes none of them, and says so with its own.)
fn source_options_ignored(a: &CompareArgs) -> Vec<String> {
    let d = CompareArgs::default();
    let source = match (&a.input, a.pid) {
        _ if a.workload == Workload::Swap => None,
        (_, Some(_)) => Some("--pid"),
        (Some(_), None) => Some("--input"),
        (None, None) => None,
    };
    let mut out = Vec::new();
    if let Some(source) = source {
        if a.scale != d.scale {
            out.push(format!(
                "--scale would be ignored (it sizes the embedded corpus; the pages come from \
                 {source})"
            ));
        }
        if a.seed != d.seed && a.workload != Workload::Churn {
            out.push(format!(
                "--seed would be ignored (it seeds the embedded corpus; the pages come from \
                 {source})"
            ));
        }
    }
    if a.max_mib != d.max_mib && a.pid.is_none() {
        out.push("--max-mib would be ignored (it caps what --pid takes)".into());
    }
    out
}

/// Every contestant known (those built with `Default`, with no
/// subcommand, or by a test skip clap's check) and named once: a
/// contestant named twice ran twice, and the verdict found zsmem alone.
fn check_contestants(names: &[String]) -> CliResult {
    for (i, c) in names.iter().enumerate() {
        if !CONTESTANTS.contains(&c.as_str()) {
            return Err(CliError::Usage(format!(
                "unknown contestant `{}`: use {}",
                shown(c),
                CONTESTANTS.join(", ")
            )));
        }
        if names[..i].contains(c) {
            return Err(CliError::Usage(format!(
                "--contestants names {} twice: name each contestant once",
                shown(c)
            )));
        }
    }
    Ok(())
}

/// `--page-size`: a power of two from 4K to 64K, as `16K` or bytes.
fn parse_page_size(s: &str) -> Result<usize, String> {
    zsmem_lab::corpus::parse_page_size(s).map_err(|e| e.to_string())
}

/// `--codec`'s value, checked by clap (a bad one is a usage error, exit 2).
fn codec_value(s: &str) -> Result<String, String> {
    Codec::parse(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

/// A step as printed in json: the figures, and `pool`, the same figure as
/// `figures.pool`, beside the round and label as the table and the CSV
/// give it.
#[derive(Serialize)]
struct JsonStep<'a> {
    round: usize,
    label: &'a str,
    pool: u64,
    figures: &'a Figures,
}

/// A contestant's results as printed in json.
#[derive(Serialize)]
struct JsonRun<'a> {
    contestant: &'a str,
    config: &'a str,
    steps: Vec<JsonStep<'a>>,
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

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// Run `zsmem compare`.
pub fn run(a: &CompareArgs) -> CliResult {
    check_options_apply(a)?;
    if a.workload == Workload::Swap {
        return swap::run(&a.swap, a);
    }
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
    check_contestants(&a.contestants)?;
    if let Some(fs) = &a.fs {
        fs::check_fs(fs)?;
        if a.record_trace.is_some() || a.pid.is_some() {
            return Err(CliError::Usage(
                "--fs takes files: not with --record-trace or --pid".into(),
            ));
        }
        if a.page_size != zsmem_lab::corpus::PAGE_SIZE {
            return Err(CliError::Usage(
                "--fs ext4 serves 4 KiB blocks (a loop device over the contestant): leave out --page-size"
                    .into(),
            ));
        }
    }
    if !a.no_report {
        // Found unwritable now, not after the whole run.
        probe_report_dir(&a.report)?;
    }
    let cfg = PageConfig::new(a.page_size, codec).map_err(|e| CliError::Usage(e.to_string()))?;
    if a.record_trace.is_some() && a.page_size != zsmem_lab::corpus::PAGE_SIZE {
        return Err(CliError::Usage(
            "--record-trace records 4 KiB pages only: leave out --page-size".into(),
        ));
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
        (None, None) => {
            let spin = progress::spinner("generating the embedded corpus");
            let tree = FileTree::generate(a.seed, a.scale);
            spin.finish_and_clear();
            (
                tree,
                format!("embedded corpus (seed {}, scale {})", a.seed, a.scale),
            )
        }
    };
    let tree = tree
        .with_page_size(cfg.page_size)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let total = tree.total_pages() as u64;
    if total == 0 {
        return Err(CliError::Usage(format!(
            "{}: no pages to store (no regular file with contents)",
            shown(&source)
        )));
    }
    if a.workload == Workload::Churn {
        return churn::run(a, &tree, &source, &cfg);
    }
    eprintln!(
        "workload: untar/rm, {}, on {source}: {} files, {} pages of {} KiB ({:.1} MiB), loaded in {:.1}s",
        rounds(a.rounds),
        tree.files.len(),
        total,
        cfg.page_size / 1024,
        mib(total * cfg.page_size as u64),
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
    let fs_run = fs::FsRun::new(codec, kernel_algorithm(codec), &work, total);
    // Under --fs each contestant is made by `fs_run`, none here.
    let first: &[String] = if a.fs.is_some() { &[] } else { &a.contestants };
    let mut premade = contestants::Premade::baselines(first, &cfg, slots);
    for name in &a.contestants {
        if a.fs.is_some() {
            fs_run.contestant(name, &tree, &mut results, &mut skipped)?;
            continue;
        }
        let mut c = match premade.take(name, &cfg, slots) {
            Ok(c) => c,
            Err(LabError::Zram(ZramError::Unavailable(why)) | LabError::Skipped(why)) => {
                eprintln!("skipping {name}: {why}");
                skipped.push((name.clone(), why));
                continue;
            }
            Err(e) => return Err(contestant_error(name, e)),
        };
        // Untar and the deletions alike: every page stored, then discarded.
        let bar = progress::bar(2 * total * a.rounds as u64, name, "pages");
        let r = match (&a.record_trace, results.is_empty()) {
            (Some(path), true) => {
                let mut rec = TraceRecorder::new(c.as_mut(), codec);
                let r = work.run(&tree, &mut rec, |done| bar.set_position(done));
                save_trace(&rec, path, "")?;
                r
            }
            _ => work.run(&tree, c.as_mut(), |done| bar.set_position(done)),
        }
        .map_err(|e| contestant_error(name, e))?;
        bar.finish_and_clear();
        eprintln!("  {name}: done in {:.1}s", r.wall.as_secs_f64());
        results.push(r);
    }
    match a.format {
        Format::Json => {
            let runs: Vec<JsonRun> = results
                .iter()
                .map(|r| JsonRun {
                    contestant: &r.contestant,
                    config: &r.config,
                    steps: r
                        .steps
                        .iter()
                        .map(|s| JsonStep {
                            round: s.round,
                            label: &s.label,
                            pool: s.figures.pool,
                            figures: &s.figures,
                        })
                        .collect(),
                    store_ns: percentiles(&r.latency.store),
                    load_ns: percentiles(&r.latency.load),
                    discard_ns: percentiles(&r.latency.discard),
                    wall_s: r.wall.as_secs_f64(),
                })
                .collect();
            print_json(&serde_json::json!({
                "workload": work, "fs": a.fs, "source": source, "pages": total,
                "page_size": cfg.page_size,
                "skipped": skipped, "runs": runs,
                "verdict": verdict_of(&results),
                "all_in_terms": zsmem_lab::allin::explain(),
            }))?;
        }
        Format::Csv => {
            let rows = results.iter().flat_map(|r| {
                r.steps.iter().map(move |s| {
                    let f = &s.figures;
                    vec![
                        r.contestant.clone(),
                        s.round.to_string(),
                        s.label.clone(),
                        f.orig.to_string(),
                        f.compr.to_string(),
                        f.pool.to_string(),
                        f.all_in.to_string(),
                        ratio_csv(f, f.overhead_ratio()),
                        ratio_csv(f, f.all_in_ratio()),
                        f.same_pages.to_string(),
                        f.huge_pages.to_string(),
                        f.pages_compacted.to_string(),
                    ]
                })
            });
            print_csv(
                &[
                    "contestant",
                    "round",
                    "step",
                    "orig",
                    "compr",
                    "pool",
                    "all_in",
                    "overhead_ratio",
                    "all_in_ratio",
                    "same_pages",
                    "huge_pages",
                    "pages_compacted",
                ],
                rows,
            )?;
        }
        Format::Table => {
            print_tables(&results, &skipped, cfg.page_size, a.explain, a.fs.is_some())?;
            out!("{}", rfc_text(&results, cfg.page_size));
            if a.histograms {
                for r in &results {
                    outln!("\n== {} latency (ns)", r.contestant);
                    outln!("{}", latency_note(&r.contestant));
                    for (what, h) in [
                        ("store", &r.latency.store),
                        ("load", &r.latency.load),
                        ("discard", &r.latency.discard),
                    ] {
                        outln!("@{what}_ns:\n{}", log2_histogram(h, 52));
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
                "untar/rm, {}, removing {}",
                rounds(a.rounds),
                a.remove
                    .as_ref()
                    .map_or("the five largest top-level directories".to_string(), |r| r
                        .join(", "))
            ),
            generated_by: std::env::args().collect::<Vec<_>>().join(" "),
            codec: a.codec.clone(),
            page_size: cfg.page_size,
            skipped: skipped.clone(),
            cpu: Vec::new(),
            cpu_note: String::new(),
        };
        report(&a.report, &ctx, &results)?;
    }
    Ok(())
}

/// Write the size trace `rec` recorded to `path`, saying so on stderr
/// (with `note` after the path).
pub(crate) fn save_trace(rec: &TraceRecorder<'_>, path: &std::path::Path, note: &str) -> CliResult {
    let file = std::fs::File::create(path).map_err(|e| {
        CliError::Usage(format!(
            "cannot create trace file {}: {e}",
            shown_path(path)
        ))
    })?;
    rec.trace.write_to(std::io::BufWriter::new(file))?;
    eprintln!(
        "  recorded {} operations to {}{note}",
        rec.trace.ops.len(),
        path.display()
    );
    Ok(())
}

/// "1 round", "3 rounds".
fn rounds(n: usize) -> String {
    if n == 1 {
        "1 round".to_string()
    } else {
        format!("{n} rounds")
    }
}

/// Write the report of `runs` to a new numbered directory under `parent`
/// (never over an earlier report) and point `parent/latest` at it, saying
/// where on stderr.
pub(crate) fn report(
    parent: &std::path::Path,
    ctx: &ReportContext,
    runs: &[RunResult],
) -> CliResult {
    let fail = |e: std::io::Error| {
        CliError::Usage(format!(
            "cannot write the report to {}: {e}",
            shown_path(parent)
        ))
    };
    let dir = crate::report_dir::new_run_dir(parent).map_err(fail)?;
    let index = write_report(&dir, ctx, runs).map_err(fail)?;
    match crate::report_dir::point_latest(parent, &dir) {
        Ok(latest) => eprintln!(
            "report: {} (a new directory; {} points to the newest)",
            index.display(),
            latest.display()
        ),
        Err(e) => eprintln!(
            "report: {} (could not point {} at it: {e})",
            index.display(),
            parent.join(crate::report_dir::LATEST).display()
        ),
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

/// One table per contestant (its steps, and where the overhead goes), the
/// legend of the columns (the all-in terms of the contestants that ran in
/// full with `explain`), the summary, the verdict, the latencies (with the
/// caveat on the kernel's and `--fs`'s when they ran) and the compaction
/// costs; all sizes in MiB.
pub(crate) fn print_tables(
    results: &[RunResult],
    skipped: &[(String, String)],
    page_size: usize,
    explain: bool,
    fs: bool,
) -> CliResult {
    let width = crate::output::terminal_width().unwrap_or(100);
    for r in results {
        outln!("\n== {}: {}", r.contestant, r.config);
        print_steps(r)?;
        print_breakdown(r)?;
    }
    outln!();
    print_legend(results, explain, width)?;
    outln!();
    print_summary(results, skipped)?;
    print_verdict(results, width)?;
    outln!();
    print_latencies(results, fs, width)?;
    print_compaction(results, page_size)
}

/// A share in %, two decimals.
fn pct(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

/// The ratio `x` of figures `f` in %, or `-` where nothing is stored.
fn ratio_cell(f: &Figures, x: f64) -> String {
    if f.compr == 0 {
        "-".to_string()
    } else {
        pct(x)
    }
}

/// The ratio `x` of figures `f` for the CSV: empty where nothing is
/// stored (the table's `-`), as `replay`'s CSV does.
fn ratio_csv(f: &Figures, x: f64) -> String {
    if f.compr == 0 {
        String::new()
    } else {
        format!("{x:.6}")
    }
}

/// The table of `r`'s steps.
fn print_steps(r: &RunResult) -> CliResult {
    let mut t = table(
        &[
            "step",
            "orig\nMiB",
            "compr\nMiB",
            "pool\nMiB",
            "overhead",
            "all-in\nMiB",
            "all-in\noverhead",
            "same",
            "huge",
            "pages\ncompacted\n(total)",
        ],
        1,
    );
    for s in &r.steps {
        let f = &s.figures;
        t.add_row(vec![
            format!("r{}:{}", s.round, s.label),
            format!("{:.2}", mib(f.orig)),
            format!("{:.2}", mib(f.compr)),
            format!("{:.2}", mib(f.pool)),
            ratio_cell(f, f.overhead_ratio()),
            format!("{:.2}", mib(f.all_in)),
            ratio_cell(f, f.all_in_ratio()),
            f.same_pages.to_string(),
            f.huge_pages.to_string(),
            f.pages_compacted.to_string(),
        ]);
    }
    print_table(&t)
}

/// Where `r`'s overhead goes, step by step, where the contestant can tell
/// (zsmem's configurations): rounding + partial + tail is the overhead;
/// the metadata comes on top of the pool.
fn print_breakdown(r: &RunResult) -> CliResult {
    if !r.steps.iter().any(|s| s.figures.waste.is_some()) {
        return Ok(());
    }
    outln!(
        "-- {}: where the overhead goes, in % of compr (rounding + partial + tail = overhead; \
         meta is beyond pool)",
        r.contestant
    );
    let mut t = table(
        &[
            "step",
            "rounding",
            "partial",
            "tail",
            "meta",
            "overhead\nwith meta",
        ],
        1,
    );
    for s in &r.steps {
        let f = &s.figures;
        let Some(w) = f.waste.filter(|_| f.compr > 0) else {
            continue;
        };
        let share = |b: u64| pct(b as f64 / f.compr as f64);
        t.add_row(vec![
            format!("r{}:{}", s.round, s.label),
            share(w.rounding_bytes as u64),
            share(w.partial_bytes as u64),
            share(w.tail_bytes as u64),
            share(f.meta),
            pct(f.meta_ratio()),
        ]);
    }
    print_table(&t)
}

/// What the columns hold: the tables' words, and the all-in terms of the
/// contestants that ran (in full, each with its formula and source, with
/// `explain`).
fn print_legend(results: &[RunResult], explain: bool, width: usize) -> CliResult {
    let terms = zsmem_lab::allin::explain_used(
        results
            .iter()
            .flat_map(|r| &r.steps)
            .map(|s| s.figures.all_in_terms.as_slice()),
    );
    let names: Vec<&str> = terms.iter().map(|t| t.name).collect();
    out!("{}", crate::output::wrap(COLUMNS_NOTE, width, ""));
    out!(
        "{}",
        crate::output::wrap(
            &format!(
                "pool = the pages the allocator holds for objects (zram's mem_used_total; for \
                 a malloc baseline its heap growth); overhead = (pool - compr)/compr = \
                 rounding + partial + tail (for zsmem: slots larger than their objects, free \
                 slots in held zspages, zspage ends no slot can use); meta = the allocator's \
                 metadata, beyond pool; overhead with meta = their sum; all in % of compr. \
                 pages compacted: the total since the start. all-in = everything held for the \
                 data, the same way for every contestant, here the sum of: {}; all-in \
                 overhead = (all-in - compr) / compr.{}",
                names.join(", "),
                if explain {
                    ""
                } else {
                    " (--explain: each term's formula and source.)"
                }
            ),
            width,
            "",
        )
    );
    if explain {
        for t in &terms {
            out!(
                "{}",
                crate::output::wrap(
                    &format!("- {}: {} [{}]", t.name, t.formula, t.source),
                    width,
                    "  "
                )
            );
        }
    }
    Ok(())
}

/// The step tables' first columns in words.
const COLUMNS_NOTE: &str = "orig = the pages stored, before compression; compr = their \
compressed bytes; same = same-filled pages (one value repeated, kept as that value, no object); \
huge = pages stored uncompressed, at or above the contestant's own threshold (zsmem's is its \
pool's huge class size), so compr can differ a little between contestants.";

/// One row per contestant: peak pool and all-in, highest and last
/// overheads; the skipped contestants with their reasons.
fn print_summary(results: &[RunResult], skipped: &[(String, String)]) -> CliResult {
    let mut t = table(
        &[
            "contestant",
            "peak\npool\nMiB",
            "peak\nall-in\nMiB",
            "max\noverhead",
            "last\noverhead",
            "max all-in\noverhead",
            "last all-in\noverhead",
        ],
        1,
    );
    for r in results {
        let (max_ratio, last_ratio) = r.overhead_ratios();
        let (all_max, all_last) = r.all_in_ratios();
        t.add_row(vec![
            r.contestant.clone(),
            format!("{:.2}", mib(r.peak_pool())),
            format!("{:.2}", mib(r.peak_all_in())),
            pct(max_ratio),
            pct(last_ratio),
            pct(all_max),
            pct(all_last),
        ]);
    }
    for (name, why) in skipped {
        t.add_row(vec![name.clone(), format!("skipped: {why}")]);
    }
    print_table(&t)
}

/// Store, load and discard latencies and wall time, and what the
/// latencies measure: the caveat on the kernel's zram and `--fs` only
/// where one of them ran.
fn print_latencies(results: &[RunResult], fs: bool, width: usize) -> CliResult {
    let mut t = table(
        &[
            "contestant",
            "store p50\nµs",
            "store p99\nµs",
            "load p50\nµs",
            "load p99\nµs",
            "discard\np50 µs",
            "wall\ns",
        ],
        1,
    );
    for r in results {
        let l = &r.latency;
        let q =
            |h: &hdrhistogram::Histogram<u64>, x: f64| format!("{:.2}", us(h.value_at_quantile(x)));
        t.add_row(vec![
            r.contestant.clone(),
            q(&l.store, 0.5),
            q(&l.store, 0.99),
            q(&l.load, 0.5),
            q(&l.load, 0.99),
            q(&l.discard, 0.5),
            format!("{:.1}", r.wall.as_secs_f64()),
        ]);
    }
    print_table(&t)?;
    let kernel_ran = results
        .iter()
        .any(|r| r.contestant.starts_with("kernel-zram"));
    if kernel_ran || fs {
        outln!("{LATENCY_NOTE}");
    } else {
        out!(
            "{}",
            crate::output::wrap(IN_PROCESS_LATENCY_NOTE, width, "")
        );
    }
    Ok(())
}

/// What the latencies measure when neither the kernel's zram nor `--fs`
/// ran ([`LATENCY_NOTE`] otherwise).
const IN_PROCESS_LATENCY_NOTE: &str = "Latencies are each an in-process call (compression and \
the allocator; the malloc baselines' timed inside their child process, the socket round trip \
left out).";

/// What compaction cost the contestants that report it.
fn print_compaction(results: &[RunResult], page_size: usize) -> CliResult {
    let costs: Vec<_> = results
        .iter()
        .filter_map(|r| {
            let c = r.steps.last()?.figures.compaction?;
            Some((&r.contestant, c))
        })
        .collect();
    if costs.is_empty() {
        return Ok(());
    }
    let mut t = table(
        &[
            "compaction",
            "objects\nmoved",
            "MiB\ncopied",
            "pages\nreturned",
            "copied\nper freed",
            "max lock\nhold µs",
        ],
        1,
    );
    for (name, c) in costs {
        t.add_row(vec![
            name.clone(),
            c.objects_moved.to_string(),
            format!("{:.2}", mib(c.bytes_copied)),
            c.pages_compacted.to_string(),
            format!("{:.3}", c.copy_per_freed_byte(page_size)),
            format!("{:.1}", us(c.max_lock_hold_ns)),
        ]);
    }
    outln!();
    print_table(&t)
}

/// The verdict in words, after the summary table.
fn print_verdict(results: &[RunResult], width: usize) -> CliResult {
    outln!("\nVerdict:");
    for p in verdict_of(results).text {
        out!("{}", crate::output::wrap(&p, width, "  "));
    }
    out!("{}", crate::output::wrap(VERDICT_NOTE, width, "  "));
    Ok(())
}
