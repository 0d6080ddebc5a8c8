//! A contestant as a mounted ext4 filesystem, for the ext4 workload: any
//! page contestant behind the device file, or the kernel's zram, which is
//! a block device itself.

use std::path::Path;
use std::sync::Arc;

use super::device::Ext4Device;
use super::error::BlockDevError;
use super::server::ContestantServer;
use crate::contestants::kernel::KernelContestant;
use crate::contestants::{Figures, LabError, PageContestant};
use crate::corpus::PAGE_SIZE;
use crate::workloads::untar_rm::Latencies;

enum Behind {
    Server(Arc<ContestantServer>),
    Zram(Box<KernelContestant>),
}

/// A contestant with ext4 mounted on it.
pub struct FsContestant {
    // Unmounted and taken apart before the contestant goes (declaration
    // order): a mounted zram device cannot be reset.
    dev: Ext4Device,
    behind: Behind,
    name: String,
    config: String,
}

/// Request threads of the device file: two, so the next request is read
/// while one is served.
const FUSE_THREADS: usize = 2;

impl FsContestant {
    /// A page contestant made by `make` (with at least
    /// `bytes / 4096` slots) behind a device file of `bytes` bytes.
    pub fn on_device_file<F>(bytes: u64, make: F) -> Result<FsContestant, BlockDevError>
    where
        F: FnOnce() -> Result<Box<dyn PageContestant + Send>, LabError>,
    {
        if let Some(why) = super::device::unavailable_reason(true) {
            return Err(BlockDevError::Unavailable(why));
        }
        let server = Arc::new(ContestantServer::start(bytes, make)?);
        let dev = Ext4Device::on_backend(Arc::clone(&server), FUSE_THREADS, None)?;
        let dio = match dev.loop_direct_io() {
            Some(true) => "direct I/O",
            _ => "buffered I/O",
        };
        Ok(FsContestant {
            name: server.name().to_string(),
            config: format!(
                "ext4 (-o discard) on {} ({dio}) on a FUSE file of {} MiB served by: {}",
                dev.device().display(),
                bytes >> 20,
                server.config()
            ),
            dev,
            behind: Behind::Server(server),
        })
    }

    /// The kernel's zram, `bytes` bytes with `algorithm`, ext4 on it.
    pub fn on_kernel_zram(
        name: &str,
        algorithm: &str,
        bytes: u64,
    ) -> Result<FsContestant, BlockDevError> {
        if let Some(why) = super::device::unavailable_reason(false) {
            return Err(BlockDevError::Unavailable(why));
        }
        // The signal handler first: it must own SIGINT before zram's.
        super::signals::install_signal_cleanup().map_err(BlockDevError::Unavailable)?;
        let zram = match KernelContestant::named(name, algorithm, (bytes as usize) / PAGE_SIZE) {
            Ok(z) => Box::new(z),
            Err(LabError::Zram(crate::contestants::kernel_zram::ZramError::Unavailable(why))) => {
                return Err(BlockDevError::Unavailable(why));
            }
            Err(e) => return Err(e.into()),
        };
        let dev = Ext4Device::on_block_device(zram.device().device_path())?;
        Ok(FsContestant {
            name: name.to_string(),
            config: format!(
                "ext4 (-o discard) on {}; its per-page latencies are not seen (its requests come from the block layer): the latency columns are empty",
                zram.config()
            ),
            dev,
            behind: Behind::Zram(zram),
        })
    }

    /// Short name for tables.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The configuration, for the report.
    pub fn config(&self) -> &str {
        &self.config
    }

    /// Where ext4 is mounted.
    pub fn dir(&self) -> &Path {
        self.dev.dir()
    }

    /// Flush everything to the device (see [`Ext4Device::sync`]).
    pub fn sync(&self) -> Result<(), BlockDevError> {
        self.dev.sync()
    }

    /// The block device's discard counters now (see
    /// [`Ext4Device::discard_counters`]).
    pub fn discard_counters(&self) -> [u64; 2] {
        self.dev.discard_counters()
    }

    /// The contestant's figures now.
    pub fn figures(&mut self) -> Result<Figures, BlockDevError> {
        match &mut self.behind {
            Behind::Server(s) => s.figures(),
            Behind::Zram(z) => Ok(z.figures()?),
        }
    }

    /// Compact now.
    pub fn compact(&mut self) -> Result<(), BlockDevError> {
        match &mut self.behind {
            Behind::Server(s) => s.compact(),
            Behind::Zram(z) => Ok(z.compact()?),
        }
    }

    /// Per-page latencies of the contestant's own operations (empty for
    /// the kernel's zram, whose requests come from the block layer).
    pub fn latencies(&self) -> Result<Latencies, BlockDevError> {
        match &self.behind {
            Behind::Server(s) => s.latencies(),
            Behind::Zram(_) => Ok(Latencies::default()),
        }
    }
}
