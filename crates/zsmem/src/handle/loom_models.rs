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

/// A free of `h` under the class lock, on a thread of its own: true if it
/// freed it (claimed, then removed), false if the claim was refused.
fn locked_free(t: &Arc<Mutex<HandleTable>>, h: Handle) -> loom::thread::JoinHandle<bool> {
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
        let locked = locked_free(&t, h);
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

/// A table whose frees park slots in magazines (`magazine.rs`), holding
/// one object of 8 bytes at place (zspage 1, object 2).
fn magazine_object() -> (Arc<Directory>, Arc<Mutex<HandleTable>>, Handle) {
    let d = Arc::new(Directory::for_reads(0));
    let mut t = HandleTable::new(Some(d.clone()), 4);
    t.use_magazines();
    let h = t
        .insert(
            0,
            Location {
                zspage: 1,
                obj: 2,
                len: 8,
            },
        )
        .unwrap();
    (d, Arc::new(Mutex::new(t)), h)
}

/// What a magazine's allocation does (`magazine::revive`): find the
/// parked word, revive it by compare-and-swap (a second look if a
/// relocation changed it), write, publish. True if it got the slot.
fn revive_as_a_magazine(d: &Directory, slot: u32, generation: u32, len: usize) -> bool {
    revive_at(d, slot, generation, len).is_some()
}

/// As [`revive_as_a_magazine`]; the place it wrote the object at (the
/// place of the parked word its swap succeeded on), if it got the slot.
fn revive_at(d: &Directory, slot: u32, generation: u32, len: usize) -> Option<u32> {
    for _ in 0..2 {
        let (e, word) = d.parked(slot, generation)?;
        if Directory::revive(e, word, len, true).is_ok() {
            Directory::revived(e);
            return Some(word as u32);
        }
    }
    None
}

/// A magazine revives a parked slot while the class lock's holder takes
/// it back (compaction, the free of its zspage's last object): exactly
/// one of the two gets it, and the table is whole either way (the slot is
/// live at the parked generation, or free).
#[test]
fn loom_a_magazine_revive_racing_the_lock_holders_take_back_one_wins() {
    loom::model(|| {
        let (d, t, h) = magazine_object();
        assert_eq!(d.park(h, |_| true).unwrap(), Some(8));
        let generation = h.generation() + 1;
        let reviver = {
            let d = d.clone();
            loom::thread::spawn(move || revive_as_a_magazine(&d, h.slot(), generation, 5))
        };
        let holder = {
            let t = t.clone();
            loom::thread::spawn(move || t.lock().unwrap().reclaim(h.slot()).is_some())
        };
        let (revived, reclaimed) = (reviver.join().unwrap(), holder.join().unwrap());
        assert!(
            revived != reclaimed,
            "revived {revived}, taken back {reclaimed}"
        );
        let t = t.lock().unwrap();
        let new = Handle::new(0, h.slot(), generation);
        match t.get(new) {
            Ok(loc) => {
                assert!(revived);
                assert_eq!((loc.zspage, loc.obj, loc.len), (1, 2, 5));
                assert_eq!(t.live(), 1);
            }
            Err(_) => {
                assert!(reclaimed);
                assert_eq!(t.live(), 0);
            }
        }
        // The old handle is dead either way.
        assert!(t.get(h).is_err());
        t.check().unwrap();
    });
}

/// Two frees of one handle through magazines race a free under the class
/// lock: exactly one of the three wins, the others get an error (a double
/// free is never a second parked slot).
#[test]
fn loom_two_magazine_frees_of_one_handle_and_a_locked_one_one_wins() {
    loom::model(|| {
        let (d, t, h) = magazine_object();
        let parkers = [(); 2].map(|()| {
            let d = d.clone();
            loom::thread::spawn(move || matches!(d.park(h, |_| true), Ok(Some(8))))
        });
        let locked = locked_free(&t, h);
        let wins = parkers
            .into_iter()
            .chain([locked])
            .map(|j| j.join().unwrap())
            .filter(|&won| won)
            .count();
        assert_eq!(wins, 1);
        t.lock().unwrap().check().unwrap();
    });
}

/// Compaction moves a live object (a copy, then the entry pointed at it
/// by compare-and-swap from the live word it read) while a magazine frees
/// it and revives the slot: the relocation takes effect only if no free
/// came first, and a revive never writes at a place the entry no longer
/// names (it finds the relocated word, or its swap fails).
#[test]
fn loom_a_move_racing_a_magazine_free_and_revive_loses_nothing() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(|| {
        let (d, t, h) = magazine_object();
        let live = {
            let t = t.lock().unwrap();
            let crate::handle::Held::Live(_, word) = t.held_state(h.slot()) else {
                panic!("not live");
            };
            word
        };
        let magazine = {
            let d = d.clone();
            loom::thread::spawn(move || {
                let parked = d.park(h, |_| true).unwrap() == Some(8);
                parked
                    .then(|| revive_at(&d, h.slot(), h.generation() + 1, 6))
                    .flatten()
            })
        };
        let mover = {
            let t = t.clone();
            loom::thread::spawn(move || t.lock().unwrap().relocate_live(h.slot(), live, 9, 15))
        };
        let revived = magazine.join().unwrap();
        let moved = mover.join().unwrap();
        let t = t.lock().unwrap();
        let new = Handle::new(0, h.slot(), h.generation() + 1);
        if let Some(written) = revived {
            let loc = t.get(new).unwrap();
            // The entry names the place the object was written at (a move
            // after the free must not point it at a copy of the old one).
            let written = (written >> 4, (written & 15) as u16);
            assert_eq!((loc.zspage, loc.obj, loc.len), (written.0, written.1, 6));
            // Moved only if the move came before the free: then the free
            // parked the moved place and the revive took it.
            let at = if moved { (9, 15) } else { (1, 2) };
            assert_eq!((loc.zspage, loc.obj), at);
        } else {
            // The revive gave up after two looks only if the slot kept
            // changing, which one move cannot do twice.
            panic!("the magazine lost its own slot (moved {moved})");
        }
        t.check().unwrap();
    });
}
