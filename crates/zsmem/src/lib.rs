//! zsmem: a compressed-memory allocator of the zsmalloc design, in userspace.
//!
//! # What to use
//!
//! - [`PageStore`]: pages in numbered slots, compressed, as the kernel's zram
//!   keeps swapped-out pages (same-filled pages, huge pages, idle marking,
//!   recompression, writeback to a backing file, zram's statistics). Start
//!   here for a compressed tier of pages.
//! - [`Pool`]: objects of 1 byte to a page (usually compressed pages)
//!   reached through [`Handle`]s, as zsmalloc keeps them; placed by size
//!   class ([`PoolConfig::default`], or exactly as the kernel does with
//!   [`PoolConfig::kernel`]) or in a log ([`PoolConfig::log`], the page
//!   store's default).
//!
//! ```
//! use zsmem::{PageStore, PageStoreConfig};
//!
//! let store = PageStore::new(PageStoreConfig { slots: 1024, ..Default::default() })?;
//! let mut page = [0u8; 4096];
//! page[..13].copy_from_slice(b"hello, zsmem!");
//! store.write(3, &page)?;
//! let mut back = [0u8; 4096];
//! store.read(3, &mut back)?;
//! assert_eq!(page, back);
//! println!("{:?}", store.mm_stat()); // zram's mm_stat
//! # Ok::<(), zsmem::Error>(())
//! ```
//!
//! ```
//! use zsmem::{Pool, PoolConfig};
//!
//! let pool = Pool::new(PoolConfig::kernel())?;
//! assert_eq!(pool.huge_class_size(), 3625); // as on Linux 6.18 with 4 KiB pages
//! let h = pool.store(&[1, 2, 3])?;
//! assert_eq!(pool.read_vec(h)?, [1, 2, 3]);
//! pool.free(h)?;
//! assert!(pool.read_vec(h).is_err()); // a freed handle is refused
//! # Ok::<(), zsmem::Error>(())
//! ```
//!
//! Every bad input is an [`Error`] that changes nothing. The reference for
//! both types, with every option, is `docs/library.md` in the repository;
//! how it works inside (zspage layout, the handle bit by bit, locks and
//! their order, invariants, and what each design choice bought) is
//! `docs/DESIGN.md`.
//!
//! # For contributors
//!
//! ## The nouns
//!
//! - **object**: a run of 1 to `page_size` bytes a client stores, usually a
//!   compressed page.
//! - **size class**: objects are rounded up to the next class size,
//!   `32 + i * delta` bytes. Classes with identical zspage shapes are
//!   merged; the survivors are the *physical* classes.
//! - **zspage**: 1 to `chain_size` contiguous pages holding equal object
//!   slots of one class; objects may straddle page boundaries inside it.
//! - **chain size**: the most pages a zspage may chain.
//! - **huge class**: a class with one object per one-page zspage; objects of
//!   `huge_class_size` bytes or more are stored that way.
//! - **handle**: the opaque `u64` a client holds for an object, resolved
//!   through a per-class handle table so objects can move.
//! - **fullness group**: zspages of a class sorted by the share of their
//!   slots in use (empty, 10% steps, 99%, full); allocation fills the fullest.
//! - **compaction**: moving objects out of sparse zspages into dense ones
//!   so the sparse ones can be freed.
//!
//! ## Where things are
//!
//! | module | concern |
//! |---|---|
//! | [`size_class`] | class sizes, chain lengths, merging, huge threshold |
//! | `zspage` | one zspage's pages, free bitmap, owners and committed pages |
//! | `handle` | handle encoding, the pool tag, the per-class handle table and its lock-free directory |
//! | `class` | one class: fullness groups, alloc, free, object migration |
//! | `compact` | compaction: the kernel's algorithm, the automatic policy, its costs |
//! | `lane` | log placement: append-only segments per lane, cleaned by copying |
//! | `config` | [`PoolConfig`]: placement, free modes, defaults and limits |
//! | `pool` | the public [`Pool`] |
//! | `os` | pages from and back to the OS, and the thread that returns them |
//! | [`stats`] | per-class and pool statistics |
//! | [`codec`] | lz4 and zstd, page to object and back |
//! | [`store`] | [`PageStore`]: zram-like slots of compressed pages |
//! | `region` | `Region`: compressed memory used as ordinary memory (Linux, userfaultfd) |
//! | `sync` | the locks (one place, for loom) |
//!
//! The lock order and the handle's bits are in `docs/DESIGN.md`.

mod cells;
mod class;
pub mod codec;
mod compact;
mod config;
mod deferred;
mod error;
mod grow;
mod handle;
mod lane;
mod magazine;
mod optimistic;
pub mod os;
mod pool;
#[cfg(all(target_os = "linux", not(loom)))]
pub mod region;
mod remote;
pub mod size_class;
mod spacing;
pub mod stats;
pub mod store;
mod sync;
mod words;
mod zspage;

pub use codec::{Codec, CodecSpec, ZstdDictionary};
pub use compact::{CompactionPolicy, CompactionStats};
pub use config::{
    DEFAULT_CHAIN_SIZE, DEFAULT_PARKED_SLOTS, DEFAULT_PREFAULT_BYTES, DEFAULT_RETURN_DELAY,
    DEFAULT_RETURN_MAX_PAGES, FreeMode, MAX_CLASS_SHARDS, MAX_PARKED_SLOTS, MAX_RETURN_DELAY,
    PageReturn, Placement, PoolConfig, default_class_shards,
};
pub use error::{Error, HandleFault, Result};
pub use handle::Handle;
pub use pool::Pool;
pub use size_class::{ChainRule, ClassInfo, SizeClassConfig, SizeClassTable};
pub use stats::{ClassStats, PoolStats, Waste};

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// docs/library.md's Rust examples, compiled (and run unless `no_run`).
#[cfg(doctest)]
#[doc = include_str!("../../../docs/library.md")]
pub struct LibraryDoctests;

pub use store::{
    BdStat, IoStat, MAX_LOG_SLOTS, MmStat, PageStore, PageStoreConfig, RecompressRequest,
    Selection, WritebackRequest,
};
