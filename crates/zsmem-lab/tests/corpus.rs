//! Tests of the page sources: the file tree model, the directory and tar
//! loaders (plain, gzip, xz, and malformed input), and the embedded corpus.
//!
//! The comparison with the real kernel tree that `docs/corpus.md` reports is
//! the ignored test `compare_with_real_tree`:
//! `ZSMEM_LINUX_TAR=/usr/src/linux-source-6.1.tar.xz cargo test --release -p zsmem-lab --test corpus -- --ignored --nocapture`

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use zsmem_lab::corpus::{
    CorpusError, FileEntry, FileTree, HUGE_THRESHOLD, Histogram, PAGE_SIZE,
    compressed_size_histogram, is_same_filled, lz4_len,
};

/// A directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "zsmem-corpus-{tag}-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Deterministic bytes that neither compress nor repeat.
fn noise(len: usize, mut x: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The files of the small test tree, sorted by path: what `from_dir` reads.
fn sample_files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("Makefile", b"obj-y += kernel/ mm/\n".to_vec()),
        ("drivers/empty.c", Vec::new()),
        ("drivers/net/big.bin", noise(40_000, 7)),
        (
            "drivers/net/e1000.c",
            b"static int e1000_probe(void)\n{\n\treturn 0;\n}\n".repeat(300),
        ),
        ("include/linux/mm.h", b"#define PAGE_SHIFT 12\n".to_vec()),
        ("mm/page.c", vec![0u8; 2 * PAGE_SIZE + 17]),
    ]
}

/// Write the sample tree under `root`, plus a symlink that loaders skip.
fn write_sample_dir(root: &Path) {
    for (path, data) in sample_files() {
        let full = root.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, data).unwrap();
    }
    std::os::unix::fs::symlink("mm/page.c", root.join("link.c")).unwrap();
}

/// The sample tree as an uncompressed tar whose entries all sit under
/// `linux-test/`, with directory and symlink entries as a real tarball has.
fn sample_tar() -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut dirs_done = std::collections::BTreeSet::new();
    for (path, data) in sample_files() {
        let full = format!("linux-test/{path}");
        let mut parent = String::new();
        for comp in full
            .split('/')
            .rev()
            .skip(1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            parent = if parent.is_empty() {
                comp.to_owned()
            } else {
                format!("{parent}/{comp}")
            };
            if dirs_done.insert(parent.clone()) {
                let mut h = tar::Header::new_gnu();
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                h.set_size(0);
                b.append_data(&mut h, format!("{parent}/"), std::io::empty())
                    .unwrap();
            }
        }
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, &full, data.as_slice()).unwrap();
    }
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Symlink);
    h.set_size(0);
    b.append_link(&mut h, "linux-test/link.c", "mm/page.c")
        .unwrap();
    b.into_inner().unwrap()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn xz(data: &[u8]) -> Vec<u8> {
    let mut e = xz2::write::XzEncoder::new(Vec::new(), 6);
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn expected_tree() -> FileTree {
    FileTree::new(
        sample_files()
            .into_iter()
            .map(|(p, d)| FileEntry::new(p, d))
            .collect(),
    )
}

#[test]
fn pages_are_4096_bytes_and_zero_padded() {
    let f = FileEntry::new("a/b.c", vec![7u8; PAGE_SIZE + 904]);
    assert_eq!(f.len(), PAGE_SIZE + 904);
    assert_eq!(f.page_count(), 2);
    assert_eq!(f.data(), &vec![7u8; PAGE_SIZE + 904][..]);
    assert!(f.page(0).iter().all(|&b| b == 7));
    assert!(f.page(1)[..904].iter().all(|&b| b == 7));
    assert!(f.page(1)[904..].iter().all(|&b| b == 0));
    assert_eq!(f.top_level_dir(), Some("a"));

    let empty = FileEntry::new("a/empty", Vec::new());
    assert!(empty.is_empty());
    assert_eq!(empty.page_count(), 0);
    let exact = FileEntry::new("top", vec![1u8; 2 * PAGE_SIZE]);
    assert_eq!(exact.page_count(), 2);
    assert_eq!(exact.top_level_dir(), None);

    let tree = FileTree::new(vec![f, empty, exact]);
    assert_eq!(tree.total_pages(), 4);
    let seen: Vec<(usize, usize)> = tree
        .pages()
        .map(|(f, p, page)| {
            assert_eq!(page.len(), PAGE_SIZE);
            (f, p)
        })
        .collect();
    assert_eq!(seen, vec![(0, 0), (0, 1), (2, 0), (2, 1)]);
}

#[test]
fn common_top_directory_is_stripped_only_when_shared() {
    let tree = FileTree::new(vec![
        FileEntry::new("linux-6.1/drivers/a.c", vec![1; 10]),
        FileEntry::new("linux-6.1/Makefile", vec![1; 10]),
    ]);
    let paths: Vec<&str> = tree.files.iter().map(FileEntry::path).collect();
    assert_eq!(paths, ["drivers/a.c", "Makefile"]);

    let tree = FileTree::new(vec![
        FileEntry::new("linux-6.1/drivers/a.c", vec![1; 10]),
        FileEntry::new("README", vec![1; 10]),
    ]);
    assert_eq!(tree.files[0].path(), "linux-6.1/drivers/a.c");
}

#[test]
fn top_level_dirs_are_sorted_by_pages() {
    let tree = FileTree::new(vec![
        FileEntry::new("fs/a.c", vec![1; 3 * PAGE_SIZE]),
        FileEntry::new("drivers/a.c", vec![1; 5 * PAGE_SIZE]),
        FileEntry::new("arch/a.c", vec![1; 3 * PAGE_SIZE]),
        FileEntry::new("Makefile", vec![1; 9 * PAGE_SIZE]),
        FileEntry::new("drivers/b.c", vec![1; 1]),
    ]);
    assert_eq!(
        tree.top_level_dirs(),
        vec![
            ("drivers".to_owned(), 6),
            ("arch".to_owned(), 3),
            ("fs".to_owned(), 3)
        ]
    );
    assert_eq!(tree.files_in_dir("drivers").collect::<Vec<_>>(), vec![1, 4]);
}

#[test]
fn from_dir_reads_regular_files_sorted_and_skips_symlinks() {
    let dir = TempDir::new("dir");
    write_sample_dir(dir.path());
    let tree = FileTree::from_dir(dir.path()).unwrap();
    assert_eq!(tree, expected_tree());
    assert_eq!(FileTree::load(dir.path()).unwrap(), tree);
}

#[test]
fn tar_gz_xz_all_load_like_the_directory() {
    let dir = TempDir::new("tars");
    let src = dir.path().join("src");
    write_sample_dir(&src);
    let from_dir = FileTree::from_dir(&src).unwrap();

    let tar = sample_tar();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("t.tar", tar.clone()),
        ("t.tar.gz", gzip(&tar)),
        ("t.tgz", gzip(&tar)),
        ("t.tar.xz", xz(&tar)),
        ("t.txz", xz(&tar)),
        // Magic bytes win when the name says nothing, or says plain tar.
        ("t.tar.bin", xz(&tar)),
        ("t.tar", gzip(&tar)),
        ("no-extension", gzip(&tar)),
    ];
    for (i, (name, bytes)) in cases.into_iter().enumerate() {
        let sub = dir.path().join(format!("case{i}"));
        std::fs::create_dir_all(&sub).unwrap();
        let path = sub.join(name);
        std::fs::write(&path, bytes).unwrap();
        let tree = FileTree::from_tar(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(tree, from_dir, "{name}");
        assert_eq!(FileTree::load(&path).unwrap(), from_dir, "{name} via load");
    }
}

#[test]
fn later_duplicate_in_tar_replaces_earlier() {
    let mut b = tar::Builder::new(Vec::new());
    for (path, data) in [("a/x", &b"one"[..]), ("a/y", b"two"), ("a/x", b"three")] {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, path, data).unwrap();
    }
    let dir = TempDir::new("dup");
    let path = dir.path().join("d.tar");
    std::fs::write(&path, b.into_inner().unwrap()).unwrap();
    let tree = FileTree::from_tar(&path).unwrap();
    let got: Vec<(&str, &[u8])> = tree.files.iter().map(|f| (f.path(), f.data())).collect();
    assert_eq!(got, vec![("x", &b"three"[..]), ("y", &b"two"[..])]);
}

/// Load `bytes` written as `name` and return the error, which must name the
/// file.
fn load_err(name: &str, bytes: &[u8]) -> CorpusError {
    let dir = TempDir::new("bad");
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    let err = FileTree::load(&path).expect_err(name);
    assert!(
        err.to_string().contains(path.to_str().unwrap()),
        "{name}: message does not name the path: {err}"
    );
    err
}

#[test]
fn malformed_inputs_are_errors_not_panics() {
    let tar = sample_tar();
    let garbage = noise(10_000, 99);

    assert!(matches!(
        load_err("garbage.tar", &garbage),
        CorpusError::NotATar { .. }
    ));
    assert!(matches!(
        load_err("garbage", &garbage),
        CorpusError::NotATar { .. }
    ));
    assert!(matches!(
        load_err("empty.tar", b""),
        CorpusError::NotATar { .. }
    ));
    assert!(matches!(
        load_err("text.tar", &b"hello world\n".repeat(100)),
        CorpusError::NotATar { .. }
    ));

    // Cut inside the big file's data, and inside a header block.
    let big_at = tar.windows(5).position(|w| w == b"big.b").unwrap();
    for cut in [big_at + 512 + 20_000, big_at + 100] {
        let e = load_err("cut.tar", &tar[..cut]);
        assert!(
            matches!(e, CorpusError::Corrupt { .. }),
            "cut at {cut}: {e}"
        );
    }
    let gz = gzip(&tar);
    let e = load_err("cut.tar.gz", &gz[..gz.len() / 2]);
    assert!(matches!(e, CorpusError::Corrupt { .. }), "{e}");
    let x = xz(&tar);
    let e = load_err("cut.tar.xz", &x[..x.len() / 2]);
    assert!(matches!(e, CorpusError::Corrupt { .. }), "{e}");

    // Magic bytes followed by garbage.
    let mut fake_gz = vec![0x1f, 0x8b];
    fake_gz.extend_from_slice(&garbage);
    assert!(matches!(
        load_err("fake.tar.gz", &fake_gz),
        CorpusError::Corrupt { .. }
    ));
    let mut fake_xz = vec![0xfd, b'7', b'z', b'X', b'Z', 0];
    fake_xz.extend_from_slice(&garbage);
    assert!(matches!(
        load_err("fake.tar.xz", &fake_xz),
        CorpusError::Corrupt { .. }
    ));

    // The name promises compression the contents lack.
    let e = load_err("plain.tar.xz", &tar);
    assert!(matches!(e, CorpusError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains("xz"), "{e}");
    let e = load_err("plain.tgz", &garbage);
    assert!(matches!(e, CorpusError::Corrupt { .. }), "{e}");
}

#[test]
fn missing_paths_and_wrong_kinds_are_reported() {
    let dir = TempDir::new("missing");
    let nowhere = dir.path().join("nowhere.tar.xz");
    for e in [
        FileTree::load(&nowhere).unwrap_err(),
        FileTree::from_tar(&nowhere).unwrap_err(),
        FileTree::from_dir(&nowhere).unwrap_err(),
    ] {
        assert!(matches!(e, CorpusError::NotFound { .. }), "{e}");
        assert!(e.to_string().contains("nowhere.tar.xz"), "{e}");
    }
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let e = FileTree::from_dir(&file).unwrap_err();
    assert!(e.to_string().contains("not a directory"), "{e}");
    let e = FileTree::from_tar(dir.path()).unwrap_err();
    assert!(matches!(e, CorpusError::Unsupported { .. }), "{e}");
}

#[test]
fn generate_is_deterministic_per_seed() {
    let a = FileTree::generate(7, 0.02);
    let b = FileTree::generate(7, 0.02);
    assert_eq!(a, b);
    let c = FileTree::generate(8, 0.02);
    assert_ne!(a, c);
    let differing = a.pages().zip(c.pages()).filter(|(x, y)| x.2 != y.2).count();
    assert!(
        differing > a.total_pages() / 2,
        "only {differing} pages differ"
    );
}

#[test]
fn generate_scales_roughly_proportionally() {
    let small = FileTree::generate(1, 0.02);
    let large = FileTree::generate(1, 0.06);
    let target = 0.02 * (300u64 << 20) as f64;
    let bytes = small.total_bytes() as f64;
    assert!(
        (bytes / target - 1.0).abs() < 0.15,
        "{bytes} bytes for {target}"
    );
    let r = large.total_bytes() as f64 / bytes;
    assert!((2.6..3.4).contains(&r), "3x scale gave {r}x bytes");
    let r = large.total_pages() as f64 / small.total_pages() as f64;
    assert!((2.6..3.4).contains(&r), "3x scale gave {r}x pages");
}

#[test]
fn generate_copes_with_tiny_scales() {
    let tree = FileTree::generate(1, 1e-5);
    assert!(tree.total_pages() > 0);
    // Every directory keeps at least one page, so all of them exist.
    assert_eq!(tree.top_level_dirs().len(), 24);
}

#[test]
#[should_panic(expected = "scale must be positive")]
fn generate_rejects_a_zero_scale() {
    let _ = FileTree::generate(1, 0.0);
}

#[test]
fn generated_top_dirs_come_in_the_experiments_order() {
    for scale in [0.01, 0.05] {
        let tree = FileTree::generate(3, scale);
        let dirs = tree.top_level_dirs();
        let names: Vec<&str> = dirs.iter().take(7).map(|d| d.0.as_str()).collect();
        assert_eq!(
            names,
            [
                "drivers",
                "arch",
                "fs",
                "sound",
                "include",
                "Documentation",
                "tools"
            ],
            "scale {scale}"
        );
        let share = dirs[0].1 as f64 / tree.total_pages() as f64;
        assert!((0.6..0.7).contains(&share), "drivers share {share}");
    }
}

#[test]
fn generated_pages_compress_like_source() {
    let tree = FileTree::generate(1, 0.05);
    assert!(
        tree.files
            .iter()
            .all(|f| !f.path().starts_with('/') && !f.path().contains("//"))
    );
    let c_or_h = tree
        .files
        .iter()
        .filter(|f| f.path().ends_with(".c") || f.path().ends_with(".h"))
        .count();
    assert!(
        c_or_h * 10 > tree.files.len() * 7,
        "{c_or_h} of {} are .c/.h",
        tree.files.len()
    );
    let h = compressed_size_histogram(&tree, lz4_len, 256);
    let ratio = h.ratio();
    assert!((0.28..0.40).contains(&ratio), "lz4 ratio {ratio}");
    // Spread over many size classes, not one spike.
    let busy = h.buckets.iter().filter(|&&c| h.percent(c) > 2.0).count();
    assert!(busy >= 8, "only {busy} buckets above 2%: {:?}", h.buckets);
}

#[test]
fn histogram_counts_same_filled_huge_and_buckets() {
    let tree = FileTree::new(vec![
        FileEntry::new("z", vec![0u8; PAGE_SIZE]),
        FileEntry::new("f", vec![0xabu8; 3 * PAGE_SIZE]),
        FileEntry::new("r", noise(PAGE_SIZE, 5)),
        FileEntry::new("t", b"static int foo(void) { return 0; }\n".repeat(100)),
    ]);
    let h: Histogram = compressed_size_histogram(&tree, lz4_len, 256);
    assert_eq!(h.pages, 6);
    assert_eq!(h.same_filled, 4);
    assert_eq!(h.huge, 1);
    assert_eq!(h.buckets.len(), 16);
    assert_eq!(h.buckets.iter().sum::<u64>(), 2);
    assert_eq!(h.buckets[15], 1, "incompressible page in the last bucket");
    let text = lz4_len(tree.files[3].page(0));
    assert!(text < 256);
    assert_eq!(h.buckets[0], 1);
    assert_eq!(h.stored_bytes, PAGE_SIZE as u64 + text as u64);
    assert!(lz4_len(&noise(PAGE_SIZE, 6)) >= HUGE_THRESHOLD);
    assert!(is_same_filled(tree.files[1].page(2)));
    assert!(!is_same_filled(tree.files[3].page(0)));
    // A custom compressor: everything 1000 bytes.
    let h = compressed_size_histogram(&tree, |_| 1000, 512);
    assert_eq!(h.buckets, vec![0, 2, 0, 0, 0, 0, 0, 0]);
    assert_eq!(h.huge, 0);
}

/// Rows of the comparison for `docs/corpus.md`.
fn percent_row(h: &Histogram, count: u64) -> String {
    format!("{:.2}", h.percent(count))
}

fn dir_shares(tree: &FileTree) -> Vec<(String, f64)> {
    let total = tree.total_pages() as f64;
    tree.top_level_dirs()
        .into_iter()
        .map(|(d, n)| (d, 100.0 * n as f64 / total))
        .collect()
}

/// File types of the comparison, by name ending; the last is the rest.
const FILE_TYPES: &[(&str, &[&str])] = &[
    ("C (.c)", &[".c"]),
    ("headers (.h)", &[".h"]),
    ("docs (.rst, .txt)", &[".rst", ".txt"]),
    (
        "device trees, schemas (.dts, .dtsi, .yaml, .json)",
        &[".dts", ".dtsi", ".yaml", ".json"],
    ),
    ("other", &[]),
];

/// Share of pages and LZ4 ratio of the files whose names end in one of
/// `exts`; empty `exts` means files of none of the listed types.
fn type_stats(tree: &FileTree, exts: &[&str]) -> (f64, f64) {
    let listed = |p: &str| {
        FILE_TYPES
            .iter()
            .flat_map(|t| t.1.iter())
            .any(|e| p.ends_with(e))
    };
    let sub = FileTree {
        files: tree
            .files
            .iter()
            .filter(|f| {
                if exts.is_empty() {
                    !listed(f.path())
                } else {
                    exts.iter().any(|e| f.path().ends_with(e))
                }
            })
            .cloned()
            .collect(),
    };
    let h = compressed_size_histogram(&sub, lz4_len, 256);
    (h.pages as f64 / tree.total_pages() as f64, h.ratio())
}

/// The comparison reported in `docs/corpus.md`: the embedded corpus (seed 1,
/// scale 1.0) against the tarball named by `ZSMEM_LINUX_TAR`.
#[test]
#[ignore = "needs ZSMEM_LINUX_TAR=/usr/src/linux-source-6.1.tar.xz; run in release"]
fn compare_with_real_tree() {
    let Ok(tar) = std::env::var("ZSMEM_LINUX_TAR") else {
        println!("ZSMEM_LINUX_TAR is not set: nothing to compare with");
        return;
    };
    let t = std::time::Instant::now();
    let corpus = FileTree::generate(1, 1.0);
    let gen_time = t.elapsed();
    let t = std::time::Instant::now();
    let real = FileTree::from_tar(&tar).unwrap_or_else(|e| panic!("{e}"));
    let load_time = t.elapsed();
    let hr = compressed_size_histogram(&real, lz4_len, 256);
    let hc = compressed_size_histogram(&corpus, lz4_len, 256);

    println!("generate(1, 1.0): {gen_time:.2?}; loading {tar}: {load_time:.2?}\n");
    println!("| | real | corpus |\n|---|---:|---:|");
    println!("| files | {} | {} |", real.files.len(), corpus.files.len());
    println!(
        "| file bytes | {} | {} |",
        real.total_bytes(),
        corpus.total_bytes()
    );
    println!("| pages | {} | {} |", hr.pages, hc.pages);
    println!(
        "| LZ4 stored / original | {:.2}% | {:.2}% |",
        100.0 * hr.ratio(),
        100.0 * hc.ratio()
    );
    println!(
        "| same-filled pages | {} ({}%) | {} ({}%) |",
        hr.same_filled,
        percent_row(&hr, hr.same_filled),
        hc.same_filled,
        percent_row(&hc, hc.same_filled)
    );
    println!(
        "| huge pages (>= {HUGE_THRESHOLD} B) | {} ({}%) | {} ({}%) |",
        hr.huge,
        percent_row(&hr, hr.huge),
        hc.huge,
        percent_row(&hc, hc.huge)
    );

    println!("\n| LZ4 size bucket | real % | corpus % |\n|---|---:|---:|");
    let mut tv = 0.0;
    for (i, (r, c)) in hr.buckets.iter().zip(&hc.buckets).enumerate() {
        let lo = i * hr.bucket_bytes;
        let hi = lo + hr.bucket_bytes;
        println!(
            "| {lo}-{} | {} | {} |",
            hi - 1,
            percent_row(&hr, *r),
            percent_row(&hc, *c)
        );
        tv += (hr.percent(*r) - hc.percent(*c)).abs();
    }
    println!(
        "| same-filled | {} | {} |",
        percent_row(&hr, hr.same_filled),
        percent_row(&hc, hc.same_filled)
    );
    tv += (hr.percent(hr.same_filled) - hc.percent(hc.same_filled)).abs();
    println!(
        "\ntotal variation distance between the bucket distributions: {:.1}%",
        tv / 2.0
    );

    println!(
        "\n| file type | real % of pages | corpus % of pages | real LZ4 ratio | corpus LZ4 ratio |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (name, exts) in FILE_TYPES {
        let (r, c) = (type_stats(&real, exts), type_stats(&corpus, exts));
        println!(
            "| {name} | {:.2} | {:.2} | {:.1}% | {:.1}% |",
            100.0 * r.0,
            100.0 * c.0,
            100.0 * r.1,
            100.0 * c.1
        );
    }

    let rd = dir_shares(&real);
    let cd = dir_shares(&corpus);
    println!("\n| top-level dir | real % of pages | corpus % of pages |\n|---|---:|---:|");
    let mut names: Vec<&str> = rd.iter().map(|d| d.0.as_str()).collect();
    for (d, _) in &cd {
        if !names.contains(&d.as_str()) {
            names.push(d);
        }
    }
    let share = |v: &[(String, f64)], n: &str| {
        v.iter()
            .find(|d| d.0 == n)
            .map_or("-".to_owned(), |d| format!("{:.2}", d.1))
    };
    for n in names {
        println!("| {n} | {} | {} |", share(&rd, n), share(&cd, n));
    }
    let order = |v: &[(String, f64)]| {
        v.iter()
            .take(5)
            .map(|d| d.0.clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("\nfive largest, real: {}", order(&rd));
    println!("five largest, corpus: {}", order(&cd));
}

/// Issue 16: what a load keeps is bounded. A header's declared size is
/// checked before anything is read, a small .tar.gz of zeros cannot expand
/// past the limit, many tiny files count their pages, and a directory's
/// files count the same way; under the limit every load is whole.
#[test]
fn loads_are_bounded_by_the_input_limit() {
    let dir = TempDir::new("limit");
    let mut b = tar::Builder::new(Vec::new());
    for i in 0..4 {
        let mut h = tar::Header::new_gnu();
        h.set_size(1 << 20);
        h.set_mode(0o644);
        b.append_data(
            &mut h,
            format!("zeros{i}"),
            std::io::repeat(0).take(1 << 20),
        )
        .unwrap();
    }
    let tar = b.into_inner().unwrap();
    let gz = dir.path().join("zeros.tar.gz");
    std::fs::write(&gz, gzip(&tar)).unwrap();
    assert!(std::fs::metadata(&gz).unwrap().len() < 20_000);
    let e = FileTree::from_tar_limited(&gz, (3 << 20) + 1024).unwrap_err();
    assert!(matches!(e, CorpusError::TooLarge { .. }), "{e}");
    assert!(
        e.to_string().contains("zeros3") && e.to_string().contains("limit"),
        "{e}"
    );
    assert_eq!(
        FileTree::load_limited(&gz, 5 << 20).unwrap().total_bytes(),
        4 << 20
    );

    // 1000 one-byte files hold 1000 pages, not 1000 bytes.
    let mut b = tar::Builder::new(Vec::new());
    for i in 0..1000 {
        let mut h = tar::Header::new_gnu();
        h.set_size(1);
        h.set_mode(0o644);
        b.append_data(&mut h, format!("f{i}"), &b"x"[..]).unwrap();
    }
    let tiny = dir.path().join("tiny.tar");
    std::fs::write(&tiny, b.into_inner().unwrap()).unwrap();
    let e = FileTree::load_limited(&tiny, 500 * 4096).unwrap_err();
    assert!(matches!(e, CorpusError::TooLarge { .. }), "{e}");

    let tree = dir.path().join("tree");
    write_sample_dir(&tree);
    let whole = FileTree::from_dir(&tree).unwrap();
    let need = whole.total_pages() as u64 * 4096;
    let e = FileTree::load_limited(&tree, need / 2).unwrap_err();
    assert!(matches!(e, CorpusError::TooLarge { .. }), "{e}");
    assert_eq!(
        FileTree::load_limited(&tree, need + (64 << 10)).unwrap(),
        whole
    );
    assert!(zsmem_lab::corpus::default_input_limit() > 0);
}

/// A tar entry's name is shown with its control characters escaped.
#[test]
fn entry_names_in_errors_are_escaped() {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(100_000);
    h.set_mode(0o644);
    b.append_data(&mut h, "evil\x1b]0;owned\x07", &noise(100_000, 3)[..])
        .unwrap();
    let tar = b.into_inner().unwrap();
    let e = load_err("evil.tar", &tar[..20_000]).to_string();
    assert!(!e.contains('\x1b') && !e.contains('\x07'), "{e:?}");
    assert!(e.contains("evil\\u{1b}]0;owned\\u{7}"), "{e}");
}

/// "Seed 1" names one corpus forever: the generator draws from
/// rand_chacha's `ChaCha12Rng`, whose output rand_chacha promises to keep
/// (rand's `StdRng` is the same ChaCha12 today, but rand may change it in
/// any release), and this checksum of a small tree (paths and bytes,
/// FNV-1a) pins it. A change of the generator that changes the corpus must
/// change this value on purpose, and say so.
#[test]
fn the_embedded_corpus_is_the_same_for_the_same_seed_forever() {
    let tree = FileTree::generate(1, 0.02);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for f in &tree.files {
        eat(f.path().as_bytes());
        eat(f.data());
    }
    assert_eq!(
        (tree.files.len(), h),
        (502, 175_095_961_807_630_808),
        "the embedded corpus of seed 1 changed"
    );
}
