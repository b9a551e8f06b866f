//! `attention` on cooperative matrices with the softmax in registers (the `tiled-coop-vk`
//! variant): shaders/tiled_coop_vk.comp, GLSL with GL_KHR_cooperative_matrix compiled to SPIR-V
//! by build.rs (glslang) and handed to Vulkan through wgpu's `PASSTHROUGH_SHADERS`. Vulkan only,
//! f16 and bf16, D = 64, 128 and 256 (one build each: tiled_coop_vk_shapes.rs, [`shape`]), causal
//! or not, grouped-query attention, training (it writes L for this file's own backward passes,
//! shaders/tiled_coop_vk_bwd.comp: [`bwd_pass`], D = 64, 128 and 256), mask bias (bool / float
//! masks, key padding), dropout.
//!
//! wgpu 30's WGSL cooperative matrices have no element access, which is why `tiled-coop` sends
//! every score and probability tile through workgroup memory (docs/variants.md). GLSL's
//! cooperative matrices have element access but leave the element coordinates to the driver, so
//! the kernel assumes one layout (the H200 driver's, shaders/coop_layout.glsl: [`assumed_acc`],
//! [`assumed_a`]) and the device is asked first: at device creation [`probe`] runs
//! shaders/coop_layout_probe.comp and [`AdapterCaps::coop_layout`] records what it found; the
//! plan builder refuses the variant, with what the probe saw, on any other layout.
//!
//! Both kernels are also built on shaders/coopmat_emu.glsl ([`Build::Emulated`]): cooperative
//! matrices emulated, in the assumed layout, through workgroup memory, so that the tests run the
//! kernel's logic on lavapipe against the f64 reference (tests/coop_vk.rs). The kernel is built
//! for one or two 16-row tiles a subgroup (its ROWS; two at D = 64 only); the variant picks by N
//! ([`rows`]).

use super::{check_binding, check_grid};
use crate::gpu::context::CoopLayout;
use crate::gpu::runner::{Runner, Schedule};
use crate::gpu::{AdapterCaps, Bf16Matrix, Cm2, Gpu};
use crate::plan::{Access, Dispatch, Params, Phase, Plan, Role, Shader};
use crate::problem::{DType, Inputs, Problem};
use crate::tile::{TileConfig, TileKernel};

include!("tiled_coop_vk_shapes.rs");

/// The forward's build for `head_dim` with `rows` 16-row tiles a subgroup (FORWARD_DEVICE or
/// FORWARD_EMULATED), or why there is none.
pub fn shape(head_dim: u32, rows: u32, build: Build) -> Result<ForwardShape, String> {
    let shapes = match build {
        Build::Device => &FORWARD_DEVICE[..],
        Build::Emulated => &FORWARD_EMULATED[..],
    };
    by_head_dim(shapes, |s| s.d, head_dim, "the kernel")?;
    shapes
        .iter()
        .find(|s| s.d == head_dim && s.rows == rows)
        .copied()
        .ok_or_else(|| {
            let have: Vec<u32> = shapes
                .iter()
                .filter(|s| s.d == head_dim)
                .map(|s| s.rows)
                .collect();
            format!("the D = {head_dim} build has {have:?} row tiles a subgroup, not {rows}")
        })
}

/// The build among `shapes` whose head dimension (`d`) is `head_dim`, or the refusal naming
/// `what` and the head dimensions there are.
fn by_head_dim<S: Copy>(
    shapes: &[S],
    d: fn(&S) -> u32,
    head_dim: u32,
    what: &str,
) -> Result<S, String> {
    shapes
        .iter()
        .find(|s| d(s) == head_dim)
        .copied()
        .ok_or_else(|| {
            let mut ds: Vec<String> = shapes.iter().map(|s| d(s).to_string()).collect();
            ds.dedup();
            format!(
                "{what} is compiled for D = {} (got --head-dim {head_dim})",
                ds.join(", ")
            )
        })
}

/// 16-row tiles a subgroup owns in the variant's build (the kernel's ROWS; 1 or 2 are compiled,
/// BR = 64 ROWS rows a workgroup of four subgroups). Measured on the H200 at B8 H16 D64 causal
/// f16 (results/EXPERIMENTS.md, v36-coop-vk-layout): ROWS = 2 is 3 % slower at N = 1024 (171.9
/// vs 177.5 µs: half as many workgroups, 1024 for 132 SMs) and 8 % faster at N = 4096 (1901 vs
/// 1747 µs: each K/V matrix load from workgroup memory serves two row tiles), so two tiles from
/// N = [`ROWS2_FROM`] query rows where the head dimension's build has them (D = 64: at D = 128
/// and 256 two tiles' O alone would take 128 or 256 registers a lane).
pub fn rows(p: &Problem) -> u32 {
    let two = shape(p.head_dim, 2, Build::Device).is_ok();
    if two && p.seq >= ROWS2_FROM {
        2
    } else {
        1
    }
}
/// The N from which [`rows`] takes two 16-row tiles a subgroup.
pub const ROWS2_FROM: u32 = 2048;
/// Workgroup storage of the D = 64 forward with one row tile a subgroup: K and V staged, 2 x 32 x
/// (64 + 8) f16 (the kernel's header).
pub const STORAGE_D64: u64 = FORWARD_DEVICE[0].storage();

const SOURCE: &str = include_str!("../../shaders/tiled_coop_vk.comp");
const BWD_SOURCE: &str = include_str!("../../shaders/tiled_coop_vk_bwd.comp");
const PROBE_SOURCE: &str = include_str!("../../shaders/coop_layout_probe.comp");
const CM2_SOURCE: &str = include_str!("../../shaders/tiled_cm2.comp");
const CM2_BWD_SOURCE: &str = include_str!("../../shaders/tiled_cm2_bwd.comp");
include!(concat!(env!("OUT_DIR"), "/spirv_modules.rs"));

/// Every SPIR-V module build.rs compiled, with its name: both builds of every kernel and option.
pub fn spirv_modules() -> &'static [(&'static str, &'static [u8])] {
    SPIRV_MODULES
}

/// The SPIR-V module build.rs compiled under `module` (its `modules`) as the shader of GLSL `file`
/// (`source` its text), tagged with the module's name: every SPIR-V kernel's and probe's shader.
pub(crate) fn spirv_shader(file: &'static str, source: &'static str, module: &str) -> Shader {
    let (tag, spirv) = SPIRV_MODULES
        .iter()
        .find(|m| m.0 == module)
        .copied()
        .unwrap_or_else(|| panic!("build.rs compiles no SPIR-V module `{module}`"));
    Shader {
        file,
        source,
        tag,
        spirv,
    }
}

/// The name suffix of a build's modules.
pub(crate) fn tail(build: Build) -> &'static str {
    match build {
        Build::Device => "",
        Build::Emulated => "_emu",
    }
}
/// Workgroup storage the emulation adds to a kernel of four subgroups (shaders/coopmat_emu.glsl's
/// header): the operands of their products and the shuffle slots, 2 x 4 x 256 + 128 f32.
pub const EMU_STORAGE: u64 = emu_storage(4);

/// [`EMU_STORAGE`] for a workgroup of `subgroups` subgroups: 2 x subgroups x 256 + 32 subgroups
/// f32.
pub const fn emu_storage(subgroups: u32) -> u64 {
    (2 * subgroups as u64 * 256 + 32 * subgroups as u64) * 4
}

/// Which build of the GLSL a plan uses: the device's cooperative matrices, or the tests' twin on
/// shaders/coopmat_emu.glsl, which runs on any Vulkan device with f16 and passthrough shaders
/// (lavapipe in CI) and checks the kernel's logic, not its speed, nor the layout it assumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Build {
    Device,
    Emulated,
}

/// The name suffix of a module's options (build.rs `options`): a mask bias bound last, dropout.
fn options(p: &Problem) -> String {
    format!(
        "{}{}",
        if p.mask.bias.is_some() { "_mask" } else { "" },
        if p.dropout().is_some() { "_drop" } else { "" }
    )
}

/// The forward for `p` (its head dimension's build, [`shape`]) with `rows` 16-row tiles a subgroup
/// (1 or 2): inference, or training (also writes the row logsumexp L at binding 5), with a mask
/// bias bound last and dropout where `p` has them. The caller has run [`check`].
pub fn shader(p: &Problem, build: Build, shape: &ForwardShape) -> Shader {
    let module = shape.module(p.dtype == DType::BF16, p.backward, &options(p));
    spirv_shader(
        "tiled_coop_vk.comp",
        SOURCE,
        &format!("{module}{}", tail(build)),
    )
}

/// A backward pass for `p` (its head dimension's build, [`bwd_shape`]): `kv` (dK, dV) or dQ, with
/// a mask bias bound last and dropout where `p` has them. The caller has run [`check_backward`].
pub fn bwd_shader(p: &Problem, kv: bool, build: Build) -> Shader {
    let shape = bwd_shape(p.head_dim, build).unwrap_or_else(|e| panic!("{e}"));
    let module = shape.module(p.dtype == DType::BF16, kv, &options(p));
    spirv_shader(
        "tiled_coop_vk_bwd.comp",
        BWD_SOURCE,
        &format!("{module}{}", tail(build)),
    )
}

/// Workgroup storage a workgroup of the forward of `build` declares at `shape`.
pub fn storage(shape: &ForwardShape, build: Build) -> u64 {
    shape.storage()
        + match build {
            Build::Device => 0,
            Build::Emulated => emu_storage(shape.subgroups),
        }
}

/// What `build` adds to a kernel's workgroup storage: the emulation's exchange slots.
pub(crate) fn emulation_bytes(build: Build) -> u64 {
    match build {
        Build::Device => 0,
        Build::Emulated => EMU_STORAGE,
    }
}

/// The tile: BR = 16 ROWS x subgroups query rows, key blocks of the shape's BC.
pub const fn tile(shape: &ForwardShape) -> TileConfig {
    TileConfig {
        kernel: TileKernel::CoopVk,
        br: shape.br(),
        bc: shape.bc,
        d4: shape.d / 4,
        dp: 0,
    }
}

/// Why this problem cannot run on this adapter with `rows` row tiles a subgroup, if it cannot:
/// everything the kernel does not do. The shape it runs with otherwise.
pub fn check(
    p: &Problem,
    caps: &AdapterCaps,
    build: Build,
    rows: u32,
) -> Result<ForwardShape, String> {
    adapter_check(caps, build)?;
    check_problem(p, caps, build, rows)
}

/// What a build of any GLSL cooperative-matrix kernel (this file's, gemm_coop_vk.rs's) needs of
/// the adapter: SPIR-V passthrough and f16; the device build also cooperative matrices, 32-wide
/// subgroups and the assumed element layout (the probe's answer).
pub fn adapter_check(caps: &AdapterCaps, build: Build) -> Result<(), String> {
    match build {
        Build::Emulated => passthrough_check(caps),
        Build::Device => {
            device_check(caps)?;
            layout_check(caps)
        }
    }
}

/// What any build needs: SPIR-V handed to a Vulkan driver, f16.
fn passthrough_check(caps: &AdapterCaps) -> Result<(), String> {
    if caps.backend != "vulkan" {
        return Err(format!(
            "a SPIR-V kernel (GLSL compiled at build time) runs on Vulkan only, not on {}",
            caps.backend
        ));
    }
    if !caps.passthrough {
        return Err(
            "the device lacks Features::PASSTHROUGH_SHADERS (SPIR-V handed to the \
                    driver as it is)"
                .into(),
        );
    }
    if !caps.f16 {
        return Err("the device lacks Features::SHADER_F16".into());
    }
    Ok(())
}

/// What the device build needs but its element layout, which the probe finds on such a device
/// (`Gpu::open` probes where this passes): cooperative matrices and 32-wide subgroups.
pub fn device_check(caps: &AdapterCaps) -> Result<(), String> {
    passthrough_check(caps)?;
    if !caps.cooperative_matrix {
        return Err("the device lacks Features::EXPERIMENTAL_COOPERATIVE_MATRIX".into());
    }
    if !caps.subgroups || caps.subgroup_min_size != 32 || caps.subgroup_max_size != 32 {
        return Err(format!(
            "the kernel's layout is that of a 32-wide subgroup; this adapter's subgroups are \
             {}..{} wide",
            caps.subgroup_min_size, caps.subgroup_max_size
        ));
    }
    Ok(())
}

/// The probed layout is the one the kernels assume.
fn layout_check(caps: &AdapterCaps) -> Result<(), String> {
    match &caps.coop_layout {
        CoopLayout::Assumed => {}
        CoopLayout::NotProbed(why) => {
            return Err(format!(
                "the cooperative-matrix element layout was not probed ({why})"
            ))
        }
        CoopLayout::Other(what) => {
            return Err(format!(
                "the kernel reads score elements by their coordinates in the layout it assumes \
                 (shaders/coop_layout.glsl), and this driver lays 16 x 16 matrices out otherwise: \
                 {what}"
            ))
        }
    }
    Ok(())
}

/// f16; bf16 where the device has bf16 cooperative matrices (the emulated build carries bf16 in
/// f16 containers and needs nothing more).
pub(crate) fn dtype_check(p: &Problem, caps: &AdapterCaps, build: Build) -> Result<(), String> {
    match p.dtype {
        DType::F16 => Ok(()),
        DType::BF16 => match (&caps.bf16_matrix, build) {
            (_, Build::Emulated) | (Bf16Matrix::On, Build::Device) => Ok(()),
            (Bf16Matrix::Off(why), Build::Device) => Err(format!(
                "bf16 on cooperative matrices needs the device opened with VK_KHR_shader_bfloat16 \
                 (shaderBFloat16Type, shaderBFloat16CooperativeMatrix): {why}"
            )),
        },
        DType::F32 => {
            Err("dtype f32 is not implemented on cooperative matrices (f16 and bf16)".into())
        }
    }
}

/// What the kernel does not do, whichever build.
fn check_problem(
    p: &Problem,
    caps: &AdapterCaps,
    build: Build,
    rows: u32,
) -> Result<ForwardShape, String> {
    dtype_check(p, caps, build)?;
    let shape = shape(p.head_dim, rows, build)?;
    if p.backward {
        // Training needs the L-writing build, which only the head dimensions with a backward
        // have.
        bwd_shape(p.head_dim, build)?;
    }
    storage_check(&shape, build, caps)?;
    Ok(shape)
}

/// Whether `shape`'s build fits the adapter's workgroup storage.
pub fn storage_check(shape: &ForwardShape, build: Build, caps: &AdapterCaps) -> Result<(), String> {
    let storage = storage(shape, build);
    if storage > caps.max_workgroup_storage as u64 {
        return Err(format!(
            "needs {storage} bytes of workgroup storage at D = {} (key blocks of {}), this \
             adapter allows {}",
            shape.d, shape.bc, caps.max_workgroup_storage
        ));
    }
    Ok(())
}

/// The fused dispatch (no pipeline constants: the SPIR-V is compiled for its one shape). The
/// caller has run [`check`], which gave `shape`.
pub fn attention(
    p: &Problem,
    caps: &AdapterCaps,
    build: Build,
    shape: &ForwardShape,
) -> Result<Dispatch, String> {
    check_binding("Q ([B, H, N, D])", super::tiled_coop::input_bytes(p), caps)?;
    let shader = shader(p, build, shape);
    super::tiled::fused_dispatch(p, caps, shader, vec![], &tile(shape))
}

/// The forward on VK_NV_cooperative_matrix2's build for `head_dim` (CM2_DEVICE), or why there
/// is none.
pub fn cm2_shape(head_dim: u32) -> Result<Cm2Shape, String> {
    by_head_dim(
        &CM2_DEVICE,
        |s| s.d,
        head_dim,
        "the VK_NV_cooperative_matrix2 kernel (tiled_cm2.comp)",
    )
}

/// Why `p` cannot run on the VK_NV_cooperative_matrix2 forward (shaders/tiled_cm2.comp) on this
/// adapter, if it cannot: SPIR-V passthrough, f16, cooperative matrices and the device opened with
/// the extension (src/gpu/cm2.rs), f16 or bf16 (bf16 cooperative matrices), a head dimension it is
/// built for, and in training the backward's build (this file's passes run after it). No element
/// layout is assumed, so the layout probe does not gate it. The shape it runs with otherwise.
pub fn cm2_check(p: &Problem, caps: &AdapterCaps) -> Result<Cm2Shape, String> {
    passthrough_check(caps)?;
    if !caps.cooperative_matrix {
        return Err("the device lacks Features::EXPERIMENTAL_COOPERATIVE_MATRIX".into());
    }
    if let Cm2::Off(why) = &caps.cm2 {
        return Err(format!(
            "the device was not opened with VK_NV_cooperative_matrix2: {why}"
        ));
    }
    dtype_check(p, caps, Build::Device)?;
    let shape = cm2_shape(p.head_dim)?;
    if p.backward {
        bwd_shape(p.head_dim, Build::Device)?;
    }
    Ok(shape)
}

/// The VK_NV_cooperative_matrix2 forward's tile: BR rows, key blocks of BC.
pub const fn cm2_tile(shape: &Cm2Shape) -> TileConfig {
    TileConfig {
        kernel: TileKernel::Cm2,
        br: shape.br,
        bc: shape.bc,
        d4: shape.d / 4,
        dp: 0,
    }
}

/// The fused dispatch on VK_NV_cooperative_matrix2: inference, or training (also writes L at
/// binding 5), with a mask bias bound last and dropout where `p` has them. The caller has run
/// [`cm2_check`], which gave `shape`.
pub fn cm2_attention(
    p: &Problem,
    caps: &AdapterCaps,
    shape: &Cm2Shape,
) -> Result<Dispatch, String> {
    check_binding("Q ([B, H, N, D])", super::tiled_coop::input_bytes(p), caps)?;
    let module = shape.module(p.dtype == DType::BF16, p.backward, &options(p));
    let shader = spirv_shader("tiled_cm2.comp", CM2_SOURCE, &module);
    super::tiled::fused_dispatch(p, caps, shader, vec![], &cm2_tile(shape))
}

/// The backward's build for `head_dim` (BACKWARD_DEVICE or BACKWARD_EMULATED), or why there is
/// none.
pub fn bwd_shape(head_dim: u32, build: Build) -> Result<BackwardShape, String> {
    let shapes = match build {
        Build::Device => &BACKWARD_DEVICE,
        Build::Emulated => &BACKWARD_EMULATED,
    };
    by_head_dim(
        shapes,
        |s| s.d,
        head_dim,
        "the backward (tiled_coop_vk_bwd.comp)",
    )
}

/// Workgroup storage a backward pass of `build` declares at `shape` (bwd_kv's is the larger).
pub fn bwd_storage(shape: &BackwardShape, kv: bool, build: Build) -> u64 {
    shape.storage(kv) + emulation_bytes(build)
}

/// Keys (bwd_kv) or rows (bwd_q) a workgroup of the backward owns: 16 for each of its four
/// subgroups, whatever the staged block.
const BWD_OWN: u64 = 64;

/// `bwd_kv` (dK, dV; a workgroup per 64 keys of a K/V head, its group's query heads in turn) or
/// `bwd_q` (dQ; a workgroup per 64 rows of a head), after `tiled_bwd::bwd_dot`. The caller has
/// run [`check`] (f16) and [`check_backward`] (a build at this D).
pub fn bwd_pass(
    p: &Problem,
    caps: &AdapterCaps,
    build: Build,
    kv: bool,
) -> Result<Dispatch, String> {
    let shape = bwd_shape(p.head_dim, build)?;
    let b = shape.block as u64;
    let note = if kv {
        format!(
            "dK, dV on cooperative matrices, P and dS in registers: a workgroup per 64 keys \
             walks the query blocks of {b} (from the diagonal when causal); per 16 rows Sᵀ, \
             dPᵀ, dV += Pᵀ dO, dK += dSᵀ Q"
        )
    } else {
        format!(
            "dQ on cooperative matrices, dS in registers: a workgroup per 64 rows walks the \
             key blocks of {b} (up to the diagonal when causal); per 16 keys S, dP, dQ += dS K"
        )
    };
    let walk = Walk {
        own: BWD_OWN,
        block: b,
        split: shape.split as u64,
    };
    bwd_dispatch(p, caps, kv, walk, bwd_shader(p, kv, build), note)
}

/// The backward on VK_NV_cooperative_matrix2's build for `head_dim` (CM2_BWD_DEVICE), or why
/// there is none.
pub fn cm2_bwd_shape(head_dim: u32) -> Result<Cm2BwdShape, String> {
    by_head_dim(
        &CM2_BWD_DEVICE,
        |s| s.d,
        head_dim,
        "the VK_NV_cooperative_matrix2 backward (tiled_cm2_bwd.comp)",
    )
}

/// `bwd_kv` or `bwd_q` on VK_NV_cooperative_matrix2 (shaders/tiled_cm2_bwd.comp), after
/// `tiled_bwd::bwd_dot`: the same bindings and formulas as [`bwd_pass`]'s, a workgroup per BK
/// keys (bwd_kv, its group's query heads in turn) or BQ rows (bwd_q). The caller has run
/// [`cm2_check`].
pub fn cm2_bwd_pass(p: &Problem, caps: &AdapterCaps, kv: bool) -> Result<Dispatch, String> {
    let shape = cm2_bwd_shape(p.head_dim)?;
    let (bq, bk) = (shape.bq as u64, shape.bk as u64);
    let module = shape.module(p.dtype == DType::BF16, kv, &options(p));
    let shader = spirv_shader("tiled_cm2_bwd.comp", CM2_BWD_SOURCE, &module);
    let (walk, note) = if kv {
        (
            Walk {
                own: bk,
                block: bq,
                split: 1,
            },
            format!(
                "dK, dV on workgroup-scope matrices (VK_NV_cooperative_matrix2): a workgroup per \
                 {bk} keys walks the query blocks of {bq} (from the diagonal when causal): Sᵀ, \
                 dPᵀ, dV += Pᵀ dO, dK += dSᵀ Q"
            ),
        )
    } else {
        (
            Walk {
                own: bq,
                block: bk,
                split: 1,
            },
            format!(
                "dQ on workgroup-scope matrices (VK_NV_cooperative_matrix2): a workgroup per {bq} \
                 rows walks the key blocks of {bk} (up to the diagonal when causal): S, dP, \
                 dQ += dS K"
            ),
        )
    };
    bwd_dispatch(p, caps, kv, walk, shader, note)
}

/// How a backward pass walks: keys (bwd_kv) or rows (bwd_q) a workgroup owns, rows (keys) a
/// walked block, and the parts the gradients' columns are split in, a workgroup each.
#[derive(Debug, Clone, Copy)]
struct Walk {
    own: u64,
    block: u64,
    split: u64,
}

/// A backward pass's dispatch (`kv`: bwd_kv, else bwd_q) of `shader` walking as `walk` says: its
/// grid, bindings and byte and FLOP estimates, with `note`.
fn bwd_dispatch(
    p: &Problem,
    caps: &AdapterCaps,
    kv: bool,
    walk: Walk,
    shader: Shader,
    note: String,
) -> Result<Dispatch, String> {
    let (n, m, d, e) = (
        p.seq as u64,
        p.kv_seq as u64,
        p.head_dim as u64,
        p.dtype.bytes(),
    );
    let bh = p.bh();
    let pairs = p.allowed_pairs_per_head();
    let (own, b) = (walk.own, walk.block);
    // Staged blocks a workgroup walks, per head: bwd_kv from the first row block that sees its
    // keys to N, bwd_q up to the causal end of its rows.
    let (owned, walked) = if kv {
        let walked: u64 = (0..m.div_ceil(own))
            .map(|kb| {
                let first = if p.causal {
                    ((kb * own) as i64 - p.causal_offset()).clamp(0, n as i64) as u64
                } else {
                    0
                };
                n.div_ceil(b) - first / b
            })
            .sum();
        (m.div_ceil(own), walked)
    } else {
        let walked: u64 = (0..n.div_ceil(own))
            .map(|qb| {
                let last = n.min((qb + 1) * own) - 1;
                p.keys_for_row(last).div_ceil(b)
            })
            .sum();
        (n.div_ceil(own), walked)
    };
    let split = walk.split;
    // Each of the `split` workgroups of a block walks its blocks and recomputes S and dP.
    let block_bytes = b * d * e * 2 * split;
    let (name, grid_y, reads, writes, products) = if kv {
        (
            "bwd_kv",
            check_grid("B*Hkv", p.batch as u64 * p.kv_heads as u64, caps)?,
            2 * p.kv_bytes() * split + bh * walked * (block_bytes + b * 8 * split),
            2 * p.kv_bytes(),
            // Sᵀ and dPᵀ in each part, dV and dK once.
            2 * split + 2,
        )
    } else {
        (
            "bwd_q",
            check_grid("B*H", bh, caps)?,
            (2 * p.qkv_bytes() + bh * n * 8) * split + bh * walked * block_bytes,
            p.qkv_bytes(),
            // S and dP in each part, dQ once.
            2 * split + 1,
        )
    };
    let note = if split > 1 {
        format!(
            "{note}; the gradients' columns in {split} parts, a workgroup each, S and dP \
             recomputed in each"
        )
    } else {
        note
    };
    let grid_x = check_grid(
        &if kv {
            format!("M / {own} key blocks")
        } else {
            format!("N / {own} row blocks")
        },
        owned,
        caps,
    )?;
    Ok(Dispatch {
        name: name.into(),
        phase: Phase::Backward,
        saved: vec![],
        shader,
        entry: "main",
        overrides: vec![],
        params: Params::of(p),
        bindings: super::tiled_bwd::bindings(p, if kv { &["dK", "dV"] } else { &["dQ"] }),
        workgroups: [grid_x, grid_y, split as u32],
        reads_bytes: reads,
        writes_bytes: writes,
        flops: bh * pairs * d * 2 * products,
        // No adapter with a loop cap offers cooperative matrices: one iteration per walked key
        // or row and 16 columns of D, unmeasured.
        loop_iters: p.seq.max(p.kv_seq) as u64 * d.div_ceil(16) + 64,
        note,
    })
}

/// Why the backward passes cannot run here, if they cannot (beyond [`check`]).
pub fn check_backward(p: &Problem, caps: &AdapterCaps, build: Build) -> Result<(), String> {
    // What the passes need of the adapter, the layout they assume included (checked here too for
    // a forward that assumes none: tiled_cm2.comp's).
    adapter_check(caps, build)
        .map_err(|e| format!("the backward (tiled_coop_vk_bwd.comp): {e}"))?;
    let need = bwd_storage(&bwd_shape(p.head_dim, build)?, true, build);
    if need > caps.max_workgroup_storage as u64 {
        return Err(format!(
            "the backward (tiled_coop_vk_bwd.comp) needs {need} bytes of workgroup storage, this \
             adapter allows {}",
            caps.max_workgroup_storage
        ));
    }
    Ok(())
}

/// The accumulator's element that the A operand holds at element `i` (shaders/coop_layout.glsl's
/// `A_OF`, an involution): the same on the H200 (lease 19 refused mma.m16n8k16's A order).
pub const fn a_of(i: u32) -> u32 {
    i
}

/// The layout the GLSL kernels assume (shaders/coop_layout.glsl): element `i` of lane `lane` of a
/// 16 x 16 f32 accumulator is (row, column); the four lanes 4g .. 4g + 3 share rows g and g + 8.
/// The H200 driver's (lease 19), not mma.m16n8k16's fragment order.
pub fn assumed_acc(lane: u32, i: u32) -> (u32, u32) {
    let (g, t) = (lane / 4, lane % 4);
    (g + 8 * (i >> 2), 2 * t + (i & 1) + 8 * ((i >> 1) & 1))
}

/// The f16 A operand's layout the kernels assume: the accumulator's coordinates in [`a_of`]'s
/// order, so that P and dS pass from one to the other element for element.
pub fn assumed_a(lane: u32, i: u32) -> (u32, u32) {
    assumed_acc(lane, a_of(i))
}

/// Floats the probe writes a lane: the two lengths, 8 accumulator and 8 A elements.
pub const PROBE_STRIDE: usize = 18;

/// What shaders/coop_layout_probe.comp's output (32 lanes x [`PROBE_STRIDE`] floats) says: the
/// assumed layout, or the first difference with what lanes 0, 1 and 4 hold of that matrix (enough
/// to write the layout down: g and t of lane 4g + t).
pub fn read_probe(out: &[f32]) -> CoopLayout {
    if out.len() < 32 * PROBE_STRIDE {
        return CoopLayout::Other(format!(
            "the probe returned {} floats, expected {}",
            out.len(),
            32 * PROBE_STRIDE
        ));
    }
    let lane_out = |lane: u32| &out[lane as usize * PROBE_STRIDE..][..PROBE_STRIDE];
    let held = |lane: u32, at: usize| -> String {
        let seen: Vec<String> = lane_out(lane)[at..at + 8]
            .iter()
            .map(|&x| format!("({}, {})", x as i32 / 16, x as i32 % 16))
            .collect();
        format!("lane {lane}: {}", seen.join(" "))
    };
    type Layout = fn(u32, u32) -> (u32, u32);
    for lane in 0..32u32 {
        let o = lane_out(lane);
        if o[0] != 8.0 || o[1] != 8.0 {
            return CoopLayout::Other(format!(
                "lane {lane} holds {} accumulator and {} A elements (the kernel assumes 8 and 8)",
                o[0], o[1]
            ));
        }
    }
    for (what, at, layout) in [
        ("accumulator", 2usize, assumed_acc as Layout),
        ("A", 10, assumed_a as Layout),
    ] {
        for lane in 0..32u32 {
            for i in 0..8u32 {
                let (r, c) = layout(lane, i);
                if lane_out(lane)[at + i as usize] != (16 * r + c) as f32 {
                    return CoopLayout::Other(format!(
                        "lane {lane}'s {what} element {i} is not at ({r}, {c}); the {what}'s \
                         elements are at {}; {}; {}",
                        held(0, at),
                        held(1, at),
                        held(4, at)
                    ));
                }
            }
        }
    }
    CoopLayout::Assumed
}

/// The probe as a plan (one subgroup, one `OUT` buffer of 32 x [`PROBE_STRIDE`] floats), run
/// by the runner like any other.
pub fn probe_plan(build: Build) -> Plan {
    layout_probe_plan(&format!("{}{}", layout_probe_module(false), tail(build)))
}

/// The probe of the bf16 A operand's layout (the device build of coop_layout_probe.comp with
/// BF16 = 1; a device with bf16 cooperative matrices only).
pub fn probe_plan_bf16() -> Plan {
    layout_probe_plan(&layout_probe_module(true))
}

fn layout_probe_plan(module: &str) -> Plan {
    let bytes = (32 * PROBE_STRIDE * 4) as u64;
    Plan {
        variant: "probe-coop-layout".into(),
        buffers: vec![super::buf("OUT", bytes, Role::Output, false)],
        dispatches: vec![Dispatch {
            name: "coop_layout".into(),
            phase: Phase::Forward,
            saved: vec![],
            shader: spirv_shader("coop_layout_probe.comp", PROBE_SOURCE, module),
            entry: "main",
            overrides: vec![],
            params: Params::new(1, 0, 0, false, 1.0),
            bindings: vec![super::bind("OUT", Access::ReadWrite)],
            workgroups: [1, 1, 1],
            reads_bytes: 0,
            writes_bytes: bytes,
            flops: 0,
            loop_iters: 0,
            note: "which elements of a 16 x 16 cooperative matrix each lane holds".into(),
        }],
        output: "OUT".into(),
        config: vec![],
        notes: vec![],
        tile: None,
        grads: vec![],
        training_note: None,
    }
}

/// Runs the layout probe on `gpu` (for [`Build::Device`]: a Vulkan device with cooperative
/// matrices, passthrough shaders and 32-wide subgroups) and reads it. A failure to run is
/// reported as such.
pub fn probe(gpu: &Gpu, build: Build) -> CoopLayout {
    run_probe(gpu, &probe_plan(build))
}

/// Runs the bf16 layout probe ([`probe_plan_bf16`]) on `gpu` (which has bf16 cooperative
/// matrices) and reads it.
pub fn probe_bf16(gpu: &Gpu) -> CoopLayout {
    run_probe(gpu, &probe_plan_bf16())
}

fn run_probe(gpu: &Gpu, plan: &Plan) -> CoopLayout {
    let run = || -> crate::Result<Vec<f32>> {
        let inputs = Inputs::none();
        let schedule = Schedule {
            warmup: 0,
            reps: 1,
            host_reps: 0,
            warmup_ms: None,
        };
        Ok(Runner::new(gpu)?.execute(plan, &inputs, schedule)?.output)
    };
    match run() {
        Ok(out) => read_probe(&out),
        Err(e) => CoopLayout::Other(format!("the layout probe did not run: {e}")),
    }
}
