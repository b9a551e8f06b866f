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

use crate::gpu::AdapterCaps;
use crate::kernels::{
    buf, check_binding, check_grid, check_mask, chunks,
    convert::{scale_f32, to_f32},
    heads_per_chunk,
    math_mask::build_mask,
    math_rows::{row_step, RowStep},
    narrow::to_dtype,
    pv::pv,
    qk::qk,
    Storage,
};
use crate::plan::{Params, Plan, Role};
use crate::problem::{DType, Problem};

pub fn build(p: &Problem, caps: &AdapterCaps) -> Result<Plan, String> {
    let n = p.seq as u64;
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
        buffers.push(buf(crate::kernels::MASK, mask_bytes, Role::Input, false));
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
    let mut dispatches = Vec::new();
    if narrow {
        for (src, dst) in [("Q", "Qf"), ("K", "Kf"), ("V", "Vf")] {
            dispatches.push(to_f32(p, st, all, src, dst, caps));
        }
    }
    let (qsrc, ksrc, vsrc) = if narrow {
        ("Qf", "Kf", "Vf")
    } else {
        ("Q", "K", "V")
    };
    // A negative scale's sign goes on k.
    let k_factor = if p.scale < 0.0 { -factor } else { factor };
    dispatches.push(scale_f32(p, all, "scale_q", [qsrc, "Qs"], factor, caps));
    dispatches.push(scale_f32(p, all, "scale_k", [ksrc, "Ks"], k_factor, caps));
    let out32 = if narrow { "O32" } else { "O" };
    for &(first, count) in &parts {
        let params = Params::of(p).chunk(first as u32, count as u32);
        dispatches.push(build_mask(p, params, "M", caps));
        dispatches.push(qk(
            Storage::F32,
            params,
            ["Qs", "Ks", "S"],
            caps,
            "S = Qs·Ksᵀ in f32 (already scaled through q and k)",
        )?);
        for step in RowStep::ALL {
            dispatches.push(row_step(step, params, caps));
        }
        dispatches.push(pv(
            Storage::F32,
            params,
            ["S", vsrc, out32],
            caps,
            &format!("{out32} = P·V in f32"),
        )?);
    }
    if narrow {
        dispatches.push(to_dtype(p, st, all, ["O32", "O"], caps));
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
        variant: String::new(),
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
