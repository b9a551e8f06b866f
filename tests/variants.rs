//! Every variant against the f64 reference on the test adapter: causal and not, N in
//! {1, 7, 33, 64, 100}, D in {5, 16, 64, 96}, B*H = 2 (B=1, H=2) and 3 (B=3, H=1), with wgpu's injected
//! shader bounds checks on and off.

mod common;

use attn_wgpu::gpu::runner::{Runner, Schedule};
use attn_wgpu::problem::{Inputs, Problem};
use attn_wgpu::run::run_variant;
use attn_wgpu::tile::{TileChoice, TileRequest};
use attn_wgpu::validate::Verdict;

const SEQS: [u32; 5] = [1, 7, 33, 64, 100];
/// With subgroups, 16 and 64 run the v2 fused kernel (`rt2`: D a multiple of 8), 5 the first
/// register-tiled one (`rt`), 96 the row-per-thread one; 5 is not a multiple of 4 (partial vec4
/// columns).
const DIMS: [u32; 4] = [5, 16, 64, 96];

/// Runs `variant` over the whole grid, with wgpu's shader bounds checks on and off, and fails with
/// the list of every failing case.
fn check_variant(variant: &str, expected_dispatches: usize, dims: &[u32]) {
    check_variant_tile(variant, expected_dispatches, dims, None)
}

/// [`check_variant`] with a forced tile choice (`--tile`).
fn check_variant_tile(
    variant: &str,
    expected_dispatches: usize,
    dims: &[u32],
    tile: Option<TileChoice>,
) {
    let gpu = common::gpu();
    let mut runner = Runner::new(gpu).expect("runner");
    let schedule = Schedule {
        warmup: 0,
        reps: 1,
        host_reps: 0,
        warmup_ms: None,
    };
    let mut failures = Vec::new();
    let mut cases = 0;
    for (checks, causal) in [(true, true), (true, false), (false, true), (false, false)] {
        runner.set_bounds_checks(checks);
        for &n in &SEQS {
            for &d in dims {
                let (b, h) = if n % 2 == 0 { (1, 2) } else { (3, 1) };
                let mut p = Problem::new(b, h, n, d, causal, 1000 + n as u64 * 7 + d as u64);
                p.tile = tile.map(|choice| TileRequest {
                    choice,
                    source: "--tile".into(),
                });
                let x = Inputs::generate(&p);
                let r = run_variant(gpu, &mut runner, &p, &x, variant, schedule, false)
                    .unwrap_or_else(|e| panic!("{variant} {}: {e}", p.shape_string()));
                cases += 1;
                if let Some(choice) = tile {
                    assert_eq!(r.tile.as_ref().map(|t| t.choice), Some(choice));
                }
                assert_eq!(r.predicted_dispatches, expected_dispatches, "{variant}");
                let v = r.validation.expect("validated");
                assert_eq!(
                    v.rows_checked,
                    p.bh() * n as u64,
                    "small problems check every row"
                );
                if v.verdict != Verdict::Pass {
                    failures.push(format!(
                        "{} (bounds checks {checks}): max abs {:.3e}, NaN {}, worst {:?}",
                        p.shape_string(),
                        v.max_abs_err,
                        v.nan_count,
                        v.worst
                    ));
                }
            }
        }
    }
    assert_eq!(cases, 4 * SEQS.len() * dims.len());
    assert!(
        failures.is_empty(),
        "{variant} failed:\n{}",
        failures.join("\n")
    );
}

#[test]
fn unfused_matches_reference() {
    check_variant("unfused", 6, &DIMS);
}

#[test]
fn unfused_inplace_matches_reference() {
    check_variant("unfused-inplace", 5, &DIMS);
}

#[test]
fn tiled_matches_reference() {
    check_variant("tiled", 1, &DIMS);
}

/// The first register-tiled kernel, which `tiled` takes where subgroups are missing (or D is not
/// a multiple of 8), forced on the whole grid.
#[test]
fn tiled_rt_matches_reference() {
    check_variant_tile(
        "tiled",
        1,
        &[5, 16, 64, 72, 136],
        Some(TileChoice::RegisterTiled),
    );
}

/// Timestamps are real: every dispatch of a forward got a positive GPU time, in plan order, and
/// the forward's span covers the sum of its dispatches.
#[test]
fn every_dispatch_is_timed() {
    let gpu = common::gpu();
    if !gpu.caps.timestamps {
        panic!("test adapter {} has no timestamps", gpu.report.name);
    }
    let mut runner = Runner::new(gpu).unwrap();
    let p = Problem::new(1, 2, 64, 16, true, 5);
    let x = Inputs::generate(&p);
    let r = run_variant(
        gpu,
        &mut runner,
        &p,
        &x,
        "unfused",
        Schedule {
            warmup: 1,
            reps: 3,
            host_reps: 0,
            warmup_ms: None,
        },
        false,
    )
    .unwrap();
    let m = r.measurement.unwrap();
    assert_eq!(m.reps.len(), 3);
    assert_eq!(m.warmup.len(), 1);
    for rep in &m.reps {
        assert_eq!(rep.dispatch_gpu_us.len(), 6);
        assert!(rep
            .dispatch_gpu_us
            .iter()
            .all(|t| t.is_some_and(|t| t > 0.0)));
        let span = rep.gpu_span_us.unwrap();
        assert!(span + 1e-3 >= rep.gpu_sum_us().unwrap());
        // The runner maps profiler results to dispatches by position: the passes run in plan
        // order, so their begin timestamps must be too.
        let begins: Vec<f64> = rep
            .dispatch_offsets_us
            .iter()
            .map(|o| o.unwrap().0)
            .collect();
        assert!(
            begins.windows(2).all(|w| w[0] <= w[1]),
            "dispatch begins out of plan order: {begins:?}"
        );
    }
    assert_eq!(r.observed_dispatches, 6);
    assert_eq!(r.dispatches.len(), 6);
    assert!(r
        .dispatches
        .iter()
        .all(|d| d.calls == 3 && d.gpu_us.is_some()));
}

/// A changed input changes the output (the kernels are not returning something cached).
#[test]
fn output_depends_on_inputs() {
    let gpu = common::gpu();
    let mut runner = Runner::new(gpu).unwrap();
    let p = Problem::new(1, 1, 33, 16, true, 11);
    let x = Inputs::generate(&p);
    let sched = Schedule {
        warmup: 0,
        reps: 1,
        host_reps: 0,
        warmup_ms: None,
    };
    let a = run_variant(gpu, &mut runner, &p, &x, "tiled", sched, false).unwrap();
    let mut y = x.clone();
    y.v.iter_mut().for_each(|v| *v = -*v);
    let b = run_variant(gpu, &mut runner, &p, &y, "tiled", sched, false).unwrap();
    let (oa, ob) = (
        &a.measurement.unwrap().output,
        &b.measurement.unwrap().output,
    );
    for (u, w) in oa.iter().zip(ob.iter()) {
        assert!((u + w).abs() < 1e-5, "negating V must negate O");
    }
}
