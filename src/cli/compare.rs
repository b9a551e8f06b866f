//! `compare`: result files (attn-wgpu and bench/torch_sdpa.py) merged into Markdown tables.

use std::path::PathBuf;

use clap::Args;

use attn_wgpu::outfile::Named;
use attn_wgpu::report::compare;

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
        let mut named: Vec<Named> = a
            .files
            .iter()
            .map(|f| Named::input("result file", f))
            .collect();
        named.push(Named::output("--md", p));
        super::check_distinct(&named)?;
    }
    let mut notes = Vec::new();
    let entries = compare::load_noting(&a.files, &mut notes).map_err(|e| bad(e.to_string()))?;
    if entries.is_empty() {
        return Err(bad("the result files hold no runs".into()));
    }
    if let Some(b) = &a.baseline {
        let names = compare::variant_names(&entries);
        if !names.contains(b) {
            return Err(bad(format!(
                "--baseline `{b}` is in none of the files (they hold: {})",
                names.join(", ")
            )));
        }
    }
    for n in &notes {
        eprintln!("warning: {n}");
    }
    let md = compare::markdown(&entries, a.baseline.as_deref());
    print!("{md}");
    if let Some(p) = &a.md {
        attn_wgpu::outfile::write_atomic(p, md.as_bytes())?;
        eprintln!("Markdown written to {}", p.display());
    }
    Ok(0)
}
