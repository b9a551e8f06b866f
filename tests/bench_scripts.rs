//! The numpy-only parts of bench/torch_sdpa.py (mask loading, the f64 reference and its
//! low-precision twin, the tolerance rule, N != M and the causal alignments), checked by
//! bench/test_torch_sdpa.py, including its cross-check against this build's outputs: the
//! PyTorch rows of results/ are judged by the same reference as attn-wgpu's. Runs with the
//! system's python3 and numpy (.ci/run installs python3-numpy); no torch needed.

mod common;

#[test]
fn the_torch_baselines_numpy_reference_matches_attn_wgpu() {
    let o = std::process::Command::new(common::python())
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/bench/test_torch_sdpa.py"
        ))
        .arg("--attn-wgpu")
        .arg(env!("CARGO_BIN_EXE_attn-wgpu"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("python3 (with numpy: .ci/run installs python3-numpy)");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains("all passed"),
        "bench/test_torch_sdpa.py failed:\n{out}{}",
        common::stderr(&o)
    );
    assert!(out.contains("kv-seq / causal alignment"), "{out}");
}
