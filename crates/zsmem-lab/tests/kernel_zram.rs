//! Integration tests of `zsmem_lab::contestants::kernel_zram` against the running
//! kernel's zram. Each test makes its own private device; where zram or
//! root is missing a test prints "skipping: <reason>" and passes.
//!
//! The tests run one at a time (a file-wide lock): they check that device
//! directories disappear, and the latency test wants a quiet machine. See the
//! measured latencies with
//!
//! ```text
//! cargo test -p zsmem-lab --test kernel_zram -- --nocapture lz4_latency
//! ```

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use zsmem_lab::contestants::kernel_zram::{
    KernelZram, MmStat, PAGE_SIZE, RECORD_DIR, ZramConfig, ZramError,
};

const PAGE: u64 = PAGE_SIZE as u64;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Creates a device, or prints why not and returns None.
fn create(cfg: &ZramConfig) -> Option<KernelZram> {
    match KernelZram::create(cfg) {
        Ok(z) => Some(z),
        Err(ZramError::Unavailable(reason)) => {
            println!("skipping: {reason}");
            None
        }
        Err(e) => panic!("creating a zram device: {e}"),
    }
}

fn zram_dirs() -> BTreeSet<String> {
    std::fs::read_dir("/sys/block")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("zram"))
                .collect()
        })
        .unwrap_or_default()
}

fn gone(device: u32) -> bool {
    !Path::new(&format!("/sys/block/zram{device}")).exists()
}

const WORDS: &[&str] = &[
    "static",
    "int",
    "struct",
    "return",
    "if",
    "else",
    "for",
    "while",
    "unsigned",
    "long",
    "const",
    "char",
    "void",
    "NULL",
    "sizeof",
    "page",
    "zspage",
    "class",
    "handle",
    "object",
    "free",
    "alloc",
    "lock",
    "unlock",
    "spin_lock",
    "list_add",
    "list_del",
    "goto",
    "out",
    "err",
    "ret",
    "->",
    "{",
    "}",
    "(",
    ")",
    ";",
    "=",
    "==",
    "!=",
    "&&",
    "||",
    "+",
    "-",
    "*",
    "/*",
    "*/",
    "0",
    "1",
    "PAGE_SIZE",
    "GFP_KERNEL",
    "EXPORT_SYMBOL",
    "#include",
    "#define",
    "<linux/mm.h>",
];

/// Lines of C-like text the text pages are made of.
fn line_pool() -> Vec<Vec<u8>> {
    let mut rng = StdRng::seed_from_u64(0x5eed);
    (0..48)
        .map(|_| {
            let mut line = b"\t".to_vec();
            for _ in 0..rng.random_range(3..10) {
                line.extend_from_slice(WORDS[rng.random_range(0..WORDS.len())].as_bytes());
                line.push(b' ');
            }
            line
        })
        .collect()
}

/// A page of C-like text: lines from a pool, some with a number appended;
/// lz4 compresses it to roughly a third, like the kernel's source tree.
fn text_page(rng: &mut StdRng) -> Vec<u8> {
    thread_local! {
        static POOL: Vec<Vec<u8>> = line_pool();
    }
    let mut page = Vec::with_capacity(PAGE_SIZE + 128);
    POOL.with(|pool| {
        while page.len() < PAGE_SIZE {
            page.extend_from_slice(&pool[rng.random_range(0..pool.len())]);
            if rng.random_range(0..5) == 0 {
                page.extend_from_slice(format!("{}", rng.random_range(0..1000)).as_bytes());
            }
            page.push(b'\n');
        }
    });
    page.truncate(PAGE_SIZE);
    page
}

fn random_page(rng: &mut StdRng) -> Vec<u8> {
    let mut page = vec![0u8; PAGE_SIZE];
    rng.fill_bytes(&mut page);
    page
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Zero,
    Same,
    Random,
    Text,
}

fn kind_of(i: u64) -> Kind {
    match i % 5 {
        0 => Kind::Zero,
        1 => Kind::Random,
        4 => Kind::Same,
        _ => Kind::Text,
    }
}

fn page_of(kind: Kind, rng: &mut StdRng) -> Vec<u8> {
    match kind {
        Kind::Zero => vec![0; PAGE_SIZE],
        Kind::Same => 0x5a5a_5a5a_0123_4567u64.to_ne_bytes().repeat(PAGE_SIZE / 8),
        Kind::Random => random_page(rng),
        Kind::Text => text_page(rng),
    }
}

fn show(label: &str, s: &MmStat) {
    println!(
        "{label:>14}: orig {} compr {} used {} limit {} max {} same {} compacted {} huge {} huge_since {:?}",
        s.orig_data_size,
        s.compr_data_size,
        s.mem_used_total,
        s.mem_limit,
        s.mem_used_max,
        s.same_pages,
        s.pages_compacted,
        s.huge_pages,
        s.huge_pages_since
    );
}

#[test]
fn round_trip_stats_discard_compact() {
    let _serial = serial();
    const N: u64 = 2000;
    let Some(mut z) = create(&ZramConfig::with_pages(4096)) else {
        return;
    };
    let device = z.device_number();
    assert_eq!(z.algorithm(), "lz4");
    assert_eq!(z.pages(), 4096);
    assert!(z.sysfs_dir().is_dir());
    let comp = std::fs::read_to_string(z.sysfs_dir().join("comp_algorithm")).unwrap();
    assert!(comp.contains("[lz4]"), "{comp}");

    let fresh = z.mm_stat().unwrap();
    show("fresh", &fresh);
    assert_eq!(fresh.orig_data_size, 0);
    assert_eq!(fresh.compr_data_size, 0);
    assert_eq!(fresh.mem_used_total, 0, "an empty pool holds no zspages");
    assert_eq!(fresh.same_pages, 0);
    assert_eq!(fresh.huge_pages, 0);
    assert_eq!(fresh.mem_limit, 0);

    let mut rng = StdRng::seed_from_u64(7);
    let mut pages = Vec::new();
    for i in 0..N {
        let page = page_of(kind_of(i), &mut rng);
        z.write_page(i, &page).unwrap();
        pages.push(page);
    }
    let count = |kinds: &[Kind], range: std::ops::Range<u64>| {
        range.filter(|&i| kinds.contains(&kind_of(i))).count() as u64
    };
    let same = count(&[Kind::Zero, Kind::Same], 0..N);
    let huge = count(&[Kind::Random], 0..N);
    let text = count(&[Kind::Text], 0..N);

    let full = z.mm_stat().unwrap();
    show("after writes", &full);
    assert_eq!(full.same_pages, same);
    assert_eq!(full.huge_pages, huge);
    assert_eq!(full.huge_pages_since, Some(huge));
    // Measured on 6.18: orig_data_size counts same-filled pages too.
    assert_eq!(full.orig_data_size, N * PAGE);
    // A huge page's compressed size is counted as a whole page.
    assert!(full.compr_data_size > huge * PAGE);
    assert!(full.compr_data_size < (huge + text) * PAGE);
    assert!(full.mem_used_total >= full.compr_data_size);
    assert!(full.mem_used_max >= full.mem_used_total);

    let mut buf = vec![0u8; PAGE_SIZE];
    for i in 0..N {
        z.read_page(i, &mut buf).unwrap();
        assert!(buf == pages[i as usize], "page {i} differs");
    }
    // Never written: zeros.
    z.read_page(N, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0));

    // Discard the first half in one call.
    let half = N / 2;
    z.discard(0, half).unwrap();
    let after = z.mm_stat().unwrap();
    show("after discard", &after);
    assert_eq!(after.orig_data_size, (N - half) * PAGE);
    assert_eq!(after.same_pages, count(&[Kind::Zero, Kind::Same], half..N));
    assert_eq!(after.huge_pages, count(&[Kind::Random], half..N));
    assert_eq!(after.huge_pages_since, Some(huge), "a counter of stores");
    assert!(after.compr_data_size < full.compr_data_size);
    assert!(after.mem_used_total <= full.mem_used_total);
    assert_eq!(after.mem_used_max, full.mem_used_max);
    for i in 0..N {
        z.read_page(i, &mut buf).unwrap();
        if i < half {
            assert!(buf.iter().all(|&b| b == 0), "discarded page {i} not zero");
        } else {
            assert!(buf == pages[i as usize], "kept page {i} differs");
        }
    }
    // Discard single pages: every other page of the second half.
    for i in (half..N).step_by(2) {
        z.discard(i, 1).unwrap();
    }
    let sparse = z.mm_stat().unwrap();
    show("sparse", &sparse);
    assert_eq!(sparse.orig_data_size, (N - half) / 2 * PAGE);

    z.compact().unwrap();
    let compacted = z.mm_stat().unwrap();
    show("compacted", &compacted);
    assert!(compacted.mem_used_total <= sparse.mem_used_total);
    assert_eq!(compacted.compr_data_size, sparse.compr_data_size);
    for i in (half + 1..N).step_by(2) {
        z.read_page(i, &mut buf).unwrap();
        assert!(
            buf == pages[i as usize],
            "page {i} differs after compaction"
        );
    }

    let io = z.io_stat().unwrap();
    println!("io_stat: {io:?}");
    assert_eq!((io.failed_reads, io.failed_writes), (0, 0));
    // Each discarded page counts as a slot-free notification.
    assert_eq!(io.notify_free, half + (N - half) / 2);

    let node = z.device_path().to_path_buf();
    drop(z);
    assert!(gone(device), "/sys/block/zram{device} still exists");
    assert!(!node.exists(), "{} still exists", node.display());
}

#[test]
fn overwriting_a_page_replaces_it() {
    let _serial = serial();
    let Some(mut z) = create(&ZramConfig::with_pages(16)) else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(3);
    let text = text_page(&mut rng);
    z.write_page(5, &random_page(&mut rng)).unwrap();
    assert_eq!(z.mm_stat().unwrap().huge_pages, 1);
    z.write_page(5, &text).unwrap();
    z.write_page(6, &[0u8; PAGE_SIZE]).unwrap();
    let s = z.mm_stat().unwrap();
    assert_eq!(
        (s.orig_data_size, s.huge_pages, s.same_pages),
        (2 * PAGE, 0, 1)
    );
    let mut buf = vec![0u8; PAGE_SIZE];
    z.read_page(5, &mut buf).unwrap();
    assert_eq!(buf, text);
    z.write_page(5, &[0u8; PAGE_SIZE]).unwrap();
    let s = z.mm_stat().unwrap();
    assert_eq!(
        (s.orig_data_size, s.same_pages, s.compr_data_size),
        (2 * PAGE, 2, 0)
    );
}

#[test]
fn bad_arguments_are_refused() {
    let _serial = serial();
    let Some(mut z) = create(&ZramConfig::with_pages(8)) else {
        return;
    };
    let page = vec![1u8; PAGE_SIZE];
    let mut buf = vec![0u8; PAGE_SIZE];
    let bad = |r: Result<Duration, ZramError>| matches!(r, Err(ZramError::BadArgument(_)));
    assert!(bad(z.write_page(0, &page[..100])));
    assert!(bad(z.write_page(0, &[0u8; PAGE_SIZE + 1])));
    assert!(bad(z.write_page(8, &page)));
    assert!(bad(z.write_page(u64::MAX, &page)));
    assert!(bad(z.read_page(0, &mut buf[..4095])));
    assert!(bad(z.read_page(8, &mut buf)));
    assert!(bad(z.discard(0, 0)));
    assert!(bad(z.discard(7, 2)));
    assert!(bad(z.discard(u64::MAX, 2)));
    // Still usable at both ends.
    z.write_page(7, &page).unwrap();
    z.read_page(7, &mut buf).unwrap();
    assert_eq!(buf, page);
    z.discard(0, 8).unwrap();
    z.read_page(7, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0));
    assert_eq!(z.mm_stat().unwrap().orig_data_size, 0);
    // Measured on 6.18: every discarded page counts, stored or not.
    assert_eq!(z.io_stat().unwrap().notify_free, 8);
}

#[test]
fn unknown_algorithm_is_unavailable_and_leaves_nothing() {
    let _serial = serial();
    let before = zram_dirs();
    let cfg = ZramConfig {
        algorithm: "no-such-alg".into(),
        ..ZramConfig::with_pages(16)
    };
    match KernelZram::create(&cfg) {
        Err(ZramError::Unavailable(reason)) => {
            println!("unavailable: {reason}");
            if reason.starts_with("algorithm") {
                assert!(
                    reason.contains("no-such-alg not offered: available"),
                    "{reason}"
                );
                assert!(reason.contains("lz4"), "{reason}");
            }
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert_eq!(zram_dirs(), before);
}

#[test]
fn every_offered_algorithm_round_trips() {
    let _serial = serial();
    let mut rng = StdRng::seed_from_u64(11);
    for alg in ["lzo-rle", "lzo", "lz4"] {
        let cfg = ZramConfig {
            algorithm: alg.into(),
            ..ZramConfig::with_pages(64)
        };
        let mut z = match KernelZram::create(&cfg) {
            Ok(z) => z,
            Err(ZramError::Unavailable(reason)) => {
                println!("skipping {alg}: {reason}");
                continue;
            }
            Err(e) => panic!("{alg}: {e}"),
        };
        let comp = std::fs::read_to_string(z.sysfs_dir().join("comp_algorithm")).unwrap();
        assert!(comp.contains(&format!("[{alg}]")), "{comp}");
        let pages: Vec<_> = (0..64).map(|_| text_page(&mut rng)).collect();
        for (i, p) in pages.iter().enumerate() {
            z.write_page(i as u64, p).unwrap();
        }
        let mut buf = vec![0u8; PAGE_SIZE];
        for (i, p) in pages.iter().enumerate() {
            z.read_page(i as u64, &mut buf).unwrap();
            assert!(buf == *p, "{alg}: page {i} differs");
        }
        let s = z.mm_stat().unwrap();
        println!(
            "{alg}: 64 text pages, compr {} used {}",
            s.compr_data_size, s.mem_used_total
        );
    }
}

#[test]
fn two_devices_coexist_and_each_is_removed() {
    let _serial = serial();
    let Some(mut a) = create(&ZramConfig::with_pages(32)) else {
        return;
    };
    let Some(mut b) = create(&ZramConfig {
        algorithm: "lzo".into(),
        ..ZramConfig::with_pages(64)
    }) else {
        return;
    };
    let (na, nb) = (a.device_number(), b.device_number());
    assert_ne!(na, nb);
    assert_ne!(na, 0);
    assert_ne!(nb, 0);
    assert_eq!((a.pages(), b.pages()), (32, 64));
    a.write_page(1, &[0xaa; PAGE_SIZE]).unwrap();
    b.write_page(1, &[0xbb; PAGE_SIZE]).unwrap();
    let mut buf = vec![0u8; PAGE_SIZE];
    a.read_page(1, &mut buf).unwrap();
    assert!(buf.iter().all(|&x| x == 0xaa));
    b.read_page(1, &mut buf).unwrap();
    assert!(buf.iter().all(|&x| x == 0xbb));
    drop(a);
    assert!(gone(na));
    assert!(!gone(nb));
    b.read_page(1, &mut buf).unwrap();
    assert!(buf.iter().all(|&x| x == 0xbb));
    assert_eq!(b.mm_stat().unwrap().same_pages, 1);
    drop(b);
    assert!(gone(nb));
}

#[test]
fn mem_limit_makes_stores_fail() {
    let _serial = serial();
    let limit = 64 * 1024;
    let Some(mut z) = create(&ZramConfig {
        mem_limit_bytes: Some(limit),
        ..ZramConfig::with_pages(256)
    }) else {
        return;
    };
    assert_eq!(z.mem_limit_bytes(), Some(limit));
    assert_eq!(z.mm_stat().unwrap().mem_limit, limit);
    let mut rng = StdRng::seed_from_u64(5);
    let mut failed_at = None;
    for i in 0..256 {
        match z.write_page(i, &random_page(&mut rng)) {
            Ok(_) => {}
            Err(ZramError::Io { what, source }) => {
                println!("store {i} failed: {what}: {source}");
                assert_eq!(source.raw_os_error(), Some(libc::EIO));
                failed_at = Some(i);
                break;
            }
            Err(e) => panic!("{e}"),
        }
    }
    let i = failed_at.expect("a store past mem_limit should fail");
    let s = z.mm_stat().unwrap();
    show("at limit", &s);
    assert!(s.mem_used_total <= limit);
    assert_eq!(s.huge_pages, i);
    let io = z.io_stat().unwrap();
    println!("io_stat: {io:?}");
    assert!(io.failed_writes >= 1);
    // Same-filled pages need no memory, so they still go in.
    z.write_page(i, &[0u8; PAGE_SIZE]).unwrap();
}

#[test]
fn a_panic_removes_the_device() {
    let _serial = serial();
    let mut device = None;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let Some(mut z) = create(&ZramConfig::with_pages(8)) else {
            return;
        };
        device = Some(z.device_number());
        z.write_page(0, &[3u8; PAGE_SIZE]).unwrap();
        panic!("deliberate panic holding zram{}", z.device_number());
    }));
    if let Some(n) = device {
        assert!(result.is_err());
        assert!(gone(n), "zram{n} survived the panic");
    }
}

// ---------------------------------------------------------------------------
// Cleanup on signals and exit, in a child process (this binary again).

const CHILD_ENV: &str = "ZSMEM_LAB_ZRAM_CHILD";

/// Not a test of its own: the body of the child process of the signal
/// tests. Without the environment variable it does nothing.
#[test]
fn child_holding_a_device() {
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return;
    };
    if mode == "unprivileged" {
        match KernelZram::create(&ZramConfig::with_pages(64)) {
            Err(ZramError::Unavailable(reason)) => println!("ZRAM_UNAVAILABLE {reason}"),
            other => println!("ZRAM_UNEXPECTED {other:?}"),
        }
        return;
    }
    if mode == "hold-pipe" {
        // As the zsmem binary does: a closed stdout ends the process.
        // SAFETY: setting a disposition to the default has no preconditions.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    let mut z = match KernelZram::create(&ZramConfig::with_pages(64)) {
        Ok(z) => z,
        Err(e) => {
            println!("ZRAM_SKIP {e}");
            return;
        }
    };
    if let Err(e) = zsmem_lab::contestants::kernel_zram::install_signal_cleanup() {
        println!("ZRAM_SKIP signal cleanup not installed: {e}");
        return;
    }
    z.write_page(3, &[9u8; PAGE_SIZE]).unwrap();
    println!("ZRAM_DEVICE {}", z.device_number());
    if mode == "exit" {
        std::mem::forget(z);
        std::process::exit(0);
    }
    // Keep doing I/O until the parent's signal ends the process.
    let mut buf = vec![0u8; PAGE_SIZE];
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        // After the cleanup the descriptor is /dev/null and these fail
        // (or go nowhere) until the process exits.
        let _ = z.write_page(4, &[7u8; PAGE_SIZE]);
        let _ = z.read_page(3, &mut buf);
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("no signal came");
}

/// Kills the child gently (SIGINT, then SIGKILL) if a test fails early.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // SAFETY: kill(2) on our own child's pid has no memory effects.
            unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGINT) };
            std::thread::sleep(Duration::from_secs(2));
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Runs the child in `mode`, sends `signal` (if any) once it holds a
/// device, and returns (device, exit code); None if the child skipped.
fn run_child(mode: &str, signal: Option<libc::c_int>) -> Option<(u32, Option<i32>)> {
    let exe = std::env::current_exe().unwrap();
    let child = Command::new(exe)
        .args(["--exact", "child_holding_a_device", "--nocapture"])
        .args(["--test-threads", "1"])
        .env(CHILD_ENV, mode)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut guard = ChildGuard(child);
    let out = BufReader::new(guard.0.stdout.take().unwrap());
    let mut device = None;
    let mut lines = out.lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        // libtest may print "test child_holding_a_device ... " first.
        if let Some((_, reason)) = line.split_once("ZRAM_SKIP ") {
            println!("skipping: {reason}");
            return None;
        }
        if let Some((_, n)) = line.split_once("ZRAM_DEVICE ") {
            device = Some(n.trim().parse::<u32>().unwrap());
            break;
        }
    }
    let device = device.expect("the child printed no device");
    assert!(!gone(device));
    if let Some(sig) = signal {
        std::thread::sleep(Duration::from_millis(50));
        // SAFETY: kill(2) on our own child's pid has no memory effects.
        assert_eq!(unsafe { libc::kill(guard.0.id() as libc::pid_t, sig) }, 0);
    }
    for _ in lines {}
    let status = guard.0.wait().unwrap();
    Some((device, status.code()))
}

#[test]
fn sigint_removes_devices_and_exits_130() {
    let _serial = serial();
    if let Some((device, code)) = run_child("hold", Some(libc::SIGINT)) {
        assert_eq!(code, Some(130));
        assert!(gone(device), "zram{device} survived SIGINT");
    }
}

#[test]
fn sigterm_removes_devices_and_exits_143() {
    let _serial = serial();
    if let Some((device, code)) = run_child("hold", Some(libc::SIGTERM)) {
        assert_eq!(code, Some(143));
        assert!(gone(device), "zram{device} survived SIGTERM");
    }
}

#[test]
fn exit_removes_a_leaked_device() {
    let _serial = serial();
    if let Some((device, code)) = run_child("exit", None) {
        assert_eq!(code, Some(0));
        assert!(gone(device), "zram{device} survived exit");
    }
}

#[test]
fn non_root_is_unavailable() {
    let _serial = serial();
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        let err = KernelZram::create(&ZramConfig::with_pages(8)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "kernel zram unavailable: not running as root"
        );
        return;
    }
    // As root: run the child as nobody.
    let before = zram_dirs();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_holding_a_device", "--nocapture"])
        .env(CHILD_ENV, "unprivileged")
        .uid(65534)
        .gid(65534)
        .output();
    let out = match out {
        Ok(out) => String::from_utf8_lossy(&out.stdout).into_owned(),
        Err(e) => {
            println!("skipping: cannot run the test binary as nobody: {e}");
            return;
        }
    };
    if !out.contains("ZRAM_") {
        println!("skipping: the test binary did not run as nobody: {out}");
        return;
    }
    assert!(
        out.contains("ZRAM_UNAVAILABLE not running as root"),
        "{out}"
    );
    assert_eq!(zram_dirs(), before);
}

// ---------------------------------------------------------------------------
// Latency, measured and printed, not asserted.

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn summary(label: &str, mut times: Vec<Duration>) -> String {
    times.sort();
    let total: Duration = times.iter().sum();
    let mbps = (times.len() as f64 * PAGE_SIZE as f64) / total.as_secs_f64() / 1e6;
    format!(
        "{label} p50 {:.2}us p99 {:.2}us ({mbps:.0} MB/s)",
        percentile(&times, 0.5).as_secs_f64() * 1e6,
        percentile(&times, 0.99).as_secs_f64() * 1e6
    )
}

#[test]
fn lz4_latency() {
    let _serial = serial();
    const N: u64 = 20_000;
    let Some(mut z) = create(&ZramConfig::with_pages(N)) else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(42);
    let pages: Vec<Vec<u8>> = (0..N).map(|_| text_page(&mut rng)).collect();
    let mut buf = vec![0u8; PAGE_SIZE];
    // Warm up the device's code paths and the per-cpu streams.
    for i in 0..200 {
        z.write_page(i, &pages[i as usize]).unwrap();
        z.read_page(i, &mut buf).unwrap();
    }
    z.discard(0, 200).unwrap();

    let mut stores = Vec::with_capacity(N as usize);
    for (i, p) in pages.iter().enumerate() {
        stores.push(z.write_page(i as u64, p).unwrap());
    }
    let filled = z.mm_stat().unwrap();
    let mut loads = Vec::with_capacity(N as usize);
    for i in 0..N {
        loads.push(z.read_page(i, &mut buf).unwrap());
    }
    let mut discards = Vec::with_capacity(N as usize);
    for i in 0..N {
        discards.push(z.discard(i, 1).unwrap());
    }
    let empty = z.mm_stat().unwrap();
    assert_eq!(empty.orig_data_size, 0);

    println!(
        "kernel zram lz4, {N} pages of C-like text, one syscall per page (reference: store p50 7.43us, load p50 3.48us, discard p50 1.70us):"
    );
    println!("  {}", summary("store", stores));
    println!("  {}", summary("load", loads));
    println!("  {}", summary("discard", discards));
    println!(
        "  filled: orig {} compr {} used {} (compr/orig {:.1}%, overhead {:.2}%)",
        filled.orig_data_size,
        filled.compr_data_size,
        filled.mem_used_total,
        100.0 * filled.compr_data_size as f64 / filled.orig_data_size as f64,
        100.0 * filled.overhead() as f64 / filled.compr_data_size as f64
    );
}

/// Issue 16: SIGHUP, SIGQUIT and (when not ignored) SIGPIPE leaked the
/// device (20-35 MB each); now each removes it and exits 128 + signal.
#[test]
fn sighup_sigquit_sigpipe_remove_devices() {
    let _serial = serial();
    for (mode, signal) in [
        ("hold", libc::SIGHUP),
        ("hold", libc::SIGQUIT),
        ("hold-pipe", libc::SIGPIPE),
    ] {
        if let Some((device, code)) = run_child(mode, Some(signal)) {
            assert_eq!(code, Some(128 + signal), "signal {signal}");
            assert!(gone(device), "zram{device} survived signal {signal}");
            assert!(
                !Path::new(&format!("{RECORD_DIR}/zram{device}.pid")).exists(),
                "the record of zram{device} survived signal {signal}"
            );
        } else {
            return;
        }
    }
}

/// Issue 16: after SIGKILL nothing in the process can clean up; the device
/// is recorded as the child's, and the next run removes it because its
/// creator is gone.
#[test]
fn a_device_left_by_sigkill_is_removed_by_the_next_run() {
    let _serial = serial();
    let Some((device, code)) = run_child("hold", Some(libc::SIGKILL)) else {
        return;
    };
    assert_eq!(code, None, "killed by a signal");
    let record = format!("{RECORD_DIR}/zram{device}.pid");
    assert!(!gone(device), "nothing could have removed zram{device}");
    assert!(Path::new(&record).exists(), "zram{device} has no record");
    let removed = zsmem_lab::contestants::kernel_zram::remove_stale_devices();
    assert!(removed.contains(&device), "{removed:?}");
    assert!(gone(device), "zram{device} is still there");
    assert!(!Path::new(&record).exists());
    // A device of a live process is not stale.
    if let Some(z) = create(&ZramConfig::with_pages(8)) {
        assert!(
            !zsmem_lab::contestants::kernel_zram::remove_stale_devices()
                .contains(&z.device_number())
        );
        assert!(!gone(z.device_number()));
    }
}

/// A record of ours names a device number that someone else's device holds
/// now (ours was removed by hand and the number handed out again): the
/// stale-device sweep must leave that device alone. The record says which
/// device it was (its sysfs directory's inode, new for every device); a
/// record holding only the creator's pid took any device of that number.
#[test]
fn a_recorded_number_taken_by_another_device_is_not_touched() {
    let _serial = serial();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !Path::new("/sys/class/zram-control").exists() {
        println!("skipping: needs root and zram");
        return;
    }
    /// Someone else's device, made by reading hot_add once; removed when
    /// dropped, whatever happens.
    struct Foreign(u32);
    impl Drop for Foreign {
        fn drop(&mut self) {
            let _ = std::fs::write("/sys/class/zram-control/hot_remove", self.0.to_string());
        }
    }
    let n: u32 = std::fs::read_to_string("/sys/class/zram-control/hot_add")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let foreign = Foreign(n);
    // Left by a process of ours that is gone (no pid runs at 4194303,
    // pid_max's ceiling), for a device whose sysfs directory had inode 1.
    std::fs::create_dir_all(RECORD_DIR).unwrap();
    let record = format!("{RECORD_DIR}/zram{n}.pid");
    std::fs::write(&record, "4194303 1 1\n").unwrap();
    let removed = zsmem_lab::contestants::kernel_zram::remove_stale_devices();
    assert!(!removed.contains(&n), "zram{n} removed");
    assert!(!gone(n), "zram{n} is gone");
    assert!(!Path::new(&record).exists(), "the stale record is kept");
    drop(foreign);
    assert!(gone(n));
}
