//! Idle tracking, as zram's `idle` file: mark slots idle (all of them, or
//! those not accessed for a while); a read or a write clears the mark.
//! Recompression and writeback can then pick the idle slots.
//!
//! Access times are whole seconds of the store's [`Clock`], kept in each
//! slot as a `u32` (136 years of range). Tests inject a [`ManualClock`] to
//! age slots without sleeping.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::PageStore;
use super::slot::Kind;

/// Where a store's time comes from: a monotonic duration since any fixed
/// origin. Only differences matter.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Time since the clock's origin.
    fn now(&self) -> Duration;
}

/// The default clock: monotonic time since the store was made, read from
/// the kernel's coarse monotonic clock (`CLOCK_MONOTONIC_COARSE`, a tick's
/// resolution, a few milliseconds): slots keep whole seconds, and every
/// read and write of a page asks the time. Here the fine clock
/// (`Instant::now`) took 55 ns a call, the coarse one 7.
#[derive(Debug)]
pub struct MonotonicClock(Duration);

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock(coarse_now())
    }
}

impl Clock for MonotonicClock {
    fn now(&self) -> Duration {
        coarse_now().saturating_sub(self.0)
    }
}

/// The coarse monotonic clock (Linux; elsewhere, and under Miri, the
/// standard library's monotonic clock since the first call).
fn coarse_now() -> Duration {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec into `ts`, ours.
        if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) } == 0 {
            return Duration::new(
                ts.tv_sec.max(0) as u64,
                ts.tv_nsec.clamp(0, 999_999_999) as u32,
            );
        }
    }
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed()
}

/// A clock that moves only when told to: for tests of idle-by-age.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use zsmem::store::{Clock, ManualClock};
/// let clock = Arc::new(ManualClock::default());
/// clock.advance(Duration::from_secs(90));
/// assert_eq!(clock.now(), Duration::from_secs(90));
/// ```
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// Move the clock forward.
    pub fn advance(&self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.0.fetch_add(ms, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_millis(self.0.load(Ordering::Relaxed))
    }
}

impl PageStore {
    /// The store's clock in whole seconds, as slots keep it.
    pub(crate) fn now_secs(&self) -> u32 {
        u32::try_from(self.clock.now().as_secs()).unwrap_or(u32::MAX)
    }

    /// Mark slots idle, as zram's `echo all > idle` (`None`) or
    /// `echo SECONDS > idle` (`Some(age)`: only slots not accessed for at
    /// least `age`). Only slots holding an object are marked (same-filled
    /// and written-back pages hold no memory to reclaim). A later read or
    /// write of the slot clears the mark. Returns the slots marked; by age
    /// only if the store keeps access times
    /// ([`PageStoreConfig::track_access_time`](super::PageStoreConfig),
    /// else [`Error::InvalidConfig`](crate::Error), as zram refuses an age
    /// without `CONFIG_ZRAM_TRACK_ENTRY_ACTIME`).
    pub fn mark_idle(&self, older_than: Option<Duration>) -> crate::Result<usize> {
        if older_than.is_some() && !self.slots.tracks_atime() {
            return Err(crate::Error::InvalidConfig(
                "marking idle by age needs access times: the store was made with \
                 track_access_time off"
                    .into(),
            ));
        }
        let now = self.now_secs();
        let min_age = older_than.map(|d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX));
        let mut marked = 0;
        for i in self.slots.present() {
            let Some(slot) = self.slots.get(i) else {
                continue;
            };
            let mut s = slot.lock();
            if s.kind() != Kind::Stored || s.is_idle() {
                continue;
            }
            if min_age.is_none_or(|age| now.saturating_sub(s.atime()) >= age) {
                s.set_idle(true);
                marked += 1;
            }
        }
        Ok(marked)
    }

    /// Slots marked idle now.
    pub fn idle_pages(&self) -> usize {
        self.slots
            .present()
            .filter(|&i| self.slots.get(i).is_some_and(|s| s.lock().is_idle()))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_clock_never_goes_back() {
        let c = MonotonicClock::default();
        let mut last = c.now();
        for _ in 0..100_000 {
            let now = c.now();
            assert!(now >= last, "{now:?} after {last:?}");
            last = now;
        }
    }
}
