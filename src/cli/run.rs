//! `run`: one variant (or all, or auto) on generated or given inputs; every dispatch timed,
//! every result validated against the f64 reference.
//!
//! Everything the user typed is checked before any work, in this order: arguments and output
//! paths (exit 2); the problem and the host memory it needs (exit 2, before any input is generated
//! or allocated); the adapter, and for one named variant its plan (exit 4 with the reason, before
//! the inputs are generated); then the inputs, the runs and the outputs.

use std::path::{Path, PathBuf};

use clap::Args;

use attn_wgpu::gpu::runner::{Runner, Schedule};
use attn_wgpu::mask::normalize;
use attn_wgpu::npy;
use attn_wgpu::problem::{Convention, DType, Inputs, Problem};
use attn_wgpu::report::{json, roofline, table};
use attn_wgpu::run::{run_variant, VariantRun};
use attn_wgpu::{variants, Error};

use super::args::{AdapterSel, ScheduleArgs, ShapeArgs, TileArgs, RUN, RUN_SEQ};
use super::tune::{find_tune, tile_request};
use super::{check_out_path, find_probe, print_roofline, write_trace};

#[derive(Args)]
pub struct RunArgs {
    /// Variant to run: unfused, unfused-inplace, unfused-coop, unfused-inplace-exp, math, tiled,
    /// tiled-coop, tiled-coop-vk, tiled-coop-cm2, split-kv; `all` (skips incompatible ones with their reasons) or `auto` (the
    /// fastest compatible one by the documented rule). `attn-wgpu adapters` lists what each adapter can run.
    #[arg(long, default_value = "tiled")]
    variant: String,
    /// Sequence length N (default 256; taken from --q when given).
    #[arg(long, allow_negative_numbers = true)]
    seq: Option<u32>,
    #[command(flatten)]
    shape: ShapeArgs,
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
    /// Q from a .npy file ([B, H, N, D], float32 or float16); --q, --k and --v go together.
    #[arg(long)]
    q: Option<PathBuf>,
    /// K from a .npy file (the shape and dtype of --q).
    #[arg(long)]
    k: Option<PathBuf>,
    /// V from a .npy file (the shape and dtype of --q).
    #[arg(long)]
    v: Option<PathBuf>,
    /// Write the output O as .npy (the run's dtype; bf16 as float32), atomically. One variant only.
    #[arg(long)]
    out: Option<PathBuf>,
    /// With --backward: the upstream gradient dO from a .npy file ([B, H, N, D], float32 or
    /// float16, rounded to the run's dtype; with --q, the dtype of --q). Default: drawn from the
    /// seed after V.
    #[arg(long = "do", value_name = "FILE")]
    d_o: Option<PathBuf>,
    /// With --backward: write dq.npy, dk.npy and dv.npy (the run's dtype; bf16 as float32) into
    /// this folder, atomically. One variant only.
    #[arg(long)]
    grad_out: Option<PathBuf>,
    /// Write the inputs (q.npy, k.npy, v.npy, with --backward do.npy and, with a mask, mask.npy:
    /// the normalized additive float32 bias) into this folder, to reproduce the run in PyTorch
    /// (bench/torch_sdpa.py --inputs).
    #[arg(long)]
    save_inputs: Option<PathBuf>,
    #[command(flatten)]
    schedule: ScheduleArgs,
    /// Host-only forwards after the recorded ones: the same passes without timestamp queries,
    /// timed on the host (encode + submit) to show the CPU cost without the profiler, run twice
    /// over (each forward waited for, then all back to back with one wait); 0 skips them.
    #[arg(long, allow_negative_numbers = true, default_value_t = Schedule::DEFAULT_HOST_REPS)]
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
    /// Write this run as a self-contained HTML report here (as `attn-wgpu report`).
    #[arg(long)]
    html: Option<PathBuf>,
    /// Probe file for the roofline columns (default: this adapter's file in the per-user cache).
    #[arg(long)]
    probe: Option<PathBuf>,
    /// The full report: per-dispatch times, host phases, traffic, memory, notes, validation
    /// details and the roofline per variant, then the summary. Default: one table (variant,
    /// dispatches, GPU median and p10–p90, memory, bytes moved, verdict). --json has everything.
    #[arg(long, short = 'v')]
    verbose: bool,
    #[command(flatten)]
    tile: TileArgs,
    #[command(flatten)]
    sel: AdapterSel,
}

fn bad(msg: String) -> anyhow::Error {
    Error::InvalidProblem(msg).into()
}

pub(super) fn parse_key_padding(s: &str) -> anyhow::Result<Vec<u32>> {
    s.split(',')
        .map(|t| {
            let t = t.trim();
            t.parse::<u32>().map_err(|e| {
                let why = match e.kind() {
                    std::num::IntErrorKind::PosOverflow => {
                        format!("is too large (at most {})", u32::MAX)
                    }
                    _ => "is not a non-negative integer".to_string(),
                };
                bad(format!("--key-padding `{s}`: `{t}` {why}"))
            })
        })
        .collect()
}

/// The problem from the command line, with Q/K/V and the files' dtype when they come from
/// --q/--k/--v files (`None`: to be generated once every check has passed). The mask is described and normalized here (its
/// bias is small next to Q/K/V and needed by the plans).
fn problem(a: &RunArgs) -> anyhow::Result<(Problem, Inputs, Option<DType>)> {
    let files = [&a.q, &a.k, &a.v];
    let given = files.iter().filter(|f| f.is_some()).count();
    if given != 0 && given != 3 {
        return Err(bad(
            "--q, --k and --v go together: give all three or none".into()
        ));
    }
    let dtype_arg = a.shape.dtype()?;
    let (mut p, mut x, file_dtype) = if let (Some(qp), Some(kp), Some(vp)) = (&a.q, &a.k, &a.v) {
        let q = npy::read_qkv(qp)?;
        let k = npy::read_qkv(kp)?;
        let v = npy::read_qkv(vp)?;
        // K and V: [B, Hkv, M, D] with Hkv dividing Q's H (grouped-query attention; Hkv = H
        // without it) and any M (keys), the same for both.
        for (path, t) in [(kp, &k), (vp, &v)] {
            let kv_ok = t.shape.len() == 4
                && q.shape.len() == 4
                && t.shape[0] == q.shape[0]
                && t.shape[2] > 0
                && t.shape[3] == q.shape[3]
                && t.shape[1] > 0
                && q.shape[1] % t.shape[1] == 0
                && t.shape == k.shape;
            if !kv_ok {
                return Err(bad(format!(
                    "{}: expected shape [B, Hkv, M, D] = [{}, Hkv, M, {}] with Hkv dividing H = {} \
                     and K, V alike (the shape of {} is {:?}), got {:?}",
                    path.display(),
                    q.shape.first().copied().unwrap_or(0),
                    q.shape.get(3).copied().unwrap_or(0),
                    q.shape.get(1).copied().unwrap_or(0),
                    qp.display(),
                    q.shape,
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
            ("--batch", a.shape.batch),
            ("--heads", a.shape.heads),
            ("--seq", a.seq),
            ("--head-dim", a.shape.head_dim),
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
        let mut p = Problem::new(
            shape[0],
            shape[1],
            shape[2],
            shape[3],
            a.shape.causal(),
            a.shape.seed,
        );
        p.kv_heads = k.shape[1] as u32;
        p.kv_seq = k.shape[2] as u32;
        for (flag, given, from_file) in [
            ("--kv-heads", a.shape.kv_heads, p.kv_heads),
            ("--kv-seq", a.shape.kv_seq, p.kv_seq),
        ] {
            if let Some(h) = given {
                if h != from_file {
                    return Err(bad(format!(
                        "{flag} {h} conflicts with {} of shape {:?}",
                        kp.display(),
                        k.shape
                    )));
                }
            }
        }
        a.shape.align(&mut p)?;
        p.dtype = dtype_arg.unwrap_or(q.dtype);
        p.tolerance = a.shape.tolerance()?;
        a.shape.training(&mut p)?;
        let x = Inputs {
            q: q.values,
            k: k.values,
            v: v.values,
            dtype: DType::F32,
            bias: None,
            d_o: None,
        }
        .rounded_to(p.dtype);
        (p, x, Some(q.dtype))
    } else {
        let p = a.shape.problem(a.seq.unwrap_or(RUN_SEQ), &RUN)?;
        let x = Inputs {
            q: vec![],
            k: vec![],
            v: vec![],
            dtype: p.dtype,
            bias: None,
            d_o: None,
        };
        (p, x, None)
    };
    if let Some(s) = a.shape.scale {
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
    Ok((p, x, file_dtype))
}

fn save_inputs(dir: &Path, p: &Problem, x: &Inputs) -> anyhow::Result<()> {
    let shape = p.qkv_shape();
    let kv = p.kv_shape();
    for (name, data, s) in [
        ("q.npy", &x.q, shape),
        ("k.npy", &x.k, kv),
        ("v.npy", &x.v, kv),
    ] {
        npy::write(&dir.join(name), &s, p.dtype, data)?;
    }
    if let Some(g) = &x.d_o {
        npy::write(&dir.join("do.npy"), &shape, p.dtype, g)?;
    }
    if let (Some(l), Some(b)) = (p.mask.bias, &x.bias) {
        let mshape = [l.batch as u64, l.heads as u64, p.seq as u64, p.seq as u64];
        npy::write(&dir.join("mask.npy"), &mshape, DType::F32, b)?;
    }
    if let Some(d) = p.dropout() {
        // Checked against MAX_SAVED_MASK before any work (check_keep_size): [B, H, N, M].
        let (n, m) = (p.seq as u64, p.kv_seq as u64);
        let keep = d.keep_mask(p.bh(), n, m);
        npy::write_bool(
            &dir.join("keep.npy"),
            &[p.batch as u64, p.heads as u64, n, m],
            &keep,
        )?;
    }
    Ok(())
}

/// keep.npy's elements, refused above [`attn_wgpu::dropout::MAX_SAVED_MASK`] (exit 2).
fn check_keep_size(p: &Problem) -> anyhow::Result<()> {
    let elems = p.scores_elems();
    if p.dropout > 0.0 && elems > attn_wgpu::dropout::MAX_SAVED_MASK {
        return Err(bad(format!(
            "--save-inputs with --dropout writes keep.npy, one byte per (b, h, i, j): B*H*N*N = \
             {elems} elements is above the limit of {} (256 MiB); use a smaller shape, or \
             regenerate the mask with the recipe in docs/training.md",
            attn_wgpu::dropout::MAX_SAVED_MASK
        )));
    }
    Ok(())
}

/// What `--variant` names: one registered variant, all of them, or auto's pick.
enum Selection {
    One(String),
    All,
    Auto,
}

pub fn cmd_run(a: RunArgs) -> anyhow::Result<u8> {
    // 1. Everything the user typed, before touching the GPU or generating anything.
    let schedule = a.schedule.schedule(&RUN, a.host_reps)?;
    let selection = selection(&a.variant)?;
    let forced_tile = a.tile.forced()?;
    let overrides = a.tile.overrides()?;
    check_tile_variant(&forced_tile, &selection)?;
    let grad_files = check_outputs(&a, &selection)?;
    let (mut p, mut x, file_dtype) = problem(&a)?;
    p.overrides = overrides;
    p.bwd_tile = a.tile.bwd_tile;
    if p.bwd_tile.is_some() && !p.backward {
        return Err(bad(
            "--bwd-tile sets the tile of tiled's fused backward: it needs --backward".into(),
        ));
    }
    p.bwd_dq_atomic = a.tile.bwd_dq == Some(crate::cli::args::BwdDq::Atomic);
    if a.tile.bwd_dq.is_some() && !p.backward {
        return Err(bad(
            "--bwd-dq sets how tiled's fused backward computes dQ: it needs --backward".into(),
        ));
    }
    if a.save_inputs.is_some() {
        check_keep_size(&p)?;
    }
    let d_o = match &a.d_o {
        Some(path) => Some(read_d_o(path, &p, file_dtype.zip(a.q.as_deref()))?),
        None => None,
    };
    // 2. The host must hold the inputs, the read-back and every kept output.
    let n_runs = match &selection {
        Selection::All => variants::names().len(),
        _ => 1,
    };
    attn_wgpu::budget::check_host(&p, n_runs)?;
    // 3. The adapter, and the variants that run on it (a named one that cannot is refused now,
    //    exit 4, before any input exists).
    let Opened {
        gpu,
        probe,
        names,
        auto_choice,
    } = open_adapter(&a, &mut p, selection, forced_tile)?;
    // 4. The inputs, then the runs.
    if file_dtype.is_none() {
        let bias = x.bias.take();
        x = Inputs::generate(&p);
        x.bias = bias;
    } else if p.backward {
        x.d_o = Some(Inputs::generate_d_o(&p));
    }
    if d_o.is_some() {
        x.d_o = d_o;
    }
    if let Some(d) = &a.save_inputs {
        std::fs::create_dir_all(d).map_err(|e| {
            bad(format!(
                "--save-inputs {}: cannot create the folder: {e}",
                d.display()
            ))
        })?;
        save_inputs(d, &p, &x)?;
        eprintln!("inputs written to {}", d.display());
    }
    print!("{}", table::header(&gpu.report, &p, &schedule));
    if let Some(c) = &auto_choice {
        print!("{}", table::auto(c));
    }
    let mut runner = Runner::new(&gpu)?;
    runner.set_bounds_checks(a.bounds_checks == "on");
    let mut runs = run_all(&gpu, &mut runner, &p, &x, &names, schedule, a.verbose)?;
    print_runs(&probe, &runs, &p, a.verbose);
    // 5. The outputs: every file the user asked for, then the verdict.
    let roofline_source = probe.as_ref().map(|(f, path)| {
        roofline::annotate(f, &mut runs, p.dtype.name());
        roofline::source(f, path, &attn_wgpu::probe::key(&gpu.report), p.dtype.name())
    });
    let failed: Vec<&str> = runs
        .iter()
        .filter(|r| r.ran() && !r.passed())
        .map(|r| r.variant.as_str())
        .collect();
    let errored: Vec<&str> = runs
        .iter()
        .filter(|r| r.status == attn_wgpu::run::RunStatus::Error)
        .map(|r| r.variant.as_str())
        .collect();
    let done = Done {
        gpu: &gpu,
        runner: &runner,
        p: &p,
        schedule,
        runs: &runs,
        auto_choice: auto_choice.as_ref(),
        roofline_source,
        failed: !failed.is_empty() || !errored.is_empty(),
    };
    write_outputs(&a, &grad_files, &done)?;
    if !failed.is_empty() {
        eprintln!("validation FAILED: {}", failed.join(", "));
        return Ok(3);
    }
    if !errored.is_empty() {
        eprintln!(
            "failed on the GPU (the other variants ran): {}",
            errored.join(", ")
        );
        return Ok(1);
    }
    Ok(0)
}

/// `--variant`: all, auto or one registered name (exit 2 naming an unknown one).
fn selection(variant: &str) -> anyhow::Result<Selection> {
    Ok(match variant {
        "all" => Selection::All,
        "auto" => Selection::Auto,
        name => {
            variants::find(name)?;
            Selection::One(name.to_string())
        }
    })
}

/// `--tile` with one named variant: that variant must take a tile (exit 2 otherwise).
fn check_tile_variant(
    forced_tile: &Option<attn_wgpu::tile::TileChoice>,
    selection: &Selection,
) -> anyhow::Result<()> {
    if let (Some(_), Selection::One(name)) = (forced_tile, selection) {
        if !variants::find(name).is_ok_and(|v| v.tiles) {
            return Err(bad(format!(
                "--tile sets the {} variant's kernel; `{name}` has none (use --variant {}, auto or all)",
                super::tile_variant_names(),
                super::tile_variant_names()
            )));
        }
    }
    Ok(())
}

/// Every output path, checked before any work: writable, one variant where the output holds
/// one, training outputs only with `--backward`, and no output naming an input or another
/// output (compared as files). Returns the `--grad-out`
/// files (dq.npy, dk.npy, dv.npy).
fn check_outputs(a: &RunArgs, selection: &Selection) -> anyhow::Result<Vec<PathBuf>> {
    if let Some(path) = &a.json {
        check_out_path("--json", path)?;
    }
    if let Some(path) = &a.out {
        if matches!(selection, Selection::All) {
            return Err(bad(
                "--out writes one output: pick one variant (or auto), not all".into(),
            ));
        }
        check_out_path("--out", path)?;
    }
    if !a.shape.backward {
        for (flag, given) in [
            ("--do", a.d_o.is_some()),
            ("--grad-out", a.grad_out.is_some()),
        ] {
            if given {
                return Err(bad(format!(
                    "{flag} belongs to a training run: add --backward"
                )));
            }
        }
    }
    let grad_files: Vec<PathBuf> = match &a.grad_out {
        Some(d) => {
            if matches!(selection, Selection::All) {
                return Err(bad(
                    "--grad-out writes one variant's gradients: pick one variant (or auto), not all"
                        .into(),
                ));
            }
            if !d.is_dir() {
                return Err(bad(format!(
                    "--grad-out {}: no such folder (create it first)",
                    d.display()
                )));
            }
            let files: Vec<PathBuf> = ["dq.npy", "dk.npy", "dv.npy"]
                .iter()
                .map(|f| d.join(f))
                .collect();
            for f in &files {
                check_out_path("--grad-out", f)?;
            }
            files
        }
        None => vec![],
    };
    if let Some(t) = &a.trace {
        check_out_path("--trace", t)?;
    }
    if let Some(h) = &a.html {
        check_out_path("--html", h)?;
    }
    let saved: Vec<PathBuf> = match &a.save_inputs {
        Some(d) => ["q.npy", "k.npy", "v.npy", "mask.npy", "do.npy", "keep.npy"]
            .iter()
            .map(|f| d.join(f))
            .collect(),
        None => vec![],
    };
    {
        use attn_wgpu::outfile::Named;
        let inputs = [
            ("--q", &a.q),
            ("--k", &a.k),
            ("--v", &a.v),
            ("--mask", &a.mask),
            ("--do", &a.d_o),
            ("--probe", &a.probe),
            ("--tune", &a.tile.tune),
        ];
        let outputs = [
            ("--out", &a.out),
            ("--json", &a.json),
            ("--trace", &a.trace),
            ("--html", &a.html),
        ];
        // A failing run writes `<stem>.failed.<ext>` beside an output that is already there: that
        // name the tool derives must not be an input or another output either.
        let failed = |flag: &str, p: &Path| {
            let f = attn_wgpu::outfile::failed_run_path(p);
            (f != p).then(|| (format!("{flag} (the .failed file of a failing run)"), f))
        };
        let derived: Vec<(String, PathBuf)> = outputs
            .iter()
            .filter_map(|(flag, p)| p.as_deref().and_then(|p| failed(flag, p)))
            .chain(grad_files.iter().filter_map(|g| failed("--grad-out", g)))
            .collect();
        let named: Vec<Named> = inputs
            .iter()
            .filter_map(|(flag, p)| p.as_deref().map(|p| Named::input(flag, p)))
            .chain(
                outputs
                    .iter()
                    .filter_map(|(flag, p)| p.as_deref().map(|p| Named::output(flag, p))),
            )
            .chain(saved.iter().map(|s| Named::output("--save-inputs", s)))
            .chain(grad_files.iter().map(|s| Named::output("--grad-out", s)))
            .chain(derived.iter().map(|(flag, p)| Named::output(flag, p)))
            .collect();
        super::check_distinct(&named)?;
    }
    if let Some(d) = &a.save_inputs {
        if d.is_dir() {
            for s in &saved {
                check_out_path("--save-inputs", s)?;
            }
        } else {
            // Made only once the run goes ahead (a refused run leaves no empty folder): for now,
            // that it can be made (its parent is a folder that takes a new entry).
            let parent = match d.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            if d.exists() || !parent.is_dir() {
                return Err(bad(format!(
                    "--save-inputs {}: cannot create the folder: {} is not a folder",
                    d.display(),
                    if d.exists() { d } else { parent }.display()
                )));
            }
            check_out_path("--save-inputs", d)?;
        }
    }
    Ok(grad_files)
}

/// The adapter a run opened, its probe file, and the variants that will run on it.
struct Opened {
    gpu: attn_wgpu::gpu::Gpu,
    probe: Option<(attn_wgpu::probe::ProbeFile, String)>,
    names: Vec<String>,
    auto_choice: Option<variants::AutoChoice>,
}

/// Opens the adapter with the features of the variants that may run (and f16 arithmetic for
/// f16 storage), reads its probe file, sets the tile (`--tile`, else the tune cache), and resolves the selection into
/// the variants that will run: a named one is planned now (exit 4 if it cannot run here), auto
/// picks one and says why not the others.
fn open_adapter(
    a: &RunArgs,
    p: &mut Problem,
    selection: Selection,
    forced_tile: Option<attn_wgpu::tile::TileChoice>,
) -> anyhow::Result<Opened> {
    let candidates: Vec<String> = match &selection {
        Selection::One(n) => vec![n.clone()],
        _ => variants::names().into_iter().map(String::from).collect(),
    };
    let gpu = a.sel.open(super::features_of(&candidates, p.dtype))?;
    let probe = find_probe(&gpu, a.probe.as_deref())?;
    let tuned = find_tune(&gpu, a.tile.tune.as_deref())?;
    p.tile = tile_request(&gpu, forced_tile, &tuned, p);
    if let (Some(path), None) = (&a.tile.tune, &p.tile) {
        eprintln!(
            "note: {} has no entry for `{}`: default tile",
            path.display(),
            attn_wgpu::tune::ShapeClass::of(
                variants::tile_variants().first().map_or("", |v| v.name()),
                p
            )
            .key()
        );
    }
    Ok(match selection {
        Selection::One(n) => {
            variants::plan(&n, p, &gpu.caps)?;
            Opened {
                gpu,
                probe,
                names: vec![n],
                auto_choice: None,
            }
        }
        Selection::Auto => {
            let c = variants::auto(p, &gpu.caps)?;
            Opened {
                gpu,
                probe,
                names: vec![c.picked.clone()],
                auto_choice: Some(c),
            }
        }
        Selection::All => Opened {
            gpu,
            probe,
            names: candidates,
            auto_choice: None,
        },
    })
}

/// Runs every named variant on the same inputs, a progress bar on a terminal between them (no
/// ticking thread writes while forwards are timed); `--verbose` prints each as it ends.
fn run_all(
    gpu: &attn_wgpu::gpu::Gpu,
    runner: &mut Runner,
    p: &Problem,
    x: &Inputs,
    names: &[String],
    schedule: Schedule,
    verbose: bool,
) -> anyhow::Result<Vec<VariantRun>> {
    let all = names.len() > 1;
    let mut runs = Vec::new();
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(names.len() as u64),
        indicatif::ProgressDrawTarget::stderr(),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} variants {msg} [{elapsed}]")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    for name in names {
        bar.set_message(name.clone());
        // Name the variant in the error unless the error already does.
        let named = |e: Error| {
            let named = e.to_string().contains(&format!("`{name}`"));
            let e = anyhow::Error::from(e);
            if named {
                e
            } else {
                e.context(format!("variant `{name}`"))
            }
        };
        let r = match run_variant(gpu, runner, p, x, name, schedule, all) {
            Ok(r) => r,
            // In a run of several variants, a GPU error of one (a driver refusing its kernel,
            // say) is that variant's row and the others still run; a lost device, a timeout or
            // anything else stops the run.
            Err(e @ Error::Gpu { .. }) if all => {
                bar.suspend(|| eprintln!("variant `{name}` failed on the GPU: {e}"));
                VariantRun::errored(name, e.to_string())
            }
            Err(e) => return Err(named(e)),
        };
        if verbose {
            print!("{}", table::variant(&r));
        }
        bar.inc(1);
        runs.push(r);
    }
    bar.finish_and_clear();
    Ok(runs)
}

/// The terminal's account of the runs: the compact table, or with `--verbose` the roofline and
/// the summary last (the verdicts are what stays on the screen); the training table either way.
fn print_runs(
    probe: &Option<(attn_wgpu::probe::ProbeFile, String)>,
    runs: &[VariantRun],
    p: &Problem,
    verbose: bool,
) {
    if verbose {
        print_roofline(probe, runs, p.dtype.name());
        if runs.len() > 1 {
            print!("{}", table::summary(runs));
        }
        print!("{}", table::training(runs));
    } else {
        println!();
        print!("{}", table::compact(runs));
        print!("{}", table::training(runs));
        println!(
            "(--verbose: per-dispatch times, host phases, traffic, notes and the roofline; --json \
             FILE: everything)"
        );
    }
}

/// What a finished run hands to its outputs.
struct Done<'a> {
    gpu: &'a attn_wgpu::gpu::Gpu,
    runner: &'a Runner<'a>,
    p: &'a Problem,
    schedule: Schedule,
    runs: &'a [VariantRun],
    auto_choice: Option<&'a variants::AutoChoice>,
    roofline_source: Option<roofline::RooflineSource>,
    /// A variant failed validation: its files never replace an earlier file, they go beside it
    /// as `<stem>.failed.<ext>` when something is already there.
    failed: bool,
}

/// Writes `--trace`, `--json`, `--html`, `--out` and `--grad-out`, each atomically.
fn write_outputs(a: &RunArgs, grad_files: &[PathBuf], d: &Done) -> anyhow::Result<()> {
    let dest = |path: &PathBuf| -> PathBuf {
        if d.failed {
            attn_wgpu::outfile::failed_run_path(path)
        } else {
            path.clone()
        }
    };
    let (gpu, p, runs) = (d.gpu, d.p, d.runs);
    if let Some(t) = &a.trace {
        write_trace(&dest(t), gpu, d.runner, runs)?;
    }
    if a.json.is_some() || a.html.is_some() {
        let mut file =
            json::ResultsFile::new(p, &gpu.report, &gpu.report.backend, d.schedule, runs);
        file.bounds_checks = d.runner.bounds_checks();
        file.device_setup_ms = gpu.setup_ms;
        file.auto = d.auto_choice;
        file.roofline = d.roofline_source.clone();
        if let Some(path) = &a.json {
            let path = &dest(path);
            json::write_atomic(path, &file)?;
            eprintln!("results written to {}", path.display());
        }
        if let Some(path) = &a.html {
            let path = &dest(path);
            let value = serde_json::to_value(&file).map_err(|e| anyhow::anyhow!("{e}"))?;
            let page = attn_wgpu::report::html::page(&[attn_wgpu::report::html::Input {
                name: "this run".into(),
                value,
            }]);
            attn_wgpu::outfile::write_atomic(path, page.as_bytes())?;
            eprintln!("HTML report written to {}", path.display());
        }
    }
    let first = runs.first().and_then(|r| r.measurement.as_ref());
    if let (Some(path), Some(m)) = (&a.out, first) {
        let path = &dest(path);
        npy::write(path, &p.qkv_shape(), p.dtype, &m.output)?;
        eprintln!("output written to {}", path.display());
    }
    if let (false, Some(m)) = (grad_files.is_empty(), first) {
        // dQ as Q; dK and dV as K and V ([B, Hkv, N, D]).
        let shapes = [p.qkv_shape(), p.kv_shape(), p.kv_shape()];
        for ((path, g), shape) in grad_files.iter().zip(&m.grads).zip(&shapes) {
            npy::write(&dest(path), shape, p.dtype, g)?;
        }
        eprintln!(
            "gradients written to {}",
            a.grad_out
                .as_ref()
                .map_or(String::new(), |d| d.display().to_string())
        );
    }
    Ok(())
}

/// `--do FILE`: the upstream gradient, of the problem's shape, float32 or float16 (with --q, of
/// the dtype of the --q file, given with its path), rounded to the run's dtype (exit 2 naming
/// what does not match).
fn read_d_o(path: &Path, p: &Problem, q: Option<(DType, &Path)>) -> anyhow::Result<Vec<f32>> {
    let t = npy::read_qkv(path)?;
    let want = p.qkv_shape();
    if t.shape != want {
        return Err(bad(format!(
            "--do {}: expected shape {want:?} ([B, H, N, D] of the run), got {:?}",
            path.display(),
            t.shape
        )));
    }
    if let Some((dtype, qp)) = q {
        if dtype != t.dtype {
            return Err(bad(format!(
                "--do {}: expected dtype {} (the dtype of {}), got {}",
                path.display(),
                dtype.name(),
                qp.display(),
                t.dtype.name()
            )));
        }
    }
    Ok(t.values.iter().map(|v| p.dtype.round(*v)).collect())
}
