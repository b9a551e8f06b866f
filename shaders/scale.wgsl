// scale.wgsl — S *= scale, in place: one read and one write of the whole N x N matrix per head.
//
// Element-wise kernels are pure bandwidth: each thread handles one element per grid step and the
// grid is 2-D only because one dimension holds at most 65535 workgroups.

@group(0) @binding(1) var<storage, read_write> s: array<f32>;

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let total = params.heads * params.seq * params.seq;
    let idx = linear_group(wg, nwg) * 256u + li;
    if (idx < total) {
        s[idx] = s[idx] * params.scale;
    }
}
