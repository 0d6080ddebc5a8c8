//! [`Owners`] for tests (the lane's unit tests and the pool's loom models):
//! each owner's place (0: none) and length behind its own lock, as a page
//! store's slot holds them.

use super::Owners;
use crate::sync::Mutex;

/// Owner `i`'s place and length are `self.0[i]`.
pub(crate) struct TestOwners(pub(crate) Vec<Mutex<(u64, usize)>>);

impl TestOwners {
    /// The place owner `owner` holds (0: none).
    pub(crate) fn place(&self, owner: u32) -> u64 {
        self.0[owner as usize].lock().0
    }
}

impl Owners for TestOwners {
    fn relocate(&self, owner: u32, mv: &mut dyn FnMut(u64, usize) -> Option<u64>) -> bool {
        let Some(mut held) = self.0[owner as usize].try_lock() else {
            return false;
        };
        if held.0 != 0
            && let Some(p) = mv(held.0, held.1)
        {
            held.0 = p;
        }
        true
    }

    fn scan(&self, wait: bool, f: &mut dyn FnMut(u32, u64, usize)) -> bool {
        let mut whole = true;
        for (owner, slot) in self.0.iter().enumerate() {
            let held = if wait {
                Some(*slot.lock())
            } else {
                slot.try_lock().map(|p| *p)
            };
            match held {
                Some((0, _)) => {}
                Some((p, len)) => f(owner as u32, p, len),
                None => whole = false,
            }
        }
        whole
    }
}
