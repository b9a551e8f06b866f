// scale.wgsl — S *= scale, in place: one read and one write of the whole N x N matrix per head.
//
// Pure bandwidth: each thread moves one vec4 (16-byte loads and stores). The runner pads every
// buffer to a multiple of 16 bytes, so the last, partial vec4 is safe to touch. The grid is 2-D only
// because one dimension holds at most 65535 workgroups.

@group(0) @binding(1) var<storage, read_write> s: array<vec4<f32>>;

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let total4 = (params.heads * params.seq * params.kv_seq + 3u) / 4u;
    let idx = linear_group(wg, nwg) * 256u + li;
    if (idx < total4) {
        s[idx] = s[idx] * params.scale;
    }
}
