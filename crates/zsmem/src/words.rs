//! Copies into, out of and within class memory by 8-byte atomic accesses
//! (whole 64-byte blocks by 16-byte vector accesses in assembly, taken as
//! the atomic accesses of the words they cover: see [`wide`]), so that a
//! lock-free reader racing a writer is no data race under Rust's memory
//! model (it may copy a torn object, which its check then refuses).
//!
//! Pool memory is written this way in a pool that reads without the lock
//! ([`Writes`]; a pool without lock-free reads uses `memcpy`). A class's
//! objects start at multiples of 8 from a page-aligned run and every class
//! size is a multiple of 8, so the words an object's bytes lie in are its
//! slot's; a lane's objects start at any 2-byte unit, so the words at
//! either end may hold a neighbour's bytes too. A partial word at either
//! end of a write is read, merged and written back whole (a neighbour's
//! bytes as they were): the writer holds the class's or lane's lock, so no
//! other writer can interleave.
//!
//! Relaxed accesses: the order that matters is given by the read protocol's
//! fences (`optimistic.rs`). Loom does not see these accesses (it cannot
//! track raw memory); Miri does.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const WORD: usize = 8;

/// Bytes a wide step copies (a cache line).
const BLOCK: usize = 64;

/// How a class or lane writes its memory: by atomic words where a
/// lock-free reader may race the write (every class and lane of a pool
/// with lock-free reads: runs pass between classes of one page source),
/// plainly (`memcpy`) where none can (a pool without them: the page
/// store's, `PoolConfig::kernel()`'s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Writes {
    Words,
    Plain,
}

impl Writes {
    /// By words if lock-free readers may race the writes, else plainly.
    pub(crate) fn racing(readers_race: bool) -> Writes {
        if readers_race {
            Writes::Words
        } else {
            Writes::Plain
        }
    }

    /// Under Miri every write goes by words: its weak-memory emulation
    /// stops with an internal error ("cannot have empty store buffer when
    /// previous write was atomic") on an atomic write to memory whose last
    /// write was a `memcpy` after an atomic one, which its stand-in for
    /// `MADV_DONTNEED` (zeroing by word) makes of a reused run.
    fn under_miri(self) -> Writes {
        if cfg!(miri) { Writes::Words } else { self }
    }

    /// Write `data` at `dst + offset` ([`store`] by words).
    ///
    /// # Safety
    /// As for [`store`]; plainly, the destination is valid for writes and
    /// no one else accesses it meanwhile.
    pub(crate) unsafe fn store(self, dst: *mut u8, offset: usize, data: &[u8]) {
        match self.under_miri() {
            // SAFETY: as the caller promises.
            Writes::Words => unsafe { store(dst, offset, data) },
            // SAFETY: as the caller promises; `data` is not pool memory
            // being written (a shared slice of it is only read).
            Writes::Plain => unsafe {
                std::ptr::copy_nonoverlapping(data.as_ptr(), dst.add(offset), data.len())
            },
        }
    }

    /// Copy `len` bytes from `src` to `dst` ([`copy`] by words).
    ///
    /// # Safety
    /// As for [`copy`].
    pub(crate) unsafe fn copy(self, src: *const u8, dst: *mut u8, len: usize) {
        match self.under_miri() {
            // SAFETY: as the caller promises.
            Writes::Words => unsafe { copy(src, dst, len) },
            // SAFETY: as the caller promises (the ranges do not overlap).
            Writes::Plain => unsafe { std::ptr::copy_nonoverlapping(src, dst, len) },
        }
    }
}

/// The word at `p`.
///
/// # Safety
/// `p` is 8-aligned, valid for reads of 8 bytes, and accessed by others
/// only atomically (or not concurrently).
unsafe fn word<'a>(p: *const u8) -> &'a AtomicU64 {
    debug_assert_eq!(p as usize % WORD, 0);
    // SAFETY: as the caller promises.
    unsafe { AtomicU64::from_ptr(p.cast_mut().cast::<u64>()) }
}

/// Copy `len` bytes from `src` into `dst`.
///
/// # Safety
/// `src` is 8-aligned and `src..src + len` rounded up to 8 bytes is valid
/// for reads, accessed concurrently by others only through this module;
/// `dst` is valid for writes of `len` bytes (it may be uninitialised) and
/// is no pool memory.
#[inline]
pub(crate) unsafe fn load(src: *const u8, dst: *mut u8, len: usize) {
    let words = len / WORD;
    by_words_and_blocks(
        src as usize,
        words,
        |i| {
            // SAFETY: word `i` is inside the caller's range, and `dst + 8 *
            // i` has 8 bytes of `dst`.
            unsafe {
                let w = word(src.add(i * WORD)).load(Relaxed);
                dst.add(i * WORD).cast::<u64>().write_unaligned(w);
            }
        },
        // SAFETY: the blocks are inside the caller's ranges, the pool side
        // aligned by `by_words_and_blocks`; `dst` is no pool memory.
        |at, n| unsafe { wide::blocks::<true, false>(src.add(at), dst.add(at), n) },
    );
    let tail = len - words * WORD;
    if tail > 0 {
        // SAFETY: the last word, partly the object's, is inside the range
        // rounded up; `dst` has its last `tail` bytes there.
        unsafe {
            let w = word(src.add(words * WORD)).load(Relaxed).to_ne_bytes();
            std::ptr::copy_nonoverlapping(w.as_ptr(), dst.add(words * WORD), tail);
        }
    }
}

/// Copy `words` whole words whose pool side starts at `pool` (8-aligned):
/// whole 64-byte blocks by `blocks(byte offset, count)` ([`wide`]; the
/// pool side at that offset is [`wide::ALIGN`]-aligned: at most one word
/// goes ahead by word to make it so), every other word by `word(index)`.
#[inline]
fn by_words_and_blocks(
    pool: usize,
    words: usize,
    mut word: impl FnMut(usize),
    blocks: impl FnOnce(usize, usize),
) {
    let (lead, n) = if wide::usable() {
        let lead = ((pool / WORD) % (wide::ALIGN / WORD)).min(words);
        (lead, (words - lead) * WORD / BLOCK)
    } else {
        (words, 0)
    };
    (0..lead).for_each(&mut word);
    blocks(lead * WORD, n);
    (lead + n * BLOCK / WORD..words).for_each(word);
}

/// Copy `len` bytes from `base + off` into `dst`, where `off` need not be
/// a multiple of 8 (a lane's objects start at any unit): the words the
/// bytes lie in are loaded whole.
///
/// # Safety
/// `base` is 8-aligned and the words `base + off .. base + off + len` lie
/// in are valid for reads, accessed concurrently by others only through
/// this module; `dst` is as for [`load`].
#[inline]
pub(crate) unsafe fn load_at(base: *const u8, off: usize, dst: *mut u8, len: usize) {
    let start = off % WORD;
    if start == 0 {
        // SAFETY: as the caller promises.
        return unsafe { load(base.add(off), dst, len) };
    }
    let head = (WORD - start).min(len);
    // SAFETY: the word holding byte `off` is in the caller's range, and
    // `dst` has `head <= len` bytes.
    unsafe {
        let w = word(base.add(off - start)).load(Relaxed).to_ne_bytes();
        std::ptr::copy_nonoverlapping(w.as_ptr().add(start), dst, head);
    }
    if head < len {
        // SAFETY: the rest starts at the next word, in the caller's range.
        unsafe { load(base.add(off - start + WORD), dst.add(head), len - head) }
    }
}

/// Write `data` at `dst + offset`: whole words where they are whole, the
/// words at either end merged with the bytes already there. Begins with a
/// `Release` fence: a lock-free reader that copies any of these bytes sees
/// (after its `Acquire` fence) every change this thread saw before, such
/// as the free of the object that was here (`optimistic.rs`).
///
/// # Safety
/// `dst` is 8-aligned; the words `dst + offset .. dst + offset +
/// data.len()` lie in are valid for reads and writes, written by no one
/// else meanwhile, and read concurrently only through this module.
pub(crate) unsafe fn store(dst: *mut u8, offset: usize, data: &[u8]) {
    crate::sync::atomic::fence(std::sync::atomic::Ordering::Release);
    let head = (WORD - offset % WORD) % WORD;
    let head = head.min(data.len());
    // SAFETY: each merged word holds bytes of the caller's range.
    unsafe { merge(dst, offset, &data[..head]) };
    let (at, rest) = (offset + head, &data[head..]);
    let words = rest.len() / WORD;
    let src = rest.as_ptr();
    // SAFETY: `at` is 8-aligned now (or `rest` is empty).
    let out = unsafe { dst.add(at) };
    by_words_and_blocks(
        out as usize,
        words,
        |i| {
            // SAFETY: word `i` is inside the caller's range, 8-aligned, and
            // `src + 8 * i` has 8 bytes of `data`.
            unsafe {
                let w = src.add(i * WORD).cast::<u64>().read_unaligned();
                word(out.add(i * WORD)).store(w, Relaxed);
            }
        },
        // SAFETY: the blocks are inside the caller's range and `rest`, the
        // pool side aligned by `by_words_and_blocks`; `data` is plain
        // memory, or pool memory that only readers race (a migration's or
        // cleaning's source, under the lock that keeps its writers out).
        |at, n| unsafe { wide::blocks::<false, true>(src.add(at), out.add(at), n) },
    );
    // SAFETY: as for the head.
    unsafe { merge(dst, at + words * WORD, &rest[words * WORD..]) };
}

/// Write `data` (at most the rest of one word) at `dst + at` by reading,
/// merging and writing back the word it lies in.
///
/// # Safety
/// As for [`store`].
unsafe fn merge(dst: *mut u8, at: usize, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let start = at % WORD;
    debug_assert!(start + data.len() <= WORD);
    // SAFETY: the word holding byte `at` is in the caller's range.
    let w = unsafe { word(dst.add(at - start)) };
    let mut b = w.load(Relaxed).to_ne_bytes();
    b[start..start + data.len()].copy_from_slice(data);
    w.store(u64::from_ne_bytes(b), Relaxed);
}

/// Copy `len` bytes (rounded up to whole words) from `src` to `dst`, after
/// a `Release` fence as [`store`].
///
/// # Safety
/// Both are 8-aligned; `len` rounded up to 8 bytes from each is valid
/// (for reads at `src`, writes at `dst`), the two ranges do not overlap,
/// the destination is written by no one else meanwhile, and both are
/// accessed concurrently only through this module.
pub(crate) unsafe fn copy(src: *const u8, dst: *mut u8, len: usize) {
    crate::sync::atomic::fence(std::sync::atomic::Ordering::Release);
    let words = len.div_ceil(WORD);
    let one = |i: usize| {
        // SAFETY: word `i` of each is inside the caller's ranges.
        unsafe {
            let w = word(src.add(i * WORD)).load(Relaxed);
            word(dst.add(i * WORD)).store(w, Relaxed);
        }
    };
    // Whole blocks only where both sides can be aligned for them at once.
    if (src as usize ^ dst as usize).is_multiple_of(wide::ALIGN) {
        // SAFETY: the blocks are inside the caller's ranges, both sides
        // aligned by `by_words_and_blocks` (they are alike mod the
        // alignment).
        let blocks = |at, n| unsafe { wide::blocks::<true, true>(src.add(at), dst.add(at), n) };
        by_words_and_blocks(src as usize, words, one, blocks);
    } else {
        (0..words).for_each(one);
    }
}

/// Zero `bytes` (a multiple of 8) at `p` (8-aligned), after a `Release`
/// fence as [`store`]: Miri's stand-in for `MADV_DONTNEED`, whose zeros a
/// lock-free reader sees only after the system call, so after every change
/// the discarding thread made before it.
///
/// # Safety
/// As for [`copy`]'s destination.
#[cfg(miri)]
pub(crate) unsafe fn zero(p: *mut u8, bytes: usize) {
    crate::sync::atomic::fence(std::sync::atomic::Ordering::Release);
    for i in 0..bytes / WORD {
        // SAFETY: inside the caller's range.
        unsafe { word(p.add(i * WORD)) }.store(0, Relaxed);
    }
}

/// Whole cache lines by 16-byte `MOVDQA` accesses on the pool side, in
/// assembly, on x86-64 processors with AVX.
///
/// Why: a copy by `AtomicU64` loads is one load a word, and a line of pool
/// memory that misses the cache holds eight of the core's load-buffer
/// entries until it arrives, so few lines are in flight at once: a 1 KiB
/// object read at random from a ring of 4,096 took 80-110 ns by words
/// against 35-41 by `memcpy` and 38-40 by 16-byte vector loads (one
/// thread; docs/DESIGN.md, "Reads without the lock").
///
/// Why it is no data race: an `asm!` block is opaque, and may do what Rust
/// code could do to the memory it is given (the reference's rules for
/// inline assembly: the same as an FFI call's). Each 16-byte access here
/// is taken as the two relaxed atomic accesses of the 8-byte words it
/// covers, the accesses this module makes everywhere else, so every racing
/// access to a pool word is an 8-byte atomic one. That needs each access
/// to be single-copy atomic at least per 8-byte half, and the one
/// guarantee of that kind Intel's SDM gives (Vol. 3A, "Guaranteed Atomic
/// Operations") is for `MOVDQA` (and `MOVAPS`, `MOVAPD`, their VEX.128
/// forms) at 16-byte-aligned addresses on processors that enumerate AVX:
/// the whole 16 bytes atomically, which is stronger. So the pool side's
/// blocks start 16-aligned ([`by_words_and_blocks`] moves one word ahead by word where
/// needed; a copy within the pool whose two sides differ in that alignment
/// goes by words), and without AVX everything goes by words; the side that
/// is no pool memory uses `MOVDQU`. The read protocol would refuse a torn
/// copy too, but that is no defence in the memory model. Miri cannot run
/// assembly: under Miri and loom, and off x86-64, the blocks go by words
/// ([`wide`]'s other form), so Miri checks the word model these accesses
/// are taken as, not the assembly itself.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(miri), not(loom)))]
mod wide {
    /// The pool side's alignment for a block.
    pub(super) const ALIGN: usize = 16;

    /// Whether this processor makes an aligned 16-byte `MOVDQA` atomic
    /// (it enumerates AVX; `std` caches the answer, a load here).
    #[inline]
    pub(super) fn usable() -> bool {
        std::arch::is_x86_feature_detected!("avx")
    }

    /// One 64-byte line from `$s` to `$t`: four 16-byte loads by `$load`
    /// into four xmm registers (declared clobbered), four stores by
    /// `$store`; no stack, no flags.
    macro_rules! line {
        ($load:literal, $store:literal, $s:expr, $t:expr) => {
            std::arch::asm!(
                concat!($load, " {x0}, xmmword ptr [{s}]"),
                concat!($load, " {x1}, xmmword ptr [{s} + 16]"),
                concat!($load, " {x2}, xmmword ptr [{s} + 32]"),
                concat!($load, " {x3}, xmmword ptr [{s} + 48]"),
                concat!($store, " xmmword ptr [{t}], {x0}"),
                concat!($store, " xmmword ptr [{t} + 16], {x1}"),
                concat!($store, " xmmword ptr [{t} + 32], {x2}"),
                concat!($store, " xmmword ptr [{t} + 48], {x3}"),
                s = in(reg) $s,
                t = in(reg) $t,
                x0 = out(xmm_reg) _,
                x1 = out(xmm_reg) _,
                x2 = out(xmm_reg) _,
                x3 = out(xmm_reg) _,
                options(nostack, preserves_flags),
            )
        };
    }

    /// Copy `blocks` 64-byte blocks from `src` to `dst`; the pool side(s)
    /// (`SRC_POOL`, `DST_POOL`) by `MOVDQA`, the other by `MOVDQU`.
    ///
    /// # Safety
    /// The blocks are valid for reads at `src` and writes at `dst`, which
    /// do not overlap; the pool side(s) are 16-aligned and accessed
    /// concurrently only through this module, a pool `dst` written by no
    /// one else meanwhile; [`usable`] is true.
    #[inline]
    pub(super) unsafe fn blocks<const SRC_POOL: bool, const DST_POOL: bool>(
        src: *const u8,
        dst: *mut u8,
        blocks: usize,
    ) {
        debug_assert!(blocks == 0 || !SRC_POOL || (src as usize).is_multiple_of(ALIGN));
        debug_assert!(blocks == 0 || !DST_POOL || (dst as usize).is_multiple_of(ALIGN));
        for k in 0..blocks {
            // SAFETY: block `k` is inside both ranges (the caller's
            // promise), the pool side 16-aligned as `movdqa` needs; SSE2
            // is enabled (the `cfg`); the blocks touch no stack and no
            // flags.
            unsafe {
                let (s, t) = (src.add(k * super::BLOCK), dst.add(k * super::BLOCK));
                match (SRC_POOL, DST_POOL) {
                    (true, false) => line!("movdqa", "movdqu", s, t),
                    (false, true) => line!("movdqu", "movdqa", s, t),
                    _ => line!("movdqa", "movdqa", s, t),
                }
            }
        }
    }
}

/// Whole cache lines by words (Miri, loom, other architectures): a line
/// into registers, then out.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2", not(miri), not(loom))))]
mod wide {
    use super::{BLOCK, WORD, word};
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    /// The pool side's alignment for a block: as the words'.
    pub(super) const ALIGN: usize = WORD;

    /// Always: blocks by words need nothing of the processor.
    #[inline]
    pub(super) fn usable() -> bool {
        true
    }

    /// Copy `blocks` 64-byte blocks from `src` to `dst`, each word of the
    /// pool side(s) (`SRC_POOL`, `DST_POOL`; 8-aligned) by an atomic
    /// access, the other side plainly.
    ///
    /// # Safety
    /// The blocks are valid for reads at `src` and writes at `dst`, which
    /// do not overlap; the pool side(s) are 8-aligned and accessed
    /// concurrently only through this module, a pool `dst` written by no
    /// one else meanwhile.
    #[inline]
    pub(super) unsafe fn blocks<const SRC_POOL: bool, const DST_POOL: bool>(
        src: *const u8,
        dst: *mut u8,
        blocks: usize,
    ) {
        for b in 0..blocks {
            let mut line = [0u64; BLOCK / WORD];
            for (k, w) in line.iter_mut().enumerate() {
                // SAFETY: word `k` of block `b` is inside the caller's
                // range; the pool side is 8-aligned.
                unsafe {
                    let p = src.add(b * BLOCK + k * WORD);
                    *w = if SRC_POOL {
                        word(p).load(Relaxed)
                    } else {
                        p.cast::<u64>().read_unaligned()
                    };
                }
            }
            if DST_POOL {
                for (k, w) in line.iter().enumerate() {
                    // SAFETY: as for the loads.
                    unsafe {
                        AtomicU64::from_ptr(dst.add(b * BLOCK + k * WORD).cast::<u64>())
                            .store(*w, Relaxed);
                    }
                }
            } else {
                // SAFETY: block `b` of `dst` is the caller's to write.
                unsafe {
                    dst.add(b * BLOCK)
                        .cast::<[u64; BLOCK / WORD]>()
                        .write_unaligned(line);
                }
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A 512-byte, 8-aligned buffer.
    #[repr(align(8))]
    struct Buf([u8; 512]);

    /// Lengths around the words and the 64-byte blocks copied whole.
    /// Under Miri a sample of them (every one took 174 s of CI's Miri
    /// lane, whose parts have 900).
    fn lengths() -> Vec<usize> {
        if cfg!(miri) {
            vec![0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 63, 64, 65, 72, 129, 200]
        } else {
            (0..40)
                .chain([63, 64, 65, 71, 72, 127, 128, 129, 200, 256, 300, 440])
                .collect()
        }
    }

    /// Offsets into a buffer: every one to two words and more, or under
    /// Miri those around the words.
    fn offsets() -> Vec<usize> {
        if cfg!(miri) {
            vec![0, 1, 3, 7, 8, 9, 15, 16]
        } else {
            (0..17).collect()
        }
    }

    // SAFETY (every call below): the buffers are 8-aligned, 512 bytes, and
    // each range asked for, rounded to words, lies inside them; nothing
    // else touches them.

    #[test]
    fn every_length_and_offset_round_trips_and_leaves_the_rest() {
        for offset in offsets() {
            for len in lengths() {
                let mut b = Buf([0xEE; 512]);
                let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8 + 1).collect();
                unsafe { store(b.0.as_mut_ptr(), offset, &data) };
                for (i, &x) in b.0.iter().enumerate() {
                    let want = if (offset..offset + len).contains(&i) {
                        ((i - offset) % 251) as u8 + 1
                    } else {
                        0xEE
                    };
                    assert_eq!(x, want, "offset {offset} len {len} byte {i}");
                }
                // Mutable pointers, as pool memory's are: an atomic access
                // needs write permission under Miri's borrow rules.
                let mut out = vec![0u8; offset + len];
                unsafe { load(b.0.as_mut_ptr(), out.as_mut_ptr(), out.len()) };
                assert_eq!(&out[offset..], &data[..]);
                // From the next word too: the other alignment of a block.
                let from = if offset >= WORD { WORD } else { 0 };
                let mut next = vec![0u8; offset + len - from];
                unsafe { load(b.0.as_mut_ptr().add(from), next.as_mut_ptr(), next.len()) };
                assert_eq!(&next[offset - from..], &data[..]);
                let mut at = vec![0u8; len];
                unsafe { load_at(b.0.as_mut_ptr(), offset, at.as_mut_ptr(), len) };
                assert_eq!(at, data, "offset {offset} len {len}");
            }
        }
    }

    #[test]
    fn copy_moves_whole_words() {
        let mut a = Buf([0; 512]);
        for (i, x) in a.0.iter_mut().enumerate() {
            *x = (i % 251) as u8;
        }
        // Sides a word apart in alignment, and not: blocks go whole only
        // where both can be 16-aligned at once.
        for (from, to) in [(0, 0), (8, 8), (0, 8), (8, 0), (16, 24)] {
            for len in lengths() {
                let mut b = Buf([0xFF; 512]);
                unsafe { copy(a.0.as_mut_ptr().add(from), b.0.as_mut_ptr().add(to), len) };
                let whole = len.div_ceil(WORD) * WORD;
                let case = format!("len {len} from {from} to {to}");
                assert_eq!(&b.0[to..to + whole], &a.0[from..from + whole], "{case}");
                assert!(b.0[..to].iter().all(|&x| x == 0xFF), "{case}");
                assert!(b.0[to + whole..].iter().all(|&x| x == 0xFF), "{case}");
            }
        }
    }
}
