//! Which mount is ours: its identity, taken when it is made, and the one
//! unmount that touches only it.
//!
//! A directory and a device name do not say whose a mount is: a user may
//! mount a tmpfs over or inside ours, or (after this process was killed)
//! mount their own loop0 at the same place. So each mount made here is
//! recorded by the kernel's names for it, read with `statx(2)` from a
//! descriptor of its root right after it is made:
//!
//! - its mount ID (`STATX_MNT_ID`, the first field of
//!   `/proc/self/mountinfo`), which the kernel reuses after an unmount;
//! - its unique mount ID (`STATX_MNT_ID_UNIQUE`, Linux 6.8 and later),
//!   never reused; 0 where the kernel does not give it;
//! - the device number of its filesystem (`st_dev` of its root).
//!
//! [`unmount_ours`] opens the directory (which reaches its topmost mount),
//! unmounts it only if that is the recorded mount, and does so through
//! that descriptor (`/proc/self/fd/N`), so a mount made there meanwhile is
//! never the one unmounted. It unmounts once, lazily (`MNT_DETACH`: the
//! descriptor itself keeps a plain unmount busy); with no other user the
//! filesystem is shut down when the descriptor closes, before it returns.
//! A mount with another mount on or inside it is left in place, with an
//! error saying which: detaching it would take that mount along.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::mount::{MountEntry, mounts};

/// A mount as the kernel names it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountId {
    /// Its ID in `/proc/self/mountinfo` (reused after an unmount).
    pub id: u64,
    /// Its unique ID (`STATX_MNT_ID_UNIQUE`), 0 where unknown.
    pub unique: u64,
    /// The device number of its filesystem (`st_dev` of its root).
    pub dev: u64,
}

impl MountId {
    /// Whether `now` (what a descriptor shows) is this mount. The unique
    /// IDs decide where both are known; else the reusable ID and device.
    pub fn is(&self, now: &MountId) -> bool {
        self.id == now.id
            && self.dev == now.dev
            && (self.unique == 0 || now.unique == 0 || self.unique == now.unique)
    }

    /// Whether mountinfo line `m` can be this mount (mountinfo shows no
    /// unique ID).
    pub fn may_be(&self, m: &MountEntry) -> bool {
        self.id != 0 && m.id == self.id && m.dev == self.dev
    }
}

/// An `O_PATH` descriptor of `dir`'s topmost mount (or of `dir` itself).
pub fn open_path(dir: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))?;
    // SAFETY: `c` is a NUL-terminated path; open returns a new descriptor
    // or -1.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a descriptor just opened and owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn statx_fd(fd: &OwnedFd, mask: u32) -> io::Result<libc::statx> {
    // SAFETY: all-zero is a valid statx (plain integers).
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open, the path is an empty C string (AT_EMPTY_PATH)
    // and `st` is a statx the call fills.
    let r = unsafe {
        libc::statx(
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            mask,
            &mut st,
        )
    };
    if r == 0 {
        Ok(st)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The mount `fd` is on, and whether `fd` is its root.
pub fn mount_id_of(fd: &OwnedFd) -> io::Result<(MountId, bool)> {
    let st = statx_fd(fd, libc::STATX_MNT_ID)?;
    if st.stx_mask & libc::STATX_MNT_ID == 0 {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the kernel gives no mount ID (statx STATX_MNT_ID needs Linux 5.8)",
        ));
    }
    let unique = statx_fd(fd, libc::STATX_MNT_ID_UNIQUE)
        .ok()
        .filter(|u| u.stx_mask & libc::STATX_MNT_ID_UNIQUE != 0)
        .map_or(0, |u| u.stx_mnt_id);
    let root = st.stx_attributes_mask & libc::STATX_ATTR_MOUNT_ROOT as u64 != 0
        && st.stx_attributes & libc::STATX_ATTR_MOUNT_ROOT as u64 != 0;
    let id = MountId {
        id: st.stx_mnt_id,
        unique,
        dev: libc::makedev(st.stx_dev_major, st.stx_dev_minor),
    };
    Ok((id, root))
}

/// The identity of what was just mounted at `dir`, checked to be a mount
/// root that mountinfo lists with `what` (its type and source).
pub fn identify(dir: &Path, what: impl Fn(&MountEntry) -> bool) -> io::Result<MountId> {
    let fd = open_path(dir)?;
    let (id, root) = mount_id_of(&fd)?;
    let listed = mounts().into_iter().find(|m| m.id == id.id);
    match listed {
        Some(m) if root && what(&m) => Ok(id),
        other => Err(io::Error::other(format!(
            "what is mounted at {} is not what was just mounted there ({})",
            dir.display(),
            other.map_or("not in mountinfo".into(), |m| format!(
                "{} {}",
                m.fstype, m.source
            ))
        ))),
    }
}

/// Unmounts the mount `ours` at `dir`, only it, once; see the module's
/// doc. `Ok` when it is not mounted any more (unmounted now, or gone
/// before), `Err` saying why it is left in place.
pub fn unmount_ours(dir: &Path, ours: &MountId) -> Result<(), String> {
    let table = mounts();
    if ours.id == 0 {
        // A record without an identity cannot be checked: touch nothing.
        if table.iter().any(|m| m.dir == dir) {
            return Err(format!(
                "{}: recorded without its mount ID; what is mounted there is left as it is",
                dir.display()
            ));
        }
        return Ok(());
    }
    let listed = table.iter().find(|m| ours.may_be(m) && m.dir == dir);
    let Some(listed) = listed else {
        return Ok(()); // gone already
    };
    let fd = match open_path(dir) {
        Ok(fd) => fd,
        Err(e) => return Err(format!("{}: {e}; left mounted", dir.display())),
    };
    let (now, root) = mount_id_of(&fd).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !(root && ours.is(&now)) {
        if now.id == ours.id && now.dev == ours.dev {
            // The reusable ID matched, the unique one did not: another
            // mount took the ID after ours went.
            return Ok(());
        }
        let top = table.iter().find(|m| m.id == now.id);
        return Err(format!(
            "{}: covered by another mount ({}); ours ({} {}) is left mounted",
            dir.display(),
            top.map_or("not ours".into(), |m| format!("{} {}", m.fstype, m.source)),
            listed.fstype,
            listed.source
        ));
    }
    let children: Vec<&MountEntry> = table.iter().filter(|m| m.parent == ours.id).collect();
    if !children.is_empty() {
        return Err(format!(
            "{}: {} mounted on it; left mounted (unmount {} first)",
            dir.display(),
            children
                .iter()
                .map(|m| format!("{} at {}", m.fstype, m.dir.display()))
                .collect::<Vec<_>>()
                .join(", "),
            if children.len() == 1 { "it" } else { "them" }
        ));
    }
    let through =
        CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL in a number");
    // SAFETY: `through` is a NUL-terminated path naming the descriptor's
    // own mount.
    if unsafe { libc::umount2(through.as_ptr(), libc::MNT_DETACH) } != 0 {
        return Err(format!(
            "could not unmount {}: {}",
            dir.display(),
            io::Error::last_os_error()
        ));
    }
    // The last reference: with no other user the filesystem is shut down
    // as the descriptor closes.
    drop(fd);
    Ok(())
}

/// Whether the mount `ours` is still mounted (at `dir`).
pub fn still_mounted(dir: &Path, ours: &MountId) -> bool {
    mounts().iter().any(|m| ours.may_be(m) && m.dir == dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_compare_by_unique_id_where_known() {
        let a = MountId {
            id: 40,
            unique: 0x1_0000_0040,
            dev: 7 << 8,
        };
        assert!(a.is(&a));
        assert!(
            a.is(&MountId { unique: 0, ..a }),
            "unique unknown: ID and device decide"
        );
        assert!(!a.is(&MountId {
            unique: 0x1_0000_0099,
            ..a
        }));
        assert!(!a.is(&MountId { id: 41, ..a }));
        assert!(!a.is(&MountId {
            dev: 7 << 8 | 1,
            ..a
        }));
    }
}
