//! `sweep`: a grid of sequence lengths × variants through the same `run_variant` as `run`, written
//! as CSV, JSON and three SVG plots (plotters): GPU time vs N (log-log), memory vs N and estimated
//! bytes vs N, with the crossover where the fused `tiled` variant overtakes an unfused one marked.

use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde::Serialize;

use crate::gpu::runner::{Runner, Schedule};
use crate::gpu::Gpu;
use crate::problem::{Inputs, Problem};
use crate::run::{run_variant, VariantRun};
use crate::variants::{VariantId, MATERIALIZED};
use crate::{Error, Result};

#[derive(Debug, Clone, Serialize)]
pub struct SweepPoint {
    pub variant: String,
    pub seq: u32,
    pub status: String,
    pub reason: Option<String>,
    pub gpu_median_us: Option<f64>,
    pub gpu_p10_us: Option<f64>,
    pub gpu_p90_us: Option<f64>,
    pub dispatches: usize,
    /// Estimated bytes read + written per forward (the plan's traffic model).
    pub bytes_moved: Option<u64>,
    /// Every buffer the plan allocates.
    pub memory_bytes: Option<u64>,
    pub n_by_n_bytes: Option<u64>,
    pub verdict: Option<String>,
    /// The `tiled` tile choice and its source (`default`, `tuned: <cache path>`).
    pub tile: Option<crate::tile::TileUsed>,
    /// `--backward`: the backward's GPU µs (median; `gpu_median_us` is then the whole training
    /// step) and the step's peak memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backward_median_us: Option<f64>,
}

impl SweepPoint {
    pub fn from_run(seq: u32, r: &VariantRun) -> SweepPoint {
        let span = r.forward.as_ref().and_then(|f| f.gpu_span_us);
        SweepPoint {
            variant: r.variant.clone(),
            seq,
            status: r.status.name().into(),
            reason: r.reason.clone(),
            gpu_median_us: span.map(|s| s.median),
            gpu_p10_us: span.map(|s| s.p10),
            gpu_p90_us: span.map(|s| s.p90),
            dispatches: r.predicted_dispatches,
            bytes_moved: r.traffic.as_ref().map(|t| t.reads_bytes + t.writes_bytes),
            memory_bytes: r.memory.as_ref().map(|m| m.total_bytes),
            n_by_n_bytes: r
                .memory
                .as_ref()
                .map(|m| m.n_by_n_buffers.iter().map(|b| b.1).sum()),
            // O and, in training, the gradients too.
            verdict: r
                .validation
                .as_ref()
                .map(|_| if r.passed() { "PASS" } else { "FAIL" }.to_string()),
            tile: r.tile.clone(),
            backward_median_us: r
                .training
                .as_ref()
                .and_then(|t| t.backward_gpu_us.map(|s| s.median)),
        }
    }
}

/// Parses `128,256,512`; an empty list, a zero or a non-number is an error naming it.
pub fn parse_seq_list(s: &str) -> Result<Vec<u32>> {
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let n: u32 = part.parse().map_err(|_| {
            Error::InvalidProblem(format!("--seq: `{part}` is not a sequence length"))
        })?;
        if n == 0 {
            return Err(Error::InvalidProblem(
                "--seq: 0 is not a sequence length".into(),
            ));
        }
        v.push(n);
    }
    if v.is_empty() {
        return Err(Error::InvalidProblem(format!(
            "--seq `{s}` lists no sequence length (e.g. --seq 128,256,512)"
        )));
    }
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// Runs the grid; `progress(variant, seq)` is called before each point; `tile(p)` sets each
/// point's tile request (e.g. from the tune cache, whose entries depend on N).
pub fn run_grid(
    gpu: &Gpu,
    base: &Problem,
    seqs: &[u32],
    variants: &[String],
    schedule: Schedule,
    mut progress: impl FnMut(&str, u32),
    tile: impl Fn(&Problem) -> Option<crate::tile::TileRequest>,
) -> Result<Vec<SweepPoint>> {
    let mut runner = Runner::new(gpu)?;
    let mut out = Vec::new();
    for &n in seqs {
        let mut p = base.at_seq(n);
        p.validate()?;
        p.tile = tile(&p);
        let x = Inputs::generate(&p);
        for v in variants {
            progress(v, n);
            let r = run_variant(gpu, &mut runner, &p, &x, v, schedule, true)?;
            out.push(SweepPoint::from_run(n, &r));
        }
    }
    Ok(out)
}

pub fn write_csv(path: &Path, points: &[SweepPoint]) -> Result<()> {
    let opt = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v:.3}"));
    let optu = |x: Option<u64>| x.map_or(String::new(), |v| v.to_string());
    let mut s = String::from(
        "variant,seq,status,gpu_median_us,gpu_p10_us,gpu_p90_us,dispatches,bytes_moved,memory_bytes,n_by_n_bytes,verdict,reason\n",
    );
    for p in points {
        s.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},\"{}\"\n",
            p.variant,
            p.seq,
            p.status,
            opt(p.gpu_median_us),
            opt(p.gpu_p10_us),
            opt(p.gpu_p90_us),
            p.dispatches,
            optu(p.bytes_moved),
            optu(p.memory_bytes),
            optu(p.n_by_n_bytes),
            p.verdict.as_deref().unwrap_or(""),
            p.reason.as_deref().unwrap_or("").replace('"', "'")
        ));
    }
    crate::outfile::write_atomic(path, s.as_bytes())
}

/// The GPU median of variant `v` at N = `n` in `points`.
fn time_of(points: &[SweepPoint], v: VariantId, n: u32) -> Option<f64> {
    points
        .iter()
        .find(|p| VariantId::of(&p.variant) == Some(v) && p.seq == n)
        .and_then(|p| p.gpu_median_us)
}

/// The smallest N from which `fused` is faster than `other` at every swept N, if it was slower
/// somewhere before (a crossover), or None.
pub fn crossover(points: &[SweepPoint], fused: VariantId, other: VariantId) -> Option<u32> {
    let t = |v, n| time_of(points, v, n);
    let mut seqs: Vec<u32> = points.iter().map(|p| p.seq).collect();
    seqs.sort_unstable();
    seqs.dedup();
    let faster: Vec<(u32, bool)> = seqs
        .iter()
        .filter_map(|&n| Some((n, t(fused, n)? < t(other, n)?)))
        .collect();
    let first_win = faster.iter().rposition(|(_, f)| !*f).map_or(0, |i| i + 1);
    if first_win == 0 || first_win >= faster.len() {
        return None; // tiled always faster, or not faster at the end
    }
    Some(faster[first_win].0)
}

/// Whether `fused` is faster than `other` at every N where both ran (and at least one).
pub fn always_faster(points: &[SweepPoint], fused: VariantId, other: VariantId) -> bool {
    let t = |v, n| time_of(points, v, n);
    let pairs: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| VariantId::of(&p.variant) == Some(fused))
        .filter_map(|p| Some((t(fused, p.seq)?, t(other, p.seq)?)))
        .collect();
    !pairs.is_empty() && pairs.iter().all(|(a, b)| a < b)
}

/// Axis label: 1.2k, 3.4M, 5G, or the plain number below 1000.
fn short(y: f64) -> String {
    let (v, unit) = if y >= 1e9 {
        (y / 1e9, "G")
    } else if y >= 1e6 {
        (y / 1e6, "M")
    } else if y >= 1e3 {
        (y / 1e3, "k")
    } else {
        (y, "")
    };
    let t = format!("{v:.1}");
    format!("{}{unit}", t.trim_end_matches(".0"))
}

/// Named lines of (x, y) points, for [`plot_svg`].
pub type Series = Vec<(String, Vec<(f64, f64)>)>;

fn series(points: &[SweepPoint], y: impl Fn(&SweepPoint) -> Option<f64>) -> Series {
    let mut out: Series = Vec::new();
    for p in points {
        let Some(v) = y(p).filter(|v| *v > 0.0) else {
            continue;
        };
        match out.iter_mut().find(|(n, _)| *n == p.variant) {
            Some((_, s)) => s.push((p.seq as f64, v)),
            None => out.push((p.variant.clone(), vec![(p.seq as f64, v)])),
        }
    }
    out
}

fn plot(
    path: &Path,
    title: &str,
    y_label: &str,
    data: &Series,
    marks: &[(u32, String)],
) -> Result<()> {
    let svg =
        plot_svg(title, "sequence length N", y_label, data, marks).map_err(|e| Error::Io {
            path: path.display().to_string(),
            source: std::io::Error::other(e),
        })?;
    crate::outfile::write_atomic(path, svg.as_bytes())
}

/// A log-log plot of `data` (a line and a dot per point, one colour per series, a legend) with
/// vertical marks, as an SVG document (800 x 500). Used by the sweep plots and the HTML report.
/// The smallest and largest value a log-scale plot shows (µs, bytes and N all sit well inside).
const PLOT_MIN: f64 = 1e-9;
const PLOT_MAX: f64 = 1e18;

pub fn plot_svg(
    title: &str,
    x_label: &str,
    y_label: &str,
    data: &Series,
    marks: &[(u32, String)],
) -> std::result::Result<String, String> {
    let err = |e: String| e;
    // Log axes take finite positive values of a sane size only: a point from a result file of
    // 0, NaN or near f64::MAX (a hostile or corrupt file) made an infinite axis and plotters
    // looped on its ticks. Such points are left out of the picture.
    let sane = |v: f64| v.is_finite() && (PLOT_MIN..=PLOT_MAX).contains(&v);
    let cleaned: Series = data
        .iter()
        .map(|(name, pts)| {
            let pts = pts
                .iter()
                .copied()
                .filter(|p| sane(p.0) && sane(p.1))
                .collect();
            (name.clone(), pts)
        })
        .collect();
    let data = &cleaned;
    let xs = data.iter().flat_map(|s| s.1.iter().map(|p| p.0));
    let ys = data.iter().flat_map(|s| s.1.iter().map(|p| p.1));
    let (x0, x1) = xs.fold((f64::INFINITY, 0.0f64), |(a, b), x| (a.min(x), b.max(x)));
    let (y0, y1) = ys.fold((f64::INFINITY, 0.0f64), |(a, b), y| (a.min(y), b.max(y)));
    if !x0.is_finite() || !y0.is_finite() {
        return Err(err("nothing to plot: no successful point".into()));
    }
    let (x0, x1) = (x0 / 1.25, x1 * 1.25);
    let (y0, y1) = (y0 / 1.5, y1 * 1.5);
    // Rendered into memory, then written atomically like every other file.
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (800, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(80)
            .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
            .map_err(|e| err(e.to_string()))?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .x_label_formatter(&|x| {
                if *x >= 10.0 {
                    format!("{x:.0}")
                } else {
                    format!("{x:.2}")
                }
            })
            .y_label_formatter(&|y| short(*y))
            .draw()
            .map_err(|e| err(e.to_string()))?;
        for (i, (name, pts)) in data.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
                .map_err(|e| err(e.to_string()))?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))
                .map_err(|e| err(e.to_string()))?;
        }
        for (n, label) in marks {
            let x = *n as f64;
            chart
                .draw_series(LineSeries::new(
                    vec![(x, y0), (x, y1)],
                    BLACK.stroke_width(1),
                ))
                .map_err(|e| err(e.to_string()))?;
            chart
                .draw_series(std::iter::once(Text::new(
                    label.clone(),
                    (x, y1 / 1.3),
                    ("sans-serif", 14),
                )))
                .map_err(|e| err(e.to_string()))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(|e| err(e.to_string()))?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    Ok(svg)
}

/// The files a sweep writes into its folder.
pub const OUTPUT_FILES: &[&str] = &[
    "sweep.csv",
    "sweep.json",
    "gpu_time_vs_n.svg",
    "memory_vs_n.svg",
    "bytes_vs_n.svg",
];

/// Writes `gpu_time_vs_n.svg`, `memory_vs_n.svg` and `bytes_vs_n.svg` into `dir`.
pub fn write_plots(dir: &Path, points: &[SweepPoint], subtitle: &str) -> Result<Vec<PathBuf>> {
    let mut marks = Vec::new();
    for other in MATERIALIZED {
        if let Some(n) = crossover(points, VariantId::Tiled, other) {
            marks.push((n, format!("{} < {other} from N={n}", VariantId::Tiled)));
        }
    }
    let files = [
        (
            "gpu_time_vs_n.svg",
            format!("GPU time per forward vs N ({subtitle})"),
            "median GPU µs (log)",
            series(points, |p| p.gpu_median_us),
            marks.clone(),
        ),
        (
            "memory_vs_n.svg",
            format!("Device memory allocated vs N ({subtitle})"),
            "bytes (log)",
            series(points, |p| p.memory_bytes.map(|b| b as f64)),
            vec![],
        ),
        (
            "bytes_vs_n.svg",
            format!("Estimated bytes moved per forward vs N ({subtitle})"),
            "bytes read + written (log)",
            series(points, |p| p.bytes_moved.map(|b| b as f64)),
            vec![],
        ),
    ];
    let mut out = Vec::new();
    for (name, title, y, data, marks) in files {
        let path = dir.join(name);
        plot(&path, &title, y, &data, &marks)?;
        out.push(path);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(v: &str, seq: u32, t: f64) -> SweepPoint {
        SweepPoint {
            variant: v.into(),
            seq,
            status: "ok".into(),
            reason: None,
            gpu_median_us: Some(t),
            gpu_p10_us: None,
            gpu_p90_us: None,
            dispatches: 1,
            bytes_moved: Some(seq as u64),
            memory_bytes: Some(seq as u64),
            n_by_n_bytes: None,
            verdict: None,
            tile: None,
            backward_median_us: None,
        }
    }

    #[test]
    fn seq_list_and_crossover() {
        assert_eq!(parse_seq_list("256, 128,256").unwrap(), vec![128, 256]);
        assert!(parse_seq_list("").is_err());
        assert!(parse_seq_list(",").is_err());
        assert!(parse_seq_list("12x").is_err());
        assert!(parse_seq_list("0").is_err());
        let pts = vec![
            pt("tiled", 64, 10.0),
            pt("unfused", 64, 5.0),
            pt("tiled", 128, 20.0),
            pt("unfused", 128, 30.0),
            pt("tiled", 256, 40.0),
            pt("unfused", 256, 90.0),
        ];
        assert_eq!(
            crossover(&pts, VariantId::Tiled, VariantId::Unfused),
            Some(128)
        );
        assert_eq!(
            crossover(&pts[2..], VariantId::Tiled, VariantId::Unfused),
            None
        );
    }
}
