//! The profiling views on the software adapter, through the CLI as users run them: probe,
//! run --trace (parsed: both lanes, a slice per dispatch), compare on two committed fixtures
//! (expected cells), sweep (SVGs written), explain (the six answers), the unprofiled and pipelined
//! host samples of `run --host-reps`, and their bad input.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attn-wgpu"))
        .args(args)
        .env("XDG_RUNTIME_DIR", "/tmp")
        .output()
        .expect("spawn attn-wgpu")
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(args: &[&str]) -> Output {
    let o = run(args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "args {args:?}\nstdout:\n{}\nstderr:\n{}",
        out(&o),
        err(&o)
    );
    o
}

fn expect_error(args: &[&str], code: i32, needles: &[&str]) {
    let o = run(args);
    let e = err(&o);
    assert_eq!(o.status.code(), Some(code), "args {args:?}\nstderr: {e}");
    for n in needles {
        assert!(e.contains(n), "args {args:?}: stderr lacks `{n}`:\n{e}");
    }
    assert!(!e.contains("panicked"), "args {args:?} panicked:\n{e}");
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

const TINY: &[&str] = &["--seq", "32", "--heads", "1", "--head-dim", "16"];

#[test]
fn trace_has_both_lanes_and_a_slice_per_dispatch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.json");
    let p = path.to_str().unwrap();
    let mut args = vec!["run", "--variant", "all", "--warmup", "1", "--reps", "2"];
    args.extend_from_slice(TINY);
    args.extend_from_slice(&["--trace", p]);
    let json_path = dir.path().join("r.json");
    args.extend_from_slice(&["--json", json_path.to_str().unwrap()]);
    ok(&args);
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let ok_runs: Vec<&Value> = results["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "ok")
        .collect();
    let per_forward: u64 = ok_runs
        .iter()
        .map(|r| r["predicted_dispatches"].as_u64().unwrap())
        .sum();
    let t: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let ev = t["traceEvents"].as_array().expect("traceEvents");
    let names = |pid: u64| -> Vec<String> {
        ev.iter()
            .filter(|e| e["ph"] == "M" && e["pid"] == pid && e["name"] == "process_name")
            .map(|e| e["args"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(names(1)[0].contains("CPU"), "{:?}", names(1));
    assert!(names(2)[0].contains("GPU"), "{:?}", names(2));
    let slices: Vec<&Value> = ev.iter().filter(|e| e["ph"] == "X").collect();
    for e in &slices {
        assert!(e["ts"].as_f64().unwrap() >= 0.0 && e["dur"].as_f64().unwrap() >= 0.0);
    }
    let cpu = |name: &str| {
        slices
            .iter()
            .filter(|e| e["pid"] == 1 && e["name"] == name)
            .count()
    };
    assert_eq!(cpu("device creation"), 1);
    // One cold call per variant that ran (every registered one runs on the test adapter at this
    // shape, unless a variant needs a feature it lacks).
    let ran = cpu("cold call");
    assert_eq!(ran, ok_runs.len());
    assert!(ev.iter().any(|e| e["name"]
        .as_str()
        .is_some_and(|n| n.starts_with("compile qk.wgsl"))));
    // Forwards per variant: 1 cold + 1 warm-up + 2 reps, each with encode/submit/wait.
    assert_eq!(cpu("encode"), 4 * ran);
    assert_eq!(cpu("submit"), 4 * ran);
    assert_eq!(cpu("wait (poll until done)"), 4 * ran);
    let cats = |cat: &str| {
        slices
            .iter()
            .filter(|e| e["pid"] == 2 && e["cat"] == cat)
            .count()
    };
    // Dispatch slices on the GPU lane: every variant's dispatches per forward; 1 cold call,
    // 1 warm-up and 2 reps.
    let per_forward = per_forward as usize;
    assert!(
        per_forward > 6 + 5,
        "6 + 5 + 1: unfused, unfused-inplace and tiled at least"
    );
    assert_eq!(cats("dispatch,cold"), per_forward);
    assert_eq!(cats("dispatch,warmup"), per_forward);
    assert_eq!(cats("dispatch,rep"), 2 * per_forward);
    for v in ["unfused", "unfused-inplace", "tiled"] {
        let fwd = format!("{v}: forward rep #1");
        assert_eq!(
            slices.iter().filter(|e| e["name"] == fwd.as_str()).count(),
            2,
            "{fwd} on both lanes"
        );
    }
    // The GPU slices of a rep lie inside its host submit..wait window (the calibration).
    let host = slices
        .iter()
        .find(|e| e["pid"] == 1 && e["name"] == "tiled: forward rep #0")
        .unwrap();
    let gpu = slices
        .iter()
        .find(|e| e["pid"] == 2 && e["name"] == "tiled: forward rep #0")
        .unwrap();
    let (h0, h1) = (
        host["ts"].as_f64().unwrap(),
        host["ts"].as_f64().unwrap() + host["dur"].as_f64().unwrap(),
    );
    let (g0, g1) = (
        gpu["ts"].as_f64().unwrap(),
        gpu["ts"].as_f64().unwrap() + gpu["dur"].as_f64().unwrap(),
    );
    assert!(
        g0 >= h0 - 1.0 && g1 <= h1 + 1.0,
        "gpu {g0}..{g1} host {h0}..{h1}"
    );
    assert_eq!(t["otherData"]["calibration"].as_array().unwrap().len(), ran);
}

#[test]
fn compare_fixtures_gives_expected_cells() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("cmp.md");
    let a = fixture("attn_wgpu_small.json");
    let b = fixture("torch_sdpa_small.json");
    let o = ok(&[
        "compare",
        &a,
        &b,
        "--baseline",
        "torch:naive-inplace",
        "--md",
        md.to_str().unwrap(),
    ]);
    let text = out(&o);
    assert_eq!(std::fs::read_to_string(&md).unwrap(), text);
    let row = |v: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("| {v} |")))
            .unwrap_or_else(|| panic!("no row {v}:\n{text}"))
            .to_string()
    };
    assert!(
        text.contains("| variant | shape | dtype | Fixture GPU / vulkan | Fixture GPU / cuda |")
    );
    assert_eq!(
        row("unfused"),
        "| unfused | B1 H2 N128 D64 causal | f32 | 200.0 µs (5.00×) |  |"
    );
    assert_eq!(
        row("tiled"),
        "| tiled | B1 H2 N128 D64 causal | f32 | 40.0 µs (1.00×) |  |"
    );
    assert_eq!(
        row("torch:naive"),
        "| torch:naive | B1 H2 N128 D64 causal | f32 |  | 50.0 µs (1.25×) |"
    );
    assert!(row("torch:flash").contains("unsupported: No available kernel"));
    // The second table: dispatches · memory.
    assert!(text.contains("| unfused | B1 H2 N128 D64 causal | f32 | 6 · 512.0 KiB |  |"));
    assert!(
        text.contains("| torch:naive-inplace | B1 H2 N128 D64 causal | f32 |  | 5 · 192.0 KiB |")
    );
}

#[test]
fn compare_bad_files_exit_2_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let corrupt = dir.path().join("corrupt.json");
    std::fs::write(&corrupt, "{\"tool\": \"attn-wgpu\", \"runs\": [").unwrap();
    let foreign = dir.path().join("foreign.json");
    std::fs::write(&foreign, "{\"hello\": 1}").unwrap();
    let good = fixture("attn_wgpu_small.json");
    expect_error(
        &["compare", "/no/such/file.json"],
        2,
        &["/no/such/file.json"],
    );
    expect_error(
        &["compare", &good, corrupt.to_str().unwrap()],
        2,
        &["corrupt.json", "not valid JSON"],
    );
    expect_error(
        &["compare", foreign.to_str().unwrap()],
        2,
        &["foreign.json", "not a result file"],
    );
    expect_error(&["compare"], 2, &["FILES"]);
}

/// `--host-reps K`: K host-only forwards without timestamp queries each waited for, then K more
/// submitted back to back, their samples in the results file next to the profiled host figures,
/// their medians in the report; neither with K = 0. No timed assertion: the
/// host cost is a measurement, not a property of the code.
#[test]
fn run_records_unprofiled_host_samples() {
    let dir = tempfile::tempdir().unwrap();
    for k in [5u64, 0] {
        let json_path = dir.path().join(format!("r{k}.json"));
        let ks = k.to_string();
        let mut args = vec![
            "run",
            "--verbose",
            "--variant",
            "tiled",
            "--warmup",
            "0",
            "--reps",
            "2",
            "--host-reps",
            &ks,
            "--json",
            json_path.to_str().unwrap(),
        ];
        args.extend_from_slice(TINY);
        let o = ok(&args);
        let text = out(&o);
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
        assert_eq!(v["timing"]["host_reps"].as_u64(), Some(k));
        let r = &v["runs"][0];
        assert_eq!(r["status"], "ok", "{r}");
        // Waited for one by one, and back to back: the same count of raw samples each.
        for field in [
            "host_unprofiled_encode_submit_us",
            "host_pipelined_encode_submit_us",
        ] {
            let samples = r["measurement"][field]
                .as_array()
                .unwrap_or_else(|| panic!("{field} array"));
            assert_eq!(samples.len() as u64, k, "{field}: {samples:?}");
            for s in samples {
                // serde_json writes a non-finite f64 as null, which as_f64 refuses.
                let us = s.as_f64().expect("a number");
                assert!(us.is_finite() && us > 0.0, "{field}: {us}");
            }
        }
        let stats = &r["forward"]["host_unprofiled_encode_submit_us"];
        let pipelined = &r["forward"]["host_pipelined_encode_submit_us"];
        // The profiled figures are still there beside them.
        assert!(
            r["forward"]["host_encode_submit_us"]["median"]
                .as_f64()
                .unwrap()
                > 0.0
        );
        if k == 0 {
            assert!(stats.is_null(), "{stats}");
            assert!(pipelined.is_null(), "{pipelined}");
            assert!(
                text.contains("unprofiled median - (--host-reps 0), pipelined median -;"),
                "{text}"
            );
        } else {
            for st in [stats, pipelined] {
                assert_eq!(st["n"].as_u64(), Some(k), "{st}");
                let med = st["median"].as_f64().unwrap();
                assert!(med.is_finite() && med > 0.0, "{st}");
            }
            assert!(
                text.contains(&format!("{k} forwards without timestamp queries")),
                "{text}"
            );
            assert!(
                text.contains(&format!("{k} forwards back to back")),
                "{text}"
            );
        }
    }
}

#[test]
fn probe_then_run_shows_the_roofline() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probe.json");
    let p = path.to_str().unwrap();
    let o = ok(&["probe", "--out", p, "--size-mib", "2", "--reps", "3"]);
    assert!(out(&o).contains("Bandwidth"), "{}", out(&o));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(v["bandwidth"]["best_rate"].as_f64().unwrap() > 0.0);
    assert!(v["fma_f32"]["best_rate"].as_f64().unwrap() > 0.0);
    assert!(v["key"].as_str().unwrap().contains(" | "));
    let mut args = vec![
        "run",
        "--verbose",
        "--variant",
        "unfused",
        "--warmup",
        "0",
        "--reps",
        "2",
        "--probe",
        p,
    ];
    args.extend_from_slice(TINY);
    let o = ok(&args);
    let text = out(&o);
    assert!(text.contains("Roofline"), "{text}");
    assert!(text.contains("% ceil") && text.contains("memory"), "{text}");
    expect_error(
        &["run", "--probe", "/no/such/probe.json"],
        2,
        &["/no/such/probe.json"],
    );
    expect_error(&["probe", "--size-mib", "0"], 2, &["--size-mib"]);
}

#[test]
fn run_json_records_the_roofline() {
    // A hand-written probe of another adapter (10 GB/s, 100 GFLOP/s): used with a warning, and
    // the results file says so.
    let dir = tempfile::tempdir().unwrap();
    let probe = fixture("probe_small.json");
    let json_path = dir.path().join("r.json");
    let mut args = vec![
        "run",
        "--variant",
        "all",
        "--warmup",
        "0",
        "--reps",
        "2",
        "--probe",
        &probe,
        "--json",
        json_path.to_str().unwrap(),
    ];
    args.extend_from_slice(TINY);
    let o = ok(&args);
    assert!(
        err(&o).contains("was measured on `Fixture GPU"),
        "{}",
        err(&o)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let src = &v["roofline"];
    assert_eq!(src["probe_file"], probe.as_str());
    assert_eq!(src["probe_key"], "Fixture GPU | vulkan | fixture driver");
    assert_eq!(src["key_matches"], false);
    assert!(src["adapter_key"].as_str().unwrap().contains(" | "));
    assert_eq!(src["bandwidth_gbps"], 10.0);
    assert_eq!(src["peak_gflops"], 100.0);
    assert_eq!(src["peak_fma"], "f32");
    assert_eq!(src["ridge_flop_per_byte"], 10.0);
    let mut points = 0;
    for r in v["runs"].as_array().unwrap() {
        if r["status"] != "ok" {
            continue;
        }
        // The workgroup memory the tiled kernels report in their config is what their attention
        // dispatch's shader declares (read back from the WGSL by naga at run time).
        let declared = r["config"]
            .as_array()
            .unwrap()
            .iter()
            .find(|kv| kv[0] == "workgroup_storage_bytes")
            .and_then(|kv| kv[1].as_f64());
        for d in r["dispatches"].as_array().unwrap() {
            let what = format!("{} / {}", r["variant"], d["name"]);
            let wg = d["workgroup_storage_bytes"]
                .as_u64()
                .unwrap_or_else(|| panic!("{what}: no workgroup_storage_bytes: {d}"));
            if let (Some(x), "attention") = (declared, d["name"].as_str().unwrap()) {
                assert_eq!(wg as f64, x, "{what}");
            }
            let pt = &d["roofline"];
            let bytes = d["reads_bytes"].as_u64().unwrap() + d["writes_bytes"].as_u64().unwrap();
            let flops = d["flops"].as_u64().unwrap();
            if bytes == 0 && flops == 0 {
                assert!(pt.is_null(), "{what}: nothing estimated, no point: {pt}");
                continue;
            }
            points += 1;
            for k in ["ceiling", "achieved", "percent"] {
                let x = pt[k]
                    .as_f64()
                    .unwrap_or_else(|| panic!("{what}: no {k}: {pt}"));
                assert!(x.is_finite() && x > 0.0, "{what}: {k} = {x}");
            }
            let i = pt["intensity"].as_f64().expect("bytes > 0: an intensity");
            assert!(i.is_finite() && i >= 0.0, "{what}: intensity {i}");
            assert!((i - flops as f64 / bytes as f64).abs() < 1e-9, "{what}");
            let achieved = pt["achieved"].as_f64().unwrap();
            let ceiling = pt["ceiling"].as_f64().unwrap();
            let percent = pt["percent"].as_f64().unwrap();
            assert!(
                (percent - 100.0 * achieved / ceiling).abs() < 1e-6,
                "{what}"
            );
            if flops == 0 {
                assert_eq!(pt["unit"], "GB/s", "{what}");
                assert_eq!(pt["bound"], "memory", "{what}");
                assert_eq!(ceiling, 10.0, "{what}");
            } else {
                assert_eq!(pt["unit"], "GFLOP/s", "{what}");
                let expect = (10.0 * i).min(100.0);
                assert!(
                    (ceiling - expect).abs() < 1e-9,
                    "{what}: {ceiling} vs {expect}"
                );
                let bound = if 10.0 * i < 100.0 {
                    "memory"
                } else {
                    "compute"
                };
                assert_eq!(pt["bound"], bound, "{what}");
            }
        }
    }
    assert!(
        points >= 12,
        "6 + 5 + 1: unfused, unfused-inplace and tiled at least"
    );
    // compare still reads the file.
    ok(&["compare", json_path.to_str().unwrap()]);

    // Without a probe (an empty cache folder, no --probe): `roofline` and every point are null.
    let cache = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain.json");
    let mut args = vec![
        "run",
        "--variant",
        "tiled",
        "--warmup",
        "0",
        "--reps",
        "1",
        "--json",
        plain.to_str().unwrap(),
    ];
    args.extend_from_slice(TINY);
    let o = Command::new(env!("CARGO_BIN_EXE_attn-wgpu"))
        .args(&args)
        .env("XDG_RUNTIME_DIR", "/tmp")
        .env("XDG_CACHE_HOME", cache.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&plain).unwrap()).unwrap();
    assert!(v["roofline"].is_null());
    assert!(v["runs"][0]["dispatches"][0]["roofline"].is_null());
}

#[test]
fn probe_default_path_is_found_by_run() {
    let cache = tempfile::tempdir().unwrap();
    let with_cache = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_attn-wgpu"))
            .args(args)
            .env("XDG_RUNTIME_DIR", "/tmp")
            .env("XDG_CACHE_HOME", cache.path())
            .output()
            .unwrap()
    };
    let o = with_cache(&["probe", "--size-mib", "1", "--reps", "2"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let dir = cache.path().join("attn-wgpu");
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(files.len(), 1, "one probe file in {}", dir.display());
    let mut args = vec![
        "run",
        "--verbose",
        "--variant",
        "tiled",
        "--warmup",
        "0",
        "--reps",
        "1",
    ];
    args.extend_from_slice(TINY);
    let o = with_cache(&args);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(out(&o).contains("Roofline (tiled)"), "{}", out(&o));
}

#[test]
fn sweep_writes_csv_json_and_svgs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("sweep");
    let o = ok(&[
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
        "2",
        "--out-dir",
        d.to_str().unwrap(),
    ]);
    for f in [
        "sweep.csv",
        "sweep.json",
        "gpu_time_vs_n.svg",
        "memory_vs_n.svg",
        "bytes_vs_n.svg",
    ] {
        let p = d.join(f);
        assert!(p.is_file(), "{f} missing");
        if f.ends_with(".svg") {
            let s = std::fs::read_to_string(&p).unwrap();
            assert!(s.contains("<svg") && s.contains("tiled"), "{f}");
        }
    }
    let csv = std::fs::read_to_string(d.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 * 3, "{csv}");
    assert!(out(&o).contains("crossover"));
    // compare reads sweep.json too: one row per (variant, N), N in numeric order.
    let o = ok(&[
        "compare",
        d.join("sweep.json").to_str().unwrap(),
        "--baseline",
        "unfused",
    ]);
    let t = out(&o);
    let n16 = t.find("| tiled | B1 H1 N16 D16 causal | f32 |").expect(&t);
    let n32 = t.find("| tiled | B1 H1 N32 D16 causal | f32 |").expect(&t);
    assert!(n16 < n32, "{t}");
    expect_error(&["sweep", "--seq", ""], 2, &["--seq"]);
    expect_error(&["sweep", "--seq", ","], 2, &["--seq"]);
    expect_error(&["sweep", "--seq", "64,abc"], 2, &["abc"]);
    expect_error(
        &["sweep", "--seq", "64", "--variants", "flash9"],
        2,
        &["flash9"],
    );
}

#[test]
fn explain_answers_the_six_questions() {
    let mut args = vec!["explain", "--warmup", "1", "--reps", "2"];
    args.extend_from_slice(TINY);
    let o = ok(&args);
    let t = out(&o);
    for needle in [
        "predicted (plan) | observed (timestamps",
        "1. Which region was measured?",
        "2. Was it warmed up",
        "3. Which dispatch dominates GPU time?",
        "4. Which host phase dominates host time?",
        "5. Do copies or gaps appear?",
        "6. What work sits on the CPU?",
        "Fusion vs materialization",
        "unfused vs unfused-inplace: mask applied out of place: +1 dispatch (copy)",
        "= 1×B·H·N×N×4",
    ] {
        assert!(t.contains(needle), "explain lacks `{needle}`:\n{t}");
    }
    expect_error(&["explain", "--variant", "nope"], 2, &["nope"]);
}

/// The warm-up's time floor: `--warmup-ms` runs unrecorded forwards past `--warmup` until the time
/// has passed, and the result file says how many and how long; a CPU adapter's default is no floor;
/// a floor outside 0..=600000 ms is exit 2 naming the flag.
#[test]
fn warmup_time_floor_runs_until_the_time_has_passed_and_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let floor = |extra: &[&str]| -> Value {
        let json = dir.path().join("w.json");
        let mut args = vec![
            "run",
            "--variant",
            "tiled",
            "--seq",
            "16",
            "--heads",
            "1",
            "--reps",
            "2",
            "--host-reps",
            "0",
            "--json",
            json.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        ok(&args);
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let m = &v["runs"][0]["measurement"];
        assert_eq!(
            m["warmup"].as_array().unwrap().len(),
            3,
            "the --warmup forwards are kept"
        );
        m["warmup_floor"].clone()
    };
    let w = floor(&["--warmup-ms", "150"]);
    assert_eq!(w["floor_ms"].as_f64(), Some(150.0));
    assert!(w["elapsed_ms"].as_f64().unwrap() >= 150.0, "{w}");
    assert!(w["extra_forwards"].as_u64().unwrap() >= 1, "{w}");
    // The software adapter is a CPU adapter: no floor unless asked for.
    let w = floor(&[]);
    assert_eq!(w["floor_ms"].as_f64(), Some(0.0));
    assert_eq!(w["extra_forwards"].as_u64(), Some(0));
    for bad in ["-1", "600001", "NaN"] {
        expect_error(
            &["run", "--seq", "16", "--warmup-ms", bad],
            2,
            &["--warmup-ms"],
        );
    }
}
