//! `zsmem classes` run as a program: output formats, pinned numbers from
//! the 2026 RFC and the kernel, and argument errors.

mod common;

use std::process::Output;

fn zsmem(args: &str) -> Output {
    common::zsmem(&args.split_whitespace().collect::<Vec<_>>())
}

/// Run and expect success; returns stdout.
fn ok(args: &str) -> String {
    let out = zsmem(args);
    assert!(
        out.status.success(),
        "`zsmem {args}` failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// The `|`-separated fields of a table line, trimmed, empty ones dropped.
fn fields(line: &str) -> Vec<&str> {
    line.split('|')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .collect()
}

/// The table line whose first field is `req`.
fn row(table: &str, req: usize) -> Vec<&str> {
    let req = req.to_string();
    table
        .lines()
        .map(fields)
        .find(|f| f.first() == Some(&req.as_str()))
        .unwrap_or_else(|| panic!("no row {req} in\n{table}"))
}

/// The summary line whose first field is `metric`.
fn summary<'a>(table: &'a str, metric: &str) -> Vec<&'a str> {
    table
        .lines()
        .map(fields)
        .find(|f| f.first() == Some(&metric))
        .unwrap_or_else(|| panic!("no summary line {metric} in\n{table}"))
}

const RFC: &str = "classes --page-size 16K --chain 8 --delta 64 --from 1072 --to 1120";

#[test]
fn rfc_rows_in_table() {
    let t = ok(RFC);
    assert!(t.starts_with("16K chain 8 delta 64 min-waste\n"), "{t}");
    for (req, merge) in [(1072, "5616"), (1088, "3744"), (1104, "1872"), (1120, "0")] {
        assert_eq!(
            &row(&t, req)[..6],
            [req.to_string().as_str(), "1120", "8", "117", "32", merge]
        );
    }
    assert_eq!(summary(&t, "logical classes"), ["logical classes", "257"]);
    assert!(
        t.contains("avg effective waste:"),
        "the metric is explained"
    );
}

#[test]
fn rfc_rows_side_by_side() {
    let t = ok(&format!("{RFC} --vs-delta 16"));
    let title = t.lines().next().unwrap();
    assert!(
        title.contains("A: 16K chain 8 delta 64 min-waste"),
        "{title}"
    );
    assert!(
        title.contains("B: 16K chain 8 delta 16 min-waste"),
        "{title}"
    );
    for (req, a, b) in [
        (
            1072,
            ["1120", "8", "117", "32", "5616"],
            ["1072", "4", "61", "144", "0"],
        ),
        (
            1088,
            ["1120", "8", "117", "32", "3744"],
            ["1088", "1", "15", "64", "0"],
        ),
        (
            1104,
            ["1120", "8", "117", "32", "1872"],
            ["1104", "6", "89", "48", "0"],
        ),
        (
            1120,
            ["1120", "8", "117", "32", "0"],
            ["1120", "8", "117", "32", "0"],
        ),
    ] {
        let f = row(&t, req);
        assert_eq!(f.len(), 13, "{f:?}");
        assert_eq!(&f[1..6], a, "A {req}");
        assert_eq!(&f[7..12], b, "B {req}");
    }
    assert_eq!(
        summary(&t, "logical classes"),
        ["logical classes", "257", "1023", "+766"]
    );
}

#[test]
fn json_holds_pinned_numbers() {
    let out = ok(&format!("{RFC} --vs-delta 16 --format json"));
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(v["config_a"]["class_delta"], 64);
    assert_eq!(v["config_b"]["class_delta"], 16);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    let merges: Vec<u64> = rows
        .iter()
        .map(|r| r["a"]["merge_waste"].as_u64().unwrap())
        .collect();
    assert_eq!(merges, [5616, 3744, 1872, 0]);
    for r in rows {
        assert_eq!(r["a"]["phys"], 1120);
        assert_eq!(r["a"]["objs_per_zspage"], 117);
        assert_eq!(r["a"]["tail_waste"], 32);
    }
    assert_eq!(rows[0]["b"]["chain"], 4);
    assert_eq!(rows[0]["b"]["objs_per_zspage"], 61);
    assert_eq!(rows[0]["b"]["tail_waste"], 144);
    assert!(v["summary_a"]["avg_effective_waste"].is_f64());

    // Without a comparison B is null.
    let v: serde_json::Value = serde_json::from_str(&ok("classes --format json")).unwrap();
    assert!(v["config_b"].is_null() && v["summary_b"].is_null());
}

#[test]
fn four_k_kernel_numbers() {
    for (chain, phys, huge) in [
        (4, 69, 3257),
        (8, 119, 3625),
        (10, 141, 3705),
        (16, 192, 3833),
    ] {
        let out = ok(&format!("classes --chain {chain} --format json"));
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let s = &v["summary_a"];
        assert_eq!(s["logical_classes"], 255, "chain {chain}");
        assert_eq!(s["physical_classes"], phys, "chain {chain}");
        assert_eq!(s["huge_class_size"], huge, "chain {chain}");
    }
}

#[test]
fn csv_header_and_rows() {
    let out = ok(&format!("{RFC} --format csv"));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "req,phys,chain,objs_per_zspage,tail_waste,merge_waste,span"
    );
    assert_eq!(lines.len(), 1 + 4);
    assert!(lines[1].starts_with("1072,1120,8,117,32,5616,"));

    let out = ok(&format!("{RFC} --vs-chain 4 --format csv"));
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("req,a_phys,") && lines[0].ends_with(",b_span"));
    assert_eq!(lines.len(), 1 + 4);
    assert!(lines.iter().all(|l| l.split(',').count() == 13));
}

#[test]
fn classes_without_options_prints_the_default_table() {
    let t = ok("classes");
    assert!(t.starts_with("4K chain 8 delta 16 min-waste\n"), "{t}");
    assert_eq!(row(&t, 32)[1], "32");
    assert_eq!(row(&t, 4096)[1], "4096");
    assert_eq!(summary(&t, "logical classes")[1], "255");
    assert_eq!(summary(&t, "physical classes")[1], "119");
    assert_eq!(summary(&t, "huge_class_size")[1], "3625");
}

#[test]
fn bad_arguments_fail_with_a_message() {
    for (args, needle) in [
        ("--page-size 5000", "page size"),
        ("--page-size 128K", "page size"),
        ("--page-size 4X", "--page-size"),
        ("--chain 0", "chain size"),
        ("--chain 33", "chain size"),
        ("--delta 12", "class delta"),
        ("--delta big", "--delta"),
        ("--rule fastest", "--rule"),
        ("--from 2000 --to 1000", "--from"),
        ("--step 0", "--step"),
        ("--format xml", "--format"),
        ("--vs-chain 4 --vs-delta 64", "--vs-"),
        ("--vs-chain 99", "--vs-chain"),
    ] {
        let out = zsmem(&format!("classes {args}"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "`{args}` succeeded");
        assert!(err.contains(needle), "`{args}`: {err}");
        assert!(!err.contains("panicked"), "`{args}`: {err}");
        assert!(out.stdout.is_empty(), "`{args}` printed a table");
    }
}
