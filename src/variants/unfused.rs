//! `unfused` and `unfused-inplace`: attention as the five textbook steps, each its own dispatch,
//! with the N x N score matrix materialized in device memory between them.
//!
//! ```text
//! qk      S  = Q Kᵀ                       (kernels/qk.rs, shaders/qk.wgsl)
//! scale   S *= scale        in place      (shaders/scale.wgsl)
//! copy    S2 = S.clone()      only in `unfused`: the copy inside an out-of-place masked_fill
//! mask    S2.masked_fill_(-inf)  (`unfused`) or S.masked_fill_(-inf) (`unfused-inplace`),
//!         plus the additive mask bias when there is one
//!                                          (shaders/mask.wgsl, entries `copy` and `in_place`)
//! softmax P  = softmax(S) row-wise, in place (shaders/softmax.wgsl; softmax4.wgsl when N % 4 == 0)
//! pv      O  = P V                         (shaders/pv.wgsl)
//! ```
//! Q, K, V and O are in the run's dtype; S (and S2) are f32. Fully-masked rows come out NaN here
//! (a plain softmax divides 0 by 0).
//!
//! # Chunking
//! When all heads' N x N scores do not fit one storage binding or one buffer, S (and S2) hold only
//! `c` heads and the five steps repeat for each chunk of `c` heads (Params.head_offset says which);
//! the plan then lists the dispatches once per chunk. Refused only when one head's N x N cannot be
//! bound.

use crate::gpu::AdapterCaps;
use crate::kernels::{
    buf, check_binding, check_grid, check_mask, chunks, heads_per_chunk,
    mask::{copy, mask},
    pv::{self, pv},
    qk::{self, qk},
    scale::scale,
    softmax::softmax,
    Storage,
};
use crate::plan::{Params, Plan, Role};
use crate::problem::Problem;

pub fn build_out_of_place(p: &Problem, caps: &AdapterCaps) -> Result<Plan, String> {
    build(p, caps, false)
}

pub fn build_in_place(p: &Problem, caps: &AdapterCaps) -> Result<Plan, String> {
    build(p, caps, true)
}

fn build(p: &Problem, caps: &AdapterCaps, in_place: bool) -> Result<Plan, String> {
    let st = Storage::of(p.dtype);
    let n = p.seq as u64;
    let bh = p.bh();
    let qkv = p.qkv_bytes();

    check_binding("Q/K/V", qkv, caps)?;
    let mask_bytes = check_mask(p, caps)?;
    let per = heads_per_chunk(p, caps)?;
    let parts = chunks(bh, per);
    let nn_bytes = per * n * n * 4;
    check_grid("B*H (one workgroup layer per head)", per, caps)?;

    let mut buffers = vec![
        buf("Q", qkv, Role::Input, false),
        buf("K", qkv, Role::Input, false),
        buf("V", qkv, Role::Input, false),
    ];
    if mask_bytes > 0 {
        buffers.push(buf(crate::kernels::MASK, mask_bytes, Role::Input, false));
    }
    buffers.push(buf("S", nn_bytes, Role::Intermediate, true));
    // After the mask, the probabilities live in S (in place) or in the copy S2 (out of place).
    let masked = if in_place { "S" } else { "S2" };
    if !in_place {
        buffers.push(buf("S2", nn_bytes, Role::Intermediate, true));
    }
    buffers.push(buf("O", qkv, Role::Output, false));

    let mut dispatches = Vec::new();
    for &(first, count) in &parts {
        let params = Params::of(p).chunk(first as u32, count as u32);
        dispatches.push(qk(
            st,
            params,
            ["Q", "K", "S"],
            caps,
            "S = Q·Kᵀ, all N x N scores (masked ones too)",
        )?);
        dispatches.push(scale(params, "S", caps));
        if !in_place {
            dispatches.push(copy(st, params, "S", "S2", caps));
        }
        dispatches.push(mask(p, st, params, masked, caps));
        dispatches.push(softmax(params, masked, caps));
        dispatches.push(pv(
            st,
            params,
            [masked, "V", "O"],
            caps,
            "O = P·V over all N keys (the zeros above the diagonal too)",
        )?);
    }

    let mut notes = vec![format!(
        "{} N x N buffer(s) of {} bytes each are materialized (f32 scores)",
        if in_place { 1 } else { 2 },
        nn_bytes
    )];
    if parts.len() > 1 {
        notes.push(format!(
            "chunked: B*H = {bh} heads do not fit one binding of N x N scores; {} chunks of up to \
             {per} heads, each dispatch repeated per chunk",
            parts.len()
        ));
    }
    if !in_place {
        notes.push("mask applied out of place: +1 dispatch (copy) and +1 N x N buffer (S2)".into());
    } else {
        notes.push(
            "mask applied in place: unsafe for training, where backward needs the unmasked scores"
                .into(),
        );
    }
    if p.causal && p.mask.bias.is_some() {
        notes.push("causal AND explicit mask / key padding: their intersection".into());
    }
    notes.push("a row with no allowed key returns NaN (plain softmax: 0/0)".into());
    Ok(Plan {
        variant: String::new(),
        buffers,
        dispatches,
        output: "O".into(),
        config: vec![
            ("QK_TILE".into(), qk::TILE as f64),
            ("PV_TM".into(), pv::TM as f64),
            ("PV_TN".into(), pv::TN as f64),
            ("heads_per_chunk".into(), per as f64),
            ("chunks".into(), parts.len() as f64),
        ],
        notes,
        tile: None,
    })
}
