//! Any page contestant behind a device file, called by the FUSE thread that
//! reads the request (no hand-off to another thread: a swap-in waits for
//! no wake-up but the FUSE thread's): a contestant that is concurrent
//! ([`PageContestant::shared`], zsmem's page store) by every request
//! thread at once, any other behind a mutex; and the workload's requests
//! for figures, compaction and latencies.

use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::backend::Backend;
use super::error::BlockDevError;
use super::map::Block;
use super::map::{self, PageIo};
use crate::contestants::{Figures, LabError, PageContestant, SharedPages};
use crate::corpus::PAGE_SIZE;
use crate::workloads::untar_rm::Latencies;

/// A page contestant as a [`Backend`].
pub struct ContestantServer {
    /// The contestant: its page operations when it has no shared ones,
    /// and its figures and compaction.
    served: Mutex<Box<dyn PageContestant + Send>>,
    /// Its page operations for several request threads at once, if it has
    /// them.
    shared: Option<Arc<dyn SharedPages>>,
    /// Taken shared by a request of whole pages on the shared operations,
    /// alone by one of part of a page (a read-modify-write no other
    /// request may interleave with).
    whole: RwLock<()>,
    /// The latencies of its store, load and discard so far.
    lat: Mutex<Latencies>,
    size: u64,
    name: String,
    config: String,
}

impl ContestantServer {
    /// Makes the contestant with `make` (which must give it at least
    /// `size / 4096` slots). `size` is the device's size, a non-zero
    /// multiple of 4096.
    pub fn start<F>(size: u64, make: F) -> Result<Self, BlockDevError>
    where
        F: FnOnce() -> Result<Box<dyn PageContestant + Send>, LabError>,
    {
        if size == 0 || !size.is_multiple_of(PAGE_SIZE as u64) {
            return Err(BlockDevError::Usage(format!(
                "device size {size} is not a non-zero multiple of {PAGE_SIZE}"
            )));
        }
        let c = make().map_err(|e| BlockDevError::Contestant(e.to_string()))?;
        Ok(ContestantServer {
            name: c.name().to_string(),
            config: c.config(),
            shared: c.shared(),
            served: Mutex::new(c),
            whole: RwLock::new(()),
            lat: Mutex::new(Latencies::default()),
            size,
        })
    }

    /// The contestant's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The contestant's configuration.
    pub fn config(&self) -> &str {
        &self.config
    }

    /// Whether several requests are served at once.
    pub fn is_concurrent(&self) -> bool {
        self.shared.is_some()
    }

    /// The contestant, or why it cannot be used: a call into it panicked
    /// (its state is then unknown, so nothing more is asked of it).
    fn served(&self) -> Result<MutexGuard<'_, Box<dyn PageContestant + Send>>, String> {
        self.served.lock().map_err(|_| PANICKED.to_string())
    }

    /// Run a request on the shared operations if the contestant has them
    /// (alongside other requests unless `whole` is false), else on the
    /// contestant behind its mutex.
    fn request(
        &self,
        whole: bool,
        f: impl FnOnce(&mut Timed<'_>) -> Result<(), String>,
    ) -> Result<(), String> {
        let lat = &self.lat;
        match &self.shared {
            Some(pages) => {
                let calls = Calls::Shared(pages.as_ref());
                if whole {
                    let _g = self.whole.read().map_err(|_| PANICKED.to_string())?;
                    f(&mut Timed { calls, lat })
                } else {
                    let _g = self.whole.write().map_err(|_| PANICKED.to_string())?;
                    f(&mut Timed { calls, lat })
                }
            }
            None => {
                let mut c = self.served()?;
                let calls = Calls::Alone(c.as_mut());
                f(&mut Timed { calls, lat })
            }
        }
    }

    /// The contestant's figures now.
    pub fn figures(&self) -> Result<Figures, BlockDevError> {
        self.call(|c| c.figures())
    }

    /// The contestant's figures for a reading while it serves
    /// ([`PageContestant::sample`]: no waiting, the device is not held).
    pub fn sample(&self) -> Result<Figures, BlockDevError> {
        self.call(|c| c.sample())
    }

    /// Compact the contestant now.
    pub fn compact(&self) -> Result<(), BlockDevError> {
        self.call(|c| c.compact())
    }

    /// Call `f` on the contestant, its error as the device's.
    fn call<T>(
        &self,
        f: impl FnOnce(&mut (dyn PageContestant + Send)) -> Result<T, LabError>,
    ) -> Result<T, BlockDevError> {
        let mut c = self.served().map_err(BlockDevError::Contestant)?;
        f(c.as_mut()).map_err(|e| BlockDevError::Contestant(e.to_string()))
    }

    /// The per-page latencies of its store, load and discard so far.
    pub fn latencies(&self) -> Result<Latencies, BlockDevError> {
        let lat = self
            .lat
            .lock()
            .map_err(|_| BlockDevError::Contestant(PANICKED.to_string()))?;
        Ok(lat.clone())
    }
}

const PANICKED: &str = "the contestant panicked in an earlier call";

/// Whether `[offset, offset + len)` is whole pages.
fn whole_pages(offset: u64, len: u64) -> bool {
    offset.is_multiple_of(PAGE_SIZE as u64) && len.is_multiple_of(PAGE_SIZE as u64)
}

impl Backend for ContestantServer {
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), String> {
        // A read changes nothing: never alone.
        self.request(true, |io| map::read_at(io, offset, buf))
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), String> {
        let whole = whole_pages(offset, data.len() as u64);
        self.request(whole, |io| map::write_at(io, offset, data))
    }
    fn punch(&self, offset: u64, len: u64) -> Result<(), String> {
        self.request(whole_pages(offset, len), |io| {
            map::punch_hole(io, offset, len)
        })
    }
}

/// Which histogram an operation's latency goes to.
#[derive(Clone, Copy)]
enum Op {
    Store,
    Load,
    Discard,
}

/// Record `took` (or the time since `since`) as one `op`.
fn record(lat: &Mutex<Latencies>, op: Op, since: Instant, took: Option<Duration>) {
    let d = took.unwrap_or_else(|| since.elapsed());
    let ns = d.as_nanos().clamp(1, u128::from(u64::MAX)) as u64;
    // A panic elsewhere while recording left a histogram as valid as any.
    let mut lat = lat.lock().unwrap_or_else(|e| e.into_inner());
    let h: &mut Histogram<u64> = match op {
        Op::Store => &mut lat.store,
        Op::Load => &mut lat.load,
        Op::Discard => &mut lat.discard,
    };
    h.saturating_record(ns);
}

/// What a request calls: the contestant behind its mutex, or its shared
/// operations.
enum Calls<'a> {
    Alone(&'a mut (dyn PageContestant + Send)),
    Shared(&'a dyn SharedPages),
}

impl Calls<'_> {
    fn load(&mut self, page: u64, buf: &mut Block) -> Result<(), LabError> {
        match self {
            Calls::Alone(c) => c.load(page, buf),
            Calls::Shared(p) => p.load(page, buf),
        }
    }

    fn store(&mut self, page: u64, data: &Block) -> Result<(), LabError> {
        match self {
            Calls::Alone(c) => c.store(page, data),
            Calls::Shared(p) => p.store(page, data),
        }
    }

    fn discard(&mut self, page: u64) -> Result<(), LabError> {
        match self {
            Calls::Alone(c) => c.discard(page, 1),
            Calls::Shared(p) => p.discard(page, 1),
        }
    }

    /// The last call's time by the contestant's own clock, if it keeps one.
    fn op_time(&self) -> Option<Duration> {
        match self {
            Calls::Alone(c) => c.op_time(),
            Calls::Shared(_) => None,
        }
    }
}

/// A request's page operations, each timed into the histograms.
struct Timed<'a> {
    calls: Calls<'a>,
    lat: &'a Mutex<Latencies>,
}

impl PageIo for Timed<'_> {
    type Error = String;
    fn read_page(&mut self, page: u64, buf: &mut Block) -> Result<(), String> {
        let t = Instant::now();
        self.calls.load(page, buf).map_err(|e| e.to_string())?;
        record(self.lat, Op::Load, t, self.calls.op_time());
        Ok(())
    }
    fn write_page(&mut self, page: u64, data: &Block) -> Result<(), String> {
        let t = Instant::now();
        self.calls.store(page, data).map_err(|e| e.to_string())?;
        record(self.lat, Op::Store, t, self.calls.op_time());
        Ok(())
    }
    fn discard(&mut self, page: u64, count: u64) -> Result<(), String> {
        // One call per page, as the untar/rm workload's discards, so the
        // latency is per page like the others.
        for p in page..page + count {
            let t = Instant::now();
            self.calls.discard(p).map_err(|e| e.to_string())?;
            record(self.lat, Op::Discard, t, self.calls.op_time());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use zsmem::{Codec, PoolConfig};

    use super::*;
    use crate::contestants::zsmem::ZsmemContestant;

    const PAGES: u64 = 64;

    /// Pages in a map, one call at a time (no shared operations).
    #[derive(Default)]
    struct Plain(HashMap<u64, Vec<u8>>);

    impl PageContestant for Plain {
        fn name(&self) -> &str {
            "plain"
        }
        fn config(&self) -> String {
            String::new()
        }
        fn store(&mut self, slot: u64, page: &[u8]) -> Result<(), LabError> {
            self.0.insert(slot, page.to_vec());
            Ok(())
        }
        fn load(&mut self, slot: u64, buf: &mut [u8]) -> Result<(), LabError> {
            match self.0.get(&slot) {
                Some(p) => buf.copy_from_slice(p),
                None => buf.fill(0),
            }
            Ok(())
        }
        fn discard(&mut self, slot: u64, pages: u64) -> Result<(), LabError> {
            for s in slot..slot + pages {
                self.0.remove(&s);
            }
            Ok(())
        }
        fn figures(&mut self) -> Result<Figures, LabError> {
            Ok(Figures::default())
        }
        fn compact(&mut self) -> Result<(), LabError> {
            Ok(())
        }
    }

    fn zsmem_server() -> ContestantServer {
        ContestantServer::start(PAGES * PAGE_SIZE as u64, || {
            let c =
                ZsmemContestant::new("zsmem", PoolConfig::default(), Codec::Lz4, PAGES as usize)?;
            Ok(Box::new(c))
        })
        .unwrap()
    }

    fn plain_server() -> ContestantServer {
        ContestantServer::start(PAGES * PAGE_SIZE as u64, || Ok(Box::new(Plain::default())))
            .unwrap()
    }

    /// Byte `i` of what thread `t` writes in round `r`.
    fn byte(t: usize, r: usize, i: usize) -> u8 {
        (t * 31 + r * 7 + i / 16) as u8
    }

    /// Two threads at once, each writing whole pages, parts of pages and
    /// holes: its own pages, and a shared page in disjoint halves (a part
    /// of a page is a read-modify-write: two at once must not lose either
    /// half). Every byte of the device is checked against a model.
    fn two_threads_lose_nothing(server: ContestantServer) {
        let server = Arc::new(server);
        const SHARED: u64 = PAGES - 1;
        const HALF: usize = PAGE_SIZE / 2;
        const ROUNDS: usize = 2000;
        let start = Arc::new(std::sync::Barrier::new(2));
        let threads: Vec<_> = (0..2)
            .map(|t| {
                let s = server.clone();
                let start = start.clone();
                std::thread::spawn(move || {
                    start.wait();
                    let mine = |r: usize| (t + 2 * (r % 16)) as u64;
                    let mut page = vec![0u8; PAGE_SIZE];
                    for r in 0..ROUNDS {
                        let p = mine(r);
                        let off = p * PAGE_SIZE as u64;
                        page.iter_mut()
                            .enumerate()
                            .for_each(|(i, b)| *b = byte(t, r, i));
                        s.write_at(off, &page).unwrap();
                        // A part of the same page, then the whole read back.
                        s.write_at(off + 100, &page[..300]).unwrap();
                        let mut back = vec![0u8; PAGE_SIZE];
                        s.read_at(off, &mut back).unwrap();
                        let mut want = page.clone();
                        want[100..400].copy_from_slice(&page[..300]);
                        assert_eq!(back, want, "thread {t} round {r}");
                        // Its half of the shared page.
                        let half = vec![byte(t, r, 0); HALF];
                        s.write_at(SHARED * PAGE_SIZE as u64 + (t * HALF) as u64, &half)
                            .unwrap();
                        // The other thread never writes this half: a read-
                        // modify-write of its own half that interleaved with
                        // this one would have put an older value back.
                        s.read_at(SHARED * PAGE_SIZE as u64, &mut back).unwrap();
                        assert_eq!(
                            back[t * HALF..(t + 1) * HALF],
                            half[..],
                            "thread {t} round {r}: a write to the shared page was lost"
                        );
                        if r % 5 == 4 {
                            s.punch(off, PAGE_SIZE as u64).unwrap();
                            s.read_at(off, &mut back).unwrap();
                            assert!(back.iter().all(|&b| b == 0), "thread {t} round {r}");
                        }
                    }
                })
            })
            .collect();
        for h in threads {
            h.join().unwrap();
        }
        let mut back = vec![0u8; PAGE_SIZE];
        server
            .read_at(SHARED * PAGE_SIZE as u64, &mut back)
            .unwrap();
        for t in 0..2 {
            let want = byte(t, ROUNDS - 1, 0);
            assert!(
                back[t * HALF..(t + 1) * HALF].iter().all(|&b| b == want),
                "half {t} of the shared page lost a write"
            );
        }
        let lat = server.latencies().unwrap();
        assert!(lat.store.len() >= 2 * ROUNDS as u64 * 3);
        assert!(lat.discard.len() >= 2 * (ROUNDS / 5) as u64);
    }

    #[test]
    fn a_concurrent_contestant_serves_threads_at_once_and_loses_nothing() {
        let server = zsmem_server();
        assert!(server.is_concurrent());
        two_threads_lose_nothing(server);
    }

    #[test]
    fn any_other_contestant_is_served_one_request_at_a_time() {
        let server = plain_server();
        assert!(!server.is_concurrent());
        two_threads_lose_nothing(server);
    }
}
