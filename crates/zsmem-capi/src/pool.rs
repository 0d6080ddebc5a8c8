//! `zsmem_pool_*`: a pool of variable-sized objects named by `uint64_t`
//! handles.

use std::ffi::{c_int, c_void};
use std::mem::{MaybeUninit, size_of};
use std::sync::Arc;

use zsmem_core::{
    ChainRule, CompactionPolicy, FreeMode, Handle, PageReturn, Placement, Pool, PoolConfig,
};

use crate::error::{Fail, bytes, guard, init_sized, out_buffer, out_ptr, read_sized, write_sized};
use crate::registry::Registry;

/// A pool (opaque). Made by `zsmem_pool_new`, released by
/// `zsmem_pool_destroy`. Safe to use from several threads at once. The
/// pointer is a token for a registry entry, never dereferenced: a
/// destroyed or forged pointer is `-EINVAL`.
pub struct zsmem_pool {
    _opaque: [u8; 0],
}

/// The live pools.
static POOLS: Registry<Pool> = Registry::new("pool");

/// `zsmem_pool_config.chain_rule`: the kernel's rule since Linux 6.3, the
/// chain length with the least tail waste (the default).
pub const ZSMEM_CHAIN_RULE_MIN_WASTE: u32 = 0;
/// `zsmem_pool_config.chain_rule`: the rule before Linux 6.3.
pub const ZSMEM_CHAIN_RULE_USED_PERCENT: u32 = 1;
/// `zsmem_pool_config.chain_rule`: prefer short chains unless a longer one
/// cuts waste a lot (the 2026 RFC's rule).
pub const ZSMEM_CHAIN_RULE_SPAN_AWARE: u32 = 2;
/// `zsmem_pool_config.chain_rule`: the least waste per page, the longest
/// chain among equals (the default; for pools that trim pages).
pub const ZSMEM_CHAIN_RULE_TRIM: u32 = 3;

/// `zsmem_pool_config.compaction`: compact only in `zsmem_pool_compact`
/// (the kernel's behaviour).
pub const ZSMEM_COMPACTION_OFF: u32 = 0;
/// `zsmem_pool_config.compaction`: a free that leaves its size class able
/// to give back `compaction_min_pages` pages also moves up to
/// `compaction_max_moves` objects (the default).
pub const ZSMEM_COMPACTION_AUTO: u32 = 1;

/// `zsmem_pool_config.placement`: what the pool is made for decides (the
/// default): a pool made by `zsmem_pool_new` places by size class, a page
/// store's pool (`zsmem_store_new`) by log, as in the Rust library; a
/// non-zero `log_lanes` asks for log placement either way (older headers'
/// way to ask).
pub const ZSMEM_PLACEMENT_DEFAULT: u32 = 0;
/// `zsmem_pool_config.placement`: size classes, as zsmalloc places
/// (`log_lanes` must be 0).
pub const ZSMEM_PLACEMENT_CLASSES: u32 = 1;
/// `zsmem_pool_config.placement`: log placement, `log_lanes` lanes (0: one
/// per CPU, at most 8).
pub const ZSMEM_PLACEMENT_LOG: u32 = 2;

/// `zsmem_pool_config.free_mode`: a free happens at once, under its size
/// class's lock (the default).
pub const ZSMEM_FREE_CLASS_LOCK: u32 = 0;
/// `zsmem_pool_config.free_mode`: a free marks the handle dead at once
/// (a later read or free of it is `-EBADF`) and hands the object to a
/// per-thread batch, freed later in runs of one size class; at most
/// `free_max_pending_bytes` of objects wait. `zsmem_pool_flush` frees
/// everything pending now.
pub const ZSMEM_FREE_DEFERRED: u32 = 1;

/// How to make a pool. Initialise it with `zsmem_pool_config_default`
/// (which sets `size` and every default), then change fields.
///
/// Defaults: 4096-byte pages, chain size 32, class delta 16, no memory
/// limit, the trim chain rule, no handle header, automatic compaction
/// from 1 page moving up to 32 objects per free, page trimming on. The
/// kernel's zsmalloc configuration is the defaults with `chain_size = 8`,
/// `chain_rule = ZSMEM_CHAIN_RULE_MIN_WASTE`,
/// `kernel_handle_header = 1`, `compaction = ZSMEM_COMPACTION_OFF`,
/// `trim_pages = 0`, `return_delay_us = 0`, `class_shards = 1`,
/// `prefault_bytes = 0`, `parked_slots = 0`, `locked_reads = 1` and
/// `class_grid = 1`.
/// Frees happen at once
/// (`ZSMEM_FREE_CLASS_LOCK`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zsmem_pool_config {
    /// `sizeof(zsmem_pool_config)` as the caller compiled it; set by
    /// `zsmem_pool_config_default`. Lets later versions append fields.
    pub size: usize,
    /// Page size in bytes: a power of two, 4096 to 65536. Also the largest
    /// object.
    pub page_size: usize,
    /// Most pages per zspage, 1 to 32.
    pub chain_size: usize,
    /// Distance between size classes in bytes, a multiple of 8.
    pub class_delta: usize,
    /// Most bytes of zspage memory the pool may hold; 0 for no limit. An
    /// allocation that would pass it fails with `-ENOMEM`.
    pub memory_limit: usize,
    /// One of `ZSMEM_CHAIN_RULE_*`.
    pub chain_rule: u32,
    /// 1 to size objects as the kernel does (8 bytes larger for the handle
    /// it keeps in each object), so page counts match the kernel's; 0 not
    /// to.
    pub kernel_handle_header: u32,
    /// One of `ZSMEM_COMPACTION_*`.
    pub compaction: u32,
    /// With `ZSMEM_COMPACTION_AUTO`: most objects one free may move, at
    /// least 1.
    pub compaction_max_moves: u32,
    /// With `ZSMEM_COMPACTION_AUTO`: pages compaction must be able to give
    /// back before a free compacts, at least 1.
    pub compaction_min_pages: u32,
    /// 1 to commit a zspage's pages as objects reach into them and let
    /// compaction give back single pages (the default); 0 for the kernel's
    /// all-or-nothing zspages.
    pub trim_pages: u32,
    /// One of `ZSMEM_FREE_*`. This field and the two after it were
    /// appended: a program built against a header without them gets
    /// `ZSMEM_FREE_CLASS_LOCK`.
    pub free_mode: u32,
    /// Lanes of log placement, 1..=64 (objects appended to segments, no
    /// size classes; needs `trim_pages` and no `kernel_handle_header`), or
    /// 0 (the default): with `ZSMEM_PLACEMENT_DEFAULT`, the placement the
    /// pool is made for; with `ZSMEM_PLACEMENT_LOG`, a lane per CPU, at
    /// most 8. Was `reserved`, always 0, in older headers.
    pub log_lanes: u32,
    /// With `ZSMEM_FREE_DEFERRED`: most bytes of objects waiting to be
    /// freed, at least 1 (default 4 MiB).
    pub free_max_pending_bytes: usize,
    /// When freed pages go back to the OS (appended; older programs get the
    /// default): after waiting up to `return_delay_us` microseconds in a
    /// return queue, given back by a background thread (default 10000, at
    /// most 3600000000: an hour), or at once on the freeing thread with 0
    /// (the kernel's way).
    pub return_delay_us: usize,
    /// Most freed pages that may wait; past it they are returned at once
    /// (default 1024). Ignored when `return_delay_us` is 0.
    pub return_max_pages: usize,
    /// Size classes only: copies of each class's state that threads spread
    /// over, 1 to 16 (appended; older programs get the default, one per
    /// CPU up to 8). A thread allocates in its own shard, so threads free
    /// and read without sharing a lock; each shard in use keeps its own
    /// partly filled zspages. 1 is the kernel's design. Fewer are used where
    /// the handle cannot name them (pages above 16 KiB); log placement
    /// ignores it.
    pub class_shards: usize,
    /// Log placement with a return delay: most bytes of pages per lane the
    /// background thread keeps faulted in ahead of new segments, so that
    /// storing threads take no page fault on them (appended; older
    /// programs get the default, 1 MiB). Counted as cached pages, returned
    /// after the delay when unused; 0 turns it off. Size classes ignore it.
    pub prefault_bytes: usize,
    /// Size classes: most freed slots each class keeps parked for its next
    /// allocations, 0 to 64 (appended; older programs get the default,
    /// 16). A parked slot's handle is dead at once, like any freed one; the
    /// slot stays in its zspage (only zspages that keep a live object) and
    /// the class's next allocation takes it back, which makes a free
    /// followed by a store cheaper. Compaction frees parked slots first. 0
    /// frees every slot at once (the kernel's way).
    pub parked_slots: usize,
    /// One of `ZSMEM_PLACEMENT_*` (appended; older programs get
    /// `ZSMEM_PLACEMENT_DEFAULT`, so a page store they make places by log,
    /// as the Rust page store does).
    pub placement: u32,
    /// 0 (the default) for `zsmem_pool_read` to copy an object without
    /// its class's lock, checked against the class's count of
    /// relocations (no atomic read-modify-write: readers of one class
    /// share no written line; each class then keeps the handle chunks of
    /// its peak, 8 bytes an object); 1 to read
    /// every object under the lock. Was `reserved`, always 0, in older
    /// headers (so their programs get the default). Stores ignore it
    /// (they decompress under the lock).
    pub locked_reads: u32,
    /// Size classes: adaptive class spacing, a power of two from 1 to 64
    /// (appended; older programs get the default, 2, as in Rust). The
    /// classes at multiples of 2, 4, .. `class_grid` are anchors, and an
    /// object whose class has too few live objects to pay for a zspage of
    /// its own is placed in the next coarser anchor's class (see
    /// `zsmem_pool_placed_size`). 1 gives every class its own zspages, the
    /// kernel's behaviour. Log placement ignores it.
    pub class_grid: usize,
}

// Versioned structs must have no padding (see `read_sized`).
const _: () =
    assert!(size_of::<zsmem_pool_config>() == size_of::<[usize; 12]>() + size_of::<[u32; 10]>());

/// The sizes of the earlier versions of `zsmem_pool_config`, each a header
/// a program may have been built with (copies in `c/old-headers/`): the
/// first ended at `compaction_max_moves`, the second at `trim_pages`, the
/// third at `free_max_pending_bytes`, the fourth at `return_max_pages`,
/// the fifth at `class_shards`, the sixth at `prefault_bytes`, the seventh
/// at `parked_slots`, the eighth at `locked_reads`.
pub(crate) const POOL_CONFIG_VERSIONS: [usize; 8] = [
    size_of::<[usize; 5]>() + size_of::<[u32; 4]>(),
    size_of::<[usize; 5]>() + size_of::<[u32; 6]>(),
    size_of::<[usize; 6]>() + size_of::<[u32; 8]>(),
    size_of::<[usize; 8]>() + size_of::<[u32; 8]>(),
    size_of::<[usize; 9]>() + size_of::<[u32; 8]>(),
    size_of::<[usize; 10]>() + size_of::<[u32; 8]>(),
    size_of::<[usize; 11]>() + size_of::<[u32; 8]>(),
    size_of::<[usize; 11]>() + size_of::<[u32; 10]>(),
];

pub(crate) fn default_config() -> zsmem_pool_config {
    let d = PoolConfig::default();
    let (min_pages, max_moves) = match d.compaction {
        CompactionPolicy::Auto {
            min_freeable_pages,
            max_moves,
        } => (min_freeable_pages as u32, max_moves as u32),
        // Off, or a policy added to zsmem after this binding: the C
        // struct's fields keep values that make sense if AUTO is chosen.
        _ => (1, 32),
    };
    zsmem_pool_config {
        size: size_of::<zsmem_pool_config>(),
        page_size: d.page_size,
        chain_size: d.chain_size,
        class_delta: d.class_delta,
        memory_limit: d.memory_limit.unwrap_or(0),
        chain_rule: match d.chain_rule {
            ChainRule::MinWaste => ZSMEM_CHAIN_RULE_MIN_WASTE,
            ChainRule::UsedPercent => ZSMEM_CHAIN_RULE_USED_PERCENT,
            ChainRule::SpanAware => ZSMEM_CHAIN_RULE_SPAN_AWARE,
            ChainRule::Trim => ZSMEM_CHAIN_RULE_TRIM,
            // A rule added to zsmem after this binding has no C constant
            // yet: the kernel's rule is the one every version has.
            _ => ZSMEM_CHAIN_RULE_MIN_WASTE,
        },
        kernel_handle_header: u32::from(d.kernel_handle_header),
        compaction: if d.compaction == CompactionPolicy::Off {
            ZSMEM_COMPACTION_OFF
        } else {
            ZSMEM_COMPACTION_AUTO
        },
        compaction_max_moves: max_moves,
        compaction_min_pages: min_pages,
        trim_pages: u32::from(d.trim_pages),
        free_mode: ZSMEM_FREE_CLASS_LOCK,
        log_lanes: 0,
        free_max_pending_bytes: match FreeMode::deferred() {
            FreeMode::Deferred { max_pending_bytes } => max_pending_bytes,
            _ => 4 << 20,
        },
        return_delay_us: d.page_return.bound().as_micros() as usize,
        return_max_pages: match d.page_return {
            PageReturn::Delayed { max_pages, .. } => max_pages,
            _ => zsmem_core::DEFAULT_RETURN_MAX_PAGES,
        },
        class_shards: d.class_shards,
        prefault_bytes: d.prefault_bytes,
        parked_slots: d.parked_slots,
        placement: ZSMEM_PLACEMENT_DEFAULT,
        locked_reads: u32::from(!d.lock_free_reads),
        class_grid: d.class_grid,
    }
}

/// What a pool's configuration is for: the defaults differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Made {
    /// `zsmem_pool_new`: size classes by default, as `PoolConfig::default()`.
    Pool,
    /// `zsmem_store_new`: log placement by default, as
    /// `PageStoreConfig::default()`.
    Store,
}

/// A 0-or-1 field of a C configuration as a `bool`.
fn flag(value: u32, name: &str) -> Result<bool, Fail> {
    match value {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(Fail::invalid(format!(
            "invalid configuration: {name} is {other}, not 0 or 1"
        ))),
    }
}

/// The zsmem configuration a C configuration asks for; fields the C struct
/// does not carry keep zsmem's defaults.
pub(crate) fn pool_config(c: &zsmem_pool_config, made: Made) -> Result<PoolConfig, Fail> {
    let chain_rule = match c.chain_rule {
        ZSMEM_CHAIN_RULE_MIN_WASTE => ChainRule::MinWaste,
        ZSMEM_CHAIN_RULE_USED_PERCENT => ChainRule::UsedPercent,
        ZSMEM_CHAIN_RULE_SPAN_AWARE => ChainRule::SpanAware,
        ZSMEM_CHAIN_RULE_TRIM => ChainRule::Trim,
        other => {
            return Err(Fail::invalid(format!(
                "invalid configuration: chain_rule {other} is not a ZSMEM_CHAIN_RULE_* value"
            )));
        }
    };
    let kernel_handle_header = flag(c.kernel_handle_header, "kernel_handle_header")?;
    let compaction = match c.compaction {
        ZSMEM_COMPACTION_OFF => CompactionPolicy::Off,
        ZSMEM_COMPACTION_AUTO => CompactionPolicy::Auto {
            min_freeable_pages: c.compaction_min_pages as usize,
            max_moves: c.compaction_max_moves as usize,
        },
        other => {
            return Err(Fail::invalid(format!(
                "invalid configuration: compaction {other} is not a ZSMEM_COMPACTION_* value"
            )));
        }
    };
    let trim_pages = flag(c.trim_pages, "trim_pages")?;
    let free_mode = match c.free_mode {
        ZSMEM_FREE_CLASS_LOCK => FreeMode::ClassLock,
        ZSMEM_FREE_DEFERRED if c.free_max_pending_bytes > 0 => FreeMode::Deferred {
            max_pending_bytes: c.free_max_pending_bytes,
        },
        ZSMEM_FREE_DEFERRED => {
            return Err(Fail::invalid(
                "invalid configuration: free_max_pending_bytes is 0, it must be at least 1",
            ));
        }
        other => {
            return Err(Fail::invalid(format!(
                "invalid configuration: free_mode {other} is not a ZSMEM_FREE_* value"
            )));
        }
    };
    let page_return = match (c.return_delay_us, c.return_max_pages) {
        (0, _) => PageReturn::Immediate,
        (_, 0) => {
            return Err(Fail::invalid(
                "invalid configuration: return_max_pages is 0 with a return delay, it must be at least 1",
            ));
        }
        (us, max_pages) => PageReturn::Delayed {
            delay: std::time::Duration::from_micros(us as u64),
            max_pages,
        },
    };
    let locked_reads = flag(c.locked_reads, "locked_reads")?;
    let lanes = c.log_lanes as usize;
    let placement = match (c.placement, lanes) {
        (ZSMEM_PLACEMENT_DEFAULT, 0) if made == Made::Pool => Placement::Classes,
        (ZSMEM_PLACEMENT_DEFAULT | ZSMEM_PLACEMENT_LOG, 0) => Placement::log(),
        (ZSMEM_PLACEMENT_DEFAULT | ZSMEM_PLACEMENT_LOG, lanes) => Placement::Log { lanes },
        (ZSMEM_PLACEMENT_CLASSES, 0) => Placement::Classes,
        (ZSMEM_PLACEMENT_CLASSES, lanes) => {
            return Err(Fail::invalid(format!(
                "invalid configuration: log_lanes is {lanes} with ZSMEM_PLACEMENT_CLASSES (size classes have no lanes: set it to 0)"
            )));
        }
        (other, _) => {
            return Err(Fail::invalid(format!(
                "invalid configuration: placement {other} is not a ZSMEM_PLACEMENT_* value"
            )));
        }
    };
    // Start from the defaults so that fields added to PoolConfig later keep
    // their default here.
    #[allow(clippy::field_reassign_with_default)]
    {
        let mut cfg = PoolConfig::default();
        cfg.page_size = c.page_size;
        cfg.chain_size = c.chain_size;
        cfg.class_delta = c.class_delta;
        cfg.chain_rule = chain_rule;
        cfg.kernel_handle_header = kernel_handle_header;
        cfg.memory_limit = (c.memory_limit != 0).then_some(c.memory_limit);
        cfg.compaction = compaction;
        cfg.trim_pages = trim_pages;
        cfg.free_mode = free_mode;
        cfg.page_return = page_return;
        cfg.placement = placement;
        cfg.class_shards = c.class_shards;
        cfg.prefault_bytes = c.prefault_bytes;
        cfg.parked_slots = c.parked_slots;
        cfg.lock_free_reads = !locked_reads;
        cfg.class_grid = c.class_grid;
        Ok(cfg)
    }
}

/// Fill `*config` with the defaults, for a struct of `size` bytes (pass
/// `sizeof *config`; the `zsmem_pool_config_default` macro does). A program
/// built against an earlier header (every one since the first) passes its
/// struct's smaller size: only those bytes, the fields it knows, are
/// written, and the fields appended since get their defaults in
/// `zsmem_pool_new`. Returns 0, or `-EINVAL` if `config` is NULL or `size`
/// is not the size of any version of the struct.
///
/// # Safety
/// `config` is NULL or points to `size` writable bytes, aligned for the
/// struct.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_pool_config_init(
    config: *mut zsmem_pool_config,
    size: usize,
) -> c_int {
    guard("zsmem_pool_config_init", || {
        // SAFETY: the caller promises `size` writable bytes at `config`.
        unsafe {
            init_sized(
                config,
                size,
                &POOL_CONFIG_VERSIONS,
                default_config(),
                "config",
            )
        }?;
        Ok(0)
    })
}

/// Make a pool from `*config` and store it in `*pool_out`. Returns 0, or
/// `-EINVAL` for a NULL argument, a configuration not initialised by
/// `zsmem_pool_config_default`, or an out-of-range field (the message says
/// which), or `-EMFILE` if 255 pools (stores included) are alive: each
/// pool's handles carry its own tag, so that another pool refuses them.
///
/// # Safety
/// `config` is NULL or points to an initialised `zsmem_pool_config`;
/// `pool_out` is NULL or points to writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_pool_new(
    config: *const zsmem_pool_config,
    pool_out: *mut *mut zsmem_pool,
) -> c_int {
    guard("zsmem_pool_new", || {
        let pool_out = out_ptr(pool_out, "pool_out")?;
        // SAFETY: the caller promises a NULL or initialised config.
        let c = unsafe {
            read_sized(
                config,
                "config",
                "zsmem_pool_config_default",
                &POOL_CONFIG_VERSIONS,
                default_config(),
            )
        }?;
        let inner = Pool::new(pool_config(&c, Made::Pool)?)?;
        let token = POOLS.insert(inner) as *mut zsmem_pool;
        // SAFETY: `pool_out` is non-NULL and, per the caller, writable.
        unsafe { pool_out.write(token) };
        Ok(0)
    })
}

/// Free now every object whose free was deferred (`ZSMEM_FREE_DEFERRED`),
/// on every thread's batch, and take back the slots freed objects left
/// parked in threads' magazines (a pool with lock-free reads, the
/// default: a zspage only they kept goes back). Returns 0, or `-EINVAL`
/// (`pool` not live).
///
/// # Safety
/// `pool` may be any value: it is looked up, never dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_pool_flush(pool: *mut zsmem_pool) -> c_int {
    guard("zsmem_pool_flush", || {
        pool_ref(pool)?.flush();
        Ok(0)
    })
}

/// Release a pool and every object in it. NULL is ignored. A pool already
/// destroyed (or a pointer not from `zsmem_pool_new`) is left alone and
/// the last error message says so. Calls that start after the destroy get
/// `-EINVAL`; calls already running on other threads finish on the pool,
/// which is freed when the last of them returns.
///
/// # Safety
/// None beyond the signature: the pointer is only looked up, never
/// dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_pool_destroy(pool: *mut zsmem_pool) {
    let _: c_int = guard("zsmem_pool_destroy", || {
        POOLS.remove(pool as usize)?;
        Ok(0)
    });
}

/// The live pool `pool` names, held for one call; NULL, destroyed or
/// forged is `EINVAL`.
pub(crate) fn pool_ref(pool: *const zsmem_pool) -> Result<Arc<Pool>, Fail> {
    POOLS.get(pool as usize)
}

/// Allocate an object of `len` bytes (1 to the page size) and store its
/// handle in `*handle_out`; its bytes are unspecified until written.
/// Returns 0, `-EINVAL` (NULL argument, `len` 0), `-E2BIG` (`len` over the
/// page size) or `-ENOMEM` (memory limit or OS).
///
/// # Safety
/// `pool` may be any value (it is looked up, never dereferenced); `handle_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_pool_alloc(
    pool: *mut zsmem_pool,
    len: usize,
    handle_out: *mut u64,
) -> c_int {
    guard("zsmem_pool_alloc", || {
        let pool = pool_ref(pool)?;
        let out = out_ptr(handle_out, "handle_out")?;
        let h = pool.alloc(len)?;
        // SAFETY: non-NULL and, per the caller, writable.
        unsafe { out.write(h.to_raw()) };
        Ok(0)
    })
}

/// Allocate an object holding a copy of the `len` bytes at `data` (alloc
/// and write under one lock) and store its handle in `*handle_out`. Errors
/// as `zsmem_pool_alloc`.
///
/// # Safety
/// `pool` may be any value (it is looked up, never dereferenced); `data` is NULL or readable for `len`
/// bytes; `handle_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_pool_store(
    pool: *mut zsmem_pool,
    data: *const c_void,
    len: usize,
    handle_out: *mut u64,
) -> c_int {
    guard("zsmem_pool_store", || {
        let pool = pool_ref(pool)?;
        // SAFETY: the caller promises `len` readable bytes at non-NULL `data`.
        let data = unsafe { bytes(data, len, "data") }?;
        let out = out_ptr(handle_out, "handle_out")?;
        let h = pool.store(data)?;
        // SAFETY: non-NULL and, per the caller, writable.
        unsafe { out.write(h.to_raw()) };
        Ok(0)
    })
}

/// Write the `len` bytes at `data` to the start of the object. Returns 0,
/// `-EINVAL` (NULL argument), `-EBADF` (no live object has this handle) or
/// `-EMSGSIZE` (longer than the object).
///
/// # Safety
/// `pool` may be any value (it is looked up, never dereferenced); `data` is NULL or readable for `len`
/// bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_pool_write(
    pool: *mut zsmem_pool,
    handle: u64,
    data: *const c_void,
    len: usize,
) -> c_int {
    // SAFETY: the same contract as zsmem_pool_write_at.
    unsafe { write_at("zsmem_pool_write", pool, handle, 0, data, len) }
}

/// Write the `len` bytes at `data` at byte `offset` of the object; the
/// write must fit. Errors as `zsmem_pool_write`.
///
/// # Safety
/// As `zsmem_pool_write`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_pool_write_at(
    pool: *mut zsmem_pool,
    handle: u64,
    offset: usize,
    data: *const c_void,
    len: usize,
) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { write_at("zsmem_pool_write_at", pool, handle, offset, data, len) }
}

/// # Safety
/// As `zsmem_pool_write`.
unsafe fn write_at(
    function: &str,
    pool: *mut zsmem_pool,
    handle: u64,
    offset: usize,
    data: *const c_void,
    len: usize,
) -> c_int {
    guard(function, || {
        let pool = pool_ref(pool)?;
        // SAFETY: the caller promises `len` readable bytes at non-NULL `data`.
        let data = unsafe { bytes(data, len, "data") }?;
        pool.write_at(Handle::from_raw(handle), offset, data)?;
        Ok(0)
    })
}

/// Copy the object into `buf` (`buf_len` bytes). Returns the object's
/// length (at most the page size), or `-EINVAL` (NULL `pool` or `buf`),
/// `-EBADF` (no live object has this handle; `buf` is untouched, unless a
/// free raced the read, which leaves zeros where its copy had written, at
/// most the object's length) or `-ENOBUFS` (`buf_len` is smaller than the
/// object; then `*needed`, unless `needed` is NULL, receives the object's
/// length, and `buf` is untouched).
///
/// # Safety
/// `pool` may be any value (it is looked up, never dereferenced); `buf` is NULL or writable for `buf_len`
/// bytes; `needed` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_pool_read(
    pool: *const zsmem_pool,
    handle: u64,
    buf: *mut c_void,
    buf_len: usize,
    needed: *mut usize,
) -> c_int {
    guard("zsmem_pool_read", || {
        let pool = pool_ref(pool)?;
        let buf = out_buffer(buf, buf_len, "buf")?;
        // SAFETY: `buf` is writable for `buf_len` bytes (the caller's
        // promise), which may be uninitialised, and is no pool memory (no
        // caller was ever given a pointer into the pool's zspages).
        let buf = unsafe { std::slice::from_raw_parts_mut(buf.cast::<MaybeUninit<u8>>(), buf_len) };
        // Without any lock where the pool reads so (`locked_reads` 0).
        match pool.read_uninit(Handle::from_raw(handle), buf) {
            Ok(n) => Ok(n as c_int),
            Err(e @ zsmem_core::Error::BufferTooSmall { object_len, .. }) => {
                if !needed.is_null() {
                    // SAFETY: non-NULL and, per the caller, writable.
                    unsafe { needed.write(object_len) };
                }
                Err(e.into())
            }
            Err(e) => Err(e.into()),
        }
    })
}

/// The object's length in bytes, or `-EINVAL` (NULL `pool`) or `-EBADF`
/// (no live object has this handle).
///
/// # Safety
/// `pool` may be any value: it is looked up, never dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_pool_object_len(pool: *const zsmem_pool, handle: u64) -> c_int {
    guard("zsmem_pool_object_len", || {
        let pool = pool_ref(pool)?;
        Ok(pool.object_len(Handle::from_raw(handle))? as c_int)
    })
}

/// Free the object. The handle is dead at once: using it again, freeing it
/// again included, is `-EBADF`. Returns 0, `-EINVAL` (NULL `pool`) or
/// `-EBADF`.
///
/// # Safety
/// `pool` may be any value: it is looked up, never dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_pool_free(pool: *mut zsmem_pool, handle: u64) -> c_int {
    guard("zsmem_pool_free", || {
        let pool = pool_ref(pool)?;
        pool.free(Handle::from_raw(handle))?;
        Ok(0)
    })
}

/// Compact every size class as far as it goes (handles stay valid).
/// Returns the number of pages freed, or `-EINVAL` (NULL `pool`).
///
/// # Safety
/// `pool` may be any value: it is looked up, never dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_pool_compact(pool: *mut zsmem_pool) -> i64 {
    guard("zsmem_pool_compact", || {
        let pool = pool_ref(pool)?;
        Ok(i64::try_from(pool.compact()).unwrap_or(i64::MAX))
    })
}

/// Return the freed pages still waiting in the return queue
/// (`cached_pages`) to the OS now. Returns 0 or `-EINVAL` (NULL `pool`).
///
/// # Safety
/// `pool` may be any value: it is looked up, never dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_pool_trim(pool: *mut zsmem_pool) -> c_int {
    guard("zsmem_pool_trim", || {
        pool_ref(pool)?.trim();
        Ok(0)
    })
}

/// Check every internal invariant of the pool (for tests and debugging: it
/// walks all metadata; run it while no other thread uses the pool).
/// Returns 0, `-EINVAL` (NULL `pool`) or `-EIO` naming the broken
/// invariant.
///
/// # Safety
/// `pool` may be any value: it is looked up, never dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_pool_check_invariants(pool: *const zsmem_pool) -> c_int {
    guard("zsmem_pool_check_invariants", || {
        pool_ref(pool)?.check_invariants()?;
        Ok(0)
    })
}

/// The largest object the pool takes, in bytes (its page size), or
/// `-EINVAL` (`pool` not live).
///
/// # Safety
/// `pool` may be any value: it is looked up, never dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_pool_max_object_size(pool: *const zsmem_pool) -> i64 {
    guard("zsmem_pool_max_object_size", || {
        Ok(i64::try_from(pool_ref(pool)?.max_object_size()).unwrap_or(i64::MAX))
    })
}

/// The bytes an object of `len` bytes takes in the pool: its size class's
/// slot (the kernel's in-object handle included with
/// `kernel_handle_header`), or with log placement `len` rounded up to the
/// lane's unit; what a smaller object would save. With `class_grid` above
/// 1 a sparse class's object may be placed in a coarser class than this
/// says. Returns the bytes, `-EINVAL` (`pool` not live, `len` 0) or
/// `-E2BIG` (`len` over the page size), as `zsmem_pool_alloc` would.
///
/// # Safety
/// `pool` may be any value: it is looked up, never dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_pool_placed_size(pool: *const zsmem_pool, len: usize) -> i64 {
    guard("zsmem_pool_placed_size", || {
        let pool = pool_ref(pool)?;
        let max = pool.max_object_size();
        if len == 0 {
            return Err(zsmem_core::Error::ZeroLength.into());
        }
        if len > max {
            return Err(zsmem_core::Error::TooLarge { len, max }.into());
        }
        Ok(i64::try_from(pool.placed_size(len)).unwrap_or(i64::MAX))
    })
}

/// Pool totals, filled by `zsmem_pool_get_stats`. Fields may be appended
/// in later versions; the call writes only as many bytes as the caller's
/// struct has.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct zsmem_pool_stats {
    /// The pool's page size in bytes.
    pub page_size: u64,
    /// Pages of all zspages: the memory held for objects (zram's
    /// `mem_used_total`, in pages).
    pub pages_held: u64,
    /// Highest `pages_held` so far.
    pub max_pages_held: u64,
    /// Pages freed and still resident: waiting to be returned to the OS
    /// (see `return_delay_us`), reused first; `zsmem_pool_trim` returns them.
    pub cached_pages: u64,
    /// Live objects.
    pub objects: u64,
    /// Sum of the live objects' lengths.
    pub bytes_stored: u64,
    /// `pages_held * page_size`.
    pub bytes_held: u64,
    /// Live objects stored one per page (huge classes).
    pub huge_objects: u64,
    /// Heap bytes of the allocator's metadata (handle tables, zspage
    /// descriptors), not counted in `pages_held`.
    pub metadata_bytes: u64,
    /// Waste: used slots larger than their objects.
    pub waste_rounding_bytes: u64,
    /// Waste: free slots in partly used zspages (what compaction recovers).
    pub waste_partial_bytes: u64,
    /// Waste: zspage tails no slot can use.
    pub waste_tail_bytes: u64,
    /// Pages freed by compaction so far (zram's `pages_compacted`).
    pub pages_compacted: u64,
    /// Objects moved by compaction so far.
    pub objects_moved: u64,
    /// Object bytes copied by compaction so far.
    pub bytes_copied: u64,
    /// Address space reserved from the OS (not all of it resident).
    pub reserved_bytes: u64,
    /// With deferred frees: objects freed (their handles already dead) whose
    /// memory waits for the next drain or `zsmem_pool_flush`; `objects` and
    /// `bytes_stored` still count them until then. 0 otherwise.
    pub pending_frees: u64,
    /// The bytes of the slots they hold.
    pub pending_free_bytes: u64,
    /// With deferred frees: runs of them drained so far, each under one
    /// size class's lock. This field and the three after it were appended:
    /// an older caller's smaller struct gets none of them.
    pub deferred_batches: u64,
    /// Pages compaction committed in destination zspages (with
    /// `trim_pages`), already subtracted from `pages_compacted`.
    pub pages_committed: u64,
    /// Compaction steps run, automatic ones and `zsmem_pool_compact`'s.
    pub compaction_steps: u64,
    /// Longest time one compaction step held a size class's lock, in
    /// nanoseconds.
    pub compaction_max_lock_hold_ns: u64,
}

fn u64_of(n: usize) -> u64 {
    n as u64
}

/// Fill `*out` with the pool's totals; `out_size` is `sizeof *out` as the
/// caller compiled it. Returns 0 or `-EINVAL` (NULL argument). Under
/// concurrent use the totals are a sum of per-class snapshots.
///
/// # Safety
/// `pool` may be any value (it is looked up, never dereferenced); `out` is NULL or writable for `out_size`
/// bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_pool_get_stats(
    pool: *const zsmem_pool,
    out: *mut zsmem_pool_stats,
    out_size: usize,
) -> c_int {
    guard("zsmem_pool_get_stats", || {
        let pool = pool_ref(pool)?;
        out_ptr(out, "out")?;
        let s = pool.stats();
        let c = pool.compaction_stats();
        let stats = zsmem_pool_stats {
            page_size: u64_of(s.page_size),
            pages_held: u64_of(s.pages_held),
            max_pages_held: u64_of(s.max_pages_held),
            cached_pages: u64_of(s.cached_pages),
            objects: u64_of(s.objects),
            bytes_stored: u64_of(s.bytes_stored),
            bytes_held: u64_of(s.bytes_held()),
            huge_objects: u64_of(s.huge_objects),
            metadata_bytes: u64_of(s.metadata_bytes),
            waste_rounding_bytes: u64_of(s.waste.rounding_bytes),
            waste_partial_bytes: u64_of(s.waste.partial_bytes),
            waste_tail_bytes: u64_of(s.waste.tail_bytes),
            pages_compacted: s.pages_compacted,
            objects_moved: c.objects_moved,
            bytes_copied: c.bytes_copied,
            reserved_bytes: u64_of(s.reserved_bytes),
            pending_frees: u64_of(s.pending_frees),
            pending_free_bytes: u64_of(s.pending_free_bytes),
            deferred_batches: s.deferred_batches,
            pages_committed: c.pages_committed,
            compaction_steps: c.steps,
            compaction_max_lock_hold_ns: c.max_lock_hold_ns,
        };
        // SAFETY: the caller promises `out_size` writable bytes at `out`.
        unsafe { write_sized(out, out_size, &stats) }?;
        Ok(0)
    })
}

/// One physical size class, in the columns of the kernel's debugfs
/// `classes` file. Its layout is fixed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct zsmem_class_stats {
    /// Class index (as the kernel numbers classes).
    pub index: u64,
    /// Slot size in bytes.
    pub size: u64,
    /// Zspages per fullness group: 10%, 20%, ..., 90%, 99%, 100%.
    pub fullness: [u64; 11],
    /// Object slots in all zspages of the class.
    pub obj_allocated: u64,
    /// Objects in use.
    pub obj_used: u64,
    /// Pages of all zspages of the class.
    pub pages_used: u64,
    /// Pages per zspage.
    pub pages_per_zspage: u64,
    /// Objects per zspage.
    pub objs_per_zspage: u64,
    /// The kernel's estimate of the pages compaction could free.
    pub freeable: u64,
    /// Sum of the lengths of the objects in use.
    pub bytes_stored: u64,
    /// Heap bytes of the class's metadata.
    pub metadata_bytes: u64,
}

/// Fill `out[0 .. min(count, n)]` with the statistics of the pool's `n`
/// physical size classes, smallest first, and return `n` (call with
/// `out = NULL, count = 0` to learn it). Returns `-EINVAL` for a NULL
/// `pool`, or a NULL `out` with a non-zero `count`.
///
/// # Safety
/// `pool` may be any value (it is looked up, never dereferenced); `out` is NULL or writable for `count`
/// elements.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_pool_class_stats(
    pool: *const zsmem_pool,
    out: *mut zsmem_class_stats,
    count: usize,
) -> c_int {
    guard("zsmem_pool_class_stats", || {
        let pool = pool_ref(pool)?;
        if out.is_null() && count != 0 {
            return Err(Fail::invalid("out is NULL but count is not 0"));
        }
        let classes = pool.class_stats();
        for (i, c) in classes.iter().take(count).enumerate() {
            let mut fullness = [0u64; 11];
            for (f, &n) in fullness.iter_mut().zip(&c.fullness) {
                *f = u64_of(n);
            }
            let s = zsmem_class_stats {
                index: u64_of(c.index),
                size: u64_of(c.size),
                fullness,
                obj_allocated: u64_of(c.obj_allocated),
                obj_used: u64_of(c.obj_used),
                pages_used: u64_of(c.pages_used),
                pages_per_zspage: u64_of(c.pages_per_zspage),
                objs_per_zspage: u64_of(c.objs_per_zspage),
                freeable: u64_of(c.freeable),
                bytes_stored: u64_of(c.bytes_stored),
                metadata_bytes: u64_of(c.metadata_bytes),
            };
            // SAFETY: `out` is non-NULL (count > i >= 0) and, per the
            // caller, writable for `count > i` elements.
            unsafe { out.add(i).write(s) };
        }
        Ok(classes.len() as c_int)
    })
}
