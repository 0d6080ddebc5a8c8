//! The malloc baselines, each in a child process of its own, measured by
//! that process's memory after the allocator's release.
//!
//! Measuring a heap from inside a busy process cannot be exact: glibc's
//! `mallinfo2()` counts the arena, not what is resident, ignores what
//! `malloc_trim` gives back, and its growth since creation goes negative
//! when the process frees something else; jemalloc and mimalloc keep freed
//! pages until their decay runs. So each baseline ([`ForkedHeap`]) forks a
//! child that holds nothing but [`crate::contestants::zram_front::ZramFront`] on its
//! allocator, and talks to it over a socket, one request per store, load,
//! discard, figures or compact.
//!
//! **The measure.** Before its baseline the child makes its tables (the
//! slot table, and the object id table for `slots + 1` objects, written so
//! they are resident) and runs the allocator's release; the baseline is its
//! anonymous resident set then (`/proc/self/statm` resident − shared:
//! file pages such as the code the child first runs are left out). At
//! every [`PageContestant::figures`], which the workload driver calls at
//! the end of each step, the child runs the release again and reads the
//! same figure: `pool` is the growth since the baseline. The releases:
//!
//! - glibc: `malloc_trim(0)` (the top of every arena, and every whole free
//!   page inside one, given back with `MADV_DONTNEED`);
//! - jemalloc: `thread.tcache.flush`, then `arena.<MALLCTL_ARENAS_ALL>.purge`
//!   (every unused dirty and muzzy page purged now);
//! - mimalloc: `mi_collect(true)` (abandoned and free pages collected and
//!   purged now).
//!
//! **Why it cannot show a negative overhead.** A page written after the
//! baseline is in the growth; a page the release gave back is not. The
//! contestant's objects are written after the baseline, so their bytes are
//! in the growth, except where the allocator puts an object into free
//! space of a page that was resident at the baseline. jemalloc and
//! mimalloc are never used by the `zsmem` process before the fork (they
//! are not its global allocator), so they have no such space; glibc has:
//! the free space left in the parent's partly used pages, which
//! `malloc_trim` cannot give back. For that the child also reads what the
//! allocator says is in use by live blocks (glibc: `mallinfo2()`
//! `uordblks + hblkhd`; jemalloc: `stats.allocated`; mimalloc has no such cheap
//! figure, and needs none), whose growth is a lower bound of the memory
//! the data takes, and so are the bytes the contestant asked for, `compr`
//! (glibc's count can fall short of them: it counts the free chunks of its
//! thread cache as in use, and the child may reuse those of the parent).
//! Where the larger of the two exceeds the RSS growth, the difference is
//! its own term, `reused at baseline`, so `pool` and the all-in memory are
//! never below `compr`; a step where this happens says so in its terms,
//! and nothing is hidden. Should the resident set fall below the baseline
//! (the release gave back pages that were resident before it, such as
//! free space of the parent's heap), the growth is 0 and the live bytes,
//! in that term, are the figure.
//!
//! Latencies are the child's own clock around each operation
//! ([`PageContestant::op_time`]), so the socket's round trip is not in them.
//! The child dies with the thread that made it (`PR_SET_PDEATHSIG`) and
//! when its socket closes; dropping the contestant closes the socket and
//! reaps the child.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use crate::allin::{self, Term};
use crate::contestants::heap::HeapObjects;
use crate::contestants::heap::MemoryMethod;
use crate::contestants::zram_front::ZramFront;
use crate::contestants::{Figures, LabError, PageConfig, PageContestant};
use crate::corpus::Page;

/// The general purpose allocators the baselines use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocator {
    /// glibc's malloc (Rust's `System`).
    System,
    /// jemalloc, as a plain allocator value.
    Jemalloc,
    /// mimalloc, as a plain allocator value.
    Mimalloc,
}

impl Allocator {
    /// The contestant's name.
    pub fn name(self) -> &'static str {
        match self {
            Allocator::System => "system",
            Allocator::Jemalloc => "jemalloc",
            Allocator::Mimalloc => "mimalloc",
        }
    }

    /// What its release does, for reports.
    pub fn release_text(self) -> &'static str {
        match self {
            Allocator::System => "malloc_trim(0)",
            Allocator::Jemalloc => "thread.tcache.flush + arena.<all>.purge",
            Allocator::Mimalloc => "mi_collect(true)",
        }
    }

    /// Give freed memory back to the OS now, as far as the allocator can.
    fn release(self) -> Result<(), String> {
        match self {
            Allocator::System => {
                #[cfg(all(target_os = "linux", target_env = "gnu"))]
                // SAFETY: malloc_trim takes a pad and walks malloc's own
                // arenas under their locks.
                unsafe {
                    libc::malloc_trim(0);
                }
                Ok(())
            }
            Allocator::Jemalloc => {
                jemalloc_void_ctl(b"thread.tcache.flush\0")?;
                // MALLCTL_ARENAS_ALL is 4096.
                jemalloc_void_ctl(b"arena.4096.purge\0")
            }
            Allocator::Mimalloc => {
                // SAFETY: mi_collect takes a flag and works on mimalloc's
                // own state of the calling thread and its arenas.
                unsafe { mi_collect(true) };
                Ok(())
            }
        }
    }

    /// Bytes in live blocks, where the allocator says it cheaply.
    fn in_use(self) -> Option<u64> {
        match self {
            Allocator::System => glibc_in_use(),
            Allocator::Jemalloc => {
                tikv_jemalloc_ctl::epoch::advance().ok()?;
                // SAFETY: `stats.allocated` is a size_t mallctl; the name
                // is NUL-terminated.
                unsafe { tikv_jemalloc_ctl::raw::read::<usize>(b"stats.allocated\0") }
                    .ok()
                    .map(|b| b as u64)
            }
            Allocator::Mimalloc => None,
        }
    }
}

unsafe extern "C" {
    fn mi_collect(force: bool);
}

/// A mallctl that neither reads nor writes (`thread.tcache.flush`,
/// `arena.<i>.purge`): jemalloc refuses any buffer for them.
fn jemalloc_void_ctl(name: &[u8]) -> Result<(), String> {
    // SAFETY: `name` is NUL-terminated; the null pointers and zero length
    // are what a void mallctl expects.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            name.as_ptr().cast(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!(
            "jemalloc {}: error {rc}",
            String::from_utf8_lossy(&name[..name.len() - 1])
        ))
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn glibc_in_use() -> Option<u64> {
    // SAFETY: mallinfo2 takes no arguments and returns a struct by value.
    let m = unsafe { libc::mallinfo2() };
    Some((m.uordblks + m.hblkhd) as u64)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn glibc_in_use() -> Option<u64> {
    None
}

/// Anonymous resident bytes of this process: statm's resident less shared.
fn anon_rss() -> Result<u64, String> {
    // A stack buffer: reading does not allocate, so it does not disturb
    // what it reads.
    let mut buf = [0u8; 160];
    let mut f = std::fs::File::open("/proc/self/statm").map_err(|e| format!("statm: {e}"))?;
    let n = f.read(&mut buf).map_err(|e| format!("statm: {e}"))?;
    let mut fields = std::str::from_utf8(&buf[..n])
        .map_err(|_| "statm: not text".to_string())?
        .split_whitespace()
        .map(|w| w.parse::<u64>());
    let mut field = || -> Result<u64, String> {
        fields
            .next()
            .and_then(Result::ok)
            .ok_or_else(|| "statm: unexpected format".to_string())
    };
    let _size = field()?;
    let resident = field()?;
    let shared = field()?;
    // SAFETY: sysconf only reads a system constant.
    let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    Ok(resident.saturating_sub(shared) * page)
}

// Requests: op (1 byte), slot (8), count (8), then a page for STORE.
const OP_STORE: u8 = 1;
const OP_LOAD: u8 = 2;
const OP_DISCARD: u8 = 3;
const OP_FIGURES: u8 = 4;
const OP_COMPACT: u8 = 5;
const OP_FIGURES_UNRELEASED: u8 = 6;
const HEADER: usize = 17;

// Replies: status (1 byte: 0 ok, 1 error), nanoseconds (8), payload
// length (4), payload (a page for LOAD, FIGURE_WORDS words for FIGURES,
// UTF-8 text for an error or the greeting).
const FIGURE_WORDS: usize = 8;

/// A malloc baseline in a child process; see the module documentation.
pub struct ForkedHeap {
    allocator: Allocator,
    sock: UnixStream,
    pid: libc::pid_t,
    config: String,
    op_time: Option<Duration>,
    cfg: PageConfig,
    /// A request: `HEADER` bytes, then room for a page.
    request: Vec<u8>,
    reply: Vec<u8>,
}

impl ForkedHeap {
    /// A baseline of `slots` 4 KiB pages compressed with lz4 on
    /// `allocator`, in a new child process. Fails on zero slots, or if the
    /// child cannot be made or set up.
    pub fn new(allocator: Allocator, slots: usize) -> Result<Self, LabError> {
        Self::with_config(allocator, &PageConfig::default(), slots)
    }

    /// As [`ForkedHeap::new`], for pages of `cfg`'s size compressed (in the
    /// child) with `cfg`'s codec.
    pub fn with_config(
        allocator: Allocator,
        cfg: &PageConfig,
        slots: usize,
    ) -> Result<Self, LabError> {
        let name = allocator.name();
        if slots == 0 {
            return Err(LabError::Usage(format!("{name}: needs at least one slot")));
        }
        let (parent_end, child_end) =
            UnixStream::pair().map_err(|e| LabError::Usage(format!("{name}: socketpair: {e}")))?;
        // SAFETY: fork has no memory-safety preconditions; the child runs
        // only `child_main`, which never returns (it ends in `_exit`).
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(LabError::Usage(format!(
                "{name}: fork: {}",
                io::Error::last_os_error()
            )));
        }
        if pid == 0 {
            drop(parent_end);
            child_main(allocator, *cfg, slots, child_end);
        }
        drop(child_end);
        let mut me = ForkedHeap {
            allocator,
            sock: parent_end,
            pid,
            config: String::new(),
            op_time: None,
            cfg: *cfg,
            request: vec![0u8; HEADER + cfg.page_size],
            reply: Vec::with_capacity(cfg.page_size + 64),
        };
        // The child greets with its configuration, or says why it failed.
        me.receive()?;
        me.config = String::from_utf8_lossy(&me.reply).into_owned();
        Ok(me)
    }

    /// The allocator.
    pub fn allocator(&self) -> Allocator {
        self.allocator
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    fn lost(&self, e: io::Error) -> LabError {
        LabError::Usage(format!(
            "{}: lost the child process {}: {e}",
            self.allocator.name(),
            self.pid
        ))
    }

    fn call(&mut self, op: u8, slot: u64, count: u64, page: Option<&Page>) -> Result<(), LabError> {
        self.request[0] = op;
        self.request[1..9].copy_from_slice(&slot.to_le_bytes());
        self.request[9..17].copy_from_slice(&count.to_le_bytes());
        let len = match page {
            Some(p) => {
                if p.len() != self.cfg.page_size {
                    return Err(self.cfg.wrong_length(self.allocator.name(), p.len()));
                }
                self.request[HEADER..].copy_from_slice(p);
                HEADER + p.len()
            }
            None => HEADER,
        };
        self.sock
            .write_all(&self.request[..len])
            .map_err(|e| self.lost(e))?;
        self.receive()
    }

    /// Read one reply into `self.reply`; an error reply becomes an `Err`.
    fn receive(&mut self) -> Result<(), LabError> {
        let mut head = [0u8; 13];
        self.sock.read_exact(&mut head).map_err(|e| self.lost(e))?;
        let ns = u64::from_le_bytes(head[1..9].try_into().expect("8 bytes"));
        let len = u32::from_le_bytes(head[9..13].try_into().expect("4 bytes")) as usize;
        self.reply.resize(len, 0);
        self.sock
            .read_exact(&mut self.reply)
            .map_err(|e| self.lost(e))?;
        self.op_time = Some(Duration::from_nanos(ns));
        if head[0] != 0 {
            return Err(LabError::Usage(format!(
                "{}: {}",
                self.allocator.name(),
                String::from_utf8_lossy(&self.reply)
            )));
        }
        Ok(())
    }
}

impl PageContestant for ForkedHeap {
    fn name(&self) -> &str {
        self.allocator.name()
    }

    fn page_size(&self) -> usize {
        self.cfg.page_size
    }

    fn config(&self) -> String {
        self.config.clone()
    }

    fn store(&mut self, slot: u64, page: &Page) -> Result<(), LabError> {
        self.call(OP_STORE, slot, 0, Some(page))
    }

    fn load(&mut self, slot: u64, buf: &mut Page) -> Result<(), LabError> {
        if buf.len() != self.cfg.page_size {
            return Err(self.cfg.wrong_length(self.allocator.name(), buf.len()));
        }
        self.call(OP_LOAD, slot, 0, None)?;
        if self.reply.len() != buf.len() {
            return Err(LabError::Mismatch {
                contestant: self.allocator.name().into(),
                slot,
            });
        }
        buf.copy_from_slice(&self.reply);
        Ok(())
    }

    fn discard(&mut self, slot: u64, pages: u64) -> Result<(), LabError> {
        self.call(OP_DISCARD, slot, pages, None)
    }

    fn figures(&mut self) -> Result<Figures, LabError> {
        self.figures_by(OP_FIGURES)
    }

    /// Compact: a heap cannot move its blocks, so nothing happens (the
    /// child is asked all the same, to check it is there).
    fn compact(&mut self) -> Result<(), LabError> {
        self.call(OP_COMPACT, 0, 0, None)
    }

    fn op_time(&self) -> Option<Duration> {
        self.op_time
    }
}

impl ForkedHeap {
    /// The figures as [`PageContestant::figures`] gives them, but measured
    /// without the allocator's release first: what the release gives back
    /// is the difference.
    pub fn figures_unreleased(&mut self) -> Result<Figures, LabError> {
        self.figures_by(OP_FIGURES_UNRELEASED)
    }

    fn figures_by(&mut self, op: u8) -> Result<Figures, LabError> {
        self.call(op, 0, 0, None)?;
        if self.reply.len() != FIGURE_WORDS * 8 {
            return Err(self.lost(io::Error::other("malformed figures")));
        }
        let w: Vec<u64> = self
            .reply
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let [orig, compr, same, huge, growth, reused, table, _] = w[..] else {
            unreachable!("FIGURE_WORDS words")
        };
        let mut terms = vec![
            Term {
                name: allin::HEAP_GROWTH,
                bytes: growth,
            },
            Term {
                name: allin::SLOT_TABLE,
                bytes: table,
            },
        ];
        if reused > 0 {
            terms.push(Term {
                name: allin::REUSED_AT_BASELINE,
                bytes: reused,
            });
        }
        terms.push(allin::page_tables(growth + reused));
        let f = Figures {
            orig,
            compr,
            pool: growth + reused,
            same_pages: same,
            huge_pages: huge,
            ..Figures::default()
        };
        Ok(f.with_terms(terms))
    }
}

impl Drop for ForkedHeap {
    fn drop(&mut self) {
        // The child sees the end of its socket and exits.
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
        let mut status = 0;
        // SAFETY: `pid` is our own child, reaped only here.
        unsafe { libc::waitpid(self.pid, &mut status, 0) };
    }
}

/// The child: serve until the socket closes, then `_exit`.
fn child_main(allocator: Allocator, cfg: PageConfig, slots: usize, sock: UnixStream) -> ! {
    // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut server = Server {
            sock,
            allocator,
            cfg,
        };
        match allocator {
            Allocator::System => server.run(std::alloc::System, slots),
            Allocator::Jemalloc => server.run(tikv_jemallocator::Jemalloc, slots),
            Allocator::Mimalloc => server.run(mimalloc::MiMalloc, slots),
        }
    }));
    let code = match result {
        Ok(Ok(())) => 0,
        Ok(Err(_)) => 1,
        Err(_) => 101,
    };
    // SAFETY: _exit ends the child without running the parent's atexit
    // hooks (which would tear down the parent's zram devices).
    unsafe { libc::_exit(code) }
}

struct Server {
    sock: UnixStream,
    allocator: Allocator,
    cfg: PageConfig,
}

impl Server {
    fn reply(&mut self, ok: bool, ns: u64, payload: &[u8]) -> io::Result<()> {
        let mut head = [0u8; 13];
        head[0] = u8::from(!ok);
        head[1..9].copy_from_slice(&ns.to_le_bytes());
        head[9..13].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        self.sock.write_all(&head)?;
        self.sock.write_all(payload)
    }

    fn run<A: std::alloc::GlobalAlloc>(&mut self, alloc: A, slots: usize) -> io::Result<()> {
        let name = self.allocator.name();
        let made = HeapObjects::new(name, alloc, MemoryMethod::ProcessRss).and_then(|mut heap| {
            heap.reserve(slots + 1);
            ZramFront::with_config(heap, &self.cfg, slots)
        });
        let mut front = match made {
            Ok(f) => f,
            Err(e) => return self.reply(false, 0, e.to_string().as_bytes()),
        };
        let base = self.allocator.release().and_then(|()| anon_rss());
        let base = match base {
            Ok(b) => b,
            Err(e) => return self.reply(false, 0, e.as_bytes()),
        };
        let in_use_base = self.allocator.in_use();
        let greeting = format!(
            "{name} in child process {}: zram's {} KiB pages (same-filled as a word, {}, raw from {} B), \
             one heap allocation per page; memory: anonymous RSS growth after {} at every step \
             (baseline {} KiB){}",
            std::process::id(),
            self.cfg.page_size / 1024,
            self.cfg.codec.name(),
            front.huge_size(),
            self.allocator.release_text(),
            base / 1024,
            match in_use_base {
                Some(_) => ", live blocks' bytes as a lower bound",
                None => "",
            }
        );
        self.reply(true, 0, greeting.as_bytes())?;
        let mut req = vec![0u8; HEADER + self.cfg.page_size];
        let mut page: Box<Page> = vec![0u8; self.cfg.page_size].into_boxed_slice();
        let mut words = [0u8; FIGURE_WORDS * 8];
        loop {
            match self.sock.read_exact(&mut req[..HEADER]) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e),
            }
            let op = req[0];
            let slot = u64::from_le_bytes(req[1..9].try_into().expect("8 bytes"));
            let count = u64::from_le_bytes(req[9..17].try_into().expect("8 bytes"));
            if op == OP_STORE {
                self.sock.read_exact(&mut req[HEADER..])?;
                page.copy_from_slice(&req[HEADER..]);
            }
            let t = Instant::now();
            let outcome: Result<&[u8], String> = match op {
                OP_STORE => front
                    .store(slot, &page)
                    .map(|()| &[][..])
                    .map_err(|e| e.to_string()),
                OP_LOAD => front
                    .load(slot, &mut page)
                    .map(|()| &page[..])
                    .map_err(|e| e.to_string()),
                OP_DISCARD => front
                    .discard(slot, count)
                    .map(|()| &[][..])
                    .map_err(|e| e.to_string()),
                OP_COMPACT => Ok(&[][..]),
                OP_FIGURES | OP_FIGURES_UNRELEASED => self
                    .measure(&mut front, op == OP_FIGURES, base, in_use_base)
                    .map(|w| {
                        for (d, v) in words.chunks_exact_mut(8).zip(w) {
                            d.copy_from_slice(&v.to_le_bytes());
                        }
                        &words[..]
                    }),
                other => Err(format!("unknown request {other}")),
            };
            let ns = t.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
            match outcome {
                Ok(payload) => self.reply(true, ns, payload)?,
                Err(e) => self.reply(false, ns, e.as_bytes())?,
            }
        }
    }

    /// Release (if `release`), then the figures: orig, compr, same, huge,
    /// RSS growth, live bytes beyond it, slot table (as it is now: the
    /// table is resident before the baseline, so the growth leaves it
    /// out), 0.
    fn measure<S: crate::contestants::ObjectContestant>(
        &self,
        front: &mut ZramFront<S>,
        release: bool,
        base: u64,
        in_use_base: Option<u64>,
    ) -> Result<[u64; FIGURE_WORDS], String> {
        let f = front.figures().map_err(|e| e.to_string())?;
        if release {
            self.allocator.release()?;
        }
        let now = anon_rss()?;
        // Below the baseline, the release gave back pages that were
        // resident before it (glibc: free space the child inherited from
        // the parent's heap): the growth is then 0, and the live bytes
        // below give the figure, in their own term.
        let growth = now.saturating_sub(base);
        // The live blocks hold at least the bytes asked for (`compr`):
        // the allocator's own count can fall short of that where it reused
        // blocks already counted as in use at the baseline (glibc counts
        // its thread cache's free chunks as in use).
        let counted = match (in_use_base, self.allocator.in_use()) {
            (Some(b), Some(n)) => n.saturating_sub(b),
            _ => 0,
        };
        let live = counted.max(f.compr);
        let reused = live.saturating_sub(growth);
        Ok([
            f.orig,
            f.compr,
            f.same_pages,
            f.huge_pages,
            growth,
            reused,
            front.slot_table_bytes(),
            0,
        ])
    }
}
