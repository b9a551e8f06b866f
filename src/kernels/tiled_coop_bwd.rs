//! `tiled-coop`'s backward (`--backward`): FlashAttention-2's two fused backward passes on
//! cooperative matrices, f16 in device memory and f32 accumulators, after `tiled_bwd::bwd_dot`
//! (D = rowsum(dO ∘ O)):
//!
//! | dispatch  | WGSL                                               | what |
//! |-----------|----------------------------------------------------|------|
//! | `bwd_kv`  | tiled_coop_bwd_kv.wgsl + tiled_coop_lib.wgsl + tiled_mask.wgsl | dK, dV: a workgroup per 64 keys (16 a subgroup, four subgroups) walks the query blocks of 16 rows |
//! | `bwd_q`   | tiled_coop_bwd_q.wgsl + tiled_coop_lib.wgsl + tiled_mask.wgsl  | dQ: a workgroup per 128 rows (16 a subgroup, eight subgroups) walks the key blocks of 16 |
//!
//! The forward (tiled_coop.rs, with tiled_lse.wgsl appended) writes the row logsumexp L; both
//! passes recompute P from Q, K and L. Per 16 x 16 tile, dK/dV runs four products (Sᵀ, dPᵀ,
//! dV, dK) and dQ three (S, dP, dQ), P and dS crossing workgroup memory as in the forward
//! (wgpu 30's cooperative matrices have no element access). D <= 64, a multiple of 16.

use super::tiled_bwd::bindings;
use super::{check_grid, kernel, mask_slot, Storage};
use crate::gpu::AdapterCaps;
use crate::plan::{Dispatch, Params, Phase};
use crate::problem::Problem;

/// Keys per bwd_kv workgroup: 16 per subgroup, four subgroups.
pub const KV_BLOCK: u64 = 64;
/// Query rows per bwd_q workgroup: 16 per subgroup, eight subgroups (four were 3 % slower on the
/// H200: results/EXPERIMENTS.md, v34-bwd-kv-direct; eight were 13 % slower for bwd_kv).
pub const Q_BLOCK: u64 = 128;
/// Query rows (bwd_kv) or keys (bwd_q) per step of the walk.
pub const STEP: u64 = 16;
/// The widest head the kernels take: each subgroup holds D / 16 f16 matrices of two operands and
/// f32 accumulators of two gradients (bwd_kv) in registers.
pub const MAX_HEAD_DIM: u32 = 64;

/// Workgroup storage of the larger pass at head dimension `d`. bwd_kv: Q/dO staging
/// 2 x 16 x (d + 8) f16 (K and V are read as matrices straight from device memory), P then dS
/// 4 x 256 f16, Sᵀ then dPᵀ 4 x 256 f32, L and D 2 x 16 f32; bwd_q: K/V staging 2 x 16 x (d + 8)
/// f16, dS 8 x 256 f16, S then dP 8 x 256 f32. Workgroup storage is what limits these kernels on
/// the H200 (results/EXPERIMENTS.md, v34-bwd-kv-direct): keep it small.
pub fn storage(d: u32) -> u64 {
    let staging = 2 * STEP * (d as u64 + 8) * 2;
    let kv = staging + 1024 * 2 + 1024 * 4 + 2 * 16 * 4;
    let q = staging + 2048 * 2 + 2048 * 4;
    kv.max(q)
}

/// Why the backward cannot run this problem here, if it cannot.
pub fn check(p: &Problem, caps: &AdapterCaps) -> Result<(), String> {
    if p.head_dim > MAX_HEAD_DIM {
        return Err(format!(
            "the cooperative-matrix backward (tiled_coop_bwd_kv.wgsl) keeps K, V, dK and dV of its \
             16 keys as D / 16 matrices each in a subgroup's registers: D <= {MAX_HEAD_DIM} (got \
             --head-dim {})",
            p.head_dim
        ));
    }
    let need = storage(p.head_dim);
    if need > caps.max_workgroup_storage as u64 {
        return Err(format!(
            "the cooperative-matrix backward needs {need} bytes of workgroup storage at D = {}, \
             this adapter allows {}",
            p.head_dim, caps.max_workgroup_storage
        ));
    }
    Ok(())
}

/// (16 x 16 tiles visited per head by a walk of `STEP`-blocks, the
/// allowed (row, key) pairs per head): rows owned (dQ) or keys owned (dK/dV) do not change the
/// count, only which side walks.
fn visited(p: &Problem) -> (u64, u64) {
    let n = p.seq as u64;
    let (mut tiles, mut pairs) = (0, 0);
    for qb in 0..n.div_ceil(STEP) {
        let rows = STEP.min(n - qb * STEP);
        let keys = p.keys_for_row(n.min((qb + 1) * STEP) - 1);
        tiles += keys.div_ceil(STEP);
        pairs += rows * keys;
    }
    (tiles, pairs)
}

/// `bwd_kv`: dK and dV, a workgroup per 64 keys of a K/V head (its group's query heads in turn).
pub fn bwd_kv(p: &Problem, caps: &AdapterCaps) -> Result<Dispatch, String> {
    pass(p, caps, true)
}

/// `bwd_q`: dQ, a workgroup per 128 query rows of a head.
pub fn bwd_q(p: &Problem, caps: &AdapterCaps) -> Result<Dispatch, String> {
    pass(p, caps, false)
}

fn pass(p: &Problem, caps: &AdapterCaps, kv: bool) -> Result<Dispatch, String> {
    let (tiles, pairs) = visited(p);
    let (d, e, bh) = (p.head_dim as u64, p.dtype.bytes(), p.bh());
    let (st, drop) = (Storage::of(p.dtype), p.dropout().is_some());
    let b = bindings(p, if kv { &["dK", "dV"] } else { &["dQ"] });
    let mask = if p.mask.bias.is_some() {
        bh * pairs * 4
    } else {
        0
    };
    // Per 64 owned keys (rows) and visited block: 16 rows of Q and dO with L and D (16 keys of K
    // and V).
    let block = if kv { KV_BLOCK } else { Q_BLOCK };
    let walked = bh * tiles.div_ceil(block / STEP) * STEP;
    let (name, shader, grid, reads, writes, products, note) = if kv {
        (
            "bwd_kv",
            kernel!(
                "tiled_coop_bwd_kv.wgsl" + "tiled_coop_lib.wgsl" + "tiled_mask.wgsl",
                st,
                mask_slot(&b),
                dropout = drop
            ),
            [
                check_grid(
                    "M / 64 key blocks",
                    (p.kv_seq as u64).div_ceil(KV_BLOCK),
                    caps,
                )?,
                check_grid("B*Hkv", p.batch as u64 * p.kv_heads as u64, caps)?,
            ],
            2 * p.kv_bytes() + walked * (2 * d * e + 8),
            2 * p.kv_bytes(),
            4,
            "dK, dV on cooperative matrices: a workgroup per 64 keys walks the query blocks of 16 \
             (from the diagonal when causal); Sᵀ, dPᵀ, dV += (P∘Z)ᵀ dO, dK += dSᵀ Q per tile, P \
             and dS rounded to f16 through workgroup memory",
        )
    } else {
        (
            "bwd_q",
            kernel!(
                "tiled_coop_bwd_q.wgsl" + "tiled_coop_lib.wgsl" + "tiled_coop_kv.wgsl" + "tiled_mask.wgsl",
                st,
                mask_slot(&b),
                dropout = drop
            ),
            [
                check_grid("N / 128 row blocks", (p.seq as u64).div_ceil(Q_BLOCK), caps)?,
                check_grid("B*H", bh, caps)?,
            ],
            2 * p.qkv_bytes() + bh * p.seq as u64 * 8 + walked * 2 * d * e,
            p.qkv_bytes(),
            3,
            "dQ on cooperative matrices: a workgroup per 128 rows walks the key blocks of 16 (up to \
             the diagonal when causal); S, dP, dQ += dS K per tile, dS rounded to f16 through \
             workgroup memory",
        )
    };
    Ok(Dispatch {
        name: name.into(),
        phase: Phase::Backward,
        saved: vec![],
        shader,
        entry: "main",
        overrides: vec![("D16".to_string(), (p.head_dim / 16) as f64)],
        params: Params::of(p),
        bindings: b,
        workgroups: [grid[0], grid[1], 1],
        reads_bytes: reads + mask,
        writes_bytes: writes,
        flops: bh * pairs * d * 2 * products,
        // No adapter with a loop cap offers cooperative matrices: one iteration per walked key
        // or row and 16 columns of D, unmeasured.
        loop_iters: p.seq.max(p.kv_seq) as u64 * d.div_ceil(16) + 64,
        note: note.into(),
    })
}
