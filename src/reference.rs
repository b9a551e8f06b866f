//! CPU f64 attention: the oracle every variant is checked against.
//!
//! It computes on exactly the values the GPU sees (the inputs after rounding to the run's dtype,
//! widened to f64), with the same masks: the causal rule (key j takes part in row i iff j <= i),
//! plus the normalized additive bias (`src/mask.rs`), then a max-subtracted softmax in f64.
//! A row in which no key takes part follows the variant's [`Semantics`]: all 0 or all NaN.
//! With `--dropout`, every probability is multiplied by its factor from [`crate::dropout`] (0 or
//! 1 / (1 - p), the same keep mask as the GPU's) after the softmax, as SDPA does: the output
//! stays an element-wise check.

use crate::mask::{bias_at, Semantics};
use crate::problem::{Inputs, Problem};

/// One query row: head index `bh` in `0..B*H` and row `i` in `0..N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RowId {
    pub bh: u64,
    pub i: u64,
}

/// f64 output row `O[bh, i, :]` with the SDPA semantics for fully-masked rows (0).
pub fn reference_row(p: &Problem, x: &Inputs, row: RowId) -> Vec<f64> {
    reference_row_with(p, x, row, Semantics::Zero)
}

/// f64 output row `O[bh, i, :]`; a row with no allowed key is all 0 or all NaN per `sem`.
pub fn reference_row_with(p: &Problem, x: &Inputs, row: RowId, sem: Semantics) -> Vec<f64> {
    let n = p.seq as usize;
    let d = p.head_dim as usize;
    let base = row.bh as usize * n * d;
    let kbase = (row.bh / p.group() as u64) as usize * p.kv_seq as usize * d;
    let q = &x.q[base + row.i as usize * d..base + (row.i as usize + 1) * d];
    let keys = p.keys_for_row(row.i) as usize;
    let scale = p.scale as f64;
    let mut s = Vec::with_capacity(keys);
    for j in 0..keys {
        let k = &x.k[kbase + j * d..kbase + (j + 1) * d];
        let dot: f64 = q.iter().zip(k).map(|(a, b)| *a as f64 * *b as f64).sum();
        s.push(dot * scale + bias_at(p, x, row.bh, row.i, j as u64) as f64);
    }
    let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        // No key takes part.
        let v = match sem {
            Semantics::Zero => 0.0,
            Semantics::Nan => f64::NAN,
        };
        return vec![v; d];
    }
    let mut denom = 0.0;
    for v in s.iter_mut() {
        *v = (*v - m).exp();
        denom += *v;
    }
    let drop = p.dropout();
    let mut out = vec![0.0f64; d];
    for (j, pj) in s.iter().enumerate() {
        let f = drop.map_or(1.0, |z| z.factor(row.bh, row.i, j as u64));
        let vrow = &x.v[kbase + j * d..kbase + (j + 1) * d];
        for (o, vv) in out.iter_mut().zip(vrow) {
            *o += pj * f * *vv as f64;
        }
    }
    for o in out.iter_mut() {
        *o /= denom;
    }
    out
}

/// The low-precision twin of [`reference_row_with`]: the same attention computed the way a fused
/// kernel of the run's dtype rounds (FlashAttention's `convert_type<Element>(acc_s)`): scores
/// accumulated in f32, softmax in f32 (the row sum from the unrounded probabilities), P rounded to
/// the run's dtype before P·V, P·V accumulated in f32, the output rounded to the run's dtype. For
/// f32 runs nothing is rounded but the f32 arithmetic itself. Its error against the f64 reference
/// is what a correct low-precision kernel can be expected to make (`validate`'s PyTorch rule).
pub fn low_precision_row(p: &Problem, x: &Inputs, row: RowId, sem: Semantics) -> Vec<f64> {
    let n = p.seq as usize;
    let d = p.head_dim as usize;
    let base = row.bh as usize * n * d;
    let kbase = (row.bh / p.group() as u64) as usize * p.kv_seq as usize * d;
    let q = &x.q[base + row.i as usize * d..base + (row.i as usize + 1) * d];
    let keys = p.keys_for_row(row.i) as usize;
    let mut s = Vec::with_capacity(keys);
    for j in 0..keys {
        let k = &x.k[kbase + j * d..kbase + (j + 1) * d];
        let dot: f32 = q.iter().zip(k).map(|(a, b)| a * b).sum();
        s.push(dot * p.scale + bias_at(p, x, row.bh, row.i, j as u64));
    }
    let m = s.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    if m == f32::NEG_INFINITY {
        let v = match sem {
            Semantics::Zero => 0.0,
            Semantics::Nan => f64::NAN,
        };
        return vec![v; d];
    }
    let drop = p.dropout();
    let mut l = 0.0f32;
    let mut out = vec![0.0f32; d];
    for (j, sj) in s.iter().enumerate() {
        let pj = (sj - m).exp();
        l += pj;
        let f = drop.map_or(1.0, |z| z.factor(row.bh, row.i, j as u64) as f32);
        let pj = p.dtype.round(pj * f);
        let vrow = &x.v[kbase + j * d..kbase + (j + 1) * d];
        for (o, vv) in out.iter_mut().zip(vrow) {
            *o += pj * vv;
        }
    }
    out.iter().map(|o| p.dtype.round(o / l) as f64).collect()
}

/// The gradients of one head, each `[N, D]` row-major (row i of dQ is query i; row j of dK and dV
/// is key j; with GQA dK and dV are those of the head's K/V head).
#[derive(Debug, Clone, PartialEq)]
pub struct HeadGrads {
    pub dq: Vec<f64>,
    pub dk: Vec<f64>,
    pub dv: Vec<f64>,
}

/// The backward of head `bh` for the upstream gradient [`Inputs::d_o`]: its dQ, and dK, dV of its
/// K/V head (summed over the query heads that share it, see [`backward_group`]).
pub fn backward_head(p: &Problem, x: &Inputs, bh: u64, sem: Semantics, lp: bool) -> HeadGrads {
    let group = p.group() as u64;
    let mut g = backward_group(p, x, bh / group, sem, lp);
    HeadGrads {
        dq: g.dq.swap_remove((bh % group) as usize),
        dk: g.dk,
        dv: g.dv,
    }
}

/// The gradients of one K/V head and the query heads that read it (one head each without GQA).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupGrads {
    /// dQ of query heads `kvh * group ..`, in order, each `[N, D]`.
    pub dq: Vec<Vec<f64>>,
    /// dK and dV of K/V head `kvh`: sums over the group's query heads (what autograd's
    /// expand / repeat_interleave backward does), rounded once.
    pub dk: Vec<f64>,
    pub dv: Vec<f64>,
}

/// The backward of K/V head `kvh` and its query heads for the upstream gradient
/// [`Inputs::d_o`]: the oracle of `--backward` (with `lp = false`) and its low-precision twin
/// (`lp = true`).
///
/// Forward as [`reference_row_with`]: S = scale·Q·Kᵀ + bias on the allowed pairs, P = softmax
/// (a fully-masked row is all 0 or all NaN per `sem`). Then, as autograd runs the textbook code:
/// dV = Pᵀ·dO; dP = dO·Vᵀ; dS = P ∘ (dP − rowsum(dP ∘ P)); dS = 0 where the mask blocks
/// (masked_fill's backward, so a fully-masked row of a NaN variant gives dS = 0 and dQ = 0 while
/// its NaN P still reaches every dV row of the head); dS *= scale; dQ = dS·K; dK = dSᵀ·Q; dK and
/// dV summed over the query heads of the group.
///
/// With dropout (factors Z, 0 or 1 / (1 - p)), P·V uses P ∘ Z: dV = (P ∘ Z)ᵀ·dO, and the
/// softmax's backward gets dP ∘ Z for dP.
///
/// The twin computes the same in f32 arithmetic and rounds where FlashAttention-2's backward
/// rounds to the storage dtype: P before dV = Pᵀ·dO, dS before dQ and dK, and the three outputs;
/// its D = rowsum(dO ∘ O) is taken from the forward twin's rounded O, as FlashAttention-2 reads
/// the stored output (for one key, dS is then the rounding of O rather than exactly 0).
pub fn backward_group(p: &Problem, x: &Inputs, kvh: u64, sem: Semantics, lp: bool) -> GroupGrads {
    let n = p.seq as usize;
    let m = p.kv_seq as usize;
    let d = p.head_dim as usize;
    let group = p.group() as u64;
    let kbase = kvh as usize * m * d;
    let d_o = x
        .d_o
        .as_deref()
        .expect("a training problem's inputs hold dO");
    let rows = |t: &'_ [f32], base: usize, count: usize| -> Vec<Vec<f64>> {
        (0..count)
            .map(|i| {
                t[base + i * d..base + (i + 1) * d]
                    .iter()
                    .map(|v| *v as f64)
                    .collect()
            })
            .collect()
    };
    let (k, v) = (rows(&x.k, kbase, m), rows(&x.v, kbase, m));
    // f32 arithmetic (twin) or f64; rounding to the storage dtype (twin) or none.
    let f = |a: f64| if lp { a as f32 as f64 } else { a };
    let r = |a: f64| {
        if lp {
            p.dtype.round(a as f32) as f64
        } else {
            a
        }
    };
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).fold(0.0, |acc, (x, y)| f(acc + x * y));
    let scale = p.scale as f64;
    let drop = p.dropout();
    let mut dk = vec![0.0f64; m * d];
    let mut dv = vec![0.0f64; m * d];
    let mut dqs = Vec::new();
    for bh in kvh * group..(kvh + 1) * group {
        let base = bh as usize * n * d;
        let (q, g) = (rows(&x.q, base, n), rows(d_o, base, n));
        let mut pm = vec![0.0f64; n * m];
        let mut allowed = vec![false; n * m];
        for i in 0..n {
            let mut mx = f64::NEG_INFINITY;
            for j in 0..m {
                let b = if !p.causal_allows(i as u64, j as u64) {
                    f64::NEG_INFINITY
                } else {
                    bias_at(p, x, bh, i as u64, j as u64) as f64
                };
                if b == f64::NEG_INFINITY {
                    continue;
                }
                allowed[i * m + j] = true;
                let s = f(f(dot(&q[i], &k[j]) * scale) + b);
                pm[i * m + j] = s;
                mx = mx.max(s);
            }
            if mx == f64::NEG_INFINITY {
                let fill = match sem {
                    Semantics::Zero => 0.0,
                    Semantics::Nan => f64::NAN,
                };
                pm[i * m..(i + 1) * m].fill(fill);
                continue;
            }
            let mut sum = 0.0;
            for j in 0..m {
                if allowed[i * m + j] {
                    pm[i * m + j] = f((pm[i * m + j] - mx).exp());
                    sum = f(sum + pm[i * m + j]);
                } else {
                    pm[i * m + j] = 0.0;
                }
            }
            for j in 0..m {
                pm[i * m + j] = f(pm[i * m + j] / sum);
            }
        }
        let z = |i: usize, j: usize| {
            drop.map_or(1.0, |z| {
                let x = z.factor(bh, i as u64, j as u64);
                if lp {
                    x as f32 as f64
                } else {
                    x
                }
            })
        };
        let mut dq = vec![0.0f64; n * d];
        for i in 0..n {
            let dp: Vec<f64> = (0..m).map(|j| f(dot(&g[i], &v[j]) * z(i, j))).collect();
            // D_i = rowsum(dP ∘ P); the twin takes it as FlashAttention-2 does, from the stored
            // (rounded) output: rowsum(dO ∘ O), O from the forward's twin.
            let di = if lp {
                let o = low_precision_row(p, x, RowId { bh, i: i as u64 }, sem);
                dot(&g[i], &o)
            } else {
                (0..m).fold(0.0, |acc, j| f(acc + pm[i * m + j] * dp[j]))
            };
            for j in 0..m {
                let pij = pm[i * m + j];
                let prd = r(f(pij * z(i, j)));
                let ds = if allowed[i * m + j] {
                    r(f(f(pij * f(dp[j] - di)) * scale))
                } else {
                    0.0
                };
                for c in 0..d {
                    dv[j * d + c] = f(dv[j * d + c] + prd * g[i][c]);
                    dq[i * d + c] = f(dq[i * d + c] + ds * k[j][c]);
                    dk[j * d + c] = f(dk[j * d + c] + ds * q[i][c]);
                }
            }
        }
        dq.iter_mut().for_each(|a| *a = r(*a));
        dqs.push(dq);
    }
    for t in [&mut dk, &mut dv] {
        t.iter_mut().for_each(|a| *a = r(*a));
    }
    GroupGrads { dq: dqs, dk, dv }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mask::normalize;
    use crate::problem::Convention;

    #[test]
    fn single_key_returns_its_value() {
        // Causal row 0 sees only key 0: the output is V[0] exactly.
        let p = Problem::new(1, 1, 3, 4, true, 1);
        let x = Inputs::generate(&p);
        let o = reference_row(&p, &x, RowId { bh: 0, i: 0 });
        for (d, od) in o.iter().enumerate() {
            assert_eq!(*od, x.v[d] as f64);
        }
    }

    #[test]
    fn equal_scores_average_values() {
        // With Q = 0 every score is 0: the output is the plain mean of the visible V rows.
        let p = Problem::new(1, 1, 4, 2, false, 3);
        let mut x = Inputs::generate(&p);
        x.q.iter_mut().for_each(|v| *v = 0.0);
        let o = reference_row(&p, &x, RowId { bh: 0, i: 1 });
        for (d, od) in o.iter().enumerate() {
            let mean: f64 = (0..4).map(|j| x.v[j * 2 + d] as f64).sum::<f64>() / 4.0;
            assert!((od - mean).abs() < 1e-12);
        }
    }

    #[test]
    fn the_low_precision_twin_is_close_to_the_oracle_and_rounds_as_its_dtype() {
        for dtype in crate::problem::DType::ALL {
            let mut p = Problem::new(1, 2, 64, 16, true, 5);
            p.dtype = dtype;
            let x = Inputs::generate(&p);
            let mut worst = 0.0f64;
            for i in 0..64 {
                let row = RowId { bh: 1, i };
                let r = reference_row(&p, &x, row);
                let lp = low_precision_row(&p, &x, row, Semantics::Zero);
                for (a, b) in r.iter().zip(&lp) {
                    worst = worst.max((a - b).abs());
                    // Every value is representable in the run's dtype.
                    assert_eq!(dtype.round(*b as f32) as f64, *b);
                }
            }
            let bound = match dtype {
                crate::problem::DType::F32 => 1e-5,
                crate::problem::DType::F16 => 5e-3,
                crate::problem::DType::BF16 => 5e-2,
            };
            assert!(worst < bound, "{}: {worst}", dtype.name());
            if dtype != crate::problem::DType::F32 {
                assert!(worst > 0.0, "{}: rounding P and O must show", dtype.name());
            }
        }
    }

    #[test]
    fn fully_masked_rows_follow_the_semantics() {
        let mut p = Problem::new(2, 1, 3, 2, false, 3);
        let mut x = Inputs::generate(&p);
        normalize(&mut p, &mut x, None, Convention::Sdpa, Some(&[0, 3])).unwrap();
        let z = reference_row_with(&p, &x, RowId { bh: 0, i: 1 }, Semantics::Zero);
        assert_eq!(z, vec![0.0, 0.0]);
        let nan = reference_row_with(&p, &x, RowId { bh: 0, i: 1 }, Semantics::Nan);
        assert!(nan.iter().all(|v| v.is_nan()));
        let ok = reference_row_with(&p, &x, RowId { bh: 1, i: 1 }, Semantics::Nan);
        assert!(ok.iter().all(|v| v.is_finite()));
    }
    /// Proves the backward oracle by central finite differences in f64: for the loss
    /// sum(O ∘ dO), dL/dQ, dL/dK, dL/dV must match `backward_head` on tiny shapes with causal,
    /// a float mask and key padding.
    #[test]
    fn the_backward_oracle_matches_finite_differences() {
        use crate::mask::{MaskValues, UserMask};
        // (causal, masked, dropout)
        let cases: Vec<(bool, bool, f64)> = vec![
            (false, false, 0.0),
            (true, false, 0.0),
            (true, true, 0.0),
            (false, false, 0.4),
            (true, true, 0.3),
        ];
        for (causal, masked, dropout) in cases {
            let mut p = Problem::new(2, 1, 5, 3, causal, 11);
            p.backward = true;
            p.dropout = dropout;
            let mut x = Inputs::generate(&p);
            if masked {
                let values: Vec<f32> = (0..25).map(|e| ((e * 7) % 5) as f32 * 0.3 - 0.5).collect();
                let user = UserMask {
                    shape: vec![5, 5],
                    values: MaskValues::Float(values),
                    source: "test".into(),
                };
                // A float mask on top of key padding (batch 1 keeps its first 3 keys).
                normalize(&mut p, &mut x, Some(&user), Convention::Sdpa, Some(&[5, 3])).unwrap();
            }
            let (n, d) = (5usize, 3usize);
            let loss = |x: &Inputs, bh: u64| -> f64 {
                let g = x.d_o.as_ref().unwrap();
                (0..n as u64)
                    .map(|i| {
                        let o = reference_row(&p, x, RowId { bh, i });
                        let at = (bh as usize * n + i as usize) * d;
                        o.iter()
                            .zip(&g[at..at + d])
                            .map(|(a, b)| a * *b as f64)
                            .sum::<f64>()
                    })
                    .sum()
            };
            for bh in 0..2u64 {
                let grads = backward_head(&p, &x, bh, Semantics::Zero, false);
                let h = 1e-3f32;
                for (which, exact) in [(0, &grads.dq), (1, &grads.dk), (2, &grads.dv)] {
                    for (e, &want) in exact.iter().enumerate() {
                        let at = bh as usize * n * d + e;
                        let bump = |delta: f32| {
                            let mut y = x.clone();
                            let t = match which {
                                0 => &mut y.q,
                                1 => &mut y.k,
                                _ => &mut y.v,
                            };
                            t[at] += delta;
                            loss(&y, bh)
                        };
                        let fd = (bump(h) - bump(-h)) / (2.0 * h as f64);
                        let err = (fd - want).abs();
                        assert!(
                            err < 1e-5 * (1.0 + want.abs()),
                            "causal={causal} masked={masked} dropout={dropout} head {bh} tensor \
                             {which} elem {e}: \
                             finite difference {fd} vs oracle {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_backward_twin_is_close_and_a_nan_row_poisons_dv_only() {
        let mut p = Problem::new(1, 1, 32, 8, true, 2);
        p.backward = true;
        p.dtype = crate::problem::DType::F16;
        let x = Inputs::generate(&p);
        let a = backward_head(&p, &x, 0, Semantics::Zero, false);
        let b = backward_head(&p, &x, 0, Semantics::Zero, true);
        let worst =
            a.dq.iter()
                .chain(&a.dk)
                .chain(&a.dv)
                .zip(b.dq.iter().chain(&b.dk).chain(&b.dv))
                .map(|(u, v)| (u - v).abs())
                .fold(0.0, f64::max);
        assert!(worst > 0.0 && worst < 2e-2, "{worst}");
        // Key padding 0 for the only batch element: every row fully masked.
        let mut p = Problem::new(1, 1, 4, 2, false, 2);
        p.backward = true;
        let mut x = Inputs::generate(&p);
        normalize(&mut p, &mut x, None, Convention::Sdpa, Some(&[0])).unwrap();
        let nan = backward_head(&p, &x, 0, Semantics::Nan, false);
        assert!(nan.dv.iter().all(|v| v.is_nan()));
        assert!(nan.dq.iter().chain(&nan.dk).all(|v| *v == 0.0));
        let zero = backward_head(&p, &x, 0, Semantics::Zero, false);
        assert!(zero
            .dq
            .iter()
            .chain(&zero.dk)
            .chain(&zero.dv)
            .all(|v| *v == 0.0));
    }
}
