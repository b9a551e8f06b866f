//! Everything that touches wgpu: adapter and device set-up ([`context`]), the plan executor
//! ([`runner`]).

pub mod context;
pub mod runner;

pub use context::{AdapterCaps, AdapterSelection, CoopLayout, Gpu};
