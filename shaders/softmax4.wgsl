// softmax4.wgsl — softmax.wgsl for N % 4 == 0: the same two passes (online max and sum, then
// normalize), with 16-byte loads and stores and 64 threads per row, four rows per workgroup: a
// quarter of the instructions and of the barrier levels of softmax.wgsl. A row of all -inf gives
// NaN, as a plain softmax does. Scores are words of four (`sw`, scores_*.wgsl): f32 or 16 bits.

@group(0) @binding(1) var<storage, read_write> s: array<sw>;

const TPR: u32 = 64u;  // threads per row
var<workgroup> red_m: array<f32, 256>;
var<workgroup> red_l: array<f32, 256>;

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let n4 = params.kv_seq / 4u;  // vec4 per row (M keys)
    let seg = li / TPR;
    let lt = li % TPR;
    let row = linear_group(wg, nwg) * 4u + seg;
    let live = row < params.heads * params.seq;  // the barriers below stay uniform
    let base = row * n4;
    let ninf = neg_inf();

    var m = ninf;
    var l = 0.0;
    if (live) {
        for (var c = lt; c < n4; c += TPR) {
            let x = s_wide(s[base + c]);
            let mx = max(max(x.x, x.y), max(x.z, x.w));
            if (mx > ninf) {
                let nm = max(m, mx);
                l = l * exp(m - nm) + dot(exp(x - vec4<f32>(nm)), vec4<f32>(1.0));
                m = nm;
            }
        }
    }
    red_m[li] = m;
    red_l[li] = l;
    workgroupBarrier();
    for (var stride = TPR / 2u; stride > 0u; stride = stride / 2u) {
        if (lt < stride) {
            let c = combine(red_m[li], red_l[li], red_m[li + stride], red_l[li + stride], ninf);
            red_m[li] = c.x;
            red_l[li] = c.y;
        }
        workgroupBarrier();
    }
    let mr = red_m[seg * TPR];
    let inv = 1.0 / red_l[seg * TPR];
    if (live) {
        for (var c = lt; c < n4; c += TPR) {
            s[base + c] = s_narrow(exp(s_wide(s[base + c]) - vec4<f32>(mr)) * inv);
        }
    }
}
