//! The documents of `zsmem region`: files read from a directory of this
//! machine, and the zipfian order they are asked for in.

use std::path::Path;

use rand::Rng;

use crate::{CliError, CliResult};

/// Files' bytes, concatenated, with each file's place.
pub struct Docs {
    /// All the files, one after the other.
    pub bytes: Vec<u8>,
    /// (offset, length) of each file in `bytes`.
    pub spans: Vec<(usize, usize)>,
}

/// Read regular files under `dir` (in sorted order, depth first) until
/// `limit` bytes; empty files are skipped, and so are files over 1 MiB.
pub fn read(dir: &Path, limit: usize) -> CliResult<Docs> {
    let mut docs = Docs {
        bytes: Vec::new(),
        spans: Vec::new(),
    };
    // Room for all at once: growing by doubling would hold up to twice
    // the data for a moment (the plain-memory child's cgroup sees it).
    docs.bytes.try_reserve_exact(limit).map_err(|e| {
        CliError::Usage(format!(
            "--data {limit}: cannot reserve that much memory ({e})"
        ))
    })?;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut entries: Vec<_> = entries.filter_map(|e| e.ok()).collect();
        entries.sort_by_key(|e| std::cmp::Reverse(e.file_name()));
        for e in entries {
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                let Ok(b) = std::fs::read(e.path()) else {
                    continue;
                };
                if b.is_empty() || b.len() > 1 << 20 {
                    continue;
                }
                let take = b.len().min(limit - docs.bytes.len());
                docs.spans.push((docs.bytes.len(), take));
                docs.bytes.extend_from_slice(&b[..take]);
                if docs.bytes.len() >= limit {
                    return Ok(docs);
                }
            }
        }
    }
    if docs.spans.is_empty() {
        return Err(CliError::Usage(format!(
            "no readable file under {}: give --dir a directory of documents",
            dir.display()
        )));
    }
    Ok(docs)
}

/// Zipfian ranks over `n` items with exponent `s`: rank r (0-based) is
/// drawn with probability proportional to 1 / (r + 1)^s.
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    /// The distribution over `n` items.
    pub fn new(n: usize, s: f64) -> Zipf {
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = (0..n)
            .map(|r| {
                acc += 1.0 / ((r + 1) as f64).powf(s);
                acc
            })
            .collect();
        for c in &mut cdf {
            *c /= acc;
        }
        Zipf { cdf }
    }

    /// A rank.
    pub fn sample(&self, rng: &mut impl Rng) -> usize {
        let u: f64 = rng.random();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}
