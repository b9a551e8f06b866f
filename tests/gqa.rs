//! Grouped-query and multi-query attention (`--kv-heads`) on the test adapter: every variant
//! reads K/V of B*Hkv heads in place (no expanded copy in any plan) and passes forward and
//! backward against the f64 oracle for GQA 8:2 and MQA; the command line's shapes and errors.

mod common;

use attn_wgpu::gpu::runner::{Runner, Schedule};
use attn_wgpu::problem::{DType, Inputs, Problem};
use attn_wgpu::run::run_variant;
use attn_wgpu::validate::Verdict;
use attn_wgpu::{variants, Error};
use common::{bin, stderr};

const SCHED: Schedule = Schedule {
    warmup: 0,
    reps: 1,
    host_reps: 0,
    warmup_ms: None,
};

#[test]
fn every_variant_passes_gqa_and_mqa_forward_and_backward_without_copying_kv() {
    let gpu = common::gpu();
    let mut runner = Runner::new(gpu).unwrap();
    let mut ran = std::collections::BTreeMap::<&str, u32>::new();
    for (kv, backward, dtype, causal) in [
        (2, false, DType::F32, true),
        (1, false, DType::BF16, false),
        (2, true, DType::F32, true),
        (1, true, DType::F32, false),
    ] {
        let mut p = Problem::new(1, 8, 24, 16, causal, 11);
        p.kv_heads = kv;
        p.backward = backward;
        p.dtype = dtype;
        let x = Inputs::generate(&p);
        assert_eq!(x.k.len() as u64, p.kv_elems());
        for v in variants::names() {
            let plan = match variants::plan(v, &p, &gpu.caps) {
                Ok(plan) => plan,
                Err(Error::Incompatible { reason, .. }) => {
                    assert!(
                        reason.contains("does not offer")
                            || reason.contains("in-place hazard")
                            || reason.contains("decode kernel")
                            || reason.contains("nothing to split")
                            || reason.contains("not implemented"),
                        "{v}: {reason}"
                    );
                    continue;
                }
                Err(e) => panic!("{v}: {e}"),
            };
            // K and V are bound as B*Hkv heads, never expanded to B*H.
            for b in ["K", "V"] {
                let bytes = plan.buffer(b).unwrap().bytes;
                assert!(
                    bytes < p.qkv_bytes(),
                    "{v}: {b} holds {bytes} bytes, Q {}",
                    p.qkv_bytes()
                );
            }
            let r = run_variant(gpu, &mut runner, &p, &x, v, SCHED, false).unwrap();
            let val = r.validation.as_ref().unwrap();
            assert_eq!(
                val.verdict,
                Verdict::Pass,
                "{v} {}: {val:?}",
                p.shape_string()
            );
            if backward {
                let t = r.training.as_ref().unwrap();
                for g in &t.grads {
                    assert_eq!(
                        g.verdict,
                        Verdict::Pass,
                        "{v} {}: {} {g:?}",
                        p.shape_string(),
                        g.tensor
                    );
                }
                assert_eq!(t.grads[1].heads_total, kv as u64, "dK is per K/V head");
            }
            *ran.entry(v).or_default() += 1;
        }
    }
    for v in common::PORTABLE {
        assert!(ran.get(v).copied().unwrap_or(0) >= 3, "{v}: {ran:?}");
    }
}

/// Hkv = H is the plain problem: the same inputs, bit for bit, and the same output.
#[test]
fn kv_heads_equal_to_heads_changes_nothing() {
    let p = Problem::new(2, 3, 16, 8, true, 5);
    let q = Problem {
        kv_heads: 3,
        ..p.clone()
    };
    assert_eq!(Inputs::generate(&p).v, Inputs::generate(&q).v);
    assert_eq!(p.group(), 1);
    let bad = Problem { kv_heads: 2, ..p };
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("--kv-heads 2 must divide --heads 3"), "{e}");
}

#[test]
fn cli_kv_heads_shapes_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("in");
    let grads = dir.path().join("g");
    std::fs::create_dir(&grads).unwrap();
    let run = |extra: &[&str]| {
        let mut c = bin();
        c.args([
            "run",
            "--seq",
            "16",
            "--head-dim",
            "8",
            "--reps",
            "1",
            "--warmup",
            "0",
        ]);
        c.args(extra);
        c.output().unwrap()
    };
    let o = run(&[
        "--variant",
        "tiled",
        "--heads",
        "4",
        "--kv-heads",
        "2",
        "--backward",
        "--save-inputs",
        inputs.to_str().unwrap(),
        "--grad-out",
        grads.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("Hkv=2 (GQA)"));
    for (f, h) in [("q.npy", 4), ("k.npy", 2), ("v.npy", 2)] {
        let t = attn_wgpu::npy::read_qkv(&inputs.join(f)).unwrap();
        assert_eq!(t.shape, vec![1, h, 16, 8], "{f}");
    }
    for (f, h) in [("dq.npy", 4), ("dk.npy", 2), ("dv.npy", 2)] {
        let t = attn_wgpu::npy::read_qkv(&grads.join(f)).unwrap();
        assert_eq!(t.shape, vec![1, h, 16, 8], "{f}");
    }
    // The saved files run again: Hkv comes from --k.
    let o = common::run_on_files(
        &inputs,
        None,
        &["--variant", "unfused", "--reps", "1", "--warmup", "0"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("Hkv=2 (GQA)"));
    // K with 3 heads for Q's 4: exit 2 naming the shapes.
    let bad = dir.path().join("k3.npy");
    attn_wgpu::npy::write(&bad, &[1, 3, 16, 8], DType::F32, &vec![0.0; 384]).unwrap();
    let o = common::run_on_files(
        &inputs,
        Some(&bad),
        &["--variant", "unfused", "--reps", "1"],
    );
    common::assert_exit(&o, 2, &["Hkv dividing H = 4"]);
    let o = run(&["--variant", "tiled", "--heads", "4", "--kv-heads", "3"]);
    common::assert_exit(&o, 2, &["--kv-heads 3 must divide --heads 4"]);
    let o = run(&["--variant", "tiled", "--heads", "4", "--kv-heads", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}
