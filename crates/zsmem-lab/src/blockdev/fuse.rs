//! The device file: a FUSE filesystem holding one file, `disk`, whose
//! reads, writes and holes go to a [`Backend`].
//!
//! The file is opened with `FOPEN_DIRECT_IO`, so the kernel keeps none of
//! it in its page cache: every read and write reaches the backend, and the
//! data lives once, compressed, as on a zram device. `fallocate` with
//! `PUNCH_HOLE` (how a loop device passes a discard on) and `ZERO_RANGE`
//! (its write-zeroes) both discard the pages inside the range; a plain
//! allocation inside the file is a no-op.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

use fuser::{
    BackgroundSession, Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags,
    Generation, INodeNo, InitFlags, KernelConfig, LockOwner, MountOption, OpenFlags, ReplyAttr,
    ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request,
    WriteFlags,
};

use super::backend::Backend;
use super::error::{BlockDevError, warn};
use super::map::{check_inside, read_len};
use super::registry::{self, Held, Resource};

/// The name of the one file.
pub const DISK_FILE: &str = "disk";

const ROOT: INodeNo = INodeNo(1);
const DISK: INodeNo = INodeNo(2);
const TTL: Duration = Duration::from_secs(3600);

const FALLOC_FL_KEEP_SIZE: i32 = 0x01;
const FALLOC_FL_PUNCH_HOLE: i32 = 0x02;
const FALLOC_FL_ZERO_RANGE: i32 = 0x10;

/// How many backend errors are reported on stderr before going quiet.
const ERRORS_SHOWN: u32 = 5;

/// The filesystem: a root directory holding `disk`.
struct DeviceFs<B: Backend> {
    backend: B,
    created: SystemTime,
    errors: AtomicU32,
}

impl<B: Backend> DeviceFs<B> {
    fn attr(&self, ino: INodeNo) -> Option<FileAttr> {
        let (kind, perm, size, nlink) = match ino {
            ROOT => (FileType::Directory, 0o700, 0, 2),
            DISK => (FileType::RegularFile, 0o600, self.backend.size(), 1),
            _ => return None,
        };
        Some(FileAttr {
            ino,
            size,
            blocks: size / 512,
            atime: self.created,
            mtime: self.created,
            ctime: self.created,
            crtime: self.created,
            kind,
            perm,
            nlink,
            // SAFETY: getuid/getgid have no preconditions and cannot fail.
            uid: unsafe { libc::getuid() },
            // SAFETY: as above.
            gid: unsafe { libc::getgid() },
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }

    /// The backend failed: say so (the first few times) and answer `EIO`.
    fn failed(&self, what: &str, e: &str) -> Errno {
        let n = self.errors.fetch_add(1, Ordering::Relaxed);
        if n < ERRORS_SHOWN {
            warn(format_args!("device file: {what}: {e}"));
        } else if n == ERRORS_SHOWN {
            warn(format_args!("device file: more errors, not shown"));
        }
        Errno::EIO
    }
}

impl<B: Backend> Filesystem for DeviceFs<B> {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Direct I/O from an asynchronous caller (the loop device's
        // worker) stays asynchronous: the worker hands the request over
        // and takes the next, so both request threads can be busy and
        // the worker waits on no reply. A kernel without it serves the
        // same requests one at a time.
        let _ = config.add_capabilities(InitFlags::FUSE_ASYNC_DIO);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match (parent, name.to_str()) {
            (ROOT, Some(DISK_FILE)) => {
                let attr = self.attr(DISK).expect("the disk has attributes");
                reply.entry(&TTL, &attr, Generation(0));
            }
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // The device has a fixed size; other attributes are ignored.
        match self.attr(ino) {
            Some(a) if size.is_none_or(|s| s == a.size) => reply.attr(&TTL, &a),
            Some(_) => reply.error(Errno::EINVAL),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match ino {
            DISK => reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO),
            ROOT => reply.error(Errno::EISDIR),
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if ino != DISK {
            return reply.error(Errno::EISDIR);
        }
        let len = read_len(offset, u64::from(size), self.backend.size()) as usize;
        let mut buf = vec![0u8; len];
        match self.backend.read_at(offset, &mut buf) {
            Ok(()) => reply.data(&buf),
            Err(e) => reply.error(self.failed("read", &e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if ino != DISK {
            return reply.error(Errno::EISDIR);
        }
        if check_inside(offset, data.len() as u64, self.backend.size()).is_err() {
            return reply.error(Errno::EFBIG);
        }
        match self.backend.write_at(offset, data) {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(self.failed("write", &e)),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if ino != DISK {
            return reply.error(Errno::EISDIR);
        }
        if mode & !(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE) != 0 {
            return reply.error(Errno::EOPNOTSUPP);
        }
        let inside = check_inside(offset, length, self.backend.size()).is_ok();
        if mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE) == 0 {
            // Allocation: every byte of the device already exists.
            return if inside || mode & FALLOC_FL_KEEP_SIZE != 0 {
                reply.ok()
            } else {
                reply.error(Errno::ENOSPC)
            };
        }
        if !inside {
            return reply.error(Errno::ENOSPC);
        }
        match self.backend.punch(offset, length) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.failed("punching a hole", &e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Every write reached the backend before it was answered.
        reply.ok();
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if ino != ROOT {
            return reply.error(Errno::ENOENT);
        }
        let entries = [
            (ROOT, FileType::Directory, "."),
            (ROOT, FileType::Directory, ".."),
            (DISK, FileType::RegularFile, DISK_FILE),
        ];
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(*ino, i as u64 + 1, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let blocks = self.backend.size() / 4096;
        reply.statfs(blocks, 0, 0, 2, 0, 4096, 255, 4096);
    }
}

/// A mounted device filesystem; unmounted on drop (after the loop device
/// on it is detached).
pub struct FuseMount {
    held: Option<Held>,
    session: Option<BackgroundSession>,
    dir: std::path::PathBuf,
}

impl FuseMount {
    /// Mounts a filesystem serving `backend` as `dir/disk`, its requests
    /// handled by `threads` threads (as many requests in flight).
    pub fn mount<B: Backend>(
        backend: B,
        dir: &Path,
        threads: usize,
    ) -> Result<FuseMount, BlockDevError> {
        let fs = DeviceFs {
            backend,
            created: SystemTime::now(),
            errors: AtomicU32::new(0),
        };
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName("zsmem".into()),
            MountOption::Subtype("zsmem".into()),
            MountOption::NoDev,
            MountOption::NoSuid,
            MountOption::NoExec,
        ];
        config.n_threads = Some(threads.max(1));
        config.clone_fd = threads > 1;
        let (held, session) = registry::hold_made(|| {
            let session = fuser::Session::new(fs, dir, &config).and_then(fuser::Session::spawn)?;
            let mount = super::ident::identify(dir, registry::is_device_fs)?;
            let res = Resource::Fuse {
                dir: dir.to_path_buf(),
                mount,
            };
            Ok((res, session))
        })
        .map_err(|e| {
            BlockDevError::io_or_refused(format!("mounting FUSE on {}", dir.display()), e)
        })?;
        Ok(FuseMount {
            held: Some(held),
            session: Some(session),
            dir: dir.to_path_buf(),
        })
    }

    /// The device file.
    pub fn disk_path(&self) -> std::path::PathBuf {
        self.dir.join(DISK_FILE)
    }

    /// Where it is mounted.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Leaves the filesystem mounted, recorded and served (its session
    /// runs on) while this process runs: a loop device under a filesystem
    /// that could not be unmounted still reads and writes it.
    pub fn abandon(mut self) {
        if let Some(s) = self.session.take() {
            std::mem::forget(s);
        }
        if let Some(h) = self.held.take() {
            h.abandon();
        }
    }
}

impl Drop for FuseMount {
    fn drop(&mut self) {
        // Unmounts (through the registry, which keeps the record true);
        // the kernel then ends the connection, the session loop returns and
        // its threads are joined. Still mounted (the unmount failed): the
        // session is left to the process's exit rather than waited for.
        let Some(held) = self.held.take() else {
            return;
        };
        let left = held.release().err();
        if let Some(s) = self.session.take() {
            if let Some(e) = left {
                warn(format_args!("warning: {e}"));
                std::mem::forget(s);
            } else if let Err(e) = s.join() {
                warn(format_args!(
                    "FUSE session on {} ended with: {e}",
                    self.dir.display()
                ));
            }
        }
    }
}
