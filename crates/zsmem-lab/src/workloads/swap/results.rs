//! What a run of the swap experiment gives, and its summary over runs:
//! median and range.

use serde::Serialize;

use super::procfs::SwapCounters;
use super::program::Outcome;
use crate::contestants::Figures;
use crate::workloads::untar_rm::Latencies;

/// The highest figures sampled during a run, in bytes.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Peaks {
    /// The store's pool (pages it holds for the compressed data).
    pub pool: u64,
    /// Everything it holds for the data (see [`crate::allin`]).
    pub all_in: u64,
    /// Pages stored, uncompressed.
    pub orig: u64,
    /// Compressed bytes stored (0 where not known: zswap).
    pub compr: u64,
    /// How many samples were taken.
    pub samples: u64,
    /// Memory held for the program, all in: the cgroup's charge plus the
    /// store's all-in, read together at each sample (not the sum of the
    /// two peaks, which need not coincide).
    pub held: u64,
    /// The swap area's slots in use as the kernel counts them
    /// (`/proc/swaps`), bytes. A store behind a device the kernel does
    /// not tell of each freed slot (a loop device) holds more than this:
    /// the kernel discards a freed slot only once its whole cluster (2 MiB
    /// of slots) is free.
    pub slots_used: u64,
}

impl Peaks {
    /// Takes `f` into account.
    pub fn update(&mut self, f: &Figures) {
        self.pool = self.pool.max(f.pool);
        self.all_in = self.all_in.max(f.all_in);
        self.orig = self.orig.max(f.orig);
        self.compr = self.compr.max(f.compr);
        self.samples += 1;
    }

    /// Takes a sample of memory held into account: `cgroup` charged and
    /// `store` all-in at the same moment.
    pub fn update_held(&mut self, cgroup: u64, store: u64) {
        self.held = self.held.max(cgroup + store);
    }

    /// Takes the swap area's slots in use (bytes) into account.
    pub fn update_slots(&mut self, used: u64) {
        self.slots_used = self.slots_used.max(used);
    }
}

/// One run of the program with one contestant as its swap.
#[derive(Clone, Debug, Serialize)]
pub struct SwapRun {
    /// The contestant (`none` for the run without a limit that sizes it).
    pub contestant: String,
    /// Which run, from 1.
    pub run: usize,
    /// How the program ran: times, status.
    pub outcome: Outcome,
    /// Swap-outs and swap-ins during the run (the machine's).
    pub swap: SwapCounters,
    /// The store's highest figures.
    pub peaks: Peaks,
    /// The most memory the program's cgroup was charged, bytes.
    pub cgroup_peak: Option<u64>,
    /// Processes of the program the OOM killer killed (a build then fails).
    pub oom_kills: Option<u64>,
    /// The cgroup's limit, bytes (`None`: none).
    pub limit: Option<u64>,
    /// How long turning the swap area off took afterwards (reading back
    /// what was left in it), seconds.
    pub swapoff_s: f64,
    /// The contestant's own per-page latencies, where it can time them.
    #[serde(skip)]
    pub latency: Option<Latencies>,
}

/// Median and range of a figure over runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Spread {
    /// The median (of an even count: the mean of the middle two).
    pub median: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
}

impl Spread {
    /// Of `values` (zeros when empty).
    pub fn of(values: &[f64]) -> Spread {
        if values.is_empty() {
            return Spread::default();
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            median,
            min: v[0],
            max: v[n - 1],
        }
    }
}

/// One contestant's runs, summarised.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// The contestant.
    pub contestant: String,
    /// Runs done.
    pub runs: usize,
    /// Runs in which the program failed (killed by the OOM killer, ...).
    pub failed: usize,
    /// Wall time, seconds.
    pub wall_s: Spread,
    /// User time, seconds.
    pub user_s: Spread,
    /// System time, seconds.
    pub sys_s: Spread,
    /// Pages swapped out.
    pub pswpout: Spread,
    /// Pages swapped in.
    pub pswpin: Spread,
    /// Pages stored in zswap's pool.
    pub zswpout: Spread,
    /// Pages loaded from zswap's pool.
    pub zswpin: Spread,
    /// Peak pool, bytes.
    pub peak_pool: Spread,
    /// Peak all-in, bytes.
    pub peak_all_in: Spread,
    /// Peak stored (uncompressed), bytes.
    pub peak_orig: Spread,
    /// Peak of the swap area's slots in use as the kernel counts them,
    /// bytes.
    pub peak_slots_used: Spread,
    /// The runs' latencies added up, where the contestant times them.
    #[serde(skip)]
    pub latency: Option<Latencies>,
}

/// The runs of each contestant, in the order they first appear.
pub fn summarize(runs: &[SwapRun]) -> Vec<Summary> {
    let mut names: Vec<&str> = Vec::new();
    for r in runs {
        if !names.contains(&r.contestant.as_str()) {
            names.push(&r.contestant);
        }
    }
    names
        .into_iter()
        .map(|name| {
            let mine: Vec<&SwapRun> = runs.iter().filter(|r| r.contestant == name).collect();
            let spread = |f: &dyn Fn(&SwapRun) -> f64| {
                Spread::of(&mine.iter().map(|r| f(r)).collect::<Vec<_>>())
            };
            let mut latency: Option<Latencies> = None;
            for l in mine.iter().filter_map(|r| r.latency.as_ref()) {
                match &mut latency {
                    None => latency = Some(l.clone()),
                    Some(sum) => {
                        let _ = sum.store.add(&l.store);
                        let _ = sum.load.add(&l.load);
                        let _ = sum.discard.add(&l.discard);
                    }
                }
            }
            Summary {
                contestant: name.to_string(),
                runs: mine.len(),
                failed: mine.iter().filter(|r| !r.outcome.success).count(),
                wall_s: spread(&|r| r.outcome.wall_s),
                user_s: spread(&|r| r.outcome.user_s),
                sys_s: spread(&|r| r.outcome.sys_s),
                pswpout: spread(&|r| r.swap.pswpout as f64),
                pswpin: spread(&|r| r.swap.pswpin as f64),
                zswpout: spread(&|r| r.swap.zswpout as f64),
                zswpin: spread(&|r| r.swap.zswpin as f64),
                peak_pool: spread(&|r| r.peaks.pool as f64),
                peak_all_in: spread(&|r| r.peaks.all_in as f64),
                peak_orig: spread(&|r| r.peaks.orig as f64),
                peak_slots_used: spread(&|r| r.peaks.slots_used as f64),
                latency,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_range() {
        assert_eq!(
            Spread::of(&[3.0, 1.0, 2.0]),
            Spread {
                median: 2.0,
                min: 1.0,
                max: 3.0
            }
        );
        assert_eq!(Spread::of(&[4.0, 1.0]).median, 2.5);
        assert_eq!(Spread::of(&[]), Spread::default());
    }

    #[test]
    fn runs_are_summarised_per_contestant_in_order() {
        let run = |c: &str, wall: f64, ok: bool| SwapRun {
            contestant: c.into(),
            run: 1,
            outcome: Outcome {
                wall_s: wall,
                success: ok,
                ..Outcome::default()
            },
            swap: SwapCounters::default(),
            peaks: Peaks::default(),
            cgroup_peak: None,
            oom_kills: None,
            limit: None,
            swapoff_s: 0.0,
            latency: None,
        };
        let s = summarize(&[
            run("b", 1.0, true),
            run("a", 5.0, true),
            run("b", 3.0, false),
        ]);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].contestant, "b");
        assert_eq!(s[0].runs, 2);
        assert_eq!(s[0].failed, 1);
        assert_eq!(s[0].wall_s.median, 2.0);
        assert_eq!(s[1].wall_s.max, 5.0);
    }
}
