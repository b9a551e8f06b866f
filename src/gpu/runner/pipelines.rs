//! Shader modules, bind-group layouts and compute pipelines, each created once and cached.
//!
//! Layouts are explicit, built from what the plan declares (vello's declared binding types turned
//! into layouts): binding 0 is the dispatch's `Params` uniform, bindings 1.. are the dispatch's
//! storage buffers in order, read-only where the plan says [`crate::plan::Access::Read`]. wgpu checks every
//! pipeline against its layout, so a plan whose declared access differs from the kernel's WGSL
//! fails at pipeline creation with wgpu's message instead of being silently inferred.

use std::time::Instant;

use super::keys::{layout_entries, source_key, LayoutKey, PipelineKey};
use super::{CompileSample, Runner};
use crate::plan::{Dispatch, Shader};
use crate::Result;

impl Runner<'_> {
    /// The bind-group layout for `access` (cached).
    pub(super) fn layout(&mut self, access: &LayoutKey) -> Result<wgpu::BindGroupLayout> {
        if let Some(l) = self.layouts.get(access) {
            return Ok(l.clone());
        }
        let gpu = self.gpu;
        let layout = gpu.scoped("creating a bind-group layout", || {
            gpu.device
                .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                    label: None,
                    entries: &layout_entries(access),
                })
        })?;
        self.layouts.insert(access.clone(), layout.clone());
        Ok(layout)
    }

    /// The shader module of `shader` (cached); the µs spent creating it, when it was not cached.
    fn module(&mut self, shader: &Shader) -> Result<(wgpu::ShaderModule, Option<f64>)> {
        let sk = source_key(shader);
        if let Some(m) = self.modules.get(&sk) {
            return Ok((m.clone(), None));
        }
        let t0 = Instant::now();
        let gpu = self.gpu;
        let label = shader.label();
        let desc = wgpu::ShaderModuleDescriptor {
            label: Some(&label),
            source: wgpu::ShaderSource::Wgsl(shader.source.into()),
        };
        let checks = self.bounds_checks;
        let module = gpu.scoped(&format!("compiling shaders/{label}"), || {
            if shader.is_spirv() {
                // A GLSL kernel compiled to SPIR-V at build time (build.rs): wgpu cannot translate
                // or check it, so it goes to the driver as it is. Its plan builder offers it only
                // on a Vulkan device with PASSTHROUGH_SHADERS (kernels/tiled_coop_vk.rs).
                // SAFETY: the project's own kernel, compiled from shaders/ by glslang; its
                // bindings are the plan's (the layout below), and every global access is guarded
                // or lands in the padding the plan allocates.
                unsafe { gpu.spirv_module(&label, shader.spirv) }
            } else if checks {
                gpu.device.create_shader_module(desc)
            } else {
                // SAFETY: every kernel of this project guards its global accesses with explicit
                // bounds tests and indexes workgroup/function arrays within their declared
                // sizes; tests/variants.rs runs every variant with the checks off as well.
                unsafe {
                    gpu.device
                        .create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked())
                }
            }
        })?;
        self.modules.insert(sk, module.clone());
        Ok((module, Some(t0.elapsed().as_secs_f64() * 1e6)))
    }

    /// The pipeline of dispatch `d` (cached by shader, entry point, overrides and layout), with
    /// what getting it cost.
    pub(super) fn pipeline(
        &mut self,
        d: &Dispatch,
    ) -> Result<(wgpu::ComputePipeline, CompileSample)> {
        let t0 = Instant::now();
        let access: LayoutKey = d.bindings.iter().map(|b| b.access).collect();
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
            source_key(&d.shader),
            d.entry,
            d.overrides
                .iter()
                .map(|(k, v)| (k.clone(), v.to_bits()))
                .collect(),
            access.clone(),
        );
        if let Some(p) = self.pipelines.get(&key) {
            return Ok((p.clone(), sample));
        }
        sample.cached = false;
        let (module, module_us) = self.module(&d.shader)?;
        sample.module_us = module_us;
        let t1 = Instant::now();
        let layout = self.layout(&access)?;
        let gpu = self.gpu;
        let pipeline_layout = gpu
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(&d.name),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
        let constants: Vec<(&str, f64)> =
            d.overrides.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        let pipeline = gpu.scoped(
            &format!(
                "creating the pipeline {}:{} {:?} with the plan's bindings {:?}",
                d.shader.label(),
                d.entry,
                d.overrides,
                d.bindings
                    .iter()
                    .map(|b| format!("{} {:?}", b.buffer, b.access))
                    .collect::<Vec<_>>()
            ),
            || {
                gpu.device
                    .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                        label: Some(&d.name),
                        layout: Some(&pipeline_layout),
                        module: &module,
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
}
