//! The plan of the tree: which files, of which kind, how large, under which directories, with
//! linux-source-6.1's shares of bytes per top-level directory.

use rand::{Rng, SeedableRng};
use std::collections::HashSet;

use super::draw::{CorpusRng, normal, pick, zipf};
use super::vocab::*;
use crate::corpus::tree::PAGE_SIZE;

/// File data generated at scale 1.0: 300 MiB.
pub const GENERATED_BYTES_AT_SCALE_1: u64 = 300 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    C,
    Header,
    RegHeader,
    Doc,
    Translation,
    DevTree,
    Yaml,
    Json,
    Asm,
    Kconfig,
    Makefile,
    Script,
    Binary,
}

impl Kind {
    /// (mean, sigma) of log2(file size), from the real tree.
    fn size_law(self) -> (f64, f64) {
        match self {
            Kind::C => (13.2, 1.6),
            Kind::Header => (11.8, 1.7),
            Kind::RegHeader => (20.0, 1.8),
            Kind::Doc => (12.6, 1.4),
            Kind::Translation => (13.0, 1.0),
            Kind::DevTree => (12.2, 1.7),
            Kind::Yaml => (11.3, 0.8),
            Kind::Json => (13.5, 1.5),
            Kind::Asm => (12.5, 1.4),
            Kind::Kconfig => (11.0, 1.6),
            Kind::Makefile => (9.5, 1.4),
            Kind::Script => (12.0, 1.5),
            Kind::Binary => (13.0, 2.0),
        }
    }

    fn ext(self, r: &mut CorpusRng) -> &'static str {
        match self {
            Kind::C => ".c",
            Kind::Header | Kind::RegHeader => ".h",
            Kind::Doc | Kind::Translation => {
                if r.random_range(0..4) == 0 {
                    ".txt"
                } else {
                    ".rst"
                }
            }
            Kind::DevTree => {
                if r.random_range(0..2) == 0 {
                    ".dts"
                } else {
                    ".dtsi"
                }
            }
            Kind::Yaml => ".yaml",
            Kind::Json => ".json",
            Kind::Asm => ".S",
            Kind::Kconfig | Kind::Makefile => "",
            Kind::Script => [".sh", ".py", ".pl"][r.random_range(0..3)],
            Kind::Binary => [".bin", ".gif", ".png", ".fw"][r.random_range(0..4)],
        }
    }
}

/// One file to generate.
pub(super) struct Planned {
    pub path: String,
    pub kind: Kind,
    pub size: usize,
    pub seed: u64,
    /// Driver-like name prefix that the file's identifiers share.
    pub prefix: String,
    /// 0.0 = very repetitive, 1.5 = dense: how often fresh identifiers,
    /// numbers and prose appear instead of already used ones.
    pub density: f64,
}

/// A top-level directory: percent of all bytes, file kinds with their
/// shares of the directory's bytes, and the density of its C code
/// (core code such as mm or kernel compresses worse than drivers).
struct TopDir {
    name: &'static str,
    percent: f64,
    mix: &'static [(Kind, f64)],
    density: f64,
}

const CORE: &[(Kind, f64)] = &[
    (Kind::C, 0.9),
    (Kind::Header, 0.08),
    (Kind::Kconfig, 0.01),
    (Kind::Makefile, 0.01),
];

const DRIVERS: &[(Kind, f64)] = &[
    (Kind::C, 0.43),
    (Kind::RegHeader, 0.43),
    (Kind::Header, 0.115),
    (Kind::Kconfig, 0.01),
    (Kind::Makefile, 0.004),
    (Kind::Asm, 0.005),
    (Kind::Binary, 0.0003),
];

const ARCH: &[(Kind, f64)] = &[
    (Kind::C, 0.4),
    (Kind::Header, 0.21),
    (Kind::DevTree, 0.29),
    (Kind::Asm, 0.07),
    (Kind::Kconfig, 0.015),
    (Kind::Makefile, 0.015),
];

const SOUND: &[(Kind, f64)] = &[
    (Kind::C, 0.76),
    (Kind::Header, 0.21),
    (Kind::Kconfig, 0.02),
    (Kind::Makefile, 0.01),
];

const DOCS: &[(Kind, f64)] = &[
    (Kind::Doc, 0.65),
    (Kind::Yaml, 0.3),
    (Kind::Translation, 0.02),
    (Kind::Binary, 0.005),
    (Kind::Makefile, 0.025),
];

const TOOLS: &[(Kind, f64)] = &[
    (Kind::C, 0.45),
    (Kind::Header, 0.15),
    (Kind::Json, 0.27),
    (Kind::Script, 0.1),
    (Kind::Makefile, 0.03),
];

const SCRIPTS: &[(Kind, f64)] = &[(Kind::Script, 0.5), (Kind::C, 0.4), (Kind::Makefile, 0.1)];

/// linux-source-6.1's page shares, fs/sound/include nudged above
/// Documentation/tools (see [`super::FileTree::generate`]).
#[rustfmt::skip]
const TOP: &[TopDir] = &[
    TopDir { name: "drivers", percent: 65.8, mix: DRIVERS, density: 0.7 },
    TopDir { name: "arch", percent: 9.9, mix: ARCH, density: 0.7 },
    TopDir { name: "fs", percent: 4.2, mix: CORE, density: 0.9 },
    TopDir { name: "sound", percent: 4.0, mix: SOUND, density: 0.7 },
    TopDir { name: "include", percent: 3.8, mix: &[(Kind::Header, 1.0)], density: 0.7 },
    TopDir { name: "Documentation", percent: 3.4, mix: DOCS, density: 0.5 },
    TopDir { name: "tools", percent: 3.2, mix: TOOLS, density: 0.5 },
    TopDir { name: "net", percent: 2.5, mix: CORE, density: 0.9 },
    TopDir { name: "kernel", percent: 0.88, mix: CORE, density: 1.0 },
    TopDir { name: "lib", percent: 0.54, mix: CORE, density: 0.6 },
    TopDir { name: "mm", percent: 0.37, mix: CORE, density: 1.1 },
    TopDir { name: "crypto", percent: 0.26, mix: CORE, density: 1.0 },
    TopDir { name: "scripts", percent: 0.26, mix: SCRIPTS, density: 0.5 },
    TopDir { name: "security", percent: 0.23, mix: CORE, density: 0.9 },
    TopDir { name: "block", percent: 0.14, mix: CORE, density: 1.0 },
    TopDir { name: "samples", percent: 0.11, mix: CORE, density: 0.45 },
    TopDir { name: "io_uring", percent: 0.04, mix: CORE, density: 0.9 },
    TopDir { name: "rust", percent: 0.03, mix: CORE, density: 0.6 },
    TopDir { name: "virt", percent: 0.02, mix: CORE, density: 0.9 },
    TopDir { name: "ipc", percent: 0.02, mix: CORE, density: 1.0 },
    TopDir { name: "LICENSES", percent: 0.02, mix: &[(Kind::Doc, 1.0)], density: 0.7 },
    TopDir { name: "init", percent: 0.01, mix: CORE, density: 1.0 },
    TopDir { name: "certs", percent: 0.005, mix: CORE, density: 0.5 },
    TopDir { name: "usr", percent: 0.005, mix: CORE, density: 0.5 },
];

/// Files at the root of the tree: (name, kind, size at scale 1).
const ROOT_FILES: &[(&str, Kind, usize)] = &[
    (".gitignore", Kind::Makefile, 2_000),
    ("COPYING", Kind::Doc, 500),
    ("CREDITS", Kind::Translation, 100_000),
    ("Kbuild", Kind::Makefile, 2_500),
    ("Kconfig", Kind::Kconfig, 600),
    ("MAINTAINERS", Kind::Doc, 600_000),
    ("Makefile", Kind::Makefile, 70_000),
    ("README", Kind::Doc, 700),
];

/// File bytes per page of the generated tree (the real tree has 3580:
/// 1298681992 bytes in 362734 pages): converts the byte target into a
/// page budget.
const BYTES_PER_PAGE: f64 = 3530.0;

pub(super) fn plan(seed: u64, scale: f64) -> Vec<Planned> {
    let mut r = CorpusRng::seed_from_u64(seed);
    // Budgets are in pages, not bytes: the shares being matched are page
    // shares, and whole-page budgets make the directory order exact.
    let total_pages = GENERATED_BYTES_AT_SCALE_1 as f64 * scale / BYTES_PER_PAGE;
    let mut out = Vec::new();
    let mut taken: HashSet<String> = HashSet::new();
    for &(name, kind, size) in ROOT_FILES {
        out.push(Planned {
            path: name.to_owned(),
            kind,
            size: ((size as f64 * scale) as usize).max(64),
            seed: r.random(),
            prefix: "linux".into(),
            density: 0.6,
        });
        taken.insert(name.to_owned());
    }
    let sum: f64 = TOP.iter().map(|d| d.percent).sum();
    for top in TOP {
        let dir_pages = ((total_pages * top.percent / sum).round() as usize).max(1);
        // Floor each kind's share; the first kind takes the remainder.
        let mut budgets: Vec<usize> = top
            .mix
            .iter()
            .map(|&(_, share)| (dir_pages as f64 * share) as usize)
            .collect();
        budgets[0] += dir_pages - budgets.iter().sum::<usize>().min(dir_pages);
        let mut dirs = DirPool::new(top.name);
        for (&(kind, _), &budget) in top.mix.iter().zip(&budgets) {
            let mut used = 0usize;
            while used < budget {
                let (mut mu, mut sigma) = kind.size_law();
                // A source tree has a second population of tiny files
                // (stubs, small headers, Kconfig fragments).
                if kind != Kind::RegHeader && r.random_range(0..5) == 0 {
                    (mu, sigma) = (9.3, 1.2);
                }
                let mut size = 2f64.powf(mu + sigma * normal(&mut r)).max(1.0) as usize;
                if kind == Kind::RegHeader {
                    // Keep several register headers even at small scales.
                    size = size.min(budget * PAGE_SIZE / 3 + 1);
                } else {
                    size = size.min(1 << 20);
                }
                // The last file takes exactly the pages that are left.
                let left = budget - used;
                if size.div_ceil(PAGE_SIZE) > left {
                    size = (left - 1) * PAGE_SIZE + r.random_range(1..=PAGE_SIZE);
                }
                used += size.div_ceil(PAGE_SIZE);
                let (dir, prefix) = dirs.choose(&mut r, kind);
                let ext = kind.ext(&mut r);
                let path = unique_path(&mut r, &mut taken, &dir, &prefix, kind, ext);
                out.push(Planned {
                    path,
                    kind,
                    size,
                    seed: r.random(),
                    prefix,
                    density: (top.density + 0.45 * normal(&mut r)).clamp(0.0, 1.5),
                });
            }
        }
    }
    // Archive order: the Debian tarball lists paths sorted.
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

fn unique_path(
    r: &mut CorpusRng,
    taken: &mut HashSet<String>,
    dir: &str,
    prefix: &str,
    kind: Kind,
    ext: &str,
) -> String {
    loop {
        let stem = match kind {
            Kind::Kconfig => "Kconfig".to_owned(),
            Kind::Makefile => "Makefile".to_owned(),
            Kind::RegHeader => {
                let v = format!(
                    "{}_{}_{}",
                    r.random_range(1..12),
                    r.random_range(0..5),
                    r.random_range(0..4)
                );
                let tail = if r.random_range(0..3) == 0 {
                    "offset"
                } else {
                    "sh_mask"
                };
                format!("{prefix}_{v}_{tail}")
            }
            _ => format!("{prefix}-{}", pick(r, WORDS_ID, 1)),
        };
        let mut path = format!("{dir}/{stem}{ext}");
        if taken.contains(&path) {
            path = format!("{dir}/{stem}{}{ext}", r.random_range(0..1000));
        }
        if taken.insert(path.clone()) {
            return path;
        }
    }
}

/// The subdirectories of one top-level directory, created on demand and
/// reused with a skew so that some grow big, like drivers/gpu.
struct DirPool {
    top: &'static str,
    dirs: Vec<(String, String)>,
    reg_dirs: Vec<(String, String)>,
}

impl DirPool {
    fn new(top: &'static str) -> Self {
        Self {
            top,
            dirs: Vec::new(),
            reg_dirs: Vec::new(),
        }
    }

    fn choose(&mut self, r: &mut CorpusRng, kind: Kind) -> (String, String) {
        if kind == Kind::RegHeader {
            if self.reg_dirs.is_empty() || r.random_range(0..8) == 0 {
                let blk = pick(r, REG_BLOCKS, 1).to_owned();
                self.reg_dirs.push((
                    format!("{}/gpu/drm/amd/include/asic_reg/{blk}", self.top),
                    blk,
                ));
            }
            let i = r.random_range(0..self.reg_dirs.len());
            return self.reg_dirs[i].clone();
        }
        if self.dirs.is_empty() || r.random_range(0..12) == 0 {
            let prefix = format!("{}{}", pick(r, PREFIXES, 1), maybe_digits(r));
            let depth = r.random_range(1..4);
            let mut path = self.top.to_owned();
            for _ in 0..depth - 1 {
                path.push('/');
                path.push_str(pick(r, SUBDIRS, 2));
            }
            path.push('/');
            path.push_str(&prefix);
            self.dirs.push((path, prefix));
        }
        let i = zipf(r, self.dirs.len(), 2);
        self.dirs[i].clone()
    }
}

fn maybe_digits(r: &mut CorpusRng) -> String {
    match r.random_range(0..3) {
        0 => String::new(),
        1 => r.random_range(0..10).to_string(),
        _ => r.random_range(100..10000).to_string(),
    }
}
