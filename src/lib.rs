//! attn-wgpu: attention in WGSL compute shaders on any wgpu adapter.
//!
//! The whole tool turns on one idea (see `plan`): a *variant* declares the dispatches it needs as a
//! [`plan::Plan`]; one runner ([`gpu::runner`]) executes any plan with a GPU timestamp around every
//! dispatch; the reports read the plan and the measurements side by side.

pub mod browser;
pub mod budget;
pub mod device;
pub mod dropout;
pub mod error;
pub mod explain;
pub mod gpu;
pub mod infile;
pub mod kernels;
pub mod mask;
pub mod npy;
pub mod outfile;
pub mod plan;
pub mod probe;
pub mod problem;
pub mod reference;
pub mod report;
pub mod run;
pub mod sweep;
pub mod text;
pub mod tile;
pub mod tune;
pub mod validate;
pub mod variants;

pub use error::{Error, Result};
