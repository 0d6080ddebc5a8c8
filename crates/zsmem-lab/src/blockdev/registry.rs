//! What this process made (temporary directories, FUSE mounts, loop
//! devices, ext4 and tmpfs mounts, and for the swap experiment swap areas,
//! memory cgroups and zswap's parameters), in a registry and in a record in `/run/zsmem`,
//! so that every exit path can undo it and a later run can undo what a
//! killed one left; nothing else is ever touched.
//!
//! Each resource is undone only if it is still what was made: a mount
//! point only if the recorded source (or FUSE type) is mounted there, a
//! loop device only if it is still attached to the recorded file, a
//! directory only if nothing is mounted below it, a swap area only if
//! `/proc/swaps` lists the device, a cgroup only if its directory exists
//! (its processes are killed first: they are the experiment's program),
//! zswap's parameters only where they differ from what was found.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::error::warn;
use super::loopdev;
use super::mount::{self, mounts};

/// Where the records are kept (the kernel zram contestant's directory).
pub const RECORD_DIR: &str = crate::contestants::kernel_zram::RECORD_DIR;

/// The source name of the device filesystem in mountinfo (its type is
/// `fuse`, or `fuse.zsmem` where the subtype is passed on).
pub const FUSE_SOURCE: &str = "zsmem";

/// Whether `m` is a device filesystem of this module.
fn is_device_fs(m: &mount::MountEntry) -> bool {
    (m.fstype == "fuse" || m.fstype == "fuse.zsmem") && m.source == FUSE_SOURCE
}

/// One thing this process made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Resource {
    /// A private directory (mount points inside it).
    Dir(PathBuf),
    /// The device filesystem mounted here.
    Fuse(PathBuf),
    /// A loop device attached to this file.
    Loop {
        /// `N` of `/dev/loopN`.
        number: u32,
        /// Its backing file.
        backing: PathBuf,
    },
    /// A filesystem (ext4, tmpfs) from `source` mounted at `dir`.
    Mount {
        /// The mount point.
        dir: PathBuf,
        /// The block device (for tmpfs: the source name given to mount).
        source: PathBuf,
    },
    /// A swap area enabled (`swapon`) on this block device.
    Swap(PathBuf),
    /// A memory cgroup made here (its directory).
    Cgroup(PathBuf),
    /// zswap's parameters as they were before they were changed: (name,
    /// value), put back on undo.
    Zswap(Vec<(String, String)>),
}

#[derive(Serialize, Deserialize)]
struct Record {
    pid: u32,
    start: u64,
    resources: Vec<Resource>,
}

static REGISTRY: Mutex<Vec<Resource>> = Mutex::new(Vec::new());

fn registry() -> MutexGuard<'static, Vec<Resource>> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// The start time of process `pid` in clock ticks since boot, if it runs
/// (`/proc/PID/stat` field 22), so a reused pid is not taken for the creator.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn record_path(pid: u32) -> PathBuf {
    PathBuf::from(format!("{RECORD_DIR}/blockdev.{pid}.json"))
}

/// Rewrites this process's record from the registry (removes it when empty).
fn write_record(reg: &[Resource]) {
    let pid = std::process::id();
    let path = record_path(pid);
    if reg.is_empty() {
        let _ = std::fs::remove_file(&path);
        return;
    }
    let write = || -> io::Result<()> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(RECORD_DIR)?;
        let rec = Record {
            pid,
            start: start_time(pid).unwrap_or(0),
            resources: reg.to_vec(),
        };
        let tmp = PathBuf::from(format!("{RECORD_DIR}/.blockdev.{pid}.tmp"));
        std::fs::write(&tmp, serde_json::to_vec(&rec).map_err(io::Error::other)?)?;
        std::fs::rename(&tmp, &path)
    };
    if let Err(e) = write() {
        warn(format_args!(
            "warning: no record in {RECORD_DIR} ({e}); if this process is killed, a later run cannot undo its mounts and loop devices"
        ));
    }
}

/// A resource in the registry, undone on drop.
pub struct Held {
    res: Resource,
}

impl Held {
    /// The resource.
    pub fn resource(&self) -> &Resource {
        &self.res
    }
}

/// Makes `res` with `make` and registers it, the registry locked
/// throughout, so that a signal's cleanup runs either before `make` or
/// after the registration.
pub fn hold_with<T, E>(res: Resource, make: impl FnOnce() -> Result<T, E>) -> Result<(Held, T), E> {
    let mut reg = registry();
    let made = make()?;
    reg.push(res.clone());
    write_record(&reg);
    Ok((Held { res }, made))
}

/// Registers `res`, made already (a directory).
pub fn hold(res: Resource) -> Held {
    let mut reg = registry();
    reg.push(res.clone());
    write_record(&reg);
    Held { res }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut reg = registry();
        // Gone already if the exit path's cleanup ran.
        // What could not be undone stays recorded, for a later run.
        if let Some(i) = reg.iter().position(|r| *r == self.res) {
            match undo(&self.res, true) {
                Ok(()) => {
                    reg.remove(i);
                    write_record(&reg);
                }
                Err(e) => warn(format_args!("warning: {e}")),
            }
        }
    }
}

/// Undoes one resource if it is still what was made. With `wait`, a busy
/// mount is retried for a while before it is detached lazily; without (on
/// the way to exit), at once.
fn undo(res: &Resource, wait: bool) -> Result<(), String> {
    match res {
        Resource::Mount { dir, source } => {
            let ours = mount::mounted_at(dir).is_some_and(|m| Path::new(&m.source) == source);
            if ours && !mount::unmount(dir, wait) {
                return Err(format!("{} is still mounted", dir.display()));
            }
            Ok(())
        }
        Resource::Loop { number, backing } => loopdev::detach(*number, backing, wait),
        Resource::Fuse(dir) => {
            let ours = mount::mounted_at(dir).is_some_and(|m| is_device_fs(&m));
            if ours && !mount::unmount(dir, wait) {
                return Err(format!("{} is still mounted", dir.display()));
            }
            Ok(())
        }
        Resource::Swap(device) => crate::workloads::swap::area::undo_swapon(device),
        Resource::Cgroup(dir) => crate::workloads::swap::cgroup::undo_cgroup(dir),
        Resource::Zswap(saved) => crate::workloads::swap::zswap::restore(saved),
        Resource::Dir(dir) => {
            if mounts().iter().any(|m| m.dir.starts_with(dir)) {
                return Err(format!(
                    "{} still has a mount inside; left in place",
                    dir.display()
                ));
            }
            match std::fs::remove_dir_all(dir) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    Err(format!("removing {}: {e}", dir.display()))
                }
                _ => Ok(()),
            }
        }
    }
}

/// Undoes everything this process made and has not undone, last made
/// first; the registry stays locked until the process exits (for the
/// signal path: nothing new is made after this). Returns how many.
pub(super) fn undo_all_and_hold() -> usize {
    let mut reg = registry();
    let n = reg.len();
    let mut failed = Vec::new();
    while let Some(res) = reg.pop() {
        if let Err(e) = undo(&res, false) {
            warn(format_args!("warning: {e}"));
            failed.insert(0, res);
        }
    }
    // What could not be undone stays recorded, for a later run.
    *reg = failed;
    write_record(&reg);
    std::mem::forget(reg);
    n
}

/// Undoes what processes that are gone left behind (they were killed, or
/// aborted): each record in [`RECORD_DIR`] whose creator is gone, each of
/// its resources only if still what was made. Says so on stderr; returns
/// how many records were cleared.
pub fn remove_stale() -> usize {
    let Ok(dir) = std::fs::read_dir(RECORD_DIR) else {
        return 0;
    };
    let me = std::process::id();
    let mut cleared = 0;
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("blockdev.")
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Some(rec) = std::fs::read(entry.path())
            .ok()
            .and_then(|b| serde_json::from_slice::<Record>(&b).ok())
        else {
            continue;
        };
        if start_time(pid).is_some_and(|t| t == rec.start || rec.start == 0) {
            continue; // its creator still runs
        }
        let mut ok = true;
        for res in rec.resources.iter().rev() {
            match undo(res, true) {
                Ok(()) => {}
                Err(e) => {
                    ok = false;
                    warn(format_args!(
                        "warning: left by process {pid}, which is gone: {e}"
                    ));
                }
            }
        }
        if ok {
            warn(format_args!(
                "undid the mounts and loop devices left by process {pid}, which is gone"
            ));
            let _ = std::fs::remove_file(entry.path());
            cleared += 1;
        }
    }
    cleared
}

/// How many resources the registry holds now.
pub fn live() -> usize {
    registry().len()
}
