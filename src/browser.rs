//! The browser edition's data (docs/browser.md): what the page reports about its WebGPU adapter,
//! the plan as the page receives it (a "job": every buffer, every dispatch with its WGSL, override
//! constants, uniform words, bindings and grid), and the samples it returns, turned into the
//! runner's own [`Measurement`] so that validation, reports and result files treat a browser run
//! like any other. No I/O here: `cli/browser.rs` serves the page and moves the bytes.

use serde::{Deserialize, Serialize};

use crate::gpu::context::{AdapterCaps, AdapterReport, CoopLayout};
use crate::gpu::runner::{ColdCall, CompileSample, ForwardSample, HostSpan, Measurement};
use crate::gpu::runner::{Schedule, WarmupFloor};
use crate::plan::{Access, Plan, Role};

/// Version of the job and sample formats below (docs/browser.md).
pub const FORMAT_VERSION: u32 = 1;

/// The adapter as the page sees it (`navigator.gpu.requestAdapter()`): `adapter.info`, the
/// features that matter here, the limits, and the browser's user agent.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct PageAdapter {
    pub vendor: String,
    pub architecture: String,
    pub device: String,
    pub description: String,
    pub user_agent: String,
    pub features: Vec<String>,
    pub subgroup_min_size: u32,
    pub subgroup_max_size: u32,
    pub max_workgroup_storage: u32,
    pub max_invocations_per_workgroup: u32,
    pub max_workgroup_size_x: u32,
    pub max_workgroups_per_dimension: u32,
    pub max_storage_binding: u64,
    pub max_buffer: u64,
    pub max_storage_buffers_per_stage: u32,
}

impl PageAdapter {
    pub fn has(&self, feature: &str) -> bool {
        self.features.iter().any(|f| f == feature)
    }

    /// What a plan builder may assume: WebGPU's core, the optional features the page enabled,
    /// the adapter's limits. No cooperative matrices or SPIR-V in a browser. SwiftShader (Chrome's
    /// software adapter) runs on LLVM like Mesa's llvmpipe, but has no loop cap that we know of.
    pub fn caps(&self) -> AdapterCaps {
        AdapterCaps {
            backend: "browser".into(),
            timestamps: self.has("timestamp-query"),
            f16: self.has("shader-f16"),
            subgroups: self.has("subgroups"),
            // WGSL's subgroupBarrier is not part of the `subgroups` feature in browsers.
            subgroup_barrier: false,
            subgroup_min_size: self.subgroup_min_size,
            subgroup_max_size: self.subgroup_max_size,
            cooperative_matrix: false,
            // WebGPU has no float atomics: `--bwd-dq atomic` is native only.
            float32_atomics: false,
            passthrough: false,
            coop_layout: CoopLayout::NotProbed("a browser has no cooperative matrices".into()),
            bf16_matrix: crate::gpu::Bf16Matrix::Off(
                "a browser has no cooperative matrices".into(),
            ),
            cm2: crate::gpu::Cm2::Off("a browser has no cooperative matrices".into()),
            max_workgroup_storage: self.max_workgroup_storage,
            max_invocations_per_workgroup: self.max_invocations_per_workgroup,
            max_workgroup_size_x: self.max_workgroup_size_x,
            max_workgroups_per_dimension: self.max_workgroups_per_dimension,
            max_storage_binding: self.max_storage_binding,
            max_buffer: self.max_buffer,
            max_loop_iterations: None,
        }
    }

    /// The adapter as result files record it: backend `browser`, the user agent as the driver.
    pub fn report(&self) -> AdapterReport {
        let name = [
            &self.vendor,
            &self.architecture,
            &self.device,
            &self.description,
        ]
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(" ");
        let software = self
            .description
            .to_ascii_lowercase()
            .contains("swiftshader")
            || self.vendor.to_ascii_lowercase().contains("google")
                && self
                    .architecture
                    .to_ascii_lowercase()
                    .contains("swiftshader");
        AdapterReport {
            name: if name.is_empty() {
                "browser WebGPU adapter".into()
            } else {
                name
            },
            backend: "browser".into(),
            device_type: if software { "Cpu" } else { "Unknown" }.into(),
            driver: self.user_agent.clone(),
            driver_info: format!("features: {}", self.features.join(", ")),
            vendor: 0,
            device: 0,
            caps: self.caps(),
            matrix_extensions: vec![],
        }
    }
}

/// One buffer of a job.
#[derive(Debug, Clone, Serialize)]
pub struct JobBuffer {
    pub name: String,
    /// Size to allocate: the plan's bytes rounded up to 16 (as the native runner does).
    pub size: u64,
    /// Fetched from `/input/<run>/<name>` and written before the first forward.
    pub upload: bool,
    /// Filled with 0xFF bytes before the first forward (the output and gradients), so a kernel
    /// that writes nothing cannot pass.
    pub poison: bool,
}

/// A binding of a job's dispatch: `(buffer, read_only, byte range)`.
pub type JobBinding = (String, bool, Option<(u64, u64)>);

/// One dispatch of a job: everything `createComputePipeline` and the pass need.
#[derive(Debug, Clone, Serialize)]
pub struct JobDispatch {
    pub name: String,
    pub label: String,
    pub code: String,
    pub entry: String,
    pub constants: Vec<(String, f64)>,
    /// The `Params` uniform as 32-bit words.
    pub params: Vec<u32>,
    /// `(buffer, read_only, range)` of bindings 1.. (binding 0 is the uniform).
    pub bindings: Vec<JobBinding>,
    pub workgroups: [u32; 3],
}

/// A plan as the page runs it, with the schedule.
#[derive(Debug, Clone, Serialize)]
pub struct Job {
    pub format: u32,
    pub variant: String,
    pub buffers: Vec<JobBuffer>,
    pub dispatches: Vec<JobDispatch>,
    /// Read back after the last recorded forward: O first, then the gradients.
    pub outputs: Vec<String>,
    pub warmup: u32,
    pub reps: u32,
    pub warmup_ms: f64,
    /// Create the shader modules and pipelines, report every compilation message, run nothing.
    pub compile_only: bool,
}

/// What the page returns for a compile-only job: per dispatch, Tint's messages (any type).
#[derive(Debug, Clone, Deserialize)]
pub struct PageCompiled {
    pub compiles: Vec<PageCompile>,
}

/// Tint wants `enable subgroups;` before a shader uses subgroup built-ins (WGSL's rule); naga
/// (wgpu 30) reads them without it and refuses the directive, so the browser form adds it.
pub fn browser_wgsl(source: &str) -> String {
    if source.contains("subgroup") && !source.contains("enable subgroups;") {
        format!("enable subgroups;\n{source}")
    } else {
        source.to_string()
    }
}

/// The job of `plan` with `schedule`: every dispatch's WGSL in its browser form.
pub fn job(
    plan: &Plan,
    schedule: &Schedule,
    warmup_ms: f64,
    compile_only: bool,
) -> Result<Job, String> {
    let outputs: Vec<String> = std::iter::once(plan.output.clone())
        .chain(plan.grads.iter().cloned())
        .collect();
    let dispatches = plan
        .dispatches
        .iter()
        .map(|d| {
            if d.shader.is_spirv() {
                return Err(format!(
                    "dispatch `{}` is a SPIR-V kernel ({}): a browser runs WGSL only",
                    d.name,
                    d.shader.label()
                ));
            }
            Ok(JobDispatch {
                name: d.name.clone(),
                label: d.shader.label(),
                code: browser_wgsl(d.shader.source),
                entry: d.entry.to_string(),
                constants: d.overrides.clone(),
                params: bytemuck::cast_slice::<u8, u32>(bytemuck::bytes_of(&d.params)).to_vec(),
                bindings: d
                    .bindings
                    .iter()
                    .map(|b| (b.buffer.clone(), b.access == Access::Read, b.range))
                    .collect(),
                workgroups: d.workgroups,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Job {
        format: FORMAT_VERSION,
        variant: plan.variant.clone(),
        buffers: plan
            .buffers
            .iter()
            .map(|b| JobBuffer {
                name: b.name.clone(),
                size: b.bytes.max(16).next_multiple_of(16),
                upload: b.role == Role::Input,
                poison: outputs.contains(&b.name),
            })
            .collect(),
        dispatches,
        outputs,
        warmup: schedule.warmup,
        reps: schedule.reps,
        warmup_ms,
        compile_only,
    })
}

/// One forward as the page timed it.
#[derive(Debug, Clone, Deserialize)]
pub struct PageSample {
    /// Per dispatch: `[begin, end]` in ns since the forward's first begin; empty without
    /// timestamps.
    pub ns: Vec<[f64; 2]>,
    /// Host (`performance.now()`, ms): encoding + submit, then the wait for the GPU.
    pub encode_submit_ms: f64,
    pub wait_ms: f64,
    /// Host start, ms since the page's first request.
    pub start_ms: f64,
}

/// A pipeline the page created, with its compilation time.
#[derive(Debug, Clone, Deserialize)]
pub struct PageCompile {
    pub dispatch: String,
    pub module_ms: f64,
    pub pipeline_ms: f64,
    /// `getCompilationInfo()`'s messages, `type: line:col: text` (a run stops at an error).
    #[serde(default)]
    pub messages: Vec<String>,
}

/// What the page returns for one job (the output bytes come separately).
#[derive(Debug, Clone, Deserialize)]
pub struct PageRun {
    pub compiles: Vec<PageCompile>,
    pub buffers_ms: f64,
    pub upload_ms: f64,
    pub first: PageSample,
    pub warmup: Vec<PageSample>,
    pub extra_forwards: u32,
    pub warmup_elapsed_ms: f64,
    pub reps: Vec<PageSample>,
    pub readback_ms: f64,
    pub readback_start_ms: f64,
    /// The page's verdict on its timestamps: every one a multiple of 100 µs (Chrome quantizes
    /// them so unless its WebGPU developer features are on).
    pub quantized: bool,
}

fn sample(s: &PageSample, n: usize) -> ForwardSample {
    let ok = s.ns.len() == n && n > 0;
    let us = |x: f64| x / 1e3;
    ForwardSample {
        dispatch_gpu_us: (0..n)
            .map(|i| ok.then(|| us(s.ns[i][1] - s.ns[i][0])))
            .collect(),
        dispatch_offsets_us: (0..n)
            .map(|i| ok.then(|| (us(s.ns[i][0]), us(s.ns[i][1]))))
            .collect(),
        gpu_span_us: ok.then(|| us(s.ns[n - 1][1] - s.ns[0][0])),
        host_encode_submit_us: s.encode_submit_ms * 1e3,
        host_wait_us: s.wait_ms * 1e3,
        host_start_us: s.start_ms * 1e3,
        host_submit_us: 0.0,
        gpu_begin_s: None,
    }
}

/// The runner's [`Measurement`] of a job the page ran: `output` and `grads` are the decoded
/// read-backs (O, then the gradients, as [`Job::outputs`] lists them).
pub fn measurement(
    plan: &Plan,
    run: &PageRun,
    output: Vec<f32>,
    grads: Vec<Vec<f32>>,
    timestamps: bool,
    warmup_ms: f64,
) -> Measurement {
    let n = plan.dispatches.len();
    let mut warnings = Vec::new();
    if !timestamps {
        warnings.push("the page's adapter has no timestamp-query: GPU times are missing".into());
    }
    if run.quantized {
        warnings.push(
            "the browser quantized its timestamps to 100 µs (Chrome does so unless its WebGPU \
             developer features are on: --enable-webgpu-developer-features, or chrome://flags): \
             GPU times are not comparable with unquantized ones"
                .into(),
        );
    }
    let compiles = run
        .compiles
        .iter()
        .map(|c| CompileSample {
            dispatch: c.dispatch.clone(),
            shader: plan
                .dispatches
                .iter()
                .find(|d| d.name == c.dispatch)
                .map_or_else(String::new, |d| d.shader.label()),
            entry: String::new(),
            cached: false,
            start_us: 0.0,
            module_us: Some(c.module_ms * 1e3),
            pipeline_us: c.pipeline_ms * 1e3,
        })
        .collect();
    let pipelines_ms: f64 = run
        .compiles
        .iter()
        .map(|c| c.module_ms + c.pipeline_ms)
        .sum();
    let first = sample(&run.first, n);
    let first_ms = (first.host_encode_submit_us + first.host_wait_us) / 1e3;
    Measurement {
        cold: ColdCall {
            buffers_ms: run.buffers_ms,
            upload_ms: run.upload_ms,
            pipelines_ms,
            bind_groups_ms: 0.0,
            first_forward_ms: first_ms,
            total_ms: run.buffers_ms + run.upload_ms + pipelines_ms + first_ms,
            start_us: first.host_start_us,
            first,
            compiles,
        },
        warmup: run.warmup.iter().map(|s| sample(s, n)).collect(),
        warmup_floor: WarmupFloor {
            floor_ms: warmup_ms,
            extra_forwards: run.extra_forwards,
            elapsed_ms: run.warmup_elapsed_ms,
        },
        reps: run.reps.iter().map(|s| sample(s, n)).collect(),
        output,
        grads,
        timestamps,
        warnings,
        readback: HostSpan {
            start_us: run.readback_start_ms * 1e3,
            dur_us: run.readback_ms * 1e3,
        },
        host_unprofiled_encode_submit_us: Vec::new(),
        host_pipelined_encode_submit_us: Vec::new(),
        host_pipelined_encode_us: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::Problem;

    fn swiftshader() -> PageAdapter {
        PageAdapter {
            vendor: "google".into(),
            architecture: "swiftshader".into(),
            device: String::new(),
            description: "SwiftShader device (Subzero)".into(),
            user_agent: "Mozilla/5.0 HeadlessChrome/148".into(),
            features: vec!["timestamp-query".into(), "subgroups".into()],
            subgroup_min_size: 4,
            subgroup_max_size: 4,
            max_workgroup_storage: 32768,
            max_invocations_per_workgroup: 256,
            max_workgroup_size_x: 256,
            max_workgroups_per_dimension: 65535,
            max_storage_binding: 128 << 20,
            max_buffer: 256 << 20,
            max_storage_buffers_per_stage: 10,
        }
    }

    #[test]
    fn a_job_is_the_plan_with_its_wgsl_words_and_bindings() {
        let a = swiftshader();
        let p = Problem::new(1, 2, 16, 16, true, 3);
        let plan = crate::variants::plan("unfused", &p, &a.caps()).unwrap();
        let s = Schedule {
            warmup: 1,
            reps: 2,
            host_reps: 0,
            warmup_ms: None,
        };
        let j = job(&plan, &s, 0.0, false).unwrap();
        assert_eq!(j.dispatches.len(), 6, "unfused is six dispatches");
        assert_eq!(j.outputs, vec![plan.output.clone()]);
        for (jd, d) in j.dispatches.iter().zip(&plan.dispatches) {
            assert_eq!(jd.params.len() * 4, std::mem::size_of_val(&d.params));
            assert_eq!(jd.bindings.len(), d.bindings.len());
            assert!(jd.code.contains(&format!("fn {}", d.entry)), "{}", jd.label);
        }
        let out = j.buffers.iter().find(|b| b.name == plan.output).unwrap();
        assert!(out.poison && !out.upload && out.size % 16 == 0);
        assert!(j.buffers.iter().any(|b| b.name == "Q" && b.upload));
        assert_eq!(a.report().backend, "browser");
        assert_eq!(a.report().device_type, "Cpu");
    }

    #[test]
    fn subgroup_kernels_get_the_directive_tint_wants() {
        assert_eq!(
            browser_wgsl("x = subgroupAdd(y);"),
            "enable subgroups;\nx = subgroupAdd(y);"
        );
        assert_eq!(browser_wgsl("x = y;"), "x = y;");
    }

    #[test]
    fn samples_become_the_runners_forward_samples() {
        let s = PageSample {
            ns: vec![[0.0, 1500.0], [2000.0, 5000.0]],
            encode_submit_ms: 0.5,
            wait_ms: 2.0,
            start_ms: 10.0,
        };
        let f = sample(&s, 2);
        assert_eq!(f.dispatch_gpu_us, vec![Some(1.5), Some(3.0)]);
        assert_eq!(f.gpu_span_us, Some(5.0));
        assert_eq!(f.host_wait_us, 2000.0);
        // No timestamps (or a count that does not match the plan): times missing, not invented.
        let f = sample(&PageSample { ns: vec![], ..s }, 2);
        assert_eq!(f.dispatch_gpu_us, vec![None, None]);
        assert_eq!(f.gpu_span_us, None);
    }
}
