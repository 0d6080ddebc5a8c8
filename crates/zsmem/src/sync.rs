//! The one place concurrency primitives come from, so that loom can stand in
//! for them under `cfg(loom)`: the atomics of the lock-free parts (the
//! handle directory's dying mark and the deferred-free shards), the class
//! locks (shared by readers), the page source's lock and the returner's
//! registry (the return queue hand-off), the returner's working lock (held
//! across a fork) and the spin-wait come from here. Run the models with
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

/// A mutex whose `lock` never fails; loom's under `cfg(loom)`.
#[cfg(not(loom))]
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(std::sync::Mutex<T>);

/// Guard of [`Mutex`].
#[cfg(not(loom))]
pub(crate) type MutexGuard<'a, T> = std::sync::MutexGuard<'a, T>;

#[cfg(not(loom))]
impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Mutex(std::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The lock if no one holds it now.
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        match self.0.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

/// Under loom: loom's mutex behind a flag taken by compare-and-swap, since
/// loom 0.7's own `try_lock` blocks the model's other threads as `lock`
/// would and reports deadlocks that cannot happen (tokio-rs/loom#376).
/// Holding the flag, a thread takes the inner mutex uncontended; loom sees
/// every attempt of `try_lock` succeed or fail.
#[cfg(loom)]
#[derive(Debug, Default)]
pub(crate) struct Mutex<T> {
    busy: loom::sync::atomic::AtomicBool,
    inner: loom::sync::Mutex<T>,
}

/// Guard of [`Mutex`] under loom: clears the flag when dropped.
#[cfg(loom)]
pub(crate) struct MutexGuard<'a, T> {
    inner: Option<loom::sync::MutexGuard<'a, T>>,
    mutex: &'a Mutex<T>,
}

#[cfg(loom)]
impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.inner.as_ref().expect("held until dropped")
    }
}

#[cfg(loom)]
impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.inner.as_mut().expect("held until dropped")
    }
}

#[cfg(loom)]
impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        drop(self.inner.take());
        self.mutex
            .busy
            .store(false, loom::sync::atomic::Ordering::Release);
    }
}

#[cfg(loom)]
impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Mutex {
            busy: loom::sync::atomic::AtomicBool::new(false),
            inner: loom::sync::Mutex::new(value),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        loop {
            if let Some(g) = self.try_lock() {
                return g;
            }
            loom::thread::yield_now();
        }
    }

    /// The lock if no one holds it now.
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        use loom::sync::atomic::Ordering;
        self.busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        Some(MutexGuard {
            inner: Some(inner),
            mutex: self,
        })
    }
}

/// A condition variable for [`Mutex`]. Under loom, a wait releases the
/// lock, yields and takes it again (a wait with a timeout may end at any
/// moment, so callers look again at what they wait for).
#[derive(Debug, Default)]
pub(crate) struct Condvar(#[cfg(not(loom))] std::sync::Condvar);

impl Condvar {
    /// Wait for a notification or `timeout`.
    #[cfg(not(loom))]
    pub(crate) fn wait_timeout<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: std::time::Duration,
    ) -> MutexGuard<'a, T> {
        match self.0.wait_timeout(guard, timeout) {
            Ok((g, _)) => g,
            Err(poisoned) => poisoned.into_inner().0,
        }
    }

    /// Wait for a notification or `timeout`.
    #[cfg(loom)]
    pub(crate) fn wait_timeout<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        _timeout: std::time::Duration,
    ) -> MutexGuard<'a, T> {
        let mutex = guard.mutex;
        drop(guard);
        loom::thread::yield_now();
        mutex.lock()
    }

    pub(crate) fn notify_one(&self) {
        #[cfg(not(loom))]
        self.0.notify_one();
    }
}

/// A reader-writer lock whose `read` and `write` never fail. A class lock:
/// reads of objects share it, everything that changes the class takes it
/// alone. loom's under `cfg(loom)`, so the read protocol can be modelled.
pub(crate) struct RwLock<T>(InnerRwLock<T>);

#[cfg(not(loom))]
type InnerRwLock<T> = std::sync::RwLock<T>;
#[cfg(loom)]
type InnerRwLock<T> = loom::sync::RwLock<T>;

/// Shared guard of [`RwLock`].
#[cfg(not(loom))]
pub(crate) type ReadGuard<'a, T> = std::sync::RwLockReadGuard<'a, T>;
/// Exclusive guard of [`RwLock`].
#[cfg(not(loom))]
pub(crate) type WriteGuard<'a, T> = std::sync::RwLockWriteGuard<'a, T>;
#[cfg(loom)]
pub(crate) type ReadGuard<'a, T> = loom::sync::RwLockReadGuard<'a, T>;
#[cfg(loom)]
pub(crate) type WriteGuard<'a, T> = loom::sync::RwLockWriteGuard<'a, T>;

impl<T> RwLock<T> {
    pub(crate) fn new(value: T) -> Self {
        RwLock(InnerRwLock::new(value))
    }

    pub(crate) fn read(&self) -> ReadGuard<'_, T> {
        self.0
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn write(&self) -> WriteGuard<'_, T> {
        self.0
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// [`RwLock::write`] if no one holds the lock now, else `None`.
    pub(crate) fn try_write(&self) -> Option<WriteGuard<'_, T>> {
        match self.0.try_write() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

impl<T> std::fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RwLock")
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
