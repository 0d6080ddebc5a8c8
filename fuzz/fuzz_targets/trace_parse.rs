//! The size-trace parser on arbitrary input: never a panic; what it accepts
//! is a consistent trace that prints back to text parsing to the same trace,
//! and replays on a 4 KiB pool without error when its objects fit (and with
//! an error, never a panic, when they do not).
//!
//! Run: `cd fuzz && cargo +nightly fuzz run trace_parse -- -max_total_time=60`

#![no_main]

use libfuzzer_sys::fuzz_target;
use zsmem_lab::contestants::zsmem::PoolObjects;
use zsmem_lab::workloads::trace::{Trace, replay};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Trace::parse(text, "fuzz") {
        Ok(t) => {
            let mut out = Vec::new();
            t.write_to(&mut out).unwrap();
            let again = Trace::parse(std::str::from_utf8(&out).unwrap(), "again").unwrap();
            assert_eq!(again, t);
            if t.ops.len() <= 256 {
                // A 4 KiB pool refuses larger objects with an error; any
                // trace within its limit must replay cleanly.
                let fits = t.ops.iter().all(|op| match op {
                    zsmem_lab::workloads::trace::TraceOp::Alloc { size, .. } => *size <= 4096,
                    zsmem_lab::workloads::trace::TraceOp::Free { .. } => true,
                });
                let mut pool = PoolObjects::new("zsmem", zsmem::PoolConfig::default()).unwrap();
                let r = replay(&t, &mut pool, 0);
                assert_eq!(r.is_ok(), fits, "{r:?}");
            }
        }
        Err(e) => assert!(e.line >= 1 && !e.message.is_empty()),
    }
});
