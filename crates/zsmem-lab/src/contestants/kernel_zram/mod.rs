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
//!
//! # Layout
//!
//! | file | concern |
//! |---|---|
//! | `io.rs` | the [`KernelZram`] handle: creating and configuring a device, page I/O, statistics |
//! | `stat.rs` | parsing `mm_stat` and `io_stat` |
//! | `device.rs` | the registry of the devices this process made, `hot_add`, teardown |
//! | `records.rs` | the `/run/zsmem` records and the removal of stale devices |
//! | `signals.rs` | removal on signals and at `exit` |
//! | `node.rs` | the device node: `/dev/zramN` or a private one |
//! | `sysfs.rs` | reading and writing zram's sysfs files |
//! | `error.rs` | [`ZramError`] and the cleanup paths' warnings |
//!
//! They import each other downwards only, in the order `io`, `signals`,
//! `device`, `records`, `node`, `sysfs`, `stat`, `error`.

mod device;
mod error;
mod io;
mod node;
mod records;
mod signals;
mod stat;
mod sysfs;

pub use device::{remove_registered_devices, remove_stale_devices};
pub use error::ZramError;
pub use io::{KernelZram, PAGE_SIZE, ZramConfig, discard_pages};
pub use records::RECORD_DIR;
pub use signals::install_signal_cleanup;
pub use stat::{IoStat, MmStat};
