// softmax.wgsl — P = softmax(S) along each row, in place, numerically stable (max subtracted).
//
// One workgroup per row: read the row once for the max, once for the sum of exponentials, once to
// write; rows of N <= a few thousand stay in L1/L2 between the passes, so device memory sees about
// one read and one write of S. A row whose entries are all -inf gives NaN (0/0), as a plain softmax
// does: this kernel does *not* protect fully-masked rows (the `math` path does).

@group(0) @binding(1) var<storage, read_write> s: array<f32>;

const WG: u32 = 256u;
var<workgroup> red: array<f32, WG>;

// Tree reduction over the workgroup; `is_max` picks max or sum. Every thread gets the result.
fn reduce(li: u32, x: f32, is_max: bool) -> f32 {
    red[li] = x;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride = stride / 2u) {
        if (li < stride) {
            let a = red[li];
            let b = red[li + stride];
            red[li] = select(a + b, max(a, b), is_max);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let n = params.seq;
    let row = linear_group(wg, nwg);
    // Uniform across the workgroup, so the barriers inside reduce() stay in uniform control flow.
    let live = row < params.heads * n;
    let base = row * n;

    var m = neg_inf();
    if (live) {
        for (var j = li; j < n; j += WG) {
            m = max(m, s[base + j]);
        }
    }
    m = reduce(li, m, true);

    var sum = 0.0;
    if (live) {
        for (var j = li; j < n; j += WG) {
            sum += exp(s[base + j] - m);
        }
    }
    sum = reduce(li, sum, false);

    if (live) {
        let inv = 1.0 / sum;
        for (var j = li; j < n; j += WG) {
            s[base + j] = exp(s[base + j] - m) * inv;
        }
    }
}
