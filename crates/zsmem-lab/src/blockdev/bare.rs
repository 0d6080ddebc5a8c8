//! A backend as a bare block device: the device file (FUSE) and a loop
//! device on it, no filesystem; for a swap area (`mkswap`, `swapon` on
//! the loop device). Taken apart in order on drop, on signals, and by a
//! later run if this one is killed, as [`super::device`] does.

use std::path::{Path, PathBuf};

use super::backend::Backend;
use super::device::{held_dir, mkdir, prepare, private_dir, unavailable_reason};
use super::error::BlockDevError;
use super::fuse::FuseMount;
use super::loopdev::LoopDevice;
use super::registry::Held;

/// A loop device over a backend's device file.
pub struct BareDevice {
    // Dropped in declaration order: loop, FUSE, directory.
    lo: LoopDevice,
    _fuse: FuseMount,
    _tmp: Held,
    device: PathBuf,
}

impl BareDevice {
    /// `backend` served as a FUSE file (`threads` request threads)
    /// through a loop device with direct I/O.
    pub fn on_backend<B: Backend>(backend: B, threads: usize) -> Result<BareDevice, BlockDevError> {
        if let Some(why) = unavailable_reason(true) {
            return Err(BlockDevError::Unavailable(why));
        }
        prepare()?;
        let tmp = private_dir()?;
        let fuse_dir = held_dir(&tmp).join("fuse");
        mkdir(&fuse_dir)?;
        let fuse = FuseMount::mount(backend, &fuse_dir, threads)?;
        let lo = LoopDevice::attach(&fuse.disk_path())?;
        Ok(BareDevice {
            device: lo.path(),
            lo,
            _fuse: fuse,
            _tmp: tmp,
        })
    }

    /// `/dev/loopN`.
    pub fn device(&self) -> &Path {
        &self.device
    }

    /// Whether the loop device does direct I/O.
    pub fn direct_io(&self) -> bool {
        self.lo.direct_io()
    }
}
