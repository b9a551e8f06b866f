// softmax.wgsl — P = softmax(S) along each row, in place, numerically stable.
//
// One workgroup of 256 threads per row, two passes over the row:
//  1. each thread keeps an online (max m, sum l of exp(x - m)) over its strided elements; one
//     workgroup reduction combines the pairs: M = max(m1, m2), L = l1·e^(m1-M) + l2·e^(m2-M);
//  2. each thread writes exp(x - M) / L.
// Device memory sees one read and one write of S (the second read of a row hits the cache), and one
// reduction instead of two. A row whose entries are all -inf gives NaN (0/0), as a plain softmax
// does: this kernel does *not* protect fully-masked rows (the `math` path does).

@group(0) @binding(1) var<storage, read_write> s: array<f32>;

const WG: u32 = 256u;
var<workgroup> red_m: array<f32, WG>;
var<workgroup> red_l: array<f32, WG>;

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let n = params.kv_seq;  // row length: M keys
    let row = linear_group(wg, nwg);
    // Uniform across the workgroup, so the barriers below stay in uniform control flow.
    let live = row < params.heads * params.seq;
    let base = row * n;
    let ninf = neg_inf();

    var ml = vec2<f32>(ninf, 0.0);
    if (live) {
        for (var j = li; j < n; j += WG) {
            ml = combine(ml.x, ml.y, s[base + j], 1.0, ninf);
        }
    }
    red_m[li] = ml.x;
    red_l[li] = ml.y;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride = stride / 2u) {
        if (li < stride) {
            let c = combine(red_m[li], red_l[li], red_m[li + stride], red_l[li + stride], ninf);
            red_m[li] = c.x;
            red_l[li] = c.y;
        }
        workgroupBarrier();
    }
    let m = red_m[0];
    // All -inf: m = -inf and l = 0, so exp(x - m) / l = NaN, a plain softmax's answer.
    let inv = 1.0 / red_l[0];
    if (live) {
        for (var j = li; j < n; j += WG) {
            s[base + j] = exp(s[base + j] - m) * inv;
        }
    }
}
