//! Process memory: the pages of a running process's anonymous memory, the
//! content zswap really stores.
//!
//! Reads `/proc/PID/maps` for private anonymous mappings (heap, stacks,
//! anonymous `mmap`s) and their pages from `/proc/PID/mem`. The result is a
//! [`FileTree`] with one "file" per mapping under a top-level directory
//! named for its kind (`heap`, `stack`, `anon`), so the untar/rm workload
//! runs on it unchanged: store every page, then drop the largest kinds first.
//! Reading another process's memory needs ptrace permission (root, or the
//! same user with `kernel.yama.ptrace_scope` 0); the error says so.

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::corpus::{FileEntry, FileTree, PAGE_SIZE};

/// Why a process's memory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProcMemError {
    /// There is no process `pid` (its /proc directory is gone).
    #[error("no such process: {pid}")]
    NoSuchProcess {
        /// The process asked for.
        pid: u32,
    },
    /// /proc/PID/maps or /proc/PID/mem could not be opened or read: the
    /// OS's own error, with the ptrace hint only where permission was what
    /// failed and the caller is not root.
    #[error("cannot read /proc/{pid}/{what}: {source}{}", permission_hint(source))]
    Io {
        /// Which file.
        what: &'static str,
        /// The process.
        pid: u32,
        /// The OS error.
        source: std::io::Error,
    },
    /// A line of /proc/PID/maps that does not parse.
    #[error("process {pid}: malformed /proc/{pid}/maps line: {line}")]
    Malformed {
        /// The process.
        pid: u32,
        /// The line.
        line: String,
    },
}

fn permission_hint(e: &std::io::Error) -> &'static str {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    match (e.kind() == std::io::ErrorKind::PermissionDenied, root) {
        (true, false) => " (reading another process's memory needs root or ptrace permission)",
        (true, true) => {
            " (refused to root too: the process may be protected, e.g. by kernel.yama.ptrace_scope 3, a missing CAP_SYS_PTRACE or a security module)"
        }
        _ => "",
    }
}

/// The error for `/proc/{pid}/{what}`: a missing process is said so.
fn io_error(pid: u32, what: &'static str, source: std::io::Error) -> ProcMemError {
    let gone = source.kind() == std::io::ErrorKind::NotFound
        || source.raw_os_error() == Some(libc::ESRCH)
        || !std::path::Path::new(&format!("/proc/{pid}")).exists();
    if gone {
        ProcMemError::NoSuchProcess { pid }
    } else {
        ProcMemError::Io { what, pid, source }
    }
}

/// One anonymous private mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// Start address.
    pub start: u64,
    /// End address (exclusive).
    pub end: u64,
    /// `heap`, `stack` or `anon`.
    pub kind: &'static str,
}

/// The private, writable, anonymous mappings listed in a maps file.
pub fn anonymous_mappings(maps: &str, pid: u32) -> Result<Vec<Mapping>, ProcMemError> {
    let mut out = Vec::new();
    for line in maps.lines() {
        let bad = || ProcMemError::Malformed {
            pid,
            line: crate::text::shown(line),
        };
        let mut f = line.split_whitespace();
        let (range, perms) = (f.next().ok_or_else(bad)?, f.next().ok_or_else(bad)?);
        let inode = f.nth(2).ok_or_else(bad)?;
        let name = f.next().unwrap_or("");
        let (s, e) = range.split_once('-').ok_or_else(bad)?;
        let start = u64::from_str_radix(s, 16).map_err(|_| bad())?;
        let end = u64::from_str_radix(e, 16).map_err(|_| bad())?;
        let private_rw = perms.starts_with("rw") && perms.as_bytes().get(3) == Some(&b'p');
        let kind = match name {
            "[heap]" => "heap",
            n if n.starts_with("[stack") => "stack",
            "" if inode == "0" => "anon",
            _ => continue,
        };
        if private_rw && end > start {
            out.push(Mapping { start, end, kind });
        }
    }
    Ok(out)
}

/// The anonymous memory of process `pid` as a file tree, at most
/// `max_bytes` of it (mappings in address order). Pages that cannot be read
/// (unmapped meanwhile, guard pages) are skipped.
pub fn process_tree(pid: u32, max_bytes: u64) -> Result<FileTree, ProcMemError> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|source| io_error(pid, "maps", source))?;
    let mem =
        File::open(format!("/proc/{pid}/mem")).map_err(|source| io_error(pid, "mem", source))?;
    let mut files = Vec::new();
    let mut total = 0u64;
    let mut page = vec![0u8; PAGE_SIZE];
    let mut last_error = None;
    for (i, m) in anonymous_mappings(&maps, pid)?.into_iter().enumerate() {
        let mut data = Vec::new();
        let mut addr = m.start;
        while addr < m.end && total < max_bytes {
            match mem.read_exact_at(&mut page, addr) {
                Ok(()) => {
                    data.extend_from_slice(&page);
                    total += PAGE_SIZE as u64;
                }
                Err(e) => last_error = Some(e),
            }
            addr += PAGE_SIZE as u64;
        }
        if !data.is_empty() {
            // Under a common `pid<N>/`, which FileTree::new strips, so the
            // kinds stay top-level directories even when only one is present.
            files.push(FileEntry::new(
                format!("pid{pid}/{}/{:x}-{:x}.{i}", m.kind, m.start, m.end),
                data,
            ));
        }
        if total >= max_bytes {
            break;
        }
    }
    if files.is_empty() {
        // Our own memory is always readable; another's may be refused:
        // the OS's last error says why.
        let source = last_error.unwrap_or_else(|| {
            std::io::Error::other("the process has no anonymous memory to read")
        });
        return Err(io_error(pid, "mem", source));
    }
    Ok(FileTree::new(files))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_are_classified() {
        let maps = "\
55d0c000-55d0e000 r--p 00000000 fd:01 123 /usr/bin/cat
55d0e000-55d2f000 rw-p 00000000 00:00 0 [heap]
7f00-8f00 rw-p 00000000 00:00 0
9000-a000 rw-s 00000000 00:01 7 /dev/zero (deleted)
7ffc0000-7ffc2000 rw-p 00000000 00:00 0 [stack]
b000-c000 r--p 00000000 00:00 0
";
        let m = anonymous_mappings(maps, 1).unwrap();
        let kinds: Vec<&str> = m.iter().map(|m| m.kind).collect();
        assert_eq!(kinds, ["heap", "anon", "stack"]);
        assert!(anonymous_mappings("zzz", 1).is_err());
    }

    #[test]
    fn own_memory_can_be_read() {
        let keep: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
        let tree = process_tree(std::process::id(), 64 << 20).unwrap();
        assert!(tree.total_pages() > 0);
        for f in &tree.files {
            let top = f.top_level_dir();
            assert!(
                matches!(top, Some("heap" | "stack" | "anon")),
                "{}",
                f.path()
            );
        }
        drop(keep);
    }

    #[test]
    fn unknown_process_is_a_clear_error() {
        let e = process_tree(u32::MAX - 1, 1 << 20).unwrap_err();
        assert_eq!(e.to_string(), format!("no such process: {}", u32::MAX - 1));
    }
}
