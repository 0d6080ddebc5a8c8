//! A compressed cache of pages: a `PageStore` keeps 4 KiB pages compressed
//! in memory, numbered like blocks of a disk (zram in-process).
//!
//!     cargo run -p zsmem --example page_cache

use zsmem::{Codec, PageStore, PageStoreConfig};

const PAGE: usize = 4096;

/// A page of source-like text that compresses about as well as real code.
fn text_page(n: usize) -> Vec<u8> {
    let mut page = Vec::with_capacity(PAGE);
    let mut line = 0;
    while page.len() < PAGE {
        let text = format!(
            "fn f{n}_{line}(x: u32) -> u32 {{ x * {} + {} }}\n",
            n % 97,
            line * 7
        );
        page.extend_from_slice(text.as_bytes());
        line += 1;
    }
    page.truncate(PAGE);
    page
}

fn main() -> Result<(), zsmem::Error> {
    let store = PageStore::new(PageStoreConfig {
        slots: 1024, // a 4 MiB "disk"
        codec: Codec::Lz4,
        ..Default::default()
    })?;

    // Cache 512 pages: text, one all-zero page and one of repeated words
    // (same-filled pages keep only the word).
    for i in 0..510 {
        store.write(i, &text_page(i))?;
    }
    store.write(510, &[0u8; PAGE])?;
    store.write(511, &0xdead_beef_u32.to_le_bytes().repeat(PAGE / 4))?;

    // Read every page back and check it.
    let mut buf = vec![0u8; PAGE];
    for i in 0..510 {
        store.read(i, &mut buf)?;
        assert_eq!(buf, text_page(i), "slot {i}");
    }
    store.read(700, &mut buf)?; // never written: zeros
    assert!(buf.iter().all(|&b| b == 0));

    // Evict half the cache, then give freed memory back.
    store.discard(0, 255)?;
    store.compact();

    let mm = store.mm_stat();
    println!(
        "{} pages cached ({} KiB) in {} KiB of pool pages; {} same-filled",
        mm.orig_data_size / PAGE as u64,
        mm.orig_data_size / 1024,
        mm.mem_used_total / 1024,
        mm.same_pages,
    );
    println!(
        "compression ratio {:.1}",
        mm.orig_data_size as f64 / mm.compr_data_size.max(1) as f64
    );
    store.check_invariants()?;
    Ok(())
}
