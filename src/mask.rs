//! Masks: the user's description (explicit bool / float mask, key padding, causal, convention)
//! normalized on the host into the one buffer the GPU sees.
//!
//! # What the GPU sees
//! - **causal**: an index test in the kernels (key j takes part in row i iff j <= i + offset:
//!   0 top-left as SDPA's `is_causal`, M - N bottom-right); no buffer.
//! - **everything else** (`--mask`, `--key-padding`): one additive **f32 bias** buffer `MASK` of
//!   shape `[Bm, Hm, N, M]` (Bm in {1, B}, Hm in {1, H}, broadcast over the other), added to the
//!   scaled scores: 0 where a key takes part, -inf where it is blocked, and a float mask's own
//!   values. Key padding writes -inf in columns j >= L_b of batch b (so the bias then has Bm = B).
//!
//! Combining: causal, the explicit mask and key padding are intersected (a key takes part only if
//! every one of them lets it); a float mask is added on top. A row in which no key takes part is a
//! *fully-masked row*: see [`Semantics`].

use serde::Serialize;

use crate::problem::{BiasLayout, Convention, Inputs, MaskDesc, MaskKind, Problem};
use crate::{Error, Result};

/// The values of an explicit mask, as read from a file or generated.
#[derive(Debug, Clone, PartialEq)]
pub enum MaskValues {
    Bool(Vec<bool>),
    Float(Vec<f32>),
}

/// An explicit mask of shape `[N, M]` or `[B, 1 or H, N, M]`.
#[derive(Debug, Clone, PartialEq)]
pub struct UserMask {
    pub shape: Vec<u64>,
    pub values: MaskValues,
    /// Path or `generated`, for messages and reports.
    pub source: String,
}

/// What a variant returns for a row in which no key takes part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Semantics {
    /// 0 for every output element (SDPA since PyTorch 2.5; `math` and `tiled`).
    Zero,
    /// NaN for every output element (a plain softmax divides 0 by 0; `unfused*`).
    Nan,
}

impl Semantics {
    pub fn describe(self) -> &'static str {
        match self {
            Semantics::Zero => "a fully-masked row returns 0 (SDPA's convention)",
            Semantics::Nan => "a fully-masked row returns NaN (plain softmax: 0/0)",
        }
    }
}

/// Checks the explicit mask's shape against the problem: `[N, M]`, `[B, 1, N, M]` or
/// `[B, H, N, M]`. Returns (Bm, Hm).
pub fn check_shape(p: &Problem, shape: &[u64], what: &str) -> Result<(u32, u32)> {
    let (b, h, n, m) = (
        p.batch as u64,
        p.heads as u64,
        p.seq as u64,
        p.kv_seq as u64,
    );
    let bad = || {
        Err(Error::InvalidProblem(format!(
            "{what}: expected shape [{n}, {m}] or [{b}, {h}, {n}, {m}], with 1 for B or H to \
             broadcast (N={n}, M={m}, B={b}, H={h}), got {shape:?}"
        )))
    };
    match shape {
        [x, y] if *x == n && *y == m => Ok((1, 1)),
        [bb, hh, x, y]
            if (*bb == 1 || *bb == b) && (*hh == 1 || *hh == h) && *x == n && *y == m =>
        {
            Ok((*bb as u32, *hh as u32))
        }
        _ => bad(),
    }
}

/// Builds the problem's mask description and the normalized bias (see the module docs).
/// Every message names the bad value.
pub fn normalize(
    p: &mut Problem,
    x: &mut Inputs,
    user: Option<&UserMask>,
    convention: Convention,
    key_padding: Option<&[u32]>,
) -> Result<()> {
    let n = p.seq as usize;
    let m = p.kv_seq as usize;
    let nn = n * m;
    let mut desc = MaskDesc {
        kind: MaskKind::None,
        ..Default::default()
    };
    if let Some(kp) = key_padding {
        if kp.len() != p.batch as usize {
            return Err(Error::InvalidProblem(format!(
                "--key-padding has {} {kp:?}, expected one per batch element (B={})",
                crate::text::count(kp.len() as u64, "length", "lengths"),
                p.batch
            )));
        }
        if let Some(bad) = kp.iter().find(|&&l| l > p.kv_seq) {
            return Err(Error::InvalidProblem(format!(
                "--key-padding length {bad} exceeds the {} keys (M; lengths {kp:?})",
                p.kv_seq
            )));
        }
        desc.key_padding = Some(kp.to_vec());
    }
    let (mut bm, mut hm) = (1u32, 1u32);
    let mut bias: Option<Vec<f32>> = None;
    if let Some(u) = user {
        let (b0, h0) = check_shape(p, &u.shape, &format!("mask {}", u.source))?;
        let expect = b0 as usize * h0 as usize * nn;
        let got = match &u.values {
            MaskValues::Bool(v) => v.len(),
            MaskValues::Float(v) => v.len(),
        };
        if got != expect {
            return Err(Error::InvalidProblem(format!(
                "mask {}: shape {:?} needs {expect} values, got {got}",
                u.source, u.shape
            )));
        }
        (bm, hm) = (b0, h0);
        bias = Some(match &u.values {
            MaskValues::Bool(v) => {
                desc.kind = MaskKind::Bool;
                desc.convention = Some(convention);
                v.iter()
                    .map(|&t| {
                        let takes_part = match convention {
                            Convention::Sdpa => t,
                            Convention::Mha => !t,
                        };
                        if takes_part {
                            0.0
                        } else {
                            f32::NEG_INFINITY
                        }
                    })
                    .collect()
            }
            MaskValues::Float(v) => {
                desc.kind = MaskKind::Float;
                if let Some((i, bad)) = v
                    .iter()
                    .enumerate()
                    .find(|(_, x)| x.is_nan() || **x == f32::INFINITY)
                {
                    return Err(Error::InvalidProblem(format!(
                        "mask {}: a float mask is added to the scores and must not hold NaN or +inf \
                         (element {i} is {bad})",
                        u.source
                    )));
                }
                v.clone()
            }
        });
        desc.source = Some(u.source.clone());
        desc.shape = u.shape.clone();
    }
    if let Some(kp) = key_padding {
        // Expand the bias over the batch, then block the padded keys of each batch element.
        let base = bias.unwrap_or_else(|| vec![0.0; nn]);
        let mut out = Vec::with_capacity(p.batch as usize * hm as usize * nn);
        for (b, &len) in kp.iter().enumerate() {
            for h in 0..hm as usize {
                let src = if bm == 1 {
                    &base[h * nn..(h + 1) * nn]
                } else {
                    &base[(b * hm as usize + h) * nn..(b * hm as usize + h + 1) * nn]
                };
                for i in 0..n {
                    for j in 0..m {
                        let v = src[i * m + j];
                        out.push(if j >= len as usize {
                            f32::NEG_INFINITY
                        } else {
                            v
                        });
                    }
                }
            }
        }
        bm = p.batch;
        bias = Some(out);
    }
    if bias.is_some() {
        desc.bias = Some(BiasLayout {
            batch: bm,
            heads: hm,
        });
    }
    p.mask = desc;
    x.bias = bias;
    Ok(())
}

/// The bias of (head `bh`, row i, key j), 0 without a mask.
pub fn bias_at(p: &Problem, x: &Inputs, bh: u64, i: u64, j: u64) -> f32 {
    match (p.mask.bias, &x.bias) {
        (Some(l), Some(b)) => {
            let (n, m) = (p.seq as u64, p.kv_seq as u64);
            let (bb, hh) = (bh / p.heads as u64, bh % p.heads as u64);
            let bi = if l.batch == 1 { 0 } else { bb };
            let hi = if l.heads == 1 { 0 } else { hh };
            b[(((bi * l.heads as u64 + hi) * n + i) * m + j) as usize]
        }
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prob() -> (Problem, Inputs) {
        let p = Problem::new(2, 2, 3, 4, false, 0);
        let x = Inputs::generate(&p);
        (p, x)
    }

    #[test]
    fn conventions_invert_bool_masks() {
        let (mut p, mut x) = prob();
        let u = UserMask {
            shape: vec![3, 3],
            values: MaskValues::Bool(vec![
                true, false, true, false, false, false, true, true, true,
            ]),
            source: "t".into(),
        };
        normalize(&mut p, &mut x, Some(&u), Convention::Sdpa, None).unwrap();
        assert_eq!(bias_at(&p, &x, 3, 0, 0), 0.0);
        assert_eq!(bias_at(&p, &x, 3, 0, 1), f32::NEG_INFINITY);
        normalize(&mut p, &mut x, Some(&u), Convention::Mha, None).unwrap();
        assert_eq!(bias_at(&p, &x, 3, 0, 0), f32::NEG_INFINITY);
        assert_eq!(bias_at(&p, &x, 3, 0, 1), 0.0);
    }

    #[test]
    fn key_padding_blocks_trailing_keys_per_batch() {
        let (mut p, mut x) = prob();
        normalize(&mut p, &mut x, None, Convention::Sdpa, Some(&[1, 3])).unwrap();
        assert_eq!(p.mask.bias, Some(BiasLayout { batch: 2, heads: 1 }));
        assert_eq!(bias_at(&p, &x, 0, 2, 0), 0.0);
        assert_eq!(bias_at(&p, &x, 1, 2, 1), f32::NEG_INFINITY);
        assert_eq!(bias_at(&p, &x, 2, 2, 2), 0.0);
        let e = normalize(&mut p, &mut x, None, Convention::Sdpa, Some(&[1])).unwrap_err();
        assert!(e.to_string().contains("one per batch"), "{e}");
        let e = normalize(&mut p, &mut x, None, Convention::Sdpa, Some(&[1, 4])).unwrap_err();
        assert!(e.to_string().contains("4 exceeds the 3 keys"), "{e}");
    }

    #[test]
    fn bad_shapes_and_values_are_named() {
        let (mut p, mut x) = prob();
        let u = UserMask {
            shape: vec![2, 3, 3, 3],
            values: MaskValues::Float(vec![0.0; 54]),
            source: "m.npy".into(),
        };
        let e = normalize(&mut p, &mut x, Some(&u), Convention::Sdpa, None).unwrap_err();
        assert!(e.to_string().contains("[2, 3, 3, 3]"), "{e}");
        let u = UserMask {
            shape: vec![3, 3],
            values: MaskValues::Float(vec![f32::NAN; 9]),
            source: "m.npy".into(),
        };
        let e = normalize(&mut p, &mut x, Some(&u), Convention::Sdpa, None).unwrap_err();
        assert!(e.to_string().contains("NaN"), "{e}");
    }
}
