//! The roofline block of `run`: each dispatch as a percentage of the ceiling that bounds it, from a
//! probe of this adapter (`attn-wgpu probe`, src/probe.rs). The same points go into the results
//! file (`runs[].dispatches[].roofline`, with the probe used in the top-level `roofline`).

use std::fmt::Write;

use serde::Serialize;

use crate::probe::{matrix_peak, peak_for, peak_of, roofline, ProbeFile, RooflinePoint};
use crate::run::{DispatchRow, VariantRun};

/// Three significant digits (0.0123, 1.23, 123).
fn sig(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.digits$}")
}

/// Which FMA probe is the arithmetic peak for storage dtype `dtype` (see [`peak_for`]).
fn peak_probe(p: &ProbeFile, dtype: &str) -> &'static str {
    if dtype == "f16" && p.fma_f16.is_some() {
        "f16"
    } else {
        "f32"
    }
}

/// The probe a results file's roofline figures come from: the top-level `roofline` of
/// `run --json`.
#[derive(Debug, Clone, Serialize)]
pub struct RooflineSource {
    /// The probe file as found or given (`--probe FILE`, else this adapter's cache file).
    pub probe_file: String,
    /// The probe file's adapter key (`<adapter name> | <backend> | <driver>`).
    pub probe_key: String,
    /// This run's adapter key; a probe of another adapter is used with a warning.
    pub adapter_key: String,
    pub key_matches: bool,
    /// The copy bandwidth ceiling, GB/s (the probe's best rep).
    pub bandwidth_gbps: f64,
    /// The arithmetic ceiling, GFLOP/s, and the FMA probe it comes from (`f32`, or `f16` for f16
    /// storage where the adapter was probed in f16).
    pub peak_gflops: f64,
    pub peak_fma: &'static str,
    /// The matrix units' f16 peak, GFLOP/s, where the probe measured it: the ceiling of the
    /// dispatches on cooperative matrices (`Shader::on_matrix_units`).
    pub matrix_gflops: Option<f64>,
    /// FLOP/byte where the two ceilings meet.
    pub ridge_flop_per_byte: f64,
}

pub fn source(p: &ProbeFile, file: &str, adapter_key: &str, dtype: &str) -> RooflineSource {
    let peak = peak_for(p, dtype);
    RooflineSource {
        probe_file: file.to_string(),
        probe_key: p.key.clone(),
        adapter_key: adapter_key.to_string(),
        key_matches: p.key == adapter_key,
        bandwidth_gbps: p.bandwidth.best_rate,
        peak_gflops: peak,
        peak_fma: peak_probe(p, dtype),
        matrix_gflops: matrix_peak(p, dtype).map(|(c, _)| c.best_rate),
        ridge_flop_per_byte: peak / p.bandwidth.best_rate,
    }
}

/// One dispatch row under the roofline: its plan bytes and FLOPs over its median GPU time, against
/// the matrix units' peak where its kernel runs on them and they were probed (`peak_of`). None
/// without a time, or when the plan estimates neither bytes nor FLOPs.
pub fn point(p: &ProbeFile, dtype: &str, d: &DispatchRow) -> Option<RooflinePoint> {
    let us = d.gpu_us?.median;
    roofline(
        p,
        peak_of(p, dtype, d.matrix_units).0,
        d.flops,
        d.reads_bytes + d.writes_bytes,
        us,
    )
}

/// Stores [`point`] in every dispatch row of the runs that ran (`DispatchRow::roofline`).
pub fn annotate(p: &ProbeFile, runs: &mut [VariantRun], dtype: &str) {
    for r in runs.iter_mut().filter(|r| r.ran()) {
        for d in r.dispatches.iter_mut() {
            d.roofline = point(p, dtype, d);
        }
    }
}

pub fn block(p: &ProbeFile, source: &str, r: &VariantRun, dtype: &str) -> String {
    let mut s = String::new();
    if !r.ran() {
        return s;
    }
    let peak = peak_for(p, dtype);
    let _ =
        writeln!(
        s,
        "Roofline ({}) — probe {source}: copy {:.1} GB/s, FMA {} {:.1} GFLOP/s (ridge {:.2} FLOP/B)",
        r.variant,
        p.bandwidth.best_rate,
        peak_probe(p, dtype),
        peak,
        peak / p.bandwidth.best_rate
    );
    let on_matrices = r.dispatches.iter().any(|d| d.matrix_units);
    if let (true, Some((m, which))) = (on_matrices, matrix_peak(p, dtype)) {
        let _ = writeln!(
            s,
            "   dispatches on cooperative matrices (*): {which} {:.1} GFLOP/s (ridge {:.2} FLOP/B)",
            m.best_rate,
            m.best_rate / p.bandwidth.best_rate
        );
    }
    let _ = writeln!(
        s,
        "   {:<12} {:>9} {:>8} {:>16} {:>16} {:>8}",
        "dispatch", "FLOP/B", "bound", "ceiling", "achieved", "% ceil"
    );
    for d in &r.dispatches {
        if d.gpu_us.is_none() {
            continue;
        }
        let Some(pt) = point(p, dtype, d) else {
            let _ = writeln!(
                s,
                "   {:<12} {:>9} (no bytes or FLOPs estimated)",
                d.name, "-"
            );
            continue;
        };
        let star = if matrix_peak(p, dtype).is_some() && d.matrix_units {
            "*"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "   {:<12} {:>9} {:>8} {:>16} {:>16} {:>7.1}%",
            format!("{}{star}", d.name),
            pt.intensity.map_or("-".into(), |i| format!("{i:.2}")),
            pt.bound,
            format!("{} {}", sig(pt.ceiling), pt.unit),
            format!("{} {}", sig(pt.achieved), pt.unit),
            pt.percent
        );
    }
    s
}
