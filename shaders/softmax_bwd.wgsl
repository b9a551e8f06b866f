// softmax_bwd.wgsl — softmax's backward over N x N f32 buffers, as autograd runs it for the
// textbook code (_softmax_backward_data; host: src/kernels/softmax_bwd.rs):
//   dS = P ∘ (dP - rowsum(dP ∘ P)), in place over dP: one workgroup of 256 threads per row, one
//   reduction. A fully-masked row of a plain softmax has P = NaN, so its dS is NaN here (and 0
//   after mask_bwd.wgsl, since every entry of the row is blocked), as in PyTorch.

@group(0) @binding(1) var<storage, read_write> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;

const WG: u32 = 256u;
var<workgroup> red: array<f32, WG>;

// a = dP (becomes dS), b = P.
@compute @workgroup_size(256, 1, 1)
fn softmax_bwd(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let n = params.seq;
    let row = linear_group(wg, nwg);
    let live = row < params.heads * n;
    let base = row * n;
    var acc = 0.0;
    if (live) {
        for (var j = li; j < n; j += WG) {
            acc += a[base + j] * b[base + j];
        }
    }
    red[li] = acc;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride = stride / 2u) {
        if (li < stride) {
            red[li] += red[li + stride];
        }
        workgroupBarrier();
    }
    let dsum = red[0];
    if (live) {
        for (var j = li; j < n; j += WG) {
            a[base + j] = b[base + j] * (a[base + j] - dsum);
        }
    }
}
