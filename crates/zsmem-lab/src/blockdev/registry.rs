//! What this process made (temporary directories, FUSE mounts, loop
//! devices, ext4 and tmpfs mounts, and for the swap experiment swap areas,
//! memory cgroups and zswap's parameters), in a registry and in a record in `/run/zsmem`,
//! so that every exit path can undo it and a later run can undo what a
//! killed one left; nothing else is ever touched.
//!
//! Each resource is undone only if it is still what was made: a mount
//! only if the topmost mount at its directory is the recorded mount (its
//! mount ID, unique mount ID and device: [`super::ident`]), and nothing is
//! mounted on or inside it; a loop device only if it is still attached to
//! the recorded file (its device and inode: [`super::loopinfo`]); a
//! directory only if nothing is mounted below it, a swap area only if
//! `/proc/swaps` lists the device, a cgroup only if its directory exists
//! (its processes are killed first: they are the experiment's program),
//! zswap's parameters only where they differ from what was found.
//!
//! What cannot be undone stays in the registry and the record: retried by
//! [`undo_abandoned`] in this process, by every exit path, and by a later
//! run once this process is gone. A later run's [`remove_stale`] also
//! removes the kernel zram devices recorded by processes that are gone
//! (their records are the zram contestant's, in the same directory), so
//! a run that uses no zram device still reaps one left by a killed run.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::error::warn;
use super::ident::{self, MountId};
use super::loopinfo::{self, FileId};
use super::mount::mounts;

/// Where the records are kept (the kernel zram contestant's directory).
pub const RECORD_DIR: &str = crate::contestants::kernel_zram::RECORD_DIR;

/// The source name of the device filesystem in mountinfo (its type is
/// `fuse`, or `fuse.zsmem` where the subtype is passed on).
pub const FUSE_SOURCE: &str = "zsmem";

/// Whether `m` is a device filesystem of this module.
pub(super) fn is_device_fs(m: &super::mount::MountEntry) -> bool {
    (m.fstype == "fuse" || m.fstype == "fuse.zsmem") && m.source == FUSE_SOURCE
}

/// One thing this process made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Resource {
    /// A private directory (mount points inside it).
    Dir(PathBuf),
    /// The device filesystem mounted here.
    Fuse {
        /// The mount point.
        dir: PathBuf,
        /// Which mount it is.
        mount: MountId,
    },
    /// A loop device attached to this file.
    Loop {
        /// `N` of `/dev/loopN`.
        number: u32,
        /// Its backing file's path.
        backing: PathBuf,
        /// Its backing file's identity.
        #[serde(default)]
        file: FileId,
    },
    /// A filesystem (ext4, tmpfs) from `source` mounted at `dir`.
    Mount {
        /// The mount point.
        dir: PathBuf,
        /// The block device (for tmpfs: the source name given to mount).
        source: PathBuf,
        /// Which mount it is (all zero in a record without it: such a
        /// mount is never unmounted).
        #[serde(default)]
        mount: MountId,
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

/// A resource in the registry, and whether a [`Held`] still owns it
/// (else it was abandoned, or its undo failed: [`undo_abandoned`] retries).
struct Entry {
    res: Resource,
    held: bool,
}

static REGISTRY: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

fn registry() -> MutexGuard<'static, Vec<Entry>> {
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
fn write_record(reg: &[Entry]) {
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
            resources: reg.iter().map(|e| e.res.clone()).collect(),
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
    // Invariant: `Some` until `release` or `abandon` takes it.
    res: Option<Resource>,
}

impl Held {
    /// The resource.
    pub fn resource(&self) -> &Resource {
        self.res
            .as_ref()
            .expect("a Held keeps its resource while it lives")
    }

    /// Undoes the resource now; `Err` says why it is left (it stays
    /// recorded, for [`undo_abandoned`] and later runs).
    pub fn release(mut self) -> Result<(), String> {
        match self.res.take() {
            Some(res) => release(&res),
            None => Ok(()),
        }
    }

    /// Leaves the resource in place, recorded, no longer owned: for what
    /// must outlive its owner (a device under a filesystem that could not
    /// be unmounted). [`undo_abandoned`] and later runs undo it.
    pub fn abandon(mut self) {
        let Some(res) = self.res.take() else { return };
        let mut reg = registry();
        if let Some(e) = reg.iter_mut().rev().find(|e| e.held && e.res == res) {
            e.held = false;
        }
    }
}

fn release(res: &Resource) -> Result<(), String> {
    let mut reg = registry();
    // Gone already if the exit path's cleanup ran.
    let Some(i) = reg.iter().rposition(|e| e.held && e.res == *res) else {
        return Ok(());
    };
    match undo(res, true) {
        Ok(()) => {
            reg.remove(i);
            write_record(&reg);
            Ok(())
        }
        Err(e) => {
            // What could not be undone stays recorded, for a retry.
            reg[i].held = false;
            Err(e)
        }
    }
}

/// Makes a resource with `make`, which says what it made, and registers
/// it, the registry locked throughout, so that a signal's cleanup runs
/// either before `make` or after the registration.
pub fn hold_made<T, E>(make: impl FnOnce() -> Result<(Resource, T), E>) -> Result<(Held, T), E> {
    let mut reg = registry();
    let (res, made) = make()?;
    reg.push(Entry {
        res: res.clone(),
        held: true,
    });
    write_record(&reg);
    Ok((Held { res: Some(res) }, made))
}

/// Makes `res` with `make` and registers it, as [`hold_made`] does.
pub fn hold_with<T, E>(res: Resource, make: impl FnOnce() -> Result<T, E>) -> Result<(Held, T), E> {
    hold_made(|| make().map(|t| (res, t)))
}

/// Registers `res`, made already (a directory).
pub fn hold(res: Resource) -> Held {
    let mut reg = registry();
    reg.push(Entry {
        res: res.clone(),
        held: true,
    });
    write_record(&reg);
    Held { res: Some(res) }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(res) = self.res.take()
            && let Err(e) = release(&res)
        {
            warn(format_args!("warning: {e}"));
        }
    }
}

/// Retries what this process made and no longer owns (abandoned, or left
/// when its undo failed), last made first. Returns how many are still
/// left.
pub fn undo_abandoned() -> usize {
    let mut reg = registry();
    let mut i = reg.len();
    let mut changed = false;
    while i > 0 {
        i -= 1;
        if reg[i].held {
            continue;
        }
        match undo(&reg[i].res, true) {
            Ok(()) => {
                reg.remove(i);
                changed = true;
            }
            Err(e) => warn(format_args!("warning: {e}")),
        }
    }
    if changed {
        write_record(&reg);
    }
    reg.iter().filter(|e| !e.held).count()
}

/// Undoes one resource if it is still what was made. With `wait`, a loop
/// device is waited for until it lets go; without (on the way to exit),
/// autoclear detaches it at its last close.
fn undo(res: &Resource, wait: bool) -> Result<(), String> {
    match res {
        Resource::Mount { dir, mount, .. } | Resource::Fuse { dir, mount } => {
            ident::unmount_ours(dir, mount)
        }
        Resource::Loop {
            number,
            backing,
            file,
        } => loopinfo::detach(*number, backing, file, wait),
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
    while let Some(entry) = reg.pop() {
        if let Err(e) = undo(&entry.res, false) {
            warn(format_args!("warning: {e}"));
            failed.insert(0, entry);
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
/// its resources only if still what was made; then the kernel zram
/// devices such processes recorded (after the mounts on them are gone).
/// Says so on stderr; returns how many records were cleared.
pub fn remove_stale() -> usize {
    let cleared = remove_stale_records();
    crate::contestants::kernel_zram::remove_stale_devices();
    cleared
}

fn remove_stale_records() -> usize {
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
        let rec = match std::fs::read(entry.path())
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Record>(&b).map_err(|e| e.to_string()))
        {
            Ok(rec) => rec,
            Err(e) => {
                warn(format_args!(
                    "warning: {} cannot be read ({e}); what it records is left as it is",
                    entry.path().display()
                ));
                continue;
            }
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

/// How many resources the registry holds now (owned or not).
pub fn live() -> usize {
    registry().len()
}
