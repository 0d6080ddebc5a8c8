//! zsmem-lab: the peers zsmem is measured against and the workloads that
//! drive them all.
//!
//! | module | concern |
//! |---|---|
//! | [`kernel_zram`] | the kernel's own zram as a live peer (private device, O_DIRECT pages, BLKDISCARD, mm_stat) |
//! | [`allin`] | all-in memory: the terms every contestant counts, the kernel's estimates and their formulas |
//! | [`contestant`] | the interface every contestant implements; zsmem's and the kernel's |
//! | [`workload`] | untar/rm and its rounds, with latency histograms |
//! | [`forked`] | the malloc baselines in child processes, measured by RSS growth after the allocator's release |
//! | [`objects`] | object-level contestants (zsmem pools, heap allocators) for size traces |
//! | [`peers`] | zbud, z3fold, zblock, afmalloc and its slab allocator, on zsmem's page source |
//! | [`procmem`] | a running process's anonymous memory as pages (what zswap stores) |
//! | [`trace`] | size traces: `alloc ID SIZE` / `free ID`, recorded from a workload, replayed on a pool |
//! | [`text`] | user data in messages: control characters escaped, long values cut |
//! | [`corpus`] | page sources: a directory, a .tar/.tar.gz/.tar.xz, or the embedded deterministic corpus |

pub mod allin;
pub mod baseline;
pub mod contestant;
pub mod corpus;
pub mod forked;
pub mod kernel_zram;
pub mod objects;
pub mod peers;
pub mod procmem;
pub mod report;
pub mod text;
pub mod trace;
pub mod workload;
