//! The variants: each one is a plan builder (this folder) plus its WGSL kernels (`shaders/`).
//! This file is the **registry**: the one place variants and their requirements are declared.
//!
//! | variant           | host code      | kernels                                                    |
//! |-------------------|----------------|------------------------------------------------------------|
//! | `unfused`         | `unfused.rs`   | qk.wgsl, scale.wgsl, mask.wgsl (`copy`, `in_place`), softmax.wgsl, pv.wgsl |
//! | `unfused-inplace` | `unfused.rs`   | the same with mask.wgsl `in_place`                         |
//! | `unfused-coop`    | `unfused.rs`   | unfused-inplace's with qk and pv from gemm_coop_vk.comp (GLSL → SPIR-V, Vulkan passthrough; f16, D 64/128/256) |
//! | `unfused-inplace-exp` | `unfused.rs` | the same with softmax as in-place math_rows.wgsl steps (`row_max`, `exp_sum`, `normalize_rows`) |
//! | `tiled`           | `tiled.rs`     | tiled_v2.wgsl (tile rt2, D <= 64), tiled_rt.wgsl + tiled_rt_wg.wgsl (tile rt, D <= 256), else tiled.wgsl |
//! | `tiled-coop`      | `tiled.rs`     | tiled_coop.wgsl (f16, cooperative matrices, D <= 256)      |
//! | `tiled-coop-vk`   | `tiled.rs`     | tiled_coop_vk.comp (GLSL → SPIR-V, Vulkan passthrough; f16 and bf16, D = 64/128/256, forward and backward) |
//! | `tiled-coop-cm2`  | `tiled.rs`     | tiled_cm2.comp (GLSL with GL_NV_cooperative_matrix2 → SPIR-V, Vulkan passthrough on a device opened with VK_NV_cooperative_matrix2; f16 and bf16, D = 64/128/256); tiled_coop_vk_bwd.comp's backward |
//! | `math`            | `math.rs`      | convert.wgsl, math_mask.wgsl, qk.wgsl, math_rows.wgsl, pv.wgsl, narrow.wgsl |
//!
//! The kernels these plans are made of are units of their own: `src/kernels/<name>.rs` beside
//! `shaders/<name>.wgsl` (see `kernels`). A variant is a value ([`VariantId`]); its name is
//! compared only here and in the CLI's parser.
//!
//! # Training (`--backward`)
//! With [`Problem::backward`] a builder appends the variant's backward (its kernels:
//! softmax_bwd.wgsl, mask_bwd.wgsl, pv.wgsl `TRANS` and qk.wgsl for the materialized variants;
//! tiled_bwd_*.wgsl for `tiled`), declares the tensors each backward step
//! reads as saved ([`crate::plan::Saved`]) and names the gradient buffers; [`plan`] refuses a
//! backward that would read an overwritten saved tensor (the in-place hazard) with the reason.

use serde::Serialize;

use crate::gpu::AdapterCaps;
use crate::mask::Semantics;
use crate::plan::Plan;
use crate::problem::{DType, Problem};
use crate::{Error, Result};

pub mod math;
pub mod tiled;
pub mod unfused;

pub use crate::kernels::Storage;

/// The registered variants, as values. Their names live in [`VARIANTS`] only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VariantId {
    Unfused,
    UnfusedInplace,
    UnfusedInplaceExp,
    UnfusedCoop,
    Math,
    Tiled,
    TiledCoop,
    TiledCoopVk,
    TiledCoopCm2,
    SplitKv,
}

impl VariantId {
    /// The registry entry.
    pub fn variant(self) -> &'static Variant {
        VARIANTS
            .iter()
            .find(|v| v.id == self)
            .expect("every VariantId is registered (tests/plans.rs checks it)")
    }
    pub fn name(self) -> &'static str {
        self.variant().name
    }
    /// The variant named `name`, if one is registered.
    pub fn of(name: &str) -> Option<VariantId> {
        VARIANTS.iter().find(|v| v.name == name).map(|v| v.id)
    }
}

/// The textbook variants that materialize N x N in device memory: what `explain` and `sweep`
/// compare the fused `tiled` against.
pub const MATERIALIZED: [VariantId; 2] = [VariantId::Unfused, VariantId::UnfusedInplace];

/// The variants whose plan honours a tile choice (`tiles: true`): what `tune` searches and
/// `--tile` / a tune cache entry applies to.
pub fn tile_variants() -> Vec<VariantId> {
    VARIANTS.iter().filter(|v| v.tiles).map(|v| v.id).collect()
}

impl std::fmt::Display for VariantId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for VariantId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// What a variant needs, checked before its plan builder runs (the builder then checks sizes and
/// limits). Each unmet requirement is a concrete reason.
#[derive(Debug, Clone, Copy)]
pub struct Requirements {
    /// Storage dtypes it implements.
    pub dtypes: &'static [DType],
    /// It stores f16 as WGSL `f16` and so needs SHADER_F16 for `--dtype f16`.
    pub f16_needs_shader_f16: bool,
    /// bf16 outputs are written as whole u32 pairs within a row: D must be even.
    pub bf16_needs_even_d: bool,
    /// Explicit masks / key padding supported.
    pub masks: bool,
}

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
    .union(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
    .union(wgpu::Features::SHADER_FLOAT32_ATOMIC);

/// Which of [`SHADER_FEATURES`] each backend of wgpu 30 can offer (wgpu-hal 30's
/// vulkan/metal/dx12/gles `adapter.rs`): GL offers none (no f16, no subgroups, no cooperative
/// matrix); DX12 has no cooperative matrix and no f32 atomics (SHADER_FLOAT32_ATOMIC: Vulkan with
/// VK_EXT_shader_atomic_float, Metal). The backends a variant claims follow from this table
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

/// A registered variant: its name, what it is, its requirements and needs, its plan builder, and
/// its place in `auto`'s preference order. The builder returns the concrete reason when the
/// variant cannot run this problem on this adapter.
pub struct Variant {
    pub id: VariantId,
    pub name: &'static str,
    pub summary: &'static str,
    pub requires: Requirements,
    /// What it returns for a row in which no key takes part.
    pub fully_masked: Semantics,
    /// `auto` picks the compatible variant with the lowest rank (see [`auto`]).
    pub auto_rank: u32,
    pub build: fn(&Problem, &AdapterCaps) -> std::result::Result<Plan, String>,
    /// Device features its kernels use, of [`SHADER_FEATURES`] (empty: core WGSL only); requested
    /// when the adapter has them, and the reason when it does not.
    pub needs: wgpu::Features,
    /// Backends it does not claim although they offer every capability in `requires`, each with
    /// the reason (e.g. a driver bug). Usually empty.
    pub excludes: &'static [(Backend, &'static str)],
    /// Optional device features: requested when the adapter has them (with `needs`), and used by
    /// the plan builder when present (`tiled` takes its v2 kernel with SUBGROUP, else the first
    /// register-tiled one). [`Variant::plan_needs`] says what one plan uses.
    pub wants: wgpu::Features,
    /// Its plan honours a tile choice ([`Problem::tile`]: `--tile`, a `tune` cache entry): the
    /// variants `tune` searches.
    pub tiles: bool,
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

    /// The device features a plan of this variant for `p` needs: its static [`Variant::needs`],
    /// plus `SHADER_F16` for `--dtype f16` when it stores f16 as WGSL `f16`
    /// ([`Requirements::f16_needs_shader_f16`]). An f16 plan of such a variant is therefore refused
    /// on an adapter without SHADER_F16 (every GL adapter), while `math`, which packs f16 through
    /// `pack2x16float`, needs nothing more for f16. tests/translate.rs validates every plan's
    /// shaders with exactly these features.
    pub fn effective_needs(&self, p: &Problem) -> wgpu::Features {
        let mut f = self.needs;
        if p.dtype == DType::F16 && self.requires.f16_needs_shader_f16 {
            f |= wgpu::Features::SHADER_F16;
        }
        f
    }

    /// The device features one plan of this variant for `p` on an adapter with `caps` uses: its
    /// [`Variant::effective_needs`] plus those of its [`Variant::wants`] the adapter offers.
    pub fn plan_needs(&self, p: &Problem, caps: &AdapterCaps) -> wgpu::Features {
        self.effective_needs(p) | (self.wants & caps.shader_features())
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

const ALL_DTYPES: &[DType] = &[DType::F32, DType::F16, DType::BF16];

/// The requirements of the kernels that keep Q/K/V/O in the run's dtype (dtype preludes): every
/// dtype, WGSL `f16` for f16 (SHADER_F16), bf16 pairs within a row (even D), masks.
const STORED_IN_DTYPE: Requirements = Requirements {
    dtypes: ALL_DTYPES,
    f16_needs_shader_f16: true,
    bf16_needs_even_d: true,
    masks: true,
};

/// The requirements of the WGSL cooperative-matrix kernels (`tiled-coop`): f16 Q/K/V/O as WGSL
/// `f16` (SHADER_F16), masks.
const F16_MATRICES: Requirements = Requirements {
    dtypes: &[DType::F16],
    f16_needs_shader_f16: true,
    bf16_needs_even_d: true,
    masks: true,
};

/// The requirements of `tiled-coop-vk` and `unfused-coop`: f16, or bf16 where the device has bf16
/// cooperative matrices (their builders check that, kernels/tiled_coop_vk.rs), masks.
const F16_BF16_MATRICES: Requirements = Requirements {
    dtypes: &[DType::F16, DType::BF16],
    f16_needs_shader_f16: true,
    bf16_needs_even_d: true,
    masks: true,
};

/// Why `tiled-coop-vk` is claimed on Vulkan only.
const VK_ONLY: &str =
    "its kernel is SPIR-V compiled from GLSL at build time (shaders/tiled_coop_vk.comp), \
    handed to the driver through PASSTHROUGH_SHADERS: Vulkan only";

/// Why `tiled-coop-cm2` is claimed on Vulkan only.
const VK_ONLY_CM2: &str =
    "its kernel is SPIR-V compiled from GLSL at build time (shaders/tiled_cm2.comp) on \
    VK_NV_cooperative_matrix2, handed to the driver through PASSTHROUGH_SHADERS: Vulkan only";

/// Why `unfused-coop` is claimed on Vulkan only.
const VK_ONLY_GEMM: &str =
    "its two products are SPIR-V compiled from GLSL at build time (shaders/gemm_coop_vk.comp), \
    handed to the driver through PASSTHROUGH_SHADERS: Vulkan only";

pub const VARIANTS: &[Variant] = &[
    Variant {
        id: VariantId::Unfused,
        name: "unfused",
        summary: "5 steps, 6 dispatches: qk, scale, copy + mask (an out-of-place masked_fill), softmax, pv",
        needs: wgpu::Features::empty(),
        requires: STORED_IN_DTYPE,
        fully_masked: Semantics::Nan,
        auto_rank: 30,
        build: unfused::build_out_of_place,
        excludes: &[],
        wants: wgpu::Features::empty(),
        tiles: false,
    },
    Variant {
        id: VariantId::UnfusedInplace,
        name: "unfused-inplace",
        summary: "the same 5 steps with masked_fill_ in place: 5 dispatches, one N x N buffer fewer",
        needs: wgpu::Features::empty(),
        requires: STORED_IN_DTYPE,
        fully_masked: Semantics::Nan,
        auto_rank: 20,
        build: unfused::build_in_place,
        excludes: &[],
        wants: wgpu::Features::empty(),
        tiles: false,
    },
    Variant {
        id: VariantId::UnfusedCoop,
        name: "unfused-coop",
        summary: "unfused-inplace with S = Q·Kᵀ and O = P·V on cooperative matrices (tensor cores): the materialized path on the fused kernels' matrix units, 5 dispatches; Vulkan, f16 and bf16 (bf16 where the driver has bf16 cooperative matrices), D = 64/128/256",
        needs: wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX.union(wgpu::Features::SUBGROUP),
        requires: F16_BF16_MATRICES,
        fully_masked: Semantics::Nan,
        // Before the scalar materialized variants, after every fused one.
        auto_rank: 19,
        build: unfused::build_coop,
        excludes: &[
            (Backend::Metal, VK_ONLY_GEMM),
            (Backend::Dx12, VK_ONLY_GEMM),
            (Backend::Gl, VK_ONLY_GEMM),
        ],
        // Requested with the variant; the builder refuses it without (kernels/tiled_coop_vk.rs).
        // SHADER_F16 for bf16 too, as tiled-coop-vk's.
        wants: wgpu::Features::PASSTHROUGH_SHADERS.union(wgpu::Features::SHADER_F16),
        tiles: false,
    },
    Variant {
        id: VariantId::UnfusedInplaceExp,
        name: "unfused-inplace-exp",
        summary: "unfused-inplace with softmax as in-place steps (row max, S.exp_(), S.div_(sum)): 7 dispatches; its backward is refused (exp_'s saved output is overwritten by div_)",
        needs: wgpu::Features::empty(),
        requires: STORED_IN_DTYPE,
        fully_masked: Semantics::Nan,
        auto_rank: 35,
        build: unfused::build_in_place_exp,
        excludes: &[],
        wants: wgpu::Features::empty(),
        tiles: false,
    },
    Variant {
        id: VariantId::Math,
        name: "math",
        summary: "SDPA's MATH backend: f32 conversions, mask rebuilt per call, sqrt(scale) on q and k, safe softmax; ~15 dispatches",
        needs: wgpu::Features::empty(),
        requires: Requirements {
            dtypes: ALL_DTYPES,
            f16_needs_shader_f16: false,
            bf16_needs_even_d: false,
            masks: true,
        },
        fully_masked: Semantics::Zero,
        auto_rank: 40,
        build: math::build,
        excludes: &[],
        wants: wgpu::Features::empty(),
        tiles: false,
    },
    Variant {
        id: VariantId::Tiled,
        name: "tiled",
        summary: "one fused dispatch, FlashAttention-2 style online softmax; N x N never in memory",
        needs: wgpu::Features::empty(),
        requires: STORED_IN_DTYPE,
        fully_masked: Semantics::Zero,
        auto_rank: 10,
        build: tiled::build,
        excludes: &[],
        // The v2 kernel (tiled_v2.wgsl) exchanges P by subgroup shuffles; without SUBGROUP (GL)
        // the first register-tiled kernel runs.
        wants: wgpu::Features::SUBGROUP.union(wgpu::Features::SHADER_FLOAT32_ATOMIC),
        tiles: true,
    },
    Variant {
        id: VariantId::TiledCoop,
        name: "tiled-coop",
        summary: "f16 fused attention on cooperative matrices (tensor cores): Q·Kᵀ and P·V as 16x16x16 products with f32 accumulators",
        needs: wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX
            .union(wgpu::Features::SUBGROUP)
            .union(wgpu::Features::SUBGROUP_BARRIER),
        requires: F16_MATRICES,
        fully_masked: Semantics::Zero,
        // First where it runs: on the H200 it passes every validation run and is 5x faster than
        // `tiled` at f16 (results/EXPERIMENTS.md, v5).
        auto_rank: 5,
        build: tiled::build_coop,
        excludes: &[],
        wants: wgpu::Features::empty(),
        tiles: false,
    },
    Variant {
        id: VariantId::TiledCoopVk,
        name: "tiled-coop-vk",
        summary: "Vulkan only: tiled-coop with the softmax in registers (S and P never in workgroup memory), a GLSL kernel (GL_KHR_cooperative_matrix) compiled to SPIR-V at build time and run through PASSTHROUGH_SHADERS; f16 and bf16 (bf16 where the driver has bf16 cooperative matrices), D = 64/128/256 forward and backward, masks, dropout",
        needs: wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX.union(wgpu::Features::SUBGROUP),
        requires: F16_BF16_MATRICES,
        fully_masked: Semantics::Zero,
        // Before `tiled-coop` where both run: on the H200 its forward is 1.6x faster at N = 1024
        // and its backward 2x faster at N = 4096 (results/EXPERIMENTS.md, v36-coop-vk-layout).
        auto_rank: 4,
        build: tiled::build_coop_vk,
        excludes: &[
            (Backend::Metal, VK_ONLY),
            (Backend::Dx12, VK_ONLY),
            (Backend::Gl, VK_ONLY),
        ],
        // Requested with the variant; the builder refuses it without (kernels/tiled_coop_vk.rs).
        // SHADER_F16 for bf16 too: wgpu enables 16-bit storage with it, which the bf16 builds'
        // buffers need as the f16 ones do.
        wants: wgpu::Features::PASSTHROUGH_SHADERS.union(wgpu::Features::SHADER_F16),
        tiles: false,
    },
    Variant {
        id: VariantId::TiledCoopCm2,
        name: "tiled-coop-cm2",
        summary: "Vulkan only, on VK_NV_cooperative_matrix2 (NVIDIA): the fused forward on workgroup-scope matrices — Q, K and V loaded by tensor layouts, row maxima and sums by matrix reductions, the softmax by per-element functions, no element layout assumed; f16 and bf16, D = 64/128/256, masks, dropout; tiled-coop-vk's backward in training",
        needs: wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX.union(wgpu::Features::SUBGROUP),
        requires: F16_BF16_MATRICES,
        fully_masked: Semantics::Zero,
        // After tiled-coop-vk until measured faster than it.
        auto_rank: 6,
        build: tiled::build_coop_cm2,
        excludes: &[
            (Backend::Metal, VK_ONLY_CM2),
            (Backend::Dx12, VK_ONLY_CM2),
            (Backend::Gl, VK_ONLY_CM2),
        ],
        wants: wgpu::Features::PASSTHROUGH_SHADERS.union(wgpu::Features::SHADER_F16),
        tiles: false,
    },
    Variant {
        id: VariantId::SplitKv,
        name: "split-kv",
        summary: "decode (N <= 16, many keys): flash-decoding, a workgroup per slice of the keys per query row, then a combine dispatch",
        needs: wgpu::Features::SUBGROUP,
        requires: STORED_IN_DTYPE,
        fully_masked: Semantics::Zero,
        // First where it applies: its builder takes only the decode regime (N <= 16 and keys
        // for several slices), where one workgroup per block of query rows starves the GPU.
        auto_rank: 3,
        build: tiled::build_split_kv,
        excludes: &[],
        wants: wgpu::Features::empty(),
        tiles: false,
    },
];

/// Union of the features the named variants use or want (requested where the adapter has them).
pub fn features_for(names: &[&str]) -> wgpu::Features {
    VARIANTS
        .iter()
        .filter(|v| names.contains(&v.name))
        .fold(wgpu::Features::empty(), |f, v| f | v.needs | v.wants)
}

pub fn names() -> Vec<&'static str> {
    VARIANTS.iter().map(|v| v.name).collect()
}

pub fn find(name: &str) -> Result<&'static Variant> {
    VARIANTS.iter().find(|v| v.name == name).ok_or_else(|| {
        let mut known = names().join(", ");
        if let Some((_, why)) = RETIRED.iter().find(|(n, _)| *n == name) {
            known = format!("{known}; `{name}` was retired: {why}");
        }
        Error::UnknownVariant(name.to_string(), known)
    })
}

/// Variants that were removed, with the measured reason: a user (or a script) that names one
/// is told why and what replaces it.
pub const RETIRED: &[(&str, &str)] = &[(
    "tiled-subgroup",
    "`tiled` is 3.4-4.5x faster at every head size (H100, B8 H16 N1024 causal bf16, \
     results/h100: 802.3 vs 3417.5 us at D64, 2151.1 vs 7299.1 at D128, 5023.6 vs 22648.6 at \
     D256), and its rt2/rt3 tiles are the family's subgroup branch (row reductions and P by \
     subgroup shuffles); retired 2026-12-06",
)];

/// Checks a variant's declared requirements against the problem and the adapter.
pub fn check_requirements(
    v: &Variant,
    p: &Problem,
    caps: &AdapterCaps,
) -> std::result::Result<(), String> {
    let r = &v.requires;
    if !r.dtypes.contains(&p.dtype) {
        return Err(format!("dtype {} is not implemented", p.dtype.name()));
    }
    // The static needs were checked by `check_adapter`; what the dtype adds is checked here.
    if (v.effective_needs(p) - v.needs).contains(wgpu::Features::SHADER_F16) && !caps.f16 {
        return Err(format!(
            "dtype f16 needs the SHADER_F16 feature, which this {} adapter lacks",
            caps.backend
        ));
    }
    if p.dtype == DType::BF16 && r.bf16_needs_even_d && p.head_dim % 2 == 1 {
        return Err(format!(
            "bf16 outputs are written as u32 pairs within a row, so D must be even (D={})",
            p.head_dim
        ));
    }
    if p.mask.bias.is_some() && !r.masks {
        return Err("explicit masks / key padding are not supported".into());
    }
    Ok(())
}

/// Builds the plan of `name`, or the reason it cannot run.
pub fn plan(name: &str, p: &Problem, caps: &AdapterCaps) -> Result<Plan> {
    let v = find(name)?;
    let incompatible = |reason: String| Error::Incompatible {
        variant: name.to_string(),
        reason,
    };
    v.check_adapter(caps).map_err(incompatible)?;
    check_requirements(v, p, caps).map_err(incompatible)?;
    let mut plan = (v.build)(p, caps).map_err(incompatible)?;
    plan.variant = v.name.to_string();
    apply_overrides(&mut plan, &p.overrides).map_err(incompatible)?;
    if p.backward && plan.grads.is_empty() {
        return Err(incompatible("it has no backward (training) plan".into()));
    }
    // The in-place hazard is a property of the variant in training, not a builder bug.
    plan.check_saved()
        .map_err(|h| incompatible(format!("training: {h}")))?;
    plan.check()
        .map_err(|reason| incompatible(format!("internal plan error: {reason}")))?;
    // Where the driver leaves loops silently after a number of iterations (Mesa's llvmpipe), a
    // dispatch that would run more computes a wrong answer: refused, naming it and the limit.
    if let Some(cap) = caps.max_loop_iterations {
        if let Some(d) = plan.dispatches.iter().find(|d| d.loop_iters > cap) {
            return Err(incompatible(format!(
                "dispatch `{}` would run about {} loop iterations in one invocation at M={} \
                 keys and N={} rows, and this adapter (Mesa's llvmpipe) leaves every loop after \
                 {cap}, which would compute a wrong result (docs/backends.md); fewer keys or \
                 rows, or a hardware adapter, run it",
                d.name, d.loop_iters, p.kv_seq, p.seq
            )));
        }
    }
    // Every buffer must fit one storage binding and one buffer on this adapter (K and V of
    // B·Hkv·M·D, the N x M buffers, the partials): one check for every plan, naming the buffer.
    // A buffer that every dispatch binds by ranges (split-KV's K and V when they exceed one
    // binding) needs each range to fit a binding, and the whole to fit a buffer.
    for b in &plan.buffers {
        let ranges: Vec<(u64, u64)> = plan
            .dispatches
            .iter()
            .flat_map(|d| &d.bindings)
            .filter(|x| x.buffer == b.name)
            .map(|x| x.range.unwrap_or((0, b.bytes)))
            .collect();
        let widest = ranges.iter().map(|r| r.1).max().unwrap_or(b.bytes);
        crate::kernels::check_binding(&format!("buffer `{}`", b.name), widest, caps)
            .map_err(incompatible)?;
        if b.bytes > caps.max_buffer {
            return Err(incompatible(format!(
                "buffer `{}` needs {} bytes, above this adapter's max_buffer_size of {}",
                b.name, b.bytes, caps.max_buffer
            )));
        }
    }
    Ok(plan)
}

/// Applies `--override NAME=VALUE`: sets that pipeline constant in every dispatch declaring it and
/// records it in the config. Refused when the tile configuration owns it, or when no dispatch
/// declares it (naming the knobs, [`crate::tile::KNOBS`], that do). The command line checks
/// names and values against the knobs where it parses them; this takes any declared constant.
fn apply_overrides(
    plan: &mut Plan,
    overrides: &[(String, f64)],
) -> std::result::Result<(), String> {
    for (name, value) in overrides {
        if crate::tile::TILE_OWNED.contains(&name.as_str()) {
            return Err(format!(
                "--override {name}: `{name}` is part of the tile configuration (it sizes the \
                 kernel's storage, grid or loops); choose it with --tile (the head dimension \
                 with --head-dim)"
            ));
        }
        let mut hits = 0;
        for d in &mut plan.dispatches {
            for (k, x) in &mut d.overrides {
                if k == name {
                    *x = *value;
                    hits += 1;
                }
            }
        }
        if hits == 0 {
            let mut known: Vec<&str> = plan
                .dispatches
                .iter()
                .flat_map(|d| d.overrides.iter().map(|(k, _)| k.as_str()))
                .filter(|k| crate::tile::KNOBS.iter().any(|x| x.name == *k))
                .collect();
            known.sort();
            known.dedup();
            return Err(format!(
                "--override {name}: no kernel of this plan declares `{name}` (they declare: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ));
        }
        match plan.config.iter_mut().find(|(k, _)| k == name) {
            Some(entry) => entry.1 = *value,
            None => plan.config.push((name.clone(), *value)),
        }
        plan.notes.push(format!(
            "pipeline constant {name} = {value} set by --override"
        ));
    }
    Ok(())
}

/// `auto`'s decision: the variant picked and, for every other one, why not.
#[derive(Debug, Clone, Serialize)]
pub struct AutoChoice {
    pub picked: String,
    pub rule: &'static str,
    /// (variant, reason) for every variant not picked.
    pub not_picked: Vec<(String, String)>,
}

/// The documented rule of `--variant auto`.
pub const AUTO_RULE: &str = "the compatible variant with the lowest auto_rank in the registry \
    (split-kv 3, which takes decode shapes only: N <= 16 with keys for several slices; \
    tiled-coop-vk 4 (Vulkan-only SPIR-V, f16, D = 64/128/256, on a driver with the layout it assumes) < \
    tiled-coop 5 < tiled-coop-cm2 6 (VK_NV_cooperative_matrix2) < tiled 10 < unfused-inplace 20 < unfused 30 < \
    unfused-inplace-exp 35 < math 40: \
    the tensor-core kernels first where it runs (f16, cooperative matrices); then fewest estimated \
    bytes moved first, since attention is memory-bound and the fused kernels never write N x N), \
    except `tiled` in training where its backward takes a tile below 32 x 32 (D > 128 on a 48 KiB \
    adapter, less on a smaller one: measured 2.90x slower than unfused-inplace on the H100, f32 \
    D128, results/h100 suite of 1abd4ec) or the chunked f32 32 x 32 tile (measured 1.8x: f32 D128 \
    12718.8 µs on the H100, results/EXPERIMENTS.md v46-ab, against unfused-inplace's 7037.2 in the \
    1abd4ec suite), which auto passes over; naming it still runs it";

/// Why `auto` passes over a compatible plan, if it does: a training plan whose fused backward
/// takes a small tile (config BWD_TILE below 32: `tiled`'s, the one plan that records it),
/// measured far slower than materializing, or the chunked 32 x 32 tile (BWD_CHUNKED), measured
/// 1.6x faster than the small tile but still slower than materializing.
fn passed_over(plan: &Plan) -> Option<String> {
    if plan.config.iter().any(|(k, _)| k == "BWD_CHUNKED") {
        return Some(
            "compatible, but its backward takes the chunked 32 x 32 tile (f32, D in two \
             chunks), measured 1.8x slower than unfused-inplace on the H100 (f32 D128: 12718.8 \
             µs, results/EXPERIMENTS.md v46-ab, against 7037.2 in results/h100's suite of \
             1abd4ec); `--variant tiled` runs it"
                .into(),
        );
    }
    let tile = plan.config.iter().find(|(k, _)| k == "BWD_TILE")?.1;
    (tile < 32.0).then(|| {
        format!(
            "compatible, but its backward takes the small {tile} x {tile} tile, measured 2.90x \
             slower than unfused-inplace on the H100 (f32 D128: 20408.4 vs 7037.2 µs, \
             results/h100's suite of 1abd4ec); `--variant tiled` runs it"
        )
    })
}

/// Picks the variant `auto` runs, with the reason for every other one. Errors (exit 4) only when
/// nothing is compatible, listing every reason.
pub fn auto(p: &Problem, caps: &AdapterCaps) -> Result<AutoChoice> {
    let mut ranked: Vec<&Variant> = VARIANTS.iter().collect();
    ranked.sort_by_key(|v| v.auto_rank);
    let mut picked: Option<&Variant> = None;
    let mut not_picked = Vec::new();
    for v in ranked {
        let planned = plan(v.name, p, caps);
        if let Some(why) = planned.as_ref().ok().and_then(passed_over) {
            not_picked.push((v.name.to_string(), why));
            continue;
        }
        match planned {
            Ok(_) if picked.is_none() => picked = Some(v),
            Ok(_) => not_picked.push((
                v.name.to_string(),
                format!(
                    "compatible, but ranked below `{}` (auto_rank {} > {})",
                    picked.map_or("", |x| x.name),
                    v.auto_rank,
                    picked.map_or(0, |x| x.auto_rank)
                ),
            )),
            Err(Error::Incompatible { reason, .. }) => {
                not_picked.push((v.name.to_string(), format!("incompatible: {reason}")))
            }
            Err(e) => return Err(e),
        }
    }
    match picked {
        Some(v) => Ok(AutoChoice {
            picked: v.name.to_string(),
            rule: AUTO_RULE,
            not_picked,
        }),
        None => Err(Error::Incompatible {
            variant: "auto".into(),
            reason: format!(
                "no variant can run this problem here: {}",
                not_picked
                    .iter()
                    .map(|(n, r)| format!("{n}: {r}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        }),
    }
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
