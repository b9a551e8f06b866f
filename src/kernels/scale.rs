//! `scale`: S *= scale in place (shaders/scale.wgsl), one vec4 of S per thread.

use super::{bind, ew_grid, shader};
use crate::gpu::AdapterCaps;
use crate::plan::{Access, Dispatch, Params};

pub fn scale(params: Params, s: &str, caps: &AdapterCaps) -> Dispatch {
    let nn = params.heads as u64 * params.seq as u64 * params.kv_seq as u64;
    Dispatch {
        name: "scale".into(),
        phase: crate::plan::Phase::Forward,
        saved: vec![],
        shader: shader!("scale.wgsl"),
        entry: "main",
        overrides: vec![],
        params,
        bindings: vec![bind(s, Access::ReadWrite)],
        workgroups: ew_grid(nn.div_ceil(4), caps),
        reads_bytes: nn * 4,
        writes_bytes: nn * 4,
        flops: nn,
        loop_iters: 0,
        note: "S *= scale, in place".into(),
    }
}
