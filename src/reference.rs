//! CPU f64 attention: the oracle every variant is checked against.
//!
//! It computes on exactly the values the GPU sees (the inputs after rounding to the run's dtype,
//! widened to f64), with the same masks: the causal rule (key j takes part in row i iff j <= i),
//! plus the normalized additive bias (`src/mask.rs`), then a max-subtracted softmax in f64.
//! A row in which no key takes part follows the variant's [`Semantics`]: all 0 or all NaN.

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
    let q = &x.q[base + row.i as usize * d..base + (row.i as usize + 1) * d];
    let keys = if p.causal { row.i as usize + 1 } else { n };
    let scale = p.scale as f64;
    let mut s = Vec::with_capacity(keys);
    for j in 0..keys {
        let k = &x.k[base + j * d..base + (j + 1) * d];
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
    let mut out = vec![0.0f64; d];
    for (j, pj) in s.iter().enumerate() {
        let vrow = &x.v[base + j * d..base + (j + 1) * d];
        for (o, vv) in out.iter_mut().zip(vrow) {
            *o += pj * *vv as f64;
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
    let q = &x.q[base + row.i as usize * d..base + (row.i as usize + 1) * d];
    let keys = if p.causal { row.i as usize + 1 } else { n };
    let mut s = Vec::with_capacity(keys);
    for j in 0..keys {
        let k = &x.k[base + j * d..base + (j + 1) * d];
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
    let mut l = 0.0f32;
    let mut out = vec![0.0f32; d];
    for (j, sj) in s.iter().enumerate() {
        let pj = (sj - m).exp();
        l += pj;
        let pj = p.dtype.round(pj);
        let vrow = &x.v[base + j * d..base + (j + 1) * d];
        for (o, vv) in out.iter_mut().zip(vrow) {
            *o += pj * vv;
        }
    }
    out.iter().map(|o| p.dtype.round(o / l) as f64).collect()
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
}
