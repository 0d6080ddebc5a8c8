//! A stdout that cannot be written (`> /dev/full`): each command ends with
//! one line, `zsmem: error: I/O: ...`, and exit status 1. `bench`, `stats`
//! and `region` used to panic in `println!` (exit status 101, a backtrace).

mod common;

use std::fs::OpenOptions;
use std::process::{Command, Stdio};

/// Run `zsmem args` with stdout on /dev/full; `None` where there is none.
fn run_into_full(args: &[&str]) -> Option<std::process::Output> {
    let full = OpenOptions::new().write(true).open("/dev/full").ok()?;
    let bin = std::env::var_os("ZSMEM_BIN").unwrap_or(env!("CARGO_BIN_EXE_zsmem").into());
    Some(
        Command::new(bin)
            .args(args)
            .stdout(Stdio::from(full))
            .stderr(Stdio::piped())
            .output()
            .expect("run zsmem"),
    )
}

fn assert_one_io_error(args: &[&str]) {
    let Some(out) = run_into_full(args) else {
        eprintln!("skipping: no /dev/full");
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("zsmem:")).collect();
    assert_eq!(errors.len(), 1, "{args:?}: {err}");
    assert!(
        errors[0].starts_with("zsmem: error: I/O: "),
        "{args:?}: {err}"
    );
}

#[test]
fn stats_into_a_full_stdout_is_one_error() {
    assert_one_io_error(&["stats", "--objects", "2000"]);
    assert_one_io_error(&["stats", "--objects", "2000", "--format", "json"]);
}

#[test]
fn bench_pool_into_a_full_stdout_is_one_error() {
    let base = [
        "bench",
        "pool",
        "--sizes",
        "64",
        "--live",
        "100",
        "--ops",
        "1000",
        "--repeats",
        "1",
    ];
    assert_one_io_error(&base);
    let mut threads = base.to_vec();
    threads.extend(["--threads", "1"]);
    assert_one_io_error(&threads);
}

#[test]
fn bench_compact_and_free_into_a_full_stdout_are_one_error() {
    assert_one_io_error(&["bench", "compact", "--scale", "0.01"]);
    assert_one_io_error(&[
        "bench",
        "free",
        "--mib",
        "1",
        "--repeats",
        "1",
        "--threads",
        "1",
    ]);
}

#[test]
fn bench_store_into_a_full_stdout_is_one_error() {
    let base = [
        "bench",
        "store",
        "--scale",
        "0.01",
        "--pages",
        "100",
        "--no-kernel",
    ];
    assert_one_io_error(&base);
    let mut threads = base.to_vec();
    threads.extend(["--threads", "1", "--repeats", "1", "--churn", "1"]);
    assert_one_io_error(&threads);
}

#[test]
fn region_into_a_full_stdout_is_one_error() {
    let base = [
        "region",
        "--no-kernel",
        "--data",
        "1M",
        "--ops",
        "1000",
        "--budgets",
        "1/2",
        "--fault-units",
        "",
    ];
    assert_one_io_error(&base);
    let mut json = base.to_vec();
    json.push("--json");
    assert_one_io_error(&json);
}
