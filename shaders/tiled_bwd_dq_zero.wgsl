// tiled_bwd_dq_zero.wgsl — `--bwd-dq atomic`'s first step: the f32 dQ accumulator
// (tiled_bwd_kv_dq.wgsl) cleared, one element a thread over BH x N x D, before the dK/dV pass adds
// into it (`dq_out`, narrow.wgsl's `to_dtype`, rounds it into dQ after).

@group(0) @binding(1) var<storage, read_write> dq_acc: array<f32>;

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let idx = linear_group(wg, nwg) * 256u + li;
    if (idx < params.heads * params.seq * params.head_dim) {
        dq_acc[idx] = 0.0;
    }
}
