//! zram's page handling in front of any object contestant: same-filled pages kept as their
//! word, other pages compressed with the run's codec into one object each, raw when "huge";
//! the slot table.

use super::{Figures, LabError, ObjectContestant, PageConfig, PageContestant};
use crate::allin::{self, Term};
use crate::corpus::Page;
use zsmem::store::same_filled;

/// The compressed size from which a 4 KiB page is stored raw: the kernel's
/// `huge_class_size` for 4 KiB pages and zsmalloc chain size 8 (the largest
/// non-huge class, 3632 bytes, less zsmalloc's 8-byte in-object handle, plus
/// one). A page whose compressed form would be this long or longer is
/// "huge". Other page sizes: [`huge_class_size`].
pub const HUGE_CLASS_SIZE: usize = 3625;

/// The kernel's `huge_class_size` for pages of `page_size` bytes under its
/// current rules (chain 8, class delta `page_size / 256`): what zram on
/// such a kernel stores raw. [`HUGE_CLASS_SIZE`] at 4 KiB.
pub fn huge_class_size(page_size: usize) -> Result<usize, LabError> {
    let pool = super::zsmem::variant_pool("zsmem-kernel", page_size)
        .ok_or_else(|| LabError::Usage("zsmem-kernel is a variant".into()))?;
    Ok(zsmem::SizeClassTable::new(pool.size_classes())?.huge_class_size())
}

/// What a slot holds.
#[derive(Clone, Copy, Debug, Default)]
enum Entry {
    #[default]
    Empty,
    /// A same-filled page: the word, no allocation.
    Same(u64),
    /// `len` bytes of lz4 output (or the raw page if `huge`), object `id`
    /// of the object store.
    Object { id: u64, len: u32, huge: bool },
}

/// zram's page handling in front of any object store `S`: same-filled
/// pages kept as their word, other pages compressed with lz4 and kept as
/// one object each, raw (4096 bytes, "huge") when the compressed size would
/// be [`HUGE_CLASS_SIZE`] or more. The malloc baselines
/// ([`HeapContestant`](super::heap::HeapContestant)) and the peers (`crate::contestants::peers`) are this front on
/// their object stores, so the page handling is the same code for all.
/// Memory figures are the store's: `pool` is `ObjectMemory::held`, `meta`
/// its metadata, `used` the two together; `compact` asks the store.
pub struct ZramFront<S: ObjectContestant> {
    /// The objects, and the memory they cost.
    objects: S,
    /// For glibc: bytes free in its arenas at creation, which this
    /// contestant may reuse without the figure growing.
    pub(super) free_at_start: Option<u64>,
    slots: Vec<Entry>,
    scratch: Box<Page>,
    /// An object read back, before decompression.
    buf: Vec<u8>,
    cfg: PageConfig,
    /// Compressed sizes from this one are stored raw.
    huge_size: usize,
    pages_stored: u64,
    compr_bytes: u64,
    same_pages: u64,
    huge_pages: u64,
}

/// A front's tables before its store exists.
pub(super) struct Parts {
    slots: Vec<Entry>,
    scratch: Box<Page>,
    buf: Vec<u8>,
    cfg: PageConfig,
    huge_size: usize,
    pub(super) free_at_start: Option<u64>,
}

impl Parts {
    pub(super) fn new(slots: usize, cfg: &PageConfig) -> Result<Parts, LabError> {
        let huge_size = huge_class_size(cfg.page_size)?;
        Ok(Parts {
            slots: vec![Entry::Empty; slots],
            scratch: vec![0u8; cfg.page_size].into_boxed_slice(),
            buf: Vec::with_capacity(cfg.page_size),
            cfg: *cfg,
            huge_size,
            free_at_start: None,
        })
    }

    pub(super) fn with_objects<S: ObjectContestant>(self, objects: S) -> ZramFront<S> {
        ZramFront {
            objects,
            free_at_start: self.free_at_start,
            slots: self.slots,
            scratch: self.scratch,
            buf: self.buf,
            cfg: self.cfg,
            huge_size: self.huge_size,
            pages_stored: 0,
            compr_bytes: 0,
            same_pages: 0,
            huge_pages: 0,
        }
    }
}

impl<S: ObjectContestant> ZramFront<S> {
    /// `slots` 4 KiB pages compressed with lz4 and kept in `objects`;
    /// fails on zero slots.
    pub fn new(objects: S, slots: usize) -> Result<Self, LabError> {
        Self::with_config(objects, &PageConfig::default(), slots)
    }

    /// `slots` pages of `cfg`'s size compressed with `cfg`'s codec and kept
    /// in `objects`; fails on zero slots.
    pub fn with_config(objects: S, cfg: &PageConfig, slots: usize) -> Result<Self, LabError> {
        if slots == 0 {
            return Err(LabError::Usage(format!(
                "{}: needs at least one slot",
                objects.name()
            )));
        }
        Ok(Parts::new(slots, cfg)?.with_objects(objects))
    }

    /// The page size and codec.
    pub fn page_config(&self) -> &PageConfig {
        &self.cfg
    }

    /// Compressed sizes from this one are stored raw (the kernel's
    /// `huge_class_size` at the page size).
    pub fn huge_size(&self) -> usize {
        self.huge_size
    }

    fn check_len(&self, len: usize) -> Result<(), LabError> {
        if len == self.cfg.page_size {
            Ok(())
        } else {
            Err(self.cfg.wrong_length(self.objects.name(), len))
        }
    }

    /// The object store.
    pub fn objects(&self) -> &S {
        &self.objects
    }

    /// Number of slots.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Bytes of the per-slot table, the front end's own cost, counted as
    /// zsmem's `PageStore` holds its table: 64-slot chunks, present only
    /// while one of their slots holds a page, plus a pointer per chunk. The
    /// front keeps a dense table, allocated before the run so that a malloc
    /// baseline's heap figure never includes it; counting it as dense would
    /// charge the peers for the lab's choice, not theirs.
    pub fn slot_table_bytes(&self) -> u64 {
        const CHUNK: usize = 64;
        let present = self
            .slots
            .chunks(CHUNK)
            .filter(|c| c.iter().any(|e| !matches!(e, Entry::Empty)))
            .count();
        (present * CHUNK * std::mem::size_of::<Entry>()
            + self.slots.len().div_ceil(CHUNK) * std::mem::size_of::<usize>()) as u64
    }

    fn index(&self, slot: u64) -> Result<usize, LabError> {
        usize::try_from(slot)
            .ok()
            .filter(|&i| i < self.slots.len())
            .ok_or(LabError::Zsmem(zsmem::Error::SlotOutOfRange {
                index: usize::try_from(slot).unwrap_or(usize::MAX),
                slots: self.slots.len(),
            }))
    }

    /// Compress `page` and keep the result as one object.
    fn allocate(&mut self, page: &Page) -> Result<Entry, LabError> {
        let limit = self.huge_size.min(self.cfg.page_size);
        let (bytes, huge): (&[u8], bool) =
            match self.cfg.codec.compress(page, &mut self.scratch[..limit]) {
                Some(n) if n > 0 && n < self.huge_size => (&self.scratch[..n], false),
                _ => (page, true),
            };
        let len = bytes.len() as u32;
        let id = self.objects.alloc(bytes)?;
        Ok(Entry::Object { id, len, huge })
    }

    fn account(&mut self, e: Entry, add: bool) {
        let step = |c: &mut u64, v: u64| {
            if add {
                *c += v;
            } else {
                *c -= v;
            }
        };
        match e {
            Entry::Empty => return,
            Entry::Same(_) => step(&mut self.same_pages, 1),
            Entry::Object { len, huge, .. } => {
                step(&mut self.compr_bytes, u64::from(len));
                if huge {
                    step(&mut self.huge_pages, 1);
                }
            }
        }
        step(&mut self.pages_stored, 1);
    }

    /// Uncount and free what a slot held.
    fn release(&mut self, e: Entry) {
        self.account(e, false);
        if let Entry::Object { id, .. } = e {
            // The slot owned this object alone; freeing it cannot fail.
            let freed = self.objects.free(id);
            debug_assert!(freed.is_ok(), "{freed:?}");
        }
    }
}

impl<S: ObjectContestant> PageContestant for ZramFront<S> {
    fn name(&self) -> &str {
        self.objects.name()
    }

    fn page_size(&self) -> usize {
        self.cfg.page_size
    }

    fn config(&self) -> String {
        let free = match self.free_at_start {
            Some(b) => format!(
                "; {} KiB were free in malloc's arenas at creation (their reuse is not counted)",
                b / 1024
            ),
            None => String::new(),
        };
        format!(
            "{}: zram's {} KiB pages (same-filled as a word, {}, raw from {} B), one object per page; {}{free}",
            self.objects.name(),
            self.cfg.page_size / 1024,
            self.cfg.codec.name(),
            self.huge_size,
            self.objects.config()
        )
    }

    fn store(&mut self, slot: u64, page: &Page) -> Result<(), LabError> {
        let i = self.index(slot)?;
        self.check_len(page.len())?;
        let new = match same_filled(page) {
            Some(word) => Entry::Same(word),
            None => self.allocate(page)?,
        };
        let old = std::mem::replace(&mut self.slots[i], new);
        self.account(new, true);
        self.release(old);
        Ok(())
    }

    fn load(&mut self, slot: u64, buf: &mut Page) -> Result<(), LabError> {
        let i = self.index(slot)?;
        self.check_len(buf.len())?;
        match self.slots[i] {
            Entry::Empty => buf.fill(0),
            Entry::Same(word) => {
                for c in buf.chunks_exact_mut(8) {
                    c.copy_from_slice(&word.to_ne_bytes());
                }
            }
            Entry::Object { id, huge, .. } => {
                self.objects.read(id, &mut self.buf)?;
                if huge {
                    if self.buf.len() != self.cfg.page_size {
                        return Err(LabError::Mismatch {
                            contestant: self.objects.name().to_string(),
                            slot,
                        });
                    }
                    buf.copy_from_slice(&self.buf);
                } else {
                    self.cfg.codec.decompress(&self.buf, buf)?;
                }
            }
        }
        Ok(())
    }

    fn discard(&mut self, slot: u64, pages: u64) -> Result<(), LabError> {
        let start = self.index(slot)?;
        let end = usize::try_from(pages)
            .ok()
            .and_then(|p| start.checked_add(p))
            .filter(|&e| e <= self.slots.len())
            .ok_or(LabError::Zsmem(zsmem::Error::SlotOutOfRange {
                index: usize::try_from(slot.saturating_add(pages).saturating_sub(1))
                    .unwrap_or(usize::MAX),
                slots: self.slots.len(),
            }))?;
        for i in start..end {
            let old = std::mem::take(&mut self.slots[i]);
            self.release(old);
        }
        Ok(())
    }

    fn figures(&mut self) -> Result<Figures, LabError> {
        let m = self.objects.memory()?;
        let terms = vec![
            Term {
                name: allin::POOL_PAGES,
                bytes: m.held,
            },
            Term {
                name: allin::ALLOCATOR_METADATA,
                bytes: m.meta,
            },
            Term {
                name: allin::SLOT_TABLE,
                bytes: self.slot_table_bytes(),
            },
            allin::page_tables(m.held),
        ];
        let f = Figures {
            orig: self.pages_stored * self.cfg.page_size as u64,
            compr: self.compr_bytes,
            pool: m.held,
            meta: m.meta,
            waste: None,
            same_pages: self.same_pages,
            huge_pages: self.huge_pages,
            pages_compacted: self.objects.pages_compacted(),
            compaction: None,
            ..Figures::default()
        };
        Ok(f.with_terms(terms))
    }

    /// Whatever the store can do (a heap cannot move its blocks: nothing).
    fn compact(&mut self) -> Result<(), LabError> {
        self.objects.compact()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_class_size_is_the_kernel_pools() {
        let pool = zsmem::Pool::new(zsmem::PoolConfig::kernel()).unwrap();
        assert_eq!(pool.huge_class_size(), HUGE_CLASS_SIZE);
    }

    #[test]
    fn huge_class_size_follows_the_page_size() {
        assert_eq!(huge_class_size(4096).unwrap(), HUGE_CLASS_SIZE);
        // Larger pages: the largest non-huge class less the handle, plus one.
        for page in [16384, 65536] {
            let h = huge_class_size(page).unwrap();
            assert!(h > page / 2 && h < page, "{page}: {h}");
        }
    }

    #[test]
    fn same_filled_is_per_8_byte_word() {
        let mut p = [0u8; crate::corpus::PAGE_SIZE];
        assert_eq!(same_filled(&p), Some(0));
        for (i, b) in p.iter_mut().enumerate() {
            *b = (i % 8) as u8;
        }
        assert!(same_filled(&p).is_some());
        p[4095] ^= 1;
        assert_eq!(same_filled(&p), None);
    }

    #[test]
    fn entries_are_two_words() {
        assert_eq!(std::mem::size_of::<Entry>(), 16);
    }
}
