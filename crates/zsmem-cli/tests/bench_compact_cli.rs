//! `zsmem bench compact` end to end on a small corpus: six rows (the
//! kernel's zspages and zsmem's, compacted on request and automatically),
//! each returning memory, with its cost; and argument errors.

mod common;

use common::zsmem;

#[test]
fn bench_compact_prints_cost_per_mode() {
    let out = zsmem(&["bench", "compact", "--scale", "0.02"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = String::from_utf8(out.stdout).unwrap();
    let labels = [
        "zsmem-kernel: off, then compact()",
        "zsmem-kernel: auto",
        "zsmem-kernel: auto, then compact()",
        "zsmem: off, then compact()",
        "zsmem: auto (default)",
        "zsmem: auto, then compact()",
    ];
    for label in labels {
        assert!(
            t.lines().any(|l| l.starts_with(label)),
            "no row {label:?} in\n{t}"
        );
    }
    // zsmem's pool in the kernel's configuration is not labelled as the
    // kernel itself.
    assert!(!t.lines().any(|l| l.starts_with("kernel:")), "{t}");
    assert!(t.contains("not the running kernel"), "{t}");
    assert!(t.contains("copied per freed: object bytes copied per byte of memory returned"));
    // The figures, from the json.
    let out = zsmem(&["bench", "compact", "--scale", "0.02", "--format", "json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), labels.len());
    for (r, label) in rows.iter().zip(labels) {
        assert_eq!(r["mode"], label);
        let (held, after) = (
            r["pool_bytes"].as_u64().unwrap(),
            r["pool_after_bytes"].as_u64().unwrap(),
        );
        let per_byte = r["copied_per_freed"].as_f64().unwrap();
        assert!(
            after < held && r["pages_compacted"].as_u64().unwrap() > 0,
            "{r}"
        );
        assert!(per_byte.is_finite() && per_byte > 0.0, "{r}");
    }
    // And as csv: a header and one line per mode.
    let out = zsmem(&["bench", "compact", "--scale", "0.02", "--format", "csv"]);
    let csv = String::from_utf8(out.stdout).unwrap();
    assert!(
        csv.starts_with("mode,pool_bytes,pool_after_bytes,"),
        "{csv}"
    );
    assert_eq!(csv.lines().count(), 1 + labels.len(), "{csv}");
}

#[test]
fn bench_compact_refuses_bad_arguments() {
    for args in [
        &["bench", "compact", "--discard-percent", "101"][..],
        &["bench", "compact", "--scale", "0"][..],
    ] {
        let out = zsmem(args);
        assert!(!out.status.success(), "{args:?}");
        assert!(!out.stderr.is_empty(), "{args:?}");
    }
}
