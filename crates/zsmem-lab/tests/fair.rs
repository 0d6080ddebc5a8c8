//! The comparison counts honestly: compacted contestants hold no more than
//! uncompacted ones, the malloc baselines' memory sees their release and is
//! never below the data, all-in memory is never below the pool, and the
//! kernel's all-in terms add up.
//!
//! The kernel's tests make a private zram device, removed afterwards;
//! where zram or root is missing they print "skipping: <reason>" and pass.

use std::sync::{Mutex, MutexGuard};

use zsmem::Codec;
use zsmem_lab::allin;
use zsmem_lab::contestants::forked::{Allocator, ForkedHeap};
use zsmem_lab::contestants::kernel::KernelContestant;
use zsmem_lab::contestants::kernel_zram::ZramError;
use zsmem_lab::contestants::zsmem::ZsmemContestant;
use zsmem_lab::contestants::{Figures, LabError, PageContestant};
use zsmem_lab::corpus::{FileTree, PAGE_SIZE, Page};
use zsmem_lab::workloads::untar_rm::{RunResult, UntarRm, slots_needed};

static SERIAL: Mutex<()> = Mutex::new(());

/// One at a time: the heap children are measured by their memory, and
/// the kernel's devices are few.
fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn tree() -> FileTree {
    FileTree::generate(5, 0.03)
}

fn run(c: &mut dyn PageContestant, tree: &FileTree) -> RunResult {
    let w = UntarRm {
        rounds: 2,
        verify_every: 3,
        ..UntarRm::default()
    };
    w.run(tree, c, |_| {})
        .unwrap_or_else(|e| panic!("{}: {e}", c.name()))
}

fn all_in_is_whole(name: &str, f: &Figures) {
    assert!(
        f.all_in >= f.pool,
        "{name}: all-in {} < pool {}",
        f.all_in,
        f.pool
    );
    assert_eq!(
        f.all_in,
        allin::total(&f.all_in_terms),
        "{name}: all-in is not the sum of its terms"
    );
    // A process maps its pages through page tables; the kernel's pool
    // sits in its direct map. Nobody is charged a struct page.
    let tables = f.all_in_terms.iter().find(|t| t.name == allin::PAGE_TABLES);
    if name.starts_with("kernel") {
        assert!(tables.is_none(), "{name}: {tables:?}");
    } else {
        assert_eq!(
            tables.map(|t| t.bytes),
            Some(f.pool.div_ceil(4096) * 8),
            "{name}"
        );
    }
    let known: Vec<&str> = allin::explain().iter().map(|t| t.name).collect();
    for t in &f.all_in_terms {
        assert!(
            known.contains(&t.name),
            "{name}: term {} unexplained",
            t.name
        );
    }
}

fn compacted_holds_no_more(plain: &RunResult, compacted: &RunResult) {
    assert_eq!(plain.steps.len(), compacted.steps.len());
    for (p, c) in plain.steps.iter().zip(&compacted.steps) {
        assert_eq!((p.round, &p.label), (c.round, &c.label));
        assert!(
            c.figures.pool <= p.figures.pool,
            "r{}:{}: {} holds {} bytes, {} {}",
            p.round,
            p.label,
            compacted.contestant,
            c.figures.pool,
            plain.contestant,
            p.figures.pool
        );
        all_in_is_whole(&compacted.contestant, &c.figures);
    }
}

#[test]
fn compacted_zsmem_kernel_holds_no_more_at_any_step() {
    let _g = serial();
    let tree = tree();
    let slots = slots_needed(&tree);
    let plain = run(
        &mut ZsmemContestant::kernel_faithful(Codec::Lz4, slots).unwrap(),
        &tree,
    );
    let mut c = ZsmemContestant::kernel_compacted(Codec::Lz4, slots).unwrap();
    assert_eq!(c.name(), "zsmem-kernel-compact");
    assert!(c.config().contains("compacted after every step"));
    let compacted = run(&mut c, &tree);
    compacted_holds_no_more(&plain, &compacted);
    // Deleting directories leaves holes that compaction gives back.
    assert!(
        compacted
            .steps
            .iter()
            .zip(&plain.steps)
            .any(|(c, p)| c.figures.pool < p.figures.pool),
        "compaction after every step never helped"
    );
}

#[test]
fn compacted_kernel_zram_holds_no_more_at_any_step() {
    let _g = serial();
    let tree = tree();
    let slots = slots_needed(&tree);
    let mut plain = match KernelContestant::new("lz4", slots) {
        Ok(k) => k,
        Err(LabError::Zram(ZramError::Unavailable(why))) => {
            println!("skipping: {why}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let plain_run = run(&mut plain, &tree);
    drop(plain);
    let mut c = KernelContestant::compacted("lz4", slots).unwrap();
    assert_eq!(c.name(), "kernel-zram-compact");
    let compacted = run(&mut c, &tree);
    drop(c);
    // The kernel's zsmalloc places objects as it likes (per-CPU, and
    // pages migrate): allow one zspage of 8 pages of difference.
    for (p, k) in plain_run.steps.iter().zip(&compacted.steps) {
        assert!(
            k.figures.pool <= p.figures.pool + 8 * 4096,
            "r{}:{}: compacted {} > plain {}",
            p.round,
            p.label,
            k.figures.pool,
            p.figures.pool
        );
        all_in_is_whole("kernel-zram-compact", &k.figures);
        all_in_is_whole("kernel-zram", &p.figures);
    }
}

#[test]
fn kernel_estimate_terms_add_up() {
    let _g = serial();
    let mut k = match KernelContestant::new("lz4", 64) {
        Ok(k) => k,
        Err(LabError::Zram(ZramError::Unavailable(why))) => {
            println!("skipping: {why}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    for i in 0..32u64 {
        k.store(i, &text_page(i)).unwrap();
    }
    k.store(40, &[0u8; PAGE_SIZE]).unwrap();
    let f = k.figures().unwrap();
    all_in_is_whole("kernel-zram", &f);
    let names: Vec<&str> = f.all_in_terms.iter().map(|t| t.name).collect();
    assert_eq!(
        names,
        [
            allin::POOL_PAGES,
            allin::ZRAM_TABLE,
            allin::ZS_HANDLE,
            allin::ZSPAGE_DESCRIPTORS
        ]
    );
    let t = |n: &str| f.all_in_terms.iter().find(|t| t.name == n).unwrap().bytes;
    assert_eq!(t(allin::POOL_PAGES), f.pool);
    assert_eq!(t(allin::ZRAM_TABLE), 64 * allin::zram_table_entry().0);
    assert_eq!(
        t(allin::ZS_HANDLE),
        32 * 8,
        "32 objects, the zero page is none"
    );
}

fn text_page(seed: u64) -> Box<Page> {
    let mut p = Box::new([0u8; PAGE_SIZE]);
    let s = format!("int probe_{seed}(struct device *dev) {{ return dev->id * {seed}; }}\n");
    for (d, b) in p.iter_mut().zip(s.bytes().cycle()) {
        *d = b;
    }
    p[0] = seed as u8;
    p
}

fn noisy_page(seed: u64) -> Box<Page> {
    // Half text, half noise: compresses to about 2 KiB.
    let mut p = text_page(seed);
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for b in p[..PAGE_SIZE / 2].iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    p
}

#[test]
fn malloc_baselines_are_never_below_the_data_and_see_their_release() {
    let _g = serial();
    const N: u64 = 6000;
    for a in [Allocator::System, Allocator::Jemalloc, Allocator::Mimalloc] {
        let mut c = ForkedHeap::new(a, N as usize).unwrap();
        assert_eq!(c.name(), a.name());
        println!("{}", c.config());
        let fresh = c.figures().unwrap();
        assert_eq!((fresh.orig, fresh.compr), (0, 0));
        for i in 0..N {
            c.store(i, &noisy_page(i)).unwrap();
        }
        let mut out = Box::new([0u8; PAGE_SIZE]);
        c.load(17, &mut out[..]).unwrap();
        assert!(out[..] == noisy_page(17)[..]);
        let full = c.figures().unwrap();
        // Free the first 90%: whole pages of the heap become free.
        c.discard(0, N / 10 * 9).unwrap();
        let kept = c.figures_unreleased().unwrap();
        let released = c.figures().unwrap();
        for (when, f) in [("full", &full), ("kept", &kept), ("released", &released)] {
            println!(
                "{:>8} {when:<8} compr {:>9} pool {:>9} all-in {:>9} {:?}",
                a.name(),
                f.compr,
                f.pool,
                f.all_in,
                f.all_in_terms
            );
            assert!(
                f.pool >= f.compr,
                "{}: negative overhead {when}: pool {} < compr {}",
                a.name(),
                f.pool,
                f.compr
            );
            all_in_is_whole(a.name(), f);
        }
        assert!(full.compr > N * 1024, "{} compressed bytes", full.compr);
        assert_eq!(kept.compr, released.compr);
        // The slot table is counted as it is at each reading (it was
        // resident before the baseline, so the growth leaves it out): at
        // least 8 bytes a slot holding a page, where the empty table
        // counts only its chunk pointers.
        let table = |f: &Figures| {
            f.all_in_terms
                .iter()
                .find(|t| t.name == allin::SLOT_TABLE)
                .map_or(0, |t| t.bytes)
        };
        assert!(
            table(&fresh) < N && table(&full) >= 8 * N,
            "{}: slot table {} empty, {} full",
            a.name(),
            table(&fresh),
            table(&full)
        );
        assert!(
            table(&released) < table(&full),
            "{}: chunks emptied",
            a.name()
        );
        // Most blocks freed: the memory falls, and the release is seen.
        assert!(
            released.pool < full.pool,
            "{}: {} after freeing 90% of {} bytes",
            a.name(),
            released.pool,
            full.pool
        );
        assert!(
            released.overhead() <= kept.overhead(),
            "{}: overhead {} after the release, {} before",
            a.name(),
            released.overhead(),
            kept.overhead()
        );
        // glibc and jemalloc keep freed pages until asked (mimalloc may
        // have purged them already, after its delay).
        if a != Allocator::Mimalloc {
            assert!(
                released.overhead() < kept.overhead(),
                "{}: the release gave nothing back ({} before and after)",
                a.name(),
                kept.overhead()
            );
        }
        assert!(c.store(N, &text_page(1)).is_err(), "slot out of range");
        assert!(ForkedHeap::new(a, 0).is_err());
    }
}

#[test]
fn every_contestant_counts_all_in_at_least_its_pool() {
    let _g = serial();
    let tree = FileTree::generate(9, 0.01);
    let slots = slots_needed(&tree);
    let mut contestants: Vec<Box<dyn PageContestant>> = vec![
        Box::new(ZsmemContestant::best(Codec::Lz4, slots).unwrap()),
        Box::new(ZsmemContestant::kernel_faithful(Codec::Lz4, slots).unwrap()),
        Box::new(ZsmemContestant::kernel_compacted(Codec::Lz4, slots).unwrap()),
    ];
    for a in [Allocator::System, Allocator::Jemalloc, Allocator::Mimalloc] {
        contestants.push(Box::new(ForkedHeap::new(a, slots).unwrap()));
    }
    for name in zsmem_lab::contestants::peers::PEERS {
        contestants.push(
            zsmem_lab::contestants::peers::make_peer_pages(name, slots)
                .unwrap()
                .unwrap(),
        );
    }
    for mut c in contestants {
        let r = run(c.as_mut(), &tree);
        for s in &r.steps {
            all_in_is_whole(&r.contestant, &s.figures);
        }
        let untar = &r.steps[0].figures;
        assert!(
            untar.all_in > untar.pool,
            "{}: no slot table counted",
            r.contestant
        );
    }
}

/// Pages given back after a delay are counted until they are, and the lab
/// reads each step after the delay: every step's figures are those of a
/// pool that returns its pages at once.
#[test]
fn delayed_page_return_reads_as_immediate_at_every_step() {
    use zsmem::{PageReturn, PageStore, PageStoreConfig, PoolConfig};
    let _g = serial();
    let tree = tree();
    let slots = slots_needed(&tree);
    let make = |name: &str, page_return| {
        let store = PageStore::new(PageStoreConfig {
            slots,
            codec: Codec::Lz4,
            pool: PoolConfig {
                page_return,
                ..PoolConfig::default()
            },
            ..Default::default()
        })
        .unwrap();
        ZsmemContestant::from_store(name, store)
    };
    let delayed = run(&mut make("delayed", PageReturn::default()), &tree);
    let immediate = run(&mut make("immediate", PageReturn::Immediate), &tree);
    assert_eq!(delayed.steps.len(), immediate.steps.len());
    for (d, i) in delayed.steps.iter().zip(&immediate.steps) {
        assert_eq!(
            (d.figures.compr, d.figures.pool, d.figures.meta),
            (i.figures.compr, i.figures.pool, i.figures.meta),
            "r{}:{}: delayed vs immediate",
            d.round,
            d.label
        );
    }
}

/// A reading while the workload runs (`sample`, the swap experiment's)
/// takes the figures as they are: pages still waiting to go back to the
/// OS are in its pool, so it is never below the settled reading that
/// `figures` takes after the delay, and both count the same data.
#[test]
fn a_sample_counts_what_waits_to_go_back() {
    use zsmem::{PageStore, PageStoreConfig};
    let _g = serial();
    const N: u64 = 2000;
    let store = PageStore::new(PageStoreConfig {
        slots: N as usize,
        codec: Codec::Lz4,
        ..Default::default()
    })
    .unwrap();
    let mut c = ZsmemContestant::from_store("zsmem", store);
    for i in 0..N {
        c.store(i, &text_page(i)).unwrap();
    }
    c.discard(0, N / 2).unwrap();
    let sampled = c.sample().unwrap();
    let settled = c.figures().unwrap();
    all_in_is_whole("sampled", &sampled);
    assert_eq!((sampled.orig, sampled.compr), (settled.orig, settled.compr));
    assert!(
        sampled.pool >= settled.pool && sampled.all_in >= settled.all_in,
        "sampled {sampled:?}, settled {settled:?}"
    );
}
