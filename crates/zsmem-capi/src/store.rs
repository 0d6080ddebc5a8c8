//! `zsmem_store_*`: zram's semantics in-process, numbered slots of
//! page-sized blocks kept compressed in a pool.

use std::ffi::{c_int, c_void};
use std::mem::size_of;
use std::sync::Arc;

use std::ffi::{CStr, c_char};
use std::time::Duration;

use zsmem_core::store::{RecompressStat, WritebackReport};
use zsmem_core::{
    BdStat, Codec, CodecSpec, IoStat, MmStat, PageStore, PageStoreConfig, RecompressRequest,
    Selection, WritebackRequest, ZstdDictionary,
};

use crate::error::{
    Fail, bytes, guard, init_sized, out_buffer, out_ptr, out_struct, read_sized, write_sized,
};
use crate::pool::{self, zsmem_pool_config};
use crate::registry::Registry;

/// A page store (opaque). Made by `zsmem_store_new`, released by
/// `zsmem_store_destroy`. Safe to use from several threads at once; slots
/// have their own locks. The pointer is a token for a registry entry,
/// never dereferenced: a destroyed or forged pointer is `-EINVAL`.
pub struct zsmem_store {
    _opaque: [u8; 0],
}

/// The live stores.
static STORES: Registry<PageStore> = Registry::new("store");

/// `zsmem_store_config.codec`: LZ4 (liblz4, zram's `lz4`; the default).
pub const ZSMEM_CODEC_LZ4: u32 = 0;
/// `zsmem_store_config.codec`: Zstandard at `zstd_level`.
pub const ZSMEM_CODEC_ZSTD: u32 = 1;
/// `zsmem_store_config.recompress_codec`: no secondary codec (the
/// default; `zsmem_store_recompress` then has nothing to try).
pub const ZSMEM_CODEC_NONE: u32 = u32::MAX;

/// Which slots `zsmem_store_recompress` and `zsmem_store_writeback` pick
/// (zram's `type=`): every slot holding an object.
pub const ZSMEM_SELECT_ALL: u32 = 0;
/// Slots marked idle (`zsmem_store_mark_idle`).
pub const ZSMEM_SELECT_IDLE: u32 = 1;
/// Huge slots (stored uncompressed).
pub const ZSMEM_SELECT_HUGE: u32 = 2;
/// Slots both huge and idle.
pub const ZSMEM_SELECT_HUGE_IDLE: u32 = 3;
/// Slots recompression found incompressible (writeback only).
pub const ZSMEM_SELECT_INCOMPRESSIBLE: u32 = 4;

/// How to make a page store (the pool under it has its own
/// `zsmem_pool_config`). Initialise it with `zsmem_store_config_default`
/// (which sets `size` and every default), then change fields.
///
/// Defaults: 262144 slots (1 GiB of 4 KiB pages), LZ4, zstd level 3, no
/// secondary codec for recompression, access times kept.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zsmem_store_config {
    /// `sizeof(zsmem_store_config)` as the caller compiled it; set by
    /// `zsmem_store_config_default`. Lets later versions append fields.
    pub size: usize,
    /// Number of slots, at least 1 (zram's disksize / page size). At most
    /// 2^31 (2147483648, 8 TiB of 4 KiB pages) when the pool places by log
    /// (`placement`, a store's default): each object's slot is named in 31
    /// bits there.
    pub slots: usize,
    /// One of `ZSMEM_CODEC_*`.
    pub codec: u32,
    /// Level for `ZSMEM_CODEC_ZSTD`, 1 to 22 (ignored for LZ4).
    pub zstd_level: i32,
    /// The secondary codec `zsmem_store_recompress` tries (zram's
    /// `recomp_algorithm`, priority 1): `ZSMEM_CODEC_NONE` (the default),
    /// `ZSMEM_CODEC_LZ4` or `ZSMEM_CODEC_ZSTD`. Appended with the next
    /// field: a program built against a header without them gets none.
    pub recompress_codec: u32,
    /// Level for a `ZSMEM_CODEC_ZSTD` secondary codec, 1 to 22 (default 12).
    pub recompress_zstd_level: i32,
    /// 1 (the default, as in Rust) for each slot to keep the time it was
    /// last read or written (zram's `CONFIG_ZRAM_TRACK_ENTRY_ACTIME`), which
    /// `zsmem_store_mark_idle` needs for an age other than 0; 0 saves that
    /// word per slot, and `zsmem_store_mark_idle` then takes only 0 (every
    /// slot). Appended with the next field: a program built against a
    /// header without them gets 1.
    pub track_access_time: u32,
    /// Must be 0.
    pub reserved: u32,
}

// Versioned structs must have no padding (see `read_sized`).
const _: () = assert!(size_of::<zsmem_store_config>() == 2 * size_of::<usize>() + 6 * 4);

/// The sizes of the earlier versions of `zsmem_store_config`, each a header
/// a program may have been built with (copies in `c/old-headers/`): the
/// first ended at `zstd_level`, the second at `recompress_zstd_level`.
pub(crate) const STORE_CONFIG_VERSIONS: [usize; 2] = [
    2 * size_of::<usize>() + 2 * 4,
    2 * size_of::<usize>() + 4 * 4,
];

/// The codec `code` names at zstd `level`; `field` names the field for the
/// message.
fn codec_of(code: u32, level: i32, field: &str) -> Result<Codec, Fail> {
    match code {
        ZSMEM_CODEC_LZ4 => Ok(Codec::Lz4),
        ZSMEM_CODEC_ZSTD if (1..=22).contains(&level) => Ok(Codec::Zstd { level }),
        ZSMEM_CODEC_ZSTD => Err(Fail::invalid(format!(
            "invalid configuration: the zstd level of {field} is {level}, not in 1..=22"
        ))),
        other => Err(Fail::invalid(format!(
            "invalid configuration: {field} {other} is not a ZSMEM_CODEC_* value"
        ))),
    }
}

/// The selection `which` names.
fn selection(which: u32) -> Result<Selection, Fail> {
    Ok(match which {
        ZSMEM_SELECT_ALL => Selection::All,
        ZSMEM_SELECT_IDLE => Selection::Idle,
        ZSMEM_SELECT_HUGE => Selection::Huge,
        ZSMEM_SELECT_HUGE_IDLE => Selection::HugeIdle,
        ZSMEM_SELECT_INCOMPRESSIBLE => Selection::Incompressible,
        other => {
            return Err(Fail::invalid(format!(
                "which {other} is not a ZSMEM_SELECT_* value"
            )));
        }
    })
}

fn default_config() -> zsmem_store_config {
    let d = PageStoreConfig::default();
    zsmem_store_config {
        size: size_of::<zsmem_store_config>(),
        slots: d.slots,
        codec: ZSMEM_CODEC_LZ4,
        zstd_level: 3,
        recompress_codec: ZSMEM_CODEC_NONE,
        recompress_zstd_level: 12,
        track_access_time: u32::from(d.track_access_time),
        reserved: 0,
    }
}

/// Fill `*config` with the defaults, for a struct of `size` bytes (pass
/// `sizeof *config`; the `zsmem_store_config_default` macro does). A
/// program built against an earlier header (every one since the first)
/// passes its struct's smaller size: only those bytes, the fields it
/// knows, are written, and the fields appended since get their defaults
/// in `zsmem_store_new`. Returns 0, or `-EINVAL` if `config` is NULL or
/// `size` is not the size of any version of the struct.
///
/// # Safety
/// `config` is NULL or points to `size` writable bytes, aligned for the
/// struct.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_config_init(
    config: *mut zsmem_store_config,
    size: usize,
) -> c_int {
    guard("zsmem_store_config_init", || {
        // SAFETY: the caller promises `size` writable bytes at `config`.
        unsafe {
            init_sized(
                config,
                size,
                &STORE_CONFIG_VERSIONS,
                default_config(),
                "config",
            )
        }?;
        Ok(0)
    })
}

/// Make a page store from `*config` over a pool made from `*pool_config`
/// (whose `page_size` is the store's page size and whose `memory_limit`
/// bounds it; with the default `placement` the pool places by log, as the
/// Rust `PageStoreConfig::default()` does), and store it in `*store_out`. Returns 0, or `-EINVAL` for a
/// NULL argument, a configuration not initialised by its `_default` macro,
/// or an out-of-range field (the message says which), or `-EMFILE` if 255
/// pools (stores included) are alive.
///
/// # Safety
/// `config` and `pool_config` are NULL or point to initialised structs;
/// `store_out` is NULL or points to writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_new(
    config: *const zsmem_store_config,
    pool_config: *const zsmem_pool_config,
    store_out: *mut *mut zsmem_store,
) -> c_int {
    guard("zsmem_store_new", || {
        let store_out = out_ptr(store_out, "store_out")?;
        // SAFETY: the caller promises NULL or initialised configs.
        let c = unsafe {
            read_sized(
                config,
                "config",
                "zsmem_store_config_default",
                &STORE_CONFIG_VERSIONS,
                default_config(),
            )
        }?;
        // SAFETY: as above.
        let p = unsafe {
            read_sized(
                pool_config,
                "pool_config",
                "zsmem_pool_config_default",
                &pool::POOL_CONFIG_VERSIONS,
                pool::default_config(),
            )
        }?;
        let codec = codec_of(c.codec, c.zstd_level, "codec")?;
        let track_access_time = match (c.track_access_time, c.reserved) {
            (0, 0) => false,
            (1, 0) => true,
            (track, reserved) => {
                return Err(Fail::invalid(format!(
                    "invalid configuration: track_access_time is {track}, not 0 or 1, or reserved {reserved} is not 0"
                )));
            }
        };
        let recompress = match c.recompress_codec {
            ZSMEM_CODEC_NONE => Vec::new(),
            code => vec![CodecSpec::from(codec_of(
                code,
                c.recompress_zstd_level,
                "recompress_codec",
            )?)],
        };
        // Start from the defaults so that fields added to PageStoreConfig
        // later keep their default here.
        #[allow(clippy::field_reassign_with_default)]
        let cfg = {
            let mut cfg = PageStoreConfig::default();
            cfg.slots = c.slots;
            cfg.codec = codec;
            cfg.recompress = recompress;
            cfg.track_access_time = track_access_time;
            cfg.pool = pool::pool_config(&p, pool::Made::Store)?;
            cfg
        };
        let inner = PageStore::new(cfg)?;
        let token = STORES.insert(inner) as *mut zsmem_store;
        // SAFETY: `store_out` is non-NULL and, per the caller, writable.
        unsafe { store_out.write(token) };
        Ok(0)
    })
}

/// Release a store and everything in it. NULL is ignored. A store already
/// destroyed (or a pointer not from `zsmem_store_new`) is left alone and
/// the last error message says so. Calls that start after the destroy get
/// `-EINVAL`; calls already running on other threads finish on the store,
/// which is freed when the last of them returns.
///
/// # Safety
/// None beyond the signature: the pointer is only looked up, never
/// dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_destroy(store: *mut zsmem_store) {
    let _: c_int = guard("zsmem_store_destroy", || {
        STORES.remove(store as usize)?;
        Ok(0)
    });
}

/// The live store `store` names, held for one call; NULL, destroyed or
/// forged is `EINVAL`.
pub(crate) fn store_ref(store: *const zsmem_store) -> Result<Arc<PageStore>, Fail> {
    STORES.get(store as usize)
}

/// Store the page at `page` (`len` must be the page size) in slot `index`,
/// replacing what was there. Returns 0, `-EINVAL` (NULL argument, `len` not
/// the page size), `-ERANGE` (`index` beyond the store) or `-ENOMEM` (the
/// pool's memory limit: the slot keeps its previous content).
///
/// # Safety
/// `store` may be any value (it is looked up, never dereferenced); `page` is NULL or readable for `len`
/// bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_write(
    store: *mut zsmem_store,
    index: usize,
    page: *const c_void,
    len: usize,
) -> c_int {
    guard("zsmem_store_write", || {
        let store = store_ref(store)?;
        // SAFETY: the caller promises `len` readable bytes at non-NULL `page`.
        let page = unsafe { bytes(page, len, "page") }?;
        store.write(index, page)?;
        Ok(0)
    })
}

/// Read slot `index` into `buf` (`len` must be the page size); a slot never
/// written or discarded reads as zeros. Returns 0, `-EINVAL` (NULL
/// argument, `len` not the page size), `-ERANGE` (`index` beyond the store)
/// or `-EIO` (the stored data does not decompress).
///
/// # Safety
/// `store` may be any value (it is looked up, never dereferenced); `buf` is NULL or writable for `len`
/// bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_read(
    store: *const zsmem_store,
    index: usize,
    buf: *mut c_void,
    len: usize,
) -> c_int {
    guard("zsmem_store_read", || {
        let store = store_ref(store)?;
        let buf = out_buffer(buf, len, "buf")?;
        // A slot out of range or a buffer not one page is refused before
        // the buffer is touched, and counted in `invalid_io` as the store's
        // own read counts it (this used to refuse a wrong length itself,
        // uncounted, and to zero the buffer before the slot was checked).
        store.check_request(index, len)?;
        // SAFETY: `buf` is writable for `len` bytes (the caller's promise);
        // zeroing it first makes them initialised, so a `&mut [u8]` over
        // them is sound even if the caller passed fresh malloc memory. No
        // one else touches the buffer during the call (the caller's
        // promise), and it is not the store's memory.
        let buf = unsafe {
            buf.write_bytes(0, len);
            std::slice::from_raw_parts_mut(buf, len)
        };
        store.read(index, buf)?;
        Ok(0)
    })
}

/// Discard slots `index .. index + count`: they read as zeros after.
/// Returns 0, `-EINVAL` (NULL `store`) or `-ERANGE` (the range passes the
/// end of the store; nothing is discarded then).
///
/// # Safety
/// `store` may be any value: it is looked up, never dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_discard(
    store: *mut zsmem_store,
    index: usize,
    count: usize,
) -> c_int {
    guard("zsmem_store_discard", || {
        store_ref(store)?.discard(index, count)?;
        Ok(0)
    })
}

/// Compact the store's pool. Returns the pages freed, or `-EINVAL` (NULL
/// `store`).
///
/// # Safety
/// `store` may be any value: it is looked up, never dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_compact(store: *mut zsmem_store) -> i64 {
    guard("zsmem_store_compact", || {
        let store = store_ref(store)?;
        Ok(i64::try_from(store.compact()).unwrap_or(i64::MAX))
    })
}

/// Return the freed pages still waiting in the store's return queue
/// (`cached_bytes` of `zsmem_store_memory`) to the OS now, so that the
/// process's memory settles. Returns 0 or `-EINVAL` (`store` not live).
///
/// # Safety
/// `store` may be any value: it is looked up, never dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_trim(store: *mut zsmem_store) -> c_int {
    guard("zsmem_store_trim", || {
        store_ref(store)?.pool().trim();
        Ok(0)
    })
}

/// Check the store's counters against its slots, the backing file's
/// bitmap against the written-back slots, and its pool's invariants (for
/// tests and debugging: it walks every slot; run it while no other thread
/// uses the store). Returns 0, `-EINVAL` (`store` not live) or `-EIO`
/// naming the broken invariant.
///
/// # Safety
/// `store` may be any value: it is looked up, never dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_check_invariants(store: *const zsmem_store) -> c_int {
    guard("zsmem_store_check_invariants", || {
        store_ref(store)?.check_invariants()?;
        Ok(0)
    })
}

/// Everything a store holds for its data, in bytes: what
/// `zsmem_store_get_memory` fills. `all_in_bytes` is what `zsmem compare`
/// calls all-in. Fields may be appended in later versions; the call writes
/// only as many bytes as the caller's struct has.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct zsmem_store_memory {
    /// Pool pages holding objects (zram's `mem_used_total`).
    pub pool_bytes: u64,
    /// Freed pages still resident, waiting to go back to the OS
    /// (`zsmem_store_trim` returns them now).
    pub cached_bytes: u64,
    /// Heap bytes of the store's metadata (slot table, codec table and
    /// dictionaries, the backing file's bitmap) and of its pool's.
    pub metadata_bytes: u64,
    /// `pool_bytes + cached_bytes + metadata_bytes`.
    pub all_in_bytes: u64,
    /// Bytes of the stored objects (zram's `compr_data_size`), for the
    /// overhead: `all_in_bytes / compr_data_size - 1`.
    pub compr_data_size: u64,
}

/// Fill `*out` with what the store holds (a `zsmem_store_memory`);
/// `out_size` is `sizeof *out` as the caller compiled it. Returns 0 or
/// `-EINVAL` (NULL argument, `store` not live).
///
/// # Safety
/// `store` may be any value (it is looked up, never dereferenced); `out`
/// is NULL or writable for `out_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_get_memory(
    store: *const zsmem_store,
    out: *mut zsmem_store_memory,
    out_size: usize,
) -> c_int {
    guard("zsmem_store_get_memory", || {
        let store = store_ref(store)?;
        out_ptr(out, "out")?;
        let s = store.pool().stats();
        let pool_bytes = s.bytes_held() as u64;
        let cached_bytes = (s.cached_pages * s.page_size) as u64;
        let metadata_bytes = store.metadata_bytes() as u64;
        let memory = zsmem_store_memory {
            pool_bytes,
            cached_bytes,
            metadata_bytes,
            all_in_bytes: pool_bytes + cached_bytes + metadata_bytes,
            compr_data_size: store.mm_stat().compr_data_size,
        };
        // SAFETY: the caller promises `out_size` writable bytes at `out`.
        unsafe { write_sized(out, out_size, &memory) }?;
        Ok(0)
    })
}

/// zram's `mm_stat`: its nine fields in its order, in bytes or pages as
/// zram reports them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct zsmem_mm_stat {
    /// Bytes of pages stored, before compression (same-filled included).
    pub orig_data_size: u64,
    /// Bytes of the stored objects (a huge page counts a whole page).
    pub compr_data_size: u64,
    /// Bytes of pool pages: the memory the store holds for data.
    pub mem_used_total: u64,
    /// The pool's memory limit in bytes, 0 if none.
    pub mem_limit: u64,
    /// Highest `mem_used_total` so far.
    pub mem_used_max: u64,
    /// Slots holding a same-filled page.
    pub same_pages: u64,
    /// Pages freed by compaction.
    pub pages_compacted: u64,
    /// Slots holding a huge (uncompressed) page.
    pub huge_pages: u64,
    /// Huge pages stored since the store was made.
    pub huge_pages_since: u64,
}

impl From<MmStat> for zsmem_mm_stat {
    fn from(m: MmStat) -> Self {
        zsmem_mm_stat {
            orig_data_size: m.orig_data_size,
            compr_data_size: m.compr_data_size,
            mem_used_total: m.mem_used_total,
            mem_limit: m.mem_limit,
            mem_used_max: m.mem_used_max,
            same_pages: m.same_pages,
            pages_compacted: m.pages_compacted,
            huge_pages: m.huge_pages,
            huge_pages_since: m.huge_pages_since,
        }
    }
}

/// Fill `*out` with the store's `mm_stat`. Returns 0 or `-EINVAL` (NULL
/// argument).
///
/// # Safety
/// `store` may be any value (it is looked up, never dereferenced); `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_mm_stat(
    store: *const zsmem_store,
    out: *mut zsmem_mm_stat,
) -> c_int {
    guard("zsmem_store_mm_stat", || {
        let store = store_ref(store)?;
        let out = out_ptr(out, "out")?;
        // SAFETY: non-NULL and, per the caller, writable and aligned.
        unsafe { out.write(store.mm_stat().into()) };
        Ok(0)
    })
}

/// Mark idle every slot holding an object that was not read or written for
/// at least `age_seconds` (zram's `echo SECONDS > idle`); 0 marks every such
/// slot (`echo all > idle`). A later read or write clears the mark. Returns
/// the slots marked, or `-EINVAL` (`store` not live, or an age other than 0
/// on a store made with `track_access_time` 0).
///
/// # Safety
/// `store` may be any value: it is looked up, never dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_mark_idle(store: *mut zsmem_store, age_seconds: u64) -> i64 {
    guard("zsmem_store_mark_idle", || {
        let store = store_ref(store)?;
        // 0 is "all" (None), which needs no access times: Some(0) marked
        // the same slots but was refused with track_access_time off.
        let age = (age_seconds != 0).then(|| Duration::from_secs(age_seconds));
        let marked = store.mark_idle(age)?;
        Ok(i64::try_from(marked).unwrap_or(i64::MAX))
    })
}

/// The slots marked idle now (by `zsmem_store_mark_idle`, not read or
/// written since), or `-EINVAL` (`store` not live). Walks every slot.
///
/// # Safety
/// `store` may be any value: it is looked up, never dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_idle_pages(store: *const zsmem_store) -> i64 {
    guard("zsmem_store_idle_pages", || {
        let idle = store_ref(store)?.idle_pages();
        Ok(i64::try_from(idle).unwrap_or(i64::MAX))
    })
}

/// Recompress the slots `which` picks (a `ZSMEM_SELECT_*` other than
/// `ZSMEM_SELECT_INCOMPRESSIBLE`) with the store's secondary codec
/// (`recompress_codec` of its configuration), only objects of at least
/// `threshold` bytes (0: any). A new object is kept only if it lands in a
/// smaller size class; a slot no codec shrinks is marked incompressible
/// and not tried again. Returns the slots recompressed, or `-EINVAL`
/// (`store` not live, a bad `which`, no secondary codec configured).
/// `zsmem_store_recompress_report` does the same and says more.
///
/// # Safety
/// `store` may be any value: it is looked up, never dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_recompress(
    store: *mut zsmem_store,
    which: u32,
    threshold: usize,
) -> i64 {
    guard("zsmem_store_recompress", || {
        let done = recompress(&*store_ref(store)?, which, threshold)?;
        Ok(i64::try_from(done.recompressed).unwrap_or(i64::MAX))
    })
}

fn recompress(store: &PageStore, which: u32, threshold: usize) -> Result<RecompressStat, Fail> {
    if which == ZSMEM_SELECT_INCOMPRESSIBLE {
        // The header allows every selection but this one (no codec
        // shrinks those slots): it selected nothing and returned 0.
        return Err(Fail::invalid(
            "which ZSMEM_SELECT_INCOMPRESSIBLE: incompressible slots are not recompressed",
        ));
    }
    let which = selection(which)?;
    // `priority` is left to the store: C configures one secondary codec.
    Ok(store.recompress(RecompressRequest {
        which,
        threshold: (threshold != 0).then_some(threshold),
        priority: None,
    })?)
}

/// What recompression did: one call's (`zsmem_store_recompress_report`)
/// or the store's since it was made (`zsmem_store_recompress_stat`). Fields
/// may be appended in later versions; the calls write only as many bytes as
/// the caller's struct has.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct zsmem_recompress_stat {
    /// Slots that matched the request and were tried.
    pub examined: u64,
    /// Slots whose object was replaced by a smaller one (what
    /// `zsmem_store_recompress` returns).
    pub recompressed: u64,
    /// Object bytes saved: the old objects' lengths minus the new ones'.
    pub bytes_saved: u64,
    /// Slots marked incompressible: no secondary codec reached a smaller
    /// size class, so they are not tried again (and
    /// `ZSMEM_SELECT_INCOMPRESSIBLE` writes them back).
    pub marked_incompressible: u64,
}

/// The sizes of the earlier versions of `zsmem_recompress_stat` (none yet).
const RECOMPRESS_STAT_VERSIONS: [usize; 0] = [];

impl From<RecompressStat> for zsmem_recompress_stat {
    fn from(s: RecompressStat) -> Self {
        zsmem_recompress_stat {
            examined: s.examined,
            recompressed: s.recompressed,
            bytes_saved: s.bytes_saved,
            marked_incompressible: s.marked_incompressible,
        }
    }
}

/// `zsmem_store_recompress`, and fill `*out` with what this call did:
/// `out_size` is `sizeof *out` as the caller compiled it. Returns the slots
/// recompressed (`out->recompressed`), or `-EINVAL` (the errors of
/// `zsmem_store_recompress`, `out` NULL, or `out_size` neither an earlier
/// version's size of `zsmem_recompress_stat` nor at least this one's, up
/// to 4096; nothing is recompressed then).
///
/// # Safety
/// `store` may be any value (it is looked up, never dereferenced); `out`
/// is NULL or writable for `out_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_recompress_report(
    store: *mut zsmem_store,
    which: u32,
    threshold: usize,
    out: *mut zsmem_recompress_stat,
    out_size: usize,
) -> i64 {
    guard("zsmem_store_recompress_report", || {
        let store = store_ref(store)?;
        let out = out_struct(out, out_size, &RECOMPRESS_STAT_VERSIONS, "out")?;
        let done = zsmem_recompress_stat::from(recompress(&store, which, threshold)?);
        // SAFETY: the caller promises `out_size` writable bytes at `out`.
        unsafe { write_sized(out, out_size, &done) }?;
        Ok(i64::try_from(done.recompressed).unwrap_or(i64::MAX))
    })
}

/// Fill `*out` with what recompression has done since the store was made
/// (the sums of every call's report); `out_size` is `sizeof *out` as the
/// caller compiled it. Returns 0 or `-EINVAL` (`store` not live, `out`
/// NULL, `out_size` neither an earlier version's size of the struct nor
/// at least this one's, up to 4096).
///
/// # Safety
/// `store` may be any value (it is looked up, never dereferenced); `out`
/// is NULL or writable for `out_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_recompress_stat(
    store: *const zsmem_store,
    out: *mut zsmem_recompress_stat,
    out_size: usize,
) -> c_int {
    guard("zsmem_store_recompress_stat", || {
        let store = store_ref(store)?;
        let out = out_struct(out, out_size, &RECOMPRESS_STAT_VERSIONS, "out")?;
        let stat = zsmem_recompress_stat::from(store.recompress_stat());
        // SAFETY: the caller promises `out_size` writable bytes at `out`.
        unsafe { write_sized(out, out_size, &stat) }?;
        Ok(0)
    })
}

/// Use the file at `path` as the store's backing file for writeback
/// (zram's `backing_dev`), once per store: a regular file (created with
/// mode 0600, or an empty one, or an earlier store's backing file) or a
/// block device, locked for the store's life. Returns 0, `-EINVAL` (NULL
/// argument, a path that is not UTF-8, a store that already has one) or
/// `-EIO` (the file cannot be used: in use by another store, someone
/// else's file, not a regular file or block device; the message says why).
///
/// # Safety
/// `store` may be any value (it is looked up, never dereferenced); `path`
/// is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_set_backing_file(
    store: *mut zsmem_store,
    path: *const c_char,
) -> c_int {
    guard("zsmem_store_set_backing_file", || {
        let store = store_ref(store)?;
        if path.is_null() {
            return Err(Fail::invalid("path is NULL"));
        }
        // SAFETY: non-NULL and, per the caller, NUL-terminated.
        let path = unsafe { CStr::from_ptr(path) };
        let path = path
            .to_str()
            .map_err(|_| Fail::invalid("path is not valid UTF-8"))?;
        store.set_backing_file(path)?;
        Ok(0)
    })
}

/// Write the pages of the slots `which` picks (a `ZSMEM_SELECT_*`) to the
/// backing file and free their memory (zram's `echo idle > writeback`),
/// at most `max_pages` of them (0: no bound but the writeback limit). A
/// read fetches a page back transparently. Returns the pages written,
/// `-EINVAL` (`store` not live, a bad `which`), `-ENODEV` (no backing file)
/// or `-EIO` (an I/O error; that slot is left as it was).
/// `zsmem_store_writeback_report` also says whether the limit stopped it.
///
/// # Safety
/// `store` may be any value: it is looked up, never dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_writeback(
    store: *mut zsmem_store,
    which: u32,
    max_pages: u64,
) -> i64 {
    guard("zsmem_store_writeback", || {
        let done = writeback(&*store_ref(store)?, which, max_pages)?;
        Ok(i64::try_from(done.written).unwrap_or(i64::MAX))
    })
}

fn writeback(store: &PageStore, which: u32, max_pages: u64) -> Result<WritebackReport, Fail> {
    let which = selection(which)?;
    Ok(store.writeback(WritebackRequest {
        which,
        max_pages: (max_pages != 0).then_some(max_pages),
    })?)
}

/// What one writeback did (`zsmem_store_writeback_report`). Fields may be
/// appended in later versions; the call writes only as many bytes as the
/// caller's struct has.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct zsmem_writeback_report {
    /// Pages written to the backing file (what `zsmem_store_writeback`
    /// returns).
    pub written: u64,
    /// 1 if the store's writeback limit (`zsmem_store_set_writeback_limit`)
    /// ran out before every selected slot was written, else 0.
    pub limit_reached: u64,
}

/// The sizes of the earlier versions of `zsmem_writeback_report` (none yet).
const WRITEBACK_REPORT_VERSIONS: [usize; 0] = [];

/// `zsmem_store_writeback`, and fill `*out` with what this call did:
/// `out_size` is `sizeof *out` as the caller compiled it. Returns the pages
/// written (`out->written`), or the errors of `zsmem_store_writeback`, or
/// `-EINVAL` for `out` NULL or `out_size` neither an earlier version's
/// size of `zsmem_writeback_report` nor at least this one's, up to 4096
/// (nothing is written back then). On `-EIO` the
/// pages written before the error stay written, and `*out` is not filled.
///
/// # Safety
/// `store` may be any value (it is looked up, never dereferenced); `out`
/// is NULL or writable for `out_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_writeback_report(
    store: *mut zsmem_store,
    which: u32,
    max_pages: u64,
    out: *mut zsmem_writeback_report,
    out_size: usize,
) -> i64 {
    guard("zsmem_store_writeback_report", || {
        let store = store_ref(store)?;
        let out = out_struct(out, out_size, &WRITEBACK_REPORT_VERSIONS, "out")?;
        let done = writeback(&store, which, max_pages)?;
        let report = zsmem_writeback_report {
            written: done.written,
            limit_reached: u64::from(done.limit_reached),
        };
        // SAFETY: the caller promises `out_size` writable bytes at `out`.
        unsafe { write_sized(out, out_size, &report) }?;
        Ok(i64::try_from(done.written).unwrap_or(i64::MAX))
    })
}

/// Bound writeback to `pages` more pages (zram's `writeback_limit` with
/// `writeback_limit_enable`), with `enable` 1; `enable` 0 lifts the bound
/// (`pages` is then ignored). Returns 0 or `-EINVAL` (`store` not live,
/// `enable` not 0 or 1).
///
/// # Safety
/// `store` may be any value: it is looked up, never dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_set_writeback_limit(
    store: *mut zsmem_store,
    enable: u32,
    pages: u64,
) -> c_int {
    guard("zsmem_store_set_writeback_limit", || {
        let store = store_ref(store)?;
        let limit = match enable {
            0 => None,
            1 => Some(pages),
            other => return Err(Fail::invalid(format!("enable is {other}, not 0 or 1"))),
        };
        store.set_writeback_limit(limit);
        Ok(0)
    })
}

/// The writeback limit (`zsmem_store_set_writeback_limit`): returns 1 if
/// one is set, with `*pages_out` (unless NULL) the pages writeback may still
/// write (each page written takes one), or 0 if writeback is unbounded
/// (`*pages_out` gets 0); `-EINVAL` if `store` is not live.
///
/// # Safety
/// `store` may be any value (it is looked up, never dereferenced);
/// `pages_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_get_writeback_limit(
    store: *const zsmem_store,
    pages_out: *mut u64,
) -> c_int {
    guard("zsmem_store_get_writeback_limit", || {
        let limit = store_ref(store)?.writeback_limit();
        if !pages_out.is_null() {
            // SAFETY: non-NULL and, per the caller, writable.
            unsafe { pages_out.write(limit.unwrap_or(0)) };
        }
        Ok(c_int::from(limit.is_some()))
    })
}

/// Train a zstd dictionary of at most `max_size` bytes from up to
/// `max_samples` pages now stored, and compress new pages with zstd and it
/// from now on (stored pages keep their codec). Returns the dictionary's
/// size in bytes, `-EINVAL` (`store` not live, too few or too uniform
/// samples, a store that has taken its 15 dictionaries) or `-EIO` (a
/// stored page that does not decompress).
///
/// # Safety
/// `store` may be any value: it is looked up, never dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_train_dictionary(
    store: *mut zsmem_store,
    max_size: usize,
    max_samples: usize,
) -> i64 {
    guard("zsmem_store_train_dictionary", || {
        let store = store_ref(store)?;
        let dict = store.train_dictionary(max_size, max_samples)?;
        Ok(i64::try_from(dict.len()).unwrap_or(i64::MAX))
    })
}

/// Compress new pages with zstd and the dictionary in the `len` bytes at
/// `dictionary` from now on: a zstd dictionary as `zstd --train` writes
/// one, or any other bytes (without zstd's dictionary magic number) as a
/// raw-content dictionary; the bytes are copied. The level is the store's
/// codec's if it is zstd, else 3. Stored pages keep their codec, and a
/// store takes at most 15 dictionaries over its life (trained ones
/// included; one fewer per secondary codec). Returns 0 or `-EINVAL`
/// (`store` not live, `dictionary` NULL, `len` 0, bytes zstd cannot load
/// as a dictionary, a store that has taken its last).
///
/// # Safety
/// `store` may be any value (it is looked up, never dereferenced);
/// `dictionary` is NULL or readable for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_set_dictionary(
    store: *mut zsmem_store,
    dictionary: *const c_void,
    len: usize,
) -> c_int {
    guard("zsmem_store_set_dictionary", || {
        let store = store_ref(store)?;
        // SAFETY: the caller promises `len` readable bytes at non-NULL
        // `dictionary`.
        let bytes = unsafe { bytes(dictionary, len, "dictionary") }?;
        store.set_dictionary(ZstdDictionary::from_bytes(bytes.to_vec())?)?;
        Ok(0)
    })
}

/// zram's `io_stat`: requests that failed or were refused, and pages
/// discarded.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct zsmem_io_stat {
    /// Reads that failed (a corrupt object or backing block, an I/O error).
    pub failed_reads: u64,
    /// Writes that failed (the memory limit, the OS refusing memory).
    pub failed_writes: u64,
    /// Requests refused as malformed: a slot out of range, a buffer that
    /// is not one page.
    pub invalid_io: u64,
    /// Pages discarded.
    pub notify_free: u64,
}

impl From<IoStat> for zsmem_io_stat {
    fn from(s: IoStat) -> Self {
        zsmem_io_stat {
            failed_reads: s.failed_reads,
            failed_writes: s.failed_writes,
            invalid_io: s.invalid_io,
            notify_free: s.notify_free,
        }
    }
}

/// zram's `bd_stat`, in pages: the backing file's use.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct zsmem_bd_stat {
    /// Pages held in the backing file now.
    pub bd_count: u64,
    /// Pages read back from the backing file.
    pub bd_reads: u64,
    /// Pages written to the backing file.
    pub bd_writes: u64,
}

impl From<BdStat> for zsmem_bd_stat {
    fn from(s: BdStat) -> Self {
        zsmem_bd_stat {
            bd_count: s.bd_count,
            bd_reads: s.bd_reads,
            bd_writes: s.bd_writes,
        }
    }
}

/// Fill `*out` with the store's `io_stat`; `out_size` is `sizeof *out` as
/// the caller compiled it. Returns 0 or `-EINVAL` (NULL argument).
///
/// # Safety
/// `store` may be any value (it is looked up, never dereferenced); `out`
/// is NULL or writable for `out_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_io_stat(
    store: *const zsmem_store,
    out: *mut zsmem_io_stat,
    out_size: usize,
) -> c_int {
    guard("zsmem_store_io_stat", || {
        let store = store_ref(store)?;
        let stat = zsmem_io_stat::from(store.io_stat());
        // SAFETY: the caller promises `out_size` writable bytes at `out`.
        unsafe { write_sized(out, out_size, &stat) }?;
        Ok(0)
    })
}

/// Fill `*out` with the store's `bd_stat`; `out_size` is `sizeof *out` as
/// the caller compiled it. Returns 0 or `-EINVAL` (NULL argument).
///
/// # Safety
/// `store` may be any value (it is looked up, never dereferenced); `out`
/// is NULL or writable for `out_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_store_bd_stat(
    store: *const zsmem_store,
    out: *mut zsmem_bd_stat,
    out_size: usize,
) -> c_int {
    guard("zsmem_store_bd_stat", || {
        let store = store_ref(store)?;
        let stat = zsmem_bd_stat::from(store.bd_stat());
        // SAFETY: the caller promises `out_size` writable bytes at `out`.
        unsafe { write_sized(out, out_size, &stat) }?;
        Ok(0)
    })
}
