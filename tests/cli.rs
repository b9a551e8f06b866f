//! The command line: bad input gets a clear message naming the bad value and a non-zero exit,
//! never a panic; results files are complete JSON or absent.

use std::process::Output;

mod common;

use common::{bin, stderr};

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("spawn attn-wgpu")
}

/// Asserts exit `code`, that stderr mentions every `needles`, and that nothing panicked.
fn expect_error(args: &[&str], code: i32, needles: &[&str]) {
    let o = run(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(code), "args {args:?}\nstderr: {err}");
    for n in needles {
        assert!(err.contains(n), "args {args:?}: stderr lacks `{n}`:\n{err}");
    }
    assert!(!err.contains("panicked"), "args {args:?} panicked:\n{err}");
}

#[test]
fn bad_sizes_are_named() {
    expect_error(&["run", "--seq", "0"], 2, &["--seq", "0"]);
    expect_error(&["run", "--batch", "0"], 2, &["--batch", "0"]);
    expect_error(&["run", "--heads", "0"], 2, &["--heads", "0"]);
    expect_error(&["run", "--head-dim", "0"], 2, &["--head-dim", "0"]);
    expect_error(&["run", "--head-dim", "300"], 2, &["--head-dim", "300"]);
    expect_error(&["run", "--seq", "2000000"], 2, &["--seq", "2000000"]);
    expect_error(&["run", "--reps", "0"], 2, &["--reps", "0"]);
    expect_error(&["run", "--scale", "nan"], 2, &["--scale", "NaN"]);
    expect_error(&["run", "--scale", "inf"], 2, &["--scale", "inf"]);
}

#[test]
fn bad_names_are_named() {
    expect_error(&["run", "--variant", "flash9"], 2, &["flash9", "tiled"]);
    expect_error(&["run", "--dtype", "f64"], 2, &["f64"]);
    expect_error(&["run", "--backend", "directx9"], 2, &["directx9"]);
    expect_error(
        &["run", "--adapter", "no-such-gpu-xyz"],
        1,
        &["no-such-gpu-xyz"],
    );
    // clap's own errors: unknown flags and non-numbers.
    expect_error(&["run", "--sequence", "5"], 2, &["--sequence"]);
    expect_error(&["run", "--seq", "abc"], 2, &["abc"]);
    expect_error(&["run", "--seq", "-4"], 2, &["-4"]);
    expect_error(&["frobnicate"], 2, &["frobnicate"]);
}

#[test]
fn json_into_missing_folder_fails_before_any_work() {
    expect_error(
        &["run", "--json", "/nonexistent-dir-attn/x.json"],
        2,
        &["/nonexistent-dir-attn"],
    );
}

#[test]
fn too_large_for_the_adapter_is_incompatible_not_a_crash() {
    // S = 64 * 8192^2 * 4 bytes = 16 GiB: above any adapter's storage binding.
    expect_error(
        &[
            "run",
            "--variant",
            "unfused",
            "--heads",
            "64",
            "--seq",
            "8192",
            "--head-dim",
            "16",
            "--reps",
            "1",
        ],
        4,
        &["unfused", "max_storage_buffer_binding_size"],
    );
}

#[test]
fn run_all_writes_complete_results_and_keeps_old_file_on_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let p = path.to_str().unwrap();
    let o = run(&[
        "run",
        "--variant",
        "all",
        "--batch",
        "1",
        "--heads",
        "2",
        "--seq",
        "48",
        "--head-dim",
        "16",
        "--warmup",
        "1",
        "--reps",
        "3",
        "--verbose",
        "--json",
        p,
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}\n{}", stderr(&o));
    // --verbose: the per-variant blocks, then the summary last (after the roofline note).
    assert!(out.contains("Forward GPU : median"), "{out}");
    let summary = out.find("== summary").expect("summary");
    assert!(out.find("no roofline").is_none_or(|r| r < summary), "{out}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["seed"], 0);
    assert!(v["command"].as_str().unwrap().contains("--variant all"));
    assert_eq!(v["problem"]["seq"], 48);
    assert_eq!(v["timing"]["reps"], 3);
    assert!(v["versions"]["wgpu"].as_str().unwrap().starts_with("30."));
    assert!(v["adapter"]["name"].as_str().is_some());
    // Variants this adapter cannot run (tiled-coop: f32 here, no cooperative matrices) are
    // recorded as unsupported with their reason; the rest ran.
    let all_runs = v["runs"].as_array().unwrap();
    assert_eq!(all_runs.len(), attn_wgpu::variants::names().len());
    for r in all_runs.iter().filter(|r| r["status"] != "ok") {
        assert_eq!(r["status"], "unsupported");
        assert!(!r["reason"].as_str().unwrap().is_empty());
    }
    let runs: Vec<&serde_json::Value> = all_runs.iter().filter(|r| r["status"] == "ok").collect();
    let counts: Vec<(String, usize)> = runs
        .iter()
        .map(|r| {
            (
                r["variant"].as_str().unwrap().to_string(),
                r["dispatches"].as_array().unwrap().len(),
            )
        })
        .collect();
    assert_eq!(
        counts,
        [
            ("unfused".to_string(), 6),
            ("unfused-inplace".to_string(), 5),
            ("unfused-inplace-exp".to_string(), 7),
            ("math".to_string(), 11),
            ("tiled".to_string(), 1),
        ]
    );
    for r in runs {
        assert_eq!(r["validation"]["verdict"], "PASS", "{}", r["variant"]);
        assert_eq!(r["measurement"]["reps"].as_array().unwrap().len(), 3);
        assert!(r["forward"]["gpu_span_us"]["median"].as_f64().unwrap() > 0.0);
    }
    // A later run that fails on bad input leaves the earlier file byte-for-byte intact.
    let before = std::fs::read(&path).unwrap();
    let o = run(&["run", "--seq", "0", "--json", p]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(std::fs::read(&path).unwrap(), before);
    // No temporary files are left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn adapters_lists_features_and_limits() {
    let o = run(&["adapters"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        out.contains("timestamps=") && out.contains("workgroup storage"),
        "{out}"
    );
    // Per adapter, the variants it can run at the default shape (or why not).
    assert!(out.contains("can run: "), "{out}");
    for name in attn_wgpu::variants::names() {
        assert!(
            out.contains(name),
            "adapters output lacks variant {name}:\n{out}"
        );
    }
}

#[test]
fn sweep_tile_is_parsed_like_run_and_applied_at_every_n() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("sweep");
    let out_dir = d.to_str().unwrap();
    let sweep = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "sweep",
            "--seq",
            "16,32",
            "--heads",
            "1",
            "--head-dim",
            "16",
            "--warmup",
            "0",
            "--reps",
            "1",
            "--out-dir",
            out_dir,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let check = |extra: &[&str], code: i32, needles: &[&str]| {
        let a = sweep(extra);
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        expect_error(&refs, code, needles);
    };
    // The same parsing and messages as `run --tile` (exit 2), a tile that does not fit this
    // adapter (exit 4, as `run --variant tiled`), and --tile without `tiled` in the sweep.
    check(
        &["--tile", "bogus"],
        2,
        &["--tile `bogus` is unknown", "row:BR"],
    );
    check(&["--tile", "row:0"], 2, &["row:0", "at least 1"]);
    check(
        &["--tile", "row:x"],
        2,
        &["row:x", "not a positive integer"],
    );
    check(
        &["--tile", "row:3000"],
        4,
        &["row:3000", "does not fit", "workgroup storage"],
    );
    check(
        &["--variants", "unfused", "--tile", "rt"],
        2,
        &["--tile", "unfused"],
    );

    // A valid forced tile reaches every N (the default on this adapter would be `rt`).
    let a = sweep(&["--variants", "unfused,tiled", "--tile", "row:16"]);
    let refs: Vec<&str> = a.iter().map(String::as_str).collect();
    let o = run(&refs);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("sweep.json")).unwrap()).unwrap();
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 4);
    for p in points {
        assert_eq!(p["verdict"], "PASS", "{p}");
        if p["variant"] == "tiled" {
            assert_eq!(p["tile"]["choice"], "row:16", "{p}");
            assert_eq!(p["tile"]["source"], "--tile", "{p}");
        } else {
            assert!(p["tile"].is_null(), "{p}");
        }
    }
    let seqs: Vec<u64> = points
        .iter()
        .filter(|p| p["variant"] == "tiled")
        .map(|p| p["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [16, 32]);
    // Self-attention stays self-attention at every N: the materialized scores grow as N x N (M
    // follows N: 4x from N = 16 to 32), and with --kv-seq the keys stay at M (2x).
    let nn = |points: &[serde_json::Value]| -> Vec<u64> {
        points
            .iter()
            .filter(|p| p["variant"] == "unfused")
            .map(|p| p["n_by_n_bytes"].as_u64().unwrap())
            .collect()
    };
    let sq = nn(points);
    assert_eq!(sq.len(), 2);
    assert_eq!(sq[1], 4 * sq[0], "{sq:?}");
    let a = sweep(&["--variants", "unfused", "--kv-seq", "24", "--no-causal"]);
    let refs: Vec<&str> = a.iter().map(String::as_str).collect();
    let o = run(&refs);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("sweep.json")).unwrap()).unwrap();
    let fixed = nn(v["points"].as_array().unwrap());
    assert_eq!(fixed.len(), 2);
    assert_eq!(fixed[1], 2 * fixed[0], "{fixed:?}");
}
