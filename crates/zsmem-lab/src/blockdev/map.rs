//! Byte ranges of the device file as pages: which pages a read, write or
//! punched hole touches, and the read-modify-write of a partial page.
//!
//! The device is a whole number of 4 KiB pages; page `i` holds bytes
//! `[i * 4096, (i + 1) * 4096)`, and is slot `i` of the contestant.

use std::ops::Range;

use crate::corpus::PAGE_SIZE;

/// One block of the device: a 4 KiB page (the device's block size, at
/// every `--page-size` of the lab's other workloads).
pub type Block = [u8; PAGE_SIZE];

const PAGE: u64 = PAGE_SIZE as u64;

/// The part of one page a byte range covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// The page (the contestant's slot).
    pub page: u64,
    /// First byte of the range inside the page.
    pub start: usize,
    /// Bytes of the range inside the page.
    pub len: usize,
    /// Where those bytes are in the caller's buffer.
    pub buf_offset: usize,
}

impl Segment {
    /// Whether the range covers the whole page.
    pub fn is_whole(&self) -> bool {
        self.start == 0 && self.len == PAGE_SIZE
    }
}

/// The pages `[offset, offset + len)` touches, in order.
pub fn segments(offset: u64, len: u64) -> impl Iterator<Item = Segment> {
    let end = offset.saturating_add(len);
    let mut at = offset;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let page = at / PAGE;
        let start = (at % PAGE) as usize;
        let n = (PAGE_SIZE - start).min((end - at) as usize);
        let s = Segment {
            page,
            start,
            len: n,
            buf_offset: (at - offset) as usize,
        };
        at += n as u64;
        Some(s)
    })
}

/// The pages wholly inside `[offset, offset + len)`: what a punched hole
/// discards (the partial pages at its edges are zeroed instead).
pub fn whole_pages(offset: u64, len: u64) -> Range<u64> {
    let end = offset.saturating_add(len);
    let first = offset.div_ceil(PAGE);
    let last = end / PAGE;
    first..last.max(first)
}

/// Why a range cannot be served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeError {
    /// It starts or ends past the device (`EFBIG` for a write, `ENOSPC`
    /// for an allocation).
    PastEnd,
}

/// The length of a read at `offset` of `len` bytes on a device of `size`
/// bytes: cut at the end of the device (a short read), 0 past it.
pub fn read_len(offset: u64, len: u64, size: u64) -> u64 {
    len.min(size.saturating_sub(offset))
}

/// Checks that a write or hole `[offset, offset + len)` lies inside a
/// device of `size` bytes.
pub fn check_inside(offset: u64, len: u64, size: u64) -> Result<(), RangeError> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(RangeError::PastEnd),
    }
}

/// Page operations on numbered pages, what the device file is made of.
pub trait PageIo {
    /// The error of the operations.
    type Error;
    /// Read page `page` into `buf` (zeros if it holds nothing).
    fn read_page(&mut self, page: u64, buf: &mut Block) -> Result<(), Self::Error>;
    /// Store `data` as page `page`.
    fn write_page(&mut self, page: u64, data: &Block) -> Result<(), Self::Error>;
    /// Drop `count` pages from `page` on; they read back as zeros.
    fn discard(&mut self, page: u64, count: u64) -> Result<(), Self::Error>;
}

/// Reads `buf.len()` bytes at `offset` (the caller has cut the length at
/// the end of the device).
pub fn read_at<P: PageIo>(io: &mut P, offset: u64, buf: &mut [u8]) -> Result<(), P::Error> {
    let mut page: Box<Block> = Box::new([0; PAGE_SIZE]);
    for s in segments(offset, buf.len() as u64) {
        let out = &mut buf[s.buf_offset..s.buf_offset + s.len];
        if s.is_whole() {
            let whole: &mut Block = out.try_into().expect("a whole segment is one page");
            io.read_page(s.page, whole)?;
        } else {
            io.read_page(s.page, &mut page)?;
            out.copy_from_slice(&page[s.start..s.start + s.len]);
        }
    }
    Ok(())
}

/// Writes `data` at `offset`: whole pages stored as they are, a partial
/// page read, changed and stored again.
pub fn write_at<P: PageIo>(io: &mut P, offset: u64, data: &[u8]) -> Result<(), P::Error> {
    let mut page: Box<Block> = Box::new([0; PAGE_SIZE]);
    for s in segments(offset, data.len() as u64) {
        let input = &data[s.buf_offset..s.buf_offset + s.len];
        if s.is_whole() {
            let whole: &Block = input.try_into().expect("a whole segment is one page");
            io.write_page(s.page, whole)?;
        } else {
            io.read_page(s.page, &mut page)?;
            page[s.start..s.start + s.len].copy_from_slice(input);
            io.write_page(s.page, &page)?;
        }
    }
    Ok(())
}

/// Makes `[offset, offset + len)` read as zeros: the whole pages inside
/// are discarded (a block device's discard), the partial ones at the edges
/// zeroed in place.
pub fn punch_hole<P: PageIo>(io: &mut P, offset: u64, len: u64) -> Result<(), P::Error> {
    let whole = whole_pages(offset, len);
    if !whole.is_empty() {
        io.discard(whole.start, whole.end - whole.start)?;
    }
    let mut page: Box<Block> = Box::new([0; PAGE_SIZE]);
    for s in segments(offset, len).filter(|s| !s.is_whole()) {
        io.read_page(s.page, &mut page)?;
        page[s.start..s.start + s.len].fill(0);
        io.write_page(s.page, &page)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Pages in a map; counts the operations.
    #[derive(Default)]
    struct Model {
        pages: HashMap<u64, Box<Block>>,
        writes: usize,
        discarded: u64,
    }

    impl PageIo for Model {
        type Error = ();
        fn read_page(&mut self, page: u64, buf: &mut Block) -> Result<(), ()> {
            match self.pages.get(&page) {
                Some(p) => buf.copy_from_slice(&p[..]),
                None => buf.fill(0),
            }
            Ok(())
        }
        fn write_page(&mut self, page: u64, data: &Block) -> Result<(), ()> {
            self.writes += 1;
            self.pages.insert(page, Box::new(*data));
            Ok(())
        }
        fn discard(&mut self, page: u64, count: u64) -> Result<(), ()> {
            self.discarded += count;
            for p in page..page + count {
                self.pages.remove(&p);
            }
            Ok(())
        }
    }

    #[test]
    fn segments_split_at_page_boundaries() {
        let s: Vec<Segment> = segments(4000, 5000).collect();
        assert_eq!(
            s,
            vec![
                Segment {
                    page: 0,
                    start: 4000,
                    len: 96,
                    buf_offset: 0
                },
                Segment {
                    page: 1,
                    start: 0,
                    len: 4096,
                    buf_offset: 96
                },
                Segment {
                    page: 2,
                    start: 0,
                    len: 808,
                    buf_offset: 4192
                },
            ]
        );
        assert!(s[1].is_whole() && !s[0].is_whole() && !s[2].is_whole());
        assert_eq!(segments(8192, 0).count(), 0);
        assert_eq!(segments(u64::MAX - 1, 10).map(|s| s.len).sum::<usize>(), 1);
    }

    #[test]
    fn whole_pages_leave_the_edges() {
        assert_eq!(whole_pages(0, 8192), 0..2);
        assert_eq!(whole_pages(1, 8192), 1..2);
        assert_eq!(whole_pages(100, 200), 1..1);
        assert!(whole_pages(100, 200).is_empty());
        assert_eq!(whole_pages(4096, 4095), 1..1);
        assert_eq!(whole_pages(4096, 4096), 1..2);
    }

    #[test]
    fn ranges_are_checked_against_the_size() {
        assert_eq!(read_len(0, 100, 50), 50);
        assert_eq!(read_len(60, 100, 50), 0);
        assert_eq!(check_inside(0, 4096, 4096), Ok(()));
        assert_eq!(check_inside(1, 4096, 4096), Err(RangeError::PastEnd));
        assert_eq!(
            check_inside(u64::MAX, 2, u64::MAX),
            Err(RangeError::PastEnd)
        );
    }

    #[test]
    fn writes_reads_and_holes_match_a_flat_buffer() {
        let mut m = Model::default();
        let mut flat = vec![0u8; 8 * PAGE_SIZE];
        let ops: [(u64, usize, u8); 5] = [
            (0, 3 * PAGE_SIZE, 1),
            (100, 50, 2),
            (4000, 5000, 3),
            (5 * PAGE - 7, 20, 4),
            (7 * PAGE, PAGE_SIZE, 5),
        ];
        for (off, len, byte) in ops {
            let data = vec![byte; len];
            write_at(&mut m, off, &data).unwrap();
            flat[off as usize..off as usize + len].copy_from_slice(&data);
        }
        // Whole-page writes do not read first: 3 + 1 + 1(whole) + 2 + 2 + 1.
        assert_eq!(m.writes, 10);
        punch_hole(&mut m, 50, 2 * PAGE + 10).unwrap();
        flat[50..50 + 2 * PAGE_SIZE + 10].fill(0);
        assert_eq!(m.discarded, 1, "only page 1 is wholly inside the hole");
        let mut back = vec![0xAAu8; flat.len()];
        read_at(&mut m, 0, &mut back).unwrap();
        assert_eq!(back, flat);
        let mut part = vec![0u8; 333];
        read_at(&mut m, 4090, &mut part).unwrap();
        assert_eq!(part[..], flat[4090..4090 + 333]);
    }
}
