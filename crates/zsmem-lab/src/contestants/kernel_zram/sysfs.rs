//! zram's sysfs files: where they are, and reading and writing them (retrying while busy).

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::error::ZramError;

pub(super) const CONTROL_DIR: &str = "/sys/class/zram-control";
pub(super) const HOT_ADD: &str = "/sys/class/zram-control/hot_add";
pub(super) const HOT_REMOVE: &str = "/sys/class/zram-control/hot_remove";
/// How long to wait for `/dev/zramN` and for a busy device to be released.
pub(super) const WAIT: Duration = Duration::from_secs(2);
pub(super) const POLL: Duration = Duration::from_millis(5);

pub(super) fn sysfs_dir(device: u32) -> PathBuf {
    PathBuf::from(format!("/sys/block/zram{device}"))
}

pub(super) fn write_attr(path: &Path, value: &str) -> Result<(), ZramError> {
    OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|e| ZramError::io(format!("writing {value:?} to {}", path.display()), e))
}

pub(super) fn read_attr(path: &Path) -> Result<String, ZramError> {
    std::fs::read_to_string(path)
        .map_err(|e| ZramError::io(format!("reading {}", path.display()), e))
}

fn is_busy(e: &ZramError) -> bool {
    matches!(e, ZramError::Io { source, .. } if source.raw_os_error() == Some(libc::EBUSY))
}

/// Writes `value` to `path`, retrying for up to [`WAIT`] while the kernel
/// says the device is busy (someone, udev say, still has it open).
pub(super) fn write_attr_retrying(path: &Path, value: &str) -> Result<(), ZramError> {
    let deadline = Instant::now() + WAIT;
    loop {
        match write_attr(path, value) {
            Err(e) if is_busy(&e) && Instant::now() < deadline => std::thread::sleep(POLL),
            other => return other,
        }
    }
}
