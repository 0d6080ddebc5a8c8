//! The contestants and what they all implement: [`PageContestant`] (pages in numbered
//! slots, zram's interface) and [`ObjectContestant`] (objects of n bytes, an allocator's), the
//! [`Figures`] every page contestant reports, the [`PageConfig`] they share, and the lab's
//! [`LabError`].
//!
//! Page workloads feed every contestant the same pages, of the run's page
//! size (4 KiB by default; 16 or 64 KiB for a large-page system). The
//! kernel's zram compresses them itself; every other contestant compresses
//! each page as a unit with the run's codec ([`PageConfig::codec`]): the
//! zsmem-family contestants through zsmem's `PageStore`, the peers and the
//! malloc baselines through zram's page handling ([`zram_front`]), so all
//! see identical objects.
//!
//! This module depends on none of its children but [`kernel_zram`] (for its error); the
//! children depend on it and on each other downwards only:
//! `zsmem` <- `zram_front` <- `heap`, `peers` <- `forked`, `objects` (the front takes the
//! kernel's huge class size from `zsmem::variant_pool`).
//!
//! | module | concern |
//! |---|---|
//! | [`zsmem`] | zsmem as a contestant: pages through a `PageStore`, objects in a `Pool` |
//! | [`kernel`] | the kernel's zram as a page contestant |
//! | [`kernel_zram`] | a private zram device: hot_add/remove, page I/O, mm_stat |
//! | [`compacted`] | a page contestant compacted after every step |
//! | [`zram_front`] | zram's page handling in front of any object contestant |
//! | [`heap`] | the malloc baselines: heap objects and how their memory is measured |
//! | [`forked`] | the malloc baselines in child processes, measured after the allocator's release |
//! | [`peers`] | zbud, z3fold, zblock, afmalloc and its slab allocator |
//! | [`objects`] | every object contestant by name, and the object-level contract they keep |

pub mod compacted;
pub mod forked;
pub mod heap;
pub mod kernel;
pub mod kernel_zram;
pub mod objects;
pub mod peers;
pub mod zram_front;
pub mod zsmem;

use std::sync::Arc;

use serde::Serialize;

use crate::allin::{self, Term};
use crate::corpus::{PAGE_SIZE, Page};
use kernel_zram::ZramError;

/// What every page contestant of a run shares: the size of its pages and
/// the codec that compresses each page as a unit.
///
/// ```
/// use zsmem_lab::contestants::PageConfig;
/// let c = PageConfig::default();
/// assert_eq!((c.page_size, c.codec), (4096, zsmem::Codec::Lz4));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageConfig {
    /// Bytes per page (a power of two, 4 KiB to 64 KiB).
    pub page_size: usize,
    /// The codec each page is compressed with.
    pub codec: ::zsmem::Codec,
}

impl Default for PageConfig {
    /// 4 KiB pages, lz4.
    fn default() -> Self {
        PageConfig {
            page_size: PAGE_SIZE,
            codec: ::zsmem::Codec::Lz4,
        }
    }
}

impl PageConfig {
    /// `page_size` pages compressed with `codec`; a page size the lab
    /// cannot cut a tree into is an error.
    pub fn new(page_size: usize, codec: ::zsmem::Codec) -> Result<Self, LabError> {
        crate::corpus::check_page_size(page_size)?;
        Ok(PageConfig { page_size, codec })
    }

    /// The error for a page of `len` bytes given to `who`.
    pub(crate) fn wrong_length(&self, who: &str, len: usize) -> LabError {
        LabError::Usage(format!(
            "{who}: a page is {} bytes here, not {len}",
            self.page_size
        ))
    }
}

/// Errors of the lab.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// From zsmem.
    #[error("zsmem: {0}")]
    Zsmem(#[from] ::zsmem::Error),
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
    /// The contestant cannot run here (at this page size, on this
    /// kernel): the reason, the one line printed when it is skipped.
    #[error("{0}")]
    Skipped(String),
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
    pub waste: Option<::zsmem::Waste>,
    /// Same-filled pages stored.
    pub same_pages: u64,
    /// Huge (raw) pages stored.
    pub huge_pages: u64,
    /// Pages freed by compaction so far.
    pub pages_compacted: u64,
    /// What compaction cost so far, where the contestant can tell.
    pub compaction: Option<::zsmem::CompactionStats>,
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

/// A contestant that keeps pages (4 KiB unless made for another size) in
/// numbered slots.
pub trait PageContestant {
    /// Short name used in tables.
    fn name(&self) -> &str;
    /// Bytes per page; `store` and `load` take pages of exactly this size.
    fn page_size(&self) -> usize {
        PAGE_SIZE
    }
    /// The configuration, for the report.
    fn config(&self) -> String;
    /// Store a page in a slot (replacing what was there).
    fn store(&mut self, slot: u64, page: &Page) -> Result<(), LabError>;
    /// Read a slot back.
    fn load(&mut self, slot: u64, buf: &mut Page) -> Result<(), LabError>;
    /// Drop `pages` slots from `slot` on.
    fn discard(&mut self, slot: u64, pages: u64) -> Result<(), LabError>;
    /// Memory figures now (a contestant whose freed memory settles after
    /// a delay waits for it, as the reference's script sleeps before it
    /// reads `mm_stat`).
    fn figures(&mut self) -> Result<Figures, LabError>;
    /// Memory figures for a reading taken while the workload runs (the
    /// swap experiment's, every 100 ms): as they are, without waiting for
    /// anything to settle. By default [`PageContestant::figures`].
    fn sample(&mut self) -> Result<Figures, LabError> {
        self.figures()
    }
    /// Compact now (what `echo 1 > compact` does).
    fn compact(&mut self) -> Result<(), LabError>;
    /// How long the last store, load or discard took by the contestant's
    /// own clock, for a contestant whose calls cost more than the
    /// operation (one in another process); `None`: time the call.
    fn op_time(&self) -> Option<std::time::Duration> {
        None
    }
    /// Pages freed but not yet given back to the OS right now (a return
    /// queue's), without waiting for any delay; `None` where the
    /// contestant keeps no such queue or cannot tell.
    fn waiting_pages(&mut self) -> Option<u64> {
        None
    }
    /// Its store, load and discard callable from several threads at once,
    /// where it has them (zsmem's page store); `None`: one call at a time.
    /// A device serving the contestant calls these without its mutex.
    fn shared(&self) -> Option<Arc<dyn SharedPages>> {
        None
    }
}

/// A contestant's page operations, safe to call from several threads at
/// once (as [`PageContestant`]'s, on a shared reference).
pub trait SharedPages: Send + Sync {
    /// Store a page in a slot (replacing what was there).
    fn store(&self, slot: u64, page: &Page) -> Result<(), LabError>;
    /// Read a slot back.
    fn load(&self, slot: u64, buf: &mut Page) -> Result<(), LabError>;
    /// Drop `pages` slots from `slot` on.
    fn discard(&self, slot: u64, pages: u64) -> Result<(), LabError>;
}

/// Memory an object allocator holds, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ObjectMemory {
    /// Memory held from the OS for objects (for zsmem: pool pages).
    pub held: u64,
    /// The allocator's metadata where visible (part of the overhead).
    pub meta: u64,
    /// Of `held`, freed pages waiting to be given back to the OS (zsmem's
    /// return delay); 0 where an allocator gives them back at once or
    /// does not say.
    pub returning: u64,
}

/// An allocator of objects of 1..=65536 bytes.
pub trait ObjectContestant {
    /// Short name for tables.
    fn name(&self) -> &str;
    /// Configuration and, for heap allocators, how memory is measured.
    fn config(&self) -> String;
    /// Keep a copy of `data`; returns its id.
    fn alloc(&mut self, data: &[u8]) -> Result<u64, LabError>;
    /// Copy object `id` into `buf` (resized to its length).
    fn read(&mut self, id: u64, buf: &mut Vec<u8>) -> Result<(), LabError>;
    /// Free object `id`.
    fn free(&mut self, id: u64) -> Result<(), LabError>;
    /// Memory held now.
    fn memory(&mut self) -> Result<ObjectMemory, LabError>;
    /// Compact if the allocator can (zram's `compact`); pages given back.
    fn compact(&mut self) -> Result<u64, LabError> {
        Ok(0)
    }
    /// Pages given back by compaction so far (on request or automatic).
    fn pages_compacted(&self) -> u64 {
        0
    }
}

/// A boxed contestant is one too, so generic wrappers (zram's page handling,
/// [`crate::contestants::zram_front::ZramFront`]) take contestants chosen by name.
impl<T: ObjectContestant + ?Sized> ObjectContestant for Box<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn config(&self) -> String {
        (**self).config()
    }
    fn alloc(&mut self, data: &[u8]) -> Result<u64, LabError> {
        (**self).alloc(data)
    }
    fn read(&mut self, id: u64, buf: &mut Vec<u8>) -> Result<(), LabError> {
        (**self).read(id, buf)
    }
    fn free(&mut self, id: u64) -> Result<(), LabError> {
        (**self).free(id)
    }
    fn memory(&mut self) -> Result<ObjectMemory, LabError> {
        (**self).memory()
    }
    fn compact(&mut self) -> Result<u64, LabError> {
        (**self).compact()
    }
    fn pages_compacted(&self) -> u64 {
        (**self).pages_compacted()
    }
}
