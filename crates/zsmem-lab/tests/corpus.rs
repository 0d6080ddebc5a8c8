//! scratch
use std::collections::BTreeMap;
use zsmem_lab::corpus::*;

fn ext_of(p: &str) -> String {
    let name = p.rsplit('/').next().unwrap();
    match name.rsplit_once('.') {
        Some((_, e)) if e.len() <= 6 => e.to_string(),
        _ => "(none)".into(),
    }
}

pub fn explore(tree: &FileTree) {
    let t0 = std::time::Instant::now();
    println!(
        "files {} bytes {} pages {}",
        tree.files.len(),
        tree.total_bytes(),
        tree.total_pages()
    );
    let total = tree.total_pages() as f64;
    for (d, n) in tree.top_level_dirs().iter().take(25) {
        let mut st = 0u64;
        let mut pg = 0u64;
        for i in tree.files_in_dir(d) {
            for p in tree.files[i].pages() {
                pg += 1;
                st += if is_same_filled(p) {
                    0
                } else {
                    lz4_len(p).min(4096) as u64
                };
            }
        }
        println!(
            "dir {:16} {:6.2}% ratio {:5.1}%",
            d,
            100.0 * *n as f64 / total,
            100.0 * st as f64 / (pg as f64 * 4096.0)
        );
    }
    let h = compressed_size_histogram(tree, lz4_len, 256);
    println!(
        "ratio {:.2}% same {} huge {}",
        100.0 * h.ratio(),
        h.same_filled,
        h.huge
    );
    for (i, c) in h.buckets.iter().enumerate() {
        println!("b {:5} {:6.2}%", i * 256, h.percent(*c));
    }
    // by extension
    let mut ext: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for f in &tree.files {
        let e = ext.entry(ext_of(f.path())).or_default();
        e.0 += 1;
        for p in f.pages() {
            e.1 += 1;
            e.2 += lz4_len(p).min(4096) as u64;
        }
    }
    let mut v: Vec<_> = ext.into_iter().collect();
    v.sort_by(|a, b| b.1.1.cmp(&a.1.1));
    for (e, (n, pg, st)) in v.iter().take(30) {
        println!(
            "ext {:8} files {:6} pages {:6.2}% ratio {:5.1}%",
            e,
            n,
            100.0 * *pg as f64 / total,
            100.0 * *st as f64 / (*pg as f64 * 4096.0)
        );
    }
    // file sizes
    let mut sz: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for f in &tree.files {
        let k = if f.len() == 0 {
            0
        } else {
            64 - (f.len() as u64).leading_zeros()
        };
        let e = sz.entry(k).or_default();
        e.0 += 1;
        e.1 += f.page_count() as u64;
    }
    for (k, (n, pg)) in sz {
        println!(
            "size <2^{:2} files {:6} ({:5.2}%) pages {:5.2}%",
            k,
            n,
            100.0 * n as f64 / tree.files.len() as f64,
            100.0 * pg as f64 / total
        );
    }
    // full vs last pages
    let (mut fullc, mut fulln, mut lastc, mut lastn) = (0u64, 0u64, 0u64, 0u64);
    for f in &tree.files {
        let n = f.page_count();
        for (i, p) in f.pages().enumerate() {
            let c = lz4_len(p) as u64;
            if i + 1 == n && f.len() % 4096 != 0 {
                lastc += c;
                lastn += 1;
            } else {
                fullc += c;
                fulln += 1;
            }
        }
    }
    println!(
        "full pages {} avg {:.0}; last partial {} avg {:.0}",
        fulln,
        fullc as f64 / fulln as f64,
        lastn,
        lastc as f64 / lastn as f64
    );
    println!("explore took {:?}", t0.elapsed());
}

#[test]
#[ignore]
fn explore_real() {
    let p = std::env::var("ZSMEM_LINUX_TAR").unwrap();
    let t0 = std::time::Instant::now();
    let tree = FileTree::from_tar(&p).unwrap();
    println!("load took {:?}", t0.elapsed());
    explore(&tree);
}

#[test]
#[ignore]
fn explore_real2() {
    let p = std::env::var("ZSMEM_LINUX_TAR").unwrap();
    let tree = FileTree::from_tar(&p).unwrap();
    classes(&tree);
}

pub fn classes(tree: &FileTree) {
    let classes: Vec<(&str, Box<dyn Fn(&FileEntry) -> bool>)> = vec![
        ("c", Box::new(|f: &FileEntry| f.path().ends_with(".c"))),
        (
            "h<1M",
            Box::new(|f: &FileEntry| f.path().ends_with(".h") && f.len() < 1 << 20),
        ),
        (
            "h>=1M",
            Box::new(|f: &FileEntry| f.path().ends_with(".h") && f.len() >= 1 << 20),
        ),
        (
            "rst/txt",
            Box::new(|f: &FileEntry| f.path().ends_with(".rst") || f.path().ends_with(".txt")),
        ),
        (
            "dts/yaml/json",
            Box::new(|f: &FileEntry| {
                [".dts", ".dtsi", ".yaml", ".json"]
                    .iter()
                    .any(|e| f.path().ends_with(e))
            }),
        ),
        (
            "other",
            Box::new(|f: &FileEntry| {
                ![
                    ".c", ".h", ".rst", ".txt", ".dts", ".dtsi", ".yaml", ".json",
                ]
                .iter()
                .any(|e| f.path().ends_with(e))
            }),
        ),
    ];
    for (name, pred) in &classes {
        let sub = FileTree {
            files: tree.files.iter().filter(|f| pred(f)).cloned().collect(),
        };
        let h = compressed_size_histogram(&sub, lz4_len, 256);
        let line: Vec<String> = h
            .buckets
            .iter()
            .map(|c| format!("{:4.1}", 100.0 * *c as f64 / tree.total_pages() as f64))
            .collect();
        println!(
            "{:14} pages {:6} ratio {:5.1}% | {}",
            name,
            h.pages,
            100.0 * h.ratio(),
            line.join(" ")
        );
    }
}
pub fn more(tree: &FileTree) {
    // big files list
    let mut big: Vec<&FileEntry> = tree.files.iter().filter(|f| f.len() > 1 << 20).collect();
    big.sort_by_key(|f| std::cmp::Reverse(f.len()));
    for f in big.iter().take(40) {
        let st: usize = f.pages().map(|p| lz4_len(p)).sum();
        println!(
            "{:10} {:5.1}% {}",
            f.len(),
            100.0 * st as f64 / (f.page_count() * 4096) as f64,
            f.path()
        );
    }
    // huge pages: which files
    let mut hp: BTreeMap<String, usize> = BTreeMap::new();
    for f in &tree.files {
        for p in f.pages() {
            if lz4_len(p) >= 3072 {
                *hp.entry(f.path().to_string()).or_default() += 1;
            }
        }
    }
    for (k, v) in hp.iter().take(60) {
        println!("huge {v:4} {k}");
    }
    // same
    for f in &tree.files {
        for p in f.pages() {
            if is_same_filled(p) {
                println!("same {}", f.path());
            }
        }
    }
    // a sample of c and h pages
    for want in [
        "drivers/net/ethernet/intel/e1000e/netdev.c",
        "include/linux/mm.h",
        "Documentation/admin-guide/kernel-parameters.txt",
    ] {
        if let Some(f) = tree.files.iter().find(|f| f.path() == want) {
            println!(
                "---- {want} page 3 lz4 {}\n{}",
                lz4_len(f.page(3)),
                String::from_utf8_lossy(f.page(3))
            );
        }
    }
}

#[test]
#[ignore]
fn explore_gen() {
    let scale: f64 = std::env::var("SCALE")
        .map(|s| s.parse().unwrap())
        .unwrap_or(1.0);
    let t0 = std::time::Instant::now();
    let tree = FileTree::generate(1, scale);
    println!("generate took {:?}", t0.elapsed());
    explore(&tree);
    classes(&tree);
}

#[test]
#[ignore]
fn show_gen() {
    let tree = FileTree::generate(1, 0.01);
    let want = std::env::var("SHOW").unwrap_or(".c".into());
    let f = tree
        .files
        .iter()
        .filter(|f| {
            f.path().ends_with(&want) && !f.path().contains("asic_reg") && f.page_count() > 3
        })
        .nth(3)
        .unwrap();
    println!(
        "---- {} page 1 lz4 {}\n{}",
        f.path(),
        lz4_len(f.page(1)),
        String::from_utf8_lossy(f.page(1))
    );
}
