//! Faults served by the thread that takes them ([`FaultMode::Signal`]).
//!
//! With `UFFD_FEATURE_SIGBUS` the kernel does not queue a region's fault
//! for a reader of the descriptor: it raises `SIGBUS` in the faulting
//! thread. zsmem's handler finds the region the address lies in and serves
//! the fault there and then (`fault::serve_here`); when the handler
//! returns, the access is retried and finds its page. No thread sleeps or
//! is woken on the way, which is what a fault served by another thread
//! costs most (docs/DESIGN.md, "Region": the fault path).
//!
//! The handler is installed once per process, by the first region that
//! asks for it, and stays (taking it out would undo any handler installed
//! after it). A `SIGBUS` at an address no region holds goes on to the
//! handler installed before ours (Rust's own, a runtime's), or, where that
//! was the default action, ends the process as it would have.
//!
//! Regions are found in a fixed table of pointers that the handler reads
//! with atomics only. A region leaving the table (its drop) takes its
//! pointer out, then waits until no handler is inside: a handler counts
//! itself in before it reads the table, so it either sees the pointer gone
//! or is waited for. A forked child empties its copy of the table (the
//! regions are the parent's: their descriptors act on the parent's memory)
//! and its count of handlers inside (they were the parent's threads).
//!
//! [`FaultMode::Signal`]: super::FaultMode::Signal

use std::ptr::null_mut;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::SeqCst};

use super::{Shared, fault};
use crate::error::{Error, Result};

/// Regions with signal faults alive at once in a process.
pub(crate) const MAX_REGIONS: usize = 64;

static REGIONS: [AtomicPtr<Shared>; MAX_REGIONS] =
    [const { AtomicPtr::new(null_mut()) }; MAX_REGIONS];

/// Handlers inside the table now (counted before the table is read).
static INSIDE: AtomicUsize = AtomicUsize::new(0);

/// The `SIGBUS` action before ours.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

/// `si_code` of a fault the kernel raised for an address (a userfaultfd
/// fault with `UFFD_FEATURE_SIGBUS` is one).
const BUS_ADRERR: libc::c_int = 2;

/// A region's place in the table; [`Registration::withdraw`] takes it out.
#[derive(Debug)]
pub(super) struct Registration {
    slot: usize,
}

/// Put the region in the table (installing the handler first, once).
/// The region must stay alive until its registration is withdrawn.
pub(super) fn register(sh: &Shared) -> Result<Registration> {
    install()?;
    let p = std::ptr::from_ref(sh).cast_mut();
    for (slot, s) in REGIONS.iter().enumerate() {
        if s.compare_exchange(null_mut(), p, SeqCst, SeqCst).is_ok() {
            return Ok(Registration { slot });
        }
    }
    Err(Error::InvalidConfig(format!(
        "at most {MAX_REGIONS} regions with FaultMode::Signal may be alive at once in a process; \
         use FaultMode::Thread for more"
    )))
}

impl Registration {
    /// Take the region out of the table and wait until no handler is
    /// inside it (a handler serves one fault: a few microseconds, or an
    /// eviction's worth when the evictor thread fell behind).
    pub(super) fn withdraw(self) {
        REGIONS[self.slot].store(null_mut(), SeqCst);
        let mut round = 0;
        while INSIDE.load(SeqCst) != 0 {
            crate::sync::spin_wait(&mut round);
        }
    }
}

/// Install the handler, once per process; the error, if the kernel
/// refused, is kept and returned to every later caller.
fn install() -> Result<()> {
    static DONE: OnceLock<std::result::Result<(), i32>> = OnceLock::new();
    let r = DONE.get_or_init(|| {
        // SAFETY: sigaction reads and writes the structs given, which are
        // valid; the handler installed is async-signal-safe as far as
        // `fault::serve_here` is (see there), and chains to the previous
        // action for every address that is not a region's.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) != 0 {
                return Err(last_errno());
            }
            let _ = PREVIOUS.set(old);
            let new = ours();
            if libc::sigaction(libc::SIGBUS, &new, std::ptr::null_mut()) != 0 {
                return Err(last_errno());
            }
            libc::pthread_atfork(None, None, Some(forget_in_child));
        }
        Ok(())
    });
    r.map_err(|errno| Error::Userfaultfd {
        errno,
        message: format!(
            "sigaction(SIGBUS) for FaultMode::Signal: {}",
            std::io::Error::from_raw_os_error(errno)
        ),
    })
}

/// The action this module installs for `SIGBUS`.
fn ours() -> libc::sigaction {
    // SAFETY: all-zero is a valid sigaction to fill in.
    let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
    new.sa_sigaction = handler as *const () as libc::sighandler_t;
    new.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
    // SAFETY: `sa_mask` is a valid sigset_t to empty.
    unsafe { libc::sigemptyset(&mut new.sa_mask) };
    new
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// In a forked child: the regions in the table are the parent's, and so
/// are the handlers counted inside (threads the child does not have).
extern "C" fn forget_in_child() {
    for s in &REGIONS {
        s.store(null_mut(), SeqCst);
    }
    INSIDE.store(0, SeqCst);
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo with SA_SIGINFO.
    let (code, address) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    // SAFETY: with SA_SIGINFO, `ctx` is the interrupted thread's context.
    if code == BUS_ADRERR && serve(address, unsafe { was_write(ctx) }) {
        return;
    }
    // SAFETY: the arguments are the kernel's, passed on unchanged.
    unsafe { chain(sig, code, info, ctx) };
}

/// Whether the faulting access was a write, where the signal's context
/// says (x86-64: the page fault's error code, bit 1); `None` elsewhere.
///
/// # Safety
/// `ctx` is the context the kernel passed a `SA_SIGINFO` handler.
#[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
unsafe fn was_write(ctx: *mut libc::c_void) -> Option<bool> {
    const X86_PF_WRITE: libc::greg_t = 1 << 1;
    // SAFETY: the kernel's ucontext for this signal.
    let uc = unsafe { &*ctx.cast::<libc::ucontext_t>() };
    Some(uc.uc_mcontext.gregs[libc::REG_ERR as usize] & X86_PF_WRITE != 0)
}

/// Whether the faulting access was a write: not known here.
///
/// # Safety
/// None: the context is not read.
#[cfg(not(all(target_arch = "x86_64", target_env = "gnu")))]
unsafe fn was_write(_: *mut libc::c_void) -> Option<bool> {
    None
}

/// Serve a fault at `address` if a region holds it; `write` as
/// [`was_write`] says.
fn serve(address: usize, write: Option<bool>) -> bool {
    // SAFETY: errno is this thread's; the interrupted code may read it
    // after we return, so it is put back.
    let errno = unsafe { *libc::__errno_location() };
    INSIDE.fetch_add(1, SeqCst);
    let mut served = false;
    for s in &REGIONS {
        let p = s.load(SeqCst);
        // SAFETY: a region in the table is alive until its registration is
        // withdrawn, which waits for this handler to count itself out.
        if let Some(sh) = unsafe { p.as_ref() }
            && sh.unit_of(address).is_some()
        {
            fault::serve_here(sh, address, write);
            served = true;
            break;
        }
    }
    INSIDE.fetch_sub(1, SeqCst);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
    served
}

/// Hand a `SIGBUS` that is not a region's to the action before ours
/// (`code` is its `si_code`).
///
/// # Safety
/// The arguments are those the kernel gave the handler.
unsafe fn chain(
    sig: libc::c_int,
    code: libc::c_int,
    info: *mut libc::siginfo_t,
    ctx: *mut libc::c_void,
) {
    let sent = code <= 0; // kill(2), sigqueue(3), tgkill(2)
    let previous = PREVIOUS.get().copied();
    match previous.map(|p| (p.sa_sigaction, p.sa_flags)) {
        Some((f, flags)) if f != libc::SIG_DFL && f != libc::SIG_IGN => {
            if flags & libc::SA_SIGINFO != 0 {
                // SAFETY: the previous action said it takes three arguments.
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(f) };
                f(sig, info, ctx);
            } else {
                // SAFETY: the previous action said it takes one.
                let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(f) };
                f(sig);
            }
            if sent {
                // It returned, so the process goes on, and a sent signal
                // does not come again. A handler made for faults may have
                // put the default action back before returning (std's
                // stack-overflow handler does, for an address outside a
                // guard page): without ours the next fault on an evicted
                // unit would end the process. Ours again, chaining to it
                // as before (only over the default action: one a handler
                // put in our place is left). sigaction is
                // async-signal-safe.
                // SAFETY: plain system calls on our own signal disposition.
                unsafe {
                    let mut now: libc::sigaction = std::mem::zeroed();
                    if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut now) == 0
                        && now.sa_sigaction == libc::SIG_DFL
                    {
                        libc::sigaction(libc::SIGBUS, &ours(), std::ptr::null_mut());
                    }
                }
            }
        }
        Some((f, _)) if f == libc::SIG_IGN && sent => {}
        _ => {
            // The default action: a fault recurs when we return, a sent
            // signal is raised again; either ends the process with SIGBUS.
            // SAFETY: plain system calls on our own signal disposition.
            unsafe {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
                if sent {
                    libc::raise(libc::SIGBUS);
                }
            }
        }
    }
}

/// Unit-sized buffers for the handlers, made with the region: a handler
/// takes one instead of allocating (the interrupted thread may be anywhere
/// in the program). As many as twice the CPUs, so a handler rarely waits.
#[derive(Debug)]
pub(super) struct Buffers(Box<[crate::sync::Mutex<Box<[u8]>>]>);

impl Buffers {
    /// `count` buffers of `unit` bytes (none with [`FaultMode::Thread`],
    /// whose fault thread has its own).
    ///
    /// [`FaultMode::Thread`]: super::FaultMode::Thread
    pub(super) fn new(count: usize, unit: usize) -> Buffers {
        Buffers(
            (0..count)
                .map(|_| crate::sync::Mutex::new(vec![0u8; unit].into_boxed_slice()))
                .collect(),
        )
    }

    /// A free buffer, waiting for one if every one is taken. Only for
    /// signal faults, whose regions make at least one (with none it would
    /// wait forever).
    pub(super) fn take(&self) -> crate::sync::MutexGuard<'_, Box<[u8]>> {
        debug_assert!(
            !self.0.is_empty(),
            "a region with signal faults has buffers"
        );
        let mut round = 0;
        loop {
            if let Some(b) = self.0.iter().find_map(|b| b.try_lock()) {
                return b;
            }
            crate::sync::spin_wait(&mut round);
        }
    }
}
