//! The variants: each one is a plan builder (this folder) plus its WGSL kernels (`shaders/`).
//! This file is the **registry**: the one place variants and their requirements are declared.
//!
//! | variant           | host code      | kernels                                                    |
//! |-------------------|----------------|------------------------------------------------------------|
//! | `unfused`         | `unfused.rs`   | qk.wgsl, scale.wgsl, mask.wgsl (`copy`, `in_place`), softmax.wgsl, pv.wgsl |
//! | `unfused-inplace` | `unfused.rs`   | the same with mask.wgsl `in_place`                         |
//! | `tiled`           | `tiled.rs`     | tiled_rt.wgsl + tiled_rt_wg.wgsl (D <= 64), else tiled.wgsl |
//! | `tiled-subgroup`  | `tiled.rs`     | tiled_rt.wgsl + tiled_rt_sg.wgsl                           |
//! | `tiled-coop`      | `tiled.rs`     | tiled_coop.wgsl (f16, cooperative matrices)                |
//! | `math`            | `math.rs`      | convert.wgsl, math_mask.wgsl, qk.wgsl, math_rows.wgsl, pv.wgsl, narrow.wgsl |
//!
//! # Shader composition
//! A kernel that touches Q/K/V/O or the mask is written once and composed (`kernel!`) from
//! `dtype_<storage>.wgsl` (element type, `load`, `pack`), `common.wgsl` (Params), a mask prelude
//! (`mask_none.wgsl`, or `mask_bias.wgsl` with its binding number filled in) and the kernel file.
//! Composed sources are built once per combination and kept for the life of the process, so the
//! runner's module and pipeline caches (keyed by source) see one module per combination.

use std::collections::HashMap;
use std::sync::Mutex;

use serde::Serialize;

use crate::gpu::AdapterCaps;
use crate::mask::Semantics;
use crate::plan::{Plan, Shader};
use crate::problem::{DType, Problem};
use crate::{Error, Result};

pub mod math;
pub mod tiled;
pub mod unfused;

/// Embeds `shaders/<file>` behind the shared prelude `shaders/common.wgsl` (kernels that need no
/// dtype or mask prelude: they only touch f32 intermediates).
/// `shader!("a.wgsl" + "b.wgsl")` appends `shaders/b.wgsl` (functions `a.wgsl` calls).
macro_rules! shader {
    ($file:literal) => {
        $crate::plan::Shader {
            file: $file,
            source: concat!(
                include_str!("../../shaders/common.wgsl"),
                include_str!(concat!("../../shaders/", $file))
            ),
            tag: "",
        }
    };
    ($file:literal + $part:literal) => {
        $crate::plan::Shader {
            file: concat!($file, "+", $part),
            source: concat!(
                include_str!("../../shaders/common.wgsl"),
                include_str!(concat!("../../shaders/", $file)),
                include_str!(concat!("../../shaders/", $part))
            ),
            tag: "",
        }
    };
}
pub(crate) use shader;

/// Composes `shaders/<file>` with a storage prelude and a mask prelude (module docs):
/// `kernel!("qk.wgsl", Storage::F16, None)`, `kernel!("tiled.wgsl", st, Some(5))`.
/// `kernel!("a.wgsl" + "b.wgsl", ..)` appends `shaders/b.wgsl` (functions `a.wgsl` calls) to the
/// body and names the module `a.wgsl+b.wgsl`.
macro_rules! kernel {
    ($file:literal, $storage:expr, $mask_binding:expr) => {
        $crate::variants::compose(
            $file,
            include_str!(concat!("../../shaders/", $file)),
            $storage,
            $mask_binding,
        )
    };
    ($file:literal + $part:literal, $storage:expr, $mask_binding:expr) => {
        $crate::variants::compose(
            concat!($file, "+", $part),
            concat!(
                include_str!(concat!("../../shaders/", $file)),
                include_str!(concat!("../../shaders/", $part))
            ),
            $storage,
            $mask_binding,
        )
    };
}
pub(crate) use kernel;

/// How Q/K/V/O elements are stored, i.e. which `shaders/dtype_*.wgsl` prelude a kernel gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Storage {
    F32,
    /// WGSL `f16` (needs SHADER_F16).
    F16,
    /// f16 bit patterns two per u32 through pack2x16float (no feature needed).
    F16x2,
    /// bf16 bit patterns two per u32.
    Bf16,
}

impl Storage {
    /// The storage a dtype uses in the fused and unfused kernels.
    pub fn of(d: DType) -> Storage {
        match d {
            DType::F32 => Storage::F32,
            DType::F16 => Storage::F16,
            DType::BF16 => Storage::Bf16,
        }
    }
    fn prelude(self) -> (&'static str, &'static str) {
        match self {
            Storage::F32 => ("f32", include_str!("../../shaders/dtype_f32.wgsl")),
            Storage::F16 => ("f16", include_str!("../../shaders/dtype_f16.wgsl")),
            Storage::F16x2 => ("f16x2", include_str!("../../shaders/dtype_f16x2.wgsl")),
            Storage::Bf16 => ("bf16", include_str!("../../shaders/dtype_bf16.wgsl")),
        }
    }
    /// Elements per storage slot.
    pub fn pack(self) -> u32 {
        match self {
            Storage::F32 | Storage::F16 => 1,
            Storage::F16x2 | Storage::Bf16 => 2,
        }
    }
}

type ComposeKey = (&'static str, Storage, Option<u32>);
static COMPOSED: Mutex<Option<HashMap<ComposeKey, Shader>>> = Mutex::new(None);

/// See `kernel!`.
pub fn compose(
    file: &'static str,
    body: &'static str,
    storage: Storage,
    mask_binding: Option<u32>,
) -> Shader {
    let key = (file, storage, mask_binding);
    let mut guard = COMPOSED.lock().unwrap_or_else(|e| e.into_inner());
    let map = guard.get_or_insert_with(HashMap::new);
    if let Some(s) = map.get(&key) {
        return *s;
    }
    let (st_name, st_src) = storage.prelude();
    let mask_src = match mask_binding {
        Some(b) => {
            include_str!("../../shaders/mask_bias.wgsl").replace("MASK_BINDING", &b.to_string())
        }
        None => include_str!("../../shaders/mask_none.wgsl").to_string(),
    };
    // Global directives (`enable`, `diagnostic`) must precede every declaration: the body's (e.g.
    // tiled_coop.wgsl's `enable wgpu_cooperative_matrix;`) go first, then the dtype prelude (with
    // `enable f16;`).
    let (enables, rest): (Vec<&str>, Vec<&str>) = body.lines().partition(|l| {
        let l = l.trim_start();
        l.starts_with("enable ") || l.starts_with("diagnostic(")
    });
    let source = format!(
        "{}\n{st_src}\n{}\n{mask_src}\n{}",
        enables.join("\n"),
        include_str!("../../shaders/common.wgsl"),
        rest.join("\n")
    );
    let tag = if mask_binding.is_some() {
        format!("{st_name}+mask")
    } else {
        st_name.to_string()
    };
    let s = Shader {
        file,
        source: Box::leak(source.into_boxed_str()),
        tag: Box::leak(tag.into_boxed_str()),
    };
    map.insert(key, s);
    s
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

/// A registered variant: its name, what it is, its requirements and needs, its plan builder, and
/// its place in `auto`'s preference order. The builder returns the concrete reason when the
/// variant cannot run this problem on this adapter.
pub struct Variant {
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

pub const VARIANTS: &[Variant] = &[
    Variant {
        name: "unfused",
        summary: "5 steps, 6 dispatches: qk, scale, copy + mask (an out-of-place masked_fill), softmax, pv",
        needs: wgpu::Features::empty(),
        requires: STORED_IN_DTYPE,
        fully_masked: Semantics::Nan,
        auto_rank: 30,
        build: unfused::build_out_of_place,
        excludes: &[],
    },
    Variant {
        name: "unfused-inplace",
        summary: "the same 5 steps with masked_fill_ in place: 5 dispatches, one N x N buffer fewer",
        needs: wgpu::Features::empty(),
        requires: STORED_IN_DTYPE,
        fully_masked: Semantics::Nan,
        auto_rank: 20,
        build: unfused::build_in_place,
        excludes: &[],
    },
    Variant {
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
    },
    Variant {
        name: "tiled",
        summary: "one fused dispatch, FlashAttention-2 style online softmax; N x N never in memory",
        needs: wgpu::Features::empty(),
        requires: STORED_IN_DTYPE,
        fully_masked: Semantics::Zero,
        auto_rank: 10,
        build: tiled::build,
        excludes: &[],
    },
    Variant {
        name: "tiled-subgroup",
        summary: "the register-tiled fused kernel with row max/sum by subgroup shuffles: one barrier fewer per key block",
        needs: wgpu::Features::SUBGROUP,
        requires: STORED_IN_DTYPE,
        fully_masked: Semantics::Zero,
        auto_rank: 15,
        build: tiled::build_subgroup,
        excludes: &[],
    },
    Variant {
        name: "tiled-coop",
        summary: "f16 fused attention on cooperative matrices (tensor cores): Q·Kᵀ and P·V as 16x16x16 products with f32 accumulators",
        needs: wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX
            .union(wgpu::Features::SUBGROUP)
            .union(wgpu::Features::SUBGROUP_BARRIER),
        requires: Requirements {
            dtypes: &[DType::F16],
            f16_needs_shader_f16: true,
            bf16_needs_even_d: true,
            masks: true,
        },
        fully_masked: Semantics::Zero,
        // First where it runs: on the H200 it passes every validation run and is 5x faster than
        // `tiled` at f16 (results/h200/2026-12-02-v5).
        auto_rank: 5,
        build: tiled::build_coop,
        excludes: &[],
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
    let plan = (v.build)(p, caps).map_err(incompatible)?;
    plan.check()
        .map_err(|reason| incompatible(format!("internal plan error: {reason}")))?;
    Ok(plan)
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
    (tiled-coop 5 < tiled 10 < tiled-subgroup 15 < unfused-inplace 20 < unfused 30 < math 40: \
    the tensor-core kernel first where it runs (f16, cooperative matrices); then fewest estimated \
    bytes moved first, since attention is memory-bound and the fused kernels never write N x N; \
    between the two register-tiled fused kernels, which move the same bytes, the one that needs \
    no optional feature)";

/// Picks the variant `auto` runs, with the reason for every other one. Errors (exit 4) only when
/// nothing is compatible, listing every reason.
pub fn auto(p: &Problem, caps: &AdapterCaps) -> Result<AutoChoice> {
    let mut ranked: Vec<&Variant> = VARIANTS.iter().collect();
    ranked.sort_by_key(|v| v.auto_rank);
    let mut picked: Option<&Variant> = None;
    let mut not_picked = Vec::new();
    for v in ranked {
        match plan(v.name, p, caps) {
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

/// Chunking of the N x N buffers over heads: how many heads' N x N f32 matrices fit one binding
/// and one buffer (and 32-bit indexing). `Err` only when not even one head fits.
pub(crate) fn heads_per_chunk(p: &Problem, caps: &AdapterCaps) -> std::result::Result<u64, String> {
    let per_head = p.seq as u64 * p.seq as u64 * 4;
    let limit = caps
        .max_storage_binding
        .min(caps.max_buffer)
        .min(u32::MAX as u64 + 1);
    let fit = limit / per_head;
    if fit == 0 {
        return Err(format!(
            "one head's N x N score matrix (N={}: {per_head} bytes) cannot be bound: above this \
             adapter's max_storage_buffer_binding_size {} / max_buffer_size {}",
            p.seq, caps.max_storage_binding, caps.max_buffer
        ));
    }
    Ok(fit.min(p.bh()))
}

/// Shared check of the mask bias buffer; returns its bytes (0 without one).
pub(crate) fn check_mask(p: &Problem, caps: &AdapterCaps) -> std::result::Result<u64, String> {
    let bytes = p.bias_bytes();
    if bytes > 0 {
        check_binding("the mask bias buffer [Bm, Hm, N, N] f32", bytes, caps)?;
    }
    Ok(bytes)
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
