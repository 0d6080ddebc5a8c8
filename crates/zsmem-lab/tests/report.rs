//! The HTML report: pages, plots and the bpftrace-style histograms.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hdrhistogram::Histogram;
use zsmem_lab::contestants::Figures;
use zsmem_lab::report::{ReportContext, log2_histogram, write_report};
use zsmem_lab::workloads::untar_rm::{Latencies, RunResult, Step};

const MIB: u64 = 1 << 20;

/// A fresh directory under the system's temporary directory.
fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("zsmem-report-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Remove a test's directory, unless ZSMEM_REPORT_KEEP is set (to look at
/// the example reports afterwards).
fn cleanup(dir: &Path) {
    if std::env::var_os("ZSMEM_REPORT_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(dir);
    } else {
        eprintln!("report kept in {}", dir.display());
    }
}

fn hist(values: &[(u64, u64)]) -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 60_000_000_000, 3).unwrap();
    for &(v, n) in values {
        h.record_n(v, n).unwrap();
    }
    h
}

/// The step labels of `rounds` rounds of untar/rm over 5 directories and
/// the final compaction: 7 per round plus one.
fn labels(rounds: usize) -> Vec<(usize, String)> {
    let mut v = Vec::new();
    for r in 1..=rounds {
        v.push((r, "untar".to_string()));
        for d in ["drivers", "arch", "fs", "sound", "include"] {
            v.push((r, format!("-{d}")));
        }
        v.push((r, "-rest".to_string()));
    }
    v.push((rounds, "compact".to_string()));
    v
}

/// A run over `labels`: the tree is stored, shrinks as directories go, is
/// empty after `-rest`; pool is `overhead` above compr.
fn run(name: &str, labels: &[(usize, String)], overhead: f64, waste: bool) -> RunResult {
    let steps = labels
        .iter()
        .map(|(round, label)| {
            let orig = match label.as_str() {
                "untar" => 300 * MIB,
                "-rest" | "compact" => 0,
                _ => 300 * MIB / (2 + label.len() as u64),
            };
            let compr = orig / 3;
            let pool = (compr as f64 * (1.0 + overhead)) as u64;
            Step {
                round: *round,
                label: label.clone(),
                figures: Figures {
                    orig,
                    compr,
                    pool,
                    all_in: pool + if waste { MIB } else { 0 },
                    meta: if waste { MIB / 2 } else { 0 },
                    waste: waste.then(|| zsmem::Waste {
                        rounding_bytes: (compr / 20) as usize,
                        partial_bytes: (pool.saturating_sub(compr + compr / 20 + compr / 50))
                            as usize,
                        tail_bytes: (compr / 50) as usize,
                    }),
                    same_pages: 12,
                    huge_pages: 3,
                    pages_compacted: if label == "compact" { 42 } else { 0 },
                    compaction: None,
                    all_in_terms: Vec::new(),
                },
            }
        })
        .collect();
    RunResult {
        contestant: name.to_string(),
        config: format!("config of {name} <chain 8> & delta 16"),
        steps,
        latency: Latencies {
            store: hist(&[(900, 50), (1500, 1000), (3000, 300), (70_000, 2)]),
            load: hist(&[(700, 200), (1200, 80)]),
            discard: hist(&[(300, 500), (600, 20)]),
        },
        wall: Duration::from_millis(12_345),
    }
}

fn ctx() -> ReportContext {
    ReportContext {
        title: "zsmem compare <test>".into(),
        source: "/tmp/linux & friends.tar.xz".into(),
        workload: "untar/rm, 2 rounds".into(),
        generated_by: "zsmem compare --rounds 2 --report out".into(),
        codec: "lz4".into(),
        page_size: 4096,
        skipped: vec![("kernel-zram".into(), "needs root & the zram module".into())],
        cpu: Vec::new(),
        cpu_note: String::new(),
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn assert_svg(p: &Path) {
    let s = read(p);
    let t = s.trim_start();
    assert!(
        t.starts_with("<svg") || t.starts_with("<?xml"),
        "{} starts with {:?}",
        p.display(),
        &t[..t.len().min(40)]
    );
    assert!(
        s.trim_end().ends_with("</svg>"),
        "{} is not closed",
        p.display()
    );
    assert_eq!(s.matches("<svg").count(), 1, "{}", p.display());
}

#[test]
fn full_report_has_everything() {
    let root = temp_dir("full");
    let dir = root.join("nested/deeper");
    let labels = labels(2);
    assert_eq!(labels.len(), 15);
    let runs = vec![
        run("zsmem", &labels, 0.05, true),
        run("zsmem-kernel", &labels, 0.12, true),
        run(r#"a<b&"c""#, &labels, 0.20, false),
    ];
    let index = write_report(&dir, &ctx(), &runs).unwrap();
    assert_eq!(index, dir.join("index.html"));
    let html = read(&index);
    eprintln!(
        "index.html for 3 contestants x 15 steps: {} bytes",
        html.len()
    );

    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.trim_end().ends_with("</html>"));
    // Self-contained: no external resources.
    for bad in ["<script", "<link", " src=", "@import", "url("] {
        assert!(!html.contains(bad), "page contains {bad}");
    }
    // Header.
    assert!(html.contains("zsmem compare &lt;test&gt;"));
    assert!(html.contains("/tmp/linux &amp; friends.tar.xz"));
    assert!(html.contains("untar/rm, 2 rounds"));
    assert!(html.contains("zsmem compare --rounds 2 --report out"));
    assert!(html.contains("kernel-zram"));
    assert!(html.contains("needs root &amp; the zram module"));
    // Metadata.
    for fact in [
        "<dt>codec</dt><dd>lz4</dd>",
        "<dt>page size</dt><dd>4096 bytes</dd>",
        "<dt>zsmem</dt>",
        "<dt>host</dt>",
        "<dt>kernel</dt>",
        "<dt>date</dt>",
    ] {
        assert!(html.contains(fact), "{fact}");
    }
    // The verdict comes first, computed: the kernel's zram did not run, so
    // zsmem is measured against its allocator simulated in userspace,
    // then against the nearest rival, the one allocator not zsmem's.
    let verdict = html.find("id=\"verdict\"").unwrap();
    assert!(verdict < html.find("id=\"summary\"").unwrap());
    assert!(html.contains(
        "Against zsmem-kernel, the kernel&#39;s allocator simulated in userspace (zsmem&#39;s \
         kernel() configuration; kernel-zram needs root): "
    ));
    assert!(html.contains("Against the nearest rival, a&lt;b&amp;&quot;c&quot; ("));
    assert!(html.contains("all-in vs zsmem-kernel</th>"));
    // Each measure is named, and every comparison is made by all three.
    assert!(html.contains("At the peak, zsmem holds"));
    assert!(html.contains("Step by step, zsmem holds"));
    assert!(html.contains("After the last step, zsmem holds"));
    // Each step plot has a legend in HTML too (in sight at any width).
    assert_eq!(html.matches("<ul class=\"legend\">").count(), 3);
    // Plots inlined: three step plots, the latency comparison and one
    // latency plot per contestant.
    assert_eq!(html.matches("<svg").count(), 4 + runs.len());
    // The best figure of each column is marked.
    assert!(html.contains("class=\"n best\""));
    // The compaction cost table is there (no contestant reported one).
    assert!(html.contains("<h3>Compaction cost</h3>"));
    // Names, escaped; the raw name never appears.
    assert!(html.contains(">zsmem<"));
    assert!(html.contains(">zsmem-kernel<"));
    assert!(html.contains("a&lt;b&amp;&quot;c&quot;"));
    assert!(!html.contains(r#"a<b&"c""#));
    assert!(html.contains("config of zsmem &lt;chain 8&gt; &amp; delta 16"));
    // Every step label, in every contestant's table.
    for (round, label) in &labels {
        let l = format!("<td>r{round}:{label}</td>");
        assert_eq!(html.matches(&l).count(), runs.len(), "{l}");
    }
    // Summary rows: peak pool and wall time, one row per contestant plus
    // the skipped one.
    let summary = &html[html.find("id=\"summary\"").unwrap()..];
    let summary = &summary[..summary.find("</table>").unwrap()];
    assert_eq!(summary.matches("<tr>").count(), 1 + runs.len() + 1);
    for r in &runs {
        let peak = format!("{:.2}", r.peak_pool() as f64 / MIB as f64);
        assert!(summary.contains(&peak), "{peak} in summary");
    }
    assert!(summary.contains("12.35"), "wall time");
    assert!(summary.contains("skipped: needs root &amp; the zram module"));
    // Overhead ratios: max 20% for the third.
    assert!(summary.contains("20.00%"));
    // Waste split only for contestants that have it.
    assert_eq!(html.matches("<th>rounding</th>").count(), 2);
    // Histograms in <pre>, bpftrace style, folded away with the step
    // tables: two <details> a contestant, one inside the other, and the
    // step table's.
    assert_eq!(html.matches("<pre>@store_ns:").count(), runs.len());
    assert_eq!(html.matches("<details>").count(), 3 * runs.len());
    let first_pre = html.find("<pre>@store_ns:").unwrap();
    let opened = html[..first_pre].matches("<details>").count();
    let closed = html[..first_pre].matches("</details>").count();
    assert_eq!(opened - closed, 2, "the histograms are not folded");
    assert!(html.contains("[1K, 2K)"));
    assert!(html.contains("[64K, 128K)"));
    assert!(html.contains("p99.9"));

    // The plots as files.
    for f in ["overhead.svg", "memory.svg", "relative.svg", "latency.svg"] {
        assert_svg(&dir.join(f));
    }
    for slug in ["zsmem", "zsmem-kernel", "a_b__c_"] {
        assert_svg(&dir.join(format!("latency-{slug}.svg")));
    }
    // plotters escapes the legend text.
    let overhead = read(&dir.join("overhead.svg"));
    assert!(overhead.contains("a&lt;b&amp;"));
    assert!(!overhead.contains("a<b"));
    assert!(overhead.contains("r1:-drivers"));
    // Steps with no figure (nothing stored) take no room on the x axis.
    assert!(!overhead.contains("r2:compact"));
    assert!(!overhead.contains("r1:-rest"));
    let memory = read(&dir.join("memory.svg"));
    assert!(memory.contains("compressed"));
    assert!(memory.contains("stroke-dasharray") || memory.matches("<polyline").count() > 3);

    cleanup(&root);
}

#[test]
fn duplicate_names_get_distinct_files() {
    let dir = temp_dir("dup");
    let labels = labels(1);
    let runs = vec![
        run("x/y", &labels, 0.1, false),
        run("x?y", &labels, 0.2, false),
    ];
    write_report(&dir, &ctx(), &runs).unwrap();
    assert_svg(&dir.join("latency-x_y.svg"));
    assert_svg(&dir.join("latency-x_y-2.svg"));
    cleanup(&dir);
}

#[test]
fn log2_histogram_buckets_known_values() {
    let h = hist(&[(1500, 100), (3000, 10)]);
    let s = log2_histogram(&h, 20);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 3, "{s}");
    assert!(lines[0].starts_with("[1K, 2K)"), "{s}");
    assert!(lines[0].contains(" 100 |"), "{s}");
    assert!(lines[0].ends_with(&format!("|{}|", "@".repeat(20))), "{s}");
    assert!(lines[1].starts_with("[2K, 4K)"), "{s}");
    assert!(lines[1].contains("  10 |"), "{s}");
    assert!(lines[1].ends_with(&format!("|{}{}|", "@".repeat(2), " ".repeat(18))));
    let p = lines[2];
    for part in ["p50 1.50 µs", "p90 1.50 µs", "p99 3.00 µs", "p99.9 3.00 µs"] {
        assert!(p.contains(part), "{p} lacks {part}");
    }
}

#[test]
fn log2_histogram_units_and_alignment() {
    let h = hist(&[(200, 1), (700, 3), (5 << 20, 7), (3 << 30, 1)]);
    let s = log2_histogram(&h, 10);
    let lines: Vec<&str> = s.lines().collect();
    assert!(lines[0].starts_with("[128, 256) "), "{s}");
    assert!(lines[1].starts_with("[512, 1K) "), "{s}");
    assert!(lines[2].starts_with("[4M, 8M) "), "{s}");
    assert!(lines[3].starts_with("[2G, 4G) "), "{s}");
    // Bars line up.
    let col: Vec<usize> = lines[..4].iter().map(|l| l.find('|').unwrap()).collect();
    assert!(col.windows(2).all(|w| w[0] == w[1]), "{s}");
}

#[test]
fn log2_histogram_of_nothing() {
    let s = log2_histogram(&hist(&[]), 40);
    assert_eq!(s.trim(), "(no samples)");
}

#[test]
fn no_runs_gives_a_page_that_says_so() {
    let dir = temp_dir("none");
    let index = write_report(&dir, &ctx(), &[]).unwrap();
    let html = read(&index);
    assert!(html.contains("no runs"), "{html}");
    assert!(html.contains("needs root &amp; the zram module"));
    assert!(!dir.join("overhead.svg").exists());
    cleanup(&dir);
}

#[test]
fn all_zero_figures_and_empty_histograms() {
    let dir = temp_dir("zero");
    let steps: Vec<Step> = labels(1)
        .into_iter()
        .map(|(round, label)| Step {
            round,
            label,
            figures: Figures::default(),
        })
        .collect();
    let runs = vec![
        RunResult {
            contestant: "zero".into(),
            config: String::new(),
            steps: steps.clone(),
            latency: Latencies::default(),
            wall: Duration::ZERO,
        },
        RunResult {
            contestant: "zero-waste".into(),
            config: String::new(),
            steps: steps
                .into_iter()
                .map(|mut s| {
                    s.figures.waste = Some(zsmem::Waste::default());
                    s
                })
                .collect(),
            latency: Latencies::default(),
            wall: Duration::ZERO,
        },
    ];
    let index = write_report(&dir, &ReportContext::default(), &runs).unwrap();
    let html = read(&index);
    assert!(html.contains("(no samples)"));
    assert!(html.contains("<td>r1:-rest</td>"));
    for f in [
        "overhead.svg",
        "memory.svg",
        "latency-zero.svg",
        "latency-zero-waste.svg",
    ] {
        assert_svg(&dir.join(f));
    }
    assert!(read(&dir.join("overhead.svg")).contains("no step with compressed data"));
    assert!(read(&dir.join("latency-zero.svg")).contains("no samples"));
    cleanup(&dir);
}

#[test]
fn one_contestant_one_step_and_odd_runs() {
    let dir = temp_dir("one");
    let one = run("solo", &[(1, "untar".to_string())], 0.1, true);
    write_report(&dir, &ctx(), std::slice::from_ref(&one)).unwrap();
    assert_svg(&dir.join("overhead.svg"));
    assert_svg(&dir.join("memory.svg"));
    assert_svg(&dir.join("latency-solo.svg"));

    // No steps at all, a negative overhead, runs of different lengths, a
    // single latency sample.
    let mut empty = run("empty", &[], 0.0, false);
    empty.latency = Latencies::default();
    empty.latency.load.record(1).unwrap();
    let negative = run("negative", &labels(1), -0.3, false);
    let long = run("long", &labels(10), 0.1, false);
    let index = write_report(&dir, &ctx(), &[empty, negative, long]).unwrap();
    let html = read(&index);
    assert!(html.contains("<td>r10:-include</td>"));
    assert!(html.contains("[1]"));
    assert!(html.contains("-30.00%"));
    assert_svg(&dir.join("latency-empty.svg"));
    cleanup(&dir);
}

/// The contestants of a full `zsmem compare --contestants` run, with
/// figures of their kind: zsmem lowest, the kernel's zram a little above,
/// the malloc baselines at 6-7 times.
fn thirteen(labels: &[(usize, String)]) -> Vec<RunResult> {
    [
        ("zsmem", 0.03),
        ("zsmem-kernel", 0.10),
        ("zsmem-kernel-compact", 0.07),
        ("kernel-zram", 0.10),
        ("kernel-zram-compact", 0.07),
        ("system", 6.6),
        ("jemalloc", 6.2),
        ("mimalloc", 6.4),
        ("zbud", 0.45),
        ("z3fold", 0.25),
        ("zblock", 0.2),
        ("afmalloc", 0.12),
        ("afmalloc-compact", 0.09),
    ]
    .iter()
    .map(|&(name, overhead)| {
        let mut r = run(name, labels, overhead, false);
        if name.ends_with("compact")
            && let Some(last) = r.steps.last_mut()
        {
            let mut c = zsmem::CompactionStats::default();
            c.pages_compacted = 1234;
            c.objects_moved = 56_789;
            c.bytes_copied = 7 * MIB;
            last.figures.compaction = Some(c);
        }
        r
    })
    .collect()
}

#[test]
fn a_full_comparison_says_who_wins_and_keeps_the_baselines_off_the_plots() {
    let dir = temp_dir("thirteen");
    let runs = thirteen(&labels(1));
    let index = write_report(&dir, &ctx(), &runs).unwrap();
    let html = read(&index);
    // Against the kernel's zram, compacted and not: 3% over compr against
    // 10% and 7% is 6.4% and 3.7% less, at every step with data.
    assert!(
        html.contains("At the peak, zsmem holds 6.4% less than kernel-zram ("),
        "verdict"
    );
    assert!(
        html.contains("At the peak, zsmem holds 3.7% less than kernel-zram-compact ("),
        "verdict"
    );
    assert!(
        html.contains("less after every one of the 6 steps"),
        "verdict"
    );
    assert!(html.contains("all-in vs kernel-zram</th>"));
    assert!(html.contains("all-in vs kernel-zram-compact</th>"));
    assert!(html.contains("kernel-zram-compact is also the nearest rival"));
    // The compaction costs of the compacted contestants.
    assert!(html.contains("56789"));
    // The baselines are left off the step plots, and said so.
    let overhead = read(&dir.join("overhead.svg"));
    assert!(overhead.contains("Not drawn"));
    assert!(overhead.contains("system: max 660%"));
    assert!(read(&dir.join("relative.svg")).contains("jemalloc: up to"));
    // The all-in plot draws zsmem, the references and the nearest rival
    // only (thirteen lines of nearly the same figures hid one another).
    let memory = read(&dir.join("memory.svg"));
    assert!(memory.contains("kernel-zram-compact") && !memory.contains("jemalloc"));
    assert!(!memory.contains("zblock"));
    cleanup(&dir);
}

/// A headless browser found on this machine, if any.
fn browser() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome", "chrome"]
        .iter()
        .flat_map(|b| std::env::split_paths(&path).map(move |d| d.join(b)))
        .find(|p| p.is_file())
}

/// The report as a reader sees it: a headless browser renders the page of
/// thirteen contestants at desktop and phone widths to PNG screenshots
/// (kept with ZSMEM_REPORT_KEEP=1, to look at). Skipped, saying so, where
/// no browser is installed (`apt-get install chromium`).
#[test]
fn renders_in_a_browser_at_desktop_and_narrow_widths() {
    let Some(browser) = browser() else {
        eprintln!("skipping: no chromium or chrome on PATH");
        return;
    };
    let dir = temp_dir("browser");
    let index = write_report(&dir, &ctx(), &thirteen(&labels(2))).unwrap();
    for (width, height) in [(1400, 2000), (420, 2000)] {
        let png = dir.join(format!("screenshot-{width}.png"));
        let out = std::process::Command::new(&browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                &format!("--screenshot={}", png.display()),
                &format!("--window-size={width},{height}"),
            ])
            .arg(format!("file://{}", index.display()))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} failed: {}",
            browser.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let bytes = std::fs::read(&png).unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "{}", png.display());
        assert!(bytes.len() > 10_000, "{} is nearly empty", png.display());
    }
    cleanup(&dir);
}

/// The colour of `name`'s swatch in the summary of `html`.
fn swatch_colour(html: &str, name: &str) -> String {
    let end = html
        .find(&format!("></span>{name}</td>"))
        .unwrap_or_else(|| panic!("no swatch for {name}"));
    let start = html[..end].rfind("background:").unwrap() + "background:".len();
    html[start..end].trim_end_matches('"').to_string()
}

/// A contestant's colour is fixed by its name: the same in two reports
/// whose contestants differ and run in another order.
#[test]
fn a_contestant_keeps_its_colour_from_report_to_report() {
    let labels = labels(1);
    let a = ["zsmem", "afmalloc", "zsmem-classes", "system"];
    let b = ["system", "zsmem-classes", "zbud", "afmalloc", "zsmem"];
    let page = |names: &[&str], tag: &str| {
        let dir = temp_dir(tag);
        let runs: Vec<RunResult> = names
            .iter()
            .enumerate()
            .map(|(i, n)| run(n, &labels, 0.05 * (i + 1) as f64, false))
            .collect();
        let html = read(&write_report(&dir, &ctx(), &runs).unwrap());
        cleanup(&dir);
        html
    };
    let (one, two) = (page(&a, "colours-a"), page(&b, "colours-b"));
    for name in a {
        assert_eq!(
            swatch_colour(&one, name),
            swatch_colour(&two, name),
            "{name}"
        );
    }
    assert_ne!(
        swatch_colour(&one, "afmalloc"),
        swatch_colour(&one, "zsmem-classes")
    );
}

/// Overheads orders of magnitude apart (mimalloc's 53% beside zsmem's
/// 0.4%) are drawn on a log axis, so the small ones are not flat on it.
#[test]
fn far_apart_overheads_get_a_log_axis() {
    let dir = temp_dir("log");
    let labels = labels(1);
    let runs = vec![
        run("zsmem", &labels, 0.004, false),
        run("kernel-zram", &labels, 0.08, false),
        run("mimalloc", &labels, 0.53, false),
    ];
    let html = read(&write_report(&dir, &ctx(), &runs).unwrap());
    assert!(
        html.contains("on a log scale: the contestants"),
        "no log axis"
    );
    let overhead = read(&dir.join("overhead.svg"));
    assert!(overhead.contains("log scale"));
    cleanup(&dir);
}
