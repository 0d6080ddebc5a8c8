//! ext4 on a block device: `mkfs.ext4`, `mount -o discard`, `syncfs`,
//! unmounting, and what `/proc/self/mountinfo` says is mounted where.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::error::BlockDevError;

/// Where `mkfs.ext4` is: on `PATH`, else in `/usr/sbin` or `/sbin`.
pub fn find_mkfs_ext4() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>());
    on_path
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join("mkfs.ext4"))
        .find(|p| p.is_file())
}

/// `mkfs.ext4 -q -F DEV`, with the defaults of this machine's e2fsprogs
/// (as the reference ran it).
pub fn mkfs_ext4(dev: &Path) -> Result<(), BlockDevError> {
    let mkfs = find_mkfs_ext4().ok_or_else(|| {
        BlockDevError::Unavailable("mkfs.ext4 not found (install e2fsprogs)".into())
    })?;
    let out = Command::new(&mkfs)
        .arg("-q")
        .arg("-F")
        .arg(dev)
        .output()
        .map_err(|e| BlockDevError::io(format!("running {}", mkfs.display()), e))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(BlockDevError::io(
            format!("mkfs.ext4 {}", dev.display()),
            std::io::Error::other(format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )),
        ))
    }
}

fn cstr(p: &Path) -> Result<CString, BlockDevError> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| BlockDevError::Usage(format!("{} holds a NUL byte", p.display())))
}

/// `mount -t ext4 -o OPTIONS DEV DIR`.
pub fn mount_ext4(dev: &Path, dir: &Path, options: &str) -> Result<(), BlockDevError> {
    let (d, m) = (cstr(dev)?, cstr(dir)?);
    let opts = CString::new(options)
        .map_err(|_| BlockDevError::Usage("mount options hold a NUL byte".into()))?;
    // SAFETY: every pointer is a NUL-terminated string that outlives the call.
    let r = unsafe {
        libc::mount(
            d.as_ptr(),
            m.as_ptr(),
            c"ext4".as_ptr(),
            0,
            opts.as_ptr().cast(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(BlockDevError::io_or_refused(
            format!(
                "mount -t ext4 -o {options} {} {}",
                dev.display(),
                dir.display()
            ),
            std::io::Error::last_os_error(),
        ))
    }
}

/// `mount -t tmpfs -o OPTIONS SOURCE DIR` (`source` names it in mountinfo).
pub fn mount_tmpfs(source: &str, dir: &Path, options: &str) -> Result<(), BlockDevError> {
    let m = cstr(dir)?;
    let bad = |_| BlockDevError::Usage("tmpfs source or options hold a NUL byte".into());
    let (src, opts) = (
        CString::new(source).map_err(bad)?,
        CString::new(options).map_err(bad)?,
    );
    // SAFETY: every pointer is a NUL-terminated string that outlives the call.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            m.as_ptr(),
            c"tmpfs".as_ptr(),
            0,
            opts.as_ptr().cast(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(BlockDevError::io_or_refused(
            format!("mount -t tmpfs -o {options} {source} {}", dir.display()),
            std::io::Error::last_os_error(),
        ))
    }
}

/// `syncfs(2)` on the filesystem holding `dir`, then `sync(2)`.
pub fn sync_fs(dir: &Path) -> Result<(), BlockDevError> {
    let f = std::fs::File::open(dir)
        .map_err(|e| BlockDevError::io(format!("opening {}", dir.display()), e))?;
    // SAFETY: `f` is an open descriptor for the call's duration.
    if unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&f)) } != 0 {
        return Err(BlockDevError::last_os(format!("syncfs {}", dir.display())));
    }
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    Ok(())
}

/// One line of `/proc/self/mountinfo`: IDs, device, mount point, type,
/// source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountEntry {
    /// The mount's ID (first field; the kernel reuses it after an unmount).
    pub id: u64,
    /// The ID of the mount it sits on.
    pub parent: u64,
    /// The device number of its filesystem (`major:minor`, as `st_dev`).
    pub dev: u64,
    /// Where it is mounted.
    pub dir: PathBuf,
    /// Filesystem type (`ext4`, `fuse.zsmem`).
    pub fstype: String,
    /// The device or source name.
    pub source: String,
}

/// `\040`-style escapes of mountinfo undone.
pub(crate) fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 4], 8)
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses the text of `/proc/self/mountinfo`.
pub fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mut l = left.split(' ');
            let id = l.next()?.parse().ok()?;
            let parent = l.next()?.parse().ok()?;
            let (major, minor) = l.next()?.split_once(':')?;
            let dev = libc::makedev(major.parse().ok()?, minor.parse().ok()?);
            let dir = l.nth(1)?;
            let mut r = right.split(' ');
            let fstype = r.next()?;
            let source = r.next()?;
            Some(MountEntry {
                id,
                parent,
                dev,
                dir: PathBuf::from(unescape(dir)),
                fstype: fstype.to_string(),
                source: unescape(source),
            })
        })
        .collect()
}

/// What is mounted now.
pub fn mounts() -> Vec<MountEntry> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|t| parse_mountinfo(&t))
        .unwrap_or_default()
}

/// The topmost mount at `dir`, if any (by the table's order: a mount
/// moved beneath another is not seen as such).
pub fn mounted_at(dir: &Path) -> Option<MountEntry> {
    mounts().into_iter().rev().find(|m| m.dir == dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_parse() {
        let text = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n\
                    40 22 7:3 / /tmp/zsmem\\040x/mnt rw - ext4 /dev/loop3 rw,discard\n\
                    41 22 0:50 / /tmp/f rw,nosuid - fuse.zsmem zsmem rw,user_id=0\n\
                    garbage\n";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 3);
        assert_eq!(m[1].dir, PathBuf::from("/tmp/zsmem x/mnt"));
        assert_eq!(m[1].source, "/dev/loop3");
        assert_eq!((m[1].id, m[1].parent), (40, 22));
        assert_eq!(m[1].dev, libc::makedev(7, 3));
        assert_eq!(m[2].fstype, "fuse.zsmem");
        assert_eq!(unescape("a\\134b\\0"), "a\\b\\0");
    }
}
