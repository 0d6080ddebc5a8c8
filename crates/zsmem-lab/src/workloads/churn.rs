//! Swap-like churn: every slot filled, then random overwrites and discards,
//! as a swap device sees them (pages written in reclaim order, then
//! overwritten or freed at random by swap-in, process exit and slot reuse).
//!
//! A run fills `slots` slots with the tree's pages in write order, takes a
//! reading, then makes `ops` calls, each one of:
//! - a **discard** (share [`Churn::discard_share`], 20% by default) of a
//!   random stored slot, which waits to be written again;
//! - a **write** of a random page of the tree: a quarter of the writes
//!   (so that, with the default shares, as many slots are refilled as
//!   are discarded) rewrite the slot discarded longest ago, the others
//!   overwrite a slot drawn at random (by [`Variant`]);
//!
//! and every [`Churn::verify_every`]-th call also reads a stored slot back
//! and checks every byte. Figures are read [`Churn::readings`] times at
//! even intervals. [`Variant::Phase`] also discards half the slots at once
//! halfway (a process exiting) and writes them again (its successor), with
//! a reading after each.
//!
//! The CPU time a contestant takes for the calls is measured as the
//! process's user + system time over the churn (the fill left out; its
//! background threads, such as zsmem's page returner, included; the
//! kernel's zram compresses in the calling thread, so its system time is
//! there too), or, for a contestant that times its calls in another
//! process ([`PageContestant::op_time`]), as the sum of those times.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::untar_rm::{Latencies, RunResult, Step};
use crate::contestants::{LabError, PageContestant};
use crate::corpus::{FileTree, Page};

/// Which slots the random calls choose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// Every slot alike.
    Uniform,
    /// 80% of the calls on a hot fifth of the slots (scattered over the
    /// slot numbers, as a hot working set is over a swap device).
    HotCold,
    /// Uniform, with half the slots discarded at once halfway and then
    /// written again.
    Phase,
}

impl Variant {
    /// Every variant, by name.
    pub const ALL: [(&'static str, Variant); 3] = [
        ("uniform", Variant::Uniform),
        ("hot-cold", Variant::HotCold),
        ("phase", Variant::Phase),
    ];

    /// Its name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, v)| *v == self)
            .map_or("?", |(n, _)| n)
    }
}

/// Parameters of the churn workload.
#[derive(Clone, Debug, Serialize)]
pub struct Churn {
    /// Which slots the calls choose.
    pub variant: Variant,
    /// Slots (default: one per page of the tree).
    pub slots: Option<usize>,
    /// Calls after the fill (default: 4 per slot).
    pub ops: Option<u64>,
    /// Readings of the figures over the calls (at least 1).
    pub readings: usize,
    /// Share of the calls that discard a slot (0..1).
    pub discard_share: f64,
    /// Share of the pages written that are zero-filled (same-filled pages).
    pub zero_share: f64,
    /// Share of the pages written that are random bytes (incompressible).
    pub incompressible_share: f64,
    /// Every n-th call also reads a slot back and checks it (0: never).
    pub verify_every: u64,
    /// Seed of every random choice.
    pub seed: u64,
}

impl Default for Churn {
    fn default() -> Self {
        Churn {
            variant: Variant::Uniform,
            slots: None,
            ops: None,
            readings: 8,
            discard_share: 0.2,
            zero_share: 0.0,
            incompressible_share: 0.0,
            verify_every: 64,
            seed: 1,
        }
    }
}

/// What one contestant's churn produced.
#[derive(Clone, Debug)]
pub struct ChurnResult {
    /// Steps (`fill`, `op N`, and for [`Variant::Phase`] `-half` and
    /// `+half`), latencies and wall time, as untar/rm reports them.
    pub run: RunResult,
    /// Calls made after the fill (stores, discards and the checking
    /// loads).
    pub calls: u64,
    /// CPU time those calls took (see the module's documentation).
    pub cpu: Duration,
    /// How `cpu` was measured.
    pub cpu_measure: &'static str,
    /// For [`Variant::Phase`]: pages waiting in the contestant's return
    /// queue right after the burst of discards, before any delay, where
    /// the contestant can tell.
    pub waiting_after_burst: Option<u64>,
}

impl ChurnResult {
    /// CPU nanoseconds per call.
    pub fn cpu_ns_per_call(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.cpu.as_nanos() as f64 / self.calls as f64
        }
    }
}

/// No page stored in the slot.
const EMPTY: u32 = u32::MAX;

/// Random pages kept for incompressible writes.
pub const RANDOM_PAGES: usize = 64;

/// The process's user + system CPU time so far (every thread).
pub fn process_cpu() -> Duration {
    // SAFETY: getrusage writes one rusage into the zeroed struct we own.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn record(h: &mut hdrhistogram::Histogram<u64>, d: Duration) {
    h.saturating_record(d.as_nanos().clamp(1, u128::from(u64::MAX)) as u64);
}

/// One call of the churn, as [`ChurnCalls`] makes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChurnCall {
    /// Store page `page` (an index into the run's pages) in `slot`.
    Write {
        /// Slot written.
        slot: u64,
        /// Page written.
        page: u32,
    },
    /// Discard `slot` (it holds a page; it waits to be written again).
    Discard {
        /// Slot discarded.
        slot: u64,
    },
}

/// The churn's random calls over `slots` slots and `pages` pages, as
/// [`Churn::run`] makes them (and `zsmem bench store --churn`, one per
/// thread over the thread's slots): the fill, then calls each a discard
/// ([`Churn::discard_share`]) of a stored slot or a write of a random page,
/// a quarter of the writes (with the default shares) rewriting the slot
/// discarded longest ago. It keeps what every slot holds, so a caller can
/// check it. Page numbers from `pages` on name the zero-filled page
/// (`pages`) and [`RANDOM_PAGES`] random ones after it, for
/// [`Churn::zero_share`] and [`Churn::incompressible_share`].
pub struct ChurnCalls {
    rng: ChaCha8Rng,
    /// Page in each slot, or `EMPTY`.
    content: Vec<u32>,
    /// Slots discarded, oldest first. A waiting slot drawn at random is
    /// simply written and left here; `next_waiting` skips it when its turn
    /// comes (a slot discarded again is then here twice, also skipped).
    waiting: VecDeque<u64>,
    /// The hot fifth of the slots ([`Variant::HotCold`]), else empty.
    hot: Vec<u64>,
    pages: u32,
    discard_share: f64,
    refill_share: f64,
    zero_share: f64,
    incompressible_share: f64,
}

impl ChurnCalls {
    /// The calls of `churn` (its variant and shares; not its slot and call
    /// counts) over `slots` slots and `pages` pages of input, drawn from
    /// `seed`. The shares are checked ([`Churn::validate`]).
    pub fn new(churn: &Churn, slots: usize, pages: u32, seed: u64) -> Result<Self, LabError> {
        churn.validate()?;
        Self::with_rng(churn, slots, pages, ChaCha8Rng::seed_from_u64(seed))
    }

    fn with_rng(
        churn: &Churn,
        slots: usize,
        pages: u32,
        mut rng: ChaCha8Rng,
    ) -> Result<Self, LabError> {
        if slots == 0 || pages == 0 {
            return Err(LabError::Usage(
                "churn: at least one slot and one page".into(),
            ));
        }
        // Reserved with a clear error: `--slots` up to 2^32 is accepted,
        // and a vector too large for memory aborted the process.
        let too_many = |e: std::collections::TryReserveError| {
            LabError::Usage(format!(
                "churn: {slots} slots: no memory for their bookkeeping ({e}); use fewer"
            ))
        };
        let mut content = Vec::new();
        content.try_reserve_exact(slots).map_err(too_many)?;
        content.resize(slots, EMPTY);
        let mut waiting = VecDeque::new();
        waiting.try_reserve_exact(slots).map_err(too_many)?;
        // The hot fifth: a random choice of slots.
        let hot: Vec<u64> = if churn.variant == Variant::HotCold {
            let mut all = Vec::new();
            all.try_reserve_exact(slots).map_err(too_many)?;
            all.extend(0..slots as u64);
            for i in 0..all.len() {
                let j = rng.random_range(i..all.len());
                all.swap(i, j);
            }
            all.truncate((slots / 5).max(1));
            all
        } else {
            Vec::new()
        };
        Ok(ChurnCalls {
            rng,
            content,
            waiting,
            hot,
            pages,
            discard_share: churn.discard_share,
            refill_share: (churn.discard_share / (1.0 - churn.discard_share)).min(1.0),
            zero_share: churn.zero_share,
            incompressible_share: churn.incompressible_share,
        })
    }

    /// The page `slot` holds, if any (`None` also for a slot out of range).
    pub fn page_in(&self, slot: u64) -> Option<u32> {
        self.content
            .get(slot as usize)
            .copied()
            .filter(|&p| p != EMPTY)
    }

    fn pick_page(&mut self) -> u32 {
        let x: f64 = self.rng.random();
        if x < self.zero_share {
            self.pages
        } else if x < self.zero_share + self.incompressible_share {
            self.pages + 1 + self.rng.random_range(0..RANDOM_PAGES as u32)
        } else {
            self.rng.random_range(0..self.pages)
        }
    }

    /// A slot drawn at random (the hot fifth 80% of the time with
    /// [`Variant::HotCold`]).
    pub fn pick_slot(&mut self) -> u64 {
        if !self.hot.is_empty() && self.rng.random_bool(0.8) {
            self.hot[self.rng.random_range(0..self.hot.len())]
        } else {
            self.rng.random_range(0..self.content.len() as u64)
        }
    }

    fn write(&mut self, slot: u64) -> ChurnCall {
        let page = self.pick_page();
        self.content[slot as usize] = page;
        ChurnCall::Write { slot, page }
    }

    fn discard(&mut self, slot: u64) -> ChurnCall {
        self.content[slot as usize] = EMPTY;
        self.waiting.push_back(slot);
        ChurnCall::Discard { slot }
    }

    /// The fill's write of `slot`: the input's pages in order (again from
    /// the start when there are more slots than pages), or with zero or
    /// incompressible shares, a page drawn as the churn draws them.
    pub fn fill(&mut self, slot: u64) -> ChurnCall {
        if self.zero_share + self.incompressible_share > 0.0 {
            self.write(slot)
        } else {
            let page = (slot % u64::from(self.pages)) as u32;
            self.content[slot as usize] = page;
            ChurnCall::Write { slot, page }
        }
    }

    /// The next call after the fill.
    pub fn next_call(&mut self) -> ChurnCall {
        if self.rng.random_bool(self.discard_share) {
            // Discard a stored slot (drawn until one holds a page; a few
            // tries, then the call is a write instead).
            for _ in 0..8 {
                let s = self.pick_slot();
                if self.content[s as usize] != EMPTY {
                    return self.discard(s);
                }
            }
            let s = self.pick_slot();
            self.write(s)
        } else {
            let refill = self.rng.random_bool(self.refill_share);
            let slot = match refill.then(|| self.next_waiting()).flatten() {
                Some(s) => s,
                None => self.pick_slot(),
            };
            self.write(slot)
        }
    }

    /// [`Variant::Phase`]'s burst: every stored slot discarded with
    /// probability one half (a process exiting).
    fn burst(&mut self) -> Vec<u64> {
        let mut out = Vec::new();
        for slot in 0..self.content.len() as u64 {
            if self.content[slot as usize] != EMPTY && self.rng.random_bool(0.5) {
                self.discard(slot);
                out.push(slot);
            }
        }
        out
    }

    /// A write of the slot discarded longest ago that is still empty, if
    /// any.
    fn refill(&mut self) -> Option<ChurnCall> {
        let slot = self.next_waiting()?;
        Some(self.write(slot))
    }

    /// The slot discarded longest ago that is still empty.
    fn next_waiting(&mut self) -> Option<u64> {
        while let Some(s) = self.waiting.pop_front() {
            if self.content[s as usize] == EMPTY {
                return Some(s);
            }
        }
        None
    }
}

/// The run's state: the pages, the clocks.
struct State<'a> {
    pages: Vec<&'a Page>,
    lat: Latencies,
    calls: u64,
    op_time: Duration,
    timed_elsewhere: bool,
    buf: Box<Page>,
}

impl State<'_> {
    /// Make `call` (the generator has already noted its effect).
    fn make(&mut self, c: &mut dyn PageContestant, call: ChurnCall) -> Result<(), LabError> {
        match call {
            ChurnCall::Write { slot, page } => self.store(c, slot, page),
            ChurnCall::Discard { slot } => self.discard(c, slot),
        }
    }

    fn store(&mut self, c: &mut dyn PageContestant, slot: u64, page: u32) -> Result<(), LabError> {
        let t = Instant::now();
        c.store(slot, self.pages[page as usize])?;
        let d = t.elapsed();
        self.account(c, d, Op::Store);
        Ok(())
    }

    fn discard(&mut self, c: &mut dyn PageContestant, slot: u64) -> Result<(), LabError> {
        let t = Instant::now();
        c.discard(slot, 1)?;
        let d = t.elapsed();
        self.account(c, d, Op::Discard);
        Ok(())
    }

    /// Read `slot` back and compare it with `page`, the one it holds.
    fn check(
        &mut self,
        c: &mut dyn PageContestant,
        slot: u64,
        page: Option<u32>,
    ) -> Result<(), LabError> {
        let Some(page) = page else {
            return Ok(());
        };
        let t = Instant::now();
        c.load(slot, &mut self.buf)?;
        let d = t.elapsed();
        self.account(c, d, Op::Load);
        if self.buf[..] != self.pages[page as usize][..] {
            return Err(LabError::Mismatch {
                contestant: c.name().to_string(),
                slot,
            });
        }
        Ok(())
    }

    fn account(&mut self, c: &dyn PageContestant, d: Duration, op: Op) {
        let d = match c.op_time() {
            Some(t) => {
                self.timed_elsewhere = true;
                t
            }
            None => d,
        };
        self.op_time += d;
        self.calls += 1;
        let h = match op {
            Op::Store => &mut self.lat.store,
            Op::Load => &mut self.lat.load,
            Op::Discard => &mut self.lat.discard,
        };
        record(h, d);
    }
}

enum Op {
    Store,
    Load,
    Discard,
}

impl Churn {
    /// Check the parameters.
    pub fn validate(&self) -> Result<(), LabError> {
        let share = |name: &str, x: f64| {
            if (0.0..1.0).contains(&x) {
                Ok(())
            } else {
                Err(LabError::Usage(format!(
                    "churn: {name} {x} must be in [0, 1)"
                )))
            }
        };
        share("discard share", self.discard_share)?;
        share("zero share", self.zero_share)?;
        share("incompressible share", self.incompressible_share)?;
        share(
            "zero + incompressible share",
            self.zero_share + self.incompressible_share,
        )?;
        if self.readings == 0 {
            return Err(LabError::Usage("churn: at least one reading".into()));
        }
        if self.slots == Some(0) {
            return Err(LabError::Usage("churn: at least one slot".into()));
        }
        if self.ops == Some(0) && self.variant == Variant::Phase {
            // Its burst comes halfway through the calls: none, no phase.
            return Err(LabError::Usage(
                "churn: the phase variant needs at least one call".into(),
            ));
        }
        if self.slots.is_some_and(|s| s > u32::MAX as usize) {
            return Err(LabError::Usage(format!(
                "churn: at most {} slots",
                u32::MAX
            )));
        }
        Ok(())
    }

    /// Slots a run over `tree` uses.
    pub fn slots_for(&self, tree: &FileTree) -> usize {
        self.slots.unwrap_or(tree.total_pages()).max(1)
    }

    /// Calls after the fill for a run over `tree`.
    pub fn ops_for(&self, tree: &FileTree) -> u64 {
        self.ops.unwrap_or(4 * self.slots_for(tree) as u64)
    }

    /// Run the workload on one contestant; `progress(calls)` now and then.
    pub fn run(
        &self,
        tree: &FileTree,
        c: &mut dyn PageContestant,
        mut progress: impl FnMut(u64),
    ) -> Result<ChurnResult, LabError> {
        self.validate()?;
        let page_size = tree.page_size();
        if c.page_size() != page_size {
            return Err(LabError::Usage(format!(
                "{} stores {}-byte pages, but the tree is cut into {}-byte pages",
                c.name(),
                c.page_size(),
                page_size
            )));
        }
        if tree.total_pages() == 0 {
            return Err(LabError::Usage("churn: the tree has no pages".into()));
        }
        let start = Instant::now();
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let slots = self.slots_for(tree);
        let ops = self.ops_for(tree);
        // Every page the run writes, made up front so that a contestant
        // measured by its memory growth sees only its own allocations.
        let zero: Box<Page> = vec![0u8; page_size].into_boxed_slice();
        let random: Vec<Box<Page>> = (0..RANDOM_PAGES)
            .map(|_| {
                let mut p = vec![0u8; page_size].into_boxed_slice();
                rng.fill(&mut p[..]);
                p
            })
            .collect();
        let mut pages: Vec<&Page> = tree.pages().map(|(_, _, p)| p).collect();
        let tree_pages = u32::try_from(pages.len())
            .map_err(|_| LabError::Usage("churn: more than 2^32 pages".into()))?;
        pages.push(&*zero);
        pages.extend(random.iter().map(|p| &**p));
        let mut calls = ChurnCalls::with_rng(self, slots, tree_pages, rng)?;
        let mut st = State {
            pages,
            lat: Latencies::default(),
            calls: 0,
            op_time: Duration::ZERO,
            timed_elsewhere: false,
            buf: vec![0u8; page_size].into_boxed_slice(),
        };
        for slot in 0..slots as u64 {
            st.make(c, calls.fill(slot))?;
        }
        let mut steps = vec![Step {
            round: 1,
            label: "fill".into(),
            figures: c.figures()?,
        }];
        progress(0);
        st.calls = 0;
        st.op_time = Duration::ZERO;
        let cpu_start = process_cpu();
        let every = ops.div_ceil(self.readings as u64).max(1);
        // The burst after call `half` (the only one with one call: `ops /
        // 2` left a run of one call without its phase, reported as one).
        let half = ops.div_ceil(2);
        let mut waiting_after_burst = None;
        for op in 1..=ops {
            st.make(c, calls.next_call())?;
            if self.verify_every > 0 && op.is_multiple_of(self.verify_every) {
                let s = calls.pick_slot();
                st.check(c, s, calls.page_in(s))?;
            }
            if self.variant == Variant::Phase && op == half {
                // A process exits: half the slots, at random, at once.
                for slot in calls.burst() {
                    st.discard(c, slot)?;
                }
                waiting_after_burst = c.waiting_pages();
                steps.push(Step {
                    round: 1,
                    label: "-half".into(),
                    figures: c.figures()?,
                });
                // Its successor writes as much again.
                while let Some(call) = calls.refill() {
                    st.make(c, call)?;
                }
                steps.push(Step {
                    round: 1,
                    label: "+half".into(),
                    figures: c.figures()?,
                });
            }
            if op.is_multiple_of(every) || op == ops {
                steps.push(Step {
                    round: 1,
                    label: format!("op {op}"),
                    figures: c.figures()?,
                });
                progress(op);
            }
        }
        let (cpu, cpu_measure) = if st.timed_elsewhere {
            (
                st.op_time,
                "the sum of the calls' times in the contestant's own process",
            )
        } else {
            (
                process_cpu().saturating_sub(cpu_start),
                "process user + system time (every thread) over the churn",
            )
        };
        Ok(ChurnResult {
            run: RunResult {
                contestant: c.name().to_string(),
                config: c.config(),
                steps,
                latency: st.lat,
                wall: start.elapsed(),
            },
            calls: st.calls,
            cpu,
            cpu_measure,
            waiting_after_burst,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contestants::Figures;
    use crate::corpus::FileEntry;
    use std::collections::HashMap;

    /// A model contestant: pages in a map, figures from its contents.
    #[derive(Default)]
    struct Model {
        slots: HashMap<u64, Box<Page>>,
        stores: u64,
        discards: u64,
        loads: u64,
        corrupt: bool,
    }

    impl PageContestant for Model {
        fn name(&self) -> &str {
            "model"
        }
        fn config(&self) -> String {
            String::new()
        }
        fn store(&mut self, slot: u64, page: &Page) -> Result<(), LabError> {
            self.stores += 1;
            self.slots.insert(slot, page.into());
            Ok(())
        }
        fn load(&mut self, slot: u64, buf: &mut Page) -> Result<(), LabError> {
            self.loads += 1;
            let p = self.slots.get(&slot).expect("loads only stored slots");
            buf.copy_from_slice(p);
            if self.corrupt {
                buf[0] ^= 1;
            }
            Ok(())
        }
        fn discard(&mut self, slot: u64, pages: u64) -> Result<(), LabError> {
            assert_eq!(pages, 1);
            self.discards += 1;
            assert!(self.slots.remove(&slot).is_some(), "discards stored slots");
            Ok(())
        }
        fn figures(&mut self) -> Result<Figures, LabError> {
            Ok(Figures {
                orig: self.slots.len() as u64 * 4096,
                ..Figures::default()
            })
        }
        fn compact(&mut self) -> Result<(), LabError> {
            Ok(())
        }
    }

    fn tree() -> FileTree {
        let files = (0..40)
            .map(|i| FileEntry::new(format!("d/f{i}"), vec![i as u8; 4096 * (1 + i % 3)]))
            .collect();
        FileTree::new(files)
    }

    #[test]
    fn every_variant_keeps_the_stored_count_near_the_slots_and_reads_right() {
        for (_, variant) in Variant::ALL {
            let w = Churn {
                variant,
                ops: Some(4000),
                verify_every: 3,
                ..Churn::default()
            };
            let t = tree();
            let mut m = Model::default();
            let r = w.run(&t, &mut m, |_| {}).unwrap();
            let slots = t.total_pages() as u64;
            assert!(m.loads > 4000 / 3 / 2, "{variant:?}: {} loads", m.loads);
            // Discards are a fifth of the calls, about.
            let calls = m.stores + m.discards - slots;
            assert!(
                m.discards * 10 > calls && m.discards * 3 < calls,
                "{variant:?}: {} of {calls}",
                m.discards
            );
            // Refills keep most slots stored at every reading.
            for s in r.run.steps.iter().filter(|s| s.label.starts_with("op")) {
                assert!(s.figures.orig / 4096 * 2 > slots, "{variant:?}: {s:?}");
            }
            let labels: Vec<&str> = r.run.steps.iter().map(|s| s.label.as_str()).collect();
            assert_eq!(labels[0], "fill");
            assert_eq!(labels.last(), Some(&"op 4000"));
            assert_eq!(
                labels.contains(&"-half"),
                variant == Variant::Phase,
                "{labels:?}"
            );
            assert!(r.calls >= 4000);
        }
    }

    #[test]
    fn the_phase_burst_discards_about_half() {
        let w = Churn {
            variant: Variant::Phase,
            ops: Some(2000),
            ..Churn::default()
        };
        let t = tree();
        let mut m = Model::default();
        let r = w.run(&t, &mut m, |_| {}).unwrap();
        let at = |l: &str| {
            r.run
                .steps
                .iter()
                .find(|s| s.label == l)
                .unwrap()
                .figures
                .orig
                / 4096
        };
        let (before, after) = (at("+half"), at("-half"));
        assert!(
            after * 4 < before * 3 && after * 4 > before,
            "{after} of {before}"
        );
    }

    #[test]
    fn the_phase_is_run_with_a_single_call_and_refused_without_any() {
        let one = Churn {
            variant: Variant::Phase,
            ops: Some(1),
            ..Churn::default()
        };
        let r = one.run(&tree(), &mut Model::default(), |_| {}).unwrap();
        let labels: Vec<&str> = r.run.steps.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["fill", "-half", "+half", "op 1"]);
        let none = Churn {
            ops: Some(0),
            ..one
        };
        assert!(matches!(
            none.run(&tree(), &mut Model::default(), |_| {}),
            Err(LabError::Usage(_))
        ));
    }

    #[test]
    fn a_wrong_byte_is_found() {
        let w = Churn {
            ops: Some(500),
            verify_every: 1,
            ..Churn::default()
        };
        let mut m = Model {
            corrupt: true,
            ..Model::default()
        };
        assert!(matches!(
            w.run(&tree(), &mut m, |_| {}),
            Err(LabError::Mismatch { .. })
        ));
    }

    #[test]
    fn the_same_seed_makes_the_same_calls() {
        let w = Churn {
            variant: Variant::HotCold,
            ops: Some(1000),
            zero_share: 0.2,
            incompressible_share: 0.05,
            ..Churn::default()
        };
        let run = || {
            let mut m = Model::default();
            w.run(&tree(), &mut m, |_| {}).unwrap();
            let mut v: Vec<(u64, Vec<u8>)> =
                m.slots.into_iter().map(|(k, p)| (k, p.to_vec())).collect();
            v.sort();
            (m.stores, m.discards, v)
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn bad_parameters_are_refused() {
        for w in [
            Churn {
                discard_share: 1.0,
                ..Churn::default()
            },
            Churn {
                zero_share: 0.6,
                incompressible_share: 0.5,
                ..Churn::default()
            },
            Churn {
                readings: 0,
                ..Churn::default()
            },
            Churn {
                slots: Some(0),
                ..Churn::default()
            },
            Churn {
                discard_share: f64::NAN,
                ..Churn::default()
            },
        ] {
            let mut m = Model::default();
            assert!(matches!(
                w.run(&tree(), &mut m, |_| {}),
                Err(LabError::Usage(_))
            ));
        }
    }
}
