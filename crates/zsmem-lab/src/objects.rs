//! Object-level contestants: allocators that keep objects of n bytes (what
//! zsmalloc, zbud, z3fold and malloc are), driven by size traces.
//!
//! The page-level contestants (`contestant.rs`) put zram's page handling in
//! front of an allocator; these are the allocators alone.

use std::alloc::{GlobalAlloc, Layout, System};

use mimalloc::MiMalloc;
use tikv_jemallocator::Jemalloc;
use zsmem::{Handle, Pool, PoolConfig};

use crate::baseline::MemoryMethod;
use crate::contestant::LabError;

/// Memory an object allocator holds, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ObjectMemory {
    /// Memory held from the OS for objects (for zsmem: pool pages).
    pub held: u64,
    /// The allocator's metadata where visible (part of the overhead).
    pub meta: u64,
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
/// [`crate::baseline::ZramFront`]) take contestants chosen by name.
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
            "zsmem pool: {} pages, chain {}, delta {}{}, compaction {:?}",
            c.page_size,
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
        let h = Handle::from_raw(id);
        self.pool.with_object(h, |b| {
            buf.clear();
            buf.extend_from_slice(b);
        })?;
        Ok(())
    }
    fn free(&mut self, id: u64) -> Result<(), LabError> {
        Ok(self.pool.free(Handle::from_raw(id))?)
    }
    fn memory(&mut self) -> Result<ObjectMemory, LabError> {
        let s = self.pool.stats();
        Ok(ObjectMemory {
            held: s.bytes_held() as u64,
            meta: s.metadata_bytes as u64,
        })
    }
}

/// One heap allocation per object from a `GlobalAlloc`, memory measured by
/// the allocator's own statistics as growth since creation. The one place
/// the lab allocates from a heap directly: the page-level heap contestants
/// and `zsmem bench pool` keep their objects here too.
pub struct HeapObjects<A: GlobalAlloc> {
    name: String,
    alloc: A,
    method: MemoryMethod,
    baseline: u64,
    /// Live objects' blocks (null when the id is free).
    objects: Vec<(*mut u8, usize)>,
    spare: Vec<u64>,
}

// SAFETY: every block is owned by this value alone (no other reference to
// it exists), and `A: Send + Sync` lets the allocator be used, and blocks be
// freed, from whichever thread holds it.
unsafe impl<A: GlobalAlloc + Send + Sync> Send for HeapObjects<A> {}

impl<A: GlobalAlloc> HeapObjects<A> {
    /// Objects from `alloc`, measured by `method` from now on.
    pub fn new(name: &str, alloc: A, method: MemoryMethod) -> Result<Self, LabError> {
        let baseline = method
            .read()
            .map_err(|e| LabError::Usage(format!("{name}: {e}")))?;
        Ok(HeapObjects {
            name: name.into(),
            alloc,
            method,
            baseline,
            objects: Vec::new(),
            spare: Vec::new(),
        })
    }

    /// The name given at creation.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How memory is measured.
    pub fn method(&self) -> MemoryMethod {
        self.method
    }

    /// The measured figure at creation.
    pub fn baseline(&self) -> u64 {
        self.baseline
    }

    /// Make room for `n` live objects in the id tables, and write it, so
    /// that the tables' pages are resident now and storing up to `n`
    /// objects grows no table.
    pub fn reserve(&mut self, n: usize) {
        self.objects.reserve(n);
        for e in self.objects.spare_capacity_mut() {
            e.write((std::ptr::null_mut(), 0));
        }
        self.spare.reserve(n);
        for e in self.spare.spare_capacity_mut() {
            e.write(0);
        }
    }

    /// Growth of the measured figure since creation.
    pub fn held(&self) -> Result<u64, LabError> {
        let now = self
            .method
            .read()
            .map_err(|e| LabError::Usage(format!("{}: {e}", self.name)))?;
        Ok(now.saturating_sub(self.baseline))
    }

    fn slot(&self, id: u64) -> Result<(*mut u8, usize), LabError> {
        match self.objects.get(id as usize) {
            Some(&(p, len)) if !p.is_null() => Ok((p, len)),
            _ => Err(LabError::Usage(format!(
                "{}: no live object {id}",
                self.name
            ))),
        }
    }

    /// Copy `data` into a new block of exactly its length; returns its id.
    pub fn keep(&mut self, data: &[u8]) -> Result<u64, LabError> {
        if data.is_empty() {
            return Err(LabError::Zsmem(zsmem::Error::ZeroLength));
        }
        let layout =
            Layout::from_size_align(data.len(), 1).map_err(|e| LabError::Usage(e.to_string()))?;
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { self.alloc.alloc(layout) };
        if p.is_null() {
            return Err(LabError::Zsmem(zsmem::Error::OsOutOfMemory {
                bytes: data.len(),
                reason: format!("{} returned null", self.name),
            }));
        }
        // SAFETY: `p` holds `data.len()` fresh bytes of our own, disjoint
        // from `data`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        Ok(match self.spare.pop() {
            Some(id) => {
                self.objects[id as usize] = (p, data.len());
                id
            }
            None => {
                self.objects.push((p, data.len()));
                (self.objects.len() - 1) as u64
            }
        })
    }

    /// Call `f` with object `id`'s bytes in place.
    pub fn with_object<R>(&self, id: u64, f: impl FnOnce(&[u8]) -> R) -> Result<R, LabError> {
        let (p, len) = self.slot(id)?;
        // SAFETY: `p` is a live block of `len` bytes made by `keep`; nothing
        // writes it while the shared borrow of `self` lasts.
        Ok(f(unsafe { std::slice::from_raw_parts(p, len) }))
    }

    /// Free object `id`.
    pub fn free_object(&mut self, id: u64) -> Result<(), LabError> {
        let (p, len) = self.slot(id)?;
        self.objects[id as usize] = (std::ptr::null_mut(), 0);
        // SAFETY: made by `keep` from the same allocator with this layout,
        // and just unlisted, so it is freed once.
        unsafe {
            self.alloc
                .dealloc(p, Layout::from_size_align(len, 1).expect("valid layout"))
        };
        self.spare.push(id);
        Ok(())
    }
}

/// glibc malloc (Rust's global allocator here).
pub fn system_objects() -> Result<HeapObjects<System>, LabError> {
    HeapObjects::new("system", System, MemoryMethod::for_system())
}

/// jemalloc, not the global allocator, so its statistics are ours alone.
pub fn jemalloc_objects() -> Result<HeapObjects<Jemalloc>, LabError> {
    HeapObjects::new("jemalloc", Jemalloc, MemoryMethod::for_jemalloc())
}

/// mimalloc, not the global allocator either.
pub fn mimalloc_objects() -> Result<HeapObjects<MiMalloc>, LabError> {
    HeapObjects::new("mimalloc", MiMalloc, MemoryMethod::MimallocCommit)
}

impl<A: GlobalAlloc> ObjectContestant for HeapObjects<A> {
    fn name(&self) -> &str {
        &self.name
    }
    fn config(&self) -> String {
        format!(
            "one heap allocation per object; memory: {}",
            self.method.describe()
        )
    }
    fn alloc(&mut self, data: &[u8]) -> Result<u64, LabError> {
        self.keep(data)
    }
    fn read(&mut self, id: u64, buf: &mut Vec<u8>) -> Result<(), LabError> {
        self.with_object(id, |b| {
            buf.clear();
            buf.extend_from_slice(b);
        })
    }
    fn free(&mut self, id: u64) -> Result<(), LabError> {
        self.free_object(id)
    }
    fn memory(&mut self) -> Result<ObjectMemory, LabError> {
        Ok(ObjectMemory {
            held: self.held()?,
            meta: 0,
        })
    }
}

impl<A: GlobalAlloc> Drop for HeapObjects<A> {
    fn drop(&mut self) {
        for id in 0..self.objects.len() as u64 {
            if self.slot(id).is_ok() {
                let _ = self.free_object(id);
            }
        }
    }
}

/// Every object contestant `zsmem replay` knows.
pub const OBJECT_CONTESTANTS: &[&str] = &[
    "zsmem",
    "zsmem-kernel",
    "system",
    "jemalloc",
    "mimalloc",
    "zbud",
    "z3fold",
    "zblock",
    "afmalloc",
    "afmalloc-compact",
];

/// Make an object contestant by name.
pub fn make_object_contestant(name: &str) -> Result<Box<dyn ObjectContestant>, LabError> {
    Ok(match name {
        "zsmem" => Box::new(PoolObjects::new("zsmem", PoolConfig::default())?),
        "zsmem-kernel" => Box::new(PoolObjects::new("zsmem-kernel", PoolConfig::kernel())?),
        "system" => Box::new(system_objects()?),
        "jemalloc" => Box::new(jemalloc_objects()?),
        "mimalloc" => Box::new(mimalloc_objects()?),
        other => match crate::peers::make_peer(other) {
            Some(peer) => peer?,
            None => {
                return Err(LabError::Usage(format!(
                    "unknown contestant `{other}`: use {}",
                    OBJECT_CONTESTANTS.join(", ")
                )));
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The object-level contract, for every object contestant.
    #[test]
    fn every_object_contestant_keeps_bytes_and_refuses_dead_ids() {
        for name in OBJECT_CONTESTANTS {
            let mut c = make_object_contestant(name).unwrap();
            let ids: Vec<(u64, Vec<u8>)> = (1..200usize)
                .map(|i| {
                    let data: Vec<u8> = (0..i * 17 % 4096 + 1).map(|j| (i + j) as u8).collect();
                    (c.alloc(&data).unwrap(), data)
                })
                .collect();
            let mut buf = Vec::new();
            for (id, data) in &ids {
                c.read(*id, &mut buf).unwrap();
                assert_eq!(&buf, data, "{name}");
            }
            // A heap allocator may serve these from memory it already had.
            if name.starts_with("zsmem") {
                assert!(c.memory().unwrap().held > 0, "{name}");
            }
            for (id, _) in &ids {
                c.free(*id).unwrap();
            }
            assert!(c.free(ids[0].0).is_err(), "{name}: double free accepted");
            assert!(
                c.read(ids[0].0, &mut buf).is_err(),
                "{name}: read after free accepted"
            );
            assert!(!c.config().is_empty());
        }
    }
}
