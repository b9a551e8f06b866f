//! `qk`: S = Q·Kᵀ for a slice of heads (shaders/qk.wgsl): one workgroup per 128 x 128 tile of S,
//! each thread an 8 x 8 register tile computed as outer products over staged rows of Q and K.

use super::{bind, check_grid, kernel, Storage};
use crate::gpu::AdapterCaps;
use crate::plan::{Access, Dispatch, Params};

/// Rows and columns of S per workgroup (qk.wgsl's `const TILE`).
pub const TILE: u64 = 128;

/// S (`[count, N, M]` f32) = Q·Kᵀ, Q (`[count, N, D]`) and K (`M` rows, at the K/V head) stored
/// as `st`. Reads Q and K once per head, writes every score (masked ones too).
pub fn qk(
    st: Storage,
    params: Params,
    [q, k, s]: [&str; 3],
    caps: &AdapterCaps,
    note: &str,
) -> Result<Dispatch, String> {
    let count = params.heads as u64;
    let n = params.seq as u64;
    let m = params.kv_seq as u64;
    let d = params.head_dim as u64;
    let rows = check_grid("N / 128 tiles", n.div_ceil(TILE), caps)?;
    let cols = check_grid("M / 128 tiles", m.div_ceil(TILE), caps)?;
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
        workgroups: [cols, rows, count as u32],
        reads_bytes: count * (n + m) * d * st.elem_bytes(),
        writes_bytes: count * n * m * 4,
        flops: 2 * count * n * m * d,
        // Per chunk of 16 columns of D: the staging (9), the products (17), the chunk loop's step;
        // the 8 rows' stores (5 each).
        loop_iters: d.div_ceil(16) * 27 + 1 + 8 * 5,
        note: note.into(),
    })
}
