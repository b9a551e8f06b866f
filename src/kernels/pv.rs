//! `pv`: O = P·V for a slice of heads (shaders/pv.wgsl): one workgroup per 128-row x 64-column
//! tile of O, over all N keys.

use super::{bind, check_grid, kernel, Storage};
use crate::gpu::AdapterCaps;
use crate::plan::{Access, Dispatch, Params};

/// Rows (TM) and columns (TN) of O per workgroup (pv.wgsl's `const TM`, `TN`).
pub const TM: u64 = 128;
pub const TN: u64 = 64;

/// O (`[count, N, D]` as `st`) = P (`[count, N, N]` f32) · V. Reads P and V once, writes O.
pub fn pv(
    st: Storage,
    params: Params,
    [p, v, o]: [&str; 3],
    caps: &AdapterCaps,
    note: &str,
) -> Result<Dispatch, String> {
    let count = params.heads as u64;
    let n = params.seq as u64;
    let m = params.kv_seq as u64;
    let d = params.head_dim as u64;
    let e = st.elem_bytes();
    Ok(Dispatch {
        name: "pv".into(),
        phase: crate::plan::Phase::Forward,
        saved: vec![],
        shader: kernel!("pv.wgsl", st, None),
        entry: "main",
        overrides: vec![],
        params,
        bindings: vec![
            bind(p, Access::Read),
            bind(v, Access::Read),
            bind(o, Access::ReadWrite),
        ],
        workgroups: [
            check_grid("D / 64 tiles", d.div_ceil(TN), caps)?,
            check_grid("N / 128 tiles", n.div_ceil(TM), caps)?,
            count as u32,
        ],
        // P, and V (M rows, re-read per query head); O of N rows.
        reads_bytes: count * n * m * 4 + count * m * d * e,
        writes_bytes: count * n * d * e,
        flops: 2 * count * n * m * d,
        loop_iters: pv_loops(1, m),
        note: note.into(),
    })
}

/// pv.wgsl's loop iterations an invocation runs over `inner` summed rows for each of `heads` heads:
/// per block of 16, P's staging (9), V's (5), the products (17) and the block loop's own step;
/// the 8 rows' stores (5 each).
fn pv_loops(heads: u64, inner: u64) -> u64 {
    heads * (inner.div_ceil(16) * 32 + 1) + 1 + 8 * 5
}

/// `out` (`[count, N, D]` as `st`) = Pᵀ · `x` for P (`[count, N, N]` f32) named `p`: pv.wgsl
/// with `TRANS` (P read by rows, staged transposed). The backward's dV = Pᵀ·dO and dK = dSᵀ·Q.
/// With grouped-query attention `out` has `count / group` heads, each the sum over its group.
pub fn ptv(
    st: Storage,
    params: Params,
    [p, x, out]: [&str; 3],
    caps: &AdapterCaps,
    note: &str,
) -> Result<Dispatch, String> {
    let mut d = pv(st, params, [p, x, out], caps, note)?;
    d.overrides = vec![("TRANS".into(), 1.0)];
    // One workgroup layer per K/V head: its group's query heads are summed (GQA). The output
    // has M rows (keys), the inner dimension is the N query rows.
    let group = params.kv_group.max(1);
    let (count, n, m) = (params.heads as u64, params.seq as u64, params.kv_seq as u64);
    let e = st.elem_bytes();
    let dd = params.head_dim as u64;
    d.workgroups[1] = check_grid("M / 128 tiles", m.div_ceil(TM), caps)?;
    d.workgroups[2] = params.heads / group;
    d.reads_bytes = count * n * m * 4 + count * n * dd * e;
    d.writes_bytes = count / group as u64 * m * dd * e;
    // Each output row sums the group's query heads over the N query rows.
    d.loop_iters = pv_loops(group as u64, n);
    Ok(d)
}
