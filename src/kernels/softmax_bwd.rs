//! The materialized backward's N x N steps (the `unfused*` and `math` training plans):
//! `softmax_bwd` (shaders/softmax_bwd.wgsl: dS = P ∘ (dP − rowsum(dP ∘ P)), in place over dP) and
//! `mask_bwd` (shaders/mask_bwd.wgsl: masked_fill's backward, dS = 0 where the mask blocked).

use super::{bind, ew_grid, kernel, mask_read_bytes, mask_slot, shader, with_mask, Storage};
use crate::gpu::AdapterCaps;
use crate::plan::{grid_2d, Access, Dispatch, Params, Phase};
use crate::problem::Problem;

/// dS (in the buffer `dp`) = P ∘ (dP − rowsum(dP ∘ P)), `p` being the saved probabilities.
pub fn softmax_bwd(params: Params, [dp, p]: [&str; 2], caps: &AdapterCaps) -> Dispatch {
    let rows = params.heads as u64 * params.seq as u64;
    let nn = rows * params.kv_seq as u64;
    Dispatch {
        name: "softmax_bwd".into(),
        phase: Phase::Backward,
        saved: vec![],
        shader: shader!("softmax_bwd.wgsl"),
        entry: "softmax_bwd",
        overrides: vec![],
        params,
        bindings: vec![bind(dp, Access::ReadWrite), bind(p, Access::Read)],
        workgroups: grid_2d(rows, caps.max_workgroups_per_dimension),
        reads_bytes: 2 * nn * 4,
        writes_bytes: nn * 4,
        flops: 4 * nn,
        loop_iters: row_loops(&params),
        note: format!("{dp} = {p} ∘ ({dp} − rowsum({dp} ∘ {p})), in place: softmax's backward"),
    }
}

/// masked_fill's backward on `ds` in place: 0 above the diagonal (causal) and where the bias is
/// -inf; reads dS only where the bias must be consulted.
pub fn mask_bwd(p: &Problem, params: Params, ds: &str, caps: &AdapterCaps) -> Dispatch {
    let count = params.heads as u64;
    let n = params.seq as u64;
    let nn = count * n * params.kv_seq as u64;
    let bindings = with_mask(p, vec![bind(ds, Access::ReadWrite)]);
    let writes = if p.mask.bias.is_some() {
        nn * 4
    } else if p.causal {
        count * (n * params.kv_seq as u64 - p.allowed_pairs_per_head()) * 4
    } else {
        0
    };
    Dispatch {
        name: "mask_bwd".into(),
        phase: Phase::Backward,
        saved: vec![],
        shader: kernel!("mask_bwd.wgsl", Storage::F32, mask_slot(&bindings)),
        entry: "main",
        overrides: vec![],
        params,
        bindings,
        workgroups: ew_grid(nn, caps),
        reads_bytes: mask_read_bytes(p, count),
        writes_bytes: writes,
        flops: 0,
        loop_iters: 0,
        note: format!(
            "masked_fill's backward: {ds} = 0 where the mask blocked ({})",
            if p.masked() {
                "causal and / or the bias"
            } else {
                "no mask: writes nothing"
            }
        ),
    }
}

/// The backward of `S.div_(L)` (`normalize_rows`) for the `unfused-inplace-exp` variant:
/// dE = (dY − rowsum(dY ∘ P)) / L over `dp` in place (shaders/softmax_bwd.wgsl).
pub fn normalize_bwd(params: Params, [dp, p, l]: [&str; 3], caps: &AdapterCaps) -> Dispatch {
    let rows = params.heads as u64 * params.seq as u64;
    let nn = rows * params.kv_seq as u64;
    Dispatch {
        name: "normalize_bwd".into(),
        phase: Phase::Backward,
        saved: vec![],
        shader: shader!("softmax_bwd.wgsl"),
        entry: "normalize_bwd",
        overrides: vec![],
        params,
        bindings: vec![
            bind(dp, Access::ReadWrite),
            bind(p, Access::Read),
            bind(l, Access::Read),
        ],
        workgroups: grid_2d(rows, caps.max_workgroups_per_dimension),
        reads_bytes: 2 * nn * 4 + rows * 4,
        writes_bytes: nn * 4,
        flops: 4 * nn,
        loop_iters: row_loops(&params),
        note: format!("div_'s backward: {dp} = ({dp} − rowsum({dp} ∘ {p})) / {l}"),
    }
}

/// The backward of `S.exp_()` (`exp_sum`): dX = dE ∘ E, E being exp_'s output as saved.
pub fn exp_bwd(params: Params, [dp, e]: [&str; 2], caps: &AdapterCaps) -> Dispatch {
    let nn = params.heads as u64 * params.seq as u64 * params.kv_seq as u64;
    Dispatch {
        name: "exp_bwd".into(),
        phase: Phase::Backward,
        saved: vec![],
        shader: shader!("softmax_bwd.wgsl"),
        entry: "exp_bwd",
        overrides: vec![],
        params,
        bindings: vec![bind(dp, Access::ReadWrite), bind(e, Access::Read)],
        workgroups: ew_grid(nn, caps),
        reads_bytes: 2 * nn * 4,
        writes_bytes: nn * 4,
        flops: nn,
        loop_iters: row_loops(&params),
        note: format!("exp_'s backward: {dp} ∘= exp_'s output, which it reads from {e}"),
    }
}

/// Loop iterations of a row kernel here: a row dot in steps of its 256 threads, the dot's tree
/// reduction, and one pass over the row.
fn row_loops(params: &Params) -> u64 {
    2 * ((params.kv_seq as u64).div_ceil(256) + 1) + 9
}
