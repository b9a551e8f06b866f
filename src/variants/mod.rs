//! The variants: each one is a plan builder (this folder) plus its WGSL kernels (`shaders/`).
//!
//! | variant           | host code      | kernels                                                    |
//! |-------------------|----------------|------------------------------------------------------------|
//! | `unfused`         | `unfused.rs`   | qk.wgsl, scale.wgsl, mask.wgsl (`copy`, `in_place`), softmax.wgsl, pv.wgsl |
//! | `unfused-inplace` | `unfused.rs`   | the same with mask.wgsl `in_place`                         |
//! | `tiled`           | `tiled.rs`     | tiled_rt.wgsl + tiled_rt_wg.wgsl (D <= 64), else tiled.wgsl |
//! | `tiled-subgroup`  | `tiled.rs`     | tiled_rt.wgsl + tiled_rt_sg.wgsl                           |

use crate::gpu::AdapterCaps;
use crate::plan::Plan;
use crate::problem::Problem;
use crate::{Error, Result};

pub mod tiled;
pub mod unfused;

/// Embeds `shaders/<file>` behind the shared prelude `shaders/common.wgsl`.
/// `shader!("a.wgsl", "b.wgsl")` appends `shaders/b.wgsl` (functions `a.wgsl` calls) and names the
/// module `a.wgsl+b.wgsl`.
macro_rules! shader {
    ($file:literal) => {
        $crate::plan::Shader {
            file: $file,
            source: concat!(
                include_str!("../../shaders/common.wgsl"),
                include_str!(concat!("../../shaders/", $file))
            ),
        }
    };
    ($file:literal, $part:literal) => {
        $crate::plan::Shader {
            file: concat!($file, "+", $part),
            source: concat!(
                include_str!("../../shaders/common.wgsl"),
                include_str!(concat!("../../shaders/", $file)),
                include_str!(concat!("../../shaders/", $part))
            ),
        }
    };
}
pub(crate) use shader;

/// A registered variant: its name, what it is, and its plan builder. The builder returns the
/// concrete reason when the variant cannot run this problem on this adapter.
pub struct Variant {
    pub name: &'static str,
    pub summary: &'static str,
    /// Device features its kernels use (requested when the adapter has them; the plan builder
    /// gives the reason when they are missing).
    pub needs: wgpu::Features,
    pub build: fn(&Problem, &AdapterCaps) -> std::result::Result<Plan, String>,
}

pub const VARIANTS: &[Variant] = &[
    Variant {
        name: "unfused",
        summary: "5 steps, 6 dispatches: qk, scale, copy + mask (an out-of-place masked_fill), softmax, pv",
        needs: wgpu::Features::empty(),
        build: unfused::build_out_of_place,
    },
    Variant {
        name: "unfused-inplace",
        summary: "the same 5 steps with masked_fill_ in place: 5 dispatches, one N x N buffer fewer",
        needs: wgpu::Features::empty(),
        build: unfused::build_in_place,
    },
    Variant {
        name: "tiled",
        summary: "one fused dispatch, FlashAttention-2 style online softmax; N x N never in memory",
        needs: wgpu::Features::empty(),
        build: tiled::build,
    },
    Variant {
        name: "tiled-subgroup",
        summary: "the register-tiled fused kernel with row max/sum by subgroup shuffles: one barrier fewer per key block",
        needs: wgpu::Features::SUBGROUP,
        build: tiled::build_subgroup,
    },
];

/// Union of the features the named variants use.
pub fn features_for(names: &[&str]) -> wgpu::Features {
    VARIANTS
        .iter()
        .filter(|v| names.contains(&v.name))
        .fold(wgpu::Features::empty(), |f, v| f | v.needs)
}

pub fn names() -> Vec<&'static str> {
    VARIANTS.iter().map(|v| v.name).collect()
}

pub fn find(name: &str) -> Result<&'static Variant> {
    VARIANTS
        .iter()
        .find(|v| v.name == name)
        .ok_or_else(|| Error::UnknownVariant(name.to_string(), names().join(", ")))
}

/// Builds the plan of `name`, or the reason it cannot run.
pub fn plan(name: &str, p: &Problem, caps: &AdapterCaps) -> Result<Plan> {
    let v = find(name)?;
    let plan = (v.build)(p, caps).map_err(|reason| Error::Incompatible {
        variant: name.to_string(),
        reason,
    })?;
    plan.check().map_err(|reason| Error::Incompatible {
        variant: name.to_string(),
        reason: format!("internal plan error: {reason}"),
    })?;
    Ok(plan)
}

/// Shared check: a buffer of `bytes` must fit one storage binding and one buffer on this adapter.
pub(crate) fn check_binding(
    what: &str,
    bytes: u64,
    caps: &AdapterCaps,
) -> std::result::Result<(), String> {
    if bytes > caps.max_storage_binding {
        return Err(format!(
            "{what} needs {bytes} bytes in one storage binding, above this adapter's \
             max_storage_buffer_binding_size of {}",
            caps.max_storage_binding
        ));
    }
    if bytes > caps.max_buffer {
        return Err(format!(
            "{what} needs a {bytes}-byte buffer, above this adapter's max_buffer_size of {}",
            caps.max_buffer
        ));
    }
    Ok(())
}

/// Shared check: a grid dimension must not exceed the adapter's limit.
pub(crate) fn check_grid(
    what: &str,
    groups: u64,
    caps: &AdapterCaps,
) -> std::result::Result<u32, String> {
    if groups > caps.max_workgroups_per_dimension as u64 {
        return Err(format!(
            "{what} needs {groups} workgroups in one dimension, above this adapter's \
             max_compute_workgroups_per_dimension of {}",
            caps.max_workgroups_per_dimension
        ));
    }
    Ok(groups as u32)
}
