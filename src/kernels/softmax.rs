//! `softmax`: P = softmax(S) row-wise, in place (shaders/softmax.wgsl, one row per workgroup; or
//! shaders/softmax4.wgsl, four rows per workgroup as vec4s, when N % 4 == 0), both with the
//! online max/sum merge of shaders/softmax_combine.wgsl. A fully-masked row gives NaN (0/0).
//! softmax4.wgsl reads and writes the scores as [`Scores`] say (f32 or 16 bits); softmax.wgsl
//! only f32 (16-bit scores need rows of whole words, N % 4 == 0).

use super::{bind, scores_kernel, shader, Scores, Storage};
use crate::gpu::AdapterCaps;
use crate::plan::{grid_2d, Access, Dispatch, Params};

pub fn softmax(st: Storage, sc: Scores, params: Params, s: &str, caps: &AdapterCaps) -> Dispatch {
    let count = params.heads as u64;
    let n = params.seq as u64;
    let nn = count * n * params.kv_seq as u64;
    let rows4 = (params.kv_seq as u64).is_multiple_of(4);
    debug_assert!(rows4 || sc == Scores::F32, "16-bit scores need M % 4 == 0");
    let max_dim = caps.max_workgroups_per_dimension;
    Dispatch {
        name: "softmax".into(),
        phase: crate::plan::Phase::Forward,
        saved: vec![],
        shader: if rows4 {
            scores_kernel!(sc, "softmax4.wgsl" + "softmax_combine.wgsl", st, None)
        } else {
            shader!("softmax.wgsl" + "softmax_combine.wgsl")
        },
        entry: "main",
        overrides: vec![],
        params,
        bindings: vec![bind(s, Access::ReadWrite)],
        workgroups: if rows4 {
            grid_2d((count * n).div_ceil(4), max_dim) // four rows per workgroup
        } else {
            grid_2d(count * n, max_dim)
        },
        reads_bytes: nn * sc.bytes(),
        writes_bytes: nn * sc.bytes(),
        flops: 5 * nn,
        // Two passes over the row in steps of the row's threads (256, or 64 vec4 lanes), and the
        // tree reduction between them.
        loop_iters: 2 * ((params.kv_seq as u64).div_ceil(256) + 1) + 9,
        note: "row-wise max-subtracted softmax, in place; a fully-masked row gives NaN".into(),
    }
}
