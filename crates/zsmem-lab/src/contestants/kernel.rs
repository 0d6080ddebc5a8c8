//! The kernel's own zram as a page contestant, on a private device ([`super::kernel_zram`]).

use super::compacted::CompactEveryStep;
use super::kernel_zram::{KernelZram, ZramConfig};
use super::{Figures, LabError, PageContestant};
use crate::allin;
use crate::corpus::{PAGE_SIZE, Page};

/// The kernel's own zram on this machine.
pub struct KernelContestant {
    dev: KernelZram,
    name: String,
}

impl KernelContestant {
    /// A private zram device for `slots` pages with `algorithm`; an
    /// `Unavailable` error (with its reason) where zram or root is missing.
    pub fn new(algorithm: &str, slots: usize) -> Result<Self, LabError> {
        Self::named("kernel-zram", algorithm, slots)
    }

    /// As [`KernelContestant::new`], named `name`.
    pub fn named(name: &str, algorithm: &str, slots: usize) -> Result<Self, LabError> {
        let dev = KernelZram::create(&ZramConfig {
            algorithm: algorithm.to_string(),
            disksize_bytes: (slots * PAGE_SIZE) as u64,
            mem_limit_bytes: None,
        })?;
        Ok(KernelContestant {
            dev,
            name: name.into(),
        })
    }
}

impl KernelContestant {
    /// The device (for a filesystem on it: `device().device_path()`).
    pub fn device(&self) -> &KernelZram {
        &self.dev
    }

    /// The kernel's zram compacted after every step, named
    /// `kernel-zram-compact`.
    pub fn compacted(algorithm: &str, slots: usize) -> Result<CompactEveryStep<Self>, LabError> {
        Ok(CompactEveryStep::new(
            "kernel-zram-compact",
            Self::named("kernel-zram-compact", algorithm, slots)?,
        ))
    }

    /// Why the kernel's zram cannot store pages of `page_size` bytes here,
    /// or `None` if it can: a zram device's pages are the running kernel's
    /// (`sysconf(_SC_PAGESIZE)`), and the lab's driver speaks 4 KiB pages.
    pub fn page_size_mismatch(page_size: usize) -> Option<String> {
        // SAFETY: sysconf only reads a system constant.
        let os = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(0);
        if os != page_size {
            Some(format!(
                "the running kernel's pages are {os} bytes, not {page_size}: its zram stores {os}-byte pages"
            ))
        } else if page_size != PAGE_SIZE {
            Some(format!(
                "the lab's zram driver reads and writes {PAGE_SIZE}-byte pages only, not {page_size}"
            ))
        } else {
            None
        }
    }

    /// `kernel-zram` (or with `compacted`, `kernel-zram-compact`) for
    /// pages of `page_size` bytes: [`LabError::Skipped`] with the reason
    /// where the running kernel's page size differs.
    pub fn at_page_size(
        algorithm: &str,
        page_size: usize,
        compacted: bool,
        slots: usize,
    ) -> Result<Box<dyn PageContestant + Send>, LabError> {
        if let Some(why) = Self::page_size_mismatch(page_size) {
            return Err(LabError::Skipped(why));
        }
        Ok(if compacted {
            Box::new(Self::compacted(algorithm, slots)?)
        } else {
            Box::new(Self::new(algorithm, slots)?)
        })
    }
}

impl PageContestant for KernelContestant {
    fn name(&self) -> &str {
        &self.name
    }

    fn config(&self) -> String {
        format!(
            "/dev/zram{}, {}, zsmalloc of Linux {}",
            self.dev.device_number(),
            self.dev.algorithm(),
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "?".into())
        )
    }

    fn store(&mut self, slot: u64, page: &Page) -> Result<(), LabError> {
        self.dev.write_page(slot, page)?;
        Ok(())
    }

    fn load(&mut self, slot: u64, buf: &mut Page) -> Result<(), LabError> {
        self.dev.read_page(slot, buf)?;
        Ok(())
    }

    fn discard(&mut self, slot: u64, pages: u64) -> Result<(), LabError> {
        self.dev.discard(slot, pages)?;
        Ok(())
    }

    fn figures(&mut self) -> Result<Figures, LabError> {
        let m = self.dev.mm_stat()?;
        let objects = (m.orig_data_size / PAGE_SIZE as u64).saturating_sub(m.same_pages);
        let terms = allin::kernel_terms(m.mem_used_total, self.dev.pages(), objects);
        let f = Figures {
            orig: m.orig_data_size,
            compr: m.compr_data_size,
            pool: m.mem_used_total,
            meta: 0,
            waste: None,
            same_pages: m.same_pages,
            huge_pages: m.huge_pages,
            pages_compacted: m.pages_compacted,
            compaction: None,
            ..Figures::default()
        };
        Ok(f.with_terms(terms))
    }

    fn compact(&mut self) -> Result<(), LabError> {
        self.dev.compact()?;
        Ok(())
    }
}
