//! Everything that touches wgpu: adapter and device set-up ([`context`]), the plan executor
//! ([`runner`]).

pub mod bf16;
pub mod cm2;
pub mod context;
pub mod open;
pub mod runner;
mod vk_features;

pub use bf16::Bf16Matrix;
pub use cm2::Cm2;
pub use context::{AdapterCaps, AdapterSelection, CoopLayout, Gpu};
