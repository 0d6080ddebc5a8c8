//! The kernel's own zram as a live benchmark contestant.
//!
//! [`KernelZram`] is a private zram block device that takes 4 KiB pages, so
//! the lab can store the same pages in zsmem and in the kernel's zsmalloc
//! and compare latency and memory use.
//!
//! # Protocol
//!
//! 1. **A private device.** The only way a device is obtained is by reading
//!    `/sys/class/zram-control/hot_add`, which creates a fresh device and
//!    returns its number `N`. Every read creates a device, so this module
//!    reads it exactly once per [`KernelZram::create`], with one `read(2)`,
//!    while holding the process-wide device registry lock, and records `N` in
//!    the registry before doing anything else. Devices this process did not
//!    create (the machine's `zram0`, say) are never opened, configured, reset
//!    or removed: every sysfs path written is built from a number the
//!    registry holds.
//! 2. **Configuration**, in the order zram requires: `comp_algorithm` (the
//!    file lists the algorithms offered, the current one in `[brackets]`; an
//!    algorithm not listed makes `create` return
//!    [`ZramError::Unavailable`]), then `mem_limit` if one is asked for,
//!    then `disksize`, which allocates the device's table and its zsmalloc
//!    pool.
//! 3. **The device node.** `/dev/zramN` appears asynchronously (devtmpfs or
//!    udev), so `create` polls for up to two seconds for a block device whose
//!    `st_rdev` equals the `major:minor` in `/sys/block/zramN/dev`. If none
//!    appears it makes its own node with `mknod(2)` in a private `0700`
//!    directory under the temp dir and removes it when the device is removed.
//!    The node is opened `O_RDWR | O_DIRECT` and checked with `fstat` to be
//!    that device.
//! 4. **Pages.** [`KernelZram::write_page`] and [`KernelZram::read_page`] are
//!    one `pwrite(2)` / `pread(2)` of 4096 bytes at `index * 4096` from a
//!    4096-aligned bounce buffer inside the handle (`O_DIRECT` needs the
//!    alignment), so each call is exactly one zram page store or load, with
//!    no page cache in between. [`KernelZram::discard`] is the `BLKDISCARD`
//!    ioctl over `[index * 4096, pages * 4096)`: zram frees those pages and a
//!    discarded page reads back as zeros. Each returns the wall time of its
//!    one system call.
//! 5. **Statistics.** [`KernelZram::mm_stat`] parses `mm_stat`:
//!
//!    | field | unit | meaning |
//!    |---|---|---|
//!    | `orig_data_size` | bytes | pages stored times 4096, same-filled pages included (see below) |
//!    | `compr_data_size` | bytes | sum of the compressed lengths zsmalloc holds |
//!    | `mem_used_total` | bytes | pages zsmalloc holds (its zspages), the real cost |
//!    | `mem_limit` | bytes | the limit on `mem_used_total`, 0 for none |
//!    | `mem_used_max` | bytes | high-water mark of `mem_used_total` |
//!    | `same_pages` | pages | pages filled with one repeated word, stored with no memory |
//!    | `pages_compacted` | pages | zspage pages freed by compaction so far |
//!    | `huge_pages` | pages | pages stored uncompressed (compressed size too large) |
//!    | `huge_pages_since` | pages | huge pages stored since the device was set up (Linux 5.15+) |
//!
//!    Measured on Linux 6.18 (the integration tests assert it):
//!    `orig_data_size` counts every stored page, same-filled ones included,
//!    and `mem_used_total` is 0 on a freshly set up device. `compr_data_size`
//!    counts a huge page as 4096 bytes and a same-filled page as 0.
//!    `huge_pages_since` only grows (a discard lowers `huge_pages`, not it).
//!    [`KernelZram::io_stat`] parses `io_stat` (`failed_reads failed_writes
//!    invalid_io notify_free`); a store past `mem_limit` fails with `EIO` and
//!    counts in `failed_writes`, and every page discarded counts in
//!    `notify_free`.
//!    [`KernelZram::compact`] writes `compact`, which makes zsmalloc move
//!    objects out of sparse zspages and free them.
//!
//! # Cleanup guarantees
//!
//! A device is removed (node closed, `reset`, then `hot_remove`, retried
//! while the kernel reports it busy) when:
//!
//! - its [`KernelZram`] is dropped, including during a panic's unwinding and
//!   when `create` fails half way;
//! - the process gets `SIGINT`: a `ctrlc` handler, installed lazily by the
//!   first `create`, removes every device of the registry and exits with
//!   status 130;
//! - the process gets `SIGHUP`, `SIGQUIT`, `SIGTERM` or `SIGPIPE`: a
//!   `sigaction` handler that writes to a pipe wakes a thread that does the
//!   same and exits with status 128 + the signal. Each is installed only if
//!   the signal still has its default disposition (an ignored `SIGPIPE`
//!   needs none); with no device left, the handler takes the default
//!   action at once;
//! - the process calls `exit` (returning from `main`, `std::process::exit`)
//!   while a handle is leaked: an `atexit` hook removes what is left.
//!
//! If another part of the program already owns the `SIGINT` handler,
//! [`install_signal_cleanup`] reports that as text and that program's handler
//! should call [`remove_registered_devices`] before it exits. Nothing can
//! clean up after `SIGKILL` or `panic = "abort"` in the process itself, so
//! every device created is recorded in `/run/zsmem/zramN.pid` (the
//! creator's pid and start time; removed with the device), and
//! [`KernelZram::create`] first removes, saying so on stderr, each recorded
//! device whose creator is gone ([`remove_stale_devices`]). A device without
//! a record is never touched; a recorded one that is open (in use: its
//! number was reused after a removal by hand) is left with a warning.
//!
//! The registry lock is held while a device is created, torn down, or has
//! its sysfs files touched, and the signal path keeps it until the process
//! has exited, so no device can be created after the cleanup ran and no
//! sysfs file is written after its device number was given back to the
//! kernel. After [`remove_registered_devices`] the handles' descriptors are
//! pointed at `/dev/null`, so a late `pwrite` cannot reach a device whose
//! number the kernel has reused.
//!
//! Pages are 4096 bytes: zram's logical block size. On a kernel whose page
//! size is larger, each call is a partial-page store and the statistics are
//! in units of the kernel's pages.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use serde::Serialize;

/// Bytes in one page of a [`KernelZram`]: zram's logical block size.
pub const PAGE_SIZE: usize = 4096;

const PAGE_U64: u64 = PAGE_SIZE as u64;
const CONTROL_DIR: &str = "/sys/class/zram-control";
const HOT_ADD: &str = "/sys/class/zram-control/hot_add";
const HOT_REMOVE: &str = "/sys/class/zram-control/hot_remove";
/// `_IO(0x12, 119)`: discard a byte range `[start, len]` of a block device.
const BLKDISCARD: u64 = 0x1277;
/// How long to wait for `/dev/zramN` and for a busy device to be released.
const WAIT: Duration = Duration::from_secs(2);
const POLL: Duration = Duration::from_millis(5);

/// What can go wrong with a kernel zram device.
#[derive(Debug, thiserror::Error)]
pub enum ZramError {
    /// zram cannot be used here; the text is a one-line reason to print
    /// when skipping ("not running as root", ...).
    #[error("kernel zram unavailable: {0}")]
    Unavailable(String),
    /// A system call or sysfs access failed; `what` names the file or the
    /// operation.
    #[error("{what}: {source}")]
    Io {
        /// The sysfs file or operation that failed.
        what: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The caller passed something unusable (a buffer that is not one page,
    /// an index past the device, a bad configuration).
    #[error("bad argument: {0}")]
    BadArgument(String),
}

impl ZramError {
    fn io(what: impl Into<String>, source: io::Error) -> Self {
        ZramError::Io {
            what: what.into(),
            source,
        }
    }

    fn parse(what: impl Into<String>, msg: impl Into<String>) -> Self {
        ZramError::Io {
            what: what.into(),
            source: io::Error::new(io::ErrorKind::InvalidData, msg.into()),
        }
    }
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
        if self.disksize_bytes == 0 || self.disksize_bytes % PAGE_U64 != 0 {
            return Err(ZramError::BadArgument(format!(
                "disksize_bytes {} is not a non-zero multiple of {PAGE_SIZE}",
                self.disksize_bytes
            )));
        }
        Ok(())
    }
}

/// zram's `mm_stat`: memory use of one device. Sizes in bytes, counts in
/// pages; see the module documentation for each field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MmStat {
    /// Bytes of data stored, uncompressed (stored pages times 4096).
    pub orig_data_size: u64,
    /// Bytes of compressed data zsmalloc holds.
    pub compr_data_size: u64,
    /// Bytes of memory zsmalloc holds (its zspages).
    pub mem_used_total: u64,
    /// Limit on `mem_used_total` in bytes, 0 for none.
    pub mem_limit: u64,
    /// High-water mark of `mem_used_total` in bytes.
    pub mem_used_max: u64,
    /// Pages stored as one repeated word, with no memory.
    pub same_pages: u64,
    /// Pages freed by compaction.
    pub pages_compacted: u64,
    /// Pages stored uncompressed because they did not compress enough.
    pub huge_pages: u64,
    /// Huge pages stored since the device was set up (absent before 5.15).
    pub huge_pages_since: Option<u64>,
}

impl MmStat {
    /// Memory held beyond the compressed bytes (`mem_used_total -
    /// compr_data_size`, 0 if negative): zsmalloc's fragmentation and slack.
    pub fn overhead(&self) -> u64 {
        self.mem_used_total.saturating_sub(self.compr_data_size)
    }
}

impl FromStr for MmStat {
    type Err = ZramError;

    /// Parses the text of `mm_stat`: eight or nine unsigned decimal fields.
    fn from_str(text: &str) -> Result<Self, ZramError> {
        let v = parse_fields("mm_stat", text, 8, 9)?;
        Ok(MmStat {
            orig_data_size: v[0],
            compr_data_size: v[1],
            mem_used_total: v[2],
            mem_limit: v[3],
            mem_used_max: v[4],
            same_pages: v[5],
            pages_compacted: v[6],
            huge_pages: v[7],
            huge_pages_since: v.get(8).copied(),
        })
    }
}

/// zram's `io_stat`: failed and invalid requests of one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct IoStat {
    /// Reads that failed.
    pub failed_reads: u64,
    /// Writes that failed (a store past `mem_limit`, say).
    pub failed_writes: u64,
    /// Misaligned or out-of-range requests (always 0 on recent kernels,
    /// which reject them before zram sees them).
    pub invalid_io: u64,
    /// Pages freed by swap's slot-free notifications and by discards (on
    /// 6.18 every discarded page counts, stored or not).
    pub notify_free: u64,
}

impl FromStr for IoStat {
    type Err = ZramError;

    /// Parses the text of `io_stat`: four unsigned decimal fields.
    fn from_str(text: &str) -> Result<Self, ZramError> {
        let v = parse_fields("io_stat", text, 4, 4)?;
        Ok(IoStat {
            failed_reads: v[0],
            failed_writes: v[1],
            invalid_io: v[2],
            notify_free: v[3],
        })
    }
}

fn parse_fields(file: &str, text: &str, min: usize, max: usize) -> Result<Vec<u64>, ZramError> {
    let what = format!("parsing {file}");
    let mut out = Vec::with_capacity(max);
    for word in text.split_whitespace() {
        if out.len() == max {
            return Err(ZramError::parse(
                what,
                format!("more than {max} fields in {text:?}"),
            ));
        }
        let n = word
            .parse::<u64>()
            .map_err(|e| ZramError::parse(&what, format!("field {word:?} in {text:?}: {e}")))?;
        out.push(n);
    }
    if out.len() < min {
        return Err(ZramError::parse(
            what,
            format!("{} fields in {text:?}, expected {min}", out.len()),
        ));
    }
    Ok(out)
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
/// See the [module documentation](self) for the protocol and the cleanup
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
        let range: [u64; 2] = [index * PAGE_U64, pages * PAGE_U64];
        let fd = self.file()?.as_raw_fd();
        let start = Instant::now();
        // SAFETY: BLKDISCARD reads two u64 (start, length in bytes) through
        // its pointer argument; `range` is that array and lives across the
        // call. `fd` is an open descriptor owned by `self.file`.
        let rc = unsafe { libc::ioctl(fd, BLKDISCARD as _, range.as_ptr()) };
        let took = start.elapsed();
        if rc != 0 {
            return Err(ZramError::io(
                format!(
                    "BLKDISCARD of pages {index}..{} of {}",
                    index + pages,
                    self.path.display()
                ),
                io::Error::last_os_error(),
            ));
        }
        Ok(took)
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

/// One line on stderr, ignoring failure: this runs in Drop and exit paths,
/// where a panic would abort.
fn warn(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(io::stderr(), "zsmem-lab: {line}");
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

// ---------------------------------------------------------------------------
// Creating and removing devices.

/// A device this process created and has not yet removed.
struct Registered {
    device: u32,
    /// The open descriptor of its node, once the handle exists.
    fd: Option<RawFd>,
    /// A private directory holding a node made with mknod, if any.
    node_dir: Option<PathBuf>,
}

static REGISTRY: Mutex<Vec<Registered>> = Mutex::new(Vec::new());

/// The registry's length, for the signal handler (which cannot lock it):
/// with no device to remove, a signal takes its default action at once.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Publish the registry's length; call after every change, lock held.
fn publish(reg: &[Registered]) {
    LIVE.store(reg.len(), Ordering::SeqCst);
}

// ---------------------------------------------------------------------------
// Records: which devices are ours, for a later run after a SIGKILL.

/// Where each device this module creates is recorded, as `zramN.pid`
/// holding the creator's pid and its start time (`/proc/PID/stat` field
/// 22, so a reused pid is not mistaken for the creator).
pub const RECORD_DIR: &str = "/run/zsmem";

fn record_path(device: u32) -> PathBuf {
    PathBuf::from(format!("{RECORD_DIR}/zram{device}.pid"))
}

/// The start time of process `pid` in clock ticks since boot, if it runs.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count
    // fields after its closing one. Field 22 is the 20th after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn write_record(device: u32) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(RECORD_DIR)?;
    let pid = std::process::id();
    let text = format!("{pid} {}\n", start_time(pid).unwrap_or(0));
    let tmp = PathBuf::from(format!("{RECORD_DIR}/.zram{device}.pid.{pid}"));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, record_path(device))
}

fn remove_record(device: u32) {
    let _ = std::fs::remove_file(record_path(device));
}

/// The creator recorded for `device`: (pid, start time), or None if the
/// record is missing or unreadable.
fn read_record(device: u32) -> Option<(u32, u64)> {
    let text = std::fs::read_to_string(record_path(device)).ok()?;
    let mut f = text.split_whitespace();
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

/// Removes the zram devices that a process of this module created and
/// that outlived it (it was killed by `SIGKILL`, or aborted): each has a
/// record in [`RECORD_DIR`] whose creator is gone. Says so on stderr for
/// each, and returns their numbers. A device without a record, or whose
/// creator still runs, is never touched; a recorded device that is open
/// (the kernel refuses to reset it: someone uses it, e.g. as swap after
/// its number was reused) is left alone with a warning. [`KernelZram::create`]
/// calls this first.
pub fn remove_stale_devices() -> Vec<u32> {
    remove_stale_locked(&registry())
}

fn remove_stale_locked(reg: &[Registered]) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(RECORD_DIR) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(device) = name
            .strip_prefix("zram")
            .and_then(|n| n.strip_suffix(".pid"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if reg.iter().any(|r| r.device == device) {
            continue;
        }
        let Some((pid, started)) = read_record(device) else {
            continue;
        };
        if start_time(pid).is_some_and(|t| t == started || started == 0) {
            continue; // its creator still runs
        }
        let sys = sysfs_dir(device);
        if sys.exists() {
            // No retry on EBUSY: busy means open, and open means in use.
            if let Err(e) = write_attr(&sys.join("reset"), "1") {
                warn(format_args!(
                    "warning: zram{device} was left by process {pid}, which is gone, but cannot be reset ({e}); leaving it"
                ));
                continue;
            }
            if let Err(e) = write_attr_retrying(Path::new(HOT_REMOVE), &device.to_string()) {
                warn(format_args!(
                    "warning: zram{device} was left by process {pid}, which is gone, and was reset but not removed: {e}"
                ));
                continue;
            }
            warn(format_args!(
                "removed zram{device}, left behind by process {pid}, which is gone"
            ));
            removed.push(device);
        }
        remove_record(device);
    }
    removed
}

fn registry() -> MutexGuard<'static, Vec<Registered>> {
    REGISTRY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn sysfs_dir(device: u32) -> PathBuf {
    PathBuf::from(format!("/sys/block/zram{device}"))
}

/// Reads `hot_add` once, creating a device. Call only with the registry
/// locked, and register the number at once.
fn hot_add() -> Result<u32, ZramError> {
    let mut f = File::open(HOT_ADD).map_err(|e| ZramError::io(format!("opening {HOT_ADD}"), e))?;
    let mut buf = [0u8; 32];
    // One read: every read of hot_add creates a device.
    let n = f
        .read(&mut buf)
        .map_err(|e| ZramError::io(format!("reading {HOT_ADD}"), e))?;
    let text = String::from_utf8_lossy(&buf[..n]);
    text.trim().parse::<u32>().map_err(|e| {
        ZramError::parse(
            format!("reading {HOT_ADD} (a device may have been created and not recorded)"),
            format!("{text:?}: {e}"),
        )
    })
}

fn write_attr(path: &Path, value: &str) -> Result<(), ZramError> {
    OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|e| ZramError::io(format!("writing {value:?} to {}", path.display()), e))
}

fn read_attr(path: &Path) -> Result<String, ZramError> {
    std::fs::read_to_string(path)
        .map_err(|e| ZramError::io(format!("reading {}", path.display()), e))
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

/// The `dev_t` in `<dir>/dev` ("major:minor").
fn device_number_of(dir: &Path) -> Result<libc::dev_t, ZramError> {
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
fn wait_for_node(path: &Path, rdev: libc::dev_t) -> Option<PathBuf> {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(meta) = std::fs::metadata(path) {
            if meta.file_type().is_block_device() && meta.rdev() == rdev {
                return Some(path.to_path_buf());
            }
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(POLL);
    }
}

/// Makes a block device node for `rdev` in a new private directory under
/// the temp dir; returns the directory and the node.
fn make_private_node(device: u32, rdev: libc::dev_t) -> Result<(PathBuf, PathBuf), ZramError> {
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

fn is_busy(e: &ZramError) -> bool {
    matches!(e, ZramError::Io { source, .. } if source.raw_os_error() == Some(libc::EBUSY))
}

/// Writes `value` to `path`, retrying for up to [`WAIT`] while the kernel
/// says the device is busy (someone, udev say, still has it open).
fn write_attr_retrying(path: &Path, value: &str) -> Result<(), ZramError> {
    let deadline = Instant::now() + WAIT;
    loop {
        match write_attr(path, value) {
            Err(e) if is_busy(&e) && Instant::now() < deadline => std::thread::sleep(POLL),
            other => return other,
        }
    }
}

/// Resets and removes a registered device whose descriptor is closed (or
/// pointed elsewhere), and its private node. Call with the registry locked.
fn teardown(entry: &Registered) -> Result<(), String> {
    let dir = sysfs_dir(entry.device);
    let mut problems = Vec::new();
    if dir.exists() {
        // hot_remove resets too; resetting first frees the memory even if
        // the removal fails.
        if let Err(e) = write_attr_retrying(&dir.join("reset"), "1") {
            problems.push(e.to_string());
        }
        if let Err(e) = write_attr_retrying(Path::new(HOT_REMOVE), &entry.device.to_string()) {
            problems.push(e.to_string());
        }
    }
    if let Some(node_dir) = &entry.node_dir {
        if let Err(e) = std::fs::remove_dir_all(node_dir) {
            problems.push(format!("removing {}: {e}", node_dir.display()));
        }
    }
    if dir.exists() {
        problems.push(format!("{} still exists", dir.display()));
    } else {
        remove_record(entry.device);
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// Removes every registered device, with the registry locked. Descriptors
/// still held by handles are pointed at `/dev/null` (so their numbers stay
/// taken and a late `pwrite` reaches nothing) before the device is reset.
fn remove_all_locked(reg: &mut Vec<Registered>) -> usize {
    let null = OpenOptions::new().read(true).write(true).open("/dev/null");
    let mut removed = 0;
    let entries = std::mem::take(reg);
    publish(reg);
    for mut entry in entries {
        if let Some(fd) = entry.fd.take() {
            match &null {
                // SAFETY: `fd` is a descriptor a live handle owns; dup2
                // atomically replaces it with a copy of /dev/null, so the
                // handle keeps a valid descriptor it will close on drop.
                Ok(null) => unsafe {
                    libc::dup2(null.as_raw_fd(), fd);
                },
                // SAFETY: as above, but without /dev/null the descriptor
                // is closed; the process is about to exit.
                Err(_) => unsafe {
                    libc::close(fd);
                },
            }
        }
        match teardown(&entry) {
            Ok(()) => removed += 1,
            Err(msg) => warn(format_args!(
                "warning: could not remove zram{}: {msg}",
                entry.device
            )),
        }
    }
    removed
}

/// Removes every zram device this process created and has not yet removed;
/// returns how many were removed.
///
/// Meant for exit paths: a program that owns the `SIGINT` handler itself
/// (so [`install_signal_cleanup`] could not) calls this from it before
/// exiting. Live [`KernelZram`] handles become dead: their I/O goes to
/// `/dev/null` and their statistics calls fail.
pub fn remove_registered_devices() -> usize {
    remove_all_locked(&mut registry())
}

/// The exit path of the signal handlers: removes all devices and exits,
/// keeping the registry locked so that no device is created meanwhile.
fn cleanup_and_exit(signal: &str, status: i32) -> ! {
    let mut reg = registry();
    let n = remove_all_locked(&mut reg);
    if n > 0 {
        warn(format_args!("{signal}: removed {n} zram device(s)"));
    }
    std::process::exit(status)
}

static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);

/// The terminating signals handled through the pipe (`SIGINT` goes through
/// `ctrlc`). `SIGPIPE` is among them for programs that reset it to its
/// default (the `zsmem` binary does, to end quietly on a closed stdout).
const PIPED_SIGNALS: [(libc::c_int, &str); 4] = [
    (libc::SIGHUP, "SIGHUP"),
    (libc::SIGQUIT, "SIGQUIT"),
    (libc::SIGTERM, "SIGTERM"),
    (libc::SIGPIPE, "SIGPIPE"),
];

/// Takes the signal's default action: from the handler, once it returns.
fn default_action(signal: libc::c_int) {
    // SAFETY: signal(2) and raise(3) are async-signal-safe.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}

extern "C" fn on_signal(signal: libc::c_int) {
    if LIVE.load(Ordering::SeqCst) == 0 {
        // Nothing to remove: die as the signal would have made us.
        default_action(signal);
        return;
    }
    let fd = SIGNAL_PIPE.load(Ordering::Relaxed);
    let byte = signal as u8;
    // SAFETY: write(2) is async-signal-safe; `byte` is one readable byte on
    // this frame.
    if fd >= 0 && unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) } == 1 {
        return;
    }
    // The cleanup thread is gone: do what the signal would have done.
    default_action(signal);
}

extern "C" fn at_exit() {
    // try_lock: the lock's holder is either the signal path, which has
    // already cleaned up, or a thread in the middle of create or drop.
    if let Ok(mut reg) = REGISTRY.try_lock() {
        remove_all_locked(&mut reg);
    }
}

/// Installs [`on_signal`] for each of [`PIPED_SIGNALS`] that still has its
/// default disposition, and the thread that does the cleanup it asks for
/// (removes every device, exits with 128 + the signal).
fn install_piped_signals() -> Result<(), String> {
    let mut problems = Vec::new();
    let mut ours = Vec::new();
    for (signal, name) in PIPED_SIGNALS {
        // SAFETY: a zeroed sigaction is a valid "no handler" value to be
        // filled in by the query below.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a null new action only queries; `old` is a valid out pointer.
        if unsafe { libc::sigaction(signal, std::ptr::null(), &mut old) } != 0 {
            problems.push(format!("{name}: sigaction: {}", io::Error::last_os_error()));
        } else if old.sa_sigaction == libc::SIG_DFL {
            ours.push(signal);
        } else if signal != libc::SIGPIPE {
            // An ignored SIGPIPE (Rust's default) ends nothing: no loss.
            problems.push(format!(
                "{name} already has a handler; zram devices are not removed on {name}"
            ));
        }
    }
    if ours.is_empty() {
        return if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        };
    }
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is an array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("signals: pipe2: {}", io::Error::last_os_error()));
    }
    let [read_fd, write_fd] = fds;
    std::thread::Builder::new()
        .name("zsmem-zram-signals".into())
        .spawn(move || {
            let mut byte = 0u8;
            loop {
                // SAFETY: `read_fd` is the pipe's read end, owned by this
                // thread for the life of the process; `byte` is writable.
                let n = unsafe { libc::read(read_fd, (&mut byte as *mut u8).cast(), 1) };
                if n == 1 {
                    let signal = libc::c_int::from(byte);
                    let name = PIPED_SIGNALS
                        .iter()
                        .find(|(s, _)| *s == signal)
                        .map_or("a signal", |(_, n)| n);
                    cleanup_and_exit(name, 128 + signal);
                }
                if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                // Cannot happen with a pipe we own; if it does, the
                // signals fall back to their default action.
                SIGNAL_PIPE.store(-1, Ordering::Relaxed);
                return;
            }
        })
        .map_err(|e| format!("signals: spawning the cleanup thread: {e}"))?;
    SIGNAL_PIPE.store(write_fd, Ordering::Relaxed);
    for signal in ours {
        // SAFETY: zeroed is a valid sigaction to fill in; the handler only
        // calls async-signal-safe functions.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        // SAFETY: `action.sa_mask` is a valid sigset_t to empty.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: `action` is fully initialised; the old action is not wanted.
        if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
            problems.push(format!(
                "signal {signal}: sigaction: {}",
                io::Error::last_os_error()
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// Installs, once per process, the handlers that remove this process's zram
/// devices on `SIGINT` (through `ctrlc`; exit status 130), on `SIGHUP`,
/// `SIGQUIT`, `SIGTERM` and (if not ignored) `SIGPIPE` (`sigaction`, each if
/// it has no handler yet; exit status 128 + the signal) and at `exit`
/// (`atexit`). [`KernelZram::create`] calls it; calling it again returns the
/// first outcome.
///
/// Returns the reasons, as text, for any handler that could not be
/// installed (most often: the program already set a `ctrlc` handler; it
/// should then call [`remove_registered_devices`] from it).
pub fn install_signal_cleanup() -> Result<(), String> {
    static OUTCOME: OnceLock<Result<(), String>> = OnceLock::new();
    OUTCOME
        .get_or_init(|| {
            let mut problems = Vec::new();
            if let Err(e) = ctrlc::try_set_handler(|| cleanup_and_exit("SIGINT", 130)) {
                problems.push(format!(
                    "SIGINT: ctrlc: {e}; zram devices are not removed on Ctrl-C"
                ));
            }
            if let Err(e) = install_piped_signals() {
                problems.push(e);
            }
            // SAFETY: `at_exit` is an extern "C" fn that never unwinds.
            if unsafe { libc::atexit(at_exit) } != 0 {
                problems.push("atexit: registration failed".into());
            }
            if problems.is_empty() {
                Ok(())
            } else {
                Err(problems.join("; "))
            }
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mm_stat_with_nine_fields() {
        let text =
            "  8192000  2048000  2457600        0  2457600      120        7       33       41\n";
        let s: MmStat = text.parse().unwrap();
        assert_eq!(
            s,
            MmStat {
                orig_data_size: 8192000,
                compr_data_size: 2048000,
                mem_used_total: 2457600,
                mem_limit: 0,
                mem_used_max: 2457600,
                same_pages: 120,
                pages_compacted: 7,
                huge_pages: 33,
                huge_pages_since: Some(41),
            }
        );
        assert_eq!(s.overhead(), 409600);
    }

    #[test]
    fn mm_stat_with_eight_fields() {
        let s: MmStat = "4096 100 0 1048576 12288 1 0 0".parse().unwrap();
        assert_eq!(s.orig_data_size, 4096);
        assert_eq!(s.mem_limit, 1048576);
        assert_eq!(s.huge_pages, 0);
        assert_eq!(s.huge_pages_since, None);
        assert_eq!(s.overhead(), 0);
    }

    #[test]
    fn mm_stat_malformed_is_an_error() {
        for text in [
            "",
            "\n",
            "1 2 3 4 5 6 7",
            "1 2 3 4 5 6 7 8 9 10",
            "1 2 3 4 5 6 7 x",
            "1 2 3 4 5 -6 7 8",
            "1 2 3 4 5 6 7 99999999999999999999999",
            "1,2,3,4,5,6,7,8",
        ] {
            let err = text.parse::<MmStat>().unwrap_err();
            assert!(
                matches!(&err, ZramError::Io { what, source }
                    if what == "parsing mm_stat" && source.kind() == io::ErrorKind::InvalidData),
                "{text:?}: {err}"
            );
        }
    }

    #[test]
    fn io_stat_parses_and_rejects() {
        let s: IoStat = "       0        3        0       17\n".parse().unwrap();
        assert_eq!(
            s,
            IoStat {
                failed_reads: 0,
                failed_writes: 3,
                invalid_io: 0,
                notify_free: 17,
            }
        );
        for text in ["", "1 2 3", "1 2 3 4 5", "a b c d"] {
            let err = text.parse::<IoStat>().unwrap_err();
            assert!(err.to_string().starts_with("parsing io_stat"), "{err}");
        }
    }

    #[test]
    fn stats_serialize() {
        let s: MmStat = "4096 100 0 0 12288 1 0 0".parse().unwrap();
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"huge_pages_since\":null"), "{json}");
        let io: IoStat = "1 2 3 4".parse().unwrap();
        assert!(
            serde_json::to_string(&io)
                .unwrap()
                .contains("\"notify_free\":4")
        );
    }

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
