//! Shared by the CLI tests: run the built `zsmem` binary.

use std::process::{Command, Output};

/// Run `zsmem` with `args` and collect its output. `ZSMEM_BIN` names
/// another binary to test (an older build, to see a test fail before its
/// fix).
#[allow(dead_code)] // not every test file uses it
pub fn zsmem(args: &[&str]) -> Output {
    let bin = std::env::var_os("ZSMEM_BIN").unwrap_or(env!("CARGO_BIN_EXE_zsmem").into());
    Command::new(bin).args(args).output().expect("run zsmem")
}

/// A one-entry ustar archive whose header declares `declared` bytes (in
/// base-256 when octal cannot hold it, as GNU tar writes large sizes) and
/// whose body is `body`, then two zero blocks: a crafted input.
#[allow(dead_code)] // not every test file uses it
pub fn crafted_tar(name: &[u8], declared: u64, body: &[u8]) -> Vec<u8> {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name);
    h[100..107].copy_from_slice(b"0000644");
    h[108..115].copy_from_slice(b"0000000");
    h[116..123].copy_from_slice(b"0000000");
    if declared < 8 << 30 {
        h[124..135].copy_from_slice(format!("{declared:011o}").as_bytes());
    } else {
        h[124] = 0x80;
        h[128..136].copy_from_slice(&declared.to_be_bytes());
    }
    h[136..147].copy_from_slice(b"00000000000");
    h[156] = b'0';
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    let mut out = h.to_vec();
    out.extend_from_slice(body);
    out.resize(out.len().div_ceil(512) * 512 + 1024, 0);
    out
}

/// A fresh directory for one test's files.
#[allow(dead_code)]
pub fn test_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("zsmem-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Run `zsmem args`, killed if it is still running after `secs` seconds
/// (an absurd value that is not refused runs without end).
#[allow(dead_code)] // not every test file uses it
pub fn zsmem_within(args: &[&str], secs: u64) -> std::process::Output {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let bin = std::env::var_os("ZSMEM_BIN").unwrap_or(env!("CARGO_BIN_EXE_zsmem").into());
    let mut child = Command::new(bin)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run zsmem");
    let end = Instant::now() + Duration::from_secs(secs);
    while child.try_wait().expect("wait for zsmem").is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} still ran after {secs} s: not refused");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("zsmem's output")
}
