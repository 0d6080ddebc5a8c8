//! Block devices served by any page contestant, with ext4 on them: the
//! reference's experiment as it ran it (ext4 mounted with discard on a
//! zram device), on every contestant.
//!
//! # How a contestant becomes a block device
//!
//! A FUSE filesystem ([`fuse`]) holds one file, `disk`, whose bytes are
//! the contestant's 4 KiB pages: byte range `[i * 4096, (i + 1) * 4096)`
//! is slot `i` ([`map`]). A read is page loads, a write page stores (a
//! partial page read, changed and stored again), and `fallocate`
//! `PUNCH_HOLE` / `ZERO_RANGE` discards the whole pages inside and zeroes
//! the partial ones. A loop device ([`loopdev`]) attaches the file with 4
//! KiB logical blocks (zram's) and direct I/O, so each block request
//! reaches the contestant once and no copy of the data stays in the page
//! cache; its discards and write-zeroes become those `fallocate` calls.
//! Then `mkfs.ext4` and `mount -o discard` ([`mount`]). The kernel's zram
//! is a block device itself: ext4 goes on `/dev/zramN` directly.
//!
//! A page contestant is called by the FUSE thread that reads the request
//! ([`server`]; a hand-off to a thread of its own put two more wake-ups in
//! every swap-in): behind a mutex, unless it is concurrent (zsmem's
//! `PageStore`, whose requests of whole pages every FUSE thread serves at
//! once). `zsmem disk` serves a `PageStore` the same way ([`backend`]).
//!
//! # Cleanup guarantees
//!
//! Every directory, FUSE mount, loop device and ext4 mount this process
//! makes is registered (and for the swap experiment, each swap area,
//! tmpfs, memory cgroup and change to zswap's parameters), and recorded in `/run/zsmem/blockdev.PID.json`
//! ([`registry`]). It is undone, last made first, when its owner is
//! dropped (also while a panic unwinds, and when making the stack fails
//! half way); on `SIGINT`, `SIGTERM`, `SIGHUP` and `SIGQUIT` ([`signals`],
//! which then also removes this process's kernel zram devices, after the
//! ext4 mounts on them are gone, and exits with 128 + the signal); and by
//! the next run of any process using this module, for records whose
//! creator is gone (killed with `SIGKILL`); that run also removes the
//! kernel zram devices such a process recorded, whether or not it uses
//! the kernel itself. A resource is undone only if it is still what was
//! made: a mount by its mount ID (and unique mount ID, and device), found
//! topmost at its directory and unmounted once through a descriptor of
//! it, never a mount made over or inside it ([`ident`]); a loop device by
//! its backing file's device and inode ([`loopinfo`]); nothing else is touched. A mount
//! with another mount on or inside it is left mounted (with a warning,
//! recorded, and the device under it kept while this process runs); a
//! busy mount is detached lazily; a loop device still held is detached at
//! its last close (autoclear). A directory given to mount on is taken
//! with a lock first ([`mountpoint`]), so two disks cannot both mount on
//! it.
//!
//! Needs root, `/dev/fuse`, `/dev/loop-control` and `mkfs.ext4`:
//! [`unavailable_reason`] says which is missing, in one line.
//!
//! | module | concern |
//! |---|---|
//! | [`map`] | byte ranges as pages: reads, writes, holes, partial pages |
//! | [`backend`] | what serves the device file: the [`Backend`] trait, `PageStore` as one |
//! | [`server`] | any page contestant as a backend (concurrent ones without a mutex) |
//! | [`fuse`] | the FUSE filesystem holding the device file |
//! | [`loopinfo`] | what a loop device is attached to; detaching it only from our file |
//! | [`loopdev`] | loop devices by ioctl: attach with direct I/O (detached on drop) |
//! | [`mount`] | `mkfs.ext4`, mounting, `syncfs`, mountinfo |
//! | [`ident`] | which mount is ours (mount IDs), and unmounting only it |
//! | [`mountpoint`] | taking a directory to mount on, exclusively |
//! | [`device`] | ext4 on a device, assembled and taken apart in order |
//! | [`bare`] | a backend as a bare block device (FUSE file and loop device), for swap |
//! | [`contestant`] | a contestant (or the kernel's zram) with ext4 mounted on it |
//! | [`registry`] | what this process made, its record, stale records |
//! | [`signals`] | undoing everything on signals |
//! | [`error`] | [`BlockDevError`] |

pub mod backend;
pub mod bare;
pub mod contestant;
pub mod device;
pub mod error;
pub mod fuse;
pub mod ident;
pub mod loopdev;
pub mod loopinfo;
pub mod map;
pub mod mount;
pub mod mountpoint;
pub mod registry;
pub mod server;
pub mod signals;

pub use backend::{Backend, StoreBackend};
pub use bare::BareDevice;
pub use contestant::FsContestant;
pub(crate) use device::take_over;
pub use device::{Ext4Device, swap_lock_busy, unavailable_reason};
pub use error::BlockDevError;
pub use server::ContestantServer;
pub use signals::install_signal_cleanup;
