//! Parked slots (`PoolConfig::parked_slots`): a freed slot kept for the
//! class's next store is dead to its handle at once, counts as free in
//! every figure, holds no page of its own, and is freed for good before
//! compaction.

mod common;

use common::pattern;
use zsmem::{CompactionPolicy, Error, HandleFault, PageReturn, Pool, PoolConfig};

/// One class for 1000-byte objects, pages given back at once, no automatic
/// compaction: what a free does is visible in the figures right away.
fn pool(parked_slots: usize) -> Pool {
    Pool::new(PoolConfig {
        compaction: CompactionPolicy::Off,
        class_grid: 1,
        class_shards: 1,
        page_return: PageReturn::Immediate,
        parked_slots,
        ..PoolConfig::default()
    })
    .unwrap()
}

fn fault<T: std::fmt::Debug>(r: zsmem::Result<T>) -> HandleFault {
    match r {
        Err(Error::InvalidHandle { fault, .. }) => fault,
        other => panic!("expected an invalid handle, got {other:?}"),
    }
}

/// Store a 1000-byte anchor, then store and free one object beside it
/// `times` times and store once more: each store after the first takes
/// back the slot the free before it parked, which lets the class park one
/// slot more at once. Returns the anchor and the last object, live.
fn churn(pool: &Pool, times: usize) -> [zsmem::Handle; 2] {
    let anchor = pool.store(&[1; 1000]).unwrap();
    for i in 0..times {
        let h = pool.store(&pattern(i as u64, 1000)).unwrap();
        pool.free(h).unwrap();
    }
    [anchor, pool.store(&[2; 1000]).unwrap()]
}

/// The class statistics of the class holding 1000-byte objects.
fn class_of_1000(pool: &Pool) -> zsmem::ClassStats {
    let size = pool.size_classes().physical_for(1000).size;
    pool.class_stats()
        .into_iter()
        .find(|c| c.size == size)
        .unwrap()
}

#[test]
fn a_parked_slot_is_free_in_every_figure_and_taken_by_the_next_store() {
    let pool = pool(16);
    let per = pool.size_classes().physical_for(1000).objs_per_zspage;
    let hs: Vec<_> = (0..3 * per)
        .map(|i| pool.store(&pattern(i as u64, 1000)).unwrap())
        .collect();
    let before = pool.stats();
    pool.free(hs[1]).unwrap();
    assert_eq!(class_of_1000(&pool).parked, 1);
    let s = pool.stats();
    assert_eq!(s.objects, before.objects - 1);
    assert_eq!(s.bytes_stored, before.bytes_stored - 1000);
    assert_eq!(s.pages_held, before.pages_held);
    // The free slot shows as waste, as any free slot in committed pages.
    assert!(s.waste.partial_bytes > before.waste.partial_bytes);
    assert_eq!(class_of_1000(&pool).obj_used, 3 * per - 1);
    // Dead at once: a use, or a second free, is refused.
    assert_eq!(fault(pool.read_vec(hs[1])), HandleFault::Freed);
    assert_eq!(fault(pool.free(hs[1])), HandleFault::Freed);
    pool.check_invariants().unwrap();
    // The next store takes the slot back: no new zspage.
    let n = pool.store(&[7; 1000]).unwrap();
    assert_eq!(pool.read_vec(n).unwrap(), vec![7; 1000]);
    assert_eq!(class_of_1000(&pool).parked, 0);
    assert_eq!(class_of_1000(&pool).obj_allocated, 3 * per);
    assert_eq!(pool.stats().pages_held, before.pages_held);
    // The old handle names the slot's earlier object: still refused.
    assert_eq!(fault(pool.read_vec(hs[1])), HandleFault::Stale);
    for (i, &h) in hs.iter().enumerate().filter(|&(i, _)| i != 1) {
        assert_eq!(pool.read_vec(h).unwrap(), pattern(i as u64, 1000));
    }
    pool.check_invariants().unwrap();
}

#[test]
fn a_zspage_goes_back_with_its_last_live_object_and_its_parked_slots() {
    for parked in [1, 16, zsmem::MAX_PARKED_SLOTS] {
        let pool = pool(parked);
        let per = pool.size_classes().physical_for(1000).objs_per_zspage;
        let hs: Vec<_> = (0..per)
            .map(|i| pool.store(&pattern(i as u64, 1000)).unwrap())
            .collect();
        let warm = churn(&pool, parked);
        // The frees park their slots (up to `parked`).
        for &h in &hs[..per - 1] {
            pool.free(h).unwrap();
            pool.check_invariants().unwrap();
        }
        assert_eq!(class_of_1000(&pool).parked, parked.min(per - 1));
        // Its zspage and the anchor's.
        assert_eq!(class_of_1000(&pool).obj_allocated, 2 * per);
        pool.free(hs[per - 1]).unwrap();
        assert_eq!(class_of_1000(&pool).obj_allocated, per);
        for h in warm {
            pool.free(h).unwrap();
        }
        let s = pool.stats();
        assert_eq!((s.objects, s.pages_held), (0, 0), "{parked} parked slots");
        assert_eq!(class_of_1000(&pool).obj_allocated, 0);
        pool.check_invariants().unwrap();
    }
}

#[test]
fn compaction_frees_parked_slots_first() {
    // The same frees with and without parking leave the same zspages after
    // compaction: each zspage keeps only its first object (16 of the
    // freed slots are parked), and compaction gathers the four objects in
    // one zspage's first page whichever zspage it fills (its outcome can
    // otherwise depend on the order of zspages within a fullness group,
    // which parking changes).
    let layouts: Vec<_> = [0, 16]
        .into_iter()
        .map(|parked| {
            let pool = pool(parked);
            let per = pool.size_classes().physical_for(1000).objs_per_zspage;
            let hs: Vec<_> = (0..4 * per)
                .map(|i| pool.store(&pattern(i as u64, 1000)).unwrap())
                .collect();
            let [_, last] = churn(&pool, parked);
            pool.free(last).unwrap();
            for (_, &h) in hs.iter().enumerate().filter(|(i, _)| i % per != 0) {
                pool.free(h).unwrap();
            }
            assert_eq!(class_of_1000(&pool).parked, parked.min(per - 1));
            pool.compact();
            assert_eq!(class_of_1000(&pool).parked, 0);
            pool.check_invariants().unwrap();
            for (i, &h) in hs.iter().enumerate().filter(|(i, _)| i % per == 0) {
                assert_eq!(pool.read_vec(h).unwrap(), pattern(i as u64, 1000));
            }
            let c = class_of_1000(&pool);
            (
                c.obj_allocated,
                c.obj_used,
                c.pages_used,
                pool.stats().pages_held,
            )
        })
        .collect();
    assert_eq!(layouts[0], layouts[1]);
    // The four objects and the anchor.
    assert_eq!(layouts[0].1, 5);
}

#[test]
fn a_slot_reused_past_its_last_generation_never_revives_an_old_handle() {
    let pool = pool(16);
    // An object that keeps the zspage live, so the churned slot is parked.
    let anchor = pool.store(&[1; 1000]).unwrap();
    let cycles = if cfg!(miri) { 300 } else { 20_000 };
    let mut old = Vec::new();
    for i in 0..cycles {
        let h = pool.store(&pattern(i, 1000)).unwrap();
        assert_eq!(pool.read_vec(h).unwrap(), pattern(i, 1000));
        pool.free(h).unwrap();
        old.push(h);
    }
    // Every handle is unique and every one is refused.
    let mut raw: Vec<_> = old.iter().map(|h| h.to_raw()).collect();
    raw.sort_unstable();
    raw.dedup();
    assert_eq!(raw.len(), old.len());
    for &h in old.iter().step_by(97).chain(old.last()) {
        assert!(pool.read_vec(h).is_err());
        assert!(pool.free(h).is_err());
    }
    assert_eq!(pool.read_vec(anchor).unwrap(), vec![1; 1000]);
    pool.check_invariants().unwrap();
    pool.free(anchor).unwrap();
    assert_eq!(pool.stats().pages_held, 0);
}

#[test]
fn the_kernels_configuration_parks_nothing_and_too_many_is_an_error() {
    assert_eq!(PoolConfig::kernel().parked_slots, 0);
    assert_eq!(
        PoolConfig::default().parked_slots,
        zsmem::DEFAULT_PARKED_SLOTS
    );
    let err = Pool::new(PoolConfig {
        parked_slots: zsmem::MAX_PARKED_SLOTS + 1,
        ..PoolConfig::default()
    })
    .unwrap_err();
    assert!(err.to_string().contains("parked_slots"), "{err}");
}

#[test]
fn the_zspage_new_objects_go_to_parks_even_when_a_free_drops_its_group() {
    let pool = pool(16);
    let per = pool.size_classes().physical_for(1000).objs_per_zspage;
    // A use count one above a group boundary (the kernel's groups: 10 *
    // inuse / objs + 1).
    let group = |inuse: usize| 10 * inuse / per + 1;
    let n = (2..per).find(|&n| group(n) != group(n - 1)).unwrap();
    let hs: Vec<_> = (0..n)
        .map(|i| pool.store(&pattern(i as u64, 1000)).unwrap())
        .collect();
    // The class's only zspage: the next store goes there in any case, so
    // the free parks and the zspage keeps its group.
    pool.free(hs[0]).unwrap();
    let c = class_of_1000(&pool);
    assert_eq!((c.obj_allocated, c.obj_used), (per, n - 1));
    assert_eq!(c.fullness[group(n) - 1], 1, "{:?}", c.fullness);
    pool.check_invariants().unwrap();
}

#[test]
fn a_class_parks_as_many_slots_as_its_stores_take_back() {
    let pool = pool(16);
    let per = pool.size_classes().physical_for(1000).objs_per_zspage;
    let mut hs: Vec<_> = (0..3 * per)
        .map(|i| pool.store(&pattern(i as u64, 1000)).unwrap())
        .collect();
    // Rounds of 8 frees then 8 stores: each store that takes a parked slot
    // lets one more be parked, up to 8 (the burst) here.
    let mut parked_per_round = Vec::new();
    for round in 0..6 {
        let gone: Vec<_> = hs.drain(..8).collect();
        for h in gone {
            pool.free(h).unwrap();
        }
        parked_per_round.push(class_of_1000(&pool).parked);
        pool.check_invariants().unwrap();
        for i in 0..8 {
            hs.push(pool.store(&pattern(1000 + round * 8 + i, 1000)).unwrap());
        }
    }
    // The last rounds' stores took 8 parked slots each: 16 may be parked.
    assert_eq!(parked_per_round, [1, 2, 4, 8, 8, 8]);
    // A long run of frees with no store between parks up to 16; each
    // zspage that goes back with parked slots no store took halves that.
    let mut peak = 0;
    for h in hs.drain(..) {
        pool.free(h).unwrap();
        peak = peak.max(class_of_1000(&pool).parked);
    }
    assert_eq!(peak, 16);
    assert_eq!(class_of_1000(&pool).parked, 0);
    let hs: Vec<_> = (0..3 * per)
        .map(|i| pool.store(&pattern(i as u64, 1000)).unwrap())
        .collect();
    for &h in &hs[..20] {
        pool.free(h).unwrap();
    }
    assert!(class_of_1000(&pool).parked <= 8);
    for &h in &hs[20..] {
        pool.free(h).unwrap();
    }
    let s = pool.stats();
    assert_eq!((s.objects, s.pages_held), (0, 0));
    pool.check_invariants().unwrap();
}
