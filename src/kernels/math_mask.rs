//! `build_mask` (shaders/math_mask.wgsl): `math` rebuilds the additive mask M = bias + causal
//! -inf on every call, as SDPA's math backend materializes attn_mask each time.

use super::{bind, ew_grid, kernel, mask_read_bytes, mask_slot, with_mask, Storage};
use crate::gpu::AdapterCaps;
use crate::plan::{Access, Dispatch, Params};
use crate::problem::Problem;

pub fn build_mask(p: &Problem, params: Params, m: &str, caps: &AdapterCaps) -> Dispatch {
    let count = params.heads as u64;
    let nn = count * p.seq as u64 * p.kv_seq as u64;
    let bindings = with_mask(p, vec![bind(m, Access::ReadWrite)]);
    Dispatch {
        name: "build_mask".into(),
        phase: crate::plan::Phase::Forward,
        saved: vec![],
        shader: kernel!("math_mask.wgsl", Storage::F32, mask_slot(&bindings)),
        entry: "build_mask",
        overrides: vec![],
        params,
        bindings,
        workgroups: ew_grid(nn, caps),
        reads_bytes: mask_read_bytes(p, count),
        writes_bytes: nn * 4,
        flops: 0,
        loop_iters: 0,
        note: "the additive mask M rebuilt from mask / key padding / causal, every call".into(),
    }
}
