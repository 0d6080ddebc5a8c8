//! The malloc baselines (`zsmem_lab::contestants::heap`): their memory methods,
//! measured on ~20k corpus pages, and the page-contestant conformance suite,
//! run on every contestant: the three heap baselines, zsmem's two
//! configurations, the peers (zbud, z3fold, zblock, afmalloc) and, where it is available, the kernel's own zram.
//!
//! Every test takes [`LOCK`]: the system baseline's memory figure is glibc's
//! (the global allocator's) growth, which tests running in parallel would
//! pollute.
//!
//! Run with `--nocapture` to see each allocator's figures, retention after
//! frees included.

use std::sync::{Mutex, MutexGuard, OnceLock};

use zsmem::Codec;
use zsmem_lab::contestants::heap::{HeapContestant, MemoryMethod};
use zsmem_lab::contestants::kernel::KernelContestant;
use zsmem_lab::contestants::kernel_zram::ZramError;
use zsmem_lab::contestants::zram_front::HUGE_CLASS_SIZE;
use zsmem_lab::contestants::zsmem::ZsmemContestant;
use zsmem_lab::contestants::{Figures, LabError, PageContestant};
use zsmem_lab::corpus::{FileTree, PAGE_SIZE, Page};

static LOCK: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The contract every page contestant meets, with zram's semantics as the
/// reference. Self-contained (it needs only the public `PageContestant`
/// interface and `zsmem::Codec`), so it can move to a shared place as is.
mod conformance_suite {
    use super::*;

    /// Pages of known kinds.
    pub fn zero_page() -> Box<Page> {
        Box::new([0u8; PAGE_SIZE])
    }

    /// Every byte 0xA5: same-filled, not zero.
    pub fn filled_page() -> Box<Page> {
        Box::new([0xA5u8; PAGE_SIZE])
    }

    /// One 8-byte word repeated, its bytes all different: same-filled for
    /// zram (which compares machine words), not for a byte-wise test.
    pub fn word_page() -> Box<Page> {
        let mut p = zero_page();
        for c in p.chunks_exact_mut(8) {
            c.copy_from_slice(&0x0123_4567_89ab_cdefu64.to_ne_bytes());
        }
        p
    }

    fn xorshift(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    /// Text of words drawn from a small vocabulary: compresses to roughly
    /// a third or half of a page, like source code.
    pub fn text_page(seed: u64) -> Box<Page> {
        const WORDS: [&str; 24] = [
            "static", "int", "struct", "device", "return", "if", "else", "for", "(", ")", "{", "}",
            ";", "\n", "dev", "->", "0", "NULL", "err", "unsigned", "long", "*", "=", "ret",
        ];
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut s = String::with_capacity(PAGE_SIZE + 64);
        while s.len() < PAGE_SIZE {
            let r = xorshift(&mut x);
            s.push_str(WORDS[(r % WORDS.len() as u64) as usize]);
            if r & 0x300 == 0 {
                // An identifier of its own now and then.
                s.push_str(&format!("v{}", (r >> 20) % 1000));
            }
            s.push(' ');
        }
        let mut p = zero_page();
        p.copy_from_slice(&s.as_bytes()[..PAGE_SIZE]);
        p
    }

    /// Random bytes: does not compress, stored raw ("huge").
    pub fn random_page(seed: u64) -> Box<Page> {
        let mut x = seed | 1 << 40;
        let mut p = zero_page();
        for c in p.chunks_exact_mut(8) {
            c.copy_from_slice(&xorshift(&mut x).to_ne_bytes());
        }
        p
    }

    /// lz4 size of a compressible page, as every contestant (kernel
    /// included) stores it.
    pub fn lz4_len(p: &Page) -> u64 {
        let mut buf = vec![0u8; PAGE_SIZE];
        let n = Codec::Lz4
            .compress(p, &mut buf[..HUGE_CLASS_SIZE])
            .expect("a compressible page");
        assert!(n < HUGE_CLASS_SIZE);
        n as u64
    }

    fn check_slot(c: &mut dyn PageContestant, slot: u64, want: &Page, what: &str) {
        let mut out = zero_page();
        c.load(slot, &mut out)
            .unwrap_or_else(|e| panic!("{}: load {slot} ({what}): {e}", c.name()));
        assert!(
            out[..] == want[..],
            "{}: slot {slot} ({what}) read back different bytes",
            c.name()
        );
    }

    fn figures(c: &mut dyn PageContestant) -> Figures {
        let f = c
            .figures()
            .unwrap_or_else(|e| panic!("{}: figures: {e}", c.name()));
        assert!(f.compr <= f.orig, "{}: compr > orig in {f:?}", c.name());
        f
    }

    /// `(pages, compr, same, huge)` must be as counted.
    fn expect(
        c: &mut dyn PageContestant,
        pages: u64,
        compr: u64,
        same: u64,
        huge: u64,
        when: &str,
    ) {
        let f = figures(c);
        assert_eq!(
            (f.orig, f.compr, f.same_pages, f.huge_pages),
            (pages * PAGE_SIZE as u64, compr, same, huge),
            "{}: (orig, compr, same_pages, huge_pages) {when}",
            c.name()
        );
    }

    /// Check the contract on a fresh contestant of at least 16 slots:
    ///
    /// - a never-written slot reads as zeros, and figures start at 0;
    /// - zero pages, same-filled non-zero pages (by 8-byte word, as zram),
    ///   compressible text pages and incompressible random pages read back
    ///   byte for byte;
    /// - `orig` is 4096 x pages stored (same-filled included), `compr` the
    ///   sum of lz4 lengths with a huge page counted 4096 and a same-filled
    ///   one 0 (so `compr <= orig`), `same_pages` and `huge_pages` count
    ///   the slots in those states;
    /// - overwriting a slot replaces its content and its counts;
    /// - a discarded slot reads as zeros and is uncounted; discarding slots
    ///   never written is fine;
    /// - `compact()` succeeds and changes no content.
    pub fn conformance(c: &mut dyn PageContestant) {
        let name = c.name().to_string();
        expect(c, 0, 0, 0, 0, "when fresh");
        check_slot(c, 7, &zero_page(), "never written");

        let (t1, t2, t3) = (text_page(1), text_page(2), text_page(3));
        let (l1, l2, l3) = (lz4_len(&t1), lz4_len(&t2), lz4_len(&t3));
        let huge = PAGE_SIZE as u64;
        let mut want: Vec<Box<Page>> = vec![
            zero_page(),
            filled_page(),
            word_page(),
            t1.clone(),
            t2.clone(),
            random_page(5),
        ];
        for (slot, p) in want.iter().enumerate() {
            c.store(slot as u64, p)
                .unwrap_or_else(|e| panic!("{name}: store {slot}: {e}"));
        }
        expect(c, 6, l1 + l2 + huge, 3, 1, "after storing six pages");
        for (slot, p) in want.iter().enumerate() {
            check_slot(c, slot as u64, p, "first store");
        }

        // Overwrites: text -> random, random -> zero, zero -> text.
        c.store(3, &random_page(33)).unwrap();
        want[3] = random_page(33);
        expect(c, 6, l2 + 2 * huge, 3, 2, "after text -> random");
        c.store(5, &zero_page()).unwrap();
        want[5] = zero_page();
        expect(c, 6, l2 + huge, 4, 1, "after random -> zero");
        c.store(0, &t3).unwrap();
        want[0] = t3.clone();
        expect(c, 6, l2 + l3 + huge, 3, 1, "after zero -> text");
        // The same content again changes nothing.
        c.store(4, &t2).unwrap();
        expect(c, 6, l2 + l3 + huge, 3, 1, "after rewriting the same page");
        for (slot, p) in want.iter().enumerate() {
            check_slot(c, slot as u64, p, "after overwrites");
        }

        // Discard slots 3 (random) and 4 (text) in one call.
        c.discard(3, 2).unwrap();
        want[3] = zero_page();
        want[4] = zero_page();
        expect(c, 4, l3, 3, 0, "after discarding two slots");
        for (slot, p) in want.iter().enumerate() {
            check_slot(c, slot as u64, p, "after discard");
        }
        // Never-written and already discarded slots.
        c.discard(8, 8).unwrap();
        c.discard(3, 1).unwrap();
        expect(c, 4, l3, 3, 0, "after discarding empty slots");

        // A discarded slot takes a page again.
        c.store(4, &t1).unwrap();
        want[4] = t1.clone();
        expect(c, 5, l1 + l3, 3, 0, "after reusing a discarded slot");

        c.compact()
            .unwrap_or_else(|e| panic!("{name}: compact: {e}"));
        for (slot, p) in want.iter().enumerate() {
            check_slot(c, slot as u64, p, "after compact");
        }
        expect(c, 5, l1 + l3, 3, 0, "after compact");

        c.discard(0, 16).unwrap();
        expect(c, 0, 0, 0, 0, "after discarding everything");
        for slot in 0..6 {
            check_slot(c, slot, &zero_page(), "after discarding everything");
        }
        let f = figures(c);
        println!("conformance {name}: ok, figures at the end {f:?}");
    }
}

use conformance_suite::conformance;

const SLOTS: usize = 64;

#[test]
fn heap_baselines_conform() {
    let _g = serial();
    conformance(&mut HeapContestant::system(SLOTS).unwrap());
    conformance(&mut HeapContestant::jemalloc(SLOTS).unwrap());
    conformance(&mut HeapContestant::mimalloc(SLOTS).unwrap());
}

#[test]
fn zsmem_contestants_conform() {
    let _g = serial();
    conformance(&mut ZsmemContestant::best(Codec::Lz4, SLOTS).unwrap());
    conformance(&mut ZsmemContestant::kernel_faithful(Codec::Lz4, SLOTS).unwrap());
}

#[test]
fn peers_conform() {
    let _g = serial();
    for name in zsmem_lab::contestants::peers::PEERS {
        let mut c = zsmem_lab::contestants::peers::make_peer_pages(name, SLOTS)
            .expect("a peer")
            .unwrap();
        conformance(c.as_mut());
    }
}

#[test]
fn kernel_zram_conforms() {
    let _g = serial();
    match KernelContestant::new("lz4", SLOTS) {
        Ok(mut k) => conformance(&mut k),
        Err(LabError::Zram(ZramError::Unavailable(why))) => {
            println!("skipping kernel-zram: {why}");
        }
        Err(e) => panic!("kernel-zram: {e}"),
    }
}

#[test]
fn heap_baselines_name_and_describe_themselves() {
    let _g = serial();
    let s = HeapContestant::system(4).unwrap();
    let j = HeapContestant::jemalloc(4).unwrap();
    let m = HeapContestant::mimalloc(4).unwrap();
    assert_eq!(
        (s.name(), j.name(), m.name()),
        ("system", "jemalloc", "mimalloc")
    );
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    assert_eq!(s.memory_method(), MemoryMethod::GlibcMallinfo);
    assert_eq!(m.memory_method(), MemoryMethod::MimallocCommit);
    assert!(matches!(
        j.memory_method(),
        MemoryMethod::JemallocResident | MemoryMethod::ProcessRss
    ));
    for c in [&s as &dyn PageContestant, &j, &m] {
        let cfg = c.config();
        println!("{}: {cfg}", c.name());
        assert!(cfg.contains(c.name()) && cfg.contains("lz4") && cfg.contains("delta"));
    }
    assert!(HeapContestant::mimalloc(0).is_err());
}

/// The first 20k pages of the embedded corpus (~80 MB of a kernel-like
/// tree): realistic lz4 sizes, some same-filled and huge pages.
fn corpus_pages() -> Vec<&'static Page> {
    static TREE: OnceLock<FileTree> = OnceLock::new();
    let tree = TREE.get_or_init(|| FileTree::generate(11, 0.3));
    let v: Vec<&Page> = tree.pages().map(|(_, _, p)| p).take(20_000).collect();
    assert_eq!(v.len(), 20_000, "the corpus has at least 20k pages");
    v
}

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

fn show(name: &str, when: &str, f: &Figures) {
    println!(
        "{name:>8} {when:<22} orig {:>8.2} MiB  compr {:>7.2} MiB  pool {:>7.2} MiB  pool/compr {:>5.3}  same {:>5} huge {:>5}",
        mib(f.orig),
        mib(f.compr),
        mib(f.pool),
        if f.compr == 0 {
            0.0
        } else {
            f.pool as f64 / f.compr as f64
        },
        f.same_pages,
        f.huge_pages
    );
}

/// Store 20k pages, discard every other one, then the rest; the figures
/// after storing must be of the right magnitude (0.9x to 2x the compressed
/// bytes); after the discards they are only shown: what each allocator keeps
/// is what this baseline measures.
fn measure(c: &mut dyn PageContestant, pages: &[&Page]) -> [Figures; 3] {
    // Allocated before the first page, so that nothing of the test's own
    // sits above the contestant's blocks in the system heap.
    let name = c.name().to_string();
    let mut out = Box::new([0u8; PAGE_SIZE]);
    for (i, p) in pages.iter().enumerate() {
        c.store(i as u64, p).unwrap();
    }
    let full = c.figures().unwrap();
    show(&name, "20k pages stored", &full);
    assert_eq!(full.orig, pages.len() as u64 * PAGE_SIZE as u64);
    assert!(
        full.pool as f64 >= 0.9 * full.compr as f64 && full.pool <= 2 * full.compr,
        "{name}: pool {} not within 0.9x..2x of compr {} ({})",
        full.pool,
        full.compr,
        c.config()
    );
    for i in (0..pages.len()).step_by(97) {
        c.load(i as u64, &mut out[..]).unwrap();
        assert!(out[..] == pages[i][..], "{name}: slot {i}");
    }
    for i in (0..pages.len()).step_by(2) {
        c.discard(i as u64, 1).unwrap();
    }
    let half = c.figures().unwrap();
    show(&name, "every other discarded", &half);
    c.compact().unwrap();
    c.discard(0, pages.len() as u64).unwrap();
    let none = c.figures().unwrap();
    show(&name, "all discarded", &none);
    assert_eq!((none.orig, none.compr), (0, 0));
    println!("{name:>8} memory: {}", c.config());
    [full, half, none]
}

#[test]
fn memory_methods_measure_what_the_allocators_hold() {
    let _g = serial();
    let pages = &corpus_pages();
    let n = pages.len();
    let mut results = Vec::new();
    {
        let mut c = HeapContestant::system(n).unwrap();
        results.push(measure(&mut c, pages));
    }
    {
        let mut c = HeapContestant::jemalloc(n).unwrap();
        if c.memory_method() == MemoryMethod::ProcessRss {
            println!("note: jemalloc built without stats, measured by process RSS");
        }
        results.push(measure(&mut c, pages));
    }
    {
        let mut c = HeapContestant::mimalloc(n).unwrap();
        results.push(measure(&mut c, pages));
    }
    {
        let mut c = ZsmemContestant::kernel_faithful(Codec::Lz4, n).unwrap();
        results.push(measure(&mut c, pages));
    }
    // Same pages, same codec, same rules: identical compressed bytes.
    for r in &results[1..] {
        assert_eq!(
            (r[0].compr, r[0].same_pages, r[0].huge_pages),
            (
                results[0][0].compr,
                results[0][0].same_pages,
                results[0][0].huge_pages
            )
        );
    }
}
