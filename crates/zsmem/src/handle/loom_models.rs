//! Loom models of the lock-free parts: a deferred free's dying mark racing
//! frees and relocations (`RUSTFLAGS="--cfg loom" cargo test -p zsmem --lib loom`).

use super::*;
use std::sync::{Arc, Mutex};

/// A deferred-free table (with its directory) holding one object.
fn one_object(
    obj_bits: u32,
    zspage: u32,
    obj: u16,
) -> (Arc<Directory>, Arc<Mutex<HandleTable>>, Handle) {
    let d = Arc::new(Directory::new(0));
    let mut t = HandleTable::new(Some(d.clone()), obj_bits);
    let h = t
        .insert(
            0,
            Location {
                zspage,
                obj,
                len: 8,
            },
        )
        .unwrap();
    (d, Arc::new(Mutex::new(t)), h)
}

/// A deferred free (lock-free mark) races a free under the class lock
/// and another deferred free of the same handle: exactly one wins, and
/// the losers see the error a freed handle gets.
#[test]
fn loom_racing_frees_of_one_handle_one_wins() {
    loom::model(|| {
        let (d, t, h) = one_object(1, 0, 0);
        let marker = {
            let d = d.clone();
            loom::thread::spawn(move || d.mark_dying(h).is_ok())
        };
        let marker2 = {
            let d = d.clone();
            loom::thread::spawn(move || d.mark_dying(h).is_ok())
        };
        let locked = {
            let t = t.clone();
            loom::thread::spawn(move || {
                let mut t = t.lock().unwrap();
                match t.claim(h) {
                    Ok(_) => {
                        t.remove(h.slot());
                        true
                    }
                    Err(_) => false,
                }
            })
        };
        let wins = [marker, marker2, locked]
            .into_iter()
            .map(|j| j.join().unwrap())
            .filter(|&won| won)
            .count();
        assert_eq!(wins, 1);
    });
}

/// Compaction relocates an object under the class lock while two
/// deferred frees mark it without the lock: exactly one mark wins (the
/// relocation never makes a valid mark fail), the mark survives the
/// relocation and the relocation survives the mark.
#[test]
fn loom_relocate_racing_a_mark_loses_neither() {
    loom::model(|| {
        let (d, t, h) = one_object(4, 1, 2);
        let markers = [(); 2].map(|()| {
            let d = d.clone();
            loom::thread::spawn(move || d.mark_dying(h).is_ok())
        });
        let mover = {
            let t = t.clone();
            loom::thread::spawn(move || t.lock().unwrap().relocate(h.slot(), 9, 15))
        };
        mover.join().unwrap();
        let wins = markers
            .into_iter()
            .map(|j| j.join().unwrap())
            .filter(|&won| won)
            .count();
        assert_eq!(wins, 1);
        let t = t.lock().unwrap();
        assert_eq!(
            t.get_dying(h).unwrap(),
            Location {
                zspage: 9,
                obj: 15,
                len: 8,
            }
        );
        t.check().unwrap();
    });
}
