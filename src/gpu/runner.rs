//! The one engine: executes any [`Plan`] — buffers, pipelines (cached by shader, entry point and
//! override constants), bind groups, one compute pass per dispatch with begin/end timestamps — and
//! reads the output back.
//!
//! Timestamps go through `wgpu-profiler` (query pools, resolve, map-back); each dispatch is its own
//! pass with `ComputePassTimestampWrites`, the only form that works on every backend.

use std::collections::HashMap;
use std::time::Instant;

use serde::Serialize;
use wgpu::util::DeviceExt;
use wgpu_profiler::{GpuProfiler, GpuProfilerSettings};

use super::Gpu;
use crate::plan::{Plan, Role};
use crate::problem::Inputs;
use crate::{Error, Result};

/// How many forwards to run after the cold call.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Schedule {
    pub warmup: u32,
    pub reps: u32,
    /// Host-only forwards after the recorded ones: the same passes without timestamp queries,
    /// timed on the host only, twice over: `host_reps` each submitted and waited for
    /// (`Measurement::host_unprofiled_*`), then `host_reps` submitted back to back with one wait
    /// at the end (`Measurement::host_pipelined_*`). 0 skips both.
    pub host_reps: u32,
}

impl Schedule {
    /// The CLI's default count of unprofiled host-only forwards.
    pub const DEFAULT_HOST_REPS: u32 = 20;
}

/// What one forward call cost.
#[derive(Debug, Clone, Serialize)]
pub struct ForwardSample {
    /// GPU time of each dispatch (end - begin timestamp), µs; None without timestamps.
    pub dispatch_gpu_us: Vec<Option<f64>>,
    /// GPU begin/end of each dispatch in µs since the forward's first timestamp.
    pub dispatch_offsets_us: Vec<Option<(f64, f64)>>,
    /// First begin to last end on the GPU, µs: dispatches plus the gaps between them.
    pub gpu_span_us: Option<f64>,
    /// Host: recording all passes + submit, µs.
    pub host_encode_submit_us: f64,
    /// Host: from submit until the GPU signalled completion, µs.
    pub host_wait_us: f64,
    /// Host start of this forward, µs since the runner's epoch (for traces).
    pub host_start_us: f64,
    /// Host: the part of `host_encode_submit_us` spent inside `Queue::submit`, µs.
    pub host_submit_us: f64,
    /// Device clock of the first dispatch's begin timestamp, seconds (raw ticks × period); lets a
    /// trace place all forwards on one GPU time axis and calibrate it against the host clock.
    pub gpu_begin_s: Option<f64>,
}

impl ForwardSample {
    /// Sum of the dispatch times (None if any is missing).
    pub fn gpu_sum_us(&self) -> Option<f64> {
        self.dispatch_gpu_us.iter().copied().sum()
    }
}

/// The first call, timed apart: resource creation, shader compilation, pipeline creation.
#[derive(Debug, Clone, Serialize)]
pub struct ColdCall {
    pub buffers_ms: f64,
    pub upload_ms: f64,
    pub pipelines_ms: f64,
    pub bind_groups_ms: f64,
    /// The first forward itself (host wall clock, submit to completion).
    pub first_forward_ms: f64,
    /// Everything from the first buffer to the first result.
    pub total_ms: f64,
    pub first: ForwardSample,
    /// Host start of the cold call (first buffer), µs since the runner's epoch; the phases above
    /// follow each other without gaps from here (buffers, upload, pipelines, bind groups, forward).
    pub start_us: f64,
    /// One entry per dispatch's pipeline lookup, in plan order (inside `pipelines_ms`).
    pub compiles: Vec<CompileSample>,
}

/// Host cost of getting one dispatch's pipeline: shader module creation (WGSL parse, validation,
/// translation) when the module was not cached yet, then pipeline creation (the driver compile).
#[derive(Debug, Clone, Serialize)]
pub struct CompileSample {
    pub dispatch: String,
    pub shader: String,
    pub entry: String,
    /// True when the runner's cache already held this pipeline (no work done).
    pub cached: bool,
    /// Start, µs since the runner's epoch.
    pub start_us: f64,
    /// `create_shader_module`, µs; None when the module was cached.
    pub module_us: Option<f64>,
    /// `create_compute_pipeline`, µs; 0 when cached.
    pub pipeline_us: f64,
}

/// A host-side phase outside the forwards (e.g. the read-back), µs since the runner's epoch.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct HostSpan {
    pub start_us: f64,
    pub dur_us: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Measurement {
    pub cold: ColdCall,
    pub warmup: Vec<ForwardSample>,
    pub reps: Vec<ForwardSample>,
    #[serde(skip)]
    pub output: Vec<f32>,
    pub timestamps: bool,
    pub warnings: Vec<String>,
    /// Copy of the output to a mappable buffer, map and wait (after the last rep).
    pub readback: HostSpan,
    /// Host µs per forward of `Schedule::host_reps` unprofiled forwards (after the read-back):
    /// from creating the encoder to the return of `Queue::submit`, with plain compute passes (no
    /// timestamp writes, no query resolve). What a production forward costs the CPU, next to
    /// `ForwardSample::host_encode_submit_us`, which includes the measurement's own queries.
    pub host_unprofiled_encode_submit_us: Vec<f64>,
    /// Host µs per forward of another `Schedule::host_reps` unprofiled forwards, encoded and
    /// submitted back to back without waiting in between (one wait after the last), as a
    /// production loop runs them. The same span as `host_unprofiled_encode_submit_us`, but the
    /// thread never sleeps on the GPU between forwards, so it measures the host work rather than
    /// the host work plus the CPU waking up (and clocking up) after a wait.
    pub host_pipelined_encode_submit_us: Vec<f64>,
    /// The encoding part of those (creating the encoder to `finish`): a driver whose submit blocks
    /// until the previous submission finished (lavapipe does) shows GPU time in the submit part.
    pub host_pipelined_encode_us: Vec<f64>,
}

/// Composed shader sources live for the whole process (see `variants::compose`), so a source is
/// identified by its address and length.
type SourceKey = (usize, usize);
type PipelineKey = (SourceKey, &'static str, Vec<(String, u64)>);

fn source_key(s: &crate::plan::Shader) -> SourceKey {
    (s.source.as_ptr() as usize, s.source.len())
}

pub struct Runner<'g> {
    gpu: &'g Gpu,
    modules: HashMap<SourceKey, wgpu::ShaderModule>,
    pipelines: HashMap<PipelineKey, wgpu::ComputePipeline>,
    profiler: GpuProfiler,
    epoch: Instant,
    bounds_checks: bool,
}

/// A plan made ready to run: its GPU resources, created once and reused by every forward.
struct Prepared {
    buffers: HashMap<String, wgpu::Buffer>,
    pipelines: Vec<wgpu::ComputePipeline>,
    bind_groups: Vec<wgpu::BindGroup>,
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

    fn pipeline(
        &mut self,
        d: &crate::plan::Dispatch,
    ) -> Result<(wgpu::ComputePipeline, CompileSample)> {
        let t0 = Instant::now();
        let sk = source_key(&d.shader);
        let mut sample = CompileSample {
            dispatch: d.name.clone(),
            shader: d.shader.label(),
            entry: d.entry.into(),
            cached: true,
            start_us: (t0 - self.epoch).as_secs_f64() * 1e6,
            module_us: None,
            pipeline_us: 0.0,
        };
        let key: PipelineKey = (
            sk,
            d.entry,
            d.overrides
                .iter()
                .map(|(k, v)| (k.clone(), v.to_bits()))
                .collect(),
        );
        if let Some(p) = self.pipelines.get(&key) {
            return Ok((p.clone(), sample));
        }
        sample.cached = false;
        let gpu = self.gpu;
        if !self.modules.contains_key(&sk) {
            let label = d.shader.label();
            let desc = wgpu::ShaderModuleDescriptor {
                label: Some(&label),
                source: wgpu::ShaderSource::Wgsl(d.shader.source.into()),
            };
            let checks = self.bounds_checks;
            let module = gpu.scoped(&format!("compiling shaders/{label}"), || {
                if checks {
                    gpu.device.create_shader_module(desc)
                } else {
                    // SAFETY: every kernel of this project guards its global accesses with explicit
                    // bounds tests and indexes workgroup/function arrays within their declared
                    // sizes; tests/variants.rs runs every variant with the checks off as well.
                    unsafe {
                        gpu.device.create_shader_module_trusted(
                            desc,
                            wgpu::ShaderRuntimeChecks::unchecked(),
                        )
                    }
                }
            })?;
            self.modules.insert(sk, module);
            sample.module_us = Some(t0.elapsed().as_secs_f64() * 1e6);
        }
        let t1 = Instant::now();
        let module = &self.modules[&sk];
        let constants: Vec<(&str, f64)> =
            d.overrides.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        let pipeline = gpu.scoped(
            &format!(
                "creating the pipeline {}:{} {:?}",
                d.shader.label(),
                d.entry,
                d.overrides
            ),
            || {
                gpu.device
                    .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                        label: Some(&d.name),
                        layout: None,
                        module,
                        entry_point: Some(d.entry),
                        compilation_options: wgpu::PipelineCompilationOptions {
                            constants: &constants,
                            // Every kernel writes its workgroup arrays before reading them.
                            zero_initialize_workgroup_memory: false,
                        },
                        cache: None,
                    })
            },
        )?;
        self.pipelines.insert(key, pipeline.clone());
        sample.pipeline_us = t1.elapsed().as_secs_f64() * 1e6;
        Ok((pipeline, sample))
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
        let mut warnings = Vec::new();
        if !gpu.caps.timestamps {
            warnings.push(format!(
                "adapter `{}` has no TIMESTAMP_QUERY: GPU times are missing, host times only",
                gpu.report.name
            ));
        }
        let t_start = Instant::now();

        // 1. Buffers.
        let buffers = gpu.scoped("allocating the plan's buffers", || {
            plan.buffers
                .iter()
                .map(|b| {
                    let buf = gpu.device.create_buffer(&wgpu::BufferDescriptor {
                        label: Some(&b.name),
                        // Padded to 16 bytes so vec4 kernels may touch the last, partial vec4.
                        size: b.bytes.max(16).next_multiple_of(16),
                        usage: wgpu::BufferUsages::STORAGE
                            | wgpu::BufferUsages::COPY_DST
                            | wgpu::BufferUsages::COPY_SRC,
                        mapped_at_creation: false,
                    });
                    (b.name.clone(), buf)
                })
                .collect::<HashMap<_, _>>()
        })?;
        let t_buffers = Instant::now();

        // 2. Uploads: inputs by name (Q, K, V in the run's dtype, MASK as f32; see
        //    `Inputs::upload_bytes`); the output poisoned with NaN so unwritten elements show up.
        for b in plan.buffers.iter().filter(|b| b.role == Role::Input) {
            if inputs.upload_bytes(&b.name).is_none() {
                return Err(Error::Gpu {
                    stage: "uploading inputs".into(),
                    message: format!("the plan's input buffer `{}` has no data", b.name),
                });
            }
        }
        gpu.scoped("uploading inputs", || {
            for b in plan.buffers.iter().filter(|b| b.role == Role::Input) {
                if let Some(mut data) = inputs.upload_bytes(&b.name) {
                    // write_buffer needs a multiple of 4 bytes (16-bit dtypes, odd counts).
                    data.resize(data.len().next_multiple_of(4), 0);
                    data.truncate(buffers[&b.name].size() as usize);
                    gpu.queue.write_buffer(&buffers[&b.name], 0, &data);
                }
            }
            let poison = vec![
                0xFFu8;
                plan.buffer(&plan.output)
                    .map_or(0, |b| b.bytes.next_multiple_of(4))
                    as usize
            ];
            gpu.queue.write_buffer(&buffers[&plan.output], 0, &poison);
        })?;
        gpu.wait("uploading inputs")?;
        let t_upload = Instant::now();

        // 3. Pipelines (shader compilation happens here: part of the cold call only).
        let mut pipelines = Vec::with_capacity(plan.dispatches.len());
        let mut compiles = Vec::with_capacity(plan.dispatches.len());
        for d in &plan.dispatches {
            let (p, c) = self.pipeline(d)?;
            pipelines.push(p);
            compiles.push(c);
        }
        let t_pipelines = Instant::now();

        // 4. Bind groups: binding 0 is the dispatch's Params, then the plan's bindings in order.
        let bind_groups = gpu.scoped("creating bind groups", || {
            plan.dispatches
                .iter()
                .zip(&pipelines)
                .map(|(d, p)| {
                    let params = gpu
                        .device
                        .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                            label: Some("params"),
                            contents: bytemuck::bytes_of(&d.params),
                            usage: wgpu::BufferUsages::UNIFORM,
                        });
                    let mut entries = vec![wgpu::BindGroupEntry {
                        binding: 0,
                        resource: params.as_entire_binding(),
                    }];
                    for (i, b) in d.bindings.iter().enumerate() {
                        entries.push(wgpu::BindGroupEntry {
                            binding: i as u32 + 1,
                            resource: buffers[&b.buffer].as_entire_binding(),
                        });
                    }
                    gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
                        label: Some(&d.name),
                        layout: &p.get_bind_group_layout(0),
                        entries: &entries,
                    })
                })
                .collect::<Vec<_>>()
        })?;
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
        for _ in 0..schedule.warmup {
            warmup.push(self.forward(plan, &prepared)?);
        }
        let mut reps = Vec::with_capacity(schedule.reps as usize);
        for _ in 0..schedule.reps {
            reps.push(self.forward(plan, &prepared)?);
        }
        if reps.iter().any(|r| r.gpu_span_us.is_none()) && gpu.caps.timestamps {
            warnings.push("some forwards returned no timestamps".into());
        }
        let out_bytes = plan.buffer(&plan.output).map_or(0, |b| b.bytes);
        let out_elems = (out_bytes / inputs.dtype.bytes()) as usize;
        let t_rb = Instant::now();
        let raw = self.read_back(&prepared.buffers[&plan.output], out_bytes)?;
        let output = inputs.dtype.decode(&raw, out_elems);
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
            gpu.wait("running an unprofiled forward")?;
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
            gpu.wait("running pipelined unprofiled forwards")?;
        }
        Ok(Measurement {
            host_unprofiled_encode_submit_us: host_unprofiled,
            host_pipelined_encode_submit_us: host_pipelined,
            host_pipelined_encode_us: host_pipelined_encode,
            readback,
            cold,
            warmup,
            reps,
            output,
            timestamps: gpu.caps.timestamps,
            warnings,
        })
    }

    /// One forward: one compute pass per dispatch, each with begin/end timestamps; submit; wait.
    fn forward(&mut self, plan: &Plan, prep: &Prepared) -> Result<ForwardSample> {
        let gpu = self.gpu;
        let t0 = Instant::now();
        // No label: wgpu-core would copy it into a new String on every forward.
        let mut encoder = gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        for (i, d) in plan.dispatches.iter().enumerate() {
            // wgpu-profiler stores every query's label as an owned String (`impl Into<String>`):
            // an empty one allocates nothing. Results come back in the order the queries were
            // ended (one level, no nesting), which is dispatch order; see below.
            let query = self.profiler.begin_pass_query("", &mut encoder);
            record_pass(
                &mut encoder,
                d,
                prep,
                i,
                query.compute_pass_timestamp_writes(),
            );
            self.profiler.end_query(&mut encoder, query);
        }
        self.profiler.resolve_queries(&mut encoder);
        let cmd = encoder.finish();
        let t_sub = Instant::now();
        gpu.queue.submit([cmd]);
        let t1 = Instant::now();
        self.profiler.end_frame().map_err(|e| Error::Gpu {
            stage: "closing the profiler frame".into(),
            message: e.to_string(),
        })?;
        gpu.wait("running a forward")?;
        let t2 = Instant::now();

        let n = plan.dispatches.len();
        let mut ranges: Vec<Option<(f64, f64)>> = vec![None; n];
        if let Some(results) = self
            .profiler
            .process_finished_frame(gpu.queue.get_timestamp_period())
        {
            // One top-level result per `end_query`, in call order: the i-th is dispatch i. A
            // count that does not match leaves every dispatch without a time rather than guess.
            if results.len() == n {
                for (slot, r) in ranges.iter_mut().zip(results) {
                    *slot = r.time.map(|t| (t.start, t.end));
                }
            }
        }
        let begin = ranges
            .iter()
            .flatten()
            .map(|r| r.0)
            .fold(f64::INFINITY, f64::min);
        let end = ranges
            .iter()
            .flatten()
            .map(|r| r.1)
            .fold(f64::NEG_INFINITY, f64::max);
        let complete = ranges.iter().all(|r| r.is_some());
        Ok(ForwardSample {
            dispatch_gpu_us: ranges
                .iter()
                .map(|r| r.map(|(a, b)| (b - a) * 1e6))
                .collect(),
            dispatch_offsets_us: ranges
                .iter()
                .map(|r| r.map(|(a, b)| ((a - begin) * 1e6, (b - begin) * 1e6)))
                .collect(),
            gpu_span_us: complete.then_some((end - begin) * 1e6),
            host_encode_submit_us: (t1 - t0).as_secs_f64() * 1e6,
            host_wait_us: (t2 - t1).as_secs_f64() * 1e6,
            host_start_us: (t0 - self.epoch).as_secs_f64() * 1e6,
            host_submit_us: (t1 - t_sub).as_secs_f64() * 1e6,
            gpu_begin_s: begin.is_finite().then_some(begin),
        })
    }

    /// One forward as production code would record it: the same passes, pipelines and bind groups
    /// as [`Self::forward`], but no timestamp writes, no profiler and no query resolve. Returns the
    /// host µs from creating the encoder to `finish` (encoding) and to the return of
    /// `Queue::submit`, and does not wait: the caller decides whether the next forward starts from
    /// an idle queue or queues behind it.
    fn encode_submit_unprofiled(&self, plan: &Plan, prep: &Prepared) -> (f64, f64) {
        let gpu = self.gpu;
        let t0 = Instant::now();
        let mut encoder = gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        for (i, d) in plan.dispatches.iter().enumerate() {
            record_pass(&mut encoder, d, prep, i, None);
        }
        let cmd = encoder.finish();
        let encoded = t0.elapsed().as_secs_f64() * 1e6;
        gpu.queue.submit([cmd]);
        (encoded, t0.elapsed().as_secs_f64() * 1e6)
    }

    /// Reads the first `bytes` bytes of `src` (the buffer itself is padded to 16 bytes).
    fn read_back(&self, src: &wgpu::Buffer, bytes: u64) -> Result<Vec<u8>> {
        let gpu = self.gpu;
        let size = bytes
            .next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT)
            .min(src.size());
        let staging = gpu.scoped("reading the output back", || {
            let staging = gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("readback"),
                size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let mut enc = gpu.device.create_command_encoder(&Default::default());
            enc.copy_buffer_to_buffer(src, 0, &staging, 0, size);
            gpu.queue.submit([enc.finish()]);
            staging
        })?;
        let slice = staging.slice(..);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        gpu.wait("mapping the output")?;
        match rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(Error::Gpu {
                    stage: "mapping the output".into(),
                    message: e.to_string(),
                })
            }
            Err(_) => {
                return Err(Error::Gpu {
                    stage: "mapping the output".into(),
                    message: "the map callback never ran".into(),
                })
            }
        }
        let data = slice.get_mapped_range().map_err(|e| Error::Gpu {
            stage: "mapping the output".into(),
            message: e.to_string(),
        })?;
        let out: Vec<u8> = data[..(bytes as usize).min(data.len())].to_vec();
        drop(data);
        staging.unmap();
        Ok(out)
    }
}

/// Records dispatch `i` of a plan as one compute pass (with `timestamps` written at its begin and
/// end when given).
fn record_pass(
    encoder: &mut wgpu::CommandEncoder,
    d: &crate::plan::Dispatch,
    prep: &Prepared,
    i: usize,
    timestamps: Option<wgpu::ComputePassTimestampWrites>,
) {
    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
        label: Some(&d.name),
        timestamp_writes: timestamps,
    });
    pass.set_pipeline(&prep.pipelines[i]);
    pass.set_bind_group(0, &prep.bind_groups[i], &[]);
    let [x, y, z] = d.workgroups;
    pass.dispatch_workgroups(x, y, z);
}
