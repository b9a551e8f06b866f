//! `unfused-coop`'s two matrix products on cooperative matrices (tensor cores):
//! shaders/gemm_coop_vk.comp, GLSL with GL_KHR_cooperative_matrix compiled to SPIR-V by build.rs
//! for D = 64, 128 and 256 and run through wgpu's PASSTHROUGH_SHADERS (Vulkan only, f16), like
//! `tiled-coop-vk`'s kernels (tiled_coop_vk.rs: the adapter checks, the element layout the
//! kernels assume and its probe, the emulated build the tests run on lavapipe).
//!
//! | dispatch | what                                                                   |
//! |----------|------------------------------------------------------------------------|
//! | `qk`     | S = Q·Kᵀ: a workgroup per 64 rows x 64 keys, K staged 32 columns at a time, f16 or bf16 products, f32 sums; S leaves through workgroup memory as whole rows of 16-byte words (f32) or 8-byte ones (16-bit scores) |
//! | `pv`     | O = P·V: a workgroup per 64 rows; blocks of 32 keys of P (rounded to the storage dtype) and V staged in workgroup memory |
//!
//! They take the places of qk.wgsl and pv.wgsl in `unfused-inplace`'s plan: the same five
//! dispatches, the N x N scores between them in f32 or ([`Scores`], `SH` in the shader) in the
//! storage dtype, as PyTorch's naive path keeps them.

use super::tiled_coop_vk::{
    adapter_check, dtype_check, emulation_bytes, gemm_module, spirv_shader, tail, Build,
    GEMM_HEAD_DIMS,
};
use super::{bind, check_grid, Scores, Storage};
use crate::gpu::AdapterCaps;
use crate::plan::{Access, Dispatch, Params, Phase, Shader};
use crate::problem::Problem;

/// Rows (and, in `qk`, keys) a workgroup owns.
pub const TILE: u64 = 64;
/// Rows past the last head the kernels' matrix loads of Q, K and V may read (one 64-row tile):
/// the plan pads those buffers by this many rows.
pub const PAD_ROWS: u64 = 64;
/// The head dimensions build.rs compiles the kernels for.
pub const HEAD_DIMS: [u32; 3] = GEMM_HEAD_DIMS;

const SOURCE: &str = include_str!("../../shaders/gemm_coop_vk.comp");

/// Bytes of each of the Q, K, V buffers of `p` as these kernels read them (the tensor plus
/// [`PAD_ROWS`] rows of zeros).
pub fn padded(bytes: u64, p: &Problem) -> u64 {
    bytes + PAD_ROWS * p.head_dim as u64 * 2
}

/// Keys of P and V a `pv` workgroup stages at a time (BK in the shader).
const PV_BLOCK: u64 = 32;

/// Columns of D a `qk` workgroup stages of K at a time (KC in the shader).
const QK_CHUNK: u64 = 32;

/// Workgroup storage of product `qk` (else `pv`) at head dimension `d`, the emulation's aside:
/// `qk` four 16 x (64 + 4) f32 tiles of S and K's 64 x (32 + 8) chunk; `pv` P's 64 x (32 + 8) and
/// V's 32 x (D + 8), f16 or bf16.
pub fn storage(qk: bool, d: u64) -> u64 {
    if qk {
        4 * 16 * (64 + 4) * 4 + TILE * (QK_CHUNK + 8) * 2
    } else {
        (TILE * (PV_BLOCK + 8) + PV_BLOCK * (d + 8)) * 2
    }
}

/// Why the products cannot run `p` on this adapter in `build`, if they cannot.
pub fn check(p: &Problem, caps: &AdapterCaps, build: Build) -> Result<(), String> {
    adapter_check(caps, build)?;
    dtype_check(p, caps, build)?;
    if !HEAD_DIMS.contains(&p.head_dim) {
        return Err(format!(
            "the products are compiled for D = 64, 128 and 256 (got --head-dim {})",
            p.head_dim
        ));
    }
    let need = emulation_bytes(build)
        + storage(true, p.head_dim as u64).max(storage(false, p.head_dim as u64));
    if need > caps.max_workgroup_storage as u64 {
        return Err(format!(
            "the products need {need} bytes of workgroup storage at D = {}, this adapter allows {}",
            p.head_dim, caps.max_workgroup_storage
        ));
    }
    Ok(())
}

fn shader(qk: bool, d: u32, st: Storage, sc: Scores, build: Build) -> Shader {
    let module = gemm_module(st == Storage::Bf16, qk, sc != Scores::F32, d);
    spirv_shader(
        "gemm_coop_vk.comp",
        SOURCE,
        &format!("{module}{}", tail(build)),
    )
}

/// Loop iterations an invocation runs per matrix product and per matrix load or store (what
/// Mesa's llvmpipe caps: the emulation's loops, shaders/coopmat_emu.glsl; the device build has
/// none).
fn loops_per(build: Build) -> (u64, u64) {
    match build {
        Build::Device => (0, 0),
        Build::Emulated => (8 + 8 * 17, 8),
    }
}

/// Heads of the chunk in `params`, N, M and D.
fn dims(params: &Params) -> (u64, u64, u64, u64) {
    (
        params.heads as u64,
        params.seq as u64,
        params.kv_seq as u64,
        params.head_dim as u64,
    )
}

/// The dispatch of product `qk` (else `pv`) with its three buffers, grid, traffic and loops; both
/// do 2 N M D FLOPs per head.
#[allow(clippy::too_many_arguments)]
fn dispatch(
    qk: bool,
    params: Params,
    [a, b, out]: [&str; 3],
    shader: Shader,
    workgroups: [u32; 3],
    reads_bytes: u64,
    writes_bytes: u64,
    loop_iters: u64,
    note: &str,
) -> Dispatch {
    let (count, n, m, d) = dims(&params);
    Dispatch {
        name: if qk { "qk" } else { "pv" }.into(),
        phase: Phase::Forward,
        saved: vec![],
        shader,
        entry: "main",
        overrides: vec![],
        params,
        bindings: vec![
            bind(a, Access::Read),
            bind(b, Access::Read),
            bind(out, Access::ReadWrite),
        ],
        workgroups,
        reads_bytes,
        writes_bytes,
        flops: 2 * count * n * m * d,
        loop_iters,
        note: note.into(),
    }
}

/// `qk`: S (`[count, N, M]`, stored as `sc` says) = Q·Kᵀ for the chunk of heads in `params`, Q and
/// K in storage `st` (f16 or bf16).
pub fn qk(
    st: Storage,
    sc: Scores,
    params: Params,
    bufs: [&str; 3],
    caps: &AdapterCaps,
    build: Build,
) -> Result<Dispatch, String> {
    let (count, n, m, d) = dims(&params);
    let (mma, load) = loops_per(build);
    Ok(dispatch(
        true,
        params,
        bufs,
        shader(true, params.head_dim, st, sc, build),
        [
            check_grid("M / 64 key tiles", m.div_ceil(TILE), caps)?,
            check_grid("N / 64 row tiles", n.div_ceil(TILE), caps)?,
            check_grid("heads of the chunk", count, caps)?,
        ],
        count * (n + m) * d * 2,
        count * n * m * sc.bytes(),
        4 + d / QK_CHUNK * (1 + 4 + 4 + QK_CHUNK / 16 * (1 + load + 4 * (1 + load + mma)))
            + 4 * (1 + load)
            + 8 * 5
            + 4,
        &format!(
            "S = Q·Kᵀ on cooperative matrices (f16 or bf16 products, f32 sums), all N x M scores, \
             K staged in chunks of 32 columns, {}",
            if sc == Scores::F32 {
                "S written in f32 as rows of 16-byte words"
            } else {
                "S rounded to the storage dtype as it is written"
            }
        ),
    ))
}

/// `pv`: O = P·V for the chunk of heads in `params`, V and O in storage `st` (f16 or bf16); P
/// (`[count, N, M]`, stored as `sc` says) is rounded to that dtype as it is loaded (if f32).
pub fn pv(
    st: Storage,
    sc: Scores,
    params: Params,
    bufs: [&str; 3],
    caps: &AdapterCaps,
    build: Build,
) -> Result<Dispatch, String> {
    let (count, n, m, d) = dims(&params);
    let (mma, load) = loops_per(build);
    let d16 = d / 16;
    Ok(dispatch(
        false,
        params,
        bufs,
        shader(false, params.head_dim, st, sc, build),
        [
            1,
            check_grid("N / 64 row tiles", n.div_ceil(TILE), caps)?,
            check_grid("heads of the chunk", count, caps)?,
        ],
        count * n * m * sc.bytes() + count * m * d * 2,
        count * n * d * 2,
        m.div_ceil(PV_BLOCK)
            * (1 + 4 * 5 + PV_BLOCK * d / 4 / 128 + 2 * (1 + load + d16 * (1 + load + mma)))
            + d16 * (1 + 4)
            + 1,
        "O = P·V on cooperative matrices over all M keys (P and V staged in blocks of 32 keys, \
         P rounded to the storage dtype)",
    ))
}
