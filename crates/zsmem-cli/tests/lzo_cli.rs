//! `--codec lzo` and `--codec lzo-rle` (zram's default): they run when the
//! binary is built with `--features lzo`, and otherwise fail with a message
//! saying so. Without the kernel (`--no-kernel`): no zram device is made.

mod common;

use common::zsmem;

fn bench_store(codec: &str) -> std::process::Output {
    zsmem(&[
        "bench",
        "store",
        "--scale",
        "0.01",
        "--pages",
        "300",
        "--no-kernel",
        "--codec",
        codec,
    ])
}

#[test]
#[cfg(feature = "lzo")]
fn lzo_codecs_store_and_load_pages() {
    for codec in ["lzo", "lzo-rle"] {
        let out = bench_store(codec);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{codec}: {err}");
        let t = String::from_utf8(out.stdout).unwrap();
        // The load pass checks every page it reads back.
        assert!(
            t.contains(&format!(
                "300 pages of embedded corpus (seed 1, scale 0.01), {codec}"
            )),
            "{t}"
        );
        assert!(t.contains(&format!("{codec} alone:")), "{t}");
    }
}

#[test]
#[cfg(not(feature = "lzo"))]
fn lzo_codecs_need_the_feature() {
    for codec in ["lzo", "lzo-rle"] {
        let out = bench_store(codec);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{codec} ran without the feature");
        assert!(err.contains("--features lzo"), "{codec}: {err}");
        assert!(!err.contains("panicked"), "{codec}: {err}");
    }
}
