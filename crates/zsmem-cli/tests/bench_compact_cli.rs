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
    for label in [
        "kernel: off, then compact()",
        "kernel: auto ",
        "kernel: auto, then compact()",
        "zsmem: off, then compact()",
        "zsmem: auto (default)",
        "zsmem: auto, then compact()",
    ] {
        let row = t
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no row {label:?} in\n{t}"));
        let cols: Vec<&str> = row[label.len()..].split_whitespace().collect();
        let held: f64 = cols[0].parse().unwrap();
        let after: f64 = cols[1].parse().unwrap();
        let freed: u64 = cols[2].parse().unwrap();
        let per_byte: f64 = cols[5].parse().unwrap();
        assert!(after < held && freed > 0, "{label}: {row}");
        assert!(per_byte.is_finite() && per_byte > 0.0, "{label}: {row}");
        assert!(cols[6].ends_with("us"), "{label}: {row}");
    }
    assert!(t.contains("copied/freed: object bytes copied per byte of memory returned"));
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
