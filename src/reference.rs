//! CPU f64 attention: the oracle every variant is checked against.
//!
//! It computes on exactly the values the GPU sees (the f32 inputs, widened to f64), with the same
//! causal rule (key j takes part in row i iff j <= i), and a max-subtracted softmax in f64.

use crate::problem::{Inputs, Problem};

/// One query row: head index `bh` in `0..B*H` and row `i` in `0..N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RowId {
    pub bh: u64,
    pub i: u64,
}

/// f64 output row `O[bh, i, :]`.
pub fn reference_row(p: &Problem, x: &Inputs, row: RowId) -> Vec<f64> {
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
        s.push(dot * scale);
    }
    let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
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
}
