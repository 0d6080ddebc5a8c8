//! The workloads that drive the contestants: untar/rm over a file tree, size traces, and a
//! running process's memory as pages.
//!
//! | module | concern |
//! |---|---|
//! | [`untar_rm`] | untar/rm and its rounds, with latency histograms |
//! | [`churn`] | swap-like churn: fill, then random overwrites and discards, with CPU per call |
//! | [`ext4`] | untar/rm as the reference ran it: files written into ext4 on each contestant's block device |
//! | [`trace`] | size traces: `alloc ID SIZE` / `free ID`, recorded from a workload, replayed on a pool |
//! | [`swap`] | reference 001's experiment: a program in a memory-limited cgroup, its swap on each contestant |
//! | [`procmem`] | a running process's anonymous memory as pages (what zswap stores) |

pub mod churn;
pub mod ext4;
pub mod procmem;
pub mod swap;
pub mod trace;
pub mod untar_rm;
