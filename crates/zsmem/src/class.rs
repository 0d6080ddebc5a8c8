//! One physical size class: its zspages, sorted into fullness groups, and
//! its handle table. Everything here runs under the class's lock.
//!
//! Fullness groups are the kernel's: group 0 is empty, groups 1..=10 hold
//! zspages whose share of used objects is in 0-9%, 10-19%, ... 90-99%
//! (named "10%" ... "99%"), group 11 is full. Allocation takes the first
//! zspage of the fullest group that is not full, so partly used zspages fill
//! up before new ones are made and emptying ones drain. A zspage whose last
//! object is freed goes back to the OS at once: group 0 is never populated
//! between operations.
//!
//! In a class that trims (`trim`), a zspage commits its pages lazily, as
//! objects reach into them, and compaction gives back the pages above a
//! zspage's highest object; `resident_pages` and `resident_slots` count the
//! committed pages and the object slots lying wholly inside them. Other
//! classes commit every page of a zspage when it is made.
//!
//! **Parked slots.** A free may *park* its object's slot instead of freeing
//! it (at most `max_parked` per class, see `PoolConfig::parked_slots`, and
//! only as many as allocations have lately taken back, `park_budget`):
//! the handle is dead at once (its entry's generation moves on, as for any
//! free), but the slot stays allocated in its zspage and keeps its place in
//! the handle entry, and the class's next allocation takes it back as it
//! is (last parked, first taken). A free followed by an allocation then
//! touches neither the zspage's free bitmap, its owner entry, its use
//! count, its fullness group, nor the handle table's free list: about 30%
//! of the instructions of an alloc+free pair in a profile (docs/DESIGN.md,
//! "Parked slots"). A slot is parked only in a zspage that keeps a live
//! object: the free of a zspage's last live object frees its parked slots
//! for good too, so the zspage goes back to the OS as before, and parked
//! slots never hold a page that live objects do not. Compaction frees
//! every parked slot of the class for good before it moves anything
//! ([`Class::unpark_all`]). Parked slots that no allocation takes cost a
//! little more than plain frees (parked, then freed), and the free of a
//! zspage's last live object pays for all of its: so a class parks at most
//! `park_budget` slots at once, one more after each allocation that takes
//! one back (up to `max_parked`) and half as many after parked slots had
//! to be freed unused. A stream of frees with no allocations between them
//! (a process exiting, a file deleted) parks one slot at a time; a free and
//! store cycle parks as deep as its bursts. A parked slot counts as a free
//! slot in every figure (objects, stored bytes, free and trimmable slots)
//! and as used in its zspage's use count and fullness group.
//!
//! **Magazines.** In a pool with lock-free reads (the default; see
//! `magazine.rs`) a class parks nothing on its own list: frees park slots
//! in the freeing thread's magazine without the class lock, and those
//! slots count here as held, exactly as live objects do (zspage use
//! count, fullness group, handle table, the spacing's counts): a
//! magazine's allocation takes one back without changing anything here.
//! The class takes a magazine's slot back by compare-and-swap on its entry
//! when it needs it: compaction, before it moves a zspage's objects
//! ([`Class::migrate`] takes the source's parked slots back and moves a
//! live object only if its entry is still that object's after the copy);
//! the free of a zspage's last live object (a zspage with few slots held
//! that a magazine's free marked, `Published::note_parked`, is scanned
//! for live entries, [`SCAN_FOR_LIVE`]); `Pool::compact`,
//! `Pool::flush`, `Pool::trim` ([`Class::reclaim_all`]); an exited
//! thread's slots, and the oldest slots of a magazine a stream of frees
//! filled, given back by its own thread in the lock hold of a locked free
//! (`Pool::free_locked`; both [`Class::reclaim`]). A magazine's free parks a slot
//! only while its zspage holds more slots than the magazine will, so one
//! thread's magazine never holds all of a zspage's slots (its use count
//! is published for that: `Published::holds_more_than`). With magazines,
//! `bytes_stored` is this class's own share of the figure: a magazine's
//! free and allocation change the length stored without the class, and
//! count the change in the magazine (`Pool::stats` adds them up).
//!
//! Invariants (checked by [`Class::check`]):
//! - every live zspage is on exactly the list of the group its use count
//!   gives, and `counts`/`nonempty` agree with the lists;
//! - no live zspage is empty;
//! - each allocated object's owner slot is a live or parked handle entry
//!   pointing back at that zspage and object; every live handle entry is
//!   such an owner, and the parked ones are exactly the `parked` list, at
//!   most `max_parked`, each in a zspage that holds a live object and
//!   counts them (`Node::parked`);
//! - `bytes_stored` is the sum of the live objects' lengths (with
//!   magazines, with the magazines' counts added; every parked entry is
//!   listed in a magazine or the pool's orphan list, and none is reviving
//!   at rest);
//! - `resident_pages` and `resident_slots` are the sums over live zspages.

use std::mem::MaybeUninit;

use crate::error::{Error, HandleFault, Result};
use crate::handle::{Directory, Handle, HandleTable, Held, Location};
use crate::optimistic::{Geometry, Published};
use crate::os::PageSource;
use crate::size_class::ClassInfo;
use crate::words::Writes;
use crate::zspage::Zspage;

/// Number of fullness groups.
pub(crate) const NR_FULLNESS_GROUPS: usize = 12;
/// Group of full zspages.
pub(crate) const GROUP_FULL: usize = NR_FULLNESS_GROUPS - 1;
const NIL: u32 = u32::MAX;

/// The fullness group of a zspage with `inuse` of `objs` objects used.
pub(crate) fn fullness_group(inuse: usize, objs: usize) -> usize {
    if inuse == 0 {
        0
    } else if inuse == objs {
        GROUP_FULL
    } else {
        // The kernel's `100 * inuse / objs / 10 + 1` in one (32-bit)
        // division: floor(floor(x) / 10) == floor(x / 10). The `+ 1` puts
        // 1 of 127 used, 0% by integer division, in "10%".
        (10 * inuse as u32 / objs as u32) as usize + 1
    }
}

/// The fullest of the groups whose bits are set in `groups`, if any.
fn fullest(groups: u16) -> Option<usize> {
    (groups != 0).then(|| 15 - groups.leading_zeros() as usize)
}

/// What one migration did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Migration {
    pub(crate) objects: usize,
    pub(crate) bytes: usize,
    pub(crate) pages_freed: usize,
    /// Pages committed in destination zspages (trimming classes).
    pub(crate) pages_committed: usize,
    /// The memory limit refused a page the destination needed.
    pub(crate) blocked: bool,
    /// The source emptied and was released (its id now names another
    /// zspage).
    pub(crate) released: bool,
}

impl Migration {
    /// Add `m`'s counts to these (a later step of the same cleaning).
    pub(crate) fn add(&mut self, m: Migration) {
        self.objects += m.objects;
        self.bytes += m.bytes;
        self.pages_freed += m.pages_freed;
        self.pages_committed += m.pages_committed;
        self.blocked |= m.blocked;
        self.released |= m.released;
    }
}

/// A zspage descriptor with its list links.
#[derive(Debug)]
struct Node {
    zspage: Zspage,
    group: u8,
    /// Parked slots in the zspage (counted in its use count).
    parked: u16,
    prev: u32,
    next: u32,
}

/// The state of one physical class.
#[derive(Debug)]
pub(crate) struct Class {
    pub(crate) info: ClassInfo,
    page_size: usize,
    /// Commit pages lazily and give back the unused top of zspages.
    trim: bool,
    resident_pages: usize,
    resident_slots: usize,
    /// Zspage ids are dense: a released zspage's id is taken by the last
    /// zspage (whose handle entries are updated), so the vector shrinks with
    /// the class.
    nodes: Vec<Node>,
    heads: [u32; NR_FULLNESS_GROUPS],
    counts: [usize; NR_FULLNESS_GROUPS],
    /// Bit g set when group g has a zspage: finds the fullest group fast.
    nonempty: u16,
    handles: HandleTable,
    /// With magazines, the class's own share of the figure (wrapping: the
    /// magazines' counts make up the rest, and the sum is exact; see
    /// `magazine.rs`).
    bytes_stored: usize,
    /// Parked slots, last parked last.
    parked: Vec<u32>,
    /// Most slots parked at once (0: none).
    max_parked: u8,
    /// Slots that may be parked now, 1..=`max_parked`: one more after an
    /// allocation takes a parked slot, half after parked slots are freed
    /// unused.
    park_budget: u8,
    /// What lock-free reads need (`optimistic.rs`), kept current here:
    /// the zspages' addresses, and the move count around every relocation
    /// and write in place.
    published: Option<std::sync::Arc<Published>>,
    /// How object bytes are written: by word in a pool with lock-free
    /// reads, whether or not this class publishes (a run it frees may
    /// next be a publishing class's).
    writes: Writes,
    /// Frees park slots in threads' magazines (`magazine.rs`), not on
    /// `parked`: such a slot is held in its zspage and its handle table
    /// as a live object is, and this class takes it back by
    /// compare-and-swap on its entry when it needs it.
    magazines: bool,
    /// With magazines: a zspage with at most this many slots held besides
    /// the object a locked free frees is scanned for a live object
    /// ([`Class::reclaim_if_no_live`]): [`SCAN_FOR_LIVE`], or a magazine's
    /// capacity if larger (one thread's magazine may then hold more of a
    /// zspage's slots than the scan would look at).
    scan_for_live: u8,
    /// Lengths of the objects whose slots this class took back from
    /// magazines since the pool last asked (`take_reclaimed`): they were
    /// counted as live here and in the spacing, and the pool uncounts them.
    /// Boxed and made at the first: a class without magazines pays a
    /// pointer, where a `Vec` is three words in every class's state.
    #[allow(clippy::box_collection)]
    reclaimed: Option<Box<Vec<usize>>>,
}

/// What the pool knows of a class's slots in magazines, for
/// [`Class::check`].
pub(crate) struct InMagazines<'a> {
    /// The (slot, generation) pairs magazines list.
    pub(crate) listed: &'a std::collections::HashSet<(u32, u32)>,
    /// What magazines add to the class's own count of objects...
    pub(crate) objects: i64,
    /// ...and of bytes stored.
    pub(crate) bytes: i64,
}

/// Zspages with at most this many slots in use besides the object a
/// locked free frees are scanned for a live object (or as many as a
/// magazine holds, if more: `Class::scan_for_live`): if none is left but
/// magazines' parked slots, those are taken back and the zspage goes back
/// to the OS, as it would have without magazines. (A zspage with more
/// parked slots than this and no live object, several threads' magazines
/// holding them, waits for compaction or an allocation to take them.)
const SCAN_FOR_LIVE: usize = 16;

impl Class {
    /// An empty class; `directory` is given for pools with deferred free
    /// or lock-free reads, and with `publish` the class publishes what
    /// lock-free reads need ([`Class::published`]); up to `max_parked`
    /// freed slots are parked for the next allocations.
    pub(crate) fn new(
        info: ClassInfo,
        page_size: usize,
        trim: bool,
        directory: Option<std::sync::Arc<Directory>>,
        publish: bool,
        writes: Writes,
        max_parked: usize,
    ) -> Self {
        // Object indices run to objs_per_zspage - 1.
        let obj_bits = (usize::BITS - (info.objs_per_zspage - 1).leading_zeros()).max(1);
        let published = directory
            .clone()
            .filter(|_| publish)
            .and_then(|d| {
                let geometry = Geometry::Slots {
                    size: info.size,
                    objs: info.objs_per_zspage,
                };
                Published::new(d, geometry, obj_bits)
            })
            .map(std::sync::Arc::new);
        Class {
            info,
            page_size,
            trim,
            resident_pages: 0,
            resident_slots: 0,
            nodes: Vec::new(),
            heads: [NIL; NR_FULLNESS_GROUPS],
            counts: [0; NR_FULLNESS_GROUPS],
            nonempty: 0,
            handles: HandleTable::new(directory, obj_bits),
            bytes_stored: 0,
            parked: Vec::new(),
            // At most `MAX_PARKED_SLOTS` (64), checked by `Pool::new`.
            max_parked: max_parked.min(usize::from(u8::MAX)) as u8,
            park_budget: max_parked.min(1) as u8,
            published,
            writes,
            magazines: false,
            scan_for_live: SCAN_FOR_LIVE as u8,
            reclaimed: None,
        }
    }

    /// Frees will park slots in threads' magazines instead of the class's
    /// own list (a class with a directory and lock-free reads).
    pub(crate) fn use_magazines(&mut self) {
        debug_assert!(self.published.is_some());
        self.handles.use_magazines();
        self.magazines = true;
        self.scan_for_live = self.max_parked.max(SCAN_FOR_LIVE as u8);
        self.max_parked = 0;
        self.park_budget = 0;
    }

    /// Lengths of the objects whose slots were taken back from magazines
    /// since the last call (see `reclaimed`).
    pub(crate) fn take_reclaimed(&mut self) -> Option<std::vec::Drain<'_, usize>> {
        self.reclaimed
            .as_mut()
            .filter(|r| !r.is_empty())
            .map(|r| r.drain(..))
    }

    /// A slot of an object of `len` bytes was taken back from a magazine.
    fn count_reclaimed(&mut self, len: usize) {
        self.reclaimed.get_or_insert_default().push(len);
        self.bytes_stored = self.bytes_stored.wrapping_sub(len);
    }

    /// Take back magazine-parked `slot` if it is still parked (at
    /// `generation`, if given) and free it for good; true if it was.
    pub(crate) fn reclaim(&mut self, slot: u32, generation: Option<u32>, src: &PageSource) -> bool {
        // Not `held_state`: an exited thread's slot may have been taken
        // back (and be free) since it was listed.
        if !self.handles.parked_at(slot, generation) {
            return false;
        }
        let Some(loc) = self.handles.reclaim(slot) else {
            return false;
        };
        self.count_reclaimed(loc.len);
        self.put_slot(loc, slot, src);
        true
    }

    /// Take back every slot parked in a magazine (`Pool::compact`, before
    /// it moves objects): a scan of every zspage's owners.
    pub(crate) fn reclaim_all(&mut self, src: &PageSource) {
        if !self.magazines {
            return;
        }
        let parked: Vec<u32> = self
            .nodes
            .iter()
            .flat_map(|n| n.zspage.allocated().map(|(_, slot)| slot))
            .filter(|&slot| matches!(self.handles.held_state(slot), Held::Parked(..)))
            .collect();
        for slot in parked {
            self.reclaim(slot, None, src);
        }
    }

    /// Before a locked free of `slot`'s object in zspage `id`: if the
    /// zspage holds no other live object, only slots parked in magazines
    /// (it is scanned only while it holds few), take them back, so that
    /// the free empties it. A slot being revived is a live object.
    fn reclaim_if_no_live(&mut self, id: u32, slot: u32, src: &PageSource) {
        if self.zspage(id).inuse() > 1 + usize::from(self.scan_for_live) {
            return;
        }
        // Only a zspage a magazine's free marked can hold parked slots (a
        // mark lost to a race keeps them there until they are taken back
        // otherwise): a stream of locked frees scans nothing.
        let Some(p) = &self.published else { return };
        if !p.maybe_parked(id) {
            return;
        }
        let mut parked = Vec::new();
        for (_, other) in self.zspage(id).allocated() {
            if other == slot {
                continue;
            }
            match self.handles.held_state(other) {
                Held::Parked(..) => parked.push(other),
                Held::Live(..) | Held::Reviving => return,
            }
        }
        // No live object but `slot`'s: every parked slot is taken back
        // below, so the mark goes.
        let inuse = self.zspage(id).inuse();
        if let Some(p) = &self.published {
            p.set_held_marked(id, inuse, false);
        }
        for other in parked {
            // The zspage keeps `slot`'s object, so none of these empties it
            // (its id stays).
            self.reclaim(other, None, src);
        }
    }

    /// Start its handles' generations at `first` (the pool tag's epoch;
    /// before the first allocation).
    pub(crate) fn start_generations_at(&mut self, first: u32) {
        self.handles.start_generations_at(first);
    }

    /// What lock-free reads of this class need, if it publishes it.
    pub(crate) fn published(&self) -> Option<&std::sync::Arc<Published>> {
        self.published.as_ref()
    }

    /// Begin a stretch of relocations or writes in place (lock-free
    /// readers then check their copies against it); true if this call
    /// began it, for [`Class::moved`].
    fn moving(&self) -> bool {
        self.published.as_ref().is_some_and(|p| p.begin())
    }

    /// End the stretch [`Class::moving`] began, if it did.
    fn moved(&self, began: bool) {
        if began && let Some(p) = &self.published {
            p.end();
        }
    }

    fn zspage(&self, id: u32) -> &Zspage {
        &self.nodes[id as usize].zspage
    }

    fn zspage_mut(&mut self, id: u32) -> &mut Zspage {
        &mut self.nodes[id as usize].zspage
    }

    fn link(&mut self, id: u32, group: usize) {
        let head = self.heads[group];
        let n = &mut self.nodes[id as usize];
        n.group = group as u8;
        n.prev = NIL;
        n.next = head;
        if head != NIL {
            self.nodes[head as usize].prev = id;
        }
        self.heads[group] = id;
        self.counts[group] += 1;
        self.nonempty |= 1 << group;
    }

    fn unlink(&mut self, id: u32) {
        let (group, prev, next) = {
            let n = &self.nodes[id as usize];
            (usize::from(n.group), n.prev, n.next)
        };
        if prev == NIL {
            self.heads[group] = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        }
        self.counts[group] -= 1;
        if self.counts[group] == 0 {
            self.nonempty &= !(1 << group);
        }
    }

    /// Move a zspage to the group its use count now gives (and with
    /// magazines publish the count: `Published::holds_more_than`).
    fn regroup(&mut self, id: u32) {
        let z = self.zspage(id);
        if self.magazines
            && let Some(p) = &self.published
        {
            p.set_held(id, z.inuse());
        }
        let group = fullness_group(z.inuse(), z.objs());
        if usize::from(self.nodes[id as usize].group) != group {
            self.unlink(id);
            self.link(id, group);
        }
    }

    /// Bit g set when group g holds a zspage with room (not full).
    fn groups_with_room(&self) -> u16 {
        self.nonempty & ((1 << GROUP_FULL) - 1)
    }

    /// The first zspage of the fullest group that is not full.
    pub(crate) fn fullest_with_room(&self) -> Option<u32> {
        fullest(self.groups_with_room()).map(|g| self.heads[g])
    }

    /// The first zspage of the emptiest non-empty group, skipping `not`.
    pub(crate) fn emptiest_except(&self, not: u32) -> Option<u32> {
        let mut groups = self.groups_with_room() & !1;
        while groups != 0 {
            let g = groups.trailing_zeros() as usize;
            let head = self.heads[g];
            if head != not {
                return Some(head);
            }
            let next = self.nodes[head as usize].next;
            if next != NIL {
                return Some(next);
            }
            groups &= groups - 1;
        }
        None
    }

    /// Free object slots over all zspages of the class.
    pub(crate) fn free_slots(&self) -> usize {
        self.nodes.len() * self.info.objs_per_zspage - self.handles.live()
    }

    /// Page size of the pool.
    pub(crate) fn page_size(&self) -> usize {
        self.page_size
    }

    /// Whether the class trims pages.
    pub(crate) fn trims(&self) -> bool {
        self.trim
    }

    /// Bytes of free slots inside committed pages: what compaction of a
    /// trimming class can give back (in whole pages).
    pub(crate) fn trimmable_bytes(&self) -> usize {
        (self.resident_slots - self.handles.live()) * self.info.size
    }

    /// Whether compaction could give back at least `pages` pages: whole
    /// zspages' worth (the kernel's `freeable`), or in a trimming class
    /// pages' worth of free slots.
    pub(crate) fn compaction_due(&self, pages: usize) -> bool {
        if self.trim {
            self.trimmable_bytes() >= pages * self.page_size
        } else {
            let zspages = pages.div_ceil(self.info.pages_per_zspage);
            self.free_slots() >= zspages * self.info.objs_per_zspage
        }
    }

    /// Committed pages of the class's zspages.
    pub(crate) fn resident_pages(&self) -> usize {
        self.resident_pages
    }

    /// Object slots wholly inside committed pages.
    pub(crate) fn resident_slots(&self) -> usize {
        self.resident_slots
    }

    /// Slots wholly inside the first `pages` pages of a zspage.
    fn slots_within(&self, pages: usize) -> usize {
        (pages * self.page_size / self.info.size).min(self.info.objs_per_zspage)
    }

    /// Pages an object at index `obj` needs committed: up to its end.
    fn pages_for(&self, obj: u16) -> usize {
        // The page size is a power of two: a shift, not a division, on
        // every allocation.
        ((usize::from(obj) + 1) * self.info.size + self.page_size - 1)
            >> self.page_size.trailing_zeros()
    }

    /// Count a zspage's change from `old` to `new` committed pages.
    fn account_resident(&mut self, old: usize, new: usize) {
        self.resident_pages = self.resident_pages + new - old;
        self.resident_slots = self.resident_slots + self.slots_within(new) - self.slots_within(old);
    }

    /// Commit zspage `id`'s pages up to object `obj`, or refuse at the
    /// memory limit with nothing changed; returns the pages committed.
    fn ensure_resident(&mut self, id: u32, obj: u16, src: &PageSource) -> Result<usize> {
        let (need, have) = (self.pages_for(obj), self.zspage(id).resident());
        if need <= have {
            return Ok(0);
        }
        src.commit(self.zspage(id).run(), have, need - have)?;
        self.zspage_mut(id).set_resident(need);
        self.account_resident(have, need);
        Ok(need - have)
    }

    /// Give back the committed pages of zspage `id` above its highest
    /// object (a trimming class; the zspage is not empty); returns them.
    fn trim_zspage(&mut self, id: u32, src: &PageSource) -> usize {
        let z = self.zspage(id);
        let have = z.resident();
        let need = match z.prev_allocated(z.objs()) {
            Some((top, _)) => self.pages_for(top),
            None => return 0,
        };
        if need >= have {
            return 0;
        }
        src.decommit(z.run(), crate::os::span(need, have - need));
        let z = self.zspage_mut(id);
        z.set_resident(need);
        z.shrink_owners();
        self.account_resident(have, need);
        have - need
    }

    /// Move objects from zspage `from` into zspage `to`, at most `max`,
    /// highest first, until `from` is empty or `to` is full (or, trimming,
    /// `to` cannot commit a page under the memory limit). With `from == to`
    /// (a trimming class's last partly used zspage) objects move down into
    /// the zspage's own lowest free slots while those lie below them.
    /// Handles are updated in place, so they stay valid; an emptied `from`
    /// goes back to the OS, and in a trimming class the pages above `from`'s
    /// highest remaining object do.
    pub(crate) fn migrate(
        &mut self,
        from: u32,
        to: u32,
        max: usize,
        src: &PageSource,
    ) -> Migration {
        debug_assert!(from != to || self.trim);
        let began = self.moving();
        let m = self.migrate_objects(from, to, max, src);
        self.moved(began);
        m
    }

    /// [`Class::migrate`]'s work, inside its stretch of moves.
    fn migrate_objects(&mut self, from: u32, to: u32, max: usize, src: &PageSource) -> Migration {
        let size = self.info.size;
        let mut m = Migration::default();
        // Objects at or above `cursor` have been moved already.
        let mut cursor = usize::MAX;
        'objects: while m.objects < max {
            let Some((obj, slot)) = self.zspage(from).prev_allocated(cursor) else {
                break;
            };
            let Some(new_obj) = self.zspage(to).next_free() else {
                break;
            };
            if from == to && new_obj > obj {
                break;
            }
            match self.ensure_resident(to, new_obj, src) {
                Ok(pages) => m.pages_committed += pages,
                Err(_) => {
                    m.blocked = true;
                    break;
                }
            }
            cursor = usize::from(obj);
            let len = if self.magazines {
                // A slot parked in a magazine is taken back, not moved; a
                // reviving one is waited for (its thread is writing it).
                loop {
                    match self.handles.settled_state(slot) {
                        Held::Live(loc, word) => break (loc.len, Some(word)),
                        Held::Parked(..) if self.reclaim_in_migration(from, slot) => {
                            continue 'objects;
                        }
                        // Revived meanwhile: look again.
                        Held::Parked(..) | Held::Reviving => {}
                    }
                }
            } else {
                let len = self
                    .handles
                    .live_entry(slot)
                    .expect("an owned object has a live handle")
                    .len;
                (len, None)
            };
            let (len, live) = len;
            if let Some(live) = live {
                // With magazines the object may be freed (and its slot
                // revived) while it is copied: copy by words, then point
                // the entry at the copy only if it is still that object.
                if from == to {
                    let z = self.zspage_mut(to);
                    z.take(new_obj, slot);
                    z.move_within(obj, new_obj, size, len, Writes::Words);
                } else {
                    let [a, b] = self
                        .nodes
                        .get_disjoint_mut([from as usize, to as usize])
                        .expect("two distinct live zspages");
                    b.zspage.take(new_obj, slot);
                    b.zspage.copy_from(new_obj, &a.zspage, obj, size, len);
                }
                if !self.handles.relocate_live(slot, live, to, new_obj) {
                    // Look at the slot again.
                    self.zspage_mut(to).put(new_obj);
                    cursor = usize::from(obj) + 1;
                    continue;
                }
                self.zspage_mut(from).put(obj);
            } else if from == to {
                let writes = self.writes;
                let z = self.zspage_mut(to);
                z.take(new_obj, slot);
                z.move_within(obj, new_obj, size, len, writes);
                z.put(obj);
                self.handles.relocate(slot, to, new_obj);
            } else {
                let [a, b] = self
                    .nodes
                    .get_disjoint_mut([from as usize, to as usize])
                    .expect("two distinct live zspages");
                b.zspage.take(new_obj, slot);
                b.zspage.write(
                    new_obj,
                    size,
                    0,
                    a.zspage.bytes(obj, size, len),
                    self.writes,
                );
                a.zspage.put(obj);
                self.handles.relocate(slot, to, new_obj);
            }
            m.objects += 1;
            m.bytes += len;
        }
        self.regroup(to);
        if self.zspage(from).inuse() == 0 {
            m.pages_freed = self.zspage(from).resident();
            m.released = true;
            self.release_zspage(from, src);
        } else {
            if self.trim {
                m.pages_freed = self.trim_zspage(from, src);
            }
            self.regroup(from);
        }
        m
    }

    /// Take back magazine-parked `slot` of zspage `from` during a
    /// migration (which frees an emptied `from` itself at its end); false
    /// if its thread revived it first.
    fn reclaim_in_migration(&mut self, from: u32, slot: u32) -> bool {
        let Some(loc) = self.handles.reclaim(slot) else {
            return false;
        };
        debug_assert_eq!(loc.zspage, from);
        self.count_reclaimed(loc.len);
        self.zspage_mut(from).put(loc.obj);
        true
    }

    fn new_zspage(&mut self, src: &PageSource) -> Result<u32> {
        if self.nodes.len() >= self.handles.max_zspages() as usize {
            return Err(Error::OsOutOfMemory {
                bytes: 0,
                reason: format!(
                    "class of size {} is full ({} zspages, all a handle entry can name)",
                    self.info.size,
                    self.handles.max_zspages()
                ),
            });
        }
        let pages = self.info.pages_per_zspage;
        let (run, resident) = if self.trim {
            src.alloc_lazy_run(pages, self.pages_for(0))?
        } else {
            (src.alloc_run(pages)?, pages)
        };
        self.account_resident(0, resident);
        let zspage = Zspage::new(run, self.info.objs_per_zspage, resident);
        if self.nodes.len() == self.nodes.capacity() {
            // Grow by a quarter, not double: descriptors are per zspage.
            self.nodes.reserve_exact((self.nodes.len() / 4).max(2));
        }
        self.nodes.push(Node {
            zspage,
            group: 0,
            parked: 0,
            prev: NIL,
            next: NIL,
        });
        let id = (self.nodes.len() - 1) as u32;
        if let Some(p) = &self.published {
            p.set_base(id, self.nodes[id as usize].zspage.base());
        }
        self.link(id, 0);
        Ok(id)
    }

    /// Give zspage `id` back to the OS. The last zspage takes its id (list
    /// links and handle entries follow), so ids stay dense; callers must not
    /// keep other ids across this call.
    fn release_zspage(&mut self, id: u32, src: &PageSource) {
        self.unlink(id);
        let last = (self.nodes.len() - 1) as u32;
        if id != last {
            // Point the last zspage's neighbours (or its group's head) at
            // its new id; `id` is unlinked, so it is nobody's neighbour.
            let (group, prev, next) = {
                let n = &self.nodes[last as usize];
                (usize::from(n.group), n.prev, n.next)
            };
            if prev == NIL {
                self.heads[group] = id;
            } else {
                self.nodes[prev as usize].next = id;
            }
            if next != NIL {
                self.nodes[next as usize].prev = id;
            }
        }
        let z = self.nodes.swap_remove(id as usize).zspage;
        if id != last {
            // The last zspage's objects change place: lock-free readers
            // must see the stretch.
            let began = self.moving();
            if let Some(p) = &self.published {
                p.set_base(id, self.nodes[id as usize].zspage.base());
                if self.magazines {
                    // The zspage moved from `last` to `id`: its mark too.
                    let marked = p.maybe_parked(last);
                    p.set_held_marked(id, self.nodes[id as usize].zspage.inuse(), marked);
                }
            }
            for (obj, slot) in self.nodes[id as usize].zspage.allocated() {
                self.handles.relocate(slot, id, obj);
            }
            self.moved(began);
        }
        if let Some(p) = &self.published {
            p.set_base(last, std::ptr::null_mut());
            if self.magazines {
                p.set_held_marked(last, 0, false);
            }
        }
        if self.nodes.capacity() > self.nodes.len() + self.nodes.len() / 2 + 2 {
            self.nodes
                .shrink_to(self.nodes.len() + self.nodes.len() / 4);
        }
        let resident = z.resident();
        self.account_resident(resident, 0);
        src.free_run(z.into_run(), self.info.pages_per_zspage, resident);
    }

    /// Allocate an object of `len` bytes and, if given, write `data` to its
    /// start; `class_index` goes into the handle.
    pub(crate) fn alloc(
        &mut self,
        class_index: usize,
        len: usize,
        data: Option<&[u8]>,
        src: &PageSource,
    ) -> Result<Handle> {
        if let Some(slot) = self.parked.pop() {
            let (handle, loc) = self.handles.revive(class_index, slot, len);
            self.nodes[loc.zspage as usize].parked -= 1;
            self.park_budget = (self.park_budget + 1).min(self.max_parked);
            if let Some(d) = data {
                let size = self.info.size;
                let writes = self.writes;
                self.zspage_mut(loc.zspage)
                    .write(loc.obj, size, 0, d, writes);
            }
            self.bytes_stored = self.bytes_stored.wrapping_add(len);
            return Ok(handle);
        }
        let id = match self.fullest_with_room() {
            Some(id) => id,
            None => self.new_zspage(src)?,
        };
        let obj = self
            .zspage(id)
            .next_free()
            .expect("a zspage with room has a free object");
        let (id, obj) = match self.ensure_resident(id, obj, src) {
            Ok(_) => (id, obj),
            Err(e) if self.zspage(id).inuse() == 0 => {
                self.release_zspage(id, src);
                return Err(e);
            }
            // At the memory limit: a free slot in committed pages of another
            // zspage will do (a trimming class; rare, so a plain scan).
            Err(e) => self.committed_free_slot().ok_or(e)?,
        };
        let loc = Location {
            zspage: id,
            obj,
            len,
        };
        // Take the handle slot first: if that fails nothing has changed.
        let handle = match self.handles.insert(class_index, loc) {
            Ok(h) => h,
            Err(e) => {
                if self.zspage(id).inuse() == 0 {
                    self.release_zspage(id, src);
                }
                return Err(e);
            }
        };
        let size = self.info.size;
        let writes = self.writes;
        let z = self.zspage_mut(id);
        z.take(obj, handle.slot());
        if let Some(d) = data {
            z.write(obj, size, 0, d, writes);
        }
        self.bytes_stored = self.bytes_stored.wrapping_add(len);
        self.regroup(id);
        Ok(handle)
    }

    /// A zspage whose lowest free slot lies in its committed pages.
    fn committed_free_slot(&self) -> Option<(u32, u16)> {
        self.nodes.iter().enumerate().find_map(|(id, n)| {
            let obj = n.zspage.next_free()?;
            (self.pages_for(obj) <= n.zspage.resident()).then_some((id as u32, obj))
        })
    }

    /// Where a handle's object is.
    pub(crate) fn resolve(&self, h: Handle) -> Result<Location> {
        self.handles.get(h)
    }

    /// Whether frees park slots in threads' magazines: then an object's
    /// bytes may be written without the lock (a revive of a slot whose
    /// handle a racing caller still reads), so they are read by words.
    pub(crate) fn magazines(&self) -> bool {
        self.magazines
    }

    /// Copy live `h`'s object into the start of `dst` by words, in a class
    /// with magazines (see [`Class::magazines`]), under its lock (shared
    /// or not); returns its length. The lock does not keep a magazine's
    /// free of `h` out: one racing the copy may let the slot be revived
    /// and written by another thread meanwhile. So the entry is read again
    /// after the copy (an `Acquire` fence between: a copy that saw any
    /// byte of a revive's write, made after its `Release` fence, sees the
    /// entry changed, as a lock-free read does, `optimistic.rs`), and a
    /// changed entry gives the freed handle's error: the copy is no
    /// object's, and is zeroed (up to the object's length).
    pub(crate) fn load_live(&self, h: Handle, dst: &mut [MaybeUninit<u8>]) -> Result<usize> {
        let (loc, word) = self.handles.get_with_word(h)?;
        if dst.len() < loc.len {
            return Err(Error::BufferTooSmall {
                len: dst.len(),
                object_len: loc.len,
            });
        }
        let z = self.zspage(loc.zspage);
        assert!(usize::from(loc.obj) < z.objs() && loc.len <= self.info.size);
        // SAFETY: the object lies in the run, 8-aligned, whole words; its
        // memory is accessed concurrently only through `words` (the pool
        // writes by words where lock-free reads or magazines race); `dst`
        // is the caller's, with room for `loc.len` bytes.
        unsafe {
            crate::words::load(
                z.base().add(usize::from(loc.obj) * self.info.size),
                dst.as_mut_ptr().cast(),
                loc.len,
            );
        }
        crate::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        if self.handles.word_now(h) != Some(word) {
            dst[..loc.len].fill(MaybeUninit::new(0));
            return Err(self
                .handles
                .get(h)
                .err()
                .unwrap_or_else(|| h.fault(HandleFault::Freed)));
        }
        Ok(loc.len)
    }

    /// The object's bytes.
    pub(crate) fn bytes(&self, loc: Location) -> &[u8] {
        self.zspage(loc.zspage)
            .bytes(loc.obj, self.info.size, loc.len)
    }

    /// Write into an object; `offset + data.len()` must fit its length.
    pub(crate) fn write(&mut self, h: Handle, offset: usize, data: &[u8]) -> Result<()> {
        let loc = self.resolve(h)?;
        loc.check_write(offset, data.len())?;
        let size = self.info.size;
        // A write in place: a lock-free read of this object must not
        // return half of it.
        let began = self.moving();
        let writes = self.writes;
        self.zspage_mut(loc.zspage)
            .write(loc.obj, size, offset, data, writes);
        self.moved(began);
        Ok(())
    }

    /// Free the object; its zspage goes back to the OS if it empties.
    /// Returns the object's length.
    pub(crate) fn free(&mut self, h: Handle, src: &PageSource) -> Result<usize> {
        let loc = self.handles.claim(h)?;
        if self.magazines {
            self.reclaim_if_no_live(loc.zspage, h.slot(), src);
        } else if self.max_parked > 0 {
            if !self.keeps_live_object(loc.zspage) {
                // Its zspage's last live object: its parked slots go too.
                self.unpark_in(loc.zspage, src);
            } else if self.parked.len() < usize::from(self.park_budget)
                && self.as_full_as_any(loc.zspage)
                && self.handles.park(h.slot())
            {
                self.parked.push(h.slot());
                self.nodes[loc.zspage as usize].parked += 1;
                self.bytes_stored = self.bytes_stored.wrapping_sub(loc.len);
                return Ok(loc.len);
            }
        }
        self.release_object(h, loc, src);
        Ok(loc.len)
    }

    /// Whether zspage `id` holds a live object besides one about to be
    /// freed: more objects in use than that one and its parked slots.
    fn keeps_live_object(&self, id: u32) -> bool {
        let n = &self.nodes[id as usize];
        n.zspage.inuse() > 1 + usize::from(n.parked)
    }

    /// Whether zspage `id`, one object emptier, would be in a group at
    /// least as full as the fullest other zspage with room: where the kernel's
    /// rule (fullest first) would put the next object anyway, so parking
    /// the slot for it does not change which zspages fill and which drain.
    fn as_full_as_any(&self, id: u32) -> bool {
        let z = self.zspage(id);
        let mut rivals = self.groups_with_room();
        // Another zspage: this one alone in its group is no rival.
        let own = usize::from(self.nodes[id as usize].group);
        if own < GROUP_FULL && self.counts[own] == 1 {
            rivals &= !(1 << own);
        }
        fullest(rivals).is_none_or(|g| fullness_group(z.inuse() - 1, z.objs()) >= g)
    }

    /// Free the parked slots of zspage `id` for good (its last live object
    /// is being freed). The zspage keeps that object, so none empties it.
    fn unpark_in(&mut self, id: u32, src: &PageSource) {
        if self.nodes[id as usize].parked > 0 {
            self.shrink_park_budget();
        }
        let mut k = 0;
        while self.nodes[id as usize].parked > 0 && k < self.parked.len() {
            let slot = self.parked[k];
            if self.handles.parked_place(slot).map(|l| l.zspage) == Some(id) {
                self.parked.swap_remove(k);
                self.release_parked(slot, src);
            } else {
                k += 1;
            }
        }
    }

    /// Free every parked slot for good (before compaction moves objects).
    pub(crate) fn unpark_all(&mut self, src: &PageSource) {
        if !self.parked.is_empty() {
            self.shrink_park_budget();
        }
        while let Some(slot) = self.parked.pop() {
            self.release_parked(slot, src);
        }
    }

    /// Slots parked now.
    pub(crate) fn parked_count(&self) -> usize {
        self.parked.len()
    }

    /// Parked slots had to be freed unused: park half as many from now.
    fn shrink_park_budget(&mut self) {
        self.park_budget = (self.park_budget / 2).max(1);
    }

    /// Free parked `slot` (taken off the list) for good.
    fn release_parked(&mut self, slot: u32, src: &PageSource) {
        let loc = self.handles.unpark(slot);
        self.nodes[loc.zspage as usize].parked -= 1;
        self.put_slot(loc, slot, src);
    }

    /// Give back the zspage slot at `loc` that parked handle `slot` kept
    /// (its entry already freed): the zspage goes back to the OS if that
    /// empties it, else to the group its use count now gives.
    fn put_slot(&mut self, loc: Location, slot: u32, src: &PageSource) {
        let z = self.zspage_mut(loc.zspage);
        debug_assert_eq!(z.owner(loc.obj), Some(slot));
        z.put(loc.obj);
        if z.inuse() == 0 {
            self.release_zspage(loc.zspage, src);
        } else {
            self.regroup(loc.zspage);
        }
    }

    /// Free an object a deferred free marked dying (the drain); returns its
    /// length.
    pub(crate) fn free_dying(&mut self, h: Handle, src: &PageSource) -> Result<usize> {
        let loc = self.handles.get_dying(h)?;
        self.release_object(h, loc, src);
        Ok(loc.len)
    }

    fn release_object(&mut self, h: Handle, loc: Location, src: &PageSource) {
        let z = self.zspage_mut(loc.zspage);
        debug_assert_eq!(z.owner(loc.obj), Some(h.slot()));
        z.put(loc.obj);
        let empty = z.inuse() == 0;
        self.handles.remove(h.slot());
        self.bytes_stored = self.bytes_stored.wrapping_sub(loc.len);
        if empty {
            self.release_zspage(loc.zspage, src);
        } else {
            self.regroup(loc.zspage);
        }
    }

    /// Give every zspage back (pool teardown).
    pub(crate) fn release_all(&mut self, src: &PageSource) {
        while let Some(last) = self.nodes.len().checked_sub(1) {
            self.release_zspage(last as u32, src);
        }
    }

    pub(crate) fn zspage_count(&self) -> usize {
        self.nodes.len()
    }

    pub(crate) fn objects(&self) -> usize {
        self.handles.live()
    }

    pub(crate) fn bytes_stored(&self) -> usize {
        self.bytes_stored
    }

    /// Zspages per fullness group.
    pub(crate) fn group_counts(&self) -> [usize; NR_FULLNESS_GROUPS] {
        self.counts
    }

    /// Heap bytes of descriptors, free bitmaps, owner arrays, handles and
    /// the parked list.
    pub(crate) fn metadata_bytes(&self) -> usize {
        let nodes = self.nodes.capacity() * std::mem::size_of::<Node>();
        let buffers: usize = self
            .nodes
            .iter()
            .map(|n| n.zspage.metadata_bytes() - std::mem::size_of::<Zspage>())
            .sum();
        nodes
            + buffers
            + self.handles.metadata_bytes()
            + self.published.as_ref().map_or(0, |p| p.metadata_bytes())
            + self.parked.capacity() * std::mem::size_of::<u32>()
            + self
                .reclaimed
                .as_ref()
                .map_or(0, |r| std::mem::size_of::<Vec<usize>>() + r.capacity() * 8)
    }

    /// Check every invariant in the module comment.
    pub(crate) fn check(
        &self,
        class_index: usize,
        magazines: Option<InMagazines<'_>>,
    ) -> std::result::Result<(), String> {
        let ctx = |m: String| format!("class {class_index} (size {}): {m}", self.info.size);
        self.handles.check().map_err(ctx)?;
        // Walk the lists.
        let mut listed = vec![false; self.nodes.len()];
        for g in 0..NR_FULLNESS_GROUPS {
            let mut n = 0;
            let mut prev = NIL;
            let mut id = self.heads[g];
            while id != NIL {
                let node = self
                    .nodes
                    .get(id as usize)
                    .ok_or_else(|| ctx(format!("group {g} links to node {id} beyond the table")))?;
                if std::mem::replace(&mut listed[id as usize], true) {
                    return Err(ctx(format!("zspage {id} is listed twice")));
                }
                let z = &node.zspage;
                if node.prev != prev || usize::from(node.group) != g {
                    return Err(ctx(format!("zspage {id} has broken links or group")));
                }
                let want = fullness_group(z.inuse(), z.objs());
                if want != g {
                    return Err(ctx(format!(
                        "zspage {id} with {}/{} used is in group {g}, not {want}",
                        z.inuse(),
                        z.objs()
                    )));
                }
                if z.inuse() == 0 {
                    return Err(ctx(format!("empty zspage {id} was not freed")));
                }
                z.check(self.info.size, self.page_size)
                    .map_err(|m| ctx(format!("zspage {id}: {m}")))?;
                for (obj, slot) in z.allocated() {
                    let entry = self.handles.live_entry(slot);
                    match entry.or_else(|| self.handles.parked_place(slot)) {
                        Some(l) if l.zspage == id && l.obj == obj => {}
                        other => {
                            return Err(ctx(format!(
                                "zspage {id} object {obj} is owned by slot {slot}, whose entry is {other:?}"
                            )));
                        }
                    }
                }
                prev = id;
                id = node.next;
                n += 1;
            }
            if n != self.counts[g] || (n > 0) != (self.nonempty & (1 << g) != 0) {
                return Err(ctx(format!(
                    "group {g} counts {} but lists {n}",
                    self.counts[g]
                )));
            }
        }
        if let Some(id) = listed.iter().position(|&l| !l) {
            return Err(ctx(format!("zspage {id} is on no list")));
        }
        // Owners and live entries point at each other (checked above, one
        // owner per entry), so equal counts make it a bijection: every live
        // handle is an owner somewhere. Lengths add up.
        let mut stored = 0;
        let (mut owned, mut parked) = (0, 0);
        for node in &self.nodes {
            for (_, slot) in node.zspage.allocated() {
                if self.magazines {
                    match (self.handles.held_state(slot), &magazines) {
                        (Held::Reviving, _) => {
                            return Err(ctx(format!("slot {slot} is reviving at rest")));
                        }
                        (Held::Parked(_, g), Some(m)) if !m.listed.contains(&(slot, g)) => {
                            return Err(ctx(format!(
                                "slot {slot} is parked at generation {g} in no magazine"
                            )));
                        }
                        _ => {}
                    }
                }
                let Some(l) = self.handles.live_entry(slot) else {
                    parked += 1;
                    continue;
                };
                if l.len > self.info.size {
                    return Err(ctx(format!(
                        "handle slot {slot} length {} over class size",
                        l.len
                    )));
                }
                stored += l.len;
                owned += 1;
            }
        }
        if self.magazines {
            // Slots in magazines are held (counted live in the table); the
            // magazines' counts take them out of the class's figures.
            let m = magazines.ok_or_else(|| ctx("no magazines given".into()))?;
            if owned + parked != self.handles.live()
                || self.handles.live() as i64 + m.objects != owned as i64
                || self.bytes_stored.wrapping_add_signed(m.bytes as isize) != stored
                || !self.parked.is_empty()
            {
                return Err(ctx(format!(
                    "{owned} live objects of {stored} bytes and {parked} slots in magazines; \
                     the handle table holds {}, the class counts {} bytes, magazines add \
                     {} objects and {} bytes; {} on the class's own list",
                    self.handles.live(),
                    self.bytes_stored,
                    m.objects,
                    m.bytes,
                    self.parked.len()
                )));
            }
        } else {
            if owned != self.handles.live() {
                return Err(ctx(format!(
                    "{owned} objects are owned but the handle table has {} live entries",
                    self.handles.live()
                )));
            }
            self.check_parked(parked).map_err(ctx)?;
        }
        let (mut pages, mut slots) = (0, 0);
        for z in self.nodes.iter().map(|n| &n.zspage) {
            if z.resident() == 0 || z.resident() > self.info.pages_per_zspage {
                return Err(ctx(format!(
                    "a zspage commits {} of its {} pages",
                    z.resident(),
                    self.info.pages_per_zspage
                )));
            }
            if !self.trim && z.resident() != self.info.pages_per_zspage {
                return Err(ctx(format!(
                    "a zspage commits {} of {} pages in a class that does not trim",
                    z.resident(),
                    self.info.pages_per_zspage
                )));
            }
            pages += z.resident();
            slots += self.slots_within(z.resident());
        }
        if (pages, slots) != (self.resident_pages, self.resident_slots) {
            return Err(ctx(format!(
                "resident pages/slots counted {}/{} but the zspages hold {pages}/{slots}",
                self.resident_pages, self.resident_slots
            )));
        }
        if !self.magazines && stored != self.bytes_stored {
            return Err(ctx(format!(
                "bytes stored {} != sum of lengths {stored}",
                self.bytes_stored
            )));
        }
        Ok(())
    }

    /// The parked slots: `owned` zspage slots are owned by parked entries;
    /// they are exactly the list, at most `max_parked`, each in a zspage
    /// that holds a live object.
    fn check_parked(&self, owned: usize) -> std::result::Result<(), String> {
        let mut listed = self.parked.clone();
        listed.sort_unstable();
        listed.dedup();
        if listed.len() != self.parked.len() {
            return Err("a slot is parked twice".into());
        }
        if self.parked.len() > usize::from(self.max_parked)
            || self.park_budget > self.max_parked
            || self.parked.len() != owned
            || owned != self.handles.parked()
        {
            return Err(format!(
                "{} slots listed as parked (at most {}, budget {}), {owned} owned by parked \
                 entries, {} parked in the handle table",
                self.parked.len(),
                self.max_parked,
                self.park_budget,
                self.handles.parked()
            ));
        }
        let mut per_zspage = vec![0; self.nodes.len()];
        for &slot in &self.parked {
            let Some(l) = self.handles.parked_place(slot) else {
                return Err(format!("slot {slot} is listed as parked but is not"));
            };
            *per_zspage
                .get_mut(l.zspage as usize)
                .ok_or_else(|| format!("parked slot {slot} names no zspage"))? += 1;
        }
        for ((id, n), counted) in self.nodes.iter().enumerate().zip(per_zspage) {
            if usize::from(n.parked) != counted {
                return Err(format!(
                    "zspage {id} counts {} parked slots, the list {counted}",
                    n.parked
                ));
            }
            if counted > 0 && n.zspage.inuse() <= counted {
                return Err(format!("zspage {id} holds parked slots and no live object"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "safe arithmetic: nothing for Miri to check")]
    fn fullness_groups_match_kernel() {
        assert_eq!(fullness_group(0, 127), 0);
        assert_eq!(fullness_group(1, 127), 1);
        assert_eq!(fullness_group(13, 127), 2);
        assert_eq!(fullness_group(126, 127), 10);
        assert_eq!(fullness_group(127, 127), GROUP_FULL);
        assert_eq!(fullness_group(1, 1), GROUP_FULL);
        for objs in 1..=600 {
            for inuse in 1..objs {
                assert_eq!(fullness_group(inuse, objs), 100 * inuse / objs / 10 + 1);
            }
        }
    }
}
