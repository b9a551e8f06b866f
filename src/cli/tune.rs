//! `tune`: search the tile configurations of a variant for this adapter and one shape class,
//! validate each, cache the fastest passing one (see `attn_wgpu::tune`); and the cache look-up that
//! `run`, `sweep` and `explain` share.

use std::path::{Path, PathBuf};

use clap::Args;

use attn_wgpu::gpu::runner::Runner;
use attn_wgpu::gpu::Gpu;
use attn_wgpu::problem::{Inputs, Problem};
use attn_wgpu::report::json;
use attn_wgpu::tile::{TileChoice, TileRequest};
use attn_wgpu::tune::{self, ShapeClass, TuneEntry, TuneFile};
use attn_wgpu::{probe, variants, Error};

use super::args::{AdapterSel, ScheduleArgs, ShapeArgs, RUN, RUN_SEQ};
use super::{bad, check_out_path, features_of};

const DEFAULTS: super::args::Defaults = super::args::Defaults {
    warmup: 2,
    reps: 10,
    ..RUN
};

#[derive(Args)]
pub struct TuneArgs {
    /// Variant whose tile configuration is searched (today: tiled).
    #[arg(long, default_value = "tiled")]
    variant: String,
    /// Sequence length N (default 256; the cache entry holds its power-of-two bucket).
    #[arg(long, allow_negative_numbers = true, default_value_t = RUN_SEQ)]
    seq: u32,
    #[command(flatten)]
    shape: ShapeArgs,
    #[command(flatten)]
    schedule: ScheduleArgs,
    /// Cache file to write or update (default: this adapter's file in the per-user cache, where
    /// `run` looks).
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    sel: AdapterSel,
}

pub fn cmd_tune(a: TuneArgs) -> anyhow::Result<u8> {
    let v = variants::find(&a.variant)?;
    if !v.tiles {
        return Err(bad(format!(
            "--variant {}: nothing to tune (tunable: {})",
            a.variant,
            super::tile_variant_names()
        )));
    }
    // Candidates are ranked by GPU time only: no host-only forwards.
    let schedule = a.schedule.schedule(&DEFAULTS, 0)?;
    if let Some(p) = &a.out {
        check_out_path("--out", p)?;
    }
    let p = a.shape.problem(a.seq, &DEFAULTS)?;
    if p.backward {
        return Err(attn_wgpu::Error::InvalidProblem(
            "--backward: tune measures the forward's tile choices; run `run --backward` or \
             `sweep --backward` to time the training step"
                .into(),
        )
        .into());
    }
    attn_wgpu::budget::check_host(&p, 1)?;
    let wanted = features_of(std::slice::from_ref(&a.variant), p.dtype);
    let gpu = a.sel.open(wanted)?;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| tune::default_path(&gpu.report));
    // An existing cache is updated, so it must be readable and of this adapter before any work.
    let mut file = if out.is_file() {
        let f = tune::load(&out).map_err(|e| {
            bad(format!(
                "{e} (delete it, or pass another --out, to start a new cache)"
            ))
        })?;
        if f.key != probe::key(&gpu.report) {
            return Err(bad(format!(
                "tune cache {} holds entries of `{}`, this adapter is `{}`: pass another --out",
                out.display(),
                f.key,
                probe::key(&gpu.report)
            )));
        }
        f
    } else {
        TuneFile::new(&gpu.report)
    };
    // The variant must be able to run this problem at all (exit 4 with the reason otherwise).
    variants::plan(&a.variant, &p, &gpu.caps)?;
    let class = ShapeClass::of(&a.variant, &p);
    println!(
        "Tuning {} on {} ({}), {}; class `{}`; {} + {} per candidate",
        a.variant,
        gpu.report.name,
        gpu.report.backend,
        p.shape_string(),
        class.key(),
        attn_wgpu::report::table::count(schedule.warmup, "warm-up", "warm-ups"),
        attn_wgpu::report::table::count(schedule.reps, "recorded forward", "recorded forwards")
    );
    let x = Inputs::generate(&p);
    let mut runner = Runner::new(&gpu)?;
    runner.set_bounds_checks(false);
    let runs = tune::run_candidates(&gpu, &mut runner, &p, &x, &a.variant, schedule)?;
    let cands: Vec<tune::Candidate> = runs.iter().map(|(c, r)| tune::candidate(*c, r)).collect();
    let best = tune::best(&cands).cloned();
    println!(
        "\n{:<10} {:>6} {:>10} {:>12}  verdict",
        "candidate", "BR", "wg bytes", "GPU med µs"
    );
    for ((choice, r), c) in runs.iter().zip(&cands) {
        let cfg = |k: &str| {
            r.config
                .iter()
                .find(|(n, _)| n == k)
                .map_or("-".into(), |(_, v)| format!("{v}"))
        };
        let verdict = match c.verdict.as_str() {
            "PASS" if best.as_ref().is_some_and(|b| b.choice == *choice) => "PASS  <- best".into(),
            "PASS" => "PASS".to_string(),
            "FAIL" => {
                let worst = r.validation.as_ref().map_or(String::new(), |v| {
                    format!(": max abs err {:.3e}", v.max_abs_err)
                });
                format!("FAIL — rejected (wrong result{worst})")
            }
            other => format!("{other} — rejected ({})", c.reason.as_deref().unwrap_or("")),
        };
        println!(
            "{:<10} {:>6} {:>10} {:>12}  {verdict}",
            choice.to_string(),
            cfg("BR"),
            cfg("workgroup_storage_bytes"),
            c.gpu_median_us.map_or("-".into(), |t| format!("{t:.1}")),
        );
    }
    let Some(best) = best else {
        eprintln!(
            "no candidate passed validation; {} not written",
            out.display()
        );
        return Ok(3);
    };
    let command = attn_wgpu::report::json::command_line();
    file.entries.insert(
        class.key(),
        TuneEntry {
            variant: a.variant.clone(),
            dtype: class.dtype.clone(),
            causal: class.causal,
            head_dim: class.head_dim,
            n_bucket: class.n_bucket,
            choice: best.choice,
            gpu_median_us: best.gpu_median_us.unwrap_or(f64::NAN),
            shape: p.shape_string(),
            reps: schedule.reps,
            command,
            candidates: cands.clone(),
        },
    );
    if let Some(d) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).map_err(|e| Error::Io {
            path: d.display().to_string(),
            source: e,
        })?;
    }
    json::write_atomic(&out, &file)?;
    println!(
        "\nbest for `{}`: {} ({:.1} µs); reproduce any candidate with `attn-wgpu run --variant {} \
         --batch {} --heads {} --seq {} --head-dim {} --dtype {}{} --tile {}`",
        class.key(),
        best.choice,
        best.gpu_median_us.unwrap_or(f64::NAN),
        a.variant,
        p.batch,
        p.heads,
        p.seq,
        p.head_dim,
        p.dtype.name(),
        if p.causal { "" } else { " --no-causal" },
        best.choice
    );
    eprintln!("tune cache written to {}", out.display());
    let rejected = cands.iter().filter(|c| c.verdict == "FAIL").count();
    if rejected > 0 {
        eprintln!("warning: {rejected} candidate(s) failed validation and were rejected");
    }
    Ok(0)
}

/// The tune cache a command reads: `--tune FILE` (a broken one is bad input, exit 2), else this
/// adapter's default file if it exists (a broken one is a warning).
pub fn find_tune(gpu: &Gpu, explicit: Option<&Path>) -> anyhow::Result<Option<(TuneFile, String)>> {
    super::find_cached(
        gpu,
        explicit,
        tune::default_path(&gpu.report),
        "tune cache",
        "default tiles (re-run `attn-wgpu tune`)",
        tune::load,
        |f| &f.key,
    )
}

/// The tile request for `p`: `--tile` when given, else the cache entry of `p`'s shape class.
pub fn tile_request(
    gpu: &Gpu,
    forced: Option<TileChoice>,
    cache: &Option<(TuneFile, String)>,
    p: &Problem,
) -> Option<TileRequest> {
    if let Some(choice) = forced {
        return Some(TileRequest {
            choice,
            source: "--tile".into(),
        });
    }
    let (f, path) = cache.as_ref()?;
    let tiled = variants::tile_variants().into_iter().next()?;
    match tune::request_for(f, path, tiled.name(), p, &gpu.caps) {
        Ok(r) => r,
        Err(w) => {
            eprintln!("warning: {w}");
            None
        }
    }
}
