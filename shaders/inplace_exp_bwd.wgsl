// inplace_exp_bwd.wgsl — the backward autograd records for a softmax written as two in-place
// steps, S.exp_() then S.div_(S.sum(-1)) (the `unfused-inplace-exp` variant; host:
// src/kernels/softmax_bwd.rs). It exists to show the in-place hazard: `exp_bwd` needs exp_'s
// output E, which div_ overwrote with P, so the plan check refuses to run it (src/plan.rs,
// Plan::check_saved); run anyway, it computes with P in place of E and the gradients are wrong.
//   normalize_bwd  dE = (dY - rowsum(dY ∘ Y)) / L   (a = dY -> dE, b = Y = P, c = L)
//   exp_bwd        dX = dE ∘ E                      (a = dE -> dX, b = E)
// One workgroup of 256 threads per row (normalize_bwd), one element per thread (exp_bwd).

@group(0) @binding(1) var<storage, read_write> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read> c: array<f32>;

const WG: u32 = 256u;
var<workgroup> red: array<f32, WG>;

@compute @workgroup_size(256, 1, 1)
fn normalize_bwd(
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
        let l = c[row];
        for (var j = li; j < n; j += WG) {
            a[base + j] = (a[base + j] - dsum) / l;
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
    if (e < params.heads * params.seq * params.seq) {
        a[e] = a[e] * b[e];
    }
}
