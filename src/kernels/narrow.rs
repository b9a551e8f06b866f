//! `to_dtype` (shaders/narrow.wgsl): `math`'s f32 output rounded to the run's dtype.

use super::{bind, ew_grid, kernel, Storage};
use crate::gpu::AdapterCaps;
use crate::plan::{Access, Dispatch, Params};
use crate::problem::Problem;

/// `dst` (stored as `st`) = `src` (f32), PACK elements per thread.
pub fn to_dtype(
    p: &Problem,
    st: Storage,
    params: Params,
    [src, dst]: [&str; 2],
    caps: &AdapterCaps,
) -> Dispatch {
    // params.heads heads of [N, D]: B*H, or B*Hkv for K, V and their gradients.
    let elems = params.heads as u64 * params.seq as u64 * params.head_dim as u64;
    Dispatch {
        name: "to_dtype".into(),
        phase: crate::plan::Phase::Forward,
        saved: vec![],
        shader: kernel!("narrow.wgsl", st, None),
        entry: "to_dtype",
        overrides: vec![],
        params,
        bindings: vec![bind(src, Access::Read), bind(dst, Access::ReadWrite)],
        workgroups: ew_grid(elems.div_ceil(st.pack() as u64), caps),
        reads_bytes: elems * 4,
        writes_bytes: elems * st.elem_bytes(),
        flops: 0,
        loop_iters: 0,
        note: format!("{dst} = {src}.to({})", p.dtype.name()),
    }
}
