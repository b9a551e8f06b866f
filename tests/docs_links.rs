//! Every relative link in README.md and docs/*.md resolves: the file (or folder) exists, and an
//! anchor (`file.md#heading`, `#heading`) names a heading of that file, slugged as GitHub does.
//! Links to the web (http, https, mailto) are not followed.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The targets of `[text](target)` and `![alt](target)` outside code blocks and code spans.
fn links(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Drop code spans, whose brackets are not links.
        let mut text = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                text.push_str(part);
            }
        }
        let mut rest = text.as_str();
        while let Some(at) = rest.find("](") {
            let tail = &rest[at + 2..];
            match tail.find(')') {
                Some(end) => {
                    out.push(tail[..end].trim().to_string());
                    rest = &tail[end..];
                }
                None => break,
            }
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation dropped (but `-` and `_`), spaces to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(md: &str) -> Vec<String> {
    let mut fenced = false;
    md.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
            }
            !fenced && l.starts_with('#')
        })
        .map(|l| slug(l.trim_start_matches('#')))
        .collect()
}

fn check(file: &Path, bad: &mut Vec<String>) -> usize {
    let md = std::fs::read_to_string(file).unwrap();
    let here = file.parent().unwrap();
    let mut n = 0;
    for l in links(&md) {
        if l.starts_with("http://") || l.starts_with("https://") || l.starts_with("mailto:") {
            continue;
        }
        n += 1;
        let (path, anchor) = match l.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (l.as_str(), None),
        };
        let target = if path.is_empty() {
            file.to_path_buf()
        } else {
            here.join(path)
        };
        if !target.exists() {
            bad.push(format!("{}: `{l}`: no such file", file.display()));
            continue;
        }
        if let Some(a) = anchor {
            let text = std::fs::read_to_string(&target).unwrap_or_default();
            if !anchors(&text).iter().any(|x| x == a) {
                bad.push(format!("{}: `{l}`: no heading #{a}", file.display()));
            }
        }
    }
    n
}

#[test]
fn every_relative_link_in_the_readme_and_docs_resolves() {
    let mut files = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    assert!(docs.len() >= 8, "docs/ has {} pages", docs.len());
    files.extend(docs);
    let mut bad = Vec::new();
    let n: usize = files.iter().map(|f| check(f, &mut bad)).sum();
    assert!(
        n >= 20,
        "only {n} relative links found: is the parser right?"
    );
    assert!(
        bad.is_empty(),
        "{} broken link(s):\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn the_readme_is_read_in_minutes() {
    let md = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = md.lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines (at most 300: the rest goes to docs/)"
    );
}

#[test]
fn the_link_parser_sees_links_and_skips_code() {
    let md = "a [x](docs/a.md#b) `[no](c.md)`\n```\n[no](d.md)\n```\n![img](e.png) [w](https://x)";
    assert_eq!(links(md), ["docs/a.md#b", "e.png", "https://x"]);
    assert_eq!(slug("The two commands"), "the-two-commands");
    assert_eq!(slug("`--variant auto` and `all`"), "--variant-auto-and-all");
}
