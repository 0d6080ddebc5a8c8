//! Crafted input, misuse and faults (issue 16): each case once killed the
//! process, hung, lied or echoed an attacker's bytes; now each is a clear
//! error or a quiet exit.

mod common;

use common::{crafted_tar, test_dir, zsmem};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

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
