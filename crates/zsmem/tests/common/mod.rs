//! Shared helpers for the integration tests.
#![allow(dead_code)]

/// SplitMix64: a small deterministic generator for long random sequences.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Deterministic content for an object: every byte depends on the seed and
/// its position, so a misplaced or torn copy shows.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    if cfg!(miri) {
        return pattern_for_miri(seed, len);
    }
    let mut r = Rng(seed);
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        v.extend_from_slice(&r.next().to_le_bytes());
    }
    v.truncate(len);
    v
}

/// Under Miri, which interprets each step of `pattern`'s loop (60 ms for
/// 1000 bytes, most of the time of the tests that store many objects): 32
/// bytes of the seed's sequence, repeated, each copy's first byte xored
/// with the copy's number, so a copy of another seed, or shifted by a
/// multiple of 32 bytes, still shows.
fn pattern_for_miri(seed: u64, len: usize) -> Vec<u8> {
    let mut r = Rng(seed);
    let block: Vec<u8> = (0..4).flat_map(|_| r.next().to_le_bytes()).collect();
    let mut v = block.repeat(len.div_ceil(32));
    v.truncate(len);
    for (k, c) in v.chunks_mut(32).enumerate() {
        c[0] ^= k as u8;
    }
    v
}

/// Object lengths shaped like compressed 4 KiB pages: mostly 500..3000
/// bytes, some tiny, some incompressible (huge).
pub fn compressed_len(r: &mut Rng, page: usize) -> usize {
    match r.range(0, 99) {
        0..=9 => r.range(1, 200),
        10..=79 => r.range(page / 8, page * 3 / 4),
        80..=94 => r.range(page * 3 / 4, page - 1),
        _ => page,
    }
}
