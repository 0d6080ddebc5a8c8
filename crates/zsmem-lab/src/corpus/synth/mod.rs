//! The embedded corpus: a synthetic kernel-like source tree, planned (`plan.rs`) then written
//! file by file, one module per kind of content.
//!
//! Text is made of tokens drawn with a skewed (Zipf-like) choice from vocabularies, most of
//! them local to a file, so that a page repeats identifiers and phrases about as often as real
//! code does: LZ4 works within one page, and that repetition is what it finds.

mod asm;
mod binary;
mod build;
mod c;
mod devtree;
mod docs;
mod draw;
mod plan;
mod reg_header;
mod script;
mod vocab;
mod writer;
mod yaml_json;

use draw::CorpusRng;
use rand::SeedableRng;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::corpus::tree::{FileEntry, FileTree, PAGE_SIZE};
pub use plan::GENERATED_BYTES_AT_SCALE_1;
use plan::{Kind, Planned};
use writer::W;

impl FileTree {
    /// The embedded corpus: a synthetic kernel-like source tree of about
    /// `scale` x [`GENERATED_BYTES_AT_SCALE_1`] bytes, identical for equal
    /// `seed` and `scale` whatever the machine or thread count.
    ///
    /// Top-level directories carry linux-source-6.1's shares, except that
    /// fs, sound and include are nudged up and Documentation and tools down
    /// so that the five largest are drivers, arch, fs, sound, include: the
    /// directories 004-afmalloc.txt deletes. The file mix (C sources,
    /// headers, huge register-definition headers, documentation, device
    /// trees, a few binaries) and file sizes follow the real tree, so that
    /// per-page LZ4 sizes are distributed alike (see `docs/corpus.md`).
    ///
    /// # Panics
    /// If `scale` is not finite and positive.
    pub fn generate(seed: u64, scale: f64) -> FileTree {
        assert!(
            scale.is_finite() && scale > 0.0,
            "scale must be positive, got {scale}"
        );
        let plan = plan::plan(seed, scale);
        let data = contents(&plan);
        let files = plan
            .into_iter()
            .zip(data)
            .map(|(p, d)| FileEntry::new(p.path, d))
            .collect();
        // No common top: the corpus has files at its root.
        FileTree { files }
    }
}

/// Generate every planned file's contents, in parallel: each file
/// depends only on its own seed, so the result is the same for any
/// number of threads.
fn contents(plan: &[Planned]) -> Vec<Vec<u8>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    // Biggest first, so that one large file does not finish last.
    let mut order: Vec<usize> = (0..plan.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(plan[i].size));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Vec<u8>>> = Mutex::new(vec![Vec::new(); plan.len()]);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut scratch = Vec::new();
                let mut done = Vec::new();
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&i) = order.get(k) else { break };
                    scratch.clear();
                    file(&plan[i], &mut scratch);
                    scratch.truncate(plan[i].size);
                    // Exact capacity (padded), so FileEntry::new does
                    // not reallocate and no slack is kept.
                    let mut data = Vec::with_capacity(plan[i].size.div_ceil(PAGE_SIZE) * PAGE_SIZE);
                    data.extend_from_slice(&scratch);
                    done.push((i, data));
                    if done.len() >= 64 {
                        let mut res = results.lock().expect("no panics while held");
                        for (i, d) in done.drain(..) {
                            res[i] = d;
                        }
                    }
                }
                let mut res = results.lock().expect("no panics while held");
                for (i, d) in done.drain(..) {
                    res[i] = d;
                }
            });
        }
    });
    results.into_inner().expect("no panics while held")
}

/// Write at least `p.size` bytes of `p.kind` content into `out`.
fn file(p: &Planned, out: &mut Vec<u8>) {
    let mut r = CorpusRng::seed_from_u64(p.seed);
    let mut w = W {
        r: &mut r,
        o: out,
        size: p.size,
        density: p.density,
        words: Vec::new(),
        copy: (0, 0),
        lines: Vec::new(),
    };
    match p.kind {
        Kind::C => w.c_source(&p.prefix, false),
        Kind::Header => w.c_source(&p.prefix, true),
        Kind::RegHeader => w.reg_header(&p.prefix, p.path.ends_with("_offset.h")),
        Kind::Doc => w.doc(false),
        Kind::Translation => w.doc(true),
        Kind::DevTree => w.devtree(&p.prefix),
        Kind::Yaml => w.yaml(&p.prefix),
        Kind::Json => w.json(),
        Kind::Asm => w.asm(&p.prefix),
        Kind::Kconfig => w.kconfig(&p.prefix),
        Kind::Makefile => w.makefile(&p.prefix),
        Kind::Script => w.script(&p.prefix),
        Kind::Binary => w.binary(),
    }
}

#[cfg(test)]
mod tests {
    use super::plan::{Kind, Planned};
    use super::*;
    use crate::corpus::stats::{compressed_size_histogram, lz4_len};

    #[test]
    fn zipf_stays_in_range_and_favours_small() {
        let mut r = draw::CorpusRng::seed_from_u64(1);
        let mut low = 0;
        for _ in 0..10_000 {
            let i = draw::zipf(&mut r, 10, 2);
            assert!(i < 10);
            low += usize::from(i < 3);
        }
        assert!(low > 5000, "{low}");
    }

    #[test]
    fn page_budgets_are_met_exactly() {
        let plan = plan::plan(5, 0.03);
        let tree = FileTree {
            files: plan
                .iter()
                .map(|p| FileEntry::new(p.path.clone(), vec![0; p.size]))
                .collect(),
        };
        let dirs = tree.top_level_dirs();
        let fs = dirs.iter().find(|d| d.0 == "fs").unwrap().1;
        let sound = dirs.iter().find(|d| d.0 == "sound").unwrap().1;
        // 0.03 * 300 MiB / 3530 bytes a page = 2673.5 pages; fs 4.2 of 99.74.
        let total = GENERATED_BYTES_AT_SCALE_1 as f64 * 0.03 / 3530.0;
        assert_eq!(fs, (total * 4.2 / 99.74).round() as usize);
        assert_eq!(sound, (total * 4.0 / 99.74).round() as usize);
        // Sorted, unique paths.
        assert!(plan.windows(2).all(|w| w[0].path < w[1].path));
    }

    /// Tuning aid: full-page LZ4 size of each kind at several densities.
    #[test]
    #[ignore = "prints a table; run with --nocapture in release"]
    fn kind_ratios() {
        let kinds = [
            Kind::C,
            Kind::Header,
            Kind::RegHeader,
            Kind::Doc,
            Kind::Translation,
            Kind::DevTree,
            Kind::Yaml,
            Kind::Json,
            Kind::Asm,
            Kind::Kconfig,
            Kind::Makefile,
            Kind::Script,
            Kind::Binary,
        ];
        for kind in kinds {
            for density in [0.0, 0.3, 0.6, 0.9, 1.2, 1.5] {
                let plan: Vec<Planned> = (0..40)
                    .map(|i| Planned {
                        path: format!("f{i}"),
                        kind,
                        size: 64 << 10,
                        seed: i,
                        prefix: "mlx5".into(),
                        density,
                    })
                    .collect();
                let data = contents(&plan);
                let tree = FileTree {
                    files: data
                        .into_iter()
                        .enumerate()
                        .map(|(i, d)| FileEntry::new(format!("f{i}"), d))
                        .collect(),
                };
                let h = compressed_size_histogram(&tree, lz4_len, 512);
                let pct: Vec<String> = h
                    .buckets
                    .iter()
                    .map(|c| format!("{:3.0}", h.percent(*c)))
                    .collect();
                println!(
                    "{kind:?} d={density} ratio {:.1}% | {}",
                    100.0 * h.ratio(),
                    pct.join(" ")
                );
            }
        }
    }
}
