//! Unit tests of the handle encoding, the handle table and the directory.

use super::directory::SEGMENTS;
use super::entry::Entry;
use super::table::RETIRED_CHUNK;
use super::*;
use crate::grow::locate;
use std::sync::Arc;

/// Object-index bits of the tables below (`loc` uses object 7).
const OBJ_BITS: u32 = 4;

fn loc(len: usize) -> Location {
    Location {
        zspage: 3,
        obj: 7,
        len,
    }
}

fn fault(r: Result<Location>) -> HandleFault {
    match r {
        Err(Error::InvalidHandle { fault, .. }) => fault,
        other => panic!("expected an invalid handle, got {other:?}"),
    }
}

#[test]
fn encoding_round_trips_and_is_never_zero() {
    let slot = (1 << SLOT_BITS) - 1;
    let h = Handle::new(4094, slot, MAX_GENERATION).tagged(255);
    assert_eq!(
        (h.class(), h.slot(), h.generation()),
        (4094, slot, MAX_GENERATION)
    );
    assert!(h.check_pool(255).is_ok());
    // The spare bit is 0 in every handle.
    assert_eq!(h.to_raw() >> 63, 0);
    let h = Handle::new(0, 0, 1);
    assert_ne!(h.to_raw(), 0);
    assert_eq!(Handle::from_raw(u64::MAX).generation(), MAX_GENERATION);
}

#[test]
fn another_tag_or_the_spare_bit_is_a_foreign_pool() {
    let h = Handle::new(7, 100, 3).tagged(9);
    let pool_fault = |h: Handle, tag| match h.check_pool(tag) {
        Err(Error::InvalidHandle { fault, .. }) => fault,
        other => panic!("expected an invalid handle, got {other:?}"),
    };
    assert_eq!(pool_fault(h, 10), HandleFault::ForeignPool);
    assert_eq!(pool_fault(h, 0), HandleFault::ForeignPool);
    let spare = Handle::from_raw(h.to_raw() | 1 << 63);
    assert_eq!(pool_fault(spare, 9), HandleFault::ForeignPool);
    assert_eq!(pool_fault(Handle::from_raw(0), 9), HandleFault::Null);
    // The directory of a deferred-free pool checks the tag first.
    let d = Arc::new(Directory::new(9));
    let mut t = HandleTable::new(Some(d.clone()), OBJ_BITS);
    let h = t.insert(2, loc(10)).unwrap().tagged(9);
    for other in [
        h.to_raw() ^ 3 << TAG_SHIFT,
        spare_of(h),
        h.to_raw() & !(0xff << TAG_SHIFT),
    ] {
        assert!(matches!(
            d.mark_dying(Handle::from_raw(other)),
            Err(Error::InvalidHandle {
                fault: HandleFault::ForeignPool,
                ..
            })
        ));
    }
    // Untouched: the real handle is still live and can be marked.
    assert_eq!(t.get(h).unwrap(), loc(10));
    d.mark_dying(h).unwrap();
}

fn spare_of(h: Handle) -> u64 {
    h.to_raw() | 1 << 63
}

#[test]
fn stale_double_free_and_forged_are_told_apart() {
    let mut t = HandleTable::new(None, OBJ_BITS);
    let a = t.insert(5, loc(100)).unwrap();
    assert_eq!(t.get(a).unwrap(), loc(100));
    t.claim(a).unwrap();
    t.remove(a.slot());
    assert_eq!(fault(t.get(a)), HandleFault::Freed);
    let b = t.insert(5, loc(65536)).unwrap();
    assert_eq!(b.slot(), a.slot());
    assert_eq!(t.get(b).unwrap().len, 65536);
    assert_eq!(fault(t.get(a)), HandleFault::Stale);
    assert_eq!(fault(t.get(Handle::from_raw(0))), HandleFault::Null);
    assert_eq!(
        fault(t.get(Handle::new(5, 99 << CHUNK_BITS, 1))),
        HandleFault::UnknownSlot
    );
    t.check().unwrap();
}

#[test]
fn empty_chunks_are_released_and_old_handles_stay_stale() {
    let mut t = HandleTable::new(None, OBJ_BITS).without_spare();
    let hs: Vec<Handle> = (0..3 * CHUNK)
        .map(|_| t.insert(1, loc(10)).unwrap())
        .collect();
    assert_eq!(t.chunks.iter().flatten().count(), 3);
    let before = t.metadata_bytes();
    // Free the middle chunk entirely: it goes away.
    for h in &hs[CHUNK..2 * CHUNK] {
        t.claim(*h).unwrap();
        t.remove(h.slot());
    }
    t.check().unwrap();
    assert_eq!(t.chunks.iter().flatten().count(), 2);
    assert!(t.metadata_bytes() < before);
    assert_eq!(fault(t.get(hs[CHUNK + 5])), HandleFault::Freed);
    // Free one slot in the first chunk: new objects go there first.
    t.claim(hs[7]).unwrap();
    t.remove(hs[7].slot());
    let n = t.insert(1, loc(20)).unwrap();
    assert_eq!(n.slot(), hs[7].slot());
    // Then the released chunk is made again; old handles into it are stale.
    let m = t.insert(1, loc(30)).unwrap();
    assert_eq!(m.slot() >> CHUNK_BITS, 1);
    assert!(
        t.get(hs[CHUNK + (m.slot() as usize & (CHUNK - 1))])
            .is_err()
    );
    assert_eq!(t.get(m).unwrap().len, 30);
    t.check().unwrap();
}

#[test]
fn dying_handles_are_dead_to_all_but_the_drain() {
    let d = Arc::new(Directory::new(0));
    let mut t = HandleTable::new(Some(d.clone()), OBJ_BITS);
    let hs: Vec<Handle> = (0..CHUNK + 3)
        .map(|_| t.insert(2, loc(10)).unwrap())
        .collect();
    let h = hs[CHUNK + 1];
    d.mark_dying(h).unwrap();
    // Dead at once: a second free (deferred or locked) and a read fail.
    assert!(matches!(
        d.mark_dying(h),
        Err(Error::InvalidHandle {
            fault: HandleFault::Freed,
            ..
        })
    ));
    assert_eq!(fault(t.claim(h)), HandleFault::Freed);
    assert_eq!(fault(t.get(h)), HandleFault::Freed);
    // The drain finds it; a live, unmarked handle is not the drain's.
    assert_eq!(t.get_dying(h).unwrap(), loc(10));
    assert_eq!(fault(t.get_dying(hs[0])), HandleFault::Stale);
    t.remove(h.slot());
    assert_eq!(fault(t.get(h)), HandleFault::Freed);
    assert!(d.mark_dying(h).is_err());
    // Forged handles: unknown chunk, wrong generation.
    assert!(matches!(
        d.mark_dying(Handle::new(2, 40 << CHUNK_BITS, 1)),
        Err(Error::InvalidHandle {
            fault: HandleFault::UnknownSlot,
            ..
        })
    ));
    assert!(d.mark_dying(Handle::new(2, hs[3].slot(), 7)).is_err());
    // With a directory, an emptied chunk stays (lock-free readers may
    // still look at it).
    for &h in &hs {
        if h != hs[CHUNK + 1] {
            t.claim(h).unwrap();
            t.remove(h.slot());
        }
    }
    assert_eq!(t.chunks.iter().flatten().count(), 2);
    t.check().unwrap();
    assert!(t.metadata_bytes() > 2 * CHUNK * std::mem::size_of::<Entry>());
}

#[test]
fn directory_segments_cover_every_chunk() {
    assert_eq!(locate(0), (0, 0));
    assert_eq!(locate(1), (1, 0));
    assert_eq!(locate(2), (1, 1));
    assert_eq!(locate(6), (2, 3));
    let last = (1usize << (SLOT_BITS - CHUNK_BITS)) - 1;
    assert!(locate(last).0 < SEGMENTS);
    // The last segment is needed (none is wasted) and is not overrun.
    let (k, off) = locate(last);
    assert_eq!(k, SEGMENTS - 1);
    assert!(off < 1 << k);
}

#[test]
fn places_round_trip_at_every_width() {
    for obj_bits in [1, 7, 12, 16] {
        let d = Arc::new(Directory::new(0));
        let mut t = HandleTable::new(Some(d.clone()), obj_bits);
        let max = t.max_zspages();
        assert_eq!(u64::from(max), 1 << (32 - obj_bits));
        let last_obj = ((1u32 << obj_bits) - 1) as u16;
        let far = Location {
            zspage: max - 1,
            obj: last_obj,
            len: 1 << 16,
        };
        let near = Location {
            zspage: 0,
            obj: 0,
            len: 1,
        };
        let mixed = Location {
            zspage: 0x5555_5555 & (max - 1),
            obj: 0xaaaa & last_obj,
            len: 0x5a5a,
        };
        let a = t.insert(3, far).unwrap();
        let b = t.insert(3, near).unwrap();
        let c = t.insert(3, mixed).unwrap();
        assert_eq!(t.get(a).unwrap(), far, "obj_bits {obj_bits}");
        assert_eq!(t.get(b).unwrap(), near, "obj_bits {obj_bits}");
        assert_eq!(t.get(c).unwrap(), mixed, "obj_bits {obj_bits}");
        // Relocations swap the extremes; lengths and tags stay.
        t.relocate(a.slot(), 0, 0);
        t.relocate(b.slot(), max - 1, last_obj);
        assert_eq!(
            t.get(a).unwrap(),
            Location {
                len: 1 << 16,
                ..near
            }
        );
        assert_eq!(t.live_entry(b.slot()), Some(Location { len: 1, ..far }));
        // A dying entry keeps its mark through a relocation.
        d.mark_dying(b).unwrap();
        t.relocate(b.slot(), max - 1, last_obj - 1);
        assert_eq!(
            t.get_dying(b).unwrap(),
            Location {
                zspage: max - 1,
                obj: last_obj - 1,
                len: 1
            }
        );
        assert_eq!(fault(t.get(b)), HandleFault::Freed);
        t.remove(b.slot());
        assert_eq!(
            t.claim(a).unwrap(),
            Location {
                len: 1 << 16,
                ..near
            }
        );
        t.remove(a.slot());
        assert_eq!(t.get(c).unwrap(), mixed);
        t.check().unwrap();
    }
}

/// Set the base generation of chunk index `c`, not present, as if a
/// chunk there had been released after reaching it: the way to the top
/// of the generation range without 16383 cycles.
fn set_base(t: &mut HandleTable, c: usize, base: u32) {
    while t.chunks.len() <= c {
        t.chunks.push(None);
        t.base_gen.push(1);
    }
    assert!(t.chunks[c].is_none());
    t.base_gen[c] = base;
}

/// Reuse one slot until its last generation; a neighbour keeps the
/// chunk present. Returns every handle the slot had.
fn reuse_to_the_end(t: &mut HandleTable, start: u32) -> Vec<Handle> {
    let first = t.insert(1, loc(6)).unwrap();
    let mut hs = vec![first];
    for g in start..=MAX_GENERATION {
        let h = *hs.last().unwrap();
        assert_eq!((h.slot(), h.generation()), (first.slot(), g));
        t.claim(h).unwrap();
        t.remove(h.slot());
        if g < MAX_GENERATION {
            hs.push(t.insert(1, loc(6)).unwrap());
        }
    }
    hs
}

#[test]
fn a_slot_is_retired_after_its_last_generation() {
    // Under Miri (slow) the chunk starts near the top of the range.
    let start = if cfg!(miri) { MAX_GENERATION - 50 } else { 1 };
    for directory in [false, true] {
        let d = directory.then(|| Arc::new(Directory::new(0)));
        let mut t = HandleTable::new(d.clone(), OBJ_BITS);
        set_base(&mut t, 0, start);
        let keep = t.insert(1, loc(5)).unwrap();
        let hs = reuse_to_the_end(&mut t, start);
        let slot = hs[0].slot();
        assert_eq!(hs.len() as u32, MAX_GENERATION - start + 1);
        // Retired: never handed out again, every old handle refused.
        assert_eq!(t.retired_slots, 1);
        t.check().unwrap();
        let others: Vec<Handle> = (0..CHUNK).map(|_| t.insert(1, loc(7)).unwrap()).collect();
        assert!(others.iter().all(|h| h.slot() != slot));
        assert_eq!(fault(t.get(*hs.last().unwrap())), HandleFault::Freed);
        for h in &hs[..hs.len() - 1] {
            assert_eq!(fault(t.get(*h)), HandleFault::Stale);
            assert_eq!(fault(t.claim(*h)), HandleFault::Stale);
        }
        if let Some(d) = &d {
            assert!(d.mark_dying(hs[0]).is_err());
            assert!(d.mark_dying(*hs.last().unwrap()).is_err());
        }
        t.check().unwrap();
        // The chunk emptied (while another has room): without a directory
        // it is released, and its index retired (a slot of it had the last
        // generation).
        for h in [&keep].into_iter().chain(others.iter()) {
            t.claim(*h).unwrap();
            t.remove(h.slot());
        }
        if directory {
            assert_eq!((t.retired_slots, t.retired_chunks), (1, 0));
        } else {
            assert_eq!((t.retired_slots, t.retired_chunks), (0, 1));
            assert_eq!(t.base_gen[0], RETIRED_CHUNK);
            let n = t.insert(1, loc(8)).unwrap();
            assert_ne!(n.slot() >> CHUNK_BITS, 0);
            for h in hs.iter().chain([&keep]) {
                assert_eq!(fault(t.get(*h)), HandleFault::Freed);
            }
        }
        t.check().unwrap();
    }
}

#[test]
fn a_chunk_made_again_starts_above_every_generation_it_had() {
    let mut t = HandleTable::new(None, OBJ_BITS).without_spare();
    let a = t.insert(1, loc(5)).unwrap();
    let b = t.insert(1, loc(5)).unwrap();
    // Slot a to generation 10; b stays at 1.
    let mut a_handles = vec![a];
    for _ in 1..10 {
        let h = *a_handles.last().unwrap();
        t.claim(h).unwrap();
        t.remove(h.slot());
        a_handles.push(t.insert(1, loc(5)).unwrap());
    }
    assert_eq!(a_handles.last().unwrap().generation(), 10);
    for h in [*a_handles.last().unwrap(), b] {
        t.claim(h).unwrap();
        t.remove(h.slot());
    }
    assert!(t.chunks[0].is_none());
    // Exactly above the highest generation handed out: none skipped.
    assert_eq!(t.base_gen[0], 11);
    let n = t.insert(1, loc(5)).unwrap();
    assert_eq!((n.slot(), n.generation()), (a.slot(), 11));
    let m = t.insert(1, loc(5)).unwrap();
    assert_eq!((m.slot(), m.generation()), (b.slot(), 11));
    for h in a_handles.iter().chain([&b]) {
        assert_eq!(fault(t.get(*h)), HandleFault::Stale);
    }
    t.check().unwrap();
    // A released chunk refuses generations it never handed out as
    // forged, older ones as freed.
    for h in [n, m] {
        t.claim(h).unwrap();
        t.remove(h.slot());
    }
    assert_eq!(fault(t.get(n)), HandleFault::Freed);
    assert_eq!(
        fault(t.get(Handle::new(1, n.slot(), 12))),
        HandleFault::Stale
    );
}

#[test]
fn a_lone_slot_cycles_through_its_kept_chunk() {
    // The default table keeps one emptied chunk: an object allocated and
    // freed alone reuses the chunk's slots, and no chunk index retires
    // until all 64 slots have reached the last generation.
    let mut t = HandleTable::new(None, OBJ_BITS);
    // Under Miri, start near the end of the generations (16383 cycles a
    // slot would take minutes there).
    let start = if cfg!(miri) { MAX_GENERATION - 20 } else { 1 };
    if start > 1 {
        set_base(&mut t, 0, start);
    }
    let first = t.insert(1, loc(8)).unwrap();
    t.claim(first).unwrap();
    t.remove(first.slot());
    let bytes = t.metadata_bytes();
    for _ in 0..3 * (MAX_GENERATION - start + 1) as usize {
        let h = t.insert(1, loc(8)).unwrap();
        assert_eq!(h.slot() >> CHUNK_BITS, 0, "the kept chunk is reused");
        t.claim(h).unwrap();
        t.remove(h.slot());
        assert_eq!(fault(t.get(first)), HandleFault::Stale);
    }
    assert_eq!(t.metadata_bytes(), bytes, "no chunk was made or released");
    assert_eq!(t.retired_chunks, 0);
    assert_eq!(t.retired_slots, 3);
    t.check().unwrap();
}

#[test]
fn a_lone_slot_reused_to_the_end_retires_its_chunk_index() {
    // The chunk is released and made again at every free; its
    // generations go up by one each time, none skipped.
    let start = if cfg!(miri) { MAX_GENERATION - 50 } else { 1 };
    let mut t = HandleTable::new(None, OBJ_BITS).without_spare();
    set_base(&mut t, 0, start);
    let hs = reuse_to_the_end(&mut t, start);
    assert_eq!(hs.len() as u32, MAX_GENERATION - start + 1);
    assert!(t.chunks[0].is_none());
    assert_eq!((t.retired_slots, t.retired_chunks), (0, 1));
    t.check().unwrap();
    let n = t.insert(1, loc(6)).unwrap();
    assert_eq!((n.slot(), n.generation()), (CHUNK as u32, 1));
    for h in &hs {
        assert_eq!(fault(t.get(*h)), HandleFault::Freed);
        assert_eq!(fault(t.claim(*h)), HandleFault::Freed);
    }
    t.check().unwrap();
}

#[test]
fn a_class_with_every_slot_retired_refuses_new_objects() {
    // Without a directory: two chunk indices, each retired by a lone
    // slot at the top generation.
    let mut t = HandleTable::new(None, OBJ_BITS)
        .without_spare()
        .with_chunk_limit(2);
    for c in 0..2 {
        set_base(&mut t, c, MAX_GENERATION);
        let h = t.insert(4, loc(5)).unwrap();
        assert_eq!(h.slot() >> CHUNK_BITS, c as u32);
        t.claim(h).unwrap();
        t.remove(h.slot());
    }
    assert_eq!(t.retired_chunks, 2);
    assert_eq!(
        t.insert(4, loc(5)),
        Err(Error::HandlesExhausted { class: 4 })
    );
    t.check().unwrap();
    // With a directory: one chunk whose every slot is retired.
    let d = Arc::new(Directory::new(0));
    let mut t = HandleTable::new(Some(d), OBJ_BITS).with_chunk_limit(1);
    set_base(&mut t, 0, MAX_GENERATION);
    let hs: Vec<Handle> = (0..CHUNK).map(|_| t.insert(4, loc(5)).unwrap()).collect();
    for h in &hs {
        t.claim(*h).unwrap();
        t.remove(h.slot());
    }
    assert_eq!((t.retired_slots, t.live()), (CHUNK, 0));
    t.check().unwrap();
    let err = t.insert(4, loc(5)).unwrap_err();
    assert_eq!(err, Error::HandlesExhausted { class: 4 });
    assert!(err.to_string().contains("no handle slot left"), "{err}");
    for h in &hs {
        assert_eq!(fault(t.get(*h)), HandleFault::Freed);
    }
}

#[test]
fn a_full_table_costs_under_9_bytes_an_entry() {
    let chunks = if cfg!(miri) { 4 } else { 100 };
    let mut t = HandleTable::new(None, OBJ_BITS);
    for _ in 0..chunks * CHUNK {
        t.insert(1, loc(10)).unwrap();
    }
    assert!(
        t.metadata_bytes() <= 9 * t.live(),
        "{} bytes for {} entries",
        t.metadata_bytes(),
        t.live()
    );
}

/// A new object of `len` bytes at `loc`, freed by parking its slot.
fn parked(t: &mut HandleTable, len: usize) -> Handle {
    let h = t.insert(5, loc(len)).unwrap();
    t.claim(h).unwrap();
    assert!(t.park(h.slot()));
    h
}

#[test]
fn a_parked_slot_is_dead_keeps_its_place_and_is_revived_with_a_new_generation() {
    let mut t = HandleTable::new(None, OBJ_BITS);
    let other = t.insert(5, loc(200)).unwrap();
    let a = parked(&mut t, 100);
    t.check().unwrap();
    assert_eq!((t.live(), t.parked()), (1, 1));
    // Dead for every use, as after any free; the place is kept.
    assert_eq!(fault(t.get(a)), HandleFault::Freed);
    assert_eq!(fault(t.claim(a)), HandleFault::Freed);
    assert_eq!(
        t.parked_place(a.slot()).map(|l| (l.zspage, l.obj)),
        Some((3, 7))
    );
    assert_eq!(t.parked_place(other.slot()), None);
    // A lock-free mark (deferred free) refuses it too.
    let d = Arc::new(Directory::new(1));
    let mut dt = HandleTable::new(Some(d.clone()), OBJ_BITS);
    let x = parked(&mut dt, 10);
    assert!(d.mark_dying(x.tagged(1)).is_err());
    // Revived: the same slot and place, the next generation, the new length.
    let (b, l) = t.revive(5, a.slot(), 300);
    assert_eq!((b.slot(), b.generation()), (a.slot(), a.generation() + 1));
    assert_eq!((l.zspage, l.obj, l.len), (3, 7, 300));
    assert_eq!(t.get(b).unwrap(), l);
    assert_eq!(fault(t.get(a)), HandleFault::Stale);
    assert_eq!((t.live(), t.parked()), (2, 0));
    t.check().unwrap();
}

#[test]
fn an_unparked_slot_is_free_and_a_parked_one_keeps_its_chunk() {
    let mut t = HandleTable::new(None, OBJ_BITS).without_spare();
    let a = parked(&mut t, 100);
    // The chunk's only entry is parked: the chunk stays.
    t.check().unwrap();
    assert!(t.parked_place(a.slot()).is_some());
    // Compaction may move a parked slot's object, as a live one's.
    t.relocate(a.slot(), 1, 2);
    assert_eq!(
        t.parked_place(a.slot()).map(|l| (l.zspage, l.obj)),
        Some((1, 2))
    );
    let l = t.unpark(a.slot());
    assert_eq!((l.zspage, l.obj), (1, 2));
    assert_eq!((t.live(), t.parked()), (0, 0));
    // Freed for good: its chunk is released, the handle stays dead.
    t.check().unwrap();
    assert_eq!(fault(t.get(a)), HandleFault::Freed);
    let b = t.insert(5, loc(10)).unwrap();
    assert!(b.generation() > a.generation());
    t.check().unwrap();
}

#[test]
fn a_slot_at_its_last_generation_is_not_parked_but_retired() {
    let mut t = HandleTable::new(None, OBJ_BITS).without_spare();
    // A chunk made again starts at its base generation: start near the end.
    let h = t.insert(5, loc(1)).unwrap();
    t.claim(h).unwrap();
    t.remove(h.slot());
    t.base_gen[0] = MAX_GENERATION - 3;
    let mut h = t.insert(5, loc(100)).unwrap();
    assert_eq!(h.generation(), MAX_GENERATION - 3);
    // Park and revive until the generation is the last.
    while h.generation() < MAX_GENERATION {
        t.claim(h).unwrap();
        assert!(t.park(h.slot()));
        h = t.revive(5, h.slot(), 100).0;
    }
    t.check().unwrap();
    t.claim(h).unwrap();
    assert!(!t.park(h.slot()), "the last generation is never parked");
    t.remove(h.slot());
    t.check().unwrap();
    assert_eq!(fault(t.get(h)), HandleFault::Freed);
    // The next object gets another slot.
    assert_ne!(t.insert(5, loc(1)).unwrap().slot(), h.slot());
}
