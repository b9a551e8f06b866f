// tiled.wgsl — fused attention in one dispatch, FlashAttention-2 style (online softmax).
//
// A workgroup owns BR query rows of one head, one row per thread. It walks the key blocks of BC rows:
// K and V blocks are staged in workgroup memory, each thread computes its BC scores in registers,
// updates its running max `m` and sum `l`, rescales its output row by exp(m_old - m_new) and adds
// P x V. The N x N score matrix never exists in device memory: Q is read once, K and V once per
// query block (about half of them when causal: blocks above the diagonal are skipped), O written once.
//
// Host-chosen `override` constants (src/kernels/tiled.rs picks them to fit the adapter's workgroup
// storage): BR rows per workgroup, D4 = ceil(D/4) vec4 columns, and DP = the padded row pitch in
// vec4 (odd, so 8 threads reading 8 different rows of qs/os hit 8 different bank groups).
// BC, the keys per block, is fixed at 16: a thread's 16 scores live in four named vec4 registers
// (s0..s3), not in an indexed array that a driver might demote to slow local memory.
// Workgroup storage: (2*BR + 2*BC) * DP * 16 + 4*BR bytes.
//
// Q, K, V and O are in the storage dtype (prelude shaders/dtype_*.wgsl: loads widen to f32, stores
// write PACK elements at once); everything on chip is f32. Masks: the causal index test plus, with
// the mask prelude shaders/mask_bias.wgsl (binding 5), the additive bias mask_bias(head, i, j).

@group(0) @binding(1) var<storage, read> q: array<st>;
@group(0) @binding(2) var<storage, read> k: array<st>;
@group(0) @binding(3) var<storage, read> v: array<st>;
@group(0) @binding(4) var<storage, read_write> o: array<st>;

override BR: u32 = 64u;
override D4: u32 = 16u;
override DP: u32 = 17u;
const BC: u32 = 16u;
const LOG2E: f32 = 1.4426950408889634;

var<workgroup> qs: array<vec4<f32>, BR * DP>;  // this block's Q rows, pre-scaled by scale*log2(e)
var<workgroup> os: array<vec4<f32>, BR * DP>;  // un-normalized output rows
var<workgroup> ks: array<vec4<f32>, BC * DP>;
var<workgroup> vs: array<vec4<f32>, BC * DP>;
var<workgroup> inv_l: array<f32, BR>;

@compute @workgroup_size(BR, 1, 1)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    let n = params.seq;
    let nk = params.kv_seq;  // keys (M)
    let d = params.head_dim;
    let head = params.head_offset + wg.y;
    let i0 = wg.x * BR;
    let i = i0 + t;
    let base = head * n * d;
    let kvbase = kv_head(head) * nk * d;  // K and V: the head's K/V head (GQA), M rows
    let causal = params.causal != 0u;
    let ninf = neg_inf();
    let qscale = params.scale * LOG2E; // scores in base 2: exp2 is the GPU's native exponential

    // Stage Q (scaled) and clear O. Consecutive threads read consecutive d: coalesced.
    for (var e = t; e < BR * D4 * 4u; e += BR) {
        let r = e / (D4 * 4u);
        let c = e % (D4 * 4u);
        var x = 0.0;
        if (i0 + r < n && c < d) {
            let ei = base + (i0 + r) * d + c;
            x = load(q[ei / PACK], ei) * qscale;
        }
        qs[r * DP + c / 4u][c % 4u] = x;
        os[r * DP + c / 4u][c % 4u] = 0.0;
    }

    var m = ninf;  // running max of this row's scores (base 2)
    var l = 0.0;   // running sum of exp2(score - m)

    // Causal: rows i0..i0+BR-1 need keys up to the diagonal of the last row only (causal_keys);
    // later blocks are skipped outright.
    let kv_end = causal_keys(i0 + BR);
    for (var j0 = 0u; j0 < kv_end; j0 += BC) {
        // The previous block's K/V must be fully consumed before they are overwritten.
        workgroupBarrier();
        for (var e = t; e < BC * D4 * 4u; e += BR) {
            let r = e / (D4 * 4u);
            let c = e % (D4 * 4u);
            var kx = 0.0;
            var vx = 0.0;
            if (j0 + r < nk && c < d) {
                let ei = kvbase + (j0 + r) * d + c;
                kx = load(k[ei / PACK], ei);
                vx = load(v[ei / PACK], ei);
            }
            ks[r * DP + c / 4u][c % 4u] = kx;
            vs[r * DP + c / 4u][c % 4u] = vx;
        }
        workgroupBarrier();

        // Scores of this thread's row against the 16 staged keys; every thread reads the same ks
        // element at the same time (a broadcast).
        var s0 = vec4<f32>(0.0);
        var s1 = vec4<f32>(0.0);
        var s2 = vec4<f32>(0.0);
        var s3 = vec4<f32>(0.0);
        for (var c4 = 0u; c4 < D4; c4++) {
            let qv = qs[t * DP + c4];
            s0 += qk4(qv, 0u, c4);
            s1 += qk4(qv, 4u, c4);
            s2 += qk4(qv, 8u, c4);
            s3 += qk4(qv, 12u, c4);
        }
        s0 = masked(s0, head, i, j0, 1u, nk, causal, ninf);
        s1 = masked(s1, head, i, j0 + 4u, 1u, nk, causal, ninf);
        s2 = masked(s2, head, i, j0 + 8u, 1u, nk, causal, ninf);
        s3 = masked(s3, head, i, j0 + 12u, 1u, nk, causal, ninf);
        let m_new = max(m, max(max(max4(s0), max4(s1)), max(max4(s2), max4(s3))));

        // Online softmax (tiled_mask.wgsl, online_step).
        let step = online_step(s0, s1, s2, s3, m, l, m_new, ninf);
        m = step.m;
        l = step.l;
        let alpha = step.alpha;
        s0 = step.p0;
        s1 = step.p1;
        s2 = step.p2;
        s3 = step.p3;
        // Dropout (philox.wgsl; dead code without it) after the row sum. One row per thread: a
        // whole Philox call per factor (4x the work of tiled_v2.wgsl).
        if (DROPOUT) {
            s0 *= drop_keys(head, i, j0);
            s1 *= drop_keys(head, i, j0 + 4u);
            s2 *= drop_keys(head, i, j0 + 8u);
            s3 *= drop_keys(head, i, j0 + 12u);
        }
        for (var c4 = 0u; c4 < D4; c4++) {
            os[t * DP + c4] = os[t * DP + c4] * alpha
                + pv4(s0, 0u, c4) + pv4(s1, 4u, c4) + pv4(s2, 8u, c4) + pv4(s3, 12u, c4);
        }
    }

    // A row with no allowed key has l = 0 and returns 0 (SDPA's convention), never NaN.
    inv_l[t] = select(0.0, 1.0 / l, l > 0.0);
    workgroupBarrier();
    // Write O cooperatively so that consecutive threads write consecutive addresses; each thread
    // writes PACK neighbouring elements of one row per store (D is even when PACK = 2).
    for (var e = t * PACK; e < BR * d; e += BR * PACK) {
        let r = e / d;
        let c = e % d;
        if (i0 + r < n) {
            let c1 = min(c + 1u, d - 1u);
            let a = os[r * DP + c / 4u][c % 4u] * inv_l[r];
            let b = os[r * DP + c1 / 4u][c1 % 4u] * inv_l[r];
            let ei = base + (i0 + r) * d + c;
            o[ei / PACK] = pack(a, b);
        }
    }
}

// Dropout factors of row i at keys j .. j+3.
fn drop_keys(head: u32, i: u32, j: u32) -> vec4<f32> {
    return vec4<f32>(drop1(head, i, j), drop1(head, i, j + 1u), drop1(head, i, j + 2u),
                     drop1(head, i, j + 3u));
}

// Scores of q against staged keys r0 .. r0+3, at vec4 column c4.
fn qk4(q: vec4<f32>, r0: u32, c4: u32) -> vec4<f32> {
    return vec4<f32>(
        dot(q, ks[r0 * DP + c4]),
        dot(q, ks[(r0 + 1u) * DP + c4]),
        dot(q, ks[(r0 + 2u) * DP + c4]),
        dot(q, ks[(r0 + 3u) * DP + c4]),
    );
}

// p.x * V[r0] + ... + p.w * V[r0 + 3], at vec4 column c4.
fn pv4(p: vec4<f32>, r0: u32, c4: u32) -> vec4<f32> {
    return p.x * vs[r0 * DP + c4] + p.y * vs[(r0 + 1u) * DP + c4]
        + p.z * vs[(r0 + 2u) * DP + c4] + p.w * vs[(r0 + 3u) * DP + c4];
}
