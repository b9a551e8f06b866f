//! The architecture's rules, checked on the source itself:
//! - a variant is a value: no variant name appears as a string outside the registry
//!   (src/variants/mod.rs) and the command line (src/main.rs, src/cli/), unit tests aside;
//! - no import cycle through the problem and the plan: `problem.rs`, `plan.rs` and the leaf
//!   `tile.rs` depend on nothing in `variants/` or `kernels/`, and `tile.rs` on nothing at all;
//! - no import loop anywhere: no source file reaches, through `crate::` and `super::` paths (and a
//!   parent's `child::` paths), a file that reaches it back.

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

/// The module path of a source file under src/ (`src/gpu/runner/mod.rs` = gpu::runner).
fn module_of(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut segs: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    if matches!(
        segs.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        segs.pop();
    }
    segs
}

/// The deepest source file a module path names (`gpu::runner::Runner` = src/gpu/runner/mod.rs).
fn file_of(root: &Path, segs: &[String]) -> Option<PathBuf> {
    let mut best = None;
    for k in 1..=segs.len() {
        let base = segs[..k].iter().fold(root.to_path_buf(), |p, s| p.join(s));
        let f = base.with_extension("rs");
        let m = base.join("mod.rs");
        if f.is_file() {
            best = Some(f);
        } else if m.is_file() {
            best = Some(m);
        } else {
            break;
        }
    }
    best
}

/// Every path `prefix::a::b` (and `prefix::a::{b, c::d}`) in `line`, as segment lists.
fn paths_after(line: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut rest = line;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().last();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| word(c) || c == ':') {
            continue;
        }
        let mut segs = Vec::new();
        let mut r = rest;
        while let Some(tail) = r.strip_prefix("::") {
            if let Some(group) = tail.strip_prefix('{') {
                let body = &group[..group.find('}').unwrap_or(group.len())];
                for item in body.split(',') {
                    let first: String = item.trim().chars().take_while(|c| word(*c)).collect();
                    if !first.is_empty() {
                        let mut s = segs.clone();
                        s.push(first);
                        out.push(s);
                    }
                }
                segs.clear();
                break;
            }
            let seg: String = tail.chars().take_while(|c| word(*c)).collect();
            if seg.is_empty() {
                break;
            }
            r = &tail[seg.len()..];
            segs.push(seg);
        }
        if !segs.is_empty() {
            out.push(segs);
        }
    }
    out
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    use std::collections::{BTreeMap, BTreeSet};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for f in &files {
        let me = module_of(&root, f);
        let is_parent = f.ends_with("mod.rs") || f.ends_with("lib.rs") || f.ends_with("main.rs");
        let lines = code(f);
        let children: Vec<String> = lines
            .iter()
            .filter_map(|(_, l)| {
                let l = l.trim().trim_start_matches("pub ");
                l.strip_prefix("mod ")?
                    .strip_suffix(';')
                    .map(str::to_string)
            })
            .collect();
        let mut to = BTreeSet::new();
        for (_, l) in &lines {
            for p in paths_after(l, "crate") {
                to.extend(file_of(&root, &p));
            }
            let parent: Vec<String> = me[..me.len().saturating_sub(1)].to_vec();
            for p in paths_after(l, "super") {
                let mut full = if is_parent {
                    me[..me.len().saturating_sub(1)].to_vec()
                } else {
                    parent.clone()
                };
                full.extend(p);
                to.extend(file_of(&root, &full));
            }
            if is_parent {
                for c in &children {
                    for p in paths_after(
                        &format!(" {l}").replace(&format!(" {c}::"), &format!(" self::{c}::")),
                        "self",
                    ) {
                        let mut full = me.clone();
                        full.extend(p);
                        to.extend(file_of(&root, &full));
                    }
                }
            }
        }
        to.remove(f);
        edges.insert(f.clone(), to);
    }
    // Depth-first search for a back edge; the loop is reported file by file.
    fn visit(
        n: &PathBuf,
        edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        state: &mut BTreeMap<PathBuf, u8>,
        stack: &mut Vec<PathBuf>,
    ) -> Option<Vec<PathBuf>> {
        state.insert(n.clone(), 1);
        stack.push(n.clone());
        for m in edges.get(n).into_iter().flatten() {
            match state.get(m) {
                Some(1) => {
                    let at = stack.iter().position(|x| x == m).unwrap();
                    let mut cycle = stack[at..].to_vec();
                    cycle.push(m.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(m, edges, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(n.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    let n_edges: usize = edges.values().map(BTreeSet::len).sum();
    assert!(
        n_edges > 100,
        "only {n_edges} imports found: is the scanner right?"
    );
    for n in edges.keys() {
        if state.contains_key(n) {
            continue;
        }
        if let Some(c) = visit(n, &edges, &mut state, &mut Vec::new()) {
            let names: Vec<String> = c
                .iter()
                .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
                .collect();
            panic!("import loop: {}", names.join(" -> "));
        }
    }
}

#[test]
fn the_path_scanner_reads_groups_and_skips_longer_words() {
    assert_eq!(
        paths_after("use crate::gpu::{context::Gpu, runner};", "crate"),
        [vec!["gpu", "context"], vec!["gpu", "runner"]]
    );
    assert_eq!(paths_after("x.crate::y; my_crate::z", "crate"), [vec!["y"]]);
    assert_eq!(
        paths_after("super::args::Defaults", "super"),
        [vec!["args", "Defaults"]]
    );
}
