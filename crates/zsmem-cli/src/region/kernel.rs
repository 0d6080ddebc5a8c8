//! The kernel's way to the same end, beside the region in one `zsmem
//! region` run: the same document cache in plain memory, run as a child
//! process (this binary, `zsmem region --plain-child`) in a v1 or v2
//! memory cgroup limited to the region's budget plus what the program
//! needs beyond its data, swapping to a private kernel zram device made for
//! the run.
//!
//! Everything is the swap experiment's ([`zsmem_lab::workloads::swap`]):
//! the cgroup, the zram device as swap, zswap turned off for the run and
//! put back, all registered and undone on every exit path (drop, panic,
//! `SIGINT`/`SIGTERM`/`SIGHUP`/`SIGQUIT`, and by the next run after
//! `SIGKILL`). The lab process itself is never limited.
//!
//! Memory held for the kernel's way is the cgroup's charge plus zram's
//! all-in (`mem_used_total` and the kernel's per-page and per-object
//! terms, as the lab counts kernel-zram elsewhere), read together every
//! 50 ms; its peak is reported.

use std::path::Path;
use std::time::Duration;

use zsmem_lab::blockdev::BlockDevError;
use zsmem_lab::blockdev::registry;
use zsmem_lab::workloads::swap::{Program, SwapExperiment, SwapRun, SwapTarget};

use super::cache::Outcome;
use crate::{CliError, CliResult};

/// The file the child writes its outcome to, in its tmpfs directory.
pub const RESULT_FILE: &str = "region-result.json";

/// How often memory held is read while the child runs.
const SAMPLE: Duration = Duration::from_millis(50);

/// The tmpfs the child runs in: it writes one small file there.
const TMPFS_BYTES: u64 = 16 << 20;

/// What the child is asked to do: the parent's document and request
/// arguments.
pub struct ChildArgs<'a> {
    /// `--dir`.
    pub dir: &'a Path,
    /// `--data`.
    pub data: usize,
    /// `--ops`.
    pub ops: usize,
    /// `--zipf`.
    pub zipf: f64,
    /// `--write-percent`.
    pub write_percent: u32,
}

/// Why a run of the child gave no figures.
pub enum Failed {
    /// The machine cannot run the kernel's way: the column is skipped.
    Unavailable(String),
    /// The child failed; `oom` when the OOM killer ended it (a tight
    /// memory cgroup can, at random, when reclaim finds only pages the
    /// child is faulting back in).
    Child { why: String, oom: bool },
}

/// One run of the child.
pub struct KernelRun {
    /// The child's own figures (requests served in plain memory).
    pub outcome: Outcome,
    /// The swap experiment's figures of the run: cgroup peak, memory held,
    /// swap-ins and swap-outs, the store's peaks.
    pub swap: SwapRun,
}

/// Why the kernel's way cannot run here, in one line, or `None`: the
/// machine cannot swap for it, or another zsmem run holds the machine's
/// swap (the column is then skipped with that reason: the run failed
/// outright after its zsmem column, found by a first-contact review).
pub fn unavailable_reason() -> Option<String> {
    zsmem_lab::workloads::swap::unavailable_reason()
        .or_else(zsmem_lab::workloads::swap::swap_lock_busy)
}

/// Undo what killed runs left (records whose process is gone) before
/// making anything.
pub fn reap_stale() {
    if let Err(e) = zsmem_lab::blockdev::install_signal_cleanup() {
        eprintln!("warning: {e}; the cgroup and zram device are not undone on signals");
    }
    registry::remove_stale();
    registry::undo_abandoned();
}

fn program(a: &ChildArgs) -> CliResult<Program> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Usage(format!("finding this program to run as the child: {e}")))?;
    Ok(Program::Command(vec![
        exe.to_string_lossy().into_owned(),
        "region".into(),
        "--dir".into(),
        a.dir.to_string_lossy().into_owned(),
        "--data".into(),
        a.data.to_string(),
        "--ops".into(),
        a.ops.to_string(),
        "--zipf".into(),
        a.zipf.to_string(),
        "--write-percent".into(),
        a.write_percent.to_string(),
        "--plain-child".into(),
        RESULT_FILE.into(),
    ]))
}

fn read_result(dir: &Path) -> Result<Outcome, String> {
    let p = dir.join(RESULT_FILE);
    let text = std::fs::read(&p).map_err(|e| format!("reading {}: {e}", p.display()))?;
    serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", p.display()))
}

/// Runs the child once in a cgroup limited to `limit` bytes (`None`: no
/// limit, no swap of ours: the sizing run), its swap a private zram device
/// of `zram_bytes` compressing with `algorithm` (the kernel's name).
/// `Ok(Err(_))` where the machine cannot, or the child failed (killed
/// by the OOM killer, say): a column skipped or a row failed, not an
/// error of the whole run.
pub fn run(
    a: &ChildArgs,
    limit: Option<u64>,
    algorithm: &str,
    zram_bytes: u64,
) -> CliResult<Result<KernelRun, Failed>> {
    let exp = SwapExperiment {
        program: program(a)?,
        limit,
        tmpfs_bytes: TMPFS_BYTES,
        every: SAMPLE,
    };
    let target = match limit {
        None => None,
        Some(_) => match SwapTarget::kernel_zram(algorithm, zram_bytes) {
            Ok(t) => Some(t),
            Err(BlockDevError::Unavailable(why)) => return Ok(Err(Failed::Unavailable(why))),
            Err(e) => return Err(CliError::Usage(format!("kernel zram as swap: {e}"))),
        },
    };
    let label = if limit.is_some() {
        "kernel-zram"
    } else {
        "no-limit"
    };
    let (swap, outcome) = match exp.run_then(target, label, 1, read_result) {
        Ok(r) => r,
        Err(BlockDevError::Unavailable(why)) => return Ok(Err(Failed::Unavailable(why))),
        Err(e) => return Err(CliError::Usage(format!("the plain-memory child: {e}"))),
    };
    if !swap.outcome.success {
        let oom = swap.oom_kills.is_some_and(|n| n > 0);
        let why = format!(
            "the plain-memory child failed ({}{}): {}",
            swap.outcome.status,
            if oom {
                ", killed by the OOM killer"
            } else {
                ""
            },
            swap.outcome.stderr_tail
        );
        return Ok(Err(Failed::Child { why, oom }));
    }
    let outcome = outcome.map_err(|e| CliError::Usage(format!("the child's result: {e}")))?;
    Ok(Ok(KernelRun { outcome, swap }))
}
