//! The contestants as swap devices: the kernel's zram (a private device),
//! the kernel's zswap in front of a loop device over a sparse file, and
//! any page contestant behind the block device `--fs ext4` serves (FUSE
//! file and loop device). Each is taken apart in order on drop: swap off,
//! then zswap's parameters put back, then the devices.

use std::path::Path;
use std::sync::Arc;

use crate::allin;
use crate::blockdev::device::{held_dir, private_dir};
use crate::blockdev::loopdev::LoopDevice;
use crate::blockdev::registry::Held;
use crate::blockdev::{BareDevice, BlockDevError, ContestantServer};
use crate::contestants::kernel::KernelContestant;
use crate::contestants::kernel_zram::ZramError;
use crate::contestants::{Figures, LabError, PageContestant};
use crate::corpus::PAGE_SIZE;
use crate::workloads::untar_rm::Latencies;

use super::area::SwapOn;
use super::procfs::ZswapMeminfo;
use super::zswap::{ZswapSettings, read_param};

/// Request threads of the device file (as `--fs ext4` runs it).
const FUSE_THREADS: usize = 2;

enum Kind {
    Zram(Box<KernelContestant>),
    Zswap {
        // Dropped in declaration order: parameters, loop device, file.
        _settings: ZswapSettings,
        _lo: LoopDevice,
        _dir: Held,
    },
    Served {
        _dev: BareDevice,
        server: Arc<ContestantServer>,
    },
}

/// A contestant as the swap area in use.
pub struct SwapTarget {
    // Off before anything under it goes (declaration order).
    swap: SwapOn,
    kind: Kind,
    name: String,
    config: String,
    /// zswap turned off for a zram or served swap area when the machine
    /// had it on (else zswap, not the contestant, would take the pages);
    /// put back last.
    _zswap_off: Option<ZswapSettings>,
}

/// Turn zswap off for the life of a swap area that is not zswap's, if it
/// is on; its setting is put back when the result is dropped.
fn zswap_off() -> Result<Option<ZswapSettings>, BlockDevError> {
    if read_param("enabled").as_deref() == Some("Y") {
        Ok(Some(ZswapSettings::apply(&[("enabled", "N")])?))
    } else {
        Ok(None)
    }
}

fn zram_unavailable(e: LabError) -> BlockDevError {
    match e {
        LabError::Zram(ZramError::Unavailable(why)) | LabError::Skipped(why) => {
            BlockDevError::Unavailable(why)
        }
        e => e.into(),
    }
}

impl SwapTarget {
    /// A private kernel zram device of `bytes` with `algorithm`, as swap
    /// (as a machine runs it: no discard option; zram frees a slot when
    /// the kernel lets go of it).
    pub fn kernel_zram(algorithm: &str, bytes: u64) -> Result<SwapTarget, BlockDevError> {
        crate::blockdev::take_over()?;
        let zram = Box::new(
            KernelContestant::named("kernel-zram", algorithm, (bytes as usize) / PAGE_SIZE)
                .map_err(zram_unavailable)?,
        );
        let zswap = zswap_off()?;
        let swap = SwapOn::enable(zram.device().device_path(), false)?;
        Ok(SwapTarget {
            config: format!("swap on {}", zram.config()),
            name: "kernel-zram".into(),
            swap,
            kind: Kind::Zram(zram),
            _zswap_off: zswap,
        })
    }

    /// The kernel's zswap (enabled, with `compressor` if the kernel has it,
    /// else the one it is set to) in front of a loop device over a sparse
    /// file of `bytes` in a private directory.
    pub fn zswap(compressor: &str, bytes: u64) -> Result<SwapTarget, BlockDevError> {
        if let Some(why) = super::zswap::unavailable_reason() {
            return Err(BlockDevError::Unavailable(why));
        }
        crate::blockdev::take_over()?;
        let dir = private_dir()?;
        let file = held_dir(&dir).join("zswap-backing");
        std::fs::File::create(&file)
            .and_then(|f| f.set_len(bytes))
            .map_err(|e| BlockDevError::io(format!("creating {}", file.display()), e))?;
        let lo = LoopDevice::attach(&file)?;
        let settings = match ZswapSettings::apply(&[("compressor", compressor), ("enabled", "Y")]) {
            Ok(s) => s,
            Err(_) => {
                let s = ZswapSettings::apply(&[("enabled", "Y")])?;
                // Said, not silent: its figures are then of another codec
                // than the other contestants' (a first-contact review).
                crate::blockdev::error::warn(format_args!(
                    "warning: this kernel's zswap has no compressor {compressor}; it runs with {} \
                     (its setting), so its figures are not of the same codec as the others'",
                    read_param("compressor").unwrap_or_else(|| "?".into())
                ));
                s
            }
        };
        let swap = SwapOn::enable(&lo.path(), false)?;
        let param = |n: &str| read_param(n).unwrap_or_else(|| "?".into());
        let config = format!(
            "zswap (compressor {}, zsmalloc, max_pool_percent {}, accept_threshold_percent {}, shrinker_enabled {}) in front of swap on {} over a sparse file of {} MiB; pool from /proc/meminfo (Zswap, Zswapped)",
            param("compressor"),
            param("max_pool_percent"),
            param("accept_threshold_percent"),
            param("shrinker_enabled"),
            lo.path().display(),
            bytes >> 20
        );
        Ok(SwapTarget {
            swap,
            kind: Kind::Zswap {
                _settings: settings,
                _lo: lo,
                _dir: dir,
            },
            name: "zswap".into(),
            config,
            _zswap_off: None,
        })
    }

    /// A page contestant made by `make` (at least
    /// `bytes / 4096` slots) behind a device file of `bytes` through a
    /// loop device, as swap with discard (`--discard=pages`: freed swap
    /// pages become holes, discards for the contestant).
    pub fn served<F>(bytes: u64, make: F) -> Result<SwapTarget, BlockDevError>
    where
        F: FnOnce() -> Result<Box<dyn PageContestant + Send>, LabError>,
    {
        if let Some(why) = crate::blockdev::unavailable_reason(true) {
            return Err(BlockDevError::Unavailable(why));
        }
        let server = Arc::new(ContestantServer::start(bytes, make)?);
        let dev = BareDevice::on_backend(Arc::clone(&server), FUSE_THREADS)?;
        let zswap = zswap_off()?;
        let swap = SwapOn::enable(dev.device(), true)?;
        let dio = if dev.direct_io() {
            "direct I/O"
        } else {
            "buffered I/O"
        };
        Ok(SwapTarget {
            name: server.name().to_string(),
            config: format!(
                "swap (discard=pages) on {} ({dio}) on a FUSE file of {} MiB served by: {}",
                dev.device().display(),
                bytes >> 20,
                server.config()
            ),
            swap,
            kind: Kind::Served { _dev: dev, server },
            _zswap_off: zswap,
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

    /// The swap device.
    pub fn device(&self) -> &Path {
        self.swap.device()
    }

    /// The store's figures now: for zram its mm_stat (all-in with the
    /// kernel's estimates), for zswap `/proc/meminfo` (`Zswap` the pool,
    /// `Zswapped` the pages stored; all-in with the same estimates, zswap's
    /// own entries not counted), for a served contestant its own.
    pub fn figures(&mut self) -> Result<Figures, BlockDevError> {
        match &mut self.kind {
            Kind::Zram(z) => Ok(z.figures()?),
            Kind::Zswap { .. } => {
                let m = ZswapMeminfo::now().unwrap_or_default();
                let objects = m.stored / PAGE_SIZE as u64;
                let f = Figures {
                    orig: m.stored,
                    pool: m.pool,
                    ..Figures::default()
                };
                Ok(f.with_terms(allin::kernel_terms(m.pool, 0, objects)))
            }
            // Not `figures`: a zsmem store's waits for its return delay
            // to pass, and would hold the device (every request waiting)
            // 15 ms of every sample.
            Kind::Served { server, .. } => server.sample(),
        }
    }

    /// Per-page store, load and discard latencies where the contestant
    /// times its own calls (a served one); `None` for the kernel's zram and
    /// zswap, whose calls come from the kernel's swap path and cannot be
    /// timed here without BPF or kprobes.
    pub fn latencies(&self) -> Result<Option<Latencies>, BlockDevError> {
        match &self.kind {
            Kind::Served { server, .. } => Ok(Some(server.latencies()?)),
            _ => Ok(None),
        }
    }
}
