//! Regenerate `include/zsmem.h` from the crate's source with cbindgen:
//! `cargo run -p zsmem-capi --example gen-header`.

use std::path::{Path, PathBuf};

/// The crate's directory.
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where the committed header lives.
pub fn header_path() -> PathBuf {
    crate_dir().join("include").join("zsmem.h")
}

/// The header as cbindgen makes it from `src/` with `cbindgen.toml`.
pub fn generate() -> String {
    let dir = crate_dir();
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml"))
        .unwrap_or_else(|e| panic!("reading cbindgen.toml: {e}"));
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src").join("lib.rs"))
        .generate()
        .unwrap_or_else(|e| panic!("cbindgen: {e}"));
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("cbindgen writes UTF-8")
}

#[allow(dead_code)] // The header test includes this file for `generate` only.
fn main() {
    let path = header_path();
    std::fs::write(&path, generate()).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    println!("wrote {}", Path::new(&path).display());
}
