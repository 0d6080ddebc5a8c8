//! The return queue's hand-off under loom: a source queueing pages races
//! the returner's round, and afterwards a source with pages waiting is
//! always registered (nothing is forgotten), never twice, and a round
//! returns everything due. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p zsmem --lib loom`.

use std::time::Duration;

use super::*;

/// Due at once, no page bound: every round returns all it finds.
const NOW_DUE: PageReturn = PageReturn::Delayed {
    delay: Duration::ZERO,
    max_pages: 1 << 20,
};

/// After the threads: waiting pages imply registration, exactly once.
fn check_registered(src: &Arc<PageSource>) {
    let waiting = src.cached_pages();
    let flag = src.inbox.lock().registered;
    let held = src.returner.holds(src);
    assert_eq!(flag, held, "flag and registry disagree");
    if waiting > 0 {
        assert!(held, "{waiting} pages wait in an unregistered source");
    }
    // One more round returns them all and unregisters the source.
    src.returner.round();
    assert_eq!(src.cached_pages(), 0);
    assert!(!src.returner.holds(src) && !src.inbox.lock().registered);
}

#[test]
fn loom_a_free_racing_a_round_is_never_forgotten() {
    loom::model(|| {
        let src = PageSource::new(4096, None, false, NOW_DUE);
        let run = src.alloc_run(1).unwrap();
        let s = src.clone();
        let freer = loom::thread::spawn(move || s.free_run(run, 1, 1));
        src.returner.round();
        freer.join().unwrap();
        check_registered(&src);
    });
}

#[test]
fn loom_two_freers_and_a_round() {
    // Four preemptions (the exhaustive search took 8.5 minutes of CI, this
    // a few seconds).
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(4);
    model.check(|| {
        let src = PageSource::new(4096, None, false, NOW_DUE);
        let runs = [src.alloc_run(1).unwrap(), src.alloc_run(2).unwrap()];
        let freers: Vec<_> = runs
            .into_iter()
            .zip([1, 2])
            .map(|(run, pages)| {
                let s = src.clone();
                loom::thread::spawn(move || s.free_run(run, pages, pages))
            })
            .collect();
        src.returner.round();
        for f in freers {
            f.join().unwrap();
        }
        let registrations = src
            .returner
            .registry
            .lock()
            .sources
            .iter()
            .filter(|w| std::ptr::addr_eq(w.as_ptr(), Arc::as_ptr(&src)))
            .count();
        assert!(registrations <= 1, "registered {registrations} times");
        check_registered(&src);
    });
}

/// The bound holds when frees race each other and a reader of the
/// figures (a holder of the arena lock that frees nothing): whichever
/// thread holds the lock while another's free goes to the inbox, once
/// every call has returned at most `max_pages` wait, with no round run.
/// Bounded to two preemptions (three threads and their spin-locks exceed
/// loom's branch limit otherwise).
#[test]
fn loom_frees_past_the_bound_leave_no_excess_in_the_inbox() {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(2);
    model.max_branches = 10_000;
    model.check(|| {
        let src = PageSource::new(
            4096,
            None,
            false,
            PageReturn::Delayed {
                delay: Duration::from_secs(3600),
                max_pages: 2,
            },
        );
        let runs = [src.alloc_run(2).unwrap(), src.alloc_run(2).unwrap()];
        let freers: Vec<_> = runs
            .into_iter()
            .map(|run| {
                let s = src.clone();
                loom::thread::spawn(move || s.free_run(run, 2, 2))
            })
            .collect();
        let _ = src.cached_pages();
        for f in freers {
            f.join().unwrap();
        }
        let waiting = src.cached_pages();
        assert!(waiting <= 2, "{waiting} pages wait past the bound of 2");
    });
}
