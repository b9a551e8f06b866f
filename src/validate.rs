//! Compares a GPU output against the f64 reference: worst element, not mean error.
//!
//! An element passes when `|gpu - ref| <= atol + rtol * |ref|` (and is finite). The verdict is PASS
//! only if every checked element passes. Two rules set atol and rtol ([`ToleranceMode`], docs/correctness.md
//! "Correctness"), one for attn-wgpu's rows and bench/torch_sdpa.py's PyTorch rows alike:
//! - `pytorch` (default), PyTorch's own method for its fused SDPA kernels: atol =
//!   [`FUDGE`] x max(the largest error of the low-precision twin
//!   ([`crate::reference::low_precision_row`]) against the f64 reference on the checked rows, the
//!   dtype's default atol), rtol = [`FUDGE`] x the dtype's default rtol ([`pytorch_defaults`]).
//!   PyTorch also measures an rtol from the twin; near-zero outputs make that measure unbounded
//!   (an rtol of 100 would pass anything), so this rule keeps the dtype's default there.
//! - `strict`: the fixed tolerances of [`tolerance`].
//!
//! Both verdicts are recorded; the one of the run's mode decides. Neither is ever loosened to make
//! a run pass.

use rand_core::{RngCore, SeedableRng};
use serde::Serialize;

use crate::mask::Semantics;
use crate::problem::{DType, Inputs, Problem, ToleranceMode};
use crate::reference::{backward_group, low_precision_row, reference_row_with, GroupGrads, RowId};

/// Absolute and relative tolerance for one dtype.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Tolerance {
    pub atol: f64,
    pub rtol: f64,
}

/// The one place the per-dtype tolerances are written (mirrored in docs/correctness.md).
pub fn tolerance(dtype: DType) -> Tolerance {
    match dtype {
        // f32 storage and f32 accumulation: rounding of N-term sums and of exp().
        DType::F32 => Tolerance {
            atol: 2e-5,
            rtol: 2e-4,
        },
        // Inputs are rounded on the host and the reference uses the rounded values, so what is
        // left is the f32 accumulation (as for f32) plus the rounding of the stored output: half a
        // unit in the last place, 2^-11 relative for f16, 2^-8 for bf16. rtol allows twice that
        // (a conversion that does not round to nearest even), atol the f32 part and f16 subnormals.
        DType::F16 => Tolerance {
            atol: 5e-5,
            rtol: 1e-3,
        },
        DType::BF16 => Tolerance {
            atol: 5e-5,
            rtol: 8e-3,
        },
    }
}

/// The fudge factor of the `pytorch` rule (PyTorch's fused-SDPA tests use small factors, 1 to 4,
/// for the output; this tool uses 4 for every variant and dtype).
pub const FUDGE: f64 = 4.0;

/// PyTorch's `default_atol` / `default_rtol` (test/test_transformers.py): the floors of the
/// `pytorch` rule.
pub fn pytorch_defaults(dtype: DType) -> Tolerance {
    match dtype {
        DType::F32 => Tolerance {
            atol: 1e-5,
            rtol: 1.3e-6,
        },
        DType::F16 => Tolerance {
            atol: 1e-3,
            rtol: 1e-3,
        },
        DType::BF16 => Tolerance {
            atol: 1e-3,
            rtol: 1.6e-2,
        },
    }
}

/// The `pytorch` rule's tolerance for a run whose low-precision twin's largest error is `lp_err`.
pub fn pytorch_tolerance(dtype: DType, lp_err: f64) -> Tolerance {
    let d = pytorch_defaults(dtype);
    Tolerance {
        atol: FUDGE * lp_err.max(d.atol),
        rtol: FUDGE * d.rtol,
    }
}

/// Floor under |ref| when reporting relative error, so near-zero outputs do not dominate.
pub const REL_ERR_FLOOR: f64 = 1e-3;

/// Budget of multiply-adds the reference may spend before validating only a sample of rows.
pub const FULL_CHECK_MAC_BUDGET: u64 = 1 << 27;

/// Which rows to check: all of them when cheap, otherwise a seeded random sample (always including
/// the first and last row of the first and last head, where indexing bugs like to hide).
pub fn rows_to_check(p: &Problem) -> Vec<RowId> {
    let n = p.seq as u64;
    let bh = p.bh();
    let macs_per_row = 2 * p.kv_seq as u64 * p.head_dim as u64;
    let total_rows = bh * n;
    if total_rows * macs_per_row <= FULL_CHECK_MAC_BUDGET {
        return (0..bh)
            .flat_map(|h| (0..n).map(move |i| RowId { bh: h, i }))
            .collect();
    }
    let budget_rows = (FULL_CHECK_MAC_BUDGET / macs_per_row).clamp(64.min(total_rows), total_rows);
    let mut rng = rand_pcg::Pcg32::seed_from_u64(p.seed ^ 0x005e_ed0f_c4ec);
    let mut rows: Vec<RowId> = vec![
        RowId { bh: 0, i: 0 },
        RowId { bh: 0, i: n - 1 },
        RowId { bh: bh - 1, i: 0 },
        RowId {
            bh: bh - 1,
            i: n - 1,
        },
    ];
    while (rows.len() as u64) < budget_rows {
        let r = rng.next_u64() % total_rows;
        rows.push(RowId {
            bh: r / n,
            i: r % n,
        });
    }
    rows.sort();
    rows.dedup();
    rows
}

#[derive(Debug, Clone, Serialize)]
pub struct Worst {
    pub b: u64,
    pub h: u64,
    pub i: u64,
    pub d: u64,
    pub gpu: f64,
    #[serde(rename = "ref")]
    pub reference: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Validation {
    pub verdict: Verdict,
    pub max_abs_err: f64,
    pub max_rel_err: f64,
    /// Largest `|err| / (atol + rtol*|ref|)`: above 1 fails.
    pub max_tol_ratio: f64,
    pub worst: Option<Worst>,
    /// Unexpected NaN (the reference is finite there).
    pub nan_count: u64,
    pub inf_count: u64,
    /// NaN where the reference is NaN too: fully-masked rows of a NaN-semantics variant.
    pub expected_nan_count: u64,
    /// Rows (among those checked) in which no key takes part.
    pub fully_masked_rows: u64,
    pub fully_masked_semantics: Semantics,
    pub rows_checked: u64,
    pub rows_total: u64,
    /// The tolerance applied (of `tolerance_mode`).
    pub atol: f64,
    pub rtol: f64,
    pub rel_err_floor: f64,
    /// The rule that decided the verdict.
    pub tolerance_mode: ToleranceMode,
    /// Largest |low-precision twin - f64 reference| over the checked rows (finite elements).
    pub lp_ref_max_abs_err: f64,
    /// `max_abs_err / lp_ref_max_abs_err`: how this kernel's worst error compares with what a
    /// correct kernel of the dtype makes (None when the twin is exact there).
    pub err_ratio_to_lp_ref: Option<f64>,
    /// The verdict under the other rule too: `pytorch` and `strict` side by side.
    pub pytorch_verdict: Verdict,
    pub strict_verdict: Verdict,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Verdict {
    #[serde(rename = "PASS")]
    Pass,
    #[serde(rename = "FAIL")]
    Fail,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
        })
    }
}

/// Checks `out` (the whole `[B,H,N,D]` output) on `rows` against the reference, whose fully-masked
/// rows follow `sem` (a NaN there is then expected, and anything else fails), under the problem's
/// [`ToleranceMode`] (module docs); the other rule's verdict is recorded beside it.
pub fn validate(
    p: &Problem,
    x: &Inputs,
    out: &[f32],
    rows: &[RowId],
    sem: Semantics,
) -> Validation {
    let n = p.seq as u64;
    let d = p.head_dim as usize;
    // The f64 reference and the low-precision twin of every checked row.
    let refs: Vec<(Vec<f64>, Vec<f64>)> = rows
        .iter()
        .map(|&r| {
            (
                reference_row_with(p, x, r, sem),
                low_precision_row(p, x, r, sem),
            )
        })
        .collect();
    let lp_err = refs
        .iter()
        .flat_map(|(r, lp)| r.iter().zip(lp))
        .filter(|(a, b)| a.is_finite() && b.is_finite())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f64, f64::max);
    let strict = tolerance(p.dtype);
    let torch = pytorch_tolerance(p.dtype, lp_err);
    let tol = match p.tolerance {
        ToleranceMode::Pytorch => torch,
        ToleranceMode::Strict => strict,
    };
    let mut v = Validation {
        verdict: Verdict::Pass,
        max_abs_err: 0.0,
        max_rel_err: 0.0,
        max_tol_ratio: 0.0,
        worst: None,
        nan_count: 0,
        inf_count: 0,
        expected_nan_count: 0,
        fully_masked_rows: 0,
        fully_masked_semantics: sem,
        rows_checked: rows.len() as u64,
        rows_total: p.bh() * n,
        atol: tol.atol,
        rtol: tol.rtol,
        rel_err_floor: REL_ERR_FLOOR,
        tolerance_mode: p.tolerance,
        lp_ref_max_abs_err: lp_err,
        err_ratio_to_lp_ref: None,
        pytorch_verdict: Verdict::Pass,
        strict_verdict: Verdict::Pass,
    };
    if out.len() as u64 != p.qkv_elems() {
        v.verdict = Verdict::Fail;
        v.pytorch_verdict = Verdict::Fail;
        v.strict_verdict = Verdict::Fail;
        return v;
    }
    let mut worst_ratio = -1.0f64;
    // The worst element under the other rule, for its verdict.
    let other = match p.tolerance {
        ToleranceMode::Pytorch => strict,
        ToleranceMode::Strict => torch,
    };
    let mut other_worst = 0.0f64;
    let mut tally = Tally::default();
    for (&row, (r, _)) in rows.iter().zip(&refs) {
        let base = ((row.bh * n + row.i) as usize) * d;
        let masked_row = row_is_fully_masked(p, x, row);
        if masked_row {
            v.fully_masked_rows += 1;
        }
        for (dd, &rv) in r.iter().enumerate() {
            let g = out[base + dd] as f64;
            let c = tally.compare(g, rv);
            let (ratio, other_ratio) = (c.ratio(tol, rv), c.ratio(other, rv));
            other_worst = other_worst.max(other_ratio);
            if ratio > worst_ratio {
                worst_ratio = ratio;
                v.worst = Some(Worst {
                    b: row.bh / p.heads as u64,
                    h: row.bh % p.heads as u64,
                    i: row.i,
                    d: dd as u64,
                    gpu: g,
                    reference: rv,
                });
            }
        }
    }
    (
        v.max_abs_err,
        v.max_rel_err,
        v.nan_count,
        v.inf_count,
        v.expected_nan_count,
    ) = tally.counts();
    v.max_tol_ratio = worst_ratio.max(0.0);
    let non_finite = v.nan_count > 0 || v.inf_count > 0;
    let verdict = |worst: f64| {
        if non_finite || worst > 1.0 {
            Verdict::Fail
        } else {
            Verdict::Pass
        }
    };
    v.verdict = verdict(worst_ratio);
    let other_verdict = verdict(other_worst);
    (v.pytorch_verdict, v.strict_verdict) = match p.tolerance {
        ToleranceMode::Pytorch => (v.verdict, other_verdict),
        ToleranceMode::Strict => (other_verdict, v.verdict),
    };
    v.err_ratio_to_lp_ref = (lp_err > 0.0).then(|| v.max_abs_err / lp_err);
    v
}

/// One element against the reference: its finite error, an expected NaN (NaN where the reference
/// is NaN), or a failure (unexpected NaN / Inf, or a value where NaN was expected).
#[derive(Debug, Clone, Copy)]
enum Compared {
    Error(f64),
    ExpectedNan,
    Bad,
}

impl Compared {
    /// `|err| / (atol + rtol |ref|)` under `tol`: above 1 fails.
    fn ratio(self, tol: Tolerance, reference: f64) -> f64 {
        match self {
            Compared::Error(e) => e / (tol.atol + tol.rtol * reference.abs()),
            Compared::ExpectedNan => 0.0,
            Compared::Bad => f64::INFINITY,
        }
    }
}

/// The running counts of a validation (O's and each gradient's): worst errors and non-finite
/// elements.
#[derive(Debug, Default)]
struct Tally {
    max_abs_err: f64,
    max_rel_err: f64,
    nan_count: u64,
    inf_count: u64,
    expected_nan_count: u64,
}

impl Tally {
    fn compare(&mut self, g: f64, reference: f64) -> Compared {
        if reference.is_nan() {
            if g.is_nan() {
                self.expected_nan_count += 1;
                Compared::ExpectedNan
            } else {
                Compared::Bad
            }
        } else if g.is_nan() {
            self.nan_count += 1;
            Compared::Bad
        } else if g.is_infinite() {
            self.inf_count += 1;
            Compared::Bad
        } else {
            let err = (g - reference).abs();
            self.max_abs_err = self.max_abs_err.max(err);
            self.max_rel_err = self
                .max_rel_err
                .max(err / reference.abs().max(REL_ERR_FLOOR));
            Compared::Error(err)
        }
    }

    /// (max abs err, max rel err, NaN, Inf, expected NaN).
    fn counts(&self) -> (f64, f64, u64, u64, u64) {
        (
            self.max_abs_err,
            self.max_rel_err,
            self.nan_count,
            self.inf_count,
            self.expected_nan_count,
        )
    }
}

/// Whether no key takes part in `row` (causal, mask and key padding together).
pub fn row_is_fully_masked(p: &Problem, x: &Inputs, row: RowId) -> bool {
    let keys = p.keys_for_row(row.i);
    if keys == 0 {
        return true; // bottom-right causal with M < N: the first N - M rows see no key
    }
    if p.mask.bias.is_none() {
        return false;
    }
    (0..keys).all(|j| crate::mask::bias_at(p, x, row.bh, row.i, j) == f32::NEG_INFINITY)
}

/// Budget of multiply-adds the backward oracle and its twin may spend before validating the
/// gradients of a sample of heads only.
pub const GRAD_MAC_BUDGET: u64 = 1 << 29;

/// The fudge factor of the `pytorch` rule for the gradients (as for O: PyTorch's fused-SDPA
/// gradient tests use 4 to 160 depending on the tensor and length; this tool keeps 4).
pub const GRAD_FUDGE: f64 = 4.0;

/// Which heads' gradients to check: all of them when the backward oracle is cheap enough, else
/// the first, the last and a seeded sample within [`GRAD_MAC_BUDGET`].
pub fn heads_to_check(p: &Problem) -> Vec<u64> {
    let n = p.seq as u64;
    let per_head = 2 * 3 * n * p.kv_seq as u64 * p.head_dim as u64;
    let bh = p.bh();
    if bh * per_head <= GRAD_MAC_BUDGET {
        return (0..bh).collect();
    }
    let want = (GRAD_MAC_BUDGET / per_head.max(1)).clamp(2.min(bh), bh);
    let mut rng = rand_pcg::Pcg32::seed_from_u64(p.seed ^ 0x0b4c_6a7d);
    let mut heads = vec![0, bh - 1];
    while (heads.len() as u64) < want {
        heads.push(rng.next_u64() % bh);
        heads.sort();
        heads.dedup();
    }
    heads
}

/// The check of one gradient tensor (dQ, dK or dV) against the f64 backward oracle
/// ([`crate::reference::backward_group`]), under the `pytorch` rule with [`GRAD_FUDGE`]: worst
/// element, NaN/Inf counts, and the ratio of the error to the low-precision twin's.
#[derive(Debug, Clone, Serialize)]
pub struct GradValidation {
    pub tensor: String,
    pub verdict: Verdict,
    pub max_abs_err: f64,
    pub max_rel_err: f64,
    pub max_tol_ratio: f64,
    /// (b, h, i, d): i is the query row for dQ, the key for dK and dV.
    pub worst: Option<Worst>,
    pub nan_count: u64,
    pub inf_count: u64,
    /// NaN where the oracle is NaN too (a NaN variant's fully-masked rows reach all of dV).
    pub expected_nan_count: u64,
    pub heads_checked: u64,
    pub heads_total: u64,
    pub atol: f64,
    pub rtol: f64,
    pub lp_ref_max_abs_err: f64,
    pub err_ratio_to_lp_ref: Option<f64>,
}

/// Checks `grads` (dQ `[B, H, N, D]`, dK and dV `[B, Hkv, N, D]`) on `heads` (query heads; each
/// checked with the whole group that shares its K/V head).
pub fn validate_grads(
    p: &Problem,
    x: &Inputs,
    grads: &[Vec<f32>],
    heads: &[u64],
    sem: Semantics,
) -> Vec<GradValidation> {
    let group = p.group() as u64;
    // The K/V heads of the checked heads: each is checked with its whole group of query heads
    // (dK and dV sum over them).
    let mut kv: Vec<u64> = heads.iter().map(|h| h / group).collect();
    kv.dedup();
    // The oracle and its twin of every checked group, one thread each (they are independent).
    type Pair = (u64, GroupGrads, GroupGrads);
    let refs: Vec<Pair> = std::thread::scope(|scope| {
        let jobs: Vec<_> = kv
            .iter()
            .flat_map(|&h| {
                [false, true].map(|lp| scope.spawn(move || backward_group(p, x, h, sem, lp)))
            })
            .collect();
        let mut done = jobs
            .into_iter()
            .map(|j| j.join().expect("the backward oracle does not panic"));
        kv.iter()
            .map(|&h| {
                let r = done.next().expect("one oracle per group");
                let lp = done.next().expect("one twin per group");
                (h, r, lp)
            })
            .collect()
    });
    let names = ["dQ", "dK", "dV"];
    // (global head of the tensor, its [N, D] values) of tensor t of one group: the group's query
    // heads for dQ, the K/V head for dK and dV.
    let pick = |kvh: u64, g: &GroupGrads, t: usize| -> Vec<(u64, Vec<f64>)> {
        match t {
            0 => {
                g.dq.iter()
                    .enumerate()
                    .map(|(r, dq)| (kvh * group + r as u64, dq.clone()))
                    .collect()
            }
            1 => vec![(kvh, g.dk.clone())],
            _ => vec![(kvh, g.dv.clone())],
        }
    };
    let flat = |kvh: u64, g: &GroupGrads, t: usize| -> Vec<f64> {
        pick(kvh, g, t).into_iter().flat_map(|(_, v)| v).collect()
    };
    (0..3)
        .map(|t| {
            let lp_err = refs
                .iter()
                .flat_map(|(h, r, lp)| {
                    flat(*h, r, t)
                        .into_iter()
                        .zip(flat(*h, lp, t))
                        .collect::<Vec<_>>()
                })
                .filter(|(a, b)| a.is_finite() && b.is_finite())
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f64, f64::max);
            let d = pytorch_defaults(p.dtype);
            let tol = Tolerance {
                atol: GRAD_FUDGE * lp_err.max(d.atol),
                rtol: GRAD_FUDGE * d.rtol,
            };
            let mut v = GradValidation {
                tensor: names[t].into(),
                verdict: Verdict::Pass,
                max_abs_err: 0.0,
                max_rel_err: 0.0,
                max_tol_ratio: 0.0,
                worst: None,
                nan_count: 0,
                inf_count: 0,
                expected_nan_count: 0,
                heads_checked: if t == 0 {
                    kv.len() as u64 * group
                } else {
                    kv.len() as u64
                },
                heads_total: if t == 0 {
                    p.bh()
                } else {
                    p.batch as u64 * p.kv_heads as u64
                },
                atol: tol.atol,
                rtol: tol.rtol,
                lp_ref_max_abs_err: lp_err,
                err_ratio_to_lp_ref: None,
            };
            let want = if t == 0 { p.qkv_elems() } else { p.kv_elems() };
            let heads_of_t = if t == 0 { p.heads } else { p.kv_heads } as u64;
            let Some(gpu) = grads.get(t).filter(|g| g.len() as u64 == want) else {
                v.verdict = Verdict::Fail;
                return v;
            };
            let mut worst = -1.0f64;
            let mut tally = Tally::default();
            // Rows per head: N for dQ, M for dK and dV.
            let rows = if t == 0 { p.seq } else { p.kv_seq } as usize;
            for (h, r) in refs.iter().flat_map(|(kvh, r, _)| pick(*kvh, r, t)) {
                let base = h as usize * rows * p.head_dim as usize;
                for (e, rv) in r.into_iter().enumerate() {
                    let g = gpu[base + e] as f64;
                    let ratio = tally.compare(g, rv).ratio(tol, rv);
                    if ratio > worst {
                        worst = ratio;
                        let dd = p.head_dim as u64;
                        v.worst = Some(Worst {
                            b: h / heads_of_t,
                            h: h % heads_of_t,
                            i: e as u64 / dd,
                            d: e as u64 % dd,
                            gpu: g,
                            reference: rv,
                        });
                    }
                }
            }
            (
                v.max_abs_err,
                v.max_rel_err,
                v.nan_count,
                v.inf_count,
                v.expected_nan_count,
            ) = tally.counts();
            v.max_tol_ratio = worst.max(0.0);
            if v.nan_count > 0 || v.inf_count > 0 || worst > 1.0 {
                v.verdict = Verdict::Fail;
            }
            v.err_ratio_to_lp_ref = (lp_err > 0.0).then(|| v.max_abs_err / lp_err);
            v
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::reference_row;

    fn exact_output(p: &Problem, x: &Inputs) -> Vec<f32> {
        let mut out = vec![0f32; p.qkv_elems() as usize];
        for r in rows_to_check(p) {
            let o = reference_row(p, x, r);
            let base = ((r.bh * p.seq as u64 + r.i) as usize) * p.head_dim as usize;
            for (k, val) in o.iter().enumerate() {
                out[base + k] = *val as f32;
            }
        }
        out
    }

    #[test]
    fn exact_output_passes_and_one_bad_element_fails_with_its_location() {
        let p = Problem::new(2, 3, 9, 4, true, 7);
        let x = Inputs::generate(&p);
        let mut out = exact_output(&p, &x);
        let rows = rows_to_check(&p);
        assert_eq!(rows.len() as u64, p.bh() * 9);
        assert_eq!(
            validate(&p, &x, &out, &rows, Semantics::Zero).verdict,
            Verdict::Pass
        );
        // b=1, h=2, i=5, d=3 with H=3, N=9, D=4
        let (b, h, i, d) = (1usize, 2usize, 5usize, 3usize);
        let idx = ((b * 3 + h) * 9 + i) * 4 + d;
        out[idx] += 0.01;
        let v = validate(&p, &x, &out, &rows, Semantics::Zero);
        assert_eq!(v.verdict, Verdict::Fail);
        let w = v.worst.unwrap();
        assert_eq!((w.b, w.h, w.i, w.d), (1, 2, 5, 3));
        assert!((v.max_abs_err - 0.01).abs() < 1e-6);
    }

    #[test]
    fn the_pytorch_rule_scales_with_the_low_precision_twin_and_strict_is_kept() {
        let mut p = Problem::new(1, 2, 48, 16, true, 3);
        p.dtype = DType::F16;
        let x = Inputs::generate(&p);
        let rows = rows_to_check(&p);
        // The twin's own output is what a correct f16 kernel makes: it passes the pytorch rule
        // with a ratio of exactly 1 to the twin's error.
        let mut out = vec![0f32; p.qkv_elems() as usize];
        for r in &rows {
            let o = low_precision_row(&p, &x, *r, Semantics::Zero);
            let base = ((r.bh * 48 + r.i) as usize) * 16;
            for (k, val) in o.iter().enumerate() {
                out[base + k] = *val as f32;
            }
        }
        let v = validate(&p, &x, &out, &rows, Semantics::Zero);
        assert_eq!(v.tolerance_mode, ToleranceMode::Pytorch);
        assert_eq!(v.verdict, Verdict::Pass);
        assert!(v.lp_ref_max_abs_err > 0.0);
        assert_eq!(v.err_ratio_to_lp_ref, Some(1.0));
        let t = pytorch_tolerance(DType::F16, v.lp_ref_max_abs_err);
        assert_eq!((v.atol, v.rtol), (t.atol, t.rtol));
        assert!(t.atol >= FUDGE * 1e-3 && t.rtol == FUDGE * 1e-3);
        // An error just past the allowed atol + rtol|ref| at one element fails, with its place.
        let idx = ((5 * 16) + 7) as usize; // head 0, row 5, d 7
        let r = crate::reference::reference_row(&p, &x, RowId { bh: 0, i: 5 })[7];
        out[idx] = (r + 1.01 * (t.atol + t.rtol * r.abs())) as f32;
        let v = validate(&p, &x, &out, &rows, Semantics::Zero);
        assert_eq!(v.verdict, Verdict::Fail);
        assert_eq!(v.pytorch_verdict, Verdict::Fail);
        let w = v.worst.unwrap();
        assert_eq!((w.h, w.i, w.d), (0, 5, 7));
        // The strict rule, kept behind --tolerance strict, is tighter and decides when asked.
        let s = tolerance(DType::F16);
        assert!(s.atol < t.atol && s.rtol < t.rtol);
        p.tolerance = ToleranceMode::Strict;
        let v = validate(&p, &x, &out, &rows, Semantics::Zero);
        assert_eq!(v.verdict, Verdict::Fail);
        assert_eq!((v.atol, v.rtol), (s.atol, s.rtol));
    }

    #[test]
    fn nan_is_never_a_pass() {
        let p = Problem::new(1, 1, 4, 4, false, 1);
        let x = Inputs::generate(&p);
        let mut out = exact_output(&p, &x);
        out[5] = f32::NAN;
        let v = validate(&p, &x, &out, &rows_to_check(&p), Semantics::Zero);
        assert_eq!(v.verdict, Verdict::Fail);
        assert_eq!(v.nan_count, 1);
    }

    #[test]
    fn large_problems_sample_rows_deterministically() {
        let p = Problem::new(8, 16, 1024, 64, true, 0);
        let a = rows_to_check(&p);
        assert!((a.len() as u64) < p.bh() * 1024);
        assert!(a.len() >= 64);
        assert_eq!(a, rows_to_check(&p));
        assert!(a.contains(&RowId { bh: 127, i: 1023 }));
    }
}
