//! `math`: the general protective path of SDPA's MATH backend, step by step, each its own dispatch.
//!
//! ```text
//! to_f32 q/k/v   f16/bf16 inputs widened to f32 copies     (convert.wgsl `to_f32`; not for f32)
//! scale_q/k      Qs = Q * sqrt(scale), Ks = K * sqrt(scale) (convert.wgsl `scale_f32`)
//! per chunk of heads:
//!   build_mask   M = bias + causal -inf, rebuilt on every call from the user's mask / key
//!                padding / causal description (no caching)      (math_mask.wgsl)
//!   qk           S = Qs Ksᵀ                                      (qk.wgsl, f32)
//!   add_mask     S += M                                          (math_rows.wgsl ...)
//!   masked_rows  F = rows whose scores are all -inf (explicit all-masked detection)
//!   row_max, exp_sum, normalize_rows   softmax in three passes
//!   where_zero   S = 0 on rows with F set (a safe softmax: those rows return 0, as SDPA's do)
//!   pv           O32 = S V                                       (pv.wgsl, f32)
//! to_dtype       O = O32 rounded to the run's dtype              (narrow.wgsl; not for f32)
//! ```
//! f16 is read and written as u32 pairs through `pack2x16float` / `unpack2x16float` (the
//! `dtype_f16x2.wgsl` prelude), so `math` runs every dtype on every adapter, odd D included: its
//! conversions are flat element-wise passes.

use super::unfused::{bind, buf, chunks, mask_read_bytes};
use super::{check_binding, check_grid, check_mask, heads_per_chunk, kernel, shader, Storage};
use crate::gpu::AdapterCaps;
use crate::plan::{grid_2d, Access, Dispatch, Params, Plan, Role};
use crate::problem::{DType, Problem};

const QK_TILE: u64 = 128;
const PV_TM: u64 = 128;
const PV_TN: u64 = 64;
const EW_WG: u64 = 256;

pub fn build(p: &Problem, caps: &AdapterCaps) -> Result<Plan, String> {
    let n = p.seq as u64;
    let d = p.head_dim as u64;
    let bh = p.bh();
    let elems = p.qkv_elems();
    let qkv = p.qkv_bytes();
    let f32_bytes = elems * 4;
    check_binding("Q/K/V", qkv, caps)?;
    check_binding("the f32 copies of Q/K/V", f32_bytes, caps)?;
    if elems > u32::MAX as u64 {
        return Err(format!("B*H*N*D = {elems} elements exceed 32-bit indexing"));
    }
    let mask_bytes = check_mask(p, caps)?;
    // Two N x N buffers (M and S) per chunk.
    let per = heads_per_chunk(p, caps)?;
    let parts = chunks(bh, per);
    let nn_bytes = per * n * n * 4;
    let rows_bytes = per * n * 4;
    check_grid("B*H (one workgroup layer per head)", per, caps)?;
    let tiles = check_grid("N / 128 tiles", n.div_ceil(QK_TILE), caps)?;
    let max_dim = caps.max_workgroups_per_dimension;
    let narrow = p.dtype != DType::F32;
    // f16 through u32 pairs (no SHADER_F16 needed), bf16 as everywhere.
    let st = match p.dtype {
        DType::F32 => Storage::F32,
        DType::F16 => Storage::F16x2,
        DType::BF16 => Storage::Bf16,
    };
    let factor = p.scale.abs().sqrt();

    let mut buffers = vec![
        buf("Q", qkv, Role::Input, false),
        buf("K", qkv, Role::Input, false),
        buf("V", qkv, Role::Input, false),
    ];
    if mask_bytes > 0 {
        buffers.push(buf("MASK", mask_bytes, Role::Input, false));
    }
    if narrow {
        for name in ["Qf", "Kf", "Vf"] {
            buffers.push(buf(name, f32_bytes, Role::Intermediate, false));
        }
    }
    for name in ["Qs", "Ks"] {
        buffers.push(buf(name, f32_bytes, Role::Intermediate, false));
    }
    buffers.push(buf("M", nn_bytes, Role::Intermediate, true));
    buffers.push(buf("S", nn_bytes, Role::Intermediate, true));
    for name in ["F", "R", "L"] {
        buffers.push(buf(name, rows_bytes, Role::Intermediate, false));
    }
    if narrow {
        buffers.push(buf("O32", f32_bytes, Role::Intermediate, false));
    }
    buffers.push(buf("O", qkv, Role::Output, false));

    let all = Params::of(p);
    let flat_grid = grid_2d(elems.div_ceil(EW_WG), max_dim);
    let mut dispatches = Vec::new();
    if narrow {
        for (src, dst) in [("Q", "Qf"), ("K", "Kf"), ("V", "Vf")] {
            dispatches.push(Dispatch {
                name: format!("to_f32_{}", src.to_lowercase()),
                shader: kernel!("convert.wgsl", st, None),
                entry: "to_f32",
                overrides: vec![],
                params: all,
                bindings: vec![bind(src, Access::Read), bind(dst, Access::ReadWrite)],
                workgroups: flat_grid,
                reads_bytes: qkv,
                writes_bytes: f32_bytes,
                flops: 0,
                note: format!("{src}.float(): {} -> f32 copy {dst}", p.dtype.name()),
            });
        }
    }
    let (qsrc, ksrc, vsrc) = if narrow {
        ("Qf", "Kf", "Vf")
    } else {
        ("Q", "K", "V")
    };
    // A negative scale's sign goes on k.
    let k_factor = if p.scale < 0.0 { -factor } else { factor };
    for (src, dst, name, f) in [
        (qsrc, "Qs", "scale_q", factor),
        (ksrc, "Ks", "scale_k", k_factor),
    ] {
        let mut prm = all;
        prm.factor = f;
        dispatches.push(Dispatch {
            name: name.into(),
            shader: kernel!("convert.wgsl", Storage::F32, None),
            entry: "scale_f32",
            overrides: vec![],
            params: prm,
            bindings: vec![bind(src, Access::Read), bind(dst, Access::ReadWrite)],
            workgroups: flat_grid,
            reads_bytes: f32_bytes,
            writes_bytes: f32_bytes,
            flops: elems,
            note: format!("{dst} = {src} * sqrt(scale) = {src} * {f}"),
        });
    }
    let out32 = if narrow { "O32" } else { "O" };
    let mask_binding = p.mask.bias.map(|_| 2);
    for &(first, count) in &parts {
        let params = Params::of(p).chunk(first as u32, count as u32);
        let nn = count * n * n;
        let s = nn * 4;
        let rows = count * n;
        let r4 = rows * 4;
        let io32 = count * n * d * 4;
        let ew = grid_2d(nn.div_ceil(EW_WG), max_dim);
        let rg = grid_2d(rows.div_ceil(EW_WG), max_dim);
        let mut mask_bind = vec![bind("M", Access::ReadWrite)];
        if mask_binding.is_some() {
            mask_bind.push(bind("MASK", Access::Read));
        }
        dispatches.push(Dispatch {
            name: "build_mask".into(),
            shader: kernel!("math_mask.wgsl", Storage::F32, mask_binding),
            entry: "build_mask",
            overrides: vec![],
            params,
            bindings: mask_bind,
            workgroups: ew,
            reads_bytes: mask_read_bytes(p, count),
            writes_bytes: s,
            flops: 0,
            note: "the additive mask M rebuilt from mask / key padding / causal, every call".into(),
        });
        dispatches.push(Dispatch {
            name: "qk".into(),
            shader: kernel!("qk.wgsl", Storage::F32, None),
            entry: "main",
            overrides: vec![],
            params,
            bindings: vec![
                bind("Qs", Access::Read),
                bind("Ks", Access::Read),
                bind("S", Access::ReadWrite),
            ],
            workgroups: [tiles, tiles, count as u32],
            reads_bytes: 2 * io32,
            writes_bytes: s,
            flops: 2 * nn * d,
            note: "S = Qs·Ksᵀ in f32 (already scaled through q and k)".into(),
        });
        let rows_step =
            |name: &str, entry: &'static str, b: Vec<&str>, grid, r, w, note: &str| Dispatch {
                name: name.into(),
                shader: shader!("math_rows.wgsl"),
                entry,
                overrides: vec![],
                params,
                bindings: b.into_iter().map(|x| bind(x, Access::ReadWrite)).collect(),
                workgroups: grid,
                reads_bytes: r,
                writes_bytes: w,
                flops: 0,
                note: note.into(),
            };
        dispatches.push(rows_step(
            "add_mask",
            "add_mask",
            vec!["S", "M"],
            ew,
            2 * s,
            s,
            "S += M",
        ));
        dispatches.push(rows_step(
            "masked_rows",
            "masked_rows",
            vec!["S", "F"],
            rg,
            s,
            r4,
            "F = rows with every score -inf (all-masked detection)",
        ));
        dispatches.push(rows_step(
            "row_max",
            "row_max",
            vec!["S", "R"],
            rg,
            s,
            r4,
            "R = row max",
        ));
        dispatches.push(rows_step(
            "exp_sum",
            "exp_sum",
            vec!["S", "R", "L"],
            rg,
            s + r4,
            s + r4,
            "S = exp(S - R), L = row sums",
        ));
        dispatches.push(rows_step(
            "normalize_rows",
            "normalize_rows",
            vec!["S", "L"],
            ew,
            s + r4,
            s,
            "S /= L",
        ));
        dispatches.push(rows_step(
            "where_zero",
            "where_zero",
            vec!["S", "F"],
            ew,
            r4,
            0,
            "S = 0 on all-masked rows (safe softmax); writes only those rows",
        ));
        dispatches.push(Dispatch {
            name: "pv".into(),
            shader: kernel!("pv.wgsl", Storage::F32, None),
            entry: "main",
            overrides: vec![],
            params,
            bindings: vec![
                bind("S", Access::Read),
                bind(vsrc, Access::Read),
                bind(out32, Access::ReadWrite),
            ],
            workgroups: [
                check_grid("D / 64 tiles", d.div_ceil(PV_TN), caps)?,
                check_grid("N / 128 tiles", n.div_ceil(PV_TM), caps)?,
                count as u32,
            ],
            reads_bytes: s + io32,
            writes_bytes: io32,
            flops: 2 * nn * d,
            note: format!("{out32} = P·V in f32"),
        });
    }
    if narrow {
        dispatches.push(Dispatch {
            name: "to_dtype".into(),
            shader: kernel!("narrow.wgsl", st, None),
            entry: "to_dtype",
            overrides: vec![],
            params: all,
            bindings: vec![bind("O32", Access::Read), bind("O", Access::ReadWrite)],
            workgroups: grid_2d(elems.div_ceil(st.pack() as u64).div_ceil(EW_WG), max_dim),
            reads_bytes: f32_bytes,
            writes_bytes: qkv,
            flops: 0,
            note: format!("O = O32.to({})", p.dtype.name()),
        });
    }
    let mut notes = vec![
        format!(
            "{} dispatches per forward: the protective general path (conversions, mask rebuilt \
             every call, safe softmax)",
            dispatches.len()
        ),
        format!("q and k each scaled by sqrt(|scale|) = {factor}"),
        "a row with no allowed key returns 0 (explicit all-masked detection, SDPA's convention)"
            .into(),
    ];
    if parts.len() > 1 {
        notes.push(format!(
            "chunked: {} chunks of up to {per} heads for the N x N buffers M and S",
            parts.len()
        ));
    }
    if p.causal && p.mask.bias.is_some() {
        notes.push("causal AND explicit mask / key padding: their intersection".into());
    }
    Ok(Plan {
        variant: "math".into(),
        buffers,
        dispatches,
        output: "O".into(),
        config: vec![
            ("heads_per_chunk".into(), per as f64),
            ("chunks".into(), parts.len() as f64),
        ],
        notes,
        tile: None,
    })
}
