//! The tar and directory readers on crafted input, under a small input
//! limit: never a panic, never an abort, never more memory than the limit.
//!
//! The first byte picks the reader. Tar: the rest is the archive, as it
//! is (plain; a gzip or xz stream when the fuzzer finds their magic), loaded
//! with a 1 MiB limit; what loads holds at most that. Directory: the rest
//! describes up to 16 files (name bytes, nesting, length, contents), written
//! under a fresh directory and loaded back; the tree must be exactly those
//! files in path order, or `TooLarge` when they exceed the limit.
//!
//! Run: `cd fuzz && cargo +nightly fuzz run corpus_read -- -max_total_time=180`

#![no_main]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use libfuzzer_sys::fuzz_target;

mod common;
use common::Bytes;
use zsmem_lab::corpus::{CorpusError, FileTree, PAGE_SIZE};

const LIMIT: u64 = 1 << 20;

fn scratch() -> std::path::PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!(
        "zsmem-fuzz-corpus-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn tar(data: &[u8]) {
    let dir = scratch();
    let path = dir.join("input");
    std::fs::write(&path, data).unwrap();
    match FileTree::load_limited(&path, LIMIT) {
        Ok(tree) => assert!(tree.total_pages() as u64 * PAGE_SIZE as u64 <= LIMIT),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn directory(mut b: Bytes) {
    let dir = scratch();
    let root = dir.join("tree");
    std::fs::create_dir_all(&root).unwrap();
    let mut want: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for _ in 0..(b.u8() % 16) {
        // Names from a small alphabet so that paths collide and nest.
        let depth = b.u8() % 3;
        let mut parts = Vec::new();
        for _ in 0..=depth {
            let n = 1 + b.u8() % 3;
            parts.push(
                (0..n)
                    .map(|_| (b'a' + b.u8() % 4) as char)
                    .collect::<String>(),
            );
        }
        let rel = parts.join("/");
        let len = usize::from(b.u16()) * 8;
        let fill = b.u8();
        let data: Vec<u8> = (0..len).map(|i| fill.wrapping_add(i as u8)).collect();
        let full = root.join(&rel);
        // A name already taken by a directory or a file on the way: skip.
        if std::fs::create_dir_all(full.parent().unwrap()).is_err() || full.is_dir() {
            continue;
        }
        if std::fs::write(&full, &data).is_err() {
            continue;
        }
        want.retain(|k, _| !rel.starts_with(&format!("{k}/")));
        want.insert(rel, data);
    }
    match FileTree::from_dir_limited(&root, LIMIT) {
        Ok(tree) => {
            let got: Vec<(&str, &[u8])> = tree.files.iter().map(|f| (f.path(), f.data())).collect();
            // from_dir strips a top directory all files share; compare the
            // contents in order, and the paths up to that strip.
            assert_eq!(got.len(), want.len());
            for ((gp, gd), (wp, wd)) in got.iter().zip(&want) {
                assert!(wp.ends_with(gp), "{gp} vs {wp}");
                assert_eq!(gd, &wd.as_slice());
            }
            assert!(tree.total_pages() as u64 * PAGE_SIZE as u64 <= LIMIT);
        }
        Err(CorpusError::TooLarge { .. }) => {
            let pages: u64 = want
                .values()
                .map(|d| d.len().div_ceil(PAGE_SIZE) as u64)
                .sum();
            assert!(
                pages * PAGE_SIZE as u64 > LIMIT / 2,
                "refused {pages} pages"
            );
        }
        Err(e) => panic!("{e}"),
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    if which % 2 == 0 {
        tar(rest);
    } else {
        directory(Bytes(rest));
    }
});
