//! What a loop device is attached to, as the kernel says
//! (`LOOP_GET_STATUS64`: the backing file's device and inode), and
//! detaching it (`LOOP_CLR_FD`) only while it is still attached to the file
//! this process gave it. Below the registry, which undoes loop devices with
//! `detach`; attaching is [`super::loopdev`]'s.

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// A file as the kernel names it: device and inode (`st_dev`, `st_ino`).
/// What a loop device is attached to, checked before it is detached: a
/// path may name another file later, this pair does not while the file
/// exists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileId {
    /// `st_dev` of the file.
    pub dev: u64,
    /// `st_ino` of the file.
    pub ino: u64,
}

const LOOP_CLR_FD: libc::c_ulong = 0x4C01;
const LOOP_GET_STATUS64: libc::c_ulong = 0x4C05;
/// How long to wait for a loop device to appear or to let go.
pub(super) const WAIT: Duration = Duration::from_secs(2);

/// `struct loop_info64` of `<linux/loop.h>`.
#[repr(C)]
pub(super) struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    pub(super) lo_flags: u32,
    lo_file_name: [u8; 64],
    lo_crypt_name: [u8; 64],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

/// `/dev/loopN`.
pub fn loop_path(number: u32) -> PathBuf {
    PathBuf::from(format!("/dev/loop{number}"))
}

/// The backing file the kernel says loop device `number` has, if attached.
pub fn backing_file(number: u32) -> Option<PathBuf> {
    let s = std::fs::read_to_string(format!("/sys/block/loop{number}/loop/backing_file")).ok()?;
    Some(PathBuf::from(s.trim_end_matches('\n')))
}

/// The file loop device `number` is attached to, as the kernel says
/// (`LOOP_GET_STATUS64`: `lo_device`, `lo_inode`); `None` if it is not
/// attached (or does not exist).
pub fn attached_file(number: u32) -> std::io::Result<Option<FileId>> {
    let f = match OpenOptions::new().read(true).open(loop_path(number)) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => return Ok(None),
        Err(e) => return Err(e),
    };
    // SAFETY: all-zero is a valid loop_info64 (plain integers).
    let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is a loop_info64 the call fills.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), LOOP_GET_STATUS64 as _, &mut info as *mut _) };
    if r == 0 {
        return Ok(Some(FileId {
            dev: info.lo_device,
            ino: info.lo_inode,
        }));
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ENXIO) {
        Ok(None)
    } else {
        Err(e)
    }
}

/// Whether loop device `number` does direct I/O on its backing file.
pub fn uses_direct_io(number: u32) -> bool {
    std::fs::read_to_string(format!("/sys/block/loop{number}/loop/dio"))
        .is_ok_and(|s| s.trim() == "1")
}

/// Detaches loop device `number` if it is still attached to the file
/// `file` (never one attached to anything else; `backing` is its path, for
/// messages). With `wait`, waits for it to let go; without (on the way to
/// exit, while this process may still hold it open), autoclear detaches
/// it at its last close.
pub(super) fn detach(number: u32, backing: &Path, file: &FileId, wait: bool) -> Result<(), String> {
    let ours = || -> Result<bool, String> {
        match attached_file(number) {
            Ok(now) => Ok(*file != FileId::default() && now == Some(*file)),
            Err(e) => Err(format!(
                "/dev/loop{number}: cannot tell what it is attached to ({e}); left as it is"
            )),
        }
    };
    if !ours()? {
        return Ok(());
    }
    let f = OpenOptions::new()
        .read(true)
        .open(loop_path(number))
        .map_err(|e| format!("opening /dev/loop{number}: {e}"))?;
    // SAFETY: LOOP_CLR_FD takes no argument. With autoclear set, a device
    // still held (EBUSY) is detached at its last close.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), LOOP_CLR_FD as _, 0) };
    let err = (r != 0).then(std::io::Error::last_os_error);
    drop(f);
    if !wait && err.is_none() {
        return Ok(());
    }
    let deadline = Instant::now() + WAIT;
    while ours()? {
        if Instant::now() > deadline {
            return Err(format!(
                "/dev/loop{number} is still attached to {}{}",
                backing.display(),
                err.map(|e| format!(" (LOOP_CLR_FD: {e})"))
                    .unwrap_or_default()
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}
