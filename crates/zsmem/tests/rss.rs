//! Freed zspages, and the trimmed pages of live ones, go back to the OS:
//! the process's resident memory falls, at once with `Pool::trim`, and by
//! itself within the return delay (polled with a generous limit: the test
//! shows the pages come back, not how fast).
//! Alone in its own test binary so other tests do not disturb the figure.

#[cfg(all(target_os = "linux", not(miri)))]
#[test]
fn freeing_objects_lowers_resident_memory() {
    use std::time::{Duration, Instant};
    use zsmem::{Pool, PoolConfig};

    /// Poll `cond` until it holds, for at most a minute (the returner's
    /// bound is milliseconds; the limit only guards a loaded machine).
    fn eventually(mut cond: impl FnMut() -> bool) -> bool {
        let end = Instant::now() + Duration::from_secs(60);
        while Instant::now() < end {
            if cond() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        cond()
    }

    fn rss_bytes() -> usize {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
        // SAFETY: sysconf has no preconditions.
        pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize
    }

    let pool = Pool::new(PoolConfig::default()).unwrap();
    let before = rss_bytes();
    let data = vec![0x5Au8; 2000];
    let hs: Vec<_> = (0..64 * 1024).map(|_| pool.store(&data).unwrap()).collect();
    let held = pool.stats().bytes_held();
    assert!(held >= 64 * 1024 * 2000);
    let full = rss_bytes();
    assert!(
        full >= before + held * 9 / 10,
        "RSS grew {} for {held} held",
        full - before
    );
    for h in hs {
        pool.free(h).unwrap();
    }
    assert_eq!(pool.stats().pages_held, 0);
    pool.trim();
    assert_eq!(pool.stats().cached_pages, 0);
    let after = rss_bytes();
    // The handle table and descriptors stay; the zspages' pages go.
    assert!(
        full - after >= held * 9 / 10,
        "RSS fell only {} of {held} bytes freed",
        full.saturating_sub(after)
    );

    // Trimming gives back pages of zspages that still hold objects: fill
    // zspages of 32 pages with 4000-byte objects (32 to a zspage, about a
    // page each), free all but the first object of each, compact.
    let pool = Pool::new(PoolConfig::default()).unwrap();
    let data = vec![0xA5u8; 4000];
    let hs: Vec<_> = (0..32 * 512).map(|_| pool.store(&data).unwrap()).collect();
    let held = pool.stats().bytes_held();
    let full = rss_bytes();
    for (i, h) in hs.iter().enumerate() {
        if i % 32 != 0 {
            pool.free(*h).unwrap();
        }
    }
    pool.compact();
    pool.check_invariants().unwrap();
    // Nobody calls trim: the returner gives the pages back by itself.
    assert!(
        eventually(|| pool.stats().cached_pages == 0),
        "{} pages still wait",
        pool.stats().cached_pages
    );
    let s = pool.stats();
    assert_eq!(s.objects, 512);
    assert!(
        s.bytes_held() <= 520 * 4096,
        "{} bytes held for 512 page-sized objects",
        s.bytes_held()
    );
    for h in hs.iter().step_by(32) {
        assert_eq!(pool.read_vec(*h).unwrap(), data);
    }
    let after = rss_bytes();
    let returned = held - s.bytes_held();
    assert!(
        full - after >= returned * 9 / 10,
        "RSS fell only {} of {returned} bytes trimmed",
        full.saturating_sub(after)
    );
}
