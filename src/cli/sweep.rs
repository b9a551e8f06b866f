//! `sweep`: a grid of sequence lengths x variants: CSV, JSON and SVG plots.

use std::path::PathBuf;

use clap::Args;

use attn_wgpu::outfile::Named;
use attn_wgpu::report::json;
use attn_wgpu::variants::MATERIALIZED;
use attn_wgpu::{sweep, variants, Error};

use super::args::{AdapterSel, Defaults, ScheduleArgs, ShapeArgs, TileArgs};
use super::tune::{find_tune, tile_request};
use super::{bad, features_of, variant_list, FUSED};

const DEFAULTS: Defaults = Defaults {
    batch: 1,
    heads: 2,
    head_dim: 64,
    warmup: 1,
    reps: 5,
};

#[derive(Args)]
pub struct SweepArgs {
    /// Sequence lengths, comma separated (e.g. 128,256,512).
    #[arg(long, allow_hyphen_values = true)]
    seq: String,
    /// Variants, comma separated, or `all`.
    #[arg(long, default_value = "unfused,unfused-inplace,tiled")]
    variants: String,
    #[command(flatten)]
    shape: ShapeArgs,
    #[command(flatten)]
    schedule: ScheduleArgs,
    /// Folder for sweep.csv, sweep.json and the SVG plots (created if missing).
    #[arg(long, default_value = ".")]
    out_dir: PathBuf,
    #[command(flatten)]
    tile: TileArgs,
    #[command(flatten)]
    sel: AdapterSel,
}

pub fn cmd_sweep(a: SweepArgs) -> anyhow::Result<u8> {
    let seqs = sweep::parse_seq_list(&a.seq)?;
    let names = variant_list(&a.variants)?;
    let forced_tile = a.tile.forced()?;
    super::check_tile_taker(forced_tile, &names, "--variants", &a.variants)?;
    let schedule = a.schedule.schedule(&DEFAULTS, 0)?;
    if a.out_dir.exists() && !a.out_dir.is_dir() {
        return Err(bad(format!(
            "--out-dir {} is not a folder",
            a.out_dir.display()
        )));
    }
    let mut base = a.shape.problem(seqs[0], &DEFAULTS)?;
    base.overrides = a.tile.overrides()?;
    base.bwd_tile = a.tile.bwd_tile;
    base.bwd_dq_atomic = a.tile.bwd_dq == Some(crate::cli::args::BwdDq::Atomic);
    for &n in &seqs {
        let p = base.at_seq(n);
        p.validate()?;
        attn_wgpu::budget::check_host(&p, 1)?;
    }
    std::fs::create_dir_all(&a.out_dir).map_err(|e| Error::Io {
        path: a.out_dir.display().to_string(),
        source: e,
    })?;
    // Every file the sweep writes, checked before any work (and none may be the --tune input).
    let outputs: Vec<PathBuf> = sweep::OUTPUT_FILES
        .iter()
        .map(|f| a.out_dir.join(f))
        .collect();
    for f in &outputs {
        super::check_out_path("--out-dir", f)?;
    }
    let mut named: Vec<Named> = outputs
        .iter()
        .map(|f| Named::output("--out-dir", f))
        .collect();
    if let Some(t) = &a.tile.tune {
        named.push(Named::input("--tune", t));
    }
    super::check_distinct(&named)?;
    let gpu = a.sel.open(features_of(&names, base.dtype))?;
    // Whether a tile fits depends on D and the adapter, not on N: refuse it once, before any work,
    // with the reason `run --variant tiled --tile ...` gives.
    if let Some(choice) = forced_tile {
        variants::tiled::config_for(choice, base.head_dim, &gpu.caps).map_err(|reason| {
            Error::Incompatible {
                variant: FUSED.name().into(),
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
    let tuned = find_tune(&gpu, a.tile.tune.as_deref())?;
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
    bar.finish_and_clear();
    // A sweep in which nothing ran is an incompatibility, not an empty plot: exit 4 with the
    // reasons, and no files.
    if points.iter().all(|p| p.gpu_median_us.is_none()) {
        let mut reasons: Vec<String> = points
            .iter()
            .map(|p| {
                format!(
                    "{}: {}",
                    p.variant,
                    p.reason.as_deref().unwrap_or(p.status.as_str())
                )
            })
            .collect();
        reasons.dedup();
        return Err(Error::Incompatible {
            variant: a.variants.clone(),
            reason: format!("no point of the sweep ran ({})", reasons.join("; ")),
        }
        .into());
    }
    let csv = a.out_dir.join("sweep.csv");
    sweep::write_csv(&csv, &points)?;
    let js = a.out_dir.join("sweep.json");
    json::write_atomic(
        &js,
        &serde_json::json!({
            "schema_version": 1,
            "tool": "attn-wgpu sweep",
            "command": json::command_line(),
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
        base.batch,
        base.heads,
        base.head_dim,
        if base.causal { "causal" } else { "non-causal" }
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
    let has =
        |id: variants::VariantId| names.iter().any(|n| variants::VariantId::of(n) == Some(id));
    for other in MATERIALIZED {
        if has(other) && has(FUSED) {
            match sweep::crossover(&points, FUSED, other) {
                Some(n) => println!("crossover: {FUSED} overtakes {other} from N={n}"),
                None if sweep::always_faster(&points, FUSED, other) => println!(
                    "crossover: none — {FUSED} is faster than {other} at every N of this grid"
                ),
                None => {
                    println!("crossover: none — {FUSED} does not overtake {other} in this grid")
                }
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
