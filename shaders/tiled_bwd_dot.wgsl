// tiled_bwd_dot.wgsl — FlashAttention-2's first backward step: D_i = rowsum(dO ∘ O) for every
// query row (f32 [B*H, N]). D_i equals rowsum(dP ∘ P) of row i, which the fused backward kernels
// (tiled_bwd_kv.wgsl, tiled_bwd_q.wgsl, tiled_coop_bwd_*.wgsl) need for dS = P ∘ (dP - D).
// O and dO are in the storage dtype (prelude shaders/dtype_*.wgsl).
//
// RT = 16 threads per row, 4 rows per 64-thread workgroup: thread q of a row sums columns q,
// q + 16, ..., so neighbouring threads read neighbouring elements (one thread per row, as before,
// read 32 rows' worth of cache lines per load: 75 µs at B8 H16 N1024 D64 f16 on the H200); the
// 16 partial sums meet in workgroup memory.

@group(0) @binding(1) var<storage, read> o: array<st>;
@group(0) @binding(2) var<storage, read> g: array<st>;
@group(0) @binding(3) var<storage, read_write> delta: array<f32>;

const RT: u32 = 16u;
var<workgroup> part: array<f32, 64>;

@compute @workgroup_size(64, 1, 1)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let n = params.seq;
    let d = params.head_dim;
    let row = linear_group(wg, nwg) * (64u / RT) + li / RT;
    let live = row < params.heads * n;
    let gr = params.head_offset * n + row;
    var acc = 0.0;
    if (live) {
        for (var c = li % RT; c < d; c += RT) {
            let e = gr * d + c;
            acc += load(o[e / PACK], e) * load(g[e / PACK], e);
        }
    }
    part[li] = acc;
    workgroupBarrier();
    if (live && li % RT == 0u) {
        var s = 0.0;
        for (var k = 0u; k < RT; k++) {
            s += part[li + k];
        }
        delta[gr] = s;
    }
}
