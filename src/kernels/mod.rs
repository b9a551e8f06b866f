//! The kernels: one host unit per WGSL kernel family. `src/kernels/<name>.rs` owns
//! `shaders/<name>.wgsl` (and the files composed with it): its shader composition, `override`
//! constants, tile constants, bindings and traffic / FLOP formula, returned as a
//! [`Dispatch`](crate::plan::Dispatch) that any variant can put in its plan.
//!
//! | unit            | WGSL                                              | used by                  |
//! |-----------------|---------------------------------------------------|--------------------------|
//! | `qk.rs`         | qk.wgsl                                           | unfused*, math           |
//! | `pv.rs`         | pv.wgsl                                           | unfused*, math           |
//! | `scale.rs`      | scale.wgsl                                        | unfused*                 |
//! | `mask.rs`       | mask.wgsl (`copy`, `in_place`, `causal_rows`)      | unfused*                 |
//! | `softmax.rs`    | softmax.wgsl / softmax4.wgsl + softmax_combine.wgsl | unfused*               |
//! | `convert.rs`    | convert.wgsl (`to_f32`, `scale_f32`)              | math                     |
//! | `dropout.rs`    | dropout.wgsl (`copy`, `in_place`) + philox.wgsl    | unfused*, math (`--dropout`) |
//! | `narrow.rs`     | narrow.wgsl                                       | math                     |
//! | `math_mask.rs`  | math_mask.wgsl                                    | math                     |
//! | `math_rows.rs`  | math_rows.wgsl                                    | math                     |
//! | `tiled.rs`      | tiled_v2.wgsl, tiled_v3.wgsl, tiled_rt.wgsl + tiled_rt_wg.wgsl, tiled.wgsl (+ tiled_mask.wgsl) | tiled |
//! | `tiled_coop.rs` | tiled_coop.wgsl or tiled_coop_rt2.wgsl + tiled_coop_lib.wgsl + tiled_coop_kv.wgsl + tiled_coop_lo.wgsl + tiled_mask.wgsl | tiled-coop |
//! | `softmax_bwd.rs` | softmax_bwd.wgsl (`softmax_bwd`, `normalize_bwd`, `exp_bwd`), mask_bwd.wgsl | unfused*, math (`--backward`) |
//! | `tiled_coop_vk.rs` | tiled_coop_vk.comp, tiled_coop_vk_bwd.comp (+ coop_vk_common.glsl; GLSL → SPIR-V at build time, Vulkan passthrough) + coop_layout_probe.comp; all also on coopmat_emu.glsl for the tests | tiled-coop-vk |
//! | `tiled_coop_bwd.rs` | tiled_coop_bwd_{kv,q}.wgsl + tiled_coop_lib.wgsl (+ tiled_coop_kv.wgsl for q) + tiled_mask.wgsl | tiled-coop (`--backward`) |
//! | `tiled_bwd.rs`  | tiled_bwd_dot.wgsl, tiled_bwd_{kv,q}.wgsl + tiled_bwd_common.wgsl or tiled_bwd_wide_{kv,q}.wgsl + tiled_bwd_wide.wgsl, + tiled_bwd_{kv,q}_out.wgsl + tiled_bwd_lib.wgsl + a tile file tiled_bwd_d*.wgsl | tiled, split-kv (`--backward`; `bwd_dot` also tiled-coop) |
//! | `gemm_coop_vk.rs` | gemm_coop_vk.comp (GLSL → SPIR-V, with coop_vk_common.glsl) | unfused-coop |
//! | `split_kv.rs`   | split_kv_hpl.wgsl or split_kv.wgsl + split_kv_lib.wgsl; split_kv_combine.wgsl | split-kv |
//!
//! `tiled.rs` and `tiled_coop.rs` also append tiled_lse.wgsl (training: the row logsumexp L) or
//! tiled_nolse.wgsl to the forward kernels; `pv.rs` has `ptv` (pv.wgsl with `TRANS`: Pᵀ·X).
//!
//! # Shader composition
//! A kernel that touches Q/K/V/O or the mask is written once and composed (`kernel!`) from
//! `dtype_<storage>.wgsl` (element type, `load`, `pack`), `common.wgsl` (Params), a mask prelude
//! (`mask_none.wgsl`, or `mask_bias.wgsl` with its binding number filled in), a dropout prelude
//! (`dropout_none.wgsl`, or `philox.wgsl` with `kernel!(.., dropout = true)`) and the kernel file
//! followed by any number of part files (`kernel!("a.wgsl" + "b.wgsl" + "c.wgsl", ..)`: functions
//! `a.wgsl` calls). The mask's binding number is not written anywhere: it is the place of the
//! `MASK` buffer in the dispatch's binding list ([`mask_slot`]). Composed sources are built once
//! per combination and kept for the life of the process, so the runner's module and pipeline
//! caches (keyed by source) see one module per combination.

use std::collections::HashMap;
use std::sync::Mutex;

use serde::Serialize;

use crate::gpu::AdapterCaps;
use crate::plan::{Access, BindingDecl, BufferDecl, Role};
use crate::problem::{DType, Problem};

pub mod convert;
pub mod dropout;
pub mod gemm_coop_vk;
pub mod mask;
pub mod math_mask;
pub mod math_rows;
pub mod narrow;
pub mod pv;
pub mod qk;
pub mod scale;
pub mod softmax;
pub mod softmax_bwd;
pub mod split_kv;
pub mod tiled;
pub mod tiled_bwd;
pub mod tiled_coop;
pub mod tiled_coop_bwd;
pub mod tiled_coop_vk;

/// Embeds `shaders/<file>` behind the shared prelude `shaders/common.wgsl` (kernels that need no
/// dtype or mask prelude: they only touch f32 intermediates).
/// `shader!("a.wgsl" + "b.wgsl")` appends `shaders/b.wgsl` (functions `a.wgsl` calls).
macro_rules! shader {
    ($file:literal $(+ $part:literal)*) => {
        $crate::plan::Shader {
            file: concat!($file $(, "+", $part)*),
            source: concat!(
                include_str!("../../shaders/common.wgsl"),
                include_str!(concat!("../../shaders/", $file))
                $(, include_str!(concat!("../../shaders/", $part)))*
            ),
            tag: "",
            spirv: &[],
        }
    };
}
pub(crate) use shader;

/// Composes `shaders/<file>` (+ part files) with a storage prelude and a mask prelude (module
/// docs): `kernel!("qk.wgsl", Storage::F16, None)`,
/// `kernel!("tiled_rt.wgsl" + "tiled_rt_wg.wgsl" + "tiled_mask.wgsl", st, mask_slot(&b))`.
macro_rules! kernel {
    ($file:literal $(+ $part:literal)*, $storage:expr, $mask_binding:expr) => {
        $crate::kernels::kernel!($file $(+ $part)*, $storage, $mask_binding, dropout = false)
    };
    ($file:literal $(+ $part:literal)*, $storage:expr, $mask_binding:expr, dropout = $dropout:expr) => {
        $crate::kernels::compose(
            concat!($file $(, "+", $part)*),
            concat!(
                include_str!(concat!("../../shaders/", $file))
                $(, include_str!(concat!("../../shaders/", $part)))*
            ),
            $storage,
            $mask_binding,
            $dropout,
        )
    };
}
pub(crate) use kernel;

/// `kernel!` for the kernels that move the materialized N x N scores four at a time (scale,
/// mask, softmax4): the same composition with the scores prelude of `sc` ([`Scores`],
/// shaders/scores_*.wgsl) appended.
macro_rules! scores_kernel {
    ($sc:expr, $file:literal $(+ $part:literal)*, $storage:expr, $mask_binding:expr) => {
        match $sc {
            $crate::kernels::Scores::F32 => $crate::kernels::kernel!(
                $file $(+ $part)* + "scores_f32.wgsl", $storage, $mask_binding
            ),
            $crate::kernels::Scores::F16 => $crate::kernels::kernel!(
                $file $(+ $part)* + "scores_f16.wgsl", $storage, $mask_binding
            ),
            $crate::kernels::Scores::Bf16 => $crate::kernels::kernel!(
                $file $(+ $part)* + "scores_bf16.wgsl", $storage, $mask_binding
            ),
        }
    };
}
pub(crate) use scores_kernel;

/// How a plan stores its materialized N x N scores S (then P): the scores prelude
/// (shaders/scores_*.wgsl) of the kernels that move them four at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scores {
    /// f32: `unfused` and `unfused-inplace` (whatever the dtype), and any plan whose backward
    /// or dropout reads the scores.
    F32,
    /// IEEE half, two to a u32 (`unfused-coop` in f16 inference, as PyTorch's naive path).
    F16,
    /// bf16 patterns, two to a u32 (`unfused-coop` in bf16 inference; composed with the bf16
    /// storage prelude, whose rounding it uses).
    Bf16,
}

impl Scores {
    /// Scores in the storage dtype of `st`, 16 bits for f16 and bf16 (f32 stays f32).
    pub fn of(st: Storage) -> Scores {
        match st {
            Storage::F32 => Scores::F32,
            Storage::F16 | Storage::F16x2 => Scores::F16,
            Storage::Bf16 => Scores::Bf16,
        }
    }
    /// Bytes of one score in device memory.
    pub fn bytes(self) -> u64 {
        match self {
            Scores::F32 => 4,
            Scores::F16 | Scores::Bf16 => 2,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Scores::F32 => "f32",
            Scores::F16 => "f16",
            Scores::Bf16 => "bf16",
        }
    }
}

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
    /// Bytes of one element in device memory.
    pub fn elem_bytes(self) -> u64 {
        match self {
            Storage::F32 => 4,
            Storage::F16 | Storage::F16x2 | Storage::Bf16 => 2,
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

type ComposeKey = (&'static str, Storage, Option<u32>, bool);
static COMPOSED: Mutex<Option<HashMap<ComposeKey, crate::plan::Shader>>> = Mutex::new(None);

/// See `kernel!`.
pub fn compose(
    file: &'static str,
    body: &'static str,
    storage: Storage,
    mask_binding: Option<u32>,
    dropout: bool,
) -> crate::plan::Shader {
    let key = (file, storage, mask_binding, dropout);
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
    let dropout_src = if dropout {
        include_str!("../../shaders/philox.wgsl")
    } else {
        include_str!("../../shaders/dropout_none.wgsl")
    };
    let source = format!(
        "{}\n{st_src}\n{}\n{mask_src}\n{dropout_src}\n{}",
        enables.join("\n"),
        include_str!("../../shaders/common.wgsl"),
        rest.join("\n")
    );
    let mut tag = st_name.to_string();
    if mask_binding.is_some() {
        tag += "+mask";
    }
    if dropout {
        tag += "+dropout";
    }
    let s = crate::plan::Shader {
        file,
        source: Box::leak(source.into_boxed_str()),
        tag: Box::leak(tag.into_boxed_str()),
        spirv: &[],
    };
    map.insert(key, s);
    s
}

/// The name of the mask bias buffer in every plan (uploaded from [`crate::problem::Inputs::bias`]).
pub const MASK: &str = "MASK";

/// The `@binding` of the mask bias in a dispatch with these storage bindings: its place in the
/// list (bindings are numbered from 1 in list order, 0 is `params`), or `None` without one.
pub fn mask_slot(bindings: &[BindingDecl]) -> Option<u32> {
    bindings
        .iter()
        .position(|b| b.buffer == MASK)
        .map(|i| i as u32 + 1)
}

pub(crate) fn bind(buffer: &str, access: Access) -> BindingDecl {
    BindingDecl {
        buffer: buffer.into(),
        access,
        range: None,
    }
}

/// `bindings` followed by `MASK` (read-only) when the problem has a mask bias.
pub(crate) fn with_mask(p: &Problem, mut bindings: Vec<BindingDecl>) -> Vec<BindingDecl> {
    if p.mask.bias.is_some() {
        bindings.push(bind(MASK, Access::Read));
    }
    bindings
}

pub(crate) fn buf(name: &str, bytes: u64, role: Role, n_by_n: bool) -> BufferDecl {
    BufferDecl {
        name: name.into(),
        bytes,
        role,
        n_by_n,
    }
}

/// Threads per workgroup of the element-wise kernels (scale, mask, convert, math_rows, ...).
pub const EW_WG: u64 = 256;

/// The element-wise grid over `elems` work items (one per thread), split over x and y.
pub(crate) fn ew_grid(elems: u64, caps: &AdapterCaps) -> [u32; 3] {
    crate::plan::grid_2d(elems.div_ceil(EW_WG), caps.max_workgroups_per_dimension)
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

/// Chunking of the N x N buffers over heads: how many heads' N x N matrices of `score_bytes`
/// a score (4 for f32, 2 for 16-bit scores) fit one binding and one buffer (and 32-bit
/// indexing), in whole groups of query heads (GQA). `Err` only when not even one group fits.
pub(crate) fn heads_per_chunk(
    p: &Problem,
    caps: &AdapterCaps,
    score_bytes: u64,
) -> std::result::Result<u64, String> {
    let per_head = p.seq as u64 * p.kv_seq as u64 * score_bytes;
    let limit = caps
        .max_storage_binding
        .min(caps.max_buffer)
        .min(u32::MAX as u64 + 1);
    // Whole groups of query heads per chunk (the backward's dK, dV sum over a group).
    let group = p.group().max(1) as u64;
    let fit = limit / per_head / group * group;
    if fit == 0 {
        return Err(format!(
            "{} N x M score matrix (N={}, M={}: {per_head} bytes{}) cannot be bound: above this \
             adapter's max_storage_buffer_binding_size {} / max_buffer_size {}",
            if group > 1 {
                "one group of query heads' (H / Hkv heads that share a K/V head)"
            } else {
                "one head's"
            },
            p.seq,
            p.kv_seq,
            if group > 1 {
                format!(" each, {group} heads")
            } else {
                String::new()
            },
            caps.max_storage_binding,
            caps.max_buffer
        ));
    }
    Ok(fit.min(p.bh()))
}

/// The chunks of heads: (first head, heads) pairs covering 0..B*H.
pub(crate) fn chunks(bh: u64, per: u64) -> Vec<(u64, u64)> {
    (0..bh.div_ceil(per))
        .map(|c| (c * per, per.min(bh - c * per)))
        .collect()
}

/// Shared check of the mask bias buffer; returns its bytes (0 without one).
pub(crate) fn check_mask(p: &Problem, caps: &AdapterCaps) -> std::result::Result<u64, String> {
    let bytes = p.bias_bytes();
    if bytes > 0 {
        check_binding("the mask bias buffer [Bm, Hm, N, N] f32", bytes, caps)?;
    }
    Ok(bytes)
}

/// Bytes of the mask bias a dispatch over `count` heads reads: one N x N block per head (a
/// broadcast mask is counted again for every head that reads it).
pub(crate) fn mask_read_bytes(p: &Problem, count: u64) -> u64 {
    if p.mask.bias.is_some() {
        count * p.seq as u64 * p.kv_seq as u64 * 4
    } else {
        0
    }
}

/// The workgroup memory one workgroup of a dispatch declares: the workgroup variables its entry
/// point uses, with the dispatch's pipeline constants applied, each rounded up to 16 bytes as
/// WebGPU counts them against `maxComputeWorkgroupStorageSize`. On-chip bytes, so not part of a
/// dispatch's traffic; what the cooperative-matrix kernels showed to limit how many workgroups an
/// SM holds (results/EXPERIMENTS.md, v34-bwd-kv-direct). None if naga cannot read the source.
pub fn workgroup_bytes(
    shader: &crate::plan::Shader,
    entry: &str,
    overrides: &[(String, f64)],
) -> Option<u64> {
    // Parsed once per kernel configuration: `sweep` and `tune` summarize the same kernels many
    // times.
    type Key = ((usize, usize, usize), String, Vec<(String, u64)>);
    static SEEN: Mutex<Option<HashMap<Key, Option<u64>>>> = Mutex::new(None);
    let key: Key = (
        shader.identity(),
        entry.to_string(),
        overrides
            .iter()
            .map(|(k, x)| (k.clone(), x.to_bits()))
            .collect(),
    );
    if let Some(x) = SEEN.lock().ok()?.get_or_insert_with(HashMap::new).get(&key) {
        return *x;
    }
    let x = read_workgroup_bytes(shader, entry, overrides);
    SEEN.lock()
        .ok()?
        .get_or_insert_with(HashMap::new)
        .insert(key, x);
    x
}

fn read_workgroup_bytes(
    shader: &crate::plan::Shader,
    entry: &str,
    overrides: &[(String, f64)],
) -> Option<u64> {
    use wgpu::naga;
    if shader.is_spirv() {
        // Compiled for one shape: no pipeline constants to apply.
        return spirv_workgroup_bytes(shader.spirv);
    }
    let module = naga::front::wgsl::parse_str(shader.source).ok()?;
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .ok()?;
    let constants: naga::back::PipelineConstants = overrides.iter().cloned().collect();
    let (module, info) = naga::back::pipeline_constants::process_overrides(
        &module,
        &info,
        Some((naga::ShaderStage::Compute, entry)),
        &constants,
    )
    .ok()?;
    workgroup_bytes_of(&module, &info, entry)
}

/// The workgroup memory a SPIR-V module (little-endian words, one entry point) declares: its
/// `Workgroup` variables, each rounded up to 16 bytes as [`workgroup_bytes`] counts WGSL's. Reads
/// only the instructions that size them (scalar, vector and array types, integer constants); None
/// for a module it cannot size.
pub fn spirv_workgroup_bytes(spirv: &[u8]) -> Option<u64> {
    const INT: u32 = 21;
    const FLOAT: u32 = 22;
    const VECTOR: u32 = 23;
    const ARRAY: u32 = 28;
    const POINTER: u32 = 32;
    const CONSTANT: u32 = 43;
    const VARIABLE: u32 = 59;
    const WORKGROUP: u32 = 4;
    let words: Vec<u32> = spirv
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    if words.len() < 5 || words[0] != 0x0723_0203 {
        return None;
    }
    let mut size: HashMap<u32, u64> = HashMap::new(); // type id -> bytes
    let mut constant: HashMap<u32, u64> = HashMap::new(); // constant id -> value
    let mut pointee: HashMap<u32, (u32, u32)> = HashMap::new(); // pointer type -> (class, type)
    let mut total = 0u64;
    let mut at = 5;
    while at < words.len() {
        let (count, op) = ((words[at] >> 16) as usize, words[at] & 0xffff);
        let ins = words.get(at..at + count.max(1))?;
        match op {
            INT | FLOAT => {
                size.insert(ins[1], ins[2] as u64 / 8);
            }
            // Types it cannot size (cooperative matrices, arrays of them) stay unknown: only a
            // workgroup variable of such a type makes the module unsizable.
            VECTOR => {
                if let Some(&e) = size.get(&ins[2]) {
                    size.insert(ins[1], e * ins[3] as u64);
                }
            }
            ARRAY => {
                if let (Some(&e), Some(&n)) = (size.get(&ins[2]), constant.get(&ins[3])) {
                    size.insert(ins[1], e * n);
                }
            }
            CONSTANT => {
                constant.insert(ins[2], ins[3] as u64);
            }
            POINTER => {
                pointee.insert(ins[1], (ins[2], ins[3]));
            }
            VARIABLE if ins[3] == WORKGROUP => {
                let (_, ty) = pointee.get(&ins[1])?;
                total += size.get(ty)?.next_multiple_of(16);
            }
            _ => {}
        }
        at += count.max(1);
    }
    Some(total)
}

/// [`workgroup_bytes`] of a module whose pipeline constants are already applied.
pub fn workgroup_bytes_of(
    module: &wgpu::naga::Module,
    info: &wgpu::naga::valid::ModuleInfo,
    entry: &str,
) -> Option<u64> {
    let mut layouter = wgpu::naga::proc::Layouter::default();
    layouter.update(module.to_ctx()).ok()?;
    let ep = module.entry_points.iter().position(|e| e.name == entry)?;
    let uses = info.get_entry_point(ep);
    Some(
        module
            .global_variables
            .iter()
            .filter(|(h, g)| g.space == wgpu::naga::AddressSpace::WorkGroup && !uses[*h].is_empty())
            .map(|(_, g)| (layouter[g.ty].size as u64).div_ceil(16) * 16)
            .sum(),
    )
}
