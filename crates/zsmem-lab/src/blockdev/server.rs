//! Any page contestant behind a device file: the contestant behind a
//! mutex, called by the FUSE thread that reads the request (no hand-off to
//! another thread: a swap-in waits for no wake-up but the FUSE thread's),
//! and the workload's requests for figures, compaction and latencies.

use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use hdrhistogram::Histogram;

use super::backend::Backend;
use super::error::BlockDevError;
use super::map::Block;
use super::map::{self, PageIo};
use crate::contestants::{Figures, LabError, PageContestant};
use crate::corpus::PAGE_SIZE;
use crate::workloads::untar_rm::Latencies;

/// The contestant and the latencies of its page operations so far.
struct Served {
    c: Box<dyn PageContestant + Send>,
    lat: Latencies,
}

/// A page contestant as a [`Backend`]: one request at a time.
pub struct ContestantServer {
    served: Mutex<Served>,
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
            served: Mutex::new(Served {
                c,
                lat: Latencies::default(),
            }),
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

    /// The contestant, or why it cannot be used: a call into it panicked
    /// (its state is then unknown, so nothing more is asked of it).
    fn served(&self) -> Result<MutexGuard<'_, Served>, String> {
        self.served
            .lock()
            .map_err(|_| "the contestant panicked in an earlier call".to_string())
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
        let mut s = self.served().map_err(BlockDevError::Contestant)?;
        f(s.c.as_mut()).map_err(|e| BlockDevError::Contestant(e.to_string()))
    }

    /// The per-page latencies of its store, load and discard so far.
    pub fn latencies(&self) -> Result<Latencies, BlockDevError> {
        let s = self.served().map_err(BlockDevError::Contestant)?;
        Ok(s.lat.clone())
    }
}

impl Backend for ContestantServer {
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), String> {
        let mut s = self.served()?;
        map::read_at(&mut s.timed(), offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), String> {
        let mut s = self.served()?;
        map::write_at(&mut s.timed(), offset, data)
    }
    fn punch(&self, offset: u64, len: u64) -> Result<(), String> {
        let mut s = self.served()?;
        map::punch_hole(&mut s.timed(), offset, len)
    }
}

impl Served {
    fn timed(&mut self) -> Timed<'_> {
        Timed {
            c: self.c.as_mut(),
            lat: &mut self.lat,
        }
    }
}

/// The contestant's page operations, each timed into the histograms.
struct Timed<'a> {
    c: &'a mut (dyn PageContestant + Send),
    lat: &'a mut Latencies,
}

fn record(h: &mut Histogram<u64>, since: Instant, own: Option<std::time::Duration>) {
    let d = own.unwrap_or_else(|| since.elapsed());
    h.saturating_record(d.as_nanos().clamp(1, u128::from(u64::MAX)) as u64);
}

impl PageIo for Timed<'_> {
    type Error = String;
    fn read_page(&mut self, page: u64, buf: &mut Block) -> Result<(), String> {
        let t = Instant::now();
        self.c.load(page, buf).map_err(|e| e.to_string())?;
        record(&mut self.lat.load, t, self.c.op_time());
        Ok(())
    }
    fn write_page(&mut self, page: u64, data: &Block) -> Result<(), String> {
        let t = Instant::now();
        self.c.store(page, data).map_err(|e| e.to_string())?;
        record(&mut self.lat.store, t, self.c.op_time());
        Ok(())
    }
    fn discard(&mut self, page: u64, count: u64) -> Result<(), String> {
        // One call per page, as the untar/rm workload's discards, so the
        // latency is per page like the others.
        for p in page..page + count {
            let t = Instant::now();
            self.c.discard(p, 1).map_err(|e| e.to_string())?;
            record(&mut self.lat.discard, t, self.c.op_time());
        }
        Ok(())
    }
}
