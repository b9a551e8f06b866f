//! `report`: one self-contained HTML page over result files (src/report/html.rs).

use std::path::PathBuf;

use clap::Args;

use attn_wgpu::outfile::Named;
use attn_wgpu::report::html;

use super::{bad, check_distinct, check_out_path};

#[derive(Args)]
pub struct ReportArgs {
    /// Result files: attn-wgpu `run --json` and `sweep` (sweep.json) output and/or
    /// bench/torch_sdpa.py output, any adapters and backends.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The HTML file to write (atomically; inline CSS and SVG, no script, no network).
    #[arg(short = 'o', long = "out", required = true)]
    out: PathBuf,
}

pub fn cmd_report(a: ReportArgs) -> anyhow::Result<u8> {
    check_out_path("-o", &a.out)?;
    let mut named: Vec<Named> = a
        .files
        .iter()
        .map(|f| Named::input("result file", f))
        .collect();
    named.push(Named::output("-o", &a.out));
    check_distinct(&named)?;
    let inputs = html::read_inputs(&a.files).map_err(bad)?;
    let page = html::page(&inputs);
    attn_wgpu::outfile::write_atomic(&a.out, page.as_bytes())?;
    eprintln!(
        "report written to {} ({}, {} file(s))",
        a.out.display(),
        attn_wgpu::report::table::bytes(page.len() as u64),
        inputs.len()
    );
    Ok(0)
}
