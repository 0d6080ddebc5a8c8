//! A store or pool gives back every heap byte it allocated when it is
//! dropped: after a warm-up cycle (thread-locals, the returner's own
//! allocations), further create/fill/drop cycles leave the live heap where
//! it was, for both placements. Pages go back at once (no returner thread
//! allocating at its own moments), so the count is exact. Counted by a global allocator that wraps
//! the system's, so the figure is the library's own allocations, not
//! malloc's caching. Alone in its own test binary: the count is global.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[cfg(not(miri))]
#[test]
fn dropping_a_store_gives_back_every_heap_byte() {
    use zsmem::{PageReturn, PageStore, PageStoreConfig, PoolConfig};

    let cycle = |pool: PoolConfig| {
        let pool = PoolConfig {
            page_return: PageReturn::Immediate,
            ..pool
        };
        let store = PageStore::new(PageStoreConfig {
            slots: 8192,
            pool,
            ..Default::default()
        })
        .unwrap();
        let mut page = vec![0u8; 4096];
        for i in 0..8192usize {
            for (j, b) in page.iter_mut().enumerate() {
                *b = b'A' + ((i * 31 + j / 7 * (i % 13)) & 0x3f) as u8;
            }
            store.write(i, &page).unwrap();
        }
        for i in (0..8192).step_by(3) {
            store.discard(i, 1).unwrap();
        }
        store.compact();
        drop(store);
    };
    for (name, pool) in [
        ("log placement", PoolConfig::log()),
        ("size classes", PoolConfig::default()),
    ] {
        // The first cycle's lasting allocations: this thread's codec
        // scratch and buffers.
        cycle(pool.clone());
        let settled = LIVE.load(Ordering::Relaxed);
        for _ in 0..5 {
            cycle(pool.clone());
        }
        let after = LIVE.load(Ordering::Relaxed);
        assert!(
            after <= settled,
            "{name}: {} bytes more live on the heap after 5 more cycles ({settled} -> {after})",
            after - settled
        );
    }
}
