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
/// the allocator's own statistics as growth since creation.
pub struct HeapObjects<A: GlobalAlloc> {
    name: String,
    alloc: A,
    method: MemoryMethod,
    baseline: u64,
    objects: Vec<(*mut u8, usize)>,
    spare: Vec<u64>,
}

impl<A: GlobalAlloc> HeapObjects<A> {
    /// Objects from `alloc`, measured by `method`.
    pub fn new(name: &str, alloc: A, method: MemoryMethod) -> Result<Self, LabError> {
        let baseline = method.read().map_err(LabError::Usage)?;
        Ok(HeapObjects {
            name: name.into(),
            alloc,
            method,
            baseline,
            objects: Vec::new(),
            spare: Vec::new(),
        })
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
}

/// glibc malloc (Rust's global allocator here).
pub fn system_objects() -> Result<HeapObjects<System>, LabError> {
    HeapObjects::new("system", System, MemoryMethod::GlibcMallinfo)
}

/// jemalloc, not the global allocator, so its statistics are ours alone.
pub fn jemalloc_objects() -> Result<HeapObjects<Jemalloc>, LabError> {
    let method = if MemoryMethod::JemallocResident.read().is_ok() {
        MemoryMethod::JemallocResident
    } else {
        MemoryMethod::ProcessRss
    };
    HeapObjects::new("jemalloc", Jemalloc, method)
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
        if data.is_empty() {
            return Err(LabError::Usage("zero-length object".into()));
        }
        let layout =
            Layout::from_size_align(data.len(), 1).map_err(|e| LabError::Usage(e.to_string()))?;
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { self.alloc.alloc(layout) };
        if p.is_null() {
            return Err(LabError::Usage(format!("{}: out of memory", self.name)));
        }
        // SAFETY: `p` holds `data.len()` fresh bytes of our own.
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
    fn read(&mut self, id: u64, buf: &mut Vec<u8>) -> Result<(), LabError> {
        let (p, len) = self.slot(id)?;
        buf.clear();
        // SAFETY: `p` is a live allocation of `len` bytes made by `alloc`.
        buf.extend_from_slice(unsafe { std::slice::from_raw_parts(p, len) });
        Ok(())
    }
    fn free(&mut self, id: u64) -> Result<(), LabError> {
        let (p, len) = self.slot(id)?;
        self.objects[id as usize] = (std::ptr::null_mut(), 0);
        // SAFETY: allocated by `alloc` from the same allocator, same layout.
        unsafe {
            self.alloc
                .dealloc(p, Layout::from_size_align(len, 1).expect("valid layout"))
        };
        self.spare.push(id);
        Ok(())
    }
    fn memory(&mut self) -> Result<ObjectMemory, LabError> {
        let now = self.method.read().map_err(LabError::Usage)?;
        Ok(ObjectMemory {
            held: now.saturating_sub(self.baseline),
            meta: 0,
        })
    }
}

impl<A: GlobalAlloc> Drop for HeapObjects<A> {
    fn drop(&mut self) {
        for id in 0..self.objects.len() as u64 {
            if self.slot(id).is_ok() {
                let _ = self.free(id);
            }
        }
    }
}

/// Every object contestant `zsmem replay` knows.
pub const OBJECT_CONTESTANTS: &[&str] =
    &["zsmem", "zsmem-kernel", "system", "jemalloc", "mimalloc"];

/// Make an object contestant by name.
pub fn make_object_contestant(name: &str) -> Result<Box<dyn ObjectContestant>, LabError> {
    Ok(match name {
        "zsmem" => Box::new(PoolObjects::new("zsmem", PoolConfig::default())?),
        "zsmem-kernel" => Box::new(PoolObjects::new("zsmem-kernel", PoolConfig::kernel())?),
        "system" => Box::new(system_objects()?),
        "jemalloc" => Box::new(jemalloc_objects()?),
        "mimalloc" => Box::new(mimalloc_objects()?),
        other => {
            return Err(LabError::Usage(format!(
                "unknown contestant `{other}`: use {}",
                OBJECT_CONTESTANTS.join(", ")
            )));
        }
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
