//! `unfused` and `unfused-inplace`: attention as the five textbook steps, each its own dispatch,
//! with the N x N score matrix materialized in device memory between them.
//!
//! ```text
//! qk      S  = Q Kᵀ                       (kernels/qk.rs, shaders/qk.wgsl)
//! scale   S *= scale        in place      (shaders/scale.wgsl)
//! copy    S2 = S.clone()      only in `unfused`: the copy inside an out-of-place masked_fill
//! mask    S2.masked_fill_(-inf)  (`unfused`) or S.masked_fill_(-inf) (`unfused-inplace`),
//!         plus the additive mask bias when there is one
//!                                          (shaders/mask.wgsl, entries `copy` and `in_place`)
//! softmax P  = softmax(S) row-wise, in place (shaders/softmax.wgsl; softmax4.wgsl when N % 4 == 0)
//! dropout PD = P ∘ keep / (1 - p)          only with --dropout > 0 (shaders/dropout.wgsl): out
//!         of place into a new N x N buffer PD (P is what softmax's backward needs), or, in
//!         `unfused-inplace*` inference, in place on P
//! pv      O  = P V (PD V with dropout)      (shaders/pv.wgsl)
//! ```
//! Q, K, V and O are in the run's dtype; S (and S2) are f32, except in `unfused-coop`'s
//! inference, which keeps them in the storage dtype (f16 / bf16) as PyTorch's naive path does
//! ([`coop_scores`] says when). Fully-masked rows come out NaN here (a plain softmax divides 0
//! by 0).
//!
//! # Chunking
//! When all heads' N x N scores do not fit one storage binding or one buffer, S (and S2) hold only
//! `c` heads and the five steps repeat for each chunk of `c` heads (Params.head_offset says which);
//! the plan then lists the dispatches once per chunk. Refused only when one head's N x N cannot be
//! bound.

use crate::gpu::AdapterCaps;
use crate::kernels::tiled_coop_vk::Build;
use crate::kernels::{
    buf, check_binding, check_grid, check_mask, chunks,
    dropout::{dropout, dropout_bwd},
    gemm_coop_vk, heads_per_chunk,
    mask::{copy, mask},
    math_rows::{row_step, RowStep},
    pv::{self, ptv, pv},
    qk::{self, qk},
    scale::scale,
    softmax::softmax,
    softmax_bwd::{exp_bwd, mask_bwd, normalize_bwd, softmax_bwd},
    Scores, Storage,
};
use crate::plan::{save_after, Dispatch, Params, Plan, Role};
use crate::problem::Problem;

pub fn build_out_of_place(p: &Problem, caps: &AdapterCaps) -> Result<Plan, String> {
    build(p, caps, false, Softmax::Fused, Gemm::Scalar)
}

pub fn build_in_place(p: &Problem, caps: &AdapterCaps) -> Result<Plan, String> {
    build(p, caps, true, Softmax::Fused, Gemm::Scalar)
}

/// `unfused-coop`: `unfused-inplace` with S = Q·Kᵀ and O = P·V on cooperative matrices
/// (kernels/gemm_coop_vk.rs): the materialized path on the matrix units the fused
/// `tiled-coop*` kernels use, five dispatches as `unfused-inplace`'s. Its backward's products
/// stay on scalar units (pv.wgsl, qk.wgsl).
pub fn build_coop(p: &Problem, caps: &AdapterCaps) -> Result<Plan, String> {
    build(p, caps, true, Softmax::Fused, Gemm::Coop(Build::Device))
}

/// `unfused-coop` with its products built on shaders/coopmat_emu.glsl: not a variant, the tests'
/// way to run the kernels' logic on lavapipe (as `tiled::build_coop_vk_emulated`).
pub fn build_coop_emulated(p: &Problem, caps: &AdapterCaps) -> Result<Plan, String> {
    let mut plan = build(p, caps, true, Softmax::Fused, Gemm::Coop(Build::Emulated))?;
    plan.variant = "unfused-coop (emulated cooperative matrices)".into();
    Ok(plan)
}

/// Where the plan's two forward matrix products run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Gemm {
    /// qk.wgsl and pv.wgsl (scalar f32 products).
    Scalar,
    /// gemm_coop_vk.comp in this build.
    Coop(Build),
}

/// `unfused-inplace-exp`: `unfused-inplace` with the softmax itself written as in-place steps
/// (row max, `S.sub_(max).exp_()`, `S.div_(sum)`): the same forward, and the in-place hazard in
/// training (exp_'s backward needs its output, which div_ overwrites), refused by `Plan::check`.
pub fn build_in_place_exp(p: &Problem, caps: &AdapterCaps) -> Result<Plan, String> {
    build(p, caps, true, Softmax::InPlaceExp, Gemm::Scalar)
}

/// How the plan computes softmax.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Softmax {
    /// One kernel (softmax.wgsl), P written over its input.
    Fused,
    /// row_max, exp_sum (S = exp(S - R), in place), normalize_rows (S /= L, in place).
    InPlaceExp,
}

/// The backward of the five steps, as autograd runs it, one dispatch per step, for the chunk of
/// heads in `params`; `prob` holds P, `dropped` P after dropout (`prob` without dropout). Saved
/// tensors are taken after the forward dispatches of the chunk (`fwd`).
#[allow(clippy::too_many_arguments)]
fn backward(
    p: &Problem,
    st: Storage,
    params: Params,
    prob: &str,
    dropped: &str,
    softmax: Softmax,
    fwd: &[Dispatch],
    caps: &AdapterCaps,
) -> Result<Vec<Dispatch>, String> {
    // The version `buf` had right after the forward dispatch `at` of this chunk.
    let saved = |buf: &str, by: &str, at: &str| save_after(fwd, at, buf, by);
    let p_saved = match softmax {
        Softmax::Fused => saved(prob, "softmax", "softmax"),
        Softmax::InPlaceExp => saved(prob, "normalize_rows", "normalize_rows"),
    };
    let pv_saved = saved(dropped, "pv", "pv");
    let mut b = vec![
        ptv(
            st,
            params,
            [dropped, "dO", "dV"],
            caps,
            if dropped == prob {
                "dV = Pᵀ·dO (pv's backward)"
            } else {
                "dV = PDᵀ·dO (pv's backward, P after dropout)"
            },
        )?
        .backward("dv", vec![pv_saved]),
        qk(
            st,
            params,
            ["dO", "V", "dP"],
            caps,
            "dP = dO·Vᵀ (pv's backward)",
        )?
        .backward("dp", vec![saved("V", "pv", "pv")]),
    ];
    if dropped != prob {
        // The factors are regenerated from the counter-based RNG: no mask is saved.
        b.push(dropout_bwd(params, "dP", caps));
    }
    match softmax {
        Softmax::Fused => {
            b.push(softmax_bwd(params, ["dP", prob], caps).backward("softmax_bwd", vec![p_saved]))
        }
        Softmax::InPlaceExp => {
            b.push(normalize_bwd(params, ["dP", prob, "L"], caps).backward(
                "normalize_bwd",
                // L as normalize_rows leaves it: math_rows.wgsl binds every buffer
                // read_write (one shared layout), so its version moves with normalize_rows,
                // which only reads it.
                vec![p_saved, saved("L", "normalize_rows", "normalize_rows")],
            ));
            // exp_'s output E, as it was right after exp_sum: normalize_rows overwrites it.
            b.push(
                exp_bwd(params, ["dP", prob], caps)
                    .backward("exp_bwd", vec![saved(prob, "exp_sum", "exp_sum")]),
            );
        }
    }
    let mask_saved = if p.mask.bias.is_some() {
        vec![saved(crate::kernels::MASK, "mask", "mask")]
    } else {
        vec![]
    };
    b.push(mask_bwd(p, params, "dP", caps).backward("mask_bwd", mask_saved));
    let mut sc = scale(st, Scores::F32, params, "dP", caps).backward("scale_bwd", vec![]);
    sc.note = "dS *= scale, in place (scale's backward)".into();
    b.push(sc);
    b.push(
        pv(
            st,
            params,
            ["dP", "K", "dQ"],
            caps,
            "dQ = dS·K (qk's backward)",
        )?
        .backward("dq", vec![saved("K", "qk", "qk")]),
    );
    b.push(
        ptv(
            st,
            params,
            ["dP", "Q", "dK"],
            caps,
            "dK = dSᵀ·Q (qk's backward)",
        )?
        .backward("dk", vec![saved("Q", "qk", "qk")]),
    );
    Ok(b)
}

fn build(
    p: &Problem,
    caps: &AdapterCaps,
    in_place: bool,
    softmax_kind: Softmax,
    gemm: Gemm,
) -> Result<Plan, String> {
    let st = Storage::of(p.dtype);
    let n = p.seq as u64;
    let bh = p.bh();
    let qkv = p.qkv_bytes();
    if let Gemm::Coop(b) = gemm {
        gemm_coop_vk::check(p, caps, b)?;
    }
    // The cooperative products read whole 64-row tiles of Q, K and V: padded past the last head.
    let input = |bytes: u64| match gemm {
        Gemm::Scalar => bytes,
        Gemm::Coop(_) => gemm_coop_vk::padded(bytes, p),
    };

    check_binding("Q ([B, H, N, D])", qkv, caps)?;
    let mask_bytes = check_mask(p, caps)?;
    // 16-bit scores where the plan may keep them (fewer, larger chunks).
    let (scores, scores_why) = match gemm {
        Gemm::Scalar => (Scores::F32, None),
        Gemm::Coop(_) => match coop_scores(p) {
            Ok(()) => (Scores::of(st), None),
            Err(why) => (Scores::F32, Some(why)),
        },
    };
    let per = heads_per_chunk(p, caps, scores.bytes())?;
    let parts = chunks(bh, per);
    check_grid("B*H (one workgroup layer per head)", per, caps)?;

    let nn_bytes = per * n * p.kv_seq as u64 * scores.bytes();
    let kv = p.kv_bytes();
    let mut buffers = vec![
        buf("Q", input(qkv), Role::Input, false),
        buf("K", input(kv), Role::Input, false),
        buf("V", input(kv), Role::Input, false),
    ];
    if mask_bytes > 0 {
        buffers.push(buf(crate::kernels::MASK, mask_bytes, Role::Input, false));
    }
    buffers.push(buf("S", nn_bytes, Role::Intermediate, true));
    // After the mask, the probabilities live in S (in place) or in the copy S2 (out of place).
    let masked = if in_place { "S" } else { "S2" };
    if !in_place {
        buffers.push(buf("S2", nn_bytes, Role::Intermediate, true));
    }
    // Dropout out of place into PD, except in place in `unfused-inplace*` inference (training
    // needs P itself for softmax's backward).
    let dropout_to = match (p.dropout().is_some(), in_place && !p.backward) {
        (false, _) => None,
        (true, true) => Some(masked),
        (true, false) => Some("PD"),
    };
    if dropout_to == Some("PD") {
        buffers.push(buf("PD", nn_bytes, Role::Intermediate, true));
    }
    let dropped = dropout_to.unwrap_or(masked);
    if softmax_kind == Softmax::InPlaceExp {
        buffers.push(buf("R", per * n * 4, Role::Intermediate, false));
        buffers.push(buf("L", per * n * 4, Role::Intermediate, false));
    }
    buffers.push(buf("O", qkv, Role::Output, false));
    if p.backward {
        buffers.push(buf("dO", qkv, Role::Input, false));
        buffers.push(buf("dP", nn_bytes, Role::Intermediate, true));
        buffers.push(buf("dQ", qkv, Role::Output, false));
        for g in ["dK", "dV"] {
            buffers.push(buf(g, kv, Role::Output, false));
        }
    }

    let mut dispatches = Vec::new();
    for &(first, count) in &parts {
        let params = Params::of(p).chunk(first as u32, count as u32);
        dispatches.push(match gemm {
            Gemm::Scalar => qk(
                st,
                params,
                ["Q", "K", "S"],
                caps,
                "S = Q·Kᵀ, all N x N scores (masked ones too)",
            )?,
            Gemm::Coop(b) => gemm_coop_vk::qk(st, scores, params, ["Q", "K", "S"], caps, b)?,
        });
        dispatches.push(scale(st, scores, params, "S", caps));
        if !in_place {
            dispatches.push(copy(st, params, "S", "S2", caps));
        }
        dispatches.push(mask(p, st, scores, params, masked, caps));
        match softmax_kind {
            Softmax::Fused => dispatches.push(softmax(st, scores, params, masked, caps)),
            Softmax::InPlaceExp => {
                for step in [RowStep::RowMax, RowStep::ExpSum, RowStep::NormalizeRows] {
                    dispatches.push(row_step(step, params, caps));
                }
            }
        }
        if let Some(to) = dropout_to {
            dispatches.push(dropout(params, masked, to, caps));
        }
        dispatches.push(match gemm {
            Gemm::Scalar => pv(
                st,
                params,
                [dropped, "V", "O"],
                caps,
                "O = P·V over all N keys (the zeros above the diagonal too)",
            )?,
            Gemm::Coop(b) => gemm_coop_vk::pv(st, scores, params, [dropped, "V", "O"], caps, b)?,
        });
        if p.backward {
            // Heads are independent: each chunk's backward runs right after its forward, before
            // the next chunk overwrites the N x N buffers.
            let b = backward(
                p,
                st,
                params,
                masked,
                dropped,
                softmax_kind,
                &dispatches,
                caps,
            )?;
            dispatches.extend(b);
        }
    }

    let mut notes = vec![format!(
        "{} N x N buffer(s) of {} bytes each are materialized ({} scores)",
        if in_place { 1 } else { 2 } + usize::from(dropout_to == Some("PD")),
        nn_bytes,
        scores.name()
    )];
    match dropout_to {
        Some("PD") => notes.push(
            "dropout out of place: +1 dispatch and +1 N x N buffer (PD); P itself stays for              softmax's backward, as F.dropout(attn, p) keeps its input"
                .into(),
        ),
        Some(_) => notes.push(
            "dropout in place on P (inference only: in training, softmax's backward needs P, so              the training plan drops out of place)"
                .into(),
        ),
        None => {}
    }
    if gemm != Gemm::Scalar {
        notes.push(
            "S = Q·Kᵀ and O = P·V on cooperative matrices (shaders/gemm_coop_vk.comp: f16 or \
             bf16 products, f32 sums); scale, mask and softmax as unfused-inplace's"
                .into(),
        );
        notes.push(match scores_why {
            None => format!(
                "S and P kept in {} (PyTorch's naive path keeps them in the input dtype): \
                 half the bytes of f32 scores through qk, scale, mask, softmax and pv{}",
                scores.name(),
                if scores == Scores::F16 {
                    "; a score past f16's range (|q·k| > 65504, before the scale) becomes ±inf \
                     and its row NaN, as in PyTorch's naive path"
                } else {
                    ""
                }
            ),
            Some(why) => format!("S and P kept in f32, not the storage dtype: {why}"),
        });
        if p.backward {
            notes.push("the backward's products run on scalar units (pv.wgsl, qk.wgsl)".into());
        }
    }
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
            "mask applied in place: still safe for training, since no backward step reads the \
             scores it overwrites (see --backward's training note)"
                .into(),
        );
    }
    if p.causal && p.mask.bias.is_some() {
        notes.push("causal AND explicit mask / key padding: their intersection".into());
    }
    notes.push("a row with no allowed key returns NaN (plain softmax: 0/0)".into());
    let training_note = p.backward.then(|| {
        let mut t = training_note(in_place, softmax_kind);
        if dropout_to.is_some() {
            t += "; dropout runs out of place (PD = P ∘ keep / (1 - p)): softmax's backward \
                  needs P and pv's needs PD, and the backward regenerates the keep mask from the \
                  counter-based RNG instead of saving it";
        }
        t
    });
    Ok(Plan {
        variant: String::new(),
        buffers,
        dispatches,
        output: "O".into(),
        config: match gemm {
            Gemm::Scalar => vec![
                ("QK_TILE".into(), qk::TILE as f64),
                ("PV_TM".into(), pv::TM as f64),
                ("PV_TN".into(), pv::TN as f64),
            ],
            Gemm::Coop(_) => vec![("GEMM_TILE".into(), gemm_coop_vk::TILE as f64)],
        }
        .into_iter()
        .chain([
            ("heads_per_chunk".into(), per as f64),
            ("chunks".into(), parts.len() as f64),
        ])
        .collect(),
        notes,
        tile: None,
        grads: if p.backward {
            vec!["dQ".into(), "dK".into(), "dV".into()]
        } else {
            vec![]
        },
        training_note,
    })
}

/// Whether `unfused-coop` can keep S and P in the storage dtype for `p`, or why they stay f32:
/// only the forward's own 4-score kernels read 16-bit scores.
fn coop_scores(p: &Problem) -> Result<(), &'static str> {
    if p.backward {
        Err("the backward's scalar kernels (softmax_bwd.wgsl, pv.wgsl) read P in f32")
    } else if p.dropout().is_some() {
        Err("dropout.wgsl reads and writes P in f32")
    } else if !p.kv_seq.is_multiple_of(4) {
        Err("16-bit scores need rows of whole 4-score words (M % 4 == 0)")
    } else {
        Ok(())
    }
}

/// Whether the in-place steps are safe for training, and why.
fn training_note(in_place: bool, softmax: Softmax) -> String {
    match (in_place, softmax) {
        (false, _) => "safe for training: masked_fill runs out of place (S keeps the scaled \
            scores, P goes to S2), and softmax writes P over S2 in place, which is fine since \
            softmax's backward needs only its output P; the backward reads P, Q, K, V (and the \
            mask), none of them overwritten after it was saved"
            .into(),
        (true, Softmax::Fused) => "safe for training: scale (S *= scale) and masked_fill_ \
            overwrite S, and softmax writes P over it, but no backward step needs the overwritten \
            values: scale's backward needs only the constant, masked_fill's only the mask, \
            softmax's only its output P (saved after softmax, never overwritten); qk's needs Q \
            and K, pv's P and V"
            .into(),
        (true, Softmax::InPlaceExp) => "NOT safe for training: exp_sum (S.exp_()) writes E \
            over S and normalize_rows (S.div_(sum)) overwrites E with P, but exp_'s backward \
            needs E: the plan check refuses the backward (autograd raises the same error)"
            .into(),
    }
}
