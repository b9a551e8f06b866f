// Records the git commit the binary was built from (for result files), when git knows it.
use std::process::Command;

fn main() {
    let out = Command::new("git").args(["rev-parse", "HEAD"]).output();
    let mut commit = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => String::new(),
    };
    if !commit.is_empty() {
        let dirty = Command::new("git")
            .args(["status", "--porcelain", "--untracked-files=no"])
            .output()
            .map(|o| !o.stdout.is_empty())
            .unwrap_or(false);
        if dirty {
            commit.push_str("-dirty");
        }
    }
    println!("cargo:rustc-env=ATTN_WGPU_GIT_COMMIT={commit}");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/index");
}
