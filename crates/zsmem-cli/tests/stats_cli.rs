//! `zsmem stats`: an absurd `--objects` is a one-line error (it aborted
//! reserving the handles), and shares of nothing stored are `-` (`null` in
//! JSON), not a division by one byte (4580000.00%).

mod common;

use common::zsmem;

#[test]
fn absurd_objects_is_a_one_line_error() {
    let out = zsmem(&["stats", "--objects", "99999999999"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("zsmem: error: --objects 99999999999"),
        "{err}"
    );
    assert!(!err.contains("memory allocation"), "{err}");
}

#[test]
fn nothing_stored_prints_no_percentages() {
    for args in [
        &["stats", "--objects", "0"][..],
        &["stats", "--objects", "2000", "--free-percent", "100"][..],
    ] {
        let out = zsmem(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let t = String::from_utf8(out.stdout).unwrap();
        let line = t
            .lines()
            .find(|l| l.starts_with("overhead "))
            .unwrap_or_else(|| panic!("{args:?}: no overhead line in\n{t}"));
        assert!(!line.contains('%'), "{args:?}: {line}");
        assert!(
            line.starts_with("overhead - of stored = rounding - ")
                && line.ends_with("with metadata -"),
            "{args:?}: {line}"
        );
        let mut json = args.to_vec();
        json.extend(["--format", "json"]);
        let out = zsmem(&json);
        assert!(out.status.success());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(v["overhead_ratio"].is_null(), "{args:?}: {v}");
    }
    // With objects stored, the shares are numbers.
    let out = zsmem(&["stats", "--objects", "2000", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["overhead_ratio"].as_f64().unwrap() >= 0.0, "{v}");
    let out = zsmem(&["stats", "--objects", "2000"]);
    let t = String::from_utf8(out.stdout).unwrap();
    assert!(t.contains("with metadata ") && t.contains('%'), "{t}");
}
