//! zsmem's LZO1X decoder (`lzo`, `lzo-rle`; the `lzo` feature) on
//! arbitrary, mutated and well-formed streams, checked against a reference
//! decoder, lzokay-native (MIT, a Rust port of lzokay; it reads the
//! original bitstream, not lzo-rle's version-1 runs):
//!
//! - any stream: never a panic, and a stream decoding to exactly the asked
//!   length decodes to the same bytes in the reference (where the stream
//!   is an original-bitstream one, not starting with the version marker);
//! - data compressed with `lzo` and `lzo-rle` decodes back to itself, and
//!   the `lzo` stream decodes to it in the reference too;
//! - such a stream with bytes changed or cut short: never a panic, and
//!   the same agreement with the reference as any stream.
//!
//! Run: `cd fuzz && cargo +nightly fuzz run lzo_decode -- -max_total_time=300`

#![no_main]

use libfuzzer_sys::fuzz_target;

mod common;
use common::Bytes;
use zsmem::Codec;

/// The first byte of a versioned (lzo-rle) stream.
const VERSION_MARKER: u8 = 17;
/// The longest output asked for: a few pages, so matches cross pieces.
const MAX_OUT: usize = 3 * 4096 + 100;

/// Decodes `stream` into `len` bytes with zsmem and, where ours accepts an
/// original-bitstream stream, checks the reference gives the same bytes.
fn decode_and_compare(stream: &[u8], len: usize) -> Option<Vec<u8>> {
    let mut out = vec![0u8; len];
    Codec::Lzo.decompress(stream, &mut out).ok()?;
    if stream.first() != Some(&VERSION_MARKER) {
        match lzokay_native::decompress_all(stream, Some(len)) {
            Ok(theirs) => assert_eq!(theirs, out, "zsmem and the reference disagree"),
            Err(e) => panic!("zsmem decoded {len} bytes from a stream the reference refuses: {e:?}"),
        }
    }
    Some(out)
}

fn worst_case(len: usize) -> usize {
    len + len / 16 + 64 + 3
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let mode = b.u8() % 3;
    match mode {
        // Any stream, any length asked.
        0 => {
            let len = usize::from(b.u16()) % (MAX_OUT + 1);
            decode_and_compare(b.0, len);
        }
        // Round trip of the rest of the input, both bitstreams.
        1 => {
            let src = b.0;
            for codec in [Codec::Lzo, Codec::LzoRle] {
                let mut stream = vec![0u8; worst_case(src.len())];
                let n = codec
                    .compress(src, &mut stream)
                    .expect("the worst case always fits");
                let stream = &stream[..n];
                let mut back = vec![0u8; src.len()];
                codec.decompress(stream, &mut back).unwrap();
                assert_eq!(back, src, "{} round trip", codec.name());
                if codec == Codec::Lzo && !src.is_empty() {
                    let theirs = lzokay_native::decompress_all(stream, Some(src.len()))
                        .expect("the reference reads zsmem's lzo stream");
                    assert_eq!(theirs, src, "the reference reads zsmem's lzo stream back");
                }
                // A shorter or longer length asked is an error.
                let mut short = vec![0u8; src.len().saturating_sub(1)];
                if !src.is_empty() {
                    assert!(codec.decompress(stream, &mut short).is_err());
                }
                let mut long = vec![0u8; src.len() + 1];
                assert!(codec.decompress(stream, &mut long).is_err());
            }
        }
        // A well-formed stream, changed: bytes replaced, then cut.
        _ => {
            let edits = usize::from(b.u8() % 8);
            let plan: Vec<(u16, u8)> = (0..edits).map(|_| (b.u16(), b.u8())).collect();
            let cut = b.u16();
            let rle = b.u8() & 1 == 1;
            let src = b.0;
            let codec = if rle { Codec::LzoRle } else { Codec::Lzo };
            let mut stream = vec![0u8; worst_case(src.len())];
            let n = codec.compress(src, &mut stream).expect("fits");
            stream.truncate(n);
            for (at, byte) in plan {
                if !stream.is_empty() {
                    let i = usize::from(at) % stream.len();
                    stream[i] = byte;
                }
            }
            if !stream.is_empty() {
                stream.truncate(stream.len() - usize::from(cut) % stream.len().min(8).max(1));
            }
            decode_and_compare(&stream, src.len());
        }
    }
});
