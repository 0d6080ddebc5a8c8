//! The one place concurrency primitives come from, so that loom can stand in
//! for them under `cfg(loom)`: the atomics of the lock-free parts (the
//! handle directory's dying mark and the deferred-free shards) and the
//! spin-wait come from here. Run the models with
//! `RUSTFLAGS="--cfg loom" cargo test -p zsmem --release --lib loom`.
//!
//! The pool never panics while holding a lock, so a poisoned lock can only
//! come from a panic in a caller's closure (`Pool::with_object`); the data
//! it guards is still consistent then, and the lock is taken anyway.

use std::ops::{Deref, DerefMut};

#[cfg(loom)]
pub(crate) use loom::sync::atomic;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic;

/// Wait a moment for another thread to finish a short step (a push between
/// its two instructions): spin a little, then yield the CPU.
pub(crate) fn spin_wait(round: &mut u32) {
    #[cfg(loom)]
    {
        let _ = round;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    {
        *round += 1;
        if *round < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// A mutex whose `lock` never fails.
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(std::sync::Mutex<T>);

/// Guard of [`Mutex`].
pub(crate) type MutexGuard<'a, T> = std::sync::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    pub(crate) const fn new(value: T) -> Self {
        Mutex(std::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Pads and aligns a value to its own cache lines so that neighbouring
/// class locks do not false-share.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for CachePadded<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}
