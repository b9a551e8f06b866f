//! Hostile inputs, round 3 (issue 40): each row of the issue's table as a regression test. Bad
//! input is exit 2 naming the value, never a signal, a panic (101) or a hang; an output is never
//! half-written; a user's string is escaped in every output format.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{bin, stderr};

fn tiny() -> Command {
    let mut c = bin();
    c.args(common::tiny_run("tiled"));
    c
}

fn refused(o: &Output, code: i32, needle: &str) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(code), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    assert!(e.contains(needle), "missing `{needle}` in:\n{e}");
}

/// Runs `c`, failing the test if it has not finished within `secs` (a hang).
fn bounded(c: Command, secs: u64) -> Output {
    common::bounded(c, secs).unwrap_or_else(|why| panic!("{why}"))
}

#[test]
fn overrides_out_of_range_are_exit_2_naming_the_range() {
    let o = tiny().args(["--override", "HD=1000000"]).output().unwrap();
    refused(&o, 2, "--head-dim");
    let o = tiny().args(["--override", "PREFETCH=-1"]).output().unwrap();
    refused(&o, 2, "takes 0 or 1");
    // HD must equal D: refused up front, not run into a validation FAIL.
    let o = tiny().args(["--override", "HD=17"]).output().unwrap();
    refused(&o, 2, "it is the head dimension");
}

#[test]
fn a_gpu_timeout_no_clock_holds_is_exit_2() {
    for t in ["1e20", "0.0000001", "inf"] {
        let o = tiny().args(["--gpu-timeout", t]).output().unwrap();
        refused(&o, 2, "--gpu-timeout must be between");
    }
}

#[test]
fn probe_reps_past_the_limit_are_exit_2() {
    let o = bin()
        .args(["probe", "--reps", "4000000000"])
        .output()
        .unwrap();
    refused(&o, 2, "--reps must be between 1 and");
}

#[cfg(unix)]
#[test]
fn a_path_that_is_not_utf8_is_written() {
    use std::os::unix::ffi::OsStrExt;
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join(std::ffi::OsStr::from_bytes(b"\xff.json"));
    let o = tiny().arg("--json").arg(&p).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    assert_eq!(r["runs"][0]["validation"]["verdict"], "PASS");
    // The command is recorded (lossily), the binary by name.
    assert!(r["command"].as_str().unwrap().starts_with("attn-wgpu run"));
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_stdout_is_a_clean_error() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let o = bin()
        .arg("adapters")
        .stdout(Stdio::from(full))
        .output()
        .unwrap();
    refused(&o, 1, "cannot write to standard output");
}

#[cfg(unix)]
#[test]
fn a_fifo_as_an_input_is_refused_not_waited_on() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("q.npy");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only creates a node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let mut cmd = bin();
    cmd.args(["run", "--variant", "tiled", "--q"])
        .arg(&fifo)
        .arg("--k")
        .arg(&fifo)
        .arg("--v")
        .arg(&fifo);
    let o = bounded(cmd, 60);
    refused(&o, 2, "not a regular file (a FIFO)");
    // The readers of result files too.
    let mut cmd = bin();
    cmd.arg("compare").arg(&fifo);
    let o = bounded(cmd, 60);
    refused(&o, 2, "not a regular file");
}

#[test]
fn compare_escapes_a_hostile_adapter_name_in_markdown() {
    let mut v = common::fixture_json("attn_wgpu_small.json");
    v["adapter"]["name"] = "<svg onload=alert(1)>|x\ny".into();
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("r.json");
    std::fs::write(&f, v.to_string()).unwrap();
    let md = d.path().join("c.md");
    let o = bin()
        .arg("compare")
        .arg(&f)
        .arg("--md")
        .arg(&md)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(!text.contains("<svg"), "raw HTML in the Markdown:\n{text}");
    assert!(text.contains("&lt;svg onload=alert(1)&gt;\\|x y"), "{text}");
    // Every table row keeps its column count.
    for l in text.lines().filter(|l| l.starts_with("| ")) {
        assert_eq!(l.matches(" | ").count(), 3, "{l}");
    }
}

#[test]
fn a_report_of_nothing_is_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let mut v = common::fixture_json("attn_wgpu_small.json");
    v["runs"] = serde_json::json!([]);
    let f = d.path().join("empty.json");
    std::fs::write(&f, v.to_string()).unwrap();
    let out = d.path().join("r.html");
    let o = bin()
        .arg("report")
        .arg(&f)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    refused(&o, 2, "nothing to report");
    assert!(!out.exists());
    // A file `compare` refuses (wrong schema) is refused by `report` too.
    std::fs::write(
        &f,
        r#"{"tool": "attn-wgpu", "schema_version": 1, "runs": [{}]}"#,
    )
    .unwrap();
    let o = bin()
        .arg("report")
        .arg(&f)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!out.exists());
}

#[cfg(unix)]
#[test]
fn an_interrupt_during_the_final_write_leaves_no_temp_file() {
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("r.json");
    let mut child = tiny()
        .arg("--json")
        .arg(&json)
        .env("ATTN_WGPU_TEST_PAUSE_WRITE", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let tmp = || {
        std::fs::read_dir(d.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .count()
    };
    let t0 = Instant::now();
    while tmp() == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "no temp file appeared"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before its write"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signalling our own child process.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert_eq!(tmp(), 0, "a temp file was left");
    assert!(!json.exists(), "a partial output was left");
}

/// Found by the `npy` fuzz target: a header of nested brackets kept npyz's header parser busy for
/// minutes. Now refused at once, as not what numpy writes.
#[test]
fn an_npy_header_nested_deeper_than_numpy_writes_is_refused_at_once() {
    let f = common::fixture("nested_header.npy");
    let mut cmd = bin();
    cmd.args(["run", "--variant", "tiled", "--q"])
        .arg(&f)
        .arg("--k")
        .arg(&f)
        .arg("--v")
        .arg(&f);
    let o = bounded(cmd, 30);
    refused(&o, 2, "nested deeper than numpy writes");
}

/// Host memory counts K and V with their own length: a long --kv-seq is refused with the bytes it
/// needs (exit 2), in `run --variant all` and in `sweep`, instead of an allocation that aborts.
#[test]
fn a_long_kv_seq_is_refused_for_host_memory() {
    for args in [
        &["run", "--variant", "all", "--no-causal"][..],
        &["sweep", "--seq", "16", "--no-causal"][..],
    ] {
        let o = bin()
            .args(args)
            .args([
                "--batch", "64", "--heads", "64", "--kv-seq", "1000000", "--reps", "1",
            ])
            .args(if args[0] == "run" {
                &["--seq", "16"][..]
            } else {
                &[][..]
            })
            .output()
            .unwrap();
        refused(&o, 2, "bytes of host memory");
    }
}

/// Outputs are checked before the run, by creating the very name: a name too long for the folder
/// is exit 2 at once (it failed after the whole run, exit 1); a refused run leaves no empty
/// `--save-inputs` folder; the `.failed` file a failing run writes beside an existing output may
/// not be an input.
#[test]
fn outputs_are_checked_before_the_run() {
    let d = tempfile::tempdir().unwrap();
    let long = d.path().join(format!("{}.json", "a".repeat(300)));
    let o = tiny().arg("--json").arg(&long).output().unwrap();
    refused(&o, 2, "File name too long");
    let dir = d.path().join("saved");
    let o = bin()
        .args([
            "run",
            "--variant",
            "tiled-coop",
            "--seq",
            "16",
            "--reps",
            "1",
            "--save-inputs",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(!dir.exists(), "a refused run left {}", dir.display());
    let json = d.path().join("r.json");
    std::fs::write(&json, "{}").unwrap();
    let probe = d.path().join("r.failed.json");
    let o = bin()
        .args(["probe", "--size-mib", "4", "--reps", "1", "--out"])
        .arg(&probe)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let before = std::fs::read(&probe).unwrap();
    let o = tiny()
        .arg("--json")
        .arg(&json)
        .arg("--probe")
        .arg(&probe)
        .output()
        .unwrap();
    refused(&o, 2, "the .failed file of a failing run");
    assert_eq!(std::fs::read(&probe).unwrap(), before);
}

/// Every number of a result file replaced by `["<script>…"]` (non-string JSON where the schema says
/// numbers), every string prefixed with it: the report and compare's Markdown carry none of it as
/// raw HTML.
#[test]
fn non_string_values_from_a_result_file_never_reach_the_page_raw() {
    fn poison(v: &serde_json::Value, strings: bool) -> serde_json::Value {
        use serde_json::Value as V;
        const X: &str = "<script>alert(1)</script>";
        match v {
            V::Object(m) => V::Object(
                m.iter()
                    .map(|(k, x)| (k.clone(), poison(x, strings)))
                    .collect(),
            ),
            V::Array(a) => V::Array(a.iter().map(|x| poison(x, strings)).collect()),
            V::Number(_) => serde_json::json!([X]),
            V::String(s) if strings => V::String(format!("{X}{s}")),
            other => other.clone(),
        }
    }
    let d = tempfile::tempdir().unwrap();
    for strings in [false, true] {
        let mut files = Vec::new();
        for f in ["attn_wgpu_small.json", "torch_sdpa_small.json"] {
            let v = common::fixture_json(f);
            let mut p = poison(&v, strings);
            p["tool"] = v["tool"].clone();
            p["schema_version"] = v["schema_version"].clone();
            let path = d.path().join(format!("{strings}_{f}"));
            std::fs::write(&path, p.to_string()).unwrap();
            files.push(path);
        }
        let page = d.path().join(format!("{strings}.html"));
        let o = bin()
            .arg("report")
            .args(&files)
            .arg("-o")
            .arg(&page)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let html = std::fs::read_to_string(&page).unwrap();
        assert!(
            !html.contains("<script"),
            "raw <script> in the page (strings: {strings})"
        );
        let md = d.path().join(format!("{strings}.md"));
        let o = bin()
            .arg("compare")
            .args(&files)
            .arg("--md")
            .arg(&md)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert!(!std::fs::read_to_string(&md).unwrap().contains("<script"));
    }
}

/// A sweep file with a time near f64::MAX (and bytes at u64::MAX): the plots leave such points
/// out instead of building an infinite log axis (plotters looped on it at 100 % CPU).
#[test]
fn absurd_values_in_a_sweep_file_do_not_hang_the_plots() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("results/lavapipe/sweep/sweep.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
    for p in v["points"].as_array_mut().unwrap() {
        p["gpu_median_us"] = serde_json::json!(1.7e308);
        p["bytes_moved"] = serde_json::json!(u64::MAX);
    }
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("sweep.json");
    std::fs::write(&f, v.to_string()).unwrap();
    let mut cmd = bin();
    cmd.arg("report")
        .arg(&f)
        .arg("-o")
        .arg(d.path().join("r.html"));
    let o = bounded(cmd, 60);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A variant listed twice would run twice: refused, exit 2, naming it.
#[test]
fn a_variant_listed_twice_is_refused() {
    let o = bin()
        .args(["explain", "--variant", "tiled,unfused,tiled", "--seq", "16"])
        .output()
        .unwrap();
    refused(&o, 2, "lists `tiled` twice");
}

/// Issue 40's long-key row: Mesa's llvmpipe (lavapipe here) leaves every loop of an invocation
/// after 65535 iterations without an error, so `unfused` at M = 32769 keys computed a 2.7 % error.
/// Every dispatch bounds its loop iterations (`Dispatch::loop_iters`) and the selector refuses a
/// plan that crosses the adapter's cap. On such an adapter the longest M each plan accepts runs
/// and PASSes, and one key more is exit 4 naming the limit; on any other adapter both PASS.
#[test]
fn a_long_key_row_passes_or_is_refused_at_the_loop_limit() {
    use attn_wgpu::problem::Problem;
    let caps = &common::gpu().caps;
    for (variant, d) in [("unfused", 16u32), ("math", 16), ("tiled", 64)] {
        let accepted = |m: u32| {
            let mut p = Problem::new(1, 1, 8, d, false, 1);
            p.kv_seq = m;
            attn_wgpu::variants::plan(variant, &p, caps).is_ok()
        };
        let m = match caps.max_loop_iterations {
            Some(_) => {
                let (mut lo, mut hi) = (8u32, 1 << 20);
                assert!(
                    accepted(lo) && !accepted(hi),
                    "{variant} D{d}: no limit in range"
                );
                while hi - lo > 1 {
                    let mid = lo + (hi - lo) / 2;
                    *(if accepted(mid) { &mut lo } else { &mut hi }) = mid;
                }
                lo
            }
            None => 33_000,
        };
        let run = |m: u32| {
            let mut c = bin();
            c.args([
                "run",
                "--variant",
                variant,
                "--batch",
                "1",
                "--heads",
                "1",
                "--seq",
                "8",
            ])
            .args([
                "--kv-seq",
                &m.to_string(),
                "--no-causal",
                "--head-dim",
                &d.to_string(),
            ])
            .args(["--warmup", "0", "--reps", "1"]);
            bounded(c, 300)
        };
        let o = run(m);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{variant} D{d} M={m}: {}",
            stderr(&o)
        );
        let o = run(m + 1);
        if caps.max_loop_iterations.is_some() {
            refused(&o, 4, "loop iterations");
            assert!(
                stderr(&o).contains(&format!("M={}", m + 1)),
                "{}",
                stderr(&o)
            );
        } else {
            assert_eq!(
                o.status.code(),
                Some(0),
                "{variant} M={}: {}",
                m + 1,
                stderr(&o)
            );
        }
    }
}

/// The same for `tiled`'s fused backward on its small tiles (D = 128 and 256 on lavapipe's 32 KiB):
/// its dK/dV pass walks the N query rows, so the longest N the training plan accepts at M = 8
/// runs and every gradient PASSes, and one row more is exit 4 naming the pass; on an adapter
/// without the cap both PASS.
#[test]
fn a_long_query_walk_of_the_backward_passes_or_is_refused_at_the_loop_limit() {
    use attn_wgpu::problem::Problem;
    let caps = &common::gpu().caps;
    for d in [128u32, 256] {
        let accepted = |n: u32| {
            let mut p = Problem::new(1, 1, n, d, false, 1);
            p.kv_seq = 8;
            p.backward = true;
            attn_wgpu::variants::plan("tiled", &p, caps).is_ok()
        };
        let n = match caps.max_loop_iterations {
            Some(_) => {
                let (mut lo, mut hi) = (8u32, 1 << 20);
                assert!(accepted(lo) && !accepted(hi), "D{d}: no limit in range");
                while hi - lo > 1 {
                    let mid = lo + (hi - lo) / 2;
                    *(if accepted(mid) { &mut lo } else { &mut hi }) = mid;
                }
                lo
            }
            None => 4000,
        };
        let run = |n: u32| {
            let mut c = bin();
            c.args(["run", "--variant", "tiled", "--backward", "--batch", "1"])
                .args(["--heads", "1", "--seq", &n.to_string(), "--kv-seq", "8"])
                .args(["--no-causal", "--head-dim", &d.to_string()])
                .args(["--warmup", "0", "--reps", "1"]);
            bounded(c, 600)
        };
        let o = run(n);
        assert_eq!(o.status.code(), Some(0), "D{d} N={n}: {}", stderr(&o));
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).matches("PASS").count(),
            4,
            "O and the three gradients: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        let o = run(n + 1);
        if caps.max_loop_iterations.is_some() {
            refused(&o, 4, "bwd_kv");
            assert!(
                stderr(&o).contains(&format!("N={}", n + 1)),
                "{}",
                stderr(&o)
            );
        } else {
            assert_eq!(o.status.code(), Some(0), "D{d} N={}: {}", n + 1, stderr(&o));
        }
    }
}
