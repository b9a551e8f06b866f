//! What the runner's caches are keyed by (a kernel's source, a layout, a pipeline), and the
//! bind-group layout entries a dispatch's declared access makes: binding 0 is the dispatch's
//! `Params` uniform, bindings 1.. its storage buffers in order, read-only where the plan says
//! [`Access::Read`].

use crate::plan::{Access, Shader};

/// A kernel's [`Shader::identity`].
pub(super) type SourceKey = (usize, usize, usize);
/// The storage bindings' access, in binding order: what a layout is made of.
pub(super) type LayoutKey = Vec<Access>;
pub(super) type PipelineKey = (SourceKey, &'static str, Vec<(String, u64)>, LayoutKey);

pub(super) fn source_key(s: &Shader) -> SourceKey {
    s.identity()
}

/// The layout entries of a dispatch: the uniform at 0, then one storage buffer per binding.
pub fn layout_entries(access: &[Access]) -> Vec<wgpu::BindGroupLayoutEntry> {
    let mut entries = vec![wgpu::BindGroupLayoutEntry {
        binding: 0,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }];
    for (i, a) in access.iter().enumerate() {
        entries.push(wgpu::BindGroupLayoutEntry {
            binding: i as u32 + 1,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage {
                    read_only: *a == Access::Read,
                },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        });
    }
    entries
}
