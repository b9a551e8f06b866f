//! attn-wgpu command line: parse, call the library, print, exit code.
//!
//! Exit codes: 0 success; 1 runtime or GPU error; 2 bad input (arguments, sizes, unknown names);
//! 3 a result failed validation; 4 the requested variant cannot run here (the reason is printed).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use attn_wgpu::gpu::context::{enumerate, AdapterReport};
use attn_wgpu::gpu::runner::{Runner, Schedule};
use attn_wgpu::gpu::{AdapterSelection, Gpu};
use attn_wgpu::problem::{Inputs, Problem};
use attn_wgpu::report::{json, table};
use attn_wgpu::run::{run_variant, VariantRun};
use attn_wgpu::{variants, Error};

#[derive(Parser)]
#[command(
    name = "attn-wgpu",
    version,
    about = "Attention in WGSL on any wgpu adapter: per-dispatch GPU timestamps, traffic estimates, f64 validation"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one variant (or all) on generated inputs, time every dispatch, validate against f64.
    Run(RunArgs),
    /// List every adapter wgpu finds, with the features and limits that matter here, and which
    /// variants it can run (at the default run shape) or why not.
    Adapters(AdapterArgs),
}

#[derive(Args)]
struct AdapterSel {
    /// vulkan, metal, dx12, gl or all (default: WGPU_BACKEND, else all).
    #[arg(long)]
    backend: Option<String>,
    /// Case-insensitive substring of the adapter name (default: WGPU_ADAPTER_NAME).
    #[arg(long)]
    adapter: Option<String>,
}

#[derive(Args)]
struct AdapterArgs {
    #[command(flatten)]
    sel: AdapterSel,
}

/// The default run shape (also the shape `adapters` checks each variant against).
const DEFAULT_BATCH: u32 = 1;
const DEFAULT_HEADS: u32 = 4;
const DEFAULT_SEQ: u32 = 256;
const DEFAULT_HEAD_DIM: u32 = 64;

#[derive(Args)]
struct RunArgs {
    /// Variant to run: unfused, unfused-inplace, tiled, or all.
    #[arg(long, default_value = "tiled")]
    variant: String,
    #[arg(long, default_value_t = DEFAULT_BATCH)]
    batch: u32,
    #[arg(long, default_value_t = DEFAULT_HEADS)]
    heads: u32,
    /// Sequence length N.
    #[arg(long, default_value_t = DEFAULT_SEQ)]
    seq: u32,
    /// Head dimension D.
    #[arg(long, default_value_t = DEFAULT_HEAD_DIM)]
    head_dim: u32,
    /// Causal mask, top-left aligned (the default).
    #[arg(long, overrides_with = "no_causal")]
    causal: bool,
    /// No mask at all.
    #[arg(long)]
    no_causal: bool,
    /// Softmax scale (default 1/sqrt(D)).
    #[arg(long, allow_negative_numbers = true)]
    scale: Option<f32>,
    /// Storage dtype (f32 for now).
    #[arg(long, default_value = "f32")]
    dtype: String,
    /// Seed of the input generator (see README: same seed, same bits everywhere).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Forwards run after the cold call and before the recorded ones.
    #[arg(long, default_value_t = 3)]
    warmup: u32,
    /// Recorded forwards.
    #[arg(long, default_value_t = 20)]
    reps: u32,
    /// Keep wgpu's injected index clamping in the shaders (on), or trust the kernels' own bounds
    /// tests (off, the fast path; the test suite checks both).
    #[arg(long, default_value = "off", value_parser = ["on", "off"])]
    bounds_checks: String,
    /// Write the results file here (atomically).
    #[arg(long)]
    json: Option<PathBuf>,
    #[command(flatten)]
    sel: AdapterSel,
}

/// Exit code for a library error: bad input is 2, incompatibility 4, the rest 1.
fn code_for(e: &anyhow::Error) -> u8 {
    match e.downcast_ref::<Error>() {
        Some(Error::InvalidProblem(_)) | Some(Error::UnknownVariant(..)) => 2,
        Some(Error::NoAdapter(m)) if m.starts_with("unknown backend") => 2,
        Some(Error::Incompatible { .. }) => 4,
        _ => 1,
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(a) => cmd_run(a),
        Command::Adapters(a) => cmd_adapters(a),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(code_for(&e))
        }
    }
}

fn selection(s: &AdapterSel) -> AdapterSelection {
    AdapterSelection {
        backend: s.backend.clone(),
        name: s.adapter.clone(),
    }
}

fn cmd_adapters(a: AdapterArgs) -> anyhow::Result<u8> {
    let sel = selection(&a.sel);
    let (_instance, adapters) = enumerate(&sel)?;
    if adapters.is_empty() {
        println!("No adapter found. On Linux without a GPU: apt-get install mesa-vulkan-drivers");
        return Ok(1);
    }
    for (i, ad) in adapters.iter().enumerate() {
        let r = AdapterReport::new(ad);
        let c = &r.caps;
        println!("[{i}] {} — {} / {}", r.name, r.backend, r.device_type);
        println!("    driver: {} {}", r.driver, r.driver_info);
        println!(
            "    features: timestamps={} f16={} subgroups={} (size {}..{}) cooperative_matrix={}",
            c.timestamps,
            c.f16,
            c.subgroups,
            c.subgroup_min_size,
            c.subgroup_max_size,
            c.cooperative_matrix
        );
        println!(
            "    limits: workgroup storage {} B, invocations/workgroup {}, max storage binding {}, max buffer {}",
            c.max_workgroup_storage,
            c.max_invocations_per_workgroup,
            table::bytes(c.max_storage_binding),
            table::bytes(c.max_buffer)
        );
        let p = Problem::new(
            DEFAULT_BATCH,
            DEFAULT_HEADS,
            DEFAULT_SEQ,
            DEFAULT_HEAD_DIM,
            true,
            0,
        );
        let avail = variants::availability(&p, c);
        let can: Vec<&str> = avail
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(n, _)| *n)
            .collect();
        println!(
            "    variants (at the default run shape {}): can run: {}",
            p.shape_string(),
            if can.is_empty() {
                "none".to_string()
            } else {
                can.join(", ")
            }
        );
        for (name, r) in &avail {
            if let Err(why) = r {
                println!("      cannot run {name}: {why}");
            }
        }
    }
    Ok(0)
}

fn cmd_run(a: RunArgs) -> anyhow::Result<u8> {
    // Validate everything the user typed before touching the GPU.
    if a.dtype != "f32" {
        return Err(Error::InvalidProblem(format!(
            "--dtype `{}` is not supported (supported: f32)",
            a.dtype
        ))
        .into());
    }
    if a.reps == 0 {
        return Err(Error::InvalidProblem("--reps must be at least 1 (got 0)".into()).into());
    }
    let mut p = Problem::new(a.batch, a.heads, a.seq, a.head_dim, !a.no_causal, a.seed);
    if let Some(s) = a.scale {
        p.scale = s;
    }
    p.validate()?;
    let names: Vec<String> = if a.variant == "all" {
        variants::names().into_iter().map(String::from).collect()
    } else {
        variants::find(&a.variant)?;
        vec![a.variant.clone()]
    };
    if let Some(path) = &a.json {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(d) = dir {
            if !d.is_dir() {
                return Err(Error::InvalidProblem(format!(
                    "--json {}: folder {} does not exist",
                    path.display(),
                    d.display()
                ))
                .into());
            }
        }
        if path.is_dir() {
            return Err(
                Error::InvalidProblem(format!("--json {} is a folder", path.display())).into(),
            );
        }
    }

    let gpu = Gpu::open(&selection(&a.sel))?;
    let schedule = Schedule {
        warmup: a.warmup,
        reps: a.reps,
    };
    print!("{}", table::header(&gpu.report, &p, a.warmup, a.reps));
    let x = Inputs::generate(&p);
    let mut runner = Runner::new(&gpu)?;
    runner.set_bounds_checks(a.bounds_checks == "on");
    let all = a.variant == "all";
    let mut runs: Vec<VariantRun> = Vec::new();
    for name in &names {
        let r = run_variant(&gpu, &mut runner, &p, &x, name, schedule, all)
            .with_context(|| format!("variant `{name}`"))?;
        print!("{}", table::variant(&r));
        runs.push(r);
    }
    if runs.len() > 1 {
        print!("{}", table::summary(&runs));
    }
    if let Some(path) = &a.json {
        let mut warnings = Vec::new();
        for r in &runs {
            if let Some(m) = &r.measurement {
                warnings.extend(m.warnings.iter().map(|w| format!("{}: {w}", r.variant)));
            }
        }
        let file = json::ResultsFile {
            schema_version: json::SCHEMA_VERSION,
            tool: "attn-wgpu",
            command: std::env::args().collect::<Vec<_>>().join(" "),
            seed: p.seed,
            versions: json::versions(),
            adapter: &gpu.report,
            backend: &gpu.report.backend,
            problem: &p,
            dtype: p.dtype.name(),
            causal: p.causal,
            timing: schedule,
            bounds_checks: runner.bounds_checks(),
            device_setup_ms: gpu.setup_ms,
            runs: &runs,
            warnings,
        };
        json::write_atomic(path, &file)?;
        eprintln!("results written to {}", path.display());
    }
    let failed: Vec<&str> = runs
        .iter()
        .filter(|r| r.status == "ok" && !r.passed())
        .map(|r| r.variant.as_str())
        .collect();
    if !failed.is_empty() {
        eprintln!("validation FAILED: {}", failed.join(", "));
        return Ok(3);
    }
    Ok(0)
}
