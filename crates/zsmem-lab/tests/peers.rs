//! The peers (`zsmem_lab::contestants::peers`) against a model: random sequences of
//! allocations, reads and frees, every byte checked against a HashMap, the
//! allocator's invariants checked after every operation; and misuse
//! (double free, stale and forged handles) that must be errors.

use std::collections::HashMap;

use proptest::prelude::*;
use zsmem_lab::contestants::peers::afmalloc::Afmalloc;
use zsmem_lab::contestants::peers::z3fold::Z3fold;
use zsmem_lab::contestants::peers::zblock::Zblock;
use zsmem_lab::contestants::peers::zbud::Zbud;
use zsmem_lab::contestants::peers::{PeerAllocator, make_peer};

#[derive(Clone, Debug)]
enum Op {
    /// Allocate this many bytes (clamped to the peer's largest object).
    Alloc(usize),
    /// Free the n-th live object (mod the count).
    Free(usize),
    /// Read the n-th live object.
    Read(usize),
    /// Compact.
    Compact,
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let size = prop_oneof![1usize..200, 200usize..2000, 2000usize..=4096];
    let op = prop_oneof![
        5 => size.prop_map(Op::Alloc),
        3 => any::<usize>().prop_map(Op::Free),
        2 => any::<usize>().prop_map(Op::Read),
        1 => Just(Op::Compact),
    ];
    prop::collection::vec(op, 1..300)
}

/// Run `ops` on `p`, checking every byte against a model.
fn run(p: &mut dyn PeerAllocator, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut model: HashMap<u64, Vec<u8>> = HashMap::new();
    let mut order: Vec<u64> = Vec::new();
    let mut buf = Vec::new();
    let mut dead: Vec<u64> = Vec::new();
    for (k, op) in ops.iter().enumerate() {
        match *op {
            Op::Alloc(n) => {
                let n = n.min(p.max_size());
                let data: Vec<u8> = (0..n).map(|i| (i * 31 + k * 7) as u8).collect();
                let h = p
                    .alloc(&data)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert!(model.insert(h, data).is_none(), "handle {h:#x} given twice");
                order.push(h);
            }
            Op::Free(i) if !order.is_empty() => {
                let h = order.swap_remove(i % order.len());
                model.remove(&h);
                p.free(h).map_err(|e| TestCaseError::fail(e.to_string()))?;
                dead.push(h);
            }
            Op::Read(i) if !order.is_empty() => {
                let h = order[i % order.len()];
                p.read(h, &mut buf)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(&buf, &model[&h]);
            }
            Op::Compact => {
                p.compact()
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
            _ => {}
        }
        p.check_invariants().map_err(TestCaseError::fail)?;
    }
    for (h, want) in &model {
        p.read(*h, &mut buf)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&buf, want);
    }
    // Dead handles stay dead (unless the same handle was given again).
    for h in dead.iter().filter(|h| !model.contains_key(h)) {
        prop_assert!(p.read(*h, &mut buf).is_err());
        prop_assert!(p.free(*h).is_err());
    }
    for h in order {
        p.free(h).map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
    p.check_invariants().map_err(TestCaseError::fail)?;
    prop_assert_eq!(p.pages().held_pages(), 0, "{}: pages left", p.name());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn zbud_matches_the_model(ops in ops()) {
        run(&mut Zbud::new().unwrap(), &ops)?;
    }

    #[test]
    fn z3fold_matches_the_model(ops in ops()) {
        run(&mut Z3fold::new().unwrap(), &ops)?;
    }

    #[test]
    fn zblock_matches_the_model(ops in ops()) {
        run(&mut Zblock::new().unwrap(), &ops)?;
    }

    #[test]
    fn afmalloc_matches_the_model(ops in ops()) {
        run(&mut Afmalloc::new(false).unwrap(), &ops)?;
    }

    #[test]
    fn afmalloc_with_compaction_matches_the_model(ops in ops()) {
        run(&mut Afmalloc::new(true).unwrap(), &ops)?;
    }
}

/// Double frees, stale handles, forged handles and bad sizes are errors
/// for every peer (through the object-contestant interface, own pages
/// included), and never disturb a live neighbour.
#[test]
fn misuse_is_an_error() {
    for name in zsmem_lab::contestants::peers::PEERS {
        let mut c = make_peer(name).unwrap().unwrap();
        let a = c.alloc(&[1; 500]).unwrap();
        let b = c.alloc(&[2; 700]).unwrap();
        let big = c.alloc(&[3; 4096]).unwrap();
        c.free(a).unwrap();
        assert!(c.free(a).is_err(), "{name}: double free accepted");
        let mut buf = Vec::new();
        assert!(c.read(a, &mut buf).is_err(), "{name}: stale read accepted");
        // The freed place is reused; the old handle must not reach it.
        let a2 = c.alloc(&[4; 500]).unwrap();
        assert!(
            c.read(a, &mut buf).is_err(),
            "{name}: stale handle reached a new object"
        );
        for forged in [
            0,
            1,
            u64::MAX,
            b ^ (1 << 33),
            b ^ (1 << 62),
            b ^ (1 << 63),
            big ^ (1 << 63),
            b + 1_000_000,
        ] {
            assert!(
                c.read(forged, &mut buf).is_err(),
                "{name}: forged {forged:#x} read"
            );
            assert!(c.free(forged).is_err(), "{name}: forged {forged:#x} freed");
        }
        assert!(c.alloc(&[]).is_err(), "{name}: empty object accepted");
        assert!(
            c.alloc(&[0; 4097]).is_err(),
            "{name}: more than a page accepted"
        );
        for (h, want) in [(b, vec![2; 700]), (a2, vec![4; 500]), (big, vec![3; 4096])] {
            c.read(h, &mut buf).unwrap();
            assert_eq!(buf, want, "{name}");
        }
        c.free(big).unwrap();
        assert!(c.free(big).is_err(), "{name}: double free of an own page");
    }
}

#[test]
fn zbud_refuses_large_objects_clearly() {
    let mut z = Zbud::new().unwrap();
    let e = z.alloc(&[0; 3969]).unwrap_err().to_string();
    assert!(e.contains("3968") && e.contains("zbud"), "{e}");
    let mut z = Zblock::new().unwrap();
    let e = z.alloc(&[0; 4081]).unwrap_err().to_string();
    assert!(e.contains("4080") && e.contains("zblock"), "{e}");
}
