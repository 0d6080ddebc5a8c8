//! Codecs: how a page becomes a compressed object and back.
//!
//! lz4 is the reference LZ4 (liblz4, `LZ4_compress_default`), the algorithm
//! the kernel's zram offers as `lz4`, so object sizes match the kernel's for
//! the same pages. zstd takes a level. Both are BSD-licensed C libraries
//! built from source by their crates.

use std::cell::RefCell;

use serde::Serialize;

use crate::error::{Error, Result};

/// A compression algorithm with its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Codec {
    /// LZ4, default acceleration (zram's `lz4`).
    #[default]
    Lz4,
    /// Zstandard at a level (1..=22; zram's default level is 3).
    Zstd {
        /// Compression level.
        level: i32,
    },
}

thread_local! {
    static ZSTD: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> = const { RefCell::new(None) };
    static UNZSTD: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

impl Codec {
    /// Parse `lz4`, `zstd` (level 3) or `zstd:LEVEL`.
    pub fn parse(s: &str) -> Result<Codec> {
        let bad = || {
            Error::InvalidConfig(format!(
                "unknown codec `{s}`: use lz4, zstd or zstd:LEVEL (1..=22)"
            ))
        };
        match s.split_once(':') {
            None if s == "lz4" => Ok(Codec::Lz4),
            None if s == "zstd" => Ok(Codec::Zstd { level: 3 }),
            Some(("zstd", l)) => match l.parse() {
                Ok(level) if (1..=22).contains(&level) => Ok(Codec::Zstd { level }),
                _ => Err(bad()),
            },
            _ => Err(bad()),
        }
    }

    /// The name as `parse` takes it.
    pub fn name(&self) -> String {
        match self {
            Codec::Lz4 => "lz4".into(),
            Codec::Zstd { level } => format!("zstd:{level}"),
        }
    }

    /// Compress `src` into `dst`; `None` if the result does not fit in
    /// `dst` (the page is incompressible enough to be stored raw).
    pub fn compress(&self, src: &[u8], dst: &mut [u8]) -> Option<usize> {
        match *self {
            Codec::Lz4 => lz4::block::compress_to_buffer(src, None, false, dst).ok(),
            Codec::Zstd { level } => ZSTD.with(|cell| {
                let mut cell = cell.borrow_mut();
                if cell.as_ref().is_none_or(|(l, _)| *l != level) {
                    *cell = Some((level, zstd::bulk::Compressor::new(level).ok()?));
                }
                let (_, c) = cell.as_mut()?;
                c.compress_to_buffer(src, dst).ok()
            }),
        }
    }

    /// Decompress `src` into all of `dst`; an error if the data is corrupt
    /// or does not decompress to exactly `dst.len()` bytes.
    pub fn decompress(&self, src: &[u8], dst: &mut [u8]) -> Result<()> {
        let n = match *self {
            Codec::Lz4 => lz4::block::decompress_to_buffer(src, Some(dst.len() as i32), dst)
                .map_err(|e| e.to_string()),
            Codec::Zstd { .. } => UNZSTD.with(|cell| {
                let mut cell = cell.borrow_mut();
                if cell.is_none() {
                    *cell = Some(zstd::bulk::Decompressor::new().map_err(|e| e.to_string())?);
                }
                let d = cell.as_mut().expect("just set");
                d.decompress_to_buffer(src, dst).map_err(|e| e.to_string())
            }),
        };
        match n {
            Ok(n) if n == dst.len() => Ok(()),
            Ok(n) => Err(Error::Codec(format!(
                "{} data decompressed to {n} bytes, expected {}",
                self.name(),
                dst.len()
            ))),
            Err(e) => Err(Error::Codec(format!(
                "{} data is corrupt: {e}",
                self.name()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_page() -> Vec<u8> {
        b"static int zs_compact(struct zs_pool *pool) { return 0; }\n"
            .iter()
            .cycle()
            .take(4096)
            .copied()
            .collect()
    }

    #[test]
    #[cfg_attr(miri, ignore = "calls liblz4/libzstd through FFI")]
    fn round_trip_and_refuse_what_does_not_fit() {
        for codec in [
            Codec::Lz4,
            Codec::Zstd { level: 3 },
            Codec::Zstd { level: 19 },
        ] {
            let page = text_page();
            let mut buf = vec![0u8; 4096];
            let n = codec.compress(&page, &mut buf).unwrap();
            assert!(n < 400, "{} made {n} bytes", codec.name());
            let mut out = vec![0u8; 4096];
            codec.decompress(&buf[..n], &mut out).unwrap();
            assert_eq!(out, page);
            // Noise does not fit in a small buffer.
            let mut x = 0x9E37_79B9_7F4A_7C15u64;
            let noise: Vec<u8> = (0..4096)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x >> 24) as u8
                })
                .collect();
            let r = codec.compress(&noise, &mut buf[..3000]);
            assert!(r.is_none(), "{} compressed noise to {r:?}", codec.name());
            // Corrupt input is an error, never a panic.
            assert!(codec.decompress(&[0xFF; 20], &mut out).is_err());
        }
    }

    #[test]
    fn parse_names() {
        assert_eq!(Codec::parse("lz4").unwrap(), Codec::Lz4);
        assert_eq!(Codec::parse("zstd").unwrap(), Codec::Zstd { level: 3 });
        assert_eq!(Codec::parse("zstd:7").unwrap(), Codec::Zstd { level: 7 });
        assert!(Codec::parse("zstd:99").is_err());
        assert!(Codec::parse("lzo").is_err());
    }
}
