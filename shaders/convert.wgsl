// convert.wgsl — `math`'s widening steps: a flat element-wise pass from the storage dtype (prelude
// shaders/dtype_*.wgsl) to f32, as PyTorch's MATH backend converts f16/bf16 inputs to f32 in their
// own kernels before computing.
//   to_f32     dst = f32(src)
//   scale_f32  dst = f32(src) * factor   (factor = sqrt(scale): q and k are each scaled by it)
// Covers params.heads * seq * head_dim elements (all heads).

@group(0) @binding(1) var<storage, read> src: array<st>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(256, 1, 1)
fn to_f32(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let total = params.heads * params.seq * params.head_dim;
    let e = linear_group(wg, nwg) * 256u + li;
    if (e < total) {
        dst[e] = load(src[e / PACK], e);
    }
}

@compute @workgroup_size(256, 1, 1)
fn scale_f32(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let total = params.heads * params.seq * params.head_dim;
    let e = linear_group(wg, nwg) * 256u + li;
    if (e < total) {
        dst[e] = load(src[e / PACK], e) * params.factor;
    }
}
