//! The size-trace parser on arbitrary input: never a panic; what it accepts
//! is a consistent trace that prints back to text parsing to the same trace,
//! and replays on a pool without error.
//!
//! Run: `cd fuzz && cargo +nightly fuzz run trace_parse -- -max_total_time=60`

#![no_main]

use libfuzzer_sys::fuzz_target;
use zsmem_lab::objects::PoolObjects;
use zsmem_lab::trace::{Trace, replay};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Trace::parse(text, "fuzz") {
        Ok(t) => {
            let mut out = Vec::new();
            t.write_to(&mut out).unwrap();
            let again = Trace::parse(std::str::from_utf8(&out).unwrap(), "again").unwrap();
            assert_eq!(again, t);
            if t.ops.len() <= 256 {
                let mut pool = PoolObjects::new("zsmem", zsmem::PoolConfig::default()).unwrap();
                replay(&t, &mut pool, 0).unwrap();
            }
        }
        Err(e) => assert!(e.line >= 1 && !e.message.is_empty()),
    }
});
