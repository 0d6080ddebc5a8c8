//! `zsmem bench pool`: absurd `--live` and `--ops` are refused at once, with
//! one line (`--live 99999999999` aborted reserving the ring; `--ops
//! 2^64-1` ran without end).

mod common;
use common::zsmem_within;

#[test]
fn absurd_live_is_a_one_line_error() {
    for threads in [&[][..], &["--threads", "1"][..]] {
        let mut args = vec![
            "bench",
            "pool",
            "--sizes",
            "64",
            "--live",
            "99999999999",
            "--ops",
            "1000",
            "--repeats",
            "1",
        ];
        args.extend(threads);
        let out = zsmem_within(&args, 20);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("--live 99999999999"), "{args:?}: {err}");
        assert!(!err.contains("memory allocation"), "{args:?}: {err}");
    }
}

#[test]
fn absurd_ops_is_refused() {
    for ops in ["18446744073709551615", "1099511627777", "0"] {
        let out = zsmem_within(&["bench", "pool", "--sizes", "64", "--ops", ops], 20);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--ops {ops}: {err}");
        assert!(err.contains("--ops"), "--ops {ops}: {err}");
    }
}
