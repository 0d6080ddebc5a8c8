//! `zsmem replay`'s figures: a malloc baseline never holds less than it
//! stores, and zsmem's pages waiting to be returned are shown as such.

mod common;
use common::zsmem;

/// A trace of `n` objects of 100..3000 bytes allocated, then every other
/// one freed, then as many allocated again.
fn trace(n: u64) -> String {
    let mut t = String::new();
    for id in 0..n {
        t += &format!("alloc {id} {}\n", 100 + (id * 397) % 2900);
    }
    for id in (0..n).step_by(2) {
        t += &format!("free {id}\n");
    }
    for id in n..n + n / 2 {
        t += &format!("alloc {id} {}\n", 100 + (id * 211) % 2900);
    }
    t
}

#[test]
fn malloc_baselines_hold_at_least_what_they_store_after_other_contestants() {
    let dir = std::env::temp_dir().join(format!("zsmem-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.trace");
    std::fs::write(&path, trace(4000)).unwrap();
    // zsmem-classes first: measured in this process, glibc's heap growth
    // took in what it had freed and fell below the bytes stored.
    let out = zsmem(&[
        "replay",
        path.to_str().unwrap(),
        "--contestants",
        "zsmem-classes,zsmem,system,jemalloc,mimalloc",
        "--sample-every",
        "500",
        "--format",
        "json",
    ]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let field = |r: &serde_json::Value, k: &str| r[k].as_u64().unwrap();
    let mut baselines = 0;
    for r in &rows {
        let name = r["contestant"].as_str().unwrap();
        assert!(
            field(r, "returning_bytes") <= field(r, "pool_bytes"),
            "{name}: returning is part of pool: {r}"
        );
        if matches!(name, "system" | "jemalloc" | "mimalloc") {
            baselines += 1;
            assert!(
                field(r, "pool_bytes") >= field(r, "stored_bytes"),
                "{name} holds less than it stores: {r}"
            );
            assert!(r["overhead_ratio"].as_f64().is_none_or(|o| o >= 0.0), "{r}");
        }
    }
    assert_eq!(baselines, 3 * 16, "16 samples of each baseline");
}

/// An empty trace and a file that cannot be read are one-line errors that
/// name the file (an empty trace printed an empty table and exited 0; an
/// unreadable file was reported at "line 0").
#[test]
fn an_empty_or_missing_trace_is_an_error_naming_the_file() {
    let path = std::env::temp_dir().join(format!("zsmem-empty-{}.trace", std::process::id()));
    std::fs::write(&path, "# nothing but a comment\n").unwrap();
    let out = zsmem(&["replay", path.to_str().unwrap()]);
    std::fs::remove_file(&path).unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no operations") && err.contains("zsmem-empty-"),
        "{err}"
    );
    let out = zsmem(&["replay", "/nonexistent/t.trace"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/t.trace: cannot read"), "{err}");
    assert!(!err.contains(":0:"), "{err}");
}
