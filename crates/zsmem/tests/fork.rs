//! A forked child can use the pools it inherited: the parent churns two
//! pools (log placement and size classes) while the returner thread gives
//! their freed pages back and faults segments in ahead, and forks at
//! random moments of that work; each child reads the objects it inherited,
//! stores, reads back and frees objects of its own, frees everything, and
//! waits for its own returner to give every page back. A child that does
//! not finish within a generous limit is killed and fails the test, so a
//! hang (a lock the returner held at the fork) cannot hang the run.
//! Alone in its own test binary: the process forks; no other test's
//! threads may be inside a pool at the fork.

#![cfg(all(target_os = "linux", not(miri)))]

mod common;

use std::time::{Duration, Instant};

use common::{Rng, compressed_len, pattern};
use zsmem::{Handle, PageReturn, Pool, PoolConfig};

/// Forks per run: with the fix none hangs; without it (the returner's page
/// source lock copied held) a few percent of children did.
const FORKS: usize = 150;

/// Longest a child may take before it counts as hung (it needs a few
/// milliseconds; the limit only guards a loaded machine).
const CHILD_LIMIT: Duration = Duration::from_secs(20);

/// Longest a child waits for its pages to go back (the delay is 1 ms).
const RETURN_LIMIT: Duration = Duration::from_secs(10);

/// Objects the parent stores into each pool between two forks (and about
/// as many it frees).
const CHURN: usize = 600;

/// A live object: its handle and the seed and length of its bytes.
type Live = Vec<(Handle, u64, usize)>;

/// Pages come back after 1 ms, and no page bound makes a freeing thread
/// return them: the returner does all of it (rounds every millisecond).
fn config(base: PoolConfig) -> PoolConfig {
    PoolConfig {
        page_return: PageReturn::Delayed {
            delay: Duration::from_millis(1),
            max_pages: 1 << 20,
        },
        ..base
    }
}

/// Store `CHURN` objects, then free the older part of the live set at
/// random until about `CHURN` are left: zspages and segments are freed
/// whole and their pages queued for the returner.
fn churn(pool: &Pool, live: &mut Live, rng: &mut Rng) {
    for _ in 0..CHURN {
        let seed = rng.next();
        let len = compressed_len(rng, 4096);
        let h = pool.store(&pattern(seed, len)).expect("store");
        live.push((h, seed, len));
    }
    while live.len() > CHURN {
        let i = rng.range(0, live.len() / 2);
        let (h, _, _) = live.swap_remove(i);
        pool.free(h).expect("free");
    }
}

/// What a child found wrong (its exit status).
#[repr(i32)]
enum Failure {
    Bytes = 1,
    PagesKept = 2,
    Panic = 3,
}

/// The child's work on the pools it inherited; `Err` names what failed.
fn child(pools: &[Pool; 2], live: &[Live; 2], seed: u64) -> Result<(), Failure> {
    let mut rng = Rng(seed);
    for (pool, live) in pools.iter().zip(live) {
        // The parent's objects, as they were at the fork.
        for &(h, seed, len) in live.iter().step_by(7) {
            if pool.read_vec(h).ok() != Some(pattern(seed, len)) {
                return Err(Failure::Bytes);
            }
        }
        // New objects: stored (new zspages and segments: the page
        // source's lock), read back, freed.
        let mine: Live = (0..300)
            .map(|_| {
                let (seed, len) = (rng.next(), compressed_len(&mut rng, 4096));
                pool.store(&pattern(seed, len))
                    .map(|h| (h, seed, len))
                    .map_err(|_| Failure::Bytes)
            })
            .collect::<Result<_, _>>()?;
        for &(h, seed, len) in &mine {
            if pool.read_vec(h).ok() != Some(pattern(seed, len)) {
                return Err(Failure::Bytes);
            }
        }
        for &(h, _, _) in mine.iter().chain(live) {
            pool.free(h).map_err(|_| Failure::Bytes)?;
        }
    }
    // Every page goes back by the child's own returner (started on
    // demand: the parent's is not in the child), without `trim`.
    let end = Instant::now() + RETURN_LIMIT;
    loop {
        let settled = pools.iter().all(|p| {
            let s = p.stats();
            (s.pages_held, s.cached_pages) == (0, 0)
        });
        if settled {
            return Ok(());
        }
        if Instant::now() > end {
            return Err(Failure::PagesKept);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Wait for child `pid` (fork number `n`) at most `CHILD_LIMIT`; kill it
/// and fail if it has not finished, or fail on what it reports.
fn wait_for(pid: libc::pid_t, n: usize) {
    let end = Instant::now() + CHILD_LIMIT;
    let mut status = 0;
    loop {
        // SAFETY: a plain system call on our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        assert!(r >= 0, "waitpid: {}", std::io::Error::last_os_error());
        if r == pid {
            break;
        }
        if Instant::now() > end {
            // SAFETY: as above; the child is ours and has not been reaped.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            panic!("child of fork {n} hung: not done after {CHILD_LIMIT:?}, killed");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(
        libc::WIFEXITED(status),
        "child of fork {n} ended by a signal: status {status:#x}"
    );
    match libc::WEXITSTATUS(status) {
        0 => {}
        1 => panic!("child of fork {n}: an object read back wrong, or a call failed"),
        2 => panic!(
            "child of fork {n}: freed pages still held or waiting after {RETURN_LIMIT:?} \
             (no returner thread in the child)"
        ),
        code => panic!("child of fork {n} panicked (exit status {code})"),
    }
}

#[test]
fn a_forked_child_uses_its_pools_and_returns_their_pages() {
    let pools = [
        Pool::new(config(PoolConfig::log())).unwrap(),
        Pool::new(config(PoolConfig::default())).unwrap(),
    ];
    let mut live: [Live; 2] = Default::default();
    let mut rng = Rng(0x5EED_F0CC);
    for n in 0..FORKS {
        for (pool, live) in pools.iter().zip(live.iter_mut()) {
            churn(pool, live, &mut rng);
        }
        // Fork at a random moment of the returner's work on what was just
        // freed (it runs a round every millisecond while pages wait).
        let until = Instant::now() + Duration::from_micros(rng.range(0, 1500) as u64);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        let seed = rng.next();
        // SAFETY: the child runs only this test's code on the pools (no
        // other thread of this process is inside a pool at the fork) and
        // leaves with `_exit`, never returning into the test harness.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                child(&pools, &live, seed)
            }));
            let code = match outcome {
                Ok(Ok(())) => 0,
                Ok(Err(f)) => f as i32,
                Err(_) => Failure::Panic as i32,
            };
            // SAFETY: ends the child at once, running no destructor or
            // exit handler of the parent's copy.
            unsafe { libc::_exit(code) };
        }
        wait_for(pid, n);
    }
    // The parent's pools were not disturbed by the forks.
    for (pool, live) in pools.iter().zip(&live) {
        for &(h, seed, len) in live {
            assert_eq!(pool.read_vec(h).unwrap(), pattern(seed, len));
        }
        pool.check_invariants().unwrap();
    }
}
