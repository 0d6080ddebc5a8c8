//! `zsmem replay`: replay a size trace (`alloc ID SIZE` / `free ID`) on
//! every object contestant: zsmem's pool with log placement (`zsmem`, the
//! page store's default), with size classes (`zsmem-classes`) and in the
//! kernel's configuration, the peers and the malloc baselines.

use zsmem_lab::contestants::heap::is_malloc_baseline;
use zsmem_lab::contestants::objects::{OBJECT_CONTESTANTS, make_object_contestant};
use zsmem_lab::workloads::trace::{ReplayFigures as Sample, Trace, replay};

use crate::output::{Format, print_json, print_table, table};
use crate::{CliError, CliResult};

/// Arguments of `zsmem replay`.
#[derive(clap::Args, Debug, Clone)]
pub struct ReplayArgs {
    /// The trace file (format: docs in `zsmem_lab::workloads::trace`; record one with
    /// `zsmem compare --record-trace FILE`).
    pub trace: std::path::PathBuf,
    /// Print figures every this many operations (0: only at the end).
    #[arg(long, default_value_t = 0)]
    pub sample_every: usize,
    /// Contestants, comma separated.
    #[arg(long, value_delimiter = ',',
          default_values_t = OBJECT_CONTESTANTS.iter().map(|s| s.to_string()),
          value_parser = clap::builder::PossibleValuesParser::new(OBJECT_CONTESTANTS))]
    pub contestants: Vec<String>,
    /// Output format (sizes in MiB in the table, in bytes in csv and json).
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// One line of figures, as csv and json print it.
#[derive(serde::Serialize)]
struct Row<'a> {
    contestant: &'a str,
    ops: u64,
    objects: u64,
    stored_bytes: u64,
    pool_bytes: u64,
    peak_pool_bytes: u64,
    /// `(pool - stored) / stored`; `None` where nothing is stored.
    overhead_ratio: Option<f64>,
    /// Of `pool_bytes`, freed pages waiting to be given back to the OS.
    returning_bytes: u64,
}

/// Raise a malloc baseline's samples whose heap growth is below the bytes
/// stored to those bytes; returns how many were.
fn at_least_stored(samples: &mut [Sample]) -> usize {
    let mut raised = 0;
    for s in samples {
        if s.held < s.bytes {
            s.held = s.bytes;
            raised += 1;
        }
        s.peak_held = s.peak_held.max(s.held);
    }
    raised
}

/// What a contestant is, in a few words, beside its configuration.
fn what(name: &str) -> &'static str {
    match name {
        "zsmem" => "log placement, the page store's default (PoolConfig::log())",
        "zsmem-classes" => "size classes, as zsmalloc (PoolConfig::default())",
        "zsmem-kernel" => "the kernel's size classes and rules (PoolConfig::kernel())",
        "system" | "jemalloc" | "mimalloc" => "a malloc baseline: one allocation per object",
        _ => "a peer (docs/peers.md)",
    }
}

/// A contestant's samples and configuration, or why it failed.
type Replayed = Result<(Vec<Sample>, String), String>;

/// Replay `trace` on contestant `name` in this process.
fn replay_here(name: &str, trace: &Trace, sample_every: usize) -> Replayed {
    let mut c = make_object_contestant(name).map_err(|e| e.to_string())?;
    let samples = replay(trace, c.as_mut(), sample_every).map_err(|e| e.to_string())?;
    Ok((samples, c.config()))
}

/// Replay `trace` on malloc baseline `name` in a child process of its own,
/// forked before any other contestant ran: measured in this process, a
/// heap's growth took in the space other contestants had freed and went
/// below the bytes it held (negative overheads). Called while this process
/// has one thread.
fn replay_in_child(name: &str, trace: &Trace, sample_every: usize) -> CliResult<Replayed> {
    use std::io::{Read as _, Write as _};
    use std::os::fd::FromRawFd as _;
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors `pipe` writes.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    // SAFETY: `pipe` made both descriptors, owned here alone.
    let (mut rx, tx) = unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    };
    // SAFETY: one thread runs (the caller's promise), so the child's copy
    // of every lock is unlocked; the child ends with `_exit`.
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error().into()),
        0 => {
            drop(rx);
            let out = serde_json::to_vec(&replay_here(name, trace, sample_every));
            let ok = out.is_ok_and(|o| (&tx).write_all(&o).is_ok());
            // SAFETY: `_exit` ends the child without running the parent's
            // exit handlers or destructors twice.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) }
        }
        pid => {
            drop(tx);
            let mut out = Vec::new();
            let read = rx.read_to_end(&mut out);
            let mut status = 0;
            // SAFETY: `pid` is our child; `status` is a valid place.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            read?;
            serde_json::from_slice(&out).map_err(|e| {
                CliError::Usage(format!(
                    "{name}: its child process ended without its figures ({e}; wait status {status})"
                ))
            })
        }
    }
}

/// Run `zsmem replay`.
pub fn run(a: &ReplayArgs) -> CliResult {
    let trace = Trace::read(&a.trace).map_err(|e| CliError::Usage(e.to_string()))?;
    if trace.ops.is_empty() {
        return Err(CliError::Usage(format!(
            "{}: no operations (a trace holds `alloc ID SIZE` and `free ID` lines)",
            a.trace.display()
        )));
    }
    eprintln!("{}: {} operations", a.trace.display(), trace.ops.len());
    // The malloc baselines first, each in a child, while nothing else has
    // run (no other thread exists yet: the spinners come after).
    let mut forked = Vec::new();
    for name in a.contestants.iter().filter(|n| is_malloc_baseline(n)) {
        forked.push((name, replay_in_child(name, &trace, a.sample_every)?));
    }
    let mut rows: Vec<(String, Vec<Sample>, String)> = Vec::new();
    let mut raised = Vec::new();
    for name in &a.contestants {
        let done = forked.iter().position(|(n, _)| *n == name);
        let replayed = match done {
            Some(i) => forked.swap_remove(i).1,
            None => {
                let spin = crate::progress::spinner(&format!("replaying on {name}"));
                let r = replay_here(name, &trace, a.sample_every);
                spin.finish_and_clear();
                r
            }
        };
        let (mut samples, config) = replayed.map_err(CliError::Usage)?;
        if is_malloc_baseline(name) && at_least_stored(&mut samples) > 0 {
            raised.push(name.clone());
        }
        rows.push((name.clone(), samples, config));
    }
    let overhead =
        |s: &Sample| (s.bytes > 0).then(|| (s.held as f64 - s.bytes as f64) / s.bytes as f64);
    let flat: Vec<Row> = rows
        .iter()
        .flat_map(|(name, samples, _)| {
            samples.iter().map(move |s| Row {
                contestant: name,
                ops: s.ops,
                objects: s.objects,
                stored_bytes: s.bytes,
                pool_bytes: s.held,
                peak_pool_bytes: s.peak_held,
                overhead_ratio: overhead(s),
                returning_bytes: s.returning,
            })
        })
        .collect();
    match a.format {
        Format::Json => return print_json(&flat),
        Format::Csv => return crate::output::print_serialized(&flat),
        Format::Table => {}
    }
    let mib = |b: u64| format!("{:.2}", crate::output::mib(b));
    let returning = flat.iter().any(|r| r.returning_bytes > 0);
    let mut header = vec![
        "contestant",
        "ops",
        "objects",
        "stored\nMiB",
        "pool\nMiB",
        "peak pool\nMiB",
        "overhead",
    ];
    if returning {
        header.push("returning\nMiB");
    }
    let mut t = table(&header, 1);
    for r in &flat {
        let mut row = vec![
            r.contestant.to_string(),
            r.ops.to_string(),
            r.objects.to_string(),
            mib(r.stored_bytes),
            mib(r.pool_bytes),
            mib(r.peak_pool_bytes),
            r.overhead_ratio
                .map_or("-".to_string(), |o| format!("{:.2}%", o * 100.0)),
        ];
        if returning {
            row.push(mib(r.returning_bytes));
        }
        t.add_row(row);
    }
    print_table(&t)?;
    outln!(
        "pool = the pages the allocator holds for objects (for a malloc baseline its heap \
         growth, in a child process of its own); overhead = (pool - stored) / stored, - where \
         nothing is stored.{}",
        if returning {
            " returning = of pool, freed pages waiting for zsmem's return delay \
             (PoolConfig::page_return, 10 ms by default) to pass; `compare` reads after it."
        } else {
            ""
        }
    );
    for name in &raised {
        outln!(
            "{name}: at some samples its heap grew by less than the bytes it holds (its child \
             reused free space of the parent's heap); they show the bytes stored."
        );
    }
    for (name, _, config) in &rows {
        outln!("{name}: {}; {config}", what(name));
    }
    Ok(())
}
