//! zsmem-lab: the peers zsmem is measured against and the workloads that
//! drive them all.
//!
//! | module | concern |
//! |---|---|
//! | [`blockdev`] | block devices served by any contestant (FUSE file, loop device), ext4 on them, their cleanup |
//! | [`allin`] | all-in memory: the terms every contestant counts, the kernel's estimates and their formulas |
//! | [`contestants`] | the contestants' interfaces and every contestant: zsmem, the kernel's zram, the malloc baselines (in-process and forked), the peers |
//! | [`workloads`] | what drives the contestants: untar/rm and its rounds, size traces, a process's memory |
//! | [`report`] | the self-contained HTML report: plots, tables, the page around them |
//! | [`text`] | user data in messages: control characters escaped, long values cut |
//! | [`corpus`] | page sources: a directory, a .tar/.tar.gz/.tar.xz, or the embedded deterministic corpus |

pub mod allin;
pub mod blockdev;
pub mod contestants;
pub mod corpus;
pub mod report;
pub mod text;
pub mod workloads;
