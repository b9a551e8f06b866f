//! Shared set-up for the GPU tests: one device per test binary, on whatever adapter wgpu prefers
//! (lavapipe in CI). `ATTN_WGPU_TEST_BACKEND` picks a backend (e.g. `gl`).

#![allow(dead_code)]

use std::sync::OnceLock;

use attn_wgpu::gpu::{AdapterSelection, Gpu};
use attn_wgpu::mask::{normalize, MaskValues, UserMask};
use attn_wgpu::problem::{CausalAlign, Convention, DType, Inputs, Problem};
use attn_wgpu::variants;
use rand_core::RngCore;

/// The variants every test adapter runs (no cooperative matrices, no decode-only regime).
pub const PORTABLE: [&str; 4] = ["unfused", "unfused-inplace", "math", "tiled"];

/// One recorded forward (and backward), no warm-up, no host-only repetitions: the tests' run.
pub const ONCE: attn_wgpu::gpu::runner::Schedule = attn_wgpu::gpu::runner::Schedule {
    warmup: 0,
    reps: 1,
    host_reps: 0,
    warmup_ms: None,
};

pub fn gpu() -> &'static Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    GPU.get_or_init(|| {
        let sel = AdapterSelection {
            backend: std::env::var("ATTN_WGPU_TEST_BACKEND").ok(),
            name: None,
        };
        // Every variant's features, and SHADER_F16 (the command line asks for it for `--dtype
        // f16`), so that the f16 kernels run here wherever the adapter has it.
        match attn_wgpu::device::open(
            &sel,
            attn_wgpu::variants::features_for(&attn_wgpu::variants::names())
                | wgpu::Features::SHADER_F16,
        ) {
            Ok(g) => {
                eprintln!("tests run on: {} ({})", g.report.name, g.report.backend);
                g
            }
            // No adapter is a failure, not a skip: CI installs the software Vulkan driver.
            Err(e) => panic!("no GPU adapter for the tests: {e}"),
        }
    })
}

/// Runs `variant` on `p` unless its plan refuses with a reason `expected` accepts (then None;
/// any other refusal or error panics), and asserts that O and, in training, every gradient PASS.
pub fn run_passing(
    runner: &mut attn_wgpu::gpu::runner::Runner,
    p: &Problem,
    x: &Inputs,
    variant: &str,
    expected: impl Fn(&str) -> bool,
) -> Option<attn_wgpu::run::VariantRun> {
    match variants::plan(variant, p, &gpu().caps) {
        Ok(_) => {}
        Err(attn_wgpu::Error::Incompatible { reason, .. }) if expected(&reason) => return None,
        Err(e) => panic!("{variant} {}: unexpected refusal: {e}", p.shape_string()),
    }
    let r = attn_wgpu::run::run_variant(gpu(), runner, p, x, variant, ONCE, false)
        .unwrap_or_else(|e| panic!("{variant} {}: {e}", p.shape_string()));
    assert_passed(variant, p, &r);
    Some(r)
}

/// Asserts that a run's O and, in training, every gradient PASS against f64, naming `label`,
/// the shape and what failed.
pub fn assert_passed(label: &str, p: &Problem, r: &attn_wgpu::run::VariantRun) {
    use attn_wgpu::validate::Verdict;
    let val = r.validation.as_ref().unwrap();
    assert_eq!(
        val.verdict,
        Verdict::Pass,
        "{label} {}: {val:?}",
        p.shape_string()
    );
    if let Some(t) = &r.training {
        for g in &t.grads {
            assert_eq!(
                g.verdict,
                Verdict::Pass,
                "{label} {}: {} {g:?}",
                p.shape_string(),
                g.tensor
            );
        }
    }
}

/// The attn-wgpu binary of this build, for the command-line tests.
pub fn bin() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_attn-wgpu"))
}

/// `attn-wgpu run ARGS --q Q --k K --v V`, finished: Q, K, V are `dir`'s q.npy, k.npy, v.npy
/// (what `--save-inputs dir` wrote) unless `k` names another file for both K and V.
pub fn run_on_files(
    dir: &std::path::Path,
    k: Option<&std::path::Path>,
    args: &[&str],
) -> std::process::Output {
    let (kf, vf) = match k {
        Some(k) => (k.to_path_buf(), k.to_path_buf()),
        None => (dir.join("k.npy"), dir.join("v.npy")),
    };
    bin()
        .arg("run")
        .args(args)
        .arg("--q")
        .arg(dir.join("q.npy"))
        .arg("--k")
        .arg(kf)
        .arg("--v")
        .arg(vf)
        .output()
        .unwrap()
}

/// The Python with numpy: `ATTN_WGPU_PYTHON`, else the system's /usr/bin/python3 (where
/// .ci/run's `apt-get install python3-numpy` puts numpy, whatever a pyenv shim says), else
/// python3 on the PATH.
pub fn python() -> String {
    std::env::var("ATTN_WGPU_PYTHON").unwrap_or_else(|_| {
        if std::path::Path::new("/usr/bin/python3").exists() {
            "/usr/bin/python3".into()
        } else {
            "python3".into()
        }
    })
}

/// Asserts that a finished command exited with `code` and that its stderr names every one of
/// `wants` (what a clear refusal must say).
pub fn assert_exit(o: &std::process::Output, code: i32, wants: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "{err}");
    for w in wants {
        assert!(err.contains(w), "stderr lacks `{w}`: {err}");
    }
}

/// A finished command's stderr, as text.
pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Mask kinds the suite draws from.
pub const KINDS: [&str; 6] = [
    "none",
    "bool",
    "float",
    "padding",
    "bool+padding",
    "float+padding",
];

pub struct Case {
    pub variant: &'static str,
    pub p: Problem,
    pub x: Inputs,
    pub desc: String,
}

impl Case {
    /// This case run as `variant` instead of the variant it was drawn with (its description
    /// names the one it runs).
    pub fn run_as(mut self, variant: &'static str) -> Case {
        if let Some(rest) = self.desc.strip_prefix(self.variant) {
            self.desc = format!("{variant}{rest}");
        }
        self.variant = variant;
        self
    }
}

pub fn pick<T: Copy>(rng: &mut rand_pcg::Pcg32, xs: &[T]) -> T {
    xs[(rng.next_u32() as usize) % xs.len()]
}

pub fn unit(rng: &mut rand_pcg::Pcg32) -> f32 {
    (rng.next_u32() >> 8) as f32 / (1u32 << 24) as f32
}

/// A random mask of a random allowed shape; bool masks sometimes block whole rows.
pub fn random_mask(rng: &mut rand_pcg::Pcg32, p: &Problem, float: bool) -> UserMask {
    let (n, m) = (p.seq as u64, p.kv_seq as u64);
    let shape = match rng.next_u32() % 3 {
        0 => vec![n, m],
        1 => vec![p.batch as u64, 1, n, m],
        _ => vec![p.batch as u64, p.heads as u64, n, m],
    };
    let len = shape.iter().product::<u64>() as usize;
    let density = pick(rng, &[0.1f32, 0.5, 0.9]);
    let values = if float {
        MaskValues::Float(
            (0..len)
                .map(|_| {
                    let u = unit(rng);
                    if u < 0.15 {
                        f32::NEG_INFINITY
                    } else {
                        (unit(rng) - 0.5) * 6.0
                    }
                })
                .collect(),
        )
    } else {
        let dead_row = (rng.next_u32() % n as u32) as usize;
        let kill = rng.next_u32() & 1 == 0;
        MaskValues::Bool(
            (0..len)
                .map(|k| {
                    let row = (k / m as usize) % n as usize;
                    if kill && row == dead_row {
                        false
                    } else {
                        unit(rng) < density
                    }
                })
                .collect(),
        )
    };
    UserMask {
        shape,
        values,
        source: "generated".into(),
    }
}

/// A random case (a third of them with dropout); `backward`: a training problem (dO drawn too),
/// N <= 40 and D <= 32.
pub fn random_case(rng: &mut rand_pcg::Pcg32, backward: bool) -> Case {
    random_case_with(rng, backward, &[1u32, 2, 3, 4, 7, 8, 12, 16, 17, 24, 32])
}

/// [`random_case`] with the head dimension drawn from `dims`.
pub fn random_case_with(rng: &mut rand_pcg::Pcg32, backward: bool, dims: &[u32]) -> Case {
    let variant = pick(rng, &variants::names());
    let dtype = pick(rng, &DType::ALL);
    let kind = pick(rng, &KINDS);
    let conv = pick(rng, &[Convention::Sdpa, Convention::Mha]);
    let causal = rng.next_u32() & 1 == 0;
    let b = 1 + rng.next_u32() % 2;
    let h = 1 + rng.next_u32() % 3;
    let n = pick(rng, &[1u32, 2, 3, 5, 8, 13, 16, 17, 24, 31, 33, 40]);
    let d = pick(rng, dims);
    let seed = rng.next_u64();
    let mut p = Problem::new(b, h, n, d, causal, seed);
    p.dtype = dtype;
    p.backward = backward;
    let mut x = Inputs::generate(&p);
    let user = match kind {
        "bool" | "bool+padding" => Some(random_mask(rng, &p, false)),
        "float" | "float+padding" => Some(random_mask(rng, &p, true)),
        _ => None,
    };
    let padding: Option<Vec<u32>> = kind
        .contains("padding")
        .then(|| (0..b).map(|_| rng.next_u32() % (n + 1)).collect());
    normalize(&mut p, &mut x, user.as_ref(), conv, padding.as_deref()).unwrap();
    // A third of the cases drop, a third share K/V heads (GQA / MQA, a K/V head count that
    // divides H) and a third have M != N keys with a random causal alignment (the inputs and
    // masks are regenerated for those). Drawn last, so the draws above are those of the suite
    // before these existed, case by case.
    if rng.next_u32().is_multiple_of(3) {
        p.dropout = pick(rng, &[0.1, 0.3, 0.6]);
    }
    let gqa = rng.next_u32().is_multiple_of(3);
    let cross = rng.next_u32().is_multiple_of(3);
    if gqa || cross {
        let heads = if gqa { pick(rng, &[2u32, 4]) } else { h };
        let mut q = Problem::new(b, heads, n, d, causal, seed);
        q.dtype = dtype;
        q.backward = backward;
        q.dropout = p.dropout;
        if gqa {
            q.kv_heads = pick(rng, &[1u32, heads / 2]);
        }
        if cross {
            q.kv_seq = pick(rng, &[1u32, 3, 8, 17, 33, 40, 64]);
            q.causal_align = pick(rng, &[CausalAlign::TopLeft, CausalAlign::BottomRight]);
        }
        let mut y = Inputs::generate(&q);
        let user = match kind {
            "bool" | "bool+padding" => Some(random_mask(rng, &q, false)),
            "float" | "float+padding" => Some(random_mask(rng, &q, true)),
            _ => None,
        };
        let pad: Option<Vec<u32>> = padding
            .as_ref()
            .map(|v| v.iter().map(|l| l % (q.kv_seq + 1)).collect());
        normalize(&mut q, &mut y, user.as_ref(), conv, pad.as_deref()).unwrap();
        p = q;
        x = y;
    }
    let desc = format!(
        "{variant} {} mask={kind} conv={conv:?} pad={padding:?} seed={seed}",
        p.shape_string()
    );
    Case {
        variant,
        p,
        x,
        desc,
    }
}

/// Runs `c` with no standard input, output captured, killing it if it has not finished within
/// `secs`: the output, or why not (a hang).
pub fn bounded(mut c: std::process::Command, secs: u64) -> Result<std::process::Output, String> {
    use std::process::Stdio;
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let t0 = std::time::Instant::now();
    loop {
        if child.try_wait().map_err(|e| e.to_string())?.is_some() {
            return child.wait_with_output().map_err(|e| e.to_string());
        }
        if t0.elapsed() > std::time::Duration::from_secs(secs) {
            let _ = child.kill();
            return Err(format!("hang: still running after {secs} s"));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A file of tests/fixtures.
pub fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A JSON fixture, parsed (to be changed and written elsewhere by a test).
pub fn fixture_json(name: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap()
}

/// `run` of one variant on a problem small enough for the software adapter in well under a
/// second: B1 H1 N16 D16, no warm-up, one recorded forward.
pub fn tiny_run(variant: &str) -> Vec<String> {
    [
        "run",
        "--variant",
        variant,
        "--batch",
        "1",
        "--heads",
        "1",
        "--seq",
        "16",
        "--head-dim",
        "16",
        "--warmup",
        "0",
        "--reps",
        "1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Runs `plan` (an emulated build of `variant`, which gives its fully-masked-row semantics) once
/// on the test adapter under `label`, and asserts O, and in training every gradient, PASS
/// against the f64 reference.
pub fn plan_passes(
    p: &Problem,
    x: &Inputs,
    variant: &str,
    label: &str,
    plan: attn_wgpu::plan::Plan,
) -> attn_wgpu::run::VariantRun {
    let sem = variants::find(variant).unwrap().fully_masked;
    let mut runner = attn_wgpu::gpu::runner::Runner::new(gpu()).unwrap();
    let r = attn_wgpu::run::run_plan(&mut runner, p, x, label, plan, sem, ONCE)
        .unwrap_or_else(|e| panic!("{label} {}: {e}", p.shape_string()));
    if p.backward {
        assert!(
            r.training.is_some(),
            "{label} {}: no training step",
            p.shape_string()
        );
    }
    assert_passed(label, p, &r);
    r
}

/// A Vulkan adapter as the H100 and H200 report themselves (cooperative matrices, passthrough
/// shaders, 32-wide subgroups, 48 KiB of workgroup storage) whose probe found the assumed
/// cooperative-matrix layout: where the plans of the matrix-unit variants are checked.
#[allow(dead_code)]
pub fn matrix_adapter() -> attn_wgpu::gpu::AdapterCaps {
    let mut c = attn_wgpu::gpu::AdapterCaps::webgpu_defaults().with_shader_features(
        wgpu::Features::SHADER_F16
            | wgpu::Features::SUBGROUP
            | wgpu::Features::SUBGROUP_BARRIER
            | wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX,
    );
    c.backend = "vulkan".into();
    c.subgroup_min_size = 32;
    c.subgroup_max_size = 32;
    c.max_workgroup_storage = 48 << 10;
    c.passthrough = true;
    c.coop_layout = attn_wgpu::gpu::CoopLayout::Assumed;
    c
}

/// Inputs whose scores rise along the keys: about 11.5 in base 2 every 32 keys over keys 0 .. 63
/// (with `p.scale` = 0.125), then about 5.8 every 32 over keys 64 .. 127, then back to the random
/// part alone. A fused kernel's running row maximum moves block after block by more than 8 (base
/// 2), then by less (where a lazy rescale keeps it and P grows up to 2^8), and later keys fall far
/// below it. Q's
/// first component is 4 and K's the ramp (quarters up to 47.25, exact in every dtype); the rest
/// stays the generator's.
pub fn rising_scores(p: &Problem) -> Inputs {
    let mut x = Inputs::generate(p);
    let d = p.head_dim as usize;
    let m = p.kv_seq as usize;
    for row in x.q.chunks_mut(d) {
        row[0] = 4.0;
    }
    // K is [B, Hkv, M, D]: row r is key r % M.
    for (r, row) in x.k.chunks_mut(d).enumerate() {
        let j = (r % m) as f32;
        row[0] = match r % m {
            0..64 => j / 2.0,
            64..128 => 31.5 + (j - 64.0) / 4.0,
            _ => 0.0,
        };
    }
    x
}
