//! The kernel's counters the swap experiment reads: swap-outs and swap-ins
//! (`/proc/vmstat`), zswap's pool (`/proc/meminfo`), the swap areas in use
//! (`/proc/swaps`).

use std::path::PathBuf;

/// `pswpout` and `pswpin` of `/proc/vmstat`: pages swapped out and in
/// since boot, by every process of the machine; and zswap's own
/// (`zswpout`, `zswpin`: pages stored in and loaded from zswap's pool,
/// which never reach the swap device and so are not in `pswpout`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SwapCounters {
    /// Pages written to swap (`pswpout`).
    pub pswpout: u64,
    /// Pages read from swap (`pswpin`).
    pub pswpin: u64,
    /// Pages stored in zswap's pool (`zswpout`).
    pub zswpout: u64,
    /// Pages loaded from zswap's pool (`zswpin`).
    pub zswpin: u64,
}

impl SwapCounters {
    /// The counters in `/proc/vmstat` text.
    pub fn parse(vmstat: &str) -> SwapCounters {
        let mut c = SwapCounters::default();
        for line in vmstat.lines() {
            let mut w = line.split_whitespace();
            let (Some(k), Some(v)) = (w.next(), w.next().and_then(|v| v.parse().ok())) else {
                continue;
            };
            match k {
                "pswpout" => c.pswpout = v,
                "pswpin" => c.pswpin = v,
                "zswpout" => c.zswpout = v,
                "zswpin" => c.zswpin = v,
                _ => {}
            }
        }
        c
    }

    /// The counters now (zeros if `/proc/vmstat` cannot be read).
    pub fn now() -> SwapCounters {
        Self::parse(&std::fs::read_to_string("/proc/vmstat").unwrap_or_default())
    }

    /// What happened since `before`.
    pub fn since(&self, before: &SwapCounters) -> SwapCounters {
        SwapCounters {
            pswpout: self.pswpout.saturating_sub(before.pswpout),
            pswpin: self.pswpin.saturating_sub(before.pswpin),
            zswpout: self.zswpout.saturating_sub(before.zswpout),
            zswpin: self.zswpin.saturating_sub(before.zswpin),
        }
    }
}

/// zswap's figures in `/proc/meminfo`, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZswapMeminfo {
    /// `Zswap:` the memory zswap's pool holds (its zsmalloc pages).
    pub pool: u64,
    /// `Zswapped:` the pages stored in it, uncompressed.
    pub stored: u64,
}

impl ZswapMeminfo {
    /// The two lines of `/proc/meminfo` text (in kB there); `None` when the
    /// kernel has no zswap.
    pub fn parse(meminfo: &str) -> Option<ZswapMeminfo> {
        let field = |name: &str| {
            meminfo.lines().find_map(|l| {
                let rest = l.strip_prefix(name)?.strip_prefix(':')?;
                let kb: u64 = rest.split_whitespace().next()?.parse().ok()?;
                Some(kb * 1024)
            })
        };
        Some(ZswapMeminfo {
            pool: field("Zswap")?,
            stored: field("Zswapped")?,
        })
    }

    /// The figures now.
    pub fn now() -> Option<ZswapMeminfo> {
        Self::parse(&std::fs::read_to_string("/proc/meminfo").ok()?)
    }
}

/// One swap area of `/proc/swaps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwapArea {
    /// The device or file (octal escapes undone).
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// Bytes in use.
    pub used: u64,
    /// Its priority.
    pub priority: i32,
}

/// The swap areas in `/proc/swaps` text (the header line skipped).
pub fn parse_swaps(text: &str) -> Vec<SwapArea> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            if w.len() < 5 {
                return None;
            }
            Some(SwapArea {
                path: PathBuf::from(crate::blockdev::mount::unescape(w[0])),
                size: w[2].parse::<u64>().ok()? * 1024,
                used: w[3].parse::<u64>().ok()? * 1024,
                priority: w[4].parse().ok()?,
            })
        })
        .collect()
}

/// The swap areas in use now.
pub fn swaps() -> Vec<SwapArea> {
    parse_swaps(&std::fs::read_to_string("/proc/swaps").unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vmstat_counters_parse() {
        let t =
            "nr_free_pages 123\npswpin 7\npswpout 4096\npswpin_extra x\nzswpin 2\nzswpout 3\nbad\n";
        let c = SwapCounters::parse(t);
        assert_eq!(
            c,
            SwapCounters {
                pswpout: 4096,
                pswpin: 7,
                zswpout: 3,
                zswpin: 2,
            }
        );
        let later = SwapCounters {
            pswpout: 5000,
            pswpin: 9,
            zswpout: 4,
            zswpin: 2,
        };
        assert_eq!(later.since(&c).pswpout, 904);
        assert_eq!(c.since(&later).pswpin, 0, "never negative");
    }

    #[test]
    fn meminfo_zswap_lines_parse() {
        let t = "MemTotal:       24683944 kB\nSwapCached:  0 kB\nZswap:              1024 kB\nZswapped:           4096 kB\n";
        let z = ZswapMeminfo::parse(t).unwrap();
        assert_eq!(z.pool, 1 << 20);
        assert_eq!(z.stored, 4 << 20);
        assert_eq!(ZswapMeminfo::parse("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn proc_swaps_parse() {
        let t = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n\
                 /dev/zram3                              partition\t2097148\t\t512\t\t32767\n\
                 /var/tmp/my\\040swap file 1024 0 -2\n";
        let s = parse_swaps(t);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].path, PathBuf::from("/dev/zram3"));
        assert_eq!(s[0].size, 2097148 * 1024);
        assert_eq!(s[0].used, 512 * 1024);
        assert_eq!(s[0].priority, 32767);
        assert_eq!(s[1].path, PathBuf::from("/var/tmp/my swap"));
        assert_eq!(s[1].priority, -2);
        assert!(parse_swaps("Filename Type Size Used Priority\n").is_empty());
    }
}
