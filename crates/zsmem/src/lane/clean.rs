//! Cleaning, log placement's compaction: choosing victims (sealed segments
//! with the least live data and at least a page of dead bytes), evacuating
//! them into survivor segments, and moving one object.

use super::{DEAD_SHARE, EXTERNAL, Lane, Outcome, Owners, SURVIVOR};
use crate::class::Migration;
use crate::compact::Counters;
use crate::handle::Location;
use crate::os::PageSource;

impl Lane {
    /// Committed bytes of a sealed segment that hold no live object.
    fn dead_bytes(&self, id: u32) -> usize {
        let seg = self.seg(id);
        seg.resident * self.page_size - seg.live_bytes
    }

    /// Pages cleaning could give back: dead bytes of sealed segments that
    /// hold at least a page of them.
    pub(crate) fn freeable_pages(&self) -> usize {
        self.freeable_bytes / self.page_size
    }

    /// Sealed segments with at least a page of dead bytes, with them.
    fn victims(&self) -> impl Iterator<Item = (u32, usize)> + '_ {
        (0..self.segs.len() as u32)
            .filter(|&id| self.segs[id as usize].is_some() && !self.open.contains(&Some(id)))
            .map(|id| (id, self.dead_bytes(id)))
            .filter(|&(_, dead)| dead >= self.page_size)
    }

    /// Whether cleaning could give back `pages` pages (`Pool::compact`).
    pub(crate) fn compaction_due(&self, pages: usize) -> bool {
        self.freeable_pages() >= pages.max(1)
    }

    /// Whether the automatic policy cleans: `min_pages` could come back,
    /// and either a segment is at most half live (cleaning it copies at
    /// most what it gives back) or the dead bytes are 1/[`DEAD_SHARE`] of
    /// what the lane holds (so cleaning stays cheap when frees are spread
    /// evenly, and memory bounded).
    pub(crate) fn auto_clean_due(&self, min_pages: usize) -> bool {
        self.compaction_due(min_pages)
            && (self.sparse_victims > 0
                || self.freeable_pages() * DEAD_SHARE >= self.resident_pages)
    }

    /// Clean: move at most `max_moves` live objects out of the sealed
    /// segments with the least live data (and at least a page of dead
    /// bytes) into the open segment, giving back each segment emptied.
    /// Recorded in `counters` as a compaction step.
    pub(crate) fn clean(
        &mut self,
        max_moves: usize,
        due: impl Fn(&Lane) -> bool,
        owners: Option<&dyn Owners>,
        src: &PageSource,
        counters: &Counters,
    ) -> Migration {
        let started = std::time::Instant::now();
        let mut m = Migration::default();
        while m.objects < max_moves && due(self) {
            let Some((victim, _)) = self
                .victims()
                .min_by_key(|&(id, _)| self.seg(id).live_bytes)
            else {
                break;
            };
            // Nothing is appended to it while it empties.
            self.holes.retain(|&h| h != victim);
            let before = self.resident_pages;
            let moved = self.evacuate(victim, max_moves - m.objects, owners, src, &mut m);
            let after = self.resident_pages;
            m.pages_freed += before.saturating_sub(after);
            m.pages_committed += after.saturating_sub(before);
            if !moved {
                break;
            }
        }
        let held = started.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
        counters.record(m, held);
        m
    }

    /// Move up to `max` live objects of `victim` elsewhere, last appended
    /// first; true if the victim was emptied (and released) or objects
    /// moved, false if nothing could move (the memory limit, or the owner
    /// of its last object busy).
    fn evacuate(
        &mut self,
        victim: u32,
        max: usize,
        owners: Option<&dyn Owners>,
        src: &PageSource,
        m: &mut Migration,
    ) -> bool {
        let mut moved = 0;
        while moved < max {
            let Some(owner) = self.seg(victim).owners.last() else {
                break;
            };
            let outcome = if owner & EXTERNAL == 0 {
                match self
                    .handles
                    .live_entry(owner)
                    .filter(|l| l.zspage == victim)
                {
                    None => Outcome::NotHere,
                    Some(loc) => match self.move_object(victim, owner, loc, src) {
                        Some((to, off)) => {
                            self.handles
                                .relocate(owner, to, (off >> self.unit_shift) as u16);
                            Outcome::Moved(loc)
                        }
                        None => Outcome::Blocked,
                    },
                }
            } else {
                let Some(owners) = owners else {
                    // Owned objects exist only where owners are known.
                    break;
                };
                let mut outcome = Outcome::NotHere;
                let called = owners.relocate(owner & !EXTERNAL, &mut |place, len| {
                    let loc = self.decode(place, len).filter(|l| l.zspage == victim)?;
                    match self.move_object(victim, owner, loc, src) {
                        Some((to, off)) => {
                            outcome = Outcome::Moved(loc);
                            Some(self.encode(to, off))
                        }
                        None => {
                            outcome = Outcome::Blocked;
                            None
                        }
                    }
                });
                if called { outcome } else { Outcome::Busy }
            };
            let loc = match outcome {
                Outcome::NotHere => {
                    self.seg_mut(victim).owners.pop();
                    continue;
                }
                Outcome::Busy => break,
                Outcome::Blocked => {
                    m.blocked = true;
                    break;
                }
                Outcome::Moved(loc) => loc,
            };
            self.seg_mut(victim).owners.pop();
            moved += 1;
            m.objects += 1;
            m.bytes += loc.len;
            if self.seg(victim).live_objs == 0 {
                m.released = true;
                self.release(victim, src);
                return true;
            }
            let pages = self.pages_of(usize::from(loc.obj) << self.unit_shift, loc.len);
            self.punch(victim, pages, src);
            self.refit(victim);
        }
        moved > 0
    }

    /// Copy the object at `loc` of sealed segment `victim` (owner list
    /// entry `owner`) to the room `make_room` gives elsewhere, count it
    /// there and uncount it in the victim (whose owner entry the caller
    /// pops); returns its new segment and offset, or `None`, nothing
    /// changed, at the memory limit.
    fn move_object(
        &mut self,
        victim: u32,
        owner: u32,
        loc: Location,
        src: &PageSource,
    ) -> Option<(u32, usize)> {
        let need = self.placed(loc.len);
        let (to, off) = self.make_room(need, Some(victim), SURVIVOR, src).ok()?;
        debug_assert_ne!(to, victim);
        let from_off = usize::from(loc.obj) << self.unit_shift;
        let src_ptr = self.seg(victim).run.as_ptr();
        let dst_ptr = self.seg(to).run.as_ptr();
        // SAFETY: distinct runs (make_room excluded the victim); both
        // ranges are inside committed pages; the lane's lock is held
        // alone.
        unsafe {
            std::ptr::copy_nonoverlapping(src_ptr.add(from_off), dst_ptr.add(off), loc.len);
        }
        // The lane's totals do not change: the same object, elsewhere.
        self.count_in(to, off, loc.len, owner);
        self.count_out(loc);
        Some((to, off))
    }
}
