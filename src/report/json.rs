//! The results file: one JSON document per invocation, written atomically (temp file + rename in
//! the target's folder), so an interrupted run never leaves a half-written file behind.

use std::path::Path;

use serde::Serialize;

use crate::gpu::context::AdapterReport;
use crate::gpu::runner::Schedule;
use crate::problem::Problem;
use crate::run::VariantRun;
use crate::{Error, Result};

pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize)]
pub struct Versions {
    pub attn_wgpu: &'static str,
    pub git_commit: Option<&'static str>,
    pub wgpu: &'static str,
}

pub fn versions() -> Versions {
    Versions {
        attn_wgpu: env!("CARGO_PKG_VERSION"),
        git_commit: option_env!("ATTN_WGPU_GIT_COMMIT").filter(|s| !s.is_empty()),
        wgpu: WGPU_VERSION,
    }
}

/// The wgpu release this binary was built against (kept in step with Cargo.lock by a test).
pub const WGPU_VERSION: &str = "30.0.2";

#[derive(Debug, Clone, Serialize)]
pub struct ResultsFile<'a> {
    pub schema_version: u32,
    pub tool: &'static str,
    pub command: String,
    pub seed: u64,
    pub versions: Versions,
    pub adapter: &'a AdapterReport,
    pub backend: &'a str,
    pub problem: &'a Problem,
    pub dtype: &'static str,
    pub causal: bool,
    pub timing: Schedule,
    /// Whether wgpu's injected shader index clamping was on.
    pub bounds_checks: bool,
    pub device_setup_ms: f64,
    /// `--variant auto`: the variant picked, the rule, and why every other one was not.
    pub auto: Option<&'a crate::variants::AutoChoice>,
    pub runs: &'a [VariantRun],
    /// The probe behind `runs[].dispatches[].roofline` (None: no probe file was found or given).
    pub roofline: Option<crate::report::roofline::RooflineSource>,
    pub warnings: Vec<String>,
    /// `--dropout`: p, the threshold and scale the kernels use, the Philox key (docs/training.md, "Dropout").
    pub dropout: Option<crate::dropout::Dropout>,
}

impl<'a> ResultsFile<'a> {
    /// The results file of `runs` of `p` on `adapter` (through `backend`), with what follows from
    /// them filled in (command line, versions, dtype, warnings, dropout); bounds checks on, no
    /// setup time, auto choice or probe: a caller that has them sets those fields.
    pub fn new(
        p: &'a Problem,
        adapter: &'a AdapterReport,
        backend: &'a str,
        timing: Schedule,
        runs: &'a [VariantRun],
    ) -> Self {
        ResultsFile {
            schema_version: SCHEMA_VERSION,
            tool: "attn-wgpu",
            command: command_line(),
            seed: p.seed,
            versions: versions(),
            adapter,
            backend,
            problem: p,
            dtype: p.dtype.name(),
            causal: p.causal,
            timing,
            bounds_checks: true,
            device_setup_ms: 0.0,
            auto: None,
            runs,
            roofline: None,
            warnings: warnings(p, runs),
            dropout: p.dropout(),
        }
    }
}

/// The warnings a result file carries: the eval-mode dropout pitfall, then every run's
/// measurement warnings, each prefixed with its variant.
fn warnings(p: &Problem, runs: &[VariantRun]) -> Vec<String> {
    let mut w: Vec<String> = p.eval_dropout_warning().into_iter().collect();
    for r in runs {
        if let Some(m) = &r.measurement {
            w.extend(m.warnings.iter().map(|x| format!("{}: {x}", r.variant)));
        }
    }
    w
}

/// Writes `value` as compact JSON (one line) to `path` atomically: a `run --variant all` result holds
/// every sample of every dispatch, and pretty-printing doubled its size (`jq .` indents it).
pub fn write_atomic<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut text = serde_json::to_string(value).map_err(|e| Error::Io {
        path: path.display().to_string(),
        source: std::io::Error::other(e.to_string()),
    })?;
    text.push('\n');
    crate::outfile::write_atomic(path, text.as_bytes())
}

/// This process's command line as the user typed it, with the binary by its file name (no path
/// of the machine that ran it), each argument quoted where a shell would need it; lossy where an
/// argument is not UTF-8 (never a panic).
pub fn command_line() -> String {
    let mut args = std::env::args_os();
    let bin = args.next().map_or_else(
        || "attn-wgpu".to_string(),
        |a| {
            Path::new(&a)
                .file_name()
                .map_or("attn-wgpu".into(), |n| n.to_string_lossy().into_owned())
        },
    );
    std::iter::once(bin)
        .chain(args.map(|a| shell_quote(&a.to_string_lossy())))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `s` as a shell reads it back: as is when it holds only safe characters, else in single quotes.
fn shell_quote(s: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=,:@%+".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// A recorded command for display: its first word (the binary) by file name, so that files
/// written before [`command_line`] show no local path either.
pub fn binary_by_name(cmd: &str) -> String {
    match cmd.split_once(' ') {
        Some((bin, rest)) if bin.contains('/') && !bin.starts_with("python") => {
            format!("{} {rest}", bin.rsplit('/').next().unwrap_or(bin))
        }
        None if cmd.contains('/') => cmd.rsplit('/').next().unwrap_or(cmd).to_string(),
        _ => cmd.to_string(),
    }
}
