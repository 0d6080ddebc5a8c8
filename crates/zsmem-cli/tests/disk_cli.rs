//! `zsmem disk`: two disks started at once on one directory: one mounts,
//! the other is refused with a clear error (issue 32 item 3: both passed
//! the empty check and stacked); SIGTERM then takes the one apart and
//! leaves nothing mounted there; a closed stdout (SIGPIPE) does the same.
//! Needs root, /dev/fuse, loop devices and
//! mkfs.ext4: where any is missing, says so and passes.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::test_dir;

/// Sends SIGTERM to a disk still running when dropped, and waits for it.
struct Disk(Child);

impl Drop for Disk {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // SAFETY: kill has no memory effects; the pid is our child's.
            unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
            let _ = self.0.wait();
        }
    }
}

fn start(dir: &Path) -> Disk {
    start_with(dir, Stdio::null())
}

fn start_with(dir: &Path, stdout: Stdio) -> Disk {
    let bin = std::env::var_os("ZSMEM_BIN").unwrap_or(env!("CARGO_BIN_EXE_zsmem").into());
    let child = Command::new(bin)
        .args(["disk", "--size", "16M", "--interval", "1", "--mount"])
        .arg(dir)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("run zsmem");
    Disk(child)
}

fn mounted_at(dir: &Path) -> bool {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    text.lines()
        .any(|l| l.split(' ').nth(4) == Some(dir.to_str().unwrap()))
}

fn unavailable() -> Option<&'static str> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root");
    }
    if !Path::new("/dev/fuse").exists() || !Path::new("/dev/loop-control").exists() {
        return Some("no /dev/fuse or /dev/loop-control");
    }
    None
}

#[test]
fn two_disks_on_one_directory_one_is_refused() {
    if let Some(why) = unavailable() {
        println!("two_disks_on_one_directory_one_is_refused: skipped: {why}");
        return;
    }
    let dir = test_dir("disk-twice");
    let mut disks = [start(&dir), start(&dir)];
    // Wait for one to end (the refused one); a hang guard bounds the wait.
    let mut ended = None;
    for _ in 0..6000 {
        for (i, d) in disks.iter_mut().enumerate() {
            if let Some(status) = d.0.try_wait().unwrap() {
                ended = Some((i, status));
            }
        }
        if ended.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let (i, status) = ended.expect("neither disk ended: both mounted?");
    let mut err = String::new();
    disks[i]
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    if err.contains("zsmem disk needs") {
        println!("two_disks_on_one_directory_one_is_refused: skipped: {err}");
        return;
    }
    assert!(!status.success(), "{err}");
    assert!(
        err.contains("taken by another zsmem disk") || err.contains("not an empty directory"),
        "the refusal says why: {err}"
    );
    let other = &mut disks[1 - i];
    assert!(
        other.0.try_wait().unwrap().is_none(),
        "the other disk still runs"
    );
    // The running one mounts (its stderr says so), then SIGTERM takes it
    // apart.
    let said = wait_until_mounted(other);
    assert!(mounted_at(&dir), "{said}");
    // SAFETY: kill has no memory effects; the pid is our child's.
    unsafe { libc::kill(other.0.id() as i32, libc::SIGTERM) };
    let status = other.0.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM));
    assert!(!mounted_at(&dir), "{dir:?} still mounted");
    std::fs::remove_dir(&dir).unwrap();
}

/// Reads the disk's stderr until it says it is mounted (or ends); what it
/// said. The pipe is kept open after (put back in the child): a disk that
/// writes to a closed stderr now ends on `SIGPIPE` (status 141), which
/// the SIGTERM test took for its own signal's end when the reader went.
fn wait_until_mounted(disk: &mut Disk) -> String {
    let mut line = [0u8; 1];
    let mut said = Vec::new();
    let mut stderr = disk.0.stderr.take().unwrap();
    while !String::from_utf8_lossy(&said).contains("mounted at") {
        if stderr.read(&mut line).unwrap() == 0 {
            break;
        }
        said.push(line[0]);
    }
    disk.0.stderr = Some(stderr);
    String::from_utf8_lossy(&said).into_owned()
}

/// `zsmem disk ... | head -n 2`: the disk prints a line a second to a
/// pipe whose reader is gone. `SIGPIPE` (the binary resets it to its
/// default) must take the disk apart as `SIGTERM` does: before the fix it
/// killed the process with the ext4 mount, the loop device and the FUSE
/// mount left behind.
#[test]
fn a_closed_stdout_takes_the_disk_apart() {
    if let Some(why) = unavailable() {
        println!("a_closed_stdout_takes_the_disk_apart: skipped: {why}");
        return;
    }
    let dir = test_dir("disk-pipe");
    let mut disk = start_with(&dir, Stdio::piped());
    let said = wait_until_mounted(&mut disk);
    if said.contains("zsmem disk needs") {
        println!("a_closed_stdout_takes_the_disk_apart: skipped: {said}");
        return;
    }
    assert!(mounted_at(&dir), "{said}");
    // The reader goes: the next figures line (within a second) hits a
    // closed pipe.
    drop(disk.0.stdout.take());
    let mut status = None;
    for _ in 0..3000 {
        status = disk.0.try_wait().unwrap();
        if status.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let status = status.expect("the disk still runs 30 s after its stdout closed");
    // The signal's thread exits with 128 + SIGPIPE after its undo, unless
    // the main thread (its write failed) took the disk apart and returned
    // first; never a panic (101) or the signal's default death.
    assert!(matches!(status.code(), Some(0) | Some(141)), "{status:?}");
    assert!(!mounted_at(&dir), "{dir:?} still mounted");
    std::fs::remove_dir(&dir).unwrap();
}
