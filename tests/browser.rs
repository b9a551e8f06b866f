//! The browser edition for real (issue 39): `attn-wgpu browser --headless` launches Debian's
//! Chromium (WebGPU on SwiftShader here, Dawn + Tint), which runs the very plans and WGSL the native
//! runner runs; the tool validates what comes back. Every variant a browser can run must PASS with
//! its dispatch count and GPU timestamps, forward and training, across head sizes, dtypes, masks,
//! GQA and N != M; a missing browser or a page that never comes is a clear error, not a hang.
//! No Chromium is a failure, not a skip: .ci/run installs it.

use std::path::Path;

mod common;

use common::{bin, stderr};

/// `browser --headless ARGS --json F` (one recorded forward, no warm-up), within `secs`.
fn browse(args: &[&str], secs: u64) -> (std::process::Output, serde_json::Value) {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("b.json");
    let mut c = bin();
    c.args([
        "browser",
        "--headless",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--warmup-ms",
        "0",
    ])
    .args(["--timeout", "240", "--json"])
    .arg(&f)
    .args(args);
    let o = common::bounded(c, secs).unwrap_or_else(|why| panic!("{why}"));
    let j = if Path::new(&f).exists() {
        serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap()
    } else {
        serde_json::Value::Null
    };
    (o, j)
}

/// The run of `variant` in a result file.
fn run<'a>(j: &'a serde_json::Value, variant: &str) -> &'a serde_json::Value {
    j["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["variant"] == variant)
        .unwrap_or_else(|| panic!("no run of {variant}"))
}

/// Every run that ran passed, with as many timed dispatches as its plan declares.
fn assert_ran_and_passed(j: &serde_json::Value, must: &[(&str, u64)]) {
    assert_eq!(j["backend"], "browser");
    assert!(
        j["adapter"]["driver"].as_str().unwrap().contains("Chrome"),
        "the user agent is recorded: {}",
        j["adapter"]["driver"]
    );
    for (variant, dispatches) in must {
        let r = run(j, variant);
        assert_eq!(r["status"], "ok", "{variant}: {}", r["reason"]);
        assert_eq!(r["predicted_dispatches"], *dispatches, "{variant}");
        assert_eq!(
            r["observed_dispatches"], *dispatches,
            "{variant}: timestamps"
        );
        let times = r["measurement"]["reps"][0]["dispatch_gpu_us"]
            .as_array()
            .unwrap();
        assert!(
            times.iter().all(|t| t.as_f64().is_some_and(|t| t >= 0.0)),
            "{variant}: {times:?}"
        );
    }
    for r in j["runs"].as_array().unwrap() {
        if r["status"] == "ok" {
            assert_eq!(r["validation"]["verdict"], "PASS", "{}", r["variant"]);
        } else {
            assert!(
                !r["reason"].as_str().unwrap().is_empty(),
                "{}",
                r["variant"]
            );
        }
    }
    let warnings = j["warnings"].to_string();
    assert!(
        !warnings.contains("quantized"),
        "developer features are on: {warnings}"
    );
}

#[test]
fn the_lesson_runs_in_a_browser_with_its_dispatch_counts() {
    let shape = ["--heads", "2", "--seq", "16", "--head-dim", "16"];
    let (o, j) = browse(&[&["--variant", "all"][..], &shape].concat(), 300);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The plan as data (--save-jobs): the job the page ran, and its inputs as raw bytes.
    let jobs = tempfile::tempdir().unwrap();
    let dir = jobs.path().to_str().unwrap();
    let (o, _) = browse(
        &[&["--variant", "unfused", "--save-jobs", dir][..], &shape].concat(),
        300,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let job = std::fs::read_to_string(jobs.path().join("unfused.json")).unwrap();
    let job: serde_json::Value = serde_json::from_str(&job).unwrap();
    assert_eq!(job["format"], 1);
    assert_eq!(job["dispatches"].as_array().unwrap().len(), 6);
    let q = std::fs::metadata(jobs.path().join("unfused.Q.bin"))
        .unwrap()
        .len();
    assert_eq!(q, 2 * 16 * 16 * 4, "Q is B*H*N*D f32");
    // Six kernels unfused (the out-of-place masked_fill's copy), five in place, the math path's
    // eleven, one fused.
    assert_ran_and_passed(
        &j,
        &[
            ("unfused", 6),
            ("unfused-inplace", 5),
            ("math", 11),
            ("tiled", 1),
        ],
    );
    // What a browser cannot run is listed with the reason (no cooperative matrices in WebGPU).
    assert_eq!(run(&j, "tiled-coop-vk")["status"], "unsupported");
}

#[test]
fn training_gqa_masks_and_dropout_pass_in_a_browser() {
    for args in [
        // The training step, bf16 (SwiftShader has no shader-f16), GQA, N != M bottom-right.
        &[
            "--backward",
            "--dtype",
            "bf16",
            "--heads",
            "4",
            "--kv-heads",
            "2",
            "--seq",
            "8",
            "--kv-seq",
            "24",
            "--causal",
            "bottom-right",
        ][..],
        // Dropout in training mode, fully masked rows by key padding, f32.
        &[
            "--backward",
            "--dropout",
            "0.3",
            "--key-padding",
            "5",
            "--no-causal",
            "--seq",
            "12",
        ],
    ] {
        let mut all = vec!["--variant", "unfused,unfused-inplace,math,tiled"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--head-dim", "16"]);
        let (o, j) = browse(&all, 300);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        assert_ran_and_passed(&j, &[]);
        for v in ["unfused", "math", "tiled"] {
            assert_eq!(run(&j, v)["status"], "ok", "{args:?} {v}");
        }
    }
}

/// The head sizes of real models: `tiled`'s kernels for D 64..256 compile in Tint and PASS.
#[test]
fn tiled_passes_at_wide_heads_in_a_browser() {
    for d in ["80", "128", "256"] {
        let (o, j) = browse(
            &[
                "--variant",
                "tiled,unfused-inplace",
                "--seq",
                "8",
                "--heads",
                "1",
                "--head-dim",
                d,
            ],
            300,
        );
        assert_eq!(o.status.code(), Some(0), "D{d}: {}", stderr(&o));
        assert_ran_and_passed(&j, &[("tiled", 1), ("unfused-inplace", 5)]);
    }
}

#[test]
fn no_browser_or_no_page_is_a_clear_error_not_a_hang() {
    let o = bin()
        .args([
            "browser",
            "--headless",
            "--browser",
            "/nonexistent/chromium",
            "--seq",
            "8",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot start /nonexistent/chromium"),
        "{}",
        stderr(&o)
    );
    // Nobody opens the URL: the wait ends at --timeout, naming it.
    let mut c = bin();
    c.args(["browser", "--no-open", "--timeout", "1", "--seq", "8"]);
    let o = common::bounded(c, 30).unwrap_or_else(|why| panic!("{why}"));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("did not finish within --timeout 1 s"),
        "{}",
        stderr(&o)
    );
    let o = bin()
        .args(["browser", "--no-open", "--timeout", "0", "--seq", "8"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// The shader test: every kernel the variants use, in the override combinations of these shapes,
/// creates its module and pipeline in Chromium's Tint with no message at all (warnings included).
/// The plans are made as if subgroups had 32 lanes, so `tiled`'s rt2/rt3 and split-KV compile on
/// SwiftShader's 4-lane subgroups too. Not covered here: f16 (SwiftShader has no shader-f16) and
/// the cooperative-matrix kernels (WebGPU has none).
#[test]
fn every_kernel_compiles_in_tint_without_a_message() {
    // Each dtype prelude, forward and training (the L-writing forward and both backward passes),
    // and every `tiled` kernel family by head size: rt2 (D <= 64), rt3 with prefetch (D 80, 128)
    // and without (D 256). About 10 s each on SwiftShader, so a covering grid, not every product.
    let mut shapes: Vec<Vec<&str>> = vec![
        vec!["--dtype", "f32", "--head-dim", "16"],
        vec!["--dtype", "f32", "--head-dim", "64", "--backward"],
        vec!["--dtype", "f32", "--head-dim", "128"],
        vec!["--dtype", "f32", "--head-dim", "256", "--backward"],
        vec!["--dtype", "bf16", "--head-dim", "64"],
        vec!["--dtype", "bf16", "--head-dim", "80", "--backward"],
        vec!["--dtype", "bf16", "--head-dim", "256"],
    ];
    for a in shapes.iter_mut() {
        a.extend(["--seq", "32"]);
    }
    // Decode with GQA (split-KV's both kernels), N != M with padding, dropout.
    shapes.push(vec![
        "--seq",
        "1",
        "--kv-seq",
        "256",
        "--heads",
        "8",
        "--kv-heads",
        "2",
        "--head-dim",
        "128",
        "--no-causal",
    ]);
    shapes.push(vec![
        "--seq",
        "24",
        "--kv-seq",
        "40",
        "--causal",
        "bottom-right",
        "--key-padding",
        "7",
        "--dropout",
        "0.2",
        "--backward",
    ]);
    let mut pipelines = 0;
    for a in &shapes {
        let mut c = bin();
        c.args([
            "browser",
            "--headless",
            "--compile-only",
            "--variant",
            "all",
            "--timeout",
            "120",
        ])
        .args(a);
        let o = common::bounded(c, 180).unwrap_or_else(|why| panic!("{why}"));
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert_eq!(o.status.code(), Some(0), "{a:?}: {}\n{out}", stderr(&o));
        let n: u32 = out
            .lines()
            .find_map(|l| l.strip_suffix(" pipelines compiled, no message"))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("{a:?}: no count in\n{out}"));
        pipelines += n;
    }
    assert!(pipelines > 150, "{pipelines} pipelines");
}
