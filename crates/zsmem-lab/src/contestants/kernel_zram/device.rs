//! The registry of the devices this process made: `hot_add`, teardown with `hot_remove`, removing them all.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::error::{ZramError, warn};
use super::records::{remove_record, remove_stale};
use super::sysfs::{HOT_ADD, HOT_REMOVE, sysfs_dir, write_attr_retrying};

/// A device this process created and has not yet removed.
pub(super) struct Registered {
    pub(super) device: u32,
    /// The open descriptor of its node, once the handle exists.
    pub(super) fd: Option<RawFd>,
    /// A private directory holding a node made with mknod, if any.
    pub(super) node_dir: Option<PathBuf>,
}

static REGISTRY: Mutex<Vec<Registered>> = Mutex::new(Vec::new());

/// The registry's length, for the signal handler (which cannot lock it):
/// with no device to remove, a signal takes its default action at once.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Publish the registry's length; call after every change, lock held.
pub(super) fn publish(reg: &[Registered]) {
    LIVE.store(reg.len(), Ordering::SeqCst);
}

/// How many devices the registry holds, without locking it (for the
/// signal handler).
pub(super) fn live_devices() -> usize {
    LIVE.load(Ordering::SeqCst)
}

pub(super) fn registry() -> MutexGuard<'static, Vec<Registered>> {
    REGISTRY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The registry, if no one holds its lock (for the `atexit` hook).
pub(super) fn try_registry() -> Option<MutexGuard<'static, Vec<Registered>>> {
    REGISTRY.try_lock().ok()
}

/// Removes the zram devices that a process of this module created and
/// that outlived it (it was killed by `SIGKILL`, or aborted): each has a
/// record in [`RECORD_DIR`](super::RECORD_DIR) whose creator is gone. Says so on stderr for
/// each, and returns their numbers. A device without a record, or whose
/// creator still runs, is never touched; a recorded device that is open
/// (the kernel refuses to reset it: someone uses it, e.g. as swap after
/// its number was reused) is left alone with a warning.
/// [`KernelZram::create`](super::KernelZram::create) calls this first.
pub fn remove_stale_devices() -> Vec<u32> {
    remove_stale_locked(&registry())
}

/// [`remove_stale_devices`] with the registry locked.
pub(super) fn remove_stale_locked(reg: &[Registered]) -> Vec<u32> {
    remove_stale(|device| reg.iter().any(|r| r.device == device))
}

/// Reads `hot_add` once, creating a device. Call only with the registry
/// locked, and register the number at once.
pub(super) fn hot_add() -> Result<u32, ZramError> {
    let mut f = File::open(HOT_ADD).map_err(|e| ZramError::io(format!("opening {HOT_ADD}"), e))?;
    let mut buf = [0u8; 32];
    // One read: every read of hot_add creates a device.
    let n = f
        .read(&mut buf)
        .map_err(|e| ZramError::io(format!("reading {HOT_ADD}"), e))?;
    let text = String::from_utf8_lossy(&buf[..n]);
    text.trim().parse::<u32>().map_err(|e| {
        ZramError::parse(
            format!("reading {HOT_ADD} (a device may have been created and not recorded)"),
            format!("{text:?}: {e}"),
        )
    })
}

/// Resets and removes a registered device whose descriptor is closed (or
/// pointed elsewhere), and its private node. Call with the registry locked.
pub(super) fn teardown(entry: &Registered) -> Result<(), String> {
    let dir = sysfs_dir(entry.device);
    let mut problems = Vec::new();
    if dir.exists() {
        // hot_remove resets too; resetting first frees the memory even if
        // the removal fails.
        if let Err(e) = write_attr_retrying(&dir.join("reset"), "1") {
            problems.push(e.to_string());
        }
        if let Err(e) = write_attr_retrying(Path::new(HOT_REMOVE), &entry.device.to_string()) {
            problems.push(e.to_string());
        }
    }
    if let Some(node_dir) = &entry.node_dir
        && let Err(e) = std::fs::remove_dir_all(node_dir)
    {
        problems.push(format!("removing {}: {e}", node_dir.display()));
    }
    if dir.exists() {
        problems.push(format!("{} still exists", dir.display()));
    } else {
        remove_record(entry.device);
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// Removes every registered device, with the registry locked. Descriptors
/// still held by handles are pointed at `/dev/null` (so their numbers stay
/// taken and a late `pwrite` reaches nothing) before the device is reset.
pub(super) fn remove_all_locked(reg: &mut Vec<Registered>) -> usize {
    let null = OpenOptions::new().read(true).write(true).open("/dev/null");
    let mut removed = 0;
    let entries = std::mem::take(reg);
    publish(reg);
    for mut entry in entries {
        if let Some(fd) = entry.fd.take() {
            match &null {
                // SAFETY: `fd` is a descriptor a live handle owns; dup2
                // atomically replaces it with a copy of /dev/null, so the
                // handle keeps a valid descriptor it will close on drop.
                Ok(null) => unsafe {
                    libc::dup2(null.as_raw_fd(), fd);
                },
                // SAFETY: as above, but without /dev/null the descriptor
                // is closed; the process is about to exit.
                Err(_) => unsafe {
                    libc::close(fd);
                },
            }
        }
        match teardown(&entry) {
            Ok(()) => removed += 1,
            Err(msg) => warn(format_args!(
                "warning: could not remove zram{}: {msg}",
                entry.device
            )),
        }
    }
    removed
}

/// Removes every zram device this process created and has not yet removed;
/// returns how many were removed.
///
/// Meant for exit paths: a program that owns the `SIGINT` handler itself
/// (so [`install_signal_cleanup`](super::install_signal_cleanup) could not) calls this from it before
/// exiting. Live [`KernelZram`](super::KernelZram) handles become dead: their I/O goes to
/// `/dev/null` and their statistics calls fail.
pub fn remove_registered_devices() -> usize {
    remove_all_locked(&mut registry())
}
