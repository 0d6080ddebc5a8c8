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
        "pool MiB",
        "pool + metadata MiB",
        "allocator share",
        "kernel-zram: skipped (--no-kernel)",
    ] {
        assert!(t.contains(needle), "missing {needle} in\n{t}");
    }
    // `pool`, as in `compare`; the caveats of contestants that did not run
    // are not printed.
    for gone in [
        "mem_used_total",
        "malloc baselines",
        "--fs",
        "floor under both stores",
    ] {
        assert!(!t.contains(gone), "`{gone}` in\n{t}");
    }
    assert!(t.contains("the floor under zsmem's store"), "{t}");
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
    // The pool is `pool_bytes`, as in compare's and replay's JSON.
    assert!(v["zsmem"]["pool_bytes"].as_u64().unwrap() > 0, "{v}");
    assert!(v["zsmem"].get("mem_used_total").is_none(), "{v}");
}

#[test]
fn bench_store_csv_names_the_pool_and_metadata_alone() {
    let args = [
        "bench",
        "store",
        "--scale",
        "0.01",
        "--pages",
        "300",
        "--no-kernel",
        "--format",
    ];
    let mut csv = args.to_vec();
    csv.push("csv");
    let out = zsmem(&csv);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert!(
        head.contains(&"pool_bytes") && !head.contains(&"used_bytes"),
        "{text}"
    );
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| -> u64 {
        row[head.iter().position(|h| *h == name).unwrap()]
            .parse()
            .unwrap()
    };
    // metadata_bytes is the metadata alone, below the pool.
    assert!(col("metadata_bytes") < col("pool_bytes"), "{text}");
}

#[test]
fn bench_store_page_size_help_names_every_size_it_takes() {
    let out = zsmem(&["bench", "store", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    for size in ["4K", "8K", "16K", "32K", "64K"] {
        assert!(flat.contains(size), "{size} not in\n{help}");
    }
    // And each is taken.
    for size in ["8K", "32K"] {
        let out = zsmem(&[
            "bench",
            "store",
            "--scale",
            "0.01",
            "--pages",
            "20",
            "--no-kernel",
            "--page-size",
            size,
            "--format",
            "json",
        ]);
        assert!(
            out.status.success(),
            "{size}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
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

#[test]
fn bench_store_churn_rows_in_the_table_and_the_json() {
    let args = [
        "bench",
        "store",
        "--scale",
        "0.01",
        "--pages",
        "200",
        "--no-kernel",
        "--threads",
        "1,2",
        "--repeats",
        "1",
        "--churn",
        "2",
    ];
    let out = zsmem(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = String::from_utf8(out.stdout).unwrap();
    assert!(
        t.contains("churn phase: 400 calls"),
        "no churn header in\n{t}"
    );
    for who in ["zsmem ", "zsmem-classes", "codec-alone"] {
        let rows = t
            .lines()
            .skip_while(|l| !l.starts_with("churn phase"))
            .filter(|l| l.starts_with(who))
            .count();
        assert_eq!(rows, 2, "{who}: one churn row per thread count in\n{t}");
    }
    let mut json = args.to_vec();
    json.extend(["--format", "json"]);
    let out = zsmem(&json);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["churn_calls"], 400);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 6, "three contestants at two thread counts");
    for r in rows {
        assert!(r["churn_mb_s"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["churn_x_codec"].as_f64().unwrap() > 0.0, "{r}");
    }
    let codec = rows
        .iter()
        .find(|r| r["contestant"] == "codec-alone")
        .unwrap();
    assert_eq!(codec["churn_x_codec"].as_f64(), Some(1.0));
}

#[test]
fn bench_store_churn_alone_runs_one_thread_and_without_it_prints_no_churn() {
    let base = [
        "bench",
        "store",
        "--scale",
        "0.01",
        "--pages",
        "100",
        "--no-kernel",
        "--repeats",
        "1",
        "--format",
        "json",
    ];
    // `--churn` with no number: one call per page, at one thread.
    let mut args = base.to_vec();
    args.push("--churn");
    let out = zsmem(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["churn_calls"], 100);
    assert!(
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["threads"] == 1)
    );
    // `--threads` without `--churn`: the rows as before.
    let mut args = base.to_vec();
    args.extend(["--threads", "1"]);
    let out = zsmem(&args);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.get("churn_calls").is_none());
    for r in v["rows"].as_array().unwrap() {
        assert!(r.get("churn_mb_s").is_none(), "{r}");
    }
}

#[test]
fn bench_store_refuses_bad_churn_values() {
    for bad in ["0", "-1", "nan", "inf", "65", "lots"] {
        let arg = format!("--churn={bad}");
        let out = zsmem(&["bench", "store", "--no-kernel", &arg]);
        assert!(!out.status.success(), "--churn {bad} accepted");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains("--churn"), "--churn {bad}: {e}");
    }
}
