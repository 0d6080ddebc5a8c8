//! Undoing everything on `SIGINT`, `SIGTERM`, `SIGHUP`, `SIGQUIT` and
//! `SIGPIPE`: a thread waits for them (signal-hook), unmounts, detaches and
//! removes what this process made, removes its kernel zram devices too, and
//! exits with 128 + the signal. `SIGPIPE` is among them because the `zsmem`
//! binary resets it to its default (to end quietly on a closed stdout), and
//! `zsmem disk` and the swap experiment print while their devices exist:
//! `zsmem disk ... | head -n 2` used to die there with its ext4 mount, loop
//! device and FUSE mount left behind.
//!
//! Installed before the first device is made, so it owns these signals;
//! the kernel zram contestant then finds `SIGINT` taken and relies on this
//! handler to call `remove_registered_devices`, after the ext4 mounts on
//! its devices are gone (a mounted zram device cannot be reset).

use std::sync::OnceLock;

use signal_hook::consts::{SIGHUP, SIGINT, SIGPIPE, SIGQUIT, SIGTERM};
use signal_hook::iterator::Signals;

use super::error::warn;
use super::registry;
use crate::contestants::kernel_zram::remove_registered_devices;

/// The signals undone on. With a handler, a write to a closed pipe fails
/// with `EPIPE` instead of ending the process at once; the thread below
/// still ends it, after the undo, with 128 + `SIGPIPE`.
pub const SIGNALS: [i32; 5] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE];

/// Installs the handler once per process; later calls return the first
/// outcome (an error is text saying which signals are not covered).
pub fn install_signal_cleanup() -> Result<(), String> {
    static OUTCOME: OnceLock<Result<(), String>> = OnceLock::new();
    OUTCOME
        .get_or_init(|| {
            let mut signals = Signals::new(SIGNALS)
                .map_err(|e| format!("signal handlers: {e}"))?;
            std::thread::Builder::new()
                .name("zsmem-blockdev-signals".into())
                .spawn(move || {
                    if let Some(signal) = signals.forever().next() {
                        let n = registry::undo_all_and_hold();
                        let z = remove_registered_devices();
                        if n + z > 0 {
                            warn(format_args!(
                                "signal {signal}: undid {n} mounts, loop devices and directories, removed {z} zram devices"
                            ));
                        }
                        std::process::exit(128 + signal);
                    }
                })
                .map_err(|e| format!("signal thread: {e}"))?;
            Ok(())
        })
        .clone()
}
