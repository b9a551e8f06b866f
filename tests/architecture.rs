//! The architecture's rules, checked on the source itself:
//! - a variant is a value: no variant name appears as a string outside the registry
//!   (src/variants/mod.rs) and the command line (src/main.rs, src/cli/), unit tests aside;
//! - no import cycle through the problem and the plan: `problem.rs`, `plan.rs` and the leaf
//!   `tile.rs` depend on nothing in `variants/` or `kernels/`, and `tile.rs` on nothing at all.

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file: comment lines and everything from `#[cfg(test)]` on left out.
fn code(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .enumerate()
        .take_while(|(_, l)| l.trim() != "#[cfg(test)]")
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .map(|(i, l)| (i + 1, l.to_string()))
        .collect()
}

#[test]
fn variant_names_live_in_the_registry_and_the_cli_only() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let allowed = |p: &Path| {
        let r = p.strip_prefix(&root).unwrap();
        r == Path::new("variants/mod.rs") || r == Path::new("main.rs") || r.starts_with("cli")
    };
    let names = attn_wgpu::variants::names();
    let mut hits = Vec::new();
    for f in files.iter().filter(|f| !allowed(f)) {
        for (n, line) in code(f) {
            for name in &names {
                if line.contains(&format!("\"{name}\"")) {
                    hits.push(format!("{}:{n}: {}", f.display(), line.trim()));
                }
            }
        }
    }
    assert!(files.len() > 30, "read {} files", files.len());
    assert!(
        hits.is_empty(),
        "variant names compared outside the registry / CLI:\n{}",
        hits.join("\n")
    );
}

#[test]
fn problem_and_plan_depend_on_no_variant_or_kernel() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for (file, forbidden) in [
        ("problem.rs", &["crate::variants", "crate::kernels"][..]),
        ("plan.rs", &["crate::variants", "crate::kernels"][..]),
        ("tile.rs", &["crate::"][..]),
    ] {
        for (n, line) in code(&root.join(file)) {
            for f in forbidden {
                assert!(
                    !line.contains(f),
                    "src/{file}:{n} depends on `{f}`: {}",
                    line.trim()
                );
            }
        }
    }
}

#[test]
fn every_variant_id_is_registered_once() {
    use attn_wgpu::variants::{VariantId, VARIANTS};
    for v in VARIANTS {
        assert_eq!(v.id.name(), v.name);
        assert_eq!(VariantId::of(v.name), Some(v.id));
        assert_eq!(VARIANTS.iter().filter(|w| w.id == v.id).count(), 1);
    }
    assert_eq!(VariantId::of("flash9"), None);
}
