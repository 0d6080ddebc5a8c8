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
