//! The program that swaps: a command run in the memory cgroup (it moves
//! itself in between fork and exec), in a tmpfs that cgroup is charged
//! for, timed by `wait4`'s rusage; and the default one, a real build of
//! real C code found on the machine.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::blockdev::BlockDevError;

/// How often the running program is looked at for its exit: its wall time
/// is known to within this (it was known to within the readings interval,
/// 100 ms by default, up to 0.7% of a build the comparison tells apart by
/// 2-5%).
const EXIT_POLL: Duration = Duration::from_millis(2);

/// The environment variable naming the program's tmpfs directory.
pub const DIR_VAR: &str = "ZSMEM_SWAP_DIR";

/// What runs in the cgroup.
#[derive(Clone, Debug, serde::Serialize)]
pub enum Program {
    /// The default: the C files under `source` copied into the tmpfs (by
    /// the program, so its cgroup is charged for them) and each compiled
    /// with `gcc -O2 -g` by `jobs` parallel compilers, then archived.
    Build {
        /// A directory of C code.
        source: PathBuf,
        /// Parallel compilers.
        jobs: usize,
    },
    /// Any command: exactly these arguments, run in the tmpfs directory.
    Command(Vec<String>),
}

/// C code bases the cargo registry holds, in order of preference:
/// zstd's library, then lz4's.
const REGISTRY_SOURCES: &[(&str, &str)] = &[("zstd-sys-", "zstd/lib"), ("lz4-sys-", "liblz4")];

/// The C code the default build compiles: zstd's (or lz4's) library
/// sources in the cargo registry (`$CARGO_HOME` or `~/.cargo`).
pub fn find_default_source() -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))?;
    let src = home.join("registry/src");
    let indexes: Vec<PathBuf> = std::fs::read_dir(&src)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    for (prefix, sub) in REGISTRY_SOURCES {
        let mut found: Vec<PathBuf> = indexes
            .iter()
            .filter_map(|i| std::fs::read_dir(i).ok())
            .flat_map(|d| d.flatten().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
            })
            .map(|p| p.join(sub))
            .filter(|p| p.is_dir())
            .collect();
        found.sort();
        if let Some(p) = found.pop() {
            return Some(p);
        }
    }
    None
}

/// The shell script of [`Program::Build`].
pub fn build_script(source: &Path, jobs: usize) -> String {
    let src = source.display().to_string().replace('\'', "'\\''");
    format!(
        "set -e; cp -a '{src}' \"${DIR_VAR}/src\"; cd \"${DIR_VAR}/src\"; \
         find . -name '*.c' | sort | xargs -P {jobs} -I@ gcc -O2 -g -w -c @ -o @.o; \
         find . -name '*.o' | sort | xargs ar rcs \"${DIR_VAR}/libbuilt.a\""
    )
}

impl Program {
    /// The command line, for the report.
    pub fn describe(&self) -> String {
        match self {
            Program::Build { source, jobs } => format!(
                "sh -c \"{}\" (a build of {})",
                build_script(source, *jobs),
                source.display()
            ),
            Program::Command(args) => args.join(" "),
        }
    }

    fn command(&self) -> Command {
        match self {
            Program::Build { source, jobs } => {
                let mut c = Command::new("/bin/sh");
                c.arg("-c").arg(build_script(source, *jobs));
                c
            }
            Program::Command(args) => {
                let mut c = Command::new(&args[0]);
                c.args(&args[1..]);
                c
            }
        }
    }
}

/// How the program ran.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Outcome {
    /// Wall time, seconds.
    pub wall_s: f64,
    /// User time of the program and its waited-for descendants, seconds.
    pub user_s: f64,
    /// System time likewise, seconds.
    pub sys_s: f64,
    /// Its largest resident set (`ru_maxrss`, of one process), bytes.
    pub max_rss: u64,
    /// Major page faults.
    pub major_faults: u64,
    /// `exit 0`, `exit N`, or `signal N`.
    pub status: String,
    /// Whether it exited with 0.
    pub success: bool,
    /// The last lines of its standard error, if it failed.
    pub stderr_tail: String,
}

fn seconds(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 / 1e6
}

/// Runs `program` with its working directory `dir` (also in
/// [`DIR_VAR`]), moving itself into the cgroup whose `cgroup.procs` is
/// `procs` before it execs; its standard error goes to `log`. Calls
/// `tick` every `every` while it runs (the sampler).
pub fn run(
    program: &Program,
    dir: &Path,
    procs: &Path,
    log: &Path,
    every: Duration,
    mut tick: impl FnMut(),
) -> Result<Outcome, BlockDevError> {
    let procs_c = CString::new(procs.as_os_str().as_bytes())
        .map_err(|_| BlockDevError::Usage("cgroup path holds a NUL byte".into()))?;
    let err = std::fs::File::create(log)
        .map_err(|e| BlockDevError::io(format!("creating {}", log.display()), e))?;
    let mut cmd = program.command();
    cmd.current_dir(dir)
        .env(DIR_VAR, dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err);
    // SAFETY: the closure calls only async-signal-safe functions (open,
    // write, close) on memory made before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let fd = libc::open(procs_c.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // "0": the writing process itself.
            let n = libc::write(fd, b"0".as_ptr().cast(), 1);
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            if n != 1 {
                return Err(e);
            }
            Ok(())
        });
    }
    let start = Instant::now();
    let child = cmd.spawn().map_err(|e| {
        BlockDevError::io(
            format!("starting {}", crate::text::shown(&program.describe())),
            e,
        )
    })?;
    let pid = child.id() as libc::pid_t;
    // Reaped here with wait4, not through `child`, for its rusage; looked
    // for every `EXIT_POLL` (a readings interval may be long: the wall
    // time must not wait for the next reading), the figures read every
    // `every`.
    let mut next_tick = start + every;
    let (status, ru) = loop {
        let mut status = 0;
        // SAFETY: all-zero is a valid rusage (plain integers).
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `status` and `ru` are valid out pointers for the call.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if r == pid {
            break (status, ru);
        }
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(BlockDevError::io("wait4", e));
            }
        }
        let now = Instant::now();
        if now >= next_tick {
            tick();
            next_tick = now + every;
        }
        std::thread::sleep(EXIT_POLL.min(next_tick.saturating_duration_since(now)));
    };
    let wall = start.elapsed();
    tick();
    let (status_text, success) = if libc::WIFEXITED(status) {
        let code = libc::WEXITSTATUS(status);
        (format!("exit {code}"), code == 0)
    } else if libc::WIFSIGNALED(status) {
        (format!("signal {}", libc::WTERMSIG(status)), false)
    } else {
        (format!("status {status}"), false)
    };
    let stderr_tail = if success {
        String::new()
    } else {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join("\n")
    };
    Ok(Outcome {
        wall_s: wall.as_secs_f64(),
        user_s: seconds(ru.ru_utime),
        sys_s: seconds(ru.ru_stime),
        max_rss: ru.ru_maxrss as u64 * 1024,
        major_faults: ru.ru_majflt as u64,
        status: status_text,
        success,
        stderr_tail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_script_quotes_its_source() {
        let s = build_script(Path::new("/x/it's"), 3);
        assert!(s.contains("cp -a '/x/it'\\''s'"), "{s}");
        assert!(s.contains("xargs -P 3"));
        assert!(s.contains("$ZSMEM_SWAP_DIR"));
    }
}
