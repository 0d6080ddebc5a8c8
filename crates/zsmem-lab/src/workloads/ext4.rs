//! The untar/rm workload as the reference ran it (004-afmalloc.txt): ext4
//! mounted with discard on the contestant's block device, the tree's files
//! written into it, then the largest top-level directories removed one by
//! one (`rm -rf`), then the rest; rounds of that.
//!
//! After each step: `syncfs` and `sync` (the journal commits; ext4,
//! mounted with discard, then discards the freed blocks from a worker),
//! then the contestant's figures are read until they and the device's
//! discard counters have stayed the same for five seconds. Caches are not dropped: the page cache holds files, not
//! the device's pages, and the figures are the device's. ext4's metadata,
//! journal and block placement are part of what the device stores, as in
//! the reference. Unlike [`super::untar_rm`], freed blocks are reused
//! where ext4 chooses, so rounds need not repeat exactly.

use std::collections::HashSet;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::untar_rm::{RunResult, Step, dirs_to_remove};
use crate::blockdev::{BlockDevError, FsContestant};
use crate::contestants::Figures;
use crate::corpus::{FileTree, PAGE_SIZE};

/// Parameters of the ext4 workload.
#[derive(Clone, Debug, Serialize)]
pub struct Ext4UntarRm {
    /// Rounds (the reference's churn used 10).
    pub rounds: usize,
    /// Top-level directories removed one by one before the rest (5).
    pub dirs_to_remove: usize,
    /// Remove these top-level directories, in this order, instead of the
    /// largest ones.
    pub remove: Option<Vec<String>>,
    /// Every n-th file is read back from the device and checked (0: none).
    pub verify_every: usize,
    /// Compact at the very end, as the reference's last line does.
    pub final_compact: bool,
    /// Interval between two readings of the figures while settling.
    pub poll: Duration,
    /// How long the figures and the device's discard counters must stay the same
    /// for a step to be settled (longer than ext4's pauses between discard
    /// batches, see `settle`).
    pub quiet: Duration,
    /// Longest wait for a step to settle.
    pub settle_max: Duration,
}

impl Default for Ext4UntarRm {
    fn default() -> Self {
        Ext4UntarRm {
            rounds: 1,
            dirs_to_remove: 5,
            remove: None,
            verify_every: 8,
            final_compact: true,
            poll: Duration::from_millis(250),
            quiet: Duration::from_secs(5),
            settle_max: Duration::from_secs(600),
        }
    }
}

/// The device size for `tree`: twice its pages (ext4 spreads files over
/// its block groups and keeps room for metadata and the journal) plus 256
/// MiB, in whole MiB.
pub fn device_bytes(tree: &FileTree) -> u64 {
    let data = (tree.total_pages() * PAGE_SIZE) as u64;
    (data * 2 + (256 << 20)).div_ceil(1 << 20) << 20
}

/// `rel` as a relative path of plain components, or an error naming it.
fn safe_relative(rel: &str) -> Result<&Path, BlockDevError> {
    let p = Path::new(rel);
    if rel.is_empty() || !p.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(BlockDevError::Usage(format!(
            "the input's path {} is not a plain relative path",
            crate::text::shown(rel)
        )));
    }
    Ok(p)
}

fn io_err(what: &str, p: &Path) -> impl FnOnce(std::io::Error) -> BlockDevError {
    let what = format!("{what} {}", p.display());
    move |e| BlockDevError::io(what, e)
}

/// The same memory figures: what settling waits for.
fn same(a: &Figures, b: &Figures) -> bool {
    (a.orig, a.compr, a.pool, a.same_pages) == (b.orig, b.compr, b.pool, b.same_pages)
}

impl Ext4UntarRm {
    /// Sync, then read the figures until they, and the block device's
    /// discard counters, have not changed for [`Ext4UntarRm::quiet`]. ext4 mounted
    /// with discard discards freed blocks from a worker after the journal
    /// commits, in batches with pauses between them: on zram, after `rm -rf
    /// drivers` of linux-6.1 and a `sync`, the stored data falls for about
    /// three seconds, with a plateau of half a second on the way. Gives up
    /// waiting after [`Ext4UntarRm::settle_max`], saying so.
    fn settle(&self, c: &mut FsContestant, label: &str) -> Result<Figures, BlockDevError> {
        c.sync()?;
        let start = Instant::now();
        let mut last = (c.figures()?, c.discard_counters());
        let mut quiet_since = Instant::now();
        while quiet_since.elapsed() < self.quiet {
            if start.elapsed() > self.settle_max {
                crate::blockdev::error::warn(format_args!(
                    "{}: {label}: still changing after {:?}; figures taken now",
                    c.name(),
                    self.settle_max
                ));
                break;
            }
            std::thread::sleep(self.poll);
            let now = (c.figures()?, c.discard_counters());
            if !same(&now.0, &last.0) || now.1 != last.1 {
                quiet_since = Instant::now();
                c.sync()?;
            }
            last = now;
        }
        Ok(last.0)
    }

    fn untar(
        &self,
        tree: &FileTree,
        root: &Path,
        done: &mut u64,
        progress: &mut impl FnMut(u64),
    ) -> Result<(), BlockDevError> {
        let mut made: HashSet<PathBuf> = HashSet::new();
        for f in &tree.files {
            let path = root.join(safe_relative(f.path())?);
            if let Some(parent) = path.parent()
                && !made.contains(parent)
            {
                std::fs::create_dir_all(parent).map_err(io_err("creating", parent))?;
                made.insert(parent.to_path_buf());
            }
            std::fs::write(&path, f.data()).map_err(io_err("writing", &path))?;
            let before = *done;
            *done += f.page_count() as u64;
            if before / 4096 != *done / 4096 {
                progress(*done);
            }
        }
        Ok(())
    }

    /// Reads every n-th file back from the device: its cached pages are
    /// dropped first (they are clean after a sync), so the bytes come from
    /// the contestant.
    fn verify(&self, tree: &FileTree, root: &Path, name: &str) -> Result<(), BlockDevError> {
        if self.verify_every == 0 {
            return Ok(());
        }
        let mut buf = Vec::new();
        for f in tree.files.iter().step_by(self.verify_every) {
            let path = root.join(safe_relative(f.path())?);
            let mut file = std::fs::File::open(&path).map_err(io_err("opening", &path))?;
            // SAFETY: `file` is open for the call; the advice has no
            // memory-safety effect.
            unsafe {
                libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
            }
            buf.clear();
            file.read_to_end(&mut buf)
                .map_err(io_err("reading back", &path))?;
            if buf != f.data() {
                return Err(BlockDevError::Contestant(format!(
                    "{name} returned wrong data for {}",
                    path.display()
                )));
            }
        }
        Ok(())
    }

    /// Run the workload on `c`. `progress(pages_written)` is called now
    /// and then with the pages written so far over all rounds.
    pub fn run(
        &self,
        tree: &FileTree,
        c: &mut FsContestant,
        mut progress: impl FnMut(u64),
    ) -> Result<RunResult, BlockDevError> {
        let start = Instant::now();
        let root = c.dir().to_path_buf();
        let dirs = dirs_to_remove(tree, self.remove.as_deref(), self.dirs_to_remove);
        for d in &dirs {
            safe_relative(d)?;
        }
        let mut steps = Vec::new();
        let mut done = 0u64;
        for round in 1..=self.rounds {
            self.untar(tree, &root, &mut done, &mut progress)?;
            let figures = self.settle(c, "untar")?;
            self.verify(tree, &root, c.name())?;
            steps.push(Step {
                round,
                label: "untar".into(),
                figures,
            });
            for d in &dirs {
                let p = root.join(d);
                if p.exists() {
                    std::fs::remove_dir_all(&p).map_err(io_err("removing", &p))?;
                }
                let label = format!("-{d}");
                let figures = self.settle(c, &label)?;
                steps.push(Step {
                    round,
                    label,
                    figures,
                });
            }
            for entry in std::fs::read_dir(&root).map_err(io_err("listing", &root))? {
                let entry = entry.map_err(io_err("listing", &root))?;
                if entry.file_name() == "lost+found" {
                    continue;
                }
                let p = entry.path();
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                if is_dir {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_file(&p)
                }
                .map_err(io_err("removing", &p))?;
            }
            steps.push(Step {
                round,
                label: "-rest".into(),
                figures: self.settle(c, "-rest")?,
            });
        }
        if self.final_compact {
            c.compact()?;
            steps.push(Step {
                round: self.rounds,
                label: "compact".into(),
                figures: self.settle(c, "compact")?,
            });
        }
        Ok(RunResult {
            contestant: c.name().to_string(),
            config: c.config().to_string(),
            steps,
            latency: c.latencies()?,
            wall: start.elapsed(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::FileEntry;

    #[test]
    fn only_plain_relative_paths_are_written() {
        for bad in ["", "/etc/passwd", "a/../../b", "./a", "a/./b/.."] {
            assert!(safe_relative(bad).is_err(), "{bad:?}");
        }
        assert!(safe_relative("drivers/net/x.c").is_ok());
    }

    #[test]
    fn the_device_has_room_for_the_tree_twice() {
        let tree = FileTree::new(vec![FileEntry::new("a/b", vec![1; 10_000])]);
        assert_eq!(device_bytes(&tree), (256 << 20) + (1 << 20));
        assert!(device_bytes(&tree).is_multiple_of(4096));
    }
}
