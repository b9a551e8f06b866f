//! `qk`: S = Q·Kᵀ for a slice of heads (shaders/qk.wgsl): one workgroup per 128 x 128 tile of S,
//! each thread an 8 x 8 register tile computed as outer products over staged rows of Q and K.

use super::{bind, check_grid, kernel, Storage};
use crate::gpu::AdapterCaps;
use crate::plan::{Access, Dispatch, Params};

/// Rows and columns of S per workgroup (qk.wgsl's `const TILE`).
pub const TILE: u64 = 128;

/// S (`[count, N, N]` f32) = Q·Kᵀ, Q and K stored as `st` (`[count, N, D]` of this chunk). Reads
/// Q and K once, writes every score (masked ones too).
pub fn qk(
    st: Storage,
    params: Params,
    [q, k, s]: [&str; 3],
    caps: &AdapterCaps,
    note: &str,
) -> Result<Dispatch, String> {
    let count = params.heads as u64;
    let n = params.seq as u64;
    let d = params.head_dim as u64;
    let tiles = check_grid("N / 128 tiles", n.div_ceil(TILE), caps)?;
    Ok(Dispatch {
        name: "qk".into(),
        phase: crate::plan::Phase::Forward,
        saved: vec![],
        shader: kernel!("qk.wgsl", st, None),
        entry: "main",
        overrides: vec![],
        params,
        bindings: vec![
            bind(q, Access::Read),
            bind(k, Access::Read),
            bind(s, Access::ReadWrite),
        ],
        workgroups: [tiles, tiles, count as u32],
        reads_bytes: 2 * count * n * d * st.elem_bytes(),
        writes_bytes: count * n * n * 4,
        flops: 2 * count * n * n * d,
        note: note.into(),
    })
}
