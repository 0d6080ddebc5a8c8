//! Shared by the CLI tests: run the built `zsmem` binary.

use std::process::{Command, Output};

/// Run `zsmem` with `args` and collect its output.
pub fn zsmem(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zsmem"))
        .args(args)
        .output()
        .expect("run zsmem")
}
