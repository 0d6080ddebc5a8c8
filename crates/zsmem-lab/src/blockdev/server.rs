//! Any page contestant behind a device file: a thread that owns the
//! contestant (contestants need not be `Send`: it is made on that thread)
//! and serves the FUSE threads' reads, writes and holes, and the
//! workload's requests for figures, compaction and latencies.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::Instant;

use hdrhistogram::Histogram;

use super::backend::Backend;
use super::error::BlockDevError;
use super::map::Block;
use super::map::{self, PageIo};
use crate::contestants::{Figures, LabError, PageContestant};
use crate::corpus::PAGE_SIZE;
use crate::workloads::untar_rm::Latencies;

type Reply<T> = Sender<Result<T, String>>;

enum Request {
    Read {
        offset: u64,
        len: usize,
        reply: Reply<Vec<u8>>,
    },
    Write {
        offset: u64,
        data: Vec<u8>,
        reply: Reply<()>,
    },
    Punch {
        offset: u64,
        len: u64,
        reply: Reply<()>,
    },
    Figures(Reply<Figures>),
    Compact(Reply<()>),
    Latencies(Sender<Latencies>),
}

/// A page contestant on a thread of its own, as a [`Backend`].
pub struct ContestantServer {
    tx: Option<Sender<Request>>,
    thread: Option<JoinHandle<()>>,
    size: u64,
    name: String,
    config: String,
}

impl ContestantServer {
    /// Starts the thread, makes the contestant there with `make` (which
    /// must give it at least `size / 4096` slots), and returns once it
    /// exists. `size` is the device's size, a non-zero multiple of 4096.
    pub fn start<F>(size: u64, make: F) -> Result<Self, BlockDevError>
    where
        F: FnOnce() -> Result<Box<dyn PageContestant>, LabError> + Send + 'static,
    {
        if size == 0 || !size.is_multiple_of(PAGE_SIZE as u64) {
            return Err(BlockDevError::Usage(format!(
                "device size {size} is not a non-zero multiple of {PAGE_SIZE}"
            )));
        }
        let (tx, rx) = channel::<Request>();
        let (ready_tx, ready_rx) = channel::<Result<(String, String), String>>();
        let thread = std::thread::Builder::new()
            .name("zsmem-blockdev".into())
            .spawn(move || match make() {
                Ok(mut c) => {
                    let _ = ready_tx.send(Ok((c.name().to_string(), c.config())));
                    serve(c.as_mut(), &rx);
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                }
            })
            .map_err(|e| BlockDevError::io("spawning the contestant's thread", e))?;
        match ready_rx.recv() {
            Ok(Ok((name, config))) => Ok(ContestantServer {
                tx: Some(tx),
                thread: Some(thread),
                size,
                name,
                config,
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(BlockDevError::Contestant(e))
            }
            Err(_) => {
                let _ = thread.join();
                Err(BlockDevError::Contestant(
                    "the contestant's thread ended while making it (a panic?)".into(),
                ))
            }
        }
    }

    /// The contestant's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The contestant's configuration.
    pub fn config(&self) -> &str {
        &self.config
    }

    fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Request) -> Result<T, String> {
        let (reply, answer) = channel();
        self.tx
            .as_ref()
            .ok_or("the device is closed")?
            .send(make(reply))
            .map_err(|_| "the contestant's thread has ended".to_string())?;
        answer
            .recv()
            .map_err(|_| "the contestant's thread has ended".to_string())?
    }

    /// The contestant's figures now.
    pub fn figures(&self) -> Result<Figures, BlockDevError> {
        self.ask(Request::Figures)
            .map_err(BlockDevError::Contestant)
    }

    /// Compact the contestant now.
    pub fn compact(&self) -> Result<(), BlockDevError> {
        self.ask(Request::Compact)
            .map_err(BlockDevError::Contestant)
    }

    /// The per-page latencies of its store, load and discard so far.
    pub fn latencies(&self) -> Result<Latencies, BlockDevError> {
        let (reply, answer) = channel();
        let ended = || BlockDevError::Contestant("the contestant's thread has ended".into());
        self.tx
            .as_ref()
            .ok_or_else(ended)?
            .send(Request::Latencies(reply))
            .map_err(|_| ended())?;
        answer.recv().map_err(|_| ended())
    }
}

impl Drop for ContestantServer {
    fn drop(&mut self) {
        // The thread ends when its last sender is gone.
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Backend for ContestantServer {
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), String> {
        let data = self.ask(|reply| Request::Read {
            offset,
            len: buf.len(),
            reply,
        })?;
        buf.copy_from_slice(&data);
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), String> {
        self.ask(|reply| Request::Write {
            offset,
            data: data.to_vec(),
            reply,
        })
    }
    fn punch(&self, offset: u64, len: u64) -> Result<(), String> {
        self.ask(|reply| Request::Punch { offset, len, reply })
    }
}

/// The contestant's page operations, each timed into the histograms.
struct Timed<'a> {
    c: &'a mut dyn PageContestant,
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

fn serve(c: &mut dyn PageContestant, rx: &Receiver<Request>) {
    let mut lat = Latencies::default();
    for req in rx {
        match req {
            Request::Read { offset, len, reply } => {
                let mut buf = vec![0u8; len];
                let r = map::read_at(&mut Timed { c, lat: &mut lat }, offset, &mut buf);
                let _ = reply.send(r.map(|()| buf));
            }
            Request::Write {
                offset,
                data,
                reply,
            } => {
                let r = map::write_at(&mut Timed { c, lat: &mut lat }, offset, &data);
                let _ = reply.send(r);
            }
            Request::Punch { offset, len, reply } => {
                let r = map::punch_hole(&mut Timed { c, lat: &mut lat }, offset, len);
                let _ = reply.send(r);
            }
            Request::Figures(reply) => {
                let _ = reply.send(c.figures().map_err(|e| e.to_string()));
            }
            Request::Compact(reply) => {
                let _ = reply.send(c.compact().map_err(|e| e.to_string()));
            }
            Request::Latencies(reply) => {
                let _ = reply.send(lat.clone());
            }
        }
    }
}
