//! The profiling subcommands (`probe`, `compare`, `sweep`, `explain`) and the `run` add-ons
//! (`--trace`, the roofline block), kept apart from main.rs so that it only dispatches to them.
//!
//! Bad input (missing or corrupt files, empty lists, unknown names) prints `error: ...` naming the
//! value and returns exit code 2, like `run`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;

use attn_wgpu::gpu::runner::{HostSpan, Runner, Schedule};
use attn_wgpu::gpu::Gpu;
use attn_wgpu::problem::{Inputs, Problem};
use attn_wgpu::report::{compare, json, roofline, trace};
use attn_wgpu::run::{run_variant, VariantRun};
use attn_wgpu::{explain, probe, sweep, variants, Error};

use crate::{selection, AdapterSel};

mod tune;
pub use tune::{cmd_tune, find_tune, parse_tile, tile_request, TuneArgs};

/// Bad input that is not a problem parameter (a file, a list): main maps it to exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// Fails with exit code 2.
fn bad(msg: String) -> anyhow::Error {
    BadInput(msg).into()
}

/// An output path must be in an existing folder and not be a folder itself.
pub fn check_out_path(flag: &str, path: &Path) -> anyhow::Result<()> {
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !d.is_dir() {
            return Err(bad(format!(
                "{flag} {}: folder {} does not exist",
                path.display(),
                d.display()
            )));
        }
    }
    if path.is_dir() {
        return Err(bad(format!("{flag} {} is a folder", path.display())));
    }
    Ok(())
}

fn dtype_check(dtype: &str) -> anyhow::Result<()> {
    if dtype != "f32" {
        return Err(bad(format!(
            "--dtype `{dtype}` is not supported (supported: f32)"
        )));
    }
    Ok(())
}

fn variant_list(s: &str) -> anyhow::Result<Vec<String>> {
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
    for n in &v {
        variants::find(n)?;
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
    let here = probe::key(&gpu.report);
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
) -> anyhow::Result<Option<(probe::ProbeFile, String)>> {
    find_cached(
        gpu,
        explicit,
        probe::default_path(&gpu.report),
        "probe",
        "no roofline (re-run `attn-wgpu probe`)",
        probe::load,
        |f| &f.key,
    )
}

pub fn print_roofline(
    probe: &Option<(probe::ProbeFile, String)>,
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

// ---------------------------------------------------------------------------------------------
// probe

#[derive(Args)]
pub struct ProbeArgs {
    /// Where to write the probe JSON (default: the per-user cache, see README; `run` looks there).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Bytes copied by the bandwidth probe, in MiB (default: 64 on a CPU adapter, else up to 1024
    /// within the adapter's max storage binding).
    #[arg(long)]
    size_mib: Option<u64>,
    /// Recorded repetitions of each probe kernel (after 2 warm-ups).
    #[arg(long, default_value_t = 10)]
    reps: u32,
    #[command(flatten)]
    sel: AdapterSel,
}

pub fn cmd_probe(a: ProbeArgs) -> anyhow::Result<u8> {
    if a.reps == 0 {
        return Err(bad("--reps must be at least 1 (got 0)".into()));
    }
    if a.size_mib == Some(0) {
        return Err(bad("--size-mib must be at least 1 (got 0)".into()));
    }
    if let Some(p) = &a.out {
        check_out_path("--out", p)?;
    }
    let gpu = Gpu::open(&selection(&a.sel), wgpu::Features::SHADER_F16)?;
    let size = probe::ProbeSize::for_adapter(&gpu.report, a.size_mib);
    let cmd = std::env::args().collect::<Vec<_>>().join(" ");
    let t0 = Instant::now();
    let p = probe::run_probe(&gpu, size, a.reps, cmd)?;
    println!("Adapter   : {}", p.key);
    println!(
        "Bandwidth : {:.1} GB/s best, {:.1} GB/s median (copy of {} MiB, read + write counted)",
        p.bandwidth.best_rate,
        p.bandwidth.median_rate,
        size.copy_bytes >> 20
    );
    println!(
        "FMA f32   : {:.1} GFLOP/s best, {:.1} median ({} workgroups x 256 threads x {} iterations x 32 FLOP)",
        p.fma_f32.best_rate, p.fma_f32.median_rate, size.fma_workgroups, size.fma_iters
    );
    match &p.fma_f16 {
        Some(c) => println!(
            "FMA f16   : {:.1} GFLOP/s best, {:.1} median",
            c.best_rate, c.median_rate
        ),
        None => println!(
            "FMA f16   : not probed ({})",
            p.f16_note.as_deref().unwrap_or("")
        ),
    }
    println!(
        "Ridge     : {:.2} FLOP/byte (f32): below it a kernel is bandwidth-bound",
        p.fma_f32.best_rate / p.bandwidth.best_rate
    );
    let out = a.out.unwrap_or_else(|| probe::default_path(&gpu.report));
    if let Some(d) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).map_err(|e| Error::Io {
            path: d.display().to_string(),
            source: e,
        })?;
    }
    json::write_atomic(&out, &p)?;
    eprintln!(
        "probe written to {} in {:.1} s",
        out.display(),
        t0.elapsed().as_secs_f64()
    );
    Ok(0)
}

// ---------------------------------------------------------------------------------------------
// compare

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

// ---------------------------------------------------------------------------------------------
// sweep

#[derive(Args)]
pub struct SweepArgs {
    /// Sequence lengths, comma separated (e.g. 128,256,512).
    #[arg(long)]
    seq: String,
    /// Variants, comma separated, or `all`.
    #[arg(long, default_value = "unfused,unfused-inplace,tiled")]
    variants: String,
    #[arg(long, default_value = "f32")]
    dtype: String,
    #[arg(long, default_value_t = 1)]
    batch: u32,
    #[arg(long, default_value_t = 2)]
    heads: u32,
    #[arg(long, default_value_t = 64)]
    head_dim: u32,
    #[arg(long)]
    no_causal: bool,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[arg(long, default_value_t = 1)]
    warmup: u32,
    #[arg(long, default_value_t = 5)]
    reps: u32,
    /// Folder for sweep.csv, sweep.json and the SVG plots (created if missing).
    #[arg(long, default_value = ".")]
    out_dir: PathBuf,
    /// Tune cache (default: this adapter's file, see `run --tune`): sets `tiled`'s tile per N.
    #[arg(long)]
    tune: Option<PathBuf>,
    /// Force the `tiled` variant's tile at every N (see `run --tile`): `rt` or `row:BR`. Wins over
    /// the tune cache; one that does not fit this adapter stops the sweep before it starts (exit 4).
    #[arg(long)]
    tile: Option<String>,
    #[command(flatten)]
    sel: AdapterSel,
}

pub fn cmd_sweep(a: SweepArgs) -> anyhow::Result<u8> {
    let seqs = sweep::parse_seq_list(&a.seq)?;
    let names = variant_list(&a.variants)?;
    let forced_tile = parse_tile(a.tile.as_deref())?;
    if forced_tile.is_some() && !names.iter().any(|n| n == "tiled") {
        return Err(bad(format!(
            "--tile sets the `tiled` variant's kernel; --variants `{}` has none (add tiled, or use all)",
            a.variants
        )));
    }
    dtype_check(&a.dtype)?;
    if a.reps == 0 {
        return Err(bad("--reps must be at least 1 (got 0)".into()));
    }
    if a.out_dir.exists() && !a.out_dir.is_dir() {
        return Err(bad(format!(
            "--out-dir {} is not a folder",
            a.out_dir.display()
        )));
    }
    let base = Problem::new(a.batch, a.heads, seqs[0], a.head_dim, !a.no_causal, a.seed);
    for &n in &seqs {
        Problem {
            seq: n,
            ..base.clone()
        }
        .validate()?;
    }
    std::fs::create_dir_all(&a.out_dir).map_err(|e| Error::Io {
        path: a.out_dir.display().to_string(),
        source: e,
    })?;
    let gpu = Gpu::open(&selection(&a.sel), features_of(&names))?;
    // Whether a tile fits depends on D and the adapter, not on N: refuse it once, before any work,
    // with the reason `run --variant tiled --tile ...` gives.
    if let Some(choice) = forced_tile {
        variants::tiled::config_for(choice, a.head_dim, &gpu.caps).map_err(|reason| {
            Error::Incompatible {
                variant: "tiled".into(),
                reason: format!("{reason} (tile from --tile)"),
            }
        })?;
    }
    let total = (seqs.len() * names.len()) as u64;
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(total),
        indicatif::ProgressDrawTarget::stderr(),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} [{elapsed}]")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let schedule = Schedule {
        warmup: a.warmup,
        reps: a.reps,
        // Not reported here: `run` measures the unprofiled host cost.
        host_reps: 0,
    };
    let tuned = find_tune(&gpu, a.tune.as_deref())?;
    let mut first = true;
    let points = sweep::run_grid(
        &gpu,
        &base,
        &seqs,
        &names,
        schedule,
        |v, n| {
            if !first {
                bar.inc(1);
            }
            first = false;
            bar.set_message(format!("{v} N={n}"));
        },
        |p| tile_request(&gpu, forced_tile, &tuned, p),
    )?;
    bar.inc(1);
    bar.finish_with_message("done");
    let csv = a.out_dir.join("sweep.csv");
    sweep::write_csv(&csv, &points)?;
    let js = a.out_dir.join("sweep.json");
    json::write_atomic(
        &js,
        &serde_json::json!({
            "schema_version": 1,
            "tool": "attn-wgpu sweep",
            "command": std::env::args().collect::<Vec<_>>().join(" "),
            "versions": json::versions(),
            "adapter": &gpu.report,
            "problem": &base,
            "seqs": &seqs,
            "timing": schedule,
            "points": &points,
        }),
    )?;
    let subtitle = format!(
        "{} {}, B={} H={} D={} {}",
        gpu.report.name.split(" (").next().unwrap_or(""),
        gpu.report.backend,
        a.batch,
        a.heads,
        a.head_dim,
        if a.no_causal { "non-causal" } else { "causal" }
    );
    let svgs = sweep::write_plots(&a.out_dir, &points, &subtitle)?;
    println!(
        "{:<16} {:>6} {:>12} {:>12} {:>12}  verdict",
        "variant", "N", "GPU med µs", "bytes moved", "memory"
    );
    for p in &points {
        println!(
            "{:<16} {:>6} {:>12} {:>12} {:>12}  {}",
            p.variant,
            p.seq,
            p.gpu_median_us.map_or("-".into(), |v| format!("{v:.1}")),
            p.bytes_moved
                .map_or("-".into(), attn_wgpu::report::table::bytes),
            p.memory_bytes
                .map_or("-".into(), attn_wgpu::report::table::bytes),
            p.verdict.as_deref().unwrap_or(p.status.as_str())
        );
    }
    for other in ["unfused", "unfused-inplace"] {
        if names.iter().any(|n| n == other) && names.iter().any(|n| n == "tiled") {
            match sweep::crossover(&points, other) {
                Some(n) => println!("crossover: tiled overtakes {other} from N={n}"),
                None if sweep::tiled_always_faster(&points, other) => println!(
                    "crossover: none — tiled is faster than {other} at every N of this grid"
                ),
                None => println!("crossover: none — tiled does not overtake {other} in this grid"),
            }
        }
    }
    eprintln!("wrote {}, {}", csv.display(), js.display());
    for s in svgs {
        eprintln!("wrote {}", s.display());
    }
    let failed = points
        .iter()
        .any(|p| p.status == "ok" && p.verdict.as_deref() != Some("PASS"));
    Ok(if failed { 3 } else { 0 })
}

// ---------------------------------------------------------------------------------------------
// explain

#[derive(Args)]
pub struct ExplainArgs {
    /// Variants, comma separated, or `all`.
    #[arg(long, default_value = "unfused,unfused-inplace,tiled")]
    variant: String,
    #[arg(long, default_value_t = 1)]
    batch: u32,
    #[arg(long, default_value_t = 2)]
    heads: u32,
    #[arg(long, default_value_t = 128)]
    seq: u32,
    #[arg(long, default_value_t = 64)]
    head_dim: u32,
    #[arg(long)]
    no_causal: bool,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[arg(long, default_value_t = 2)]
    warmup: u32,
    #[arg(long, default_value_t = 10)]
    reps: u32,
    /// Also write the trace of this run (see `run --trace`).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Force `tiled`'s tile (see `run --tile`).
    #[arg(long)]
    tile: Option<String>,
    /// Tune cache (see `run --tune`).
    #[arg(long)]
    tune: Option<PathBuf>,
    #[command(flatten)]
    sel: AdapterSel,
}

pub fn cmd_explain(a: ExplainArgs) -> anyhow::Result<u8> {
    let names = variant_list(&a.variant)?;
    if a.reps == 0 {
        return Err(bad("--reps must be at least 1 (got 0)".into()));
    }
    if let Some(t) = &a.trace {
        check_out_path("--trace", t)?;
    }
    let forced = parse_tile(a.tile.as_deref())?;
    let mut p = Problem::new(a.batch, a.heads, a.seq, a.head_dim, !a.no_causal, a.seed);
    p.validate()?;
    let gpu = Gpu::open(&selection(&a.sel), features_of(&names))?;
    let tuned = find_tune(&gpu, a.tune.as_deref())?;
    p.tile = tile_request(&gpu, forced, &tuned, &p);
    println!(
        "Explaining {} on {} ({}), {}; 1 cold call, {} warm-ups, {} recorded forwards\n",
        names.join(", "),
        gpu.report.name,
        gpu.report.backend,
        p.shape_string(),
        a.warmup,
        a.reps
    );
    let t = Instant::now();
    let x = Inputs::generate(&p);
    let inputs_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut runner = Runner::new(&gpu)?;
    runner.set_bounds_checks(false);
    let schedule = Schedule {
        warmup: a.warmup,
        reps: a.reps,
        // Not reported here: `run` measures the unprofiled host cost.
        host_reps: 0,
    };
    let mut runs = Vec::new();
    let mut walls = Vec::new();
    for n in &names {
        let t = Instant::now();
        let r = run_variant(&gpu, &mut runner, &p, &x, n, schedule, true)?;
        walls.push((n.clone(), t.elapsed().as_secs_f64() * 1e3));
        runs.push(r);
    }
    let extras = explain::HostExtras {
        device_setup_ms: gpu.setup_ms,
        inputs_ms,
        variant_wall_ms: walls,
    };
    print!("{}", explain::report(&p, &runs, &extras));
    if let Some(t) = &a.trace {
        write_trace(t, &gpu, &runner, &runs)?;
    }
    let failed = runs.iter().any(|r| r.status == "ok" && !r.passed());
    Ok(if failed { 3 } else { 0 })
}

/// Features the named variants use (see `variants::features_for`).
fn features_of(names: &[String]) -> wgpu::Features {
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    attn_wgpu::variants::features_for(&refs)
}
