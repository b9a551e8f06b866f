// tiled_bwd_dq_out.wgsl — `--bwd-dq atomic`'s last step: the f32 dQ accumulator
// (tiled_bwd_kv_dq.wgsl) rounded into dQ in the storage dtype, one word (PACK elements) a thread.

@group(0) @binding(1) var<storage, read> dq_acc: array<f32>;
@group(0) @binding(2) var<storage, read_write> dq: array<st>;

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let total = params.heads * params.seq * params.head_dim;
    let w = linear_group(wg, nwg) * 256u + li;
    let e = w * PACK;
    if (e < total) {
        dq[w] = pack(dq_acc[e], dq_acc[min(e + 1u, total - 1u)]);
    }
}
