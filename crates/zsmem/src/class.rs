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
//! Invariants (checked by [`Class::check`]):
//! - every live zspage is on exactly the list of the group its use count
//!   gives, and `counts`/`nonempty` agree with the lists;
//! - no live zspage is empty;
//! - each allocated object's owner slot is a live handle entry pointing back
//!   at that zspage and object, and every live handle entry is such an owner;
//! - `bytes_stored` is the sum of the live objects' lengths.

use crate::error::{Error, Result};
use crate::handle::{Directory, Handle, HandleTable, Location};
use crate::os::PageSource;
use crate::size_class::ClassInfo;
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

/// What one migration did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Migration {
    pub(crate) objects: usize,
    pub(crate) bytes: usize,
    pub(crate) pages_freed: usize,
}

/// A zspage descriptor slot with its list links.
#[derive(Debug)]
struct Node {
    zspage: Option<Zspage>,
    group: u8,
    prev: u32,
    next: u32,
}

/// The state of one physical class.
#[derive(Debug)]
pub(crate) struct Class {
    pub(crate) info: ClassInfo,
    nodes: Vec<Node>,
    /// Unused node ids, reused before the node vector grows.
    spare: Vec<u32>,
    heads: [u32; NR_FULLNESS_GROUPS],
    counts: [usize; NR_FULLNESS_GROUPS],
    /// Bit g set when group g has a zspage: finds the fullest group fast.
    nonempty: u16,
    handles: HandleTable,
    zspages: usize,
    bytes_stored: usize,
}

impl Class {
    /// An empty class; `directory` is given for pools with deferred free.
    pub(crate) fn new(info: ClassInfo, directory: Option<std::sync::Arc<Directory>>) -> Self {
        Class {
            info,
            nodes: Vec::new(),
            spare: Vec::new(),
            heads: [NIL; NR_FULLNESS_GROUPS],
            counts: [0; NR_FULLNESS_GROUPS],
            nonempty: 0,
            handles: HandleTable::new(directory),
            zspages: 0,
            bytes_stored: 0,
        }
    }

    fn zspage(&self, id: u32) -> &Zspage {
        self.nodes[id as usize]
            .zspage
            .as_ref()
            .expect("a handle entry points only at live zspages")
    }

    fn zspage_mut(&mut self, id: u32) -> &mut Zspage {
        self.nodes[id as usize]
            .zspage
            .as_mut()
            .expect("a handle entry points only at live zspages")
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

    /// Move a zspage to the group its use count now gives.
    fn regroup(&mut self, id: u32) {
        let z = self.zspage(id);
        let group = fullness_group(z.inuse(), z.objs());
        if usize::from(self.nodes[id as usize].group) != group {
            self.unlink(id);
            self.link(id, group);
        }
    }

    /// The first zspage of the fullest group that is not full.
    pub(crate) fn fullest_with_room(&self) -> Option<u32> {
        let candidates = self.nonempty & ((1 << GROUP_FULL) - 1);
        (candidates != 0).then(|| self.heads[15 - candidates.leading_zeros() as usize])
    }

    /// The first zspage of the emptiest non-empty group, skipping `not`.
    pub(crate) fn emptiest_except(&self, not: u32) -> Option<u32> {
        let mut groups = self.nonempty & ((1 << GROUP_FULL) - 1) & !1;
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
        self.zspages * self.info.objs_per_zspage - self.handles.live()
    }

    /// The kernel's estimate of the pages compaction could free:
    /// whole zspages' worth of free object slots.
    pub(crate) fn freeable_pages(&self) -> usize {
        self.free_slots() / self.info.objs_per_zspage * self.info.pages_per_zspage
    }

    /// Move objects from zspage `from` into zspage `to`, at most `max`,
    /// until `from` is empty or `to` is full. Handles are updated in place,
    /// so they stay valid; an emptied `from` goes back to the OS.
    pub(crate) fn migrate(
        &mut self,
        from: u32,
        to: u32,
        max: usize,
        src: &PageSource,
    ) -> Migration {
        let size = self.info.size;
        let mut m = Migration::default();
        {
            let [a, b] = self
                .nodes
                .get_disjoint_mut([from as usize, to as usize])
                .expect("migration needs two distinct zspages");
            let (from_z, to_z) = (
                a.zspage.as_mut().expect("live source zspage"),
                b.zspage.as_mut().expect("live destination zspage"),
            );
            // Objects below the cursor have been moved already.
            let mut cursor = 0;
            while m.objects < max {
                let Some((obj, slot)) = from_z.next_allocated(cursor) else {
                    break;
                };
                cursor = usize::from(obj) + 1;
                let Some(new_obj) = to_z.take(slot) else {
                    break;
                };
                let len = self
                    .handles
                    .live_entry(slot)
                    .expect("an owned object has a live handle")
                    .len;
                to_z.write(new_obj, size, 0, from_z.bytes(obj, size, len));
                from_z.put(obj);
                self.handles.relocate(slot, to, new_obj);
                m.objects += 1;
                m.bytes += len;
            }
        }
        self.regroup(to);
        if self.zspage(from).inuse() == 0 {
            self.release_zspage(from, src);
            m.pages_freed = self.info.pages_per_zspage;
        } else {
            self.regroup(from);
        }
        m
    }

    fn new_zspage(&mut self, src: &PageSource) -> Result<u32> {
        let run = src.alloc_run(self.info.pages_per_zspage)?;
        let zspage = Zspage::new(run, self.info.objs_per_zspage);
        let id = match self.spare.pop() {
            Some(id) => {
                self.nodes[id as usize].zspage = Some(zspage);
                id
            }
            None => {
                self.nodes.push(Node {
                    zspage: Some(zspage),
                    group: 0,
                    prev: NIL,
                    next: NIL,
                });
                (self.nodes.len() - 1) as u32
            }
        };
        self.zspages += 1;
        self.link(id, 0);
        Ok(id)
    }

    fn release_zspage(&mut self, id: u32, src: &PageSource) {
        self.unlink(id);
        let z = self.nodes[id as usize]
            .zspage
            .take()
            .expect("only live zspages are released");
        src.free_run(z.into_run(), self.info.pages_per_zspage);
        self.spare.push(id);
        self.zspages -= 1;
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
        let id = match self.fullest_with_room() {
            Some(id) => id,
            None => self.new_zspage(src)?,
        };
        let obj = self
            .zspage(id)
            .next_free()
            .expect("a zspage with room has a free object");
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
        let z = self.zspage_mut(id);
        let taken = z.take(handle.slot());
        debug_assert_eq!(taken, Some(obj));
        if let Some(d) = data {
            z.write(obj, size, 0, d);
        }
        self.bytes_stored += len;
        self.regroup(id);
        Ok(handle)
    }

    /// Where a handle's object is.
    pub(crate) fn resolve(&self, h: Handle) -> Result<Location> {
        self.handles.get(h)
    }

    /// The object's bytes.
    pub(crate) fn bytes(&self, loc: Location) -> &[u8] {
        self.zspage(loc.zspage)
            .bytes(loc.obj, self.info.size, loc.len)
    }

    /// Write into an object; `offset + data.len()` must fit its length.
    pub(crate) fn write(&mut self, h: Handle, offset: usize, data: &[u8]) -> Result<()> {
        let loc = self.resolve(h)?;
        if offset
            .checked_add(data.len())
            .is_none_or(|end| end > loc.len)
        {
            return Err(Error::WriteTooLong {
                len: data.len(),
                offset,
                object_len: loc.len,
            });
        }
        let size = self.info.size;
        self.zspage_mut(loc.zspage)
            .write(loc.obj, size, offset, data);
        Ok(())
    }

    /// Free the object; its zspage goes back to the OS if it empties.
    pub(crate) fn free(&mut self, h: Handle, src: &PageSource) -> Result<()> {
        let loc = self.handles.claim(h)?;
        self.release_object(h, loc, src);
        Ok(())
    }

    /// Free an object a deferred free marked dying (the drain).
    pub(crate) fn free_dying(&mut self, h: Handle, src: &PageSource) -> Result<()> {
        let loc = self.handles.get_dying(h)?;
        self.release_object(h, loc, src);
        Ok(())
    }

    fn release_object(&mut self, h: Handle, loc: Location, src: &PageSource) {
        let z = self.zspage_mut(loc.zspage);
        debug_assert_eq!(z.owner(loc.obj), Some(h.slot()));
        z.put(loc.obj);
        let empty = z.inuse() == 0;
        self.handles.remove(h.slot());
        self.bytes_stored -= loc.len;
        if empty {
            self.release_zspage(loc.zspage, src);
        } else {
            self.regroup(loc.zspage);
        }
    }

    /// Give every zspage back (pool teardown).
    pub(crate) fn release_all(&mut self, src: &PageSource) {
        for id in 0..self.nodes.len() as u32 {
            if self.nodes[id as usize].zspage.is_some() {
                self.release_zspage(id, src);
            }
        }
    }

    pub(crate) fn zspage_count(&self) -> usize {
        self.zspages
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

    /// Heap bytes of descriptors, free stacks, owner arrays and handles.
    pub(crate) fn metadata_bytes(&self) -> usize {
        let nodes = self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.spare.capacity() * std::mem::size_of::<u32>();
        let buffers: usize = self
            .nodes
            .iter()
            .filter_map(|n| n.zspage.as_ref())
            .map(|z| z.metadata_bytes() - std::mem::size_of::<Zspage>())
            .sum();
        nodes + buffers + self.handles.metadata_bytes()
    }

    /// Check every invariant in the module comment.
    pub(crate) fn check(&self, class_index: usize) -> std::result::Result<(), String> {
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
                let z = node
                    .zspage
                    .as_ref()
                    .ok_or_else(|| ctx(format!("group {g} lists dead zspage {id}")))?;
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
                z.check().map_err(|m| ctx(format!("zspage {id}: {m}")))?;
                for (obj, slot) in z.allocated() {
                    match self.handles.live_entry(slot) {
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
        let live: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].zspage.is_some())
            .collect();
        if live.iter().any(|&i| !listed[i]) || live.len() != self.zspages {
            return Err(ctx(
                "a live zspage is on no list, or the zspage count is off".into(),
            ));
        }
        if self.spare.len() + live.len() != self.nodes.len() {
            return Err(ctx("spare node list does not match dead nodes".into()));
        }
        // Owners and live entries point at each other (checked above, one
        // owner per entry), so equal counts make it a bijection: every live
        // handle is an owner somewhere. Lengths add up.
        let mut stored = 0;
        let mut owned = 0;
        for node in &self.nodes {
            for (_, slot) in node.zspage.iter().flat_map(|z| z.allocated()) {
                let l = self.handles.live_entry(slot).expect("checked above");
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
        if owned != self.handles.live() {
            return Err(ctx(format!(
                "{owned} objects are owned but the handle table has {} live entries",
                self.handles.live()
            )));
        }
        if stored != self.bytes_stored {
            return Err(ctx(format!(
                "bytes stored {} != sum of lengths {stored}",
                self.bytes_stored
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
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
