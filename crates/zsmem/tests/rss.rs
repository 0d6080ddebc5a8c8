//! Freed zspages go back to the OS: the process's resident memory falls.
//! Alone in its own test binary so other tests do not disturb the figure.

#[cfg(all(target_os = "linux", not(miri)))]
#[test]
fn freeing_objects_lowers_resident_memory() {
    use zsmem::{Pool, PoolConfig};

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
}
