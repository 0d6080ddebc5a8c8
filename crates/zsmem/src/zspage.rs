//! A zspage: `pages_per_zspage` virtually contiguous pages holding
//! `objs_per_zspage` object slots of one class size, packed from offset 0.
//!
//! ```text
//! page 0            page 1            page 2
//! +-----------------+-----------------+-----------------+
//! | obj0 | obj1 | ob|j2 | obj3 | obj4 | obj5 | ... |tail|
//! +-----------------+-----------------+-----------------+
//! ```
//!
//! Objects may straddle page boundaries; since the pages are contiguous in
//! our address space, no bounce copy is needed. Nothing about the allocator
//! lives in the pages: the free objects are a LIFO stack of indices and the
//! owner of each object (its handle slot) is an array, both on the heap, so
//! a client overrunning its object can damage only object bytes, never the
//! allocator's metadata. The allocator touches object bytes only to copy
//! them (writes, reads, compaction).
//!
//! Invariants (checked by [`Zspage::check`]):
//! - `free` holds distinct indices `< objs`, exactly those whose owner is
//!   [`FREE_OBJ`];
//! - `inuse == objs - free.len()`.

use crate::os::Run;

/// Owner value of an object slot that holds no object.
pub(crate) const FREE_OBJ: u32 = u32::MAX;

/// One zspage's descriptor, owned by its class.
#[derive(Debug)]
pub(crate) struct Zspage {
    run: Run,
    /// Free object indices; the next allocation pops the top.
    free: Vec<u16>,
    /// Handle slot of each object, or `FREE_OBJ`.
    owners: Box<[u32]>,
}

impl Zspage {
    /// A zspage over fresh pages, all objects free; object 0 is handed out
    /// first.
    pub(crate) fn new(run: Run, objs: usize) -> Self {
        debug_assert!((1..=1 << 16).contains(&objs));
        Zspage {
            run,
            free: (0..objs as u32).rev().map(|i| i as u16).collect(),
            owners: vec![FREE_OBJ; objs].into_boxed_slice(),
        }
    }

    /// Give the pages back (the descriptor is dropped with them).
    pub(crate) fn into_run(self) -> Run {
        self.run
    }

    pub(crate) fn inuse(&self) -> usize {
        self.owners.len() - self.free.len()
    }

    pub(crate) fn objs(&self) -> usize {
        self.owners.len()
    }

    /// The object the next `take` will hand out.
    pub(crate) fn next_free(&self) -> Option<u16> {
        self.free.last().copied()
    }

    /// Take a free object for handle slot `owner`.
    pub(crate) fn take(&mut self, owner: u32) -> Option<u16> {
        let obj = self.free.pop()?;
        self.owners[usize::from(obj)] = owner;
        Some(obj)
    }

    /// Return an object to the free stack.
    pub(crate) fn put(&mut self, obj: u16) {
        debug_assert_ne!(self.owners[usize::from(obj)], FREE_OBJ);
        self.owners[usize::from(obj)] = FREE_OBJ;
        self.free.push(obj);
    }

    /// Handle slot owning `obj`, if it is allocated.
    pub(crate) fn owner(&self, obj: u16) -> Option<u32> {
        let o = *self.owners.get(usize::from(obj))?;
        (o != FREE_OBJ).then_some(o)
    }

    /// The first allocated object at index `start` or above, with its owner.
    pub(crate) fn next_allocated(&self, start: usize) -> Option<(u16, u32)> {
        let rest = self.owners.get(start..)?;
        let i = rest.iter().position(|&o| o != FREE_OBJ)?;
        Some(((start + i) as u16, rest[i]))
    }

    /// Allocated objects and their handle slots.
    pub(crate) fn allocated(&self) -> impl Iterator<Item = (u16, u32)> + '_ {
        self.owners
            .iter()
            .enumerate()
            .filter(|&(_, &o)| o != FREE_OBJ)
            .map(|(i, &o)| (i as u16, o))
    }

    /// Heap bytes of this descriptor.
    pub(crate) fn metadata_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.free.capacity() * std::mem::size_of::<u16>()
            + self.owners.len() * std::mem::size_of::<u32>()
    }

    /// The first `len` bytes of object `obj` of a class of `size` bytes.
    pub(crate) fn bytes(&self, obj: u16, size: usize, len: usize) -> &[u8] {
        assert!(usize::from(obj) < self.objs() && len <= size);
        // SAFETY: the run holds `objs * size` bytes at least (objs is
        // `pages * page / size`), so `obj * size + len` is inside it. The run
        // is initialised (fresh or discarded pages read as zero) and only
        // written through `&mut self`, so no write aliases this borrow.
        unsafe { std::slice::from_raw_parts(self.run.as_ptr().add(usize::from(obj) * size), len) }
    }

    /// Object `obj`'s bytes `offset..offset + data.len()` set from `data`.
    pub(crate) fn write(&mut self, obj: u16, size: usize, offset: usize, data: &[u8]) {
        assert!(usize::from(obj) < self.objs() && offset + data.len() <= size);
        // SAFETY: the destination is inside the run as in `bytes`; `&mut self`
        // makes this the only access to the run; `data` is caller memory and
        // cannot overlap our mapping through safe code.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.run.as_ptr().add(usize::from(obj) * size + offset),
                data.len(),
            );
        }
    }

    /// Check the invariants in the module comment.
    pub(crate) fn check(&self) -> Result<(), String> {
        let mut seen = vec![false; self.objs()];
        for &f in &self.free {
            let f = usize::from(f);
            if f >= self.objs() {
                return Err(format!("free index {f} beyond {} objects", self.objs()));
            }
            if std::mem::replace(&mut seen[f], true) {
                return Err(format!("object {f} is on the free stack twice"));
            }
            if self.owners[f] != FREE_OBJ {
                return Err(format!(
                    "object {f} is free and owned by slot {}",
                    self.owners[f]
                ));
            }
        }
        let owned = self.owners.iter().filter(|&&o| o != FREE_OBJ).count();
        if owned + self.free.len() != self.objs() {
            return Err(format!(
                "{owned} owned + {} free objects != {} slots",
                self.free.len(),
                self.objs()
            ));
        }
        Ok(())
    }
}
