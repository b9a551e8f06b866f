//! `to_f32_*` and `scale_*` (shaders/convert.wgsl): `math`'s upcast of half inputs to f32 copies
//! and its scaling of q and k by sqrt(scale), flat element-wise passes.

use super::{bind, ew_grid, kernel, Storage};
use crate::gpu::AdapterCaps;
use crate::plan::{Access, Dispatch, Params};
use crate::problem::Problem;

/// `dst` (f32) = `src` (stored as `st`), params.heads x N x D elements: `src.float()`.
pub fn to_f32(
    p: &Problem,
    st: Storage,
    params: Params,
    src: &str,
    dst: &str,
    caps: &AdapterCaps,
) -> Dispatch {
    // params.heads heads of [N, D]: B*H, or B*Hkv for K, V and their gradients.
    let elems = params.heads as u64 * params.seq as u64 * params.head_dim as u64;
    Dispatch {
        name: format!("to_f32_{}", src.to_lowercase()),
        phase: crate::plan::Phase::Forward,
        saved: vec![],
        shader: kernel!("convert.wgsl", st, None),
        entry: "to_f32",
        overrides: vec![],
        params,
        bindings: vec![bind(src, Access::Read), bind(dst, Access::ReadWrite)],
        workgroups: ew_grid(elems, caps),
        reads_bytes: elems * st.elem_bytes(),
        writes_bytes: elems * 4,
        flops: 0,
        loop_iters: 0,
        note: format!("{src}.float(): {} -> f32 copy {dst}", p.dtype.name()),
    }
}

/// `dst` = `src` * `factor` (both f32), params.heads x N x D elements; dispatch `name`.
pub fn scale_f32(
    mut params: Params,
    name: &str,
    [src, dst]: [&str; 2],
    factor: f32,
    caps: &AdapterCaps,
) -> Dispatch {
    // params.heads heads of [N, D]: B*H, or B*Hkv for K, V and their gradients.
    let elems = params.heads as u64 * params.seq as u64 * params.head_dim as u64;
    params.factor = factor;
    Dispatch {
        name: name.into(),
        phase: crate::plan::Phase::Forward,
        saved: vec![],
        shader: kernel!("convert.wgsl", Storage::F32, None),
        entry: "scale_f32",
        overrides: vec![],
        params,
        bindings: vec![bind(src, Access::Read), bind(dst, Access::ReadWrite)],
        workgroups: ew_grid(elems, caps),
        reads_bytes: elems * 4,
        writes_bytes: elems * 4,
        flops: elems,
        loop_iters: 0,
        note: format!("{dst} = {src} * sqrt(scale) = {src} * {factor}"),
    }
}
