//! The program's memory cgroup: made in the machine's memory controller
//! (cgroup v1's `memory.limit_in_bytes` or v2's `memory.max`), holding the
//! program only (it moves itself in between fork and exec; the lab stays
//! where it is), removed with its processes killed on every exit path.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::blockdev::BlockDevError;
use crate::blockdev::mount::MountEntry;
use crate::blockdev::registry::{self, Held, Resource};

/// Which memory controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Version {
    /// cgroup v1's memory controller (`memory.limit_in_bytes`).
    V1,
    /// cgroup v2 (`memory.max`).
    V2,
}

impl Version {
    fn limit_file(self) -> &'static str {
        match self {
            Version::V1 => "memory.limit_in_bytes",
            Version::V2 => "memory.max",
        }
    }
    fn usage_file(self) -> &'static str {
        match self {
            Version::V1 => "memory.usage_in_bytes",
            Version::V2 => "memory.current",
        }
    }
    fn peak_file(self) -> &'static str {
        match self {
            Version::V1 => "memory.max_usage_in_bytes",
            Version::V2 => "memory.peak",
        }
    }
}

/// The memory controller's root directory among `mounts`: a v1 `cgroup`
/// mount with `memory.limit_in_bytes`, or else a `cgroup2` mount whose
/// root passes `memory` down to its children (`cgroup.subtree_control`;
/// this module does not change it). `exists` says whether a file exists.
pub fn find_controller(
    mounts: &[MountEntry],
    exists: impl Fn(&Path) -> bool,
    read: impl Fn(&Path) -> Option<String>,
) -> Option<(PathBuf, Version)> {
    let v1 = mounts
        .iter()
        .find(|m| m.fstype == "cgroup" && exists(&m.dir.join("memory.limit_in_bytes")));
    if let Some(m) = v1 {
        return Some((m.dir.clone(), Version::V1));
    }
    mounts
        .iter()
        .filter(|m| m.fstype == "cgroup2")
        .find(|m| {
            read(&m.dir.join("cgroup.subtree_control"))
                .is_some_and(|s| s.split_whitespace().any(|c| c == "memory"))
        })
        .map(|m| (m.dir.clone(), Version::V2))
}

/// The machine's memory controller, or a one-line reason why there is none.
pub fn controller() -> Result<(PathBuf, Version), String> {
    find_controller(
        &crate::blockdev::mount::mounts(),
        |p| p.exists(),
        |p| std::fs::read_to_string(p).ok(),
    )
    .ok_or_else(|| {
        "no cgroup memory controller (neither a cgroup v1 memory mount nor cgroup v2 with memory in the root's cgroup.subtree_control)".into()
    })
}

/// The pids in a `cgroup.procs` text.
pub fn parse_procs(text: &str) -> Vec<i32> {
    text.split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// A value of a `memory.stat` text (`key value` lines).
pub fn stat_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next()? == key).then_some(())?;
        w.next()?.parse().ok()
    })
}

/// A number in a cgroup file: bytes, or `max` (none).
pub fn parse_limit(text: &str) -> Option<u64> {
    match text.trim() {
        "max" => Some(u64::MAX),
        t => t.parse().ok(),
    }
}

/// A memory cgroup this process made; removed on drop, its processes
/// killed first.
pub struct MemoryCgroup {
    _held: Held,
    dir: PathBuf,
    version: Version,
}

fn write(path: &Path, value: &str) -> Result<(), BlockDevError> {
    std::fs::write(path, value)
        .map_err(|e| BlockDevError::io(format!("writing {value} to {}", path.display()), e))
}

impl MemoryCgroup {
    /// A new cgroup `zsmem-swap.PID.N` under the memory controller's root,
    /// limited to `limit` bytes (`None`: no limit).
    pub fn create(limit: Option<u64>) -> Result<MemoryCgroup, BlockDevError> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let (root, version) = controller().map_err(BlockDevError::Unavailable)?;
        let dir = root.join(format!(
            "zsmem-swap.{}.{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let (held, ()) = registry::hold_with(Resource::Cgroup(dir.clone()), || {
            std::fs::create_dir(&dir)
                .map_err(|e| BlockDevError::io_or_refused(format!("creating {}", dir.display()), e))
        })?;
        let cg = MemoryCgroup {
            _held: held,
            dir,
            version,
        };
        if let Some(limit) = limit {
            write(&cg.dir.join(version.limit_file()), &limit.to_string())?;
        }
        Ok(cg)
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Which controller.
    pub fn version(&self) -> Version {
        self.version
    }

    /// `cgroup.procs`: a process writing `0` there moves itself in.
    pub fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// The memory the cgroup is charged now, in bytes (v1's
    /// `memory.usage_in_bytes`, v2's `memory.current`): its processes'
    /// anonymous memory and the page cache they brought in, not what they
    /// swapped out.
    pub fn usage(&self) -> Option<u64> {
        let t = std::fs::read_to_string(self.dir.join(self.version.usage_file())).ok()?;
        parse_limit(&t)
    }

    /// The most memory the cgroup was charged at once, in bytes.
    pub fn peak(&self) -> Option<u64> {
        let t = std::fs::read_to_string(self.dir.join(self.version.peak_file())).ok()?;
        parse_limit(&t)
    }

    /// How many of its processes the OOM killer killed (`oom_kill` of v1's
    /// `memory.oom_control`, v2's `memory.events`).
    pub fn oom_kills(&self) -> Option<u64> {
        let file = match self.version {
            Version::V1 => "memory.oom_control",
            Version::V2 => "memory.events",
        };
        stat_value(
            &std::fs::read_to_string(self.dir.join(file)).ok()?,
            "oom_kill",
        )
    }

    /// Its limit, in bytes (`u64::MAX`: none).
    pub fn limit(&self) -> Option<u64> {
        let t = std::fs::read_to_string(self.dir.join(self.version.limit_file())).ok()?;
        parse_limit(&t)
    }
}

/// How long to wait for killed processes to leave a cgroup.
const KILL_WAIT: Duration = Duration::from_secs(10);

/// Kills the processes in the cgroup at `dir` (the experiment's program),
/// waits for them to leave, and removes it; nothing if it is gone.
/// Registry's undo.
pub(crate) fn undo_cgroup(dir: &Path) -> Result<(), String> {
    if !dir.exists() {
        return Ok(());
    }
    let deadline = Instant::now() + KILL_WAIT;
    loop {
        let procs =
            parse_procs(&std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default());
        if procs.is_empty() && std::fs::remove_dir(dir).is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "cgroup {} still holds processes {procs:?}; left in place",
                dir.display()
            ));
        }
        for pid in procs {
            // SAFETY: kill has no memory effects; the pid is in our cgroup.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(dir: &str, fstype: &str) -> MountEntry {
        MountEntry {
            id: 0,
            parent: 0,
            dev: 0,
            dir: dir.into(),
            fstype: fstype.into(),
            source: "cgroup".into(),
        }
    }

    #[test]
    fn the_memory_controller_is_found() {
        let mounts = vec![
            entry("/sys/fs/cgroup/cpu", "cgroup"),
            entry("/sys/fs/cgroup/memory", "cgroup"),
            entry("/sys/fs/cgroup/unified", "cgroup2"),
        ];
        let v1 = |p: &Path| p == Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes");
        assert_eq!(
            find_controller(&mounts, v1, |_| None),
            Some(("/sys/fs/cgroup/memory".into(), Version::V1))
        );
        // v2 only where the root passes memory down.
        let mounts = vec![entry("/sys/fs/cgroup", "cgroup2")];
        let sub = |s: &'static str| move |_: &Path| Some(s.to_string());
        assert_eq!(
            find_controller(&mounts, |_| false, sub("cpu io memory pids\n")),
            Some(("/sys/fs/cgroup".into(), Version::V2))
        );
        assert_eq!(find_controller(&mounts, |_| false, sub("hugetlb\n")), None);
    }

    #[test]
    fn cgroup_files_parse() {
        assert_eq!(parse_procs("12\n345\n\n"), vec![12, 345]);
        assert!(parse_procs("").is_empty());
        let stat = "cache 52428800\nrss 172032\nshmem 52428800\nswap 0\ntotal_rss 1\n";
        assert_eq!(stat_value(stat, "rss"), Some(172032));
        assert_eq!(stat_value(stat, "shmem"), Some(52428800));
        assert_eq!(stat_value(stat, "total"), None);
        let oom = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";
        assert_eq!(stat_value(oom, "oom_kill"), Some(2));
        assert_eq!(parse_limit("max\n"), Some(u64::MAX));
        assert_eq!(
            parse_limit("9223372036854771712\n"),
            Some(9223372036854771712)
        );
        assert_eq!(parse_limit("x"), None);
    }
}
