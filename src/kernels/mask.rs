//! `copy` and `mask` (shaders/mask.wgsl): the clone inside an out-of-place `masked_fill`, and the
//! fill itself (entries `in_place` and, for a causal-only mask over vec4 rows, `causal_rows`).

use super::{bind, ew_grid, mask_read_bytes, mask_slot, scores_kernel, with_mask, Scores, Storage};
use crate::gpu::AdapterCaps;
use crate::plan::{grid_2d, Access, Dispatch, Params};
use crate::problem::Problem;

/// Rows of S per workgroup of `causal_rows`. On the H200 at B8 H16 N1024 f32
/// (results/EXPERIMENTS.md, v5): 1 row 145.9 µs, 2 rows 91.9, 4 rows 95.6, 8 rows 103.4.
pub const CAUSAL_ROWS: u64 = 2;

/// `to` = a copy of `from` (both `[count, N, N]` f32): a full read and write of N x N.
/// (Only `unfused` copies, and it keeps f32 scores.)
pub fn copy(st: Storage, params: Params, from: &str, to: &str, caps: &AdapterCaps) -> Dispatch {
    let nn = params.heads as u64 * params.seq as u64 * params.kv_seq as u64;
    let bindings = vec![bind(from, Access::ReadWrite), bind(to, Access::ReadWrite)];
    Dispatch {
        name: "copy".into(),
        phase: crate::plan::Phase::Forward,
        saved: vec![],
        shader: scores_kernel!(Scores::F32, "mask.wgsl", st, mask_slot(&bindings)),
        entry: "copy",
        overrides: vec![],
        params,
        bindings,
        workgroups: ew_grid(nn.div_ceil(4), caps),
        reads_bytes: nn * 4,
        writes_bytes: nn * 4,
        flops: 0,
        loop_iters: 0,
        note: format!(
            "the clone inside an out-of-place masked_fill: {from} -> new N x N buffer {to}"
        ),
    }
}

/// `masked_fill_` on `s` in place: -inf above the diagonal (causal), plus the mask bias when the
/// problem has one; dispatched even with no mask at all, so the trace keeps its shape. The scores
/// are stored as `sc` says.
pub fn mask(
    p: &Problem,
    st: Storage,
    sc: Scores,
    params: Params,
    s: &str,
    caps: &AdapterCaps,
) -> Dispatch {
    let count = params.heads as u64;
    let n = params.seq as u64;
    let m = params.kv_seq as u64;
    let nn = count * n * m;
    let bytes = nn * sc.bytes();
    // Scores the causal rule blocks, per head.
    let blocked = n * m - p.allowed_pairs_per_head();
    let bindings = with_mask(p, vec![bind(s, Access::ReadWrite)]);
    let (reads, writes, note) = if p.mask.bias.is_some() {
        (
            bytes + mask_read_bytes(p, count),
            bytes,
            format!(
                "{s} += mask bias (read per head){}, in place",
                if p.causal {
                    "; -inf above the diagonal"
                } else {
                    ""
                }
            ),
        )
    } else if p.causal {
        (
            0,
            count * blocked * sc.bytes(),
            format!("masked_fill_ on {s}: writes -inf above the diagonal, reads nothing"),
        )
    } else {
        (
            0,
            0,
            "no mask: dispatched but touches no memory (keeps the trace's shape)".into(),
        )
    };
    // Causal only: the row-structured kernel (no division per element) when rows are vec4s.
    let causal_rows = m.is_multiple_of(4) && p.causal && p.mask.bias.is_none();
    Dispatch {
        name: "mask".into(),
        phase: crate::plan::Phase::Forward,
        saved: vec![],
        shader: scores_kernel!(sc, "mask.wgsl", st, mask_slot(&bindings)),
        entry: if causal_rows {
            "causal_rows"
        } else {
            "in_place"
        },
        overrides: if causal_rows {
            vec![("ROWS".to_string(), CAUSAL_ROWS as f64)]
        } else {
            vec![]
        },
        params,
        bindings,
        workgroups: if causal_rows {
            grid_2d(
                (count * n).div_ceil(CAUSAL_ROWS),
                caps.max_workgroups_per_dimension,
            )
        } else {
            ew_grid(nn.div_ceil(4), caps)
        },
        reads_bytes: reads,
        writes_bytes: writes,
        flops: if p.mask.bias.is_some() { nn } else { 0 },
        // causal_rows: per row, the vec4s right of the diagonal in steps of 256 threads; in_place:
        // the bias's 4 elements.
        loop_iters: if causal_rows {
            CAUSAL_ROWS * ((m / 4).div_ceil(256) + 2) + 1
        } else {
            5
        },
        note,
    }
}
