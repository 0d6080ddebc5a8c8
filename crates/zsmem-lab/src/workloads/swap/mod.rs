//! Reference 001's experiment as it was run: a real program in a
//! memory-limited cgroup, its swap going to each contestant in turn.
//!
//! # The nouns
//!
//! - **The program**: a command run in its own memory cgroup, in a tmpfs
//!   the cgroup is charged for (the program writes its files there
//!   itself), timed by `wait4`'s rusage ([`program`]). The default is a
//!   real build of real C code found on the machine (zstd's library in the
//!   cargo registry, `gcc -O2 -g` on each file).
//! - **The limit**: the cgroup's `memory.limit_in_bytes` (v1) or
//!   `memory.max` (v2), set on the program's cgroup only, never the lab's
//!   ([`cgroup`]); by default half the peak the same program reached
//!   without a limit in a first run (so its working set is about twice the
//!   limit).
//! - **The target**: the contestant as the swap area in use ([`target`]):
//!   a private kernel zram device; zswap in front of a loop device over a
//!   sparse file ([`zswap`]: its parameters changed and put back); or any
//!   page contestant behind the block device `--fs ext4` serves (a FUSE
//!   file through a loop device, served by this process, outside the
//!   cgroup), with `mkswap` and `swapon` ([`area`]).
//! - **The figures** ([`results`]): wall, user and sys time; swap-outs and
//!   swap-ins (`pswpout`, `pswpin` of `/proc/vmstat`, [`procfs`]); the
//!   store's peak pool and all-in, sampled every 100 ms while the program
//!   runs; the cgroup's peak charge; the peak of memory held for the
//!   program (the cgroup's charge plus the store's all-in, read together);
//!   per-page store and load latencies where the contestant times its own
//!   calls (a served one: the kernel's zram and zswap are called from the
//!   kernel's swap path and cannot be timed here without BPF or kprobes).
//!
//! # The machine put back
//!
//! Every swap area, tmpfs, cgroup, change to zswap's parameters, loop
//! device, FUSE mount and directory is registered in
//! [`crate::blockdev::registry`] before or as it is made, and undone last
//! made first: on drop (a panic too), on `SIGINT`, `SIGTERM`, `SIGHUP` and
//! `SIGQUIT` ([`crate::blockdev::signals`]), and by a later run for a
//! process killed with `SIGKILL`. The order for one run: the cgroup (its
//! processes killed), the tmpfs, swap off, zswap's parameters, the loop
//! device, FUSE, the directory; zram devices after (their own registry).
//! Nothing this process did not make is touched.
//!
//! | module | concern |
//! |---|---|
//! | [`procfs`] | `/proc/vmstat`, `/proc/meminfo` and `/proc/swaps` parsed |
//! | [`cgroup`] | the program's memory cgroup |
//! | [`area`] | `mkswap`, `swapon`, `swapoff` |
//! | [`zswap`] | zswap's parameters, saved and put back |
//! | [`target`] | each contestant as the swap area |
//! | [`program`] | the program: the default build, running it in the cgroup, its rusage |
//! | [`results`] | a run's figures, median and range over runs |

pub mod area;
pub mod cgroup;
pub mod procfs;
pub mod program;
pub mod results;
pub mod target;
pub mod zswap;

use std::time::{Duration, Instant};

use crate::blockdev::BlockDevError;
use crate::blockdev::device::{held_dir, private_dir};
use crate::blockdev::mount::mount_tmpfs;
use crate::blockdev::registry::{self, Resource};

pub use crate::blockdev::swap_lock_busy;
pub use cgroup::MemoryCgroup;
pub use procfs::SwapCounters;
pub use program::{Outcome, Program};
pub use results::{Peaks, Spread, Summary, SwapRun, summarize};
pub use target::SwapTarget;

/// The source name of the program's tmpfs in mountinfo.
pub const TMPFS_SOURCE: &str = "zsmem-swap";

/// Why the experiment cannot run here at all, in one line, or `None`:
/// root, the cgroup memory controller, swap.
pub fn unavailable_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not running as root".into());
    }
    if let Err(why) = cgroup::controller() {
        return Some(why);
    }
    area::unavailable_reason()
}

/// The experiment's parameters.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SwapExperiment {
    /// What runs.
    pub program: Program,
    /// The program's memory limit, bytes (`None`: none, the sizing run).
    pub limit: Option<u64>,
    /// The size of the program's tmpfs, bytes (an upper bound; only what
    /// it writes is used).
    pub tmpfs_bytes: u64,
    /// How often the store's figures are read while the program runs.
    pub every: Duration,
}

impl SwapExperiment {
    /// Runs the program once with `target` as the swap area in use (`None`:
    /// no swap area of ours), then takes `target` apart (timing `swapoff`).
    /// `label` names the contestant in the result.
    pub fn run(
        &self,
        target: Option<SwapTarget>,
        label: &str,
        run: usize,
    ) -> Result<SwapRun, BlockDevError> {
        self.run_then(target, label, run, |_| ()).map(|(r, ())| r)
    }

    /// As [`SwapExperiment::run`], then calls `after` with the program's
    /// tmpfs directory once the program has exited, before the tmpfs goes:
    /// to read what the program wrote there (its own figures).
    pub fn run_then<T>(
        &self,
        mut target: Option<SwapTarget>,
        label: &str,
        run: usize,
        after: impl FnOnce(&std::path::Path) -> T,
    ) -> Result<(SwapRun, T), BlockDevError> {
        crate::blockdev::take_over()?;
        let dir = private_dir()?;
        let tmp = held_dir(&dir).join("tmp");
        std::fs::create_dir(&tmp)
            .map_err(|e| BlockDevError::io(format!("creating {}", tmp.display()), e))?;
        let options = format!("size={},mode=0755", self.tmpfs_bytes);
        let (tmpfs, ()) = registry::hold_made(|| {
            mount_tmpfs(TMPFS_SOURCE, &tmp, &options)?;
            let mount = crate::blockdev::ident::identify(&tmp, |m| {
                m.fstype == "tmpfs" && m.source == TMPFS_SOURCE
            })
            .map_err(|e| {
                BlockDevError::io(format!("identifying the tmpfs at {}", tmp.display()), e)
            })?;
            let res = Resource::Mount {
                dir: tmp.clone(),
                source: TMPFS_SOURCE.into(),
                mount,
            };
            Ok::<_, BlockDevError>((res, ()))
        })?;
        let log = held_dir(&dir).join("stderr.log");
        let cg = MemoryCgroup::create(self.limit)?;
        let mut peaks = Peaks::default();
        let mut sample_error = None;
        let before = SwapCounters::now();
        let outcome = program::run(
            &self.program,
            &tmp,
            &cg.procs_file(),
            &log,
            self.every,
            || {
                let usage = cg.usage();
                let mut store = 0;
                if let Some(t) = target.as_mut() {
                    if let Some(a) = procfs::swaps().iter().find(|a| a.path == t.device()) {
                        peaks.update_slots(a.used);
                    }
                    match t.figures() {
                        Ok(f) => {
                            store = f.all_in;
                            peaks.update(&f);
                        }
                        Err(e) => sample_error = Some(e),
                    }
                }
                if let Some(u) = usage {
                    peaks.update_held(u, store);
                }
            },
        )?;
        let kept = after(&tmp);
        let swap = SwapCounters::now().since(&before);
        let cgroup_peak = cg.peak();
        let oom_kills = cg.oom_kills();
        let limit = self.limit;
        drop(cg);
        drop(tmpfs);
        let latency = match &target {
            Some(t) => t.latencies()?,
            None => None,
        };
        let off = Instant::now();
        drop(target);
        let swapoff_s = off.elapsed().as_secs_f64();
        drop(dir);
        if let Some(e) = sample_error {
            crate::blockdev::error::warn(format_args!(
                "{label}: a reading of the store's figures failed: {e}"
            ));
        }
        let r = SwapRun {
            contestant: label.to_string(),
            run,
            outcome,
            swap,
            peaks,
            cgroup_peak,
            oom_kills,
            limit,
            swapoff_s,
            latency,
        };
        Ok((r, kept))
    }
}
