//! `zsmem classes` against the tool the 2026 RFC cites, Sergey
//! Senozhatsky's `simulate_zsmalloc.c`, for 4, 16 and 64 KiB pages and chain
//! sizes 4 to 16.
//!
//! Two independent checks:
//! - [`reference`] restates the simulator's algorithm (our own code, in the
//!   simulator's shape: classes built from the largest down, merged into the
//!   previous physical class, then one row per 16-byte request) and every row
//!   and summary figure of its BEFORE and AFTER tables is compared with
//!   `zsmem classes`, in process;
//! - [`GOLDEN`] holds what the simulator itself printed: its C source was
//!   compiled once per page size and chain (`PAGE_SIZE` and
//!   `CONFIG_ZSMALLOC_CHAIN_SIZE` changed, nothing else) and run; the AFTER
//!   rows, fields trimmed and joined by commas in its column order (Req,
//!   Phys, Chain, Objs/Page, TailWaste, MergeWaste, Span), one per line, were
//!   hashed with 64-bit FNV-1a; its summary figures are copied. The `zsmem`
//!   binary's CSV for `--delta 16 --rule rfc` has the same columns in the
//!   same order, so its rows must hash the same.

mod common;

use zsmem::ChainRule;
use zsmem_cli::classes::{ClassesArgs, Delta, simulate};

/// The simulator's algorithm, restated independently of zsmem's tables.
mod reference {
    const MIN_ALLOC: usize = 32;

    /// One physical class: size, pages, objects, tail waste, span.
    #[derive(Clone, Copy)]
    pub struct Class {
        pub size: usize,
        pub pages: usize,
        pub objs: usize,
        pub waste: usize,
        pub span: usize,
    }

    /// The kernel's rule since 6.3 (the simulator's "old" rule, BEFORE).
    pub fn chain_old(size: usize, page: usize, max: usize) -> usize {
        if size.is_power_of_two() {
            return 1;
        }
        let (mut best, mut min) = (1, usize::MAX);
        for i in 1..=max {
            let w = i * page % size;
            if w < min {
                (best, min) = (i, w);
            }
        }
        best
    }

    /// The RFC's rule (the simulator's "new" rule, AFTER).
    pub fn chain_new(size: usize, page: usize, max: usize) -> usize {
        if size.is_power_of_two() {
            return 1;
        }
        let (mut best, mut min) = (1, usize::MAX);
        for i in 1..=max {
            let w = i * page % size;
            if w == 0 {
                return i;
            }
            // The first chain is always taken (min is "infinite").
            let take = if min == usize::MAX || min * 10 > best * page {
                w < min
            } else {
                w * 4 < min * 3
            };
            if take {
                (best, min) = (i, w);
            }
            if min * 64 <= best * page {
                break;
            }
        }
        best
    }

    fn spanning(size: usize, pages: usize, page: usize) -> usize {
        (0..pages * page / size)
            .filter(|i| i * size / page != ((i + 1) * size - 1) / page)
            .count()
    }

    /// Logical class index -> its physical class, built from the largest
    /// class down as the simulator does.
    pub fn build(
        page: usize,
        max: usize,
        delta: usize,
        rule: fn(usize, usize, usize) -> usize,
    ) -> Vec<Class> {
        let n = (page - MIN_ALLOC).div_ceil(delta) + 1;
        let mut pool: Vec<Option<Class>> = vec![None; n];
        let mut prev: Option<Class> = None;
        for i in (0..n).rev() {
            let size = (MIN_ALLOC + i * delta).min(page);
            let pages = rule(size, page, max);
            let objs = pages * page / size;
            if let Some(p) = prev
                && p.pages == pages
                && p.objs == objs
            {
                pool[i] = Some(p);
                continue;
            }
            let c = Class {
                size,
                pages,
                objs,
                waste: pages * page % size,
                span: spanning(size, pages, page),
            };
            pool[i] = Some(c);
            prev = Some(c);
        }
        pool.into_iter().map(Option::unwrap).collect()
    }

    /// The request view: (req, phys, chain, objs, tail waste, merge waste, span).
    pub fn rows(pool: &[Class], page: usize, delta: usize) -> Vec<[usize; 7]> {
        (MIN_ALLOC..=page)
            .step_by(16)
            .map(|req| {
                let idx = ((req - MIN_ALLOC).div_ceil(delta)).min(pool.len() - 1);
                let c = pool[idx];
                [
                    req,
                    c.size,
                    c.pages,
                    c.objs,
                    c.waste,
                    (c.size - req) * c.objs,
                    c.span,
                ]
            })
            .collect()
    }

    /// Summary: average effective waste as printed (`%.2f`), logical and
    /// physical class counts, span summed over all logical classes.
    pub fn summary(pool: &[Class], page: usize, delta: usize) -> (String, usize, usize, usize) {
        let rows = rows(pool, page, delta);
        let total: f64 = rows
            .iter()
            .map(|r| {
                let c = pool[((r[0] - MIN_ALLOC).div_ceil(delta)).min(pool.len() - 1)];
                let per_obj = (c.pages * page) as f64 / c.objs as f64;
                let waste = (c.size - r[0]) as f64 + c.waste as f64 / c.objs as f64;
                waste / per_obj * 100.0
            })
            .sum();
        let mut sizes: Vec<usize> = pool.iter().map(|c| c.size).collect();
        sizes.dedup();
        (
            format!("{:.2}", total / rows.len() as f64),
            pool.len(),
            sizes.len(),
            pool.iter().map(|c| c.span).sum(),
        )
    }
}

const PAGES: [usize; 3] = [4096, 16384, 65536];
const CHAINS: std::ops::RangeInclusive<usize> = 4..=16;

fn args(page: usize, chain: usize, delta: Delta, rule: ChainRule) -> ClassesArgs {
    ClassesArgs {
        page_size: page,
        chain,
        delta,
        rule,
        ..Default::default()
    }
}

/// Compare `zsmem classes` with the reference, every row, every column.
fn check(page: usize, chain: usize, delta: Delta, rule: ChainRule) {
    let d = delta.resolve(page);
    let chain_fn = match rule {
        ChainRule::SpanAware => reference::chain_new,
        _ => reference::chain_old,
    };
    let pool = reference::build(page, chain, d, chain_fn);
    let want = reference::rows(&pool, page, d);
    let sim = simulate(&args(page, chain, delta, rule)).unwrap();
    let what = format!("{page}/{chain} {}", rule.name());
    assert_eq!(sim.rows.len(), want.len(), "{what}");
    for (r, w) in sim.rows.iter().zip(&want) {
        let c = r.a.as_ref().unwrap();
        let got = [
            r.req,
            c.phys,
            c.chain,
            c.objs_per_zspage,
            c.tail_waste,
            c.merge_waste,
            c.span,
        ];
        assert_eq!(&got, w, "{what}: row {}", r.req);
    }
    let (avg, logical, physical, span) = reference::summary(&pool, page, d);
    let s = &sim.summary_a;
    let got_avg = format!("{:.2}", s.avg_effective_waste.unwrap() * 100.0);
    assert_eq!(
        (
            got_avg,
            s.logical_classes,
            s.physical_classes,
            s.logical_span
        ),
        (avg, logical, physical, span),
        "{what}: summary"
    );
}

#[test]
fn after_table_matches_the_reference_for_every_page_and_chain() {
    for page in PAGES {
        for chain in CHAINS {
            check(page, chain, Delta::Bytes(16), ChainRule::SpanAware);
        }
    }
}

#[test]
fn before_table_matches_the_reference_for_every_page_and_chain() {
    // The simulator's BEFORE: delta max(page / 256, 16), the kernel's rule.
    for page in PAGES {
        for chain in CHAINS {
            check(page, chain, Delta::Legacy, ChainRule::MinWaste);
        }
    }
}

/// Page size, chain; then rows, FNV-1a of the AFTER rows, and the
/// simulator's printed summary (avg effective waste %, logical classes,
/// physical classes, total span over all logical classes).
struct Golden(usize, usize, usize, u64, &'static str, usize, usize, usize);

const GOLDEN: [Golden; 39] = [
    Golden(4096, 4, 255, 0xbdedd31d45eddbaf, "4.87", 255, 74, 301),
    Golden(4096, 5, 255, 0x093b8d84fc13d14e, "3.60", 255, 98, 430),
    Golden(4096, 6, 255, 0xa7dca956c911177b, "3.10", 255, 102, 485),
    Golden(4096, 7, 255, 0xb68db3e4f0c8efb5, "2.45", 255, 119, 622),
    Golden(4096, 8, 255, 0x4235db50bf89bb8f, "2.17", 255, 128, 691),
    Golden(4096, 9, 255, 0x00bb8a81cf555b01, "1.87", 255, 140, 799),
    Golden(4096, 10, 255, 0x158083392edf4b3d, "1.77", 255, 145, 838),
    Golden(4096, 11, 255, 0xa4ff3766042384a6, "1.61", 255, 153, 931),
    Golden(4096, 12, 255, 0x08ba5a596cc1268e, "1.55", 255, 158, 960),
    Golden(4096, 13, 255, 0xb4e138d46ea60550, "1.38", 255, 168, 1076),
    Golden(4096, 14, 255, 0x740ef60a6581da70, "1.35", 255, 169, 1092),
    Golden(4096, 15, 255, 0xed059e0cb001dcbb, "1.31", 255, 172, 1116),
    Golden(4096, 16, 255, 0x45040a683abe69c9, "1.28", 255, 173, 1146),
    Golden(16384, 4, 1023, 0x77400b66be498a27, "4.86", 1023, 162, 1274),
    Golden(16384, 5, 1023, 0xbceb22de8b76da3c, "3.65", 1023, 213, 1786),
    Golden(16384, 6, 1023, 0x79692209269c0638, "3.14", 1023, 228, 2039),
    Golden(16384, 7, 1023, 0x92aba1e8b57ee78a, "2.52", 1023, 262, 2555),
    Golden(16384, 8, 1023, 0x0eb93c219821bcef, "2.20", 1023, 279, 2890),
    Golden(16384, 9, 1023, 0x4b03399689325ce4, "1.94", 1023, 302, 3251),
    Golden(16384, 10, 1023, 0x7a0a7fe27872c479, "1.80", 1023, 313, 3466),
    Golden(16384, 11, 1023, 0x2b62b5922bec7973, "1.61", 1023, 345, 3889),
    Golden(16384, 12, 1023, 0x1e561ff0bc3db1e8, "1.53", 1023, 357, 4057),
    Golden(16384, 13, 1023, 0xf846d98b1bd94aa3, "1.40", 1023, 377, 4424),
    Golden(16384, 14, 1023, 0x71d3bcbffc778024, "1.34", 1023, 388, 4574),
    Golden(16384, 15, 1023, 0xefb7215c25e5bd00, "1.29", 1023, 400, 4707),
    Golden(16384, 16, 1023, 0x9ba13e405a482425, "1.25", 1023, 407, 4855),
    Golden(65536, 4, 4095, 0x4ab2c2e2a3660590, "4.87", 4095, 299, 5113),
    Golden(65536, 5, 4095, 0x5cc9cefbce2b588e, "3.65", 4095, 377, 7224),
    Golden(65536, 6, 4095, 0xb539f4b2d86bb1cc, "3.13", 4095, 409, 8267),
    Golden(65536, 7, 4095, 0xefa9bb9fd316f426, "2.52", 4095, 471, 10385),
    Golden(65536, 8, 4095, 0x0d6bc6d1d1e27699, "2.21", 4095, 501, 11633),
    Golden(65536, 9, 4095, 0x7c5c734dc3b6fd1c, "1.93", 4095, 544, 13128),
    Golden(
        65536,
        10,
        4095,
        0x149a3bcbae547d2e,
        "1.80",
        4095,
        570,
        14002,
    ),
    Golden(
        65536,
        11,
        4095,
        0x7a400834bda7f6e4,
        "1.63",
        4095,
        613,
        15468,
    ),
    Golden(
        65536,
        12,
        4095,
        0xdb73649ce3a8df71,
        "1.55",
        4095,
        630,
        16054,
    ),
    Golden(
        65536,
        13,
        4095,
        0xdb443e1328fa066e,
        "1.43",
        4095,
        671,
        17386,
    ),
    Golden(
        65536,
        14,
        4095,
        0xcfa93d91a4aa6165,
        "1.37",
        4095,
        694,
        18054,
    ),
    Golden(
        65536,
        15,
        4095,
        0x4bdc655531fb1899,
        "1.31",
        4095,
        718,
        18733,
    ),
    Golden(
        65536,
        16,
        4095,
        0x57a5c2e0a2a89e6a,
        "1.26",
        4095,
        737,
        19373,
    ),
];

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn run(args: &[&str]) -> String {
    let out = common::zsmem(args);
    assert!(
        out.status.success(),
        "`zsmem {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn cli_prints_the_simulators_after_table() {
    for Golden(page, chain, rows, digest, avg, logical, physical, span) in GOLDEN {
        let (p, c) = (page.to_string(), chain.to_string());
        let base = [
            "classes",
            "--page-size",
            &p,
            "--chain",
            &c,
            "--delta",
            "16",
            "--rule",
            "rfc",
        ];
        let csv = run(&[&base[..], &["--format", "csv"]].concat());
        let body = csv.split_once('\n').unwrap().1;
        assert_eq!(body.lines().count(), rows, "{page}/{chain}");
        assert_eq!(
            fnv1a(body.as_bytes()),
            digest,
            "{page}/{chain}: rows differ"
        );

        let json = run(&[&base[..], &["--format", "json"]].concat());
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let s = &v["summary_a"];
        let got_avg = format!("{:.2}", s["avg_effective_waste"].as_f64().unwrap() * 100.0);
        assert_eq!(got_avg, avg, "{page}/{chain}");
        assert_eq!(s["logical_classes"], logical, "{page}/{chain}");
        assert_eq!(s["physical_classes"], physical, "{page}/{chain}");
        assert_eq!(s["logical_span"], span, "{page}/{chain}");
    }
}

#[test]
fn four_k_chain_8_class_96_is_one_page_of_42() {
    // The example: the rule "as we read it" gave 2 pages / 85.
    let t = run(&[
        "classes", "--rule", "rfc", "--from", "96", "--to", "96", "--format", "csv",
    ]);
    assert_eq!(t.lines().nth(1), Some("96,96,1,42,64,0,0"));
}
