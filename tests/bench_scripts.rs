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

/// bench/ab.sh, the A/B of one device call (a wrong argument there costs device time): two
/// contenders, one a gzipped binary with a knob added to its runs, run case by case in order, one
/// line a run naming the case and the contender with the variant's row (or the error: a failing
/// case is a line, not an abort); the first line names the adapter. Run from a folder without
/// `.gl`, so the script leaves this machine's libraries alone. Bad arguments are exit 2 naming
/// them.
#[test]
fn the_ab_script_interleaves_contenders_one_line_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let bench = concat!(env!("CARGO_MANIFEST_DIR"), "/bench");
    std::os::unix::fs::symlink(bench, dir.path().join("bench")).unwrap();
    let bin = env!("CARGO_BIN_EXE_attn-wgpu");
    let gz = dir.path().join("a.gz");
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("gzip -9nc '{bin}' > '{}'", gz.display()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ab = |args: &[String]| {
        std::process::Command::new("bash")
            .arg("bench/ab.sh")
            .args(args)
            .current_dir(dir.path())
            .env("XDG_RUNTIME_DIR", std::env::temp_dir())
            .output()
            .unwrap()
    };
    let case = "--variant tiled --batch 1 --heads 2 --seq 40 --head-dim 32 --reps 2";
    let o = ab(&[
        "out.txt".into(),
        format!("plain={bin}"),
        format!("tau8={} --override TAU=8", gz.display()),
        "--".into(),
        case.into(),
        "--variant nope".into(),
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let out = std::fs::read_to_string(dir.path().join("out.txt")).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert!(!lines[0].trim().is_empty(), "{out}");
    for (line, (c, name)) in lines[1..].iter().zip([
        (case, "plain"),
        (case, "tau8"),
        ("--variant nope", "plain"),
        ("--variant nope", "tau8"),
    ]) {
        let f: Vec<&str> = line.split(" | ").collect();
        assert_eq!((f[0], f[1]), (c, name), "{out}");
        if c == case {
            assert!(
                f[2].starts_with("tiled ") && f[2].ends_with("PASS"),
                "{out}"
            );
        } else {
            assert!(f[2].starts_with("error: unknown variant `nope`"), "{out}");
        }
    }
    // Bad arguments: no contender or case, a contender that is not NAME=BINARY, a missing binary.
    for (args, want) in [
        (vec!["x.txt"], "usage"),
        (
            vec!["x.txt", "oops", "--", case],
            "'oops' is not NAME=BINARY",
        ),
        (
            vec!["x.txt", "a=/no/such/attn", "--", case],
            "is not an executable file",
        ),
    ] {
        let o = ab(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        common::assert_exit(&o, 2, &[want]);
        assert!(!dir.path().join("x.txt").exists());
    }
    // OUT is appended to, so it may not be a contender's binary: refused, the binary untouched.
    let before = std::fs::read(&gz).unwrap();
    let o = ab(&[
        gz.display().to_string(),
        format!("a={}", gz.display()),
        "--".into(),
        case.into(),
    ]);
    common::assert_exit(&o, 2, &["is a's binary"]);
    assert_eq!(std::fs::read(&gz).unwrap(), before);
}
