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
//! live entry still points into the segment.
//!
//! Invariants (checked by [`Lane::check`]):
//! - a segment's committed pages are a prefix, exactly the pages up to its
//!   `end` (the first object starts at 0, so an empty open segment commits
//!   nothing yet but the pages its first object needs);
//! - every live handle entry points at a live segment, inside its `end`,
//!   and appears in that segment's `owners`; a segment's `live_objs` and
//!   `live_bytes` count exactly those entries and their placed (rounded)
//!   lengths; no segment but the open one is empty;
//! - `resident_pages`, `placed_bytes` and `bytes_stored` are the sums over
//!   segments and live objects.

use crate::class::Migration;
use crate::compact::Counters;
use crate::error::{Error, Result};
use crate::handle::{Directory, Handle, HandleTable, Location};
use crate::os::{PageSource, Run};

mod extents;
mod owner_list;
use extents::Extents;
use owner_list::OwnerList;

/// Pages of one segment (the page source's longest run).
pub(crate) const SEGMENT_PAGES: usize = crate::size_class::MAX_CHAIN_SIZE;

/// An owner list entry with this bit names an object of an [`Owners`]
/// (a page store's slot), not a handle table slot.
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

    /// The place and length of `owner`'s object, if it holds one (for
    /// invariant checks, while no other thread uses the store).
    fn place(&self, owner: u32) -> Option<(u64, usize)>;
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
    /// Dead bytes of the sealed segments with at least a page of them (what
    /// cleaning could give back), kept as segments change so that deciding
    /// whether to clean costs nothing on a free.
    freeable_bytes: usize,
    /// Of those segments, the ones at most half live: cleaning one copies
    /// at most a byte per byte it gives back.
    sparse_victims: usize,
    /// Live objects stored for [`Owners`] (not in the handle table).
    owned: usize,
    /// `(longest extent in units, segment)` of every segment with free
    /// extents: an object takes the shortest extent that holds it.
    fits: std::collections::BTreeSet<(u32, u32)>,
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
    }

    /// Room for `need` bytes in a segment's free extent (best fit over the
    /// segments' longest extents, then within the segment), not in
    /// `exclude`; its pages are resident.
    fn take_extent(&mut self, need: usize, exclude: Option<u32>) -> Option<(u32, usize)> {
        let units = (need >> self.unit_shift) as u32;
        let id = self
            .fits
            .range((units, 0)..)
            .map(|&(_, id)| id)
            .find(|&id| Some(id) != exclude)?;
        let at = self.seg_mut(id).extents.take(units)?;
        self.refit(id);
        Some((id, (at as usize) << self.unit_shift))
    }

    /// What segment `id` adds to `freeable_bytes` and `sparse_victims`.
    fn contribution(&self, id: u32) -> (usize, usize) {
        if self.open.contains(&Some(id)) {
            return (0, 0);
        }
        let seg = self.seg(id);
        let held = seg.resident * self.page_size;
        let dead = held - seg.live_bytes;
        if dead < self.page_size {
            (0, 0)
        } else {
            (dead, usize::from(2 * seg.live_bytes <= held))
        }
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

    /// log2 of the unit: the offset in units must fit the entry's 16 bits.
    fn unit_shift(page_size: usize) -> u32 {
        ((SEGMENT_PAGES * page_size) >> OFFSET_BITS)
            .max(1)
            .trailing_zeros()
    }

    /// Bytes an object of `len` bytes takes in a lane of pages of
    /// `page_size` bytes.
    pub(crate) fn placed_len(len: usize, page_size: usize) -> usize {
        let unit = 1usize << Self::unit_shift(page_size);
        len.div_ceil(unit) * unit
    }

    fn segment_bytes(&self) -> usize {
        SEGMENT_PAGES * self.page_size
    }

    /// Bytes an object of `len` bytes takes: rounded up to the unit.
    pub(crate) fn placed(&self, len: usize) -> usize {
        let unit = 1usize << self.unit_shift;
        len.div_ceil(unit) * unit
    }

    fn pages_to(&self, end: usize) -> usize {
        end.div_ceil(self.page_size)
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
        off / self.page_size..(off + len).div_ceil(self.page_size)
    }

    /// Give back the pages of segment `id` in `pages` that no live object
    /// touches and that lie wholly below its end (nothing is appended
    /// there again): without copying, as a heap gives back whole free
    /// pages. Through the return queue with a delayed return: no system
    /// call on a free. The pages are cut out of the segment's free
    /// extents; the caller re-keys it in `fits` ([`Lane::refit`]) once its
    /// extents are final.
    fn punch(&mut self, id: u32, pages: std::ops::Range<usize>, src: &PageSource) {
        let seg = self.seg(id);
        let closed = seg.end / self.page_size;
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
        if seg.largest > 0 {
            self.fits.remove(&(seg.largest, id));
        }
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
        self.prune_owners(id, None);
        Ok(handle)
    }

    /// Append an object of `data.len()` bytes for `owner` (below
    /// [`MAX_OWNERS`]), who records the place returned and gives it back
    /// to read, free, and (through [`Owners`]) to let cleaning move the
    /// object; `owners` is asked when the segment's owner list is pruned.
    pub(crate) fn alloc_owned(
        &mut self,
        owner: u32,
        data: &[u8],
        owners: Option<&dyn Owners>,
        src: &PageSource,
    ) -> Result<u64> {
        // Invariant: kept by `PageStore::new`, which refuses more than
        // MAX_OWNERS slots over a log-placed pool.
        debug_assert!((owner as usize) < MAX_OWNERS);
        let need = self.placed(data.len());
        let (id, off) = self.make_room(need, None, NEW, src)?;
        self.place_at(id, off, data.len(), owner | EXTERNAL, Some(data));
        self.owned += 1;
        self.prune_owners(id, owners);
        Ok(self.encode(id, off))
    }

    /// Drop the owner list entries of segment `id` whose objects are dead
    /// or elsewhere, once the list has grown by a quarter of its live
    /// objects (at least 8) past them: a segment whose free extents take
    /// object after object keeps a list the size of its contents (under
    /// churn, where each item is a single owner, 4 bytes an object plus at
    /// most a quarter; amortised, 5 owners asked per object placed). An
    /// owner that is busy, or that `owners` cannot be asked about, keeps
    /// its entry.
    fn prune_owners(&mut self, id: u32, owners: Option<&dyn Owners>) {
        let seg = self.seg(id);
        if seg.owners.runs() < seg.live_objs + (seg.live_objs / 4).max(8) {
            return;
        }
        let mut seen = std::collections::HashSet::with_capacity(seg.live_objs);
        let mut list = std::mem::take(&mut self.seg_mut(id).owners);
        list.retain(EXTERNAL, |owner| {
            let here = if owner & EXTERNAL == 0 {
                self.handles
                    .live_entry(owner)
                    .is_some_and(|l| l.zspage == id)
            } else if let Some(owners) = owners {
                let mut here = false;
                let asked = owners.relocate(owner & !EXTERNAL, &mut |place, len| {
                    here = self.decode(place, len).is_some_and(|l| l.zspage == id);
                    None
                });
                here || !asked
            } else {
                true
            };
            here && seen.insert(owner)
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
            // run (make_room), and the lane's lock is held alone.
            unsafe {
                std::ptr::copy_nonoverlapping(d.as_ptr(), seg.run.as_ptr().add(off), d.len());
            }
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
            seg.owners.push(owner, EXTERNAL);
            for p in pages {
                seg.page_objs[p] += 1;
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
        let id = ((place >> OFFSET_BITS) & 0xFFFF) as u32;
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
        let seg = self.seg_mut(loc.zspage);
        // SAFETY: inside the live object (checked above), under the lane's
        // exclusive lock.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), seg.run.as_ptr().add(at), data.len());
        }
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
            self.refit(loc.zspage);
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
    }

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
            + self.fits.len() * 24
            + self.handles.metadata_bytes()
    }

    /// Check the invariants in the module comment.
    pub(crate) fn check(&self, owners: Option<&dyn Owners>) -> std::result::Result<(), String> {
        self.handles.check()?;
        let (mut resident, mut placed, mut stored, mut objects, mut owned) = (0, 0, 0, 0, 0);
        for (id, seg) in self.segs.iter().enumerate() {
            let Some(seg) = seg else {
                if !self.free_ids.contains(&(id as u32)) {
                    return Err(format!("segment id {id} is neither live nor free"));
                }
                continue;
            };
            let id = id as u32;
            let ctx = |m: String| format!("lane {} segment {id}: {m}", self.index);
            let want = self.pages_to(seg.end).max(1);
            if seg.top != want {
                return Err(ctx(format!(
                    "{} pages committed for end {}",
                    seg.top, seg.end
                )));
            }
            let closed = seg.end / self.page_size;
            if seg.punched != 0 && seg.punched.ilog2() as usize >= closed {
                return Err(ctx(format!(
                    "punched {:#x} past the closed pages {closed}",
                    seg.punched
                )));
            }
            if seg.resident + seg.punched.count_ones() as usize != seg.top {
                return Err(ctx(format!(
                    "{} resident and {} punched of {} pages",
                    seg.resident,
                    seg.punched.count_ones(),
                    seg.top
                )));
            }
            let mut page_objs = [0u16; SEGMENT_PAGES];
            let mut seen = std::collections::HashSet::new();
            let mut live = Vec::new();
            let (mut objs, mut bytes) = (0, 0);
            for slot in seg.owners.iter() {
                let entry = if slot & EXTERNAL == 0 {
                    self.handles.live_entry(slot)
                } else {
                    owners
                        .ok_or_else(|| ctx("an owned object without owners".into()))?
                        .place(slot & !EXTERNAL)
                        .and_then(|(place, len)| self.decode(place, len))
                };
                let Some(loc) = entry.filter(|l| l.zspage == id) else {
                    continue;
                };
                if !seen.insert(slot) {
                    continue;
                }
                owned += usize::from(slot & EXTERNAL != 0);
                let off = usize::from(loc.obj) << self.unit_shift;
                if off + self.placed(loc.len) > seg.end {
                    return Err(ctx(format!(
                        "object at {off} of {} bytes past end {}",
                        loc.len, seg.end
                    )));
                }
                objs += 1;
                bytes += self.placed(loc.len);
                stored += loc.len;
                live.push((off, off + self.placed(loc.len)));
                for p in self.pages_of(off, loc.len) {
                    page_objs[p] += 1;
                    if seg.punched & (1 << p) != 0 {
                        return Err(ctx(format!("page {p} given back under a live object")));
                    }
                }
            }
            if page_objs != seg.page_objs {
                return Err(ctx("per-page object counts differ from the owners'".into()));
            }
            if let Some(p) =
                (0..closed.min(seg.top)).find(|&p| page_objs[p] == 0 && seg.punched & (1 << p) == 0)
            {
                return Err(ctx(format!(
                    "page {p} holds no live object and was not given back"
                )));
            }
            if (objs, bytes) != (seg.live_objs, seg.live_bytes) {
                return Err(ctx(format!(
                    "counts {} objects / {} bytes, owners give {objs} / {bytes}",
                    seg.live_objs, seg.live_bytes
                )));
            }
            if objs == 0 {
                return Err(ctx("a segment is empty".into()));
            }
            seg.extents.check().map_err(ctx)?;
            live.sort_unstable();
            if let Some(w) = live.windows(2).find(|w| w[0].1 > w[1].0) {
                return Err(ctx(format!("objects at {:?} and {:?} overlap", w[0], w[1])));
            }
            for (at, n) in seg.extents.iter() {
                let (from, to) = (
                    (at as usize) << self.unit_shift,
                    ((at + n) as usize) << self.unit_shift,
                );
                if to > seg.end {
                    return Err(ctx(format!(
                        "free extent {from}..{to} past end {}",
                        seg.end
                    )));
                }
                let i = live.partition_point(|&(_, e)| e <= from);
                if live.get(i).is_some_and(|&(s, _)| s < to) {
                    return Err(ctx(format!("free extent {from}..{to} under a live object")));
                }
                if self
                    .pages_of(from, to - from)
                    .any(|p| seg.punched & (1 << p) != 0)
                {
                    return Err(ctx(format!(
                        "free extent {from}..{to} on a page given back"
                    )));
                }
            }
            let largest = seg.extents.largest();
            if seg.largest != largest || (largest > 0 && !self.fits.contains(&(largest, id))) {
                return Err(ctx(format!(
                    "longest extent {largest}, keyed as {}",
                    seg.largest
                )));
            }
            resident += seg.resident;
            placed += bytes;
            objects += objs;
        }
        let keyed = self.segs.iter().flatten().filter(|s| s.largest > 0).count();
        if keyed != self.fits.len() {
            return Err(format!(
                "lane {}: {} segments keyed by their extents, {keyed} have some",
                self.index,
                self.fits.len()
            ));
        }
        let (dead, sparse) = (0..self.segs.len() as u32)
            .filter(|&id| self.segs[id as usize].is_some())
            .map(|id| self.contribution(id))
            .fold((0, 0), |(a, b), (c, d)| (a + c, b + d));
        if (dead, sparse) != (self.freeable_bytes, self.sparse_victims) {
            return Err(format!(
                "lane {}: freeable {} bytes / {} sparse, segments give {dead} / {sparse}",
                self.index, self.freeable_bytes, self.sparse_victims
            ));
        }
        if self
            .free_ids
            .iter()
            .any(|&f| self.segs.get(f as usize).is_none_or(Option::is_some))
        {
            return Err(format!(
                "lane {}: a free id names a live or absent segment",
                self.index
            ));
        }
        if owned != self.owned {
            return Err(format!(
                "lane {}: counts {} owned objects, owners give {owned}",
                self.index, self.owned
            ));
        }
        if (resident, placed, stored, objects)
            != (
                self.resident_pages,
                self.placed_bytes,
                self.bytes_stored,
                self.objects(),
            )
        {
            return Err(format!(
                "lane {}: counts {} pages / {} placed / {} stored / {} objects, segments give \
                 {resident} / {placed} / {stored} / {objects}",
                self.index,
                self.resident_pages,
                self.placed_bytes,
                self.bytes_stored,
                self.objects()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PageReturn;

    const PAGE: usize = 4096;

    fn source(limit: Option<usize>) -> std::sync::Arc<PageSource> {
        PageSource::new(PAGE, limit, true, PageReturn::Immediate)
    }

    fn read(l: &Lane, h: Handle) -> Vec<u8> {
        l.bytes(l.resolve(h).unwrap()).to_vec()
    }

    #[test]
    fn objects_are_packed_to_the_unit() {
        let src = source(None);
        let mut l = Lane::new(300, 0, PAGE, None);
        assert_eq!(l.placed(1000), 1000);
        assert_eq!(l.placed(1001), 1002);
        let hs: Vec<Handle> = (0..4u8)
            .map(|i| l.alloc(1001, Some(&[i; 1001]), &src).unwrap())
            .collect();
        assert_eq!(hs[0].class(), 300);
        // 4 x 1002 bytes: one page.
        assert_eq!((l.resident_pages(), src.held_pages()), (1, 1));
        for (i, &h) in hs.iter().enumerate() {
            assert_eq!(read(&l, h), vec![i as u8; 1001]);
        }
        let w = l.waste();
        assert_eq!((w.rounding, w.dead, w.tail), (4, 0, PAGE - 4 * 1002));
        l.check(None).unwrap();
        for h in hs {
            assert_eq!(l.free(h, &src).unwrap(), 1001);
            l.check(None).unwrap();
        }
        assert_eq!(
            (l.resident_pages(), src.held_pages(), l.objects()),
            (0, 0, 0)
        );
    }

    #[test]
    fn a_sealed_segments_end_takes_the_next_small_object() {
        let src = source(None);
        let mut l = Lane::new(1, 0, PAGE, None);
        // 32 objects of 4000 bytes fill 128,000 of a segment's 131,072.
        let big: Vec<Handle> = (0..33)
            .map(|i| l.alloc(4000, Some(&[i as u8; 4000]), &src).unwrap())
            .collect();
        let first = l.resolve(big[0]).unwrap().zspage;
        assert_ne!(l.resolve(big[32]).unwrap().zspage, first, "sealed");
        assert_eq!(l.holes, vec![first]);
        let small = l.alloc(1000, Some(&[9; 1000]), &src).unwrap();
        let loc = l.resolve(small).unwrap();
        assert_eq!(
            (loc.zspage, usize::from(loc.obj) << l.unit_shift),
            (first, 128_000)
        );
        assert_eq!(read(&l, small), vec![9; 1000]);
        l.check(None).unwrap();
        assert_eq!(read(&l, big[31]), vec![31; 4000]);
    }

    #[test]
    fn cleaning_moves_the_live_objects_of_sparse_segments_and_gives_pages_back() {
        let src = source(None);
        let counters = Counters::default();
        let mut l = Lane::new(1, 0, PAGE, None);
        let hs: Vec<Handle> = (0..100)
            .map(|i| l.alloc(3000, Some(&[i as u8; 3000]), &src).unwrap())
            .collect();
        for h in hs.iter().step_by(2) {
            l.free(*h, &src).unwrap();
            l.check(None).unwrap();
        }
        let before = l.resident_pages();
        assert!(l.compaction_due(1));
        let m = l.clean(usize::MAX, |l| l.compaction_due(1), None, &src, &counters);
        l.check(None).unwrap();
        assert!(m.objects > 0 && m.released);
        assert!(
            l.resident_pages() < before,
            "{} -> {}",
            before,
            l.resident_pages()
        );
        assert!(!l.compaction_due(1));
        assert_eq!(counters.snapshot().objects_moved, m.objects as u64);
        for (i, h) in hs.iter().enumerate().skip(1).step_by(2) {
            assert_eq!(read(&l, *h), vec![i as u8; 3000]);
        }
        // Live bytes 150,000 (37 pages) of 74 held: what is held now is
        // them, the dead half of the open segment (not cleaned: objects
        // are still appended to it, 14 of 3,000 bytes) and the two open
        // segments' unused ends.
        assert!(
            l.resident_pages() * PAGE <= 150_000 + 14 * 3000 + 2 * PAGE,
            "{} pages",
            l.resident_pages()
        );
        l.release_all(&src);
        assert_eq!(src.held_pages(), 0);
    }

    #[test]
    fn a_freed_objects_room_takes_the_next_objects_that_fit() {
        let src = source(None);
        let mut l = Lane::new(1, 0, PAGE, None);
        let hs: Vec<Handle> = (0..100)
            .map(|i| l.alloc(1000, Some(&[i as u8; 1000]), &src).unwrap())
            .collect();
        let end = |l: &Lane| l.seg(0).end;
        let (pages, end0) = (l.resident_pages(), end(&l));
        // Objects 20 and 21 (bytes 20,000..22,000) share their pages with
        // live neighbours: one free extent of 2,000 bytes, no page back.
        l.free(hs[20], &src).unwrap();
        l.free(hs[21], &src).unwrap();
        l.check(None).unwrap();
        assert_eq!(
            l.seg(0).extents.iter().collect::<Vec<_>>(),
            vec![(10_000, 1000)]
        );
        // The best fit first: a 1,500-byte object at its start, then 500
        // bytes after it; nothing appended, no page committed.
        let a = l.alloc(1500, Some(&[0xA; 1500]), &src).unwrap();
        let b = l.alloc(500, Some(&[0xB; 500]), &src).unwrap();
        let at = |l: &Lane, h: Handle| usize::from(l.resolve(h).unwrap().obj) << l.unit_shift;
        assert_eq!((at(&l, a), at(&l, b)), (20_000, 21_500));
        assert_eq!((l.resident_pages(), end(&l)), (pages, end0));
        l.check(None).unwrap();
        // No room left below the end: the next object is appended.
        let c = l.alloc(100, Some(&[0xC; 100]), &src).unwrap();
        assert_eq!(at(&l, c), end0);
        assert_eq!(read(&l, a), vec![0xA; 1500]);
        assert_eq!(read(&l, b), vec![0xB; 500]);
        for (i, &h) in hs.iter().enumerate().filter(|&(i, _)| i != 20 && i != 21) {
            assert_eq!(read(&l, h), vec![i as u8; 1000]);
        }
        l.check(None).unwrap();
    }

    #[test]
    fn a_page_given_back_leaves_the_free_extents() {
        let src = source(None);
        let mut l = Lane::new(1, 0, PAGE, None);
        let hs: Vec<Handle> = (0..100)
            .map(|i| l.alloc(1000, Some(&[i as u8; 1000]), &src).unwrap())
            .collect();
        // Objects 3..=8 (bytes 3,000..9,000): page 1 (4,096..8,192) goes
        // back; the extents keep 3,000..4,096 and 8,192..9,000 only.
        for &h in &hs[3..9] {
            l.free(h, &src).unwrap();
            l.check(None).unwrap();
        }
        assert_eq!(l.seg(0).punched, 1 << 1);
        assert_eq!(
            l.seg(0).extents.iter().collect::<Vec<_>>(),
            vec![(1500, 548), (4096, 404)]
        );
        // A 1,000-byte object fits the first (1,096 bytes), never the page
        // given back; the next one fits nowhere and is appended.
        let at = |l: &Lane, h: Handle| usize::from(l.resolve(h).unwrap().obj) << l.unit_shift;
        let n = l.alloc(1000, Some(&[1; 1000]), &src).unwrap();
        assert_eq!(at(&l, n), 3000);
        let m = l.alloc(1000, Some(&[2; 1000]), &src).unwrap();
        assert_eq!(at(&l, m), 100_000);
        assert_eq!(l.seg(0).punched, 1 << 1);
        l.check(None).unwrap();
    }

    #[test]
    fn whole_dead_pages_go_back_without_copying() {
        for policy in [
            PageReturn::Immediate,
            PageReturn::Delayed {
                delay: std::time::Duration::from_secs(3600),
                max_pages: 1 << 20,
            },
        ] {
            let src = PageSource::new(PAGE, None, true, policy);
            let counters = Counters::default();
            let mut l = Lane::new(1, 0, PAGE, None);
            let hs: Vec<Handle> = (0..100)
                .map(|i| l.alloc(1000, Some(&[i as u8; 1000]), &src).unwrap())
                .collect();
            assert_eq!(l.resident_pages(), 25);
            // Objects 10..60 lie at bytes 10,000..60,000: pages 3..=13
            // (12,288..57,344) hold nothing else.
            for &h in &hs[10..60] {
                l.free(h, &src).unwrap();
                l.check(None).unwrap();
            }
            assert_eq!(l.resident_pages(), 25 - 11);
            assert_eq!(src.held_pages(), 14);
            assert_eq!(counters.snapshot().objects_moved, 0);
            for (i, &h) in hs.iter().enumerate().filter(|(i, _)| !(10..60).contains(i)) {
                assert_eq!(read(&l, h), vec![i as u8; 1000]);
            }
            // New objects go after the end, never into a given-back page.
            let n = l.alloc(3000, Some(&[7; 3000]), &src).unwrap();
            assert_eq!(read(&l, n), vec![7; 3000]);
            l.check(None).unwrap();
            // The segment empties: its held pages are a prefix again and
            // all of them go.
            for &h in hs[..10].iter().chain(&hs[60..]).chain([&n]) {
                l.free(h, &src).unwrap();
            }
            l.check(None).unwrap();
            assert_eq!((l.resident_pages(), src.held_pages()), (0, 0));
            src.purge_cache();
            assert_eq!(src.cached_pages(), 0);
        }
    }

    #[test]
    fn at_the_memory_limit_nothing_changes() {
        let src = source(Some(2 * PAGE));
        let mut l = Lane::new(1, 0, PAGE, None);
        let a = l.alloc(4000, Some(&[1; 4000]), &src).unwrap();
        let b = l.alloc(4000, Some(&[2; 4000]), &src).unwrap();
        let err = l.alloc(4000, Some(&[3; 4000]), &src).unwrap_err();
        assert!(matches!(err, Error::MemoryLimit { .. }), "{err:?}");
        l.check(None).unwrap();
        assert_eq!((l.objects(), src.held_pages()), (2, 2));
        assert_eq!((read(&l, a)[0], read(&l, b)[0]), (1, 2));
        l.free(a, &src).unwrap();
        // The freed bytes are dead space: cleaning could move `b` down,
        // but its new place needs a page the limit refuses.
        l.check(None).unwrap();
        l.release_all(&src);
    }

    #[test]
    fn a_freed_handle_is_refused_and_its_bytes_never_read() {
        let src = source(None);
        let mut l = Lane::new(1, 0, PAGE, None);
        let h = l.alloc(10, Some(&[7; 10]), &src).unwrap();
        l.free(h, &src).unwrap();
        assert!(l.resolve(h).is_err());
        assert!(l.free(h, &src).is_err());
        assert!(l.write(h, 0, &[1]).is_err());
        let g = l.alloc(10, Some(&[8; 10]), &src).unwrap();
        assert!(
            l.resolve(h).is_err(),
            "the slot's new object is not the old handle's"
        );
        assert!(matches!(
            l.write(g, 5, &[0; 6]),
            Err(Error::WriteTooLong { .. })
        ));
        l.write(g, 4, &[1; 6]).unwrap();
        assert_eq!(read(&l, g), [8, 8, 8, 8, 1, 1, 1, 1, 1, 1]);
        l.release_all(&src);
    }
}
