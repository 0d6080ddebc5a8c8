//! Log placement: one lane of append-only segments, objects packed exactly.
//!
//! With [`Placement::Log`](crate::Placement) a pool keeps no size classes.
//! Each *lane* (one per writing thread, up to the configured count) appends
//! objects, rounded up only to its *unit* (2 bytes at 4 KiB pages), at the
//! end of its *open segment*: a run of [`SEGMENT_PAGES`] pages committed
//! page by page as objects reach into it. When an object does not fit in
//! what is left, the segment is *sealed* and a new one opened. A free only
//! subtracts the object from its segment's live counts; a segment whose
//! last object goes is given back at once. The space of dead objects in
//! sealed segments (and the unused end of a sealed segment) comes back by
//! *cleaning*, this placement's compaction: the live objects of the sealed
//! segment with the least live data are copied to the open segment and the
//! emptied segment is given back (RAMCloud's log-structured memory, cleaned
//! by cost).
//!
//! Why: a class keeps up to a page beyond its objects, and a pool of a few
//! MB spreads over a hundred classes (see "Log placement" in
//! docs/DESIGN.md for the measurements). A lane has no class floor and no
//! rounding, and objects written together sit together, so deleting what
//! was written together (a directory of files) empties whole segments.
//!
//! Handles are the pool's ordinary ones: the class field names the lane,
//! the lane's handle table maps the slot to `{segment, offset in units,
//! length}` (`Location::zspage` is the segment id, `Location::obj` the
//! offset in units), so a handle stays valid while cleaning moves its
//! object. Each segment keeps the handle slots of the objects appended to
//! it, in order (`owners`: runs of consecutive slots, 8 bytes a run, most
//! runs many objects long); cleaning walks it and moves the objects whose
//! live entry still points into the segment. Objects stored for an
//! [`Owners`] (a page store's slots, which hold their places) have no
//! entry there: cleaning finds a victim's owners by a scan of the owners
//! (`lane/clean.rs`, the plan).
//!
//! Invariants (checked by [`Lane::check`]):
//! - a segment's committed pages are a prefix, exactly the pages up to its
//!   `end` (the first object starts at 0, so an empty open segment commits
//!   nothing yet but the pages its first object needs);
//! - every live handle entry points at a live segment, inside its `end`,
//!   and appears in that segment's `owners`; every place an owner holds in
//!   this lane names a live segment, inside its `end`; a segment's
//!   `live_objs` and `live_bytes` count exactly those entries and places
//!   and their placed (rounded) lengths; no segment but the open one is
//!   empty; the plan names distinct live segments;
//! - `resident_pages`, `placed_bytes` and `bytes_stored` are the sums over
//!   segments and live objects.
//!
//! This file: segments, placement, frees, statistics. `lane/clean.rs`:
//! cleaning (victims, evacuation, moving an object); `lane/check.rs`: the
//! invariant check; `lane/extents.rs`: a segment's free extents;
//! `lane/owner_list.rs`: a segment's owner list; `lane/tests.rs`;
//! `lane/test_owners.rs`: owners for tests.

use crate::error::{Error, Result};
use crate::handle::{Directory, Handle, HandleTable, Location};
use crate::optimistic::{Geometry, Published};
use crate::os::{PageSource, Run};
use crate::words::Writes;

mod check;
mod clean;
mod extents;
mod owner_list;
use extents::Extents;
use owner_list::OwnerList;

/// Pages of one segment (the page source's longest run).
pub(crate) const SEGMENT_PAGES: usize = crate::size_class::MAX_CHAIN_SIZE;

/// An owner with this bit (as cleaning and `count_in` name it) is an
/// [`Owners`]' (a page store's slot), not a handle table slot.
const EXTERNAL: u32 = 1 << 31;

/// Owners an [`Owners`] may have: an owner is named in the 31 bits below
/// [`EXTERNAL`], so owner 2^31 would read back as handle slot 0. A page
/// store refuses more slots than this with log placement.
pub(crate) const MAX_OWNERS: usize = EXTERNAL as usize;

/// Where the objects stored with [`Lane::alloc_owned`] are recorded: a
/// page store's slots, each holding its object's place (the slot is the
/// handle, so such objects need no handle table entry).
pub(crate) trait Owners: Send + Sync {
    /// Under the lane's exclusive lock: if `owner` holds an object, call
    /// `mv` with its place and length; if `mv` returns a new place, record
    /// it. Must not block (the lane lock is held, and the owner's own lock
    /// is taken before lane locks elsewhere): returns false, having called
    /// nothing, if the owner is busy.
    fn relocate(&self, owner: u32, mv: &mut dyn FnMut(u64, usize) -> Option<u64>) -> bool;

    /// Call `f` with every owner that holds an object, its place and
    /// length. With `wait`, each owner's lock is taken (for invariant
    /// checks, while no other thread uses the store); without, under a
    /// lane lock, it is only *tried*, a busy owner is skipped and the call
    /// returns false.
    fn scan(&self, wait: bool, f: &mut dyn FnMut(u32, u64, usize)) -> bool;

    /// Under a lane lock: push each owner whose place names one of the
    /// segments `sought` looks for, the `i`-th of them, on `out[i]`,
    /// trying each owner's lock as [`Owners::scan`] does (false if one was
    /// busy). The same as a scan with that filter; an owner may do it
    /// faster (a page store calls no function through a pointer for each
    /// slot).
    fn find(&self, sought: &Sought, out: &mut [Vec<u32>]) -> bool {
        self.scan(false, &mut |owner, place, _| {
            if let Some(i) = sought.which(place) {
                out[i].push(owner);
            }
        })
    }
}

/// `len` rounded up to a multiple of `1 << shift` (a mask, not a
/// division: on every store and free).
fn round_up(len: usize, shift: u32) -> usize {
    let unit = 1usize << shift;
    (len + unit - 1) & !(unit - 1)
}

/// The segment a place names (see [`Lane::encode`]).
pub(crate) fn place_segment(place: u64) -> u32 {
    ((place >> OFFSET_BITS) & 0xFFFF) as u32
}

/// The segments of one lane a plan's scan looks for ([`Owners::find`]):
/// which of them a place names, in a look-up by segment id (a scan asks
/// once per stored slot; a search of the list cost 15 ns a slot with 30
/// segments sought).
#[derive(Debug)]
pub(crate) struct Sought {
    /// The lane, as a place names it (its bits from 32 up).
    lane: u64,
    /// By segment id, up to the largest sought: its index among the
    /// sought plus 1, or 0.
    index: Vec<u8>,
}

impl Sought {
    /// Look for `segments` (distinct, fewer than 255) of lane `lane`.
    pub(crate) fn new(lane: u64, segments: &[u32]) -> Self {
        debug_assert!(segments.len() < usize::from(u8::MAX));
        let top = segments.iter().map(|&s| s as usize + 1).max().unwrap_or(0);
        let mut index = vec![0; top];
        for (i, &s) in segments.iter().enumerate() {
            index[s as usize] = i as u8 + 1;
        }
        Sought { lane, index }
    }

    /// Which of the sought segments `place` names, if any.
    #[inline]
    pub(crate) fn which(&self, place: u64) -> Option<usize> {
        if place >> 32 != self.lane {
            return None;
        }
        let i = *self.index.get(place_segment(place) as usize)?;
        usize::from(i).checked_sub(1)
    }
}

/// What became of one owner list entry in cleaning.
enum Outcome {
    /// Moved; the object was at this location.
    Moved(Location),
    /// Its object is dead or lives elsewhere: the entry goes.
    NotHere,
    /// The owner was busy, or the memory limit refused the room: stop.
    Busy,
    Blocked,
}

/// The automatic policy cleans when dead bytes reach this share of the
/// lane's pages (1/256: 0.4%), or sooner for a segment at most half live.
const DEAD_SHARE: usize = 256;

/// A sealed segment is a victim (cleaning may take it) once its dead
/// bytes below its end reach this share of a segment: 1/96, a third of a
/// page at 4 KiB pages (or once a page is dead counting the rest of its
/// last page, see `Lane::dead_if_victim`). Under swap-like churn dead bytes
/// come a sliver at a time (what best fit leaves of an extent), and with
/// only a page as the bar each of the 800 segments of a 100 MB store kept
/// up to a page of them: pool 1.6-1.8% of the compressed bytes (Go tree,
/// 65,536 slots). A third: 0.9-1.0%, for about a byte copied per byte
/// stored; half a page: 1.3%, all-in at 3% right after a burst of
/// discards; a quarter: 0.75%, for 1.5 bytes copied (see "Victims at a
/// third of a page" in docs/DESIGN.md).
const VICTIM_SHARE: usize = 96;

/// The open segment of new objects.
const NEW: usize = 0;
/// The open segment of objects moved by cleaning.
const SURVIVOR: usize = 1;

/// Least room at a sealed segment's end worth filling.
const MIN_HOLE: usize = 64;

/// Most sealed segments whose end room is filled.
const MAX_HOLES: usize = 8;

/// Bits of a handle entry's place that hold the offset in units.
const OFFSET_BITS: u32 = 16;

#[derive(Debug)]
struct Segment {
    run: Run,
    /// Bytes appended: the next object of an open segment goes here.
    end: usize,
    /// Pages committed from the start (those up to `end`), dead ones
    /// given back since included.
    top: usize,
    /// Bit per page below `top` given back because no live object touches
    /// it and no object can be appended to it (it lies wholly below `end`).
    punched: u32,
    /// Pages committed and not given back: `top` less the punched ones.
    resident: usize,
    /// Live objects touching each page.
    page_objs: [u16; SEGMENT_PAGES],
    live_objs: usize,
    /// Placed (unit-rounded) bytes of the live objects.
    live_bytes: usize,
    /// Handle slot of every object appended, in order; some are dead.
    owners: OwnerList,
    /// Dead ranges below `end` on resident pages, for new objects.
    extents: Extents,
    /// Its longest extent's length in units, as keyed in `Lane::fits` (0:
    /// not there).
    largest: u32,
}

/// One lane's state; everything here runs under the lane's lock.
#[derive(Debug)]
pub(crate) struct Lane {
    /// Carried in this lane's handles.
    index: usize,
    /// Carried in its owned objects' places: the lane's number among the
    /// pool's lanes, plus 1 (1..=64, so a place fits 39 bits and is never
    /// 0).
    place_lane: u64,
    page_size: usize,
    /// log2 of the placement unit.
    unit_shift: u32,
    /// By id; boxed, so a released id costs a pointer.
    segs: Vec<Option<Box<Segment>>>,
    /// Ids of released segments, reused before new ones.
    free_ids: Vec<u32>,
    /// The open segments: [`NEW`] takes new objects, [`SURVIVOR`] the
    /// objects cleaning moves. Kept apart (RAMCloud's survivor segments):
    /// moved objects are old and, where objects die in the order they were
    /// written, die next; among new objects they would leave new segments
    /// part dead, to be cleaned again.
    open: [Option<u32>; 2],
    /// Sealed segments with room left at their end (at least
    /// [`MIN_HOLE`] bytes, at most [`MAX_HOLES`] of them): an object that
    /// fits goes there first, so sealing wastes little.
    holes: Vec<u32>,
    handles: HandleTable,
    resident_pages: usize,
    placed_bytes: usize,
    bytes_stored: usize,
    /// Dead bytes of the victims (what cleaning could give back), kept as
    /// segments change so that deciding whether to clean costs nothing on
    /// a free.
    freeable_bytes: usize,
    /// Of those segments, the ones at most half live: cleaning one copies
    /// at most a byte per byte it gives back.
    sparse_victims: usize,
    /// Live objects stored for [`Owners`] (not in the handle table).
    owned: usize,
    /// `(longest extent in units, segment)` of every segment with free
    /// extents: an object takes the shortest extent that holds it.
    /// Every segment but `unkeyed` is keyed by its longest extent now.
    fits: std::collections::BTreeSet<(u32, u32)>,
    /// The segment a free last changed, keyed in `fits` by its longest
    /// extent as it was before (its `largest`), not as it is: re-keyed
    /// only when another segment's free comes (or cleaning, or a
    /// placement elsewhere needs it). Where a free's room is taken by the
    /// next object (a ring of frees and stores, a slot rewritten) its key
    /// comes back to what it was, and neither changes `fits`: two B-tree
    /// changes saved a pair. [`Lane::take_extent`] reads its longest
    /// extent itself, so placement is exactly as if it were keyed.
    unkeyed: Option<u32>,
    /// Victims being cleaned (distinct and live, at most `MAX_PLANNED`), each
    /// with the owners of its owned objects as a scan of the owners found
    /// them and the owned objects placed there since (see
    /// `lane/clean.rs`): owned objects have no owner list entries.
    plan: Vec<(u32, Vec<u32>)>,
    /// Planned victims whose scan of the owners is out (run by the
    /// thread that planned them, without the lane's lock): their lists
    /// hold only the objects placed there since. None is cleaned, and no
    /// other plan made, until the scan's lists join them
    /// ([`Lane::end_plan`]).
    scanning: Vec<u32>,
    /// What lock-free reads need (`optimistic.rs`), kept current here:
    /// the segments' addresses, and the move count around cleaning and
    /// writes in place ([`Lane::publishing`]).
    published: Option<std::sync::Arc<Published>>,
}

/// What a lane holds beyond its objects' bytes, by cause.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LaneWaste {
    /// Placed bytes beyond the objects' lengths (rounding to the unit).
    pub(crate) rounding: usize,
    /// Committed bytes of dead objects and of sealed segments' unused ends.
    pub(crate) dead: usize,
    /// Committed bytes of the open segment beyond its end.
    pub(crate) tail: usize,
}

impl Lane {
    /// An empty lane whose handles carry `index`, number `number` of its
    /// pool's lanes (`< MAX_LANES`); `directory` for pools with deferred
    /// free.
    pub(crate) fn new(
        index: usize,
        number: usize,
        page_size: usize,
        directory: Option<std::sync::Arc<Directory>>,
    ) -> Self {
        debug_assert!(number < crate::config::MAX_LANES);
        let unit_shift = Self::unit_shift(page_size);
        Lane {
            index,
            place_lane: number as u64 + 1,
            page_size,
            unit_shift,
            segs: Vec::new(),
            free_ids: Vec::new(),
            open: [None; 2],
            holes: Vec::new(),
            handles: HandleTable::new(directory, OFFSET_BITS),
            resident_pages: 0,
            placed_bytes: 0,
            bytes_stored: 0,
            freeable_bytes: 0,
            sparse_victims: 0,
            owned: 0,
            fits: std::collections::BTreeSet::new(),
            unkeyed: None,
            plan: Vec::new(),
            scanning: Vec::new(),
            published: None,
        }
    }

    /// The lane, publishing what lock-free reads need (its handle table
    /// has a directory; else nothing changes).
    pub(crate) fn publishing(mut self) -> Self {
        let geometry = Geometry::Units {
            shift: self.unit_shift,
            span: self.segment_bytes(),
        };
        self.published = self
            .handles
            .directory()
            .and_then(|d| Published::new(d, geometry, OFFSET_BITS))
            .map(std::sync::Arc::new);
        self
    }

    /// Start its handles' generations at `first` (the pool tag's epoch;
    /// before the first allocation).
    pub(crate) fn start_generations_at(&mut self, first: u32) {
        self.handles.start_generations_at(first);
    }

    /// What lock-free reads of this lane need, if it publishes it.
    pub(crate) fn published(&self) -> Option<&std::sync::Arc<Published>> {
        self.published.as_ref()
    }

    /// How object bytes are written: by word where lock-free readers may
    /// race (the lane publishes), else plainly.
    pub(crate) fn writes(&self) -> Writes {
        Writes::racing(self.published.is_some())
    }

    /// Begin a stretch of moves or writes in place (lock-free readers then
    /// check their copies against it); true if this call began it.
    pub(crate) fn moving(&self) -> bool {
        self.published.as_ref().is_some_and(|p| p.begin())
    }

    /// End the stretch [`Lane::moving`] began, if it did.
    pub(crate) fn moved(&self, began: bool) {
        if began && let Some(p) = &self.published {
            p.end();
        }
    }

    /// Key segment `id` in `fits` by its longest extent now.
    fn refit(&mut self, id: u32) {
        let seg = self.seg(id);
        let (old, new) = (seg.largest, seg.extents.largest());
        if old == new {
            return;
        }
        if old > 0 {
            self.fits.remove(&(old, id));
        }
        if new > 0 {
            self.fits.insert((new, id));
        }
        self.seg_mut(id).largest = new;
        if self.unkeyed == Some(id) {
            self.unkeyed = None;
        }
    }

    /// Segment `id`'s extents changed by a free: key it in `fits` later
    /// (see `unkeyed`), the segment keyed later before it now.
    fn refit_later(&mut self, id: u32) {
        if self.unkeyed != Some(id) {
            if let Some(other) = self.unkeyed.take() {
                self.refit(other);
            }
            self.unkeyed = Some(id);
        }
    }

    /// Room for `need` bytes in a segment's free extent (best fit over the
    /// segments' longest extents, then within the segment), not in
    /// `exclude`; its pages are resident.
    fn take_extent(&mut self, need: usize, exclude: Option<u32>) -> Option<(u32, usize)> {
        let units = (need >> self.unit_shift) as u32;
        // The unkeyed segment's stale key is skipped; it competes with its
        // longest extent now, as if it were keyed.
        let keyed = self
            .fits
            .range((units, 0)..)
            .copied()
            .find(|&(_, id)| Some(id) != exclude && Some(id) != self.unkeyed);
        let late = self
            .unkeyed
            .filter(|&u| Some(u) != exclude)
            .map(|u| (self.seg(u).extents.largest(), u))
            .filter(|&(longest, _)| longest >= units);
        let (_, id) = match (keyed, late) {
            (Some(k), Some(l)) => k.min(l),
            (k, l) => k.or(l)?,
        };
        let at = self.seg_mut(id).extents.take(units)?;
        if Some(id) != self.unkeyed {
            self.refit(id);
        }
        Some((id, (at as usize) << self.unit_shift))
    }

    /// What segment `id` adds to `freeable_bytes` and `sparse_victims`.
    fn contribution(&self, id: u32) -> (usize, usize) {
        if self.open.contains(&Some(id)) {
            return (0, 0);
        }
        let Some(dead) = self.dead_if_victim(id) else {
            return (0, 0);
        };
        let seg = self.seg(id);
        (
            dead,
            usize::from(2 * seg.live_bytes <= seg.resident * self.page_size),
        )
    }

    /// Change segment `id` (or whether it is open) with `f`, keeping the
    /// cleaning totals.
    fn update<R>(&mut self, id: u32, f: impl FnOnce(&mut Self) -> R) -> R {
        let (dead, sparse) = self.contribution(id);
        let r = f(self);
        let (dead2, sparse2) = self.contribution(id);
        self.freeable_bytes = self.freeable_bytes - dead + dead2;
        self.sparse_victims = self.sparse_victims - sparse + sparse2;
        r
    }

    /// Dead bytes below its end that make a sealed segment a victim:
    /// 1/[`VICTIM_SHARE`] of a segment.
    fn victim_dead(&self) -> usize {
        self.segment_bytes() / VICTIM_SHARE
    }

    /// log2 of the unit: the offset in units must fit the entry's 16 bits.
    fn unit_shift(page_size: usize) -> u32 {
        ((SEGMENT_PAGES * page_size) >> OFFSET_BITS)
            .max(1)
            .trailing_zeros()
    }

    /// Bytes an object of `len` bytes takes in a lane of pages of
    /// `page_size` bytes.
    pub(crate) fn placed_len(len: usize, page_size: usize) -> usize {
        round_up(len, Self::unit_shift(page_size))
    }

    fn segment_bytes(&self) -> usize {
        SEGMENT_PAGES * self.page_size
    }

    /// Bytes an object of `len` bytes takes: rounded up to the unit.
    pub(crate) fn placed(&self, len: usize) -> usize {
        round_up(len, self.unit_shift)
    }

    fn pages_to(&self, end: usize) -> usize {
        (end + self.page_size - 1) >> self.page_shift()
    }

    fn seg(&self, id: u32) -> &Segment {
        self.segs[id as usize].as_ref().expect("a live segment")
    }

    fn seg_mut(&mut self, id: u32) -> &mut Segment {
        self.segs[id as usize].as_mut().expect("a live segment")
    }

    /// Room for `need` bytes, its pages committed: at the end of the
    /// sealed segment with the least room that fits (not `exclude`), else
    /// of the open segment, else of a new one; returns (segment, offset).
    /// At the memory limit nothing changes but an emptied open segment.
    fn make_room(
        &mut self,
        need: usize,
        exclude: Option<u32>,
        which: usize,
        src: &PageSource,
    ) -> Result<(u32, usize)> {
        if let Some(found) = self.take_extent(need, exclude) {
            return Ok(found);
        }
        let room = |l: &Lane, id: u32| l.segment_bytes() - l.seg(id).end;
        let hole = self
            .holes
            .iter()
            .copied()
            .filter(|&id| Some(id) != exclude && room(self, id) >= need)
            .min_by_key(|&id| room(self, id));
        let id = match (hole, self.open[which]) {
            (Some(id), _) => id,
            (None, Some(id)) if room(self, id) >= need => id,
            (None, open) => {
                if let Some(id) = open {
                    // Sealed: from now on only a hole.
                    self.update(id, |l| l.open[which] = None);
                    self.seg_mut(id).owners.shrink_to_fit();
                    if self.seg(id).live_objs == 0 {
                        self.release(id, src);
                    } else if room(self, id) >= MIN_HOLE {
                        self.holes.push(id);
                        if self.holes.len() > MAX_HOLES {
                            let (at, _) = self
                                .holes
                                .iter()
                                .enumerate()
                                .min_by_key(|&(_, &h)| room(self, h))
                                .expect("not empty");
                            self.holes.swap_remove(at);
                        }
                    }
                }
                let id = self.new_segment(need, src)?;
                self.open[which] = Some(id);
                return Ok((id, 0));
            }
        };
        let (end, have) = (self.seg(id).end, self.seg(id).top);
        let want = self.pages_to(end + need);
        if want > have {
            src.commit(&self.seg(id).run, have, want - have)?;
            self.update(id, |l| {
                let seg = l.seg_mut(id);
                seg.top = want;
                seg.resident += want - have;
                l.resident_pages += want - have;
            });
        }
        if hole.is_some() && room(self, id) - need < MIN_HOLE {
            self.holes.retain(|&h| h != id);
        }
        Ok((id, end))
    }

    fn new_segment(&mut self, first: usize, src: &PageSource) -> Result<u32> {
        let id = match self.free_ids.pop() {
            Some(id) => id,
            None if self.segs.len() < self.handles.max_zspages() as usize => self.segs.len() as u32,
            None => {
                return Err(Error::OsOutOfMemory {
                    bytes: 0,
                    reason: format!(
                        "log lane is full ({} segments of {} bytes, all a handle entry can name)",
                        self.segs.len(),
                        self.segment_bytes()
                    ),
                });
            }
        };
        let commit = self.pages_to(first).max(1);
        let (run, resident) = match src.alloc_lazy_run(SEGMENT_PAGES, commit) {
            Ok(r) => r,
            Err(e) => {
                if id as usize != self.segs.len() {
                    self.free_ids.push(id);
                }
                return Err(e);
            }
        };
        let seg = Segment {
            run,
            end: 0,
            top: resident,
            punched: 0,
            page_objs: [0; SEGMENT_PAGES],
            resident,
            live_objs: 0,
            live_bytes: 0,
            owners: OwnerList::default(),
            extents: Extents::default(),
            largest: 0,
        };
        if let Some(p) = &self.published {
            p.set_base(id, seg.run.as_ptr());
        }
        if id as usize == self.segs.len() {
            self.segs.push(Some(Box::new(seg)));
        } else {
            self.segs[id as usize] = Some(Box::new(seg));
        }
        self.resident_pages += resident;
        Ok(id)
    }

    /// Count a segment's punched pages as held again, so that its held
    /// pages are its first `top` when it is freed.
    fn recount_punched(seg: &Segment, src: &PageSource) {
        let below_top = crate::os::span(0, seg.top);
        if seg.punched & below_top != 0 {
            src.recount(&seg.run, seg.punched & below_top);
        }
    }

    /// The pages an object at byte `off` of `len` bytes touches.
    fn pages_of(&self, off: usize, len: usize) -> std::ops::Range<usize> {
        let shift = self.page_shift();
        off >> shift..(off + len + self.page_size - 1) >> shift
    }

    /// log2 of the page size (a power of two): page numbers by shift, not
    /// division, on every store and free.
    fn page_shift(&self) -> u32 {
        self.page_size.trailing_zeros()
    }

    /// Give back the pages of segment `id` in `pages` that no live object
    /// touches and that lie wholly below its end (nothing is appended
    /// there again): without copying, as a heap gives back whole free
    /// pages. Through the return queue with a delayed return: no system
    /// call on a free. The pages are cut out of the segment's free
    /// extents; the caller re-keys it in `fits` once its extents are final
    /// ([`Lane::refit`], or after a free [`Lane::refit_later`]).
    fn punch(&mut self, id: u32, pages: std::ops::Range<usize>, src: &PageSource) {
        let seg = self.seg(id);
        let closed = seg.end >> self.page_shift();
        // A bit per page to give back (a segment has 32): no allocation on
        // a free.
        let dead: u32 = pages
            .filter(|&p| p < closed && seg.page_objs[p] == 0 && seg.punched & (1 << p) == 0)
            .fold(0, |m, p| m | 1 << p);
        if dead == 0 {
            return;
        }
        let n = dead.count_ones() as usize;
        let page_units = (self.page_size >> self.unit_shift) as u32;
        self.update(id, |l| {
            l.resident_pages -= n;
            let seg = l.seg_mut(id);
            seg.punched |= dead;
            seg.resident -= n;
            let mut rest = dead;
            while rest != 0 {
                let p = rest.trailing_zeros();
                rest &= rest - 1;
                seg.extents.cut(p * page_units, (p + 1) * page_units);
            }
        });
        src.decommit(&self.seg(id).run, dead);
    }

    /// Give segment `id` (empty) back to the OS.
    fn release(&mut self, id: u32, src: &PageSource) {
        let (dead, sparse) = self.contribution(id);
        self.freeable_bytes -= dead;
        self.sparse_victims -= sparse;
        let seg = self.segs[id as usize].take().expect("a live segment");
        debug_assert_eq!(seg.live_objs, 0);
        if let Some(p) = &self.published {
            p.set_base(id, std::ptr::null_mut());
        }
        if seg.largest > 0 {
            self.fits.remove(&(seg.largest, id));
        }
        if self.unkeyed == Some(id) {
            self.unkeyed = None;
        }
        self.plan.retain(|&(v, _)| v != id);
        for open in &mut self.open {
            if *open == Some(id) {
                *open = None;
            }
        }
        self.holes.retain(|&h| h != id);
        self.resident_pages -= seg.resident;
        Self::recount_punched(&seg, src);
        src.free_run(seg.run, SEGMENT_PAGES, seg.top);
        if id as usize + 1 == self.segs.len() {
            self.segs.pop();
            // Trailing released ids go too, so the vector shrinks.
            while let Some(None) = self.segs.last() {
                self.segs.pop();
            }
            let n = self.segs.len() as u32;
            self.free_ids.retain(|&f| f < n);
        } else {
            self.free_ids.push(id);
        }
        if self.segs.capacity() > 2 * self.segs.len() + 4 {
            self.segs.shrink_to(self.segs.len() + self.segs.len() / 4);
        }
    }

    /// Append an object of `len` bytes, writing `data` if given.
    pub(crate) fn alloc(
        &mut self,
        len: usize,
        data: Option<&[u8]>,
        src: &PageSource,
    ) -> Result<Handle> {
        let need = self.placed(len);
        let (id, off) = self.make_room(need, None, NEW, src)?;
        let loc = Location {
            zspage: id,
            obj: (off >> self.unit_shift) as u16,
            len,
        };
        // If this fails the committed pages stay for the next object.
        let handle = self.handles.insert(self.index, loc)?;
        self.place_at(id, off, len, handle.slot(), data);
        self.prune_owners(id);
        Ok(handle)
    }

    /// Append an object of `data.len()` bytes for `owner` (below
    /// [`MAX_OWNERS`]), who records the place returned and gives it back
    /// to read, free, and (through [`Owners`]) to let cleaning move the
    /// object. No owner list entry: cleaning finds the owners of a
    /// victim's owned objects by a scan of the owners (`lane/clean.rs`).
    pub(crate) fn alloc_owned(&mut self, owner: u32, data: &[u8], src: &PageSource) -> Result<u64> {
        // Invariant: kept by `PageStore::new`, which refuses more than
        // MAX_OWNERS slots over a log-placed pool.
        debug_assert!((owner as usize) < MAX_OWNERS);
        let need = self.placed(data.len());
        let (id, off) = self.make_room(need, None, NEW, src)?;
        self.place_at(id, off, data.len(), owner | EXTERNAL, Some(data));
        self.owned += 1;
        Ok(self.encode(id, off))
    }

    /// Where the next object appended to the open segment of new objects
    /// would start (0 if none is open): a hint to prefetch, published
    /// outside the lane's lock, possibly stale.
    pub(crate) fn append_point(&self) -> usize {
        self.open[NEW].map_or(0, |id| {
            let seg = self.seg(id);
            seg.run.as_ptr() as usize + seg.end
        })
    }

    /// Ask the CPU to bring the `len` bytes at `at` (an append point) into
    /// its cache, to be written: a store that then copies an object there
    /// does not wait for the lines (a hint: it never faults, whatever the
    /// address; nothing on other targets and under Miri).
    pub(crate) fn prefetch_for_write(at: usize, len: usize) {
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        for line in (0..len).step_by(64) {
            // SAFETY: a prefetch reads and writes nothing; any address is
            // allowed (an unmapped one is ignored).
            unsafe {
                use core::arch::x86_64::{_MM_HINT_ET0, _mm_prefetch};
                _mm_prefetch::<_MM_HINT_ET0>(at.wrapping_add(line) as *const i8);
            }
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        let _ = (at, len);
    }

    /// Drop the owner list entries (handle slots) of segment `id` whose
    /// objects are dead or elsewhere, once the list has grown by a quarter
    /// of its live objects (at least 8) past them: a segment whose free
    /// extents take object after object keeps a list the size of its
    /// contents (under churn, where each item is a single owner, 4 bytes an
    /// object plus at most a quarter; amortised, 5 entries looked at per
    /// object placed).
    fn prune_owners(&mut self, id: u32) {
        let seg = self.seg(id);
        if seg.owners.runs() < seg.live_objs + (seg.live_objs / 4).max(8) {
            return;
        }
        let mut seen = std::collections::HashSet::with_capacity(seg.live_objs);
        let mut list = std::mem::take(&mut self.seg_mut(id).owners);
        list.retain(EXTERNAL, |owner| {
            self.handles
                .live_entry(owner)
                .is_some_and(|l| l.zspage == id)
                && seen.insert(owner)
        });
        self.seg_mut(id).owners = list;
    }

    /// Count an object of `len` bytes at `off` of segment `id` (room made
    /// there), owned by `owner`, and write `data` into it if given.
    fn place_at(&mut self, id: u32, off: usize, len: usize, owner: u32, data: Option<&[u8]>) {
        self.count_in(id, off, len, owner);
        self.placed_bytes += self.placed(len);
        self.bytes_stored += len;
        let seg = self.seg(id);
        if let Some(d) = data {
            // SAFETY: `off + need` is within the committed pages of the
            // run (make_room), whose start is page-aligned and whose span
            // is whole words; the lane's lock is held alone; lock-free
            // readers, if any, read by word.
            unsafe { self.writes().store(seg.run.as_ptr(), off, d) }
        }
    }

    /// Count an object of `len` bytes appended at `off` of segment `id`
    /// (room made there) in the segment: its end, live counts, owner list
    /// and per-page counts. The lane's totals are the caller's.
    fn count_in(&mut self, id: u32, off: usize, len: usize, owner: u32) {
        let need = self.placed(len);
        let pages = self.pages_of(off, len);
        self.update(id, |l| {
            let seg = l.seg_mut(id);
            // Below `end` in a free extent, or appended.
            seg.end = seg.end.max(off + need);
            seg.live_objs += 1;
            seg.live_bytes += need;
            if owner & EXTERNAL == 0 {
                seg.owners.push(owner, EXTERNAL);
            }
            for p in pages {
                seg.page_objs[p] += 1;
            }
            // An owned object placed in a victim being cleaned: the plan
            // lists it, as the victim's owner list would a handle's.
            if owner & EXTERNAL != 0
                && let Some((_, list)) = l.plan.iter_mut().find(|(v, _)| *v == id)
            {
                list.push(owner & !EXTERNAL);
            }
        });
    }

    /// Uncount the object at `loc` in its segment (not its owner entry,
    /// which cleaning finds dead later); returns whether the segment is
    /// empty now. The lane's totals are the caller's.
    fn count_out(&mut self, loc: Location) -> bool {
        let need = self.placed(loc.len);
        let pages = self.pages_of(usize::from(loc.obj) << self.unit_shift, loc.len);
        self.update(loc.zspage, |l| {
            let seg = l.seg_mut(loc.zspage);
            seg.live_objs -= 1;
            seg.live_bytes -= need;
            for p in pages {
                seg.page_objs[p] -= 1;
            }
            seg.live_objs == 0
        })
    }

    /// The place of an object at `off` of segment `id`: lane, segment,
    /// offset in units. Never 0, below 2^39 (so a page store's slot holds
    /// it in its 8-byte word).
    fn encode(&self, id: u32, off: usize) -> u64 {
        self.place_lane << 32 | u64::from(id) << OFFSET_BITS | (off >> self.unit_shift) as u64
    }

    /// The number among its pool's lanes of the lane a place names, if any.
    pub(crate) fn lane_of(place: u64) -> Option<usize> {
        ((place >> 32) as usize).checked_sub(1)
    }

    /// Where an owned object of `len` bytes at `place` is, if a live
    /// segment of this lane holds that much there.
    fn decode(&self, place: u64, len: usize) -> Option<Location> {
        let id = place_segment(place);
        let obj = (place & 0xFFFF) as u16;
        let seg = self.segs.get(id as usize)?.as_ref()?;
        let off = usize::from(obj) << self.unit_shift;
        (place >> 32 == self.place_lane && len > 0 && off + len <= seg.end).then_some(Location {
            zspage: id,
            obj,
            len,
        })
    }

    /// Where an owned object is, or an error naming the bad place (a
    /// store's bug, never a client's input).
    pub(crate) fn resolve_owned(&self, place: u64, len: usize) -> Result<Location> {
        self.decode(place, len).ok_or_else(|| {
            Error::InvariantViolated(format!(
                "lane {}: no object of {len} bytes at place {place:#x}",
                self.index
            ))
        })
    }

    /// Free an owned object; its owner no longer holds `place`.
    pub(crate) fn free_owned(&mut self, place: u64, len: usize, src: &PageSource) -> Result<()> {
        let loc = self.resolve_owned(place, len)?;
        self.owned -= 1;
        self.drop_object(loc, src);
        Ok(())
    }

    /// After a free from segment `id`: prune its owner list if the segment
    /// is still there and its list is past the bound (see
    /// [`Lane::prune_owners`]). Frees alone shrink a segment whose extents
    /// no new object comes to fill (a burst of frees), and its list would
    /// otherwise keep an entry for every object it ever held.
    fn prune_after_free(&mut self, id: u32) {
        if self.segs.get(id as usize).is_some_and(Option::is_some) {
            self.prune_owners(id);
        }
    }

    /// Where a handle's object is.
    pub(crate) fn resolve(&self, h: Handle) -> Result<Location> {
        self.handles.get(h)
    }

    /// The object's bytes.
    pub(crate) fn bytes(&self, loc: Location) -> &[u8] {
        let off = usize::from(loc.obj) << self.unit_shift;
        let seg = self.seg(loc.zspage);
        assert!(off + loc.len <= seg.end);
        // SAFETY: a live object lies below its segment's end, inside the
        // committed pages; the bytes are written only under the lane's
        // exclusive lock, and the caller holds it (shared at least) for as
        // long as the slice lives.
        unsafe { std::slice::from_raw_parts(seg.run.as_ptr().add(off), loc.len) }
    }

    /// Write into an object; `offset + data.len()` must fit its length.
    pub(crate) fn write(&mut self, h: Handle, offset: usize, data: &[u8]) -> Result<()> {
        let loc = self.resolve(h)?;
        loc.check_write(offset, data.len())?;
        let at = (usize::from(loc.obj) << self.unit_shift) + offset;
        // A write in place: a lock-free read of this object must not
        // return half of it.
        let began = self.moving();
        let run = self.seg(loc.zspage).run.as_ptr();
        // SAFETY: inside the live object (checked above), in a run whose
        // start is page-aligned and whose span is whole words, under the
        // lane's exclusive lock; lock-free readers, if any, read by word.
        unsafe { self.writes().store(run, at, data) }
        self.moved(began);
        Ok(())
    }

    /// Free the object; returns its length.
    pub(crate) fn free(&mut self, h: Handle, src: &PageSource) -> Result<usize> {
        let loc = self.handles.claim(h)?;
        self.release_object(h.slot(), loc, src);
        Ok(loc.len)
    }

    /// Free an object a deferred free marked dying; returns its length.
    pub(crate) fn free_dying(&mut self, h: Handle, src: &PageSource) -> Result<usize> {
        let loc = self.handles.get_dying(h)?;
        self.release_object(h.slot(), loc, src);
        Ok(loc.len)
    }

    fn release_object(&mut self, slot: u32, loc: Location, src: &PageSource) {
        self.handles.remove(slot);
        self.drop_object(loc, src);
        self.prune_after_free(loc.zspage);
    }

    /// Uncount an object that is gone; give back its segment if it
    /// empties, else the pages only it touched.
    fn drop_object(&mut self, loc: Location, src: &PageSource) {
        self.placed_bytes -= self.placed(loc.len);
        self.bytes_stored -= loc.len;
        if self.count_out(loc) {
            // The open one too: a lane with no object holds no page.
            self.release(loc.zspage, src);
        } else {
            let units = (self.placed(loc.len) >> self.unit_shift) as u32;
            self.seg_mut(loc.zspage)
                .extents
                .insert(u32::from(loc.obj), units);
            let pages = self.pages_of(usize::from(loc.obj) << self.unit_shift, loc.len);
            self.punch(loc.zspage, pages, src);
            self.refit_later(loc.zspage);
        }
    }

    /// Give every segment back (pool teardown).
    pub(crate) fn release_all(&mut self, src: &PageSource) {
        for id in 0..self.segs.len() {
            if let Some(seg) = self.segs[id].take() {
                self.resident_pages -= seg.resident;
                Self::recount_punched(&seg, src);
                src.free_run(seg.run, SEGMENT_PAGES, seg.top);
            }
        }
        self.open = [None; 2];
        self.fits.clear();
        self.unkeyed = None;
        self.plan.clear();
        self.scanning.clear();
    }

    pub(crate) fn objects(&self) -> usize {
        self.handles.live() + self.owned
    }

    pub(crate) fn bytes_stored(&self) -> usize {
        self.bytes_stored
    }

    pub(crate) fn resident_pages(&self) -> usize {
        self.resident_pages
    }

    pub(crate) fn waste(&self) -> LaneWaste {
        let tail = self
            .open
            .iter()
            .flatten()
            .map(|&id| {
                let s = self.seg(id);
                s.top * self.page_size - s.end
            })
            .sum();
        LaneWaste {
            rounding: self.placed_bytes - self.bytes_stored,
            dead: self.resident_pages * self.page_size - self.placed_bytes - tail,
            tail,
        }
    }

    /// Segments with free extents: `fits`' length once the unkeyed
    /// segment is keyed.
    fn keyed_segments(&self) -> usize {
        let late = self.unkeyed.map_or(0, |u| {
            let seg = self.seg(u);
            isize::from(seg.extents.largest() > 0) - isize::from(seg.largest > 0)
        });
        self.fits.len().saturating_add_signed(late)
    }

    /// Heap bytes of segment descriptors, owner lists and handles.
    pub(crate) fn metadata_bytes(&self) -> usize {
        self.segs.capacity() * std::mem::size_of::<Option<Box<Segment>>>()
            + self.free_ids.capacity() * std::mem::size_of::<u32>()
            + self
                .segs
                .iter()
                .flatten()
                .map(|s| {
                    std::mem::size_of::<Segment>() + s.owners.heap_bytes() + s.extents.heap_bytes()
                })
                .sum::<usize>()
            // A B-tree's nodes hold up to 11 keys of 8 bytes and, inside,
            // 12 child pointers: count 24 bytes a key, its worst fill.
            + self.keyed_segments() * 24
            + self.plan.capacity() * std::mem::size_of::<(u32, Vec<u32>)>()
            + self
                .plan
                .iter()
                .map(|(_, l)| l.capacity() * std::mem::size_of::<u32>())
                .sum::<usize>()
            + self.handles.metadata_bytes()
            + self.published.as_ref().map_or(0, |p| p.metadata_bytes())
    }
}

#[cfg(test)]
mod test_owners;
#[cfg(test)]
pub(crate) use test_owners::TestOwners;
#[cfg(test)]
mod tests;
