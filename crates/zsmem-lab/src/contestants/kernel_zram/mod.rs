//! The kernel's own zram as a live benchmark contestant (being split up: see io.rs).

mod io;

pub use io::*;
