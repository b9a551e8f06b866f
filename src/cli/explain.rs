//! `explain`: the teaching demo: plan vs timestamps, six questions, fusion vs materialization.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;

use attn_wgpu::explain;
use attn_wgpu::gpu::runner::Runner;
use attn_wgpu::problem::Inputs;
use attn_wgpu::report::table;
use attn_wgpu::run::run_variant;

use super::args::{AdapterSel, Defaults, ScheduleArgs, ShapeArgs, TileArgs};
use super::tune::{find_tune, tile_request};
use super::{check_out_path, features_of, variant_list, write_trace};

const DEFAULTS: Defaults = Defaults {
    batch: 1,
    heads: 2,
    head_dim: 64,
    warmup: 2,
    reps: 10,
};

#[derive(Args)]
pub struct ExplainArgs {
    /// Variants, comma separated, or `all`.
    #[arg(long, default_value = "unfused,unfused-inplace,tiled")]
    variant: String,
    /// Sequence length N.
    #[arg(long, allow_negative_numbers = true, default_value_t = 128)]
    seq: u32,
    #[command(flatten)]
    shape: ShapeArgs,
    #[command(flatten)]
    schedule: ScheduleArgs,
    /// Also write the trace of this run (see `run --trace`).
    #[arg(long)]
    trace: Option<PathBuf>,
    #[command(flatten)]
    tile: TileArgs,
    #[command(flatten)]
    sel: AdapterSel,
}

pub fn cmd_explain(a: ExplainArgs) -> anyhow::Result<u8> {
    let names = variant_list(&a.variant)?;
    // Not reported here: `run` measures the unprofiled host cost.
    let schedule = a.schedule.schedule(&DEFAULTS, 0)?;
    if let Some(t) = &a.trace {
        check_out_path("--trace", t)?;
    }
    let forced = a.tile.forced()?;
    super::check_tile_taker(forced, &names, "--variant", &a.variant)?;
    let mut p = a.shape.problem(a.seq, &DEFAULTS)?;
    p.overrides = a.tile.overrides()?;
    p.bwd_tile = a.tile.bwd_tile;
    p.bwd_dq_atomic = a.tile.bwd_dq == Some(crate::cli::args::BwdDq::Atomic);
    // In training, the in-place hazard is part of the lesson: unfused-inplace-exp joins the list
    // (its plan is refused, with the dispatch that overwrote what its backward needs).
    let mut names = names;
    if p.backward && !names.iter().any(|n| n == "unfused-inplace-exp") {
        names.push("unfused-inplace-exp".into());
    }
    attn_wgpu::budget::check_host(&p, names.len())?;
    let gpu = a.sel.open(features_of(&names, p.dtype))?;
    let tuned = find_tune(&gpu, a.tile.tune.as_deref())?;
    p.tile = tile_request(&gpu, forced, &tuned, &p);
    // Nothing to explain when no variant can run here: exit 4 with the reasons, as `run`.
    let refusals: Vec<String> = names
        .iter()
        .filter_map(|n| attn_wgpu::variants::plan(n, &p, &gpu.caps).err())
        .map(|e| match e {
            attn_wgpu::Error::Incompatible { variant, reason } => format!("{variant}: {reason}"),
            other => other.to_string(),
        })
        .collect();
    if refusals.len() == names.len() {
        return Err(attn_wgpu::Error::Incompatible {
            variant: a.variant.clone(),
            reason: format!("no variant can run here ({})", refusals.join("; ")),
        }
        .into());
    }
    println!(
        "Explaining {} on {} ({}), {}; 1 cold call, {}, {}\n",
        names.join(", "),
        gpu.report.name,
        gpu.report.backend,
        p.shape_string(),
        table::count(schedule.warmup, "warm-up", "warm-ups"),
        table::count(schedule.reps, "recorded forward", "recorded forwards")
    );
    if let Some(w) = p.eval_dropout_warning() {
        println!("WARNING: {w}\n");
    }
    let t = Instant::now();
    let x = Inputs::generate(&p);
    let inputs_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut runner = Runner::new(&gpu)?;
    runner.set_bounds_checks(false);
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
    if p.dropout > 0.0 {
        // The pitfall on the GPU: the first variant that ran, again without dropout.
        if let Some(first) = runs.iter().find(|r| r.ran()) {
            let q = attn_wgpu::problem::Problem {
                dropout: 0.0,
                ..p.clone()
            };
            let r0 = run_variant(&gpu, &mut runner, &q, &x, &first.variant, schedule, true)?;
            print!("\n{}", explain::dropout_pitfall(&p, first, &r0));
            runs.push(r0);
        }
    }
    if let Some(t) = &a.trace {
        write_trace(t, &gpu, &runner, &runs)?;
    }
    let failed = runs.iter().any(|r| r.ran() && !r.passed());
    Ok(if failed { 3 } else { 0 })
}
