//! The contestants of `zsmem compare`: their names (the default set and
//! every one known) and making one by name, for the page workloads, `--fs`
//! and the swap workload alike.

use zsmem::Codec;
use zsmem_lab::contestants::forked::{Allocator, ForkedHeap};
use zsmem_lab::contestants::kernel::KernelContestant;
use zsmem_lab::contestants::zsmem::make_variant;
use zsmem_lab::contestants::{LabError, PageConfig, PageContestant};

/// The contestants `compare` runs by default (the peers are left out to
/// keep a default run short; name them with `--contestants`).
pub const DEFAULT_CONTESTANTS: &[&str] = &[
    "zsmem",
    "zsmem-classes",
    "zsmem-kernel",
    "kernel-zram",
    "system",
    "jemalloc",
    "mimalloc",
];

/// Every contestant `compare` knows, in the order it runs them.
pub const CONTESTANTS: &[&str] = &[
    "zsmem",
    "zsmem-classes",
    "zsmem-kernel",
    "zsmem-kernel-d16",
    "zsmem-kernel-rfc",
    "zsmem-kernel-compact",
    "kernel-zram",
    "kernel-zram-compact",
    "system",
    "jemalloc",
    "mimalloc",
    "zbud",
    "z3fold",
    "zblock",
    "afmalloc",
    "afmalloc-compact",
];

pub(crate) fn make(
    name: &str,
    cfg: &PageConfig,
    slots: usize,
) -> Result<Box<dyn PageContestant + Send>, LabError> {
    if let Some(c) = make_variant(name, cfg, slots) {
        return c;
    }
    let (codec, page) = (cfg.codec, cfg.page_size);
    Ok(match name {
        "system" => Box::new(ForkedHeap::with_config(Allocator::System, cfg, slots)?),
        "jemalloc" => Box::new(ForkedHeap::with_config(Allocator::Jemalloc, cfg, slots)?),
        "mimalloc" => Box::new(ForkedHeap::with_config(Allocator::Mimalloc, cfg, slots)?),
        "kernel-zram" => {
            KernelContestant::at_page_size(kernel_algorithm(codec), page, false, slots)?
        }
        "kernel-zram-compact" => {
            KernelContestant::at_page_size(kernel_algorithm(codec), page, true, slots)?
        }
        other => match zsmem_lab::contestants::peers::make_peer_pages_with(other, cfg, slots) {
            Some(peer) => peer?,
            None => {
                return Err(LabError::Usage(format!(
                    "unknown contestant `{other}`: use {}",
                    CONTESTANTS.join(", ")
                )));
            }
        },
    })
}

/// The kernel's name of `codec`'s algorithm.
pub(super) fn kernel_algorithm(codec: Codec) -> &'static str {
    codec.kernel_name()
}
