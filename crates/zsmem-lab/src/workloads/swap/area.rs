//! Swap areas: `mkswap` on a block device this process made, `swapon`
//! registered (so every exit path turns it off), `swapoff`.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::blockdev::BlockDevError;
use crate::blockdev::registry::{self, Held, Resource};

/// The priority our swap areas get: above any the machine has (the
/// kernel's own default priorities are negative), so the program swaps
/// to ours.
pub const PRIORITY: i32 = 32767;

/// `swapon`'s flags (linux/swap.h).
const SWAP_FLAG_PREFER: i32 = 0x8000;
const SWAP_FLAG_DISCARD: i32 = 0x10000;
const SWAP_FLAG_DISCARD_PAGES: i32 = 0x40000;

/// The `mkswap` program, if installed.
pub fn find_mkswap() -> Option<PathBuf> {
    [
        "/usr/sbin/mkswap",
        "/sbin/mkswap",
        "/usr/bin/mkswap",
        "/bin/mkswap",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
}

/// Why swap areas cannot be made here, in one line, or `None`.
pub fn unavailable_reason() -> Option<String> {
    if !Path::new("/proc/swaps").exists() {
        return Some("no /proc/swaps: the kernel has no swap (CONFIG_SWAP)".into());
    }
    if find_mkswap().is_none() {
        return Some("mkswap not found (install util-linux)".into());
    }
    None
}

/// A swap area this process enabled; turned off on drop.
pub struct SwapOn {
    _held: Held,
    device: PathBuf,
    discard: bool,
}

impl SwapOn {
    /// `mkswap DEVICE`, then `swapon` at [`PRIORITY`]; with `discard`,
    /// freed swap pages are discarded (`swapon --discard=pages`), which a
    /// loop device passes to its file as holes.
    pub fn enable(device: &Path, discard: bool) -> Result<SwapOn, BlockDevError> {
        let mkswap =
            find_mkswap().ok_or_else(|| BlockDevError::Unavailable("mkswap not found".into()))?;
        let out = Command::new(mkswap)
            .arg(device)
            .output()
            .map_err(|e| BlockDevError::io(format!("running mkswap {}", device.display()), e))?;
        if !out.status.success() {
            return Err(BlockDevError::io(
                format!("mkswap {}", device.display()),
                std::io::Error::other(String::from_utf8_lossy(&out.stderr).trim().to_string()),
            ));
        }
        let c = CString::new(device.as_os_str().as_bytes())
            .map_err(|_| BlockDevError::Usage("device path holds a NUL byte".into()))?;
        let mut flags = SWAP_FLAG_PREFER | PRIORITY;
        if discard {
            flags |= SWAP_FLAG_DISCARD | SWAP_FLAG_DISCARD_PAGES;
        }
        let (held, ()) = registry::hold_with(Resource::Swap(device.to_path_buf()), || {
            // SAFETY: `c` is a NUL-terminated path that outlives the call.
            if unsafe { libc::swapon(c.as_ptr(), flags) } == 0 {
                Ok(())
            } else {
                Err(BlockDevError::last_os(format!(
                    "swapon {}",
                    device.display()
                )))
            }
        })?;
        Ok(SwapOn {
            _held: held,
            device: device.to_path_buf(),
            discard,
        })
    }

    /// The device.
    pub fn device(&self) -> &Path {
        &self.device
    }

    /// Whether freed swap pages are discarded.
    pub fn discard(&self) -> bool {
        self.discard
    }
}

/// Turns the swap area on `device` off if `/proc/swaps` lists it (never
/// one it does not: nothing else is touched). Registry's undo.
pub(crate) fn undo_swapon(device: &Path) -> Result<(), String> {
    if !super::procfs::swaps().iter().any(|a| a.path == device) {
        return Ok(());
    }
    let c = CString::new(device.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    if unsafe { libc::swapoff(c.as_ptr()) } != 0 {
        return Err(format!(
            "swapoff {}: {}",
            device.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}
