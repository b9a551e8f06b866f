//! The variants: each one is a plan builder (this folder) plus its WGSL kernels (`shaders/`).
//!
//! | variant           | host code      | kernels                                                    |
//! |-------------------|----------------|------------------------------------------------------------|
//! | `unfused`         | `unfused.rs`   | qk.wgsl, scale.wgsl, mask.wgsl (`copy`, `in_place`), softmax.wgsl, pv.wgsl |
//! | `unfused-inplace` | `unfused.rs`   | the same with mask.wgsl `in_place`                         |
//! | `tiled`           | `tiled.rs`     | tiled.wgsl                                                 |

use serde::Serialize;

use crate::gpu::AdapterCaps;
use crate::plan::Plan;
use crate::problem::Problem;
use crate::{Error, Result};

pub mod tiled;
pub mod unfused;

/// Embeds `shaders/<file>` behind the shared prelude `shaders/common.wgsl`.
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
}
pub(crate) use shader;

/// A wgpu backend a variant can claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Vulkan,
    Metal,
    Dx12,
    Gl,
}

impl Backend {
    pub const ALL: [Backend; 4] = [Backend::Vulkan, Backend::Metal, Backend::Dx12, Backend::Gl];

    pub fn name(self) -> &'static str {
        match self {
            Backend::Vulkan => "vulkan",
            Backend::Metal => "metal",
            Backend::Dx12 => "dx12",
            Backend::Gl => "gl",
        }
    }

    /// The backend of an adapter (`AdapterCaps::backend`); `None` for "any" or "webgpu".
    pub fn from_name(name: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.name() == name)
    }

    /// The shader features wgpu 30 can offer on this backend at all (an adapter of the backend may
    /// still lack them: its own features decide at run time). See [`BACKEND_FEATURES`].
    pub fn features(self) -> wgpu::Features {
        BACKEND_FEATURES
            .iter()
            .find(|(b, _)| *b == self)
            .map_or(wgpu::Features::empty(), |(_, f)| *f)
    }
}

/// The shader features beyond core WebGPU that a variant may need and a backend may offer. Each
/// maps to one naga validator capability, so tests/translate.rs can prove that a variant's
/// declared `needs` match what its WGSL really uses.
pub const SHADER_FEATURES: wgpu::Features = wgpu::Features::SHADER_F16
    .union(wgpu::Features::SUBGROUP)
    .union(wgpu::Features::SUBGROUP_BARRIER)
    .union(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX);

/// Which of [`SHADER_FEATURES`] each backend of wgpu 30 can offer (wgpu-hal 30's
/// vulkan/metal/dx12/gles `adapter.rs`): GL offers none (no f16, no subgroups, no cooperative
/// matrix); DX12 has no cooperative matrix. The backends a variant claims follow from this table
/// and the variant's `needs`; tests/translate.rs checks every claim by translating for it.
pub const BACKEND_FEATURES: &[(Backend, wgpu::Features)] = &[
    (Backend::Vulkan, SHADER_FEATURES),
    (Backend::Metal, SHADER_FEATURES),
    (
        Backend::Dx12,
        wgpu::Features::SHADER_F16
            .union(wgpu::Features::SUBGROUP)
            .union(wgpu::Features::SUBGROUP_BARRIER),
    ),
    (Backend::Gl, wgpu::Features::empty()),
];

/// `SHADER_F16 | SUBGROUP` as "SHADER_F16 and SUBGROUP".
pub fn feature_names(f: wgpu::Features) -> String {
    let names: Vec<&str> = f.iter_names().map(|(n, _)| n).collect();
    names.join(" and ")
}

/// A registered variant: its name, what it is, its plan builder and what it needs. The builder
/// returns the concrete reason when the variant cannot run this problem on this adapter.
pub struct Variant {
    pub name: &'static str,
    pub summary: &'static str,
    pub build: fn(&Problem, &AdapterCaps) -> std::result::Result<Plan, String>,
    /// Device features its kernels use, of [`SHADER_FEATURES`] (empty: core WGSL only).
    pub needs: wgpu::Features,
    /// Backends it does not claim although they offer every capability in `requires`, each with
    /// the reason (e.g. a driver bug). Usually empty.
    pub excludes: &'static [(Backend, &'static str)],
}

impl Variant {
    /// Why this variant is not claimed on backend `b`, or `None` when it is.
    pub fn unsupported_on(&self, b: Backend) -> Option<String> {
        if let Some((_, why)) = self.excludes.iter().find(|(x, _)| *x == b) {
            return Some(format!(
                "`{}` is not claimed on {}: {why}",
                self.name,
                b.name()
            ));
        }
        let missing = self.needs - b.features();
        if missing.is_empty() {
            None
        } else {
            Some(format!(
                "`{}` needs {}, which wgpu's {} backend does not offer",
                self.name,
                feature_names(missing),
                b.name()
            ))
        }
    }

    /// The backends this variant claims: its shaders translate and validate for each of them.
    pub fn backends(&self) -> Vec<Backend> {
        Backend::ALL
            .into_iter()
            .filter(|b| self.unsupported_on(*b).is_none())
            .collect()
    }

    /// The adapter-level check every plan goes through before the builder: backend claimed and
    /// every needed feature offered by this adapter.
    pub fn check_adapter(&self, caps: &AdapterCaps) -> std::result::Result<(), String> {
        if let Some(b) = Backend::from_name(&caps.backend) {
            if let Some(why) = self.unsupported_on(b) {
                return Err(why);
            }
        }
        let missing = self.needs - caps.shader_features();
        if !missing.is_empty() {
            return Err(format!(
                "`{}` needs {}, which this adapter ({}) does not offer",
                self.name,
                feature_names(missing),
                caps.backend
            ));
        }
        Ok(())
    }
}

pub const VARIANTS: &[Variant] = &[
    Variant {
        name: "unfused",
        summary: "5 steps, 6 dispatches: qk, scale, copy + mask (an out-of-place masked_fill), softmax, pv",
        build: unfused::build_out_of_place,
        needs: wgpu::Features::empty(),
        excludes: &[],
    },
    Variant {
        name: "unfused-inplace",
        summary: "the same 5 steps with masked_fill_ in place: 5 dispatches, one N x N buffer fewer",
        build: unfused::build_in_place,
        needs: wgpu::Features::empty(),
        excludes: &[],
    },
    Variant {
        name: "tiled",
        summary: "one fused dispatch, FlashAttention-2 style online softmax; N x N never in memory",
        build: tiled::build,
        needs: wgpu::Features::empty(),
        excludes: &[],
    },
];

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
    v.check_adapter(caps)
        .map_err(|reason| Error::Incompatible {
            variant: name.to_string(),
            reason,
        })?;
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

/// For `attn-wgpu adapters`: every registered variant with `Ok(())` when it can run `p` on an
/// adapter with `caps`, or the reason it cannot (the same reason a run would give).
pub fn availability(
    p: &Problem,
    caps: &AdapterCaps,
) -> Vec<(&'static str, std::result::Result<(), String>)> {
    VARIANTS
        .iter()
        .map(|v| {
            let r = match plan(v.name, p, caps) {
                Ok(_) => Ok(()),
                Err(Error::Incompatible { reason, .. }) => Err(reason),
                Err(e) => Err(e.to_string()),
            };
            (v.name, r)
        })
        .collect()
}
