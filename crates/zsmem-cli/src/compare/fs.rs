//! `zsmem compare --fs ext4`: the workload written into ext4 on each
//! contestant's block device (a FUSE file through a loop device, or the
//! kernel's zram device itself), as the reference ran it.

use indicatif::ProgressBar;
use zsmem::Codec;
use zsmem_lab::blockdev::{BlockDevError, FsContestant, unavailable_reason};
use zsmem_lab::corpus::FileTree;
use zsmem_lab::workloads::ext4::{Ext4UntarRm, device_bytes};
use zsmem_lab::workloads::untar_rm::{RunResult, UntarRm};

use crate::{CliError, CliResult};

/// The filesystems `--fs` takes.
pub const FILESYSTEMS: &[&str] = &["ext4"];

/// Checks `--fs`.
pub fn check_fs(fs: &str) -> CliResult {
    if FILESYSTEMS.contains(&fs) {
        Ok(())
    } else {
        Err(CliError::Usage(format!(
            "unknown filesystem `{}`: use {}",
            zsmem_lab::text::shown(fs),
            FILESYSTEMS.join(", ")
        )))
    }
}

/// What `--fs ext4` runs on each contestant.
pub struct FsRun {
    codec: Codec,
    kernel_algorithm: &'static str,
    work: Ext4UntarRm,
    /// Pages written over all rounds, for the progress bar.
    pages: u64,
}

impl FsRun {
    /// The ext4 workload with the page workload's rounds and removals, on
    /// a tree of `pages` pages.
    pub fn new(codec: Codec, kernel_algorithm: &'static str, work: &UntarRm, pages: u64) -> FsRun {
        FsRun {
            codec,
            kernel_algorithm,
            work: Ext4UntarRm {
                rounds: work.rounds,
                dirs_to_remove: work.dirs_to_remove,
                remove: work.remove.clone(),
                final_compact: work.final_compact,
                ..Ext4UntarRm::default()
            },
            pages: pages * work.rounds as u64,
        }
    }

    /// Runs contestant `name` with ext4 on it: its result goes to
    /// `results`, or the reason it is skipped (no root, FUSE, loop devices
    /// or zram here) to `skipped`.
    pub fn contestant(
        &self,
        name: &str,
        tree: &FileTree,
        results: &mut Vec<RunResult>,
        skipped: &mut Vec<(String, String)>,
    ) -> CliResult {
        let bar = ProgressBar::new(self.pages);
        bar.set_prefix(name.to_string());
        let run = self.run_one(name, tree, |done| bar.set_position(done))?;
        bar.finish_and_clear();
        match run {
            Ok(r) => {
                eprintln!("  {name} (ext4): done in {:.1}s", r.wall.as_secs_f64());
                results.push(r);
            }
            Err(why) => {
                eprintln!("skipping {name} (ext4): {why}");
                skipped.push((name.to_string(), why));
            }
        }
        Ok(())
    }

    /// Runs contestant `name`; `Ok(Err(reason))` when it is skipped.
    fn run_one(
        &self,
        name: &str,
        tree: &FileTree,
        progress: impl FnMut(u64),
    ) -> CliResult<Result<RunResult, String>> {
        let bytes = device_bytes(tree);
        let made = if name.starts_with("kernel-zram") {
            if name != "kernel-zram" {
                return Ok(Err(
                    "with --fs, compaction after every step is not offered; use kernel-zram".into(),
                ));
            }
            FsContestant::on_kernel_zram(name, self.kernel_algorithm, bytes)
        } else {
            if let Some(why) = unavailable_reason(true) {
                return Ok(Err(why));
            }
            let (owned, codec) = (name.to_string(), self.codec);
            let slots = (bytes / 4096) as usize;
            FsContestant::on_device_file(bytes, move || {
                let cfg = zsmem_lab::contestants::PageConfig {
                    codec,
                    ..Default::default()
                };
                super::contestants::make(&owned, &cfg, slots)
            })
        };
        let mut c = match made {
            Ok(c) => c,
            Err(BlockDevError::Unavailable(why)) => return Ok(Err(why)),
            Err(e) => return Err(CliError::Usage(format!("{name}: {e}"))),
        };
        let r = self
            .work
            .run(tree, &mut c, progress)
            .map_err(|e| CliError::Usage(format!("{name} (ext4): {e}")))?;
        Ok(Ok(r))
    }
}
