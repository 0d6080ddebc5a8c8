//! Gives `libzsmem.so` its SONAME, so that programs linked against it
//! record `libzsmem.so.0` and keep working across 0.x releases that keep
//! the ABI (install.sh makes the `libzsmem.so.0` link).

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "android" || os.ends_with("bsd") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libzsmem.so.0");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
