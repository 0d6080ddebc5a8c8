//! Removing this process's devices when it is ended by a signal or calls `exit`.

use std::io;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI32, Ordering};

use super::device::{live_devices, registry, remove_all_locked, try_registry};
use super::error::warn;

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
    if live_devices() == 0 {
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
    if let Some(mut reg) = try_registry() {
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
/// (`atexit`). [`KernelZram::create`](super::KernelZram::create) calls it; calling it again returns the
/// first outcome.
///
/// Returns the reasons, as text, for any handler that could not be
/// installed (most often: the program already set a `ctrlc` handler; it
/// should then call [`remove_registered_devices`](super::remove_registered_devices) from it).
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
