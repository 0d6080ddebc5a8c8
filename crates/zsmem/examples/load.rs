//! A page store's load against the codec alone, in one thread: every page
//! of a tree (default `/usr/local/go/src`, at most 38,000 pages of 4 KiB)
//! stored, then read back in order by `PageStore::read`, and the same pages
//! compressed into one flat array decompressed by the codec alone; each 15
//! times, alternating. Prints the best ns a page of each and their ratio
//! (the probe behind `store::IN_PLACE_MAX`'s figures).
//!
//!     cargo run --release -p zsmem --example load [DIR]

use zsmem::{Codec, PageStore, PageStoreConfig};

fn walk(p: &std::path::Path, out: &mut Vec<u8>) {
    let Ok(rd) = std::fs::read_dir(p) else { return };
    for e in rd.flatten() {
        let Ok(t) = e.file_type() else { continue };
        if t.is_dir() {
            walk(&e.path(), out);
        } else if t.is_file()
            && let Ok(b) = std::fs::read(e.path())
        {
            out.extend_from_slice(&b);
        }
        if out.len() > 160 << 20 {
            return;
        }
    }
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "/usr/local/go/src".into());
    let mut data = Vec::new();
    walk(std::path::Path::new(&dir), &mut data);
    let pages: Vec<&[u8]> = data.chunks_exact(4096).take(38_000).collect();
    if pages.is_empty() {
        eprintln!("no pages under {dir}");
        std::process::exit(2);
    }
    let store = PageStore::new(PageStoreConfig {
        slots: pages.len(),
        ..Default::default()
    })
    .expect("a store");
    for (i, p) in pages.iter().enumerate() {
        store.write(i, p).expect("write");
    }
    let (mut flat, mut at, mut tmp) = (Vec::new(), Vec::new(), vec![0u8; 8192]);
    for p in &pages {
        let n = Codec::Lz4.compress(p, &mut tmp).expect("fits");
        at.push((flat.len(), n));
        flat.extend_from_slice(&tmp[..n]);
    }
    let mut buf = vec![0u8; 4096];
    let (mut store_best, mut codec_best) = (f64::MAX, f64::MAX);
    for _ in 0..15 {
        let t = std::time::Instant::now();
        for i in 0..pages.len() {
            store.read(i, &mut buf).expect("read");
        }
        store_best = store_best.min(t.elapsed().as_nanos() as f64 / pages.len() as f64);
        let t = std::time::Instant::now();
        for &(o, n) in &at {
            Codec::Lz4
                .decompress(&flat[o..o + n], &mut buf)
                .expect("decompress");
        }
        codec_best = codec_best.min(t.elapsed().as_nanos() as f64 / at.len() as f64);
    }
    println!(
        "{} pages: PageStore::read {store_best:.0} ns a page, the codec alone {codec_best:.0} ns: {:.3}x its pace",
        pages.len(),
        codec_best / store_best
    );
}
