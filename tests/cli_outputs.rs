//! No output is lost, half-written or written over an input (issue 15): outputs that name an
//! input or each other are refused before any work (exit 2), links are written through, device
//! nodes, FIFOs and unwritable folders are refused at once, a failed run never replaces an earlier
//! results file, modes follow the umask or the replaced file, and a sweep in which nothing runs is
//! exit 4 with no files. Real files, links and FIFOs in a temp folder.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;

use common::{bin, stderr};

const SMALL: &[&str] = &[
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
    "--host-reps",
    "0",
];

fn run(dir: &Path, extra: &[&str]) -> Output {
    bin()
        .current_dir(dir)
        .args(SMALL)
        .args(extra)
        .output()
        .unwrap()
}

fn refused(o: &Output, code: i32, needles: &[&str]) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(code), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    for n in needles {
        assert!(e.contains(n), "missing `{n}` in:\n{e}");
    }
}

/// q.npy, k.npy, v.npy of the small shape in `dir` (by --save-inputs, which creates the folder).
fn inputs(dir: &Path) -> PathBuf {
    let d = dir.join("in");
    let o = run(dir, &["--save-inputs", d.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    d
}

#[test]
fn outputs_never_replace_inputs_or_each_other() {
    let t = tempfile::tempdir().unwrap();
    let d = inputs(t.path());
    let q = d.join("q.npy");
    let before = std::fs::read(&q).unwrap();
    let files = |out: &str| -> Vec<String> {
        let s = |f: &str| d.join(f).to_str().unwrap().to_string();
        vec![
            "--q".into(),
            s("q.npy"),
            "--k".into(),
            s("k.npy"),
            "--v".into(),
            s("v.npy"),
            "--out".into(),
            out.to_string(),
        ]
    };
    // --out naming an input, spelled the same and spelled differently (./ and a symlink).
    let link = t.path().join("q-link.npy");
    std::os::unix::fs::symlink(&q, &link).unwrap();
    for out in [
        q.to_str().unwrap().to_string(),
        format!("{}/./q.npy", d.display()),
        link.to_str().unwrap().to_string(),
    ] {
        let args = files(&out);
        let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let o = bin()
            .current_dir(t.path())
            .args(["run", "--reps", "1", "--warmup", "0"])
            .args(&args)
            .output()
            .unwrap();
        refused(&o, 2, &["--q", "--out", "same file"]);
        assert_eq!(
            std::fs::read(&q).unwrap(),
            before,
            "q.npy untouched ({out})"
        );
    }
    // --save-inputs into the folder the inputs come from.
    let args = files(t.path().join("o.npy").to_str().unwrap());
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let o = bin()
        .current_dir(t.path())
        .args(["run", "--reps", "1", "--warmup", "0"])
        .args(&args)
        .args(["--save-inputs", d.to_str().unwrap()])
        .output()
        .unwrap();
    refused(&o, 2, &["--save-inputs", "same file"]);
    // Two outputs on one file.
    let o = run(t.path(), &["--json", "same.json", "--trace", "same.json"]);
    refused(&o, 2, &["--json", "--trace", "same file"]);
    assert!(!t.path().join("same.json").exists());
    // compare: --md onto a result file.
    let o = run(t.path(), &["--json", "r.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = std::fs::read(t.path().join("r.json")).unwrap();
    let o = bin()
        .current_dir(t.path())
        .args(["compare", "r.json", "--md", "./r.json"])
        .output()
        .unwrap();
    refused(&o, 2, &["--md", "same file"]);
    assert_eq!(std::fs::read(t.path().join("r.json")).unwrap(), r);
}

#[test]
fn links_are_written_through_and_special_files_refused() {
    let t = tempfile::tempdir().unwrap();
    // A symlink: its target gets the results, the link stays a link.
    std::fs::write(t.path().join("real.json"), b"old").unwrap();
    std::os::unix::fs::symlink("real.json", t.path().join("link.json")).unwrap();
    let o = run(t.path(), &["--json", "link.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let m = std::fs::symlink_metadata(t.path().join("link.json")).unwrap();
    assert!(
        m.file_type().is_symlink(),
        "the link was replaced by a file"
    );
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(t.path().join("real.json")).unwrap()).unwrap();
    assert_eq!(r["runs"][0]["variant"], "tiled");
    // A device node, a FIFO, a folder: refused before any work, left as they are.
    let fifo = t.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    for (path, what) in [
        ("/dev/full".to_string(), "a device node"),
        (fifo.to_str().unwrap().to_string(), "a FIFO"),
        (t.path().to_str().unwrap().to_string(), "a folder"),
    ] {
        let o = run(t.path(), &["--json", &path]);
        refused(&o, 2, &["--json", what]);
    }
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata("/dev/full")
        .unwrap()
        .file_type()
        .is_char_device());
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    // A folder that takes no file (/proc refuses even root): exit 2 at once, not after the run.
    let o = run(t.path(), &["--out", "/proc/attn-wgpu-o.npy"]);
    refused(&o, 2, &["--out", "cannot write in folder /proc"]);
    let o = bin()
        .args(["sweep", "--seq", "16", "--out-dir", "/proc"])
        .output()
        .unwrap();
    refused(&o, 2, &["--out-dir", "cannot write"]);
}

#[test]
fn a_failed_run_keeps_the_earlier_file_and_modes_are_kept() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    let mode = |p: &str| {
        std::fs::metadata(t.path().join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    // New files get 0666 & !umask, as any file the user creates.
    let o = Command::new("sh")
        .current_dir(t.path())
        .arg("-c")
        .arg(format!(
            "umask 027; exec '{}' {} --json r.json",
            env!("CARGO_BIN_EXE_attn-wgpu"),
            SMALL.join(" ")
        ))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(mode("r.json"), 0o640);
    // A replaced file keeps its mode.
    std::fs::set_permissions(
        t.path().join("r.json"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let o = run(t.path(), &["--json", "r.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(mode("r.json"), 0o644);
    let good = std::fs::read(t.path().join("r.json")).unwrap();
    // A kernel made wrong on purpose (the v2 kernel told D = 8 while D = 16, through the tests'
    // fault hook): validation fails, exit 3, and the earlier results stay; the failing ones go
    // beside them.
    let o = bin()
        .current_dir(t.path())
        .env("ATTN_WGPU_FAULT", "HD=8")
        .args(SMALL)
        .args(["--tile", "rt2", "--json", "r.json"])
        .output()
        .unwrap();
    refused(&o, 3, &["validation FAILED", "r.failed.json"]);
    assert_eq!(std::fs::read(t.path().join("r.json")).unwrap(), good);
    let f: serde_json::Value =
        serde_json::from_slice(&std::fs::read(t.path().join("r.failed.json")).unwrap()).unwrap();
    assert_eq!(f["runs"][0]["validation"]["verdict"], "FAIL");
}

#[test]
fn a_sweep_where_nothing_runs_is_exit_4_and_writes_nothing() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("sw");
    // Cooperative matrices are absent on the software adapters (the test adapters).
    let o = bin()
        .args([
            "sweep",
            "--seq",
            "16",
            "--variants",
            "tiled-coop",
            "--out-dir",
        ])
        .arg(&out)
        .output()
        .unwrap();
    refused(&o, 4, &["tiled-coop", "no point of the sweep ran"]);
    assert!(!out.join("sweep.csv").exists() && !out.join("sweep.json").exists());
}

#[test]
fn a_gpu_error_in_one_variant_of_all_is_its_row_and_the_others_run() {
    // A driver refusing one variant's kernel (injected through the tests' hook on the runner)
    // must not cost the other variants' measurements: `--variant all` records it as that
    // variant's `error` row, runs the rest, writes the results and exits 1 naming it.
    let t = tempfile::tempdir().unwrap();
    let mut args: Vec<&str> = SMALL.to_vec();
    args[2] = "all";
    let o = bin()
        .current_dir(t.path())
        .env("ATTN_WGPU_FAULT_GPU", "unfused")
        .args(&args)
        .args(["--json", "r.json"])
        .output()
        .unwrap();
    refused(
        &o,
        1,
        &[
            "variant `unfused` failed on the GPU",
            "failed on the GPU (the other variants ran): unfused",
        ],
    );
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        out.contains("unfused             error — GPU error during the pipelines"),
        "{out}"
    );
    let f: serde_json::Value =
        serde_json::from_slice(&std::fs::read(t.path().join("r.json")).unwrap()).unwrap();
    let runs = f["runs"].as_array().unwrap();
    let status = |v: &str| runs.iter().find(|r| r["variant"] == v).unwrap()["status"].clone();
    assert_eq!(status("unfused"), "error");
    assert_eq!(status("unfused-inplace"), "ok");
    assert_eq!(status("tiled"), "ok");
    assert!(runs
        .iter()
        .filter(|r| r["status"] == "ok")
        .all(|r| r["validation"]["verdict"] == "PASS"));
    // Named alone, the variant's error is the run's: exit 1, nothing written.
    let o = bin()
        .current_dir(t.path())
        .env("ATTN_WGPU_FAULT_GPU", "tiled")
        .args(SMALL)
        .args(["--json", "s.json"])
        .output()
        .unwrap();
    refused(&o, 1, &["fault injected by ATTN_WGPU_FAULT_GPU"]);
    assert!(!t.path().join("s.json").exists());
}
