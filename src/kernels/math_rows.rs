//! `math`'s softmax in separate passes (shaders/math_rows.wgsl), one entry point per step, over
//! S (`[count, N, N]` f32) and per-row buffers (`[count, N]` f32): F (all-masked flags), R (row
//! max), L (row sums), and the rebuilt mask M.

use super::{bind, ew_grid, shader};
use crate::gpu::AdapterCaps;
use crate::plan::{Access, Dispatch, Params};

/// The steps, in the order `math` runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowStep {
    /// S += M
    AddMask,
    /// F = rows whose scores are all -inf
    MaskedRows,
    /// R = row max
    RowMax,
    /// S = exp(S - R), L = row sums
    ExpSum,
    /// S /= L
    NormalizeRows,
    /// S = 0 on rows with F set (the safe softmax)
    WhereZero,
}

impl RowStep {
    pub const ALL: [RowStep; 6] = [
        RowStep::AddMask,
        RowStep::MaskedRows,
        RowStep::RowMax,
        RowStep::ExpSum,
        RowStep::NormalizeRows,
        RowStep::WhereZero,
    ];
}

/// One step over the buffers named `S`, `M`, `F`, `R`, `L`. Every binding is read_write in the
/// kernel (the entry points share one binding layout).
pub fn row_step(step: RowStep, params: Params, caps: &AdapterCaps) -> Dispatch {
    let rows = params.heads as u64 * params.seq as u64;
    let nn = rows * params.kv_seq as u64;
    let s = nn * 4;
    let r4 = rows * 4;
    let (entry, buffers, per_element, reads, writes, note): (_, &[&str], _, _, _, _) = match step {
        RowStep::AddMask => ("add_mask", &["S", "M"], true, 2 * s, s, "S += M"),
        RowStep::MaskedRows => (
            "masked_rows",
            &["S", "F"],
            false,
            s,
            r4,
            "F = rows with every score -inf (all-masked detection)",
        ),
        RowStep::RowMax => ("row_max", &["S", "R"], false, s, r4, "R = row max"),
        RowStep::ExpSum => (
            "exp_sum",
            &["S", "R", "L"],
            false,
            s + r4,
            s + r4,
            "S = exp(S - R), L = row sums",
        ),
        RowStep::NormalizeRows => ("normalize_rows", &["S", "L"], true, s + r4, s, "S /= L"),
        RowStep::WhereZero => (
            "where_zero",
            &["S", "F"],
            true,
            r4,
            0,
            "S = 0 on all-masked rows (safe softmax); writes only those rows",
        ),
    };
    Dispatch {
        name: entry.into(),
        phase: crate::plan::Phase::Forward,
        saved: vec![],
        shader: shader!("math_rows.wgsl"),
        entry,
        overrides: vec![],
        params,
        bindings: buffers.iter().map(|b| bind(b, Access::ReadWrite)).collect(),
        workgroups: ew_grid(if per_element { nn } else { rows }, caps),
        reads_bytes: reads,
        writes_bytes: writes,
        flops: 0,
        // The row steps walk a row's M scores in one thread.
        loop_iters: if per_element {
            0
        } else {
            params.kv_seq as u64 + 1
        },
        note: note.into(),
    }
}
