//! `zsmem compare --workload swap` ended by `SIGTERM` mid-run puts the
//! machine back as it found it: `/proc/swaps` unchanged, no cgroup, tmpfs,
//! loop device or zram device of its own left, zswap's parameters as
//! before. Root only; skips with the reason elsewhere.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn zswap_params() -> Vec<(String, String)> {
    zsmem_lab::workloads::swap::zswap::read_params()
}

/// Lines naming `pid`'s resources: cgroups, mounts, loop devices' backing
/// files, zram records.
fn leftovers(pid: u32) -> Vec<String> {
    let mut left = Vec::new();
    let tag = format!(".{pid}.");
    if let Ok(d) = std::fs::read_dir("/sys/fs/cgroup/memory") {
        for e in d.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with("zsmem-swap") && n.contains(&tag) {
                left.push(format!("cgroup {n}"));
            }
        }
    }
    for l in std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
    {
        if l.contains(&format!("zsmem-blockdev{tag}")) {
            left.push(format!("mount {l}"));
        }
    }
    if let Ok(d) = std::fs::read_dir("/sys/block") {
        for e in d.flatten() {
            let f = e.path().join("loop/backing_file");
            if let Ok(b) = std::fs::read_to_string(f)
                && b.contains(&format!("zsmem-blockdev{tag}"))
            {
                left.push(format!("{:?} on {}", e.file_name(), b.trim()));
            }
        }
    }
    if let Ok(d) = std::fs::read_dir("/run/zsmem") {
        for e in d.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            if n.starts_with("zram") && text.split_whitespace().next() == Some(&pid.to_string()) {
                left.push(format!("zram record {n}"));
            }
            if n == format!("blockdev.{pid}.json") {
                left.push(format!("record {n}: {text}"));
            }
        }
    }
    left
}

fn our_swap_on(before: &str) -> bool {
    std::fs::read_to_string("/proc/swaps").unwrap_or_default() != before
}

#[test]
fn sigterm_mid_run_puts_the_machine_back() {
    if let Some(why) = zsmem_lab::workloads::swap::unavailable_reason() {
        eprintln!("skipping sigterm_mid_run_puts_the_machine_back: {why}");
        return;
    }
    for contestant in ["zswap", "kernel-zram", "zsmem"] {
        if let Some(why) = zsmem_lab::workloads::swap::swap_lock_busy() {
            eprintln!("skipping sigterm_mid_run_puts_the_machine_back ({contestant}): {why}");
            return;
        }
        let swaps = std::fs::read_to_string("/proc/swaps").unwrap();
        let zswap = zswap_params();
        let mut child = Command::new(env!("CARGO_BIN_EXE_zsmem"))
            .args([
                "compare",
                "--workload",
                "swap",
                "--runs",
                "1",
                "--limit-mib",
                "32",
                "--swap-mib",
                "256",
                "--no-report",
                "--swap-contestants",
                contestant,
                "--",
                "/bin/sh",
                "-c",
                "seq 100000000 | head -c 100663296 > \"$ZSMEM_SWAP_DIR/a\"; sleep 60",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        // Mid-run: our swap area is on and the program has written.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !our_swap_on(&swaps) {
            assert!(
                Instant::now() < deadline,
                "{contestant}: no swap area came up"
            );
            assert!(
                child.try_wait().unwrap().is_none(),
                "{contestant}: ended early"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_secs(3));
        assert!(
            child.try_wait().unwrap().is_none(),
            "{contestant}: ended early"
        );
        // SAFETY: kill has no memory effects; `pid` is our child.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&out.status)
                .map_or(out.status.code(), |s| Some(128 + s)),
            Some(128 + libc::SIGTERM),
            "{contestant}: {err}"
        );
        assert_eq!(
            std::fs::read_to_string("/proc/swaps").unwrap(),
            swaps,
            "{contestant}: {err}"
        );
        assert_eq!(zswap_params(), zswap, "{contestant}: {err}");
        assert_eq!(leftovers(pid), Vec::<String>::new(), "{contestant}: {err}");
        assert!(!Path::new(&format!("/run/zsmem/blockdev.{pid}.json")).exists());
    }
}
