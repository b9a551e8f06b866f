// math_mask.wgsl — `math` rebuilds its additive mask M on every call (no caching), as SDPA's MATH
// backend materializes attn_mask each time: M = the normalized bias (mask prelude, binding 2, when
// the problem has an explicit mask or key padding) with -inf above the diagonal when causal.
// M holds this dispatch's chunk of heads, f32 [heads, N, N].

@group(0) @binding(1) var<storage, read_write> m: array<f32>;

@compute @workgroup_size(256, 1, 1)
fn build_mask(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let n = params.seq;
    let mk = params.kv_seq;
    let total = params.heads * n * mk;
    let idx = linear_group(wg, nwg) * 256u + li;
    if (idx < total) {
        let j = idx % mk;
        let i = (idx / mk) % n;
        var x = mask_bias(params.head_offset + idx / (n * mk), i, j);
        if (!causal_ok(i, j)) {
            x = neg_inf();
        }
        m[idx] = x;
    }
}
