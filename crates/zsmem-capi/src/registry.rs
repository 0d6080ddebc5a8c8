//! Live pools and stores, by the pointer C holds.
//!
//! A `zsmem_pool *` or `zsmem_store *` given to C is a token, not an
//! address: a number from one process-wide counter, never reused, never
//! dereferenced. The object lives in this registry behind an `Arc`, so
//!
//! - a call with a destroyed, forged or wrong-kind pointer (a store passed
//!   as a pool) finds no entry and is `-EINVAL` with a message, without
//!   touching any memory the pointer might name;
//! - a second destroy is `-EINVAL` in the last error message (destroy
//!   returns nothing);
//! - a destroy while calls are running on other threads removes the entry
//!   and returns; each running call holds its own `Arc`, so the object is
//!   freed when the last of them returns. A call that starts after the
//!   destroy gets `-EINVAL`.
//!
//! The cost is a read lock and an `Arc` clone per call.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use crate::error::Fail;

/// Token spacing: tokens look like aligned pointers, and `NEXT * STEP`
/// never wraps to NULL in practice (2^60 objects).
const STEP: usize = 16;

/// The next token / STEP, shared by pools and stores so that one kind's
/// token is never the other's.
static NEXT: AtomicUsize = AtomicUsize::new(1);

/// The live objects of one kind, by token.
pub(crate) struct Registry<T> {
    live: RwLock<BTreeMap<usize, Arc<T>>>,
    /// "pool" or "store", for messages.
    kind: &'static str,
}

impl<T> Registry<T> {
    pub(crate) const fn new(kind: &'static str) -> Self {
        Registry {
            live: RwLock::new(BTreeMap::new()),
            kind,
        }
    }

    /// Register `object`; its token as C's pointer.
    pub(crate) fn insert(&self, object: T) -> usize {
        let token = NEXT.fetch_add(1, Ordering::Relaxed).wrapping_mul(STEP);
        self.live
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(token, Arc::new(object));
        token
    }

    fn not_live(&self, token: usize) -> Fail {
        Fail::invalid(format!(
            "{} {token:#x} is not a live {}: destroyed already, or not made by zsmem_{}_new",
            self.kind, self.kind, self.kind
        ))
    }

    /// The object of `token`, held for the caller's call.
    pub(crate) fn get(&self, token: usize) -> Result<Arc<T>, Fail> {
        if token == 0 {
            return Err(Fail::invalid(format!("{} is NULL", self.kind)));
        }
        self.live
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&token)
            .cloned()
            .ok_or_else(|| self.not_live(token))
    }

    /// Unregister `token` (NULL is ignored); the object is dropped here or,
    /// if calls on it are running, when the last returns.
    pub(crate) fn remove(&self, token: usize) -> Result<(), Fail> {
        if token == 0 {
            return Ok(());
        }
        let object = self
            .live
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&token)
            .ok_or_else(|| self.not_live(token))?;
        // Dropped outside the registry's lock.
        drop(object);
        give_heap_back();
        Ok(())
    }
}

/// Give the heap a destroyed object freed back to the OS: glibc's malloc
/// keeps freed chunks below the top of its heap (a 64K-slot store's slot
/// table and metadata, about 1.2 MiB of 1.4 MiB left resident after a
/// destroy), and only `malloc_trim` returns them. Process-wide, and cheap
/// next to a destroy; a no-op where the C library is not glibc.
fn give_heap_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu", not(miri)))]
    // SAFETY: malloc_trim has no preconditions; it only releases free
    // memory of the C heap.
    unsafe {
        libc::malloc_trim(0);
    }
}
