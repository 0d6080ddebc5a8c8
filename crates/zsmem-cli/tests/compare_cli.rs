//! `zsmem compare` end to end on a small embedded corpus.

mod common;

use common::zsmem;

#[test]
fn compare_prints_every_step_and_a_summary() {
    // The report goes to a directory of the test's own, never the crate's.
    let dir = std::env::temp_dir().join(format!("zsmem-compare-test-{}", std::process::id()));
    let out = zsmem(&[
        "compare",
        "--scale",
        "0.02",
        "--contestants",
        "zsmem,zsmem-kernel",
        "--histograms",
        "--report",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("zsmem-kernel"));
    std::fs::remove_dir_all(&dir).unwrap();
    let t = String::from_utf8(out.stdout).unwrap();
    assert!(t.contains("@store_ns:") && t.contains("p99"), "{t}");
    for needle in [
        "== zsmem:",
        "== zsmem-kernel:",
        "r1:untar",
        "r1:-drivers",
        "r1:-rest",
        "peak used",
    ] {
        assert!(t.contains(needle), "missing {needle} in\n{t}");
    }
}

#[test]
fn compare_json_has_every_run() {
    let out = zsmem(&[
        "compare",
        "--scale",
        "0.02",
        "--contestants",
        "zsmem",
        "--rounds",
        "2",
        "--format",
        "json",
        "--no-report",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps = v["runs"][0]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2 * 7 + 1);
    assert!(v["runs"][0]["store_ns"]["p50"].as_u64().unwrap() > 0);
}

#[test]
fn compare_refuses_bad_arguments() {
    for (args, needle) in [
        (
            &["compare", "--contestants", "zsfold"][..],
            "unknown contestant",
        ),
        (&["compare", "--rounds", "0"][..], "--rounds"),
        (&["compare", "--codec", "lzo"][..], "unknown codec"),
        (
            &["compare", "--input", "/nonexistent/tree.tar"][..],
            "/nonexistent/tree.tar",
        ),
        (&["compare", "--format", "xml"][..], "unknown format"),
        (
            &["compare", "--scale", "0.02", "--remove", "nosuchdir"][..],
            "no top-level directory `nosuchdir`",
        ),
    ] {
        let out = zsmem(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
