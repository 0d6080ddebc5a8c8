//! `zsmem_region_*`: compressed memory a C program uses as ordinary memory
//! (Linux): a mapping kept within a resident budget, its cold units
//! compressed, brought back on access by the faulting thread (in a SIGBUS
//! handler) or a fault-handling thread.

use std::ffi::{c_int, c_void};
use std::mem::size_of;
use std::sync::Arc;
use std::time::Duration;

use zsmem_core::region::{FaultMode, Region, RegionConfig};

use crate::error::{Fail, guard, init_sized, out_ptr, read_sized, write_sized};
use crate::registry::Registry;
use crate::store::{ZSMEM_CODEC_LZ4, ZSMEM_CODEC_ZSTD};

/// A region (opaque). Made by `zsmem_region_new`, released by
/// `zsmem_region_destroy`. Its memory (`zsmem_region_ptr`) may be used by
/// any thread; the pointer is a token for a registry entry, never
/// dereferenced: a destroyed or forged pointer is `-EINVAL`.
pub struct zsmem_region {
    _opaque: [u8; 0],
}

/// The live regions.
static REGIONS: Registry<Region> = Registry::new("region");

/// How to make a region. Initialise it with `zsmem_region_config_default`
/// (which sets `size` and every default), then change fields.
///
/// Defaults: 64 MiB, a budget of 16 MiB, 4 KiB units, LZ4, headroom a 64th
/// of the budget, 50 microseconds of spinning, copies of resident units
/// kept without a cap (`keep_copies` `SIZE_MAX`), 16 KiB of readahead,
/// faults served by the faulting thread (`ZSMEM_FAULTS_SIGNAL`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zsmem_region_config {
    /// `sizeof(zsmem_region_config)` as the caller compiled it; set by
    /// `zsmem_region_config_default`. Lets later versions append fields.
    pub size: usize,
    /// Bytes of the region, rounded up to a whole unit; at least 1.
    pub bytes: usize,
    /// Most bytes of units resident at once (whole units, at least one).
    pub budget: usize,
    /// Bytes of a unit: a power of two from 4096 to 65536.
    pub unit: usize,
    /// The evictor thread evicts down to the budget less this many bytes;
    /// 0: a 64th of the budget, at least one unit.
    pub headroom: usize,
    /// `ZSMEM_CODEC_LZ4` or `ZSMEM_CODEC_ZSTD`.
    pub codec: u32,
    /// Level for `ZSMEM_CODEC_ZSTD`, 1 to 22.
    pub zstd_level: i32,
    /// Microseconds the fault thread keeps reading after a burst before
    /// it sleeps (0: at once); at most 1,000,000 is used (a larger value
    /// is taken as one second).
    pub spin_us: u64,
    /// The most bytes of the store spent on compressed copies of resident
    /// units: `SIZE_MAX` keeps every copy (a unit brought back and evicted
    /// again unwritten is dropped without compressing), 0 none (a unit's
    /// slot is freed when it is brought back, as zram's swap-in does), and
    /// a value between is a cap (see `RegionConfig::keep_copies`).
    pub keep_copies: usize,
    /// Bytes of evicted units after a sequential fault's that the fault
    /// thread restores ahead of the reader (0: none; default 16 KiB; see
    /// `RegionConfig::readahead`).
    pub readahead: usize,
    /// Who serves faults: `ZSMEM_FAULTS_SIGNAL` (the default: the faulting
    /// thread itself, in a SIGBUS handler zsmem installs for the process
    /// at the first such region, chaining to the handler installed before
    /// it for every other SIGBUS; at most 64 such regions at once) or
    /// `ZSMEM_FAULTS_THREAD` (a fault-handling thread; nothing
    /// process-wide). With signal faults the program must not block SIGBUS
    /// in threads that touch the region, nor replace the handler without
    /// chaining to it, nor touch evicted region memory from its own signal
    /// handlers. See `FaultMode`.
    pub faults: u32,
    /// Must be 0.
    pub reserved: u32,
}

/// `zsmem_region_config.faults`: the faulting thread serves its fault in a
/// SIGBUS handler (`FaultMode::Signal`).
pub const ZSMEM_FAULTS_SIGNAL: u32 = 0;
/// `zsmem_region_config.faults`: a fault-handling thread serves faults
/// (`FaultMode::Thread`).
pub const ZSMEM_FAULTS_THREAD: u32 = 1;

const _: () = assert!(size_of::<zsmem_region_config>() == 7 * size_of::<usize>() + 24);

/// Earlier sizes of `zsmem_region_config` (old-headers/README.md): before
/// `keep_copies` and `readahead`; before `faults`.
pub(crate) const REGION_CONFIG_VERSIONS: [usize; 2] =
    [5 * size_of::<usize>() + 16, 7 * size_of::<usize>() + 16];

fn default_config() -> zsmem_region_config {
    let d = RegionConfig::default();
    zsmem_region_config {
        size: size_of::<zsmem_region_config>(),
        bytes: d.size,
        budget: d.budget,
        unit: d.unit,
        headroom: d.headroom,
        codec: ZSMEM_CODEC_LZ4,
        zstd_level: 3,
        spin_us: d.spin.as_micros() as u64,
        keep_copies: d.keep_copies,
        readahead: d.readahead,
        faults: ZSMEM_FAULTS_SIGNAL,
        reserved: 0,
    }
}

/// A region's statistics (`zsmem_region_get_stats`). Fields may be appended.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zsmem_region_stats {
    /// Bytes of the region.
    pub bytes: u64,
    /// Bytes of a unit.
    pub unit: u64,
    /// The resident budget, bytes.
    pub budget: u64,
    /// Bytes of units mapped now.
    pub resident_bytes: u64,
    /// Units evicted now (their only copy compressed).
    pub compressed_units: u64,
    /// Bytes of compressed objects the store holds.
    pub stored_bytes: u64,
    /// Memory the store holds for them, metadata included.
    pub store_memory: u64,
    /// Missing-page faults served.
    pub faults: u64,
    /// Write-protect faults (first writes to clean units).
    pub write_faults: u64,
    /// Units never written installed as zeros.
    pub zero_fills: u64,
    /// Evicted units brought back.
    pub promotions: u64,
    /// Units dropped from the region.
    pub evictions: u64,
    /// Of those, dropped without compressing (their copy was current).
    pub clean_drops: u64,
    /// Units compressed.
    pub compressions: u64,
    /// Operations the kernel refused.
    pub errors: u64,
    /// Fault service time quantiles, nanoseconds: p50.
    pub fault_p50_ns: u64,
    /// p99.
    pub fault_p99_ns: u64,
    /// p99.9.
    pub fault_p999_ns: u64,
    /// Bytes of compressed copies of resident units the store holds now.
    pub copy_bytes: u64,
    /// Copies of resident units discarded for `keep_copies`.
    pub copies_dropped: u64,
    /// Evicted units brought back ahead of a sequential read
    /// (`readahead`), without a fault on them.
    pub readahead: u64,
    /// Nanoseconds spent compressing units (and storing them). This field
    /// and the four after it were appended: an older caller's smaller
    /// struct gets none of them.
    pub compress_ns: u64,
    /// Nanoseconds spent decompressing units (and reading them from the
    /// store).
    pub decompress_ns: u64,
    /// Evictions abandoned because the unit was written while it was being
    /// compressed.
    pub eviction_races: u64,
    /// Evictions made by a fault's own thread, the region being at its
    /// budget when the fault came (the evictor thread had fallen behind).
    pub sync_evictions: u64,
    /// Missing pages found in resident units: the program dropped them
    /// (`madvise(MADV_DONTNEED)`); they read as zeros.
    pub dropped_by_program: u64,
}

/// Fill `*config` with the defaults, for a struct of `size` bytes (pass
/// `sizeof *config`; the `zsmem_region_config_default` macro does).
/// Returns 0, or `-EINVAL` if `config` is NULL or `size` is not the
/// struct's size.
///
/// # Safety
/// `config` is NULL or points to `size` writable bytes, aligned for the
/// struct.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_region_config_init(
    config: *mut zsmem_region_config,
    size: usize,
) -> c_int {
    guard("zsmem_region_config_init", || {
        // SAFETY: the caller promises `size` writable bytes at `config`.
        unsafe {
            init_sized(
                config,
                size,
                &REGION_CONFIG_VERSIONS,
                default_config(),
                "config",
            )
        }?;
        Ok(0)
    })
}

/// Map a region from `*config`, start its evictor thread (and fault thread
/// with `ZSMEM_FAULTS_THREAD`; with `ZSMEM_FAULTS_SIGNAL` the process's
/// SIGBUS handler serves faults, installed at the first such region), and
/// store it in `*region_out`. Returns 0, `-EINVAL` (NULL argument, a
/// configuration not initialised by `zsmem_region_config_default`, a bad
/// size, unit, budget or codec: the message says which), `-ENOMEM` (no
/// mapping), `-EMFILE` (255 pools, stores and regions are alive: a region
/// has a pool of its own), or the kernel's refusal of userfaultfd as its
/// errno (`-EPERM`, `-ENOSYS`, ...; the message names the cause and the
/// sysctl `vm.unprivileged_userfaultfd`).
///
/// # Safety
/// `config` is NULL or points to an initialised struct; `region_out` is
/// NULL or points to writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_region_new(
    config: *const zsmem_region_config,
    region_out: *mut *mut zsmem_region,
) -> c_int {
    guard("zsmem_region_new", || {
        let region_out = out_ptr(region_out, "region_out")?;
        // SAFETY: the caller promises NULL or an initialised config.
        let c = unsafe {
            read_sized(
                config,
                "config",
                "zsmem_region_config_default",
                &REGION_CONFIG_VERSIONS,
                default_config(),
            )
        }?;
        let codec = match c.codec {
            ZSMEM_CODEC_LZ4 => zsmem_core::Codec::Lz4,
            ZSMEM_CODEC_ZSTD if (1..=22).contains(&c.zstd_level) => zsmem_core::Codec::Zstd {
                level: c.zstd_level,
            },
            other => {
                return Err(Fail::invalid(format!(
                    "invalid configuration: codec {other} (zstd level {}) is not ZSMEM_CODEC_LZ4 or ZSMEM_CODEC_ZSTD at 1..=22",
                    c.zstd_level
                )));
            }
        };
        let faults = match (c.faults, c.reserved) {
            (ZSMEM_FAULTS_SIGNAL, 0) => FaultMode::Signal,
            (ZSMEM_FAULTS_THREAD, 0) => FaultMode::Thread,
            (faults, reserved) => {
                return Err(Fail::invalid(format!(
                    "invalid configuration: faults {faults} is not ZSMEM_FAULTS_SIGNAL (0) or ZSMEM_FAULTS_THREAD (1), or reserved {reserved} is not 0"
                )));
            }
        };
        let region = Region::new(RegionConfig {
            size: c.bytes,
            budget: c.budget,
            unit: c.unit,
            codec,
            headroom: c.headroom,
            spin: Duration::from_micros(c.spin_us.min(1_000_000)),
            keep_copies: c.keep_copies,
            readahead: c.readahead,
            faults,
            ..RegionConfig::default()
        })?;
        let token = REGIONS.insert(region) as *mut zsmem_region;
        // SAFETY: `region_out` is non-NULL and, per the caller, writable.
        unsafe { region_out.write(token) };
        Ok(0)
    })
}

/// Release a region: its threads stop, threads waiting on its faults are
/// released, and its memory is unmapped. NULL is ignored. No thread may
/// touch the region's memory after (as with `free`); calls on the region
/// already running on other threads finish first.
///
/// # Safety
/// None beyond the signature: the pointer is only looked up.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_region_destroy(region: *mut zsmem_region) {
    let _: c_int = guard("zsmem_region_destroy", || {
        REGIONS.remove(region as usize)?;
        Ok(0)
    });
}

fn region_ref(region: *const zsmem_region) -> Result<Arc<Region>, Fail> {
    REGIONS.get(region as usize)
}

/// The region's memory and its length in bytes: `*ptr_out` (unless NULL)
/// gets its first byte, `*len_out` (unless NULL) its length. Returns 0 or
/// `-EINVAL` (`region` not live).
///
/// # Safety
/// `ptr_out` and `len_out` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_region_ptr(
    region: *const zsmem_region,
    ptr_out: *mut *mut c_void,
    len_out: *mut usize,
) -> c_int {
    guard("zsmem_region_ptr", || {
        let r = region_ref(region)?;
        // SAFETY: each is NULL (skipped) or writable, per the caller.
        unsafe {
            if !ptr_out.is_null() {
                ptr_out.write(r.as_ptr().cast());
            }
            if !len_out.is_null() {
                len_out.write(r.len());
            }
        }
        Ok(0)
    })
}

/// The region's length in bytes, or 0 if `region` is not live (the last
/// error message says so).
///
/// # Safety
/// None: the pointer is only looked up.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_region_len(region: *const zsmem_region) -> usize {
    let r: i64 = guard("zsmem_region_len", || {
        Ok(i64::try_from(region_ref(region)?.len()).unwrap_or(i64::MAX))
    });
    usize::try_from(r).unwrap_or(0)
}

/// Change the resident budget (rounded down to whole units, at least one);
/// the evictor thread brings resident memory under it. Returns 0 or
/// `-EINVAL` (`region` not live, a budget below one unit).
///
/// # Safety
/// None: the pointer is only looked up.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_region_set_budget(
    region: *const zsmem_region,
    budget: usize,
) -> c_int {
    guard("zsmem_region_set_budget", || {
        region_ref(region)?.set_budget(budget)?;
        Ok(0)
    })
}

/// Write the resident budget in bytes to `*budget` (whole units: what
/// `zsmem_region_set_budget` left, or the configuration's; any `size_t`
/// the budget was set to, so it goes out through a pointer rather than the
/// return value). Returns 0, or `-EINVAL` (`region` not live, `budget`
/// NULL).
///
/// # Safety
/// `region` is only looked up; `budget` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_region_get_budget(
    region: *const zsmem_region,
    budget: *mut usize,
) -> c_int {
    guard("zsmem_region_get_budget", || {
        let region = region_ref(region)?;
        let out = out_ptr(budget, "budget")?;
        // SAFETY: non-NULL and, per the caller, writable.
        unsafe { out.write(region.budget()) };
        Ok(0)
    })
}

/// Push cold units out now, on the calling thread: evict (compress into
/// the region's store, or drop a unit whose stored copy is current) until
/// at most `target` bytes of units are resident (rounded down to whole
/// units; 0 evicts all it can) or no unit can be evicted. The budget is not
/// changed, and a unit touched since the last sweep may survive one.
/// Returns the units evicted, or `-EINVAL` (`region` not live). The region
/// stays usable: an evicted unit comes back on its next access.
///
/// # Safety
/// None: the pointer is only looked up.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_region_reclaim(region: *const zsmem_region, target: usize) -> i64 {
    guard("zsmem_region_reclaim", || {
        Ok(i64::try_from(region_ref(region)?.reclaim(target)).unwrap_or(i64::MAX))
    })
}

/// Check the units' states against the region's counters and its store,
/// and the store's invariants (for tests and debugging: call it while no
/// thread touches the region's memory; it holds every unit's lock
/// meanwhile). Returns 0, `-EINVAL` (`region` not live) or `-EIO` naming
/// the broken invariant.
///
/// # Safety
/// None: the pointer is only looked up.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_region_check_invariants(region: *const zsmem_region) -> c_int {
    guard("zsmem_region_check_invariants", || {
        region_ref(region)?.check_invariants()?;
        Ok(0)
    })
}

/// Copy the region's statistics to `*out`, a struct of `out_size` bytes
/// (pass `sizeof *out`). Returns 0 or `-EINVAL`.
///
/// # Safety
/// `out` is NULL or writable for `out_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zsmem_region_get_stats(
    region: *const zsmem_region,
    out: *mut zsmem_region_stats,
    out_size: usize,
) -> c_int {
    guard("zsmem_region_get_stats", || {
        let r = region_ref(region)?;
        out_ptr(out, "out")?;
        let s = r.stats();
        let stats = zsmem_region_stats {
            bytes: s.size as u64,
            unit: s.unit as u64,
            budget: s.budget as u64,
            resident_bytes: s.resident_bytes,
            compressed_units: s.compressed_units,
            stored_bytes: s.stored_bytes,
            store_memory: s.store_memory,
            faults: s.faults,
            write_faults: s.write_faults,
            zero_fills: s.zero_fills,
            promotions: s.promotions,
            evictions: s.evictions,
            clean_drops: s.clean_drops,
            compressions: s.compressions,
            errors: s.errors,
            fault_p50_ns: s.fault_latency.quantile(0.5),
            fault_p99_ns: s.fault_latency.quantile(0.99),
            fault_p999_ns: s.fault_latency.quantile(0.999),
            copy_bytes: s.copy_bytes,
            copies_dropped: s.copies_dropped,
            readahead: s.readahead,
            compress_ns: s.compress_ns,
            decompress_ns: s.decompress_ns,
            eviction_races: s.eviction_races,
            sync_evictions: s.sync_evictions,
            dropped_by_program: s.dropped_by_program,
        };
        // SAFETY: the caller promises `out_size` writable bytes at `out`.
        unsafe { write_sized(out, out_size, &stats) }?;
        Ok(0)
    })
}
