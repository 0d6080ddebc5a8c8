//! The crate's one error type. Every bad input is an `Err` with a message a
//! user can act on; none of them changes any other object.

use std::fmt;

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a handle was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandleFault {
    /// The handle is 0 or its generation field is 0: no handle the pool
    /// returned looks like that.
    Null,
    /// Its class index names no physical class of this pool.
    UnknownClass,
    /// Its slot lies beyond any slot this class has handed out.
    UnknownSlot,
    /// The object was freed (a use after free or a double free).
    Freed,
    /// The slot was freed and now holds a newer object: the handle is stale.
    Stale,
    /// The handle's pool tag is not this pool's: it came from another pool
    /// (live or dropped), or it is forged.
    ForeignPool,
}

impl fmt::Display for HandleFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HandleFault::Null => "null or forged handle (generation 0)",
            HandleFault::UnknownClass => "forged handle: no such size class in this pool",
            HandleFault::UnknownSlot => "forged handle: no such slot in its size class",
            HandleFault::Freed => "the object was already freed (use after free or double free)",
            HandleFault::Stale => "stale handle: the object was freed and its slot reused",
            HandleFault::ForeignPool => {
                "handle of another pool: its pool tag is not this pool's (or it is forged)"
            }
        })
    }
}

/// Everything that can go wrong in zsmem.
///
/// ```
/// use zsmem::{Error, Pool, PoolConfig};
/// let pool = Pool::new(PoolConfig::default())?;
/// let h = pool.store(b"bytes")?;
/// pool.free(h)?;
/// // A freed handle is refused, never another object's bytes.
/// assert!(matches!(pool.read_vec(h), Err(Error::InvalidHandle { .. })));
/// assert!(matches!(pool.alloc(0), Err(Error::ZeroLength)));
/// # Ok::<(), zsmem::Error>(())
/// ```
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A configuration parameter is out of range.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// Allocation of zero bytes.
    #[error("zero-length allocation: an object must hold at least 1 byte")]
    ZeroLength,
    /// Allocation larger than the largest object (the page size).
    #[error(
        "object of {len} bytes is larger than the pool's maximum object size of {max} bytes (its page size)"
    )]
    TooLarge {
        /// Requested length.
        len: usize,
        /// Largest length the pool accepts.
        max: usize,
    },
    /// The operating system refused memory.
    #[error("the operating system refused {bytes} bytes of memory ({reason})")]
    OsOutOfMemory {
        /// Bytes asked for.
        bytes: usize,
        /// What the OS said.
        reason: String,
    },
    /// The pool's configured memory limit would be passed.
    #[error(
        "memory limit of {limit} bytes reached: {held} bytes held, {needed} more needed for a new zspage"
    )]
    MemoryLimit {
        /// The configured limit in bytes.
        limit: usize,
        /// Bytes of pages the pool holds now.
        held: usize,
        /// Bytes the allocation would add.
        needed: usize,
    },
    /// Every handle slot of a size class is in use or retired (a slot is
    /// retired after its 16383rd object, so that no stale handle ever
    /// matches again): no object of this class can be added.
    #[error(
        "size class {class} has no handle slot left: all 2^29 are in use or retired after 16383 objects each"
    )]
    HandlesExhausted {
        /// The size class (its index, as in `ClassStats::index`).
        class: usize,
    },
    /// `Pool::new` while the most pools a process may have are alive: each
    /// live pool has its own tag in its handles.
    #[error(
        "{max} pools are alive, the most one process can have (each pool's handles carry its own 8-bit tag): drop a pool first"
    )]
    TooManyPools {
        /// The limit.
        max: usize,
    },
    /// The handle does not name a live object of this pool.
    #[error("invalid handle {handle:#018x}: {fault}")]
    InvalidHandle {
        /// The handle as given.
        handle: u64,
        /// Why it was refused.
        fault: HandleFault,
    },
    /// A write does not fit in the object.
    #[error(
        "write of {len} bytes at offset {offset} does not fit in an object of {object_len} bytes"
    )]
    WriteTooLong {
        /// Bytes to write.
        len: usize,
        /// Offset in the object.
        offset: usize,
        /// The object's length.
        object_len: usize,
    },
    /// A read buffer is shorter than the object.
    #[error("read buffer of {len} bytes is smaller than the object of {object_len} bytes")]
    BufferTooSmall {
        /// The buffer's length.
        len: usize,
        /// The object's length.
        object_len: usize,
    },
    /// A page store slot index beyond the store.
    #[error("slot {index} is out of range: the store has {slots} slots")]
    SlotOutOfRange {
        /// The slot asked for.
        index: usize,
        /// Slots in the store.
        slots: usize,
    },
    /// A page store read or write buffer that is not exactly one page.
    #[error("buffer of {len} bytes is not one page of {page_size} bytes")]
    WrongPageSize {
        /// The buffer's length.
        len: usize,
        /// The store's page size.
        page_size: usize,
    },
    /// Compressed data that does not decompress (a corrupted object).
    #[error("codec error: {0}")]
    Codec(String),
    /// Writeback was asked of a store without a backing file.
    #[error("the store has no backing file: set one with PageStore::set_backing_file")]
    NoBackingFile,
    /// The backing file could not be created, read or written, or is full.
    #[error("backing file: {0}")]
    BackingFile(String),
    /// A block read back from the backing file is not the one the slot
    /// wrote (checksum, slot, generation or file mismatch): the file was
    /// corrupted or replaced. The slot's data is lost; nothing wrong is
    /// returned.
    #[error("backing file block {block} of slot {slot} is corrupt: {reason}")]
    CorruptBlock {
        /// The slot read.
        slot: usize,
        /// Its block in the file.
        block: u64,
        /// What did not match.
        reason: String,
    },
    /// The kernel refused userfaultfd, or one of its operations a
    /// [`Region`](crate::region::Region) needs; the message says why and
    /// what to change (the sysctl `vm.unprivileged_userfaultfd`, the
    /// kernel version, a seccomp filter).
    #[error("userfaultfd refused: {message}")]
    Userfaultfd {
        /// The errno the kernel returned.
        errno: i32,
        /// What was refused, and what governs it.
        message: String,
    },
    /// `check_invariants` found allocator state that breaks a rule.
    #[error("pool invariant violated: {0}")]
    InvariantViolated(String),
}
