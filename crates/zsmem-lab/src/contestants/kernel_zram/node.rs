//! The device node: waiting for `/dev/zramN`, or making a private one with `mknod(2)`.

use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::error::ZramError;
use super::sysfs::{POLL, WAIT, read_attr};

/// The `dev_t` in `<dir>/dev` ("major:minor").
pub(super) fn device_number_of(dir: &Path) -> Result<libc::dev_t, ZramError> {
    let path = dir.join("dev");
    let text = read_attr(&path)?;
    let bad = || {
        ZramError::parse(
            format!("reading {}", path.display()),
            format!("{:?} is not major:minor", text.trim()),
        )
    };
    let (major, minor) = text.trim().split_once(':').ok_or_else(bad)?;
    let major: u32 = major.parse().map_err(|_| bad())?;
    let minor: u32 = minor.parse().map_err(|_| bad())?;
    Ok(libc::makedev(major, minor))
}

/// Polls `path` until it is the block device `rdev`, for up to [`WAIT`].
pub(super) fn wait_for_node(path: &Path, rdev: libc::dev_t) -> Option<PathBuf> {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(meta) = std::fs::metadata(path)
            && meta.file_type().is_block_device()
            && meta.rdev() == rdev
        {
            return Some(path.to_path_buf());
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(POLL);
    }
}

/// Makes a block device node for `rdev` in a new private directory under
/// the temp dir; returns the directory and the node.
pub(super) fn make_private_node(
    device: u32,
    rdev: libc::dev_t,
) -> Result<(PathBuf, PathBuf), ZramError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir =
        std::env::temp_dir().join(format!("zsmem-zram{device}-{}-{nanos}", std::process::id()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| ZramError::io(format!("creating {}", dir.display()), e))?;
    let node = dir.join(format!("zram{device}"));
    if let Err(e) = mknod_block(&node, rdev) {
        let _ = std::fs::remove_dir(&dir);
        return Err(e);
    }
    Ok((dir, node))
}

fn mknod_block(node: &Path, rdev: libc::dev_t) -> Result<(), ZramError> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(node.as_os_str().as_bytes())
        .map_err(|_| ZramError::BadArgument(format!("{} contains a NUL", node.display())))?;
    // SAFETY: `c_path` is a NUL-terminated path that outlives the call;
    // mknod only reads it.
    let rc = unsafe { libc::mknod(c_path.as_ptr(), libc::S_IFBLK | 0o600, rdev) };
    if rc != 0 {
        return Err(ZramError::io(
            format!("mknod {}", node.display()),
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_node_is_made_private() {
        // Exercises the mknod fallback with block 1:3 (brd's ram3), never
        // on zram; the node is never opened.
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipping: not running as root");
            return;
        }
        let rdev = libc::makedev(1, 3);
        let (dir, node) = make_private_node(4_000_000_000, rdev).unwrap();
        let meta = std::fs::metadata(&node).unwrap();
        assert!(meta.file_type().is_block_device());
        assert_eq!(meta.rdev(), rdev);
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
