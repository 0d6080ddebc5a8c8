//! `zsmem bench free` end to end on a small run: the reference's table, the
//! scaling table and the latency lines, JSON, and argument errors.

mod common;

use common::zsmem;

#[test]
fn bench_free_prints_the_three_modes() {
    let out = zsmem(&[
        "bench",
        "free",
        "--mib",
        "2",
        "--repeats",
        "1",
        "--threads",
        "1,2",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "bench free: each thread stores 2 MiB",
        "Base",
        "ClassIdx-only",
        "Deferred",
        "single",
        "multi 2p",
        "1 thread",
        "flushed ms",
        "per-free latency",
        "p99.9",
    ] {
        assert!(t.contains(needle), "missing {needle} in\n{t}");
    }
}

/// The first table's ratio columns showed Base's time over the mode's
/// under headers reading "ClassIdx/Base", and left out Log, which the
/// second table and the JSON have; `--help` named three modes of four.
#[test]
fn the_first_table_has_every_mode_and_says_speed_up() {
    let out = zsmem(&[
        "bench",
        "free",
        "--mib",
        "1",
        "--repeats",
        "1",
        "--threads",
        "1",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = String::from_utf8(out.stdout).unwrap();
    let first: String = t
        .lines()
        .skip_while(|l| !l.starts_with("time until the last thread's frees return"))
        .take_while(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(first.contains("Log"), "no Log in the first table:\n{first}");
    assert!(first.contains("speed-up"), "{first}");
    assert!(!first.contains("/Base"), "{first}");
    let help = zsmem(&["bench", "free", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    for mode in ["Base", "ClassIdx-only", "Deferred", "Log"] {
        assert!(help.contains(mode), "{mode} not in --help:\n{help}");
    }
}

#[test]
fn bench_free_json_has_every_cell() {
    let out = zsmem(&[
        "bench",
        "free",
        "--mib",
        "1",
        "--repeats",
        "1",
        "--threads",
        "1",
        "--format",
        "json",
    ]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let figures = v["figures"].as_array().unwrap();
    assert_eq!(figures.len(), 4, "one cell per mode");
    assert_eq!(figures[3]["mode"], "Log");
    for f in figures {
        assert!(f["objects_per_thread"].as_u64().unwrap() > 0);
        assert!(f["free_ms"].as_f64().unwrap() >= 0.0);
    }
    assert!(figures[2]["until_flushed_ms"].is_number());
    assert_eq!(v["latency"].as_array().unwrap().len(), 4);
}

#[test]
fn bench_free_refuses_bad_arguments() {
    for (args, msg) in [
        (&["bench", "free", "--mib", "0"][..], "--mib"),
        (&["bench", "free", "--threads", "0"][..], "--threads"),
        (&["bench", "free", "--repeats", "0"][..], "--repeats"),
        (
            &["bench", "free", "--format", "xml"][..],
            "invalid value 'xml'",
        ),
    ] {
        let out = zsmem(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains(msg), "{args:?}: {e}");
    }
}

/// `--mib` that no machine here can hold is refused before anything is
/// stored (1 TiB a thread grew towards the OOM killer: review s29).
#[test]
fn mib_beyond_the_memory_is_refused_at_once() {
    let out = common::zsmem(&["bench", "free", "--mib", "1048576", "--threads", "1"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--mib 1048576") && err.contains("half the memory"),
        "{err}"
    );
}
