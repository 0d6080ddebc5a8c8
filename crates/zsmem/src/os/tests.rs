use std::time::{Duration, Instant};

use super::*;

const NOW: PageReturn = PageReturn::Immediate;

/// A delayed policy whose delay never passes in a test: only `max_pages`
/// and `purge_cache` return pages.
fn delayed(max_pages: usize) -> PageReturn {
    PageReturn::Delayed {
        delay: Duration::from_secs(3600),
        max_pages,
    }
}

/// An eager 4 KiB source served by `returner` (one without a thread: the
/// test plays its rounds), keeping up to `prefault_pages` faulted in ahead.
fn served_by(
    returner: &Arc<Returner>,
    policy: PageReturn,
    prefault_pages: usize,
) -> Arc<PageSource> {
    PageSource::with_budget(
        4096,
        false,
        policy,
        None,
        Arc::new(Budget::default()),
        returner.clone(),
        prefault_pages,
    )
}

#[test]
fn runs_are_reused_split_and_counted() {
    let src = PageSource::new(4096, None, false, NOW);
    let a = src.alloc_run(8).unwrap();
    let a_addr = a.as_ptr() as usize;
    assert_eq!(src.held_pages(), 8);
    src.free_run(a, 8, 8);
    assert_eq!((src.held_pages(), src.cached_pages()), (0, 0));
    // A 3-page run is cut from the freed 8-page one.
    let b = src.alloc_run(3).unwrap();
    assert_eq!(b.as_ptr() as usize, a_addr);
    let c = src.alloc_run(5).unwrap();
    assert_eq!(c.as_ptr() as usize, a_addr + 3 * 4096);
    assert_eq!(src.held_pages(), 8);
    assert_eq!(src.max_held_pages(), 8);
    src.free_run(b, 3, 3);
    src.free_run(c, 5, 5);
    assert_eq!(src.held_pages(), 0);
}

#[test]
fn waiting_runs_are_counted_and_reused_first() {
    let src = PageSource::new(4096, None, false, delayed(1 << 20));
    let runs: Vec<Run> = (0..4).map(|_| src.alloc_run(8).unwrap()).collect();
    let last = runs[3].as_ptr();
    for r in runs {
        src.free_run(r, 8, 8);
    }
    assert_eq!((src.held_pages(), src.cached_pages()), (0, 32));
    // The newest waiting run comes back first, still resident.
    let again = src.alloc_run(8).unwrap();
    assert_eq!(again.as_ptr(), last);
    assert_eq!((src.held_pages(), src.cached_pages()), (8, 24));
    src.free_run(again, 8, 8);
    src.purge_cache();
    assert_eq!((src.held_pages(), src.cached_pages()), (0, 0));
}

#[test]
fn the_page_bound_returns_the_oldest_runs() {
    // The free that passes the bound returns the oldest runs, down to half
    // of it; the newest stay for reuse. Purge returns the rest.
    let src = PageSource::new(4096, None, false, delayed(16));
    let runs: Vec<Run> = (0..6).map(|_| src.alloc_run(4).unwrap()).collect();
    let newest = runs[5].as_ptr();
    for r in runs {
        src.free_run(r, 4, 4);
    }
    // The fifth free left 20 waiting: the three oldest runs went back;
    // the sixth joined the two left.
    assert_eq!(src.cached_pages(), 12);
    let again = src.alloc_run(4).unwrap();
    assert_eq!(again.as_ptr(), newest);
    src.free_run(again, 4, 4);
    src.purge_cache();
    assert_eq!(src.cached_pages(), 0);
}

#[test]
fn due_pages_are_returned_after_the_delay() {
    let src = PageSource::new(
        4096,
        None,
        false,
        PageReturn::Delayed {
            delay: Duration::from_millis(1),
            max_pages: 1 << 20,
        },
    );
    let a = src.alloc_run(2).unwrap();
    let t0 = Instant::now();
    src.free_run(a, 2, 2);
    // Early: nothing due; the answer says when it will be.
    let next = src.return_due(t0, false);
    assert!(next.is_some());
    assert_eq!(src.cached_pages(), 2);
    assert_eq!(src.return_due(t0 + Duration::from_secs(1), false), None);
    assert_eq!((src.cached_pages(), src.held_pages()), (0, 0));
}

#[test]
fn limit_refuses_and_loses_nothing() {
    for policy in [NOW, delayed(1 << 20)] {
        let src = PageSource::new(4096, Some(4 * 4096), false, policy);
        let a = src.alloc_run(3).unwrap();
        let e = src.alloc_run(2).unwrap_err();
        assert!(matches!(e, Error::MemoryLimit { .. }), "{e}");
        assert_eq!(src.held_pages(), 3);
        src.free_run(a, 3, 3);
        let b = src.alloc_run(4).unwrap();
        src.free_run(b, 4, 4);
        src.purge_cache();
        assert_eq!((src.held_pages(), src.cached_pages()), (0, 0));
    }
}

#[test]
fn discarded_runs_read_back_as_zero() {
    for policy in [NOW, delayed(1 << 20)] {
        let src = PageSource::new(4096, None, false, policy);
        let a = src.alloc_run(1).unwrap();
        let p = a.as_ptr();
        // SAFETY: the run is ours and 4096 bytes long.
        unsafe { p.write_bytes(0xAB, 4096) };
        src.free_run(a, 1, 1);
        src.purge_cache();
        let b = src.alloc_run(1).unwrap();
        assert_eq!(b.as_ptr(), p);
        // SAFETY: as above.
        let bytes = unsafe { std::slice::from_raw_parts(b.as_ptr(), 4096) };
        assert!(bytes.iter().all(|&x| x == 0));
        src.free_run(b, 1, 1);
    }
}

/// Many runs and trimmed ranges, not adjacent, returned in one round (one
/// batch of ranges: `Region::discard_all`): every discarded page reads as
/// zero, every page kept keeps its bytes.
#[test]
fn a_batch_of_ranges_discards_exactly_them() {
    let src = PageSource::new(4096, None, true, delayed(1 << 20));
    let n = if cfg!(miri) { 6 } else { 2100 };
    // Lazy runs of 2 pages, both committed and written; every other run is
    // freed whole, the others lose their second page (a trimmed range).
    let runs: Vec<Run> = (0..n)
        .map(|i| {
            let (r, _) = src.alloc_lazy_run(2, 2).unwrap();
            // SAFETY: the run is ours, 2 pages committed.
            unsafe { r.as_ptr().write_bytes(i as u8 | 1, 2 * 4096) };
            r
        })
        .collect();
    let mut kept = Vec::new();
    for (i, r) in runs.into_iter().enumerate() {
        if i % 2 == 0 {
            src.free_run(r, 2, 2);
        } else {
            src.decommit(&r, span(1, 1));
            kept.push((i, r));
        }
    }
    src.purge_cache();
    assert_eq!(src.cached_pages(), 0);
    for (i, r) in &kept {
        let b = bytes(r, 2 * 4096);
        assert!(
            b[..4096].iter().all(|&x| x == *i as u8 | 1),
            "run {i}: kept page"
        );
        assert!(b[4096..].iter().all(|&x| x == 0), "run {i}: trimmed page");
    }
    // The freed runs come back (newest first) reading as zeros.
    for _ in 0..n / 2 {
        let (r, _) = src.alloc_lazy_run(2, 2).unwrap();
        assert!(bytes(&r, 2 * 4096).iter().all(|&x| x == 0));
        src.free_run(r, 2, 2);
    }
    for (_, r) in kept {
        src.free_run(r, 2, 1);
    }
}

/// A round gives back more pages than a batch (`RETURN_BATCH`) in several
/// batches (under Miri, whose batch is 4 pages, a run larger than a batch
/// goes in one of its own): every page comes back, counted, and reads as
/// zero when reused.
#[test]
fn a_round_larger_than_a_batch_gives_back_every_run() {
    let src = PageSource::new(4096, None, false, delayed(1 << 20));
    // Runs of 1..=7 pages, over two batches' worth in all.
    let sizes: Vec<usize> = (0..)
        .map(|i| 1 + i % 7)
        .take(RETURN_BATCH / 2 + 3)
        .collect();
    let runs: Vec<(Run, usize)> = sizes
        .iter()
        .map(|&n| {
            let r = src.alloc_run(n).unwrap();
            // SAFETY: the run is ours, `n` pages committed.
            unsafe { r.as_ptr().write_bytes(0xAB, n * 4096) };
            (r, n)
        })
        .collect();
    let total: usize = sizes.iter().sum();
    assert!(total > 2 * RETURN_BATCH);
    assert_eq!(src.held_pages(), total);
    for (r, n) in runs {
        src.free_run(r, n, n);
    }
    assert_eq!(src.cached_pages(), total);
    src.purge_cache();
    assert_eq!((src.held_pages(), src.cached_pages()), (0, 0));
    // Every run comes back (newest first), every page given back: one byte
    // a page reads as zero.
    for &n in sizes.iter().rev() {
        let r = src.alloc_run(n).unwrap();
        for page in 0..n {
            assert_eq!(bytes(&r, n * 4096)[page * 4096], 0, "page {page}");
        }
        src.free_run(r, n, n);
    }
    src.purge_cache();
    assert_eq!(src.held_pages(), 0);
}

/// The first `n` bytes of a run.
fn bytes(run: &Run, n: usize) -> &[u8] {
    // SAFETY: the tests only look at runs they own, within their length.
    unsafe { std::slice::from_raw_parts(run.as_ptr(), n) }
}

#[test]
fn lazy_runs_commit_and_decommit_page_by_page() {
    let src = PageSource::new(4096, Some(6 * 4096), true, NOW);
    let (a, resident) = src.alloc_lazy_run(8, 1).unwrap();
    assert_eq!((resident, src.held_pages()), (1, 1));
    src.commit(&a, 1, 4).unwrap();
    assert_eq!(src.held_pages(), 5);
    // SAFETY: the run is ours and 8 pages long; 5 are committed.
    unsafe { a.as_ptr().write_bytes(0xCD, 5 * 4096) };
    assert!(matches!(
        src.commit(&a, 5, 2),
        Err(Error::MemoryLimit { .. })
    ));
    assert_eq!(src.held_pages(), 5, "a refused commit counts nothing");
    src.decommit(&a, span(3, 2));
    assert_eq!(src.held_pages(), 3);
    // A decommitted page reads as zeros.
    assert!(bytes(&a, 3 * 4096).iter().all(|&x| x == 0xCD));
    assert!(bytes(&a, 5 * 4096)[3 * 4096..].iter().all(|&x| x == 0));
    src.free_run(a, 8, 3);
    assert_eq!((src.held_pages(), src.cached_pages()), (0, 0));
    assert_eq!(src.max_held_pages(), 5);
}

#[test]
fn a_commit_takes_waiting_trimmed_pages_back() {
    let src = PageSource::new(4096, None, true, delayed(1 << 20));
    let (a, _) = src.alloc_lazy_run(8, 6).unwrap();
    // SAFETY: 6 committed pages of our run.
    unsafe { a.as_ptr().write_bytes(0x77, 6 * 4096) };
    src.decommit(&a, span(2, 4));
    assert_eq!((src.held_pages(), src.cached_pages()), (2, 4));
    // Pages 2..4 come back before the returner discarded them: the commit
    // takes them out of the queue, so no later discard can hit them.
    src.commit(&a, 2, 2).unwrap();
    assert_eq!((src.held_pages(), src.cached_pages()), (4, 2));
    src.purge_cache();
    assert_eq!(src.cached_pages(), 0);
    assert!(bytes(&a, 4 * 4096).iter().all(|&x| x == 0x77));
    // The run's pages 4..6 were returned.
    assert!(bytes(&a, 6 * 4096)[4 * 4096..].iter().all(|&x| x == 0));
    src.free_run(a, 8, 4);
    src.purge_cache();
    assert_eq!((src.held_pages(), src.cached_pages()), (0, 0));
}

#[test]
fn a_freed_run_takes_its_waiting_top_along() {
    let src = PageSource::new(4096, None, true, delayed(1 << 20));
    let (a, _) = src.alloc_lazy_run(8, 5).unwrap();
    let p = a.as_ptr();
    src.decommit(&a, span(3, 2));
    src.free_run(a, 8, 3);
    // One waiting run of 5 resident pages (3 committed + 2 trimmed).
    assert_eq!((src.held_pages(), src.cached_pages()), (0, 5));
    // Reused first; the resident pages it does not need wait on as its
    // top, and come back without a fault when it grows into them.
    let (b, resident) = src.alloc_lazy_run(8, 1).unwrap();
    assert_eq!((b.as_ptr(), resident), (p, 1));
    assert_eq!((src.held_pages(), src.cached_pages()), (1, 4));
    src.commit(&b, 1, 2).unwrap();
    assert_eq!((src.held_pages(), src.cached_pages()), (3, 2));
    src.free_run(b, 8, 3);
    assert_eq!((src.held_pages(), src.cached_pages()), (0, 5));
    src.purge_cache();
    assert_eq!((src.held_pages(), src.cached_pages()), (0, 0));
}

#[test]
fn page_blocks_count_and_return_their_pages() {
    let os = OsPages::with_return(4096, Some(8 * 4096), NOW).unwrap();
    assert!(OsPages::new(1000, None).is_err());
    assert!(os.alloc(0).is_err() && os.alloc(MAX_CHAIN_SIZE + 1).is_err());
    let mut a = os.alloc(3).unwrap();
    assert_eq!((a.len(), a.pages(), a.addr() % 4096), (3 * 4096, 3, 0));
    a.as_mut_slice().fill(0x5A);
    let b = os.alloc(5).unwrap();
    assert!(matches!(os.alloc(1), Err(Error::MemoryLimit { .. })));
    assert!(a.as_slice().iter().all(|&x| x == 0x5A));
    assert!(b.as_slice().iter().all(|&x| x == 0));
    drop(a);
    assert_eq!(os.held_pages(), 5);
    let clone = os.clone();
    drop(os);
    drop(b); // the block keeps the source alive
    assert_eq!(clone.held_pages(), 0);
    assert_eq!(clone.max_held_pages(), 8);
}

/// A lazy 4 KiB source whose returner never runs a round (the idle-priority
/// thread on a machine whose CPUs all stay busy) and whose delay never
/// passes: only the page bound returns pages.
fn starved(max_pages: usize) -> Arc<PageSource> {
    PageSource::with_budget(
        4096,
        true,
        delayed(max_pages),
        None,
        Arc::new(Budget::default()),
        Returner::without_thread(),
        0,
    )
}

#[test]
fn a_starved_returner_leaves_the_excess_to_the_freeing_thread() {
    // A discard burst of many times the bound: runs of every length
    // freed, and pages trimmed off live runs (a log segment's dead pages,
    // a zspage's top), in random order. After every free, at most
    // `max_pages` wait: no later free, no round, no delay needed.
    const MAX: usize = 64;
    let src = starved(MAX);
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move |n: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % n as u64) as usize
    };
    let check = |src: &PageSource, what: &str| {
        let cached = src.cached_pages();
        assert!(
            cached <= MAX,
            "{cached} pages wait after {what} (bound {MAX})"
        );
    };
    // Under Miri, twice the bound: each discarded page is zeroed word by word there.
    let burst = if cfg!(miri) { 2 * MAX } else { 40 * MAX };
    // Live runs: (run, pages, committed).
    let mut live = Vec::new();
    let mut total = 0;
    while total < burst {
        let pages = 1 + next(MAX_CHAIN_SIZE);
        let (run, _) = src.alloc_lazy_run(pages, pages).unwrap();
        live.push((run, pages, pages));
        total += pages;
    }
    while !live.is_empty() {
        let i = next(live.len());
        let (_, pages, committed) = live[i];
        if committed > 1 && next(3) == 0 {
            // Trim the top off a live run: its pages wait as a range.
            let keep = 1 + next(committed - 1);
            src.decommit(&live[i].0, span(keep, committed - keep));
            live[i].2 = keep;
            check(&src, "a trim");
        } else {
            let (run, _, committed) = live.swap_remove(i);
            src.free_run(run, pages, committed);
            check(&src, "a free");
        }
    }
    assert_eq!(src.held_pages(), 0);
    src.purge_cache();
    assert_eq!(src.cached_pages(), 0);
}

#[test]
#[cfg(not(miri))]
fn frees_that_find_the_lock_held_leave_the_excess_to_its_holder() {
    // Another thread frees while this one holds the arena lock: its frees
    // go to the inbox, past the bound. This thread, releasing the lock,
    // finds them and brings the queue back within the bound.
    const MAX: usize = 16;
    let src = starved(MAX);
    let runs: Vec<Run> = (0..10)
        .map(|_| src.alloc_lazy_run(4, 4).unwrap().0)
        .collect();
    let held = src.lock();
    let s = src.clone();
    std::thread::spawn(move || {
        for r in runs {
            s.free_run(r, 4, 4);
        }
    })
    .join()
    .unwrap();
    assert_eq!(src.inbox_pages.load(Ordering::Relaxed), 40);
    drop(held);
    let cached = src.cached_pages();
    assert!(cached <= MAX, "{cached} pages wait (bound {MAX})");
    src.purge_cache();
    assert_eq!((src.held_pages(), src.cached_pages()), (0, 0));
}

#[test]
fn a_runs_trimmed_pages_wait_together_and_leave_with_it() {
    let d = Duration::from_secs(10);
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let mut arena = arena::Arena::new(4096);
    let run = arena.alloc(8).unwrap();
    // Pages 6..8 trimmed at 0, page 3 at 5: one entry, due with the oldest.
    arena.queue_top(run, span(6, 2), at(0));
    arena.queue_top(run, span(3, 1), at(5));
    assert_eq!(arena.waiting_pages, 3);
    let (runs, next) = arena.take_due(at(9), false, d, 1 << 20);
    assert!(runs.is_empty());
    assert_eq!((arena.waiting_pages, next), (3, Some(at(10))));
    // A commit of pages 5..7 takes back page 6 only.
    assert_eq!(arena.cancel_tops(run, span(5, 2)), 1);
    assert_eq!(arena.waiting_pages, 2);
    // At 10 both left go, page 3 before its own delay (never after).
    let (runs, next) = arena.take_due(at(10), false, d, 1 << 20);
    assert!(runs.is_empty());
    assert_eq!((arena.waiting_pages, next), (0, None));
    assert_eq!(arena.cancel_tops(run, span(0, 8)), 0);
    // A run freed whole takes its waiting pages along in one step.
    arena.queue_top(run, span(4, 3), at(20));
    arena.queue_run(run, 8, 4, at(21));
    assert_eq!(arena.waiting_pages, 7);
    let (runs, _) = arena.take_due(at(31), false, d, 1 << 20);
    assert_eq!(runs.iter().map(|w| w.resident).collect::<Vec<_>>(), [7]);
    assert_eq!(arena.cancel_tops(run, span(0, 8)), 0);
}

#[test]
fn bit_runs_are_the_masks_ranges() {
    let runs = |m| arena::bit_runs(m).collect::<Vec<_>>();
    assert_eq!(runs(0), []);
    assert_eq!(runs(u32::MAX), [(0, 32)]);
    assert_eq!(runs(0b1011_0110), [(1, 2), (4, 2), (7, 1)]);
    assert_eq!(span(0, 32), u32::MAX);
    assert_eq!(span(30, 2), 0b11 << 30);
}

/// Whether every page of `run`'s first `pages` is resident (`mincore`).
#[cfg(not(miri))]
fn resident(run: &Run, pages: usize) -> bool {
    let mut v = vec![0u8; pages];
    // SAFETY: the range lies in a live mapping of ours; `v` has a byte per
    // page.
    let rc = unsafe { libc::mincore(run.as_ptr().cast(), pages * 4096, v.as_mut_ptr()) };
    assert_eq!(rc, 0);
    v.iter().all(|b| b & 1 == 1)
}

#[test]
#[cfg(not(miri))]
fn a_stream_of_new_runs_is_prefaulted_ahead_and_counted() {
    // A returner that runs only when told: this test plays its rounds.
    let src = served_by(&Returner::without_thread(), delayed(1024), 48);
    // A stream: 8 fresh runs of 4 pages (the smallest demand that asks).
    let mut runs: Vec<Run> = (0..8).map(|_| src.alloc_run(4).unwrap()).collect();
    assert_eq!((src.held_pages(), src.cached_pages()), (32, 0));
    assert!(!resident(&runs[7], 4), "a fresh run is not faulted in yet");
    src.refill(false);
    // Twice the demand is wanted (16 runs); 48 pages are allowed: 12 runs,
    // faulted in, counted as cached.
    assert_eq!((src.held_pages(), src.cached_pages()), (32, 48));
    // The next zspages take them, resident already, zero-filled.
    for _ in 0..2 {
        let r = src.alloc_run(4).unwrap();
        assert!(resident(&r, 4));
        assert!(bytes(&r, 4 * 4096).iter().all(|&b| b == 0));
        runs.push(r);
    }
    assert_eq!((src.held_pages(), src.cached_pages()), (40, 40));
    // Two runs since the last round are not a stream: nothing is added.
    src.refill(false);
    assert_eq!(src.cached_pages(), 40);
    // What no zspage took goes back with the queue; nothing is lost.
    for r in runs {
        src.free_run(r, 4, 4);
    }
    assert_eq!((src.held_pages(), src.cached_pages()), (0, 80));
    src.purge_cache();
    assert_eq!((src.held_pages(), src.cached_pages()), (0, 0));

    // Without a prefault allowance (or with pages returned at once) a
    // round faults nothing in.
    for policy in [delayed(1024), NOW] {
        let plain = PageSource::new(4096, None, false, policy);
        let runs: Vec<Run> = (0..16).map(|_| plain.alloc_run(4).unwrap()).collect();
        plain.refill(false);
        assert_eq!(plain.cached_pages(), 0);
        for r in runs {
            plain.free_run(r, 4, 4);
        }
        plain.purge_cache();
    }
}

#[test]
#[cfg(not(miri))]
fn an_ask_for_a_refill_keeps_the_source_registered_until_answered() {
    let returner = Returner::without_thread();
    let src = served_by(&returner, delayed(1024), 48);
    let runs: Vec<Run> = (0..8).map(|_| src.alloc_run(4).unwrap()).collect();
    // Nothing waits, but the source asked (a round's look between its
    // refill and an allocation's ask): the look keeps it registered, or
    // the ask would be lost until a free registered it again.
    assert!(src.return_due(Instant::now(), false).is_some());
    // The round answers it, and keeps the source for the runs now waiting.
    returner.round();
    assert_eq!(src.cached_pages(), 48);
    assert!(returner.registry.lock().sources.len() == 1);
    for r in runs {
        src.free_run(r, 4, 4);
    }
    src.purge_cache();
    // Nothing waits and nothing is asked: the look lets it go.
    assert!(src.return_due(Instant::now(), false).is_none());
}

#[test]
#[cfg(not(miri))]
fn a_purge_answers_a_standing_ask_and_stops_a_refill() {
    let returner = Returner::without_thread();
    let src = served_by(&returner, delayed(1024), 48);
    // A stream asks for a refill, then everything is freed and purged
    // (`Pool::trim` on a pool gone idle): the ask is answered with
    // nothing, so no round refills an idle source afterwards.
    let runs: Vec<Run> = (0..8).map(|_| src.alloc_run(4).unwrap()).collect();
    for r in runs {
        src.free_run(r, 4, 4);
    }
    src.purge_cache();
    assert_eq!(src.cached_pages(), 0);
    returner.round();
    assert_eq!((src.held_pages(), src.cached_pages()), (0, 0));
    assert!(src.return_due(Instant::now(), false).is_none());
}

#[test]
#[cfg(not(miri))]
fn a_round_later_than_the_delay_faults_nothing_in() {
    // Runs faulted in ahead are dated from the demand that asked for
    // them; a round that comes after the delay (no idle CPU for that long)
    // would make runs due on arrival, so it makes none.
    let src = served_by(
        &Returner::without_thread(),
        PageReturn::Delayed {
            delay: Duration::from_millis(1),
            max_pages: 1024,
        },
        48,
    );
    let runs: Vec<Run> = (0..8).map(|_| src.alloc_run(4).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(5));
    src.refill(false);
    assert_eq!(src.cached_pages(), 0);
    for r in runs {
        src.free_run(r, 4, 4);
    }
    src.purge_cache();
    assert_eq!((src.held_pages(), src.cached_pages()), (0, 0));
}

#[test]
#[cfg(not(miri))]
fn a_round_stops_for_a_fork_and_leaves_everything_queued() {
    // Everything is due at once; more than two batches' worth waits.
    let returner = Returner::without_thread();
    let src = served_by(
        &returner,
        PageReturn::Delayed {
            delay: Duration::ZERO,
            max_pages: 1 << 20,
        },
        0,
    );
    let n = RETURN_BATCH / 2 + 3;
    let runs: Vec<Run> = (0..n).map(|_| src.alloc_run(4).unwrap()).collect();
    let newest = runs[n - 1].as_ptr();
    for r in runs {
        src.free_run(r, 4, 4);
    }
    let total = 4 * n;
    assert!(total > 2 * RETURN_BATCH);
    // A fork waits: the round returns nothing, keeps the source registered
    // and every run queued in its place, untouched (the returner's own
    // return stops before its next batch, here the first).
    returner.set_fork_waiting(true);
    assert!(returner.round().is_some());
    assert_eq!(returner.registry.lock().sources.len(), 1);
    assert!(src.return_due_yielding(Instant::now()).is_some());
    assert_eq!((src.held_pages(), src.cached_pages()), (0, total));
    let again = src.alloc_run(4).unwrap();
    assert_eq!(
        again.as_ptr(),
        newest,
        "the newest run is still taken first"
    );
    src.free_run(again, 4, 4);
    // After the fork, the next round returns it all.
    returner.set_fork_waiting(false);
    assert_eq!(returner.round(), None);
    assert_eq!((src.held_pages(), src.cached_pages()), (0, 0));
    assert!(returner.registry.lock().sources.is_empty());
}
