//! `zsmem stats`: fill a pool with objects shaped like compressed pages,
//! free a share of them at random, and print the pool as the kernel's
//! debugfs `classes` file shows a zsmalloc pool, with the totals.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use zsmem::stats::{ClassStats, PoolStats, format_kernel_classes};
use zsmem::{ChainRule, CompactionPolicy, Pool, PoolConfig, SizeClassConfig};

use crate::output::{Format, print_csv, print_json};
use crate::{CliError, CliResult, units::parse_size};

/// Arguments of `zsmem stats`.
#[derive(clap::Args, Debug, Clone)]
pub struct StatsArgs {
    /// Objects to store.
    #[arg(long, default_value_t = 200_000)]
    pub objects: usize,
    /// Share of the objects to free afterwards, in percent, chosen at random.
    #[arg(long, default_value_t = 50)]
    pub free_percent: u8,
    /// Seed of the object sizes and of the choice of objects to free.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Page size (4K..64K, power of two).
    #[arg(long, default_value = "4K", value_parser = parse_size)]
    pub page_size: usize,
    /// Most pages per zspage (zsmem's default; the kernel's is 8).
    #[arg(long, default_value_t = zsmem::DEFAULT_CHAIN_SIZE)]
    pub chain: usize,
    /// Class delta in bytes, or `legacy` for page_size >> 8.
    #[arg(long, default_value = "16", value_parser = delta_value)]
    pub delta: String,
    /// Chain rule: trim (zsmem's), min-waste (the kernel's), used-percent or
    /// span-aware.
    #[arg(long, default_value = "trim", value_parser = rule_value)]
    pub rule: String,
    /// Keep zspages all or nothing, as the kernel does (no page trimming).
    #[arg(long)]
    pub no_trim: bool,
    /// Count the kernel's 8-byte in-object handle in each object's size.
    #[arg(long)]
    pub kernel_header: bool,
    /// Automatic compaction: auto (compact on the freeing thread) or off
    /// (only when asked, as the kernel).
    #[arg(long, default_value = "auto", value_parser = ["auto", "off"])]
    pub policy: String,
    /// Compact the whole pool after the frees, as `echo 1 > compact` does.
    #[arg(long)]
    pub compact: bool,
    /// Output format: table (the kernel's layout), csv (one line per
    /// class) or json.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// A `--delta` value, checked by clap: bytes or `legacy`.
fn delta_value(s: &str) -> Result<String, String> {
    if s == "legacy" || s.parse::<usize>().is_ok() {
        Ok(s.to_string())
    } else {
        Err(format!("`{s}` is not a number of bytes or `legacy`"))
    }
}

/// A `--rule` value, checked by clap.
fn rule_value(s: &str) -> Result<String, String> {
    ChainRule::parse(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

/// What `zsmem stats --format json` prints.
#[derive(Serialize)]
struct Report {
    config: SizeClassConfig,
    kernel_header: bool,
    stored: usize,
    freed: usize,
    totals: PoolStats,
    /// `null` when nothing is stored: a share of nothing.
    overhead_ratio: Option<f64>,
    classes: Vec<ClassStats>,
}

/// Lengths of objects shaped like compressed pages: a few tiny, most between
/// an eighth and three quarters of a page, some nearly incompressible.
fn object_len(rng: &mut StdRng, page: usize) -> usize {
    match rng.random_range(0..100) {
        0..10 => rng.random_range(16..=256),
        10..80 => rng.random_range(page / 8..=page * 3 / 4),
        80..95 => rng.random_range(page * 3 / 4..page),
        _ => page,
    }
}

/// The mean of [`object_len`] at `page` bytes, rounded up: 10% of about
/// 136 bytes, 70% of about 7/16 of a page, 15% of about 7/8, 5% of a page.
fn mean_object_len(page: usize) -> usize {
    (10 * 136 + 70 * (page * 7 / 16) + 15 * (page * 7 / 8) + 5 * page).div_ceil(100)
}

/// Refuse `--objects` that would need more than `limit` bytes (the
/// objects' mean size, plus a handle each), before anything is allocated:
/// an absurd count is an error, not an abort or the OOM killer.
fn check_objects(objects: usize, page: usize, limit: u64) -> CliResult {
    let need =
        (objects as u128) * (mean_object_len(page) + std::mem::size_of::<zsmem::Handle>()) as u128;
    crate::units::within_memory(&format!("--objects {objects}"), need, "objects", limit)
}

/// A vector for `n` handles, or an error if the memory cannot be had.
fn handle_vec(n: usize) -> CliResult<Vec<zsmem::Handle>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| CliError::Usage(format!("--objects {n}: no memory for {n} handles")))?;
    Ok(v)
}

/// `part` as a percentage of `stored`, or `-` when nothing is stored.
fn percent_of(part: usize, stored: usize) -> String {
    if stored == 0 {
        "-".to_string()
    } else {
        format!("{:.2}%", 100.0 * part as f64 / stored as f64)
    }
}

/// Run `zsmem stats`.
pub fn run(a: &StatsArgs) -> CliResult {
    if a.free_percent > 100 {
        return Err(CliError::Usage(format!(
            "--free-percent {} must be 0..=100",
            a.free_percent
        )));
    }
    let delta = match a.delta.as_str() {
        "legacy" => SizeClassConfig::legacy_delta(a.page_size),
        d => d
            .parse()
            .map_err(|_| CliError::Usage(format!("--delta `{d}` is not a number or `legacy`")))?,
    };
    let cfg = PoolConfig {
        page_size: a.page_size,
        chain_size: a.chain,
        class_delta: delta,
        chain_rule: ChainRule::parse(&a.rule)?,
        kernel_handle_header: a.kernel_header,
        trim_pages: !a.no_trim,
        memory_limit: None,
        compaction: match a.policy.as_str() {
            "auto" => CompactionPolicy::default(),
            "off" => CompactionPolicy::Off,
            p => {
                return Err(CliError::Usage(format!(
                    "unknown --policy `{p}`: use auto or off"
                )));
            }
        },
        ..PoolConfig::default()
    };
    let pool = Pool::new(cfg.clone())?;
    check_objects(
        a.objects,
        a.page_size,
        zsmem_lab::corpus::default_input_limit(),
    )?;
    let mut rng = StdRng::seed_from_u64(a.seed);
    let mut buf = vec![0u8; a.page_size];
    let mut handles = handle_vec(a.objects)?;
    let bar = crate::progress::bar(a.objects as u64, "storing", "objects");
    for i in 0..a.objects {
        let len = object_len(&mut rng, a.page_size);
        buf[..8].copy_from_slice(&(i as u64).to_le_bytes());
        handles.push(pool.store(&buf[..len])?);
        if i % 4096 == 0 {
            bar.set_position(i as u64);
        }
    }
    bar.finish_and_clear();
    let mut freed = 0;
    for h in handles {
        if rng.random_range(0..100) < a.free_percent {
            pool.free(h)?;
            freed += 1;
        }
    }
    if a.compact {
        pool.compact();
    }
    let totals = pool.stats();
    let classes: Vec<ClassStats> = pool
        .class_stats()
        .into_iter()
        .filter(|c| c.obj_allocated > 0)
        .collect();
    if a.format == Format::Csv {
        let rows = classes.iter().map(|c| {
            vec![
                c.index.to_string(),
                c.size.to_string(),
                c.obj_allocated.to_string(),
                c.obj_used.to_string(),
                c.pages_used.to_string(),
                c.pages_per_zspage.to_string(),
                c.objs_per_zspage.to_string(),
                c.freeable.to_string(),
                c.partial_bytes.to_string(),
                c.bytes_stored.to_string(),
                c.metadata_bytes.to_string(),
                c.parked.to_string(),
            ]
        });
        return print_csv(
            &[
                "class",
                "size",
                "obj_allocated",
                "obj_used",
                "pages_used",
                "pages_per_zspage",
                "objs_per_zspage",
                "freeable",
                "partial_bytes",
                "bytes_stored",
                "metadata_bytes",
                "parked",
            ],
            rows,
        );
    }
    if a.format == Format::Json {
        let report = Report {
            config: cfg.size_classes(),
            kernel_header: a.kernel_header,
            stored: a.objects,
            freed,
            overhead_ratio: (totals.bytes_stored > 0).then(|| totals.overhead_ratio()),
            totals,
            classes,
        };
        return print_json(&report);
    }
    let width = crate::output::terminal_width();
    let say = |text: &str| -> CliResult {
        match width {
            Some(w) => out!("{}", crate::output::wrap(text, w, "")),
            None => outln!("{text}"),
        }
        Ok(())
    };
    say(&format!(
        "pool: {} KiB pages, chain {}, delta {}, rule {}{}; stored {} objects, freed {freed} at random (seed {})",
        a.page_size / 1024,
        a.chain,
        delta,
        cfg.chain_rule.name(),
        if a.kernel_header {
            ", kernel handle header"
        } else {
            ""
        },
        a.objects,
        a.seed
    ))?;
    outln!("(classes with no zspage are left out)\n");
    let layout = format_kernel_classes(&classes);
    let widest = layout.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    match width {
        // The kernel's layout is 184 columns wide: folded in two tables
        // on a narrower terminal.
        Some(w) if widest > w => out!("{}", folded(&classes, w)),
        _ => out!("{layout}"),
    }
    let mib = |b: usize| crate::output::mib(b as u64);
    outln!();
    say(&format!(
        "objects {}  stored {:.2} MiB  pool {} pages ({:.2} MiB)  huge objects {}  pages compacted (total) {}  cached pages {}  parked slots {}",
        totals.objects,
        mib(totals.bytes_stored),
        totals.pages_held,
        mib(totals.bytes_held()),
        totals.huge_objects,
        totals.pages_compacted,
        totals.cached_pages,
        classes.iter().map(|c| c.parked).sum::<usize>()
    ))?;
    say(&overhead_line(&totals))
}

/// The totals' overhead line: each share of the bytes stored, `-` where
/// nothing is stored.
fn overhead_line(totals: &PoolStats) -> String {
    let pct = |b: usize| percent_of(b, totals.bytes_stored);
    let w = totals.waste;
    format!(
        "overhead {} of stored = rounding {} + partly used zspages {} + zspage tails {}; metadata {:.2} MiB ({}); with metadata {}",
        pct(w.total()),
        pct(w.rounding_bytes),
        pct(w.partial_bytes),
        pct(w.tail_bytes),
        crate::output::mib(totals.metadata_bytes as u64),
        pct(totals.metadata_bytes),
        pct(w.total() + totals.metadata_bytes)
    )
}

/// The kernel's `classes` layout folded to `width` columns: the zspages
/// in each fullness group in one table, the objects and pages in another.
fn folded(classes: &[ClassStats], width: usize) -> String {
    let groups = [
        "10%", "20%", "30%", "40%", "50%", "60%", "70%", "80%", "90%", "99%", "100%",
    ];
    let mut head = vec!["class", "size"];
    head.extend(groups);
    let mut t = crate::output::table(&head, 0);
    for c in classes {
        let mut row = vec![c.index.to_string(), c.size.to_string()];
        row.extend(c.fullness.iter().map(|n| n.to_string()));
        t.add_row(row);
    }
    t.set_width(width.try_into().unwrap_or(u16::MAX));
    let mut u = crate::output::table(
        &[
            "class",
            "size",
            "obj_allocated",
            "obj_used",
            "pages_used",
            "pages_per\n_zspage",
            "freeable",
        ],
        0,
    );
    for c in classes {
        u.add_row(vec![
            c.index.to_string(),
            c.size.to_string(),
            c.obj_allocated.to_string(),
            c.obj_used.to_string(),
            c.pages_used.to_string(),
            c.pages_per_zspage.to_string(),
            c.freeable.to_string(),
        ]);
    }
    u.set_width(width.try_into().unwrap_or(u16::MAX));
    format!("zspages per fullness group:\n{t}\n\nobjects and pages:\n{u}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_of_nothing_stored_are_a_dash() {
        assert_eq!(percent_of(10, 0), "-");
        assert_eq!(percent_of(0, 0), "-");
        assert_eq!(percent_of(1, 4), "25.00%");
        let pool = Pool::new(PoolConfig::default()).unwrap();
        let line = overhead_line(&pool.stats());
        assert!(!line.contains('%'), "{line}");
    }

    #[test]
    fn objects_beyond_the_limit_are_refused() {
        assert!(check_objects(1000, 4096, 1 << 30).is_ok());
        assert!(check_objects(1 << 20, 4096, 1 << 30).is_err());
        assert!(check_objects(usize::MAX, 65536, u64::MAX).is_err());
        assert!(handle_vec(usize::MAX).is_err());
    }

    #[test]
    fn the_classes_fold_to_the_width() {
        let pool = Pool::new(PoolConfig::default()).unwrap();
        let hs: Vec<_> = (1..200usize)
            .map(|i| pool.store(&vec![7u8; i * 20]).unwrap())
            .collect();
        let classes: Vec<ClassStats> = pool
            .class_stats()
            .into_iter()
            .filter(|c| c.obj_allocated > 0)
            .collect();
        assert!(
            format_kernel_classes(&classes)
                .lines()
                .any(|l| l.len() > 100)
        );
        for width in [80, 100] {
            let s = folded(&classes, width);
            assert!(
                s.lines().all(|l| l.chars().count() <= width),
                "{width}:\n{s}"
            );
            assert!(s.contains("obj_allocated") && s.contains("100%"), "{s}");
        }
        for h in hs {
            pool.free(h).unwrap();
        }
    }
}
