//! attn-wgpu command line: parse, call the library, print, exit code.
//!
//! Exit codes: 0 success; 1 runtime or GPU error; 2 bad input (arguments, sizes, unknown names);
//! 3 a result failed validation; 4 the requested variant cannot run here (the reason is printed).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use attn_wgpu::gpu::context::{enumerate, AdapterReport};
use attn_wgpu::gpu::runner::{Runner, Schedule};
use attn_wgpu::gpu::{AdapterSelection, Gpu};
use attn_wgpu::mask::normalize;
use attn_wgpu::npy;
use attn_wgpu::problem::{Convention, DType, Inputs, Problem};
use attn_wgpu::report::{json, roofline, table};
use attn_wgpu::run::{run_variant, VariantRun};
use attn_wgpu::{variants, Error};

mod cli;

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
    Run(Box<RunArgs>),
    /// List every adapter wgpu finds, with the features and limits that matter here, and which
    /// variants it can run (at the default run shape) or why not.
    Adapters(AdapterArgs),
    /// Measure this adapter's copy bandwidth and FMA rate (the roofline `run` prints).
    Probe(cli::ProbeArgs),
    /// Merge result files (attn-wgpu and bench/torch_sdpa.py) into Markdown tables.
    Compare(cli::CompareArgs),
    /// Run a grid of sequence lengths x variants: CSV, JSON and SVG plots.
    Sweep(cli::SweepArgs),
    /// Teaching demo: plan vs timestamps, six questions, fusion vs materialization.
    Explain(cli::ExplainArgs),
    /// Search the `tiled` variant's tile configurations for this adapter and one shape class;
    /// validate each; cache the fastest passing one for `run`.
    Tune(cli::TuneArgs),
}

#[derive(Args)]
pub(crate) struct AdapterSel {
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
pub(crate) const DEFAULT_BATCH: u32 = 1;
pub(crate) const DEFAULT_HEADS: u32 = 4;
pub(crate) const DEFAULT_SEQ: u32 = 256;
pub(crate) const DEFAULT_HEAD_DIM: u32 = 64;

#[derive(Args)]
struct RunArgs {
    /// Variant to run: unfused, unfused-inplace, math, tiled, tiled-subgroup, tiled-coop; `all`
    /// (skips incompatible ones with their reasons) or `auto` (the fastest compatible one by the
    /// documented rule). `attn-wgpu adapters` lists what each adapter can run.
    #[arg(long, default_value = "tiled")]
    variant: String,
    /// B (default 1; taken from --q when given).
    #[arg(long)]
    batch: Option<u32>,
    /// H (default 4; taken from --q when given).
    #[arg(long)]
    heads: Option<u32>,
    /// Sequence length N (default 256; taken from --q when given).
    #[arg(long)]
    seq: Option<u32>,
    /// Head dimension D (default 64; taken from --q when given).
    #[arg(long)]
    head_dim: Option<u32>,
    /// Causal mask, top-left aligned (the default). With --mask / --key-padding: their intersection.
    #[arg(long, overrides_with = "no_causal")]
    causal: bool,
    /// No causal mask.
    #[arg(long)]
    no_causal: bool,
    /// Softmax scale (default 1/sqrt(D)).
    #[arg(long, allow_negative_numbers = true)]
    scale: Option<f32>,
    /// Storage dtype: f32, f16 or bf16 (default f32, or the dtype of the --q/--k/--v files).
    #[arg(long)]
    dtype: Option<String>,
    /// Explicit mask: .npy, bool or float32, [N, N] or [B, 1 or H, N, N]. A float mask is added to
    /// the scores; a bool mask is read by --mask-convention.
    #[arg(long)]
    mask: Option<PathBuf>,
    /// How a bool mask is read: sdpa (True = takes part) or mha (True = blocked).
    #[arg(long, default_value = "sdpa")]
    mask_convention: String,
    /// Valid keys per batch element, e.g. `--key-padding 5,8` for B=2 (keys j >= L_b are blocked).
    #[arg(long, allow_negative_numbers = true)]
    key_padding: Option<String>,
    /// Q, K, V from .npy files ([B, H, N, D], float32 or float16); all three together.
    #[arg(long)]
    q: Option<PathBuf>,
    #[arg(long)]
    k: Option<PathBuf>,
    #[arg(long)]
    v: Option<PathBuf>,
    /// Write the output O as .npy (the run's dtype; bf16 as float32), atomically. One variant only.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write the inputs (q.npy, k.npy, v.npy and, with a mask, mask.npy: the normalized additive
    /// float32 bias) into this folder, to reproduce the run in PyTorch (bench/torch_sdpa.py --inputs).
    #[arg(long)]
    save_inputs: Option<PathBuf>,
    /// Seed of the input generator (see README: same seed, same bits everywhere).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Forwards run after the cold call and before the recorded ones.
    #[arg(long, default_value_t = 3)]
    warmup: u32,
    /// Recorded forwards.
    #[arg(long, default_value_t = 20)]
    reps: u32,
    /// Host-only forwards after the recorded ones: the same passes without timestamp queries,
    /// timed on the host (encode + submit) to show the CPU cost without the profiler, run twice
    /// over (each forward waited for, then all back to back with one wait); 0 skips them.
    #[arg(long, default_value_t = Schedule::DEFAULT_HOST_REPS)]
    host_reps: u32,
    /// Keep wgpu's injected index clamping in the shaders (on), or trust the kernels' own bounds
    /// tests (off, the fast path; the test suite checks both).
    #[arg(long, default_value = "off", value_parser = ["on", "off"])]
    bounds_checks: String,
    /// Write the results file here (atomically).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write a Chrome trace (Perfetto, chrome://tracing) with CPU and GPU lanes here.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Probe file for the roofline columns (default: this adapter's file in the per-user cache).
    #[arg(long)]
    probe: Option<PathBuf>,
    /// Force the `tiled` variant's tile configuration: `rt` (the register-tiled kernel) or
    /// `row:BR` (one row per thread, BR rows a workgroup, e.g. `row:32`). Wins over the tune cache.
    #[arg(long)]
    tile: Option<String>,
    /// Tune cache to use (default: this adapter's file in the per-user cache, written by
    /// `attn-wgpu tune`); an entry of this run's shape class sets the `tiled` tile.
    #[arg(long)]
    tune: Option<PathBuf>,
    #[command(flatten)]
    sel: AdapterSel,
}

/// Exit code for a library error: bad input is 2, incompatibility 4, the rest 1.
fn code_for(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<cli::BadInput>().is_some() {
        return 2;
    }
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
        Command::Run(a) => cmd_run(*a),
        Command::Adapters(a) => cmd_adapters(a),
        Command::Probe(a) => cli::cmd_probe(a),
        Command::Compare(a) => cli::cmd_compare(a),
        Command::Sweep(a) => cli::cmd_sweep(a),
        Command::Explain(a) => cli::cmd_explain(a),
        Command::Tune(a) => cli::cmd_tune(a),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(code_for(&e))
        }
    }
}

pub(crate) fn selection(s: &AdapterSel) -> AdapterSelection {
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

fn bad(msg: String) -> anyhow::Error {
    Error::InvalidProblem(msg).into()
}

fn parse_key_padding(s: &str) -> anyhow::Result<Vec<u32>> {
    s.split(',')
        .map(|t| {
            t.trim().parse::<u32>().map_err(|_| {
                bad(format!(
                    "--key-padding `{s}`: `{}` is not a non-negative integer",
                    t.trim()
                ))
            })
        })
        .collect()
}

/// Problem and inputs from the command line: generated, or read from --q/--k/--v.
fn problem_and_inputs(a: &RunArgs) -> anyhow::Result<(Problem, Inputs)> {
    let causal = !a.no_causal;
    let files = [&a.q, &a.k, &a.v];
    let given = files.iter().filter(|f| f.is_some()).count();
    if given != 0 && given != 3 {
        return Err(bad(
            "--q, --k and --v go together: give all three or none".into()
        ));
    }
    let dtype_arg = a.dtype.as_deref().map(DType::parse).transpose()?;
    let (mut p, mut x) = if let (Some(qp), Some(kp), Some(vp)) = (&a.q, &a.k, &a.v) {
        let q = npy::read_qkv(qp)?;
        let k = npy::read_qkv(kp)?;
        let v = npy::read_qkv(vp)?;
        for (path, t) in [(kp, &k), (vp, &v)] {
            if t.shape != q.shape {
                return Err(bad(format!(
                    "{}: expected shape {:?} (the shape of {}), got {:?}",
                    path.display(),
                    q.shape,
                    qp.display(),
                    t.shape
                )));
            }
            if t.dtype != q.dtype {
                return Err(bad(format!(
                    "{}: expected dtype {} (the dtype of {}), got {}",
                    path.display(),
                    q.dtype.name(),
                    qp.display(),
                    t.dtype.name()
                )));
            }
        }
        let dims = [
            ("--batch", a.batch),
            ("--heads", a.heads),
            ("--seq", a.seq),
            ("--head-dim", a.head_dim),
        ];
        let mut shape = [0u32; 4];
        for (i, (flag, val)) in dims.iter().enumerate() {
            let from_file = q.shape[i];
            if from_file > u32::MAX as u64 {
                return Err(bad(format!(
                    "{}: dimension {from_file} is too large",
                    qp.display()
                )));
            }
            if let Some(v) = val {
                if *v as u64 != from_file {
                    return Err(bad(format!(
                        "{flag} {v} conflicts with {} of shape {:?}",
                        qp.display(),
                        q.shape
                    )));
                }
            }
            shape[i] = from_file as u32;
        }
        let mut p = Problem::new(shape[0], shape[1], shape[2], shape[3], causal, a.seed);
        p.dtype = dtype_arg.unwrap_or(q.dtype);
        let x = Inputs {
            q: q.values,
            k: k.values,
            v: v.values,
            dtype: DType::F32,
            bias: None,
        }
        .rounded_to(p.dtype);
        (p, x)
    } else {
        let mut p = Problem::new(
            a.batch.unwrap_or(DEFAULT_BATCH),
            a.heads.unwrap_or(DEFAULT_HEADS),
            a.seq.unwrap_or(DEFAULT_SEQ),
            a.head_dim.unwrap_or(DEFAULT_HEAD_DIM),
            causal,
            a.seed,
        );
        p.dtype = dtype_arg.unwrap_or(DType::F32);
        if let Some(s) = a.scale {
            p.scale = s;
        }
        p.validate()?;
        let x = Inputs::generate(&p);
        (p, x)
    };
    if let Some(s) = a.scale {
        p.scale = s;
    }
    p.validate()?;
    let convention = Convention::parse(&a.mask_convention)?;
    let user = a.mask.as_deref().map(npy::read_mask).transpose()?;
    let kp = a
        .key_padding
        .as_deref()
        .map(parse_key_padding)
        .transpose()?;
    normalize(&mut p, &mut x, user.as_ref(), convention, kp.as_deref())?;
    Ok((p, x))
}

fn save_inputs(dir: &Path, p: &Problem, x: &Inputs) -> anyhow::Result<()> {
    let shape = [
        p.batch as u64,
        p.heads as u64,
        p.seq as u64,
        p.head_dim as u64,
    ];
    for (name, data) in [("q.npy", &x.q), ("k.npy", &x.k), ("v.npy", &x.v)] {
        npy::write(&dir.join(name), &shape, p.dtype, data)?;
    }
    if let (Some(l), Some(b)) = (p.mask.bias, &x.bias) {
        let mshape = [l.batch as u64, l.heads as u64, p.seq as u64, p.seq as u64];
        npy::write(&dir.join("mask.npy"), &mshape, DType::F32, b)?;
    }
    Ok(())
}

fn cmd_run(a: RunArgs) -> anyhow::Result<u8> {
    // Validate everything the user typed before touching the GPU.
    if a.reps == 0 {
        return Err(bad("--reps must be at least 1 (got 0)".into()));
    }
    let special = a.variant == "all" || a.variant == "auto";
    if !special {
        variants::find(&a.variant)?;
    }
    let forced_tile = cli::parse_tile(a.tile.as_deref())?;
    if forced_tile.is_some() && !special && a.variant != "tiled" {
        return Err(bad(format!(
            "--tile sets the `tiled` variant's kernel; `{}` has none (use --variant tiled, auto or all)",
            a.variant
        )));
    }
    if let Some(path) = &a.json {
        cli::check_out_path("--json", path)?;
    }
    if let Some(path) = &a.out {
        if a.variant == "all" {
            return Err(bad(
                "--out writes one output: pick one variant (or auto), not all".into(),
            ));
        }
        cli::check_out_path("--out", path)?;
    }
    if let Some(d) = &a.save_inputs {
        if !d.is_dir() {
            return Err(bad(format!(
                "--save-inputs {}: folder does not exist",
                d.display()
            )));
        }
    }
    let (mut p, x) = problem_and_inputs(&a)?;
    if let Some(d) = &a.save_inputs {
        save_inputs(d, &p, &x)?;
        eprintln!("inputs written to {}", d.display());
    }

    if let Some(t) = &a.trace {
        cli::check_out_path("--trace", t)?;
    }
    // Features: those of the variants that may run, and f16 arithmetic for f16 storage.
    let candidates: Vec<&str> = if special {
        variants::names()
    } else {
        vec![a.variant.as_str()]
    };
    let mut wanted = variants::features_for(&candidates);
    if p.dtype == DType::F16 {
        wanted |= wgpu::Features::SHADER_F16;
    }
    let gpu = Gpu::open(&selection(&a.sel), wanted)?;
    let probe = cli::find_probe(&gpu, a.probe.as_deref())?;
    let tuned = cli::find_tune(&gpu, a.tune.as_deref())?;
    p.tile = cli::tile_request(&gpu, forced_tile, &tuned, &p);
    if let (Some(path), None) = (&a.tune, &p.tile) {
        eprintln!(
            "note: {} has no entry for `{}`: default tile",
            path.display(),
            attn_wgpu::tune::ShapeClass::of("tiled", &p).key()
        );
    }
    let schedule = Schedule {
        warmup: a.warmup,
        reps: a.reps,
        host_reps: a.host_reps,
    };
    print!("{}", table::header(&gpu.report, &p, a.warmup, a.reps));
    let mut auto_choice = None;
    let names: Vec<String> = match a.variant.as_str() {
        "all" => variants::names().into_iter().map(String::from).collect(),
        "auto" => {
            let c = variants::auto(&p, &gpu.caps)?;
            print!("{}", table::auto(&c));
            let picked = c.picked.clone();
            auto_choice = Some(c);
            vec![picked]
        }
        v => vec![v.to_string()],
    };
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
    cli::print_roofline(&probe, &runs, p.dtype.name());
    let roofline_source = probe.as_ref().map(|(f, path)| {
        roofline::annotate(f, &mut runs, p.dtype.name());
        roofline::source(f, path, &attn_wgpu::probe::key(&gpu.report), p.dtype.name())
    });
    if let Some(t) = &a.trace {
        cli::write_trace(t, &gpu, &runner, &runs)?;
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
            auto: auto_choice.as_ref(),
            runs: &runs,
            roofline: roofline_source,
            warnings,
        };
        json::write_atomic(path, &file)?;
        eprintln!("results written to {}", path.display());
    }
    if let Some(path) = &a.out {
        if let Some(m) = runs.first().and_then(|r| r.measurement.as_ref()) {
            let shape = [
                p.batch as u64,
                p.heads as u64,
                p.seq as u64,
                p.head_dim as u64,
            ];
            npy::write(path, &shape, p.dtype, &m.output)?;
            eprintln!("output written to {}", path.display());
        }
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
