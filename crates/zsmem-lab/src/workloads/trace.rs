//! Size traces: a text format of object allocations and frees, recorded
//! from any page workload and replayed on any object allocator.
//!
//! # Format
//!
//! One operation per line; blank lines are ignored, and so is everything
//! from a `#` that starts a line or follows a space or tab (a comment); a
//! `#` inside a field is an error (`1#00` is not a size); fields are
//! separated by spaces or tabs:
//!
//! ```text
//! # zsmem trace v1
//! alloc 1 1432      # object 1 of 1432 bytes
//! alloc 2 4096
//! free 1
//! ```
//!
//! - `alloc ID SIZE`: a new object; `ID` is a decimal `u64` not live at that
//!   point, `SIZE` is 1..=4096 bytes (the page size of every pool a trace
//!   replays on, so a size no pool could hold is refused at its line);
//! - `free ID`: frees a live object.
//!
//! A trace that breaks a rule (unknown keyword, missing or extra field, bad
//! number, size out of range, `alloc` of a live id, `free` of an id that is
//! not live) is refused with an error naming the line and what is wrong.

use std::collections::HashSet;
use std::fmt;
use std::io::Write;
use std::path::Path;

use zsmem::Codec;

use crate::contestants::ObjectContestant;
use crate::contestants::{Figures, LabError, PageContestant};
use crate::corpus::Page;
use crate::text::shown;

/// Largest object a trace may hold: a page of the pools `zsmem replay`
/// runs (4 KiB), so that a size they would all refuse is refused with its
/// file and line when the trace is read, not midway through a replay.
pub const MAX_TRACE_SIZE: usize = crate::corpus::PAGE_SIZE;

/// One traced operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceOp {
    /// A new object of `size` bytes.
    Alloc {
        /// The object's id.
        id: u64,
        /// Its size in bytes.
        size: usize,
    },
    /// Free object `id`.
    Free {
        /// The object's id.
        id: u64,
    },
}

impl fmt::Display for TraceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceOp::Alloc { id, size } => write!(f, "alloc {id} {size}"),
            TraceOp::Free { id } => write!(f, "free {id}"),
        }
    }
}

/// A malformed trace: where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {message}", shown(source_name), at_line(*line))]
pub struct TraceError {
    /// The file (or `<input>`).
    pub source_name: String,
    /// 1-based line number (0: the file could not be read).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// `:LINE` after the file's name, or nothing for an error of the whole
/// file (line 0: it could not be read).
fn at_line(line: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(":{line}")
    }
}

/// A parsed, checked trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// The operations in order.
    pub ops: Vec<TraceOp>,
}

impl Trace {
    /// Parse and check `text`; `source_name` names it in errors.
    pub fn parse(text: &str, source_name: &str) -> Result<Trace, TraceError> {
        let mut ops = Vec::new();
        let mut live = HashSet::new();
        for (i, raw) in text.lines().enumerate() {
            let err = |message: String| TraceError {
                source_name: source_name.to_string(),
                line: i + 1,
                message,
            };
            let line = without_comment(raw).trim();
            if line.is_empty() {
                continue;
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            let id = |s: &str| {
                s.parse::<u64>().map_err(|_| {
                    err(format!(
                        "`{}` is not an object id (a decimal number)",
                        shown(s)
                    ))
                })
            };
            let op = match fields.as_slice() {
                ["alloc", i, s] => {
                    let id = id(i)?;
                    let size: usize = s
                        .parse()
                        .map_err(|_| err(format!("`{}` is not a size in bytes", shown(s))))?;
                    if size == 0 || size > MAX_TRACE_SIZE {
                        return Err(err(format!("size {size} is outside 1..={MAX_TRACE_SIZE}")));
                    }
                    if !live.insert(id) {
                        return Err(err(format!("alloc of object {id}, which is already live")));
                    }
                    TraceOp::Alloc { id, size }
                }
                ["free", i] => {
                    let id = id(i)?;
                    if !live.remove(&id) {
                        return Err(err(format!("free of object {id}, which is not live")));
                    }
                    TraceOp::Free { id }
                }
                ["alloc", ..] => {
                    return Err(err("`alloc` takes an id and a size: `alloc ID SIZE`".into()));
                }
                ["free", ..] => return Err(err("`free` takes one id: `free ID`".into())),
                [other, ..] => {
                    return Err(err(format!(
                        "unknown operation `{}`: use `alloc ID SIZE` or `free ID`",
                        shown(other)
                    )));
                }
                [] => unreachable!("empty lines were skipped"),
            };
            ops.push(op);
        }
        Ok(Trace { ops })
    }

    /// Read and parse a trace file.
    pub fn read(path: &Path) -> Result<Trace, TraceError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| TraceError {
            source_name: name.clone(),
            line: 0,
            message: format!("cannot read: {e}"),
        })?;
        Trace::parse(&text, &name)
    }

    /// Write the trace in its text format.
    pub fn write_to(&self, mut w: impl Write) -> std::io::Result<()> {
        writeln!(w, "# zsmem trace v1: alloc ID SIZE / free ID")?;
        for op in &self.ops {
            writeln!(w, "{op}")?;
        }
        Ok(())
    }
}

/// A page contestant wrapper that records the objects a zram-like store
/// makes of the pages: same-filled pages make no object, a page that does
/// not compress under `huge_threshold` makes a whole-page object, others
/// an object of their compressed size. Figures come from the wrapped
/// contestant.
pub struct TraceRecorder<'a> {
    inner: &'a mut dyn PageContestant,
    codec: Codec,
    huge_threshold: usize,
    /// Object id held by each slot.
    slots: std::collections::HashMap<u64, u64>,
    next_id: u64,
    scratch: Vec<u8>,
    /// The trace so far.
    pub trace: Trace,
}

impl<'a> TraceRecorder<'a> {
    /// Record what `inner` is fed, sizing objects with `codec` and the
    /// kernel's huge threshold for chain 8 (3625).
    pub fn new(inner: &'a mut dyn PageContestant, codec: Codec) -> Self {
        TraceRecorder {
            inner,
            codec,
            huge_threshold: 3625,
            slots: Default::default(),
            next_id: 1,
            scratch: vec![0; 4096],
            trace: Trace::default(),
        }
    }

    fn drop_slot(&mut self, slot: u64) {
        if let Some(id) = self.slots.remove(&slot) {
            self.trace.ops.push(TraceOp::Free { id });
        }
    }
}

impl PageContestant for TraceRecorder<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn config(&self) -> String {
        self.inner.config()
    }
    fn store(&mut self, slot: u64, page: &Page) -> Result<(), LabError> {
        self.inner.store(slot, page)?;
        self.drop_slot(slot);
        if zsmem::store::same_filled(page).is_some() {
            return Ok(());
        }
        let limit = self.huge_threshold;
        let size = match self.codec.compress(page, &mut self.scratch[..limit]) {
            Some(n) if n < limit => n,
            _ => page.len(),
        };
        let id = self.next_id;
        self.next_id += 1;
        self.slots.insert(slot, id);
        self.trace.ops.push(TraceOp::Alloc { id, size });
        Ok(())
    }
    fn load(&mut self, slot: u64, buf: &mut Page) -> Result<(), LabError> {
        self.inner.load(slot, buf)
    }
    fn discard(&mut self, slot: u64, pages: u64) -> Result<(), LabError> {
        self.inner.discard(slot, pages)?;
        for s in slot..slot + pages {
            self.drop_slot(s);
        }
        Ok(())
    }
    fn figures(&mut self) -> Result<Figures, LabError> {
        self.inner.figures()
    }
    fn compact(&mut self) -> Result<(), LabError> {
        self.inner.compact()
    }
    fn op_time(&self) -> Option<std::time::Duration> {
        self.inner.op_time()
    }
    fn waiting_pages(&mut self) -> Option<u64> {
        self.inner.waiting_pages()
    }
}

/// Memory figures of an object allocator at one point of a replay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReplayFigures {
    /// Operations replayed so far.
    pub ops: u64,
    /// Live objects.
    pub objects: u64,
    /// Bytes of the live objects.
    pub bytes: u64,
    /// Memory the allocator holds for them.
    pub held: u64,
    /// The allocator's metadata, where visible.
    pub meta: u64,
    /// Highest `held` over the samples so far.
    pub peak_held: u64,
    /// Of `held`, freed pages waiting to be given back to the OS.
    pub returning: u64,
}

fn pattern_byte(id: u64, i: usize) -> u8 {
    (id as usize).wrapping_mul(31).wrapping_add(i) as u8
}

/// Replay a trace on an object contestant: every object is filled with a
/// pattern of its id and checked when it is freed. Memory is sampled every
/// `sample_every` operations (0: only at the end) and at the end; the peak
/// is over the samples.
pub fn replay(
    trace: &Trace,
    c: &mut dyn ObjectContestant,
    sample_every: usize,
) -> Result<Vec<ReplayFigures>, LabError> {
    let mut live: std::collections::HashMap<u64, (u64, usize)> = Default::default();
    let mut samples = Vec::new();
    let (mut bytes, mut peak) = (0u64, 0u64);
    let mut buf = vec![0u8; MAX_TRACE_SIZE];
    let mut back = Vec::with_capacity(MAX_TRACE_SIZE);
    let bad =
        |i: usize, what: String| LabError::Usage(format!("trace operation {}: {what}", i + 1));
    for (i, op) in trace.ops.iter().enumerate() {
        match *op {
            TraceOp::Alloc { id, size } => {
                if size == 0 || size > MAX_TRACE_SIZE || live.contains_key(&id) {
                    return Err(bad(i, format!("alloc {id} {size} is not valid here")));
                }
                for (j, b) in buf[..size].iter_mut().enumerate() {
                    *b = pattern_byte(id, j);
                }
                live.insert(id, (c.alloc(&buf[..size])?, size));
                bytes += size as u64;
            }
            TraceOp::Free { id } => {
                let (h, size) = live
                    .remove(&id)
                    .ok_or_else(|| bad(i, format!("free of object {id}, which is not live")))?;
                c.read(h, &mut back)?;
                if back.len() != size
                    || back
                        .iter()
                        .enumerate()
                        .any(|(j, &x)| x != pattern_byte(id, j))
                {
                    return Err(LabError::Mismatch {
                        contestant: c.name().to_string(),
                        slot: id,
                    });
                }
                c.free(h)?;
                bytes -= size as u64;
            }
        }
        // The peak is taken at every step, sampled or not.
        let m = c.memory()?;
        peak = peak.max(m.held);
        let last = i + 1 == trace.ops.len();
        if last || (sample_every > 0 && (i + 1) % sample_every == 0) {
            samples.push(ReplayFigures {
                ops: i as u64 + 1,
                objects: live.len() as u64,
                bytes,
                held: m.held,
                meta: m.meta,
                peak_held: peak,
                returning: m.returning,
            });
        }
    }
    Ok(samples)
}

/// `line` up to its comment: a `#` at its start or after a space or tab.
/// A `#` inside a field is kept, for the field's parse to refuse (cutting
/// there read `alloc 1 1#00` as an object of 1 byte).
fn without_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    let at = (0..bytes.len())
        .find(|&i| bytes[i] == b'#' && (i == 0 || matches!(bytes[i - 1], b' ' | b'\t')));
    at.map_or(line, |i| &line[..i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_round_trips() {
        let t = Trace::parse(
            "# c\nalloc 1 100\n\nalloc 2 4096 # x\nfree 1\t#y\n  # z\n",
            "t",
        )
        .unwrap();
        assert_eq!(
            t.ops,
            vec![
                TraceOp::Alloc { id: 1, size: 100 },
                TraceOp::Alloc { id: 2, size: 4096 },
                TraceOp::Free { id: 1 }
            ]
        );
        let mut out = Vec::new();
        t.write_to(&mut out).unwrap();
        assert_eq!(
            Trace::parse(std::str::from_utf8(&out).unwrap(), "t").unwrap(),
            t
        );
    }

    #[test]
    fn malformed_lines_are_named() {
        for (text, line, needle) in [
            ("alloc 1 100\nfree 2\n", 2, "not live"),
            ("alloc 1 100\nalloc 1 5\n", 2, "already live"),
            ("alloc x 5\n", 1, "object id"),
            ("alloc 1 0\n", 1, "outside"),
            ("alloc 1 65537\n", 1, "outside"),
            ("alloc 1\n", 1, "takes an id and a size"),
            ("free\n", 1, "takes one id"),
            ("\n\nmalloc 1 2\n", 3, "unknown operation"),
            ("alloc 1 -4\n", 1, "size"),
            // A `#` inside a field is not a comment (read as size 1).
            ("alloc 1 1#00\n", 1, "size"),
            ("alloc 1#2 5\n", 1, "object id"),
        ] {
            let e = Trace::parse(text, "f.trace").unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.message.contains(needle), "{text:?}: {e}");
            assert!(e.to_string().starts_with(&format!("f.trace:{line}:")));
        }
    }

    #[test]
    fn an_object_no_pool_can_hold_is_refused_at_its_line() {
        // Found by the trace_parse fuzz target: traces allowed 64 KiB
        // objects, a 4 KiB pool does not; now the parser says where.
        for (text, line) in [
            ("alloc 0 100\nalloc 2 4296\nfree 2\n", 2),
            ("alloc 0 100\n# c\nalloc 2 0\n", 3),
        ] {
            let e = Trace::parse(text, "t.trace").unwrap_err();
            assert_eq!(e.line, line, "{e}");
            assert!(
                e.to_string().starts_with(&format!("t.trace:{line}: size ")),
                "{e}"
            );
        }
        assert!(Trace::parse("alloc 0 4096\n", "t").is_ok());
    }

    #[test]
    fn replay_checks_every_object() {
        let t = Trace::parse(
            "alloc 1 100\nalloc 2 3000\nalloc 3 4096\nfree 2\nfree 1\n",
            "t",
        )
        .unwrap();
        for name in crate::contestants::objects::OBJECT_CONTESTANTS {
            let mut c = crate::contestants::objects::make_object_contestant(name).unwrap();
            let s = replay(&t, c.as_mut(), 1).unwrap();
            assert_eq!(s.len(), 5, "{name}");
            assert_eq!(s[2].objects, 3);
            assert_eq!(s.last().unwrap().bytes, 4096);
            assert!(s.last().unwrap().peak_held >= s.last().unwrap().held);
        }
    }
}
