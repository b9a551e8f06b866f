// narrow.wgsl — `math`'s last step: the f32 output rounded to the storage dtype (prelude
// shaders/dtype_*.wgsl), one storage slot (PACK elements) per thread. Flat over all elements, so a
// u32 pair may straddle two rows: odd D is fine here.

@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<st>;

@compute @workgroup_size(256, 1, 1)
fn to_dtype(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let total = params.heads * params.seq * params.head_dim;
    let w = linear_group(wg, nwg) * 256u + li;
    let e = w * PACK;
    if (e < total) {
        var b = 0.0;
        if (e + 1u < total) {
            b = src[min(e + 1u, total - 1u)];
        }
        dst[w] = pack(src[e], b);
    }
}
