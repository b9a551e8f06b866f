//! The one engine: executes any [`Plan`] — buffers, pipelines (cached by shader, entry point,
//! override constants and layout), bind groups, one compute pass per dispatch with begin/end
//! timestamps — and reads the output back. Split by concern:
//!
//! | file             | what                                                           |
//! |------------------|----------------------------------------------------------------|
//! | `mod.rs`         | the runner and `execute`: the order of the phases              |
//! | `measurement.rs` | the schedule and what is measured (result-file types)          |
//! | `keys.rs`        | what the caches are keyed by; bind-group layout entries        |
//! | `pipelines.rs`   | shader modules, explicit bind-group layouts, pipelines (cached) |
//! | `resources.rs`   | buffers, uploads, bind groups                                  |
//! | `encode.rs`      | recording, submitting and timing forwards                      |
//! | `readback.rs`    | copying the output back to the host                            |
//!
//! Timestamps go through `wgpu-profiler` (query pools, resolve, map-back); each dispatch is its own
//! pass with `ComputePassTimestampWrites`, the only form that works on every backend.

use std::collections::HashMap;
use std::time::Instant;

use wgpu_profiler::{GpuProfiler, GpuProfilerSettings};

use super::Gpu;
use crate::plan::Plan;
use crate::problem::Inputs;
use crate::{Error, Result};

mod encode;
mod keys;
mod measurement;
mod pipelines;
mod readback;
mod resources;

pub use keys::layout_entries;
use keys::{LayoutKey, PipelineKey, SourceKey};
pub use measurement::{
    ColdCall, CompileSample, ForwardSample, HostSpan, Measurement, Schedule, WarmupFloor,
};
use resources::Prepared;

pub struct Runner<'g> {
    gpu: &'g Gpu,
    modules: HashMap<SourceKey, wgpu::ShaderModule>,
    layouts: HashMap<LayoutKey, wgpu::BindGroupLayout>,
    pipelines: HashMap<PipelineKey, wgpu::ComputePipeline>,
    profiler: GpuProfiler,
    epoch: Instant,
    bounds_checks: bool,
}

/// A timeout while a forward of `plan` ran, told with the dispatches that were in flight (one
/// submission holds them all, so the one that hung is among them).
fn in_flight(e: Error, plan: &Plan) -> Error {
    match e {
        Error::Timeout { stage, seconds } => {
            let names: Vec<&str> = plan.dispatches.iter().map(|d| d.name.as_str()).collect();
            Error::Timeout {
                stage: format!(
                    "{stage} of `{}` (in flight: dispatch{} {})",
                    plan.variant,
                    if names.len() == 1 { "" } else { "es" },
                    names.join(", ")
                ),
                seconds,
            }
        }
        e => e,
    }
}

impl<'g> Runner<'g> {
    pub fn new(gpu: &'g Gpu) -> Result<Self> {
        let profiler = GpuProfiler::new(
            &gpu.device,
            GpuProfilerSettings {
                enable_timer_queries: gpu.caps.timestamps,
                enable_debug_groups: false,
                max_num_pending_frames: 2,
            },
        )
        .map_err(|e| Error::Gpu {
            stage: "creating the timestamp profiler".into(),
            message: e.to_string(),
        })?;
        Ok(Runner {
            gpu,
            modules: HashMap::new(),
            layouts: HashMap::new(),
            pipelines: HashMap::new(),
            profiler,
            epoch: Instant::now(),
            // The project's own kernels guard their accesses (tests/variants.rs runs every
            // variant both ways): the trusted, fast path is the default, as on the CLI.
            bounds_checks: false,
        })
    }

    /// With `false`, shader modules are created without the index clamping wgpu injects on every
    /// array access (`create_shader_module_trusted`). Only for the project's own kernels, whose
    /// indexing the test suite checks with the clamping on and off.
    pub fn set_bounds_checks(&mut self, on: bool) {
        if on != self.bounds_checks {
            self.modules.clear();
            self.pipelines.clear();
        }
        self.bounds_checks = on;
    }

    pub fn bounds_checks(&self) -> bool {
        self.bounds_checks
    }

    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    /// Runs `plan`: the cold call, `schedule.warmup` untimed-for-stats calls, `schedule.reps`
    /// recorded calls; returns every sample and the output of the last call.
    pub fn execute(
        &mut self,
        plan: &Plan,
        inputs: &Inputs,
        schedule: Schedule,
    ) -> Result<Measurement> {
        let gpu = self.gpu;
        // Fault injection for the tests of a GPU error in a run of several variants (never for
        // measurements): ATTN_WGPU_FAULT_GPU names the variant whose run fails here.
        if std::env::var("ATTN_WGPU_FAULT_GPU").is_ok_and(|v| v == plan.variant) {
            return Err(Error::Gpu {
                stage: format!("the pipelines of `{}`", plan.variant),
                message: "fault injected by ATTN_WGPU_FAULT_GPU".into(),
            });
        }
        let mut warnings = Vec::new();
        if !gpu.caps.timestamps {
            warnings.push(format!(
                "adapter `{}` has no TIMESTAMP_QUERY: GPU times are missing, host times only",
                gpu.report.name
            ));
        }
        // 1. Buffers, 2. uploads, 3. pipelines (shader compilation: the cold call only),
        // 4. bind groups.
        let t_start = Instant::now();
        let buffers = resources::create_buffers(self.gpu, plan)?;
        let t_buffers = Instant::now();
        resources::upload(self.gpu, plan, inputs, &buffers)?;
        let t_upload = Instant::now();
        let mut pipelines = Vec::with_capacity(plan.dispatches.len());
        let mut compiles = Vec::with_capacity(plan.dispatches.len());
        for d in &plan.dispatches {
            let (p, c) = self.pipeline(d)?;
            pipelines.push(p);
            compiles.push(c);
        }
        let t_pipelines = Instant::now();
        let bind_groups = resources::bind_groups(self.gpu, plan, &pipelines, &buffers)?;
        let t_bind = Instant::now();
        let prepared = Prepared {
            buffers,
            pipelines,
            bind_groups,
        };

        // 5. The cold call, then warm-up, then the recorded repetitions.
        let first = self.forward(plan, &prepared)?;
        let t_first = Instant::now();
        let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
        let cold = ColdCall {
            buffers_ms: ms(t_start, t_buffers),
            upload_ms: ms(t_buffers, t_upload),
            pipelines_ms: ms(t_upload, t_pipelines),
            bind_groups_ms: ms(t_pipelines, t_bind),
            first_forward_ms: ms(t_bind, t_first),
            total_ms: ms(t_start, t_first),
            first,
            start_us: (t_start - self.epoch).as_secs_f64() * 1e6,
            compiles,
        };
        let mut warmup = Vec::with_capacity(schedule.warmup as usize);
        let t_warm = Instant::now();
        for _ in 0..schedule.warmup {
            warmup.push(self.forward(plan, &prepared)?);
        }
        let floor_ms = schedule.floor_ms(&gpu.report.device_type);
        let mut extra_forwards = 0;
        while t_warm.elapsed().as_secs_f64() * 1e3 < floor_ms
            && extra_forwards < Schedule::MAX_FLOOR_FORWARDS
        {
            self.forward(plan, &prepared)?;
            extra_forwards += 1;
        }
        let warmup_floor = WarmupFloor {
            floor_ms,
            extra_forwards,
            elapsed_ms: t_warm.elapsed().as_secs_f64() * 1e3,
        };
        let mut reps = Vec::with_capacity(schedule.reps as usize);
        for _ in 0..schedule.reps {
            reps.push(self.forward(plan, &prepared)?);
        }
        if reps.iter().any(|r| r.gpu_span_us.is_none()) && gpu.caps.timestamps {
            warnings.push("some forwards returned no timestamps".into());
        }
        // On a GPU only: a CPU adapter's times move with the host's load, both halves alike or not.
        if gpu.report.device_type != "Cpu" {
            let spans: Vec<f64> = reps.iter().filter_map(|r| r.gpu_span_us).collect();
            warnings.extend(measurement::drift_warning(&spans));
        }
        let out_bytes = plan.buffer(&plan.output).map_or(0, |b| b.bytes);
        let out_elems = (out_bytes / inputs.dtype.bytes()) as usize;
        let t_rb = Instant::now();
        let raw = self.read_back(&prepared.buffers[&plan.output], out_bytes)?;
        let output = inputs.dtype.decode(&raw, out_elems);
        let mut grads = Vec::with_capacity(plan.grads.len());
        for g in &plan.grads {
            let bytes = plan.buffer(g).map_or(0, |b| b.bytes);
            let raw = self.read_back(&prepared.buffers[g], bytes)?;
            grads.push(
                inputs
                    .dtype
                    .decode(&raw, (bytes / inputs.dtype.bytes()) as usize),
            );
        }
        let readback = HostSpan {
            start_us: (t_rb - self.epoch).as_secs_f64() * 1e6,
            dur_us: t_rb.elapsed().as_secs_f64() * 1e6,
        };
        // 6. Host-only forwards, after the read-back so that `output` stays the last recorded
        //    call's (they compute the same thing anyway). First each one waited for, so every
        //    forward starts from an idle queue as the profiled ones do...
        let mut host_unprofiled = Vec::with_capacity(schedule.host_reps as usize);
        for _ in 0..schedule.host_reps {
            host_unprofiled.push(self.encode_submit_unprofiled(plan, &prepared).1);
            gpu.wait("running an unprofiled forward")
                .map_err(|e| in_flight(e, plan))?;
        }
        // ... then back to back, one wait at the end: the thread stays busy on the host, as in a
        // production loop, so the span is the host work without the wake-up after a GPU wait.
        let mut host_pipelined = Vec::with_capacity(schedule.host_reps as usize);
        let mut host_pipelined_encode = Vec::with_capacity(schedule.host_reps as usize);
        for _ in 0..schedule.host_reps {
            let (encode, total) = self.encode_submit_unprofiled(plan, &prepared);
            host_pipelined_encode.push(encode);
            host_pipelined.push(total);
        }
        if schedule.host_reps > 0 {
            gpu.wait("running pipelined unprofiled forwards")
                .map_err(|e| in_flight(e, plan))?;
        }
        Ok(Measurement {
            host_unprofiled_encode_submit_us: host_unprofiled,
            host_pipelined_encode_submit_us: host_pipelined,
            host_pipelined_encode_us: host_pipelined_encode,
            readback,
            cold,
            warmup,
            warmup_floor,
            reps,
            output,
            grads,
            timestamps: gpu.caps.timestamps,
            warnings,
        })
    }
}
