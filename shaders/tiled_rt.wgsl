// tiled_rt.wgsl — fused attention, register-tiled (the `tiled` variant's kernel for D <= 64).
//
// FlashAttention-2 structure as in tiled.wgsl (online softmax, N x N never in device memory, key
// blocks above the diagonal skipped when causal), but the work of a block is spread like a matrix
// product instead of one row per thread: a workgroup of 64 threads owns BR = 64 query rows; thread
// (ty, tx) = (t / 4, t % 4) owns rows ty + 16r (r = 0..3) and, of each block of BC = 16 keys, keys
// tx + 4c (c = 0..3): a 4 x 4 tile of scores in registers (s0..s3). For P x V it owns the same 4
// rows and the output columns 4*(tx + 4h) .. +3 (h = 0..3): a 4 x 16 tile of O in registers.
// Every workgroup load feeds 8 multiply-adds (4 vec4 of Q and 4 vec4 of K give 16 dot4 products).
// Rows and keys are interleaved (ty + 16r, tx + 4c) so that the threads of a warp read consecutive
// rows of the padded workgroup arrays: no bank conflicts.
//
// Row statistics: each thread reduces its 4 keys per row, then the 4 threads sharing those rows
// (t = 4*ty .. 4*ty + 3) combine their partial maxima with `row_max`; the running sum l stays
// partial per thread (each rescales its own share by alpha) and is combined once at the end with
// `row_sum`. Those two functions come from a second file appended to this one:
//   tiled_rt_wg.wgsl — through workgroup memory and a barrier (`tiled`, any adapter);
//   tiled_rt_sg.wgsl — through subgroup shuffles, no barrier (`tiled-subgroup`);
// and the score masking (`masked`, `max4`) from a third, tiled_mask.wgsl, shared with tiled.wgsl
// and tiled_coop.wgsl (host code: src/kernels/tiled.rs).
// Workgroup storage: (64 + 16 + 16) * 17 * 16 + 16 * 16 * 16 = 30208 bytes, + 64 * 16 = 1024 for
// tiled_rt_wg.wgsl.
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
// bf16 (3968 -> 5150 µs) got slower at the seed's shape (results/h200/2026-12-02-v2); without it
// the staging loop is the direct one of the first version.
override PREFETCH: bool = true;

const BR: u32 = 64u;
const BC: u32 = 16u;
const P: u32 = 17u;        // row pitch in vec4: 16 columns (D <= 64) + 1 against bank conflicts
const LOG2E: f32 = 1.4426950408889634;

var<workgroup> qs: array<vec4<f32>, 1088>;  // BR * P: Q rows, pre-scaled by scale * log2(e)
var<workgroup> ks: array<vec4<f32>, 272>;   // BC * P
var<workgroup> vs: array<vec4<f32>, 272>;   // BC * P
var<workgroup> pt: array<vec4<f32>, 256>;   // [key][ty]: probabilities of rows ty + 16r, as vec4 over r

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
    let d4 = (d + 3u) / 4u;
    let rows = vec4<u32>(i0 + ty, i0 + ty + 16u, i0 + ty + 32u, i0 + ty + 48u);

    // Stage Q (scaled), zero-padded to 64 columns. Consecutive threads read consecutive d.
    let qscale = params.scale * LOG2E;
    for (var e = t; e < BR * 64u; e += 64u) {
        let r = e / 64u;
        let c = e % 64u;
        var x = 0.0;
        if (i0 + r < n && c < d) {
            let ei = base + (i0 + r) * d + c;
            x = load(q[ei / PACK], ei) * qscale;
        }
        qs[r * P + c / 4u][c % 4u] = x;
    }

    var m = vec4<f32>(ninf);   // running max per row (base 2)
    var l = vec4<f32>(0.0);    // this thread's share of the running sum per row
    var o00 = vec4<f32>(0.0); var o01 = vec4<f32>(0.0); var o02 = vec4<f32>(0.0); var o03 = vec4<f32>(0.0);
    var o10 = vec4<f32>(0.0); var o11 = vec4<f32>(0.0); var o12 = vec4<f32>(0.0); var o13 = vec4<f32>(0.0);
    var o20 = vec4<f32>(0.0); var o21 = vec4<f32>(0.0); var o22 = vec4<f32>(0.0); var o23 = vec4<f32>(0.0);
    var o30 = vec4<f32>(0.0); var o31 = vec4<f32>(0.0); var o32 = vec4<f32>(0.0); var o33 = vec4<f32>(0.0);

    // Keys this block's rows may see: all M, or up to the causal diagonal of its last row.
    let kv_end = causal_keys(i0 + BR);
    // K and V are double-buffered through registers: thread t holds column t of the next block's
    // 16 key rows (kf*, vf* below) while the current block is computed, so the global loads' latency
    // hides behind the arithmetic instead of stalling the workgroup at the barrier.
    var kf0 = vec4<f32>(0.0); var kf1 = vec4<f32>(0.0); var kf2 = vec4<f32>(0.0); var kf3 = vec4<f32>(0.0);
    var vf0 = vec4<f32>(0.0); var vf1 = vec4<f32>(0.0); var vf2 = vec4<f32>(0.0); var vf3 = vec4<f32>(0.0);
    if (PREFETCH && 0u < kv_end) {
        kf0 = kv4(false, kvbase, 0u, t, nk, d); kf1 = kv4(false, kvbase, 4u, t, nk, d);
        kf2 = kv4(false, kvbase, 8u, t, nk, d); kf3 = kv4(false, kvbase, 12u, t, nk, d);
        vf0 = kv4(true, kvbase, 0u, t, nk, d); vf1 = kv4(true, kvbase, 4u, t, nk, d);
        vf2 = kv4(true, kvbase, 8u, t, nk, d); vf3 = kv4(true, kvbase, 12u, t, nk, d);
    }
    for (var j0 = 0u; j0 < kv_end; j0 += BC) {
        // The previous block's K, V and P must be consumed before they are overwritten.
        workgroupBarrier();
        if (PREFETCH) {
            stage_col(0u, t, kf0, vf0);
            stage_col(4u, t, kf1, vf1);
            stage_col(8u, t, kf2, vf2);
            stage_col(12u, t, kf3, vf3);
        } else {
            for (var e = t; e < BC * 64u; e += 64u) {
                let r = e / 64u;
                let c = e % 64u;
                var kx = 0.0;
                var vx = 0.0;
                if (j0 + r < nk && c < d) {
                    let ei = kvbase + (j0 + r) * d + c;
                    kx = load(k[ei / PACK], ei);
                    vx = load(v[ei / PACK], ei);
                }
                ks[r * P + c / 4u][c % 4u] = kx;
                vs[r * P + c / 4u][c % 4u] = vx;
            }
        }
        workgroupBarrier();
        // Issue the next block's loads now; they complete while this block is computed.
        let jn = j0 + BC;
        if (PREFETCH && jn < kv_end) {
            kf0 = kv4(false, kvbase, jn, t, nk, d); kf1 = kv4(false, kvbase, jn + 4u, t, nk, d);
            kf2 = kv4(false, kvbase, jn + 8u, t, nk, d); kf3 = kv4(false, kvbase, jn + 12u, t, nk, d);
            vf0 = kv4(true, kvbase, jn, t, nk, d); vf1 = kv4(true, kvbase, jn + 4u, t, nk, d);
            vf2 = kv4(true, kvbase, jn + 8u, t, nk, d); vf3 = kv4(true, kvbase, jn + 12u, t, nk, d);
        }

        // S tile: s<r>[c] = score of row ty + 16r with key tx + 4c.
        var s0 = vec4<f32>(0.0);
        var s1 = vec4<f32>(0.0);
        var s2 = vec4<f32>(0.0);
        var s3 = vec4<f32>(0.0);
        for (var c4 = 0u; c4 < d4; c4++) {
            let q0 = qs[ty * P + c4];
            let q1 = qs[(ty + 16u) * P + c4];
            let q2 = qs[(ty + 32u) * P + c4];
            let q3 = qs[(ty + 48u) * P + c4];
            let k0 = ks[tx * P + c4];
            let k1 = ks[(tx + 4u) * P + c4];
            let k2 = ks[(tx + 8u) * P + c4];
            let k3 = ks[(tx + 12u) * P + c4];
            s0 += vec4<f32>(dot(q0, k0), dot(q0, k1), dot(q0, k2), dot(q0, k3));
            s1 += vec4<f32>(dot(q1, k0), dot(q1, k1), dot(q1, k2), dot(q1, k3));
            s2 += vec4<f32>(dot(q2, k0), dot(q2, k1), dot(q2, k2), dot(q2, k3));
            s3 += vec4<f32>(dot(q3, k0), dot(q3, k1), dot(q3, k2), dot(q3, k3));
        }
        // This thread's keys are j0 + tx + 4c (c = 0..3): `masked` (tiled_mask.wgsl) with step 4.
        s0 = masked(s0, head, rows.x, j0 + tx, 4u, nk, causal, ninf);
        s1 = masked(s1, head, rows.y, j0 + tx, 4u, nk, causal, ninf);
        s2 = masked(s2, head, rows.z, j0 + tx, 4u, nk, causal, ninf);
        s3 = masked(s3, head, rows.w, j0 + tx, 4u, nk, causal, ninf);

        // Row maxima: this thread's 4 keys, then the 4 threads that share the rows.
        let m_new = max(m, row_max(vec4<f32>(max4(s0), max4(s1), max4(s2), max4(s3)), t));
        // A row that has seen no allowed key yet keeps m = -inf, alpha = 1 and adds nothing.
        let live = m_new > vec4<f32>(ninf);
        let alpha = select(vec4<f32>(1.0), exp2(m - m_new), live);
        s0 = select(vec4<f32>(0.0), exp2(s0 - m_new.x), live.x);
        s1 = select(vec4<f32>(0.0), exp2(s1 - m_new.y), live.y);
        s2 = select(vec4<f32>(0.0), exp2(s2 - m_new.z), live.z);
        s3 = select(vec4<f32>(0.0), exp2(s3 - m_new.w), live.w);
        let one = vec4<f32>(1.0);
        l = l * alpha + vec4<f32>(dot(s0, one), dot(s1, one), dot(s2, one), dot(s3, one));
        m = m_new;
        var pc0 = vec4<f32>(s0.x, s1.x, s2.x, s3.x);
        var pc1 = vec4<f32>(s0.y, s1.y, s2.y, s3.y);
        var pc2 = vec4<f32>(s0.z, s1.z, s2.z, s3.z);
        var pc3 = vec4<f32>(s0.w, s1.w, s2.w, s3.w);
        // Dropout (philox.wgsl; dead code without it) after the row sums. This kernel's rows are
        // 16 apart, so each factor costs a whole Philox call (4x the work of tiled_v2.wgsl).
        if (DROPOUT) {
            pc0 *= drop_rows(head, rows, j0 + tx);
            pc1 *= drop_rows(head, rows, j0 + tx + 4u);
            pc2 *= drop_rows(head, rows, j0 + tx + 8u);
            pc3 *= drop_rows(head, rows, j0 + tx + 12u);
        }
        pt[tx * 16u + ty] = pc0;
        pt[(tx + 4u) * 16u + ty] = pc1;
        pt[(tx + 8u) * 16u + ty] = pc2;
        pt[(tx + 12u) * 16u + ty] = pc3;
        workgroupBarrier();

        // O tile += P x V (after rescaling by alpha).
        o00 *= alpha.x; o01 *= alpha.x; o02 *= alpha.x; o03 *= alpha.x;
        o10 *= alpha.y; o11 *= alpha.y; o12 *= alpha.y; o13 *= alpha.y;
        o20 *= alpha.z; o21 *= alpha.z; o22 *= alpha.z; o23 *= alpha.z;
        o30 *= alpha.w; o31 *= alpha.w; o32 *= alpha.w; o33 *= alpha.w;
        for (var j = 0u; j < BC; j++) {
            let p = pt[j * 16u + ty];
            let v0 = vs[j * P + tx];
            let v1 = vs[j * P + tx + 4u];
            let v2 = vs[j * P + tx + 8u];
            let v3 = vs[j * P + tx + 12u];
            o00 += p.x * v0; o01 += p.x * v1; o02 += p.x * v2; o03 += p.x * v3;
            o10 += p.y * v0; o11 += p.y * v1; o12 += p.y * v2; o13 += p.y * v3;
            o20 += p.z * v0; o21 += p.z * v1; o22 += p.z * v2; o23 += p.z * v3;
            o30 += p.w * v0; o31 += p.w * v1; o32 += p.w * v2; o33 += p.w * v3;
        }
    }

    // Combine the 4 partial sums of each row; a row with no allowed key returns 0 (SDPA's way).
    let lsum = row_sum(l, t);
    let inv = select(vec4<f32>(0.0), vec4<f32>(1.0) / lsum, lsum > vec4<f32>(0.0));
    store4(base, rows.x, tx, d, n, o00 * inv.x, o01 * inv.x, o02 * inv.x, o03 * inv.x);
    store4(base, rows.y, tx, d, n, o10 * inv.y, o11 * inv.y, o12 * inv.y, o13 * inv.y);
    store4(base, rows.z, tx, d, n, o20 * inv.z, o21 * inv.z, o22 * inv.z, o23 * inv.z);
    store4(base, rows.w, tx, d, n, o30 * inv.w, o31 * inv.w, o32 * inv.w, o33 * inv.w);
    // The training forward keeps each row's logsumexp (tiled_lse.wgsl; tiled_nolse.wgsl: no-op).
    if (tx == 0u) {
        save_lse(head, rows.x, m.x, lsum.x);
        save_lse(head, rows.y, m.y, lsum.y);
        save_lse(head, rows.z, m.z, lsum.z);
        save_lse(head, rows.w, m.w, lsum.w);
    }
}

// Dropout factors of rows `rows` at key j.
fn drop_rows(head: u32, rows: vec4<u32>, j: u32) -> vec4<f32> {
    return vec4<f32>(drop1(head, rows.x, j), drop1(head, rows.y, j), drop1(head, rows.z, j),
                     drop1(head, rows.w, j));
}

// Writes output row i, columns 4*(tx + 4h) .. +3 for h = 0..3, skipping what lies past N or D.
fn store4(base: u32, i: u32, tx: u32, d: u32, n: u32, a: vec4<f32>, b: vec4<f32>, c: vec4<f32>, e: vec4<f32>) {
    if (i >= n) {
        return;
    }
    let row = base + i * d;
    store_vec(row, (tx) * 4u, d, a);
    store_vec(row, (tx + 4u) * 4u, d, b);
    store_vec(row, (tx + 8u) * 4u, d, c);
    store_vec(row, (tx + 12u) * 4u, d, e);
}

// PACK neighbouring elements per store (D is even when PACK = 2, so pairs never leave the row).
fn store_vec(row: u32, col: u32, d: u32, x: vec4<f32>) {
    for (var c = 0u; c < 4u; c += PACK) {
        if (col + c < d) {
            let e = row + col + c;
            o[e / PACK] = pack(x[c], x[min(c + 1u, 3u)]);
        }
    }
}

// Column c of key rows j .. j+3 of K or V (0 past N or D).
// (WGSL passes no storage pointers to functions, hence the flag.)
fn kv4(from_v: bool, base: u32, j: u32, c: u32, n: u32, d: u32) -> vec4<f32> {
    var x = vec4<f32>(0.0);
    if (c < d) {
        for (var r = 0u; r < 4u; r++) {
            if (j + r < n) {
                let ei = base + (j + r) * d + c;
                if (from_v) {
                    x[r] = load(v[ei / PACK], ei);
                } else {
                    x[r] = load(k[ei / PACK], ei);
                }
            }
        }
    }
    return x;
}

// Writes column c of 4 staged key rows r0 .. r0+3 of K and V.
fn stage_col(r0: u32, c: u32, kx: vec4<f32>, vx: vec4<f32>) {
    for (var r = 0u; r < 4u; r++) {
        ks[(r0 + r) * P + c / 4u][c % 4u] = kx[r];
        vs[(r0 + r) * P + c / 4u][c % 4u] = vx[r];
    }
}
