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

/// bench/suite.sh runs on a lent machine where a wrong command costs device time: every
/// `attn-wgpu run` it issues names one variant or `all` (`run --variant` takes no list; a list
/// was exit 2 on the H200 and cost two rows of the suite), and it parses as bash.
#[test]
fn the_suite_script_asks_run_for_one_variant_or_all() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/suite.sh");
    let text = std::fs::read_to_string(path).unwrap();
    let mut runs = 0;
    for line in text.lines().filter(|l| l.trim_start().starts_with("attn ")) {
        runs += 1;
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = words.iter().position(|w| *w == "--variant");
        let v = at.and_then(|i| words.get(i + 1)).copied().unwrap_or("");
        assert!(!v.is_empty() && !v.contains(','), "{line}");
    }
    assert!(runs >= 10, "only {runs} attn-wgpu runs found in {path}");
    let o = std::process::Command::new("bash")
        .arg("-n")
        .arg(path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
