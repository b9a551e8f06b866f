//! Dropout (`--dropout`) on the test adapter: the keep mask that the GPU applies is the one
//! src/dropout.rs defines, the same for every variant; p = 0 adds no work; the command line's
//! keep.npy, its size limit, bad values and the eval-mode warning; and the numpy recipe of docs/training.md
//! regenerates keep.npy exactly.

mod common;

use attn_wgpu::dropout::Dropout;
use attn_wgpu::gpu::runner::Runner;
use attn_wgpu::problem::{DType, Inputs, Problem};
use attn_wgpu::run::run_variant;
use attn_wgpu::validate::Verdict;
use attn_wgpu::{variants, Error};
use common::{bin, stderr};

/// The keep mask a variant applied, read off its output: with Q = 0 every probability of a
/// non-causal row is 1/N, and with V = the identity (D = N) output element (i, d) is
/// factor(i, d) / N: 0 where (i, d) was dropped, 1/((1-p) N) where kept.
fn observed_mask(variant: &str, p: &Problem) -> Option<Vec<bool>> {
    let gpu = common::gpu();
    let n = p.seq as usize;
    let mut x = Inputs::generate(p);
    x.q.iter_mut().for_each(|v| *v = 0.0);
    for (e, v) in x.v.iter_mut().enumerate() {
        let (row, col) = ((e / n) % n, e % n);
        *v = if row == col { 1.0 } else { 0.0 };
    }
    let mut runner = Runner::new(gpu).unwrap();
    let r = match run_variant(gpu, &mut runner, p, &x, variant, common::ONCE, false) {
        Ok(r) => r,
        Err(Error::Incompatible { reason, .. }) => {
            eprintln!("{variant}: refused here: {reason}");
            return None;
        }
        Err(e) => panic!("{variant}: {e}"),
    };
    let v = r.validation.as_ref().unwrap();
    assert_eq!(v.verdict, Verdict::Pass, "{variant}: {v:?}");
    let kept = (1.0 / (1.0 - p.dropout) / n as f64) as f32;
    let out = &r.measurement.as_ref().unwrap().output;
    Some(
        out.iter()
            .map(|o| {
                assert!(
                    *o == 0.0 || (o - kept).abs() < 1e-3 * kept,
                    "{variant}: {o} is neither 0 nor {kept}"
                );
                *o != 0.0
            })
            .collect(),
    )
}

#[test]
fn every_variant_applies_the_documented_keep_mask() {
    for dtype in [DType::F32, DType::F16] {
        let mut p = Problem::new(2, 2, 32, 32, false, 0x5eed_d50b_0000_0042);
        p.dtype = dtype;
        p.dropout = 0.5;
        let want = Dropout::new(p.dropout, p.seed)
            .unwrap()
            .keep_mask(p.bh(), 32, 32);
        let dropped = want.iter().filter(|k| !**k).count();
        assert!(dropped > 1000 && dropped < 3000, "{dropped}");
        let mut seen = 0;
        for v in variants::names() {
            if let Some(got) = observed_mask(v, &p) {
                seen += 1;
                let diff = got.iter().zip(&want).filter(|(a, b)| a != b).count();
                assert_eq!(diff, 0, "{v} {}: {diff} elements differ", dtype.name());
            }
        }
        // Without SHADER_F16 (GL, for one) only `math` runs f16 (as u32 pairs).
        let need = if dtype == DType::F16 && !common::gpu().caps.f16 {
            1
        } else {
            5
        };
        assert!(seen >= need, "{seen} variants ran");
    }
}

#[test]
fn a_different_seed_drops_different_elements_and_p_zero_adds_no_work() {
    let caps = &common::gpu().caps;
    let mut p = Problem::new(1, 2, 32, 32, false, 1);
    p.dropout = 0.5;
    let a = observed_mask("tiled", &p).unwrap();
    p.seed = 2;
    let b = observed_mask("tiled", &p).unwrap();
    let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
    assert!(same < a.len() * 3 / 4, "{same} of {} agree", a.len());
    // p = 0: no dropout dispatch and no Philox code in any kernel; p > 0: both.
    for v in variants::names() {
        for (drop, backward) in [(0.0, false), (0.0, true), (0.2, false), (0.2, true)] {
            let q = Problem {
                dropout: drop,
                backward,
                ..p.clone()
            };
            let Ok(plan) = variants::plan(v, &q, caps) else {
                continue;
            };
            let philox = plan
                .dispatches
                .iter()
                .filter(|d| {
                    d.shader.source.contains("fn philox4x32_10")
                        // SPIR-V kernels (tiled-coop-vk): the dropout build of the module.
                        || (d.shader.is_spirv() && d.shader.tag.contains("_drop"))
                })
                .count();
            let dispatches = plan
                .dispatches
                .iter()
                .filter(|d| d.name.starts_with("dropout"))
                .count();
            if drop == 0.0 {
                assert_eq!(philox + dispatches, 0, "{v} backward={backward}");
            } else {
                assert!(philox > 0, "{v} backward={backward}: no kernel drops");
                let fused = v.starts_with("tiled");
                assert_eq!(
                    dispatches,
                    if fused { 0 } else { 1 + backward as usize },
                    "{v} backward={backward}"
                );
            }
        }
    }
}

fn run(extra: &[&str]) -> std::process::Output {
    let mut c = bin();
    c.args(["run", "--seq", "12", "--heads", "2", "--head-dim", "8"]);
    c.args(["--reps", "1", "--warmup", "0"]);
    c.args(extra);
    c.output().unwrap()
}

#[test]
fn cli_dropout_keep_npy_warning_and_bad_values() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("in");
    let json = dir.path().join("r.json");
    let o = run(&[
        "--variant",
        "all",
        "--dropout",
        "0.25",
        "--seed",
        "77",
        "--save-inputs",
        inputs.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    // Eval mode (the default without --backward) still drops, and says so.
    assert!(
        text.contains("WARNING") && text.contains("dropout is still applied"),
        "{text}"
    );
    assert!(!text.contains("FAIL"), "{text}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(j["dropout"]["threshold"], 1u64 << 30);
    assert_eq!(j["problem"]["mode"], "eval");
    assert!(j["warnings"][0].as_str().unwrap().contains("eval mode"));
    // compare keeps runs with dropout apart from those without.
    let o = bin().arg("compare").arg(&json).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("causal dropout 0.25"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let bytes = std::fs::read(inputs.join("keep.npy")).unwrap();
    let keep = npyz::NpyFile::new(&bytes[..]).unwrap();
    assert_eq!(keep.shape(), &[1, 2, 12, 12]);
    let keep: Vec<bool> = keep.into_vec().unwrap();
    assert_eq!(
        keep,
        Dropout::new(0.25, 77).unwrap().keep_mask(2, 12, 12),
        "keep.npy is the documented mask"
    );
    // Every variant with --dropout 0.1 in training passes O, dQ, dK, dV (or is refused with its
    // reason: unfused-inplace-exp's hazard, a missing feature).
    let o = run(&["--variant", "all", "--dropout", "0.1", "--backward"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!text.contains("FAIL"), "{text}");
    assert!(
        text.matches("PASS (O, dQ, dK, dV)").count() >= common::PORTABLE.len(),
        "{text}"
    );
    // Train mode: no warning.
    let o = run(&["--variant", "tiled", "--dropout", "0.25", "--mode", "train"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("WARNING"));
    // Bad values: exit 2 naming the value.
    for bad in ["1", "1.5", "-0.1", "nan", "inf"] {
        let o = run(&["--variant", "tiled", "--dropout", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", stderr(&o));
        assert!(stderr(&o).contains("--dropout must be"), "{}", stderr(&o));
    }
    let o = run(&["--variant", "tiled", "--dropout", "0.1", "--mode", "test"]);
    common::assert_exit(&o, 2, &["--mode `test`"]);
    // keep.npy above its size limit: refused before any work, nothing written.
    let big = dir.path().join("big");
    let o = bin()
        .args(["run", "--variant", "tiled", "--dropout", "0.1"])
        .args(["--batch", "64", "--heads", "16", "--seq", "4096"])
        .arg("--save-inputs")
        .arg(&big)
        .output()
        .unwrap();
    common::assert_exit(&o, 2, &["keep.npy"]);
    assert!(!big.join("q.npy").exists());
}

/// docs/training.md's numpy recipe (the ```python block after the marker `keep-mask recipe`),
/// run by python3 on a keep.npy this build wrote: it must regenerate the mask exactly.
#[test]
fn the_documented_numpy_recipe_regenerates_keep_npy() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/training.md")).unwrap();
    let at = readme
        .find("keep-mask recipe")
        .expect("docs/training.md has the keep-mask recipe");
    let rest = &readme[at..];
    let start = rest.find("```python\n").expect("a python block") + "```python\n".len();
    let recipe = &rest[start..start + rest[start..].find("```").unwrap()];
    let dir = tempfile::tempdir().unwrap();
    for (seed, p, b, h, n) in [
        ("3", "0.1", "2", "3", "20"),
        ("18446744073709551615", "0.7", "1", "2", "33"),
    ] {
        let inputs = dir.path().join(format!("in{seed}"));
        let o = bin()
            .args(["run", "--variant", "tiled", "--dropout", p, "--seed", seed])
            .args(["--batch", b, "--heads", h, "--seq", n, "--head-dim", "8"])
            .args(["--reps", "1", "--warmup", "0"])
            .arg("--save-inputs")
            .arg(&inputs)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let script = format!(
            "{recipe}\nimport sys\nsaved = np.load(sys.argv[1])\n\
             mine = keep_mask(int(sys.argv[2]), float(sys.argv[3]), *saved.shape)\n\
             assert saved.dtype == np.bool_, saved.dtype\n\
             assert (mine == saved).all(), int((mine != saved).sum())\n\
             print('recipe matches', saved.shape, int(saved.sum()))\n"
        );
        let py = dir.path().join("recipe.py");
        std::fs::write(&py, script).unwrap();
        let o = std::process::Command::new(common::python())
            .arg(&py)
            .arg(inputs.join("keep.npy"))
            .args([seed, p])
            .output()
            .expect("python3 (with numpy: .ci/run installs python3-numpy)");
        assert!(
            o.status.success(),
            "the docs/training.md recipe failed: {}{}",
            String::from_utf8_lossy(&o.stdout),
            stderr(&o)
        );
        assert!(String::from_utf8_lossy(&o.stdout).contains("recipe matches"));
    }
}
