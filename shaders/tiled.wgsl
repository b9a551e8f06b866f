// tiled.wgsl — fused attention in one dispatch, FlashAttention-2 style (online softmax).
//
// A workgroup owns BR query rows of one head, one row per thread. It walks the key blocks of BC rows:
// K and V blocks are staged in workgroup memory, each thread computes its BC scores in registers,
// updates its running max `m` and sum `l`, rescales its output row by exp(m_old - m_new) and adds
// P x V. The N x N score matrix never exists in device memory: Q is read once, K and V once per
// query block (about half of them when causal: blocks above the diagonal are skipped), O written once.
//
// Host-chosen `override` constants (src/variants/tiled.rs picks them to fit the adapter's workgroup
// storage): BR rows per workgroup, BC keys per block (<= MAX_BC), D4 = ceil(D/4) vec4 columns, and
// DP = the padded row pitch in vec4 (odd, so 8 threads reading 8 different rows of qs/os hit 8
// different bank groups).
// Workgroup storage: (2*BR + 2*BC) * DP * 16 bytes.

@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read_write> o: array<f32>;

override BR: u32 = 64u;
override BC: u32 = 16u;
override D4: u32 = 16u;
override DP: u32 = 17u;
const MAX_BC: u32 = 32u;
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
    let d = params.head_dim;
    let head = wg.y;
    let i0 = wg.x * BR;
    let i = i0 + t;
    let base = head * n * d;
    let causal = params.causal != 0u;
    let ninf = neg_inf();
    let qscale = params.scale * LOG2E; // scores in base 2: exp2 is the GPU's native exponential

    // Stage Q (scaled) and clear O. Consecutive threads read consecutive d: coalesced.
    for (var e = t; e < BR * D4 * 4u; e += BR) {
        let r = e / (D4 * 4u);
        let c = e % (D4 * 4u);
        var x = 0.0;
        if (i0 + r < n && c < d) {
            x = q[base + (i0 + r) * d + c] * qscale;
        }
        qs[r * DP + c / 4u][c % 4u] = x;
        os[r * DP + c / 4u][c % 4u] = 0.0;
    }

    var m = ninf;  // running max of this row's scores (base 2)
    var l = 0.0;   // running sum of exp2(score - m)
    var sc: array<f32, MAX_BC>;

    // Causal: rows i0..i0+BR-1 need keys 0..i0+BR-1 only; later blocks are skipped outright.
    var kv_end = n;
    if (causal) {
        kv_end = min(n, i0 + BR);
    }
    for (var j0 = 0u; j0 < kv_end; j0 += BC) {
        // The previous block's K/V must be fully consumed before they are overwritten.
        workgroupBarrier();
        for (var e = t; e < BC * D4 * 4u; e += BR) {
            let r = e / (D4 * 4u);
            let c = e % (D4 * 4u);
            var kx = 0.0;
            var vx = 0.0;
            if (j0 + r < n && c < d) {
                kx = k[base + (j0 + r) * d + c];
                vx = v[base + (j0 + r) * d + c];
            }
            ks[r * DP + c / 4u][c % 4u] = kx;
            vs[r * DP + c / 4u][c % 4u] = vx;
        }
        workgroupBarrier();

        // Scores for this thread's row against the BC staged keys (all threads read the same
        // ks element at once: a broadcast).
        for (var jj = 0u; jj < BC; jj++) {
            sc[jj] = 0.0;
        }
        for (var c4 = 0u; c4 < D4; c4++) {
            let qv = qs[t * DP + c4];
            for (var jj = 0u; jj < BC; jj++) {
                sc[jj] += dot(qv, ks[jj * DP + c4]);
            }
        }
        var m_new = m;
        for (var jj = 0u; jj < BC; jj++) {
            let j = j0 + jj;
            if (j >= n || (causal && j > i)) {
                sc[jj] = ninf;
            }
            m_new = max(m_new, sc[jj]);
        }
        // Online softmax. While a row has seen no allowed key, m stays -inf and nothing is added.
        var alpha = 1.0;
        if (m_new > ninf) {
            alpha = exp2(m - m_new);
            var psum = 0.0;
            for (var jj = 0u; jj < BC; jj++) {
                sc[jj] = exp2(sc[jj] - m_new);
                psum += sc[jj];
            }
            l = l * alpha + psum;
            m = m_new;
        } else {
            for (var jj = 0u; jj < BC; jj++) {
                sc[jj] = 0.0;
            }
        }
        for (var c4 = 0u; c4 < D4; c4++) {
            var acc = os[t * DP + c4] * alpha;
            for (var jj = 0u; jj < BC; jj++) {
                acc += sc[jj] * vs[jj * DP + c4];
            }
            os[t * DP + c4] = acc;
        }
    }

    // A row with no allowed key has l = 0 and returns 0 (SDPA's convention), never NaN.
    inv_l[t] = select(0.0, 1.0 / l, l > 0.0);
    workgroupBarrier();
    // Write O cooperatively so that consecutive threads write consecutive addresses.
    for (var e = t; e < BR * d; e += BR) {
        let r = e / d;
        let c = e % d;
        if (i0 + r < n) {
            o[base + (i0 + r) * d + c] = os[r * DP + c / 4u][c % 4u] * inv_l[r];
        }
    }
}
