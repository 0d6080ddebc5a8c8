//! Crafted input, misuse and faults (issue 16): each case once killed the
//! process, hung, lied or echoed an attacker's bytes; now each is a clear
//! error or a quiet exit.

mod common;

use common::{crafted_tar, test_dir, zsmem};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A 1.5 KB tar whose header declares a 1 TiB entry used to abort
/// `compare` and `bench store` reserving the declared size
/// ("memory allocation of 1099511627776 bytes failed", rc 134).
#[test]
fn a_tar_declaring_a_huge_entry_is_refused_not_an_abort() {
    let dir = test_dir("huge-entry");
    let tar = dir.join("huge.tar");
    std::fs::write(&tar, crafted_tar(b"big.bin", 1 << 40, &[7u8; 1024])).unwrap();
    for args in [
        vec![
            "compare",
            "--no-report",
            "--contestants",
            "zsmem",
            "--input",
        ],
        vec!["bench", "store", "--input"],
    ] {
        let mut args = args.clone();
        args.push(tar.to_str().unwrap());
        let out = zsmem(&args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("big.bin") && err.contains("input limit"),
            "{args:?}: {err}"
        );
    }
    // Near u64::MAX: the padding arithmetic must not overflow either.
    std::fs::write(&tar, crafted_tar(b"max.bin", u64::MAX - 5, &[1u8; 512])).unwrap();
    let out = zsmem(&["bench", "store", "--input", tar.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Sizes given in MiB used to wrap to 0 bytes and report with rc 0.
#[test]
fn sizes_out_of_range_are_refused() {
    for args in [
        &["bench", "free", "--mib", "17592186044416"][..],
        &["bench", "free", "--mib", "0"][..],
        &["compare", "--pid", "1", "--max-mib", "17592186044416"][..],
        &["compare", "--pid", "1", "--max-mib", "0"][..],
        // A round count that reserved 83 PB of steps (rc 134), and MiB
        // counts whose bytes wrapped (2^44 + 1 MiB: a 1 MiB limit).
        &["compare", "--no-report", "--rounds", "100000000000000"][..],
        &[
            "compare",
            "--workload",
            "swap",
            "--limit-mib",
            "17592186044417",
        ][..],
        &[
            "compare",
            "--workload",
            "swap",
            "--swap-mib",
            "17592186044417",
        ][..],
        &["compare", "--workload", "swap", "--sample-ms", "3600000"][..],
        &["compare", "--workload", "churn", "--ops", "0"][..],
    ] {
        let out = zsmem(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("not in 1.."),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// `compare` on input with no regular file used to print 0% ratios, rc 0.
#[test]
fn compare_refuses_an_empty_workload() {
    let dir = test_dir("empty-workload");
    let empty = dir.join("empty-tree");
    std::fs::create_dir_all(empty.join("sub")).unwrap();
    let tar = dir.join("dirs-only.tar");
    std::fs::write(&tar, crafted_tar(b"nothing.txt", 0, b"")).unwrap();
    for input in [&empty, &tar] {
        let out = zsmem(&[
            "compare",
            "--no-report",
            "--contestants",
            "zsmem",
            "--input",
            input.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(1), "{input:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("no pages"), "{}", stderr(&out));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// With the default `--sample-every 0` the one row printed is the end,
/// where everything is freed; its peak used to read 0.00 MiB.
#[test]
fn replay_takes_the_peak_at_every_step() {
    let dir = test_dir("replay-peak");
    let trace = dir.join("t.trace");
    let mut text = String::new();
    for i in 0..2000 {
        text += &format!("alloc {i} 3000\n");
    }
    for i in 0..2000 {
        text += &format!("free {i}\n");
    }
    std::fs::write(&trace, text).unwrap();
    let out = zsmem(&["replay", trace.to_str().unwrap(), "--contestants", "zsmem"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let row = stdout
        .lines()
        .find(|l| l.starts_with("zsmem "))
        .expect("a zsmem row");
    let peak: f64 = row.split_whitespace().nth(5).unwrap().parse().unwrap();
    assert!(
        peak > 5.0,
        "peak {peak} MiB after 2000 objects of 3000 bytes:\n{stdout}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `zsmem ... | head -1`: a closed stdout used to panic (rc 101).
#[test]
fn a_closed_stdout_ends_quietly() {
    use std::process::{Command, Stdio};
    let dir = test_dir("closed-stdout");
    let trace = dir.join("t.trace");
    let text: String = (0..5000).map(|i| format!("alloc {i} 100\n")).collect();
    std::fs::write(&trace, text).unwrap();
    let bin = std::env::var_os("ZSMEM_BIN").unwrap_or(env!("CARGO_BIN_EXE_zsmem").into());
    for args in [
        &["replay", trace.to_str().unwrap(), "--sample-every", "1"][..],
        &["stats", "--objects", "20000"][..],
        &["classes"][..],
        &[
            "bench",
            "pool",
            "--sizes",
            "64",
            "--live",
            "1000",
            "--ops",
            "1000",
            "--repeats",
            "1",
        ][..],
    ] {
        let mut child = Command::new(&bin)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // the reader goes away at once
        let out = child.wait_with_output().unwrap();
        let err = stderr(&out);
        assert_ne!(out.status.code(), Some(101), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A trace line of megabytes used to be echoed whole to stderr, and its
/// control characters reached the terminal.
#[test]
fn trace_errors_do_not_echo_long_or_control_bytes() {
    let dir = test_dir("trace-echo");
    let trace = dir.join("t.trace");
    let mut text = String::from("alloc 1 ");
    text += &"9".repeat(10 << 20);
    text += "\n";
    std::fs::write(&trace, &text).unwrap();
    let out = zsmem(&["replay", trace.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.len() < 1000 && err.contains("t.trace:1:"),
        "{} bytes",
        err.len()
    );
    std::fs::write(&trace, "\x1b]0;owned\x07 1 2\n").unwrap();
    let out = zsmem(&["replay", trace.to_str().unwrap()]);
    let err = stderr(&out);
    assert!(!err.contains('\x1b') && !err.contains('\x07'), "{err:?}");
    assert!(err.contains("\\u{1b}]0;owned"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An unwritable `--report` used to fail after the whole run, without
/// naming the path.
#[test]
fn an_unwritable_report_fails_first_and_names_the_path() {
    let dir = test_dir("report-probe");
    let file = dir.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let report = file.join("report");
    let out = zsmem(&[
        "compare",
        "--scale",
        "0.01",
        "--contestants",
        "zsmem",
        "--report",
        report.to_str().unwrap(),
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(report.to_str().unwrap()), "{err}");
    assert!(!err.contains("done in"), "the run went ahead: {err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--pid` of a missing process used to blame ptrace permission; as root,
/// a refusal used to say root was needed.
#[test]
fn pid_errors_say_what_happened() {
    let out = zsmem(&["compare", "--no-report", "--pid", "4000000000"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no such process: 4000000000"), "{err}");
    assert!(!err.contains("ptrace"), "{err}");

    let root = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false);
    let refused = std::fs::read("/proc/1/maps").is_err();
    if !(root && refused) {
        eprintln!("skipping the pid-1 case: needs root and a pid 1 that refuses root");
        return;
    }
    let out = zsmem(&[
        "compare",
        "--no-report",
        "--contestants",
        "zsmem",
        "--pid",
        "1",
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("os error") && !err.contains("needs root"),
        "{err}"
    );
}

/// Sizes no pool can hold are refused when the trace is read, at their line.
#[test]
fn trace_sizes_are_checked_at_their_line() {
    let dir = test_dir("trace-sizes");
    let trace = dir.join("big.trace");
    std::fs::write(&trace, "alloc 1 100\nalloc 2 5000\n").unwrap();
    let out = zsmem(&["replay", trace.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("big.trace:2: size 5000"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `bench pool --sizes 64,64` measured 64 twice and printed each
/// measurement twice (4 rows of each contestant), the second set against
/// the first mimalloc row (mimalloc "0.96x" itself).
#[test]
fn a_size_given_twice_is_measured_once() {
    let out = zsmem(&[
        "bench",
        "pool",
        "--sizes",
        "64,64",
        "--ops",
        "200",
        "--live",
        "16",
        "--repeats",
        "1",
        "--format",
        "csv",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = text.lines().skip(1).collect();
    let mimalloc = rows.iter().filter(|l| l.contains("mimalloc")).count();
    assert_eq!(mimalloc, 1, "{text}");
}
