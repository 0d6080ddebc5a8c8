//! Codecs: how a page becomes a compressed object and back.
//!
//! lz4 is the reference LZ4 (liblz4, `LZ4_compress_default`), the algorithm
//! the kernel's zram offers as `lz4`, so object sizes match the kernel's for
//! the same pages. zstd takes a level and, optionally, a dictionary trained
//! from sample pages ([`ZstdDictionary`]). Both are BSD-licensed C libraries
//! built from source by their crates. With the `lzo` feature, `lzo` and
//! `lzo-rle` (zram's default) are LZO1X-1 as the kernel makes it, in
//! zsmem's own Rust (`codec/lzo.rs`).
//!
//! [`Codec`] is the algorithm and its level (a small `Copy` value);
//! [`CodecSpec`] adds the shared dictionary, and is what a
//! [`PageStore`](crate::PageStore) compresses with.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

#[cfg(feature = "lzo")]
mod lzo;

/// A compression algorithm with its parameters.
///
/// ```
/// use zsmem::Codec;
/// let codec = Codec::parse("zstd")?;
/// let page = b"a page of text, a page of text, a page of text. ".repeat(80);
/// let mut packed = vec![0u8; page.len()];
/// let n = codec.compress(&page, &mut packed).expect("it shrinks");
/// let mut back = vec![0u8; page.len()];
/// codec.decompress(&packed[..n], &mut back)?;
/// assert_eq!(back, page);
/// # Ok::<(), zsmem::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum Codec {
    /// LZ4, default acceleration (zram's `lz4`).
    #[default]
    Lz4,
    /// Zstandard at a level (1..=22; zram's default level is 3).
    Zstd {
        /// Compression level.
        level: i32,
    },
    /// LZO1X-1, the original bitstream (zram's `lzo`). Needs the `lzo`
    /// feature.
    #[cfg(feature = "lzo")]
    Lzo,
    /// LZO1X-1 with zero runs, bitstream version 1 (zram's `lzo-rle`, its
    /// default). Needs the `lzo` feature.
    #[cfg(feature = "lzo")]
    LzoRle,
}

/// Contexts kept per thread, keyed by (level, dictionary key): a few, most
/// recently used first, so a store alternating between its primary and a
/// secondary codec does not rebuild a context on every page.
const CONTEXTS_PER_THREAD: usize = 4;

thread_local! {
    static ZSTD: RefCell<Vec<((i32, u64), zstd::bulk::Compressor<'static>)>> = const { RefCell::new(Vec::new()) };
    static UNZSTD: RefCell<Vec<(u64, zstd::bulk::Decompressor<'static>)>> = const { RefCell::new(Vec::new()) };
}

/// The context for `key` from a small per-thread cache, made by `make` if
/// missing (evicting the least recently used), moved to the front.
fn with_cached<K: PartialEq + Copy, C, R>(
    cache: &RefCell<Vec<(K, C)>>,
    key: K,
    make: impl FnOnce() -> Option<C>,
    f: impl FnOnce(&mut C) -> R,
) -> Option<R> {
    let mut cache = cache.borrow_mut();
    match cache.iter().position(|(k, _)| *k == key) {
        Some(0) => {}
        Some(i) => {
            let e = cache.remove(i);
            cache.insert(0, e);
        }
        None => {
            let c = make()?;
            cache.truncate(CONTEXTS_PER_THREAD - 1);
            cache.insert(0, (key, c));
        }
    }
    Some(f(&mut cache[0].1))
}

static NEXT_DICTIONARY_KEY: AtomicU64 = AtomicU64::new(1);

/// A zstd dictionary, shared by reference count between stores, threads and
/// the slots compressed with it.
///
/// Trained from sample pages with zstd's own trainer (`ZDICT`), it lets
/// zstd find repeats across pages, which a single 4 KiB page lacks.
///
/// ```
/// use zsmem::codec::{Codec, CodecSpec, ZstdDictionary};
/// // Pages of lines from a shared vocabulary, each page in its own order.
/// let lines: Vec<String> = (0..50).map(|i| format!("struct item{i} {{ int id_{}; }};\n", i * 7)).collect();
/// let samples: Vec<Vec<u8>> = (0..200u64)
///     .map(|p| (0..200u64).flat_map(|j| lines[((p * 31 + j * j) % 50) as usize].bytes()).take(4096).collect())
///     .collect();
/// let dict = ZstdDictionary::train(&samples, 16 << 10).unwrap();
/// let spec = CodecSpec { codec: Codec::Zstd { level: 3 }, dictionary: Some(dict) };
/// let mut buf = vec![0u8; 4096];
/// let n = spec.compress(&samples[7][..4096], &mut buf).unwrap();
/// let mut out = vec![0u8; 4096];
/// spec.decompress(&buf[..n], &mut out).unwrap();
/// assert_eq!(out, &samples[7][..4096]);
/// ```
#[derive(Clone)]
pub struct ZstdDictionary(Arc<DictionaryInner>);

struct DictionaryInner {
    /// Unique in the process: names the dictionary in per-thread caches.
    key: u64,
    bytes: Box<[u8]>,
}

/// Shortest sample [`ZstdDictionary::train`] gives zstd.
const MIN_SAMPLE: usize = 8;

impl ZstdDictionary {
    /// Train a dictionary of at most `max_size` bytes from `samples` (for a
    /// page store: pages). zstd needs a fair number of samples (a hundred
    /// or more); too few or too uniform ones are an error. A dictionary is
    /// never longer than its samples, so `max_size` is taken as at most
    /// their bytes (a larger one, say `usize::MAX`, was reserved whole:
    /// a panic, or the process aborted for want of memory). Samples under
    /// 8 bytes are left out: they give a dictionary nothing, and zstd
    /// 1.5.7's trainer reads out of bounds on them (empty samples before a
    /// longer one crashed the process, facebook/zstd#4499).
    pub fn train<S: AsRef<[u8]>>(samples: &[S], max_size: usize) -> Result<ZstdDictionary> {
        let samples: Vec<&[u8]> = samples
            .iter()
            .map(AsRef::as_ref)
            .filter(|s| s.len() >= MIN_SAMPLE)
            .collect();
        let total = samples
            .iter()
            .fold(0usize, |t, s| t.saturating_add(s.len()));
        if samples.is_empty() || max_size < 256 || total < 256 {
            return Err(Error::InvalidConfig(
                "dictionary training needs samples of at least 256 bytes in all and a size of at least 256 bytes".into(),
            ));
        }
        // A refusal is about the samples given (too few, too alike): an
        // invalid argument, not a fault of stored data.
        let bytes = zstd::dict::from_samples(&samples, max_size.min(total)).map_err(|e| {
            Error::InvalidConfig(format!(
                "zstd could not train a dictionary from {} samples: {e}",
                samples.len()
            ))
        })?;
        ZstdDictionary::from_bytes(bytes)
    }

    /// A dictionary from its bytes (as [`as_bytes`](Self::as_bytes) gave
    /// them, or from `zstd --train`). Bytes zstd cannot load as a
    /// dictionary (its magic number, then tables that are not) are an
    /// error: taken, every page compressed with them would fail and be
    /// stored raw, without a word.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<ZstdDictionary> {
        if bytes.is_empty() {
            return Err(Error::InvalidConfig("empty zstd dictionary".into()));
        }
        Self::check_loads(&bytes)?;
        Ok(ZstdDictionary(Arc::new(DictionaryInner {
            key: NEXT_DICTIONARY_KEY.fetch_add(1, Ordering::Relaxed),
            bytes: bytes.into_boxed_slice(),
        })))
    }

    /// Whether zstd loads `bytes` as a dictionary both ways and a text
    /// compressed with it comes back whole.
    fn check_loads(bytes: &[u8]) -> Result<()> {
        let refused = |e: std::io::Error| {
            Error::InvalidConfig(format!("zstd cannot use these bytes as a dictionary: {e}"))
        };
        let probe: Vec<u8> = b"zsmem checks a zstd dictionary: "
            .iter()
            .copied()
            .cycle()
            .take(512)
            .collect();
        let packed = zstd::bulk::Compressor::with_dictionary(3, bytes)
            .and_then(|mut c| c.compress(&probe))
            .map_err(refused)?;
        let back = zstd::bulk::Decompressor::with_dictionary(bytes)
            .and_then(|mut d| d.decompress(&packed, probe.len()))
            .map_err(refused)?;
        if back != probe {
            return Err(Error::InvalidConfig(
                "zstd cannot use these bytes as a dictionary: a text did not come back whole"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The dictionary's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0.bytes
    }

    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.0.bytes.len()
    }

    /// Never true: an empty dictionary is refused.
    pub fn is_empty(&self) -> bool {
        self.0.bytes.is_empty()
    }

    /// zstd's dictionary ID (written into each frame), 0 for a raw-content
    /// dictionary.
    pub fn id(&self) -> u32 {
        zstd::zstd_safe::get_dict_id_from_dict(&self.0.bytes).map_or(0, |n| n.get())
    }

    fn key(&self) -> u64 {
        self.0.key
    }
}

impl PartialEq for ZstdDictionary {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.bytes == other.0.bytes
    }
}

impl Eq for ZstdDictionary {}

impl std::fmt::Debug for ZstdDictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZstdDictionary")
            .field("id", &self.id())
            .field("len", &self.len())
            .finish()
    }
}

impl Codec {
    /// Parse `lz4`, `zstd` (level 3), `zstd:LEVEL`, and with the `lzo`
    /// feature `lzo` or `lzo-rle`.
    pub fn parse(s: &str) -> Result<Codec> {
        let bad = || {
            Error::InvalidConfig(format!(
                "unknown codec `{s}`: use lz4, zstd, zstd:LEVEL (1..=22), lzo or lzo-rle"
            ))
        };
        match s.split_once(':') {
            None if s == "lz4" => Ok(Codec::Lz4),
            #[cfg(feature = "lzo")]
            None if s == "lzo" => Ok(Codec::Lzo),
            #[cfg(feature = "lzo")]
            None if s == "lzo-rle" => Ok(Codec::LzoRle),
            #[cfg(not(feature = "lzo"))]
            None if s == "lzo" || s == "lzo-rle" => Err(Error::InvalidConfig(format!(
                "codec `{s}` is not in this build: rebuild with `--features lzo` \
                 (e.g. cargo build --release -p zsmem-cli --features lzo)"
            ))),
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
            Codec::Zstd { level } => format!("zstd:{level}"),
            _ => self.kernel_name().into(),
        }
    }

    /// The algorithm's name in the kernel (zram's `comp_algorithm`).
    pub fn kernel_name(&self) -> &'static str {
        match self {
            Codec::Lz4 => "lz4",
            Codec::Zstd { .. } => "zstd",
            #[cfg(feature = "lzo")]
            Codec::Lzo => "lzo",
            #[cfg(feature = "lzo")]
            Codec::LzoRle => "lzo-rle",
        }
    }

    /// Compress `src` into `dst`; `None` if the result does not fit in
    /// `dst` (the page is incompressible enough to be stored raw).
    pub fn compress(&self, src: &[u8], dst: &mut [u8]) -> Option<usize> {
        self.compress_with(None, src, dst)
    }

    /// Decompress `src` into all of `dst`; an error if the data is corrupt
    /// or does not decompress to exactly `dst.len()` bytes.
    pub fn decompress(&self, src: &[u8], dst: &mut [u8]) -> Result<()> {
        self.decompress_with(None, src, dst)
    }

    fn compress_with(
        &self,
        dict: Option<&ZstdDictionary>,
        src: &[u8],
        dst: &mut [u8],
    ) -> Option<usize> {
        match *self {
            Codec::Lz4 => lz4::block::compress_to_buffer(src, None, false, dst).ok(),
            #[cfg(feature = "lzo")]
            Codec::Lzo => lzo::compress(src, dst, false),
            #[cfg(feature = "lzo")]
            Codec::LzoRle => lzo::compress(src, dst, true),
            Codec::Zstd { level } => ZSTD.with(|cache| {
                let key = (level, dict.map_or(0, ZstdDictionary::key));
                let make = || {
                    zstd::bulk::Compressor::with_dictionary(
                        level,
                        dict.map_or(&[][..], ZstdDictionary::as_bytes),
                    )
                    .ok()
                };
                with_cached(cache, key, make, |c| c.compress_to_buffer(src, dst).ok())?
            }),
        }
    }

    fn decompress_with(
        &self,
        dict: Option<&ZstdDictionary>,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<()> {
        let n = match *self {
            Codec::Lz4 => lz4::block::decompress_to_buffer(src, Some(dst.len() as i32), dst)
                .map_err(|e| e.to_string()),
            // One decoder reads both bitstreams, as the kernel's does.
            #[cfg(feature = "lzo")]
            Codec::Lzo | Codec::LzoRle => lzo::decompress(src, dst),
            Codec::Zstd { .. } => UNZSTD.with(|cache| {
                let key = dict.map_or(0, ZstdDictionary::key);
                let make = || {
                    zstd::bulk::Decompressor::with_dictionary(
                        dict.map_or(&[][..], ZstdDictionary::as_bytes),
                    )
                    .ok()
                };
                with_cached(cache, key, make, |d| {
                    d.decompress_to_buffer(src, dst).map_err(|e| e.to_string())
                })
                .unwrap_or_else(|| Err("zstd refused the dictionary".into()))
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

/// A codec with everything it needs: the algorithm and level, and for zstd
/// an optional shared dictionary. What a page store compresses with.
///
/// ```
/// use zsmem::codec::{Codec, CodecSpec};
/// let spec = CodecSpec::from(Codec::Zstd { level: 3 });
/// assert_eq!(spec.name(), "zstd:3");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct CodecSpec {
    /// The algorithm and its level.
    pub codec: Codec,
    /// A zstd dictionary; only with [`Codec::Zstd`].
    pub dictionary: Option<ZstdDictionary>,
}

impl From<Codec> for CodecSpec {
    fn from(codec: Codec) -> Self {
        CodecSpec {
            codec,
            dictionary: None,
        }
    }
}

impl CodecSpec {
    /// An error if the combination is not possible (a dictionary with
    /// anything but zstd).
    pub fn validate(&self) -> Result<()> {
        match (&self.codec, &self.dictionary) {
            (Codec::Zstd { .. }, _) | (_, None) => Ok(()),
            (c, Some(_)) => Err(Error::InvalidConfig(format!(
                "a dictionary needs zstd: {} takes none",
                c.name()
            ))),
        }
    }

    /// `lz4`, `zstd:3`, or `zstd:3+dict:ID` with a dictionary.
    pub fn name(&self) -> String {
        match &self.dictionary {
            None => self.codec.name(),
            Some(d) => format!("{}+dict:{}", self.codec.name(), d.id()),
        }
    }

    /// As [`Codec::compress`], with the dictionary.
    pub fn compress(&self, src: &[u8], dst: &mut [u8]) -> Option<usize> {
        self.codec.compress_with(self.dictionary.as_ref(), src, dst)
    }

    /// As [`Codec::decompress`], with the dictionary.
    pub fn decompress(&self, src: &[u8], dst: &mut [u8]) -> Result<()> {
        self.codec
            .decompress_with(self.dictionary.as_ref(), src, dst)
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

    /// Bytes with zstd's dictionary magic and no tables behind it were
    /// taken, and every page compressed with them then failed and was
    /// stored raw, without an error.
    #[test]
    #[cfg_attr(miri, ignore = "calls libzstd through FFI")]
    fn a_dictionary_zstd_cannot_load_is_refused() {
        let mut bytes = vec![0x37, 0xA4, 0x30, 0xEC];
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        bytes.extend((0..2000).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        }));
        let e = ZstdDictionary::from_bytes(bytes).unwrap_err();
        assert!(matches!(e, Error::InvalidConfig(_)), "{e}");
        // Raw content (no magic) is a dictionary zstd takes as it is.
        let d = ZstdDictionary::from_bytes(text_page()).unwrap();
        let codec = Codec::Zstd { level: 3 };
        let (mut buf, mut out) = (vec![0u8; 4096], vec![0u8; 4096]);
        let n = codec
            .compress_with(Some(&d), &text_page(), &mut buf)
            .unwrap();
        codec
            .decompress_with(Some(&d), &buf[..n], &mut out)
            .unwrap();
        assert_eq!(out, text_page());
    }

    /// Empty samples before a longer one crashed the process in zstd
    /// 1.5.7's trainer (an out-of-bounds read): samples under 8 bytes are
    /// left out, and with nothing else left training is an error.
    #[test]
    #[cfg_attr(miri, ignore = "calls libzstd through FFI")]
    fn training_leaves_out_samples_under_8_bytes() {
        let page = text_page();
        for empties in [10, 500] {
            let mut samples = vec![Vec::new(); empties];
            samples.push(page[..300].to_vec());
            // Ok or an error, never a crash.
            let _ = ZstdDictionary::train(&samples, 256);
        }
        let tiny: Vec<Vec<u8>> = (0..1000).map(|i| vec![i as u8; 7]).collect();
        assert!(matches!(
            ZstdDictionary::train(&tiny, 256),
            Err(Error::InvalidConfig(_))
        ));
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
        assert!(Codec::parse("lzo1x").is_err());
        for c in [Codec::Lz4, Codec::Zstd { level: 3 }] {
            assert_eq!(Codec::parse(&c.name()).unwrap(), c);
        }
    }

    #[test]
    #[cfg(not(feature = "lzo"))]
    fn lzo_without_the_feature_says_how_to_get_it() {
        for name in ["lzo", "lzo-rle"] {
            let e = Codec::parse(name).unwrap_err().to_string();
            assert!(e.contains("--features lzo"), "{e}");
        }
    }

    #[test]
    #[cfg(feature = "lzo")]
    fn lzo_codecs_round_trip_pages() {
        assert_eq!(Codec::parse("lzo").unwrap(), Codec::Lzo);
        assert_eq!(Codec::parse("lzo-rle").unwrap(), Codec::LzoRle);
        for codec in [Codec::Lzo, Codec::LzoRle] {
            assert_eq!(Codec::parse(&codec.name()).unwrap(), codec);
            let page = text_page();
            let mut buf = vec![0u8; 4096];
            let n = codec.compress(&page, &mut buf).unwrap();
            assert!(n < 400, "{} made {n} bytes", codec.name());
            let mut out = vec![0u8; 4096];
            codec.decompress(&buf[..n], &mut out).unwrap();
            assert_eq!(out, page);
            // A wrong expected length is an error.
            assert!(codec.decompress(&buf[..n], &mut out[..4095]).is_err());
            assert!(codec.decompress(&[0xFF; 20], &mut out).is_err());
            let spec = CodecSpec {
                codec,
                dictionary: Some(ZstdDictionary::from_bytes(vec![1; 300]).unwrap()),
            };
            assert!(spec.validate().is_err());
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "calls liblz4/libzstd through FFI")]
    fn a_dictionary_shrinks_small_similar_pages_and_is_needed_to_decode() {
        // Pages of lines drawn from a shared set, in a page-specific order.
        let lines: Vec<String> = (0..64)
            .map(|i| {
                format!(
                    "    if (zspage_{i}->inuse < class->objs_{}) return -{i};\n",
                    i * 7
                )
            })
            .collect();
        let pages: Vec<Vec<u8>> = (0..300u64)
            .map(|i| {
                let mut x = i * 0x9E37_79B9 + 1;
                let mut p = Vec::new();
                while p.len() < 4096 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    p.extend_from_slice(lines[(x % 64) as usize].as_bytes());
                }
                p.truncate(4096);
                p
            })
            .collect();
        let dict = ZstdDictionary::train(&pages, 8 << 10).unwrap();
        assert!(dict.len() <= 8 << 10 && !dict.is_empty());
        let plain = CodecSpec::from(Codec::Zstd { level: 3 });
        let with = CodecSpec {
            codec: Codec::Zstd { level: 3 },
            dictionary: Some(dict.clone()),
        };
        let mut buf = vec![0u8; 4096];
        let mut out = vec![0u8; 4096];
        let n_plain = plain.compress(&pages[5], &mut buf).unwrap();
        let n = with.compress(&pages[5], &mut buf).unwrap();
        assert!(n <= n_plain, "dictionary made {n} bytes, plain {n_plain}");
        with.decompress(&buf[..n], &mut out).unwrap();
        assert_eq!(out, pages[5]);
        // Without the dictionary the frame does not decode: an error.
        assert!(plain.decompress(&buf[..n], &mut out).is_err());
        assert!(
            CodecSpec {
                codec: Codec::Lz4,
                dictionary: Some(dict)
            }
            .validate()
            .is_err()
        );
        assert!(ZstdDictionary::train(&pages[..0], 4096).is_err());
        assert!(ZstdDictionary::from_bytes(Vec::new()).is_err());
    }
}
