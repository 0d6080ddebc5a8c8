//! Model-based tests: long random sequences of alloc / store / write / read /
//! free / compact against a HashMap model; every byte is checked and
//! `check_invariants` runs after every step. Compaction moves objects, so
//! every later read also checks that handles survived the moves.

mod common;

use std::collections::HashMap;

use common::{Rng, compressed_len, pattern};
use proptest::prelude::*;
use zsmem::{ChainRule, Error, FreeMode, Handle, HandleFault, Placement, Pool, PoolConfig};

/// The model: what every live handle must read back as.
#[derive(Default)]
struct Model {
    objects: HashMap<u64, Vec<u8>>,
    order: Vec<u64>,
    dead: Vec<u64>,
}

impl Model {
    fn pick(&self, i: usize) -> Option<u64> {
        (!self.order.is_empty()).then(|| self.order[i % self.order.len()])
    }

    fn remove(&mut self, raw: u64) {
        self.objects.remove(&raw);
        let pos = self.order.iter().position(|&x| x == raw).unwrap();
        self.order.swap_remove(pos);
        self.dead.push(raw);
    }
}

#[derive(Clone, Debug)]
enum Op {
    Alloc(usize, u64),
    Store(usize, u64),
    WriteAt(usize, usize, usize, u64),
    Read(usize),
    Free(usize),
    UseDead(usize),
    Compact,
}

fn apply(pool: &Pool, m: &mut Model, op: &Op) {
    let page = pool.max_object_size();
    match *op {
        Op::Alloc(len, seed) | Op::Store(len, seed) => {
            let len = len.clamp(1, page);
            let data = pattern(seed, len);
            let h = if matches!(op, Op::Alloc(..)) {
                let h = pool.alloc(len).unwrap();
                pool.write(h, &data).unwrap();
                h
            } else {
                pool.store(&data).unwrap()
            };
            assert!(
                m.objects.insert(h.to_raw(), data).is_none(),
                "handle reused while live"
            );
            m.order.push(h.to_raw());
        }
        Op::WriteAt(i, off, len, seed) => {
            let Some(raw) = m.pick(i) else { return };
            let obj = m.objects.get_mut(&raw).unwrap();
            let off = off % (obj.len() + 1);
            let data = pattern(seed, len);
            let r = pool.write_at(Handle::from_raw(raw), off, &data);
            if off + len <= obj.len() {
                r.unwrap();
                obj[off..off + len].copy_from_slice(&data);
            } else {
                assert!(matches!(r, Err(Error::WriteTooLong { .. })), "{r:?}");
            }
        }
        Op::Read(i) => {
            let Some(raw) = m.pick(i) else { return };
            let want = &m.objects[&raw];
            let h = Handle::from_raw(raw);
            assert_eq!(pool.object_len(h).unwrap(), want.len());
            let mut buf = vec![0u8; page];
            let n = pool.read(h, &mut buf).unwrap();
            assert_eq!(&buf[..n], &want[..], "object bytes differ");
        }
        Op::Free(i) => {
            let Some(raw) = m.pick(i) else { return };
            pool.free(Handle::from_raw(raw)).unwrap();
            m.remove(raw);
        }
        Op::Compact => {
            pool.compact();
            if pool.config().placement != Placement::Classes {
                assert_eq!(pool.compact(), 0, "compaction left a page to clean");
            }
            for c in pool.class_stats() {
                if pool.config().trim_pages {
                    assert!(
                        c.partial_bytes < pool.config().page_size,
                        "compaction left a page's worth of free committed slots: {c:?}"
                    );
                } else {
                    assert_eq!(
                        c.freeable, 0,
                        "compaction left whole zspages' worth of free slots: {c:?}"
                    );
                }
            }
        }
        Op::UseDead(i) => {
            if m.dead.is_empty() {
                return;
            }
            let raw = m.dead[i % m.dead.len()];
            let h = Handle::from_raw(raw);
            for r in [
                pool.free(h),
                pool.read_vec(h).map(drop),
                pool.write(h, b"x"),
            ] {
                match r {
                    Err(Error::InvalidHandle {
                        fault: HandleFault::Freed | HandleFault::Stale,
                        ..
                    }) => {}
                    other => panic!("dead handle {raw:#x} gave {other:?}"),
                }
            }
        }
    }
}

fn verify(pool: &Pool, m: &Model) {
    pool.check_invariants().unwrap();
    let s = pool.stats();
    assert_eq!(
        s.waste.total() + s.bytes_stored,
        s.bytes_held(),
        "the waste split adds up: {s:?}"
    );
    // Deferred frees still hold their objects until drained.
    assert_eq!(s.objects - s.pending_frees, m.objects.len());
    if s.pending_frees == 0 {
        assert_eq!(
            s.bytes_stored,
            m.objects.values().map(Vec::len).sum::<usize>()
        );
    }
}

fn configs() -> Vec<PoolConfig> {
    vec![
        PoolConfig::default(),
        PoolConfig::kernel(),
        // One parked slot: a second free in a row frees its slot.
        PoolConfig {
            chain_size: 2,
            parked_slots: 1,
            ..PoolConfig::default()
        },
        PoolConfig {
            page_size: 16384,
            class_delta: 64,
            chain_rule: ChainRule::SpanAware,
            ..PoolConfig::default()
        },
        PoolConfig {
            page_size: 65536,
            chain_size: 1,
            class_delta: 16,
            chain_rule: ChainRule::UsedPercent,
            kernel_handle_header: true,
            memory_limit: None,
            compaction: zsmem::CompactionPolicy::Auto {
                min_freeable_pages: 2,
                max_moves: 5,
            },
            free_mode: FreeMode::ClassLock,
            trim_pages: false,
            class_grid: 4,
            placement: Placement::Classes,
            // More shards than a 64 KiB page's classes leave room for: one.
            class_shards: 4,
            // A short delay and a tiny bound: runs come and go through the
            // return queue all the time.
            page_return: zsmem::PageReturn::Delayed {
                delay: std::time::Duration::from_millis(1),
                max_pages: 8,
            },
            // Size classes fault nothing in ahead whatever this says.
            prefault_bytes: zsmem::DEFAULT_PREFAULT_BYTES,
            // Few parked slots, often freed for good by the frequent
            // automatic compaction.
            parked_slots: 3,
            lock_free_reads: true,
        },
        // Trimming with pages returned at once (the default's other path).
        PoolConfig {
            page_return: zsmem::PageReturn::Immediate,
            ..PoolConfig::default()
        },
        // Deferred free with small batches (16 handles per shard on 2 cores),
        // drained many times over the run.
        PoolConfig {
            chain_size: 4,
            free_mode: FreeMode::Deferred {
                max_pending_bytes: 256 << 10,
            },
            ..PoolConfig::default()
        },
        // Log placement: two lanes (this thread uses one), segments
        // sealed, filled at their ends, emptied and cleaned all the time;
        // by default the returner faults segments in ahead of the stores.
        PoolConfig {
            placement: Placement::Log { lanes: 2 },
            ..PoolConfig::default()
        },
        // Log placement at 64 KiB pages (a 32-byte unit), with deferred
        // free, eager cleaning and a tiny return queue.
        PoolConfig {
            page_size: 65536,
            placement: Placement::Log { lanes: 1 },
            free_mode: FreeMode::Deferred {
                max_pending_bytes: 1 << 20,
            },
            compaction: zsmem::CompactionPolicy::Auto {
                min_freeable_pages: 1,
                max_moves: 3,
            },
            page_return: zsmem::PageReturn::Delayed {
                delay: std::time::Duration::from_millis(1),
                max_pages: 8,
            },
            ..PoolConfig::default()
        },
    ]
}

/// A random operation of a long run: of every 100, those up to `mix[0]`
/// store and up to `mix[1]` alloc while the population should `grow` (free
/// otherwise), up to `mix[2]` read, `mix[3]` write in place, `mix[4]`
/// free, `mix[5]` use a dead handle; `None` for the rest (compaction, run
/// as the caller can).
fn random_op(r: &mut Rng, page: usize, grow: bool, mix: [usize; 6]) -> Option<Op> {
    let n = r.range(0, 99);
    Some(if n <= mix[1] {
        match (grow, n <= mix[0]) {
            (true, true) => Op::Store(compressed_len(r, page), r.next()),
            (true, false) => Op::Alloc(r.range(1, page), r.next()),
            (false, _) => Op::Free(r.next() as usize),
        }
    } else if n <= mix[2] {
        Op::Read(r.next() as usize)
    } else if n <= mix[3] {
        Op::WriteAt(
            r.next() as usize,
            r.next() as usize,
            r.range(0, 300),
            r.next(),
        )
    } else if n <= mix[4] {
        Op::Free(r.next() as usize)
    } else if n <= mix[5] {
        Op::UseDead(r.next() as usize)
    } else {
        return None;
    })
}

/// The long run: 320,000+ operations over eight configurations (two with
/// deferred free, two with log placement), invariants
/// checked after every one, every byte of every read compared.
#[test]
fn long_random_sequences_match_the_model() {
    let mut total = 0;
    for (ci, cfg) in configs().into_iter().enumerate() {
        let pool = Pool::new(cfg).unwrap();
        let page = pool.max_object_size();
        let mut m = Model::default();
        let mut r = Rng(0x5EED + ci as u64);
        // Waves: the target population rises and falls so zspages fill,
        // drain and are returned.
        let steps = if cfg!(miri) { 300 } else { 42_000 };
        for step in 0..steps {
            let target = 50 + (step / 500 % 8) * 60;
            let grow = m.objects.len() < target;
            let op = random_op(&mut r, page, grow, [29, 44, 74, 84, 93, 97]).unwrap_or(Op::Compact);
            apply(&pool, &mut m, &op);
            verify(&pool, &m);
            total += 1;
        }
        // Free everything: the pool must return every page.
        while let Some(raw) = m.order.first().copied() {
            pool.free(Handle::from_raw(raw)).unwrap();
            m.remove(raw);
        }
        pool.flush();
        verify(&pool, &m);
        assert_eq!(pool.stats().pages_held, 0);
    }
    if !cfg!(miri) {
        assert!(total >= 320_000, "ran only {total} operations");
    }
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1usize..=4096, any::<u64>()).prop_map(|(l, s)| Op::Store(l, s)),
        2 => (1usize..=4096, any::<u64>()).prop_map(|(l, s)| Op::Alloc(l, s)),
        2 => (any::<usize>(), any::<usize>(), 0usize..300, any::<u64>())
            .prop_map(|(i, o, l, s)| Op::WriteAt(i, o, l, s)),
        3 => any::<usize>().prop_map(Op::Read),
        3 => any::<usize>().prop_map(Op::Free),
        1 => any::<usize>().prop_map(Op::UseDead),
        1 => Just(Op::Compact),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 2 } else { 64 },
        ..ProptestConfig::default()
    })]

    /// Shrinkable version of the long run, on a short chain so zspages are
    /// made and freed often.
    #[test]
    fn random_ops_match_the_model(
        ops in proptest::collection::vec(op_strategy(), 1..400),
        deferred in any::<bool>(),
        trim in any::<bool>(),
        log in any::<bool>(),
    ) {
        let free_mode = if deferred {
            FreeMode::Deferred { max_pending_bytes: 64 << 10 }
        } else {
            FreeMode::ClassLock
        };
        // Trimming pools get long zspages and automatic compaction, whose
        // page-by-page moves are what is under test.
        let pool = Pool::new(if log {
            PoolConfig { placement: Placement::Log { lanes: 1 }, free_mode, ..PoolConfig::default() }
        } else if trim {
            PoolConfig { chain_size: 8, free_mode, ..PoolConfig::default() }
        } else {
            PoolConfig { chain_size: 2, free_mode, ..PoolConfig::kernel() }
        })
        .unwrap();
        let mut m = Model::default();
        for op in &ops {
            apply(&pool, &mut m, op);
            verify(&pool, &m);
        }
    }
}

/// Magazines (the default configuration's frees park slots per thread,
/// without the class lock): two threads run random sequences on one
/// shared pool, each against its own model, every byte of every read
/// compared; between bursts (the threads joined) the invariants hold and
/// the pool's figures are the models' sum. Some bursts run on fresh
/// threads, so exited threads' magazines are handed back too.
#[test]
fn two_threads_random_sequences_on_one_pool_match_their_models() {
    for cfg in [
        PoolConfig::default(),
        PoolConfig {
            class_shards: 1,
            parked_slots: 2,
            ..PoolConfig::default()
        },
    ] {
        let pool = Pool::new(cfg).unwrap();
        let page = pool.max_object_size();
        let mut models = [Model::default(), Model::default()];
        let bursts = if cfg!(miri) { 2 } else { 30 };
        for burst in 0..bursts {
            std::thread::scope(|s| {
                for (t, m) in models.iter_mut().enumerate() {
                    let pool = &pool;
                    s.spawn(move || {
                        let mut r = Rng(0xD00D + burst * 7 + t as u64);
                        let steps = if cfg!(miri) { 40 } else { 2000 };
                        for step in 0..steps {
                            let grow = m.objects.len() < 40 + (step / 300 % 4) * 40;
                            let mix = [34, 44, 69, 79, 96, 98];
                            let Some(op) = random_op(&mut r, page, grow, mix) else {
                                // Not `Op::Compact`: what it asserts after
                                // compaction, the other thread may undo at
                                // once.
                                pool.compact();
                                continue;
                            };
                            apply(pool, m, &op);
                        }
                    });
                }
            });
            pool.check_invariants().unwrap();
            let s = pool.stats();
            assert_eq!(
                s.objects,
                models.iter().map(|m| m.objects.len()).sum::<usize>()
            );
            assert_eq!(
                s.bytes_stored,
                models
                    .iter()
                    .flat_map(|m| m.objects.values())
                    .map(Vec::len)
                    .sum::<usize>()
            );
            assert_eq!(s.waste.total() + s.bytes_stored, s.bytes_held());
        }
        for m in &mut models {
            while let Some(raw) = m.order.first().copied() {
                pool.free(Handle::from_raw(raw)).unwrap();
                m.remove(raw);
            }
        }
        pool.flush();
        pool.check_invariants().unwrap();
        assert_eq!(pool.stats().pages_held, 0);
    }
}
