//! `probe`: the adapter's own ceilings, measured with the same plan + runner as the attention
//! variants (no second engine): device-memory bandwidth from a large copy (bytes read + written)
//! and arithmetic rate from FMA chains in f32, and in f16 where the adapter has SHADER_F16.
//!
//! The result is a [`ProbeFile`] keyed by adapter name + backend + driver; `run` finds it (or takes
//! `--probe FILE`) and shows every dispatch as a percentage of the roofline ceiling that bounds it:
//! `min(bandwidth × intensity, peak)`, intensity = FLOPs / bytes.
//!
//! Default location: `$XDG_CACHE_HOME/attn-wgpu/probe-<key>.json`, else
//! `$HOME/.cache/attn-wgpu/probe-<key>.json`, else `./probe-<key>.json`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::gpu::context::AdapterReport;
use crate::gpu::runner::{Runner, Schedule};
use crate::gpu::{Bf16Matrix, Gpu};
use crate::kernels::tiled_coop_vk::{self, Build};
use crate::plan::{grid_2d, Access, BindingDecl, BufferDecl, Dispatch, Params, Plan, Role};
use crate::problem::Inputs;
use crate::report::stats::Stats;
use crate::{Error, Result};

const COPY: crate::plan::Shader = crate::plan::Shader {
    file: "probe_copy.wgsl",
    source: concat!(
        include_str!("../shaders/common.wgsl"),
        include_str!("../shaders/probe_copy.wgsl")
    ),
    tag: "",
    spirv: &[],
};
const FMA_F32: crate::plan::Shader = crate::plan::Shader {
    file: "probe_fma.wgsl",
    source: concat!(
        include_str!("../shaders/common.wgsl"),
        include_str!("../shaders/probe_fma.wgsl")
    ),
    tag: "",
    spirv: &[],
};
// `enable f16;` must precede every declaration, so it goes before the common prelude.
const FMA_F16: crate::plan::Shader = crate::plan::Shader {
    file: "probe_fma_f16.wgsl",
    source: concat!(
        "enable f16;\n",
        include_str!("../shaders/common.wgsl"),
        include_str!("../shaders/probe_fma_f16.wgsl")
    ),
    tag: "",
    spirv: &[],
};

/// Threads per workgroup and vec4s per thread of probe_copy.wgsl.
const WG: u64 = 256;
const VPT: u64 = 4;
/// FLOPs per thread per iteration of the FMA kernels: 4 chains × 4 lanes × 2.
const FLOPS_PER_ITER: u64 = 32;

/// How big the probe kernels are.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct ProbeSize {
    /// Bytes copied (read once, written once).
    pub copy_bytes: u64,
    pub fma_workgroups: u64,
    pub fma_iters: u32,
}

impl ProbeSize {
    /// Sized from the adapter: on a CPU adapter a few seconds in all (64 MiB copy, larger than the caches, 64 × 256 threads
    /// × 512 iterations); on a GPU a copy of min(max storage binding, 1 GiB) and 8192 workgroups of
    /// 4096 iterations. `copy_mib` overrides the copy size.
    pub fn for_adapter(r: &AdapterReport, copy_mib: Option<u64>) -> ProbeSize {
        let cpu = r.device_type == "Cpu";
        let max = r.caps.max_storage_binding.min(r.caps.max_buffer);
        let want = match copy_mib {
            Some(m) => m.saturating_mul(1 << 20),
            None if cpu => 64 << 20,
            None => 1 << 30,
        };
        let max_groups = r.caps.max_workgroups_per_dimension as u64;
        ProbeSize {
            copy_bytes: (want.min(max) / 16).max(1) * 16,
            fma_workgroups: if cpu {
                64
            } else {
                8192u64.min(max_groups * max_groups)
            },
            fma_iters: if cpu { 512 } else { 4096 },
        }
    }
}

/// One measured ceiling.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ceiling {
    /// Bytes (copy) or FLOPs (FMA) per dispatch.
    pub amount: u64,
    pub gpu_us: Stats,
    /// Rate over the median time, and over the fastest rep (used as the ceiling).
    pub median_rate: f64,
    pub best_rate: f64,
    /// "GB/s" or "GFLOP/s".
    pub unit: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbeFile {
    pub schema_version: u32,
    pub tool: String,
    /// `<adapter name> | <backend> | <driver> <driver info>`: how `run` finds the probe.
    pub key: String,
    pub adapter_name: String,
    pub backend: String,
    pub driver: String,
    pub device_type: String,
    pub size: ProbeSize,
    pub reps: u32,
    pub bandwidth: Ceiling,
    pub fma_f32: Ceiling,
    pub fma_f16: Option<Ceiling>,
    /// Why f16 was not probed, when it was not.
    pub f16_note: Option<String>,
    /// The matrix units' f16 peak (16 x 16 x 16 cooperative-matrix products, f32 accumulators:
    /// shaders/probe_coop.comp), where the device has them; the arithmetic ceiling of the
    /// dispatches that run on them (`Shader::on_matrix_units`). Absent in probe files written before it.
    #[serde(default)]
    pub matrix_f16: Option<Ceiling>,
    /// Why the matrix units were not probed, when they were not.
    #[serde(default)]
    pub matrix_note: Option<String>,
    /// Their bf16 peak (the same products with bf16 operands), where the device also has bf16
    /// cooperative matrices (VK_KHR_shader_bfloat16); the ceiling of the bf16 runs' dispatches on
    /// them. Absent in probe files written before it.
    #[serde(default)]
    pub matrix_bf16: Option<Ceiling>,
    /// Why the bf16 matrix peak was not probed, when it was not.
    #[serde(default)]
    pub matrix_bf16_note: Option<String>,
    pub command: String,
}

pub fn key(r: &AdapterReport) -> String {
    format!(
        "{} | {} | {} {}",
        r.name, r.backend, r.driver, r.driver_info
    )
}

/// The default probe path of an adapter (module docs).
pub fn default_path(r: &AdapterReport) -> PathBuf {
    cache_path(r, "probe")
}

/// `<cache folder>/<stem>-<adapter key slug>.json`: the per-adapter cache file of `probe` (`probe`)
/// and `tune` (`tune`); the folder as in the module docs.
pub fn cache_path(r: &AdapterReport, stem: &str) -> PathBuf {
    let slug: String = key(r)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .split('-')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let slug: String = slug.chars().take(120).collect();
    let dir = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })
        .map(|d| d.join("attn-wgpu"));
    match dir {
        Some(d) => d.join(format!("{stem}-{slug}.json")),
        None => PathBuf::from(format!("{stem}-{slug}.json")),
    }
}

fn sink() -> BufferDecl {
    BufferDecl {
        name: "sink".into(),
        bytes: 16,
        role: Role::Output,
        n_by_n: false,
    }
}

/// The copy plan: `dst = src` over `bytes` (a multiple of 16).
pub fn copy_plan(bytes: u64, max_dim: u32) -> Plan {
    let n_vec4 = bytes / 16;
    let groups = n_vec4.div_ceil(WG * VPT);
    Plan {
        variant: "probe-copy".into(),
        buffers: vec![
            BufferDecl {
                name: "src".into(),
                bytes,
                role: Role::Intermediate,
                n_by_n: false,
            },
            BufferDecl {
                name: "dst".into(),
                bytes,
                role: Role::Intermediate,
                n_by_n: false,
            },
            sink(),
        ],
        dispatches: vec![Dispatch {
            name: "copy".into(),
            phase: crate::plan::Phase::Forward,
            saved: vec![],
            shader: COPY,
            entry: "main",
            overrides: vec![],
            params: Params::new(n_vec4 as u32, 0, 0, false, 1.0),
            bindings: vec![
                BindingDecl {
                    buffer: "src".into(),
                    access: Access::Read,
                    range: None,
                },
                BindingDecl {
                    buffer: "dst".into(),
                    access: Access::ReadWrite,
                    range: None,
                },
            ],
            workgroups: grid_2d(groups, max_dim),
            reads_bytes: bytes,
            writes_bytes: bytes,
            flops: 0,
            loop_iters: VPT + 1,
            note: "bandwidth probe: read + write every byte once".into(),
        }],
        output: "sink".into(),
        config: vec![],
        notes: vec![],
        tile: None,
        grads: vec![],
        training_note: None,
    }
}

/// The FMA plan (f32 or f16).
pub fn fma_plan(f16: bool, workgroups: u64, iters: u32, max_dim: u32) -> Plan {
    Plan {
        variant: if f16 {
            "probe-fma-f16"
        } else {
            "probe-fma-f32"
        }
        .into(),
        buffers: vec![sink()],
        dispatches: vec![Dispatch {
            name: if f16 { "fma_f16" } else { "fma_f32" }.into(),
            phase: crate::plan::Phase::Forward,
            saved: vec![],
            shader: if f16 { FMA_F16 } else { FMA_F32 },
            entry: "main",
            overrides: vec![("ITERS".into(), iters as f64)],
            params: Params::new(0, 0, 0, false, 0.999),
            bindings: vec![BindingDecl {
                buffer: "sink".into(),
                access: Access::ReadWrite,
                range: None,
            }],
            workgroups: grid_2d(workgroups, max_dim),
            reads_bytes: 0,
            writes_bytes: 0,
            flops: workgroups * WG * iters as u64 * FLOPS_PER_ITER,
            loop_iters: iters as u64 + 1,
            note: "arithmetic probe: independent FMA chains, no memory traffic".into(),
        }],
        output: "sink".into(),
        config: vec![("ITERS".into(), iters as f64)],
        notes: vec![],
        tile: None,
        grads: vec![],
        training_note: None,
    }
}

/// FLOPs per workgroup and iteration of probe_coop.comp: 4 subgroups x 4 chains x 2 x 16^3.
const COOP_FLOPS_PER_ITER: u64 = 4 * 4 * 2 * 16 * 16 * 16;

/// The matrix-unit plan: `workgroups` of probe_coop.comp, `iters` products a chain, f16 or
/// (`bf16`) bf16 operands, in `build` (the emulated one only checks the plumbing, on lavapipe).
pub fn coop_plan(build: Build, bf16: bool, workgroups: u64, iters: u32, max_dim: u32) -> Plan {
    let ty = if bf16 { "bf16" } else { "f16" };
    let mut plan = fma_plan(false, workgroups, iters, max_dim);
    plan.variant = format!("probe-matrix-{ty}");
    plan.config = vec![("iterations".into(), iters as f64)];
    let d = &mut plan.dispatches[0];
    d.name = format!("matrix_{ty}");
    d.shader = tiled_coop_vk::spirv_shader(
        "probe_coop.comp",
        include_str!("../shaders/probe_coop.comp"),
        &format!(
            "{}{}",
            tiled_coop_vk::probe_coop_module(bf16),
            tiled_coop_vk::tail(build)
        ),
    );
    d.overrides = vec![];
    // The iteration count travels in Params.seq (a SPIR-V kernel has no WGSL overrides).
    d.params = Params::new(1, iters, 0, false, 1.0);
    d.flops = workgroups * iters as u64 * COOP_FLOPS_PER_ITER;
    d.loop_iters = match build {
        Build::Device => iters as u64 + 16,
        Build::Emulated => iters as u64 * 4 * (8 + 8 * 17) + 64,
    };
    d.note = format!(
        "matrix-unit probe: independent 16 x 16 x 16 {ty} products, f32 sums, no memory traffic"
    );
    plan
}

fn measure(runner: &mut Runner, plan: &Plan, reps: u32, unit: &str) -> Result<Ceiling> {
    let empty = Inputs::none();
    let m = runner.execute(
        plan,
        &empty,
        Schedule {
            warmup: 2,
            reps,
            // The probe times GPU kernels only.
            host_reps: 0,
            warmup_ms: None,
        },
    )?;
    let stats =
        Stats::of_all(m.reps.iter().map(|r| r.dispatch_gpu_us[0])).ok_or_else(|| Error::Gpu {
            stage: format!("probe {}", plan.variant),
            message: "no GPU timestamps: the probe needs TIMESTAMP_QUERY".into(),
        })?;
    let d = &plan.dispatches[0];
    let amount = if d.flops > 0 {
        d.flops
    } else {
        d.reads_bytes + d.writes_bytes
    };
    let rate = |us: f64| amount as f64 / (us.max(1e-3) * 1e-6) / 1e9;
    Ok(Ceiling {
        amount,
        gpu_us: stats,
        median_rate: rate(stats.median),
        best_rate: rate(stats.min),
        unit: unit.into(),
    })
}

/// Runs the three probes on `gpu`.
pub fn run_probe(gpu: &Gpu, size: ProbeSize, reps: u32, command: String) -> Result<ProbeFile> {
    if !gpu.caps.timestamps {
        return Err(Error::Gpu {
            stage: "probe".into(),
            message: format!(
                "adapter `{}` has no TIMESTAMP_QUERY: the probe needs GPU timestamps",
                gpu.report.name
            ),
        });
    }
    let max_dim = gpu.caps.max_workgroups_per_dimension;
    let mut runner = Runner::new(gpu)?;
    let bandwidth = measure(
        &mut runner,
        &copy_plan(size.copy_bytes, max_dim),
        reps,
        "GB/s",
    )?;
    let fma_f32 = measure(
        &mut runner,
        &fma_plan(false, size.fma_workgroups, size.fma_iters, max_dim),
        reps,
        "GFLOP/s",
    )?;
    let (fma_f16, f16_note) = if gpu.caps.f16 {
        (
            Some(measure(
                &mut runner,
                &fma_plan(true, size.fma_workgroups, size.fma_iters, max_dim),
                reps,
                "GFLOP/s",
            )?),
            None,
        )
    } else {
        (None, Some("adapter has no SHADER_F16".to_string()))
    };
    let matrix = tiled_coop_vk::device_check(&gpu.caps);
    let mut coop = |bf16: bool| {
        let plan = coop_plan(
            Build::Device,
            bf16,
            size.fma_workgroups,
            (size.fma_iters / 16).max(1),
            max_dim,
        );
        measure(&mut runner, &plan, reps, "GFLOP/s")
    };
    let (matrix_f16, matrix_note) = match &matrix {
        Ok(()) => (Some(coop(false)?), None),
        Err(why) => (None, Some(why.clone())),
    };
    let (matrix_bf16, matrix_bf16_note) = match (&matrix, &gpu.caps.bf16_matrix) {
        (Ok(()), Bf16Matrix::On) => (Some(coop(true)?), None),
        (Ok(()), Bf16Matrix::Off(why)) => (
            None,
            Some(format!(
                "no bf16 cooperative matrices (VK_KHR_shader_bfloat16): {why}"
            )),
        ),
        (Err(why), _) => (None, Some(why.clone())),
    };
    let r = &gpu.report;
    Ok(ProbeFile {
        schema_version: 1,
        tool: "attn-wgpu probe".into(),
        key: key(r),
        adapter_name: r.name.clone(),
        backend: r.backend.clone(),
        driver: format!("{} {}", r.driver, r.driver_info),
        device_type: r.device_type.clone(),
        size,
        reps,
        bandwidth,
        fma_f32,
        fma_f16,
        f16_note,
        matrix_f16,
        matrix_note,
        matrix_bf16,
        matrix_bf16_note,
        command,
    })
}

/// Reads a probe file; errors name the file.
pub fn load(path: &Path) -> std::result::Result<ProbeFile, String> {
    let text = crate::infile::read_to_string(path)
        .map_err(|e| format!("probe file {}: cannot read: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("probe file {}: not a probe result: {e}", path.display()))
}

/// Where one dispatch sits under the roofline.
#[derive(Debug, Clone, Serialize)]
pub struct RooflinePoint {
    /// FLOPs per byte moved (None when the plan estimates no bytes).
    pub intensity: Option<f64>,
    /// "memory" or "compute": which ceiling is lower at this intensity.
    pub bound: &'static str,
    /// The ceiling at this intensity, in the unit of `achieved`.
    pub ceiling: f64,
    pub achieved: f64,
    /// "GB/s" for pure data movement (no FLOPs), else "GFLOP/s".
    pub unit: &'static str,
    pub percent: f64,
}

/// The roofline ceiling for a dispatch of `flops` and `bytes` that took `us`, with peak `peak_gflops`.
pub fn roofline(
    p: &ProbeFile,
    peak_gflops: f64,
    flops: u64,
    bytes: u64,
    us: f64,
) -> Option<RooflinePoint> {
    if us <= 0.0 || (flops == 0 && bytes == 0) {
        return None;
    }
    let bw = p.bandwidth.best_rate;
    if flops == 0 {
        let achieved = bytes as f64 / (us * 1e-6) / 1e9;
        return Some(RooflinePoint {
            intensity: Some(0.0),
            bound: "memory",
            ceiling: bw,
            achieved,
            unit: "GB/s",
            percent: 100.0 * achieved / bw,
        });
    }
    let intensity = (bytes > 0).then(|| flops as f64 / bytes as f64);
    let mem_ceiling = intensity.map_or(f64::INFINITY, |i| bw * i);
    let (ceiling, bound) = if mem_ceiling < peak_gflops {
        (mem_ceiling, "memory")
    } else {
        (peak_gflops, "compute")
    };
    let achieved = flops as f64 / (us * 1e-6) / 1e9;
    Some(RooflinePoint {
        intensity,
        bound,
        ceiling,
        achieved,
        unit: "GFLOP/s",
        percent: 100.0 * achieved / ceiling,
    })
}

/// The arithmetic peak for a storage dtype name: f16 uses the f16 probe where present.
pub fn peak_for(p: &ProbeFile, dtype: &str) -> f64 {
    match (dtype, &p.fma_f16) {
        ("f16", Some(c)) => c.best_rate,
        _ => p.fma_f32.best_rate,
    }
}

/// The matrix units' peak for a storage dtype name, and which probe it is: bf16's where the run
/// is bf16 and it was probed, else f16's (`matrix bf16`, `matrix f16`); None where they were not
/// probed.
pub fn matrix_peak<'a>(p: &'a ProbeFile, dtype: &str) -> Option<(&'a Ceiling, &'static str)> {
    match (&p.matrix_bf16, &p.matrix_f16) {
        (Some(c), _) if dtype == "bf16" => Some((c, "matrix bf16")),
        (_, Some(c)) => Some((c, "matrix f16")),
        _ => None,
    }
}

/// The arithmetic peak of one dispatch: the matrix units' where it runs on them (`matrix`: its
/// kernel declares so, `Shader::on_matrix_units`) and they were probed ([`matrix_peak`]), else
/// [`peak_for`]; and which probe that is (`matrix bf16`, `matrix f16`, `f16` or `f32`).
pub fn peak_of(p: &ProbeFile, dtype: &str, matrix: bool) -> (f64, &'static str) {
    match matrix_peak(p, dtype) {
        Some((c, which)) if matrix => (c.best_rate, which),
        _ if dtype == "f16" && p.fma_f16.is_some() => (peak_for(p, dtype), "f16"),
        _ => (peak_for(p, dtype), "f32"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roofline_picks_the_lower_ceiling() {
        let c = |rate: f64, unit: &str| Ceiling {
            amount: 1,
            gpu_us: Stats::of(&[1.0]).unwrap(),
            median_rate: rate,
            best_rate: rate,
            unit: unit.into(),
        };
        let p = ProbeFile {
            schema_version: 1,
            tool: "t".into(),
            key: "k".into(),
            adapter_name: "a".into(),
            backend: "b".into(),
            driver: "d".into(),
            device_type: "Cpu".into(),
            size: ProbeSize {
                copy_bytes: 16,
                fma_workgroups: 1,
                fma_iters: 1,
            },
            reps: 1,
            bandwidth: c(100.0, "GB/s"),
            fma_f32: c(1000.0, "GFLOP/s"),
            fma_f16: None,
            f16_note: None,
            matrix_f16: None,
            matrix_note: None,
            matrix_bf16: None,
            matrix_bf16_note: None,
            command: String::new(),
        };
        // Intensity 1 FLOP/B: memory ceiling 100 GFLOP/s < 1000.
        let r = roofline(&p, 1000.0, 1_000_000, 1_000_000, 100.0).unwrap();
        assert_eq!(r.bound, "memory");
        assert!((r.ceiling - 100.0).abs() < 1e-9);
        assert!((r.achieved - 10.0).abs() < 1e-9);
        assert!((r.percent - 10.0).abs() < 1e-9);
        // Intensity 100: compute bound.
        let r = roofline(&p, 1000.0, 100_000_000, 1_000_000, 1000.0).unwrap();
        assert_eq!(r.bound, "compute");
        // Pure copy: GB/s against bandwidth.
        let r = roofline(&p, 1000.0, 0, 2_000_000, 100.0).unwrap();
        assert_eq!(r.unit, "GB/s");
        assert!((r.percent - 20.0).abs() < 1e-9);
    }

    #[test]
    fn plans_are_consistent() {
        copy_plan(1 << 20, 65535).check().unwrap();
        fma_plan(false, 64, 16, 65535).check().unwrap();
        assert_eq!(fma_plan(false, 2, 10, 65535).flops(), 2 * 256 * 10 * 32);
    }
}
