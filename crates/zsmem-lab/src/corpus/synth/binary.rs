//! Binaries (firmware, images): bytes that barely compress.

use rand::Rng;

use super::draw::zipf;
use super::writer::W;

impl W<'_> {
    /// Firmware blobs and images: from nearly random (huge pages) to
    /// palette-like data with runs, some with zero-filled stretches
    /// (same-filled pages).
    pub(super) fn binary(&mut self) {
        let style = self.r.random_range(0..4);
        // Half the blobs end in zero padding, like firmware images
        // rounded up to an erase block: zram's same-filled pages.
        let tail = if self.chance(0.5) {
            (self.size / 2).min(self.r.random_range(8192..16384))
        } else {
            0
        };
        let body = self.size - tail;
        while self.o.len() < body {
            match style {
                0 => {
                    let start = self.o.len();
                    self.o.resize(start + 4096, 0);
                    self.r.fill(&mut self.o[start..]);
                }
                1 => {
                    // Palette image: few symbols, short runs.
                    for _ in 0..1024 {
                        let v = zipf(self.r, 16, 2) as u8 * 17;
                        let run = 1 + zipf(self.r, 6, 2);
                        for _ in 0..run {
                            self.o.push(v);
                        }
                    }
                }
                2 => {
                    // Firmware: code-like random words between tables.
                    let start = self.o.len();
                    self.o.resize(start + 2048, 0);
                    self.r.fill(&mut self.o[start..]);
                    for _ in 0..128 {
                        let w = (zipf(self.r, 64, 3) as u32).to_le_bytes();
                        self.o.extend_from_slice(&w);
                        self.o.extend_from_slice(&[0, 0, 0, 0]);
                    }
                    self.o.extend_from_slice(&[0u8; 1024]);
                }
                _ => {
                    // Padded image: random data, then an erased stretch.
                    let start = self.o.len();
                    self.o.resize(start + 6144, 0);
                    self.r.fill(&mut self.o[start..]);
                    let pad = self.o.len();
                    self.o.resize(pad + 8192, 0xff);
                }
            }
        }
        self.o.truncate(body);
        self.o.resize(self.size, 0);
    }
}
