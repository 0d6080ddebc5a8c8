//! The device file and ext4 on it, against the real kernel: FUSE reads,
//! writes and holes reach the store; an ext4 run end to end on a few MB;
//! everything made is gone afterwards. Needs root, /dev/fuse, loop devices
//! and mkfs.ext4: where any is missing, each test says so and passes.

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use zsmem::{Codec, PageStore, PageStoreConfig, PoolConfig};
use zsmem_lab::blockdev::fuse::FuseMount;
use zsmem_lab::blockdev::mount::{mounted_at, mounts};
use zsmem_lab::blockdev::registry::{RECORD_DIR, remove_stale};
use zsmem_lab::blockdev::{BlockDevError, FsContestant, StoreBackend, loopdev, unavailable_reason};
use zsmem_lab::contestants::PageContestant;
use zsmem_lab::contestants::zsmem::ZsmemContestant;
use zsmem_lab::corpus::{FileEntry, FileTree};
use zsmem_lab::workloads::ext4::{Ext4UntarRm, device_bytes};

fn skip(test: &str, device_file: bool) -> bool {
    match unavailable_reason(device_file) {
        Some(why) => {
            println!("{test}: skipped: {why}");
            true
        }
        None => false,
    }
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("zsmem-blockdev-test.{}.{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn store(pages: usize) -> Arc<PageStore> {
    Arc::new(
        PageStore::new(PageStoreConfig {
            slots: pages,
            codec: Codec::Lz4,
            pool: PoolConfig::default(),
            ..Default::default()
        })
        .unwrap(),
    )
}

/// Text-like bytes that compress, different for each `seed`.
fn text(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| b"abcdefgh zsmem ext4 "[(i / 7 + seed as usize) % 20])
        .collect()
}

fn punch(file: &std::fs::File, offset: i64, len: i64) {
    // SAFETY: `file` is open; fallocate takes plain integers.
    let r = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            offset,
            len,
        )
    };
    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
}

fn no_loop_matching(part: &str) -> bool {
    (0..256).all(|n| loopdev::backing_file(n).is_none_or(|b| !b.to_string_lossy().contains(part)))
}

#[test]
#[cfg_attr(miri, ignore = "FUSE and liblz4 are foreign")]
fn device_file_reads_writes_and_holes_reach_the_store() {
    if skip("device_file_reads_writes_and_holes_reach_the_store", true) {
        return;
    }
    let dir = scratch("fuse");
    let s = store(64);
    let fuse = match FuseMount::mount(StoreBackend::new(Arc::clone(&s)).unwrap(), &dir, 2) {
        Ok(f) => f,
        Err(BlockDevError::Unavailable(why)) => {
            println!("device_file_reads_writes_and_holes_reach_the_store: skipped: {why}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let disk = fuse.disk_path();
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&disk)
        .unwrap();
    assert_eq!(f.metadata().unwrap().len(), 64 * 4096);

    // Three whole pages, then a write across a page boundary.
    let a = text(3 * 4096, 1);
    f.write_all_at(&a, 4096).unwrap();
    assert_eq!(s.mm_stat().orig_data_size, 3 * 4096);
    let b = text(100, 2);
    f.write_all_at(&b, 2 * 4096 - 50).unwrap();
    let mut expect = vec![0u8; 64 * 4096];
    expect[4096..4 * 4096].copy_from_slice(&a);
    expect[2 * 4096 - 50..2 * 4096 + 50].copy_from_slice(&b);
    let mut page = vec![0u8; 4096];
    s.read(2, &mut page).unwrap();
    assert_eq!(page[..], expect[2 * 4096..3 * 4096], "page 2 is slot 2");

    // A hole over page 2 whole and half of page 3: one page discarded.
    punch(&f, 2 * 4096, 4096 + 2048);
    expect[2 * 4096..3 * 4096 + 2048].fill(0);
    let m = s.mm_stat();
    assert_eq!(m.orig_data_size, 2 * 4096, "slot 2 discarded, slot 3 kept");
    let mut back = vec![0xAAu8; expect.len()];
    f.read_exact_at(&mut back, 0).unwrap();
    assert_eq!(back, expect);

    // Past the end: a short read, and a write refused.
    let mut tail = vec![0u8; 8192];
    assert_eq!(f.read_at(&mut tail, 63 * 4096).unwrap(), 4096);
    assert!(f.write_at(&[1], 64 * 4096).is_err());

    drop(f);
    drop(fuse);
    assert!(mounted_at(&dir).is_none(), "FUSE still mounted at {dir:?}");
    std::fs::remove_dir(&dir).unwrap();
}

fn small_tree() -> FileTree {
    let mut files = Vec::new();
    for (d, n) in [
        ("drivers", 40),
        ("arch", 20),
        ("fs", 10),
        ("Documentation", 5),
    ] {
        for i in 0..n {
            files.push(FileEntry::new(
                format!("{d}/sub{}/f{i}.c", i % 3),
                text(3000 + 997 * i, i as u8),
            ));
        }
    }
    files.push(FileEntry::new("Makefile", text(5000, 9)));
    FileTree::new(files)
}

/// Checks a finished run and that everything it made is gone.
fn check_run_and_cleanup(mut c: FsContestant, tree: &FileTree) {
    let dir = c.dir().to_path_buf();
    let work = Ext4UntarRm {
        remove: Some(vec!["drivers".into(), "arch".into()]),
        ..Ext4UntarRm::default()
    };
    let r = work.run(tree, &mut c, |_| {}).unwrap();
    let labels: Vec<&str> = r.steps.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels, ["untar", "-drivers", "-arch", "-rest", "compact"]);
    let untar = &r.steps[0].figures;
    assert!(
        untar.orig >= tree.total_bytes(),
        "the files are on the device: {untar:?}"
    );
    assert!(untar.compr > 0 && untar.compr < untar.orig);
    let rest = &r.steps[3].figures;
    assert!(
        rest.orig < untar.orig / 2,
        "discards reached the device: {} then {}",
        untar.orig,
        rest.orig
    );
    let device = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(device.contains(dir.to_str().unwrap()));
    drop(c);
    assert!(
        mounts().iter().all(|m| !m.dir.starts_with(&dir)),
        "{dir:?} still mounted"
    );
    assert!(!dir.exists(), "{dir:?} left behind");
    let record = PathBuf::from(format!("{RECORD_DIR}/blockdev.{}.json", std::process::id()));
    // Other tests of this process may hold devices now: the record, if
    // present, must not name this run's directory.
    if let Ok(text) = std::fs::read_to_string(&record) {
        assert!(!text.contains(dir.to_str().unwrap()), "{text}");
    }
}

#[test]
#[cfg_attr(miri, ignore = "FUSE and liblz4 are foreign")]
fn ext4_on_a_device_file_end_to_end() {
    if skip("ext4_on_a_device_file_end_to_end", true) {
        return;
    }
    let tree = small_tree();
    let bytes = device_bytes(&tree);
    let made = FsContestant::on_device_file(bytes, move || {
        Ok(Box::new(ZsmemContestant::kernel_faithful(
            Codec::Lz4,
            (bytes / 4096) as usize,
        )?) as Box<dyn PageContestant + Send>)
    });
    let c = match made {
        Ok(c) => c,
        Err(BlockDevError::Unavailable(why)) => {
            println!("ext4_on_a_device_file_end_to_end: skipped: {why}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    if !c.config().contains("direct I/O") {
        println!(
            "note: the loop device fell back to buffered I/O: {}",
            c.config()
        );
    }
    check_run_and_cleanup(c, &tree);
    // No loop device is left on a device file of this process.
    let mine = format!("zsmem-blockdev.{}.", std::process::id());
    assert!(no_loop_matching(&mine));
}

#[test]
#[cfg_attr(miri, ignore = "zram and liblz4 are foreign")]
fn ext4_on_kernel_zram_end_to_end() {
    if skip("ext4_on_kernel_zram_end_to_end", false) {
        return;
    }
    let tree = small_tree();
    match FsContestant::on_kernel_zram("kernel-zram", "lz4", device_bytes(&tree)) {
        Ok(c) => check_run_and_cleanup(c, &tree),
        Err(BlockDevError::Unavailable(why)) => {
            println!("ext4_on_kernel_zram_end_to_end: skipped: {why}");
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn stale_records_are_undone_and_nothing_else_is_touched() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("stale_records_are_undone_and_nothing_else_is_touched: skipped: not root");
        return;
    }
    // A creator that is gone: a pid past any running one.
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .map(|s| s.trim().parse().unwrap_or(4_194_304))
        .unwrap_or(4_194_304);
    let pid = pid_max - 1;
    assert!(!Path::new(&format!("/proc/{pid}")).exists());
    let left = scratch("stale");
    let kept_loop = (0..8).find_map(|n| loopdev::backing_file(n).map(|b| (n, b)));
    let record = serde_json::json!({
        "pid": pid,
        "start": 1,
        "resources": [
            {"Dir": left},
            // Not mounted: nothing to do.
            {"Mount": {"dir": left.join("mnt"), "source": "/dev/loop250"}},
            // Attached to something else (or nothing): left alone.
            {"Loop": {"number": 0, "backing": "/nonexistent/zsmem-disk"}},
        ],
    });
    std::fs::create_dir_all(RECORD_DIR).unwrap();
    let path = PathBuf::from(format!("{RECORD_DIR}/blockdev.{pid}.json"));
    std::fs::write(&path, record.to_string()).unwrap();
    assert!(remove_stale() >= 1);
    assert!(!left.exists(), "the recorded directory is removed");
    assert!(!path.exists(), "the record is removed");
    if let Some((n, b)) = kept_loop {
        assert_eq!(loopdev::backing_file(n), Some(b), "loop{n} untouched");
    }
}
