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
//! lives in the pages: which objects are free is a bitmap and the owner of
//! each object (its handle slot) is an array, both on the heap, so a client
//! overrunning its object can damage only object bytes, never the
//! allocator's metadata. The allocator touches object bytes only to copy
//! them (writes, reads, compaction).
//!
//! Allocation takes the lowest free object, so a zspage fills from its
//! start. Only its first `resident` pages are committed: a pool that trims
//! (see `compact.rs`) commits pages as objects reach into them and gives
//! back the pages above its highest object; other pools commit every page.
//!
//! Invariants (checked by [`Zspage::check`]):
//! - bit `i` of `free` is set exactly when object `i < objs` has owner
//!   [`FREE_OBJ`]; bits at `objs` and above are clear;
//! - every word of `free` below `low_word` is zero;
//! - `inuse` counts the objects with an owner;
//! - every allocated object lies inside the first `resident` pages.

use crate::os::Run;
use crate::words::Writes;

/// Owner value of an object slot that holds no object.
pub(crate) const FREE_OBJ: u32 = u32::MAX;

/// One zspage's descriptor, owned by its class.
#[derive(Debug)]
pub(crate) struct Zspage {
    run: Run,
    /// Bit per object, set while it is free.
    free: Box<[u64]>,
    /// Every word of `free` below this one is zero: where the search for
    /// the lowest free object starts.
    low_word: u16,
    /// Handle slot of each object, or `FREE_OBJ`, up to the highest object
    /// allocated since the zspage was last trimmed: the objects above are
    /// free, and a trimmed zspage holds no owner entries for the slots in
    /// its uncommitted pages.
    owners: Vec<u32>,
    objs: u32,
    inuse: u32,
    /// Pages committed from the start of the run.
    resident: u16,
}

impl Zspage {
    /// A zspage over fresh pages, all objects free, `resident` pages
    /// committed.
    pub(crate) fn new(run: Run, objs: usize, resident: usize) -> Self {
        debug_assert!((1..=1 << 16).contains(&objs) && resident >= 1);
        let mut free = vec![u64::MAX; objs.div_ceil(64)].into_boxed_slice();
        if !objs.is_multiple_of(64) {
            free[objs / 64] = (1 << (objs % 64)) - 1;
        }
        Zspage {
            run,
            free,
            low_word: 0,
            owners: Vec::new(),
            objs: objs as u32,
            inuse: 0,
            resident: resident as u16,
        }
    }

    /// The zspage's pages.
    pub(crate) fn run(&self) -> &Run {
        &self.run
    }

    /// Give the pages back (the descriptor is dropped with them).
    pub(crate) fn into_run(self) -> Run {
        self.run
    }

    pub(crate) fn inuse(&self) -> usize {
        self.inuse as usize
    }

    pub(crate) fn objs(&self) -> usize {
        self.objs as usize
    }

    /// Pages committed from the start of the run.
    pub(crate) fn resident(&self) -> usize {
        usize::from(self.resident)
    }

    pub(crate) fn set_resident(&mut self, pages: usize) {
        self.resident = pages as u16;
    }

    /// The lowest free object: the one allocation takes.
    pub(crate) fn next_free(&self) -> Option<u16> {
        let start = usize::from(self.low_word);
        let (w, bits) = self.free[start..]
            .iter()
            .enumerate()
            .find(|(_, b)| **b != 0)?;
        Some(((start + w) * 64 + bits.trailing_zeros() as usize) as u16)
    }

    /// Take free object `obj` (found with `next_free`) for handle slot
    /// `owner`.
    pub(crate) fn take(&mut self, obj: u16, owner: u32) {
        let i = usize::from(obj);
        debug_assert!(
            self.free[i / 64] & (1 << (i % 64)) != 0,
            "object {i} is not free"
        );
        self.free[i / 64] &= !(1 << (i % 64));
        while usize::from(self.low_word) < self.free.len()
            && self.free[usize::from(self.low_word)] == 0
        {
            self.low_word += 1;
        }
        if i >= self.owners.len() {
            // Objects are taken lowest first, so the array grows at its
            // end; by a quarter at a time, at most to `objs`.
            let len = self.owners.len();
            let new_len = (i + 1).max(len + len / 4 + 4).min(self.objs());
            self.owners.reserve_exact(new_len - len);
            self.owners.resize(new_len, FREE_OBJ);
        }
        self.owners[i] = owner;
        self.inuse += 1;
    }

    /// Return an object to the free objects.
    pub(crate) fn put(&mut self, obj: u16) {
        let i = usize::from(obj);
        debug_assert_ne!(self.owners[i], FREE_OBJ);
        self.owners[i] = FREE_OBJ;
        self.free[i / 64] |= 1 << (i % 64);
        self.low_word = self.low_word.min((i / 64) as u16);
        self.inuse -= 1;
    }

    /// Drop the owner entries above the highest allocated object (after
    /// the zspage's top pages were given back).
    pub(crate) fn shrink_owners(&mut self) {
        let keep = self
            .owners
            .iter()
            .rposition(|&o| o != FREE_OBJ)
            .map_or(0, |i| i + 1);
        self.owners.truncate(keep);
        if self.owners.capacity() > keep + keep / 4 + 4 {
            self.owners.shrink_to(keep + keep / 8);
        }
    }

    /// Handle slot owning `obj`, if it is allocated.
    pub(crate) fn owner(&self, obj: u16) -> Option<u32> {
        let o = *self.owners.get(usize::from(obj))?;
        (o != FREE_OBJ).then_some(o)
    }

    /// The highest allocated object below index `end`, with its owner.
    pub(crate) fn prev_allocated(&self, end: usize) -> Option<(u16, u32)> {
        let i = self.owners[..end.min(self.owners.len())]
            .iter()
            .rposition(|&o| o != FREE_OBJ)?;
        Some((i as u16, self.owners[i]))
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
            + self.free.len() * std::mem::size_of::<u64>()
            + self.owners.capacity() * std::mem::size_of::<u32>()
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

    /// Object `obj`'s bytes `offset..offset + data.len()` set from `data`,
    /// as `writes` says (by word where lock-free readers may race).
    pub(crate) fn write(
        &mut self,
        obj: u16,
        size: usize,
        offset: usize,
        data: &[u8],
        writes: Writes,
    ) {
        assert!(usize::from(obj) < self.objs() && offset + data.len() <= size);
        // SAFETY: the object's slot is inside the run as in `bytes`, starts
        // 8-aligned and is a whole number of words (class sizes are
        // multiples of 8), so the words the write touches are the slot's;
        // `&mut self` makes this the only writer; readers without the lock
        // read it by word only.
        unsafe { writes.store(self.obj_ptr(obj, size), offset, data) }
    }

    /// Copy the first `len` bytes of object `from` to object `to` (a move
    /// inside the zspage), as `writes` says.
    pub(crate) fn move_within(
        &mut self,
        from: u16,
        to: u16,
        size: usize,
        len: usize,
        writes: Writes,
    ) {
        assert!(usize::from(from.max(to)) < self.objs() && len <= size && from != to);
        // SAFETY: both slots are inside the run, 8-aligned, whole words and
        // distinct, so they do not overlap; `&mut self` makes this the only
        // writer.
        unsafe { writes.copy(self.obj_ptr(from, size), self.obj_ptr(to, size), len) }
    }

    /// Copy the first `len` bytes of object `from` of `other` (a zspage of
    /// the same class) into object `to`, by words whatever `writes` says:
    /// the source may be written meanwhile (a class with magazines, whose
    /// threads revive slots without the lock; the migration then drops
    /// the copy).
    pub(crate) fn copy_from(
        &mut self,
        to: u16,
        other: &Zspage,
        from: u16,
        size: usize,
        len: usize,
    ) {
        assert!(usize::from(to) < self.objs() && usize::from(from) < other.objs() && len <= size);
        // SAFETY: both slots are inside their runs, 8-aligned and whole
        // words, in distinct runs; `&mut self` makes this the only writer
        // of the destination; the source is accessed by others through
        // `words` only (a pool with magazines writes by words).
        unsafe { crate::words::copy(other.obj_ptr(from, size), self.obj_ptr(to, size), len) }
    }

    /// Where object `obj` of a class of `size` bytes starts.
    fn obj_ptr(&self, obj: u16, size: usize) -> *mut u8 {
        // SAFETY: callers pass `obj < objs`, so the offset is inside the run.
        unsafe { self.run.as_ptr().add(usize::from(obj) * size) }
    }

    /// Where the zspage's run starts (for lock-free readers).
    pub(crate) fn base(&self) -> *mut u8 {
        self.run.as_ptr()
    }

    /// Check the invariants in the module comment; objects are `size`
    /// bytes in pages of `page_size`.
    pub(crate) fn check(&self, size: usize, page_size: usize) -> Result<(), String> {
        let objs = self.objs();
        for (w, &bits) in self.free.iter().enumerate() {
            for b in 0..64 {
                let i = w * 64 + b;
                let free = bits & (1 << b) != 0;
                if i >= objs {
                    if free {
                        return Err(format!("free bit {i} beyond {objs} objects"));
                    }
                } else {
                    let owner = self.owners.get(i).copied().unwrap_or(FREE_OBJ);
                    if free != (owner == FREE_OBJ) {
                        return Err(format!("object {i}: free bit {free} but owner {owner:#x}"));
                    }
                }
            }
        }
        if let Some(w) = self.free[..usize::from(self.low_word)]
            .iter()
            .position(|&b| b != 0)
        {
            return Err(format!(
                "free word {w} is below the search start {}",
                self.low_word
            ));
        }
        let owned = self.owners.iter().filter(|&&o| o != FREE_OBJ).count();
        if owned != self.inuse() {
            return Err(format!("{owned} owned objects but inuse {}", self.inuse));
        }
        if let Some((top, _)) = self.prev_allocated(objs)
            && (usize::from(top) + 1) * size > self.resident() * page_size
        {
            return Err(format!(
                "object {top} ends past the {} resident pages",
                self.resident
            ));
        }
        Ok(())
    }
}
