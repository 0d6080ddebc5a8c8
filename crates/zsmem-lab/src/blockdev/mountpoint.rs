//! Taking a directory to mount on: exclusively, and only if it is empty.
//!
//! Two processes checking a directory for emptiness and then mounting on
//! it could both pass the check and stack their mounts. So the directory
//! is opened and locked first (`flock(LOCK_EX | LOCK_NB)` on the
//! directory itself), checked through that descriptor, and the lock is
//! held until the mount made on it is gone. A second taker opening the
//! directory before the mount finds the lock taken; one opening it after
//! reaches the mounted filesystem's root, which is not empty (ext4 has
//! `lost+found`). The lock goes with the process (a `kill -9` leaves no
//! stale lock).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use super::error::BlockDevError;
use super::mount::mounted_at;

/// A directory taken to mount on; the lock is released on drop.
#[derive(Debug)]
pub struct MountPoint {
    dir: PathBuf,
    _lock: File,
}

impl MountPoint {
    /// Takes `dir`, an existing empty directory no one else has taken.
    pub fn take(dir: &Path) -> Result<MountPoint, BlockDevError> {
        let usage = |why: String| BlockDevError::Usage(format!("{}: {why}", dir.display()));
        let f = File::open(dir).map_err(|e| usage(e.to_string()))?;
        let meta = f.metadata().map_err(|e| usage(e.to_string()))?;
        if !meta.is_dir() {
            return Err(usage("not a directory".into()));
        }
        // SAFETY: `f` is an open descriptor for the call's duration.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            return Err(if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                usage("taken by another zsmem disk (or lab run) mounting there; one disk per directory".into())
            } else {
                usage(format!("locking it: {e}"))
            });
        }
        // Read through the locked descriptor: the directory locked is the
        // directory checked, whatever is mounted at the path meanwhile.
        let through = format!("/proc/self/fd/{}", f.as_raw_fd());
        let mut entries = std::fs::read_dir(&through).map_err(|e| usage(e.to_string()))?;
        if entries.next().is_some() {
            let on = mounted_at(dir)
                .map(|m| format!(" ({} {} is mounted there)", m.fstype, m.source))
                .unwrap_or_default();
            return Err(usage(format!("not an empty directory{on}")));
        }
        Ok(MountPoint {
            dir: dir.to_path_buf(),
            _lock: f,
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}
