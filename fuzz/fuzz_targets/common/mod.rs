//! What the fuzz targets share: numbers read from the fuzzer's bytes.

/// Reads little-endian numbers from the fuzzer's bytes, zeros at the end.
pub struct Bytes<'a>(pub &'a [u8]);

#[allow(dead_code)] // not every target reads every width
impl Bytes<'_> {
    pub fn u8(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }
    pub fn u16(&mut self) -> u16 {
        u16::from(self.u8()) | u16::from(self.u8()) << 8
    }
    pub fn u64(&mut self) -> u64 {
        (0..8).fold(0, |acc, i| acc | u64::from(self.u8()) << (8 * i))
    }
}
