//! ext4 on a block device, assembled and torn down in order: a private
//! directory, the device file (FUSE) and a loop device on it for a
//! [`Backend`], or a block device that exists already (the kernel's zram);
//! then `mkfs.ext4` and `mount -o discard`.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use super::backend::Backend;
use super::error::BlockDevError;
use super::fuse::FuseMount;
use super::ident;
use super::loopdev::LoopDevice;
use super::mount::{mkfs_ext4, mount_ext4, sync_fs};
use super::mountpoint::MountPoint;
use super::registry::{self, Held, Resource};
use super::signals::install_signal_cleanup;

/// The mount options, the reference's.
pub const MOUNT_OPTIONS: &str = "discard";

/// What can be used here, or a one-line reason why not: root, and for a
/// device file FUSE (`/dev/fuse`) and loop devices (`/dev/loop-control`),
/// and `mkfs.ext4`.
pub fn unavailable_reason(device_file: bool) -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not running as root".into());
    }
    if device_file {
        for (path, what) in [
            ("/dev/fuse", "FUSE (modprobe fuse)"),
            ("/dev/loop-control", "loop devices (modprobe loop)"),
        ] {
            if std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)
                .is_err()
            {
                return Some(format!("no {path}: {what} unavailable"));
            }
        }
    }
    if super::mount::find_mkfs_ext4().is_none() {
        return Some("mkfs.ext4 not found (install e2fsprogs)".into());
    }
    None
}

/// ext4 mounted on a block device this process made; unmounted and taken
/// apart (last made first) on drop, on signals, and by a later run if
/// this one is killed. If the ext4 mount cannot be unmounted (another
/// mount sits on or inside it), it is left, and so is everything under
/// it, the device file still served while this process runs; all stays
/// recorded ([`registry::undo_abandoned`] and later runs retry).
pub struct Ext4Device {
    // Taken apart in this order by Drop: ext4, loop, FUSE, directory,
    // then the mount point's lock.
    mount: Option<Held>,
    lo: Option<LoopDevice>,
    fuse: Option<FuseMount>,
    tmp: Option<Held>,
    taken: Option<MountPoint>,
    dir: PathBuf,
    device: PathBuf,
}

impl Drop for Ext4Device {
    fn drop(&mut self) {
        let Some(mount) = self.mount.take() else {
            return; // never mounted: the fields' own drops undo the rest
        };
        if let Err(e) = mount.release() {
            super::error::warn(format_args!(
                "warning: {e}; {} and the devices under it are left, recorded",
                self.device.display()
            ));
            if let Some(lo) = self.lo.take() {
                lo.abandon();
            }
            if let Some(fuse) = self.fuse.take() {
                fuse.abandon();
            }
            if let Some(tmp) = self.tmp.take() {
                tmp.abandon();
            }
        }
    }
}

/// A private directory `zsmem-blockdev.PID.N` in the temp directory.
pub(crate) fn private_dir() -> Result<Held, BlockDevError> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "zsmem-blockdev.{}.{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| BlockDevError::io(format!("creating {}", dir.display()), e))?;
    Ok(registry::hold(Resource::Dir(dir)))
}

pub(crate) fn held_dir(h: &Held) -> &Path {
    match h.resource() {
        Resource::Dir(d) => d,
        _ => unreachable!("private_dir holds a directory"),
    }
}

pub(super) fn mkdir(p: &Path) -> Result<(), BlockDevError> {
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(p)
        .map_err(|e| BlockDevError::io(format!("creating {}", p.display()), e))
}

/// Before making anything that changes the machine without a device of
/// ours (the swap experiment's cgroup and tmpfs, the kernel's zram or
/// zswap as its swap): the signal handler installed (an error if it cannot
/// be), and what a killed run left undone first, so that no earlier run's
/// swap area, zswap setting or cgroup is still in place while this one
/// measures (a leftover swap area of top priority would take half the
/// swap traffic) or is taken for what this run must restore.
///
/// Also takes the machine's swap lock (`flock` on `/run/zsmem`, held until
/// the process ends): two runs at once would each save the other's zswap
/// setting as what they found and put it back after, leaving the machine
/// changed, and share its swap traffic. The second is refused.
pub(crate) fn take_over() -> Result<(), BlockDevError> {
    install_signal_cleanup().map_err(BlockDevError::Unavailable)?;
    swap_lock()?;
    registry::remove_stale();
    registry::undo_abandoned();
    Ok(())
}

/// Why a swap run could not start now, if another process holds the
/// machine's swap lock (`flock` on `/run/zsmem`, which every swap run
/// takes and keeps until it ends); `None` if it is free or this
/// process holds it. For tests, which skip rather than fail while another
/// run (a developer's measurement) changes the machine's swap.
pub fn swap_lock_busy() -> Option<String> {
    if HELD.lock().unwrap_or_else(|p| p.into_inner()).is_some() {
        return None;
    }
    let dir = std::fs::File::open(registry::RECORD_DIR).ok()?;
    // Taken, it is let go as `dir` closes.
    match try_swap_lock(&dir) {
        Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Some(lock_held_by_another()),
        _ => None,
    }
}

/// The swap lock's file while this process holds it.
static HELD: std::sync::Mutex<Option<std::fs::File>> = std::sync::Mutex::new(None);

/// The machine's swap lock (`flock` on the records' directory itself, so
/// that the lock leaves no file), taken once per process and kept.
fn swap_lock() -> Result<(), BlockDevError> {
    let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
    if held.is_some() {
        return Ok(());
    }
    let path = registry::RECORD_DIR;
    let file = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(path)
        .and_then(|()| std::fs::File::open(path))
        .map_err(|e| BlockDevError::io(format!("opening {path}"), e))?;
    try_swap_lock(&file).map_err(|e| {
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            BlockDevError::Usage(format!("{}: wait for it to end", lock_held_by_another()))
        } else {
            BlockDevError::io(format!("locking {path}"), e)
        }
    })?;
    *held = Some(file);
    Ok(())
}

/// Take the swap lock on `dir` (the records' directory) without waiting.
fn try_swap_lock(dir: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor the caller owns; no memory is passed.
    if unsafe { libc::flock(dir.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// What another process holding the swap lock means.
fn lock_held_by_another() -> String {
    format!(
        "another zsmem run is changing this machine's swap ({} is locked)",
        registry::RECORD_DIR
    )
}

pub(super) fn prepare() -> Result<(), BlockDevError> {
    if let Err(e) = install_signal_cleanup() {
        super::error::warn(format_args!(
            "warning: {e}; mounts and loop devices are not undone on signals"
        ));
    }
    registry::remove_stale();
    registry::undo_abandoned();
    Ok(())
}

impl Ext4Device {
    /// ext4 on `backend`, served as a FUSE file (`threads` request
    /// threads) through a loop device, mounted at `at` (default: a
    /// private directory). `at` must be an existing empty directory, not
    /// taken by another device of any process ([`MountPoint::take`]).
    pub fn on_backend<B: Backend>(
        backend: B,
        threads: usize,
        at: Option<&Path>,
    ) -> Result<Ext4Device, BlockDevError> {
        if let Some(why) = unavailable_reason(true) {
            return Err(BlockDevError::Unavailable(why));
        }
        // What a killed run left at `at` is undone first, then `at` taken.
        prepare()?;
        let taken = at.map(MountPoint::take).transpose()?;
        let tmp = private_dir()?;
        let fuse_dir = held_dir(&tmp).join("fuse");
        mkdir(&fuse_dir)?;
        let mut dev = Ext4Device {
            mount: None,
            lo: None,
            fuse: None,
            dir: PathBuf::new(),
            device: PathBuf::new(),
            tmp: Some(tmp),
            taken,
        };
        let fuse = dev
            .fuse
            .insert(FuseMount::mount(backend, &fuse_dir, threads)?);
        let disk = fuse.disk_path();
        let lo = dev.lo.insert(LoopDevice::attach(&disk)?);
        dev.device = lo.path();
        dev.mount_at(at)?;
        Ok(dev)
    }

    /// ext4 on `device`, a block device that exists already (a kernel
    /// zram device this process made), mounted in a private directory.
    pub fn on_block_device(device: &Path) -> Result<Ext4Device, BlockDevError> {
        if let Some(why) = unavailable_reason(false) {
            return Err(BlockDevError::Unavailable(why));
        }
        prepare()?;
        let mut dev = Ext4Device {
            mount: None,
            lo: None,
            fuse: None,
            dir: PathBuf::new(),
            device: device.to_path_buf(),
            tmp: Some(private_dir()?),
            taken: None,
        };
        dev.mount_at(None)?;
        Ok(dev)
    }

    fn mount_at(&mut self, at: Option<&Path>) -> Result<(), BlockDevError> {
        let dir = match (at, &self.taken) {
            (Some(_), Some(taken)) => taken.dir().to_path_buf(),
            (Some(d), None) => d.to_path_buf(),
            (None, _) => {
                let d = held_dir(self.tmp.as_ref().expect("made first")).join("mnt");
                mkdir(&d)?;
                d
            }
        };
        mkfs_ext4(&self.device)?;
        let (held, ()) = registry::hold_made(|| {
            mount_ext4(&self.device, &dir, MOUNT_OPTIONS)?;
            let source = self.device.clone();
            let mount = ident::identify(&dir, |m| {
                m.fstype == "ext4" && std::path::Path::new(&m.source) == source
            })
            .map_err(|e| {
                BlockDevError::io(format!("identifying the mount at {}", dir.display()), e)
            })?;
            Ok::<_, BlockDevError>((
                Resource::Mount {
                    dir: dir.clone(),
                    source,
                    mount,
                },
                (),
            ))
        })?;
        self.mount = Some(held);
        self.dir = dir;
        Ok(())
    }

    /// Whether ext4 is still mounted where it was (not unmounted by hand).
    pub fn is_mounted(&self) -> bool {
        match self.mount.as_ref().map(Held::resource) {
            Some(Resource::Mount { dir, mount, .. }) => ident::still_mounted(dir, mount),
            _ => false,
        }
    }

    /// Where ext4 is mounted.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The block device under it (`/dev/loopN`, `/dev/zramN`).
    pub fn device(&self) -> &Path {
        &self.device
    }

    /// Whether the loop device does direct I/O (`None`: no loop device).
    pub fn loop_direct_io(&self) -> Option<bool> {
        self.lo.as_ref().map(LoopDevice::direct_io)
    }

    /// The block device's discard counters (`/sys/block/NAME/stat`: discard
    /// requests and sectors completed), to tell when ext4's discards have
    /// stopped; zeros where the device does not count them (zram). Reads
    /// and writes are left out: ext4's lazy inode-table initialisation
    /// writes zeroes in the background for minutes after mounting.
    pub fn discard_counters(&self) -> [u64; 2] {
        let text = self
            .device
            .file_name()
            .and_then(|n| {
                std::fs::read_to_string(Path::new("/sys/block").join(n).join("stat")).ok()
            })
            .unwrap_or_default();
        let f: Vec<u64> = text
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        [
            f.get(11).copied().unwrap_or(0),
            f.get(13).copied().unwrap_or(0),
        ]
    }

    /// `syncfs` and `sync`: everything written reaches the device, the
    /// journal commits and, mounted with discard, freed blocks are
    /// discarded.
    pub fn sync(&self) -> Result<(), BlockDevError> {
        sync_fs(&self.dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second run that would change the machine's swap while another
    /// does is refused (held here through a descriptor of its own, as
    /// another process would hold it), and goes ahead once it is free.
    #[test]
    fn a_second_run_is_refused_while_the_swap_lock_is_held() {
        use std::os::fd::AsRawFd;
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            println!("skipped: /run/zsmem needs root");
            return;
        }
        let path = registry::RECORD_DIR;
        std::fs::create_dir_all(path).unwrap();
        let other = std::fs::File::open(path).unwrap();
        // SAFETY: flock on our own descriptor.
        if unsafe { libc::flock(other.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            println!("skipped: a zsmem run holds {path}");
            return;
        }
        match swap_lock() {
            Err(BlockDevError::Usage(why)) => assert!(why.contains("another zsmem run"), "{why}"),
            other => panic!("taken while held: {other:?}"),
        }
        drop(other);
        swap_lock().unwrap();
        swap_lock().unwrap();
    }
}
