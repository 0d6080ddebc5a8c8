//! The contestants' common interface and the zsmem-family contestants.
//!
//! Page workloads feed every contestant the same 4 KiB pages. The kernel's
//! zram compresses them itself; the zsmem-family contestants compress them
//! with the same algorithm (lz4 by default) through zsmem's `PageStore`, so
//! both see identical objects.

use serde::Serialize;
use zsmem::{Codec, PageStore, PageStoreConfig, PoolConfig};

use crate::allin::{self, Term};
use crate::corpus::{PAGE_SIZE, Page};
use crate::kernel_zram::{KernelZram, ZramConfig, ZramError};

/// Errors of the lab.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// From zsmem.
    #[error("zsmem: {0}")]
    Zsmem(#[from] zsmem::Error),
    /// From the kernel's zram.
    #[error("kernel zram: {0}")]
    Zram(#[from] ZramError),
    /// From loading a corpus.
    #[error("corpus: {0}")]
    Corpus(#[from] crate::corpus::CorpusError),
    /// A contestant returned different bytes than were stored.
    #[error("{contestant} returned wrong data for slot {slot}")]
    Mismatch {
        /// Who.
        contestant: String,
        /// Where.
        slot: u64,
    },
    /// A bad argument.
    #[error("{0}")]
    Usage(String),
}

/// Memory figures of a contestant at one point of a workload, in bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Figures {
    /// Pages stored, before compression (zram's `orig_data_size`).
    pub orig: u64,
    /// Compressed bytes stored (`compr_data_size`).
    pub compr: u64,
    /// Pages the allocator holds for objects (`mem_used_total`); the
    /// tables' `used` column. For a malloc baseline: its heap growth.
    pub pool: u64,
    /// Everything held for the data, counted the same way for every
    /// contestant: the sum of `all_in_terms` (see [`crate::allin`]).
    pub all_in: u64,
    /// What `all_in` is made of; the kernel's terms other than its pool
    /// pages are estimates.
    pub all_in_terms: Vec<Term>,
    /// The allocator's own metadata (handle tables, zspage descriptors,
    /// free bitmaps, owner arrays), where visible: part of `all_in`.
    pub meta: u64,
    /// Where `pool - compr` goes, where the contestant can tell.
    pub waste: Option<zsmem::Waste>,
    /// Same-filled pages stored.
    pub same_pages: u64,
    /// Huge (raw) pages stored.
    pub huge_pages: u64,
    /// Pages freed by compaction so far.
    pub pages_compacted: u64,
    /// What compaction cost so far, where the contestant can tell.
    pub compaction: Option<zsmem::CompactionStats>,
}

impl Figures {
    /// `pool - compr`: the reference's overhead.
    pub fn overhead(&self) -> i64 {
        self.pool as i64 - self.compr as i64
    }

    /// Overhead over compressed bytes, the reference's ratio.
    pub fn overhead_ratio(&self) -> f64 {
        ratio(self.overhead(), self.compr)
    }

    /// `pool + meta - compr` over compressed bytes: the allocator's
    /// metadata counted as overhead too.
    pub fn meta_ratio(&self) -> f64 {
        ratio(
            (self.pool + self.meta) as i64 - self.compr as i64,
            self.compr,
        )
    }

    /// `all_in - compr` over compressed bytes: everything held counted.
    pub fn all_in_ratio(&self) -> f64 {
        ratio(self.all_in as i64 - self.compr as i64, self.compr)
    }

    /// Set `all_in_terms` and `all_in`, their sum.
    pub fn with_terms(mut self, terms: Vec<Term>) -> Self {
        self.all_in = allin::total(&terms);
        self.all_in_terms = terms;
        self
    }
}

fn ratio(a: i64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// A contestant that keeps 4 KiB pages in numbered slots.
pub trait PageContestant {
    /// Short name used in tables.
    fn name(&self) -> &str;
    /// The configuration, for the report.
    fn config(&self) -> String;
    /// Store a page in a slot (replacing what was there).
    fn store(&mut self, slot: u64, page: &Page) -> Result<(), LabError>;
    /// Read a slot back.
    fn load(&mut self, slot: u64, buf: &mut Page) -> Result<(), LabError>;
    /// Drop `pages` slots from `slot` on.
    fn discard(&mut self, slot: u64, pages: u64) -> Result<(), LabError>;
    /// Memory figures now.
    fn figures(&mut self) -> Result<Figures, LabError>;
    /// Compact now (what `echo 1 > compact` does).
    fn compact(&mut self) -> Result<(), LabError>;
    /// How long the last store, load or discard took by the contestant's
    /// own clock, for a contestant whose calls cost more than the
    /// operation (one in another process); `None`: time the call.
    fn op_time(&self) -> Option<std::time::Duration> {
        None
    }
}

/// zsmem's `PageStore` as a contestant.
pub struct ZsmemContestant {
    name: String,
    store: PageStore,
}

impl ZsmemContestant {
    /// A store of `slots` pages with `pool` and `codec`, named `name`.
    pub fn new(name: &str, pool: PoolConfig, codec: Codec, slots: usize) -> Result<Self, LabError> {
        let store = PageStore::new(PageStoreConfig {
            slots,
            codec,
            pool,
            ..Default::default()
        })?;
        Ok(Self::from_store(name, store))
    }

    /// An existing store, named `name`.
    pub fn from_store(name: &str, store: PageStore) -> Self {
        ZsmemContestant {
            name: name.to_string(),
            store,
        }
    }

    /// The kernel-faithful configuration: chain 8, delta 16, the in-object
    /// handle counted, compaction only when asked.
    pub fn kernel_faithful(codec: Codec, slots: usize) -> Result<Self, LabError> {
        Self::new("zsmem-kernel", PoolConfig::kernel(), codec, slots)
    }

    /// The kernel-faithful configuration compacted after every step.
    pub fn kernel_compacted(
        codec: Codec,
        slots: usize,
    ) -> Result<CompactEveryStep<Self>, LabError> {
        Ok(CompactEveryStep::new(
            "zsmem-kernel-compact",
            Self::kernel_faithful(codec, slots)?,
        ))
    }

    /// zsmem's best configuration.
    pub fn best(codec: Codec, slots: usize) -> Result<Self, LabError> {
        Self::new("zsmem", PoolConfig::default(), codec, slots)
    }

    /// The store inside.
    pub fn store_ref(&self) -> &PageStore {
        &self.store
    }
}

impl PageContestant for ZsmemContestant {
    fn name(&self) -> &str {
        &self.name
    }

    fn config(&self) -> String {
        let c = self.store.pool().config();
        format!(
            "{} pages, chain {}, delta {}, {}{}, compaction {:?}",
            c.page_size,
            c.chain_size,
            c.class_delta,
            self.store.codec().name(),
            if c.kernel_handle_header {
                ", in-object handle counted"
            } else {
                ""
            },
            c.compaction
        )
    }

    fn store(&mut self, slot: u64, page: &Page) -> Result<(), LabError> {
        Ok(self.store.write(slot as usize, page)?)
    }

    fn load(&mut self, slot: u64, buf: &mut Page) -> Result<(), LabError> {
        Ok(self.store.read(slot as usize, buf)?)
    }

    fn discard(&mut self, slot: u64, pages: u64) -> Result<(), LabError> {
        Ok(self.store.discard(slot as usize, pages as usize)?)
    }

    fn figures(&mut self) -> Result<Figures, LabError> {
        let m = self.store.mm_stat();
        let p = self.store.pool().stats();
        // PageStore::metadata_bytes is the store's tables plus the pool's
        // metadata; the pool's is its own term.
        let tables = self.store.metadata_bytes().saturating_sub(p.metadata_bytes);
        let terms = vec![
            Term {
                name: allin::POOL_PAGES,
                bytes: m.mem_used_total,
            },
            Term {
                name: allin::CACHED_PAGES,
                bytes: (p.cached_pages * p.page_size) as u64,
            },
            Term {
                name: allin::ALLOCATOR_METADATA,
                bytes: p.metadata_bytes as u64,
            },
            Term {
                name: allin::SLOT_TABLE,
                bytes: tables as u64,
            },
        ];
        let f = Figures {
            orig: m.orig_data_size,
            compr: m.compr_data_size,
            pool: m.mem_used_total,
            meta: p.metadata_bytes as u64,
            waste: Some(p.waste),
            same_pages: m.same_pages,
            huge_pages: m.huge_pages,
            pages_compacted: m.pages_compacted,
            compaction: Some(self.store.pool().compaction_stats()),
            ..Figures::default()
        };
        Ok(f.with_terms(terms))
    }

    fn compact(&mut self) -> Result<(), LabError> {
        self.store.compact();
        Ok(())
    }
}

/// The kernel's own zram on this machine.
pub struct KernelContestant {
    dev: KernelZram,
    name: String,
}

impl KernelContestant {
    /// A private zram device for `slots` pages with `algorithm`; an
    /// `Unavailable` error (with its reason) where zram or root is missing.
    pub fn new(algorithm: &str, slots: usize) -> Result<Self, LabError> {
        Self::named("kernel-zram", algorithm, slots)
    }

    /// As [`KernelContestant::new`], named `name`.
    pub fn named(name: &str, algorithm: &str, slots: usize) -> Result<Self, LabError> {
        let dev = KernelZram::create(&ZramConfig {
            algorithm: algorithm.to_string(),
            disksize_bytes: (slots * PAGE_SIZE) as u64,
            mem_limit_bytes: None,
        })?;
        Ok(KernelContestant {
            dev,
            name: name.into(),
        })
    }
}

impl KernelContestant {
    /// The kernel's zram compacted after every step, named
    /// `kernel-zram-compact`.
    pub fn compacted(algorithm: &str, slots: usize) -> Result<CompactEveryStep<Self>, LabError> {
        Ok(CompactEveryStep::new(
            "kernel-zram-compact",
            Self::named("kernel-zram-compact", algorithm, slots)?,
        ))
    }
}

impl PageContestant for KernelContestant {
    fn name(&self) -> &str {
        &self.name
    }

    fn config(&self) -> String {
        format!(
            "/dev/zram{}, {}, zsmalloc of Linux {}",
            self.dev.device_number(),
            self.dev.algorithm(),
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "?".into())
        )
    }

    fn store(&mut self, slot: u64, page: &Page) -> Result<(), LabError> {
        self.dev.write_page(slot, page)?;
        Ok(())
    }

    fn load(&mut self, slot: u64, buf: &mut Page) -> Result<(), LabError> {
        self.dev.read_page(slot, buf)?;
        Ok(())
    }

    fn discard(&mut self, slot: u64, pages: u64) -> Result<(), LabError> {
        self.dev.discard(slot, pages)?;
        Ok(())
    }

    fn figures(&mut self) -> Result<Figures, LabError> {
        let m = self.dev.mm_stat()?;
        let objects = (m.orig_data_size / PAGE_SIZE as u64).saturating_sub(m.same_pages);
        let terms = allin::kernel_terms(m.mem_used_total, self.dev.pages(), objects);
        let f = Figures {
            orig: m.orig_data_size,
            compr: m.compr_data_size,
            pool: m.mem_used_total,
            meta: 0,
            waste: None,
            same_pages: m.same_pages,
            huge_pages: m.huge_pages,
            pages_compacted: m.pages_compacted,
            compaction: None,
            ..Figures::default()
        };
        Ok(f.with_terms(terms))
    }

    fn compact(&mut self) -> Result<(), LabError> {
        self.dev.compact()?;
        Ok(())
    }
}

/// A contestant compacted after every step, as a careful zram user does
/// with `echo 1 > /sys/block/zramN/compact`: it compacts before each
/// [`PageContestant::figures`], and the workload driver takes figures at
/// the end of every step (and only there).
pub struct CompactEveryStep<C> {
    inner: C,
    name: String,
}

impl<C: PageContestant> CompactEveryStep<C> {
    /// `inner`, compacted after every step, named `name`.
    pub fn new(name: &str, inner: C) -> Self {
        CompactEveryStep {
            inner,
            name: name.into(),
        }
    }

    /// The contestant inside.
    pub fn inner(&self) -> &C {
        &self.inner
    }
}

impl<C: PageContestant> PageContestant for CompactEveryStep<C> {
    fn name(&self) -> &str {
        &self.name
    }

    fn config(&self) -> String {
        format!("{}; compacted after every step", self.inner.config())
    }

    fn store(&mut self, slot: u64, page: &Page) -> Result<(), LabError> {
        self.inner.store(slot, page)
    }

    fn load(&mut self, slot: u64, buf: &mut Page) -> Result<(), LabError> {
        self.inner.load(slot, buf)
    }

    fn discard(&mut self, slot: u64, pages: u64) -> Result<(), LabError> {
        self.inner.discard(slot, pages)
    }

    fn figures(&mut self) -> Result<Figures, LabError> {
        self.inner.compact()?;
        self.inner.figures()
    }

    fn compact(&mut self) -> Result<(), LabError> {
        self.inner.compact()
    }

    fn op_time(&self) -> Option<std::time::Duration> {
        self.inner.op_time()
    }
}
