//! The GL backend for real: opens a GL adapter explicitly (llvmpipe through EGL in CI, whatever
//! the test adapter of tests/common.rs is) and runs every variant that claims GL against the f64
//! reference on tiny shapes; variants that do not claim GL must be refused with their reason.
//! No GL adapter is a failure, not a skip: a fresh machine of this kind has Mesa's EGL + llvmpipe.

use attn_wgpu::gpu::runner::{Runner, Schedule};
use attn_wgpu::gpu::{AdapterSelection, Gpu};
use attn_wgpu::problem::{Inputs, Problem};
use attn_wgpu::run::run_variant;
use attn_wgpu::validate::Verdict;
use attn_wgpu::variants::{self, Backend, VARIANTS};
use attn_wgpu::Error;

fn gl() -> Gpu {
    // Mesa's EGL wants a runtime dir even headless (.ci/run sets one too).
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    let sel = AdapterSelection {
        backend: Some("gl".into()),
        name: None,
    };
    match attn_wgpu::device::open(
        &sel,
        attn_wgpu::variants::features_for(&attn_wgpu::variants::names()),
    ) {
        Ok(g) => {
            eprintln!("GL tests run on: {} ({})", g.report.name, g.report.backend);
            assert_eq!(g.report.backend, "gl");
            g
        }
        Err(e) => panic!(
            "no GL adapter: {e}. On Debian the software one is Mesa's llvmpipe through EGL \
             (libegl-mesa0, installed with mesa-vulkan-drivers' dependencies)"
        ),
    }
}

#[test]
fn gl_runs_every_variant_that_claims_it() {
    let gpu = gl();
    let mut runner = Runner::new(&gpu).expect("runner");
    let schedule = Schedule {
        warmup: 0,
        reps: 1,
        host_reps: 0,
        warmup_ms: None,
    };
    let mut failures = Vec::new();
    let mut ran = 0;
    for v in VARIANTS {
        if let Some(why) = v.unsupported_on(Backend::Gl) {
            // Refused with the reason, never attempted.
            let p = Problem::new(1, 1, 8, 16, true, 0);
            match variants::plan(v.name, &p, &gpu.caps) {
                Err(Error::Incompatible { reason, .. }) => assert_eq!(reason, why),
                other => panic!(
                    "{} does not claim GL but planned: {:?}",
                    v.name,
                    other.is_ok()
                ),
            }
            continue;
        }
        // The last shape is a decode step (N = 1 over 300 keys): `split-kv` takes only those,
        // and says so for the others.
        for (n, m, d, causal) in [
            (1, 1, 16, true),
            (33, 33, 16, false),
            (20, 20, 64, true),
            (1, 300, 16, false),
        ] {
            let mut p = Problem::new(1, 2, n, d, causal, 7 + n as u64);
            p.kv_seq = m;
            let x = Inputs::generate(&p);
            if let Err(Error::Incompatible { reason, .. }) = variants::plan(v.name, &p, &gpu.caps) {
                if reason.contains("decode kernel") || reason.contains("nothing to split") {
                    continue;
                }
            }
            match run_variant(&gpu, &mut runner, &p, &x, v.name, schedule, false) {
                Ok(r) => {
                    ran += 1;
                    let val = r.validation.expect("validated");
                    if val.verdict != Verdict::Pass {
                        failures.push(format!(
                            "{} {}: max abs {:.3e}, NaN {}",
                            v.name,
                            p.shape_string(),
                            val.max_abs_err,
                            val.nan_count
                        ));
                    }
                }
                Err(e) => failures.push(format!("{} {}: {e}", v.name, p.shape_string())),
            }
        }
    }
    eprintln!("{ran} variant runs on GL");
    assert!(ran > 0, "no variant claims GL");
    assert!(failures.is_empty(), "on GL:\n{}", failures.join("\n"));
}
