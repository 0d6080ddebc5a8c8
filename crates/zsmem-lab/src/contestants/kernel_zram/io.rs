//! The [`KernelZram`] handle: creating and configuring a device, page I/O, statistics.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::device::{Registered, hot_add, publish, registry, remove_stale_locked, teardown};
use super::error::{ZramError, warn};
use super::node::{device_number_of, make_private_node, wait_for_node};
use super::records::{RECORD_DIR, write_record};
use super::signals::install_signal_cleanup;
use super::stat::{IoStat, MmStat};
use super::sysfs::{CONTROL_DIR, HOT_ADD, read_attr, sysfs_dir, write_attr};

/// Bytes in one page of a [`KernelZram`]: zram's logical block size.
pub const PAGE_SIZE: usize = 4096;

const PAGE_U64: u64 = PAGE_SIZE as u64;
/// `_IO(0x12, 119)`: discard a byte range `[start, len]` of a block device.
const BLKDISCARD: u64 = 0x1277;

/// Discard `pages` pages from `index` of the block device open as `file`
/// with `BLKDISCARD` (for callers with a descriptor of their own, such as
/// one per thread: [`KernelZram::device_path`] opened again). Checks no
/// range: the kernel refuses one past the device's end.
pub fn discard_pages(file: &File, index: u64, pages: u64) -> io::Result<()> {
    let range: [u64; 2] = [index * PAGE_U64, pages * PAGE_U64];
    // SAFETY: BLKDISCARD reads two u64 (start, length in bytes) through
    // its pointer argument; `range` is that array and lives across the
    // call. The descriptor is open: `file` owns it for the call.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), BLKDISCARD as _, range.as_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// How to set up a [`KernelZram`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ZramConfig {
    /// Compression algorithm, one of those `comp_algorithm` lists
    /// (`lzo-rle`, `lzo`, `lz4`, ...).
    pub algorithm: String,
    /// Size of the device in bytes: a non-zero multiple of 4096.
    pub disksize_bytes: u64,
    /// Limit on the memory zsmalloc may hold (`mem_limit`), if any; a store
    /// that would pass it fails with `EIO`.
    pub mem_limit_bytes: Option<u64>,
}

impl Default for ZramConfig {
    /// lz4, 256 MiB, no memory limit.
    fn default() -> Self {
        ZramConfig {
            algorithm: "lz4".to_string(),
            disksize_bytes: 256 << 20,
            mem_limit_bytes: None,
        }
    }
}

impl ZramConfig {
    /// lz4 and no memory limit, with room for `pages` pages.
    pub fn with_pages(pages: u64) -> Self {
        ZramConfig {
            disksize_bytes: pages.saturating_mul(PAGE_U64),
            ..ZramConfig::default()
        }
    }

    fn validate(&self) -> Result<(), ZramError> {
        let alg = &self.algorithm;
        if alg.is_empty() || alg.len() > 63 || !alg.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ZramError::BadArgument(format!(
                "algorithm {alg:?} is not a plain algorithm name"
            )));
        }
        if self.disksize_bytes == 0 || !self.disksize_bytes.is_multiple_of(PAGE_U64) {
            return Err(ZramError::BadArgument(format!(
                "disksize_bytes {} is not a non-zero multiple of {PAGE_SIZE}",
                self.disksize_bytes
            )));
        }
        Ok(())
    }
}

/// The algorithms a `comp_algorithm` text offers, and the current one (the
/// name in `[brackets]`).
fn parse_comp_algorithm(text: &str) -> (Vec<String>, Option<String>) {
    let mut all = Vec::new();
    let mut current = None;
    for word in text.split_whitespace() {
        match word.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
            Some(name) => {
                current = Some(name.to_string());
                all.push(name.to_string());
            }
            None => all.push(word.to_string()),
        }
    }
    (all, current)
}

/// One page, aligned for `O_DIRECT`.
#[repr(C, align(4096))]
struct AlignedPage([u8; PAGE_SIZE]);

/// A private kernel zram device taking 4 KiB pages; removed on drop.
///
/// See the module documentation (`contestants::kernel_zram`) for the protocol and the cleanup
/// guarantees.
pub struct KernelZram {
    device: u32,
    algorithm: String,
    disksize: u64,
    mem_limit: Option<u64>,
    path: PathBuf,
    file: Option<File>,
    bounce: Box<AlignedPage>,
}

impl fmt::Debug for KernelZram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernelZram")
            .field("device", &self.device)
            .field("algorithm", &self.algorithm)
            .field("disksize", &self.disksize)
            .field("mem_limit", &self.mem_limit)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl KernelZram {
    /// Creates, configures and opens a private zram device.
    ///
    /// Returns [`ZramError::Unavailable`] when not running as root, when
    /// zram is absent, or when `cfg.algorithm` is not offered (the device
    /// made to find out is removed again); [`ZramError::BadArgument`] for an
    /// unusable `cfg`. On any error no device is left behind.
    pub fn create(cfg: &ZramConfig) -> Result<KernelZram, ZramError> {
        cfg.validate()?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err(ZramError::Unavailable("not running as root".into()));
        }
        if !Path::new(CONTROL_DIR).is_dir() || !Path::new(HOT_ADD).exists() {
            return Err(ZramError::Unavailable(format!(
                "no {CONTROL_DIR} (zram not built in or not loaded)"
            )));
        }
        // A failure here only loses the automatic cleanup on signals; the
        // caller can ask install_signal_cleanup() for the reason.
        let _ = install_signal_cleanup();

        let mut reg = registry();
        remove_stale_locked(&reg);
        let device = hot_add()?;
        reg.push(Registered {
            device,
            fd: None,
            node_dir: None,
        });
        publish(&reg);
        if let Err(e) = write_record(device) {
            warn(format_args!(
                "warning: zram{device} has no record in {RECORD_DIR} ({e}); if this process is killed, a later run cannot remove it"
            ));
        }
        let at = reg.len() - 1;
        match configure(device, cfg, &mut reg[at]) {
            Ok((file, path)) => {
                reg[at].fd = Some(file.as_raw_fd());
                Ok(KernelZram {
                    device,
                    algorithm: cfg.algorithm.clone(),
                    disksize: cfg.disksize_bytes,
                    mem_limit: cfg.mem_limit_bytes,
                    path,
                    file: Some(file),
                    bounce: Box::new(AlignedPage([0; PAGE_SIZE])),
                })
            }
            Err(e) => {
                let entry = reg.swap_remove(at);
                publish(&reg);
                if let Err(msg) = teardown(&entry) {
                    warn(format_args!(
                        "warning: could not remove zram{device}: {msg}"
                    ));
                }
                Err(e)
            }
        }
    }

    /// The device's number `N` (`/dev/zramN`, `/sys/block/zramN`).
    pub fn device_number(&self) -> u32 {
        self.device
    }

    /// The compression algorithm the device was set up with.
    pub fn algorithm(&self) -> &str {
        &self.algorithm
    }

    /// The device's size in bytes.
    pub fn disksize_bytes(&self) -> u64 {
        self.disksize
    }

    /// The memory limit the device was set up with, if any.
    pub fn mem_limit_bytes(&self) -> Option<u64> {
        self.mem_limit
    }

    /// How many pages the device holds: valid indices are `0..pages()`.
    pub fn pages(&self) -> u64 {
        self.disksize / PAGE_U64
    }

    /// The device node in use: `/dev/zramN`, or a private node if devtmpfs
    /// did not provide one.
    pub fn device_path(&self) -> &Path {
        &self.path
    }

    /// The device's sysfs directory, `/sys/block/zramN`.
    pub fn sysfs_dir(&self) -> PathBuf {
        sysfs_dir(self.device)
    }

    /// Stores one page at `index`; returns the time the `pwrite` took.
    pub fn write_page(&mut self, index: u64, page: &[u8]) -> Result<Duration, ZramError> {
        let offset = self.check_page(index, page.len())?;
        self.bounce.0.copy_from_slice(page);
        let file = self.file()?;
        let start = Instant::now();
        let res = file.write_at(&self.bounce.0, offset);
        let took = start.elapsed();
        match res {
            Ok(PAGE_SIZE) => Ok(took),
            Ok(n) => Err(ZramError::io(
                format!("pwrite page {index} of {}", self.path.display()),
                io::Error::new(io::ErrorKind::WriteZero, format!("wrote {n} of 4096 bytes")),
            )),
            Err(e) => Err(ZramError::io(
                format!("pwrite page {index} of {}", self.path.display()),
                e,
            )),
        }
    }

    /// Loads the page at `index` into `buf` (4096 bytes); returns the time
    /// the `pread` took. A page never written or discarded reads as zeros.
    pub fn read_page(&mut self, index: u64, buf: &mut [u8]) -> Result<Duration, ZramError> {
        let offset = self.check_page(index, buf.len())?;
        let file = self.file.as_ref().ok_or_else(closed)?;
        let start = Instant::now();
        let res = file.read_at(&mut self.bounce.0, offset);
        let took = start.elapsed();
        match res {
            Ok(PAGE_SIZE) => {
                buf.copy_from_slice(&self.bounce.0);
                Ok(took)
            }
            Ok(n) => Err(ZramError::io(
                format!("pread page {index} of {}", self.path.display()),
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("read {n} of 4096 bytes"),
                ),
            )),
            Err(e) => Err(ZramError::io(
                format!("pread page {index} of {}", self.path.display()),
                e,
            )),
        }
    }

    /// Discards `pages` pages from `index` with `BLKDISCARD`; returns the
    /// time the ioctl took. Discarded pages free their memory and read back
    /// as zeros.
    pub fn discard(&mut self, index: u64, pages: u64) -> Result<Duration, ZramError> {
        let end = index.checked_add(pages).filter(|&e| e <= self.pages());
        if pages == 0 || end.is_none() {
            return Err(ZramError::BadArgument(format!(
                "discard of {pages} pages at {index}: the device has {} pages",
                self.pages()
            )));
        }
        let start = Instant::now();
        discard_pages(self.file()?, index, pages).map_err(|e| {
            ZramError::io(
                format!(
                    "BLKDISCARD of pages {index}..{} of {}",
                    index + pages,
                    self.path.display()
                ),
                e,
            )
        })?;
        Ok(start.elapsed())
    }

    /// Reads and parses `/sys/block/zramN/mm_stat`.
    pub fn mm_stat(&self) -> Result<MmStat, ZramError> {
        let text = self.read_attr("mm_stat")?;
        text.parse()
    }

    /// Reads and parses `/sys/block/zramN/io_stat`.
    pub fn io_stat(&self) -> Result<IoStat, ZramError> {
        let text = self.read_attr("io_stat")?;
        text.parse()
    }

    /// Compacts the device's zsmalloc pool (writes 1 to
    /// `/sys/block/zramN/compact`); its effect shows in
    /// [`MmStat::pages_compacted`] and `mem_used_total`.
    pub fn compact(&self) -> Result<(), ZramError> {
        let path = sysfs_dir(self.device).join("compact");
        self.while_registered(|| write_attr(&path, "1"))
    }

    fn file(&self) -> Result<&File, ZramError> {
        self.file.as_ref().ok_or_else(closed)
    }

    fn check_page(&self, index: u64, len: usize) -> Result<u64, ZramError> {
        if len != PAGE_SIZE {
            return Err(ZramError::BadArgument(format!(
                "a page is {PAGE_SIZE} bytes, not {len}"
            )));
        }
        if index >= self.pages() {
            return Err(ZramError::BadArgument(format!(
                "page {index} is past the device's {} pages",
                self.pages()
            )));
        }
        Ok(index * PAGE_U64)
    }

    fn read_attr(&self, name: &str) -> Result<String, ZramError> {
        let path = sysfs_dir(self.device).join(name);
        self.while_registered(|| {
            std::fs::read_to_string(&path)
                .map_err(|e| ZramError::io(format!("reading {}", path.display()), e))
        })
    }

    /// Runs `f` (a sysfs access to this device) holding the registry lock,
    /// if the device is still registered: after a signal's cleanup its
    /// number may already belong to someone else.
    fn while_registered<T>(
        &self,
        f: impl FnOnce() -> Result<T, ZramError>,
    ) -> Result<T, ZramError> {
        let reg = registry();
        if !reg.iter().any(|r| r.device == self.device) {
            return Err(closed());
        }
        let out = f();
        drop(reg);
        out
    }
}

impl Drop for KernelZram {
    /// Closes the device, resets it and removes it; a failure to remove is
    /// reported as a one-line warning on stderr.
    fn drop(&mut self) {
        let mut reg = registry();
        // Close first: a device that is open cannot be reset or removed.
        drop(self.file.take());
        if let Some(at) = reg.iter().position(|r| r.device == self.device) {
            let mut entry = reg.swap_remove(at);
            publish(&reg);
            entry.fd = None;
            if let Err(msg) = teardown(&entry) {
                warn(format_args!(
                    "warning: could not remove zram{}: {msg}",
                    self.device
                ));
            }
        }
    }
}

fn closed() -> ZramError {
    ZramError::io(
        "using a removed zram device",
        io::Error::new(
            io::ErrorKind::NotConnected,
            "the device was removed by the exit cleanup",
        ),
    )
}

/// Configures a freshly added device and opens it. Records a private node
/// directory in `entry` as soon as it exists, so a failure cleans it up.
fn configure(
    device: u32,
    cfg: &ZramConfig,
    entry: &mut Registered,
) -> Result<(File, PathBuf), ZramError> {
    let dir = sysfs_dir(device);
    let comp = dir.join("comp_algorithm");
    let (offered, _current) = parse_comp_algorithm(&read_attr(&comp)?);
    if !offered.contains(&cfg.algorithm) {
        return Err(ZramError::Unavailable(format!(
            "algorithm {} not offered: available {}",
            cfg.algorithm,
            offered.join(" ")
        )));
    }
    write_attr(&comp, &cfg.algorithm)?;
    if let Some(limit) = cfg.mem_limit_bytes {
        write_attr(&dir.join("mem_limit"), &limit.to_string())?;
    }
    write_attr(&dir.join("disksize"), &cfg.disksize_bytes.to_string())?;
    let got = read_attr(&dir.join("disksize"))?;
    if got.trim() != cfg.disksize_bytes.to_string() {
        return Err(ZramError::parse(
            format!("reading back {}/disksize", dir.display()),
            format!("{:?}, expected {}", got.trim(), cfg.disksize_bytes),
        ));
    }

    let rdev = device_number_of(&dir)?;
    let path = match wait_for_node(&PathBuf::from(format!("/dev/zram{device}")), rdev) {
        Some(p) => p,
        None => {
            let (node_dir, node) = make_private_node(device, rdev)?;
            entry.node_dir = Some(node_dir);
            node
        }
    };
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT | libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| ZramError::io(format!("opening {} O_RDWR|O_DIRECT", path.display()), e))?;
    let meta = file
        .metadata()
        .map_err(|e| ZramError::io(format!("fstat of {}", path.display()), e))?;
    if !meta.file_type().is_block_device() || meta.rdev() != rdev {
        return Err(ZramError::io(
            format!("opening {}", path.display()),
            io::Error::other(format!(
                "not the block device {}:{}",
                libc::major(rdev),
                libc::minor(rdev)
            )),
        ));
    }
    Ok((file, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comp_algorithm_text() {
        let (all, current) = parse_comp_algorithm("lzo [lzo-rle] lz4 \n");
        assert_eq!(all, ["lzo", "lzo-rle", "lz4"]);
        assert_eq!(current.as_deref(), Some("lzo-rle"));
        let (all, current) = parse_comp_algorithm("");
        assert!(all.is_empty());
        assert_eq!(current, None);
    }

    #[test]
    fn config_validation() {
        assert!(ZramConfig::default().validate().is_ok());
        assert_eq!(ZramConfig::default().algorithm, "lz4");
        assert_eq!(ZramConfig::with_pages(10).disksize_bytes, 40960);
        for cfg in [
            ZramConfig::with_pages(0),
            ZramConfig {
                disksize_bytes: 4097,
                ..ZramConfig::default()
            },
            ZramConfig {
                algorithm: String::new(),
                ..ZramConfig::default()
            },
            ZramConfig {
                algorithm: "lz4\nlzo".into(),
                ..ZramConfig::default()
            },
        ] {
            // validate() runs before any privilege check or device creation.
            assert!(
                matches!(KernelZram::create(&cfg), Err(ZramError::BadArgument(_))),
                "{cfg:?}"
            );
        }
    }
}
