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
//!   dropout      PD = S ∘ keep / (1 - p), out of place, only with --dropout > 0 (dropout.wgsl;
//!                the math backend's at::dropout)
//!   pv           O32 = S V (PD V with dropout)                   (pv.wgsl, f32)
//! to_dtype       O = O32 rounded to the run's dtype              (narrow.wgsl; not for f32)
//! ```
//! f16 is read and written as u32 pairs through `pack2x16float` / `unpack2x16float` (the
//! `dtype_f16x2.wgsl` prelude), so `math` runs every dtype on every adapter, odd D included: its
//! conversions are flat element-wise passes.

use crate::gpu::AdapterCaps;
use crate::kernels::{
    buf, check_binding, check_grid, check_mask, chunks,
    convert::{scale_f32, to_f32},
    dropout::{dropout, dropout_bwd},
    heads_per_chunk,
    math_mask::build_mask,
    math_rows::{row_step, RowStep},
    narrow::to_dtype,
    pv::{ptv, pv},
    qk::qk,
    softmax_bwd::softmax_bwd,
    Storage,
};
use crate::plan::{save_after, Dispatch, Params, Plan, Role};
use crate::problem::{DType, Problem};

pub fn build(p: &Problem, caps: &AdapterCaps) -> Result<Plan, String> {
    let n = p.seq as u64;
    let bh = p.bh();
    let elems = p.qkv_elems();
    let qkv = p.qkv_bytes();
    let f32_bytes = elems * 4;
    check_binding("Q ([B, H, N, D])", qkv, caps)?;
    check_binding("the f32 copies of Q/K/V", f32_bytes, caps)?;
    if elems > u32::MAX as u64 {
        return Err(format!("B*H*N*D = {elems} elements exceed 32-bit indexing"));
    }
    let mask_bytes = check_mask(p, caps)?;
    // Two N x N buffers (M and S) per chunk.
    let per = heads_per_chunk(p, caps, 4)?;
    let parts = chunks(bh, per);
    let nn_bytes = per * n * p.kv_seq as u64 * 4;
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

    let kv = p.kv_bytes();
    let kv32 = p.kv_elems() * 4;
    let mut buffers = vec![
        buf("Q", qkv, Role::Input, false),
        buf("K", kv, Role::Input, false),
        buf("V", kv, Role::Input, false),
    ];
    if mask_bytes > 0 {
        buffers.push(buf(crate::kernels::MASK, mask_bytes, Role::Input, false));
    }
    if narrow {
        buffers.push(buf("Qf", f32_bytes, Role::Intermediate, false));
        for name in ["Kf", "Vf"] {
            buffers.push(buf(name, kv32, Role::Intermediate, false));
        }
    }
    buffers.push(buf("Qs", f32_bytes, Role::Intermediate, false));
    buffers.push(buf("Ks", kv32, Role::Intermediate, false));
    buffers.push(buf("M", nn_bytes, Role::Intermediate, true));
    buffers.push(buf("S", nn_bytes, Role::Intermediate, true));
    let dropout_on = p.dropout().is_some();
    if dropout_on {
        buffers.push(buf("PD", nn_bytes, Role::Intermediate, true));
    }
    let probs = if dropout_on { "PD" } else { "S" };
    for name in ["F", "R", "L"] {
        buffers.push(buf(name, rows_bytes, Role::Intermediate, false));
    }
    if narrow {
        buffers.push(buf("O32", f32_bytes, Role::Intermediate, false));
    }
    buffers.push(buf("O", qkv, Role::Output, false));
    if p.backward {
        buffers.push(buf("dO", qkv, Role::Input, false));
        buffers.push(buf("dP", nn_bytes, Role::Intermediate, true));
        buffers.push(buf("dQs", f32_bytes, Role::Intermediate, false));
        buffers.push(buf("dKs", kv32, Role::Intermediate, false));
        if narrow {
            for name in ["dOf", "dQ32"] {
                buffers.push(buf(name, f32_bytes, Role::Intermediate, false));
            }
            for name in ["dV32", "dK32"] {
                buffers.push(buf(name, kv32, Role::Intermediate, false));
            }
        }
        buffers.push(buf("dQ", qkv, Role::Output, false));
        for g in ["dK", "dV"] {
            buffers.push(buf(g, kv, Role::Output, false));
        }
    }

    let all = Params::of(p);
    // The element-wise passes over K, V and their gradients cover B*Hkv heads (GQA).
    let all_kv = Params {
        heads: p.batch * p.kv_heads,
        seq: p.kv_seq,
        ..all
    };
    let mut dispatches = Vec::new();
    if narrow {
        for (src, dst, prm) in [("Q", "Qf", all), ("K", "Kf", all_kv), ("V", "Vf", all_kv)] {
            dispatches.push(to_f32(p, st, prm, src, dst, caps));
        }
    }
    let (qsrc, ksrc, vsrc) = if narrow {
        ("Qf", "Kf", "Vf")
    } else {
        ("Q", "K", "V")
    };
    // A negative scale's sign goes on k.
    let k_factor = if p.scale < 0.0 { -factor } else { factor };
    dispatches.push(scale_f32(all, "scale_q", [qsrc, "Qs"], factor, caps));
    dispatches.push(scale_f32(all_kv, "scale_k", [ksrc, "Ks"], k_factor, caps));
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
        if dropout_on {
            dispatches.push(dropout(params, "S", "PD", caps));
        }
        dispatches.push(pv(
            Storage::F32,
            params,
            [probs, vsrc, out32],
            caps,
            &format!("{out32} = P·V in f32"),
        )?);
        if p.backward {
            // Each chunk's backward right after its forward (the next chunk overwrites S).
            if first == 0 && narrow {
                dispatches
                    .push(to_f32(p, st, all, "dO", "dOf", caps).backward("to_f32_do", vec![]));
            }
            let b = backward(params, vsrc, probs, narrow, &dispatches, caps)?;
            dispatches.extend(b);
        }
    }
    if narrow {
        dispatches.push(to_dtype(p, st, all, ["O32", "O"], caps));
    }
    if p.backward {
        // q and k were scaled by sqrt(|scale|) (k with the sign): so are their gradients.
        let (dq, dk) = if narrow {
            ("dQ32", "dK32")
        } else {
            ("dQ", "dK")
        };
        dispatches.push(
            scale_f32(all, "scale_dq", ["dQs", dq], factor, caps).backward("scale_dq", vec![]),
        );
        dispatches.push(
            scale_f32(all_kv, "scale_dk", ["dKs", dk], k_factor, caps).backward("scale_dk", vec![]),
        );
        if narrow {
            for (src, dst, prm) in [
                ("dQ32", "dQ", all),
                ("dK32", "dK", all_kv),
                ("dV32", "dV", all_kv),
            ] {
                let name = format!("to_dtype_{}", dst.to_lowercase());
                dispatches.push(to_dtype(p, st, prm, [src, dst], caps).backward(&name, vec![]));
            }
        }
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
        grads: if p.backward {
            vec!["dQ".into(), "dK".into(), "dV".into()]
        } else {
            vec![]
        },
        training_note: p.backward.then(|| {
            "safe for training: the safe softmax's three in-place passes (exp_sum, \
             normalize_rows, where_zero) and the scaling write new values over S, but the \
             backward treats them as one softmax (PyTorch's _safe_softmax), whose backward needs \
             only its output P, saved after where_zero and never overwritten; qk's backward needs \
             the scaled copies Qs and Ks, pv's P and V"
                .to_string()
        }),
    })
}

/// The backward of one chunk's forward, in f32 on the f32 copies: dV = Pᵀ·dO, dP = dO·Vᵀ, the
/// safe softmax's backward, dQs = dS·Ks, dKs = dSᵀ·Qs (the scaling back to dQ, dK comes after
/// the last chunk). `probs`: P after dropout (`S` without).
fn backward(
    params: Params,
    vsrc: &str,
    probs: &str,
    narrow: bool,
    fwd: &[Dispatch],
    caps: &AdapterCaps,
) -> Result<Vec<Dispatch>, String> {
    let (d_o, dv) = if narrow {
        ("dOf", "dV32")
    } else {
        ("dO", "dV")
    };
    let p_saved = save_after(fwd, "where_zero", "S", "safe softmax");
    let pd_saved = save_after(fwd, "pv", probs, "pv");
    let mut b = vec![
        ptv(
            Storage::F32,
            params,
            [probs, d_o, dv],
            caps,
            "dV = Pᵀ·dO in f32",
        )?
        .backward("dv", vec![pd_saved]),
        qk(
            Storage::F32,
            params,
            [d_o, vsrc, "dP"],
            caps,
            "dP = dO·Vᵀ in f32",
        )?
        .backward("dp", vec![save_after(fwd, "pv", vsrc, "pv")]),
    ];
    if probs != "S" {
        b.push(dropout_bwd(params, "dP", caps));
    }
    b.extend([
        softmax_bwd(params, ["dP", "S"], caps).backward("softmax_bwd", vec![p_saved]),
        pv(
            Storage::F32,
            params,
            ["dP", "Ks", "dQs"],
            caps,
            "dQs = dS·Ks in f32",
        )?
        .backward("dq", vec![save_after(fwd, "qk", "Ks", "qk")]),
        ptv(
            Storage::F32,
            params,
            ["dP", "Qs", "dKs"],
            caps,
            "dKs = dSᵀ·Qs in f32",
        )?
        .backward("dk", vec![save_after(fwd, "qk", "Qs", "qk")]),
    ]);
    Ok(b)
}
