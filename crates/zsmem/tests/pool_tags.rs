//! The pool tags: at most 255 pools live at once, each with its own tag.
//! Alone in its test binary: it takes every tag of the process.

use zsmem::{Error, HandleFault, Pool, PoolConfig};

#[test]
fn the_256th_live_pool_is_refused_until_one_is_dropped() {
    let cfg = PoolConfig::default();
    let mut pools: Vec<Option<Pool>> = (0..255)
        .map(|i| Some(Pool::new(cfg.clone()).unwrap_or_else(|e| panic!("pool {i}: {e}"))))
        .collect();
    // The same object in each: the same class, slot and generation.
    let handles: Vec<_> = pools
        .iter()
        .flatten()
        .map(|p| p.store(b"one object").unwrap())
        .collect();
    let err = Pool::new(cfg.clone()).unwrap_err();
    assert_eq!(err, Error::TooManyPools { max: 255 });
    assert!(err.to_string().contains("drop a pool first"), "{err}");
    // Each pool refuses the others' handles and still has its object.
    for (i, p) in pools.iter().enumerate().step_by(7) {
        let p = p.as_ref().unwrap();
        for (j, h) in handles.iter().enumerate().step_by(11) {
            if i == j {
                assert_eq!(p.read_vec(*h).unwrap(), b"one object");
            } else {
                match p.read_vec(*h) {
                    Err(Error::InvalidHandle {
                        fault: HandleFault::ForeignPool,
                        ..
                    }) => {}
                    other => panic!("pool {i} given pool {j}'s handle: {other:?}"),
                }
            }
        }
    }
    // One dropped: one new pool fits, and the next is refused again.
    pools[100] = None;
    let new = Pool::new(cfg.clone()).unwrap();
    let h = new.store(b"newcomer").unwrap();
    assert_eq!(new.read_vec(h).unwrap(), b"newcomer");
    assert!(matches!(
        Pool::new(cfg.clone()),
        Err(Error::TooManyPools { .. })
    ));
    drop(new);
    drop(pools);
    // Every tag given back: 255 new pools fit again.
    let again: Vec<Pool> = (0..255).map(|_| Pool::new(cfg.clone()).unwrap()).collect();
    assert_eq!(again.len(), 255);
}
