//! zsmem: a compressed-memory allocator of the zsmalloc design, in userspace.
//!
//! # The nouns
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
//! # Where things are
//!
//! | module | concern |
//! |---|---|
//! | [`size_class`] | class sizes, chain lengths, merging, huge threshold |
//! | `zspage` | one zspage's pages, free bitmap, owners and committed pages |
//! | `handle` | handle encoding and the per-class handle table |
//! | `class` | one class: fullness groups, alloc, free, object migration |
//! | `compact` | compaction: the kernel's algorithm, the automatic policy, its costs |
//! | `lane` | log placement: append-only segments per lane, cleaned by copying |
//! | `pool` | the public [`Pool`] |
//! | `os` | pages from and back to the OS |
//! | [`stats`] | per-class and pool statistics |
//! | [`codec`] | lz4 and zstd, page to object and back |
//! | [`store`] | [`PageStore`]: zram-like slots of compressed pages |
//! | `region` | `Region`: compressed memory used as ordinary memory (Linux, userfaultfd) |
//! | `sync` | the locks (one place, for loom) |
//!
//! The lock order and the handle's bits are in `docs/DESIGN.md`.
//!
//! ```
//! use zsmem::{Pool, PoolConfig};
//! let pool = Pool::new(PoolConfig::kernel()).unwrap();
//! assert_eq!(pool.huge_class_size(), 3625);
//! let h = pool.store(&[1, 2, 3]).unwrap();
//! assert_eq!(pool.read_vec(h).unwrap(), [1, 2, 3]);
//! pool.free(h).unwrap();
//! ```

mod cells;
mod class;
pub mod codec;
mod compact;
mod deferred;
mod error;
mod handle;
mod lane;
pub mod os;
mod page_return;
mod pool;
#[cfg(all(target_os = "linux", not(loom)))]
pub mod region;
pub mod size_class;
mod spacing;
pub mod stats;
pub mod store;
mod sync;
mod zspage;

pub use codec::{Codec, CodecSpec, ZstdDictionary};
pub use compact::{CompactionPolicy, CompactionStats};
pub use error::{Error, HandleFault, Result};
pub use handle::Handle;
pub use page_return::{DEFAULT_RETURN_DELAY, DEFAULT_RETURN_MAX_PAGES, PageReturn};
pub use pool::{
    DEFAULT_CHAIN_SIZE, DEFAULT_PARKED_SLOTS, DEFAULT_PREFAULT_BYTES, FreeMode, MAX_CLASS_SHARDS,
    MAX_PARKED_SLOTS, Placement, Pool, PoolConfig, default_class_shards,
};
pub use size_class::{ChainRule, ClassInfo, SizeClassConfig, SizeClassTable};
pub use stats::{ClassStats, PoolStats, Waste};
pub use store::{
    BdStat, IoStat, MAX_LOG_SLOTS, MmStat, PageStore, PageStoreConfig, RecompressRequest,
    Selection, WritebackRequest,
};
