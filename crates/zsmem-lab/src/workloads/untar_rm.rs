//! The untar/rm workload of reference 004 (and its repetition, "churn").
//!
//! One round: store every page of a file tree in write order ("untar"), the
//! tree's pages of [`FileTree::page_size`] bytes, each given to the
//! contestant as one page (a large-page system's unit);
//! read back a sample of pages and check them; then delete the largest
//! top-level directories one by one, largest first (for a kernel tree:
//! drivers, arch, fs, sound, include), then the rest. After each step the
//! contestant's memory figures are taken. Slots are handed out like blocks
//! of a filesystem: a freed slot is reused by the next page stored.
//! Store, load and discard latencies go into histograms.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::contestants::{Figures, LabError, PageContestant};
use crate::corpus::{FileTree, Page};

/// Parameters of the untar/rm workload.
#[derive(Clone, Debug, Serialize)]
pub struct UntarRm {
    /// Rounds (the reference's churn experiment used 10).
    pub rounds: usize,
    /// Top-level directories deleted one by one before the rest (5).
    pub dirs_to_remove: usize,
    /// Delete these top-level directories, in this order, instead of the
    /// largest ones (the reference named drivers, arch, fs, sound, include;
    /// in linux-source-6.1 Documentation and tools are larger than fs).
    pub remove: Option<Vec<String>>,
    /// Every n-th stored page is read back and checked (0: none).
    pub verify_every: usize,
    /// Compact at the very end, as the reference's last line does.
    pub final_compact: bool,
}

impl Default for UntarRm {
    fn default() -> Self {
        UntarRm {
            rounds: 1,
            dirs_to_remove: 5,
            remove: None,
            verify_every: 8,
            final_compact: true,
        }
    }
}

/// Figures after one step.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    /// Round, from 1.
    pub round: usize,
    /// `untar`, `-<dir>`, `-rest` or `compact`.
    pub label: String,
    /// The contestant's figures.
    pub figures: Figures,
}

/// What the latencies of a run measure, the sentence printed beside every
/// latency table: the kernel's and zsmem's are not the same kind of call.
pub const LATENCY_NOTE: &str = "Latencies are not all the same measure: the kernel's zram \
(kernel-zram, kernel-zram-compact) is timed around a syscall plus O_DIRECT I/O per page \
(pwrite/pread of the zram device, a BLKDISCARD ioctl per discard), every other contestant \
around an in-process call (the malloc baselines' inside their child process, the socket round \
trip left out). Under --fs ext4 the kernel's zram has none (ext4 runs on it directly), and the \
others' are their calls from the FUSE thread serving the block device.";

/// One sentence on what the latencies of `contestant` measure.
pub fn latency_note(contestant: &str) -> String {
    let what = if contestant.starts_with("kernel-zram") {
        "a syscall plus O_DIRECT I/O per page (pwrite/pread of the zram device, a BLKDISCARD \
         ioctl per discard), kernel entry and the block layer included (none under --fs ext4, \
         where ext4 runs on the device directly)"
    } else if ["system", "jemalloc", "mimalloc"].contains(&contestant) {
        "an in-process call, timed inside the baseline's child process (the socket round trip \
         left out)"
    } else {
        "an in-process call (compression and the allocator; no syscall, no block layer)"
    };
    format!("{contestant}'s latencies are each {what}.")
}

/// Latency histograms in nanoseconds.
#[derive(Clone, Debug)]
pub struct Latencies {
    /// Per stored page.
    pub store: Histogram<u64>,
    /// Per page read back.
    pub load: Histogram<u64>,
    /// Per page discarded.
    pub discard: Histogram<u64>,
}

impl Default for Latencies {
    fn default() -> Self {
        let h = || Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
        Latencies {
            store: h(),
            load: h(),
            discard: h(),
        }
    }
}

/// Everything one contestant's run produced.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// Contestant name.
    pub contestant: String,
    /// Its configuration.
    pub config: String,
    /// Figures after each step.
    pub steps: Vec<Step>,
    /// Latencies.
    pub latency: Latencies,
    /// Time for the whole run.
    pub wall: Duration,
}

impl RunResult {
    /// Highest `pool` figure over the run.
    pub fn peak_pool(&self) -> u64 {
        self.steps.iter().map(|s| s.figures.pool).max().unwrap_or(0)
    }

    /// Highest and last overhead ratio over the steps that hold data (the
    /// final `compact` step left out): the summary's two ratios.
    pub fn overhead_ratios(&self) -> (f64, f64) {
        self.max_last(Figures::overhead_ratio)
    }

    /// Highest and last all-in ratio, `(all_in - compr) / compr`, over the
    /// same steps as [`RunResult::overhead_ratios`].
    pub fn all_in_ratios(&self) -> (f64, f64) {
        self.max_last(Figures::all_in_ratio)
    }

    fn max_last(&self, ratio: fn(&Figures) -> f64) -> (f64, f64) {
        let with_data: Vec<&Figures> = self
            .steps
            .iter()
            .filter(|s| s.figures.compr > 0 && s.label != "compact")
            .map(|s| &s.figures)
            .collect();
        let max = with_data.iter().map(|f| ratio(f)).fold(0.0, f64::max);
        let last = with_data.last().map_or(0.0, |f| ratio(f));
        (max, last)
    }

    /// Highest `all_in` figure over the run.
    pub fn peak_all_in(&self) -> u64 {
        self.steps
            .iter()
            .map(|s| s.figures.all_in)
            .max()
            .unwrap_or(0)
    }
}

fn record(h: &mut Histogram<u64>, d: Duration) {
    h.saturating_record(d.as_nanos().clamp(1, u128::from(u64::MAX)) as u64);
}

/// Slots handed out like filesystem blocks: the most recently freed first,
/// fresh ones in order when none are free.
struct Slots {
    free: Vec<u64>,
    next: u64,
}

impl Slots {
    fn take(&mut self) -> u64 {
        self.free.pop().unwrap_or_else(|| {
            self.next += 1;
            self.next - 1
        })
    }
}

/// The directories a run removes, in order: `remove` if given, else the
/// `count` largest top-level directories of `tree`.
pub fn dirs_to_remove(tree: &FileTree, remove: Option<&[String]>, count: usize) -> Vec<String> {
    match remove {
        Some(names) => names.to_vec(),
        None => tree
            .top_level_dirs()
            .into_iter()
            .take(count)
            .map(|(d, _)| d)
            .collect(),
    }
}

/// Slots a run over `tree` may use: every page once, plus room for the
/// reuse pattern (freed slots are reused first, so this is enough).
pub fn slots_needed(tree: &FileTree) -> usize {
    tree.total_pages().max(1)
}

impl UntarRm {
    /// Run the workload on one contestant. `progress(pages_done)` is called
    /// now and then with the pages stored and discarded so far over all
    /// rounds: every page is stored and discarded once a round, so the count
    /// ends at 2 x pages x rounds.
    pub fn run(
        &self,
        tree: &FileTree,
        c: &mut dyn PageContestant,
        mut progress: impl FnMut(u64),
    ) -> Result<RunResult, LabError> {
        if c.page_size() != tree.page_size() {
            return Err(LabError::Usage(format!(
                "{} stores {}-byte pages, but the tree is cut into {}-byte pages",
                c.name(),
                c.page_size(),
                tree.page_size()
            )));
        }
        let start = Instant::now();
        let mut lat = Latencies::default();
        let mut steps = Vec::new();
        let mut slots = Slots {
            free: Vec::new(),
            next: 0,
        };
        let dirs = dirs_to_remove(tree, self.remove.as_deref(), self.dirs_to_remove);
        let mut buf: Box<Page> = vec![0u8; tree.page_size()].into_boxed_slice();
        let mut done = 0u64;
        // Everything the driver needs is allocated up front, so that a
        // contestant measured by its allocator's or the process's memory
        // growth sees only its own allocations during the run.
        let mut file_slots: Vec<Vec<u64>> = tree
            .files
            .iter()
            .map(|f| Vec::with_capacity(f.page_count()))
            .collect();
        let mut deleted = vec![false; tree.files.len()];
        let mut gone: Vec<u64> = Vec::with_capacity(tree.total_pages());
        slots.free.reserve(tree.total_pages());
        let groups: Vec<(String, Vec<usize>)> = dirs
            .iter()
            .map(|d| (format!("-{d}"), tree.files_in_dir(d).collect()))
            .chain(std::iter::once((
                "-rest".to_string(),
                (0..tree.files.len()).collect(),
            )))
            .collect();
        steps.reserve(self.rounds * (groups.len() + 1) + 1);
        for round in 1..=self.rounds {
            // untar
            for (f, mine) in tree.files.iter().zip(file_slots.iter_mut()) {
                mine.clear();
                for page in f.pages() {
                    let slot = slots.take();
                    let t = Instant::now();
                    c.store(slot, page)?;
                    let d = t.elapsed();
                    record(&mut lat.store, c.op_time().unwrap_or(d));
                    mine.push(slot);
                    done += 1;
                    if done.is_multiple_of(4096) {
                        progress(done);
                    }
                }
            }
            // Read a sample back: every byte must match.
            if self.verify_every > 0 {
                let mut n = 0usize;
                for (f, mine) in tree.files.iter().zip(&file_slots) {
                    for (page, &slot) in f.pages().zip(mine) {
                        n += 1;
                        if !n.is_multiple_of(self.verify_every) {
                            continue;
                        }
                        let t = Instant::now();
                        c.load(slot, &mut buf)?;
                        let d = t.elapsed();
                        record(&mut lat.load, c.op_time().unwrap_or(d));
                        if buf[..] != page[..] {
                            return Err(LabError::Mismatch {
                                contestant: c.name().to_string(),
                                slot,
                            });
                        }
                    }
                }
            }
            steps.push(Step {
                round,
                label: "untar".into(),
                figures: c.figures()?,
            });
            // rm, largest directories first, then the rest.
            deleted.fill(false);
            for (label, files) in &groups {
                gone.clear();
                for &fi in files {
                    if !std::mem::replace(&mut deleted[fi], true) {
                        gone.extend_from_slice(&file_slots[fi]);
                    }
                }
                // One discard per page, as a filesystem's per-block discard,
                // so the latency is per page like the others.
                gone.sort_unstable();
                for &s in &gone {
                    let t = Instant::now();
                    c.discard(s, 1)?;
                    let d = t.elapsed();
                    record(&mut lat.discard, c.op_time().unwrap_or(d));
                    done += 1;
                    if done.is_multiple_of(4096) {
                        progress(done);
                    }
                }
                // Freed slots are reused first, in the order a block
                // allocator would hand them out again (lowest last = next).
                gone.reverse();
                slots.free.extend_from_slice(&gone);
                steps.push(Step {
                    round,
                    label: label.clone(),
                    figures: c.figures()?,
                });
            }
        }
        if self.final_compact {
            c.compact()?;
            steps.push(Step {
                round: self.rounds,
                label: "compact".into(),
                figures: c.figures()?,
            });
        }
        Ok(RunResult {
            contestant: c.name().to_string(),
            config: c.config(),
            steps,
            latency: lat,
            wall: start.elapsed(),
        })
    }
}
