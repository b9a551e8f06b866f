//! FlashAttention-2's backward for the `tiled` training plans (`--backward`):
//!
//! | dispatch  | WGSL                                            | what                                   |
//! |-----------|-------------------------------------------------|----------------------------------------|
//! | `bwd_dot` | tiled_bwd_dot.wgsl                              | D = rowsum(dO ∘ O), 16 threads per row |
//! | `bwd_kv`  | tiled_bwd_kv.wgsl + tiled_bwd_common.wgsl       | dK, dV: a workgroup per 32 keys walks the query blocks |
//! | `bwd_q`   | tiled_bwd_q.wgsl + tiled_bwd_common.wgsl        | dQ: a workgroup per 32 rows walks the key blocks |
//!
//! Both fused kernels recompute P = exp2(S·scale·log2 e − L) from Q, K and the forward's row
//! logsumexp L (shaders/tiled_lse.wgsl) on chip; N x N never reaches device memory. Causal
//! block skipping as in the forward. Tiles of 32 x 32, D ≤ 64 (two row widths: D ≤ 32 and ≤ 64).

use super::{bind, check_grid, kernel, mask_slot, with_mask, Storage};
use crate::gpu::AdapterCaps;
use crate::plan::{grid_2d, Access, Dispatch, Params, Phase};
use crate::problem::Problem;

/// Rows and keys per tile of the fused backward kernels (tiled_bwd_common.wgsl's `BT`).
pub const BT: u64 = 32;
/// Largest head dimension they hold (16 vec4 per staged row).
pub const MAX_D: u32 = 64;
/// Workgroup storage of tiled_bwd_kv.wgsl for head dimension `d` (the larger of the two kernels;
/// its header derives it): Q, dO, K, V tiles of 32 rows x (D4 + 1) vec4 (one of padding), P and
/// dS tiles, L and D.
pub fn storage(d: u32) -> u64 {
    4 * BT * (d4(d) + 1) * 16 + 2 * BT * BT * 4 + 2 * BT * 4
}

/// vec4 slots per staged row: the kernels come in two widths (tiled_bwd_d32.wgsl, _d64.wgsl).
fn d4(d: u32) -> u64 {
    if d <= 32 {
        8
    } else {
        16
    }
}

/// Why the fused backward cannot run this problem here, if it cannot.
pub fn check(p: &Problem, caps: &AdapterCaps) -> Result<(), String> {
    if p.head_dim > MAX_D {
        return Err(format!(
            "the fused backward kernels (tiled_bwd_kv.wgsl, tiled_bwd_q.wgsl) hold at most D = \
             {MAX_D} columns per staged row (got --head-dim {})",
            p.head_dim
        ));
    }
    let need = storage(p.head_dim);
    if need > caps.max_workgroup_storage as u64 {
        return Err(format!(
            "the fused backward (tiled_bwd_kv.wgsl) needs {need} bytes of workgroup storage at \
             D = {}, this adapter allows {}",
            p.head_dim, caps.max_workgroup_storage
        ));
    }
    Ok(())
}

/// (visited 32 x 32 tiles per head, their (row, key) pairs per head).
fn visited(p: &Problem) -> (u64, u64) {
    let n = p.seq as u64;
    let m = p.kv_seq as u64;
    let (mut tiles, mut pairs) = (0, 0);
    for qb in 0..n.div_ceil(BT) {
        let rows = BT.min(n - qb * BT);
        // Key blocks up to the causal diagonal of the block's last row (all of M without causal).
        let keys = p.keys_for_row(n.min((qb + 1) * BT) - 1);
        for kb in 0..keys.div_ceil(BT) {
            tiles += 1;
            pairs += rows * BT.min(m - kb * BT);
        }
    }
    (tiles, pairs)
}

/// Loop iterations per walked key (dQ) or query row (dK/dV) of the fused backward passes as Mesa's
/// llvmpipe counts them, measured at D = 32 like the forward's (tiled.rs, `LOOPS_PER_KEY`; the
/// D = 64 passes need more workgroup storage than lavapipe has), scaled by D / 32 above it.
const BWD_LOOPS_PER_ROW_D32: [f64; 2] = [65535.0 / 48884.0, 65535.0 / 49088.0];

/// An upper bound of the loop iterations of the fused backward pass `which` (0: dQ, 1: dK/dV)
/// walking `rows` keys or query rows.
fn bwd_loops(d: u32, rows: u64, which: usize) -> u64 {
    let rate = BWD_LOOPS_PER_ROW_D32[which] * (d.max(32) as f64 / 32.0);
    (rate * 1.1 * rows as f64).ceil() as u64 + 64
}

/// `bwd_dot`: `delta` = rowsum(dO ∘ O).
pub fn bwd_dot(p: &Problem, [o, g, delta]: [&str; 3], caps: &AdapterCaps) -> Dispatch {
    let rows = p.bh() * p.seq as u64;
    Dispatch {
        name: "bwd_dot".into(),
        phase: Phase::Backward,
        saved: vec![],
        shader: kernel!("tiled_bwd_dot.wgsl", Storage::of(p.dtype), None),
        entry: "main",
        overrides: vec![],
        params: Params::of(p),
        bindings: vec![
            bind(o, Access::Read),
            bind(g, Access::Read),
            bind(delta, Access::ReadWrite),
        ],
        // 4 rows per workgroup of 64 threads (tiled_bwd_dot.wgsl).
        workgroups: grid_2d(rows.div_ceil(4), caps.max_workgroups_per_dimension),
        reads_bytes: 2 * p.qkv_bytes(),
        writes_bytes: rows * 4,
        flops: 2 * p.qkv_elems(),
        // A row's D columns in steps of its lanes, and the lanes' reduction.
        loop_iters: 2 * (p.head_dim as u64 + 2),
        note: format!("{delta} = rowsum(dO ∘ O), FlashAttention-2's D"),
    }
}

fn overrides(p: &Problem) -> Vec<(String, f64)> {
    vec![("HD".into(), p.head_dim as f64)]
}

/// The fused backward kernels' bindings (these and tiled_coop_bwd.rs's): Q, K, V, dO, L, D, the
/// gradients `outs`, then the mask.
pub(crate) fn bindings(p: &Problem, outs: &[&str]) -> Vec<crate::plan::BindingDecl> {
    let mut b = vec![
        bind("Q", Access::Read),
        bind("K", Access::Read),
        bind("V", Access::Read),
        bind("dO", Access::Read),
        bind("L", Access::Read),
        bind("Dl", Access::Read),
    ];
    b.extend(outs.iter().map(|o| bind(o, Access::ReadWrite)));
    with_mask(p, b)
}

/// The two fused kernels: which one, and what differs between them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fused {
    /// dK, dV: a workgroup per 32 keys walks the query blocks.
    Kv,
    /// dQ: a workgroup per 32 rows walks the key blocks.
    Q,
}

/// `bwd_kv`: dK and dV, one workgroup per 32 keys of a head.
pub fn bwd_kv(p: &Problem, caps: &AdapterCaps) -> Result<Dispatch, String> {
    fused(p, caps, Fused::Kv)
}

/// `bwd_q`: dQ, one workgroup per 32 query rows of a head.
pub fn bwd_q(p: &Problem, caps: &AdapterCaps) -> Result<Dispatch, String> {
    fused(p, caps, Fused::Q)
}

fn fused(p: &Problem, caps: &AdapterCaps, which: Fused) -> Result<Dispatch, String> {
    let n = p.seq as u64;
    let d = p.head_dim as u64;
    let e = p.dtype.bytes();
    let bh = p.bh();
    let (tiles, pairs) = visited(p);
    let st = Storage::of(p.dtype);
    let drop = p.dropout().is_some();
    let narrow = p.head_dim <= 32;
    let mask = if p.mask.bias.is_some() {
        bh * pairs * 4
    } else {
        0
    };
    let walk = if p.causal {
        match which {
            Fused::Kv => " from the diagonal",
            Fused::Q => " up to the diagonal",
        }
    } else {
        ""
    };
    let kv = p.kv_bytes();
    // bwd_kv: a workgroup per 32 keys of a K/V head (walking its group's query heads); bwd_q: per
    // 32 rows of a query head.
    let heads = match which {
        Fused::Kv => p.batch as u64 * p.kv_heads as u64,
        Fused::Q => bh,
    };
    let (name, b, shader, reads, writes, products, note) = match which {
        Fused::Kv => {
            let b = bindings(p, &["dK", "dV"]);
            let slot = mask_slot(&b);
            let shader = if narrow {
                kernel!(
                    "tiled_bwd_kv.wgsl" + "tiled_bwd_common.wgsl" + "tiled_bwd_d32.wgsl",
                    st,
                    slot,
                    dropout = drop
                )
            } else {
                kernel!(
                    "tiled_bwd_kv.wgsl" + "tiled_bwd_common.wgsl" + "tiled_bwd_d64.wgsl",
                    st,
                    slot,
                    dropout = drop
                )
            };
            (
                "bwd_kv",
                b,
                shader,
                // K and V once; per visited tile 32 rows of Q and dO, with L and D.
                2 * kv + bh * tiles * BT * (2 * d * e + 8),
                2 * kv,
                4,
                format!(
                    "dK, dV: a workgroup per 32 keys walks the query blocks{walk}; S, P, dP, dS \
                     recomputed on chip from Q, K, V, dO, L, D"
                ),
            )
        }
        Fused::Q => {
            let b = bindings(p, &["dQ"]);
            let slot = mask_slot(&b);
            let shader = if narrow {
                kernel!(
                    "tiled_bwd_q.wgsl" + "tiled_bwd_common.wgsl" + "tiled_bwd_d32.wgsl",
                    st,
                    slot,
                    dropout = drop
                )
            } else {
                kernel!(
                    "tiled_bwd_q.wgsl" + "tiled_bwd_common.wgsl" + "tiled_bwd_d64.wgsl",
                    st,
                    slot,
                    dropout = drop
                )
            };
            (
                "bwd_q",
                b,
                shader,
                // Q, dO, L, D once; per visited tile 32 keys of K and V.
                2 * p.qkv_bytes() + bh * n * 8 + bh * tiles * BT * 2 * d * e,
                p.qkv_bytes(),
                3,
                format!(
                    "dQ: a workgroup per 32 rows walks the key blocks{walk}; S, P, dP, dS \
                     recomputed on chip"
                ),
            )
        }
    };
    Ok(Dispatch {
        name: name.into(),
        phase: Phase::Backward,
        saved: vec![],
        shader,
        entry: "main",
        overrides: overrides(p),
        params: Params::of(p),
        bindings: b,
        workgroups: [
            match which {
                Fused::Kv => check_grid("M / 32 key blocks", (p.kv_seq as u64).div_ceil(BT), caps)?,
                Fused::Q => check_grid("N / 32 row blocks", n.div_ceil(BT), caps)?,
            },
            check_grid("B*H (B*Hkv for bwd_kv)", heads, caps)?,
            1,
        ],
        reads_bytes: reads + mask,
        writes_bytes: writes,
        flops: bh * pairs * d * 2 * products,
        // dQ walks the M keys; dK/dV the N query rows of each of the group's heads.
        loop_iters: match which {
            Fused::Q => bwd_loops(p.head_dim, p.kv_seq as u64, 0),
            Fused::Kv => bwd_loops(p.head_dim, p.group() as u64 * n, 1),
        },
        note,
    })
}
