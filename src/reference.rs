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
