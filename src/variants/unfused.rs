//! `unfused` and `unfused-inplace`: attention as the five textbook steps, each its own dispatch,
//! with the N x N score matrix materialized in device memory between them.
//!
//! ```text
//! qk      S  = Q Kᵀ                       (shaders/qk.wgsl)
//! scale   S *= scale        in place      (shaders/scale.wgsl)
//! copy    S2 = S.clone()      only in `unfused`: the copy inside an out-of-place masked_fill
//! mask    S2.masked_fill_(-inf)  (`unfused`) or S.masked_fill_(-inf) (`unfused-inplace`),
//!         plus the additive mask bias when there is one
//!                                          (shaders/mask.wgsl, entries `copy` and `in_place`)
//! softmax P  = softmax(S) row-wise, in place (shaders/softmax.wgsl; softmax4.wgsl when N % 4 == 0)
//! pv      O  = P V                         (shaders/pv.wgsl)
//! ```
//! Q, K, V and O are in the run's dtype; S (and S2) are f32. Fully-masked rows come out NaN here
//! (a plain softmax divides 0 by 0).
//!
//! # Chunking
//! When all heads' N x N scores do not fit one storage binding or one buffer, S (and S2) hold only
//! `c` heads and the five steps repeat for each chunk of `c` heads (Params.head_offset says which);
//! the plan then lists the dispatches once per chunk. Refused only when one head's N x N cannot be
//! bound.

use super::{check_binding, check_grid, check_mask, heads_per_chunk, kernel, shader, Storage};
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

pub(crate) fn bind(buffer: &str, access: Access) -> BindingDecl {
    BindingDecl {
        buffer: buffer.into(),
        access,
    }
}

pub(crate) fn buf(name: &str, bytes: u64, role: Role, n_by_n: bool) -> BufferDecl {
    BufferDecl {
        name: name.into(),
        bytes,
        role,
        n_by_n,
    }
}

/// The chunks of heads: (first head, heads) pairs covering 0..B*H.
pub(crate) fn chunks(bh: u64, per: u64) -> Vec<(u64, u64)> {
    (0..bh.div_ceil(per))
        .map(|c| (c * per, per.min(bh - c * per)))
        .collect()
}

/// Bytes of the mask bias a dispatch over heads `first..first+count` reads: one N x N block per
/// head (a broadcast mask is counted again for every head that reads it).
pub(crate) fn mask_read_bytes(p: &Problem, count: u64) -> u64 {
    if p.mask.bias.is_some() {
        count * p.seq as u64 * p.seq as u64 * 4
    } else {
        0
    }
}

fn build(p: &Problem, caps: &AdapterCaps, in_place: bool) -> Result<Plan, String> {
    let e = p.dtype.bytes();
    let st = Storage::of(p.dtype);
    let n = p.seq as u64;
    let d = p.head_dim as u64;
    let bh = p.bh();
    let qkv = p.qkv_bytes();

    check_binding("Q/K/V", qkv, caps)?;
    let mask_bytes = check_mask(p, caps)?;
    let per = heads_per_chunk(p, caps)?;
    let parts = chunks(bh, per);
    let nn_bytes = per * n * n * 4;
    check_grid("B*H (one workgroup layer per head)", per, caps)?;
    let tiles = check_grid("N / 128 tiles", n.div_ceil(QK_TILE), caps)?;
    let max_dim = caps.max_workgroups_per_dimension;
    let mask_binding = p.mask.bias.map(|_| 2);

    let mut buffers = vec![
        buf("Q", qkv, Role::Input, false),
        buf("K", qkv, Role::Input, false),
        buf("V", qkv, Role::Input, false),
    ];
    if mask_bytes > 0 {
        buffers.push(buf("MASK", mask_bytes, Role::Input, false));
    }
    buffers.push(buf("S", nn_bytes, Role::Intermediate, true));
    // After the mask, the probabilities live in S (in place) or in the copy S2 (out of place).
    let masked = if in_place { "S" } else { "S2" };
    if !in_place {
        buffers.push(buf("S2", nn_bytes, Role::Intermediate, true));
    }
    buffers.push(buf("O", qkv, Role::Output, false));

    let mut dispatches = Vec::new();
    for &(first, count) in &parts {
        let params = Params::of(p).chunk(first as u32, count as u32);
        let nn = count * n * n;
        let s_bytes = nn * 4;
        let io = count * n * d * e; // this chunk's share of one of Q, K, V, O
        let ew_grid = grid_2d(nn.div_ceil(4).div_ceil(EW_WG), max_dim); // one vec4 per thread
                                                                        // N % 4 == 0: rows start on a vec4, so the row-structured mask and the vec4 softmax apply.
        let rows4 = n.is_multiple_of(4);
        let softmax_grid = if rows4 {
            grid_2d((count * n).div_ceil(4), max_dim) // four rows per workgroup
        } else {
            grid_2d(count * n, max_dim)
        };
        let mm_flops = 2 * count * n * n * d;
        dispatches.push(Dispatch {
            name: "qk".into(),
            shader: kernel!("qk.wgsl", st, None),
            entry: "main",
            overrides: vec![],
            params,
            bindings: vec![
                bind("Q", Access::Read),
                bind("K", Access::Read),
                bind("S", Access::ReadWrite),
            ],
            workgroups: [tiles, tiles, count as u32],
            reads_bytes: 2 * io,
            writes_bytes: s_bytes,
            flops: mm_flops,
            note: "S = Q·Kᵀ, all N x N scores (masked ones too)".into(),
        });
        dispatches.push(Dispatch {
            name: "scale".into(),
            shader: shader!("scale.wgsl"),
            entry: "main",
            overrides: vec![],
            params,
            bindings: vec![bind("S", Access::ReadWrite)],
            workgroups: ew_grid,
            reads_bytes: s_bytes,
            writes_bytes: s_bytes,
            flops: nn,
            note: "S *= scale, in place".into(),
        });
        if !in_place {
            dispatches.push(Dispatch {
                name: "copy".into(),
                shader: kernel!("mask.wgsl", st, mask_binding),
                entry: "copy",
                overrides: vec![],
                params,
                bindings: vec![bind("S", Access::ReadWrite), bind("S2", Access::ReadWrite)],
                workgroups: ew_grid,
                reads_bytes: s_bytes,
                writes_bytes: s_bytes,
                flops: 0,
                note: "the clone inside an out-of-place masked_fill: S -> new N x N buffer S2"
                    .into(),
            });
        }
        let mut mask_bindings = vec![bind(masked, Access::ReadWrite)];
        let (reads, writes, note) = if p.mask.bias.is_some() {
            mask_bindings.push(bind("MASK", Access::Read));
            (
                s_bytes + mask_read_bytes(p, count),
                s_bytes,
                format!(
                    "{masked} += mask bias (read per head){}, in place",
                    if p.causal {
                        "; -inf above the diagonal"
                    } else {
                        ""
                    }
                ),
            )
        } else if p.causal {
            (
                0,
                count * n * (n - 1) / 2 * 4,
                format!("masked_fill_ on {masked}: writes -inf above the diagonal, reads nothing"),
            )
        } else {
            (
                0,
                0,
                "no mask: dispatched but touches no memory (keeps the trace's shape)".into(),
            )
        };
        // Causal only: the row-structured kernel (no division per element) when rows are vec4s.
        let causal_rows = rows4 && p.causal && p.mask.bias.is_none();
        // Rows of S per workgroup of `causal_rows` (mask.wgsl). On the H200 at B8 H16 N1024 f32
        // (results/h200/2026-12-02-v5): 1 row 145.9 µs, 2 rows 91.9, 4 rows 95.6, 8 rows 103.4.
        let mask_rows: u64 = 2;
        dispatches.push(Dispatch {
            name: "mask".into(),
            shader: kernel!("mask.wgsl", st, mask_binding),
            entry: if causal_rows {
                "causal_rows"
            } else {
                "in_place"
            },
            overrides: if causal_rows {
                vec![("ROWS".to_string(), mask_rows as f64)]
            } else {
                vec![]
            },
            params,
            bindings: mask_bindings,
            workgroups: if causal_rows {
                grid_2d((count * n).div_ceil(mask_rows), max_dim)
            } else {
                ew_grid
            },
            reads_bytes: reads,
            writes_bytes: writes,
            flops: if p.mask.bias.is_some() { nn } else { 0 },
            note,
        });
        dispatches.push(Dispatch {
            name: "softmax".into(),
            shader: if rows4 {
                shader!("softmax4.wgsl" + "softmax_combine.wgsl")
            } else {
                shader!("softmax.wgsl" + "softmax_combine.wgsl")
            },
            entry: "main",
            overrides: vec![],
            params,
            bindings: vec![bind(masked, Access::ReadWrite)],
            workgroups: softmax_grid,
            reads_bytes: s_bytes,
            writes_bytes: s_bytes,
            flops: 5 * nn,
            note: "row-wise max-subtracted softmax, in place; a fully-masked row gives NaN".into(),
        });
        dispatches.push(Dispatch {
            name: "pv".into(),
            shader: kernel!("pv.wgsl", st, None),
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
                count as u32,
            ],
            reads_bytes: s_bytes + io,
            writes_bytes: io,
            flops: mm_flops,
            note: "O = P·V over all N keys (the zeros above the diagonal too)".into(),
        });
    }

    let mut notes = vec![format!(
        "{} N x N buffer(s) of {} bytes each are materialized (f32 scores)",
        if in_place { 1 } else { 2 },
        nn_bytes
    )];
    if parts.len() > 1 {
        notes.push(format!(
            "chunked: B*H = {bh} heads do not fit one binding of N x N scores; {} chunks of up to \
             {per} heads, each dispatch repeated per chunk",
            parts.len()
        ));
    }
    if !in_place {
        notes.push("mask applied out of place: +1 dispatch (copy) and +1 N x N buffer (S2)".into());
    } else {
        notes.push(
            "mask applied in place: unsafe for training, where backward needs the unmasked scores"
                .into(),
        );
    }
    if p.causal && p.mask.bias.is_some() {
        notes.push("causal AND explicit mask / key padding: their intersection".into());
    }
    notes.push("a row with no allowed key returns NaN (plain softmax: 0/0)".into());
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
            ("heads_per_chunk".into(), per as f64),
            ("chunks".into(), parts.len() as f64),
        ],
        notes,
        tile: None,
    })
}
