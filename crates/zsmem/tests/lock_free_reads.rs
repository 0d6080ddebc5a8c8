//! Reads without the class lock, raced by everything that changes what they
//! read: writes in place of the same objects, frees of the same handles
//! (and new objects in their slots), compaction moving them, zspages
//! released and renumbered. Every read returns the object whole, as it was
//! at one moment (every byte of an object's version is one value, so a torn
//! copy shows), or says the handle is freed; never another object's bytes,
//! never a mix of two versions. Run with lock-free reads on and off, with
//! size classes and with log placement (whose cleaning moves objects and
//! whose objects start at any 2-byte unit, not on word boundaries).

mod common;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::Rng;
use zsmem::{CompactionPolicy, Error, HandleFault, PageReturn, Placement, Pool, PoolConfig};

/// Objects shared by every thread.
const SLOTS: usize = if cfg!(miri) { 6 } else { 256 };

fn rounds() -> usize {
    if cfg!(miri) { 30 } else { 150_000 }
}

/// Object `i`'s length: spread over several classes, some sharing
/// zspages, some huge; short ones copied word by word, longer ones by
/// whole 64-byte blocks too (`words.rs`), odd ones so log placement's
/// objects start off word boundaries.
fn len_of(i: usize) -> usize {
    [40, 257, 480, 479, 1000, 4096][i % 6]
}

/// One shared object: its handle and the value all its bytes hold, packed
/// in a word so readers see the pair that was current at one moment (the
/// value byte in the top 8 bits).
fn pack(h: zsmem::Handle, v: u8) -> u64 {
    assert_eq!(h.to_raw() >> 63, 0, "the spare bit is 0 in every handle");
    // Bits 55..63 of a handle are its pool tag, the same in every handle of
    // one pool: keep them aside and put the value there.
    (h.to_raw() & ((1 << 55) - 1)) | u64::from(v) << 55
}

fn unpack(w: u64, tag: u64) -> (zsmem::Handle, u8) {
    (
        zsmem::Handle::from_raw((w & ((1 << 55) - 1)) | tag),
        (w >> 55) as u8,
    )
}

fn race(lock_free_reads: bool, placement: Placement) {
    let pool = Pool::new(PoolConfig {
        lock_free_reads,
        placement,
        chain_size: 2,
        compaction: CompactionPolicy::Auto {
            min_freeable_pages: 1,
            max_moves: 4,
        },
        page_return: PageReturn::Delayed {
            delay: std::time::Duration::from_millis(1),
            max_pages: 8,
        },
        ..PoolConfig::default()
    })
    .unwrap();
    let first = pool.store(&[1u8; 8]).unwrap();
    let tag = first.to_raw() & !((1 << 55) - 1);
    pool.free(first).unwrap();
    let slots: Vec<AtomicU64> = (0..SLOTS)
        .map(|i| {
            let v = (i % 250) as u8 + 1;
            AtomicU64::new(pack(pool.store(&vec![v; len_of(i)]).unwrap(), v))
        })
        .collect();
    // Writers of one slot at a time: a rewrite or a free and a new object
    // in place of the slot's, under the slot's own mutex, so two writers
    // never free one handle (readers take no mutex).
    let locks: Vec<Mutex<()>> = (0..SLOTS).map(|_| Mutex::new(())).collect();
    let done = AtomicBool::new(false);
    let (good, freed) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let (pool, slots, done, good, freed) = (&pool, &slots, &done, &good, &freed);
            s.spawn(move || {
                let mut r = Rng(0x5EED + t);
                let mut buf = vec![0u8; 4096];
                while !done.load(Ordering::Relaxed) {
                    let i = r.range(0, SLOTS - 1);
                    let (h, _) = unpack(slots[i].load(Ordering::Acquire), tag);
                    match pool.read(h, &mut buf) {
                        Ok(n) => {
                            assert_eq!(n, len_of(i), "slot {i}: another object's length");
                            let v = buf[0];
                            assert!(
                                buf[..n].iter().all(|&b| b == v),
                                "slot {i}: a torn copy (first byte {v})"
                            );
                            assert_eq!(
                                u64::from(v) % 50,
                                ((i % 250) as u64 + 1) % 50,
                                "slot {i}: another slot's object"
                            );
                            good.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Error::InvalidHandle {
                            fault: HandleFault::Freed | HandleFault::Stale,
                            ..
                        }) => {
                            freed.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => panic!("slot {i}: {e}"),
                    }
                    if cfg!(miri) && good.load(Ordering::Relaxed) > 100 {
                        break;
                    }
                }
            });
        }
        let writers: Vec<_> = (0..2u64)
            .map(|t| {
                let (pool, slots, locks) = (&pool, &slots, &locks);
                s.spawn(move || {
                    let mut r = Rng(0xF00D + t);
                    for _ in 0..rounds() {
                        let i = r.range(0, SLOTS - 1);
                        let _g = locks[i].lock().unwrap();
                        let (h, v) = unpack(slots[i].load(Ordering::Relaxed), tag);
                        // A new value for this slot: the same residue mod 50
                        // (readers check it), never 0.
                        let next = ((u32::from(v) + 50) % 250) as u8;
                        let next = if next == 0 { 250 } else { next };
                        match r.range(0, 9) {
                            0..=3 => {
                                pool.write(h, &vec![next; len_of(i)]).unwrap();
                                slots[i].store(pack(h, next), Ordering::Release);
                            }
                            4..=8 => {
                                pool.free(h).unwrap();
                                let h = pool.store(&vec![next; len_of(i)]).unwrap();
                                slots[i].store(pack(h, next), Ordering::Release);
                            }
                            _ => {
                                pool.compact();
                            }
                        }
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
    });
    assert!(good.load(Ordering::Relaxed) > 0, "no read succeeded");
    let mut buf = vec![0u8; 4096];
    for (i, w) in slots.iter().enumerate() {
        let (h, v) = unpack(w.load(Ordering::Relaxed), tag);
        assert_eq!(pool.read(h, &mut buf).unwrap(), len_of(i));
        assert!(buf[..len_of(i)].iter().all(|&b| b == v));
        pool.free(h).unwrap();
    }
    pool.check_invariants().unwrap();
    pool.trim();
    let st = pool.stats();
    assert_eq!((st.objects, st.pages_held), (0, 0));
}

#[test]
fn lock_free_reads_see_objects_whole_while_everything_changes() {
    race(true, Placement::Classes);
}

#[test]
fn locked_reads_see_objects_whole_while_everything_changes() {
    race(false, Placement::Classes);
}

#[test]
fn lock_free_reads_of_a_log_see_objects_whole_while_cleaning_moves_them() {
    race(true, Placement::Log { lanes: 2 });
}

#[test]
fn locked_reads_of_a_log_see_objects_whole_while_cleaning_moves_them() {
    race(false, Placement::Log { lanes: 2 });
}

/// A read of a freed handle says so, with or without the lock, however
/// the slot was reused since; and a buffer too small is refused with the
/// object's length, not half-filled.
#[test]
fn a_lock_free_read_reports_what_a_locked_one_does() {
    for (lock_free_reads, placement) in [
        (true, Placement::Classes),
        (false, Placement::Classes),
        (true, Placement::Log { lanes: 1 }),
    ] {
        let pool = Pool::new(PoolConfig {
            lock_free_reads,
            placement,
            ..PoolConfig::default()
        })
        .unwrap();
        let h = pool.store(&[3u8; 700]).unwrap();
        let mut small = [0u8; 100];
        assert!(matches!(
            pool.read(h, &mut small),
            Err(Error::BufferTooSmall {
                len: 100,
                object_len: 700
            })
        ));
        assert_eq!(small, [0u8; 100], "nothing written to a buffer too small");
        pool.free(h).unwrap();
        let mut buf = [0u8; 4096];
        assert!(matches!(
            pool.read(h, &mut buf),
            Err(Error::InvalidHandle {
                fault: HandleFault::Freed,
                ..
            })
        ));
        let again = pool.store(&[4u8; 700]).unwrap();
        assert!(
            pool.read(h, &mut buf).is_err(),
            "the old handle reads the new object"
        );
        assert_eq!(pool.read(again, &mut buf).unwrap(), 700);
        assert!(buf[..700].iter().all(|&b| b == 4));
        pool.free(again).unwrap();
    }
}

/// `read_uninit` writes exactly the object's bytes at the start of the
/// buffer and nothing after them, at every length around the 64-byte
/// blocks the copy takes whole, at every start a log lane gives, with and
/// without the lock; a buffer too small, or a freed handle, leaves the
/// buffer as it was.
#[test]
fn read_uninit_writes_the_object_and_nothing_else() {
    use std::mem::MaybeUninit;
    let lens: &[usize] = if cfg!(miri) {
        &[1, 72, 130]
    } else {
        &[
            1, 7, 8, 9, 63, 64, 65, 127, 128, 129, 200, 700, 1024, 2049, 4095, 4096,
        ]
    };
    for (lock_free_reads, placement) in [
        (true, Placement::Classes),
        (false, Placement::Classes),
        (true, Placement::Log { lanes: 1 }),
        (false, Placement::Log { lanes: 1 }),
    ] {
        let pool = Pool::new(PoolConfig {
            lock_free_reads,
            placement,
            ..PoolConfig::default()
        })
        .unwrap();
        // Odd lengths before each object put log objects at odd units.
        let mut keep = Vec::new();
        for &len in lens {
            keep.push(pool.store(&vec![0x5A; len % 13 + 1]).unwrap());
            let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let h = pool.store(&data).unwrap();
            let mut buf = vec![MaybeUninit::new(0xEEu8); len + 40];
            assert_eq!(pool.read_uninit(h, &mut buf).unwrap(), len);
            // SAFETY: every byte was initialised (0xEE, then the object's).
            let got: Vec<u8> = buf.iter().map(|b| unsafe { b.assume_init() }).collect();
            assert_eq!(
                &got[..len],
                &data[..],
                "len {len} {placement:?} {lock_free_reads}"
            );
            assert!(
                got[len..].iter().all(|&b| b == 0xEE),
                "len {len}: bytes past it"
            );
            // Against the bytes in place too (a plain slice, no `words.rs`):
            // a fault the write and the read share would cancel above.
            pool.with_object(h, |b| assert_eq!(b, &data[..], "in place, len {len}"))
                .unwrap();
            let mut small = vec![MaybeUninit::new(0xEEu8); len - 1];
            assert!(matches!(
                pool.read_uninit(h, &mut small),
                Err(Error::BufferTooSmall { object_len, .. }) if object_len == len
            ));
            // SAFETY: as above.
            assert!(small.iter().all(|b| unsafe { b.assume_init() } == 0xEE));
            pool.free(h).unwrap();
            let mut after = vec![MaybeUninit::new(0xEEu8); len];
            assert!(pool.read_uninit(h, &mut after).is_err());
            // SAFETY: as above.
            assert!(after.iter().all(|b| unsafe { b.assume_init() } == 0xEE));
        }
        for h in keep {
            pool.free(h).unwrap();
        }
    }
}

/// A read that a free races and that then fails returns none of any
/// object's bytes: the buffer is as it was, or zeros where a refused
/// lock-free copy had written (review s28: the copy went into the buffer
/// before its check, and the error came back with the freed object's
/// bytes, or its successor's, in it).
#[test]
fn a_read_a_free_races_returns_no_bytes_with_its_error() {
    use std::mem::MaybeUninit;
    let reads = if cfg!(miri) { 20 } else { 200_000 };
    for (placement, len) in [
        (Placement::Classes, 3000),
        (Placement::Classes, 400),
        (Placement::Log { lanes: 1 }, 1001),
    ] {
        let pool = Pool::new(PoolConfig {
            placement,
            ..PoolConfig::default()
        })
        .unwrap();
        let first = pool.store(&vec![1; len]).unwrap();
        let tag = first.to_raw() & !((1 << 55) - 1);
        let current = AtomicU64::new(pack(first, 1));
        let done = AtomicBool::new(false);
        let (errors, leaked) = (AtomicU64::new(0), AtomicU64::new(0));
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut buf = vec![MaybeUninit::new(0xEEu8); len];
                for _ in 0..reads {
                    let (h, _) = unpack(current.load(Ordering::Acquire), tag);
                    buf.fill(MaybeUninit::new(0xEE));
                    if pool.read_uninit(h, &mut buf).is_err() {
                        errors.fetch_add(1, Ordering::Relaxed);
                        // SAFETY: every byte was initialised (0xEE, then
                        // whatever the read wrote).
                        if buf
                            .iter()
                            .any(|b| !matches!(unsafe { b.assume_init() }, 0xEE | 0))
                        {
                            leaked.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                done.store(true, Ordering::Relaxed);
            });
            s.spawn(|| {
                let mut v = 1u8;
                while !done.load(Ordering::Relaxed) {
                    let (old, _) = unpack(current.load(Ordering::Relaxed), tag);
                    pool.free(old).unwrap();
                    v = v % 120 + 2;
                    let h = pool.store(&vec![v; len]).unwrap();
                    current.store(pack(h, v), Ordering::Release);
                }
            });
        });
        let (h, _) = unpack(current.load(Ordering::Relaxed), tag);
        pool.free(h).unwrap();
        assert_eq!(
            leaked.load(Ordering::Relaxed),
            0,
            "{placement:?} {len}: of {} failed reads, some returned an object's bytes",
            errors.load(Ordering::Relaxed)
        );
    }
}
