//! What stands between a user's typo and a hung or aborted process: the host-memory budget and the
//! adapter's binding limits checked before any work (exit 2 / 4 within a second, no backtrace),
//! bounded repetition counts, device waits with a timeout (exit 1 naming what was in flight), and a
//! quiet stderr on a headless machine.

use std::process::{Command, Output};

mod common;

use common::{bin, stderr};
use std::time::{Duration, Instant};

fn run_timed(cmd: &mut Command) -> (Output, Duration) {
    let t = Instant::now();
    let o = cmd.output().expect("runs");
    (o, t.elapsed())
}

fn no_crash(o: &Output) {
    let e = stderr(o);
    for bad in ["panicked", "backtrace", "memory allocation of"] {
        assert!(!e.contains(bad), "stderr has `{bad}`:\n{e}");
    }
}

#[test]
fn too_big_for_the_host_is_refused_at_once() {
    let (o, t) =
        run_timed(bin().args(["run", "--seq", "64", "--batch", "100000", "--heads", "1000"]));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    no_crash(&o);
    let e = stderr(&o);
    assert!(e.contains("bytes of host memory"), "{e}");
    assert!(t < Duration::from_secs(3), "took {t:?}");

    // B*H = 262144 heads of 64 x 64: 1 GiB per tensor, more than this machine holds for a run, or
    // (on a larger host) too large for the adapter's storage binding: refused either way, at once.
    let (o, t) = run_timed(bin().args([
        "run",
        "--seq",
        "64",
        "--batch",
        "4096",
        "--heads",
        "64",
        "--variant",
        "unfused",
    ]));
    assert!(
        matches!(o.status.code(), Some(2) | Some(4)),
        "{}",
        stderr(&o)
    );
    no_crash(&o);
    assert!(t < Duration::from_secs(3), "took {t:?}");
}

#[test]
fn the_host_limit_can_be_set_and_is_named() {
    let o = bin()
        .args(["run", "--seq", "64"])
        .env("ATTN_WGPU_HOST_MEMORY_LIMIT", "1000")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("ATTN_WGPU_HOST_MEMORY_LIMIT of 1000 bytes"),
        "{e}"
    );
    let o = bin()
        .args(["run", "--seq", "64"])
        .env("ATTN_WGPU_HOST_MEMORY_LIMIT", "lots")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("`lots`"), "{}", stderr(&o));
}

#[test]
fn too_big_for_the_adapter_is_refused_before_the_inputs_exist() {
    // Q/K/V = 512 * 64 * 64 * 64 * 4 bytes = 512 MiB each: the host holds it, no storage binding
    // of the software adapter (128 MiB) does. Generating them would take seconds first.
    let (o, t) = run_timed(bin().args([
        "run",
        "--seq",
        "64",
        "--batch",
        "512",
        "--heads",
        "64",
        "--head-dim",
        "64",
        "--variant",
        "unfused",
    ]));
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    no_crash(&o);
    assert!(
        stderr(&o).contains("max_storage_buffer_binding_size"),
        "{}",
        stderr(&o)
    );
    assert!(t < Duration::from_secs(3), "took {t:?}");
}

#[test]
fn repetition_counts_are_bounded() {
    for flag in ["--reps", "--warmup", "--host-reps"] {
        let o = bin()
            .args(["run", "--seq", "16", flag, "4000000000"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{flag}: {}", stderr(&o));
        no_crash(&o);
        assert!(stderr(&o).contains(flag), "{}", stderr(&o));
    }
}

#[test]
fn a_device_wait_that_takes_too_long_is_an_error_naming_the_work() {
    let o = bin()
        .args([
            "run",
            "--variant",
            "unfused",
            "--seq",
            "128",
            "--heads",
            "4",
            "--reps",
            "1",
            "--host-reps",
            "0",
            "--gpu-timeout",
            "0.001",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    no_crash(&o);
    let e = stderr(&o);
    assert!(e.contains("did not finish within"), "{e}");
    let o = bin()
        .args(["run", "--seq", "16", "--gpu-timeout", "0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--gpu-timeout"), "{}", stderr(&o));
}

#[test]
fn a_headless_machine_gets_no_spurious_errors() {
    let o = bin()
        .arg("adapters")
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(!e.contains("XDG_RUNTIME_DIR"), "{e}");
    assert!(!e.contains("error"), "{e}");
    // Real errors still reach stderr.
    let o = bin()
        .args(["run", "--variant", "flash9"])
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("flash9"), "{}", stderr(&o));
}

/// `--override NAME=VALUE`: malformed, not a knob or out of the knob's range is exit 2 naming
/// what is allowed (HD points to --head-dim, a tile-owned one to --tile); a knob no kernel of the
/// plan declares is exit 4 naming those it does; a valid one is applied, recorded in the results
/// file and still validated.
#[test]
fn overrides_are_checked_and_recorded() {
    let small = [
        "run",
        "--variant",
        "tiled",
        "--batch",
        "1",
        "--heads",
        "1",
        "--seq",
        "16",
        "--head-dim",
        "16",
        "--reps",
        "1",
        "--warmup",
        "0",
    ];
    for (arg, code, says) in [
        ("LO", 2, "expected NAME=VALUE"),
        ("LO=abc", 2, "not a finite number"),
        ("L O=1", 2, "not a constant's name"),
        ("NOPE=1", 2, "`NOPE` cannot be set"),
        ("BC=64", 2, "choose it with --tile"),
        ("HD=1000000", 2, "set it with --head-dim"),
        ("HD=17", 2, "set it with --head-dim"),
        ("PREFETCH=-1", 2, "PREFETCH = -1 is out of range"),
        ("PREFETCH=0.5", 2, "takes 0 or 1"),
        ("TAU=1e9", 2, "takes 0 to 64"),
        ("LO=0", 4, "no kernel of this plan declares `LO`"),
    ] {
        let o = bin()
            .args(small)
            .args(["--override", arg])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(code), "{arg}: {}", stderr(&o));
        no_crash(&o);
        assert!(stderr(&o).contains(says), "{arg}: {}", stderr(&o));
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    // PREFETCH is declared by every register-tiled kernel `tiled` may pick here (rt2 and rt).
    let o = bin()
        .args(small)
        .args(["--override", "PREFETCH=1", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let run = &r["runs"][0];
    assert_eq!(run["validation"]["verdict"], "PASS", "{run}");
    let cfg = run["config"].to_string();
    assert!(cfg.contains("PREFETCH"), "{cfg}");
}
