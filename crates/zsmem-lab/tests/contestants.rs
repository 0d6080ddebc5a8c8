//! The contestants on the untar/rm workload: every page read back matches,
//! the figures are consistent, zsmem's kernel-faithful configuration holds
//! the same pool pages as the kernel's own zram (within 1%) where the kernel
//! is available, and zsmem's automatic compaction holds fewer.

use zsmem::Codec;
use zsmem_lab::contestants::kernel::KernelContestant;
use zsmem_lab::contestants::kernel_zram::ZramError;
use zsmem_lab::contestants::zsmem::ZsmemContestant;
use zsmem_lab::contestants::{LabError, PageContestant};
use zsmem_lab::corpus::FileTree;
use zsmem_lab::workloads::untar_rm::{RunResult, UntarRm, slots_needed};

fn tree() -> FileTree {
    FileTree::generate(7, 0.05)
}

fn run(c: &mut dyn PageContestant, tree: &FileTree, rounds: usize) -> RunResult {
    let w = UntarRm {
        rounds,
        verify_every: 1,
        ..UntarRm::default()
    };
    w.run(tree, c, |_| {}).unwrap()
}

#[test]
fn zsmem_contestants_keep_every_page_and_count_consistently() {
    let tree = tree();
    let slots = slots_needed(&tree);
    for mut c in [
        ZsmemContestant::best(Codec::Lz4, slots).unwrap(),
        ZsmemContestant::kernel_faithful(Codec::Lz4, slots).unwrap(),
        ZsmemContestant::best(Codec::Zstd { level: 3 }, slots).unwrap(),
    ] {
        let r = run(&mut c, &tree, 2);
        // untar, 5 directories, rest, per round; compact at the end.
        assert_eq!(r.steps.len(), 2 * 7 + 1);
        let untar = &r.steps[0].figures;
        assert_eq!(untar.orig, tree.total_pages() as u64 * 4096);
        assert!(untar.compr > 0 && untar.compr < untar.orig);
        assert!(untar.pool >= untar.compr && untar.all_in >= untar.pool);
        for s in &r.steps {
            if s.label == "-rest" || s.label == "compact" {
                assert_eq!(
                    (s.figures.orig, s.figures.compr, s.figures.pool),
                    (0, 0, 0),
                    "{}",
                    s.label
                );
            }
        }
        assert_eq!(r.latency.store.len(), 2 * tree.total_pages() as u64);
        assert_eq!(r.latency.load.len(), 2 * tree.total_pages() as u64);
        c.store_ref().pool().check_invariants().unwrap();
    }
}

#[test]
fn automatic_compaction_holds_less_than_the_kernel_configuration() {
    let tree = tree();
    let slots = slots_needed(&tree);
    let best = run(
        &mut ZsmemContestant::best(Codec::Lz4, slots).unwrap(),
        &tree,
        1,
    );
    let kern = run(
        &mut ZsmemContestant::kernel_faithful(Codec::Lz4, slots).unwrap(),
        &tree,
        1,
    );
    // After deletions compaction pays; right after untar the two differ
    // only by class layout (the kernel's in-object handle shifts sizes).
    for (b, k) in best.steps.iter().zip(&kern.steps) {
        // Same codec, same pages; zsmem's longer chains raise the huge
        // threshold (3969 bytes, the kernel's is 3625), so a few pages the
        // kernel keeps raw (counted as 4096 bytes) stay compressed.
        assert!(
            b.figures.compr <= k.figures.compr
                && (k.figures.compr - b.figures.compr) * 1000 <= k.figures.compr,
            "{}: compressed {} against {}",
            b.label,
            b.figures.compr,
            k.figures.compr
        );
        if b.label.starts_with('-') && b.label != "-rest" {
            assert!(
                b.figures.pool < k.figures.pool,
                "{}: {} >= {}",
                b.label,
                b.figures.pool,
                k.figures.pool
            );
        }
    }
}

#[test]
fn kernel_faithful_zsmem_matches_the_kernels_zram() {
    let tree = tree();
    let slots = slots_needed(&tree);
    let mut kernel = match KernelContestant::new("lz4", slots) {
        Ok(k) => k,
        Err(LabError::Zram(ZramError::Unavailable(why))) => {
            eprintln!("skipping: {why}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let k = run(&mut kernel, &tree, 1);
    drop(kernel);
    let z = run(
        &mut ZsmemContestant::kernel_faithful(Codec::Lz4, slots).unwrap(),
        &tree,
        1,
    );
    for (zs, ks) in z.steps.iter().zip(&k.steps) {
        let (a, b) = (&zs.figures, &ks.figures);
        assert_eq!(zs.label, ks.label);
        assert_eq!(a.orig, b.orig, "{}", zs.label);
        // liblz4 1.10 and the kernel's lz4 differ by a few bytes in a million.
        let compr_diff = (a.compr as f64 - b.compr as f64).abs();
        assert!(
            compr_diff <= 0.001 * b.compr as f64,
            "{}: compr {} vs {}",
            zs.label,
            a.compr,
            b.compr
        );
        assert_eq!(
            (a.same_pages, a.huge_pages),
            (b.same_pages, b.huge_pages),
            "{}",
            zs.label
        );
        // Within 1%, plus one 8-page zspage: the few pages whose lz4 sizes
        // differ land in other classes, which shows on a pool this small.
        let diff = (a.pool as f64 - b.pool as f64).abs();
        assert!(
            diff <= 0.01 * b.pool as f64 + 8.0 * 4096.0,
            "{}: zsmem-kernel holds {} bytes, the kernel {}",
            zs.label,
            a.pool,
            b.pool
        );
    }
}

/// Why the test above allows 1% (and why another corpus can fail it: seed
/// 4 of the same generator gives 2.5%): not the allocator. The kernel's lz4 and
/// liblz4 give a few pages sizes 4-5 bytes apart (seed 5 at scale 0.05:
/// 85 of 4,473 pages, 21 of them in another size class), which moves the
/// boundaries between zspages of those classes by an object, and which
/// zspages a deleted directory empties with them. Given the kernel's own
/// object sizes (learnt page by page from `compr_data_size`), zsmem's
/// kernel configuration holds exactly the kernel's pages after the stores
/// and after every deletion.
#[test]
#[cfg_attr(miri, ignore = "needs the kernel's zram")]
fn kernel_configuration_holds_the_kernels_pages_given_the_kernels_object_sizes() {
    use zsmem::{Pool, PoolConfig};
    use zsmem_lab::contestants::kernel_zram::{KernelZram, ZramConfig};

    let tree = tree();
    let pages: Vec<Vec<u8>> = tree.pages().map(|(_, _, p)| p.to_vec()).collect();
    let n = pages.len() as u64;
    let mut k = match KernelZram::create(&ZramConfig {
        algorithm: "lz4".into(),
        disksize_bytes: (n + 16) * 4096,
        mem_limit_bytes: None,
    }) {
        Ok(k) => k,
        Err(ZramError::Unavailable(why)) => {
            eprintln!("skipping: {why}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let pool = Pool::new(PoolConfig::kernel()).unwrap();
    let mut handles = Vec::with_capacity(pages.len());
    let mut compr = k.mm_stat().unwrap().compr_data_size;
    let object = vec![0x5au8; 4096];
    for (i, p) in pages.iter().enumerate() {
        k.write_page(i as u64, p).unwrap();
        let now = k.mm_stat().unwrap().compr_data_size;
        // Same-filled pages store no object (the size is 0).
        let size = (now - compr) as usize;
        compr = now;
        handles.push((size > 0).then(|| pool.store(&object[..size]).unwrap()));
    }
    let check = |what: &str, k: &KernelZram| {
        let held = pool.stats().pages_held as u64 * 4096;
        assert_eq!(held, k.mm_stat().unwrap().mem_used_total, "{what}");
    };
    check("after the stores", &k);
    // Deletions of runs of pages, as directories go.
    for (from, to) in [
        (0, n / 3),
        (n / 2, 2 * n / 3),
        (n / 3, n / 2),
        (2 * n / 3, n),
    ] {
        k.discard(from, to - from).unwrap();
        for h in handles[from as usize..to as usize].iter_mut() {
            if let Some(h) = h.take() {
                pool.free(h).unwrap();
            }
        }
        check(&format!("after discarding pages {from}..{to}"), &k);
    }
}
