//! Cleaning, log placement's compaction: choosing victims (sealed segments
//! with enough dead bytes, [`Lane::dead_if_victim`], the least live data
//! first),
//! evacuating them into survivor segments, and moving one object.
//!
//! A victim's handle objects are found through its owner list; its owned
//! objects (a page store's, whose slots hold their places) have no list
//! entries and are found by a *plan*: one scan of the owners
//! ([`Owners::find`], a look at every slot) lists the owners of up to
//! [`PLAN_SEGMENTS`] victims at once, and cleaning empties the planned
//! victims, in order, before it plans again. An owned object placed in a
//! planned victim afterwards (into one of its free extents) joins its
//! list. A list is a superset: an owner whose object has gone elsewhere is
//! skipped when its turn comes, as a dead owner list entry is. An owner
//! busy during the scan is not listed; a victim whose list runs out while
//! it still holds objects leaves the plan and is found again by a later
//! one.

use super::{DEAD_SHARE, EXTERNAL, Lane, Outcome, Owners, SURVIVOR, Sought};
use crate::class::Migration;
use crate::compact::Counters;
use crate::handle::Location;
use crate::os::PageSource;

/// Live bytes of the victims a plan takes beyond its first, in segments'
/// worth. The scan's cost is a look at every slot whatever it seeks
/// (a victim's owners are found by a look-up by segment id, [`Sought`]), so
/// a plan takes many victims: under churn (`uniform`, lz4, 65,536 slots,
/// victims at a quarter page dead) plans of 4 victims and 2 segments'
/// worth took 17% of the run's cycles in the scan, of 32 and 16 3%, of 64
/// and 32 1.5%, for the same pool. Planned victims' lists are kept until
/// each empties (shrunk to fit when made): with 32 planned, 0.04 points
/// more all-in than with 16 right after the `phase` variant's burst
/// (zstd), where the scan took 3.1% of the cycles against 5.1%.
const PLAN_SEGMENTS_LIVE: usize = 16;

/// Most victims in one plan.
const PLAN_SEGMENTS: usize = 32;

// A plan's look-up ([`Sought`]) numbers its victims in a byte.
const _: () = assert!(PLAN_SEGMENTS < u8::MAX as usize);

/// Most victims planned at once (a plan is made beside an older one when
/// the older one's first victim is no longer worth cleaning).
const MAX_PLANNED: usize = 32;

impl Lane {
    /// The dead bytes of sealed segment `id` (committed bytes that hold no
    /// live object) if it is a victim: at least
    /// [`Lane::victim_dead`] bytes dead below its end, or a page dead with
    /// the rest of its last page. The rest of the last page alone does not
    /// count against the lower bar: cleaning would only leave as much at
    /// the end of another segment (counted, a segment sealed with more than
    /// a third of a page left was a victim at once, and cleaning moved
    /// segment after segment to win nothing).
    pub(super) fn dead_if_victim(&self, id: u32) -> Option<usize> {
        let seg = self.seg(id);
        let dead = seg.resident * self.page_size - seg.live_bytes;
        // No underflow: live objects and punched pages lie below `end`,
        // apart (`Lane::check`), so `dead - slack` is `end` less them.
        let slack = seg.top * self.page_size - seg.end;
        (dead >= self.page_size || dead - slack >= self.victim_dead()).then_some(dead)
    }

    /// Pages cleaning could give back: dead bytes of the victims
    /// ([`Lane::dead_if_victim`]).
    pub(crate) fn freeable_pages(&self) -> usize {
        self.freeable_bytes / self.page_size
    }

    /// The victims ([`Lane::dead_if_victim`]).
    fn victims(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.segs.len() as u32)
            .filter(|&id| self.segs[id as usize].is_some() && !self.open.contains(&Some(id)))
            .filter(|&id| self.dead_if_victim(id).is_some())
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

    /// Clean: move at most `max_moves` live objects out of the victims
    /// with the least live data into the open segment, giving back each
    /// segment emptied. Recorded in `counters` as a compaction step.
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
            // A planned victim first, in the plan's order (least live
            // bytes first when planned): its owners were found at some
            // cost, a look at every owner.
            let mut planned = self.plan.first().map(|&(id, _)| id);
            if let Some(id) = planned
                && self.dead_if_victim(id).is_none()
            {
                // New objects filled its room since: no longer worth it.
                // (Going on to the next planned victim instead, or dropping
                // the whole plan, held up to 0.17 points more in churn.)
                self.unplan(id);
                planned = None;
            }
            let Some(victim) =
                planned.or_else(|| self.victims().min_by_key(|&id| self.seg(id).live_bytes))
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
            let (owner, outcome) = if let Some(owner) = self.seg(victim).owners.last() {
                (Some(owner), self.move_handle_object(victim, owner, src))
            } else {
                // The rest are owned objects (no list entries): their
                // owners as the plan's scan found them.
                let Some(owners) = owners else {
                    // Owned objects exist only where owners are known.
                    break;
                };
                if !self.planned(victim) {
                    self.make_plan(victim, owners);
                }
                let Some(owner) = self.planned_owner(victim) else {
                    // A live object the scan did not find (its owner was
                    // busy): the victim waits for another plan.
                    self.unplan(victim);
                    break;
                };
                (None, self.move_owned_object(victim, owner, owners, src))
            };
            let pop = |l: &mut Lane| {
                if owner.is_some() {
                    l.seg_mut(victim).owners.pop();
                } else {
                    l.pop_planned(victim);
                }
            };
            let loc = match outcome {
                Outcome::NotHere => {
                    pop(self);
                    continue;
                }
                Outcome::Busy => break,
                Outcome::Blocked => {
                    m.blocked = true;
                    break;
                }
                Outcome::Moved(loc) => loc,
            };
            pop(self);
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

    /// Move the object of handle slot `owner` (the victim's last owner
    /// list entry) if it is still in `victim`.
    fn move_handle_object(&mut self, victim: u32, owner: u32, src: &PageSource) -> Outcome {
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
    }

    /// Move the object `owner` holds if it is still in `victim`, through
    /// `owners` (who records the new place), unless the owner is busy.
    fn move_owned_object(
        &mut self,
        victim: u32,
        owner: u32,
        owners: &dyn Owners,
        src: &PageSource,
    ) -> Outcome {
        let mut outcome = Outcome::NotHere;
        let called = owners.relocate(owner, &mut |place, len| {
            let loc = self.decode(place, len).filter(|l| l.zspage == victim)?;
            match self.move_object(victim, owner | EXTERNAL, loc, src) {
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
    }

    /// Plan the cleaning of `first` (not planned) and of the unplanned
    /// victims with the least live bytes after it (together at most
    /// [`PLAN_SEGMENTS_LIVE`] segments' worth of live bytes beyond
    /// `first`'s, at most [`PLAN_SEGMENTS`] victims): find the owners of
    /// their owned objects in one scan of the owners; an owned object
    /// placed in one of them later joins its list (`count_in`). At most
    /// [`MAX_PLANNED`] victims stay planned: those with the most live bytes
    /// leave first.
    pub(super) fn make_plan(&mut self, first: u32, owners: &dyn Owners) {
        let mut chosen = vec![first];
        let mut rest: Vec<(usize, u32)> = self
            .victims()
            .filter(|&id| id != first && !self.planned(id))
            .map(|id| (self.seg(id).live_bytes, id))
            .collect();
        rest.sort_unstable();
        let (mut live, budget) = (0, PLAN_SEGMENTS_LIVE * self.segment_bytes());
        for (bytes, id) in rest {
            live += bytes;
            if live > budget || chosen.len() >= PLAN_SEGMENTS {
                break;
            }
            chosen.push(id);
        }
        let mut lists = vec![Vec::new(); chosen.len()];
        owners.find(&Sought::new(self.place_lane, &chosen), &mut lists);
        for (id, mut list) in chosen.into_iter().zip(lists) {
            list.shrink_to_fit();
            self.holes.retain(|&h| h != id);
            self.plan.push((id, list));
        }
        while self.plan.len() > MAX_PLANNED {
            let (_, id) = self
                .plan
                .iter()
                .filter(|&&(id, _)| id != first)
                .map(|&(id, _)| (self.seg(id).live_bytes, id))
                .max()
                .expect("more than one planned");
            self.unplan(id);
        }
    }

    /// Whether the plan lists `victim`.
    pub(super) fn planned(&self, victim: u32) -> bool {
        self.plan.iter().any(|&(id, _)| id == victim)
    }

    /// The last owner the plan lists for `victim`, if any.
    fn planned_owner(&self, victim: u32) -> Option<u32> {
        self.plan
            .iter()
            .find(|&&(id, _)| id == victim)
            .and_then(|(_, list)| list.last().copied())
    }

    /// Drop the last owner the plan lists for `victim`.
    fn pop_planned(&mut self, victim: u32) {
        if let Some((_, list)) = self.plan.iter_mut().find(|(id, _)| *id == victim) {
            list.pop();
        }
    }

    /// Take `victim` out of the plan.
    fn unplan(&mut self, victim: u32) {
        self.plan.retain(|&(id, _)| id != victim);
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
