// softmax_bwd.wgsl — softmax's backward over N x N f32 buffers, as autograd runs it for the
// textbook code (host: src/kernels/softmax_bwd.rs), one workgroup of 256 threads per row:
//   softmax_bwd    dS = P ∘ (dP - rowsum(dP ∘ P)), in place over dP (_softmax_backward_data)
//                  (a = dP -> dS, b = P). A fully-masked row of a plain softmax has P = NaN, so
//                  its dS is NaN here (and 0 after mask_bwd.wgsl, every entry being blocked), as
//                  in PyTorch.
// and the backward autograd records for a softmax written as two in-place steps, S.exp_() then
// S.div_(S.sum(-1)) (the `unfused-inplace-exp` variant). It exists to show the in-place hazard:
// `exp_bwd` needs exp_'s output E, which div_ overwrote with P, so the plan check refuses to run
// it (src/plan.rs, Plan::check_saved); run anyway (tests/backward.rs), it reads P in place of E
// and the gradients are wrong:
//   normalize_bwd  dE = (dY - rowsum(dY ∘ Y)) / L   (a = dY -> dE, b = Y = P, c = L)
//   exp_bwd        dX = dE ∘ E                      (a = dE -> dX, b = E), one element a thread

@group(0) @binding(1) var<storage, read_write> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read> c: array<f32>;

const WG: u32 = 256u;
var<workgroup> red: array<f32, WG>;

// rowsum(a ∘ b) of row `row` (`live`: the row exists), reduced over the workgroup.
fn row_dot(row: u32, live: bool, li: u32) -> f32 {
    let n = params.kv_seq;  // row length: M keys
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
    return red[0];
}

@compute @workgroup_size(256, 1, 1)
fn softmax_bwd(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let n = params.kv_seq;  // row length: M keys
    let row = linear_group(wg, nwg);
    // Uniform across the workgroup, so the barriers in row_dot stay in uniform control flow.
    let live = row < params.heads * params.seq;
    let dsum = row_dot(row, live, li);
    if (live) {
        for (var j = li; j < n; j += WG) {
            a[row * n + j] = b[row * n + j] * (a[row * n + j] - dsum);
        }
    }
}

@compute @workgroup_size(256, 1, 1)
fn normalize_bwd(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let n = params.kv_seq;  // row length: M keys
    let row = linear_group(wg, nwg);
    let live = row < params.heads * params.seq;
    let dsum = row_dot(row, live, li);
    if (live) {
        let l = c[row];
        for (var j = li; j < n; j += WG) {
            a[row * n + j] = (a[row * n + j] - dsum) / l;
        }
    }
}

@compute @workgroup_size(256, 1, 1)
fn exp_bwd(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let e = linear_group(wg, nwg) * WG + li;
    if (e < params.heads * params.seq * params.kv_seq) {
        a[e] = a[e] * b[e];
    }
}
