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
        "--explain",
        "--report",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(dir.join("latest/index.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("zsmem-kernel"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("report: ") && err.contains("001"), "{err}");
    assert!(err.contains("untar/rm, 1 round,"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
    let t = String::from_utf8(out.stdout).unwrap();
    assert!(t.contains("@store_ns:") && t.contains("p99"), "{t}");
    for needle in [
        "== zsmem:",
        "== zsmem-kernel:",
        "r1:untar",
        "r1:-drivers",
        "r1:-rest",
        "pool",
        "all-in",
        "MiB",
        "store p50",
        "overhead",
        "(total)",
        // --explain: each term of the contestants that ran, in full.
        "- pool pages: pages the allocator holds",
        "Verdict:",
        "Against zsmem-kernel",
    ] {
        assert!(t.contains(needle), "missing {needle} in\n{t}");
    }
    // The headings say what their columns hold.
    let words: Vec<&str> = t.split_whitespace().collect();
    for gone in ["used", "ratio", "us"] {
        assert!(!words.contains(&gone), "`{gone}` in\n{t}");
    }
    // The kernel's estimated terms are not explained where it did not run.
    assert!(!t.contains("zram table (est.)"), "{t}");
}

/// Without --explain the terms are named once, in short.
#[test]
fn the_terms_are_short_without_explain_and_the_verdict_is_printed() {
    let out = zsmem(&[
        "compare",
        "--scale",
        "0.01",
        "--contestants",
        "zsmem,zsmem-classes",
        "--no-report",
    ]);
    assert!(out.status.success());
    let t = String::from_utf8(out.stdout).unwrap();
    assert!(t.contains("--explain"), "{t}");
    assert!(!t.contains("- pool pages:"), "{t}");
    let summary = t.find("max all-in").expect("the summary");
    let verdict = t.find("Verdict:").expect("the verdict");
    assert!(summary < verdict, "{t}");
    assert!(t.contains("Against zsmem-classes"), "{t}");
}

/// A second run in the same --report directory writes a new report, and
/// `latest` points at it.
#[test]
fn a_report_is_never_overwritten() {
    let dir = std::env::temp_dir().join(format!("zsmem-report-twice-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for _ in 0..2 {
        let out = zsmem(&[
            "compare",
            "--scale",
            "0.01",
            "--contestants",
            "zsmem",
            "--format",
            "csv",
            "--report",
            dir.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let one = std::fs::read_to_string(dir.join("001/index.html")).unwrap();
    let two = std::fs::read_to_string(dir.join("002/index.html")).unwrap();
    assert!(one.contains("<svg") && two.contains("<svg"));
    let latest = std::fs::read_link(dir.join("latest")).unwrap();
    assert_eq!(latest, std::path::Path::new("002"));
    std::fs::remove_dir_all(&dir).unwrap();
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
fn compare_json_counts_all_in_for_every_kind_of_contestant() {
    let out = zsmem(&[
        "compare",
        "--scale",
        "0.01",
        "--contestants",
        "zsmem,zsmem-kernel-compact,kernel-zram-compact,system,zblock",
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
    // The verdict, structured: zsmem against the kernel's zram or, without
    // it, the first other contestant.
    let verdict = &v["verdict"];
    assert_eq!(verdict["zsmem_ran"], true, "{verdict}");
    assert!(
        ["less", "same", "more"]
            .contains(&verdict["references"][0]["peak"]["call"].as_str().unwrap()),
        "{verdict}"
    );
    assert!(verdict["text"].as_array().is_some_and(|t| !t.is_empty()));
    let explained: Vec<&str> = v["all_in_terms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(explained.contains(&"zram table (est.)"), "{explained:?}");
    let runs = v["runs"].as_array().unwrap();
    // kernel-zram-compact runs only with root and zram.
    assert!(runs.len() >= 4, "{runs:?}");
    for r in runs {
        let steps = r["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 2 * 7 + 1, "{}", r["contestant"]);
        for s in steps {
            let f = &s["figures"];
            let (compr, pool, all_in) = (
                f["compr"].as_u64().unwrap(),
                f["pool"].as_u64().unwrap(),
                f["all_in"].as_u64().unwrap(),
            );
            let terms: u64 = f["all_in_terms"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| {
                    assert!(explained.contains(&t["name"].as_str().unwrap()));
                    t["bytes"].as_u64().unwrap()
                })
                .sum();
            assert_eq!(terms, all_in, "{}", r["contestant"]);
            assert!(all_in >= pool && pool >= compr, "{}: {f}", r["contestant"]);
        }
    }
}

#[test]
fn compare_csv_pool_is_the_pool_of_the_json() {
    let run = |format: &str| {
        let out = zsmem(&[
            "compare",
            "--scale",
            "0.01",
            "--contestants",
            "zsmem-kernel",
            "--format",
            format,
            "--no-report",
        ]);
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let csv = run("csv");
    let v: serde_json::Value = serde_json::from_str(&run("json")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let steps = v["runs"][0]["steps"].as_array().unwrap();
    for (line, s) in lines.zip(steps) {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells[col("pool")], s["figures"]["pool"].to_string());
        assert_eq!(s["pool"], s["figures"]["pool"]);
        assert!(s.get("used").is_none());
        assert_eq!(cells[col("all_in")], s["figures"]["all_in"].to_string());
    }
}

#[test]
fn compare_help_names_the_compacted_contestants() {
    let out = zsmem(&["compare", "--help"]);
    let help = String::from_utf8(out.stdout).unwrap();
    for name in ["zsmem-kernel-compact", "kernel-zram-compact"] {
        assert!(help.contains(name), "{name} missing from\n{help}");
    }
}

#[test]
fn compare_refuses_bad_arguments() {
    for (args, needle) in [
        (
            &["compare", "--contestants", "zsfold"][..],
            "invalid value 'zsfold' for '--contestants",
        ),
        (&["compare", "--rounds", "0"][..], "--rounds"),
        (&["compare", "--codec", "lzo1x"][..], "unknown codec"),
        (
            &["compare", "--input", "/nonexistent/tree.tar"][..],
            "/nonexistent/tree.tar",
        ),
        (&["compare", "--format", "xml"][..], "invalid value 'xml'"),
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
    // Values clap checks are usage errors, exit 2, listing what is accepted.
    for (args, accepted) in [
        (
            &["compare", "--contestants", "zsfold"][..],
            "kernel-zram-compact",
        ),
        (&["compare", "--format", "xml"][..], "table, csv, json"),
        (&["compare", "--codec", "lzo1x"][..], "lz4"),
    ] {
        let out = zsmem(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(accepted), "{args:?}: {err}");
    }
}

#[test]
fn help_lists_compare_and_the_baselines() {
    let top = String::from_utf8(zsmem(&["--help"]).stdout).unwrap();
    assert!(top.contains("compare"), "{top}");
    assert!(
        top.contains("With no subcommand it runs `compare`"),
        "{top}"
    );
    let help = String::from_utf8(zsmem(&["compare", "--help"]).stdout).unwrap();
    for name in [
        "system", "jemalloc", "mimalloc", "zbud", "table", "csv", "json",
    ] {
        assert!(help.contains(name), "{name} missing from\n{help}");
    }
}

#[test]
fn compare_at_16k_runs_the_rfcs_variants_and_says_what_it_skips() {
    let out = zsmem(&[
        "compare",
        "--scale",
        "0.01",
        "--page-size",
        "16K",
        "--contestants",
        "zsmem-kernel,zsmem-kernel-d16,zsmem-kernel-rfc,zsmem,kernel-zram,zbud,afmalloc",
        "--no-report",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("pages of 16 KiB"), "{err}");
    // One line per skipped contestant, with its reason.
    let zbud = err
        .lines()
        .find(|l| l.starts_with("skipping zbud: "))
        .unwrap_or_else(|| panic!("no zbud skip in\n{err}"));
    assert!(zbud.contains("page-buddied"), "{zbud}");
    assert!(
        err.lines().any(|l| l.starts_with("skipping kernel-zram: ")),
        "{err}"
    );
    let t = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "== zsmem-kernel: 16 KiB pages, chain 8, delta 64",
        "== zsmem-kernel-d16: 16 KiB pages, chain 8, delta 16",
        "== zsmem-kernel-rfc: 16 KiB pages, chain 8, delta 16, span-aware",
        "== zsmem: 16 KiB pages",
        "== afmalloc: afmalloc: zram's 16 KiB pages",
        "== what the RFC saves at 16 KiB pages",
        "pool saved against zsmem-kernel",
        "rounding / free slots in held zspages",
        "syscall plus O_DIRECT",
        "skipped: zbud is page-buddied",
    ] {
        assert!(t.contains(needle), "missing {needle} in\n{t}");
    }
    let rfc = &t[t.find("== what the RFC saves").unwrap()..];
    let header = rfc.lines().find(|l| l.starts_with("step")).unwrap();
    for v in [
        "zsmem-kernel",
        "zsmem-kernel-d16",
        "zsmem-kernel-rfc",
        "zsmem",
    ] {
        assert!(header.contains(v), "{header}");
    }
    assert!(
        rfc.contains("r1:untar") && rfc.contains("store p50/p99"),
        "{rfc}"
    );
}

#[test]
fn bad_page_sizes_are_refused_with_the_sizes_allowed() {
    for bad in ["3K", "128K", "big"] {
        for cmd in [&["compare", "--no-report"][..], &["bench", "store"][..]] {
            let mut args = cmd.to_vec();
            args.extend(["--page-size", bad]);
            let out = zsmem(&args);
            assert!(!out.status.success(), "{bad}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("4K, 16K or 64K"), "{bad}: {err}");
        }
    }
}

#[test]
fn bench_store_takes_a_page_size() {
    let out = zsmem(&[
        "bench",
        "store",
        "--scale",
        "0.01",
        "--page-size",
        "64K",
        "--pool",
        "kernel-rfc",
        "--format",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["page_size"], 65536);
    assert!(
        v["zsmem"]["config"]
            .as_str()
            .unwrap()
            .starts_with("64 KiB pages, chain 8, delta 16, span-aware")
    );
    assert!(v["kernel_skipped"].is_string() || v["kernel"].is_object());
}

#[test]
fn compare_churn_reports_every_reading_and_the_cpu_a_call() {
    for variant in ["uniform", "hot-cold", "phase"] {
        let out = zsmem(&[
            "compare",
            "--workload",
            "churn",
            "--variant",
            variant,
            "--scale",
            "0.02",
            "--ops",
            "3000",
            "--readings",
            "3",
            "--contestants",
            "zsmem,zsmem-classes",
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
        assert_eq!(v["workload"], "churn");
        let runs = v["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2);
        for r in runs {
            let labels: Vec<&str> = r["steps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["label"].as_str().unwrap())
                .collect();
            assert_eq!(labels.first(), Some(&"fill"), "{labels:?}");
            assert_eq!(labels.last(), Some(&"op 3000"), "{labels:?}");
            assert_eq!(labels.contains(&"-half"), variant == "phase", "{labels:?}");
            assert!(r["calls"].as_u64().unwrap() >= 3000);
            assert!(r["cpu_ns_per_call"].as_f64().unwrap() > 0.0);
            assert_eq!(r["waiting_after_burst"].is_u64(), variant == "phase", "{r}");
            // Every reading holds data, and the pool at least its bytes.
            for s in r["steps"].as_array().unwrap() {
                let f = &s["figures"];
                assert!(f["compr"].as_u64().unwrap() > 0);
                assert!(f["all_in"].as_u64().unwrap() >= f["compr"].as_u64().unwrap());
            }
        }
    }
}

#[test]
fn compare_churn_refuses_what_it_cannot_do() {
    for args in [
        &["--workload", "churn", "--rounds", "2"][..],
        &["--workload", "churn", "--remove", "a"],
        &["--workload", "churn", "--discard-share", "1.5"],
        &["--workload", "churn", "--variant", "sideways"],
        &["--workload", "churn", "--slots", "0"],
    ] {
        let mut all = vec!["compare", "--scale", "0.02", "--no-report"];
        all.extend_from_slice(args);
        let out = zsmem(&all);
        assert!(!out.status.success(), "{args:?} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// A workload ran with the options it does not take silently left out
/// (`--workload swap --rounds 3 --contestants zsmem` ran the default swap
/// contestants once each); each is named now, and nothing runs.
#[test]
fn options_a_workload_would_ignore_are_refused() {
    for (args, named) in [
        (&["--workload", "swap", "--rounds", "3"][..], "--rounds"),
        (
            &["--workload", "swap", "--contestants", "zsmem"],
            "--swap-contestants",
        ),
        (
            &["--workload", "swap", "--input", "/nonexistent"],
            "--input",
        ),
        (&["--swap-mib", "100"], "swap options"),
        (&["--slots", "5"], "--slots"),
        (
            &["--workload", "untar-rm", "--variant", "phase"],
            "--variant",
        ),
        // The input brings its own pages: --scale and --seed did nothing
        // (checked before the input is read, so it need not exist).
        (&["--input", "/nonexistent", "--scale", "0.5"], "--scale"),
        (&["--input", "/nonexistent", "--seed", "7"], "--seed"),
        (&["--pid", "1", "--scale", "0.5"], "--scale"),
        (&["--scale", "0.01", "--max-mib", "5"], "--max-mib"),
        (&["--scale", "0.01", "--report", "elsewhere"], "--report"),
    ] {
        let mut all = vec!["compare", "--no-report"];
        all.extend_from_slice(args);
        let out = zsmem(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains(named) && err.contains("ignored"),
            "{args:?}: {err}"
        );
    }
}

/// The swap workload writes no report, so `--report` is refused with it;
/// and a swap contestant named twice is refused (both ran before).
#[test]
fn swap_refuses_a_report_and_a_contestant_named_twice() {
    for (args, named) in [
        (&["--report", "elsewhere"][..], "writes no report"),
        (&["--swap-contestants", "zsmem,zsmem"][..], "twice"),
    ] {
        let mut all = vec!["compare", "--workload", "swap"];
        all.extend_from_slice(args);
        let out = zsmem(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(named), "{args:?}: {err}");
    }
}

#[test]
fn a_churn_trace_replays() {
    let trace = std::env::temp_dir().join(format!("zsmem-churn-trace-{}", std::process::id()));
    let out = zsmem(&[
        "compare",
        "--workload",
        "churn",
        "--scale",
        "0.02",
        "--ops",
        "2000",
        "--contestants",
        "zsmem",
        "--no-report",
        "--record-trace",
        trace.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(
        text.lines().any(|l| l.starts_with("free ")),
        "no frees recorded"
    );
    let out = zsmem(&["replay", trace.to_str().unwrap(), "--format", "json"]);
    std::fs::remove_file(&trace).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_churn_report_shows_the_cpu_a_call() {
    let dir = std::env::temp_dir().join(format!("zsmem-churn-report-{}", std::process::id()));
    let out = zsmem(&[
        "compare",
        "--workload",
        "churn",
        "--scale",
        "0.02",
        "--ops",
        "2000",
        "--contestants",
        "zsmem,zsmem-classes",
        "--report",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(dir.join("latest/index.html")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(html.contains("churn (uniform)"), "no workload named");
    assert!(html.contains("<h3>CPU a call</h3>"), "no CPU table");
    let t = String::from_utf8(out.stdout).unwrap();
    assert!(t.contains("CPU a") && t.contains("op 2000"), "{t}");
}

/// `replay` says what zsmem and zsmem-classes are, calls the pool `pool`,
/// and prints `-` (JSON: null) for the overhead where nothing is stored.
#[test]
fn replay_names_the_placements_and_has_no_overhead_of_nothing() {
    let trace = std::env::temp_dir().join(format!("zsmem-empty-trace-{}", std::process::id()));
    std::fs::write(&trace, "alloc 1 1000\nalloc 2 300\nfree 1\nfree 2\n").unwrap();
    let path = trace.to_str().unwrap();
    let out = zsmem(&["replay", path, "--contestants", "zsmem,zsmem-classes"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = String::from_utf8(out.stdout).unwrap();
    assert!(t.contains("zsmem: log placement"), "{t}");
    assert!(t.contains("zsmem-classes: size classes"), "{t}");
    assert!(t.contains("pool") && !t.contains("held"), "{t}");
    let rows: Vec<&str> = t.lines().filter(|l| l.starts_with("zsmem")).collect();
    // Overhead `-` (the returning column, where shown, comes after it).
    assert!(
        rows.iter()
            .any(|l| l.split_whitespace().any(|cell| cell == "-")),
        "{t}"
    );
    assert!(!t.contains("0.00%"), "{t}");
    let out = zsmem(&["replay", path, "--contestants", "zsmem", "--format", "json"]);
    std::fs::remove_file(&trace).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v[0]["overhead_ratio"].is_null(), "{v}");
    assert!(v[0]["pool_bytes"].is_u64(), "{v}");
}

/// The churn's calls are seeded by --seed: with --input it is not ignored.
#[test]
fn the_churn_takes_a_seed_with_an_input() {
    let dir = common::test_dir("churn-seed");
    std::fs::write(dir.join("a.txt"), "some text to store, ".repeat(2000)).unwrap();
    let out = zsmem(&[
        "compare",
        "--workload",
        "churn",
        "--input",
        dir.to_str().unwrap(),
        "--seed",
        "7",
        "--ops",
        "100",
        "--contestants",
        "zsmem",
        "--no-report",
    ]);
    std::fs::remove_dir_all(&dir).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
}

/// `--contestants zsmem,zsmem` ran zsmem twice, and the verdict said it
/// ran alone.
#[test]
fn a_contestant_named_twice_is_refused() {
    let out = zsmem(&[
        "compare",
        "--scale",
        "0.01",
        "--contestants",
        "zsmem,system,zsmem",
        "--no-report",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("names zsmem twice"), "{err}");
    assert!(out.stdout.is_empty());
}

/// A full stdout is the command's error, one line, not a panic.
#[test]
fn a_full_stdout_is_an_error_not_a_panic() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        return;
    };
    let bin = std::env::var_os("ZSMEM_BIN").unwrap_or(env!("CARGO_BIN_EXE_zsmem").into());
    for workload in ["untar-rm", "churn"] {
        let out = std::process::Command::new(&bin)
            .args([
                "compare",
                "--workload",
                workload,
                "--scale",
                "0.01",
                "--contestants",
                "zsmem",
                "--no-report",
            ])
            .stdout(full.try_clone().unwrap())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{workload}: {err}");
        assert!(!err.contains("panicked"), "{workload}: {err}");
        let last = err.lines().last().unwrap_or_default();
        assert!(last.starts_with("zsmem: error: I/O: "), "{workload}: {err}");
    }
}

/// The CSV's ratios are empty where nothing is stored, as the table's `-`
/// (they were 0.000000: "glibc holds 1.13 MiB for nothing, overhead 0").
#[test]
fn compare_csv_has_no_ratio_of_nothing() {
    let out = zsmem(&[
        "compare",
        "--scale",
        "0.01",
        "--contestants",
        "zsmem",
        "--format",
        "csv",
        "--no-report",
    ]);
    assert!(out.status.success());
    let csv = String::from_utf8(out.stdout).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let mut empty = 0;
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        let nothing = cells[col("compr")] == "0";
        for ratio in ["overhead_ratio", "all_in_ratio"] {
            assert_eq!(cells[col(ratio)].is_empty(), nothing, "{line}");
        }
        empty += usize::from(nothing);
    }
    assert!(empty > 0, "no step without data in\n{csv}");
}

/// Without the kernel's zram (no root), the verdict's reference is its
/// allocator simulated in userspace, whatever the order of the
/// contestants, in the text and the JSON alike.
#[test]
fn without_the_kernel_the_simulated_kernel_is_the_reference() {
    let out = zsmem(&[
        "compare",
        "--scale",
        "0.01",
        "--contestants",
        "system,zsmem-kernel,zsmem,zsmem-kernel-compact",
        "--format",
        "json",
        "--no-report",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let verdict = &v["verdict"];
    assert_eq!(verdict["reference"], "simulated_kernel", "{verdict}");
    assert_eq!(
        verdict["references"][0]["other"], "zsmem-kernel-compact",
        "{verdict}"
    );
    let first = verdict["text"][0].as_str().unwrap();
    assert!(
        first.starts_with(
            "Against zsmem-kernel-compact, the kernel's allocator simulated in userspace \
             (zsmem's kernel() configuration; kernel-zram needs root): "
        ),
        "{first}"
    );
}

/// The legend says what the overhead's parts add up to, the breakdown has
/// a heading, the columns are defined, the verdict's note names the
/// estimated terms, and the kernel's latency caveat is left out where
/// neither it nor --fs ran.
#[test]
fn the_legend_defines_the_columns_and_the_overhead_parts() {
    let out = zsmem(&[
        "compare",
        "--scale",
        "0.01",
        "--contestants",
        "zsmem,system",
        "--no-report",
    ]);
    assert!(out.status.success());
    let t = String::from_utf8(out.stdout).unwrap();
    let flat = t.split_whitespace().collect::<Vec<_>>().join(" ");
    for needle in [
        "-- zsmem: where the overhead goes, in % of compr",
        "overhead = (pool - compr)/compr = rounding + partial + tail",
        "meta = the allocator's metadata, beyond pool; overhead with meta = their sum",
        "orig = the pages stored, before compression; compr = their compressed bytes",
        "huge = pages stored uncompressed, at or above the contestant's own threshold",
        "for zsmem, its peers and the malloc baselines the page tables",
        "for the kernel's zram its table, a zs_handle per object and a struct zspage",
        "Latencies are each an in-process call",
    ] {
        assert!(flat.contains(needle), "missing {needle} in\n{t}");
    }
    for gone in ["split for zsmem into", "O_DIRECT", "--fs ext4"] {
        assert!(!flat.contains(gone), "{gone} in\n{t}");
    }
}

/// The churn's CPU table: its calls are the header's calls plus the
/// checking loads, and it says so; no column or caveat for the kernel's
/// zram when it did not run.
#[test]
fn the_churn_cpu_table_says_what_it_counts() {
    let out = zsmem(&[
        "compare",
        "--workload",
        "churn",
        "--scale",
        "0.01",
        "--ops",
        "1000",
        "--contestants",
        "zsmem,zsmem-classes",
        "--no-report",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("then 1000 calls") && err.contains("every 64th also loading a slot back"),
        "{err}"
    );
    let t = String::from_utf8(out.stdout).unwrap();
    let flat = t.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("calls made: the 1000 calls after the fill, the loads that check a slot"),
        "{t}"
    );
    for gone in ["kernel zram", "BLKDISCARD", "O_DIRECT"] {
        assert!(!flat.contains(gone), "{gone} in\n{t}");
    }
    // Each run's calls made: the 1000 and at most one load per 64 calls.
    let cpu = &t[t.find("calls").unwrap()..];
    for name in ["zsmem ", "zsmem-classes "] {
        let row = cpu.lines().find(|l| l.starts_with(name)).unwrap();
        let calls: u64 = row.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!((1000..=1000 + 1000 / 64).contains(&calls), "{row}");
    }
}

/// Slots that would not fit in memory are refused before the fill,
/// naming --slots (50 million slots grew towards the OOM killer).
#[test]
fn slots_beyond_memory_are_refused_before_the_fill() {
    let out = zsmem(&[
        "compare",
        "--workload",
        "churn",
        "--scale",
        "0.01",
        "--slots",
        "4294967295",
        "--ops",
        "1",
        "--contestants",
        "zsmem",
        "--no-report",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("zsmem: error: --slots 4294967295: holding them takes about"),
        "{err}"
    );
    assert!(!err.contains("zsmem: zsmem:"), "{err}");
    let help = String::from_utf8(zsmem(&["compare", "--help"]).stdout).unwrap();
    assert!(help.contains("At most 2^31"), "{help}");
}
