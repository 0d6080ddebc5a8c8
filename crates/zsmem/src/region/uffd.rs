//! userfaultfd, by raw system calls: the kernel's ABI (linux/userfaultfd.h)
//! restated as Rust structs and ioctl numbers (the `libc` crate has none of
//! them), and a small safe wrapper for the calls the region makes.
//!
//! Only user-mode faults are asked for (`UFFD_USER_MODE_ONLY`): an ordinary
//! user may open such a descriptor whatever `vm.unprivileged_userfaultfd`
//! says. The price: a fault taken by the kernel on the program's behalf (a
//! `read(2)` into a unit that is not resident) is not forwarded to us and
//! fails with `EFAULT`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::error::{Error, Result};

const UFFDIO: u64 = 0xAA;
const UFFD_API: u64 = 0xAA;
/// Flag of the `userfaultfd` system call: user-mode faults only.
const UFFD_USER_MODE_ONLY: libc::c_int = 1;

/// `_IOC(dir, 0xAA, nr, size)` as the kernel's ioctl.h builds it.
const fn ioc(dir: u64, nr: u64, size: usize) -> u64 {
    (dir << 30) | ((size as u64) << 16) | (UFFDIO << 8) | nr
}
const READ_WRITE: u64 = 3;
const READ: u64 = 2;

/// `struct uffdio_api`.
#[repr(C)]
#[derive(Default)]
struct Api {
    api: u64,
    features: u64,
    ioctls: u64,
}

/// `struct uffdio_range`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct Range {
    start: u64,
    len: u64,
}

/// `struct uffdio_register`.
#[repr(C)]
#[derive(Default)]
struct Register {
    range: Range,
    mode: u64,
    ioctls: u64,
}

/// `struct uffdio_copy`.
#[repr(C)]
#[derive(Default)]
struct Copy {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    copy: i64,
}

/// `struct uffdio_zeropage`.
#[repr(C)]
#[derive(Default)]
struct ZeroPage {
    range: Range,
    mode: u64,
    zeropage: i64,
}

/// `struct uffdio_writeprotect`.
#[repr(C)]
#[derive(Default)]
struct WriteProtect {
    range: Range,
    mode: u64,
}

const UFFDIO_API: u64 = ioc(READ_WRITE, 0x3F, size_of::<Api>());
const UFFDIO_REGISTER: u64 = ioc(READ_WRITE, 0x00, size_of::<Register>());
const UFFDIO_WAKE: u64 = ioc(READ, 0x02, size_of::<Range>());
const UFFDIO_COPY: u64 = ioc(READ_WRITE, 0x03, size_of::<Copy>());
const UFFDIO_ZEROPAGE: u64 = ioc(READ_WRITE, 0x04, size_of::<ZeroPage>());
const UFFDIO_WRITEPROTECT: u64 = ioc(READ_WRITE, 0x06, size_of::<WriteProtect>());

const REGISTER_MODE_MISSING: u64 = 1;
const REGISTER_MODE_WP: u64 = 2;
const COPY_MODE_WP: u64 = 2;
const WRITEPROTECT_MODE_WP: u64 = 1;
/// The ioctls a registered range must offer (bit = the ioctl's number).
const NEED_IOCTLS: u64 = (1 << 0x02) | (1 << 0x03) | (1 << 0x04) | (1 << 0x06);

/// Feature: a fault is not queued but raises `SIGBUS` in the faulting
/// thread (Linux 4.14).
const UFFD_FEATURE_SIGBUS: u64 = 1 << 7;

const UFFD_EVENT_PAGEFAULT: u8 = 0x12;
const UFFD_PAGEFAULT_FLAG_WRITE: u64 = 1;
const UFFD_PAGEFAULT_FLAG_WP: u64 = 2;

/// `struct uffd_msg`: 32 bytes; the page-fault arm of its union is
/// `flags`, `address`, then the faulting thread's id.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Msg {
    event: u8,
    _reserved1: u8,
    _reserved2: u16,
    _reserved3: u32,
    flags: u64,
    address: u64,
    _feat: u64,
}
const _: () = assert!(size_of::<Msg>() == 32);

/// One page fault read from the descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fault {
    /// The faulting address, rounded down to its page.
    pub address: usize,
    /// A write-protect fault (a write to a protected page), not a missing page.
    pub write_protect: bool,
    /// The access was a write.
    pub write: bool,
}

/// Why the kernel may refuse, as a message a user can act on.
pub(crate) fn refused(what: &str, err: &io::Error) -> Error {
    let errno = err.raw_os_error().unwrap_or(0);
    let why = match errno {
        libc::ENOSYS => {
            "this kernel has no userfaultfd (CONFIG_USERFAULTFD is off) or a seccomp filter hides it"
        }
        libc::EPERM | libc::EACCES => {
            "the kernel refused it: user-mode-only userfaultfd needs no privilege unless a seccomp filter or an LSM forbids it; \
             if the kernel lacks UFFD_USER_MODE_ONLY (before 5.11), an unprivileged user needs the sysctl vm.unprivileged_userfaultfd=1 \
             (or CAP_SYS_PTRACE)"
        }
        libc::EINVAL => {
            "the kernel does not accept a flag or feature zsmem needs (UFFD_USER_MODE_ONLY needs Linux 5.11, write-protection of anonymous memory 5.7; \
             before 5.11 an unprivileged user needs the sysctl vm.unprivileged_userfaultfd=1)"
        }
        libc::EMFILE | libc::ENFILE => "no file descriptor is free",
        _ => "see userfaultfd(2); the sysctl vm.unprivileged_userfaultfd governs unprivileged use",
    };
    Error::Userfaultfd {
        errno,
        message: format!("{what}: {err}: {why}"),
    }
}

/// An open userfaultfd, its API handshake done.
#[derive(Debug)]
pub(crate) struct Uffd {
    fd: OwnedFd,
    /// Faults raise `SIGBUS` in the faulting thread: no thread ever waits
    /// on this descriptor, so nothing is woken.
    sigbus: bool,
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

impl Uffd {
    /// Open a user-mode-only userfaultfd (close-on-exec, non-blocking) and
    /// agree on the API; with `sigbus`, faults raise `SIGBUS` in the
    /// faulting thread instead of waiting for a reader of the descriptor.
    pub(crate) fn open(sigbus: bool) -> Result<Uffd> {
        // SAFETY: the system call takes a flags word and returns a new
        // descriptor or -1; no memory is passed.
        let r = unsafe {
            libc::syscall(
                libc::SYS_userfaultfd,
                libc::O_CLOEXEC | libc::O_NONBLOCK | UFFD_USER_MODE_ONLY,
            )
        };
        if r < 0 {
            return Err(refused(
                "userfaultfd(UFFD_USER_MODE_ONLY)",
                &io::Error::last_os_error(),
            ));
        }
        // SAFETY: `r` is a descriptor the kernel just gave us, owned by no one else.
        let fd = unsafe { OwnedFd::from_raw_fd(r as RawFd) };
        let uffd = Uffd { fd, sigbus };
        let mut api = Api {
            api: UFFD_API,
            features: if sigbus { UFFD_FEATURE_SIGBUS } else { 0 },
            ..Default::default()
        };
        uffd.ioctl(UFFDIO_API, &mut api).map_err(|e| {
            refused(
                if sigbus {
                    "UFFDIO_API (UFFD_FEATURE_SIGBUS)"
                } else {
                    "UFFDIO_API"
                },
                &e,
            )
        })?;
        Ok(uffd)
    }

    fn ioctl<T>(&self, request: u64, arg: &mut T) -> io::Result<()> {
        // SAFETY: every request used here takes a pointer to the struct its
        // number encodes (the size is part of the number), and `arg` is one,
        // valid and exclusively ours for the call.
        check(unsafe { libc::ioctl(self.fd.as_raw_fd(), request as libc::c_ulong, arg as *mut T) })
    }

    /// Register `[start, start + len)` for missing-page and write-protect
    /// faults.
    pub(crate) fn register(&self, start: usize, len: usize) -> Result<()> {
        let mut reg = Register {
            range: Range {
                start: start as u64,
                len: len as u64,
            },
            mode: REGISTER_MODE_MISSING | REGISTER_MODE_WP,
            ioctls: 0,
        };
        self.ioctl(UFFDIO_REGISTER, &mut reg)
            .map_err(|e| refused("UFFDIO_REGISTER (missing and write-protect modes)", &e))?;
        if reg.ioctls & NEED_IOCTLS != NEED_IOCTLS {
            return Err(Error::Userfaultfd {
                errno: libc::EINVAL,
                message: format!(
                    "UFFDIO_REGISTER: the kernel offers ioctls {:#x} on the range, zsmem needs {NEED_IOCTLS:#x} (copy, zeropage, wake, writeprotect)",
                    reg.ioctls
                ),
            });
        }
        Ok(())
    }

    /// Read the pending page faults into `out` (cleared first); other
    /// events are skipped. Returns when none is pending.
    pub(crate) fn read_faults(&self, out: &mut Vec<Fault>) -> io::Result<()> {
        out.clear();
        let mut msgs = [Msg::default(); 16];
        loop {
            // SAFETY: `msgs` is writable for its whole size; the kernel
            // writes whole messages.
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    msgs.as_mut_ptr().cast(),
                    size_of_val(&msgs),
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock => Ok(()),
                    io::ErrorKind::Interrupted => continue,
                    _ => Err(e),
                };
            }
            let n = n as usize / size_of::<Msg>();
            for m in &msgs[..n] {
                if m.event == UFFD_EVENT_PAGEFAULT {
                    out.push(Fault {
                        address: m.address as usize,
                        write_protect: m.flags & UFFD_PAGEFAULT_FLAG_WP != 0,
                        write: m.flags & UFFD_PAGEFAULT_FLAG_WRITE != 0,
                    });
                }
            }
            if n < msgs.len() {
                return Ok(());
            }
        }
    }

    /// Install `src` at `dst` (whole pages), write-protected if `protect`,
    /// and wake the threads waiting there. Pages already present (`EEXIST`)
    /// are left as they are; the others are still installed.
    pub(crate) fn copy(
        &self,
        dst: usize,
        src: &[u8],
        page: usize,
        protect: bool,
    ) -> io::Result<()> {
        let mut done = 0;
        while done < src.len() {
            let mut c = Copy {
                dst: (dst + done) as u64,
                src: src[done..].as_ptr() as u64,
                len: (src.len() - done) as u64,
                mode: if protect { COPY_MODE_WP } else { 0 },
                copy: 0,
            };
            match self.ioctl(UFFDIO_COPY, &mut c) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    let copied = usize::try_from(c.copy).unwrap_or(0);
                    match e.raw_os_error() {
                        Some(libc::EAGAIN) => done += copied,
                        // The page at `done + copied` is there already: skip it.
                        Some(libc::EEXIST) => done += copied + page,
                        _ => return Err(e),
                    }
                }
            }
        }
        self.wake(dst, src.len())
    }

    /// Map the zero page over `[start, start + len)` and wake its waiters.
    /// `Ok(false)` if a page there is present already (`EEXIST`): nothing
    /// was missing.
    pub(crate) fn zeropage(&self, start: usize, len: usize) -> io::Result<bool> {
        let mut z = ZeroPage {
            range: Range {
                start: start as u64,
                len: len as u64,
            },
            ..Default::default()
        };
        loop {
            match self.ioctl(UFFDIO_ZEROPAGE, &mut z) {
                Ok(()) => return Ok(true),
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => continue,
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                    self.wake(start, len)?;
                    return Ok(false);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Write-protect `[start, start + len)` (`protect`) or lift the
    /// protection, which also wakes the threads waiting there.
    pub(crate) fn write_protect(&self, start: usize, len: usize, protect: bool) -> io::Result<()> {
        let mut w = WriteProtect {
            range: Range {
                start: start as u64,
                len: len as u64,
            },
            mode: if protect { WRITEPROTECT_MODE_WP } else { 0 },
        };
        loop {
            match self.ioctl(UFFDIO_WRITEPROTECT, &mut w) {
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => continue,
                r => return r,
            }
        }
    }

    /// Wake the threads waiting on faults in `[start, start + len)`: they
    /// retry their access. With `SIGBUS` faults none waits: nothing to do.
    pub(crate) fn wake(&self, start: usize, len: usize) -> io::Result<()> {
        if self.sigbus {
            return Ok(());
        }
        let mut r = Range {
            start: start as u64,
            len: len as u64,
        };
        self.ioctl(UFFDIO_WAKE, &mut r)
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// An eventfd that tells the fault thread to stop (its `poll` sees it).
#[derive(Debug)]
pub(crate) struct StopSignal {
    fd: OwnedFd,
}

impl StopSignal {
    pub(crate) fn new() -> Result<StopSignal> {
        // SAFETY: eventfd takes two integers and returns a new descriptor or -1.
        let r = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if r < 0 {
            return Err(Error::Userfaultfd {
                errno: io::Error::last_os_error().raw_os_error().unwrap_or(0),
                message: format!("eventfd: {}", io::Error::last_os_error()),
            });
        }
        // SAFETY: a descriptor just made, owned by no one else.
        Ok(StopSignal {
            fd: unsafe { OwnedFd::from_raw_fd(r) },
        })
    }

    pub(crate) fn raise(&self) {
        let one = 1u64;
        // SAFETY: writes 8 readable bytes from `one`; an eventfd accepts them.
        // A full counter (EAGAIN) is raised already.
        let _ = unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Wait until `uffd` has messages (`Ok(true)`) or `stop` is raised
/// (`Ok(false)`).
pub(crate) fn wait(uffd: &Uffd, stop: &StopSignal) -> io::Result<bool> {
    let mut fds = [
        libc::pollfd {
            fd: uffd.raw(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: stop.raw(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: `fds` is a valid array of two pollfd for the call.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if fds[1].revents != 0 {
            return Ok(false);
        }
        if fds[0].revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
            return Err(io::Error::other("userfaultfd reported an error"));
        }
        return Ok(true);
    }
}
