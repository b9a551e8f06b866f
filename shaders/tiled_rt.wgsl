// tiled_rt.wgsl — fused attention, register-tiled (the `tiled` variant's tile `rt`, where
// subgroups are absent or too small for rt2/rt3), for D up to 256.
//
// FlashAttention-2 structure as in tiled.wgsl (online softmax, N x N never in device memory, key
// blocks above the diagonal skipped when causal), but the work of a block is spread like a matrix
// product instead of one row per thread: a workgroup of 64 threads owns BR = 16 RPT query rows;
// thread (ty, tx) = (t / 4, t % 4) owns rows ty + 16r (r < RPT) and, of each block of BC keys,
// keys tx + 4c (c < BC / 4): an RPT x BC/4 tile of scores in registers (s[r][c]). For P x V it
// owns the same rows and the output columns 4*(tx + 4h) .. +3 (h < OV = ceil(D / 16)): an
// RPT x 4 OV tile of O in registers. The host takes RPT = 4 for D <= 64, 2 for D <= 128 and 1
// for D <= 256 (so RPT x OV <= 16 vec4: the same registers at every D), and the largest BC of
// 16, 8, 4 whose tiles fit the adapter's workgroup storage. At D <= 64 (RPT = 4, BC = 16) every
// workgroup load feeds 8 multiply-adds (4 vec4 of Q and 4 vec4 of K give 16 dot4 products).
// Rows and keys are interleaved (ty + 16r, tx + 4c) so that the threads of a warp read consecutive
// rows of the padded workgroup arrays: no bank conflicts. RPT, BC, D4 = ceil(D / 4) and OV are
// pipeline constants: every loop has a known trip count and unrolls, and the register arrays
// (s, o, the prefetched K/V) stay in registers.
//
// Row statistics: each thread reduces its keys per row, then the 4 threads sharing those rows
// (t = 4*ty .. 4*ty + 3) combine their partial maxima with `row_max`; the running sum l stays
// partial per thread (each rescales its own share by alpha) and is combined once at the end with
// `row_sum`. Those two functions come from a second file appended to this one, tiled_rt_wg.wgsl,
// through workgroup memory and a barrier (any adapter; the subgroup-shuffle twin went with the
// retired `tiled-subgroup` variant, 3.4-4.5x slower than `tiled` on the H100),
// and the score masking (`masked`, `max4`) from a third, tiled_mask.wgsl, shared with tiled.wgsl
// and tiled_coop.wgsl (host code: src/kernels/tiled.rs).
// Workgroup storage: (BR + 2 BC) * (D4 + 1) * 16 + BC * 16 * 16 bytes: 30208 at D <= 64, + 64 * 16
// = 1024 for tiled_rt_wg.wgsl.
//
// Q, K, V and O are in the storage dtype (prelude shaders/dtype_*.wgsl: `load` widens to f32, `pack`
// writes PACK elements at once); everything on chip is f32. Masks: the causal index test plus, with
// the mask prelude shaders/mask_bias.wgsl (binding 5), the additive bias mask_bias(head, i, j).

@group(0) @binding(1) var<storage, read> q: array<st>;
@group(0) @binding(2) var<storage, read> k: array<st>;
@group(0) @binding(3) var<storage, read> v: array<st>;
@group(0) @binding(4) var<storage, read_write> o: array<st>;

// Double-buffer K and V through registers (see the main loop). The host turns it on for f32 storage
// only: on the H200 it cut the f32 kernel from 2965 to 2666 µs, while f16 (2996 -> 4743 µs) and
// bf16 (3968 -> 5150 µs) got slower at the seed's shape (results/EXPERIMENTS.md, v2); without it
// the staging loop is the direct one of the first version.
override PREFETCH: bool = true;
// Rows per thread (4, 2 or 1), keys per block (16, 8 or 4), ceil(D / 4): set by the host.
override RPT: u32 = 4u;
override BC: u32 = 16u;
override D4: u32 = 16u;

override BR: u32 = 16u * RPT;          // rows per workgroup
override P: u32 = D4 + 1u;             // row pitch in vec4: + 1 against bank conflicts
override OV: u32 = (D4 + 3u) / 4u;     // vec4 columns of O per thread
override KPT: u32 = BC / 4u;           // keys per thread per block
override W: u32 = 4u * D4;             // staged columns per row (D, padded to a vec4)
override LPT: u32 = (BC * W + 63u) / 64u;  // K (and V) elements each thread stages per block
const LOG2E: f32 = 1.4426950408889634;
const MAX_O: u32 = 16u;                // RPT x OV at most
const MAX_LPT: u32 = 32u;              // LPT at most (the host keeps BC * W <= 2048)

var<workgroup> qs: array<vec4<f32>, BR * P>;  // Q rows, pre-scaled by scale * log2(e)
var<workgroup> ks: array<vec4<f32>, BC * P>;
var<workgroup> vs: array<vec4<f32>, BC * P>;
var<workgroup> pt: array<vec4<f32>, BC * 16u>;  // [key][ty]: probabilities of rows ty + 16r, as vec4 over r

@compute @workgroup_size(64, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let n = params.seq;
    let nk = params.kv_seq;  // keys (M)
    let d = params.head_dim;
    let head = params.head_offset + wg.y;
    let i0 = wg.x * BR;
    let base = head * n * d;
    let kvbase = kv_head(head) * nk * d;  // K and V: the head's K/V head (GQA), M rows
    let causal = params.causal != 0u;
    let ninf = neg_inf();
    let ty = t / 4u;
    let tx = t % 4u;
    let rows = vec4<u32>(i0 + ty, i0 + ty + 16u, i0 + ty + 32u, i0 + ty + 48u);

    // Stage Q (scaled), zero-padded to W columns. Consecutive threads read consecutive d.
    let qscale = params.scale * LOG2E;
    for (var e = t; e < BR * W; e += 64u) {
        let r = e / W;
        let c = e % W;
        var x = 0.0;
        if (i0 + r < n && c < d) {
            let ei = base + (i0 + r) * d + c;
            x = load(q[ei / PACK], ei) * qscale;
        }
        qs[r * P + c / 4u][c % 4u] = x;
    }

    var m = vec4<f32>(ninf);   // running max per row (base 2); rows r >= RPT stay -inf
    var l = vec4<f32>(0.0);    // this thread's share of the running sum per row
    var acc: array<vec4<f32>, MAX_O>;  // acc[r * OV + h]: row ty + 16r, columns 4 (tx + 4h) .. +3
    for (var x = 0u; x < RPT * OV; x++) {
        acc[x] = vec4<f32>(0.0);
    }

    // Keys this block's rows may see: all M, or up to the causal diagonal of its last row.
    let kv_end = causal_keys(i0 + BR);
    // K and V are double-buffered through registers: thread t holds elements t + 64x (x < LPT)
    // of the next block (kf, vf) while the current block is computed, so the global loads'
    // latency hides behind the arithmetic instead of stalling the workgroup at the barrier.
    var kf: array<f32, MAX_LPT>;
    var vf: array<f32, MAX_LPT>;
    if (PREFETCH && 0u < kv_end) {
        fetch_kv(kvbase, 0u, t, nk, d, &kf, &vf);
    }
    for (var j0 = 0u; j0 < kv_end; j0 += BC) {
        // The previous block's K, V and P must be consumed before they are overwritten.
        workgroupBarrier();
        if (!PREFETCH) {
            fetch_kv(kvbase, j0, t, nk, d, &kf, &vf);
        }
        for (var x = 0u; x < LPT; x++) {
            let e = t + 64u * x;
            if (e < BC * W) {
                ks[(e / W) * P + (e % W) / 4u][e % 4u] = kf[x];
                vs[(e / W) * P + (e % W) / 4u][e % 4u] = vf[x];
            }
        }
        workgroupBarrier();
        // Issue the next block's loads now; they complete while this block is computed.
        let jn = j0 + BC;
        if (PREFETCH && jn < kv_end) {
            fetch_kv(kvbase, jn, t, nk, d, &kf, &vf);
        }

        // S tile: s[r][c] = score of row ty + 16r with key tx + 4c; keys c >= KPT are masked
        // below, rows r >= RPT are never read.
        var s: array<vec4<f32>, 4>;
        for (var r = 0u; r < 4u; r++) {
            s[r] = vec4<f32>(0.0);
        }
        for (var c4 = 0u; c4 < D4; c4++) {
            var qv: array<vec4<f32>, 4>;
            for (var r = 0u; r < RPT; r++) {
                qv[r] = qs[(ty + 16u * r) * P + c4];
            }
            for (var c = 0u; c < KPT; c++) {
                let kk = ks[(tx + 4u * c) * P + c4];
                for (var r = 0u; r < RPT; r++) {
                    s[r][c] += dot(qv[r], kk);
                }
            }
        }
        // This thread's keys are j0 + tx + 4c: `masked` (tiled_mask.wgsl) with step 4; past KPT
        // they belong to the next block.
        var mb = vec4<f32>(ninf);
        for (var r = 0u; r < RPT; r++) {
            var x = masked(s[r], head, rows[r], j0 + tx, 4u, nk, causal, ninf);
            if (KPT < 4u) {
                x = select(vec4<f32>(ninf), x, vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(KPT));
            }
            s[r] = x;
            mb[r] = max4(x);
        }

        // Row maxima: this thread's keys, then the 4 threads that share the rows.
        let m_new = max(m, row_max(mb, t));
        // A row that has seen no allowed key yet keeps m = -inf, alpha = 1 and adds nothing.
        let live = m_new > vec4<f32>(ninf);
        let alpha = select(vec4<f32>(1.0), exp2(m - m_new), live);
        var ls = vec4<f32>(0.0);
        for (var r = 0u; r < RPT; r++) {
            s[r] = select(vec4<f32>(0.0), exp2(s[r] - m_new[r]), live[r]);
            ls[r] = dot(s[r], vec4<f32>(1.0));
        }
        l = l * alpha + ls;
        m = m_new;
        for (var c = 0u; c < KPT; c++) {
            var pc = vec4<f32>(s[0][c], s[1][c], s[2][c], s[3][c]);
            // Dropout (philox.wgsl; dead code without it) after the row sums. This kernel's rows
            // are 16 apart, so each factor costs a whole Philox call (4x the work of
            // tiled_v2.wgsl).
            if (DROPOUT) {
                pc *= drop_rows(head, rows, j0 + tx + 4u * c);
            }
            pt[(tx + 4u * c) * 16u + ty] = pc;
        }
        workgroupBarrier();

        // O tile += P x V (after rescaling by alpha).
        for (var r = 0u; r < RPT; r++) {
            for (var h = 0u; h < OV; h++) {
                acc[r * OV + h] *= alpha[r];
            }
        }
        for (var j = 0u; j < BC; j++) {
            let p = pt[j * 16u + ty];
            for (var h = 0u; h < OV; h++) {
                let vv = vs[j * P + tx + 4u * h];
                for (var r = 0u; r < RPT; r++) {
                    acc[r * OV + h] += p[r] * vv;
                }
            }
        }
    }

    // Combine the 4 partial sums of each row; a row with no allowed key returns 0 (SDPA's way).
    let lsum = row_sum(l, t);
    let inv = select(vec4<f32>(0.0), vec4<f32>(1.0) / lsum, lsum > vec4<f32>(0.0));
    for (var r = 0u; r < RPT; r++) {
        if (rows[r] < n) {
            for (var h = 0u; h < OV; h++) {
                store_vec(base + rows[r] * d, 4u * (tx + 4u * h), d, acc[r * OV + h] * inv[r]);
            }
        }
        // The training forward keeps each row's logsumexp (tiled_lse.wgsl; tiled_nolse.wgsl:
        // no-op).
        if (tx == 0u) {
            save_lse(head, rows[r], m[r], lsum[r]);
        }
    }
}

// Dropout factors of rows `rows` at key j.
fn drop_rows(head: u32, rows: vec4<u32>, j: u32) -> vec4<f32> {
    return vec4<f32>(drop1(head, rows.x, j), drop1(head, rows.y, j), drop1(head, rows.z, j),
                     drop1(head, rows.w, j));
}


// This thread's K and V elements of key block j0: element e = t + 64x (x < LPT) of the block is
// key e / W, column e % W (consecutive threads, consecutive columns); 0 past the M keys or D.
// (WGSL passes no storage pointers to functions, hence K and V read here together.)
fn fetch_kv(kvbase: u32, j0: u32, t: u32, nk: u32, d: u32,
            kf: ptr<function, array<f32, MAX_LPT>>, vf: ptr<function, array<f32, MAX_LPT>>) {
    for (var x = 0u; x < LPT; x++) {
        let e = t + 64u * x;
        let r = e / W;
        let c = e % W;
        var kx = 0.0;
        var vx = 0.0;
        if (e < BC * W && j0 + r < nk && c < d) {
            let ei = kvbase + (j0 + r) * d + c;
            kx = load(k[ei / PACK], ei);
            vx = load(v[ei / PACK], ei);
        }
        (*kf)[x] = kx;
        (*vf)[x] = vx;
    }
}
