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
//!
//! The scan runs without the lane's lock ([`PlanScan`]): a look at every
//! slot of a large store took up to a millisecond (65,536 slots) with
//! every store, load and free of the lane waiting. The plan is made first,
//! its lists empty, so objects placed in its victims during the scan join
//! them as they would after it; its victims are not cleaned, and no other
//! plan is made, until the scan's lists join them ([`Lane::end_plan`]).
//! Nothing moves an object into a victim, and a victim emptied by frees
//! meanwhile leaves the plan as it is released (its id may name a new
//! segment by the time the scan ends: what the scan found for it is
//! dropped).

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

/// How far past the automatic policy's share of dead bytes a lane goes
/// before a free by a thread whose stores go to another lane cleans it
/// ([`Lane::auto_clean_overdue`]): 4 times, dead bytes at 1.6% of the
/// lane's pages (docs/DESIGN.md, "Churn at two threads").
const OVERDUE: usize = 4;

/// Most victims in one plan.
const PLAN_SEGMENTS: usize = 32;

// A plan's look-up ([`Sought`]) numbers its victims in a byte.
const _: () = assert!(PLAN_SEGMENTS < u8::MAX as usize);

/// Most victims planned at once (a plan is made beside an older one when
/// the older one's first victim is no longer worth cleaning).
const MAX_PLANNED: usize = 32;

/// The scan of the owners a new plan waits for: made under the lane's
/// lock ([`Lane::clean_step`]), run without it ([`PlanScan::run`]), its
/// lists given to the lane under the lock again ([`Lane::end_plan`]).
#[derive(Debug)]
pub(crate) struct PlanScan {
    sought: Sought,
    ids: Vec<u32>,
}

impl PlanScan {
    /// The owners of the planned victims' objects, a list for each: one
    /// look at every owner, each owner's lock only tried (the caller may
    /// hold one).
    pub(crate) fn run(&self, owners: &dyn Owners) -> Vec<Vec<u32>> {
        let mut lists = vec![Vec::new(); self.ids.len()];
        owners.find(&self.sought, &mut lists);
        lists
    }
}

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

    /// Whether the automatic policy cleans on a free by a thread whose
    /// stores go to another lane: only once the dead bytes are
    /// [`OVERDUE`] times the share [`Lane::auto_clean_due`] cleans at. The
    /// lane's own threads clean it first: cleaning holds the lane's lock,
    /// which their stores wait for.
    pub(crate) fn auto_clean_overdue(&self, min_pages: usize) -> bool {
        self.compaction_due(min_pages)
            && self.freeable_pages() * DEAD_SHARE >= OVERDUE * self.resident_pages
    }

    /// Clean as [`Lane::clean_step`] does, running a plan's scan at once
    /// (the lane's lock held through it): for tests and for callers that
    /// cannot let go of the lock.
    pub(crate) fn clean(
        &mut self,
        max_moves: usize,
        due: impl Fn(&Lane) -> bool,
        owners: Option<&dyn Owners>,
        src: &PageSource,
        counters: &Counters,
    ) -> Migration {
        let mut total = Migration::default();
        loop {
            let (m, scan) = self.clean_step(max_moves - total.objects, &due, owners, src, counters);
            total.add(m);
            let (Some(scan), Some(owners)) = (scan, owners) else {
                return total;
            };
            let lists = scan.run(owners);
            self.end_plan(scan, lists);
            if total.objects >= max_moves || !due(self) {
                return total;
            }
        }
    }

    /// Clean: move at most `max_moves` live objects out of the victims
    /// with the least live data into the open segment, giving back each
    /// segment emptied. Recorded in `counters` as a compaction step. Stops
    /// early when a victim's owners must be found: the plan is made and
    /// its scan returned, for the caller to run without the lane's lock
    /// and give back to [`Lane::end_plan`] (who then cleans on).
    pub(crate) fn clean_step(
        &mut self,
        max_moves: usize,
        due: impl Fn(&Lane) -> bool,
        owners: Option<&dyn Owners>,
        src: &PageSource,
        counters: &Counters,
    ) -> (Migration, Option<PlanScan>) {
        // Objects move: lock-free readers must see the stretch (no return
        // before its end below).
        let began = self.moving();
        let started = std::time::Instant::now();
        let mut m = Migration::default();
        let mut scan = None;
        while m.objects < max_moves && due(self) && scan.is_none() {
            // A planned victim first, in the plan's order (least live
            // bytes first when planned): its owners were found at some
            // cost, a look at every owner. Not one whose scan is out.
            let mut planned = self
                .plan
                .iter()
                .map(|&(id, _)| id)
                .find(|id| !self.scanning.contains(id));
            if let Some(id) = planned
                && self.dead_if_victim(id).is_none()
            {
                // New objects filled its room since: no longer worth it.
                // (Going on to the next planned victim instead, or dropping
                // the whole plan, held up to 0.17 points more in churn.)
                self.unplan(id);
                planned = None;
            }
            let Some(victim) = planned.or_else(|| {
                self.victims()
                    .filter(|id| !self.scanning.contains(id))
                    .min_by_key(|&id| self.seg(id).live_bytes)
            }) else {
                break;
            };
            // Nothing is appended to it while it empties.
            self.holes.retain(|&h| h != victim);
            let before = self.resident_pages;
            let moved = self.evacuate(
                victim,
                max_moves - m.objects,
                owners,
                src,
                &mut m,
                &mut scan,
            );
            let after = self.resident_pages;
            m.pages_freed += before.saturating_sub(after);
            m.pages_committed += after.saturating_sub(before);
            if !moved {
                break;
            }
        }
        let held = started.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
        counters.record(m, held);
        self.moved(began);
        (m, scan)
    }

    /// Move up to `max` live objects of `victim` elsewhere, last appended
    /// first; true if the victim was emptied (and released) or objects
    /// moved, false if nothing could move (the memory limit, or the owner
    /// of its last object busy). Stops at an owned object of an unplanned
    /// victim, having planned it into `scan` if no scan is out.
    fn evacuate(
        &mut self,
        victim: u32,
        max: usize,
        owners: Option<&dyn Owners>,
        src: &PageSource,
        m: &mut Migration,
        scan: &mut Option<PlanScan>,
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
                    if self.scanning.is_empty() {
                        // Found by a scan the caller runs: stop here.
                        *scan = Some(self.begin_plan(victim));
                    }
                    // Else another thread's scan is out: only one at once.
                    break;
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
    /// `first`'s, at most [`PLAN_SEGMENTS`] victims), their lists empty
    /// until the scan of the owners that `clean_step` returns finds their
    /// owned objects ([`Lane::end_plan`]); an owned object placed in one of
    /// them from now on joins its list (`count_in`). At most
    /// [`MAX_PLANNED`] victims stay planned: older ones with the most live
    /// bytes leave first. No scan may be out; returns the one to run.
    pub(super) fn begin_plan(&mut self, first: u32) -> PlanScan {
        debug_assert!(self.scanning.is_empty());
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
        for &id in &chosen {
            self.holes.retain(|&h| h != id);
            self.plan.push((id, Vec::new()));
        }
        while self.plan.len() > MAX_PLANNED {
            let (_, id) = self
                .plan
                .iter()
                .filter(|&&(id, _)| !chosen.contains(&id))
                .map(|&(id, _)| (self.seg(id).live_bytes, id))
                .max()
                .expect("more planned than a plan takes");
            self.unplan(id);
        }
        self.scanning.clone_from(&chosen);
        PlanScan {
            sought: Sought::new(self.place_lane, &chosen),
            ids: chosen,
        }
    }

    /// The scan `scan` of the owners ([`PlanScan::run`]) found `lists`:
    /// each joins its victim's list, if the victim is still planned (one
    /// released meanwhile is not, and its id may name a new segment). Its
    /// victims can be cleaned again.
    pub(crate) fn end_plan(&mut self, scan: PlanScan, lists: Vec<Vec<u32>>) {
        debug_assert_eq!(scan.ids, self.scanning);
        for (id, found) in scan.ids.into_iter().zip(lists) {
            if let Some((_, list)) = self.plan.iter_mut().find(|(v, _)| *v == id) {
                list.extend(found);
                list.shrink_to_fit();
            }
        }
        self.scanning.clear();
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
        // alone, so no one writes the source while it is read; the
        // destination is written by word where lock-free readers read.
        unsafe {
            let from = std::slice::from_raw_parts(src_ptr.add(from_off), loc.len);
            self.writes().store(dst_ptr, off, from);
        }
        // The lane's totals do not change: the same object, elsewhere.
        self.count_in(to, off, loc.len, owner);
        self.count_out(loc);
        Some((to, off))
    }
}
