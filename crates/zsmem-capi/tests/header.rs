//! The committed header is what cbindgen makes from the source now.

#[path = "../examples/gen-header.rs"]
mod gen_header;

#[test]
fn committed_header_is_up_to_date() {
    let path = gen_header::header_path();
    let committed = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let fresh = gen_header::generate();
    assert!(
        committed == fresh,
        "{} is out of date: run `cargo run -p zsmem-capi --example gen-header` and commit it",
        path.display()
    );
}
