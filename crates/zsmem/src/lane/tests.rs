//! Unit tests of a lane: packing, holes, cleaning, dead pages, the memory
//! limit, freed handles.

use super::*;
use crate::compact::Counters;
use crate::config::PageReturn;

const PAGE: usize = 4096;

fn source(limit: Option<usize>) -> std::sync::Arc<PageSource> {
    PageSource::new(PAGE, limit, true, PageReturn::Immediate)
}

/// Check the lane's invariants after the `i`th step of a loop: after every
/// step natively, every 16th under Miri (a check there costs seconds, and
/// a test checking each of 50 frees took 19 minutes of CI).
fn check_step(l: &Lane, i: usize) {
    if !cfg!(miri) || i.is_multiple_of(16) {
        l.check(None).unwrap();
    }
}

fn read(l: &Lane, h: Handle) -> Vec<u8> {
    l.bytes(l.resolve(h).unwrap()).to_vec()
}

/// Append objects of `len` bytes (object `i` all `i as u8`) until the
/// first segment is sealed (the last one goes to a new segment); returns
/// the handles and the first segment.
fn seal_one(l: &mut Lane, src: &PageSource, n: usize, len: usize) -> (Vec<Handle>, u32) {
    let hs: Vec<Handle> = (0..n)
        .map(|i| l.alloc(len, Some(&vec![i as u8; len]), src).unwrap())
        .collect();
    let first = l.resolve(hs[0]).unwrap().zspage;
    assert_ne!(l.resolve(hs[n - 1]).unwrap().zspage, first, "sealed");
    (hs, first)
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
    let (big, first) = seal_one(&mut l, &src, 33, 4000);
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
    for (i, h) in hs.iter().step_by(2).enumerate() {
        l.free(*h, &src).unwrap();
        check_step(&l, i);
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
        for (i, &h) in hs[10..60].iter().enumerate() {
            l.free(h, &src).unwrap();
            check_step(&l, i);
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

#[test]
fn the_append_point_is_where_the_next_new_object_goes() {
    let src = source(None);
    let mut l = Lane::new(1, 0, PAGE, None);
    assert_eq!(l.append_point(), 0, "no open segment yet");
    let mut hint = 0;
    for i in 0..40u8 {
        let h = l.alloc(3000, Some(&[i; 3000]), &src).unwrap();
        let at = l.bytes(l.resolve(h).unwrap()).as_ptr() as usize;
        // The 44th would seal the first segment (43 fit); below that the
        // hint is exact.
        if i > 0 {
            assert_eq!(at, hint, "object {i}");
        }
        hint = l.append_point();
        assert_eq!(hint, at + 3000);
        // A hint never faults, whatever the address.
        Lane::prefetch_for_write(hint, 2048);
    }
    Lane::prefetch_for_write(0, 4096);
    Lane::prefetch_for_write(usize::MAX - 100, 4096);
    l.check(None).unwrap();
}

#[test]
fn cleaning_finds_owned_objects_by_a_scan_and_waits_for_a_busy_owner() {
    // Two full segments of owned objects (43 of 3,000 bytes fit one),
    // the first left with three: owned objects have no owner list
    // entries, so cleaning finds them by a scan of the owners. One owner
    // is busy: cleaning moves the others, stops at it, and ends the
    // victim once it is free again; an object placed in the victim while
    // it is planned joins the plan and moves too.
    const LEN: usize = 3000;
    let src = source(None);
    let counters = Counters::default();
    let mut l = Lane::new(1, 0, PAGE, None);
    let places = TestOwners((0..100).map(|_| crate::sync::Mutex::new((0, 0))).collect());
    let owners: &dyn Owners = &places;
    let byte = |i: u32| i as u8 + 1;
    let store = |l: &mut Lane, i: u32, len: usize| {
        let place = l.alloc_owned(i, &vec![byte(i); len], &src).unwrap();
        *places.0[i as usize].lock() = (place, len);
    };
    for i in 0..86u32 {
        store(&mut l, i, LEN);
    }
    assert_eq!(l.seg(0).live_objs, 43);
    assert_eq!(l.seg(0).owners.runs(), 0, "no owner list entries");
    let keep = [5u32, 20, 30];
    for i in (0..43u32).filter(|i| !keep.contains(i)) {
        let (place, len) = std::mem::take(&mut *places.0[i as usize].lock());
        l.free_owned(place, len, &src).unwrap();
    }
    l.check(Some(owners)).unwrap();
    let due = |l: &Lane| l.compaction_due(1);
    let busy = places.0[20].lock();
    let m = l.clean(usize::MAX, due, Some(owners), &src, &counters);
    // Found by the scan: 5 and 30 (20 was skipped, its lock held).
    assert_eq!((m.objects, m.released), (2, false));
    assert!(
        l.seg(0).live_objs == 1 && l.plan.is_empty(),
        "left the plan"
    );
    drop(busy);
    l.check(Some(owners)).unwrap();
    // Planned again; while its scan is out (the lane's lock let go), a
    // new object (owner 99, short enough for the room left on object
    // 20's pages) lands in the victim and must move with it.
    let scan = l.begin_plan(0);
    assert!(l.planned(0));
    store(&mut l, 99, 2000);
    assert_eq!(
        super::place_segment(places.place(99)),
        0,
        "the victim's room took the next object"
    );
    assert_eq!(l.plan[0].1, [99], "joined the plan before the scan's lists");
    let (m, none) = l.clean_step(usize::MAX, due, Some(owners), &src, &counters);
    assert_eq!(
        (m.objects, none.is_none()),
        (0, true),
        "not cleaned while scanned"
    );
    let lists = scan.run(owners);
    l.end_plan(scan, lists);
    l.check(Some(owners)).unwrap();
    let m = l.clean(usize::MAX, due, Some(owners), &src, &counters);
    assert!(m.released && m.objects == 2, "{m:?}");
    l.check(Some(owners)).unwrap();
    for i in keep.into_iter().chain(43..86).chain([99]) {
        let (place, len) = *places.0[i as usize].lock();
        assert_ne!(super::place_segment(place), 0, "owner {i} moved");
        let loc = l.resolve_owned(place, len).unwrap();
        assert_eq!(l.bytes(loc), &vec![byte(i); len][..], "owner {i}");
    }
    // A plan whose victim is released while its scan is out: the scan's
    // finding for it is dropped (its id may name a new segment by then).
    let victim = super::place_segment(places.place(43));
    let scan = l.begin_plan(victim);
    let lists = scan.run(owners);
    for i in 43..86 {
        if super::place_segment(places.place(i)) == victim {
            let (place, len) = std::mem::take(&mut *places.0[i as usize].lock());
            l.free_owned(place, len, &src).unwrap();
        }
    }
    assert!(!l.planned(victim), "left the plan as it was released");
    store(&mut l, 43, 100);
    l.end_plan(scan, lists);
    assert!(!l.planned(victim));
    l.check(Some(owners)).unwrap();
}

#[test]
fn sought_names_which_segment_of_its_lane_a_place_is_in() {
    let place = |lane: u64, seg: u64, off: u64| lane << 32 | seg << OFFSET_BITS | off;
    let s = Sought::new(3, &[5, 2, 300]);
    assert_eq!(s.which(place(3, 5, 0)), Some(0));
    assert_eq!(s.which(place(3, 2, 0xFFFF)), Some(1));
    assert_eq!(s.which(place(3, 300, 7)), Some(2));
    assert_eq!(s.which(place(3, 4, 0)), None);
    assert_eq!(s.which(place(3, 301, 0)), None, "past the look-up");
    assert_eq!(s.which(place(3, 65_535, 0)), None);
    assert_eq!(s.which(place(2, 5, 0)), None, "another lane");
    assert_eq!(Sought::new(1, &[]).which(place(1, 0, 0)), None);
}

// Not under Miri: safe code (the lane's bookkeeping: placement, the victim
// threshold, owner list pruning), 100 s of Miri a test; the lane's unsafe
// code (object writes, moves, pages given back) runs in the tests above.
#[cfg(not(miri))]
mod bookkeeping {
    use super::*;

    /// Placement in free extents is best fit over every segment's longest
    /// extent (ties to the lowest id) whether or not the segment a free last
    /// changed is keyed in `fits` yet (`Lane::unkeyed`): each object is
    /// checked against a search of every segment made just before it.
    #[test]
    fn free_room_is_taken_best_fit_whether_its_segment_is_keyed_yet_or_not() {
        let src = source(None);
        let mut l = Lane::new(1, 0, PAGE, None);
        let mut live: Vec<Handle> = Vec::new();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut rand = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut placed_in_extents = 0;
        for i in 0..6000 {
            if live.len() > 150 && rand(2) == 0 {
                let h = live.swap_remove(rand(live.len() as u64) as usize);
                l.free(h, &src).unwrap();
            } else {
                let len = 16 + rand(3000) as usize;
                let units = (l.placed(len) >> l.unit_shift) as u32;
                let best = (0..l.segs.len() as u32)
                    .filter(|&id| l.segs[id as usize].is_some())
                    .map(|id| (l.seg(id).extents.largest(), id))
                    .filter(|&(longest, _)| longest >= units)
                    .min();
                let h = l.alloc(len, Some(&vec![i as u8; len]), &src).unwrap();
                if let Some((_, id)) = best {
                    assert_eq!(l.resolve(h).unwrap().zspage, id, "object {i}, {len} bytes");
                    placed_in_extents += 1;
                }
                live.push(h);
            }
            if i % 64 == 0 {
                l.check(None).unwrap();
            }
        }
        assert!(
            placed_in_extents > 1000,
            "{placed_in_extents} placed in free extents"
        );
        l.check(None).unwrap();
    }

    #[test]
    fn frees_alone_keep_an_owner_list_near_its_live_objects() {
        // Churn in one segment (each new object takes a dead one's room and a
        // reused handle slot, so the owner list holds single entries), then a
        // burst of frees with nothing placed: the list must follow the live
        // objects down, not keep an entry for every object the segment held.
        let src = source(None);
        let mut l = Lane::new(1, 0, PAGE, None);
        let mut hs: Vec<Handle> = (0..120)
            .map(|i| l.alloc(1000, Some(&[i as u8; 1000]), &src).unwrap())
            .collect();
        let mut x = 7usize;
        for _ in 0..400 {
            x = (x * 31 + 17) % hs.len();
            l.free(hs[x], &src).unwrap();
            hs[x] = l.alloc(1000, Some(&[x as u8; 1000]), &src).unwrap();
        }
        l.check(None).unwrap();
        let bound = |l: &Lane| {
            let seg = l.seg(0);
            seg.live_objs + (seg.live_objs / 4).max(8)
        };
        assert!(l.seg(0).owners.runs() > 60, "single owners, not runs");
        for (i, &h) in hs.iter().enumerate().filter(|&(i, _)| i % 4 != 0) {
            l.free(h, &src).unwrap();
            assert!(l.seg(0).owners.runs() <= bound(&l), "after free {i}");
            check_step(&l, i);
        }
        for (i, &h) in hs.iter().enumerate().filter(|&(i, _)| i % 4 == 0) {
            assert_eq!(read(&l, h), vec![i as u8; 1000]);
        }
    }

    #[test]
    fn a_sealed_segment_is_a_victim_once_a_ninety_sixth_of_it_is_dead() {
        let src = source(None);
        let mut l = Lane::new(1, 0, PAGE, None);
        // 262 objects of 500 bytes: 131,000 of a segment's 131,072; the 263rd
        // seals it (72 bytes dead at its end).
        let (hs, first) = seal_one(&mut l, &src, 263, 500);
        assert_eq!(l.victim_dead(), 131_072 / 96);
        // 2 x 500 dead below its end (the 72 after it do not count), no page
        // wholly dead: not yet a victim.
        l.free(hs[10], &src).unwrap();
        l.free(hs[100], &src).unwrap();
        assert_eq!(l.seg(first).resident, 32);
        assert_eq!(l.freeable_bytes, 0);
        // 3 x 500 = 1,500 >= 1,365.
        l.free(hs[200], &src).unwrap();
        assert_eq!(l.freeable_bytes, 1572);
        l.check(None).unwrap();
        let counters = Counters::default();
        let m = l.clean(usize::MAX, |l| l.freeable_bytes > 0, None, &src, &counters);
        assert!(m.released, "{m:?}");
        l.check(None).unwrap();
        for (i, &h) in hs.iter().enumerate() {
            if ![10, 100, 200].contains(&i) {
                assert_eq!(read(&l, h), vec![i as u8; 500], "object {i}");
            }
        }
    }
}
