//! `zsmem classes`: the size-class simulator (being split up: see simulate.rs).

mod simulate;

pub use simulate::*;
