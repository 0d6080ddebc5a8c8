//! `--slots` checked against memory before the churn fills them: each
//! contestant in turn holds every slot's page, compressed, so 50 million
//! slots of the Go tree (about 60 GiB) grew until the OOM killer came (a
//! first-contact review, s29), while an `--input` of that size is refused
//! before it is read. The slots are refused the same way, against the same
//! limit: half the memory available now, the input already loaded.

use zsmem::Codec;
use zsmem_lab::contestants::PageConfig;
use zsmem_lab::corpus::{FileTree, default_input_limit};
use zsmem_lab::workloads::churn::Churn;

use crate::{CliError, CliResult};

/// Bytes a slot costs beyond its page's compressed bytes, counted high:
/// the churn's own record of the slot (12 bytes), the store's slot table
/// and the allocator's metadata and rounding.
const SLOT_BYTES: u64 = 64;

/// Most pages of the input compressed to estimate its mean compressed
/// size (evenly spread over the input).
const SAMPLE_PAGES: usize = 1024;

/// Refuses `slots` of `work` over `tree` when holding them would pass the
/// memory limit ([`default_input_limit`]). Nothing is compressed when
/// even uncompressed pages would fit.
pub(super) fn check(work: &Churn, tree: &FileTree, cfg: &PageConfig, slots: usize) -> CliResult {
    let limit = default_input_limit();
    let raw = cfg.page_size as u64 + SLOT_BYTES;
    if (slots as u64).saturating_mul(raw) <= limit {
        return Ok(());
    }
    refuse_over(slots, slot_bytes(work, tree, cfg), limit)
}

/// `Ok` when `slots` of `per_slot` bytes each fit in `limit`, else the
/// error naming `--slots`.
fn refuse_over(slots: usize, per_slot: u64, limit: u64) -> CliResult {
    let need = (slots as u64).saturating_mul(per_slot);
    if need <= limit {
        return Ok(());
    }
    Err(CliError::Usage(format!(
        "--slots {slots}: holding them takes about {} MiB ({per_slot} bytes a slot: the \
         input's pages compressed, on average, and the slot's bookkeeping), more than the \
         limit of {} MiB (half the memory available, as for --input); use at most {} slots",
        need >> 20,
        limit >> 20,
        limit / per_slot.max(1)
    )))
}

/// The bytes a slot of `work` holds, estimated: a page of the input
/// compressed (its mean over a sample), a random page raw for the
/// incompressible share, nothing for the zero-filled share (same-filled
/// pages are kept as their value), plus [`SLOT_BYTES`].
fn slot_bytes(work: &Churn, tree: &FileTree, cfg: &PageConfig) -> u64 {
    let mean = mean_compressed(tree, cfg.codec, cfg.page_size);
    let input_share = (1.0 - work.zero_share - work.incompressible_share).max(0.0);
    let stored = input_share * mean + work.incompressible_share * cfg.page_size as f64;
    stored.ceil() as u64 + SLOT_BYTES
}

/// The mean compressed size of up to [`SAMPLE_PAGES`] pages spread over
/// `tree` (a page that does not compress counts whole); a page's size for
/// a tree without pages.
fn mean_compressed(tree: &FileTree, codec: Codec, page_size: usize) -> f64 {
    let step = (tree.total_pages() / SAMPLE_PAGES).max(1);
    let mut dst = vec![0u8; page_size];
    let (mut pages, mut bytes) = (0u64, 0u64);
    for (_, _, page) in tree.pages().step_by(step).take(SAMPLE_PAGES) {
        bytes += codec.compress(page, &mut dst).unwrap_or(page_size) as u64;
        pages += 1;
    }
    if pages == 0 {
        page_size as f64
    } else {
        bytes as f64 / pages as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zsmem_lab::corpus::FileEntry;

    /// A tree of `pages` 4 KiB pages of text.
    fn text_tree(pages: usize) -> FileTree {
        let line = b"the quick brown fox jumps over the lazy dog, again and again\n";
        let data: Vec<u8> = line.iter().copied().cycle().take(pages * 4096).collect();
        FileTree {
            files: vec![FileEntry::new("a.txt", data)],
        }
    }

    #[test]
    fn slots_over_the_limit_are_refused_naming_slots() {
        assert!(refuse_over(1000, 1000, 1_000_000).is_ok());
        let e = refuse_over(50_000_000, 1300, 24 << 30)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--slots 50000000: "), "{e}");
        assert!(e.contains("about 61988 MiB"), "{e}");
        assert!(e.contains("use at most 19822925 slots"), "{e}");
        // No overflow, no division by zero.
        assert!(refuse_over(usize::MAX, u64::MAX, u64::MAX - 1).is_err());
        assert!(refuse_over(1, 0, 0).is_ok());
    }

    #[test]
    fn a_slot_costs_its_page_compressed_and_its_bookkeeping() {
        let tree = text_tree(16);
        let cfg = PageConfig::default();
        let work = Churn::default();
        let text = slot_bytes(&work, &tree, &cfg);
        // Repeated text compresses well: far under a page, over the
        // bookkeeping.
        assert!(text > SLOT_BYTES && text < 1024, "{text}");
        // Incompressible pages count whole.
        let random = Churn {
            incompressible_share: 0.5,
            ..Churn::default()
        };
        let half = slot_bytes(&random, &tree, &cfg);
        assert!(half > 2048 && half < 2048 + text, "{half}");
        // Few slots pass without compressing anything; 2^32 do not.
        assert!(check(&work, &tree, &cfg, 8192).is_ok());
        let e = check(&work, &tree, &cfg, u32::MAX as usize)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--slots 4294967295"), "{e}");
    }
}
