//! The contestants of `zsmem compare`: their names (the default set and
//! every one known) and making one by name, for the page workloads, `--fs`
//! and the swap workload alike.

use zsmem::Codec;
use zsmem_lab::contestants::forked::{Allocator, ForkedHeap};
use zsmem_lab::contestants::kernel::KernelContestant;
use zsmem_lab::contestants::zsmem::make_variant;
use zsmem_lab::contestants::{LabError, PageConfig, PageContestant};

/// The contestants `compare` runs by default (the peers are left out to
/// keep a default run short; name them with `--contestants`). The kernel's
/// zram both as it is (never compacted unless asked) and compacted after
/// every step: zsmem compacts as it frees, so the verdict has a
/// like-for-like reference (a first-contact review found the default
/// verdict 29.8% ahead of the uncompacted kernel, 14.9% of the compacted).
/// The same for its simulation in userspace, the reference without root:
/// zsmem-kernel's last all-in overhead was 39.1% uncompacted, 14.2%
/// compacted (review s29).
pub const DEFAULT_CONTESTANTS: &[&str] = &[
    "zsmem",
    "zsmem-classes",
    "zsmem-kernel",
    "zsmem-kernel-compact",
    "kernel-zram",
    "kernel-zram-compact",
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

/// The malloc baselines' contestants are made before any other runs: each
/// forks its child then, and a child inherits the parent's heap as it is.
/// Made in turn, a baseline that ran after zsmem's contestants reused the
/// free space they left in the inherited heap without any growth of its
/// own (glibc's pool 41% lower at one step than when it ran first: a
/// review, 2026-11-29). Made first, every baseline starts from the same
/// heap, whatever the order of `--contestants`.
pub(crate) struct Premade(Vec<(String, Made)>);

/// A contestant made, or why not.
type Made = Result<Box<dyn PageContestant + Send>, LabError>;

impl Premade {
    /// The baselines among `names`, made now.
    pub(crate) fn baselines(names: &[String], cfg: &PageConfig, slots: usize) -> Premade {
        Premade(
            names
                .iter()
                .filter(|n| zsmem_lab::contestants::heap::is_malloc_baseline(n))
                .map(|n| (n.clone(), make(n, cfg, slots)))
                .collect(),
        )
    }

    /// Contestant `name`: the one made first if it was, else made now.
    pub(crate) fn take(&mut self, name: &str, cfg: &PageConfig, slots: usize) -> Made {
        match self.0.iter().position(|(n, _)| n == name) {
            Some(i) => self.0.swap_remove(i).1,
            None => make(name, cfg, slots),
        }
    }
}

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

/// The error of contestant `name`, as a usage error naming it once: a
/// zsmem error came out as "zsmem: zsmem: the operating system refused
/// ...", the contestant's name before the lab's own "zsmem:".
pub(crate) fn contestant_error(name: &str, e: LabError) -> crate::CliError {
    let text = match e {
        LabError::Zsmem(inner) => inner.to_string(),
        other => other.to_string(),
    };
    let named = text
        .strip_prefix(name)
        .is_some_and(|rest| rest.starts_with([' ', ':']));
    if named {
        crate::CliError::Usage(text)
    } else {
        crate::CliError::Usage(format!("{name}: {text}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's allocator simulated in userspace, the verdict's
    /// reference without root, runs compacted too, like-for-like with
    /// zsmem (which compacts as it frees), beside the uncompacted one.
    #[test]
    fn the_default_set_has_the_simulated_kernel_compacted() {
        let at = |name: &str| DEFAULT_CONTESTANTS.iter().position(|c| *c == name);
        let plain = at("zsmem-kernel").expect("zsmem-kernel");
        assert_eq!(at("zsmem-kernel-compact"), Some(plain + 1));
        for c in DEFAULT_CONTESTANTS {
            assert!(CONTESTANTS.contains(c), "{c}");
        }
    }

    #[test]
    fn a_contestant_error_names_the_contestant_once() {
        let refused = zsmem::Error::OsOutOfMemory {
            bytes: 268_435_456,
            reason: "test".into(),
        };
        let e = contestant_error("zsmem", LabError::Zsmem(refused));
        assert_eq!(
            e.to_string(),
            "zsmem: the operating system refused 268435456 bytes of memory (test)"
        );
        let e = contestant_error(
            "zbud",
            LabError::Mismatch {
                contestant: "zbud".into(),
                slot: 3,
            },
        );
        assert_eq!(e.to_string(), "zbud returned wrong data for slot 3");
        let e = contestant_error("system", LabError::Usage("no child".into()));
        assert_eq!(e.to_string(), "system: no child");
        // Another contestant's name is no prefix of this one's.
        let e = contestant_error("zsmem", LabError::Usage("zsmem-classes: x".into()));
        assert_eq!(e.to_string(), "zsmem: zsmem-classes: x");
    }
}
