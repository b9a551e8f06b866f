//! A plan's GPU resources: its buffers (inputs uploaded, the output poisoned) and one bind group
//! per dispatch, created once and reused by every forward.

use std::collections::HashMap;

use wgpu::util::DeviceExt;

use crate::gpu::Gpu;
use crate::plan::{Plan, Role};
use crate::problem::Inputs;
use crate::{Error, Result};

/// A plan made ready to run.
pub(super) struct Prepared {
    pub buffers: HashMap<String, wgpu::Buffer>,
    pub pipelines: Vec<wgpu::ComputePipeline>,
    pub bind_groups: Vec<wgpu::BindGroup>,
}

/// Every buffer the plan declares, padded to 16 bytes so vec4 kernels may touch the last,
/// partial vec4.
pub(super) fn create_buffers(gpu: &Gpu, plan: &Plan) -> Result<HashMap<String, wgpu::Buffer>> {
    gpu.scoped("allocating the plan's buffers", || {
        plan.buffers
            .iter()
            .map(|b| {
                let buf = gpu.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(&b.name),
                    size: b.bytes.max(16).next_multiple_of(16),
                    usage: wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::COPY_DST
                        | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: false,
                });
                (b.name.clone(), buf)
            })
            .collect()
    })
}

/// Inputs by name (Q, K, V and dO in the run's dtype, MASK as f32; see
/// `Inputs::upload_bytes`); the output and the gradients poisoned with NaN so unwritten
/// elements show up.
pub(super) fn upload(
    gpu: &Gpu,
    plan: &Plan,
    inputs: &Inputs,
    buffers: &HashMap<String, wgpu::Buffer>,
) -> Result<()> {
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
        for out in std::iter::once(&plan.output).chain(&plan.grads) {
            let poison =
                vec![0xFFu8; plan.buffer(out).map_or(0, |b| b.bytes.next_multiple_of(4)) as usize];
            gpu.queue.write_buffer(&buffers[out], 0, &poison);
        }
    })?;
    gpu.wait("uploading inputs")
}

/// One bind group per dispatch: binding 0 is the dispatch's Params, then the plan's bindings
/// in order, against the pipeline's (explicit) layout.
pub(super) fn bind_groups(
    gpu: &Gpu,
    plan: &Plan,
    pipelines: &[wgpu::ComputePipeline],
    buffers: &HashMap<String, wgpu::Buffer>,
) -> Result<Vec<wgpu::BindGroup>> {
    gpu.scoped("creating bind groups", || {
        plan.dispatches
            .iter()
            .zip(pipelines)
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
                        resource: match b.range {
                            None => buffers[&b.buffer].as_entire_binding(),
                            Some((offset, size)) => {
                                wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                                    buffer: &buffers[&b.buffer],
                                    offset,
                                    size: wgpu::BufferSize::new(size),
                                })
                            }
                        },
                    });
                }
                gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some(&d.name),
                    layout: &p.get_bind_group_layout(0),
                    entries: &entries,
                })
            })
            .collect()
    })
}
