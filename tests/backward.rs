//! Training mode (`--backward`) on the test adapter: every variant's dQ, dK, dV against the f64
//! backward oracle over random cases (masks, key padding, fully-masked rows, causal, dtypes), the
//! in-place hazard check on the real case that fires it (and proof that the hazard is real), and
//! the command line's training options and their bad inputs.

mod common;

use attn_wgpu::gpu::runner::Runner;
use attn_wgpu::problem::{DType, Inputs, Problem};
use attn_wgpu::run::run_variant;
use attn_wgpu::validate::Verdict;
use attn_wgpu::{variants, Error};
use common::{bin, stderr};
use rand_core::SeedableRng;

fn expected_refusal(p: &Problem, variant: &str, reason: &str) -> bool {
    (p.dtype == DType::BF16 && p.head_dim % 2 == 1 && reason.contains("D must be even"))
        || (p.dtype == DType::F16 && !common::gpu().caps.f16 && reason.contains("SHADER_F16"))
        || reason.contains("is not implemented")
        || reason.contains("does not offer")
        || (variant == "unfused-inplace-exp" && reason.contains("in-place hazard"))
        || (variant == "tiled-coop" && reason.contains("cooperative-matrix backward"))
        || (variant == "split-kv"
            && (reason.contains("decode kernel")
                || reason.contains("nothing to split")
                || reason.contains("as 16-byte words")))
}

/// Why run `r` of case `desc` did not pass: O, and each gradient (its worst error and NaNs),
/// one line each; empty when every one passed.
fn failures_of(r: &attn_wgpu::run::VariantRun, desc: &str) -> Vec<String> {
    let mut out = Vec::new();
    let v = r.validation.as_ref().unwrap();
    if v.verdict != Verdict::Pass {
        out.push(format!("{desc}: O failed: {:?}", v.worst));
    }
    let t = r
        .training
        .as_ref()
        .expect("a training run reports its step");
    for g in t.grads.iter().filter(|g| g.verdict != Verdict::Pass) {
        out.push(format!(
            "{desc}: {} max abs {:.3e} ratio {:.2} NaN {} worst {:?}",
            g.tensor, g.max_abs_err, g.max_tol_ratio, g.nan_count, g.worst
        ));
    }
    out
}

#[test]
fn randomized_backward_equivalence_suite() {
    let gpu = common::gpu();
    let mut runner = Runner::new(gpu).unwrap();
    let mut rng = rand_pcg::Pcg32::seed_from_u64(0xbac_4a4d);
    let mut failures = Vec::new();
    let (mut ran, mut expected_nan) = (0u32, 0u64);
    let mut per_variant = std::collections::BTreeMap::<&str, u32>::new();
    while ran < 160 {
        let c = common::random_case(&mut rng, true);
        match run_variant(gpu, &mut runner, &c.p, &c.x, c.variant, common::ONCE, false) {
            Ok(r) => {
                ran += 1;
                *per_variant.entry(c.variant).or_default() += 1;
                let t = r
                    .training
                    .as_ref()
                    .expect("a training run reports its step");
                assert_eq!(t.grads.len(), 3, "{}", c.desc);
                expected_nan += t.grads.iter().map(|g| g.expected_nan_count).sum::<u64>();
                failures.extend(failures_of(&r, &c.desc));
            }
            Err(Error::Incompatible { reason, .. }) => {
                if !expected_refusal(&c.p, c.variant, &reason) {
                    failures.push(format!("{}: unexpected refusal: {reason}", c.desc));
                }
            }
            Err(e) => failures.push(format!("{}: error {e}", c.desc)),
        }
    }
    eprintln!("{ran} training cases: {per_variant:?}; {expected_nan} expected NaN gradients");
    for v in ["unfused", "unfused-inplace", "math", "tiled"] {
        assert!(
            per_variant.get(v).copied().unwrap_or(0) >= 10,
            "{v} must be exercised: {per_variant:?}"
        );
    }
    assert!(
        expected_nan > 0,
        "fully-masked rows of the NaN variants must reach dV"
    );
    assert!(
        failures.is_empty(),
        "{} of {ran} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn training_problem() -> (Problem, Inputs) {
    let mut p = Problem::new(1, 2, 24, 8, true, 7);
    p.backward = true;
    let x = Inputs::generate(&p);
    (p, x)
}

/// The check fires on the real case: `unfused-inplace-exp` runs fine in inference and is refused
/// in training, naming the saved tensor, the step whose backward needs it and the in-place
/// dispatch that overwrote it; `unfused-inplace`, whose in-place steps overwrite only what no
/// backward step reads, is accepted.
#[test]
fn the_in_place_hazard_is_refused_with_the_overwriting_dispatch() {
    let caps = &common::gpu().caps;
    let (p, _) = training_problem();
    let inference = Problem {
        backward: false,
        ..p.clone()
    };
    assert!(variants::plan("unfused-inplace-exp", &inference, caps).is_ok());
    match variants::plan("unfused-inplace-exp", &p, caps) {
        Err(Error::Incompatible { reason, .. }) => {
            assert!(reason.contains("in-place hazard"), "{reason}");
            assert!(reason.contains("`exp_bwd`"), "{reason}");
            assert!(reason.contains("`exp_sum`"), "{reason}");
            assert!(reason.contains("`normalize_rows` overwrote"), "{reason}");
        }
        other => panic!(
            "the hazard must be refused, got {:?}",
            other.map(|p| p.variant)
        ),
    }
    for v in ["unfused", "unfused-inplace", "math", "tiled"] {
        let plan = variants::plan(v, &p, caps).unwrap();
        assert!(plan.check_saved().is_ok());
        assert!(plan.training_note.as_deref().unwrap().starts_with("safe"));
    }
}

/// The hazard is real, not a formality: the refused plan, run anyway (bypassing the check), reads
/// P where exp_'s backward needs E and its gradients fail against the oracle, while the same
/// forward's output passes.
#[test]
fn running_the_refused_plan_anyway_gives_wrong_gradients() {
    let gpu = common::gpu();
    let (p, x) = training_problem();
    let mut plan = attn_wgpu::variants::unfused::build_in_place_exp(&p, &gpu.caps).unwrap();
    plan.variant = "unfused-inplace-exp".into();
    assert!(plan.check_saved().is_err());
    let mut runner = Runner::new(gpu).unwrap();
    let m = runner.execute(&plan, &x, common::ONCE).unwrap();
    let o = attn_wgpu::validate::validate(
        &p,
        &x,
        &m.output,
        &attn_wgpu::validate::rows_to_check(&p),
        attn_wgpu::mask::Semantics::Nan,
    );
    assert_eq!(o.verdict, Verdict::Pass);
    let g = attn_wgpu::validate::validate_grads(
        &p,
        &x,
        &m.grads,
        &[0, 1],
        attn_wgpu::mask::Semantics::Nan,
    );
    assert_eq!(
        g[2].verdict,
        Verdict::Pass,
        "dV does not go through exp_'s backward"
    );
    assert_eq!(g[0].verdict, Verdict::Fail, "dQ must be wrong: {:?}", g[0]);
    assert_eq!(g[1].verdict, Verdict::Fail, "dK must be wrong: {:?}", g[1]);
}

#[test]
fn cli_backward_writes_gradients_and_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let grads = dir.path().join("g");
    let inputs = dir.path().join("in");
    std::fs::create_dir(&grads).unwrap();
    let o = bin()
        .args([
            "run",
            "--variant",
            "tiled",
            "--backward",
            "--seq",
            "20",
            "--heads",
            "2",
        ])
        .args([
            "--head-dim",
            "8",
            "--reps",
            "1",
            "--warmup",
            "0",
            "--dtype",
            "f16",
        ])
        .arg("--grad-out")
        .arg(&grads)
        .arg("--save-inputs")
        .arg(&inputs)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("training step"), "{text}");
    for f in ["dq.npy", "dk.npy", "dv.npy"] {
        let t = attn_wgpu::npy::read_qkv(&grads.join(f)).unwrap();
        assert_eq!(t.shape, vec![1, 2, 20, 8], "{f}");
        assert_eq!(t.dtype, DType::F16, "{f}");
        assert!(t.values.iter().all(|v| v.is_finite()));
    }
    // The saved dO reproduces the run: --do with it gives the same gradients.
    let again = dir.path().join("g2");
    std::fs::create_dir(&again).unwrap();
    let o = bin()
        .args([
            "run",
            "--variant",
            "unfused",
            "--backward",
            "--reps",
            "1",
            "--warmup",
            "0",
        ])
        .args(["--dtype", "f16"])
        .arg("--q")
        .arg(inputs.join("q.npy"))
        .arg("--k")
        .arg(inputs.join("k.npy"))
        .arg("--v")
        .arg(inputs.join("v.npy"))
        .arg("--do")
        .arg(inputs.join("do.npy"))
        .arg("--grad-out")
        .arg(&again)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let a = attn_wgpu::npy::read_qkv(&grads.join("dv.npy")).unwrap();
    let b = attn_wgpu::npy::read_qkv(&again.join("dv.npy")).unwrap();
    let worst = a
        .values
        .iter()
        .zip(&b.values)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    assert!(worst < 1e-2, "two variants on the same dO: {worst}");
}

#[test]
fn cli_backward_bad_inputs_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        let mut c = bin();
        c.args([
            "run",
            "--seq",
            "16",
            "--heads",
            "1",
            "--head-dim",
            "8",
            "--reps",
            "1",
        ]);
        c.args(extra);
        c.output().unwrap()
    };
    // dO of the wrong shape.
    let bad = dir.path().join("bad.npy");
    attn_wgpu::npy::write(&bad, &[1, 1, 15, 8], DType::F32, &vec![0.0; 120]).unwrap();
    let o = run(&[
        "--variant",
        "tiled",
        "--backward",
        "--do",
        bad.to_str().unwrap(),
    ]);
    common::assert_exit(&o, 2, &["expected shape [1, 1, 16, 8]"]);
    // --grad-out into a missing folder; nothing is created.
    let missing = dir.path().join("nope");
    let o = run(&[
        "--variant",
        "tiled",
        "--backward",
        "--grad-out",
        missing.to_str().unwrap(),
    ]);
    common::assert_exit(&o, 2, &["no such folder"]);
    assert!(!missing.exists());
    // Training options without --backward.
    let o = run(&["--variant", "tiled", "--do", bad.to_str().unwrap()]);
    common::assert_exit(&o, 2, &["add --backward"]);
    // A variant whose backward is refused: exit 4 with the reason.
    let o = run(&["--variant", "unfused-inplace-exp", "--backward"]);
    common::assert_exit(&o, 4, &["in-place hazard"]);
    // --bwd-dq: only with --backward, pass or atomic; atomic where it cannot run (f32 at D = 40
    // takes the chunked tile on lavapipe) is exit 4 with the reason.
    let o = run(&["--variant", "tiled", "--bwd-dq", "atomic"]);
    common::assert_exit(&o, 2, &["--bwd-dq", "needs --backward"]);
    let o = run(&["--variant", "tiled", "--backward", "--bwd-dq", "atom"]);
    common::assert_exit(&o, 2, &["`atom`", "expected pass or atomic"]);
    let o = bin()
        .args(["run", "--variant", "tiled", "--seq", "16", "--heads", "1"])
        .args(["--head-dim", "40", "--backward", "--bwd-dq", "atomic"])
        .output()
        .unwrap();
    common::assert_exit(&o, 4, &["--bwd-dq atomic", "walking D in chunks"]);
    // --grad-out with all variants.
    let o = run(&[
        "--variant",
        "all",
        "--backward",
        "--grad-out",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// `tiled`'s one-pass backward (`--bwd-dq atomic`: the dK/dV pass adds dQ into an f32 accumulator
/// with float atomics, FlashAttention-2's five products instead of seven): random cases at D = 20,
/// 40, 64, 72 and 80 (the narrow 32 x 32 tiles lavapipe takes; f32 above D = 32 takes the chunked
/// or the small tiles there and is refused with the reason), random masks, dropout, GQA and N != M: every
/// gradient PASS, and the plan clears and rounds the accumulator instead of running `bwd_q`.
#[test]
fn tiled_one_pass_backward_with_atomic_dq_passes_random_cases() {
    let gpu = common::gpu();
    assert!(
        gpu.caps.float32_atomics,
        "lavapipe offers SHADER_FLOAT32_ATOMIC (VK_EXT_shader_atomic_float); this adapter does not"
    );
    tiled_random_training(
        0xa70_3c1d,
        &[20, 40, 64, 72, 80],
        24,
        |p| p.bwd_dq_atomic = true,
        "--bwd-dq atomic runs on the fused backward's 32 x 32",
        |p, desc| {
            let plan = variants::plan("tiled", p, &gpu.caps).unwrap();
            let names: Vec<&str> = plan.dispatches.iter().map(|d| d.name.as_str()).collect();
            assert!(
                names.ends_with(&["bwd_dot", "dq_zero", "bwd_kv", "dq_out"]),
                "{desc}: {names:?}"
            );
        },
    );
}

/// Random `tiled` training cases drawn at `dims` from `seed`, each set up by `setup`, until `runs`
/// of them ran: each passes `check` (its plan or its tile) and every gradient PASS. f32 cases
/// refused with `f32_refusal` in the reason are counted, and at least one must be; other
/// refusals only as [`expected_refusal`] allows.
fn tiled_random_training(
    seed: u64,
    dims: &[u32],
    runs: u32,
    setup: impl Fn(&mut Problem),
    f32_refusal: &str,
    check: impl Fn(&Problem, &str),
) {
    let gpu = common::gpu();
    let mut runner = Runner::new(gpu).unwrap();
    let mut rng = rand_pcg::Pcg32::seed_from_u64(seed);
    let mut failures = Vec::new();
    let (mut ran, mut refused) = (0, 0);
    while ran < runs {
        let mut c = common::random_case_with(&mut rng, true, dims).run_as("tiled");
        setup(&mut c.p);
        if c.p.dtype == DType::F16 && !gpu.caps.f16 {
            continue;
        }
        match run_variant(gpu, &mut runner, &c.p, &c.x, c.variant, common::ONCE, false) {
            Ok(r) => {
                ran += 1;
                check(&c.p, &c.desc);
                failures.extend(failures_of(&r, &c.desc));
            }
            Err(Error::Incompatible { reason, .. })
                if c.p.dtype == DType::F32 && reason.contains(f32_refusal) =>
            {
                refused += 1;
            }
            Err(Error::Incompatible { reason, .. }) if expected_refusal(&c.p, "tiled", &reason) => {
            }
            Err(e) => failures.push(format!("{}: {e}", c.desc)),
        }
    }
    assert!(
        refused > 0,
        "no f32 case refused with `{f32_refusal}` was drawn"
    );
    assert!(
        failures.is_empty(),
        "{} of {ran} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `tiled`'s fused backward on the 32 x 32 tile that walks D in four chunks of 64 columns
/// (`--bwd-tile 32` at 128 < D <= 256, tiled_bwd_chunk_kv.wgsl / _q.wgsl with NCH = 4): f16 and
/// bf16 staged in 16 bits (`D256H`, 25856 bytes) at D = 136, 200 and 256 with random masks,
/// dropout, GQA and N != M in both alignments, every gradient PASS; f32 (`D256C`, 43264 bytes) is
/// refused on lavapipe's 32 KiB with the bytes it needs.
#[test]
fn tiled_backward_four_chunk_tile_passes_random_cases() {
    use attn_wgpu::kernels::tiled_bwd::Tile;
    let gpu = common::gpu();
    tiled_random_training(
        0x4c4_a4c5,
        &[136, 200, 256],
        10,
        |p| p.bwd_tile = Some(32),
        "needs 43264 bytes",
        |p, desc| {
            let tile = Tile::for_problem(p, &gpu.caps).unwrap();
            assert_eq!((tile, tile.chunks()), (Tile::D256H, 4), "{desc}");
        },
    );
}

/// `tiled`'s fused backward on every tile this adapter takes (src/kernels/tiled_bwd.rs, `Tile`):
/// on lavapipe's 32 KiB the 32 x 32 tile at D <= 32; at 32 < D <= 64 for f32 with D walked in two
/// chunks (`D64C`: the chunked kernels of D = 128's f32 tile) and for f16/bf16 staged in 16 bits
/// (`D64H`); for f16/bf16 at 64 < D <= 80 staged in 16 bits (`D80H`: the 16-bit staging and phase
/// B's second column of D = 128's tile); and the
/// small tiles (tiled_bwd_wide.wgsl) elsewhere, one row a thread at D = 128 and 256: random
/// masks, dtypes, dropout, GQA and N != M in both alignments, every gradient PASS.
#[test]
fn tiled_backward_passes_at_every_head_dim_random_cases() {
    use attn_wgpu::kernels::tiled_bwd::Tile;
    let gpu = common::gpu();
    let mut runner = Runner::new(gpu).unwrap();
    let mut rng = rand_pcg::Pcg32::seed_from_u64(0x71de_bacd);
    let mut failures = Vec::new();
    let mut tiles = std::collections::BTreeMap::<String, u32>::new();
    let dims = [20u32, 40, 64, 72, 80, 128, 136, 200, 256];
    let mut ran = 0;
    while ran < 36 {
        let c = common::random_case_with(&mut rng, true, &dims).run_as("tiled");
        if c.p.dtype == DType::F16 && !gpu.caps.f16 {
            continue;
        }
        match run_variant(gpu, &mut runner, &c.p, &c.x, c.variant, common::ONCE, false) {
            Ok(r) => {
                ran += 1;
                let tile = Tile::for_problem(&c.p, &gpu.caps).unwrap();
                *tiles.entry(format!("{tile:?}")).or_default() += 1;
                failures.extend(failures_of(&r, &c.desc));
            }
            Err(Error::Incompatible { reason, .. }) if expected_refusal(&c.p, "tiled", &reason) => {
            }
            Err(e) => failures.push(format!("{}: {e}", c.desc)),
        }
    }
    eprintln!("{ran} tiled training cases by tile: {tiles:?}");
    assert!(
        tiles.len() >= 3,
        "the narrow and at least two small tiles must run: {tiles:?}"
    );
    assert!(
        tiles.contains_key("D64H") && tiles.contains_key("D80H"),
        "the 16-bit staged 32 x 32 tiles must run: {tiles:?}"
    );
    assert!(
        tiles.contains_key("D64C"),
        "the chunked 32 x 32 tile must run: {tiles:?}"
    );
    assert!(
        failures.is_empty(),
        "{} of {ran} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
