//! A page contestant compacted after every step, as a careful zram user does.

use super::{Figures, LabError, PageContestant};
use crate::corpus::Page;

/// A contestant compacted after every step, as a careful zram user does
/// with `echo 1 > /sys/block/zramN/compact`: it compacts before each
/// [`PageContestant::figures`], and the workload driver takes figures at
/// the end of every step (and only there).
pub struct CompactEveryStep<C> {
    inner: C,
    name: String,
}

impl<C: PageContestant> CompactEveryStep<C> {
    /// `inner`, compacted after every step, named `name`.
    pub fn new(name: &str, inner: C) -> Self {
        CompactEveryStep {
            inner,
            name: name.into(),
        }
    }

    /// The contestant inside.
    pub fn inner(&self) -> &C {
        &self.inner
    }
}

impl<C: PageContestant> PageContestant for CompactEveryStep<C> {
    fn name(&self) -> &str {
        &self.name
    }

    fn page_size(&self) -> usize {
        self.inner.page_size()
    }

    fn config(&self) -> String {
        format!("{}; compacted after every step", self.inner.config())
    }

    fn store(&mut self, slot: u64, page: &Page) -> Result<(), LabError> {
        self.inner.store(slot, page)
    }

    fn load(&mut self, slot: u64, buf: &mut Page) -> Result<(), LabError> {
        self.inner.load(slot, buf)
    }

    fn discard(&mut self, slot: u64, pages: u64) -> Result<(), LabError> {
        self.inner.discard(slot, pages)
    }

    fn figures(&mut self) -> Result<Figures, LabError> {
        self.inner.compact()?;
        self.inner.figures()
    }

    fn compact(&mut self) -> Result<(), LabError> {
        self.inner.compact()
    }

    fn op_time(&self) -> Option<std::time::Duration> {
        self.inner.op_time()
    }

    fn waiting_pages(&mut self) -> Option<u64> {
        self.inner.waiting_pages()
    }

    fn shared(&self) -> Option<std::sync::Arc<dyn super::SharedPages>> {
        self.inner.shared()
    }
}
