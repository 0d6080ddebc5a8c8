//! `zsmem compare --workload churn`: swap-like churn (fill, then random
//! overwrites and discards) on every contestant, with the CPU time each
//! takes per call, side by side.

use serde::Serialize;
use zsmem_lab::contestants::kernel_zram::ZramError;
use zsmem_lab::contestants::{LabError, PageConfig};
use zsmem_lab::corpus::FileTree;
use zsmem_lab::report::ReportContext;
use zsmem_lab::workloads::churn::{Churn, ChurnResult, Variant};
use zsmem_lab::workloads::trace::TraceRecorder;

use crate::compare::{CompareArgs, print_tables, report, save_trace};
use crate::output::{Format, print_csv, print_json, print_table, table};
use crate::{CliError, CliResult, progress};

/// How the CPU time a call is measured.
const CPU_NOTE: &str = "CPU a call: the process's user + system time (every thread, zsmem's \
page returner included) over the churn's calls made, readings included, divided by the calls \
made; for system, jemalloc and mimalloc the sum of the calls' times inside their child process.";

/// What the kernel's zram's CPU a call holds, said where it ran.
const KERNEL_CPU_NOTE: &str = "The kernel's zram compresses in the calling thread and is \
reached through a system call per call (pwrite or pread with O_DIRECT, a BLKDISCARD ioctl per \
discard): its figure includes that path, about 1 us a call here, which an in-process store has \
no need of; a ratio to it compares a store with its access path, not two allocators alone.";

/// The kernel's zram, the contestant the CPU table sets the others against.
const KERNEL: &str = "kernel-zram";

/// `--variant`'s value.
pub fn parse_variant(s: &str) -> Result<Variant, String> {
    Variant::ALL
        .iter()
        .find(|(n, _)| *n == s)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            format!(
                "unknown churn variant `{s}`: use {}",
                Variant::ALL.map(|(n, _)| n).join(", ")
            )
        })
}

/// The workload `a` asks for.
pub fn workload(a: &CompareArgs) -> Churn {
    Churn {
        variant: a.variant,
        slots: a.slots,
        ops: a.ops,
        readings: a.readings,
        discard_share: a.discard_share,
        zero_share: a.zero_share,
        incompressible_share: a.incompressible_share,
        seed: a.seed,
        ..Churn::default()
    }
}

#[derive(Serialize)]
struct JsonRun<'a> {
    contestant: &'a str,
    config: &'a str,
    steps: Vec<JsonStep<'a>>,
    calls: u64,
    cpu_s: f64,
    cpu_ns_per_call: f64,
    cpu_measure: &'a str,
    waiting_after_burst: Option<u64>,
    wall_s: f64,
}

#[derive(Serialize)]
struct JsonStep<'a> {
    label: &'a str,
    pool: u64,
    figures: &'a zsmem_lab::contestants::Figures,
}

/// Run the churn on every contestant of `a` over `tree`.
pub fn run(a: &CompareArgs, tree: &FileTree, source: &str, cfg: &PageConfig) -> CliResult {
    let work = workload(a);
    work.validate()
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let slots = work.slots_for(tree);
    let ops = work.ops_for(tree);
    super::slots_memory::check(&work, tree, cfg, slots)?;
    eprintln!(
        "workload: churn ({}), {slots} slots of {} KiB filled from {source}, then {ops} calls \
         ({:.0}% discards, {:.0}% zero-filled and {:.0}% incompressible pages written){}",
        work.variant.name(),
        cfg.page_size / 1024,
        work.discard_share * 100.0,
        work.zero_share * 100.0,
        work.incompressible_share * 100.0,
        checking_loads(&work),
    );
    let mut results: Vec<ChurnResult> = Vec::new();
    let mut skipped: Vec<(String, String)> = Vec::new();
    let mut premade = super::contestants::Premade::baselines(&a.contestants, cfg, slots);
    for name in &a.contestants {
        let mut c = match premade.take(name, cfg, slots) {
            Ok(c) => c,
            Err(LabError::Zram(ZramError::Unavailable(why)) | LabError::Skipped(why)) => {
                eprintln!("skipping {name}: {why}");
                skipped.push((name.clone(), why));
                continue;
            }
            Err(e) => return Err(super::contestant_error(name, e)),
        };
        let bar = progress::bar(ops, name, "calls");
        let r = match (&a.record_trace, results.is_empty()) {
            (Some(path), true) => {
                // The recorder compresses each page again for its sizes:
                // this contestant's CPU a call includes that.
                let mut rec = TraceRecorder::new(c.as_mut(), cfg.codec);
                let r = work.run(tree, &mut rec, |done| bar.set_position(done));
                save_trace(
                    &rec,
                    path,
                    " (this run's CPU a call includes the recorder's compression)",
                )?;
                r
            }
            _ => work.run(tree, c.as_mut(), |done| bar.set_position(done)),
        }
        .map_err(|e| super::contestant_error(name, e))?;
        bar.finish_and_clear();
        eprintln!(
            "  {name}: done in {:.1}s, {:.2} µs CPU a call",
            r.run.wall.as_secs_f64(),
            r.cpu_ns_per_call() / 1000.0
        );
        results.push(r);
    }
    match a.format {
        Format::Json => {
            let runs: Vec<JsonRun> = results
                .iter()
                .map(|r| JsonRun {
                    contestant: &r.run.contestant,
                    config: &r.run.config,
                    steps: r
                        .run
                        .steps
                        .iter()
                        .map(|s| JsonStep {
                            label: &s.label,
                            pool: s.figures.pool,
                            figures: &s.figures,
                        })
                        .collect(),
                    calls: r.calls,
                    cpu_s: r.cpu.as_secs_f64(),
                    cpu_ns_per_call: r.cpu_ns_per_call(),
                    cpu_measure: r.cpu_measure,
                    waiting_after_burst: r.waiting_after_burst,
                    wall_s: r.run.wall.as_secs_f64(),
                })
                .collect();
            print_json(&serde_json::json!({
                "workload": "churn", "churn": work, "source": source, "slots": slots,
                "page_size": cfg.page_size, "codec": a.codec,
                "skipped": skipped, "runs": runs,
                "verdict": zsmem_lab::report::verdict_of(
                    &results.iter().map(|r| r.run.clone()).collect::<Vec<_>>()
                ),
                "all_in_terms": zsmem_lab::allin::explain(),
            }))?;
        }
        Format::Csv => {
            let rows = results.iter().flat_map(|r| {
                r.run.steps.iter().map(move |s| {
                    let f = &s.figures;
                    vec![
                        r.run.contestant.clone(),
                        s.label.clone(),
                        f.orig.to_string(),
                        f.compr.to_string(),
                        f.pool.to_string(),
                        f.all_in.to_string(),
                        super::ratio_csv(f, f.overhead_ratio()),
                        super::ratio_csv(f, f.all_in_ratio()),
                        format!("{:.1}", r.cpu_ns_per_call()),
                    ]
                })
            });
            print_csv(
                &[
                    "contestant",
                    "step",
                    "orig",
                    "compr",
                    "pool",
                    "all_in",
                    "overhead_ratio",
                    "all_in_ratio",
                    "cpu_ns_per_call",
                ],
                rows,
            )?;
        }
        Format::Table => {
            let runs: Vec<_> = results.iter().map(|r| r.run.clone()).collect();
            print_tables(&runs, &skipped, cfg.page_size, a.explain, false)?;
            print_cpu(&results, &work, ops)?;
        }
    }
    if !a.no_report {
        let ctx = ReportContext {
            title: format!("zsmem compare: churn ({})", work.variant.name()),
            source: source.to_string(),
            workload: format!(
                "churn ({}): {slots} slots filled, then {ops} calls, {:.0}% of them discards",
                work.variant.name(),
                work.discard_share * 100.0
            ),
            generated_by: std::env::args().collect::<Vec<_>>().join(" "),
            codec: a.codec.clone(),
            page_size: cfg.page_size,
            skipped,
            cpu: results
                .iter()
                .map(|r| (r.run.contestant.clone(), r.calls, r.cpu_ns_per_call()))
                .collect(),
            cpu_note: cpu_note(&results, &work, ops),
        };
        let runs: Vec<_> = results.iter().map(|r| r.run.clone()).collect();
        report(&a.report, &ctx, &runs)?;
    }
    Ok(())
}

/// ", every Nth also loading a slot back to check it" (the loads are
/// calls made too), or nothing when no call checks.
fn checking_loads(work: &Churn) -> String {
    match work.verify_every {
        0 => String::new(),
        1 => ", each also loading a slot back to check it".into(),
        n => format!(", every {}th also loading a slot back to check it", n),
    }
}

/// Whether the kernel's zram ran.
fn kernel_ran(results: &[ChurnResult]) -> bool {
    results.iter().any(|r| r.run.contestant == KERNEL)
}

/// What "calls made" counts, what the CPU a call is, and the kernel's
/// caveat where it ran.
fn cpu_note(results: &[ChurnResult], work: &Churn, ops: u64) -> String {
    let phase = if work.variant == Variant::Phase {
        ", the burst's discards and the writes that refill them"
    } else {
        ""
    };
    let mut note = format!(
        "calls made: the {ops} calls after the fill, the loads that check a slot (where the \
         slot drawn holds a page){phase}. {CPU_NOTE}"
    );
    if kernel_ran(results) {
        note.push(' ');
        note.push_str(KERNEL_CPU_NOTE);
    }
    note
}

/// CPU per call, each contestant's and, where the kernel's zram ran, its
/// ratio to the kernel's.
fn print_cpu(results: &[ChurnResult], work: &Churn, ops: u64) -> CliResult {
    let kernel = results
        .iter()
        .find(|r| r.run.contestant == KERNEL)
        .map(ChurnResult::cpu_ns_per_call);
    let mut head = vec!["contestant", "calls\nmade", "CPU\ns", "CPU a\ncall µs"];
    if kernel.is_some() {
        head.push("x kernel\nzram");
    }
    head.push("waiting\nafter burst");
    let mut t = table(&head, 1);
    for r in results {
        let per = r.cpu_ns_per_call();
        let mut row = vec![
            r.run.contestant.clone(),
            r.calls.to_string(),
            format!("{:.2}", r.cpu.as_secs_f64()),
            format!("{:.2}", per / 1000.0),
        ];
        if let Some(k) = kernel {
            row.push(if k > 0.0 {
                format!("{:.2}", per / k)
            } else {
                "-".into()
            });
        }
        row.push(
            r.waiting_after_burst
                .map_or("-".into(), |p| format!("{p} pages")),
        );
        t.add_row(row);
    }
    outln!();
    print_table(&t)?;
    let width = crate::output::terminal_width().unwrap_or(100);
    out!(
        "{}",
        crate::output::wrap(
            &format!(
                "{} waiting after burst: pages freed and not yet given back right after the \
                 phase variant's burst of discards, before any delay.",
                cpu_note(results, work, ops)
            ),
            width,
            ""
        )
    );
    Ok(())
}
