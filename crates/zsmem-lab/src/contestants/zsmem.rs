//! zsmem as a contestant: pages through zsmem's `PageStore` (zram's semantics), objects in a
//! zsmem `Pool` (for size traces).

use std::sync::Arc;

use zsmem::{
    ChainRule, Codec, Handle, PageStore, PageStoreConfig, Placement, Pool, PoolConfig,
    SizeClassConfig,
};

use super::compacted::CompactEveryStep;
use super::{
    Figures, LabError, ObjectContestant, ObjectMemory, PageConfig, PageContestant, SharedPages,
};
use crate::allin::{self, Term};
use crate::corpus::Page;

/// Time given to the returner thread beyond the return delay before a
/// step's figures are read.
const RETURN_SLACK: std::time::Duration = std::time::Duration::from_millis(5);

/// The zsmem-family contestants at any page size, by name: zsmem's own
/// configuration, and the kernel's zsmalloc three ways (the RFC's table,
/// 000-zsmalloc-size-classes.txt): today's rules, the RFC's first patch,
/// and both patches.
pub const ZSMEM_VARIANTS: &[&str] = &[
    "zsmem",
    "zsmem-classes",
    "zsmem-kernel",
    "zsmem-kernel-d16",
    "zsmem-kernel-rfc",
];

/// The pool of a zsmem-family contestant at `page_size`; `None` for
/// another name.
///
/// - `zsmem`: [`PoolConfig::log`], the page store's default (no classes:
///   objects appended to segments, cleaned by compaction);
/// - `zsmem-classes`: [`PoolConfig::default`] (16-byte classes at every
///   page size, zspages trimmed and compacted automatically);
/// - `zsmem-kernel` (and `zsmem-kernel-compact`): the kernel's current
///   rules for that page size, [`PoolConfig::kernel`] with the class delta
///   `page_size / 256` (16 bytes at 4 KiB, 64 at 16 KiB, 256 at 64 KiB);
/// - `zsmem-kernel-d16`: the RFC's first patch, delta 16;
/// - `zsmem-kernel-rfc`: both patches, delta 16 and the RFC's chain rule
///   ([`ChainRule::SpanAware`]).
///
/// ```
/// use zsmem_lab::contestants::zsmem::variant_pool;
/// let k = variant_pool("zsmem-kernel", 16384).unwrap();
/// assert_eq!((k.page_size, k.class_delta, k.chain_size), (16384, 64, 8));
/// assert_eq!(variant_pool("zsmem-kernel-d16", 16384).unwrap().class_delta, 16);
/// ```
pub fn variant_pool(name: &str, page_size: usize) -> Option<PoolConfig> {
    let kernel = PoolConfig {
        page_size,
        ..PoolConfig::kernel()
    };
    Some(match name {
        "zsmem" => PoolConfig {
            page_size,
            ..PoolConfig::log()
        },
        "zsmem-classes" => PoolConfig {
            page_size,
            ..PoolConfig::default()
        },
        "zsmem-kernel" | "zsmem-kernel-compact" => PoolConfig {
            class_delta: SizeClassConfig::legacy_delta(page_size),
            ..kernel
        },
        "zsmem-kernel-d16" => PoolConfig {
            class_delta: 16,
            ..kernel
        },
        "zsmem-kernel-rfc" => PoolConfig {
            class_delta: 16,
            chain_rule: ChainRule::SpanAware,
            ..kernel
        },
        _ => return None,
    })
}

/// Make a zsmem-family page contestant by name (one of [`ZSMEM_VARIANTS`],
/// or `zsmem-kernel-compact`) for `cfg`'s page size and codec; `None` for
/// another name.
pub fn make_variant(
    name: &str,
    cfg: &PageConfig,
    slots: usize,
) -> Option<Result<Box<dyn PageContestant + Send>, LabError>> {
    let pool = variant_pool(name, cfg.page_size)?;
    let c = ZsmemContestant::new(name, pool, cfg.codec, slots);
    Some(if name == "zsmem-kernel-compact" {
        c.map(|c| Box::new(CompactEveryStep::new(name, c)) as Box<dyn PageContestant + Send>)
    } else {
        c.map(|c| Box::new(c) as Box<dyn PageContestant + Send>)
    })
}

/// zsmem's `PageStore` as a contestant.
pub struct ZsmemContestant {
    name: String,
    /// Shared with a device serving it ([`PageContestant::shared`]).
    store: Arc<PageStore>,
}

impl ZsmemContestant {
    /// A store of `slots` pages with `pool` and `codec`, named `name`;
    /// without access times (the lab never marks slots idle by age, and the
    /// kernel's zram table is counted without them too).
    pub fn new(name: &str, pool: PoolConfig, codec: Codec, slots: usize) -> Result<Self, LabError> {
        let store = PageStore::new(PageStoreConfig {
            slots,
            codec,
            pool,
            track_access_time: false,
            ..Default::default()
        })?;
        Ok(Self::from_store(name, store))
    }

    /// An existing store, named `name`.
    pub fn from_store(name: &str, store: PageStore) -> Self {
        ZsmemContestant {
            name: name.to_string(),
            store: Arc::new(store),
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

    /// zsmem's best configuration (the page store's default pool).
    pub fn best(codec: Codec, slots: usize) -> Result<Self, LabError> {
        Self::new("zsmem", PageStoreConfig::default().pool, codec, slots)
    }

    /// The store inside.
    pub fn store_ref(&self) -> &PageStore {
        &self.store
    }

    /// The figures now, pages waiting to go back to the OS counted in
    /// `pool` (the reading `figures` takes once they have gone).
    fn read_figures(&self) -> Figures {
        let m = self.store.mm_stat();
        let p = self.store.pool().stats();
        let cached = (p.cached_pages * p.page_size) as u64;
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
                bytes: cached,
            },
            Term {
                name: allin::ALLOCATOR_METADATA,
                bytes: p.metadata_bytes as u64,
            },
            Term {
                name: allin::SLOT_TABLE,
                bytes: tables as u64,
            },
            allin::page_tables(m.mem_used_total + cached),
        ];
        let f = Figures {
            orig: m.orig_data_size,
            compr: m.compr_data_size,
            pool: m.mem_used_total + cached,
            meta: p.metadata_bytes as u64,
            waste: Some(p.waste),
            same_pages: m.same_pages,
            huge_pages: m.huge_pages,
            pages_compacted: m.pages_compacted,
            compaction: Some(self.store.pool().compaction_stats()),
            ..Figures::default()
        };
        f.with_terms(terms)
    }
}

impl PageContestant for ZsmemContestant {
    fn name(&self) -> &str {
        &self.name
    }

    fn page_size(&self) -> usize {
        self.store.pool().config().page_size
    }

    fn config(&self) -> String {
        let c = self.store.pool().config();
        if let Placement::Log { lanes } = c.placement {
            return format!(
                "{} KiB pages, log placement ({lanes} lanes, 32-page segments), {}, compaction {}{}",
                c.page_size / 1024,
                self.store.codec().name(),
                c.compaction,
                if self.store.tracks_access_time() {
                    ""
                } else {
                    ", no access times"
                }
            );
        }
        format!(
            "{} KiB pages, chain {}, delta {}, {} chains, {}{}, compaction {}{}",
            c.page_size / 1024,
            c.chain_size,
            c.class_delta,
            c.chain_rule.name(),
            self.store.codec().name(),
            if c.kernel_handle_header {
                ", in-object handle counted"
            } else {
                ""
            },
            c.compaction,
            if self.store.tracks_access_time() {
                ""
            } else {
                ", no access times"
            }
        )
    }

    fn store(&mut self, slot: u64, page: &Page) -> Result<(), LabError> {
        SharedPages::store(&*self.store, slot, page)
    }

    fn load(&mut self, slot: u64, buf: &mut Page) -> Result<(), LabError> {
        SharedPages::load(&*self.store, slot, buf)
    }

    fn discard(&mut self, slot: u64, pages: u64) -> Result<(), LabError> {
        SharedPages::discard(&*self.store, slot, pages)
    }

    fn figures(&mut self) -> Result<Figures, LabError> {
        // Freed pages wait up to the return delay before they go back to
        // the OS: read the figures after it has passed, as the reference's
        // script syncs and sleeps before reading mm_stat. Pages still
        // waiting then are counted in `pool` all the same.
        let bound = self.store.pool().config().page_return.bound();
        if !bound.is_zero() {
            std::thread::sleep(bound + RETURN_SLACK);
            // A loaded machine may run the returner late (it runs at idle
            // priority): give it up to 5 s more before reading (never
            // needed on an idle one).
            let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while self.store.pool().stats().cached_pages > 0 && std::time::Instant::now() < end {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        Ok(self.read_figures())
    }

    fn sample(&mut self) -> Result<Figures, LabError> {
        // A reading while the workload runs: pages waiting in the return
        // queue are counted in `pool` as they are.
        Ok(self.read_figures())
    }

    fn compact(&mut self) -> Result<(), LabError> {
        self.store.compact();
        Ok(())
    }

    fn waiting_pages(&mut self) -> Option<u64> {
        Some(self.store.pool().stats().cached_pages as u64)
    }

    fn shared(&self) -> Option<Arc<dyn SharedPages>> {
        Some(self.store.clone())
    }
}

/// The page store is concurrent: a device serving it needs no mutex.
impl SharedPages for PageStore {
    fn store(&self, slot: u64, page: &Page) -> Result<(), LabError> {
        Ok(self.write(slot as usize, page)?)
    }

    fn load(&self, slot: u64, buf: &mut Page) -> Result<(), LabError> {
        Ok(self.read(slot as usize, buf)?)
    }

    fn discard(&self, slot: u64, pages: u64) -> Result<(), LabError> {
        Ok(PageStore::discard(self, slot as usize, pages as usize)?)
    }
}

/// A zsmem pool as an object contestant.
pub struct PoolObjects {
    name: String,
    pool: Pool,
}

impl PoolObjects {
    /// A pool with `cfg`, named `name`.
    pub fn new(name: &str, cfg: PoolConfig) -> Result<Self, LabError> {
        Ok(PoolObjects {
            name: name.into(),
            pool: Pool::new(cfg)?,
        })
    }

    /// The pool.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }
}

impl ObjectContestant for PoolObjects {
    fn name(&self) -> &str {
        &self.name
    }
    fn config(&self) -> String {
        let c = self.pool.config();
        format!(
            "zsmem pool: {}, {} KiB pages, chain {}, delta {}{}, compaction {}",
            match c.placement {
                zsmem::Placement::Log { lanes } => format!("log placement ({lanes} lanes)"),
                _ => "size classes".to_string(),
            },
            c.page_size / 1024,
            c.chain_size,
            c.class_delta,
            if c.kernel_handle_header {
                ", in-object handle counted"
            } else {
                ""
            },
            c.compaction
        )
    }
    fn alloc(&mut self, data: &[u8]) -> Result<u64, LabError> {
        Ok(self.pool.store(data)?.to_raw())
    }
    fn read(&mut self, id: u64, buf: &mut Vec<u8>) -> Result<(), LabError> {
        // `Pool::read`'s way (lock-free where the pool reads so), into the
        // buffer's spare room as the heaps' `extend_from_slice` copies.
        buf.clear();
        buf.reserve(self.pool.config().page_size);
        let n = self
            .pool
            .read_uninit(Handle::from_raw(id), buf.spare_capacity_mut())?;
        // SAFETY: `read_uninit` wrote the object's `n` bytes at the start
        // of the spare room.
        unsafe { buf.set_len(n) };
        Ok(())
    }
    fn free(&mut self, id: u64) -> Result<(), LabError> {
        Ok(self.pool.free(Handle::from_raw(id))?)
    }
    fn memory(&mut self) -> Result<ObjectMemory, LabError> {
        let s = self.pool.stats();
        Ok(ObjectMemory {
            // Freed pages waiting to be returned are held too.
            held: (s.bytes_held() + s.cached_pages * s.page_size) as u64,
            meta: s.metadata_bytes as u64,
            returning: (s.cached_pages * s.page_size) as u64,
        })
    }
}
