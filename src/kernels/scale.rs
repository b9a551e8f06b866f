//! `scale`: S *= scale in place (shaders/scale.wgsl), one word of four scores per thread (f32 or
//! 16-bit scores: [`Scores`]).

use super::{bind, ew_grid, scores_kernel, Scores, Storage};
use crate::gpu::AdapterCaps;
use crate::plan::{Access, Dispatch, Params};

pub fn scale(st: Storage, sc: Scores, params: Params, s: &str, caps: &AdapterCaps) -> Dispatch {
    let nn = params.heads as u64 * params.seq as u64 * params.kv_seq as u64;
    Dispatch {
        name: "scale".into(),
        phase: crate::plan::Phase::Forward,
        saved: vec![],
        shader: scores_kernel!(sc, "scale.wgsl", st, None),
        entry: "main",
        overrides: vec![],
        params,
        bindings: vec![bind(s, Access::ReadWrite)],
        workgroups: ew_grid(nn.div_ceil(4), caps),
        reads_bytes: nn * sc.bytes(),
        writes_bytes: nn * sc.bytes(),
        flops: nn,
        loop_iters: 0,
        note: "S *= scale, in place".into(),
    }
}
