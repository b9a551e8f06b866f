//! `tune` and the tile choice of `run`, end to end on the software adapter with a tiny shape:
//! the cache holds a validated candidate, `run --tune` uses it and says so in its results file,
//! `--tile` forces a choice, and bad input gets exit 2 (or 4 when a tile does not fit).

use std::path::Path;
use std::process::{Command, Output};

const SHAPE: &[&str] = &[
    "--batch",
    "1",
    "--heads",
    "1",
    "--seq",
    "64",
    "--head-dim",
    "16",
    "--reps",
    "2",
    "--warmup",
    "0",
];

/// Runs the binary with its per-user cache in `cache` (never the real one).
fn run(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attn-wgpu"))
        .args(args)
        .env("XDG_RUNTIME_DIR", "/tmp")
        .env("XDG_CACHE_HOME", cache)
        .output()
        .expect("spawn attn-wgpu")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn args<'a>(head: &[&'a str], tail: &[&'a str]) -> Vec<&'a str> {
    head.iter().chain(SHAPE).chain(tail).copied().collect()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn tune_then_run_uses_the_cache_and_tile_forces() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("tune.json");
    let c = cache.to_str().unwrap();
    let o = run(dir.path(), &args(&["tune"], &["--out", c]));
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("<- best"), "{out}");

    let f = json(&cache);
    let entries = f["entries"].as_object().unwrap();
    assert_eq!(entries.len(), 1);
    let (class, e) = entries.iter().next().unwrap();
    assert_eq!(class, "tiled f32 causal D=16 N<=64");
    let cands = e["candidates"].as_array().unwrap();
    assert!(cands.len() >= 2, "{cands:?}");
    assert!(cands.iter().all(|c| c["verdict"] == "PASS"), "{cands:?}");
    let choice = e["choice"].as_str().unwrap().to_string();
    assert!(cands.iter().any(|c| c["choice"] == choice.as_str()));

    // run --tune FILE: the tuned choice, with the cache as its source, in the report and the JSON.
    let res = dir.path().join("r.json");
    let o = run(
        dir.path(),
        &args(&["run"], &["--tune", c, "--json", res.to_str().unwrap()]),
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let source = format!("tuned: {c}");
    assert!(
        out.contains(&format!("tile: {choice} (source: {source})")),
        "{out}"
    );
    let r = json(&res);
    assert_eq!(r["runs"][0]["tile"]["choice"], choice.as_str());
    assert_eq!(r["runs"][0]["tile"]["source"], source.as_str());

    // --tile wins over the cache.
    let o = run(
        dir.path(),
        &args(
            &["run"],
            &[
                "--tune",
                c,
                "--tile",
                "row:16",
                "--json",
                res.to_str().unwrap(),
            ],
        ),
    );
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let r = json(&res);
    assert_eq!(r["runs"][0]["tile"]["choice"], "row:16");
    assert_eq!(r["runs"][0]["tile"]["source"], "--tile");
    let br = r["runs"][0]["config"]
        .as_array()
        .unwrap()
        .iter()
        .find(|kv| kv[0] == "BR")
        .unwrap()[1]
        .as_f64();
    assert_eq!(br, Some(16.0));

    // No cache at all: the default, said so.
    let o = run(dir.path(), &args(&["run"], &[]));
    assert!(text(&o).0.contains("(source: default)"), "{:?}", text(&o));
}

#[test]
fn bad_tiles_and_caches() {
    let dir = tempfile::tempdir().unwrap();
    let check = |extra: &[&str], code: i32, needles: &[&str]| {
        let o = run(dir.path(), &args(&["run"], extra));
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(code), "{extra:?}: {err}");
        for n in needles {
            assert!(err.contains(n), "{extra:?}: stderr lacks `{n}`: {err}");
        }
        assert!(!err.contains("panicked"), "{err}");
    };
    check(&["--tile", "row:0"], 2, &["row:0"]);
    check(&["--tile", "bogus"], 2, &["bogus", "row:BR"]);
    check(
        &["--tile", "row:3000"],
        4,
        &["row:3000", "does not fit", "workgroup storage"],
    );
    check(&["--variant", "unfused", "--tile", "rt"], 2, &["--tile"]);
    let bad = dir.path().join("corrupt.json");
    std::fs::write(&bad, "{\"entries\": ").unwrap();
    let b = bad.to_str().unwrap();
    check(&["--tune", b], 2, &[b]);
    check(
        &["--tune", "/no/such/tune.json"],
        2,
        &["/no/such/tune.json"],
    );
    // tune refuses to overwrite a corrupt cache, naming it.
    let o = run(dir.path(), &args(&["tune"], &["--out", b]));
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(b), "{err}");
    let o = run(dir.path(), &args(&["tune", "--variant", "math"], &[]));
    assert_eq!(o.status.code(), Some(2), "{:?}", text(&o));
}
