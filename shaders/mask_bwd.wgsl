// mask_bwd.wgsl — masked_fill's backward over dS (f32 [count, N, N]), in place: 0 where the
// forward's mask blocked (the causal index test, or a bias of -inf from the mask prelude), one
// element per thread (host: src/kernels/softmax_bwd.rs).

@group(0) @binding(1) var<storage, read_write> a: array<f32>;

const WG: u32 = 256u;

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let n = params.seq;
    let m = params.kv_seq;
    let e = linear_group(wg, nwg) * WG + li;
    if (e >= params.heads * n * m) {
        return;
    }
    let j = e % m;
    let i = (e / m) % n;
    let head = params.head_offset + e / (n * m);
    let blocked = !causal_ok(i, j) || mask_bias(head, i, j) == neg_inf();
    if (blocked) {
        a[e] = 0.0;
    }
}
