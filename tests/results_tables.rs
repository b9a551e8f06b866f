//! The committed results are data and the tables are generated from them: for every
//! `results/<gpu>/suite/`, `attn-wgpu compare` of its gzipped JSON (read as it is) writes exactly
//! the tables under the header of `results/<gpu>/README.md`, so a table can neither drift from its
//! data nor be edited by hand.

use std::path::Path;

mod common;

use common::{bin, stderr};

#[test]
fn every_gpu_readme_is_compare_of_its_suite() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
    let mut checked = 0;
    for gpu in std::fs::read_dir(&root).unwrap() {
        let gpu = gpu.unwrap().path();
        let suite = gpu.join("suite");
        if !suite.is_dir() {
            continue;
        }
        let name = gpu.file_name().unwrap().to_str().unwrap().to_string();
        // The files in the order a shell's glob gives them (`attn_*.json.gz torch_*.json.gz`),
        // by the paths the README names (relative to the repository).
        let mut files = Vec::new();
        for prefix in ["attn_", "torch_"] {
            let mut group: Vec<String> = std::fs::read_dir(&suite)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|f| f.starts_with(prefix) && f.ends_with(".json.gz"))
                .map(|f| format!("results/{name}/suite/{f}"))
                .collect();
            group.sort();
            assert!(
                !group.is_empty(),
                "results/{name}/suite has no {prefix}*.json.gz"
            );
            files.extend(group);
        }
        let d = tempfile::tempdir().unwrap();
        let md = d.path().join("t.md");
        let o = bin()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .arg("compare")
            .args(&files)
            .args(["--baseline", "torch:naive-inplace", "--md"])
            .arg(&md)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let table = std::fs::read_to_string(&md).unwrap();
        let readme = std::fs::read_to_string(gpu.join("README.md")).unwrap();
        assert!(
            readme.ends_with(&table),
            "results/{name}/README.md is not `compare` of its suite (regenerate it: docs/results.md)"
        );
        checked += 1;
    }
    assert!(checked >= 1, "no results/<gpu>/suite/ found");
}
