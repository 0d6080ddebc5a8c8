//! The records in `/run/zsmem` of which devices are ours, and the removal of those whose creator is gone.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use super::error::warn;
use super::sysfs::{HOT_REMOVE, sysfs_dir, write_attr, write_attr_retrying};

/// Where each device this module creates is recorded, as `zramN.pid`
/// holding the creator's pid and its start time (`/proc/PID/stat` field
/// 22, so a reused pid is not mistaken for the creator) and the device's
/// identity: the inode of its `/sys/block/zramN` directory, which sysfs
/// numbers afresh for every device it makes, so a number reused for
/// someone else's device (ours removed by hand, the number handed out
/// again) is not mistaken for ours.
pub const RECORD_DIR: &str = "/run/zsmem";

/// The identity of device `device` as it is now (its sysfs directory's
/// inode), if it exists.
fn identity(device: u32) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(sysfs_dir(device)).ok().map(|m| m.ino())
}

fn record_path(device: u32) -> PathBuf {
    PathBuf::from(format!("{RECORD_DIR}/zram{device}.pid"))
}

/// The start time of process `pid` in clock ticks since boot, if it runs.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count
    // fields after its closing one. Field 22 is the 20th after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

pub(super) fn write_record(device: u32) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(RECORD_DIR)?;
    let pid = std::process::id();
    let text = format!(
        "{pid} {} {}\n",
        start_time(pid).unwrap_or(0),
        identity(device).unwrap_or(0)
    );
    let tmp = PathBuf::from(format!("{RECORD_DIR}/.zram{device}.pid.{pid}"));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, record_path(device))
}

pub(super) fn remove_record(device: u32) {
    let _ = std::fs::remove_file(record_path(device));
}

/// The creator recorded for `device` (pid, start time) and the device's
/// identity then (0: not recorded, a record of an earlier version), or
/// None if the record is missing or unreadable.
fn read_record(device: u32) -> Option<(u32, u64, u64)> {
    let text = std::fs::read_to_string(record_path(device)).ok()?;
    let mut f = text.split_whitespace();
    let (pid, started) = (f.next()?.parse().ok()?, f.next()?.parse().ok()?);
    Some((pid, started, f.next().map_or(Some(0), |w| w.parse().ok())?))
}

/// Removes each recorded device that is not `ours` and whose creator is
/// gone, saying so on stderr; returns their numbers. See
/// [`remove_stale_devices`](super::remove_stale_devices).
pub(super) fn remove_stale(ours: impl Fn(u32) -> bool) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(RECORD_DIR) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(device) = name
            .strip_prefix("zram")
            .and_then(|n| n.strip_suffix(".pid"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if ours(device) {
            continue;
        }
        let Some((pid, started, id)) = read_record(device) else {
            continue;
        };
        if start_time(pid).is_some_and(|t| t == started || started == 0) {
            continue; // its creator still runs
        }
        let sys = sysfs_dir(device);
        let now = identity(device);
        if id != 0 && now.is_some_and(|n| n != id) {
            warn(format_args!(
                "zram{device} is not the device process {pid} left (that one is gone and its number \
                 taken again): not touched; its record dropped"
            ));
        } else if now.is_some() {
            // No retry on EBUSY: busy means open, and open means in use.
            if let Err(e) = write_attr(&sys.join("reset"), "1") {
                warn(format_args!(
                    "warning: zram{device} was left by process {pid}, which is gone, but cannot be reset ({e}); leaving it"
                ));
                continue;
            }
            if let Err(e) = write_attr_retrying(Path::new(HOT_REMOVE), &device.to_string()) {
                warn(format_args!(
                    "warning: zram{device} was left by process {pid}, which is gone, and was reset but not removed: {e}"
                ));
                continue;
            }
            warn(format_args!(
                "removed zram{device}, left behind by process {pid}, which is gone"
            ));
            removed.push(device);
        }
        remove_record(device);
    }
    removed
}
