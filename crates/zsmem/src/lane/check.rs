//! The lane's invariant check ([`Lane::check`]): the invariants in the
//! module comment of `lane`.

use super::{EXTERNAL, Lane, Owners, SEGMENT_PAGES};

impl Lane {
    /// Check the invariants in the module comment.
    pub(crate) fn check(&self, owners: Option<&dyn Owners>) -> std::result::Result<(), String> {
        self.handles.check()?;
        // Owned objects have no owner list entries: every owner holding a
        // place in this lane, by segment.
        let mut owned_by_seg: std::collections::HashMap<u32, Vec<(u32, crate::handle::Location)>> =
            std::collections::HashMap::new();
        let mut bad = None;
        if let Some(owners) = owners {
            owners.scan(true, &mut |owner, place, len| {
                if place >> 32 != self.place_lane {
                    return;
                }
                match self.decode(place, len) {
                    Some(loc) => owned_by_seg
                        .entry(loc.zspage)
                        .or_default()
                        .push((owner | EXTERNAL, loc)),
                    None => {
                        bad.get_or_insert(format!(
                            "lane {}: owner {owner} holds place {place:#x} ({len} bytes), no object \
                             of this lane",
                            self.index
                        ));
                    }
                }
            });
        }
        if let Some(bad) = bad {
            return Err(bad);
        }
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
            if seg.owners.iter().any(|slot| slot & EXTERNAL != 0) {
                return Err(ctx("an owned object in the owner list".into()));
            }
            let listed = seg
                .owners
                .iter()
                .filter_map(|slot| Some((slot, self.handles.live_entry(slot)?)));
            let found = owned_by_seg.remove(&id).unwrap_or_default();
            for (slot, loc) in listed.chain(found) {
                if loc.zspage != id || !seen.insert(slot) {
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
            // The unkeyed segment is keyed as its longest extent was.
            let largest = if self.unkeyed == Some(id) {
                seg.largest
            } else {
                seg.extents.largest()
            };
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
        if let Some(id) = owned_by_seg.keys().next() {
            return Err(format!(
                "lane {}: owned objects in segment {id}, not a live segment",
                self.index
            ));
        }
        for (i, &(id, _)) in self.plan.iter().enumerate() {
            if self.segs.get(id as usize).is_none_or(Option::is_none)
                || self.plan[..i].iter().any(|&(v, _)| v == id)
            {
                return Err(format!(
                    "lane {}: plan entry {i} names segment {id} twice or not live",
                    self.index
                ));
            }
        }
        if let Some(u) = self.unkeyed
            && self.segs.get(u as usize).is_none_or(Option::is_none)
        {
            return Err(format!(
                "lane {}: segment {u}, not live, is to be keyed later",
                self.index
            ));
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
