//! Every object contestant by name (what `zsmem replay` knows), and the object-level contract
//! they all keep.
//!
//! Object contestants are allocators that keep objects of n bytes (what
//! zsmalloc, zbud, z3fold and malloc are), driven by size traces; the page-level contestants
//! put zram's page handling in front of one ([`super::zram_front`]).

use zsmem::PoolConfig;

use super::heap::{jemalloc_objects, mimalloc_objects, system_objects};
use super::zsmem::PoolObjects;
use super::{LabError, ObjectContestant};

/// Every object contestant `zsmem replay` knows.
pub const OBJECT_CONTESTANTS: &[&str] = &[
    "zsmem",
    "zsmem-classes",
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
        "zsmem" => Box::new(PoolObjects::new("zsmem", PoolConfig::log())?),
        "zsmem-classes" => Box::new(PoolObjects::new("zsmem-classes", PoolConfig::default())?),
        "zsmem-kernel" => Box::new(PoolObjects::new("zsmem-kernel", PoolConfig::kernel())?),
        "system" => Box::new(system_objects()?),
        "jemalloc" => Box::new(jemalloc_objects()?),
        "mimalloc" => Box::new(mimalloc_objects()?),
        other => match super::peers::make_peer(other) {
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
