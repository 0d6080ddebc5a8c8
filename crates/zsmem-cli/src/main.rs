//! The `zsmem` command.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[cfg(target_os = "linux")]
use zsmem_cli::region;
use zsmem_cli::{bench, classes, compare, disk, replay, stats};

/// zsmem: a zsmalloc-design compressed-memory allocator, its size-class
/// simulator and its benchmarks. With no subcommand it runs `compare` on
/// its embedded corpus: the side-by-side comparison, its summary and the
/// report's path.
#[derive(Parser, Debug)]
#[command(name = "zsmem", version, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The untar/rm experiment of reference 004 side by side on nine
    /// contestants by default: zsmem (log placement), zsmem-classes,
    /// zsmem-kernel as it is and compacted after every step
    /// (zsmem-kernel-compact), the kernel's zram as it is (kernel-zram) and
    /// compacted after every step (kernel-zram-compact), and the malloc baselines
    /// system, jemalloc and mimalloc; a verdict, tables and an HTML report.
    Compare(compare::CompareArgs),
    /// A compressed RAM disk backed by zsmem, ext4 on it, mounted at a
    /// directory; prints zram's mm_stat while it runs (needs root, FUSE
    /// and loop devices).
    Disk(disk::DiskArgs),
    /// Size-class simulator: how requests map to classes, zspage shapes,
    /// waste and spanning objects, optionally against a second configuration.
    Classes(classes::ClassesArgs),
    /// Replay a size trace (`alloc ID SIZE` / `free ID` lines) on zsmem's
    /// pools; record one with `zsmem compare --record-trace FILE`.
    Replay(replay::ReplayArgs),
    /// Fill a pool with a synthetic workload and print its statistics in the
    /// kernel's debugfs layout.
    Stats(stats::StatsArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Compressed memory used as ordinary memory: a document cache served
    /// from a zsmem Region at several budgets beside all-resident memory,
    /// then fault-in latency, stored size and CPU by unit size.
    #[cfg(target_os = "linux")]
    Region(region::RegionArgs),
}

/// The command to run: the one named, or the main job, `compare` with its
/// defaults.
fn command(cli: Cli) -> Command {
    cli.command
        .unwrap_or_else(|| Command::Compare(compare::CompareArgs::default()))
}

fn main() -> ExitCode {
    // A closed stdout (`zsmem replay t | head -1`) ends the process quietly,
    // as it does any command-line tool, instead of a panic in println!.
    // The kernel zram contestant catches SIGPIPE while its device exists,
    // to remove the device first.
    // SAFETY: setting a signal's disposition to the default at the start
    // of main, before any thread exists, has no preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let result = match command(Cli::parse()) {
        Command::Compare(a) => compare::run(&a),
        Command::Classes(a) => classes::run(&a),
        Command::Disk(a) => disk::run(&a),
        Command::Stats(a) => stats::run(&a),
        Command::Replay(a) => replay::run(&a),
        Command::Bench(b) => bench::run(&b),
        #[cfg(target_os = "linux")]
        Command::Region(a) => region::run(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zsmem: error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_subcommand_runs_the_comparison() {
        let cli = Cli::try_parse_from(["zsmem"]).unwrap();
        assert!(matches!(command(cli), Command::Compare(_)));
        let cli = Cli::try_parse_from(["zsmem", "classes"]).unwrap();
        assert!(matches!(command(cli), Command::Classes(_)));
    }

    /// The help's summary of `compare` names every contestant it runs by
    /// default (it once named three of seven).
    #[test]
    fn compare_summary_names_the_default_contestants() {
        use clap::CommandFactory;
        let help = Cli::command().render_help().to_string();
        let start = help.find("\n  compare").expect("compare listed");
        let rest = &help[start..];
        let end = rest.find("\n  disk").unwrap_or(rest.len());
        let line = rest[..end].split_whitespace().collect::<Vec<_>>().join(" ");
        for c in compare::DEFAULT_CONTESTANTS {
            assert!(line.contains(c), "{c} not in {line}");
        }
    }
}
