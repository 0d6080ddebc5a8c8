//! A dropped pool's tag given again: its stale handles do not reach the new
//! holder's objects. Alone in its test binary: it runs through every tag of
//! the process.

use zsmem::{Error, Pool, PoolConfig};

/// A review found that after 255 pools a new pool took a dropped one's tag,
/// handed out the same handle values, and a stale handle of the dropped
/// pool read and freed the new pool's object. Now each holding of a tag
/// starts its generations in another quarter of the range.
#[test]
fn a_dropped_pools_handle_does_not_reach_the_next_holder_of_its_tag() {
    for cfg in [
        PoolConfig::default(),
        PoolConfig::log(),
        PoolConfig::kernel(),
    ] {
        let a = Pool::new(cfg.clone()).unwrap();
        let stale = a.store(b"pool A's object").unwrap();
        a.free(a.store(b"one more, freed").unwrap()).unwrap();
        drop(a);
        // Every other tag once, so the next pool takes A's.
        for _ in 0..254 {
            drop(Pool::new(cfg.clone()).unwrap());
        }
        let b = Pool::new(cfg.clone()).unwrap();
        let own = b.store(b"NEW pool B's object").unwrap();
        assert_eq!(
            own.to_raw() >> 55,
            stale.to_raw() >> 55,
            "B holds A's tag (the test's premise)"
        );
        assert!(
            matches!(b.read_vec(stale), Err(Error::InvalidHandle { .. })),
            "{:?}",
            b.read_vec(stale)
        );
        assert!(matches!(b.free(stale), Err(Error::InvalidHandle { .. })));
        assert_eq!(b.read_vec(own).unwrap(), b"NEW pool B's object");
        b.check_invariants().unwrap();
    }
}
