//! `zsmem disk`: a compressed RAM disk backed by zsmem's `PageStore`, with
//! ext4 on it, mounted where asked; prints zram's `mm_stat` while it runs
//! and takes everything apart on Ctrl-C or `SIGTERM`.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use zsmem::{Codec, PageStore, PageStoreConfig};
use zsmem_lab::blockdev::{BlockDevError, Ext4Device, StoreBackend};

use crate::units::parse_size;
use crate::{CliError, CliResult};

/// Arguments of `zsmem disk`.
#[derive(clap::Args, Debug, Clone)]
pub struct DiskArgs {
    /// Size of the disk: a multiple of 4K, with K, M or G (binary).
    #[arg(long, default_value = "4G")]
    pub size: String,
    /// Where to mount it: an existing empty directory, one disk at a time
    /// (it is locked while the disk runs; a second disk there is refused).
    /// While the disk is mounted, the filesystem's root (owned by root,
    /// mode 0755) hides the directory's own owner and permissions.
    #[arg(long)]
    pub mount: PathBuf,
    /// Codec: lz4 (default), zstd or zstd:LEVEL.
    #[arg(long, default_value = "lz4")]
    pub codec: String,
    /// Filesystem made on it (only ext4, mounted with discard).
    #[arg(long, default_value = "ext4")]
    pub fs: String,
    /// Seconds between two mm_stat lines.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub interval: u64,
    /// Request threads of the device file.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub threads: u64,
}

/// The kernel's `mm_stat` columns, in its order.
pub const MM_STAT_HEADER: &str = "orig_data_size compr_data_size mem_used_total mem_limit mem_used_max same_pages pages_compacted huge_pages huge_pages_since";

/// One `mm_stat` line, formatted as zram's file is.
pub fn mm_stat_line(m: &zsmem::store::MmStat) -> String {
    format!(
        "{:8} {:8} {:8} {:8} {:8} {:8} {:8} {:8} {:8}",
        m.orig_data_size,
        m.compr_data_size,
        m.mem_used_total,
        m.mem_limit,
        m.mem_used_max,
        m.same_pages,
        m.pages_compacted,
        m.huge_pages,
        m.huge_pages_since
    )
}

/// The disk's size in bytes from `--size`.
fn disk_bytes(size: &str) -> CliResult<u64> {
    let b = parse_size(size).map_err(|e| CliError::Usage(format!("--size: {e}")))? as u64;
    if b < (16 << 20) || !b.is_multiple_of(4096) {
        return Err(CliError::Usage(format!(
            "--size {size}: needs a multiple of 4K of at least 16M"
        )));
    }
    Ok(b)
}

/// The store of a disk of `bytes` bytes: the page store's own defaults
/// (log placement, what `compare` calls zsmem), 4 KiB slots.
fn store_config(bytes: u64, codec: Codec) -> PageStoreConfig {
    PageStoreConfig {
        slots: (bytes / 4096) as usize,
        codec,
        ..Default::default()
    }
}

/// Run `zsmem disk` until a signal ends it (or the disk is unmounted).
pub fn run(a: &DiskArgs) -> CliResult {
    let codec = Codec::parse(&a.codec)?;
    let bytes = disk_bytes(&a.size)?;
    if a.fs != "ext4" {
        return Err(CliError::Usage(format!(
            "unknown filesystem `{}`: use ext4",
            zsmem_lab::text::shown(&a.fs)
        )));
    }
    let dir = std::fs::canonicalize(&a.mount).map_err(|e| {
        CliError::Usage(format!(
            "--mount {}: {e}",
            zsmem_lab::text::shown_path(&a.mount)
        ))
    })?;
    // Taken (locked, checked empty) by Ext4Device before anything is
    // mounted: a second disk on the directory is refused.
    let store = Arc::new(PageStore::new(store_config(bytes, codec))?);
    let backend = StoreBackend::new(Arc::clone(&store)).map_err(CliError::Usage)?;
    let dev = match Ext4Device::on_backend(backend, a.threads as usize, Some(&dir)) {
        Ok(d) => d,
        Err(BlockDevError::Unavailable(why)) => {
            return Err(CliError::Usage(format!("zsmem disk needs {why}")));
        }
        Err(BlockDevError::Usage(why)) => return Err(CliError::Usage(format!("--mount {why}"))),
        Err(e) => return Err(CliError::Usage(e.to_string())),
    };
    eprintln!(
        "zsmem disk: {} MiB, {}, ext4 on {} mounted at {}; Ctrl-C unmounts and frees it",
        bytes >> 20,
        store.codec().name(),
        dev.device().display(),
        dev.dir().display()
    );
    let mut out = std::io::stdout();
    let mut say = |line: &str| writeln!(out, "{line}").and_then(|()| out.flush());
    say(MM_STAT_HEADER)
        .map_err(|e| CliError::Usage(format!("writing to stdout: {e}; taking the disk apart")))?;
    loop {
        if let Err(e) = say(&mm_stat_line(&store.mm_stat())) {
            // A closed pipe (`zsmem disk | head`): the signal handler
            // takes everything apart too; returning drops the device.
            eprintln!("zsmem disk: writing to stdout: {e}; taking it apart");
            return Ok(());
        }
        std::thread::sleep(Duration::from_secs(a.interval));
        if !dev.is_mounted() {
            eprintln!(
                "zsmem disk: {} was unmounted; taking it apart",
                dir.display()
            );
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_disk_stores_as_compare_calls_zsmem() {
        let c = store_config(4 << 30, Codec::Lz4);
        assert_eq!(c.slots, 1 << 20);
        assert!(matches!(c.pool.placement, zsmem::Placement::Log { .. }));
        assert_eq!(
            format!("{:?}", c.pool),
            format!("{:?}", PageStoreConfig::default().pool)
        );
    }

    #[test]
    fn sizes_are_checked() {
        assert_eq!(disk_bytes("4G").unwrap(), 4 << 30);
        assert!(disk_bytes("1M").is_err());
        assert!(disk_bytes("16777217").is_err());
        assert!(disk_bytes("x").is_err());
    }

    #[test]
    fn mm_stat_has_the_kernels_nine_columns() {
        assert_eq!(MM_STAT_HEADER.split(' ').count(), 9);
    }
}
