//! `unfused` and `unfused-inplace`: attention as the five textbook steps, each its own dispatch,
//! with the N x N score matrix materialized in device memory between them.
//!
//! ```text
//! qk      S  = Q Kᵀ                       (shaders/qk.wgsl)
//! scale   S *= scale        in place      (shaders/scale.wgsl)
//! copy    S2 = S.clone()      only in `unfused`: the copy inside an out-of-place masked_fill
//! mask    S2.masked_fill_(-inf)  (`unfused`) or S.masked_fill_(-inf) (`unfused-inplace`)
//!                                          (shaders/mask.wgsl, entries `copy` and `in_place`)
//! softmax P  = softmax(S) row-wise, in place (shaders/softmax.wgsl)
//! pv      O  = P V                         (shaders/pv.wgsl)
//! ```
//! Fully-masked rows come out NaN here (a plain softmax divides 0 by 0).

use super::{check_binding, check_grid, shader};
use crate::gpu::AdapterCaps;
use crate::plan::{grid_2d, Access, BindingDecl, BufferDecl, Dispatch, Params, Plan, Role};
use crate::problem::Problem;

/// Tile sizes of qk.wgsl and pv.wgsl (their `const TILE`, `TM`, `TN`).
const QK_TILE: u64 = 128;
const PV_TM: u64 = 128;
const PV_TN: u64 = 64;
/// Threads per workgroup of the element-wise kernels and rows per softmax workgroup.
const EW_WG: u64 = 256;

pub fn build_out_of_place(p: &Problem, caps: &AdapterCaps) -> Result<Plan, String> {
    build(p, caps, false)
}

pub fn build_in_place(p: &Problem, caps: &AdapterCaps) -> Result<Plan, String> {
    build(p, caps, true)
}

fn bind(buffer: &str, access: Access) -> BindingDecl {
    BindingDecl {
        buffer: buffer.into(),
        access,
    }
}

fn build(p: &Problem, caps: &AdapterCaps, in_place: bool) -> Result<Plan, String> {
    let e = p.dtype.bytes();
    let n = p.seq as u64;
    let d = p.head_dim as u64;
    let bh = p.bh();
    let qkv = p.qkv_bytes();
    let nn = p.scores_elems();
    let nn_bytes = nn * e;

    check_binding("Q/K/V", qkv, caps)?;
    check_binding("the N x N score matrix S (B*H*N*N*4 bytes)", nn_bytes, caps)?;
    if nn > u32::MAX as u64 {
        return Err(format!(
            "B*H*N*N = {nn} score elements exceed 32-bit indexing in one dispatch"
        ));
    }
    let heads = check_grid("B*H (one workgroup layer per head)", bh, caps)?;
    let tiles = check_grid("N / 128 tiles", n.div_ceil(QK_TILE), caps)?;
    let params = Params::new(heads, p.seq, p.head_dim, p.causal, p.scale);
    let max_dim = caps.max_workgroups_per_dimension;
    let ew_grid = grid_2d(nn.div_ceil(4).div_ceil(EW_WG), max_dim); // one vec4 per thread
    let softmax_grid = grid_2d(bh * n, max_dim);

    let mut buffers = vec![
        BufferDecl {
            name: "Q".into(),
            bytes: qkv,
            role: Role::Input,
            n_by_n: false,
        },
        BufferDecl {
            name: "K".into(),
            bytes: qkv,
            role: Role::Input,
            n_by_n: false,
        },
        BufferDecl {
            name: "V".into(),
            bytes: qkv,
            role: Role::Input,
            n_by_n: false,
        },
        BufferDecl {
            name: "S".into(),
            bytes: nn_bytes,
            role: Role::Intermediate,
            n_by_n: true,
        },
    ];
    // After the mask, the probabilities live in S (in place) or in the copy S2 (out of place).
    let masked = if in_place { "S" } else { "S2" };
    if !in_place {
        buffers.push(BufferDecl {
            name: "S2".into(),
            bytes: nn_bytes,
            role: Role::Intermediate,
            n_by_n: true,
        });
    }
    buffers.push(BufferDecl {
        name: "O".into(),
        bytes: qkv,
        role: Role::Output,
        n_by_n: false,
    });

    let mm_flops = 2 * bh * n * n * d;
    let mut dispatches = vec![
        Dispatch {
            name: "qk".into(),
            shader: shader!("qk.wgsl"),
            entry: "main",
            overrides: vec![],
            params,
            bindings: vec![
                bind("Q", Access::Read),
                bind("K", Access::Read),
                bind("S", Access::ReadWrite),
            ],
            workgroups: [tiles, tiles, heads],
            reads_bytes: 2 * qkv,
            writes_bytes: nn_bytes,
            flops: mm_flops,
            note: "S = Q·Kᵀ, all N x N scores (masked ones too)".into(),
        },
        Dispatch {
            name: "scale".into(),
            shader: shader!("scale.wgsl"),
            entry: "main",
            overrides: vec![],
            params,
            bindings: vec![bind("S", Access::ReadWrite)],
            workgroups: ew_grid,
            reads_bytes: nn_bytes,
            writes_bytes: nn_bytes,
            flops: nn,
            note: "S *= scale, in place".into(),
        },
    ];
    let masked_pairs = if p.causal { bh * n * (n - 1) / 2 } else { 0 };
    if !in_place {
        dispatches.push(Dispatch {
            name: "copy".into(),
            shader: shader!("mask.wgsl"),
            entry: "copy",
            overrides: vec![],
            params,
            bindings: vec![bind("S", Access::ReadWrite), bind("S2", Access::ReadWrite)],
            workgroups: ew_grid,
            reads_bytes: nn_bytes,
            writes_bytes: nn_bytes,
            flops: 0,
            note: "the clone inside an out-of-place masked_fill: S -> new N x N buffer S2".into(),
        });
    }
    dispatches.push(Dispatch {
        name: "mask".into(),
        shader: shader!("mask.wgsl"),
        entry: "in_place",
        overrides: vec![],
        params,
        bindings: vec![bind(masked, Access::ReadWrite)],
        workgroups: ew_grid,
        reads_bytes: 0,
        writes_bytes: masked_pairs * e,
        flops: 0,
        note: if p.causal {
            format!("masked_fill_ on {masked}: writes -inf above the diagonal, reads nothing")
        } else {
            "no mask: dispatched but touches no memory (keeps the trace's shape)".into()
        },
    });
    dispatches.push(Dispatch {
        name: "softmax".into(),
        shader: shader!("softmax.wgsl"),
        entry: "main",
        overrides: vec![],
        params,
        bindings: vec![bind(masked, Access::ReadWrite)],
        workgroups: softmax_grid,
        reads_bytes: nn_bytes,
        writes_bytes: nn_bytes,
        flops: 5 * nn,
        note: "row-wise max-subtracted softmax, in place; a fully-masked row gives NaN".into(),
    });
    dispatches.push(Dispatch {
        name: "pv".into(),
        shader: shader!("pv.wgsl"),
        entry: "main",
        overrides: vec![],
        params,
        bindings: vec![
            bind(masked, Access::Read),
            bind("V", Access::Read),
            bind("O", Access::ReadWrite),
        ],
        workgroups: [
            check_grid("D / 64 tiles", d.div_ceil(PV_TN), caps)?,
            check_grid("N / 128 tiles", n.div_ceil(PV_TM), caps)?,
            heads,
        ],
        reads_bytes: nn_bytes + qkv,
        writes_bytes: qkv,
        flops: mm_flops,
        note: "O = P·V over all N keys (the zeros above the diagonal too)".into(),
    });

    let mut notes = vec![format!(
        "{} N x N buffer(s) of {} bytes each are materialized",
        if in_place { 1 } else { 2 },
        nn_bytes
    )];
    if !in_place {
        notes.push("mask applied out of place: +1 dispatch (copy) and +1 N x N buffer (S2)".into());
    } else {
        notes.push(
            "mask applied in place: unsafe for training, where backward needs the unmasked scores"
                .into(),
        );
    }
    Ok(Plan {
        variant: if in_place {
            "unfused-inplace"
        } else {
            "unfused"
        }
        .into(),
        buffers,
        dispatches,
        output: "O".into(),
        config: vec![
            ("QK_TILE".into(), QK_TILE as f64),
            ("PV_TM".into(), PV_TM as f64),
            ("PV_TN".into(), PV_TN as f64),
        ],
        notes,
    })
}
