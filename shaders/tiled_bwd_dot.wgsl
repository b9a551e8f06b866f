// tiled_bwd_dot.wgsl — FlashAttention-2's first backward step: D_i = rowsum(dO ∘ O) for every
// query row (f32 [B*H, N]), one thread per row. D_i equals rowsum(dP ∘ P) of row i, which the
// fused backward kernels (tiled_bwd_kv.wgsl, tiled_bwd_q.wgsl) need for dS = P ∘ (dP - D).
// O and dO are in the storage dtype (prelude shaders/dtype_*.wgsl).

@group(0) @binding(1) var<storage, read> o: array<st>;
@group(0) @binding(2) var<storage, read> g: array<st>;
@group(0) @binding(3) var<storage, read_write> delta: array<f32>;

@compute @workgroup_size(64, 1, 1)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let n = params.seq;
    let d = params.head_dim;
    let row = linear_group(wg, nwg) * 64u + li;
    if (row >= params.heads * n) {
        return;
    }
    let gr = params.head_offset * n + row;
    var acc = 0.0;
    for (var c = 0u; c < d; c++) {
        let e = gr * d + c;
        acc += load(o[e / PACK], e) * load(g[e / PACK], e);
    }
    delta[gr] = acc;
}
