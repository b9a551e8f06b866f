//! `probe`: this adapter's copy bandwidth and FMA rate (the roofline `run` prints).

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;

use attn_wgpu::report::json;
use attn_wgpu::{probe, Error};

use super::args::AdapterSel;
use super::{bad, check_out_path};

#[derive(Args)]
pub struct ProbeArgs {
    /// Where to write the probe JSON (default: the per-user cache, see docs/profiling.md; `run` looks there).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Bytes copied by the bandwidth probe, in MiB (default: 64 on a CPU adapter, else up to 1024
    /// within the adapter's max storage binding).
    #[arg(long, allow_negative_numbers = true)]
    size_mib: Option<u64>,
    /// Recorded repetitions of each probe kernel (after 2 warm-ups).
    #[arg(long, allow_negative_numbers = true, default_value_t = 10)]
    reps: u32,
    #[command(flatten)]
    sel: AdapterSel,
}

/// The most repetitions of each probe kernel: each copies up to 1 GiB, and every sample is kept.
pub const MAX_PROBE_REPS: u32 = 10_000;

pub fn cmd_probe(a: ProbeArgs) -> anyhow::Result<u8> {
    if !(1..=MAX_PROBE_REPS).contains(&a.reps) {
        return Err(bad(format!(
            "--reps must be between 1 and {MAX_PROBE_REPS} (got {})",
            a.reps
        )));
    }
    if a.size_mib == Some(0) {
        return Err(bad("--size-mib must be at least 1 (got 0)".into()));
    }
    if let Some(p) = &a.out {
        check_out_path("--out", p)?;
    }
    // The f16 FMA probe needs SHADER_F16; the matrix-unit probe (a SPIR-V kernel) cooperative
    // matrices, 32-wide subgroups and passthrough shaders: each requested where the adapter has it.
    let gpu = a.sel.open(
        wgpu::Features::SHADER_F16
            | wgpu::Features::SUBGROUP
            | wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX
            | wgpu::Features::PASSTHROUGH_SHADERS,
    )?;
    let size = probe::ProbeSize::for_adapter(&gpu.report, a.size_mib);
    if let Some(m) = a.size_mib {
        if size.copy_bytes < m.saturating_mul(1 << 20) {
            eprintln!(
                "note: --size-mib {m} exceeds this adapter's largest storage binding: copying {} MiB",
                size.copy_bytes >> 20
            );
        }
    }
    let cmd = attn_wgpu::report::json::command_line();
    let t0 = Instant::now();
    let p = probe::run_probe(&gpu, size, a.reps, cmd)?;
    println!("Adapter    : {}", p.key);
    println!(
        "Bandwidth  : {:.1} GB/s best, {:.1} GB/s median (copy of {} MiB, read + write counted)",
        p.bandwidth.best_rate,
        p.bandwidth.median_rate,
        size.copy_bytes >> 20
    );
    println!(
        "FMA f32    : {:.1} GFLOP/s best, {:.1} median ({} workgroups x 256 threads x {} iterations x 32 FLOP)",
        p.fma_f32.best_rate, p.fma_f32.median_rate, size.fma_workgroups, size.fma_iters
    );
    optional_ceiling("FMA f16    ", p.fma_f16.as_ref(), &p.f16_note, "");
    optional_ceiling(
        "Matrix f16 ",
        p.matrix_f16.as_ref(),
        &p.matrix_note,
        " (16 x 16 x 16 cooperative-matrix products, f32 sums)",
    );
    optional_ceiling(
        "Matrix bf16",
        p.matrix_bf16.as_ref(),
        &p.matrix_bf16_note,
        " (the same with bf16 operands)",
    );
    println!(
        "Ridge      : {:.2} FLOP/byte (f32): below it a kernel is bandwidth-bound",
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

/// A probed ceiling's line (`what` its label, `detail` after the rates), or why it was not probed.
fn optional_ceiling(
    what: &str,
    c: Option<&attn_wgpu::probe::Ceiling>,
    note: &Option<String>,
    detail: &str,
) {
    match c {
        Some(c) => println!(
            "{what}: {:.1} GFLOP/s best, {:.1} median{detail}",
            c.best_rate, c.median_rate
        ),
        None => println!("{what}: not probed ({})", note.as_deref().unwrap_or("")),
    }
}
