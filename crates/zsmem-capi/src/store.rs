//! `zsmem_store_*`: zram's semantics in-process, numbered slots of
//! page-sized blocks kept compressed in a pool.

use std::ffi::{c_int, c_void};
use std::mem::size_of;
use std::sync::Arc;

use zsmem_core::{Codec, MmStat, PageStore, PageStoreConfig};

use crate::error::{Fail, bytes, guard, init_sized, out_buffer, out_ptr, read_sized};
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

/// How to make a page store (the pool under it has its own
/// `zsmem_pool_config`). Initialise it with `zsmem_store_config_default`
/// (which sets `size` and every default), then change fields.
///
/// Defaults: 262144 slots (1 GiB of 4 KiB pages), LZ4, zstd level 3.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zsmem_store_config {
    /// `sizeof(zsmem_store_config)` as the caller compiled it; set by
    /// `zsmem_store_config_default`. Lets later versions append fields.
    pub size: usize,
    /// Number of slots, at least 1 (zram's disksize / page size).
    pub slots: usize,
    /// One of `ZSMEM_CODEC_*`.
    pub codec: u32,
    /// Level for `ZSMEM_CODEC_ZSTD`, 1 to 22 (ignored for LZ4).
    pub zstd_level: i32,
}

// Versioned structs must have no padding (see `read_sized`).
const _: () = assert!(size_of::<zsmem_store_config>() == 2 * size_of::<usize>() + 2 * 4);

fn default_config() -> zsmem_store_config {
    let d = PageStoreConfig::default();
    zsmem_store_config {
        size: size_of::<zsmem_store_config>(),
        slots: d.slots,
        codec: ZSMEM_CODEC_LZ4,
        zstd_level: 3,
    }
}

/// Fill `*config` with the defaults, for a struct of `size` bytes (pass
/// `sizeof *config`; the `zsmem_store_config_default` macro does). Returns
/// 0, or `-EINVAL` if `config` is NULL or `size` is not a struct size this
/// library knows.
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
        unsafe { init_sized(config, size, default_config(), "config") }?;
        Ok(0)
    })
}

/// Make a page store from `*config` over a pool made from `*pool_config`
/// (whose `page_size` is the store's page size and whose `memory_limit`
/// bounds it), and store it in `*store_out`. Returns 0, or `-EINVAL` for a
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
        let c = unsafe { read_sized(config, "config", "zsmem_store_config_default") }?;
        // SAFETY: as above.
        let p = unsafe { read_sized(pool_config, "pool_config", "zsmem_pool_config_default") }?;
        let codec = match c.codec {
            ZSMEM_CODEC_LZ4 => Codec::Lz4,
            ZSMEM_CODEC_ZSTD if (1..=22).contains(&c.zstd_level) => Codec::Zstd {
                level: c.zstd_level,
            },
            ZSMEM_CODEC_ZSTD => {
                return Err(Fail::invalid(format!(
                    "invalid configuration: zstd_level {} is not in 1..=22",
                    c.zstd_level
                )));
            }
            other => {
                return Err(Fail::invalid(format!(
                    "invalid configuration: codec {other} is not a ZSMEM_CODEC_* value"
                )));
            }
        };
        // Start from the defaults so that fields added to PageStoreConfig
        // later keep their default here.
        #[allow(clippy::field_reassign_with_default)]
        let cfg = {
            let mut cfg = PageStoreConfig::default();
            cfg.slots = c.slots;
            cfg.codec = codec;
            cfg.pool = pool::pool_config(&p)?;
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
fn store_ref(store: *const zsmem_store) -> Result<Arc<PageStore>, Fail> {
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
        if len != store.page_size() {
            // Refused before the buffer is touched.
            return Err(zsmem_core::Error::WrongPageSize {
                len,
                page_size: store.page_size(),
            }
            .into());
        }
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
