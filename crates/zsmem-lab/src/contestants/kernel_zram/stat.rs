//! Parsing zram's `mm_stat` and `io_stat` into [`MmStat`] and [`IoStat`].

use std::str::FromStr;

use serde::Serialize;

use super::error::ZramError;

/// zram's `mm_stat`: memory use of one device. Sizes in bytes, counts in
/// pages; see the module documentation for each field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MmStat {
    /// Bytes of data stored, uncompressed (stored pages times 4096).
    pub orig_data_size: u64,
    /// Bytes of compressed data zsmalloc holds.
    pub compr_data_size: u64,
    /// Bytes of memory zsmalloc holds (its zspages).
    pub mem_used_total: u64,
    /// Limit on `mem_used_total` in bytes, 0 for none.
    pub mem_limit: u64,
    /// High-water mark of `mem_used_total` in bytes.
    pub mem_used_max: u64,
    /// Pages stored as one repeated word, with no memory.
    pub same_pages: u64,
    /// Pages freed by compaction.
    pub pages_compacted: u64,
    /// Pages stored uncompressed because they did not compress enough.
    pub huge_pages: u64,
    /// Huge pages stored since the device was set up (absent before 5.15).
    pub huge_pages_since: Option<u64>,
}

impl MmStat {
    /// Memory held beyond the compressed bytes (`mem_used_total -
    /// compr_data_size`, 0 if negative): zsmalloc's fragmentation and slack.
    pub fn overhead(&self) -> u64 {
        self.mem_used_total.saturating_sub(self.compr_data_size)
    }
}

impl FromStr for MmStat {
    type Err = ZramError;

    /// Parses the text of `mm_stat`: eight or nine unsigned decimal fields.
    fn from_str(text: &str) -> Result<Self, ZramError> {
        let v = parse_fields("mm_stat", text, 8, 9)?;
        Ok(MmStat {
            orig_data_size: v[0],
            compr_data_size: v[1],
            mem_used_total: v[2],
            mem_limit: v[3],
            mem_used_max: v[4],
            same_pages: v[5],
            pages_compacted: v[6],
            huge_pages: v[7],
            huge_pages_since: v.get(8).copied(),
        })
    }
}

/// zram's `io_stat`: failed and invalid requests of one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct IoStat {
    /// Reads that failed.
    pub failed_reads: u64,
    /// Writes that failed (a store past `mem_limit`, say).
    pub failed_writes: u64,
    /// Misaligned or out-of-range requests (always 0 on recent kernels,
    /// which reject them before zram sees them).
    pub invalid_io: u64,
    /// Pages freed by swap's slot-free notifications and by discards (on
    /// 6.18 every discarded page counts, stored or not).
    pub notify_free: u64,
}

impl FromStr for IoStat {
    type Err = ZramError;

    /// Parses the text of `io_stat`: four unsigned decimal fields.
    fn from_str(text: &str) -> Result<Self, ZramError> {
        let v = parse_fields("io_stat", text, 4, 4)?;
        Ok(IoStat {
            failed_reads: v[0],
            failed_writes: v[1],
            invalid_io: v[2],
            notify_free: v[3],
        })
    }
}

fn parse_fields(file: &str, text: &str, min: usize, max: usize) -> Result<Vec<u64>, ZramError> {
    let what = format!("parsing {file}");
    let mut out = Vec::with_capacity(max);
    for word in text.split_whitespace() {
        if out.len() == max {
            return Err(ZramError::parse(
                what,
                format!("more than {max} fields in {text:?}"),
            ));
        }
        let n = word
            .parse::<u64>()
            .map_err(|e| ZramError::parse(&what, format!("field {word:?} in {text:?}: {e}")))?;
        out.push(n);
    }
    if out.len() < min {
        return Err(ZramError::parse(
            what,
            format!("{} fields in {text:?}, expected {min}", out.len()),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn mm_stat_with_nine_fields() {
        let text =
            "  8192000  2048000  2457600        0  2457600      120        7       33       41\n";
        let s: MmStat = text.parse().unwrap();
        assert_eq!(
            s,
            MmStat {
                orig_data_size: 8192000,
                compr_data_size: 2048000,
                mem_used_total: 2457600,
                mem_limit: 0,
                mem_used_max: 2457600,
                same_pages: 120,
                pages_compacted: 7,
                huge_pages: 33,
                huge_pages_since: Some(41),
            }
        );
        assert_eq!(s.overhead(), 409600);
    }

    #[test]
    fn mm_stat_with_eight_fields() {
        let s: MmStat = "4096 100 0 1048576 12288 1 0 0".parse().unwrap();
        assert_eq!(s.orig_data_size, 4096);
        assert_eq!(s.mem_limit, 1048576);
        assert_eq!(s.huge_pages, 0);
        assert_eq!(s.huge_pages_since, None);
        assert_eq!(s.overhead(), 0);
    }

    #[test]
    fn mm_stat_malformed_is_an_error() {
        for text in [
            "",
            "\n",
            "1 2 3 4 5 6 7",
            "1 2 3 4 5 6 7 8 9 10",
            "1 2 3 4 5 6 7 x",
            "1 2 3 4 5 -6 7 8",
            "1 2 3 4 5 6 7 99999999999999999999999",
            "1,2,3,4,5,6,7,8",
        ] {
            let err = text.parse::<MmStat>().unwrap_err();
            assert!(
                matches!(&err, ZramError::Io { what, source }
                    if what == "parsing mm_stat" && source.kind() == io::ErrorKind::InvalidData),
                "{text:?}: {err}"
            );
        }
    }

    #[test]
    fn io_stat_parses_and_rejects() {
        let s: IoStat = "       0        3        0       17\n".parse().unwrap();
        assert_eq!(
            s,
            IoStat {
                failed_reads: 0,
                failed_writes: 3,
                invalid_io: 0,
                notify_free: 17,
            }
        );
        for text in ["", "1 2 3", "1 2 3 4 5", "a b c d"] {
            let err = text.parse::<IoStat>().unwrap_err();
            assert!(err.to_string().starts_with("parsing io_stat"), "{err}");
        }
    }

    #[test]
    fn stats_serialize() {
        let s: MmStat = "4096 100 0 0 12288 1 0 0".parse().unwrap();
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"huge_pages_since\":null"), "{json}");
        let io: IoStat = "1 2 3 4".parse().unwrap();
        assert!(
            serde_json::to_string(&io)
                .unwrap()
                .contains("\"notify_free\":4")
        );
    }
}
