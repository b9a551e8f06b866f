//! A new user's first hour (issue 15): the wrong exits and unclear messages a hostile tester
//! found, each checked on the software adapter.

use std::process::{Output, Stdio};

mod common;

use common::bin;

fn out(args: &[&str]) -> Output {
    bin().args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn expect(args: &[&str], code: i32, needles: &[&str]) -> Output {
    let o = out(args);
    let e = text(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{args:?}: {e}");
    assert!(!e.contains("panicked"), "{e}");
    for n in needles {
        assert!(e.contains(n), "{args:?}: missing `{n}` in:\n{e}");
    }
    o
}

#[test]
fn adapter_selection_is_honoured_and_explained() {
    // A name that matches nothing: exit 1, on stderr, naming what exists.
    let o = expect(
        &["adapters", "--adapter", "zzz"],
        1,
        &["none has a name containing `zzz`", "adapters seen:"],
    );
    assert!(text(&o.stdout).is_empty(), "nothing listed");
    // A backend this platform cannot have: the platform is named, no driver-install advice.
    let o = expect(
        &["adapters", "--adapter", "llvmpipe", "--backend", "metal"],
        1,
        &["backend metal", "Metal exists only on Apple platforms"],
    );
    assert!(!text(&o.stderr).contains("apt-get"), "{}", text(&o.stderr));
    // A matching name lists only the matches.
    let o = expect(
        &["adapters", "--adapter", "llvmpipe", "--backend", "vulkan"],
        0,
        &[],
    );
    let s = text(&o.stdout);
    assert!(s.contains("llvmpipe") && !s.contains("[1]"), "{s}");
    // A closed pipe ends the listing quietly (no panic in println!).
    let mut child = bin()
        .arg("adapters")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert!(!text(&o.stderr).contains("panicked"), "{}", text(&o.stderr));
}

#[test]
fn explain_refuses_what_run_refuses_and_states_the_verdicts() {
    expect(
        &["explain", "--variant", "tiled-coop", "--seq", "16"],
        4,
        &["tiled-coop", "no variant can run here"],
    );
    expect(
        &[
            "explain",
            "--variant",
            "unfused",
            "--tile",
            "rt",
            "--seq",
            "16",
        ],
        2,
        &["--tile", "unfused"],
    );
    let o = expect(
        &["explain", "--variant", "unfused,tiled", "--seq", "16"],
        0,
        &[],
    );
    let s = text(&o.stdout);
    assert!(s.contains("== Validation against the f64 reference"), "{s}");
    assert!(s.contains("tiled            PASS"), "{s}");
    assert!(s.contains("1 cold call, 2 warm-ups"), "{s}");
}

#[test]
fn numbers_are_parsed_with_clear_messages() {
    // Negative numbers reach the value check instead of "unexpected argument '-5'".
    expect(&["run", "--seq", "-5"], 2, &["'-5'", "--seq"]);
    expect(&["run", "--batch", "-1"], 2, &["'-1'", "--batch"]);
    expect(&["sweep", "--seq", "-5,3"], 2, &["-5"]);
    expect(&["run", "--scale", "-inf"], 2, &["--scale", "finite"]);
    expect(
        &["run", "--key-padding", "99999999999"],
        2,
        &["99999999999", "too large"],
    );
    let o = expect(
        &["probe", "--size-mib", "1000000", "--reps", "1"],
        0,
        &["--size-mib 1000000", "copying"],
    );
    assert!(text(&o.stdout).contains("Bandwidth"));
    // Singular where there is one.
    let o = expect(
        &[
            "run",
            "--variant",
            "tiled",
            "--seq",
            "16",
            "--heads",
            "1",
            "--reps",
            "1",
            "--verbose",
        ],
        0,
        &[],
    );
    let s = text(&o.stdout);
    assert!(s.contains("plan: 1 dispatch per forward"), "{s}");
    expect(
        &["run", "--batch", "2", "--key-padding", "3", "--seq", "16"],
        2,
        &["has 1 length [3]"],
    );
}

#[test]
fn compare_says_what_it_drops_and_refuses_an_absent_baseline() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a.json");
    let b = t.path().join("b.json");
    let small = [
        "run",
        "--variant",
        "tiled",
        "--seq",
        "16",
        "--heads",
        "1",
        "--reps",
        "1",
        "--json",
    ];
    assert!(bin().args(small).arg(&a).output().unwrap().status.success());
    assert!(bin().args(small).arg(&b).output().unwrap().status.success());
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    // The same cell in two files: said, with the file that wins.
    expect(&["compare", a, b], 0, &["is in both", "the table shows"]);
    // A baseline in none of the files: exit 2 naming what they hold.
    expect(
        &["compare", a, "--baseline", "nonexistent-variant"],
        2,
        &["nonexistent-variant", "tiled"],
    );
    // A newer schema: a warning.
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(a).unwrap()).unwrap();
    v["schema_version"] = 99.into();
    let c = t.path().join("c.json");
    std::fs::write(&c, serde_json::to_vec(&v).unwrap()).unwrap();
    expect(
        &["compare", c.to_str().unwrap()],
        0,
        &["schema_version 99 is newer"],
    );
}

#[test]
fn run_is_compact_by_default_and_full_with_verbose() {
    let args = [
        "run",
        "--variant",
        "all",
        "--seq",
        "32",
        "--heads",
        "1",
        "--reps",
        "1",
    ];
    let o = expect(&args, 0, &[]);
    let s = text(&o.stdout);
    let lines: Vec<&str> = s.lines().collect();
    // Header, one table (a row per variant, the tile under tiled ones), a hint: not 110 lines.
    assert!(lines.len() <= 20, "{} lines:\n{s}", lines.len());
    assert!(
        lines
            .iter()
            .filter(|l| !l.contains("unsupported"))
            .all(|l| l.chars().count() <= 120),
        "{s}"
    );
    assert!(
        s.contains("variant") && s.contains("p10–p90 µs") && s.contains("verdict"),
        "{s}"
    );
    for v in ["unfused", "unfused-inplace", "math", "tiled"] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("{v} ")) && l.ends_with("PASS")),
            "{v}: {s}"
        );
    }
    assert!(!s.contains("Forward GPU : median"), "{s}");
    assert!(
        s.contains("1 cold call (timed apart), 3 warm-ups, 1 recorded forward;"),
        "{s}"
    );
    let o = expect(&[&args[..], &["--verbose"]].concat(), 0, &[]);
    let v = text(&o.stdout);
    assert!(
        v.contains("Forward GPU : median") && v.contains("Forward host"),
        "{v}"
    );
    assert!(
        v.trim_end()
            .lines()
            .last()
            .unwrap()
            .starts_with("host pipe µs"),
        "summary last:\n{v}"
    );
    // A failure leads with what failed (NaN first when there are any) in both forms.
    let bad = [
        "run",
        "--variant",
        "tiled",
        "--seq",
        "16",
        "--heads",
        "1",
        "--head-dim",
        "16",
        "--reps",
        "1",
        "--tile",
        "rt2",
    ];
    // The kernel made wrong on purpose through the tests' fault hook (HD = 8 while D = 16).
    let o = bin()
        .env("ATTN_WGPU_FAULT", "HD=8")
        .args(bad)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("validation FAILED"));
    let s = text(&o.stdout);
    assert!(
        s.contains("   FAIL: ") && s.contains("unexpected NaN"),
        "{s}"
    );
}

#[test]
fn wording_says_each_thing_once() {
    // An incompatible variant is named once, not "variant `x`: variant `x` is incompatible".
    let o = expect(
        &["run", "--variant", "tiled-coop", "--seq", "16"],
        4,
        &["is incompatible"],
    );
    let e = text(&o.stderr);
    assert_eq!(e.matches("variant `tiled-coop`").count(), 1, "{e}");
    // What a fully-masked row returns: once per variant (the note), not twice.
    let o = expect(
        &[
            "run",
            "--variant",
            "unfused",
            "--seq",
            "16",
            "--heads",
            "1",
            "--reps",
            "1",
            "--verbose",
        ],
        0,
        &[],
    );
    let s = text(&o.stdout);
    assert_eq!(s.matches("(plain softmax: 0/0)").count(), 1, "{s}");
    // Every input flag of run has a description.
    let h = text(&out(&["run", "--help"]).stdout);
    for needle in [
        "Q from a .npy file",
        "K from a .npy file",
        "V from a .npy file",
    ] {
        assert!(h.contains(needle), "{h}");
    }
}
