//! The object API's thread-local front end: per thread, per pool and per
//! physical class, a *magazine* of parked slots, which a free fills and an
//! allocation of the same class (and logical class) empties without the
//! class lock.
//!
//! A slot parked in a magazine is allocated in its zspage and held in its
//! handle table, as a live object is: the class counts it in its zspage's
//! use count, its fullness group, its handle table and the spacing's live
//! counts, and none of them changes while it is in a magazine. Its handle
//! entry says *parked* (handle dead, generation moved on, place and the
//! freed object's length kept), and every change of that entry is one
//! compare-and-swap (`handle/entry.rs`):
//!
//! ```text
//!            magazine free (CAS, no lock)
//!   live(g) ----------------------------> parked(g+1) --- class lock's holder
//!      ^                                      |           takes it back (CAS,
//!      |  revived (fetch_and)                 |           under the lock) --> free(g+1)
//!      |                                      | magazine allocation (CAS, no lock)
//!  reviving(g+1) <----------------------------+
//!      (written by its thread, alone)
//! ```
//!
//! - Two frees of one handle race for the same live word: one swap wins,
//!   the other finds the word parked and gets `Freed`, as a double free
//!   does. A free under the class lock claims the word by the same
//!   compare-and-swap (a class with magazines has no plain-store claim).
//! - A magazine's allocation and the class lock's holder (compaction, the
//!   free of a zspage's last live object, `Pool::compact`, the adoption of
//!   an exited thread's slots) race for the same parked word: exactly one
//!   swap wins. The loser's magazine drops the slot when its swap fails;
//!   the lock's holder never reads another thread's magazine.
//! - A reviving entry is its thread's until it is live: no one frees it or
//!   moves its bytes (compaction waits for it; renumbering a zspage only
//!   changes its place). The thread found the object's address before its
//!   swap, from the parked word, by the lock-free reads' sequence check
//!   (`Published::parked_object`), and the swap succeeds only on that very
//!   word, so the address is right: a zspage's run never moves and an id
//!   names the same zspage as long as an entry in it keeps the id.
//! - Compaction moves a live object by copying it by words and pointing
//!   its entry at the copy by compare-and-swap from the live word it read:
//!   if a magazine freed (and maybe revived) the slot meanwhile, the swap
//!   fails and the copy is dropped.
//!
//! Statistics count a slot in a magazine as free: each magazine counts the
//! objects and bytes its frees and allocations took out of and put into
//! the class's figures (written by its thread alone, a load and a store),
//! the pool keeps the same for exited threads and for slots classes took
//! back, and `Pool::stats` adds them to the classes' figures.
//!
//! A thread's magazines live in its thread-local storage, found by the
//! pool's id (a `u64` never reused, unlike the pool's tag). When the thread
//! exits, its slots go to the pool's orphan list (through the `Arc` of
//! [`Magazines`] it holds), which the classes drain under their locks; a
//! pool dropped first leaves the thread nothing to do.

use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};

use crate::handle::{Directory, Handle};
use crate::optimistic::Published;

/// Pool ids: never reused in a process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Slots of a magazine an allocation looks at, from the top, for one of
/// its logical class.
const LOOK: usize = 8;

/// Slots a magazine parks past its budget before it gives them to the
/// class in one batch (one class lock for them).
const BATCH: usize = 4;

/// A pool's side of its threads' magazines.
pub(crate) struct Magazines {
    id: u64,
    /// Most slots a thread keeps parked per class.
    capacity: usize,
    /// Classes (positions in the pool's cell array).
    classes: usize,
    /// Live threads' magazines, for statistics and checks; `None` once the
    /// pool is dropped (an exiting thread then has nothing to hand over).
    threads: Mutex<Option<Vec<Arc<Magazine>>>>,
    /// Exited threads' parked slots: (class, packed slot).
    orphans: Mutex<Vec<(usize, u64)>>,
    /// Entries in `orphans` (read without its lock by the classes).
    orphaned: AtomicUsize,
    /// Per class: what exited threads' magazines and slots taken back by
    /// the class add to the class's own figures.
    ledger: Box<[Ledger]>,
}

impl std::fmt::Debug for Magazines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Magazines")
            .field("id", &self.id)
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

/// Objects and bytes to add to a class's own figures.
#[derive(Debug, Default)]
struct Ledger {
    objects: AtomicI64,
    bytes: AtomicI64,
}

/// One thread's magazines for one pool: a stack per class, made at the
/// class's first free on the thread.
#[derive(Debug)]
pub(crate) struct Magazine {
    stacks: Box<[OnceLock<Box<Stack>>]>,
}

/// One thread's parked slots of one class, and what its frees and
/// allocations took out of the class's figures. Written by its thread
/// alone (relaxed loads and stores); read by statistics and checks.
#[derive(Debug)]
pub(crate) struct Stack {
    len: AtomicUsize,
    /// Slots it keeps when `Magazines::free` finds it full (it parks
    /// [`BATCH`] past them, then gives up the rest; at most half the
    /// capacity is kept): one more after each allocation it serves, half
    /// after an allocation found one of its slots taken back by the class.
    budget: AtomicUsize,
    slots: Box<[AtomicU64]>,
    objects: AtomicI64,
    bytes: AtomicI64,
}

/// A slot, its parked generation and the logical class of the object
/// freed into it, in one word.
fn pack(slot: u32, generation: u32, logical: usize) -> u64 {
    u64::from(slot) | u64::from(generation) << 29 | (logical as u64) << 43
}

fn unpack(p: u64) -> (u32, u32, usize) {
    (
        (p & ((1 << 29) - 1)) as u32,
        ((p >> 29) & ((1 << 14) - 1)) as u32,
        (p >> 43) as usize,
    )
}

/// This thread's magazines, one per pool it used.
struct Local {
    id: u64,
    shared: Arc<Magazines>,
    mine: Arc<Magazine>,
}

impl Drop for Local {
    fn drop(&mut self) {
        self.shared.retire(&self.mine);
    }
}

thread_local! {
    static LOCAL: RefCell<Vec<Local>> = const { RefCell::new(Vec::new()) };
}

/// What one attempt to revive a parked slot found.
enum Revive {
    Done,
    /// No longer parked at its generation: the class took it back.
    Gone,
    /// A relocation was under way: let the locked path serve.
    Busy,
}

/// What a magazine's free did with the handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Freed {
    /// Parked in the calling thread's magazine.
    Parked,
    /// Not parked, the magazine being full: the locked free frees it and
    /// gives the magazine's oldest slots back in the same lock hold
    /// ([`Magazines::give_back`]).
    Full,
    /// Not parked: the locked free must free it.
    Locked,
}

impl Stack {
    fn new(capacity: usize) -> Stack {
        Stack {
            len: AtomicUsize::new(0),
            budget: AtomicUsize::new(1),
            slots: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
            objects: AtomicI64::new(0),
            bytes: AtomicI64::new(0),
        }
    }

    /// Count what a free (`-1`) or an allocation (`+1`) of `len` bytes did
    /// to the class's figures.
    fn count(&self, objects: i64, bytes: i64) {
        self.objects
            .store(self.objects.load(Relaxed) + objects, Relaxed);
        self.bytes.store(self.bytes.load(Relaxed) + bytes, Relaxed);
    }

    fn remove(&self, k: usize) {
        let n = self.len.load(Relaxed);
        for i in k..n - 1 {
            self.slots[i].store(self.slots[i + 1].load(Relaxed), Relaxed);
        }
        self.len.store(n - 1, Relaxed);
    }

    /// Give up the oldest slots, keeping the newest `budget` ones (at
    /// most `most`), each (slot, generation) to `take`: a full magazine's
    /// batch, taken back by its class.
    fn give_oldest(&self, most: usize, mut take: impl FnMut(u32, u32)) {
        let n = self.len.load(Relaxed);
        let keep = self.budget.load(Relaxed).min(most).min(n);
        let gone = n - keep;
        for k in 0..gone {
            let (slot, generation, _) = unpack(self.slots[k].load(Relaxed));
            take(slot, generation);
        }
        for k in 0..keep {
            self.slots[k].store(self.slots[gone + k].load(Relaxed), Relaxed);
        }
        self.len.store(keep, Relaxed);
    }

    /// The class took a slot back: hold half as many.
    fn shrink(&self) {
        self.budget
            .store((self.budget.load(Relaxed) / 2).max(1), Relaxed);
    }
}

impl Magazines {
    /// For a pool of `classes` classes, each thread keeping at most
    /// `capacity` slots of a class.
    pub(crate) fn new(classes: usize, capacity: usize) -> Magazines {
        Magazines {
            id: NEXT_ID.fetch_add(1, Relaxed),
            capacity,
            classes,
            threads: Mutex::new(Some(Vec::new())),
            orphans: Mutex::new(Vec::new()),
            orphaned: AtomicUsize::new(0),
            ledger: (0..classes).map(|_| Ledger::default()).collect(),
        }
    }

    /// Run `f` on this thread's stack of class `d`, made if need be;
    /// `None` while the thread's storage is being torn down.
    #[inline]
    fn with_stack<R>(self: &Arc<Self>, d: usize, f: impl FnOnce(&Stack) -> R) -> Option<R> {
        LOCAL
            .try_with(|local| {
                {
                    let mine = local.try_borrow().ok()?;
                    if let Some(l) = mine.iter().find(|l| l.id == self.id) {
                        let stack =
                            l.mine.stacks[d].get_or_init(|| Box::new(Stack::new(self.capacity)));
                        return Some(f(stack));
                    }
                }
                let mine = self.adopt_thread();
                let stack = mine.stacks[d].get_or_init(|| Box::new(Stack::new(self.capacity)));
                let r = f(stack);
                let mut all = local.try_borrow_mut().ok()?;
                // Pools dropped since: nothing to hand over, drop them here.
                all.retain(|l| l.shared.threads.lock().is_ok_and(|t| t.is_some()));
                all.push(Local {
                    id: self.id,
                    shared: self.clone(),
                    mine,
                });
                Some(r)
            })
            .ok()
            .flatten()
    }

    /// A magazine for the calling thread, registered.
    fn adopt_thread(&self) -> Arc<Magazine> {
        let mine = Arc::new(Magazine {
            stacks: (0..self.classes).map(|_| OnceLock::new()).collect(),
        });
        if let Some(list) = lock(&self.threads).as_mut() {
            list.push(mine.clone());
        }
        mine
    }

    /// A thread's magazine goes (the thread exits): its slots go to the
    /// orphan list and its counts to the pool's ledger, unless the pool is
    /// gone.
    fn retire(&self, mine: &Arc<Magazine>) {
        let mut threads = lock(&self.threads);
        let Some(list) = threads.as_mut() else {
            return;
        };
        list.retain(|m| !Arc::ptr_eq(m, mine));
        let mut orphans = lock(&self.orphans);
        for (d, stack) in mine.stacks.iter().enumerate() {
            let Some(s) = stack.get() else { continue };
            self.ledger[d]
                .objects
                .fetch_add(s.objects.load(Relaxed), Relaxed);
            self.ledger[d]
                .bytes
                .fetch_add(s.bytes.load(Relaxed), Relaxed);
            for k in 0..s.len.load(Relaxed) {
                orphans.push((d, s.slots[k].load(Relaxed)));
            }
        }
        self.orphaned.store(orphans.len(), Relaxed);
    }

    /// The pool is dropped: threads that exit later hand nothing over.
    pub(crate) fn close(&self) {
        *lock(&self.threads) = None;
        lock(&self.orphans).clear();
        self.orphaned.store(0, Relaxed);
    }

    /// A free without the class lock: park live `h`'s slot (of class `d`,
    /// whose objects `logical` gives the logical class of by length) in
    /// this thread's magazine. [`Freed::Full`] when the magazine holds
    /// [`BATCH`] slots past its budget (or its capacity): the locked free
    /// frees `h` and gives the oldest back in the same lock hold
    /// ([`Magazines::give_back`]). [`Freed::Locked`] when the locked free
    /// must free `h` (its zspage holds too few slots, the generation is
    /// the last). The magazine is as it was unless `h` parked.
    #[inline]
    pub(crate) fn free(
        self: &Arc<Self>,
        d: usize,
        published: &Published,
        h: Handle,
        logical: impl FnOnce(usize) -> usize,
    ) -> crate::Result<Freed> {
        let directory = published.directory();
        self.with_stack(d, |stack| {
            let n = stack.len.load(Relaxed);
            // Full: the locked free of `h` gives the oldest slots back in
            // the same lock hold.
            if n >= self.capacity.min(stack.budget.load(Relaxed) + BATCH) {
                return Ok(Freed::Full);
            }
            // Only while the object's zspage holds more slots than this
            // magazine will: so the slots of a zspage whose objects one
            // thread freed are never all in its magazine, and the free of
            // the zspage's last object, under the lock, gives it back. The
            // zspage is marked before the swap (a swap that then fails
            // leaves a mark that costs a look, no more), so that free
            // looks for parked slots there (`Published::note_parked`).
            let admit = |place| {
                let admitted = published.holds_more_than(place, n + 1);
                if admitted {
                    published.note_parked(place);
                }
                admitted
            };
            let Some(len) = directory.park(h, admit)? else {
                return Ok(Freed::Locked);
            };
            stack.slots[n].store(pack(h.slot(), h.generation() + 1, logical(len)), Relaxed);
            stack.len.store(n + 1, Relaxed);
            stack.count(-1, -(len as i64));
            Ok(Freed::Parked)
        })
        .unwrap_or(Ok(Freed::Locked))
    }

    /// An allocation without the class lock: revive a slot of this
    /// thread's magazine of class `d` (class index `index` in handles)
    /// whose last object was of logical class `logical`, for an object of
    /// `len` bytes, writing `data` if given. `None`: the locked path must
    /// serve.
    #[inline]
    pub(crate) fn alloc(
        self: &Arc<Self>,
        d: usize,
        index: usize,
        published: &Published,
        logical: usize,
        len: usize,
        data: Option<&[u8]>,
    ) -> Option<Handle> {
        self.with_stack(d, |stack| {
            let mut k = stack.len.load(Relaxed);
            let mut looked = 0;
            while k > 0 && looked < LOOK {
                k -= 1;
                looked += 1;
                let (slot, generation, of) = unpack(stack.slots[k].load(Relaxed));
                if of != logical {
                    continue;
                }
                match revive(published, slot, generation, len, data) {
                    Revive::Done => {
                        stack.remove(k);
                        stack.count(1, len as i64);
                        let b = stack.budget.load(Relaxed);
                        stack.budget.store((b + 1).min(self.capacity), Relaxed);
                        return Some(Handle::new(index, slot, generation));
                    }
                    Revive::Gone => {
                        stack.remove(k);
                        stack.shrink();
                    }
                    Revive::Busy => return None,
                }
            }
            None
        })
        .flatten()
    }

    /// Exited threads' slots of class `d`, for the class to take back
    /// under its lock (empty, without a lock, when there are none).
    pub(crate) fn orphans_of(&self, d: usize) -> Vec<(u32, u32)> {
        if self.orphaned.load(Relaxed) == 0 {
            return Vec::new();
        }
        let mut orphans = lock(&self.orphans);
        let mut mine = Vec::new();
        orphans.retain(|&(c, p)| {
            if c == d {
                let (slot, generation, _) = unpack(p);
                mine.push((slot, generation));
            }
            c != d
        });
        self.orphaned.store(orphans.len(), Relaxed);
        mine
    }

    /// This thread's magazine of class `d` is full ([`Freed::Full`]): its
    /// oldest slots (all but its budget, at most half its capacity), each
    /// (slot, generation) to `take`, which the caller runs under the class
    /// lock to take them back (nothing while the thread's storage is torn
    /// down: its slots then go to the orphan list).
    pub(crate) fn give_back(self: &Arc<Self>, d: usize, take: impl FnMut(u32, u32)) {
        self.with_stack(d, |stack| stack.give_oldest(self.capacity / 2, take));
    }

    /// Exited threads' slots waiting to be taken back.
    pub(crate) fn orphaned(&self) -> usize {
        self.orphaned.load(Relaxed)
    }

    /// Class `d` took back slots of magazines holding `objects` objects of
    /// `bytes` bytes as the class counts them (it uncounted them).
    pub(crate) fn reclaimed(&self, d: usize, objects: i64, bytes: i64) {
        self.ledger[d].objects.fetch_add(objects, Relaxed);
        self.ledger[d].bytes.fetch_add(bytes, Relaxed);
    }

    /// Per class: what to add to the class's own objects and bytes, and
    /// how many of its slots are parked in magazines. The class counts a
    /// parked slot as a live object and the magazines' counts take it
    /// out, so (at rest) the slots parked are minus the objects added.
    pub(crate) fn totals(&self) -> Vec<(i64, i64, usize)> {
        // The ledger is read under the threads' lock, which an exiting
        // thread holds while it moves its counts into the ledger: else its
        // counts could be read in neither place (Miri's schedule found it).
        let threads = lock(&self.threads);
        let mut t: Vec<(i64, i64, usize)> = self
            .ledger
            .iter()
            .map(|l| (l.objects.load(Relaxed), l.bytes.load(Relaxed), 0))
            .collect();
        for m in threads.iter().flatten() {
            for (d, stack) in m.stacks.iter().enumerate() {
                if let Some(s) = stack.get() {
                    t[d].0 += s.objects.load(Relaxed);
                    t[d].1 += s.bytes.load(Relaxed);
                }
            }
        }
        for x in &mut t {
            x.2 = usize::try_from(-x.0).unwrap_or(0);
        }
        t
    }

    /// Per class: the (slot, generation) pairs magazines and the orphan
    /// list hold; checks that no magazine holds more than its capacity.
    pub(crate) fn listed(&self) -> Result<Vec<HashSet<(u32, u32)>>, String> {
        let mut sets = vec![HashSet::new(); self.classes];
        let threads = lock(&self.threads);
        for m in threads.iter().flatten() {
            for (d, stack) in m.stacks.iter().enumerate() {
                let Some(s) = stack.get() else { continue };
                let n = s.len.load(Relaxed);
                let budget = s.budget.load(Relaxed);
                if n > self.capacity || !(1..=self.capacity).contains(&budget) {
                    return Err(format!(
                        "a magazine of class {d} holds {n} slots, budget {budget}, capacity {}",
                        self.capacity
                    ));
                }
                for k in 0..n {
                    let (slot, generation, _) = unpack(s.slots[k].load(Relaxed));
                    if !sets[d].insert((slot, generation)) {
                        return Err(format!("slot {slot} of class {d} is in two magazines"));
                    }
                }
            }
        }
        for &(d, p) in lock(&self.orphans).iter() {
            let (slot, generation, _) = unpack(p);
            if !sets[d].insert((slot, generation)) {
                return Err(format!("orphaned slot {slot} of class {d} is listed twice"));
            }
        }
        Ok(sets)
    }

    /// Heap bytes of the live threads' stacks and the pool's side.
    pub(crate) fn metadata_bytes(&self) -> usize {
        let stack = std::mem::size_of::<Stack>() + self.capacity * 8;
        let per_thread = self.classes * std::mem::size_of::<OnceLock<Box<Stack>>>();
        let threads = lock(&self.threads);
        let stacks: usize = threads
            .iter()
            .flatten()
            .map(|m| per_thread + m.stacks.iter().filter(|s| s.get().is_some()).count() * stack)
            .sum();
        std::mem::size_of::<Self>() + self.classes * std::mem::size_of::<Ledger>() + stacks
    }
}

/// Revive parked `slot` (at `generation`) for an object of `len` bytes,
/// writing `data` if given.
fn revive(
    published: &Published,
    slot: u32,
    generation: u32,
    len: usize,
    data: Option<&[u8]>,
) -> Revive {
    let directory = published.directory();
    // Twice: a relocation may change the parked word between the look-up
    // and the swap.
    for _ in 0..2 {
        let Some((e, word)) = directory.parked(slot, generation) else {
            return Revive::Gone;
        };
        let at = match data {
            Some(_) => match published.parked_object(e, word) {
                Some(at) => Some(at),
                None => return Revive::Busy,
            },
            None => None,
        };
        if Directory::revive(e, word, len, data.is_some()).is_err() {
            continue;
        }
        if let (Some(data), Some(at)) = (data, at) {
            // SAFETY: `at` is the start of the slot the swap made this
            // thread's (reviving: no one else writes it, frees it or moves
            // it until `revived`), whose words hold `len` bytes (a class's
            // slot is whole words, `len` at most its size); lock-free
            // readers read it by words only.
            unsafe { crate::words::store(at, 0, data) };
            Directory::revived(e);
        }
        return Revive::Done;
    }
    Revive::Busy
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
