//! Page sizes through the lab: a tree cut into 16 KiB (or 64 KiB) pages,
//! contestants whose pools have that page size, the RFC's four variants
//! on the untar/rm workload, the reasons a contestant is skipped, and the
//! fairness of the codec: every object contestant compresses with the
//! run's codec, so at zstd the peers and malloc baselines store exactly
//! the compressed bytes zsmem does.

use std::sync::{Mutex, MutexGuard};

use zsmem::{ChainRule, Codec};
use zsmem_lab::contestants::forked::{Allocator, ForkedHeap};
use zsmem_lab::contestants::kernel::KernelContestant;
use zsmem_lab::contestants::peers::{PEERS, make_peer_pages_with, page_size_skip};
use zsmem_lab::contestants::zsmem::{ZSMEM_VARIANTS, ZsmemContestant, make_variant, variant_pool};
use zsmem_lab::contestants::{LabError, PageConfig, PageContestant};
use zsmem_lab::corpus::{
    CorpusError, FileEntry, FileTree, PAGE_SIZE, check_page_size, parse_page_size,
};
use zsmem_lab::workloads::untar_rm::{RunResult, UntarRm, slots_needed};

static SERIAL: Mutex<()> = Mutex::new(());

/// One at a time: some tests fork the malloc baselines' children, which
/// is safest with no other test thread running.
fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn run(c: &mut dyn PageContestant, tree: &FileTree) -> RunResult {
    let w = UntarRm {
        verify_every: 1,
        ..UntarRm::default()
    };
    w.run(tree, c, |_| {}).unwrap()
}

fn text(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| b"static int foo(void) { return 0; }\n"[(i + seed as usize) % 35])
        .collect()
}

#[test]
fn a_16k_tree_is_cut_into_16k_pages() {
    let _g = serial();
    let files = vec![
        FileEntry::new("d/a.c", text(40_000, 1)),
        FileEntry::new("d/b.c", text(16_384, 2)),
        FileEntry::new("e/c.c", text(5, 3)),
        FileEntry::new("e/empty", Vec::new()),
    ];
    let four = FileTree::new(files);
    assert_eq!(four.page_size(), PAGE_SIZE);
    assert_eq!(four.total_pages(), 10 + 4 + 1);
    let big = four.clone().with_page_size(16384).unwrap();
    assert_eq!(big.page_size(), 16384);
    assert_eq!(big.total_pages(), 3 + 1 + 1);
    for (f, g) in four.files.iter().zip(&big.files) {
        assert_eq!(g.page_size(), 16384);
        assert_eq!(f.data(), g.data(), "{}", f.path());
        let joined: Vec<u8> = g.pages().flatten().copied().collect();
        assert_eq!(joined.len(), g.page_count() * 16384);
        assert_eq!(&joined[..g.len()], g.data());
        assert!(joined[g.len()..].iter().all(|&b| b == 0), "zero padding");
    }
    assert!(big.pages().all(|(_, _, p)| p.len() == 16384));
    // The same directories, counted in the new pages.
    assert_eq!(
        big.top_level_dirs(),
        vec![("d".to_string(), 4), ("e".to_string(), 1)]
    );
    // And back: the very tree it was.
    assert_eq!(big.with_page_size(4096).unwrap(), four);
    let sixty_four = four.with_page_size(65536).unwrap();
    assert_eq!(sixty_four.total_pages(), 3);
}

#[test]
fn bad_page_sizes_are_errors() {
    for bad in [0, 2048, 3072, 5000, 131_072] {
        assert!(
            matches!(
                check_page_size(bad),
                Err(CorpusError::BadPageSize { page_size }) if page_size == bad
            ),
            "{bad}"
        );
        let t = FileTree::new(vec![FileEntry::new("a", vec![1; 10])]);
        assert!(t.with_page_size(bad).is_err(), "{bad}");
    }
    for (s, n) in [
        ("4K", 4096),
        ("16K", 16384),
        ("64k", 65536),
        ("16384", 16384),
    ] {
        assert_eq!(parse_page_size(s).unwrap(), n, "{s}");
    }
    for s in ["", "K", "sixteen", "8", "128K", "-4K", "16M"] {
        let e = parse_page_size(s).unwrap_err().to_string();
        assert!(e.contains("page size"), "{s}: {e}");
    }
    assert!(PageConfig::new(8192 + 1, Codec::Lz4).is_err());
}

#[test]
fn the_variants_pools_follow_the_rfc() {
    for page in [4096, 16384, 65536] {
        let k = variant_pool("zsmem-kernel", page).unwrap();
        assert_eq!(
            (k.page_size, k.class_delta, k.chain_size, k.chain_rule),
            (page, page / 256, 8, ChainRule::MinWaste)
        );
        let d = variant_pool("zsmem-kernel-d16", page).unwrap();
        assert_eq!((d.class_delta, d.chain_rule), (16, ChainRule::MinWaste));
        let r = variant_pool("zsmem-kernel-rfc", page).unwrap();
        assert_eq!((r.class_delta, r.chain_rule), (16, ChainRule::SpanAware));
        let z = variant_pool("zsmem", page).unwrap();
        assert_eq!(
            z,
            zsmem::PoolConfig {
                page_size: page,
                ..zsmem::PoolConfig::log()
            }
        );
        let c = variant_pool("zsmem-classes", page).unwrap();
        assert_eq!(
            c,
            zsmem::PoolConfig {
                page_size: page,
                ..zsmem::PoolConfig::default()
            }
        );
    }
    // At 4 KiB the kernel's rules are what they always were.
    assert_eq!(
        variant_pool("zsmem-kernel", 4096).unwrap(),
        zsmem::PoolConfig::kernel()
    );
    assert!(variant_pool("zbud", 4096).is_none());
}

#[test]
#[cfg_attr(miri, ignore = "PageStore compresses with liblz4, a foreign function")]
fn the_four_variants_run_at_16k_with_16k_pools() {
    let _g = serial();
    let tree = FileTree::generate(3, 0.02).with_page_size(16384).unwrap();
    let slots = slots_needed(&tree);
    let cfg = PageConfig::new(16384, Codec::Lz4).unwrap();
    for name in ZSMEM_VARIANTS {
        let mut c = make_variant(name, &cfg, slots).unwrap().unwrap();
        assert_eq!(c.page_size(), 16384, "{name}");
        assert!(c.config().starts_with("16 KiB pages"), "{}", c.config());
        let r = run(c.as_mut(), &tree);
        let untar = &r.steps[0].figures;
        assert_eq!(untar.orig, tree.total_pages() as u64 * 16384, "{name}");
        assert!(untar.compr > 0 && untar.pool >= untar.compr, "{name}");
        assert_eq!(r.latency.load.len(), tree.total_pages() as u64);
    }
    // A contestant of another page size is refused, not fed wrong pages.
    let mut four = make_variant("zsmem", &PageConfig::default(), slots)
        .unwrap()
        .unwrap();
    let e = UntarRm::default()
        .run(&tree, four.as_mut(), |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("4096-byte pages") && e.contains("16384"), "{e}");
}

#[test]
#[cfg_attr(miri, ignore = "PageStore compresses with liblz4, a foreign function")]
fn at_4k_the_variants_are_todays_contestants() {
    let _g = serial();
    let tree = FileTree::generate(4, 0.01);
    let slots = slots_needed(&tree);
    let cfg = PageConfig::default();
    let old = run(
        &mut ZsmemContestant::kernel_faithful(Codec::Lz4, slots).unwrap(),
        &tree,
    );
    for name in ["zsmem-kernel", "zsmem-kernel-d16"] {
        let new = run(
            make_variant(name, &cfg, slots).unwrap().unwrap().as_mut(),
            &tree,
        );
        for (a, b) in old.steps.iter().zip(&new.steps) {
            assert_eq!(a.figures, b.figures, "{name} {}", a.label);
        }
    }
    let best = run(
        &mut ZsmemContestant::best(Codec::Lz4, slots).unwrap(),
        &tree,
    );
    let new = run(
        make_variant("zsmem", &cfg, slots)
            .unwrap()
            .unwrap()
            .as_mut(),
        &tree,
    );
    for (a, b) in best.steps.iter().zip(&new.steps) {
        assert_eq!(
            (a.figures.orig, a.figures.compr, a.figures.pool),
            (b.figures.orig, b.figures.compr, b.figures.pool),
            "{}",
            a.label
        );
    }
}

#[test]
fn skips_say_why() {
    for page in [16384, 65536] {
        for name in ["zbud", "z3fold", "zblock"] {
            let why = page_size_skip(name, page).unwrap();
            assert!(why.contains(name) && why.contains("4 KiB"), "{why}");
            let cfg = PageConfig::new(page, Codec::Lz4).unwrap();
            match make_peer_pages_with(name, &cfg, 16).unwrap() {
                Err(LabError::Skipped(w)) => assert_eq!(w, why),
                Err(e) => panic!("{name}: {e}"),
                Ok(_) => panic!("{name} made at {page}"),
            }
        }
        assert!(page_size_skip("afmalloc", page).is_none());
    }
    assert!(PEERS.iter().all(|p| page_size_skip(p, 4096).is_none()));
    // The kernel's zram runs only at the running kernel's page size.
    // SAFETY: sysconf only reads a system constant.
    let os = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let other = if os == 16384 { 65536 } else { 16384 };
    let why = KernelContestant::page_size_mismatch(other).unwrap();
    assert!(
        why.contains(&os.to_string()) && why.contains(&other.to_string()),
        "{why}"
    );
    match KernelContestant::at_page_size("lz4", other, false, 16) {
        Err(LabError::Skipped(w)) => assert_eq!(w, why),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("kernel zram made at {other}"),
    }
}

/// The compressed bytes a contestant holds after the untar step.
fn compr_after_untar(c: &mut dyn PageContestant, tree: &FileTree) -> u64 {
    let r = run(c, tree);
    assert_eq!(r.steps[0].label, "untar");
    r.steps[0].figures.compr
}

#[test]
#[cfg_attr(miri, ignore = "compresses with liblz4 and libzstd, foreign functions")]
fn every_object_contestant_compresses_with_the_runs_codec() {
    let _g = serial();
    for page in [4096, 16384] {
        let tree = FileTree::generate(6, 0.01).with_page_size(page).unwrap();
        let slots = slots_needed(&tree);
        let zstd = PageConfig::new(page, Codec::Zstd { level: 3 }).unwrap();
        let lz4 = PageConfig::new(page, Codec::Lz4).unwrap();
        // zsmem-kernel: the same huge threshold as zram's page handling.
        let want = compr_after_untar(
            make_variant("zsmem-kernel", &zstd, slots)
                .unwrap()
                .unwrap()
                .as_mut(),
            &tree,
        );
        let lz4_compr = compr_after_untar(
            make_variant("zsmem-kernel", &lz4, slots)
                .unwrap()
                .unwrap()
                .as_mut(),
            &tree,
        );
        assert_ne!(want, lz4_compr, "zstd and lz4 give other sizes");
        let mut others: Vec<Box<dyn PageContestant>> = Vec::new();
        for name in PEERS {
            if let Ok(c) = make_peer_pages_with(name, &zstd, slots).unwrap() {
                others.push(c);
            }
        }
        for a in [Allocator::System, Allocator::Jemalloc, Allocator::Mimalloc] {
            others.push(Box::new(ForkedHeap::with_config(a, &zstd, slots).unwrap()));
        }
        assert!(others.len() >= 5);
        for mut c in others {
            assert_eq!(c.page_size(), page);
            assert!(c.config().contains("zstd"), "{}", c.config());
            assert_eq!(
                compr_after_untar(c.as_mut(), &tree),
                want,
                "{} at {page}",
                c.name()
            );
        }
    }
}
