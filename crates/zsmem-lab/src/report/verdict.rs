//! Who wins: zsmem's all-in memory against the kernel's zram, the nearest rival and its other placement.
//!
//! Every figure is computed from the runs, and every comparison names its
//! measure, the same three each time:
//!
//! - **at the peak**: each contestant's highest all-in memory over the run;
//! - **after each step**: the steps where both hold data (same round and
//!   label, the final compaction left out), counted as less, the same, more;
//! - **after the last step**: the last such step.
//!
//! A difference is a **tie** ([`Call::Same`]) unless it is clear of the
//! noise: with one round, when it is under [`TIE_THRESHOLD`] (0.1%); with
//! rounds, unless every round's figure (each round's own peak or last
//! step) is on the same side by more than that: the per-round figures are
//! the run-to-run spread, and their range is given.
//!
//! The reference is the kernel's zram (`kernel-zram`, and
//! `kernel-zram-compact` when it ran too). Without it (it needs root), the
//! kernel's allocator simulated in userspace stands in for it
//! (`zsmem-kernel-compact`, else `zsmem-kernel`: zsmem's `kernel()`
//! configuration); without that, the nearest rival. Never the order of the
//! contestants: "the first listed" made the headline whichever allocator
//! came first, even the worst. The [`Verdict`] is plain data: the report
//! writes it as HTML, `zsmem compare` prints it after its summary table and
//! puts it in its JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::html::esc;
use crate::workloads::untar_rm::{RunResult, Step};

/// The contestant the verdict is about.
pub(super) const ZSMEM: &str = "zsmem";

/// zsmem placing by size class: set beside zsmem, not a rival.
const ZSMEM_CLASSES: &str = "zsmem-classes";

/// The kernel's zram, as `zsmem compare` names it, uncompacted then compacted.
const KERNEL: [&str; 2] = ["kernel-zram", "kernel-zram-compact"];

/// The kernel's allocator simulated in userspace (zsmem's `kernel()`
/// configuration), the stand-in for the kernel's zram: compacted after
/// every step first (like-for-like with zsmem, which compacts as it
/// frees), then as it is.
const SIMULATED_KERNEL: [&str; 2] = ["zsmem-kernel-compact", "zsmem-kernel"];

/// How the stand-in is named in the verdict's words.
const SIMULATED_KERNEL_WORDS: &str = "the kernel's allocator simulated in userspace (zsmem's \
kernel() configuration; kernel-zram needs root)";

/// What the verdict's references are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reference {
    /// Nothing to compare zsmem with.
    #[default]
    None,
    /// The kernel's zram (`kernel-zram`, `kernel-zram-compact`).
    KernelZram,
    /// Its allocator simulated in userspace (`zsmem-kernel-compact`, else
    /// `zsmem-kernel`), the kernel's zram not having run.
    SimulatedKernel,
    /// The nearest rival, neither of those having run.
    NearestRival,
    /// Another of zsmem's configurations, for want of any other allocator.
    ZsmemConfiguration,
}

/// Below this relative difference (0.1%) two figures of one run tie.
pub const TIE_THRESHOLD: f64 = 0.001;

/// The runs the others are measured against, and what they are: the
/// kernel's zram runs that are present; else its simulation
/// ([`SIMULATED_KERNEL`], the first of the two that ran); else the nearest
/// rival; else the other zsmem configuration with the smallest peak (with
/// `zsmem,zsmem-classes` alone). Never chosen by the order of `runs`.
/// Indices into `runs`.
pub(super) fn reference_runs(runs: &[RunResult]) -> (Reference, Vec<usize>) {
    let position = |name: &str| runs.iter().position(|r| r.contestant == name);
    let kernel: Vec<usize> = KERNEL.iter().filter_map(|k| position(k)).collect();
    if !kernel.is_empty() {
        return (Reference::KernelZram, kernel);
    }
    if let Some(i) = SIMULATED_KERNEL.iter().find_map(|k| position(k)) {
        return (Reference::SimulatedKernel, vec![i]);
    }
    if let Some(i) = nearest_rival(runs) {
        return (Reference::NearestRival, vec![i]);
    }
    match nearest(runs, |name| name != ZSMEM) {
        Some(i) => (Reference::ZsmemConfiguration, vec![i]),
        None => (Reference::None, Vec::new()),
    }
}

/// The reference runs of [`reference_runs`], indices into `runs`.
pub(super) fn references(runs: &[RunResult]) -> Vec<usize> {
    reference_runs(runs).1
}

/// A step that holds data: compressed bytes present, not the final
/// compaction (as in [`RunResult::all_in_ratios`]).
fn holds_data(s: &Step) -> bool {
    s.figures.compr > 0 && s.label != "compact"
}

/// The nearest rival: the other allocator with the smallest peak all-in
/// (zsmem's own configurations are zsmem, not rivals). An index into `runs`.
pub(super) fn nearest_rival(runs: &[RunResult]) -> Option<usize> {
    nearest(runs, |name| !name.starts_with(ZSMEM))
}

/// The run with the smallest peak all-in among those holding data whose
/// name `keep` accepts; of equal peaks, the first by name (not by order).
fn nearest(runs: &[RunResult], keep: impl Fn(&str) -> bool) -> Option<usize> {
    runs.iter()
        .enumerate()
        .filter(|(_, r)| keep(&r.contestant) && r.peak_all_in() > 0)
        .min_by_key(|&(_, r)| (r.peak_all_in(), r.contestant.as_str()))
        .map(|(i, _)| i)
}

/// `r`'s peak all-in relative to `reference`'s, as a signed fraction
/// (`-0.1`: 10% less); `None` when the reference held nothing.
pub(super) fn relative_peak(r: &RunResult, reference: &RunResult) -> Option<f64> {
    let base = reference.peak_all_in();
    (base > 0).then(|| r.peak_all_in() as f64 / base as f64 - 1.0)
}

/// How one contestant's figure stands against another's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Call {
    /// It holds less, clear of the noise.
    Less,
    /// A tie: within the threshold or the spread over rounds.
    Same,
    /// It holds more, clear of the noise.
    More,
}

impl Call {
    /// The call on one saving `1 - a / b`.
    fn of(saving: f64) -> Call {
        if saving > TIE_THRESHOLD {
            Call::Less
        } else if saving < -TIE_THRESHOLD {
            Call::More
        } else {
            Call::Same
        }
    }

    /// The call on savings measured in several rounds: less or more only
    /// when every round says so.
    fn of_all(savings: &[f64]) -> Call {
        let calls: Vec<Call> = savings.iter().map(|&s| Call::of(s)).collect();
        match calls.first() {
            Some(&c) if calls.iter().all(|&x| x == c) => c,
            _ => Call::Same,
        }
    }
}

/// One measure (the peak, or the last step) of a pair.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Measure {
    /// The contestant's all-in bytes.
    pub bytes: u64,
    /// The other's all-in bytes.
    pub other_bytes: u64,
    /// `1 - bytes / other_bytes`: positive when the contestant holds less.
    pub saving: f64,
    /// The same saving in each round (one entry a round both hold data
    /// in): the run-to-run spread.
    pub per_round: Vec<f64>,
    /// Less, the same or more.
    pub call: Call,
}

impl Measure {
    fn new(bytes: u64, other_bytes: u64, per_round: Vec<f64>) -> Option<Measure> {
        (other_bytes > 0).then(|| {
            let saving = 1.0 - bytes as f64 / other_bytes as f64;
            let call = if per_round.is_empty() {
                Call::of(saving)
            } else {
                Call::of_all(&per_round)
            };
            Measure {
                bytes,
                other_bytes,
                saving,
                per_round,
                call,
            }
        })
    }
}

/// The steps of a pair, counted.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepTally {
    /// Steps compared (both hold data, same round and label).
    pub steps: usize,
    /// Steps where the contestant holds less.
    pub less: usize,
    /// Steps where the two tie (under [`TIE_THRESHOLD`]).
    pub same: usize,
    /// Steps where the contestant holds more.
    pub more: usize,
    /// Smallest and largest saving `1 - a / b` over those steps.
    pub range: (f64, f64),
}

/// One contestant's all-in memory against another's, by the three measures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// The contestant (zsmem).
    pub contestant: String,
    /// The one it is measured against.
    pub other: String,
    /// At each one's peak.
    pub peak: Measure,
    /// After each step.
    pub steps: StepTally,
    /// After the last step both hold data in.
    pub last: Measure,
}

/// The pairs of steps `a` and `b` both hold data in, by (round, label).
fn paired<'a>(a: &'a RunResult, b: &'a RunResult) -> Vec<(&'a Step, &'a Step)> {
    a.steps
        .iter()
        .zip(&b.steps)
        .filter(|(x, y)| {
            x.round == y.round
                && x.label == y.label
                && holds_data(x)
                && holds_data(y)
                && y.figures.all_in > 0
        })
        .collect()
}

fn saving(a: u64, b: u64) -> f64 {
    1.0 - a as f64 / b.max(1) as f64
}

/// Compare `a`'s all-in memory with `b`'s; `None` when they share no step
/// with data.
pub fn compare(a: &RunResult, b: &RunResult) -> Option<Comparison> {
    let pairs = paired(a, b);
    let (&(la, lb), _) = pairs.split_last()?;
    let mut steps = StepTally {
        steps: 0,
        less: 0,
        same: 0,
        more: 0,
        range: (f64::INFINITY, f64::NEG_INFINITY),
    };
    for (x, y) in &pairs {
        let s = saving(x.figures.all_in, y.figures.all_in);
        steps.steps += 1;
        match Call::of(s) {
            Call::Less => steps.less += 1,
            Call::Same => steps.same += 1,
            Call::More => steps.more += 1,
        }
        steps.range = (steps.range.0.min(s), steps.range.1.max(s));
    }
    // Per round: each one's peak over the round's steps, and the round's
    // last paired step.
    let mut rounds: BTreeMap<usize, (u64, u64, u64, u64)> = BTreeMap::new();
    for (x, y) in &pairs {
        let e = rounds.entry(x.round).or_default();
        e.0 = e.0.max(x.figures.all_in);
        e.1 = e.1.max(y.figures.all_in);
        (e.2, e.3) = (x.figures.all_in, y.figures.all_in);
    }
    let (peaks, lasts): (Vec<f64>, Vec<f64>) = if rounds.len() > 1 {
        rounds
            .values()
            .map(|&(pa, pb, xa, xb)| (saving(pa, pb), saving(xa, xb)))
            .unzip()
    } else {
        (Vec::new(), Vec::new())
    };
    Some(Comparison {
        contestant: a.contestant.clone(),
        other: b.contestant.clone(),
        peak: Measure::new(a.peak_all_in(), b.peak_all_in(), peaks)?,
        steps,
        last: Measure::new(la.figures.all_in, lb.figures.all_in, lasts)?,
    })
}

/// The verdict of a run: zsmem against the references, its nearest rival
/// and its other placement.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Verdict {
    /// Below this relative difference two figures tie (with one round).
    pub tie_threshold: f64,
    /// Whether zsmem ran.
    pub zsmem_ran: bool,
    /// zsmem against the kernel's zram, compacted and not; without it,
    /// against its simulation in userspace, else the nearest rival (see
    /// `reference`).
    pub references: Vec<Comparison>,
    /// What `references` are.
    pub reference: Reference,
    /// Whether the references are the kernel's zram.
    pub kernel_ran: bool,
    /// zsmem against the other allocator with the smallest peak (zsmem's
    /// own configurations are not rivals).
    pub rival: Option<Comparison>,
    /// zsmem (log placement) against zsmem-classes (size classes), when
    /// that ran.
    pub classes: Option<Comparison>,
    /// The verdict in words: one paragraph each.
    pub text: Vec<String>,
}

/// `f` in %, unsigned, with a second decimal below 0.1%.
fn pct(f: f64) -> String {
    let p = f.abs() * 100.0;
    if p < 0.095 {
        format!("{p:.2}%")
    } else {
        format!("{p:.1}%")
    }
}

/// A saving in words: "6.4% less", "6.9% more", "0.00% apart".
fn amount(s: f64) -> String {
    if s > 0.0 {
        format!("{} less", pct(s))
    } else if s < 0.0 {
        format!("{} more", pct(s))
    } else {
        "0.00% apart".to_string()
    }
}

fn mib(b: u64) -> String {
    format!("{:.2}", b as f64 / (1u64 << 20) as f64)
}

/// "from 6.9% more to 8.0% less", or "6.4% less" when both ends read alike.
fn span(lo: f64, hi: f64) -> String {
    if amount(lo) == amount(hi) {
        amount(lo)
    } else {
        format!("from {} to {}", amount(lo), amount(hi))
    }
}

/// One measure in words, e.g. "zsmem holds 6.4% less than kernel-zram
/// (110.20 vs 117.75 MiB; over 3 rounds from 6.1% less to 6.6% less)".
fn measure_words(a: &str, b: &str, m: &Measure) -> String {
    let figures = format!("{} vs {} MiB", mib(m.bytes), mib(m.other_bytes));
    let rounds = if m.per_round.len() > 1 {
        let lo = m.per_round.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = m
            .per_round
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        let n = m.per_round.len();
        if amount(lo) == amount(hi) {
            format!("; {} in each of the {n} rounds", amount(lo))
        } else {
            format!("; over {n} rounds {}", span(lo, hi))
        }
    } else {
        String::new()
    };
    match m.call {
        Call::Less | Call::More => {
            format!(
                "{a} holds {} than {b} ({figures}{rounds})",
                amount(m.saving)
            )
        }
        Call::Same => {
            let why = if m.per_round.len() > 1 {
                "within the spread over the rounds".to_string()
            } else {
                format!("under the {} a tie allows", pct(TIE_THRESHOLD))
            };
            format!(
                "{a} and {b} tie ({figures}, {}: {why}{rounds})",
                amount(m.saving)
            )
        }
    }
}

/// The steps in words: "zsmem holds less after every one of the 12 steps
/// (from 3.0% less to 8.0% less)" or "zsmem holds less after 7, the same
/// after 1 and more after 4 of the 12 steps (...)".
fn steps_words(a: &str, t: &StepTally) -> String {
    let range = span(t.range.0, t.range.1);
    let one = if t.steps == 1 { "step" } else { "steps" };
    for (n, word) in [(t.less, "less"), (t.same, "the same"), (t.more, "more")] {
        if n == t.steps {
            let every = if t.steps == 1 {
                "the one step".to_string()
            } else {
                format!("every one of the {} steps", t.steps)
            };
            return format!("{a} holds {word} after {every} ({range})");
        }
    }
    let parts: Vec<String> = [(t.less, "less"), (t.same, "the same"), (t.more, "more")]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, w)| format!("{w} after {n}"))
        .collect();
    let listed = match parts.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    };
    format!("{a} holds {listed} of the {} {one} ({range})", t.steps)
}

/// A comparison in words, its three measures one after the other.
fn comparison_words(c: &Comparison) -> String {
    format!(
        "At the peak, {}. Step by step, {}. After the last step, {}.",
        measure_words(&c.contestant, &c.other, &c.peak),
        steps_words(&c.contestant, &c.steps),
        measure_words(&c.contestant, &c.other, &c.last),
    )
}

/// The reference `name` as the headline names it: with what it is, where
/// that is not plain from its name.
fn reference_name(kind: Reference, name: &str) -> String {
    match kind {
        Reference::SimulatedKernel => format!("{name}, {SIMULATED_KERNEL_WORDS}"),
        Reference::NearestRival => {
            format!("{name}, the nearest rival (the other allocator with the smallest peak)")
        }
        Reference::ZsmemConfiguration if name == ZSMEM_CLASSES => format!(
            "{name} (zsmem placing by size class, as zsmalloc does; zsmem places by log, the \
             page store's default)"
        ),
        _ => name.to_string(),
    }
}

/// Why the reference is `name` when it is not the kernel's zram.
fn reference_note(kind: Reference, name: &str) -> Option<String> {
    let absent = "The kernel's zram is not among these runs (not asked for, or skipped: see the \
                  skipped contestants)";
    match kind {
        Reference::KernelZram | Reference::None => None,
        Reference::SimulatedKernel => Some(format!(
            "{absent}, so the figures are relative to its allocator simulated in userspace, \
             {name} (the kernel's size classes, chain lengths and class merging, as zsmem's \
             kernel() configuration reproduces them)."
        )),
        Reference::NearestRival => Some(format!(
            "{absent}, nor its simulation in userspace ({}), so the figures are relative to \
             the nearest rival, {name}.",
            SIMULATED_KERNEL.join(", ")
        )),
        Reference::ZsmemConfiguration => Some(format!(
            "{absent}, nor any other allocator, so the figures are relative to another of \
             zsmem's configurations, {name}."
        )),
    }
}

/// The note that `plain` (the kernel's zram, or its simulation) ran
/// uncompacted while zsmem compacts as it frees.
fn never_compacted(plain: &str, compacted: &str) -> String {
    let why = if KERNEL.contains(&plain) {
        "the kernel compacts a zram device only when asked"
    } else {
        "it runs with compaction off, as the kernel's zram does until asked"
    };
    format!(
        "{plain} was never compacted in this run ({why}), while zsmem compacts as it frees: \
         add {compacted} (compacted after every step) for a like-for-like reference."
    )
}

/// The verdict of `runs`.
pub fn verdict_of(runs: &[RunResult]) -> Verdict {
    let mut v = Verdict {
        tie_threshold: TIE_THRESHOLD,
        ..Verdict::default()
    };
    let Some(z) = runs.iter().position(|r| r.contestant == ZSMEM) else {
        v.text.push(
            "zsmem did not run, so there is no verdict about it; the summary ranks the \
             contestants that did by their peak all-in memory."
                .into(),
        );
        return v;
    };
    v.zsmem_ran = true;
    let zs = &runs[z];
    let (kind, refs) = reference_runs(runs);
    v.reference = kind;
    v.kernel_ran = kind == Reference::KernelZram;
    v.references = refs
        .iter()
        .filter(|&&i| i != z)
        .filter_map(|&i| compare(zs, &runs[i]))
        .collect();
    v.rival = nearest_rival(runs).and_then(|i| compare(zs, &runs[i]));
    v.classes = runs
        .iter()
        .find(|r| r.contestant == ZSMEM_CLASSES)
        .and_then(|r| compare(zs, r));

    if v.references.is_empty() {
        v.text
            .push("zsmem ran alone: there is nothing to compare it with.".into());
    }
    for c in &v.references {
        v.text.push(format!(
            "Against {}: {}",
            reference_name(kind, &c.other),
            comparison_words(c)
        ));
    }
    if let Some(c) = v.references.first()
        && let Some(why) = reference_note(kind, &c.other)
    {
        v.text.push(why);
    }
    let ran = |name: &str| runs.iter().any(|r| r.contestant == name);
    for (plain, compacted) in [
        (KERNEL[0], KERNEL[1]),
        (SIMULATED_KERNEL[1], SIMULATED_KERNEL[0]),
    ] {
        if ran(plain) && !ran(compacted) && v.references.iter().any(|c| c.other == plain) {
            v.text.push(never_compacted(plain, compacted));
        }
    }
    if let Some(r) = &v.rival
        && kind != Reference::NearestRival
    {
        if v.references.iter().any(|c| c.other == r.other) {
            v.text.push(format!(
                "{} is also the nearest rival: the other allocator with the smallest peak.",
                r.other
            ));
        } else {
            v.text.push(format!(
                "Against the nearest rival, {} (the other allocator with the smallest \
                 peak): {}",
                r.other,
                comparison_words(r)
            ));
        }
    }
    if let Some(c) = &v.classes
        && !v.references.iter().any(|r| r.other == c.other)
    {
        v.text.push(format!(
            "Against {}: {}",
            reference_name(Reference::ZsmemConfiguration, &c.other),
            comparison_words(c)
        ));
    }
    v
}

/// The verdict section of the report, as HTML.
pub(super) fn verdict_html(out: &mut String, v: &Verdict) {
    out.push_str("<section id=\"verdict\">\n<h2>Verdict</h2>\n");
    for p in &v.text {
        let _ = writeln!(out, "<p class=\"verdict\">{}</p>", esc(p));
    }
    let _ = writeln!(
        out,
        "<p class=\"note\">{}</p>\n</section>",
        esc(VERDICT_NOTE)
    );
}

/// What the verdict's words mean, under it in the report and the terminal.
pub const VERDICT_NOTE: &str = "All-in memory counts everything held for the data, the same \
way for every contestant: measured where the contestant's memory can be read, estimated from \
published structure sizes where it cannot, each estimate marked (est.) in the all-in terms: for \
zsmem, its peers and the malloc baselines the page tables mapping their pool or heap (8 bytes a \
4 KiB page; the kernel's pool pages sit in its direct map and need none); for the kernel's \
zram its table, a zs_handle per object and a struct zspage per zspage. The verdict is about \
memory; CPU and latency are in the tables. At the peak: each one's highest all-in over the \
run. Step by step: the steps where both hold data, the final compaction left out. A tie: a \
difference under 0.1%, or, with rounds, one whose rounds do not all lie on the same side of \
that (the range over the rounds is given).";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contestants::Figures;
    use crate::workloads::untar_rm::Latencies;
    use std::time::Duration;

    /// A run of one round, one step a figure.
    fn run(name: &str, all_in: &[u64]) -> RunResult {
        rounds(name, &[all_in])
    }

    /// A run of as many rounds as `per_round` has entries.
    fn rounds(name: &str, per_round: &[&[u64]]) -> RunResult {
        RunResult {
            contestant: name.into(),
            config: String::new(),
            steps: per_round
                .iter()
                .enumerate()
                .flat_map(|(r, all_in)| {
                    all_in.iter().enumerate().map(move |(i, &a)| Step {
                        round: r + 1,
                        label: format!("s{i}"),
                        figures: Figures {
                            compr: 100,
                            all_in: a,
                            ..Figures::default()
                        },
                    })
                })
                .collect(),
            latency: Latencies::default(),
            wall: Duration::ZERO,
        }
    }

    fn text(runs: &[RunResult]) -> String {
        verdict_of(runs).text.join("\n")
    }

    #[test]
    fn zsmem_winning_everywhere() {
        let runs = [
            run("zsmem", &[90, 180]),
            run("kernel-zram", &[100, 200]),
            run("kernel-zram-compact", &[95, 190]),
            run("system", &[700, 1400]),
        ];
        let c = compare(&runs[0], &runs[1]).unwrap();
        assert_eq!((c.steps.steps, c.steps.less), (2, 2));
        assert!((c.peak.saving - 0.1).abs() < 1e-9);
        assert_eq!(c.peak.call, Call::Less);
        let t = text(&runs);
        assert!(t.contains("zsmem holds 10.0% less than kernel-zram"), "{t}");
        assert!(t.contains("after every one of the 2 steps"), "{t}");
        assert!(
            t.contains("zsmem holds 5.3% less than kernel-zram-compact"),
            "{t}"
        );
        assert!(
            t.contains("kernel-zram-compact is also the nearest rival"),
            "{t}"
        );
    }

    /// The default run's case: glibc's peak equals zsmem's, and glibc
    /// holds more at every later step: a tie at the peak, not "system
    /// beats zsmem".
    #[test]
    fn a_tie_at_the_peak_is_called_a_tie() {
        let mib = 1u64 << 20;
        let peak = 11_775 * mib / 100;
        let runs = [
            run("zsmem", &[peak, 90 * mib, 60 * mib, 30 * mib]),
            run("kernel-zram", &[130 * mib, 100 * mib, 70 * mib, 40 * mib]),
            run("system", &[peak, 95 * mib, 65 * mib, 35 * mib]),
        ];
        let v = verdict_of(&runs);
        let rival = v.rival.as_ref().unwrap();
        assert_eq!(rival.other, "system");
        assert_eq!(rival.peak.call, Call::Same);
        assert_eq!(
            (rival.steps.less, rival.steps.same, rival.steps.more),
            (3, 1, 0)
        );
        assert_eq!(rival.last.call, Call::Less);
        let t = v.text.join("\n");
        assert!(!t.contains("beats"), "{t}");
        assert!(
            t.contains("zsmem and system tie (117.75 vs 117.75 MiB"),
            "{t}"
        );
        assert!(t.contains("under the 0.1% a tie allows"), "{t}");
        assert!(
            t.contains("zsmem holds less after 3 and the same after 1 of the 4 steps"),
            "{t}"
        );
        // A difference under the threshold is a tie too; over it, not.
        let runs = [run("zsmem", &[99_950]), run("system", &[100_000])];
        assert_eq!(verdict_of(&runs).references[0].peak.call, Call::Same);
        let runs = [run("zsmem", &[99_800]), run("system", &[100_000])];
        assert_eq!(verdict_of(&runs).references[0].peak.call, Call::Less);
    }

    /// Less at the peak and more at some steps: each figure says which
    /// measure it is, so "6.4% less" and "6.9% more" no longer read as two
    /// answers to one question.
    #[test]
    fn mixed_steps_name_their_measure() {
        let runs = [
            run("zsmem", &[936, 1069, 500]),
            run("kernel-zram", &[1000, 1000, 520]),
        ];
        let v = verdict_of(&runs);
        let c = &v.references[0];
        assert_eq!(c.peak.call, Call::More);
        assert_eq!((c.steps.less, c.steps.same, c.steps.more), (2, 0, 1));
        assert_eq!(c.last.call, Call::Less);
        let t = v.text.join("\n");
        assert!(
            t.contains("At the peak, zsmem holds 6.9% more than kernel-zram ("),
            "{t}"
        );
        assert!(
            t.contains("Step by step, zsmem holds less after 2 and more after 1 of the 3 steps (from 6.9% more to 6.4% less)"),
            "{t}"
        );
        assert!(
            t.contains("After the last step, zsmem holds 3.8% less than kernel-zram"),
            "{t}"
        );
    }

    #[test]
    fn rounds_give_the_spread() {
        // Every round less by more than the threshold: less, with the range.
        let runs = [
            rounds("zsmem", &[&[90, 50], &[95, 50]]),
            rounds("kernel-zram", &[&[100, 60], &[100, 60]]),
        ];
        let c = &verdict_of(&runs).references[0];
        assert_eq!(c.peak.per_round.len(), 2);
        assert_eq!(c.peak.call, Call::Less);
        let t = text(&runs);
        assert!(
            t.contains("over 2 rounds from 5.0% less to 10.0% less"),
            "{t}"
        );
        assert!(t.contains("16.7% less in each of the 2 rounds"), "{t}");
        // The rounds disagree: a tie, though the whole run's peaks differ.
        let runs = [
            rounds("zsmem", &[&[90, 50], &[105, 50]]),
            rounds("kernel-zram", &[&[100, 60], &[100, 60]]),
        ];
        let c = &verdict_of(&runs).references[0];
        assert_eq!(c.peak.call, Call::Same);
        assert!((c.peak.saving - -0.05).abs() < 1e-9);
        let t = text(&runs);
        assert!(t.contains("within the spread over the rounds"), "{t}");
        assert!(
            t.contains("over 2 rounds from 5.0% more to 10.0% less"),
            "{t}"
        );
    }

    #[test]
    fn class_placement_is_set_beside_zsmem_and_is_no_rival() {
        let runs = [
            run("zsmem", &[90, 150]),
            run("zsmem-classes", &[100, 200]),
            run("kernel-zram", &[300, 400]),
        ];
        let v = verdict_of(&runs);
        assert_eq!(v.classes.as_ref().unwrap().peak.call, Call::Less);
        assert_eq!(v.rival.as_ref().unwrap().other, "kernel-zram");
        let t = v.text.join("\n");
        assert!(
            t.contains("Against zsmem-classes (zsmem placing by size class"),
            "{t}"
        );
        assert!(
            t.contains("zsmem holds 25.0% less than zsmem-classes"),
            "{t}"
        );
    }

    #[test]
    fn an_uncompacted_kernel_alone_is_said_to_be_so() {
        let alone = [run("zsmem", &[100]), run("kernel-zram", &[120])];
        assert!(text(&alone).contains("never compacted"), "{}", text(&alone));
        let both = [
            run("zsmem", &[100]),
            run("kernel-zram", &[120]),
            run("kernel-zram-compact", &[110]),
        ];
        assert!(!text(&both).contains("never compacted"), "{}", text(&both));
        assert_eq!(verdict_of(&both).references.len(), 2);
    }

    #[test]
    fn zsmem_losing_is_said() {
        let runs = [run("kernel-zram", &[100, 200]), run("zsmem", &[110, 220])];
        let t = text(&runs);
        assert!(t.contains("zsmem holds 10.0% more than kernel-zram"), "{t}");
        assert!(t.contains("more after every one of the 2 steps"), "{t}");
    }

    #[test]
    fn without_the_kernel_or_its_simulation_the_nearest_rival_is_the_reference() {
        let runs = [run("jemalloc", &[300]), run("zsmem", &[100])];
        assert_eq!(reference_runs(&runs), (Reference::NearestRival, vec![0]));
        let t = text(&runs);
        assert!(t.contains("is not among these runs"), "{t}");
        assert!(t.contains("Against jemalloc, the nearest rival"), "{t}");
        // Said once: the rival is the reference.
        assert_eq!(t.matches("nearest rival").count(), 2, "{t}");
        // Another allocator, not one of zsmem's configurations, whatever
        // the order (zsmem-classes was the headline, printed twice).
        let runs = [
            run("zsmem", &[100]),
            run("zsmem-classes", &[110]),
            run("system", &[120]),
        ];
        assert_eq!(references(&runs), vec![2]);
        let t = text(&runs);
        assert_eq!(t.matches("Against zsmem-classes").count(), 1, "{t}");
        // Only zsmem's configurations: one of them, for want of another,
        // said once.
        let only = [run("zsmem", &[1]), run("zsmem-classes", &[1])];
        assert_eq!(
            reference_runs(&only),
            (Reference::ZsmemConfiguration, vec![1])
        );
        assert_eq!(text(&only).matches("Against zsmem-classes").count(), 1);
        assert!(text(&[run("kernel-zram", &[1])]).contains("zsmem did not run"));
        assert!(text(&[run("zsmem", &[1])]).contains("ran alone"));
        assert_eq!(
            reference_runs(&[run("zsmem", &[1])]),
            (Reference::None, vec![])
        );
        let runs = [run("zsmem", &[100]), run("system", &[700])];
        assert_eq!(references(&runs), vec![1]);
        let t = text(&runs);
        assert!(t.contains("85.7% less"), "{t}");
        assert!(t.contains("relative to the nearest rival, system"), "{t}");
        // No shared step with data: no comparison, no panic.
        let runs = [run("zsmem", &[]), run("system", &[700])];
        assert!(verdict_of(&runs).references.is_empty());
    }

    /// Every order of the same runs.
    fn orders(runs: &[RunResult]) -> Vec<Vec<RunResult>> {
        (0..runs.len())
            .map(|k| {
                let mut v = runs.to_vec();
                v.rotate_left(k);
                v
            })
            .chain(std::iter::once(runs.iter().rev().cloned().collect()))
            .collect()
    }

    /// The review's case: zbud listed first made it the headline (26.7%
    /// less than zbud, the worst in the table, against 5.9% less than the
    /// nearest rival). The order of the runs no longer changes it.
    #[test]
    fn the_order_of_the_runs_does_not_change_the_headline() {
        let runs = [
            run("zbud", &[1700, 900]),
            run("zsmem", &[1248, 600]),
            run("zsmem-classes", &[1260, 610]),
            run("z3fold", &[1500, 800]),
            run("system", &[1326, 650]),
        ];
        for order in orders(&runs) {
            let (kind, refs) = reference_runs(&order);
            assert_eq!(kind, Reference::NearestRival);
            assert_eq!(order[refs[0]].contestant, "system");
            let v = verdict_of(&order);
            assert!(
                v.text[0].starts_with("Against system, the nearest rival"),
                "{:?}",
                v.text
            );
            assert!(!v.text.join("\n").contains("than zbud"), "{:?}", v.text);
        }
    }

    /// Without the kernel's zram (no root), its allocator simulated in
    /// userspace is the reference: compacted if it ran, else as it is;
    /// listed anywhere, and never ahead of the kernel's zram.
    #[test]
    fn the_simulated_kernel_stands_in_for_the_kernels_zram() {
        let runs = [
            run("system", &[1180]),
            run("zsmem-kernel", &[1240]),
            run("zsmem", &[1178]),
            run("zsmem-kernel-compact", &[1239]),
        ];
        for order in orders(&runs) {
            let (kind, refs) = reference_runs(&order);
            assert_eq!(kind, Reference::SimulatedKernel);
            assert_eq!(refs.len(), 1);
            assert_eq!(order[refs[0]].contestant, "zsmem-kernel-compact");
            let v = verdict_of(&order);
            assert_eq!(v.reference, Reference::SimulatedKernel);
            assert!(!v.kernel_ran);
            assert!(
                v.text[0].starts_with(
                    "Against zsmem-kernel-compact, the kernel's allocator simulated in \
                     userspace (zsmem's kernel() configuration; kernel-zram needs root): At \
                     the peak, zsmem holds 4.9% less than zsmem-kernel-compact"
                ),
                "{:?}",
                v.text
            );
            let t = v.text.join("\n");
            // The nearest rival is still given, after the reference.
            assert!(t.contains("Against the nearest rival, system"), "{t}");
            assert!(!t.contains("never compacted"), "{t}");
        }
        // Uncompacted alone: the reference, and said to be uncompacted.
        let runs = [
            run("system", &[1180]),
            run("zsmem", &[1178]),
            run("zsmem-kernel", &[1240]),
        ];
        assert_eq!(reference_runs(&runs), (Reference::SimulatedKernel, vec![2]));
        let t = text(&runs);
        assert!(
            t.contains("zsmem-kernel was never compacted in this run")
                && t.contains("add zsmem-kernel-compact"),
            "{t}"
        );
        // The kernel's zram, when it ran, is the reference, not its
        // simulation.
        let runs = [
            run("zsmem-kernel-compact", &[1239]),
            run("zsmem", &[1178]),
            run("kernel-zram-compact", &[1300]),
        ];
        assert_eq!(reference_runs(&runs), (Reference::KernelZram, vec![2]));
        assert!(!text(&runs).contains("simulated"), "{}", text(&runs));
    }

    #[test]
    fn the_verdict_serializes() {
        let runs = [run("zsmem", &[90]), run("kernel-zram", &[100])];
        let j = serde_json::to_value(verdict_of(&runs)).unwrap();
        assert_eq!(j["references"][0]["peak"]["call"], "less");
        assert_eq!(j["references"][0]["other"], "kernel-zram");
        assert_eq!(j["reference"], "kernel_zram");
        let runs = [run("zsmem", &[90]), run("zsmem-kernel", &[100])];
        let j = serde_json::to_value(verdict_of(&runs)).unwrap();
        assert_eq!(j["reference"], "simulated_kernel");
        assert_eq!(j["references"][0]["other"], "zsmem-kernel");
        assert!(j["text"].as_array().is_some_and(|t| !t.is_empty()));
    }
}
