//! The pages a page source and its siblings hold, counted against one limit
//! without a line every freeing thread writes.
//!
//! `held` counts the pages handed out. A source with no limit does not take
//! the pages it gets back off `held` at once: it adds them to its *spare*
//! cell, and takes its next pages from there, so a thread that frees and
//! allocates in its own shard or lane writes only its own cell. A cell past
//! [`SPARE_MAX`] pages gives them back to `held`. The pages held are `held`
//! less every cell's spare pages. One shared counter that every free wrote
//! made two threads freeing their own log lanes take 3.6-6.5 ms against one
//! thread's 2.7 (each dead page given back wrote it); without it, 2.6 ms.
//! The kernel's zsmalloc keeps one `pages_allocated` counter; jemalloc and
//! mimalloc keep their statistics per arena or per thread and sum them when
//! read, as here.
//!
//! With a limit, every source counts on `held` directly (no spare), so the
//! limit is exact. The peak (`max_held`) is the largest `held` less the
//! spare pages seen when `held` could have passed it: exact while one
//! thread works; while threads free and allocate at once, a read of the
//! cells may miss pages moving between a cell and `held` (at most
//! [`SPARE_MAX`] per cell).
//!
//! Relaxed atomics throughout: they count a quantity and publish no other
//! memory.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Cells of spare pages: a source uses cell `its number % SPARE_CELLS`.
const SPARE_CELLS: usize = 8;

/// Most pages a cell keeps before it gives them back to `held` (128 KiB
/// of 4 KiB pages).
pub(super) const SPARE_MAX: usize = 32;

/// A counter on a cache line of its own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Cell(AtomicUsize);

/// What a page source and its siblings hold.
#[derive(Debug, Default)]
pub(super) struct Budget {
    /// Pages handed out, spare ones included.
    held: AtomicUsize,
    max_held: AtomicUsize,
    spare: [Cell; SPARE_CELLS],
    /// Sources made so far (each takes the next cell).
    sources: AtomicUsize,
}

impl Budget {
    /// The cell a new source of this budget uses.
    pub(super) fn cell(&self) -> usize {
        self.sources.fetch_add(1, Relaxed) % SPARE_CELLS
    }

    /// Pages held: handed out and not given back.
    pub(super) fn held(&self) -> usize {
        // Read while a cell gives its pages back to `held`, this may be off
        // by that cell's pages (a snapshot of relaxed counters, as any
        // statistic read while threads work).
        let spare = self.spare_pages();
        self.held.load(Relaxed).saturating_sub(spare)
    }

    pub(super) fn max_held(&self) -> usize {
        self.max_held.load(Relaxed)
    }

    fn spare_pages(&self) -> usize {
        self.spare.iter().map(|c| c.0.load(Relaxed)).sum()
    }

    /// `pages` pages come back, through `cell` (`None`: straight to `held`,
    /// as a source with a limit does).
    pub(super) fn give(&self, cell: Option<usize>, pages: usize) {
        let Some(cell) = cell else {
            self.held.fetch_sub(pages, Relaxed);
            return;
        };
        let c = &self.spare[cell].0;
        if c.fetch_add(pages, Relaxed) + pages > SPARE_MAX {
            let all = c.swap(0, Relaxed);
            self.held.fetch_sub(all, Relaxed);
        }
    }

    /// Count `pages` more pages as held: from `cell`'s spare pages if it
    /// has as many, else on `held`, refused if that would pass `limit`
    /// (returned as the pages held then).
    pub(super) fn take(
        &self,
        cell: Option<usize>,
        pages: usize,
        limit: Option<usize>,
    ) -> std::result::Result<(), usize> {
        if let Some(cell) = cell {
            let c = &self.spare[cell].0;
            if c.fetch_update(Relaxed, Relaxed, |s| s.checked_sub(pages))
                .is_ok()
            {
                self.note_peak(self.held.load(Relaxed), c.load(Relaxed));
                return Ok(());
            }
        }
        let mut held = self.held.load(Relaxed);
        loop {
            if let Some(limit) = limit
                && held + pages > limit
            {
                return Err(held);
            }
            match self
                .held
                .compare_exchange_weak(held, held + pages, Relaxed, Relaxed)
            {
                Ok(_) => {
                    let own = cell.map_or(0, |c| self.spare[c].0.load(Relaxed));
                    self.note_peak(held + pages, own);
                    return Ok(());
                }
                Err(now) => held = now,
            }
        }
    }

    /// Count `pages` pages as held again past any limit, and not as a new
    /// peak (a log segment's pages given back just before it is freed).
    pub(super) fn recount(&self, pages: usize) {
        self.held.fetch_add(pages, Relaxed);
    }

    /// `held` reads `counted`, `own` of them spare in the caller's cell:
    /// a new peak if the pages held pass the last one. The other cells are
    /// read only when that could be (held no more than `counted - own`).
    fn note_peak(&self, counted: usize, own: usize) {
        let max = self.max_held.load(Relaxed);
        if counted.saturating_sub(own) <= max {
            return;
        }
        let held = counted.saturating_sub(self.spare_pages());
        if held > max {
            self.max_held.fetch_max(held, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spare_pages_are_not_held_and_are_taken_first() {
        let b = Budget::default();
        let (a, c) = (Some(b.cell()), Some(b.cell()));
        assert_ne!(a, c);
        b.take(a, 10, None).unwrap();
        b.take(c, 5, None).unwrap();
        assert_eq!((b.held(), b.max_held()), (15, 15));
        b.give(a, 4);
        assert_eq!((b.held(), b.max_held()), (11, 15));
        // Taken from the cell's spare pages: not a new peak, `held` as it was.
        b.take(a, 3, None).unwrap();
        assert_eq!((b.held(), b.held.load(Relaxed)), (14, 15));
        // More than the cell has: counted on `held`.
        b.take(a, 2, None).unwrap();
        assert_eq!((b.held(), b.max_held()), (16, 16));
        // A cell past SPARE_MAX gives everything back to `held`.
        b.take(c, 2 * SPARE_MAX, None).unwrap();
        b.give(c, SPARE_MAX);
        assert_eq!(b.spare[c.unwrap()].0.load(Relaxed), SPARE_MAX);
        b.give(c, 1);
        assert_eq!(b.spare[c.unwrap()].0.load(Relaxed), 0);
        assert_eq!(b.held(), 16 + SPARE_MAX - 1);
        assert_eq!(b.max_held(), 16 + 2 * SPARE_MAX);
    }

    #[test]
    fn a_limit_counts_every_page_on_held() {
        let b = Budget::default();
        b.take(None, 6, Some(8)).unwrap();
        assert_eq!(b.take(None, 3, Some(8)), Err(6));
        b.give(None, 2);
        b.take(None, 3, Some(8)).unwrap();
        assert_eq!((b.held(), b.max_held()), (7, 7));
    }
}
