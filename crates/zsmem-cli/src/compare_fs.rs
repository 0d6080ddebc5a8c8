//! `zsmem compare --fs ext4`: the workload written into ext4 on each
//! contestant's block device (a FUSE file through a loop device, or the
//! kernel's zram device itself), as the reference ran it.

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

/// The ext4 workload with the page workload's rounds and removals.
pub fn workload(work: &UntarRm) -> Ext4UntarRm {
    Ext4UntarRm {
        rounds: work.rounds,
        dirs_to_remove: work.dirs_to_remove,
        remove: work.remove.clone(),
        final_compact: work.final_compact,
        ..Ext4UntarRm::default()
    }
}

/// Runs contestant `name` with ext4 on it; `Ok(Err(reason))` when it is
/// skipped (no root, FUSE, loop devices or zram here).
pub fn run_one(
    name: &str,
    codec: Codec,
    tree: &FileTree,
    work: &Ext4UntarRm,
    kernel_algorithm: &str,
    progress: impl FnMut(u64),
) -> CliResult<Result<RunResult, String>> {
    let bytes = device_bytes(tree);
    let made = if name.starts_with("kernel-zram") {
        if name != "kernel-zram" {
            return Ok(Err(
                "with --fs, compaction after every step is not offered; use kernel-zram".into(),
            ));
        }
        FsContestant::on_kernel_zram(name, kernel_algorithm, bytes)
    } else {
        if let Some(why) = unavailable_reason(true) {
            return Ok(Err(why));
        }
        let owned = name.to_string();
        let slots = (bytes / 4096) as usize;
        FsContestant::on_device_file(bytes, move || crate::compare::make(&owned, codec, slots))
    };
    let mut c = match made {
        Ok(c) => c,
        Err(BlockDevError::Unavailable(why)) => return Ok(Err(why)),
        Err(e) => return Err(CliError::Usage(format!("{name}: {e}"))),
    };
    let r = work
        .run(tree, &mut c, progress)
        .map_err(|e| CliError::Usage(format!("{name} (ext4): {e}")))?;
    Ok(Ok(r))
}
