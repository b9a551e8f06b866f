//! The roofline block of `run`: each dispatch as a percentage of the ceiling that bounds it, from a
//! probe of this adapter (`attn-wgpu probe`, src/probe.rs).

use std::fmt::Write;

use crate::probe::{peak_for, roofline, ProbeFile};
use crate::run::VariantRun;

/// Three significant digits (0.0123, 1.23, 123).
fn sig(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.digits$}")
}

pub fn block(p: &ProbeFile, source: &str, r: &VariantRun, dtype: &str) -> String {
    let mut s = String::new();
    if r.status != "ok" {
        return s;
    }
    let peak = peak_for(p, dtype);
    let _ =
        writeln!(
        s,
        "Roofline ({}) — probe {source}: copy {:.1} GB/s, FMA {} {:.1} GFLOP/s (ridge {:.2} FLOP/B)",
        r.variant,
        p.bandwidth.best_rate,
        if dtype == "f16" && p.fma_f16.is_some() { "f16" } else { "f32" },
        peak,
        peak / p.bandwidth.best_rate
    );
    let _ = writeln!(
        s,
        "   {:<12} {:>9} {:>8} {:>16} {:>16} {:>8}",
        "dispatch", "FLOP/B", "bound", "ceiling", "achieved", "% ceil"
    );
    for d in &r.dispatches {
        let Some(us) = d.gpu_us.map(|x| x.median) else {
            continue;
        };
        let Some(pt) = roofline(p, peak, d.flops, d.reads_bytes + d.writes_bytes, us) else {
            let _ = writeln!(
                s,
                "   {:<12} {:>9} (no bytes or FLOPs estimated)",
                d.name, "-"
            );
            continue;
        };
        let _ = writeln!(
            s,
            "   {:<12} {:>9} {:>8} {:>16} {:>16} {:>7.1}%",
            d.name,
            pt.intensity.map_or("-".into(), |i| format!("{i:.2}")),
            pt.bound,
            format!("{} {}", sig(pt.ceiling), pt.unit),
            format!("{} {}", sig(pt.achieved), pt.unit),
            pt.percent
        );
    }
    s
}
