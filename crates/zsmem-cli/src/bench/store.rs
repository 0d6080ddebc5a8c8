//! `zsmem bench store`: the same pages stored, then loaded, through
//! zsmem's `PageStore` and through the kernel's zram (the lab's contestant:
//! one O_DIRECT write or read per page), with the same codec and page size
//! (`--page-size`, 4 KiB by default; the kernel only where its pages are that size), single
//! threaded; per-page latency percentiles, throughput, memory held, and the
//! allocator's share of zsmem's store time, side by side.
//!
//! The allocator's share is measured in a separate pass over a fresh store
//! made with `measure_allocator`, which times each `Pool::store` (and the
//! free of an overwritten object) inside `PageStore::write`: the timed pass
//! pays two extra clock reads per page, so its total is not the one
//! reported as throughput.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use serde::Serialize;

use crate::output::{Format, print_csv, print_json};
use zsmem::{Codec, PageStore, PageStoreConfig};
use zsmem_lab::contestants::kernel::KernelContestant;
use zsmem_lab::contestants::kernel_zram::ZramError;
use zsmem_lab::contestants::zsmem::{ZsmemContestant, variant_pool};
use zsmem_lab::contestants::{LabError, PageContestant};
use zsmem_lab::corpus::{FileEntry, FileTree, Page};
use zsmem_lab::text::shown_path;

use crate::{CliError, CliResult};

/// Arguments of `zsmem bench store`.
#[derive(clap::Args, Debug, Clone)]
pub struct StoreBenchArgs {
    /// A file, a directory or a tar(.gz/.xz) to take pages from; the
    /// embedded corpus if not given.
    #[arg(long)]
    pub input: Option<std::path::PathBuf>,
    /// Size of the embedded corpus (1.0 is about 300 MiB of files).
    #[arg(long, default_value_t = 0.25)]
    pub scale: f64,
    /// Seed of the embedded corpus.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Codec: lz4, zstd or zstd:LEVEL (the kernel runs zstd at its own
    /// level, 3 by default), lzo or lzo-rle (built with `--features lzo`).
    #[arg(long, default_value = "lz4", value_parser = crate::output::codec_value)]
    pub codec: String,
    /// Use at most this many pages (the first ones of the input).
    #[arg(long)]
    pub pages: Option<usize>,
    /// zsmem's pool: `best` (the page store's default: log placement; also
    /// `log`), `classes` (zsmem's classes, `PoolConfig::default`), `kernel`
    /// (the kernel's rules at the page size), `kernel-d16` (the 2026 RFC's
    /// first patch) or `kernel-rfc` (both of its patches).
    #[arg(long, default_value = "best", value_parser = ["best", "log", "classes", "kernel", "kernel-d16", "kernel-rfc"])]
    pub pool: String,
    /// Page size: a power of two from 4K to 64K (4K, 8K, 16K, 32K or 64K;
    /// or in bytes, 16384); the input is cut into pages of this size, each
    /// compressed as a unit. The kernel's zram runs only at the kernel's
    /// own page size.
    #[arg(long, default_value = "4K", value_parser = parse_page_size)]
    pub page_size: usize,
    /// Do not run the kernel's zram even where it is available.
    #[arg(long)]
    pub no_kernel: bool,
    /// Output format (csv: one line per contestant).
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Thread counts, comma-separated: measure store and load throughput
    /// at each (zsmem, the kernel's zram, the codec alone) instead of the
    /// single-threaded latency comparison.
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=256))]
    pub threads: Vec<usize>,
    /// Runs per thread count with `--threads`; the median is printed.
    #[arg(long, default_value_t = 3, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100))]
    pub repeats: usize,
    /// After the fill and the load, a churn phase of this many calls per
    /// page (1 if no number is given; up to 64), split among the threads:
    /// 80% overwrite a slot with a random page of the input, 20% discard
    /// one, rewritten later; timed for every contestant (zsmem with
    /// `--pool`'s placement and with zsmem's classes, the kernel's zram,
    /// the codec alone) at every count of `--threads` (1 if not given).
    #[arg(long, num_args = 0..=1, default_missing_value = "1", value_parser = parse_churn)]
    pub churn: Option<f64>,
}

/// `--churn`: calls per page, in (0, 64].
fn parse_churn(s: &str) -> Result<f64, String> {
    let x: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number of calls per page"))?;
    if x > 0.0 && x <= 64.0 {
        Ok(x)
    } else {
        Err(format!("{x} calls per page: give a number in (0, 64]"))
    }
}

/// `--page-size`: a power of two from 4K to 64K, with a K or in bytes.
fn parse_page_size(s: &str) -> Result<usize, String> {
    zsmem_lab::corpus::parse_page_size(s).map_err(|e| e.to_string())
}

/// Percentiles of per-page latency, in microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Mean.
    pub mean_us: f64,
}

/// One contestant's figures.
#[derive(Debug, Clone, Serialize)]
pub struct StoreFigures {
    /// Who.
    pub contestant: String,
    /// Its configuration.
    pub config: String,
    /// Pages stored and loaded.
    pub pages: usize,
    /// Store throughput, MB/s of pages (10^6 bytes).
    pub store_mb_s: f64,
    /// Load throughput, MB/s.
    pub load_mb_s: f64,
    /// Per-page store latency.
    pub store: Latency,
    /// Per-page load latency.
    pub load: Latency,
    /// Compressed bytes held (`compr_data_size`).
    pub compr_bytes: u64,
    /// The pool: the pages the allocator holds for objects (zram's
    /// `mem_used_total`), bytes; `pool` in the table, as in `compare`.
    pub pool_bytes: u64,
    /// Metadata beside the pool pages (zsmem: slot table, handle tables,
    /// zspage descriptors; the kernel's is not visible here).
    pub metadata_bytes: Option<u64>,
}

/// The whole result.
#[derive(Debug, Clone, Serialize)]
pub struct StoreBench {
    /// Where the pages came from.
    pub source: String,
    /// Codec used by both.
    pub codec: String,
    /// Bytes per page.
    pub page_size: usize,
    /// zsmem's figures.
    pub zsmem: StoreFigures,
    /// The kernel's, if it ran.
    pub kernel: Option<StoreFigures>,
    /// Why the kernel did not run.
    pub kernel_skipped: Option<String>,
    /// Share of zsmem's store time spent in the allocator (Pool::store and
    /// the free of replaced objects), from the timed pass.
    pub allocator_share: f64,
    /// Per-page time of the codec alone (compress into a buffer), the
    /// floor under both contestants' store time.
    pub compress_only: Latency,
    /// zsmem over kernel: store throughput, load throughput, pool, pool
    /// with zsmem's metadata.
    pub ratios: Option<Ratios>,
}

/// zsmem's figures over the kernel's.
#[derive(Debug, Clone, Serialize)]
pub struct Ratios {
    /// Store throughput ratio.
    pub store_throughput: f64,
    /// Load throughput ratio.
    pub load_throughput: f64,
    /// Pool ratio.
    pub pool: f64,
    /// zsmem's pool plus its metadata over the kernel's pool (its
    /// metadata is not visible here).
    pub pool_with_metadata: f64,
}

/// One line per contestant, in plain units (MB/s, µs, bytes).
fn print_csv_rows(r: &StoreBench) -> CliResult {
    let rows = std::iter::once(&r.zsmem).chain(r.kernel.as_ref()).map(|f| {
        vec![
            f.contestant.clone(),
            r.codec.clone(),
            f.pages.to_string(),
            format!("{:.3}", f.store_mb_s),
            format!("{:.3}", f.load_mb_s),
            format!("{:.3}", f.store.p50_us),
            format!("{:.3}", f.store.p99_us),
            format!("{:.3}", f.load.p50_us),
            format!("{:.3}", f.load.p99_us),
            f.compr_bytes.to_string(),
            f.pool_bytes.to_string(),
            f.metadata_bytes.map_or(String::new(), |m| m.to_string()),
        ]
    });
    print_csv(
        &[
            "contestant",
            "codec",
            "pages",
            "store_mb_s",
            "load_mb_s",
            "store_p50_us",
            "store_p99_us",
            "load_p50_us",
            "load_p99_us",
            "compr_bytes",
            "pool_bytes",
            "metadata_bytes",
        ],
        rows,
    )
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds")
}

fn latency(h: &Histogram<u64>) -> Latency {
    let us = |ns: u64| ns as f64 / 1000.0;
    Latency {
        p50_us: us(h.value_at_quantile(0.5)),
        p99_us: us(h.value_at_quantile(0.99)),
        p999_us: us(h.value_at_quantile(0.999)),
        mean_us: h.mean() / 1000.0,
    }
}

fn bar(len: usize, label: &str) -> ProgressBar {
    // Runs of a couple of seconds or more get a bar.
    if len < 200_000 {
        return ProgressBar::hidden();
    }
    crate::progress::bar(len as u64, label, "pages")
}

/// Store every page, then load and check every page; per-page latency.
fn run_contestant(
    c: &mut dyn PageContestant,
    pages: &[&Page],
) -> CliResult<(Histogram<u64>, Duration, Histogram<u64>, Duration)> {
    let name = c.name().to_string();
    let lab = |e: LabError| CliError::Usage(format!("{name}: {e}"));
    let mut store = histogram();
    let progress = bar(2 * pages.len(), c.name());
    let t = Instant::now();
    for (i, p) in pages.iter().enumerate() {
        let s = Instant::now();
        c.store(i as u64, p).map_err(lab)?;
        store.saturating_record(s.elapsed().as_nanos() as u64);
        if i % 4096 == 0 {
            progress.set_position(i as u64);
        }
    }
    let store_wall = t.elapsed();
    let mut load = histogram();
    let mut buf: Box<Page> = vec![0u8; c.page_size()].into_boxed_slice();
    let mut load_wall = Duration::ZERO;
    for (i, p) in pages.iter().enumerate() {
        let s = Instant::now();
        c.load(i as u64, &mut buf).map_err(lab)?;
        let d = s.elapsed();
        load_wall += d;
        load.saturating_record(d.as_nanos() as u64);
        if buf[..] != p[..] {
            return Err(CliError::Usage(format!(
                "{} returned wrong data for page {i}",
                c.name()
            )));
        }
        if i % 4096 == 0 {
            progress.set_position((pages.len() + i) as u64);
        }
    }
    progress.finish_and_clear();
    Ok((store, store_wall, load, load_wall))
}

fn figures(
    c: &dyn PageContestant,
    pages: usize,
    page_size: usize,
    (store, store_wall, load, load_wall): (Histogram<u64>, Duration, Histogram<u64>, Duration),
    compr_bytes: u64,
    pool_bytes: u64,
    metadata_bytes: Option<u64>,
) -> StoreFigures {
    let mb_s = |d: Duration| (pages * page_size) as f64 / 1e6 / d.as_secs_f64().max(1e-9);
    StoreFigures {
        contestant: c.name().to_string(),
        config: c.config(),
        pages,
        store_mb_s: mb_s(store_wall),
        load_mb_s: mb_s(load_wall),
        store: latency(&store),
        load: latency(&load),
        compr_bytes,
        pool_bytes,
        metadata_bytes,
    }
}

/// A directory or a tar archive as the lab loads them; any other file as
/// itself, page by page.
fn load_input(p: &std::path::Path) -> CliResult<FileTree> {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let tar = [".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz"]
        .iter()
        .any(|e| name.ends_with(e));
    if p.is_file() && !tar {
        let limit = zsmem_lab::corpus::default_input_limit();
        let too_big = std::fs::metadata(p).is_ok_and(|m| m.len() > limit);
        if too_big {
            return Err(CliError::Usage(format!(
                "{}: larger than the input limit of {} MiB (half the memory available)",
                shown_path(p),
                limit >> 20
            )));
        }
        let data = std::fs::read(p)
            .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", shown_path(p))))?;
        return Ok(FileTree::new(vec![FileEntry::new(name, data)]));
    }
    FileTree::load(p).map_err(|e| CliError::Usage(e.to_string()))
}

/// Run `zsmem bench store`.
pub fn bench_store(a: &StoreBenchArgs) -> CliResult {
    let codec = Codec::parse(&a.codec)?;
    let page_size = a.page_size;
    let variant = match a.pool.as_str() {
        "best" | "log" => "zsmem",
        "classes" => "zsmem-classes",
        "kernel" => "zsmem-kernel",
        "kernel-d16" => "zsmem-kernel-d16",
        "kernel-rfc" => "zsmem-kernel-rfc",
        p => {
            return Err(CliError::Usage(format!(
                "unknown pool `{}`: use best (or log), classes, kernel, kernel-d16 or kernel-rfc",
                zsmem_lab::text::shown(p)
            )));
        }
    };
    let pool = variant_pool(variant, page_size)
        .ok_or_else(|| CliError::Usage(format!("no pool {variant}")))?;
    if !(a.scale > 0.0 && a.scale <= 64.0) {
        return Err(CliError::Usage(format!(
            "--scale {} must be in (0, 64]",
            a.scale
        )));
    }
    if a.pages == Some(0) {
        return Err(CliError::Usage("--pages must be at least 1".into()));
    }
    let (tree, source) = match &a.input {
        Some(p) => (load_input(p)?, p.display().to_string()),
        None => {
            let spin = crate::progress::spinner("generating the embedded corpus");
            let tree = FileTree::generate(a.seed, a.scale);
            spin.finish_and_clear();
            (
                tree,
                format!("embedded corpus (seed {}, scale {})", a.seed, a.scale),
            )
        }
    };
    let tree = tree
        .with_page_size(page_size)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let pages: Vec<&Page> = tree
        .pages()
        .map(|(_, _, p)| p)
        .take(a.pages.unwrap_or(usize::MAX))
        .collect();
    if pages.is_empty() {
        return Err(CliError::Usage(format!("{source} has no pages")));
    }
    eprintln!(
        "bench store: {} pages of {} KiB ({:.1} MiB) of {source}, {}",
        pages.len(),
        page_size / 1024,
        (pages.len() * page_size) as f64 / (1 << 20) as f64,
        codec.name()
    );
    if !a.threads.is_empty() || a.churn.is_some() {
        let threads = if a.threads.is_empty() {
            vec![1]
        } else {
            a.threads.clone()
        };
        // The churn's calls at each thread count: at least one.
        let churn_calls = a
            .churn
            .map(|x| ((x * pages.len() as f64).ceil() as u64).max(1));
        let mut pools = vec![("zsmem", pool.clone())];
        if churn_calls.is_some() && variant != "zsmem-classes" {
            let classes = variant_pool("zsmem-classes", page_size)
                .ok_or_else(|| CliError::Usage("no pool zsmem-classes".into()))?;
            pools.push(("zsmem-classes", classes));
        }
        let (rows, kernel_skipped) = super::threads::store_threads(
            &pages,
            codec,
            &pools,
            &threads,
            a.repeats,
            a.no_kernel,
            churn_calls,
        )?;
        if let Some(why) = &kernel_skipped {
            eprintln!("kernel zram skipped: {why}");
        }
        let result = super::threads::ThreadBench {
            source,
            codec: codec.name(),
            pages: pages.len(),
            rows,
            kernel_skipped,
            churn_calls,
        };
        return match a.format {
            Format::Json => print_json(&result),
            Format::Csv => crate::output::print_serialized(&result.rows),
            Format::Table => {
                super::threads::print_rows(&result.rows)?;
                if let Some(calls) = churn_calls {
                    super::threads::print_churn_rows(&result.rows, calls)?;
                }
                Ok(())
            }
        };
    }
    let make = |measure_allocator| {
        PageStore::new(PageStoreConfig {
            slots: pages.len(),
            codec,
            pool: pool.clone(),
            measure_allocator,
            ..Default::default()
        })
    };

    // zsmem, measured.
    let mut z = ZsmemContestant::from_store("zsmem", make(false)?);
    let run = run_contestant(&mut z, &pages)?;
    let m = z.store_ref().mm_stat();
    let zsmem = figures(
        &z,
        pages.len(),
        page_size,
        run,
        m.compr_data_size,
        m.mem_used_total,
        Some(z.store_ref().metadata_bytes() as u64),
    );
    drop(z);

    // zsmem again, the allocator timed.
    let timed = make(true)?;
    let t = Instant::now();
    for (i, p) in pages.iter().enumerate() {
        timed.write(i, &p[..])?;
    }
    let allocator_share = timed.allocator_ns() as f64 / t.elapsed().as_nanos().max(1) as f64;
    drop(timed);

    // The codec alone: what neither contestant can go below.
    let mut compress_only = histogram();
    let mut scratch = vec![0u8; page_size];
    for p in &pages {
        let s = Instant::now();
        std::hint::black_box(codec.compress(&p[..], &mut scratch));
        compress_only.saturating_record(s.elapsed().as_nanos() as u64);
    }
    let compress_only = latency(&compress_only);

    // The kernel, same pages, same algorithm.
    let algorithm = codec.kernel_name();
    let (kernel, kernel_skipped) = if a.no_kernel {
        (None, Some("--no-kernel".to_string()))
    } else {
        match KernelContestant::at_page_size(algorithm, page_size, false, pages.len()) {
            Err(LabError::Zram(ZramError::Unavailable(why)) | LabError::Skipped(why)) => {
                (None, Some(why))
            }
            Err(e) => return Err(CliError::Usage(format!("kernel zram: {e}"))),
            Ok(mut k) => {
                let run = run_contestant(k.as_mut(), &pages)?;
                let f = k
                    .figures()
                    .map_err(|e| CliError::Usage(format!("kernel zram: {e}")))?;
                let fig = figures(
                    k.as_ref(),
                    pages.len(),
                    page_size,
                    run,
                    f.compr,
                    f.pool,
                    None,
                );
                (Some(fig), None)
            }
        }
    };
    if let Some(why) = &kernel_skipped {
        eprintln!("kernel zram skipped: {why}");
    }
    let ratios = kernel.as_ref().map(|k| Ratios {
        store_throughput: zsmem.store_mb_s / k.store_mb_s,
        load_throughput: zsmem.load_mb_s / k.load_mb_s,
        pool: zsmem.pool_bytes as f64 / k.pool_bytes.max(1) as f64,
        pool_with_metadata: (zsmem.pool_bytes + zsmem.metadata_bytes.unwrap_or(0)) as f64
            / k.pool_bytes.max(1) as f64,
    });
    let result = StoreBench {
        source,
        codec: codec.name(),
        page_size,
        zsmem,
        kernel,
        kernel_skipped,
        allocator_share,
        compress_only,
        ratios,
    };
    match a.format {
        Format::Json => print_json(&result)?,
        Format::Csv => print_csv_rows(&result)?,
        Format::Table => print_table(&result)?,
    }
    Ok(())
}

/// The caveats under the table, only those that apply: what the codec
/// alone is the floor under, what the latencies measure when the kernel's
/// zram ran beside zsmem, and what its pool + metadata cell holds.
fn caveats(r: &StoreBench) -> Vec<String> {
    let floor = if r.kernel.is_some() {
        "the floor under both stores"
    } else {
        "the floor under zsmem's store"
    };
    let mut notes = vec![format!(
        "{} alone: p50 {:.2} µs, mean {:.2} µs per page ({floor})",
        r.codec, r.compress_only.p50_us, r.compress_only.mean_us
    )];
    notes.push(format!(
        "allocator share of zsmem's store time: {:.2}% (Pool::store and frees timed inside PageStore::write in a separate pass)",
        r.allocator_share * 100.0
    ));
    if r.kernel.is_some() {
        notes.push(
            "Latencies are not the same measure: the kernel's zram is timed around a syscall \
             plus O_DIRECT I/O per page (pwrite/pread of the zram device), zsmem around an \
             in-process call. pool + metadata: the kernel's metadata is not visible here, so \
             its cell is its pool alone."
                .to_string(),
        );
    }
    notes
}

fn print_table(r: &StoreBench) -> CliResult {
    let mib = crate::output::mib;
    let mut cols: Vec<&StoreFigures> = vec![&r.zsmem];
    cols.extend(r.kernel.as_ref());
    outln!(
        "bench store: {} pages of {} KiB of {}, {}",
        r.zsmem.pages,
        r.page_size / 1024,
        r.source,
        r.codec
    );
    let mut head: Vec<&str> = vec![""];
    head.extend(cols.iter().map(|c| c.contestant.as_str()));
    if r.ratios.is_some() {
        head.push("zsmem/kernel");
    }
    let t = std::cell::RefCell::new(crate::output::table(&head, 1));
    let row = |label: &str, f: &dyn Fn(&StoreFigures) -> f64, ratio: Option<f64>| {
        let mut cells = vec![label.to_string()];
        cells.extend(cols.iter().map(|c| format!("{:.2}", f(c))));
        if r.ratios.is_some() {
            cells.push(ratio.map_or(String::new(), |x| format!("{x:.2}x")));
        }
        t.borrow_mut().add_row(cells);
    };
    let ratio = |x: fn(&Ratios) -> f64| r.ratios.as_ref().map(x);
    row(
        "store MB/s",
        &|c| c.store_mb_s,
        ratio(|q| q.store_throughput),
    );
    row("store p50 µs", &|c| c.store.p50_us, None);
    row("store p99 µs", &|c| c.store.p99_us, None);
    row("store p99.9 µs", &|c| c.store.p999_us, None);
    row("load MB/s", &|c| c.load_mb_s, ratio(|q| q.load_throughput));
    row("load p50 µs", &|c| c.load.p50_us, None);
    row("load p99 µs", &|c| c.load.p99_us, None);
    row("load p99.9 µs", &|c| c.load.p999_us, None);
    row("compr MiB", &|c| mib(c.compr_bytes), None);
    row("pool MiB", &|c| mib(c.pool_bytes), ratio(|q| q.pool));
    row(
        "pool + metadata MiB",
        &|c| mib(c.pool_bytes + c.metadata_bytes.unwrap_or(0)),
        ratio(|q| q.pool_with_metadata),
    );
    outln!("{}", t.borrow());
    for note in caveats(r) {
        outln!("{note}");
    }
    for c in &cols {
        outln!("  {}: {}", c.contestant, c.config);
    }
    if let Some(why) = &r.kernel_skipped {
        outln!("  kernel-zram: skipped ({why})");
    }
    Ok(())
}
