//! `compare`: result files (attn-wgpu and bench/torch_sdpa.py) merged into Markdown tables.

use std::path::PathBuf;

use clap::Args;

use attn_wgpu::report::compare;
use attn_wgpu::Error;

use super::{bad, check_out_path};

#[derive(Args)]
pub struct CompareArgs {
    /// Result files: attn-wgpu `run --json` output and/or bench/torch_sdpa.py output.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Variant whose time is 1.00× (e.g. `unfused-inplace`, `torch:flash`, `torch:naive-inplace`).
    #[arg(long)]
    baseline: Option<String>,
    /// Also write the Markdown to this file (atomically).
    #[arg(long)]
    md: Option<PathBuf>,
}

pub fn cmd_compare(a: CompareArgs) -> anyhow::Result<u8> {
    if let Some(p) = &a.md {
        check_out_path("--md", p)?;
    }
    let entries = compare::load(&a.files).map_err(|e| bad(e.to_string()))?;
    if entries.is_empty() {
        return Err(bad("the result files hold no runs".into()));
    }
    let md = compare::markdown(&entries, a.baseline.as_deref());
    print!("{md}");
    if let Some(p) = &a.md {
        let tmp = p.with_extension("md.tmp");
        std::fs::write(&tmp, &md)
            .and_then(|_| std::fs::rename(&tmp, p))
            .map_err(|e| Error::Io {
                path: p.display().to_string(),
                source: e,
            })?;
        eprintln!("Markdown written to {}", p.display());
    }
    Ok(0)
}
