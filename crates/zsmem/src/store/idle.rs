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

/// The default clock: monotonic time since the store was made.
#[derive(Debug)]
pub struct MonotonicClock(Instant);

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock(Instant::now())
    }
}

impl Clock for MonotonicClock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
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
