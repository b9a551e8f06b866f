//! `dropout` (shaders/dropout.wgsl): dropout on the N x N probabilities as its own dispatch, for
//! the materialized plans (`unfused*`, `math`), out of place (`copy`: P -> PD, P kept for
//! softmax's backward) or in place; and its backward, the same factors applied to dP in place.
//! The fused kernels drop inside themselves (shaders/philox.wgsl appended by `kernel!`).

use super::{bind, ew_grid, kernel, Storage};
use crate::gpu::AdapterCaps;
use crate::plan::{Access, Dispatch, Params, Phase};

/// Threads of the dispatch: one per (head, row quad, key).
fn grid(params: &Params, caps: &AdapterCaps) -> [u32; 3] {
    let n = params.seq as u64;
    ew_grid(
        params.heads as u64 * n.div_ceil(4) * params.kv_seq as u64,
        caps,
    )
}

/// `to` = `from` ∘ the dropout factors (`to` == `from`: in place).
pub fn dropout(params: Params, from: &str, to: &str, caps: &AdapterCaps) -> Dispatch {
    let nn = params.heads as u64 * params.seq as u64 * params.kv_seq as u64;
    let in_place = from == to;
    let bindings = if in_place {
        vec![bind(to, Access::ReadWrite)]
    } else {
        vec![bind(to, Access::ReadWrite), bind(from, Access::Read)]
    };
    Dispatch {
        name: "dropout".into(),
        phase: Phase::Forward,
        saved: vec![],
        shader: kernel!("dropout.wgsl", Storage::F32, None, dropout = true),
        entry: if in_place { "in_place" } else { "copy" },
        overrides: vec![],
        params,
        bindings,
        workgroups: grid(&params, caps),
        reads_bytes: nn * 4,
        writes_bytes: nn * 4,
        // One Philox4x32-10 call (about 20 emulated 32 x 32 -> 64-bit products) per 4 elements
        // is integer work, not counted; the multiply is.
        flops: nn,
        // Up to 4 rows of a quad, and the 10 Philox rounds.
        loop_iters: 5 + 11,
        note: if in_place {
            format!("{to} ∘= keep / (1 - p), in place (Philox4x32-10 keep mask)")
        } else {
            format!("{to} = {from} ∘ keep / (1 - p), a new N x N buffer ({from} is kept for softmax's backward)")
        },
    }
}

/// Dropout's backward on `dp` in place: dP ∘= the same factors.
pub fn dropout_bwd(params: Params, dp: &str, caps: &AdapterCaps) -> Dispatch {
    let mut d = dropout(params, dp, dp, caps);
    d.name = "dropout_bwd".into();
    d.phase = Phase::Backward;
    d.note = format!("{dp} ∘= keep / (1 - p), in place: dropout's backward");
    d
}
