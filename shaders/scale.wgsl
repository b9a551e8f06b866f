// scale.wgsl — S *= scale, in place: one read and one write of the whole N x N matrix per head.
//
// Pure bandwidth: each thread moves one word of four scores (`sw`, from the scores prelude
// scores_*.wgsl: 16 bytes in f32, 8 in 16 bits). The runner pads every buffer to a multiple of 16
// bytes, so the last, partial word is safe to touch. The grid is 2-D only because one dimension
// holds at most 65535 workgroups.

@group(0) @binding(1) var<storage, read_write> s: array<sw>;

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let total4 = (params.heads * params.seq * params.kv_seq + 3u) / 4u;
    let idx = linear_group(wg, nwg) * 256u + li;
    if (idx < total4) {
        s[idx] = s_narrow(s_wide(s[idx]) * params.scale);
    }
}
