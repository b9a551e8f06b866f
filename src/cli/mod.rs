//! The command line: one file per subcommand (`run.rs`, `adapters.rs`, `probe.rs`,
//! `compare.rs`, `sweep.rs`, `explain.rs`, `tune.rs`), the argument groups they share
//! (`args.rs`), and here what several of them use: bad-input errors, output-path checks, the
//! variant list, the probe and tune caches, the roofline block and the trace writer. main.rs only
//! parses and dispatches.
//!
//! Bad input (missing or corrupt files, empty lists, unknown names) prints `error: ...` naming the
//! value and returns exit code 2.

use std::path::{Path, PathBuf};

use attn_wgpu::gpu::runner::{HostSpan, Runner};
use attn_wgpu::gpu::Gpu;
use attn_wgpu::report::{json, roofline, trace};
use attn_wgpu::run::VariantRun;
use attn_wgpu::variants;
use attn_wgpu::variants::VariantId;

pub mod adapters;
pub mod args;
pub mod browser;
pub mod compare;
pub mod explain;
pub mod headless;
pub mod probe;
pub mod report;
pub mod run;
pub mod sweep;
pub mod tune;

/// Bad input that is not a problem parameter (a file, a list): main maps it to exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// Fails with exit code 2.
pub fn bad(msg: String) -> anyhow::Error {
    BadInput(msg).into()
}

/// An output path must be writable before any work starts: its folder exists and takes a new
/// file, and what sits there (after links) is a regular file or nothing (exit 2 otherwise).
pub fn check_out_path(flag: &str, path: &Path) -> anyhow::Result<()> {
    attn_wgpu::outfile::check_writable(flag, path).map_err(bad)
}

/// A command's outputs must differ from each other and from its inputs (exit 2 otherwise).
pub fn check_distinct(paths: &[attn_wgpu::outfile::Named]) -> anyhow::Result<()> {
    attn_wgpu::outfile::check_distinct(paths).map_err(bad)
}

/// A comma-separated list of variant names, or `all` (exit 2 on an empty list, an unknown name or
/// a name listed twice).
pub fn variant_list(s: &str) -> anyhow::Result<Vec<String>> {
    let v: Vec<String> = if s == "all" {
        variants::names().into_iter().map(String::from).collect()
    } else {
        s.split(',')
            .map(|x| x.trim().to_string())
            .filter(|x| !x.is_empty())
            .collect()
    };
    if v.is_empty() {
        return Err(bad(format!("--variants `{s}` names no variant")));
    }
    for (i, n) in v.iter().enumerate() {
        variants::find(n)?;
        if v[..i].contains(n) {
            return Err(bad(format!(
                "--variants `{s}` lists `{n}` twice (each variant runs once)"
            )));
        }
    }
    Ok(v)
}

// ---------------------------------------------------------------------------------------------
// run --trace / roofline

/// A per-adapter cache file a command reads (probe, tune): `explicit` (a broken one is bad input,
/// exit 2), else `default` if it exists (a broken one only warns: the command goes on `without`).
/// A file measured on another adapter is used with a warning.
pub fn find_cached<T>(
    gpu: &Gpu,
    explicit: Option<&Path>,
    default: PathBuf,
    what: &str,
    without: &str,
    load: impl Fn(&Path) -> Result<T, String>,
    key: impl Fn(&T) -> &str,
) -> anyhow::Result<Option<(T, String)>> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None if default.is_file() => default,
        None => return Ok(None),
    };
    let f = match load(&path) {
        Ok(f) => f,
        Err(e) if explicit.is_some() => return Err(bad(e)),
        Err(e) => {
            eprintln!("warning: {e}; {without}");
            return Ok(None);
        }
    };
    let here = attn_wgpu::probe::key(&gpu.report);
    if key(&f) != here {
        eprintln!(
            "warning: {what} {} was measured on `{}`, this run is on `{here}`",
            path.display(),
            key(&f)
        );
    }
    Ok(Some((f, path.display().to_string())))
}

/// The probe `run` uses: `--probe FILE`, else the default path of this adapter if it exists.
pub fn find_probe(
    gpu: &Gpu,
    explicit: Option<&Path>,
) -> anyhow::Result<Option<(attn_wgpu::probe::ProbeFile, String)>> {
    find_cached(
        gpu,
        explicit,
        attn_wgpu::probe::default_path(&gpu.report),
        "probe",
        "no roofline (re-run `attn-wgpu probe`)",
        attn_wgpu::probe::load,
        |f| &f.key,
    )
}

pub fn print_roofline(
    probe: &Option<(attn_wgpu::probe::ProbeFile, String)>,
    runs: &[VariantRun],
    dtype: &str,
) {
    match probe {
        Some((p, src)) => {
            for r in runs {
                let b = roofline::block(p, src, r, dtype);
                if !b.is_empty() {
                    print!("\n{b}");
                }
            }
        }
        None => println!(
            "\n(no roofline: run `attn-wgpu probe` once for this adapter, or pass --probe FILE)"
        ),
    }
}

/// Writes the Chrome trace of `runs` (timed by `runner`) atomically.
pub fn write_trace(
    path: &Path,
    gpu: &Gpu,
    runner: &Runner,
    runs: &[VariantRun],
) -> anyhow::Result<()> {
    let epoch = runner.epoch();
    let device = HostSpan {
        start_us: -(epoch.saturating_duration_since(gpu.opened_at).as_secs_f64() * 1e6),
        dur_us: gpu.setup_ms * 1e3,
    };
    let t = trace::chrome_trace(&gpu.report, Some(device), runs);
    json::write_atomic(path, &t)?;
    eprintln!(
        "trace written to {} (open in ui.perfetto.dev or chrome://tracing)",
        path.display()
    );
    Ok(())
}

/// Features the named variants use (see `variants::features_for`), plus SHADER_F16 for f16
/// storage.
pub fn features_of(names: &[String], dtype: attn_wgpu::problem::DType) -> wgpu::Features {
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut f = variants::features_for(&refs);
    if dtype == attn_wgpu::problem::DType::F16 {
        f |= wgpu::Features::SHADER_F16;
    }
    f
}

/// `--tile` given with a variant list (`flag` `list`) none of whose plans takes a tile: exit 2.
pub fn check_tile_taker(
    forced: Option<attn_wgpu::tile::TileChoice>,
    names: &[String],
    flag: &str,
    list: &str,
) -> anyhow::Result<()> {
    let takes = names
        .iter()
        .any(|n| variants::find(n).is_ok_and(|v| v.tiles));
    if forced.is_some() && !takes {
        return Err(bad(format!(
            "--tile sets the {} variant's kernel; {flag} `{list}` has none (add it, or use all)",
            tile_variant_names()
        )));
    }
    Ok(())
}

/// The variant `--tile` and the tune cache apply to, by name (for messages).
pub fn tile_variant_names() -> String {
    variants::tile_variants()
        .iter()
        .map(|v| v.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The fused variant `sweep` and `explain` compare the materializing ones against.
pub const FUSED: VariantId = VariantId::Tiled;
