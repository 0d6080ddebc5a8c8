//! A self-contained HTML report of a side-by-side run (being split up: see plots.rs).

mod plots;

pub use plots::*;
