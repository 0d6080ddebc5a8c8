//! Size classes: which class serves a request, how many pages a zspage of
//! that class chains, how many objects it holds, which classes merge.
//!
//! The rules are the current kernel's (mm/zsmalloc.c since 6.3), stated as
//! facts and re-derived here:
//!
//! - class `i` has size `32 + i * delta`, clamped to the page size; there are
//!   `ceil((page - 32) / delta) + 1` classes;
//! - a power-of-two class size takes one page per zspage; otherwise the chain
//!   length `k` in `1..=chain` minimising the tail waste `(k * page) % size`
//!   wins, the first minimum winning ([`ChainRule::MinWaste`]);
//! - walking from the largest class down, a class with the same
//!   `(pages_per_zspage, objs_per_zspage)` as the nearest larger physical
//!   class is merged into it;
//! - walking down, the first class that is not `(1 page, 1 object)` is the
//!   largest non-huge class; the kernel's `huge_class_size` is its size minus
//!   `ZS_HANDLE_SIZE - 1`, because the kernel stores an 8-byte handle inside
//!   every non-huge object.

use crate::error::{Error, Result};

/// Smallest object slot, in bytes (`ZS_MIN_ALLOC_SIZE`).
pub const MIN_ALLOC_SIZE: usize = 32;
/// Bytes the kernel keeps in front of every non-huge object for its handle
/// (`ZS_HANDLE_SIZE`).
pub const KERNEL_HANDLE_SIZE: usize = 8;
/// Longest chain a configuration may ask for.
pub const MAX_CHAIN_SIZE: usize = 32;
/// Smallest supported page size.
pub const MIN_PAGE_SIZE: usize = 4096;
/// Largest supported page size.
pub const MAX_PAGE_SIZE: usize = 65536;

/// How the number of pages per zspage is chosen for a class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
#[non_exhaustive]
pub enum ChainRule {
    /// The kernel since 6.3: the chain length with the least tail waste, the
    /// first minimum winning.
    #[default]
    MinWaste,
    /// The rule before 6.3: the first chain length reaching the highest
    /// integer percentage of used bytes. Kept to show why it was replaced.
    UsedPercent,
    /// The 2026 RFC's second patch ("chain-length configuration should
    /// consider other metrics") exactly as its author's simulator
    /// (`simulate_zsmalloc.c`, the AFTER table) computes it; `rfc` on the
    /// command line. Chains grow from one page, one page at a time: while
    /// the best chain so far wastes more than 10% of its bytes, any chain
    /// wasting fewer bytes replaces it; below 10%, only one that cuts the
    /// wasted bytes by more than a quarter does; the search stops once the
    /// best chain wastes at most 1/64 of its bytes (about 1.5%) or a chain
    /// wastes nothing. Power-of-two sizes take one page. Longer chains make
    /// more objects span a page boundary, so they have to earn their place.
    SpanAware,
    /// zsmem's rule for pools that trim pages (`PoolConfig::trim_pages`):
    /// the least tail waste *per page*, the longest chain among equals
    /// (power-of-two sizes included; a page-sized class stays one page). A
    /// trimming zspage costs only the pages its objects reach, so length is
    /// free, and fewer, longer zspages mean fewer descriptors and smaller
    /// tails per byte.
    Trim,
}

impl ChainRule {
    /// The command-line spelling of the rule.
    pub fn name(self) -> &'static str {
        match self {
            ChainRule::MinWaste => "min-waste",
            ChainRule::UsedPercent => "used-percent",
            ChainRule::SpanAware => "span-aware",
            ChainRule::Trim => "trim",
        }
    }

    /// Parse the command-line spelling.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "min-waste" | "kernel" => Ok(ChainRule::MinWaste),
            "used-percent" | "legacy" => Ok(ChainRule::UsedPercent),
            "span-aware" | "rfc" => Ok(ChainRule::SpanAware),
            "trim" => Ok(ChainRule::Trim),
            other => Err(Error::InvalidConfig(format!(
                "unknown chain rule `{other}`: use min-waste (or kernel), used-percent, span-aware (or rfc) or trim"
            ))),
        }
    }
}

/// The parameters that define a size-class table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SizeClassConfig {
    /// Page size in bytes: a power of two from 4 KiB to 64 KiB.
    pub page_size: usize,
    /// Most pages a zspage may chain (`CONFIG_ZSMALLOC_CHAIN_SIZE`), 1..=32.
    pub chain_size: usize,
    /// Distance between neighbouring class sizes, a multiple of 8.
    pub class_delta: usize,
    /// How the chain length of each class is chosen.
    pub chain_rule: ChainRule,
}

impl Default for SizeClassConfig {
    fn default() -> Self {
        SizeClassConfig {
            page_size: 4096,
            chain_size: 8,
            class_delta: 16,
            chain_rule: ChainRule::MinWaste,
        }
    }
}

impl SizeClassConfig {
    /// The class delta the kernel used before the 2026 RFC:
    /// `page_size >> 8`, i.e. at most 256 classes.
    pub fn legacy_delta(page_size: usize) -> usize {
        page_size >> 8
    }

    /// Check every parameter; the error says which one is wrong and why.
    pub fn validate(&self) -> Result<()> {
        let p = self.page_size;
        if !p.is_power_of_two() || !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&p) {
            return Err(Error::InvalidConfig(format!(
                "page size {p} must be a power of two from {MIN_PAGE_SIZE} to {MAX_PAGE_SIZE}"
            )));
        }
        if self.chain_size == 0 || self.chain_size > MAX_CHAIN_SIZE {
            return Err(Error::InvalidConfig(format!(
                "chain size {} must be from 1 to {MAX_CHAIN_SIZE}",
                self.chain_size
            )));
        }
        let d = self.class_delta;
        if d == 0 || !d.is_multiple_of(8) {
            return Err(Error::InvalidConfig(format!(
                "class delta {d} must be a positive multiple of 8"
            )));
        }
        if d > p - MIN_ALLOC_SIZE {
            return Err(Error::InvalidConfig(format!(
                "class delta {d} is larger than the page size minus {MIN_ALLOC_SIZE}"
            )));
        }
        Ok(())
    }
}

/// One size class of a table, logical or physical.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ClassInfo {
    /// Index of this class (the kernel's `class->index` for a physical class).
    pub index: usize,
    /// Object slot size in bytes.
    pub size: usize,
    /// Index of the physical class that serves requests of this class
    /// (itself unless merged).
    pub physical: usize,
    /// Pages chained in one zspage.
    pub pages_per_zspage: usize,
    /// Objects one zspage holds.
    pub objs_per_zspage: usize,
}

impl ClassInfo {
    /// Bytes of a zspage of this class.
    pub fn zspage_bytes(&self, page_size: usize) -> usize {
        self.pages_per_zspage * page_size
    }

    /// Bytes at the end of each zspage that no object can use.
    pub fn tail_waste(&self, page_size: usize) -> usize {
        self.zspage_bytes(page_size) - self.objs_per_zspage * self.size
    }

    /// Whether this is a huge class: one object alone on one page.
    pub fn is_huge(&self) -> bool {
        self.pages_per_zspage == 1 && self.objs_per_zspage == 1
    }

    /// Objects of one zspage that straddle a page boundary.
    pub fn spanning_objects(&self, page_size: usize) -> usize {
        spanning_objects(self.size, self.objs_per_zspage, page_size)
    }
}

/// Objects of `size` bytes, `objs` of them packed from offset 0, that
/// straddle a boundary of `page_size`-byte pages.
pub fn spanning_objects(size: usize, objs: usize, page_size: usize) -> usize {
    (0..objs)
        .filter(|i| {
            let start = i * size;
            start / page_size != (start + size - 1) / page_size
        })
        .count()
}

/// Pages per zspage for one class size under a rule.
pub fn pages_per_zspage(size: usize, cfg: &SizeClassConfig) -> usize {
    let page = cfg.page_size;
    let waste = |k: usize| (k * page) % size;
    match cfg.chain_rule {
        ChainRule::Trim if size >= page => 1,
        // waste(k) / k <= waste(best) / best, as cross products.
        ChainRule::Trim => (2..=cfg.chain_size).fold(1, |best, k| {
            if waste(k) * best <= waste(best) * k {
                k
            } else {
                best
            }
        }),
        // The kernel's short cut: no tail at all in one page.
        _ if size.is_power_of_two() => 1,
        ChainRule::MinWaste => {
            let mut best = 1;
            for k in 2..=cfg.chain_size {
                if waste(k) < waste(best) {
                    best = k;
                }
            }
            best
        }
        ChainRule::UsedPercent => {
            let used_pct = |k: usize| (k * page - waste(k)) * 100 / (k * page);
            let mut best = 1;
            for k in 2..=cfg.chain_size {
                if used_pct(k) > used_pct(best) {
                    best = k;
                }
            }
            best
        }
        ChainRule::SpanAware => {
            // Invariant: `best` wastes fewer bytes than every shorter chain
            // taken before it; the search only moves to longer chains.
            let (mut best, mut best_waste) = (1, waste(1));
            for k in 2..=cfg.chain_size {
                // Good enough: at most 1/64 of the zspage wasted (covers a
                // chain that wastes nothing, too).
                if best_waste * 64 <= best * page {
                    break;
                }
                let w = waste(k);
                let better = if best_waste * 10 > best * page {
                    // More than 10% wasted: any improvement is taken.
                    w < best_waste
                } else {
                    // Otherwise only a cut of more than a quarter.
                    w * 4 < best_waste * 3
                };
                if better {
                    best = k;
                    best_waste = w;
                }
            }
            best
        }
    }
}

/// A complete size-class table for one configuration.
///
/// ```
/// use zsmem::{SizeClassConfig, SizeClassTable};
/// let t = SizeClassTable::new(SizeClassConfig::default()).unwrap();
/// assert_eq!(t.len(), 255);
/// assert_eq!(t.physical_count(), 119);
/// assert_eq!(t.huge_class_size(), 3625);
/// ```
#[derive(Clone, Debug)]
pub struct SizeClassTable {
    cfg: SizeClassConfig,
    classes: Vec<ClassInfo>,
    physical: Vec<usize>,
    largest_non_huge: Option<usize>,
}

impl SizeClassTable {
    /// Build the table; fails with a clear message on a bad configuration.
    pub fn new(cfg: SizeClassConfig) -> Result<Self> {
        cfg.validate()?;
        let page = cfg.page_size;
        let n = (page - MIN_ALLOC_SIZE).div_ceil(cfg.class_delta) + 1;
        let mut classes: Vec<ClassInfo> = (0..n)
            .map(|i| {
                let size = (MIN_ALLOC_SIZE + i * cfg.class_delta).min(page);
                let pages = pages_per_zspage(size, &cfg);
                ClassInfo {
                    index: i,
                    size,
                    physical: i,
                    pages_per_zspage: pages,
                    objs_per_zspage: pages * page / size,
                }
            })
            .collect();
        let mut physical = Vec::new();
        let mut largest_non_huge = None;
        let mut prev: Option<usize> = None;
        for i in (0..n).rev() {
            let c = classes[i];
            if largest_non_huge.is_none() && !c.is_huge() {
                largest_non_huge = Some(c.size);
            }
            match prev {
                Some(p)
                    if classes[p].pages_per_zspage == c.pages_per_zspage
                        && classes[p].objs_per_zspage == c.objs_per_zspage =>
                {
                    classes[i].physical = p;
                }
                _ => {
                    physical.push(i);
                    prev = Some(i);
                }
            }
        }
        physical.reverse();
        Ok(SizeClassTable {
            cfg,
            classes,
            physical,
            largest_non_huge,
        })
    }

    /// The configuration this table was built from.
    pub fn config(&self) -> &SizeClassConfig {
        &self.cfg
    }

    /// Number of logical classes.
    pub fn len(&self) -> usize {
        self.classes.len()
    }

    /// Always false: a table has at least the minimum and the page-size class.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    /// Number of physical classes (after merging).
    pub fn physical_count(&self) -> usize {
        self.physical.len()
    }

    /// Indices of the physical classes, smallest first.
    pub fn physical_indices(&self) -> &[usize] {
        &self.physical
    }

    /// All logical classes, smallest first.
    pub fn classes(&self) -> &[ClassInfo] {
        &self.classes
    }

    /// The class with index `i`, if it exists.
    pub fn class(&self, i: usize) -> Option<&ClassInfo> {
        self.classes.get(i)
    }

    /// Index of the logical class for a request of `size` bytes (clamped to
    /// the largest class, as the kernel does).
    pub fn index_for(&self, size: usize) -> usize {
        let over = size.saturating_sub(MIN_ALLOC_SIZE);
        over.div_ceil(self.cfg.class_delta)
            .min(self.classes.len() - 1)
    }

    /// The physical class that serves a request of `size` bytes.
    pub fn physical_for(&self, size: usize) -> &ClassInfo {
        let logical = &self.classes[self.index_for(size)];
        &self.classes[logical.physical]
    }

    /// Size of the largest class that is not huge, if any.
    pub fn largest_non_huge_size(&self) -> Option<usize> {
        self.largest_non_huge
    }

    /// The kernel's `huge_class_size`: objects of this many bytes or more
    /// are stored one per page, given the kernel's in-object handle.
    pub fn huge_class_size(&self) -> usize {
        self.huge_threshold(KERNEL_HANDLE_SIZE)
    }

    /// Smallest object length that lands in a huge class when every
    /// non-huge object carries `header` extra bytes.
    pub fn huge_threshold(&self, header: usize) -> usize {
        match self.largest_non_huge {
            Some(s) => (s + 1).saturating_sub(header),
            None => 0,
        }
    }

    /// Waste from serving a request of `req` bytes (a zspage's worth of
    /// them) in its physical class: `(phys.size - req) * objs_per_zspage`.
    pub fn merge_waste(&self, req: usize) -> usize {
        let p = self.physical_for(req);
        p.size.saturating_sub(req) * p.objs_per_zspage
    }

    /// Fraction of a zspage not holding requested bytes when it is filled
    /// with objects of exactly `req` bytes: tail waste plus rounding.
    pub fn effective_waste(&self, req: usize) -> f64 {
        let p = self.physical_for(req);
        let zs = p.zspage_bytes(self.cfg.page_size) as f64;
        1.0 - (p.objs_per_zspage * req.min(p.size)) as f64 / zs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(page: usize, chain: usize, delta: usize) -> SizeClassTable {
        SizeClassTable::new(SizeClassConfig {
            page_size: page,
            chain_size: chain,
            class_delta: delta,
            chain_rule: ChainRule::MinWaste,
        })
        .unwrap()
    }

    #[test]
    fn trim_rule_takes_the_longest_of_the_least_wasteful_chains() {
        let cfg = |chain| SizeClassConfig {
            chain_size: chain,
            chain_rule: ChainRule::Trim,
            ..Default::default()
        };
        // No waste at any length: the longest chain.
        assert_eq!(pages_per_zspage(2048, &cfg(32)), 32);
        assert_eq!(pages_per_zspage(32, &cfg(32)), 32);
        // A page-sized class stays one page (the huge class).
        assert_eq!(pages_per_zspage(4096, &cfg(32)), 1);
        // 3000 bytes: 11 pages waste 56 bytes (0.12%), 22 pages 112: a tie
        // per page, so 22; nothing up to 32 does better per page.
        assert_eq!(pages_per_zspage(3000, &cfg(32)), 22);
        assert_eq!(ChainRule::parse("trim").unwrap(), ChainRule::Trim);
        assert_eq!(ChainRule::Trim.name(), "trim");
    }

    #[test]
    fn four_k_delta_16_matches_kernel() {
        for (chain, phys, huge) in [
            (4, 69, 3257),
            (8, 119, 3625),
            (10, 141, 3705),
            (16, 192, 3833),
        ] {
            let t = table(4096, chain, 16);
            assert_eq!(t.len(), 255, "chain {chain}");
            assert_eq!(t.physical_count(), phys, "chain {chain}");
            assert_eq!(t.huge_class_size(), huge, "chain {chain}");
        }
    }

    #[test]
    fn sixteen_k_delta_64_merges_into_1120() {
        let t = table(16384, 8, 64);
        for (req, merge) in [(1072, 5616), (1088, 3744), (1104, 1872), (1120, 0)] {
            let p = t.physical_for(req);
            assert_eq!(
                (p.size, p.pages_per_zspage, p.objs_per_zspage),
                (1120, 8, 117)
            );
            assert_eq!(p.tail_waste(16384), 32);
            assert_eq!(t.merge_waste(req), merge, "req {req}");
        }
    }

    #[test]
    fn sixteen_k_delta_16_keeps_classes_apart() {
        let t = table(16384, 8, 16);
        for (req, pages, objs, tail) in [
            (1072, 4, 61, 144),
            (1088, 1, 15, 64),
            (1104, 6, 89, 48),
            (1120, 8, 117, 32),
        ] {
            let p = t.physical_for(req);
            assert_eq!(p.size, req, "req {req} was merged");
            assert_eq!((p.pages_per_zspage, p.objs_per_zspage), (pages, objs));
            assert_eq!(p.tail_waste(16384), tail);
            assert_eq!(t.merge_waste(req), 0);
        }
    }

    #[test]
    fn used_percent_rule_picks_two_pages_for_208() {
        // The example of the 2023 rework: 208 wastes 144/80/16/160 bytes
        // with 1..4 pages; used% reaches 99 first at 2 pages.
        let mut cfg = SizeClassConfig {
            chain_size: 4,
            ..Default::default()
        };
        cfg.chain_rule = ChainRule::UsedPercent;
        assert_eq!(pages_per_zspage(208, &cfg), 2);
        cfg.chain_rule = ChainRule::MinWaste;
        assert_eq!(pages_per_zspage(208, &cfg), 3);
    }

    fn rfc_table(page: usize, chain: usize) -> SizeClassTable {
        SizeClassTable::new(SizeClassConfig {
            page_size: page,
            chain_size: chain,
            class_delta: 16,
            chain_rule: ChainRule::SpanAware,
        })
        .unwrap()
    }

    /// Rows of the RFC simulator's AFTER table, worked by hand from its rule
    /// (waste(k) = k * page % size):
    /// - 4K/8, 96: waste(1) = 64 <= 4096/64, good enough at once: 1 page.
    /// - 4K/8, 208: waste(1) = 144 (3.5%, under 10%); waste(2) = 80 cuts it
    ///   by 44% and 80 <= 8192/64: 2 pages (min-waste takes 3, waste 16).
    /// - 4K/8, 1600: waste(1) = 896 (22%): any cut counts, waste(2) = 192;
    ///   now under 10%, and no longer chain cuts 192 by a quarter: 2 pages,
    ///   5 objects, the same shape as 1632, which serves it.
    /// - 16K/8, 1104: waste(1) = 928 (5.7%); waste(2) = 752 is only 19% less;
    ///   waste(3) = 576 is 38% less and under 1/64: 3 pages.
    /// - 16K/8, 1120: waste(1) = 704, waste(2) = 288 (59% less): 2 pages.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "safe arithmetic (no unsafe in size_class.rs): 36 s of Miri for nothing"
    )]
    fn span_aware_is_the_rfc_simulators_rule() {
        for (page, chain, req, phys, pages, objs, tail) in [
            (4096, 8, 96, 96, 1, 42, 64),
            (4096, 8, 208, 208, 2, 39, 80),
            (4096, 4, 208, 208, 2, 39, 80),
            (4096, 8, 1600, 1632, 2, 5, 32),
            (4096, 8, 3632, 3632, 8, 9, 80),
            (4096, 8, 3648, 4096, 1, 1, 0),
            (16384, 8, 1088, 1088, 1, 15, 64),
            (16384, 8, 1104, 1104, 3, 44, 576),
            (16384, 8, 1120, 1120, 2, 29, 288),
            (65536, 16, 1088, 1088, 1, 60, 256),
            (65536, 16, 43680, 43680, 2, 3, 32),
        ] {
            let t = rfc_table(page, chain);
            let p = t.physical_for(req);
            assert_eq!(
                (p.size, p.pages_per_zspage, p.objs_per_zspage),
                (phys, pages, objs),
                "{page}/{chain} req {req}"
            );
            assert_eq!(p.tail_waste(page), tail, "{page}/{chain} req {req}");
        }
        // The simulator's physical class counts ("Total Physical Classes").
        for (page, chain, physical) in [(4096, 8, 128), (16384, 8, 279), (65536, 16, 737)] {
            assert_eq!(rfc_table(page, chain).physical_count(), physical);
        }
        assert_eq!(ChainRule::parse("rfc").unwrap(), ChainRule::SpanAware);
    }

    #[test]
    fn span_aware_never_wastes_more_than_needed_and_spans_less() {
        let base = table(4096, 10, 16);
        let span = SizeClassTable::new(SizeClassConfig {
            chain_size: 10,
            chain_rule: ChainRule::SpanAware,
            ..Default::default()
        })
        .unwrap();
        let spans = |t: &SizeClassTable| -> usize {
            t.physical_indices()
                .iter()
                .map(|&i| t.classes()[i].spanning_objects(4096))
                .sum()
        };
        assert!(spans(&span) < spans(&base));
        for c in span.classes() {
            // Same or shorter chains than min-waste, never longer.
            let k = pages_per_zspage(c.size, span.config());
            assert!(k <= pages_per_zspage(c.size, base.config()));
        }
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "safe arithmetic (no unsafe in size_class.rs): 9 s of Miri for nothing"
    )]
    fn classes_are_clamped_and_lookup_rounds_up() {
        let t = table(4096, 8, 16);
        assert_eq!(t.classes().last().unwrap().size, 4096);
        assert_eq!(t.index_for(1), 0);
        assert_eq!(t.index_for(32), 0);
        assert_eq!(t.index_for(33), 1);
        assert_eq!(t.index_for(4096), 254);
        assert_eq!(t.index_for(5000), 254);
        // Legacy delta for 64K pages: 256-byte steps, ceil(65504/256)+1 classes.
        let legacy = table(65536, 8, SizeClassConfig::legacy_delta(65536));
        assert_eq!(legacy.len(), 257);
        // Delta 16 on 64K pages needs 12 bits of class index.
        assert_eq!(table(65536, 8, 16).len(), 4095);
    }

    #[test]
    fn spanning_count() {
        // 3 objects of 1500 bytes in one 4096 page: none span.
        assert_eq!(spanning_objects(1500, 2, 4096), 0);
        // 5 objects of 1632 in 2 pages (8192): the third (3264..4896) spans.
        assert_eq!(spanning_objects(1632, 5, 4096), 1);
    }

    #[test]
    fn bad_configs_are_rejected_with_reasons() {
        let bad = [
            SizeClassConfig {
                page_size: 5000,
                ..Default::default()
            },
            SizeClassConfig {
                page_size: 2048,
                ..Default::default()
            },
            SizeClassConfig {
                chain_size: 0,
                ..Default::default()
            },
            SizeClassConfig {
                chain_size: MAX_CHAIN_SIZE + 1,
                ..Default::default()
            },
            SizeClassConfig {
                class_delta: 12,
                ..Default::default()
            },
            SizeClassConfig {
                class_delta: 0,
                ..Default::default()
            },
        ];
        for cfg in bad {
            let e = SizeClassTable::new(cfg).unwrap_err();
            assert!(matches!(e, Error::InvalidConfig(_)), "{cfg:?}");
        }
    }
}
