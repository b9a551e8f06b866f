//! Property test over the command line's argument space (issue 40): `run`, `probe`, `compare`,
//! `report`, `sweep`, `explain` and `tune` with a tiny valid base and one to three options set to
//! random values from a hostile pool (negative, zero, fractional, huge, non-finite, empty, not a
//! number, a FIFO, a folder, /dev/full), plus random valid values. Whatever the input, the tool
//! ends with exit 0 (ran, and then every validation passed), 2 (bad input) or 4 (incompatible
//! variant), never a signal, a panic (101), a validation FAIL (3: a wrong result) or a hang (a
//! time limit per process). The case count is bounded for CI (PROPTEST_CASES raises it).

use proptest::prelude::*;

mod common;

const SECS: u64 = 120;

/// Values an option may get: the valid small ones and the hostile ones.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("0".to_string()),
        Just("1".to_string()),
        Just("2".to_string()),
        Just("3".to_string()),
        Just("16".to_string()),
        Just("17".to_string()),
        Just("-1".to_string()),
        Just("0.5".to_string()),
        Just("1e20".to_string()),
        Just("4294967296".to_string()),
        Just("18446744073709551616".to_string()),
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("-inf".to_string()),
        Just("".to_string()),
        Just("abc".to_string()),
        Just("f16".to_string()),
        Just("bf16".to_string()),
        Just("top-left".to_string()),
        Just("bottom-right".to_string()),
        Just("/dev/full".to_string()),
        Just("/".to_string()),
        Just("HD=8".to_string()),
        Just("PREFETCH=0".to_string()),
        Just("LO=2".to_string()),
        Just("rt2".to_string()),
        Just("row:3000".to_string()),
        (1u32..64).prop_map(|n| n.to_string()),
    ]
}

/// `run`'s options that take a value, and its flags.
const RUN_OPTS: &[&str] = &[
    "--batch",
    "--heads",
    "--kv-heads",
    "--seq",
    "--kv-seq",
    "--head-dim",
    "--dtype",
    "--scale",
    "--seed",
    "--dropout",
    "--mode",
    "--warmup",
    "--reps",
    "--warmup-ms",
    "--host-reps",
    "--gpu-timeout",
    "--tile",
    "--override",
    "--tolerance",
    "--key-padding",
    "--causal",
    "--variant",
    "--mask-convention",
    "--q",
    "--mask",
    "--probe",
    "--tune",
];
const RUN_FLAGS: &[&str] = &["--no-causal", "--backward", "--verbose"];

fn case() -> impl Strategy<Value = Vec<String>> {
    let opts = proptest::collection::vec((proptest::sample::select(RUN_OPTS), value()), 1..=3);
    let flags = proptest::collection::vec(proptest::sample::select(RUN_FLAGS), 0..=1);
    let variant = proptest::sample::select(&["tiled", "unfused", "math", "auto", "split-kv"][..]);
    (variant, opts, flags).prop_map(|(v, opts, flags)| {
        let mut a = common::tiny_run(v);
        a.extend(["--host-reps", "0"].map(String::from));
        for (o, v) in opts {
            a.push(o.to_string());
            a.push(v);
        }
        a.extend(flags.iter().map(|f| f.to_string()));
        a
    })
}

/// Runs the binary in a fresh folder; the exit code, or a failure for a signal or a hang.
fn outcome(args: &[String]) -> Result<(i32, String), String> {
    let dir = tempfile::tempdir().unwrap();
    let mut c = common::bin();
    c.args(args).current_dir(dir.path());
    let o = common::bounded(c, SECS)?;
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    match o.status.code() {
        Some(c) => Ok((c, err)),
        None => Err(format!("killed by a signal: {:?}\n{err}", o.status)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(40),
        failure_persistence: None,
        .. ProptestConfig::default()
    })]

    #[test]
    fn any_run_arguments_end_in_0_2_or_4(args in case()) {
        match outcome(&args) {
            Ok((c, err)) => {
                prop_assert!(!err.contains("panicked"), "{args:?}: a panic\n{err}");
                prop_assert!(
                    [0, 2, 4].contains(&c),
                    "{args:?}: exit {c} (0, 2 or 4 expected)\n{err}"
                );
                if c == 2 || c == 4 {
                    prop_assert!(err.contains("error: "), "{args:?}: exit {c} without a message\n{err}");
                }
            }
            Err(why) => prop_assert!(false, "{args:?}: {why}"),
        }
    }
}

/// The other subcommands' options, each alone with a hostile value.
#[test]
fn every_subcommand_refuses_hostile_values_cleanly() {
    let cases: &[&[&str]] = &[
        &["probe", "--reps"],
        &["probe", "--size-mib"],
        &["probe", "--gpu-timeout"],
        &["sweep", "--seq"],
        &["sweep", "--reps"],
        &["explain", "--seq"],
        &["explain", "--head-dim"],
        &["tune", "--reps"],
        &["tune", "--seq"],
        &["compare"],
        &["report", "-o", "r.html"],
        &["adapters", "--backend"],
    ];
    let hostile = [
        "-1",
        "0",
        "1e20",
        "nan",
        "",
        "abc",
        "/",
        "/dev/full",
        "4294967296",
    ];
    for c in cases {
        for h in hostile {
            let mut args: Vec<String> = c.iter().map(|s| s.to_string()).collect();
            args.push(h.to_string());
            if args[0] == "sweep" || args[0] == "explain" || args[0] == "tune" {
                args.extend(["--heads", "1", "--head-dim", "16"].map(String::from));
            }
            match outcome(&args) {
                Ok((code, err)) => {
                    assert!(!err.contains("panicked"), "{args:?}: a panic\n{err}");
                    assert!([0, 1, 2, 4].contains(&code), "{args:?}: exit {code}\n{err}");
                }
                Err(why) => panic!("{args:?}: {why}"),
            }
        }
    }
}
