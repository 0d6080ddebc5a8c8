//! `zsmem region`: the document cache side by side all resident, in a
//! region and the kernel's way (plain memory in a memory-limited cgroup
//! swapping to a private zram device). The kernel's way run small must
//! swap, serve the same bytes, and put the machine back exactly: swap
//! areas, zram devices, cgroups and zswap's parameters as found, on a
//! normal exit and on `SIGTERM` mid-run. Root only for the kernel's way;
//! skips with the reason elsewhere.

mod common;
use common::zsmem_within;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the kernel's way could leave behind: swap areas, zram devices,
/// our memory cgroups, zswap's parameters, our records.
#[derive(Debug, PartialEq, Eq)]
struct Machine {
    swaps: String,
    zram: Vec<String>,
    cgroups: Vec<String>,
    zswap: Vec<(String, String)>,
}

fn names(dir: &str, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn machine() -> Machine {
    Machine {
        swaps: std::fs::read_to_string("/proc/swaps").unwrap_or_default(),
        zram: names("/sys/block", "zram"),
        cgroups: names("/sys/fs/cgroup/memory", "zsmem-swap"),
        zswap: zsmem_lab::workloads::swap::zswap::read_params(),
    }
}

/// The root tests one at a time: each compares the machine before and
/// after its run, and waits for a swap area to come up, so another's swap
/// area or device would be taken for its own (a SIGTERM then reached a run
/// that had not yet installed its handler).
static MACHINE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    MACHINE.lock().unwrap_or_else(|e| e.into_inner())
}

fn skip(test: &str) -> bool {
    let why = zsmem_lab::workloads::swap::unavailable_reason()
        .or_else(zsmem_lab::workloads::swap::swap_lock_busy);
    match why {
        Some(why) => {
            eprintln!("skipping {test}: {why}");
            true
        }
        None => false,
    }
}

const SMALL: &[&str] = &[
    "region",
    "--data",
    "12M",
    "--budgets",
    "1/2",
    "--ops",
    "20000",
    "--fault-units",
    "",
    "--json",
];

#[test]
fn the_kernel_way_runs_small_and_leaves_nothing_behind() {
    if skip("the_kernel_way_runs_small_and_leaves_nothing_behind") {
        return;
    }
    let _serial = serial();
    let before = machine();
    let out = common::zsmem(SMALL);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let k = &v["kernel_zram"];
    assert!(k["skipped"].is_null(), "{k}");
    assert!(k["program_overhead_bytes"].as_u64().is_some(), "{k}");
    let row = &k["rows"][0];
    assert!(row["failed"].is_null(), "{row}");
    // Half the data in the cgroup: the rest went out to zram.
    assert!(row["pswpout"].as_u64().unwrap() > 256, "{row}");
    assert!(row["zram_pool_bytes"].as_u64().unwrap() > 0, "{row}");
    let held = row["held_bytes"].as_u64().unwrap();
    let limit = row["limit_bytes"].as_u64().unwrap();
    assert!(held > limit / 2, "{row}");
    // The same requests served the same bytes (the CLI also checks).
    assert_eq!(
        row["outcome"]["served"], v["all_resident"]["served"],
        "{row}"
    );
    assert_eq!(machine(), before, "{err}");
}

#[test]
fn sigterm_during_the_kernel_way_puts_the_machine_back() {
    if skip("sigterm_during_the_kernel_way_puts_the_machine_back") {
        return;
    }
    let _serial = serial();
    let before = machine();
    let bin = std::env::var_os("ZSMEM_BIN").unwrap_or(env!("CARGO_BIN_EXE_zsmem").into());
    let mut child = Command::new(bin)
        .args([
            "region",
            "--data",
            "12M",
            "--budgets",
            "1/4",
            "--ops",
            "300000",
            "--fault-units",
            "",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Mid-run: our swap area is on (the child runs in its cgroup).
    let deadline = Instant::now() + Duration::from_secs(300);
    while std::fs::read_to_string("/proc/swaps").unwrap_or_default() == before.swaps {
        assert!(Instant::now() < deadline, "no swap area came up");
        assert!(child.try_wait().unwrap().is_none(), "ended early");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(1));
    assert!(child.try_wait().unwrap().is_none(), "ended early");
    // SAFETY: kill has no memory effects; `pid` is our child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM), "{err}");
    assert_eq!(machine(), before, "{err}");
    assert!(!std::path::Path::new(&format!("/run/zsmem/blockdev.{pid}.json")).exists());
}

#[test]
fn without_the_kernel_way_the_column_says_why() {
    let out = common::zsmem(&[
        "region",
        "--data",
        "2M",
        "--budgets",
        "1/2",
        "--ops",
        "2000",
        "--fault-units",
        "",
        "--no-kernel",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("kernel zram") && text.contains("skipped: --no-kernel"),
        "{text}"
    );
}

/// `--keep-copies none`: the region serves the same bytes (the run checks
/// them) and its store holds no copy of a resident unit; a bad value is a
/// usage error naming the forms it takes.
#[test]
fn keep_copies_none_holds_no_copies() {
    let out = common::zsmem(&[
        "region",
        "--data",
        "2M",
        "--budgets",
        "1/4",
        "--ops",
        "2000",
        "--fault-units",
        "",
        "--no-kernel",
        "--json",
        "--keep-copies",
        "none",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let s = &v["region"][0]["outcome"]["stats"];
    assert_eq!(s["copy_bytes"], 0, "{s}");
    assert!(s["copies_dropped"].as_u64().unwrap() > 0, "{s}");

    let out = common::zsmem(&["region", "--keep-copies", "some", "--no-kernel"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("all, none, a size"), "{err}");
}

/// Out-of-range options used to run (`--write-percent 200` printed "200%
/// updates", `--zipf nan` "zipf NaN", `--ops 2^64-1` ran without end), and
/// a bad `--fault-units` was refused only after the whole table; now each
/// is refused before anything is measured or printed.
#[test]
fn bad_options_are_refused_before_anything_runs() {
    let base = [
        "region",
        "--no-kernel",
        "--data",
        "4M",
        "--ops",
        "1000",
        "--budgets",
        "1/2",
    ];
    for (extra, names) in [
        (
            &["--write-percent", "200", "--fault-units", ""][..],
            "--write-percent",
        ),
        (
            &["--write-percent", "101", "--fault-units", ""][..],
            "--write-percent",
        ),
        (&["--zipf", "nan", "--fault-units", ""][..], "--zipf"),
        (&["--zipf", "inf", "--fault-units", ""][..], "--zipf"),
        (&["--zipf=-1", "--fault-units", ""][..], "--zipf"),
        (
            &["--ops", "18446744073709551615", "--fault-units", ""][..],
            "--ops",
        ),
        (&["--fault-units", "4K,3K"][..], "--fault-units"),
        (&["--fault-units", "128K"][..], "--fault-units"),
        (&["--unit", "3K", "--fault-units", ""][..], "--unit"),
    ] {
        let mut args = base.to_vec();
        args.extend(extra);
        let out = zsmem_within(&args, 20);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(names), "{extra:?}: {err}");
        assert!(out.stdout.is_empty(), "{extra:?} printed a table first");
    }
    // The edges are taken.
    let mut args = base.to_vec();
    args.extend([
        "--write-percent",
        "100",
        "--zipf",
        "0",
        "--fault-units",
        "",
        "--json",
    ]);
    let out = common::zsmem(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The evictions a fault made itself were "by the fault thread" under
/// `--faults signal` too, where no fault thread exists.
#[test]
fn evictions_at_a_fault_name_who_made_them() {
    for (faults, who, not) in [
        (
            "signal",
            "by faulting threads in their SIGBUS handler",
            "by the fault thread",
        ),
        (
            "thread",
            "by the fault thread",
            "by faulting threads in their SIGBUS handler",
        ),
    ] {
        let out = common::zsmem(&[
            "region",
            "--no-kernel",
            "--data",
            "2M",
            "--ops",
            "2000",
            "--budgets",
            "1/4",
            "--fault-units",
            "",
            "--faults",
            faults,
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{faults}: {err}");
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with("budget 1/4:"))
            .unwrap_or_else(|| panic!("{faults}: no budget line in\n{text}"));
        assert!(
            line.contains(who) && !line.contains(not),
            "{faults}: {line}"
        );
    }
}
