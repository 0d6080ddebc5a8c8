//! The C API called from Rust as a C program would call it: every function,
//! its success and its error paths. (`c/test_zsmem.c` does the same from C.)
//!
//! The crate builds only a static and a shared library (an rlib named
//! `zsmem` would collide with the core crate's), so these tests live inside
//! it rather than in `tests/`.

use std::ffi::{CStr, c_int, c_void};
use std::mem::{MaybeUninit, size_of};
use std::ptr::{null, null_mut};

use libc::{E2BIG, EBADF, EINVAL, EIO, EMFILE, EMSGSIZE, ENOBUFS, ENOMEM, ENOTRECOVERABLE, ERANGE};

use crate::*;

fn last_error() -> String {
    // SAFETY: zsmem_last_error_message returns a valid C string.
    unsafe { CStr::from_ptr(zsmem_last_error_message()) }
        .to_string_lossy()
        .into_owned()
}

fn pool_config() -> zsmem_pool_config {
    let mut c = MaybeUninit::<zsmem_pool_config>::uninit();
    // SAFETY: `c` is writable for its size.
    assert_eq!(
        unsafe { zsmem_pool_config_init(c.as_mut_ptr(), size_of::<zsmem_pool_config>()) },
        0
    );
    // SAFETY: initialised just now.
    unsafe { c.assume_init() }
}

fn store_config() -> zsmem_store_config {
    let mut c = MaybeUninit::<zsmem_store_config>::uninit();
    // SAFETY: `c` is writable for its size.
    assert_eq!(
        unsafe { zsmem_store_config_init(c.as_mut_ptr(), size_of::<zsmem_store_config>()) },
        0
    );
    // SAFETY: initialised just now.
    unsafe { c.assume_init() }
}

/// A pool that is destroyed on drop.
struct TestPool(*mut zsmem_pool);

impl TestPool {
    fn new(cfg: &zsmem_pool_config) -> TestPool {
        let mut p = null_mut();
        // SAFETY: valid config and out pointer.
        let rc = unsafe { zsmem_pool_new(cfg, &mut p) };
        assert_eq!(rc, 0, "{}", last_error());
        assert!(!p.is_null());
        TestPool(p)
    }

    fn store(&self, data: &[u8]) -> u64 {
        let mut h = 0;
        // SAFETY: live pool, readable data, writable out.
        let rc = unsafe { zsmem_pool_store(self.0, data.as_ptr().cast(), data.len(), &mut h) };
        assert_eq!(rc, 0, "{}", last_error());
        assert_ne!(h, 0);
        h
    }

    fn read(&self, h: u64, buf: &mut [u8]) -> (c_int, usize) {
        let mut needed = usize::MAX;
        // SAFETY: live pool, writable buffer and out.
        let rc =
            unsafe { zsmem_pool_read(self.0, h, buf.as_mut_ptr().cast(), buf.len(), &mut needed) };
        (rc, needed)
    }

    fn stats(&self) -> zsmem_pool_stats {
        let mut s = zsmem_pool_stats::default();
        // SAFETY: live pool, writable stats of the size given.
        let rc = unsafe { zsmem_pool_get_stats(self.0, &mut s, size_of::<zsmem_pool_stats>()) };
        assert_eq!(rc, 0);
        s
    }

    fn check(&self) {
        // SAFETY: live pool.
        assert_eq!(
            unsafe { zsmem_pool_check_invariants(self.0) },
            0,
            "{}",
            last_error()
        );
    }
}

impl Drop for TestPool {
    fn drop(&mut self) {
        // SAFETY: made by zsmem_pool_new, destroyed once.
        unsafe { zsmem_pool_destroy(self.0) };
    }
}

/// A store that is destroyed on drop.
struct TestStore(*mut zsmem_store);

impl TestStore {
    fn new(cfg: &zsmem_store_config, pool: &zsmem_pool_config) -> TestStore {
        let mut s = null_mut();
        // SAFETY: valid configs and out pointer.
        let rc = unsafe { zsmem_store_new(cfg, pool, &mut s) };
        assert_eq!(rc, 0, "{}", last_error());
        TestStore(s)
    }

    fn write(&self, i: usize, page: &[u8]) -> c_int {
        // SAFETY: live store, readable page.
        unsafe { zsmem_store_write(self.0, i, page.as_ptr().cast(), page.len()) }
    }

    fn read(&self, i: usize, page: &mut [u8]) -> c_int {
        // SAFETY: live store, writable page.
        unsafe { zsmem_store_read(self.0, i, page.as_mut_ptr().cast(), page.len()) }
    }

    fn mm_stat(&self) -> zsmem_mm_stat {
        let mut m = zsmem_mm_stat::default();
        // SAFETY: live store, writable out.
        assert_eq!(unsafe { zsmem_store_mm_stat(self.0, &mut m) }, 0);
        m
    }
}

impl Drop for TestStore {
    fn drop(&mut self) {
        // SAFETY: made by zsmem_store_new, destroyed once.
        unsafe { zsmem_store_destroy(self.0) };
    }
}

fn text_page(seed: u8) -> Vec<u8> {
    let mut v: Vec<u8> = format!("int f{seed}(void) {{ return {seed}; }}\n")
        .bytes()
        .cycle()
        .take(4096)
        .collect();
    v[0] = seed;
    v
}

#[test]
fn version_matches_the_package() {
    assert_eq!(
        (
            ZSMEM_VERSION_MAJOR,
            ZSMEM_VERSION_MINOR,
            ZSMEM_VERSION_PATCH
        ),
        (
            env!("CARGO_PKG_VERSION_MAJOR").parse().unwrap(),
            env!("CARGO_PKG_VERSION_MINOR").parse().unwrap(),
            env!("CARGO_PKG_VERSION_PATCH").parse().unwrap(),
        ),
        "bump the ZSMEM_VERSION_* constants in lib.rs and regenerate the header"
    );
    // SAFETY: a static C string.
    let v = unsafe { CStr::from_ptr(zsmem_version()) };
    assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
}

#[test]
#[cfg_attr(miri, ignore = "mmap")]
fn pool_round_trip_through_every_call() {
    let cfg = pool_config();
    assert_eq!(
        (cfg.page_size, cfg.chain_size, cfg.class_delta),
        (4096, 32, 16)
    );
    assert_eq!((cfg.trim_pages, cfg.compaction_min_pages), (1, 1));
    assert_eq!(cfg.compaction, ZSMEM_COMPACTION_AUTO);
    let pool = TestPool::new(&cfg);

    let h = pool.store(b"compressed bytes");
    // SAFETY (all blocks below): live pool, buffers of the lengths given.
    assert_eq!(unsafe { zsmem_pool_object_len(pool.0, h) }, 16);
    let mut buf = [0u8; 64];
    assert_eq!(pool.read(h, &mut buf).0, 16);
    assert_eq!(&buf[..16], b"compressed bytes");

    let mut h2 = 0;
    // SAFETY: the handles, pools, stores and buffers passed are live and
    // sized as set up above; invalid ones are the error paths under test.
    assert_eq!(unsafe { zsmem_pool_alloc(pool.0, 1000, &mut h2) }, 0);
    assert_eq!(
        unsafe { zsmem_pool_write(pool.0, h2, [7u8; 1000].as_ptr().cast(), 1000) },
        0
    );
    assert_eq!(
        // SAFETY: the handles, pools, stores and buffers passed are live and
        // sized as set up above; invalid ones are the error paths under test.
        unsafe { zsmem_pool_write_at(pool.0, h2, 998, b"xy".as_ptr().cast(), 2) },
        0
    );
    let mut big = vec![0u8; 4096];
    assert_eq!(pool.read(h2, &mut big).0, 1000);
    assert!(big[..998].iter().all(|&b| b == 7));
    assert_eq!(&big[998..1000], b"xy");

    let s = pool.stats();
    assert_eq!((s.objects, s.bytes_stored, s.page_size), (2, 1016, 4096));
    assert_eq!(s.bytes_held, s.pages_held * 4096);
    assert!(s.pages_held >= 1 && s.metadata_bytes > 0);

    // SAFETY: the handles, pools, stores and buffers passed are live and
    // sized as set up above; invalid ones are the error paths under test.
    let n = unsafe { zsmem_pool_class_stats(pool.0, null_mut(), 0) };
    assert!(n > 100, "{n} physical classes");
    let mut classes = vec![zsmem_class_stats::default(); n as usize];
    assert_eq!(
        unsafe { zsmem_pool_class_stats(pool.0, classes.as_mut_ptr(), classes.len()) },
        n
    );
    assert_eq!(classes.iter().map(|c| c.obj_used).sum::<u64>(), 2);
    assert!(classes.windows(2).all(|w| w[0].size < w[1].size));
    // A short array gets the first classes only.
    let mut two = [zsmem_class_stats::default(); 2];
    assert_eq!(
        // SAFETY: the handles, pools, stores and buffers passed are live and
        // sized as set up above; invalid ones are the error paths under test.
        unsafe { zsmem_pool_class_stats(pool.0, two.as_mut_ptr(), 2) },
        n
    );
    assert_eq!(two[1], classes[1]);

    pool.check();
    // SAFETY: the handles, pools, stores and buffers passed are live and
    // sized as set up above; invalid ones are the error paths under test.
    assert_eq!(unsafe { zsmem_pool_free(pool.0, h) }, 0);
    assert_eq!(unsafe { zsmem_pool_free(pool.0, h2) }, 0);
    assert!(unsafe { zsmem_pool_compact(pool.0) } >= 0);
    assert_eq!(unsafe { zsmem_pool_trim(pool.0) }, 0);
    let s = pool.stats();
    assert_eq!((s.objects, s.pages_held, s.cached_pages), (0, 0, 0));
    pool.check();
}

#[test]
#[cfg_attr(miri, ignore = "mmap")]
fn handle_misuse_is_ebadf_never_data() {
    let pool = TestPool::new(&pool_config());
    let h = pool.store(b"first");
    // SAFETY (all blocks below): live pool, buffers of the lengths given.
    assert_eq!(unsafe { zsmem_pool_free(pool.0, h) }, 0);
    assert_eq!(unsafe { zsmem_pool_free(pool.0, h) }, -EBADF, "double free");
    assert!(
        last_error().starts_with("zsmem_pool_free: invalid handle"),
        "{}",
        last_error()
    );
    let mut buf = [0u8; 16];
    assert_eq!(pool.read(h, &mut buf).0, -EBADF, "use after free");
    // SAFETY: the handles, pools, stores and buffers passed are live and
    // sized as set up above; invalid ones are the error paths under test.
    assert_eq!(unsafe { zsmem_pool_object_len(pool.0, h) }, -EBADF);
    assert_eq!(
        unsafe { zsmem_pool_write(pool.0, h, b"x".as_ptr().cast(), 1) },
        -EBADF
    );
    // The slot reused by a new object: the old handle is stale.
    let h2 = pool.store(b"second");
    assert_ne!(h, h2);
    assert_eq!(pool.read(h, &mut buf).0, -EBADF, "stale handle");
    assert!(last_error().contains("stale"), "{}", last_error());
    for forged in [0, u64::MAX, h2 ^ 1 << 20, h2 + 1] {
        assert_eq!(pool.read(forged, &mut buf).0, -EBADF, "forged {forged:#x}");
        // SAFETY: the handles, pools, stores and buffers passed are live and
        // sized as set up above; invalid ones are the error paths under test.
        assert_eq!(unsafe { zsmem_pool_free(pool.0, forged) }, -EBADF);
    }
    // A handle of another pool, even where that pool has an object in the
    // same class, slot and generation.
    let other = TestPool::new(&pool_config());
    let o = other.store(b"OTHER!");
    assert_eq!(other.read(h2, &mut buf).0, -EBADF);
    assert!(last_error().contains("another pool"), "{}", last_error());
    // SAFETY: live pools; the handles are the error paths under test.
    assert_eq!(unsafe { zsmem_pool_free(other.0, h2) }, -EBADF);
    assert_eq!(unsafe { zsmem_pool_free(pool.0, o) }, -EBADF);
    assert_eq!(other.read(o, &mut buf).0, 6);
    assert_eq!(&buf[..6], b"OTHER!");
    assert_eq!(pool.read(h2, &mut buf).0, 6);
    pool.check();
}

#[test]
#[cfg_attr(miri, ignore = "mmap")]
fn bad_lengths_have_their_codes() {
    let pool = TestPool::new(&pool_config());
    let mut h = 0;
    // SAFETY (all blocks below): live pool, buffers of the lengths given.
    assert_eq!(unsafe { zsmem_pool_alloc(pool.0, 0, &mut h) }, -EINVAL);
    assert_eq!(unsafe { zsmem_pool_alloc(pool.0, 4097, &mut h) }, -E2BIG);
    assert!(last_error().contains("4097"), "{}", last_error());
    let page = vec![1u8; 5000];
    assert_eq!(
        unsafe { zsmem_pool_store(pool.0, page.as_ptr().cast(), 5000, &mut h) },
        -E2BIG
    );
    assert_eq!(h, 0, "no handle written on failure");

    let h = pool.store(&[9u8; 100]);
    assert_eq!(
        // SAFETY: the handles, pools, stores and buffers passed are live and
        // sized as set up above; invalid ones are the error paths under test.
        unsafe { zsmem_pool_write_at(pool.0, h, 99, b"ab".as_ptr().cast(), 2) },
        -EMSGSIZE
    );
    assert_eq!(
        unsafe { zsmem_pool_write(pool.0, h, page.as_ptr().cast(), 101) },
        -EMSGSIZE
    );
    let mut small = [0xEEu8; 99];
    let (rc, needed) = pool.read(h, &mut small);
    assert_eq!((rc, needed), (-ENOBUFS, 100));
    assert!(
        small.iter().all(|&b| b == 0xEE),
        "a refused read leaves the buffer alone"
    );
    assert!(last_error().contains("99 bytes"), "{}", last_error());
    // `needed` may be NULL.
    assert_eq!(
        // SAFETY: the handles, pools, stores and buffers passed are live and
        // sized as set up above; invalid ones are the error paths under test.
        unsafe { zsmem_pool_read(pool.0, h, small.as_mut_ptr().cast(), 99, null_mut()) },
        -ENOBUFS
    );
    // Nothing changed: the object is intact.
    let mut buf = [0u8; 100];
    assert_eq!(pool.read(h, &mut buf).0, 100);
    assert_eq!(buf, [9u8; 100]);
    pool.check();
}

#[test]
#[cfg_attr(miri, ignore = "mmap")]
fn every_null_pointer_is_einval() {
    let cfg = pool_config();
    let pool = TestPool::new(&cfg);
    let h = pool.store(b"x");
    let mut out = 0u64;
    let mut p = null_mut();
    let data: *const c_void = b"abc".as_ptr().cast();
    let mut buf = [0u8; 8];
    let b: *mut c_void = buf.as_mut_ptr().cast();
    let np: *mut zsmem_pool = null_mut();
    let ns: *mut zsmem_store = null_mut();
    let scfg = store_config();
    let mut m = zsmem_mm_stat::default();
    let mut st = zsmem_pool_stats::default();
    // SAFETY (all calls): each passes NULL where a pointer is checked, and
    // valid pointers everywhere else.
    let codes: Vec<(&str, i64)> = unsafe {
        vec![
            ("config_init", zsmem_pool_config_init(null_mut(), 64).into()),
            (
                "store_config_init",
                zsmem_store_config_init(null_mut(), 24).into(),
            ),
            ("new config", zsmem_pool_new(null(), &mut p).into()),
            ("new out", zsmem_pool_new(&cfg, null_mut()).into()),
            ("alloc pool", zsmem_pool_alloc(np, 1, &mut out).into()),
            ("alloc out", zsmem_pool_alloc(pool.0, 1, null_mut()).into()),
            ("store pool", zsmem_pool_store(np, data, 3, &mut out).into()),
            (
                "store data",
                zsmem_pool_store(pool.0, null(), 3, &mut out).into(),
            ),
            (
                "store out",
                zsmem_pool_store(pool.0, data, 3, null_mut()).into(),
            ),
            ("write pool", zsmem_pool_write(np, h, data, 1).into()),
            ("write data", zsmem_pool_write(pool.0, h, null(), 1).into()),
            (
                "write_at pool",
                zsmem_pool_write_at(np, h, 0, data, 1).into(),
            ),
            (
                "write_at data",
                zsmem_pool_write_at(pool.0, h, 0, null(), 1).into(),
            ),
            ("read pool", zsmem_pool_read(np, h, b, 8, null_mut()).into()),
            (
                "read buf",
                zsmem_pool_read(pool.0, h, null_mut(), 8, null_mut()).into(),
            ),
            ("object_len", zsmem_pool_object_len(np, h).into()),
            ("free", zsmem_pool_free(np, h).into()),
            ("compact", zsmem_pool_compact(np)),
            ("trim", zsmem_pool_trim(np).into()),
            ("check", zsmem_pool_check_invariants(np).into()),
            (
                "stats pool",
                zsmem_pool_get_stats(np, &mut st, size_of_val(&st)).into(),
            ),
            (
                "stats out",
                zsmem_pool_get_stats(pool.0, null_mut(), 128).into(),
            ),
            (
                "class_stats pool",
                zsmem_pool_class_stats(np, null_mut(), 0).into(),
            ),
            (
                "class_stats out",
                zsmem_pool_class_stats(pool.0, null_mut(), 3).into(),
            ),
            (
                "store_new config",
                zsmem_store_new(null(), &cfg, &mut null_mut()).into(),
            ),
            (
                "store_new pool",
                zsmem_store_new(&scfg, null(), &mut null_mut()).into(),
            ),
            (
                "store_new out",
                zsmem_store_new(&scfg, &cfg, null_mut()).into(),
            ),
            (
                "store_write store",
                zsmem_store_write(ns, 0, data, 4096).into(),
            ),
            (
                "store_write page",
                zsmem_store_write(ns, 0, null(), 4096).into(),
            ),
            ("store_read store", zsmem_store_read(ns, 0, b, 4096).into()),
            ("store_discard", zsmem_store_discard(ns, 0, 1).into()),
            ("store_compact", zsmem_store_compact(ns)),
            ("mm_stat store", zsmem_store_mm_stat(ns, &mut m).into()),
        ]
    };
    for (what, rc) in codes {
        assert_eq!(rc, -i64::from(EINVAL), "{what}");
    }
    assert!(last_error().ends_with("is NULL"), "{}", last_error());
    // The *_destroy functions ignore NULL.
    // SAFETY: NULL is documented as ignored.
    unsafe {
        zsmem_pool_destroy(null_mut());
        zsmem_store_destroy(null_mut());
    }
    assert_eq!(out, 0);
    assert!(p.is_null());
}

/// Log placement through the C configuration: objects packed, read back,
/// freed, and a handle of the pool refused once freed.
#[test]
#[cfg_attr(miri, ignore = "mmap")]
fn log_lanes_give_a_log_placed_pool() {
    let mut cfg = pool_config();
    assert_eq!(cfg.log_lanes, 0, "size classes by default");
    cfg.log_lanes = 2;
    let pool = TestPool::new(&cfg);
    let hs: Vec<u64> = (0..3u8).map(|i| pool.store(&[i; 1000])).collect();
    let mut buf = [0u8; 4096];
    for (i, &h) in hs.iter().enumerate() {
        assert_eq!(pool.read(h, &mut buf).0, 1000);
        assert!(buf[..1000].iter().all(|&b| b == i as u8));
    }
    let s = pool.stats();
    // 3,000 bytes packed in one page, no rounding (no class).
    assert_eq!((s.objects, s.pages_held), (3, 1));
    for &h in &hs {
        // SAFETY: live pool.
        assert_eq!(unsafe { zsmem_pool_free(pool.0, h) }, 0);
    }
    assert_eq!(pool.read(hs[0], &mut buf).0, -EBADF);
    assert_eq!(pool.stats().pages_held, 0);
}

/// The same default configuration gives the same placement as in Rust: a
/// pool places by size class, a page store's pool by log; the placement
/// field says otherwise on request.
#[test]
#[cfg_attr(miri, ignore = "mmap")]
fn a_store_places_by_log_and_a_pool_by_class_as_in_rust() {
    let lanes = |store: &TestStore| {
        let s = crate::store::store_ref(store.0).unwrap();
        s.pool().config().placement
    };
    let pool_cfg = pool_config();
    assert_eq!(pool_cfg.placement, ZSMEM_PLACEMENT_DEFAULT);
    let store = TestStore::new(&store_config(), &pool_cfg);
    assert_eq!(
        lanes(&store),
        zsmem_core::PageStoreConfig::default().pool.placement,
        "the Rust page store's default"
    );
    assert!(matches!(lanes(&store), zsmem_core::Placement::Log { .. }));
    let pool = TestPool::new(&pool_cfg);
    assert_eq!(
        crate::pool::pool_ref(pool.0).unwrap().config().placement,
        zsmem_core::Placement::Classes
    );
    let mut classes = pool_config();
    classes.placement = ZSMEM_PLACEMENT_CLASSES;
    let store = TestStore::new(&store_config(), &classes);
    assert_eq!(lanes(&store), zsmem_core::Placement::Classes);
    let mut log = pool_config();
    log.placement = ZSMEM_PLACEMENT_LOG;
    log.log_lanes = 3;
    let pool = TestPool::new(&log);
    assert_eq!(
        crate::pool::pool_ref(pool.0).unwrap().config().placement,
        zsmem_core::Placement::Log { lanes: 3 }
    );
}

/// What a store holds, all in, and its trim: a C program can measure
/// and settle its memory as `zsmem compare` does.
#[test]
#[cfg_attr(miri, ignore = "mmap")]
fn store_memory_counts_pool_cache_and_metadata_and_trim_settles_it() {
    let store = TestStore::new(&store_config(), &pool_config());
    let page: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8).collect();
    for i in 0..512 {
        assert_eq!(store.write(i, &page), 0);
    }
    let memory = |s: &TestStore| {
        let mut m = zsmem_store_memory::default();
        // SAFETY: live store, writable struct of that size.
        let rc = unsafe { zsmem_store_get_memory(s.0, &mut m, size_of::<zsmem_store_memory>()) };
        assert_eq!(rc, 0, "{}", last_error());
        m
    };
    let m = memory(&store);
    let mm = store.mm_stat();
    assert_eq!(m.pool_bytes, mm.mem_used_total);
    assert_eq!(m.compr_data_size, mm.compr_data_size);
    assert!(m.metadata_bytes > 0);
    assert_eq!(
        m.all_in_bytes,
        m.pool_bytes + m.cached_bytes + m.metadata_bytes
    );
    // SAFETY: live store.
    assert_eq!(unsafe { zsmem_store_discard(store.0, 0, 512) }, 0);
    // SAFETY: live store.
    assert_eq!(unsafe { zsmem_store_trim(store.0) }, 0);
    let m = memory(&store);
    assert_eq!((m.pool_bytes, m.cached_bytes), (0, 0));
    // An older caller's smaller struct gets only its bytes.
    let mut first = [0xA5u8; 16];
    // SAFETY: writable for 8 bytes (and more, which must stay).
    let rc = unsafe { zsmem_store_get_memory(store.0, first.as_mut_ptr().cast(), 8) };
    assert_eq!(rc, 0);
    assert_eq!(first[..8], [0u8; 8]);
    assert_eq!(first[8..], [0xA5u8; 8]);
    // A dead store or a NULL out is EINVAL.
    // SAFETY: NULL is refused.
    let rc = unsafe { zsmem_store_get_memory(store.0, null_mut(), 0) };
    assert_eq!(rc, -EINVAL);
    // SAFETY: a forged pointer is only looked up.
    assert_eq!(unsafe { zsmem_store_trim(8 as *mut zsmem_store) }, -EINVAL);
}

#[test]
#[cfg_attr(miri, ignore = "mmap")]
fn bad_configurations_are_einval_with_a_reason() {
    let try_cfg = |c: &zsmem_pool_config| {
        let mut p = null_mut();
        // SAFETY: valid pointers.
        let rc = unsafe { zsmem_pool_new(c, &mut p) };
        assert!(p.is_null(), "no pool made by a refused configuration");
        (rc, last_error())
    };
    // An uninitialised (zeroed) struct.
    // SAFETY: all-zero is a valid zsmem_pool_config (plain integers).
    let zeroed: zsmem_pool_config = unsafe { std::mem::zeroed() };
    let (rc, msg) = try_cfg(&zeroed);
    assert_eq!(rc, -EINVAL);
    assert!(msg.contains("zsmem_pool_config_default"), "{msg}");
    for (field, edit) in [
        (
            "page size",
            (|c: &mut zsmem_pool_config| c.page_size = 5000) as fn(&mut _),
        ),
        ("chain", |c| c.chain_size = 0),
        ("delta", |c| c.class_delta = 12),
        ("chain_rule", |c| c.chain_rule = 4),
        ("kernel_handle_header", |c| c.kernel_handle_header = 2),
        ("compaction", |c| c.compaction = 9),
        ("trim_pages", |c| c.trim_pages = 2),
        ("min_freeable_pages and max_moves", |c| {
            c.compaction_min_pages = 0
        }),
        ("min_freeable_pages and max_moves", |c| {
            c.compaction_max_moves = 0
        }),
        ("lanes", |c| c.log_lanes = 65),
        ("delay", |c| c.return_delay_us = usize::MAX),
        ("placement", |c| c.placement = 3),
        ("locked_reads", |c| c.locked_reads = 2),
        ("log_lanes is 2 with ZSMEM_PLACEMENT_CLASSES", |c| {
            c.placement = ZSMEM_PLACEMENT_CLASSES;
            c.log_lanes = 2;
        }),
        ("log placement needs trim_pages", |c| {
            c.log_lanes = 2;
            c.trim_pages = 0;
        }),
    ] {
        let mut c = pool_config();
        edit(&mut c);
        let (rc, msg) = try_cfg(&c);
        assert_eq!(rc, -EINVAL, "{field}");
        assert!(
            msg.starts_with("zsmem_pool_new: invalid configuration"),
            "{field}: {msg}"
        );
    }

    // A caller built with a newer header: a longer struct is fine while its
    // extra fields are zero, refused when it sets any.
    #[repr(C)]
    struct Newer {
        cfg: zsmem_pool_config,
        extra: u64,
    }
    let mut n = MaybeUninit::<Newer>::uninit();
    // SAFETY: writable for its size.
    assert_eq!(
        unsafe { zsmem_pool_config_init(n.as_mut_ptr().cast(), size_of::<Newer>()) },
        0
    );
    // SAFETY: initialised (the library zeroes what it does not know).
    let mut n = unsafe { n.assume_init() };
    assert_eq!((n.cfg.size, n.extra), (size_of::<Newer>(), 0));
    let pool = TestPool::new(&n.cfg);
    drop(pool);
    n.extra = 1;
    let (rc, msg) = try_cfg(&n.cfg);
    assert_eq!(rc, -EINVAL);
    assert!(msg.contains("newer header"), "{msg}");
    // A size smaller than any version is refused by init.
    let mut c = pool_config();
    // SAFETY: writable for far more than 8 bytes.
    assert_eq!(unsafe { zsmem_pool_config_init(&mut c, 8) }, -EINVAL);
}

#[test]
#[cfg_attr(miri, ignore = "mmap")]
fn memory_limit_is_enomem_and_changes_nothing() {
    let mut cfg = pool_config();
    cfg.memory_limit = 4 * 4096;
    let pool = TestPool::new(&cfg);
    let mut stored = 0;
    let rc = loop {
        let mut h = 0;
        // SAFETY: live pool, readable data, writable out.
        // Page-sized objects: one page each.
        let rc = unsafe { zsmem_pool_store(pool.0, [5u8; 4096].as_ptr().cast(), 4096, &mut h) };
        if rc != 0 {
            break rc;
        }
        stored += 1;
    };
    assert_eq!(rc, -ENOMEM);
    assert!(last_error().contains("memory limit"), "{}", last_error());
    assert_eq!(stored, 4);
    assert_eq!(pool.stats().pages_held, 4);
    pool.check();
}

#[test]
#[cfg_attr(miri, ignore = "liblz4 and mmap")]
fn store_pages_discard_and_mm_stat() {
    let mut scfg = store_config();
    assert_eq!((scfg.codec, scfg.zstd_level), (ZSMEM_CODEC_LZ4, 3));
    scfg.slots = 16;
    for codec in [ZSMEM_CODEC_LZ4, ZSMEM_CODEC_ZSTD] {
        scfg.codec = codec;
        let store = TestStore::new(&scfg, &pool_config());
        assert_eq!(store.write(0, &[0u8; 4096]), 0);
        assert_eq!(store.write(1, &text_page(1)), 0);
        assert_eq!(store.write(15, &text_page(15)), 0);
        let mut out = vec![0xAAu8; 4096];
        assert_eq!(store.read(1, &mut out), 0);
        assert_eq!(out, text_page(1));
        assert_eq!(store.read(2, &mut out), 0, "never written");
        assert!(out.iter().all(|&b| b == 0));
        let m = store.mm_stat();
        assert_eq!((m.orig_data_size, m.same_pages), (3 * 4096, 1));
        assert!(m.compr_data_size > 0 && m.compr_data_size < 1000, "{m:?}");
        assert_eq!(m.mem_used_total % 4096, 0);

        // SAFETY (all blocks below): live store.
        assert_eq!(unsafe { zsmem_store_discard(store.0, 0, 2) }, 0);
        assert_eq!(store.read(1, &mut out), 0);
        assert!(out.iter().all(|&b| b == 0), "discarded");
        assert!(unsafe { zsmem_store_compact(store.0) } >= 0);
        assert_eq!(store.mm_stat().orig_data_size, 4096);

        // Error paths.
        assert_eq!(store.write(16, &text_page(1)), -ERANGE);
        assert!(last_error().contains("slot 16"), "{}", last_error());
        assert_eq!(store.read(99, &mut out), -ERANGE);
        // SAFETY: the handles, pools, stores and buffers passed are live and
        // sized as set up above; invalid ones are the error paths under test.
        assert_eq!(unsafe { zsmem_store_discard(store.0, 10, 7) }, -ERANGE);
        assert_eq!(
            unsafe { zsmem_store_discard(store.0, usize::MAX, 2) },
            -ERANGE
        );
        assert_eq!(store.write(3, &[1u8; 100]), -EINVAL);
        let mut short = [0x55u8; 4095];
        assert_eq!(store.read(15, &mut short), -EINVAL);
        assert!(
            short.iter().all(|&b| b == 0x55),
            "a refused read leaves the buffer alone"
        );
        // A slot out of range too (the buffer was zeroed before the slot
        // was checked).
        let mut page = vec![0x55u8; 4096];
        assert_eq!(store.read(16, &mut page), -ERANGE);
        assert!(page.iter().all(|&b| b == 0x55), "out of range: untouched");
        assert_eq!(store.read(15, &mut out), 0);
        assert_eq!(out, text_page(15));
        // Every malformed request above is counted, reads as writes (a
        // read of the wrong length was refused uncounted).
        let mut io = MaybeUninit::<zsmem_io_stat>::zeroed();
        // SAFETY: live store; `io` is writable for its size.
        let rc =
            unsafe { zsmem_store_io_stat(store.0, io.as_mut_ptr(), size_of::<zsmem_io_stat>()) };
        assert_eq!(rc, 0);
        // SAFETY: filled whole by the call.
        let io = unsafe { io.assume_init() };
        // write 16, read 99, discard twice, write of 100 bytes, read of
        // 4095 bytes, read 16.
        assert_eq!(io.invalid_io, 7, "{io:?}");
    }
}

#[test]
#[cfg_attr(miri, ignore = "liblz4 and mmap")]
fn store_memory_limit_keeps_the_old_page() {
    let mut scfg = store_config();
    scfg.slots = 64;
    let mut pcfg = pool_config();
    pcfg.memory_limit = 2 * 4096;
    let store = TestStore::new(&scfg, &pcfg);
    let noise = |seed: u64| -> Vec<u8> {
        let mut x = seed | 1 << 40;
        (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    };
    assert_eq!(store.write(0, &noise(0)), 0);
    assert_eq!(store.write(1, &noise(1)), 0);
    assert_eq!(store.write(0, &noise(2)), -ENOMEM);
    let mut out = vec![0u8; 4096];
    assert_eq!(store.read(0, &mut out), 0);
    assert_eq!(out, noise(0));
    assert_eq!(store.mm_stat().mem_limit, 2 * 4096);
}

#[test]
fn bad_store_configurations_are_einval() {
    let pcfg = pool_config();
    let mut s = null_mut();
    for edit in [
        (|c: &mut zsmem_store_config| c.slots = 0) as fn(&mut _),
        |c| c.codec = 2,
        |c| {
            c.codec = ZSMEM_CODEC_ZSTD;
            c.zstd_level = 23
        },
        |c| {
            c.codec = ZSMEM_CODEC_ZSTD;
            c.zstd_level = 0
        },
        |c| c.size = 0,
    ] {
        let mut c = store_config();
        edit(&mut c);
        // SAFETY: valid pointers.
        assert_eq!(unsafe { zsmem_store_new(&c, &pcfg, &mut s) }, -EINVAL);
        assert!(
            last_error().starts_with("zsmem_store_new: "),
            "{}",
            last_error()
        );
    }
    let mut bad_pool = pcfg;
    bad_pool.page_size = 3;
    // SAFETY: valid pointers.
    assert_eq!(
        unsafe { zsmem_store_new(&store_config(), &bad_pool, &mut s) },
        -EINVAL
    );
    assert!(s.is_null());
    // Log placement names at most 2^31 slots (issue 32).
    let mut log_pool = pcfg;
    log_pool.log_lanes = 1;
    let mut c = store_config();
    c.slots = (1 << 31) + 1;
    // SAFETY: valid pointers.
    assert_eq!(unsafe { zsmem_store_new(&c, &log_pool, &mut s) }, -EINVAL);
    assert!(
        last_error().contains("at most 2147483648"),
        "{}",
        last_error()
    );
    assert!(s.is_null());
}

/// Issue 32: the init functions refused every earlier struct size, so a
/// program built against an older header could not start. Each earlier
/// size gets its prefix of today's defaults and not a byte more (the
/// caller's struct ends there); `c/test_old_header.c` does the same
/// against the real earlier headers.
#[test]
fn earlier_struct_sizes_get_their_prefix_and_nothing_past_it() {
    /// Words enough for any version; writable and aligned.
    type Buf = [u64; 64];
    type Init = fn(&mut Buf, usize) -> c_int;
    fn pool_init(w: &mut Buf, size: usize) -> c_int {
        // SAFETY: `w` is writable and aligned for far more than `size`.
        unsafe { zsmem_pool_config_init(w.as_mut_ptr().cast(), size) }
    }
    fn store_init(w: &mut Buf, size: usize) -> c_int {
        // SAFETY: as above.
        unsafe { zsmem_store_config_init(w.as_mut_ptr().cast(), size) }
    }
    fn region_init(w: &mut Buf, size: usize) -> c_int {
        // SAFETY: as above.
        unsafe { zsmem_region_config_init(w.as_mut_ptr().cast(), size) }
    }
    let cases: [(Init, usize, &[usize]); 3] = [
        (
            pool_init,
            size_of::<zsmem_pool_config>(),
            &pool::POOL_CONFIG_VERSIONS,
        ),
        (
            store_init,
            size_of::<zsmem_store_config>(),
            &store::STORE_CONFIG_VERSIONS,
        ),
        (
            region_init,
            size_of::<zsmem_region_config>(),
            &region::REGION_CONFIG_VERSIONS,
        ),
    ];
    for (init, ours, versions) in cases {
        let mut today = [0u64; 64];
        assert_eq!(init(&mut today, ours), 0);
        for &size in versions {
            assert!(size % 8 == 0 && size < ours, "{size}");
            let mut w = [0xA5A5_A5A5_A5A5_A5A5u64; 64];
            assert_eq!(init(&mut w, size), 0, "size {size}: {}", last_error());
            assert_eq!(w[0], size as u64);
            let n = size / 8;
            assert_eq!(w[1..n], today[1..n], "size {size}: today's defaults");
            assert!(
                w[n..].iter().all(|&x| x == 0xA5A5_A5A5_A5A5_A5A5),
                "size {size}: written past the caller's struct"
            );
        }
        // A size between versions is no struct's: refused, naming them.
        let mut w = [0u64; 64];
        assert_eq!(init(&mut w, versions[0] + 4), -EINVAL);
        let earlier: Vec<String> = versions.iter().map(usize::to_string).collect();
        assert!(
            last_error().contains(&earlier.join(", ")),
            "{}",
            last_error()
        );
    }
}

/// The fields appended for parity default to what Rust's defaults say.
#[test]
fn appended_config_fields_default_as_in_rust() {
    assert_eq!(
        pool_config().class_grid,
        zsmem_core::PoolConfig::default().class_grid
    );
    let store = store_config();
    assert_eq!(
        store.track_access_time,
        u32::from(zsmem_core::PageStoreConfig::default().track_access_time)
    );
    assert_eq!(store.reserved, 0);
}

#[test]
#[cfg_attr(miri, ignore = "mmap")]
fn stats_fill_only_the_callers_size() {
    let pool = TestPool::new(&pool_config());
    pool.store(&[1u8; 100]);
    // An older caller whose struct ends after `pages_held`.
    let mut words = [u64::MAX; 4];
    // SAFETY: 16 writable bytes at `words`.
    let rc = unsafe { zsmem_pool_get_stats(pool.0, words.as_mut_ptr().cast(), 16) };
    assert_eq!(rc, 0);
    let full = pool.stats();
    assert_eq!(words, [4096, full.pages_held, u64::MAX, u64::MAX]);
    // A newer caller's longer struct: the rest is zeroed.
    let mut longer = [u64::MAX; 32];
    // SAFETY: 256 writable bytes.
    let rc = unsafe { zsmem_pool_get_stats(pool.0, longer.as_mut_ptr().cast(), 256) };
    assert_eq!(rc, 0);
    let n = size_of::<zsmem_pool_stats>() / 8;
    assert_eq!(longer[4], 1, "objects");
    assert!(longer[n..].iter().all(|&w| w == 0));
}

#[test]
fn strerror_names_every_code_and_messages_are_per_thread() {
    let mut seen = std::collections::HashSet::new();
    for code in [
        0,
        EINVAL,
        E2BIG,
        EMSGSIZE,
        ENOBUFS,
        ENOMEM,
        EMFILE,
        EBADF,
        ERANGE,
        EIO,
        ENOTRECOVERABLE,
    ] {
        // SAFETY: static C strings.
        let neg = unsafe { CStr::from_ptr(zsmem_strerror(-code)) };
        let pos = unsafe { CStr::from_ptr(zsmem_strerror(code)) };
        assert_eq!(neg, pos);
        assert!(seen.insert(neg.to_owned()), "{neg:?} twice");
    }
    for odd in [12345, -12345, c_int::MIN, c_int::MAX] {
        // SAFETY: static C string.
        let s = unsafe { CStr::from_ptr(zsmem_strerror(odd)) };
        assert_eq!(s.to_str().unwrap(), "unknown error code");
    }
    // SAFETY: NULL is checked.
    assert_eq!(unsafe { zsmem_pool_trim(null_mut()) }, -EINVAL);
    assert_eq!(last_error(), "zsmem_pool_trim: pool is NULL");
    let other = std::thread::spawn(last_error).join().unwrap();
    assert_eq!(other, "", "another thread has no error yet");
    // A success leaves the message alone.
    pool_config();
    assert_eq!(last_error(), "zsmem_pool_trim: pool is NULL");
}

#[test]
fn a_panic_becomes_enotrecoverable() {
    let rc: c_int = crate::error::guard("zsmem_test", || -> Result<c_int, _> {
        panic!("deliberate test panic")
    });
    assert_eq!(rc, -ENOTRECOVERABLE);
    assert!(
        last_error().contains("deliberate test panic"),
        "{}",
        last_error()
    );
    let rc: i64 = crate::error::guard("zsmem_test", || -> Result<i64, _> {
        std::panic::panic_any(42u32)
    });
    assert_eq!(rc, -i64::from(ENOTRECOVERABLE));
    assert!(
        last_error().contains("unknown panic payload"),
        "{}",
        last_error()
    );
}

#[test]
#[cfg_attr(miri, ignore = "threads and mmap: slow under Miri")]
fn threads_share_one_pool_and_every_byte_survives() {
    struct Shared(*mut zsmem_pool);
    // SAFETY: zsmem_pool wraps a Send + Sync Pool; the header promises C
    // callers the same.
    unsafe impl Send for Shared {}
    unsafe impl Sync for Shared {}
    let pool = TestPool::new(&pool_config());
    let shared = Shared(pool.0);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let shared = &shared;
            s.spawn(move || {
                let mut live: Vec<(u64, u8, usize)> = Vec::new();
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ t;
                let mut buf = vec![0u8; 4096];
                for i in 0..3000usize {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if live.len() > 200 || (x.is_multiple_of(3) && !live.is_empty()) {
                        let (h, fill, len) = live.swap_remove(x as usize % live.len());
                        // SAFETY: live pool, buffer of the length given.
                        let n = unsafe {
                            zsmem_pool_read(shared.0, h, buf.as_mut_ptr().cast(), 4096, null_mut())
                        };
                        assert_eq!(n as usize, len);
                        assert!(buf[..len].iter().all(|&b| b == fill), "thread {t} op {i}");
                        // SAFETY: live pool.
                        assert_eq!(unsafe { zsmem_pool_free(shared.0, h) }, 0);
                    } else {
                        let len = 1 + (x >> 8) as usize % 4096;
                        let fill = (x >> 32) as u8;
                        let data = vec![fill; len];
                        let mut h = 0;
                        // SAFETY: live pool, readable data, writable out.
                        let rc = unsafe {
                            zsmem_pool_store(shared.0, data.as_ptr().cast(), len, &mut h)
                        };
                        assert_eq!(rc, 0);
                        live.push((h, fill, len));
                    }
                }
                for (h, _, _) in live {
                    // SAFETY: live pool.
                    assert_eq!(unsafe { zsmem_pool_free(shared.0, h) }, 0);
                }
            });
        }
    });
    pool.check();
    assert_eq!(pool.stats().objects, 0);
}

/// The header's recipe for the kernel's configuration ("the
/// defaults with chain_size = 8, ...") gives exactly PoolConfig::kernel().
#[test]
fn the_headers_kernel_recipe_is_pool_config_kernel() {
    let mut c = pool_config();
    c.chain_size = 8;
    c.chain_rule = ZSMEM_CHAIN_RULE_MIN_WASTE;
    c.kernel_handle_header = 1;
    c.compaction = ZSMEM_COMPACTION_OFF;
    c.trim_pages = 0;
    c.return_delay_us = 0;
    c.class_shards = 1;
    c.prefault_bytes = 0;
    c.parked_slots = 0;
    c.locked_reads = 1;
    c.class_grid = 1;
    let got = crate::pool::pool_config(&c, crate::pool::Made::Pool).unwrap();
    assert_eq!(got, zsmem_core::PoolConfig::kernel());
    // And the recipe without class_grid (what the old header said) is not.
    c.class_grid = pool_config().class_grid;
    let old = crate::pool::pool_config(&c, crate::pool::Made::Pool).unwrap();
    assert_ne!(old, zsmem_core::PoolConfig::kernel());
}

/// Each appended zsmem_pool_stats field is the Rust figure it is
/// named after (a swap of two of them passes every C test).
#[test]
#[cfg_attr(miri, ignore = "mmap")]
fn appended_pool_stats_are_their_rust_fields() {
    let mut cfg = pool_config();
    cfg.compaction = ZSMEM_COMPACTION_OFF;
    let pool = TestPool::new(&cfg);
    let hs: Vec<u64> = (0..2000).map(|_| pool.store(&[9u8; 200])).collect();
    for (i, &h) in hs.iter().enumerate() {
        if i % 4 != 0 {
            // SAFETY: live pool, live handle.
            assert_eq!(unsafe { zsmem_pool_free(pool.0, h) }, 0);
        }
    }
    // SAFETY: live pool.
    assert!(unsafe { zsmem_pool_compact(pool.0) } > 0);
    let s = pool.stats();
    let p = crate::pool::pool_ref(pool.0).unwrap();
    let c = p.compaction_stats();
    assert_eq!(s.compaction_steps, c.steps);
    assert_eq!(s.compaction_max_lock_hold_ns, c.max_lock_hold_ns);
    assert_eq!(s.pages_committed, c.pages_committed);
    assert_eq!(s.deferred_batches, p.stats().deferred_batches);
}
