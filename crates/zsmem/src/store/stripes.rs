//! A chunk's slot words in stripes, each behind a one-byte lock: the locks
//! side by side (with a small header of the owner's in the word they share),
//! the words after them, so that no lock pads a stripe.
//!
//! `std`'s `Mutex<[Word; 16]>` is 136 bytes (a 4-byte futex word and a
//! poison flag padded to the words' alignment): a chunk's four took 32
//! bytes for locks. Here they take 4 (`parking_lot`'s `RawMutex`, a byte
//! each, which parks waiters on the address as the kernel's futex would),
//! and a chunk is 536 bytes, which the system allocator serves from 544
//! where 568 took 576: half a byte a slot (docs/DESIGN.md, "The slot
//! table's locks").

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

/// A one-byte lock: `parking_lot`'s, or under loom a flag loom sees (a
/// lock it cannot see hangs a model whose holder reaches a loom step).
#[cfg(not(loom))]
struct ByteLock(parking_lot::RawMutex);

#[cfg(not(loom))]
impl ByteLock {
    const fn new() -> Self {
        use parking_lot::lock_api::RawMutex as _;
        ByteLock(parking_lot::RawMutex::INIT)
    }
    fn lock(&self) {
        use parking_lot::lock_api::RawMutex as _;
        self.0.lock();
    }
    fn try_lock(&self) -> bool {
        use parking_lot::lock_api::RawMutex as _;
        self.0.try_lock()
    }
    /// # Safety
    /// The calling thread holds the lock.
    unsafe fn unlock(&self) {
        use parking_lot::lock_api::RawMutex as _;
        // SAFETY: as the caller promises.
        unsafe { self.0.unlock() }
    }
}

#[cfg(loom)]
struct ByteLock(loom::sync::atomic::AtomicBool);

#[cfg(loom)]
impl ByteLock {
    fn new() -> Self {
        ByteLock(loom::sync::atomic::AtomicBool::new(false))
    }
    fn lock(&self) {
        while !self.try_lock() {
            loom::thread::yield_now();
        }
    }
    fn try_lock(&self) -> bool {
        use loom::sync::atomic::Ordering;
        self.0
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }
    unsafe fn unlock(&self) {
        self.0.store(false, loom::sync::atomic::Ordering::Release);
    }
}

/// `N` values of `T`, value `k` readable and writable only under lock `k`,
/// and beside the locks a header `H` of the owner's (shared as it is: an
/// atomic, say), which takes the room the locks leave in their word.
pub(super) struct Stripes<H, T, const N: usize> {
    locks: [ByteLock; N],
    head: H,
    values: [UnsafeCell<T>; N],
}

// SAFETY: value `k` is reached only through a `StripeGuard`, made only by a
// thread that holds lock `k`, so no two threads reach one value at once:
// the locks make the values shareable as a `Mutex` makes its value.
// The header is shared as it is, so it must be `Sync` itself.
unsafe impl<H: Sync, T: Send, const N: usize> Sync for Stripes<H, T, N> {}

impl<H, T, const N: usize> Stripes<H, T, N> {
    /// Stripes holding `f(k)` each, all unlocked, beside `head`.
    pub(super) fn new(head: H, mut f: impl FnMut(usize) -> T) -> Self {
        Stripes {
            locks: std::array::from_fn(|_| ByteLock::new()),
            head,
            values: std::array::from_fn(|k| UnsafeCell::new(f(k))),
        }
    }

    /// The header.
    pub(super) fn head(&self) -> &H {
        &self.head
    }

    /// Stripe `k`, locked (waiting for its holder).
    pub(super) fn lock(&self, k: usize) -> StripeGuard<'_, H, T, N> {
        self.locks[k].lock();
        StripeGuard {
            stripes: self,
            k,
            held: PhantomData,
        }
    }

    /// Stripe `k`, locked, if no one holds it now.
    pub(super) fn try_lock(&self, k: usize) -> Option<StripeGuard<'_, H, T, N>> {
        // `then`, not `then_some`: a guard made and dropped on a failed
        // try would unlock its holder's lock.
        self.locks[k].try_lock().then(|| StripeGuard {
            stripes: self,
            k,
            held: PhantomData,
        })
    }

    /// The stripes, each locked in turn (`wait`) or only tried (a busy
    /// one gives `None`).
    pub(super) fn each(
        &self,
        wait: bool,
    ) -> impl Iterator<Item = Option<StripeGuard<'_, H, T, N>>> + '_ {
        (0..N).map(move |k| {
            if wait {
                Some(self.lock(k))
            } else {
                self.try_lock(k)
            }
        })
    }
}

/// A locked stripe; unlocks it when dropped. Not `Send` (the lock is let
/// go by the thread that took it, as `parking_lot` requires), and `Sync`
/// only where `T` is (as `std`'s `MutexGuard`): `&guard` gives `&T`.
pub(super) struct StripeGuard<'a, H, T, const N: usize> {
    stripes: &'a Stripes<H, T, N>,
    k: usize,
    held: PhantomData<*const ()>,
}

// SAFETY: a shared guard gives out only `&T` (and `&H` through its
// `Stripes`, which are `Sync` for `H: Sync`), so sharing it is sharing
// `&T`.
unsafe impl<H: Sync, T: Sync, const N: usize> Sync for StripeGuard<'_, H, T, N> {}

impl<H, T, const N: usize> Deref for StripeGuard<'_, H, T, N> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard's thread holds lock `k` (taken by `lock` or
        // `try_lock`, let go only by `drop`), so no one else reaches value
        // `k`.
        unsafe { &*self.stripes.values[self.k].get() }
    }
}

impl<H, T, const N: usize> DerefMut for StripeGuard<'_, H, T, N> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only
        // reference through the guard.
        unsafe { &mut *self.stripes.values[self.k].get() }
    }
}

impl<H, T, const N: usize> Drop for StripeGuard<'_, H, T, N> {
    fn drop(&mut self) {
        // SAFETY: this guard holds lock `k` in this thread (made only by a
        // successful `lock` or `try_lock`); no reference from it outlives
        // it.
        unsafe { self.stripes.locks[self.k].unlock() };
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_locks_sit_together_and_pad_nothing() {
        let words = std::mem::size_of::<Stripes<u32, [u64; 16], 4>>();
        assert_eq!(words, 4 * 128 + 8, "four locks and a u32 in one word");
        assert_eq!(std::mem::size_of::<Stripes<(), u8, 4>>(), 8);
    }

    #[test]
    fn a_held_stripe_is_refused_and_its_neighbours_are_not() {
        let s = Stripes::<(), u64, 4>::new((), |k| k as u64);
        let mut g = s.lock(2);
        *g += 10;
        assert!(s.try_lock(2).is_none(), "held");
        assert_eq!(*s.try_lock(1).expect("a neighbour is free"), 1);
        let seen: Vec<Option<u64>> = s.each(false).map(|g| g.map(|g| *g)).collect();
        assert_eq!(seen, [Some(0), Some(1), None, Some(3)]);
        drop(g);
        assert_eq!(*s.try_lock(2).expect("let go"), 12);
    }

    #[test]
    fn threads_adding_under_the_locks_lose_no_update() {
        let s = Stripes::<(), u64, 2>::new((), |_| 0);
        let rounds = if cfg!(miri) { 50 } else { 20_000 };
        std::thread::scope(|sc| {
            for t in 0..4 {
                let s = &s;
                sc.spawn(move || {
                    for r in 0..rounds {
                        let k = (t + r) % 2;
                        if r % 3 == 0 {
                            loop {
                                if let Some(mut g) = s.try_lock(k) {
                                    *g += 1;
                                    break;
                                }
                                std::hint::spin_loop();
                            }
                        } else {
                            *s.lock(k) += 1;
                        }
                    }
                });
            }
        });
        let total: u64 = s.each(true).map(|g| *g.expect("waited for")).sum();
        assert_eq!(total, 4 * rounds as u64);
    }
}

/// The locks under loom: two threads take one stripe, each changing the
/// header and the value under it (a lock loom could not see hung such a
/// model instead of exploring it: review s29).
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn loom_two_threads_take_one_stripe() {
        loom::model(|| {
            let s = loom::sync::Arc::new(Stripes::<AtomicUsize, u64, 1>::new(
                AtomicUsize::new(0),
                |_| 0,
            ));
            let t = {
                let s = s.clone();
                loom::thread::spawn(move || {
                    let mut g = s.lock(0);
                    s.head().fetch_add(1, Ordering::Relaxed);
                    *g += 1;
                })
            };
            if let Some(mut g) = s.try_lock(0) {
                *g += 1;
            } else {
                *s.lock(0) += 1;
            }
            s.head().fetch_add(1, Ordering::Relaxed);
            t.join().unwrap();
            assert_eq!(*s.lock(0), 2);
            assert_eq!(s.head().load(Ordering::Relaxed), 2);
        });
    }
}
