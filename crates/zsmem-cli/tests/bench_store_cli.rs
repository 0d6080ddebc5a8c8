//! `zsmem bench store` end to end on a tiny input, without the kernel (the
//! kernel's part needs root and zram, and is skipped with a reason without
//! them).

mod common;

use common::zsmem;

#[test]
fn bench_store_prints_the_table() {
    let out = zsmem(&[
        "bench",
        "store",
        "--scale",
        "0.01",
        "--pages",
        "300",
        "--no-kernel",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "bench store: 300 pages",
        "store MB/s",
        "store p99.9 µs",
        "load p50 µs",
        "mem_used_total MiB",
        "allocator share",
        "kernel-zram: skipped (--no-kernel)",
    ] {
        assert!(t.contains(needle), "missing {needle} in\n{t}");
    }
    // No internal goals, and µs everywhere.
    let words: Vec<&str> = t.split_whitespace().collect();
    for gone in ["target", "us"] {
        assert!(!words.contains(&gone), "`{gone}` in\n{t}");
    }
}

#[test]
fn bench_store_json_on_a_file() {
    let dir = std::env::temp_dir().join(format!("zsmem-bench-store-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("input.txt");
    let text: String = (0..2000)
        .map(|i| format!("line {i}: static int x{i};\n"))
        .collect();
    std::fs::write(&file, text).unwrap();
    let out = zsmem(&[
        "bench",
        "store",
        "--input",
        file.to_str().unwrap(),
        "--codec",
        "zstd",
        "--no-kernel",
        "--format",
        "json",
    ]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["codec"], "zstd:3");
    assert!(v["zsmem"]["pages"].as_u64().unwrap() >= 10);
    assert!(v["zsmem"]["store"]["p50_us"].as_f64().unwrap() > 0.0);
    assert!(v["kernel"].is_null());
    assert!(v["allocator_share"].as_f64().unwrap() >= 0.0);
}

#[test]
fn bench_store_refuses_bad_arguments() {
    for (args, msg) in [
        (&["bench", "store", "--codec", "lzo1x"][..], "unknown codec"),
        (&["bench", "store", "--pages", "0"][..], "--pages"),
        (&["bench", "store", "--pool", "x"][..], "invalid value 'x'"),
        (
            &["bench", "store", "--format", "xml"][..],
            "invalid value 'xml'",
        ),
    ] {
        let out = zsmem(args);
        assert!(!out.status.success());
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains(msg), "{args:?}: {e}");
    }
}
