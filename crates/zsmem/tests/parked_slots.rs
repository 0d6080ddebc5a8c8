//! Parked slots (`PoolConfig::parked_slots`): a freed slot kept for the
//! class's next store is dead to its handle at once, counts as free in
//! every figure, holds no page of its own, and is freed for good before
//! compaction. In a pool with lock-free reads (the default) slots are
//! parked in the freeing thread's magazine, without the class lock
//! (`magazine_*` tests below); without them, on the class's own list.

mod common;

use common::pattern;
use zsmem::{CompactionPolicy, Error, HandleFault, PageReturn, Pool, PoolConfig};

/// One class for 1000-byte objects, pages given back at once, no automatic
/// compaction: what a free does is visible in the figures right away.
/// Without lock-free reads, so slots are parked on the class's own list.
fn pool(parked_slots: usize) -> Pool {
    Pool::new(PoolConfig {
        lock_free_reads: false,
        ..config(parked_slots)
    })
    .unwrap()
}

fn config(parked_slots: usize) -> PoolConfig {
    PoolConfig {
        compaction: CompactionPolicy::Off,
        class_grid: 1,
        class_shards: 1,
        page_return: PageReturn::Immediate,
        parked_slots,
        ..PoolConfig::default()
    }
}

/// As [`pool`], with lock-free reads: frees park slots in magazines.
fn magazine_pool(parked_slots: usize) -> Pool {
    Pool::new(config(parked_slots)).unwrap()
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

/// Fill three zspages of 1000-byte objects and free the second object:
/// its slot is parked and free in every figure. Returns the handles, the
/// figures before the free and the objects a zspage holds.
fn fill_and_park_one(pool: &Pool) -> (Vec<zsmem::Handle>, zsmem::PoolStats, usize) {
    let per = pool.size_classes().physical_for(1000).objs_per_zspage;
    let hs: Vec<_> = (0..3 * per)
        .map(|i| pool.store(&pattern(i as u64, 1000)).unwrap())
        .collect();
    let before = pool.stats();
    pool.free(hs[1]).unwrap();
    assert_eq!(class_of_1000(pool).parked, 1);
    let s = pool.stats();
    assert_eq!(s.objects, before.objects - 1);
    assert_eq!(s.bytes_stored, before.bytes_stored - 1000);
    assert_eq!(s.pages_held, before.pages_held);
    // The free slot shows as waste, as any free slot in committed pages.
    assert!(s.waste.partial_bytes > before.waste.partial_bytes);
    assert_eq!(class_of_1000(pool).obj_used, 3 * per - 1);
    (hs, before, per)
}

#[test]
fn a_parked_slot_is_free_in_every_figure_and_taken_by_the_next_store() {
    let pool = pool(16);
    let (hs, before, per) = fill_and_park_one(&pool);
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
    reuse_past_the_last_generation(&pool(16));
}

/// Store and free one object over and over (an anchor keeps the zspage
/// live, so the slot is parked and reused) past the slot's last
/// generation: every handle is unique and every old one is refused; the
/// pool ends with nothing held (one thread: neither the class's list nor
/// its magazine holds all of a zspage's slots).
fn reuse_past_the_last_generation(pool: &Pool) {
    let anchor = pool.store(&[1; 1000]).unwrap();
    let cycles = if cfg!(miri) { 300 } else { 20_000 };
    let mut old = Vec::new();
    for i in 0..cycles {
        let h = pool.store(&pattern(i, 1000)).unwrap();
        assert_eq!(pool.read_vec(h).unwrap(), pattern(i, 1000));
        pool.free(h).unwrap();
        old.push(h);
    }
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
    pool.check_invariants().unwrap();
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

#[test]
fn magazine_a_parked_slot_is_free_in_every_figure_and_taken_by_the_next_store() {
    let pool = magazine_pool(16);
    let (hs, before, _) = fill_and_park_one(&pool);
    pool.check_invariants().unwrap();
    // Dead at once: a use, a second free, a write are refused.
    assert_eq!(fault(pool.read_vec(hs[1])), HandleFault::Freed);
    assert_eq!(fault(pool.free(hs[1])), HandleFault::Freed);
    assert_eq!(fault(pool.write(hs[1], b"x")), HandleFault::Freed);
    // The next store takes the slot back (the same slot: a stale handle to
    // it is refused as stale, not freed).
    let n = pool.store(&[7; 1000]).unwrap();
    assert_eq!(
        n.to_raw() & ((1 << 29) - 1),
        hs[1].to_raw() & ((1 << 29) - 1)
    );
    assert_eq!(pool.read_vec(n).unwrap(), vec![7; 1000]);
    let mut buf = vec![0; 1000];
    assert_eq!(pool.read(n, &mut buf).unwrap(), 1000);
    assert_eq!(buf, vec![7; 1000]);
    assert_eq!(fault(pool.read_vec(hs[1])), HandleFault::Stale);
    assert_eq!(fault(pool.free(hs[1])), HandleFault::Stale);
    assert_eq!(class_of_1000(&pool).parked, 0);
    assert_eq!(pool.stats().objects, before.objects);
    assert_eq!(pool.stats().bytes_stored, before.bytes_stored);
    pool.check_invariants().unwrap();
    for (i, &h) in hs.iter().enumerate() {
        if i != 1 {
            pool.free(h).unwrap();
        }
    }
    pool.free(n).unwrap();
    pool.flush();
    let s = pool.stats();
    assert_eq!((s.objects, s.bytes_stored, s.pages_held), (0, 0, 0));
    pool.check_invariants().unwrap();
}

#[test]
fn magazine_misuse_is_an_error_never_another_objects_data() {
    let pool = magazine_pool(16);
    let other = magazine_pool(16);
    let anchor = pool.store(&[1; 1000]).unwrap();
    let h = pool.store(&[2; 1000]).unwrap();
    // A foreign handle: refused before anything is read, by both paths.
    let foreign = other.store(&[3; 1000]).unwrap();
    assert_eq!(fault(pool.free(foreign)), HandleFault::ForeignPool);
    assert_eq!(other.read_vec(foreign).unwrap(), vec![3; 1000]);
    // Double free through the magazine.
    pool.free(h).unwrap();
    assert_eq!(fault(pool.free(h)), HandleFault::Freed);
    // Revived for a new object: the old handle is stale, the new one's
    // bytes are its own.
    let n = pool.store(&[4; 1000]).unwrap();
    assert_eq!(fault(pool.free(h)), HandleFault::Stale);
    assert_eq!(fault(pool.read_vec(h)), HandleFault::Stale);
    assert_eq!(fault(pool.write(h, b"x")), HandleFault::Stale);
    assert_eq!(pool.read_vec(n).unwrap(), vec![4; 1000]);
    // Forged: a later generation of the slot.
    let forged = zsmem::Handle::from_raw(n.to_raw() + (1 << 41));
    assert!(pool.free(forged).is_err());
    assert_eq!(pool.read_vec(n).unwrap(), vec![4; 1000]);
    // Racing double frees from two threads: exactly one succeeds.
    for _ in 0..if cfg!(miri) { 10 } else { 200 } {
        let h = pool.store(&[5; 1000]).unwrap();
        let wins = std::thread::scope(|s| {
            let a = s.spawn(|| pool.free(h).is_ok());
            let b = s.spawn(|| pool.free(h).is_ok());
            usize::from(a.join().unwrap()) + usize::from(b.join().unwrap())
        });
        assert_eq!(wins, 1);
    }
    assert_eq!(pool.read_vec(anchor).unwrap(), vec![1; 1000]);
    pool.check_invariants().unwrap();
    assert_eq!(pool.stats().objects, 2);
}

#[test]
fn magazine_a_slot_reused_past_its_last_generation_never_revives_an_old_handle() {
    reuse_past_the_last_generation(&magazine_pool(16));
}

#[test]
fn magazine_compaction_takes_parked_slots_back_first() {
    let pool = magazine_pool(16);
    let per = pool.size_classes().physical_for(1000).objs_per_zspage;
    let hs: Vec<_> = (0..4 * per)
        .map(|i| pool.store(&pattern(i as u64, 1000)).unwrap())
        .collect();
    let [_, last] = churn(&pool, 16);
    pool.free(last).unwrap();
    for (_, &h) in hs.iter().enumerate().filter(|(i, _)| i % per != 0) {
        pool.free(h).unwrap();
    }
    assert!(class_of_1000(&pool).parked > 0);
    pool.compact();
    assert_eq!(class_of_1000(&pool).parked, 0);
    pool.check_invariants().unwrap();
    for (i, &h) in hs.iter().enumerate().filter(|(i, _)| i % per == 0) {
        assert_eq!(pool.read_vec(h).unwrap(), pattern(i as u64, 1000));
    }
    // The four objects and the anchor, in as few pages as without
    // magazines.
    let c = class_of_1000(&pool);
    assert_eq!(c.obj_used, 5);
    let without = pool_layout_without_magazines();
    assert_eq!((c.obj_allocated, c.pages_used), without);
}

fn pool_layout_without_magazines() -> (usize, usize) {
    let pool = pool(0);
    let per = pool.size_classes().physical_for(1000).objs_per_zspage;
    let hs: Vec<_> = (0..4 * per)
        .map(|i| pool.store(&pattern(i as u64, 1000)).unwrap())
        .collect();
    let [_, last] = churn(&pool, 16);
    pool.free(last).unwrap();
    for (_, &h) in hs.iter().enumerate().filter(|(i, _)| i % per != 0) {
        pool.free(h).unwrap();
    }
    pool.compact();
    let c = class_of_1000(&pool);
    (c.obj_allocated, c.pages_used)
}

/// Threads that store and free objects of several sizes, each then
/// exiting with slots in its magazines: the slots go to the pool's orphan
/// list and back to their classes; the figures stay exact throughout, and
/// the pool gives every page back.
#[test]
fn magazine_slots_of_exited_threads_go_back_and_figures_stay_exact() {
    let pool = magazine_pool(16);
    let keep = std::sync::Mutex::new(Vec::new());
    let rounds = if cfg!(miri) { 2 } else { 40 };
    for round in 0..rounds {
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let (pool, keep) = (&pool, &keep);
                s.spawn(move || {
                    let mut mine = Vec::new();
                    for i in 0..64u64 {
                        let len = [100, 1000, 3000][(i % 3) as usize];
                        let seed = round * 1000 + t * 100 + i;
                        mine.push((pool.store(&pattern(seed, len)).unwrap(), seed, len));
                        if i % 2 == 1 {
                            let (h, seed, len) = mine.swap_remove(0);
                            assert_eq!(pool.read_vec(h).unwrap(), pattern(seed, len));
                            pool.free(h).unwrap();
                        }
                    }
                    // Keep one object of each thread; free the rest.
                    let kept = mine.pop().unwrap();
                    for (h, _, _) in mine {
                        pool.free(h).unwrap();
                    }
                    keep.lock().unwrap().push(kept);
                });
            }
        });
        pool.check_invariants().unwrap();
        let kept = keep.lock().unwrap();
        let s = pool.stats();
        assert_eq!(s.objects, kept.len());
        assert_eq!(s.bytes_stored, kept.iter().map(|k| k.2).sum::<usize>());
        for &(h, seed, len) in kept.iter() {
            assert_eq!(pool.read_vec(h).unwrap(), pattern(seed, len));
        }
    }
    for (h, _, _) in keep.into_inner().unwrap() {
        pool.free(h).unwrap();
    }
    pool.flush();
    let s = pool.stats();
    assert_eq!((s.objects, s.bytes_stored, s.pages_held), (0, 0, 0));
    pool.check_invariants().unwrap();
}

/// A pool dropped while a thread still has slots of it in its magazines:
/// the thread goes on with another pool, and exits, harmlessly.
#[test]
fn magazine_a_pool_dropped_before_its_threads_is_harmless() {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (back, done) = std::sync::mpsc::channel::<()>();
    let pool = std::sync::Arc::new(magazine_pool(16));
    let t = {
        let pool = pool.clone();
        std::thread::spawn(move || {
            let anchor = pool.store(&[1; 1000]).unwrap();
            let h = pool.store(&[2; 1000]).unwrap();
            pool.free(h).unwrap();
            let _ = anchor;
            drop(pool);
            back.send(()).unwrap();
            rx.recv().unwrap();
            // The first pool is gone; a new one (perhaps at the same
            // address, with the same tag) is another pool to the magazines.
            let p2 = magazine_pool(16);
            let h = p2.store(&[3; 1000]).unwrap();
            p2.free(h).unwrap();
            let n = p2.store(&[4; 1000]).unwrap();
            assert_eq!(p2.read_vec(n).unwrap(), vec![4; 1000]);
            p2.check_invariants().unwrap();
        })
    };
    done.recv().unwrap();
    drop(std::sync::Arc::into_inner(pool).expect("the thread let its reference go"));
    tx.send(()).unwrap();
    t.join().unwrap();
}

/// A stream of frees fills a magazine past its budget; the full magazine
/// gives its oldest slots to the class in one batch (under one lock, with
/// the default pool's automatic compaction taking parked slots back in
/// the same hold). Every figure stays exact after each round, every
/// object reads back, and a pool emptied by frees alone holds no page.
#[test]
fn magazine_a_full_magazine_gives_its_oldest_slots_back_in_a_batch() {
    let pool = Pool::new(PoolConfig::default()).unwrap();
    let mut live = Vec::new();
    let mut x: u64 = 0x5EED;
    let mut next = |n: usize| {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) as usize % n
    };
    // Under Miri, enough rounds for batches to go back with compaction's
    // take-backs in the same hold (the first such round is the fourth).
    let rounds = if cfg!(miri) { 8 } else { 200 };
    for round in 0..rounds {
        for _ in 0..64 {
            let (seed, len) = (next(1 << 20) as u64, 1600 + next(200));
            live.push((pool.store(&pattern(seed, len)).unwrap(), seed, len));
        }
        while live.len() > 64 {
            let (h, _, _) = live.swap_remove(next(live.len() / 2));
            pool.free(h).unwrap();
        }
        pool.check_invariants()
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        let s = pool.stats();
        assert_eq!(s.objects, live.len(), "round {round}");
    }
    for &(h, seed, len) in &live {
        assert_eq!(pool.read_vec(h).unwrap(), pattern(seed, len));
    }
    // Frees alone, no store after them: the magazine's batches and the
    // last live objects' locked frees give every zspage back.
    for (h, _, _) in live.drain(..) {
        pool.free(h).unwrap();
    }
    pool.check_invariants().unwrap();
    assert_eq!(pool.stats().objects, 0);
    assert_eq!(pool.stats().pages_held, 0);
}

/// A run of frees in one class, with no store between them, parks at most
/// 4 slots past the magazine's budget (one, with no store yet) before it
/// gives them back; after stores took slots back (budget up), at most the
/// capacity, and half of it after a batch. At every capacity, small ones
/// too (half of 1 is 0: the batch is every slot but the one just parked),
/// figures exact after every free, and no page left when all are freed.
#[test]
fn magazine_a_run_of_frees_parks_at_most_four_past_the_budget() {
    for capacity in [1, 2, 3, 4, 5, 8, 16] {
        let pool = magazine_pool(capacity);
        let per = pool.size_classes().physical_for(1000).objs_per_zspage;
        let hs: Vec<_> = (0..4 * per)
            .map(|i| pool.store(&pattern(i as u64, 1000)).unwrap())
            .collect();
        let mut most = 0;
        for (k, &h) in hs.iter().enumerate() {
            pool.free(h).unwrap();
            let parked = class_of_1000(&pool).parked;
            most = most.max(parked);
            assert!(
                parked <= capacity.min(1 + 4),
                "capacity {capacity}, free {k}: {parked} parked"
            );
            assert_eq!(pool.stats().objects, hs.len() - k - 1);
        }
        pool.check_invariants().unwrap();
        assert!(
            most >= capacity.min(2),
            "capacity {capacity}: {most} parked at most"
        );
        assert_eq!(pool.stats().pages_held, 0, "capacity {capacity}");
        // Stores that take parked slots back raise the budget to the
        // capacity; a run of frees then parks up to it, and a batch keeps
        // at most half.
        let hs: Vec<_> = (0..4 * per)
            .map(|i| pool.store(&pattern(i as u64, 1000)).unwrap())
            .collect();
        for _ in 0..2 * capacity {
            let h = pool.store(&[1; 1000]).unwrap();
            pool.free(h).unwrap();
        }
        for (k, &h) in hs.iter().enumerate() {
            pool.free(h).unwrap();
            let parked = class_of_1000(&pool).parked;
            assert!(
                parked <= capacity,
                "capacity {capacity}, free {k}: {parked} parked"
            );
        }
        pool.check_invariants().unwrap();
        assert_eq!(pool.stats().pages_held, 0, "capacity {capacity}");
    }
}

/// With more parked slots a thread than the locked free's scan looks at
/// (16), and zspages of more objects than that: a thread that frees every
/// object of a class gives every zspage back (the scan reaches as far as
/// a magazine holds). It kept zspages of its own parked slots before.
#[test]
fn magazine_a_deep_magazine_keeps_no_zspage_of_parked_slots_alone() {
    let pool = magazine_pool(64);
    let anchor = pool.store(&[1; 1000]).unwrap();
    let hs: Vec<_> = (0..200)
        .map(|i| pool.store(&pattern(i, 1000)).unwrap())
        .collect();
    // Store and free pairs: each store takes the slot its free parked,
    // which raises the magazine's budget to its capacity.
    for i in 0..100 {
        let h = pool.store(&pattern(i, 1000)).unwrap();
        pool.free(h).unwrap();
    }
    for h in hs {
        pool.free(h).unwrap();
    }
    pool.free(anchor).unwrap();
    pool.check_invariants().unwrap();
    let s = pool.stats();
    assert_eq!(s.objects, 0);
    assert_eq!(s.pages_held, 0, "{:?}", class_of_1000(&pool));
}
