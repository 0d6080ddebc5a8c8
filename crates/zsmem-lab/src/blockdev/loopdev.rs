//! Loop devices by ioctl: a free one from `/dev/loop-control`, attached to
//! the device file with `LOOP_CONFIGURE` (4 KiB logical blocks, direct
//! I/O, cleared on last close), detached with `LOOP_CLR_FD`.
//!
//! Direct I/O: without it the loop device reads and writes its backing
//! file through the page cache, so every block written would be held twice
//! (once in that cache, once compressed by the contestant) and reads would
//! be served from the cache, not by the contestant. With it (and the
//! device file's `FOPEN_DIRECT_IO`), each block request is one request to
//! the contestant, as on zram. 4 KiB logical blocks are zram's too.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::error::BlockDevError;
pub use super::loopinfo::{FileId, attached_file, backing_file, loop_path, uses_direct_io};
use super::loopinfo::{LoopInfo64, WAIT};
use super::registry::{self, Held, Resource};

const LOOP_CONTROL: &str = "/dev/loop-control";
const LOOP_CTL_GET_FREE: libc::c_ulong = 0x4C82;
const LOOP_CONFIGURE: libc::c_ulong = 0x4C0A;
const LO_FLAGS_AUTOCLEAR: u32 = 4;
const LO_FLAGS_DIRECT_IO: u32 = 16;

/// `struct loop_config` of `<linux/loop.h>`.
#[repr(C)]
struct LoopConfig {
    fd: u32,
    block_size: u32,
    info: LoopInfo64,
    reserved: [u64; 8],
}

/// A loop device this process attached; detached on drop.
pub struct LoopDevice {
    number: u32,
    direct_io: bool,
    // Closed before `_held` detaches (declaration order): an open
    // descriptor would only defer the detach to its close.
    _file: File,
    _held: Held,
}

impl LoopDevice {
    /// Attaches a free loop device to `backing` with 4 KiB logical blocks
    /// and direct I/O.
    pub fn attach(backing: &Path) -> Result<LoopDevice, BlockDevError> {
        let backing_file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(backing)
            .map_err(|e| BlockDevError::io(format!("opening {}", backing.display()), e))?;
        let meta = backing_file
            .metadata()
            .map_err(|e| BlockDevError::io(format!("stat {}", backing.display()), e))?;
        let file_id = {
            use std::os::unix::fs::MetadataExt;
            FileId {
                dev: meta.dev(),
                ino: meta.ino(),
            }
        };
        let control = OpenOptions::new()
            .read(true)
            .write(true)
            .open(LOOP_CONTROL)
            .map_err(|e| BlockDevError::io(format!("opening {LOOP_CONTROL}"), e))?;
        // A device found free may be taken by someone else before it is
        // configured (EBUSY): ask again.
        for _ in 0..16 {
            // SAFETY: LOOP_CTL_GET_FREE takes no argument.
            let n = unsafe { libc::ioctl(control.as_raw_fd(), LOOP_CTL_GET_FREE as _) };
            if n < 0 {
                return Err(BlockDevError::io_or_refused(
                    "LOOP_CTL_GET_FREE",
                    std::io::Error::last_os_error(),
                ));
            }
            let number = n as u32;
            let node = wait_for_node(number)?;
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&node)
                .map_err(|e| BlockDevError::io(format!("opening {}", node.display()), e))?;
            let mut cfg = LoopConfig {
                fd: backing_file.as_raw_fd() as u32,
                block_size: 4096,
                // SAFETY: all-zero is a valid loop_info64 (plain integers).
                info: unsafe { std::mem::zeroed() },
                reserved: [0; 8],
            };
            cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO;
            // The registry lock is held from the configure to the record,
            // so a signal's cleanup either runs before or sees the device.
            let held = registry::hold_with(
                Resource::Loop {
                    number,
                    backing: backing.to_path_buf(),
                    file: file_id,
                },
                || {
                    // SAFETY: `cfg` is a valid loop_config for the call.
                    let r = unsafe {
                        libc::ioctl(file.as_raw_fd(), LOOP_CONFIGURE as _, &cfg as *const _)
                    };
                    if r == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                },
            );
            match held {
                Ok((held, ())) => {
                    return Ok(LoopDevice {
                        number,
                        direct_io: uses_direct_io(number),
                        _file: file,
                        _held: held,
                    });
                }
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => continue,
                Err(e) => {
                    return Err(BlockDevError::io_or_refused(
                        format!("LOOP_CONFIGURE {} on {}", backing.display(), node.display()),
                        e,
                    ));
                }
            }
        }
        Err(BlockDevError::Unavailable(
            "no free loop device could be configured (all busy)".into(),
        ))
    }

    /// Leaves the device attached and recorded, no longer owned (it is
    /// under a filesystem that could not be unmounted); autoclear detaches
    /// it when that filesystem lets go.
    pub fn abandon(self) {
        let LoopDevice { _file, _held, .. } = self;
        drop(_file);
        _held.abandon();
    }

    /// `N` of `/dev/loopN`.
    pub fn number(&self) -> u32 {
        self.number
    }

    /// `/dev/loopN`.
    pub fn path(&self) -> PathBuf {
        loop_path(self.number)
    }

    /// Whether the kernel took direct I/O (it falls back to buffered I/O
    /// where the backing file cannot do it).
    pub fn direct_io(&self) -> bool {
        self.direct_io
    }
}

fn wait_for_node(number: u32) -> Result<PathBuf, BlockDevError> {
    let p = loop_path(number);
    let deadline = Instant::now() + WAIT;
    while !p.exists() {
        if Instant::now() > deadline {
            return Err(BlockDevError::Unavailable(format!(
                "{} did not appear (no devtmpfs?)",
                p.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(p)
}
