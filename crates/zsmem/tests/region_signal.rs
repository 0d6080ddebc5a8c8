//! `FaultMode::Signal` in a process that has a `SIGBUS` handler of its own:
//! a `SIGBUS` that is not a region's (a file mapped past its end, a
//! `kill`) still reaches that handler, and the region still works; the
//! limit of 64 such regions at once. Its own
//! test binary: the program's handler must be installed before zsmem's,
//! which is installed once per process.
#![cfg(all(target_os = "linux", not(miri)))]

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use zsmem::region::{FaultMode, Region, RegionConfig};

/// The program's own handler: ends the process with 42 (a child's).
extern "C" fn program_handler(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(42) };
}

/// Run `f` in a forked child; its exit code, or 128 + the signal that
/// ended it.
fn in_child(f: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child runs `f` (system calls and plain memory) and leaves
    // with _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = f();
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(code) };
    }
    assert!(pid > 0);
    let mut status = 0;
    // SAFETY: waits for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        libc::WEXITSTATUS(status)
    }
}

#[test]
fn a_sigbus_that_is_not_a_regions_reaches_the_programs_handler() {
    // SAFETY: installs a handler that only calls _exit.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = program_handler as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut()), 0);
    }
    let r = Region::new(RegionConfig {
        size: 4 << 20,
        budget: 1 << 20,
        faults: FaultMode::Signal,
        ..Default::default()
    })
    .expect("userfaultfd works here");
    // SAFETY: the mapping lives as long as `r`; atomics may alias it.
    let w: &[AtomicU64] = unsafe { std::slice::from_raw_parts(r.as_ptr().cast(), r.len() / 8) };
    for (k, x) in w.iter().enumerate() {
        x.store(k as u64 * 7, Relaxed);
    }
    assert!(r.stats().evictions > 0);

    // A real fault past the end of a mapped file: BUS_ADRERR at an address
    // no region holds.
    let path = std::env::temp_dir().join(format!("zsmem-sigbus-{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    f.write_all(&[1]).unwrap();
    let code = in_child(|| {
        use std::os::fd::AsRawFd;
        // SAFETY: maps two pages of a one-byte file; the second page is
        // past its end, so touching it raises SIGBUS.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                8192,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return 3;
        }
        // SAFETY: inside the mapping just made (the fault is the point).
        let b = unsafe { std::ptr::read_volatile(p.cast::<u8>().add(4096)) };
        i32::from(b) + 10
    });
    let _ = std::fs::remove_file(&path);
    assert_eq!(code, 42, "the program's handler did not run");

    // A SIGBUS sent by kill(2).
    let code = in_child(|| {
        // SAFETY: signals this process.
        unsafe { libc::kill(libc::getpid(), libc::SIGBUS) };
        4
    });
    assert_eq!(code, 42, "the program's handler did not run");

    // The region still serves its own faults.
    for (k, x) in w.iter().enumerate() {
        assert_eq!(x.load(Relaxed), k as u64 * 7);
    }
    let s = r.stats();
    assert!(s.promotions > 0 && s.errors == 0, "{s:?}");
    r.check_invariants().unwrap();

    // At most 64 signal-mode regions at once: the 65th is a clear error,
    // and a region dropped frees its place.
    let small = || {
        Region::new(RegionConfig {
            size: 1 << 16,
            budget: 1 << 16,
            faults: FaultMode::Signal,
            ..Default::default()
        })
    };
    let mut more: Vec<Region> = (1..64).map(|_| small().unwrap()).collect();
    match small() {
        Err(zsmem::Error::InvalidConfig(m)) => assert!(m.contains("at most 64"), "{m}"),
        other => panic!("a 65th region: {other:?}"),
    }
    let thread_mode = Region::new(RegionConfig {
        size: 1 << 16,
        budget: 1 << 16,
        faults: FaultMode::Thread,
        ..Default::default()
    });
    assert!(thread_mode.is_ok(), "thread mode has no such limit");
    more.pop();
    more.push(small().expect("a place was freed"));
    drop(more);
    for (k, x) in w.iter().enumerate() {
        assert_eq!(x.load(Relaxed), k as u64 * 7);
    }
}
