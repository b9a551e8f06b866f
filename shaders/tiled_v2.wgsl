// tiled_v2.wgsl — fused attention for SIMT cores (the `tiled` variant's kernel where the adapter
// has subgroups of >= 8 lanes): FlashAttention-2's structure with the work of a block spread like
// a matrix product, and no workgroup barrier but the two that guard the staged K/V.
//
// A workgroup of 128 threads owns BR = 64 query rows of one head and walks key blocks of BC = 32
// keys (the host's default, tile `rt2`) or 64 (`rt2:64`, 48 KiB; 2.2-3.6x slower on the H200,
// results/EXPERIMENTS.md, v15-rt2-ab and v16). Thread t = 8*ty + tx (ty = 0..15, tx = 0..7) owns
//   rows     4ty .. 4ty+3                       (one vec4 of the transposed Q tile),
//   keys     4tx .. 4tx+3 (and 32 + 4tx .. +3)  of each block (one vec4 of the transposed K tile
//                                               per 32-key slab),
//   columns  4tx .. 4tx+3 and 32 + 4tx .. +3    of O (two vec4 of each staged V row),
// so both products are outer products over staged operands: per d, 1 vec4 of Q and 1-2 of K feed
// 16-32 multiply-adds (S = Q·Kᵀ); per key, 1 vec4 of P and 2 of V feed 32 (O += P·V).
//
// The 8 threads of a row group (same ty) are 8 consecutive lanes of one subgroup (subgroups are
// laid out in invocation order; the host asks for >= 8 lanes and the validation of every run would
// catch another layout). That is FlashAttention-2's split: a row group owns its rows, K and V are
// shared, and nothing crosses row groups. Row maxima and sums combine over the 8 lanes with xor
// shuffles, and P reaches the threads that multiply it with V by `subgroupShuffle` instead of a
// round trip through workgroup memory (which would need 16 KiB more and two more barriers a block).
//
// Staging: Q (pre-scaled by scale·log2 e) once, transposed (qs[d][row]); per block K transposed
// (ks[d][key]) and V as it is (vs[key][d]), from 16-byte loads of the storage dtype (prelude
// word4/EPW: 4 f32 or 8 f16/bf16 per load, widened once). Masking (tiled_mask.wgsl) runs only on
// blocks that need it: those crossing the diagonal or N, or any block when there is a mask bias.
// Workgroup storage: qs 64 x 64 + ks D x BC + vs BC x 64 f32 = 16 KiB + BC · 512 B: 48 KiB at
// BC = 64, 32 KiB at BC = 32.
//
// Q, K and V are bound as array<vec4<u32>> (16-byte words: D must be a multiple of EPW), O as the
// storage dtype. Everything on chip is f32. The training forward appends tiled_lse.wgsl (binding 5:
// the row logsumexp L for the backward), inference tiled_nolse.wgsl.

@group(0) @binding(1) var<storage, read> q: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> k: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> o: array<st>;

// Keys per block: 32 (one slab) or 64 (two slabs of 32).
override BC: u32 = 32u;
// The head dimension as a pipeline constant (the host sets it to D, so the loops over d have a
// known trip count and unroll); 0 reads it from params at run time instead.
override HD: u32 = 0u;
// 1: the next block's K/V words are loaded into registers before this block's products, so
// their latency hides behind the arithmetic (costs up to 2 x BC/8 vec4 registers); 0: loaded
// after the barrier that frees the tiles.
override PREFETCH: u32 = 1u;
// The lazy-rescale threshold (tiled_mask.wgsl's lazy_max, base 2): O is rescaled only in a block
// where some row's maximum grew by more than TAU; 0 (the host's default, src/kernels/tiled.rs
// LAZY_TAU): whenever it grew.
override TAU: f32 = 0.0;
// vec4<u32> words of K (and of V) each thread stages per block, at most (BC = 64, f32, D = 64).
const KV_MAX: u32 = 8u;
const BR: u32 = 64u;
const LOG2E: f32 = 1.4426950408889634;

var<workgroup> qs: array<vec4<f32>, 1024>;      // [d][row / 4]: 64 x 16
var<workgroup> ks: array<vec4<f32>, 16u * BC>;  // [d][key / 4]: 64 x BC/4
var<workgroup> vs: array<vec4<f32>, 16u * BC>;  // [key][d / 4]: BC x 16

@compute @workgroup_size(128, 1, 1)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let n = params.seq;
    let nk = params.kv_seq;  // keys (M)
    let d = select(params.head_dim, HD, HD != 0u);
    let head = params.head_offset + wg.y;
    let i0 = wg.x * BR;
    let causal = params.causal != 0u;
    let ninf = neg_inf();
    let ty = t / 8u;
    let tx = t % 8u;
    let group = lane & ~7u;      // first lane of this row group
    let wpr = d / EPW;           // 16-byte words per row of Q, K, V
    let kc = BC / 4u;            // vec4 slots per staged d of K
    let two = BC == 64u;

    // Q, transposed and pre-scaled, zero past N (and the unused d up to 64 are never read).
    let qscale = params.scale * LOG2E;
    for (var w = t; w < BR * wpr; w += 128u) {
        let r = w % BR;
        let dw = w / BR;
        var lo = vec4<f32>(0.0);
        var hi = vec4<f32>(0.0);
        if (i0 + r < n) {
            let x = q[(head * n + i0 + r) * wpr + dw];
            lo = word4(x, 0u) * qscale;
            hi = word4(x, 1u) * qscale;
        }
        stage_q(dw * EPW, r, lo, hi);
    }

    var m = vec4<f32>(ninf);   // running max of each row (base 2)
    var l = vec4<f32>(0.0);    // this thread's share of each row's running sum
    var o00 = vec4<f32>(0.0); var o01 = vec4<f32>(0.0);
    var o10 = vec4<f32>(0.0); var o11 = vec4<f32>(0.0);
    var o20 = vec4<f32>(0.0); var o21 = vec4<f32>(0.0);
    var o30 = vec4<f32>(0.0); var o31 = vec4<f32>(0.0);

    // Keys this block's rows may see: all M, or up to the causal diagonal of its last row.
    let kv_end = causal_keys(i0 + BR);
    // This thread's words of the K and V block being staged (see fetch_kv).
    var kr: array<vec4<u32>, KV_MAX>;
    var vr: array<vec4<u32>, KV_MAX>;
    if (PREFETCH != 0u) {
        fetch_kv(kv_head(head), nk, 0u, t, wpr, &kr, &vr);
    }
    for (var j0 = 0u; j0 < kv_end; j0 += BC) {
        // The previous block's K and V must be consumed before they are overwritten.
        workgroupBarrier();
        if (PREFETCH == 0u) {
            fetch_kv(kv_head(head), nk, j0, t, wpr, &kr, &vr);
        }
        stage_kv(kc, t, wpr, &kr, &vr);
        workgroupBarrier();
        if (PREFETCH != 0u && j0 + BC < kv_end) {
            fetch_kv(kv_head(head), nk, j0 + BC, t, wpr, &kr, &vr);
        }

        // S = Q·Kᵀ: s<r><h> = scores of row 4ty + r with keys 32h + 4tx .. +3.
        var s00 = vec4<f32>(0.0); var s01 = vec4<f32>(0.0);
        var s10 = vec4<f32>(0.0); var s11 = vec4<f32>(0.0);
        var s20 = vec4<f32>(0.0); var s21 = vec4<f32>(0.0);
        var s30 = vec4<f32>(0.0); var s31 = vec4<f32>(0.0);
        for (var dd = 0u; dd < d; dd++) {
            let a = qs[dd * 16u + ty];
            let b0 = ks[dd * kc + tx];
            s00 += a.x * b0; s10 += a.y * b0; s20 += a.z * b0; s30 += a.w * b0;
            if (two) {
                let b1 = ks[dd * kc + 8u + tx];
                s01 += a.x * b1; s11 += a.y * b1; s21 += a.z * b1; s31 += a.w * b1;
            }
        }
        // Only blocks that cross the diagonal or N, or all of them with a mask bias, are masked.
        if (HAS_MASK || j0 + BC > nk || (causal && i32(j0 + BC) > i32(i0 + 1u) + params.causal_off)) {
            let i = i0 + 4u * ty;
            let jk = j0 + 4u * tx;
            s00 = masked(s00, head, i, jk, 1u, nk, causal, ninf);
            s10 = masked(s10, head, i + 1u, jk, 1u, nk, causal, ninf);
            s20 = masked(s20, head, i + 2u, jk, 1u, nk, causal, ninf);
            s30 = masked(s30, head, i + 3u, jk, 1u, nk, causal, ninf);
            if (two) {
                s01 = masked(s01, head, i, jk + 32u, 1u, nk, causal, ninf);
                s11 = masked(s11, head, i + 1u, jk + 32u, 1u, nk, causal, ninf);
                s21 = masked(s21, head, i + 2u, jk + 32u, 1u, nk, causal, ninf);
                s31 = masked(s31, head, i + 3u, jk + 32u, 1u, nk, causal, ninf);
            } else {
                s01 = vec4<f32>(ninf); s11 = vec4<f32>(ninf);
                s21 = vec4<f32>(ninf); s31 = vec4<f32>(ninf);
            }
        } else if (!two) {
            s01 = vec4<f32>(ninf); s11 = vec4<f32>(ninf);
            s21 = vec4<f32>(ninf); s31 = vec4<f32>(ninf);
        }

        // Row maxima over this thread's keys, then over the row group's 8 lanes.
        var mb = vec4<f32>(max(max4(s00), max4(s01)), max(max4(s10), max4(s11)),
                           max(max4(s20), max4(s21)), max(max4(s30), max4(s31)));
        mb = max(mb, subgroupShuffleXor(mb, 1u));
        mb = max(mb, subgroupShuffleXor(mb, 2u));
        mb = max(mb, subgroupShuffleXor(mb, 4u));
        // The lazy maximum (tiled_mask.wgsl): alpha = 1 exactly for a row that did not move.
        // A row that has seen no allowed key yet keeps m = -inf, alpha = 1 and adds nothing.
        let m_new = lazy_max(m, mb, TAU);
        let live = m_new > vec4<f32>(ninf);
        let alpha = select(vec4<f32>(1.0), exp2(m - m_new), live);
        let moved = any(m_new != m);
        m = m_new;
        s00 = select(vec4<f32>(0.0), exp2(s00 - m.x), live.x);
        s01 = select(vec4<f32>(0.0), exp2(s01 - m.x), live.x);
        s10 = select(vec4<f32>(0.0), exp2(s10 - m.y), live.y);
        s11 = select(vec4<f32>(0.0), exp2(s11 - m.y), live.y);
        s20 = select(vec4<f32>(0.0), exp2(s20 - m.z), live.z);
        s21 = select(vec4<f32>(0.0), exp2(s21 - m.z), live.z);
        s30 = select(vec4<f32>(0.0), exp2(s30 - m.w), live.w);
        s31 = select(vec4<f32>(0.0), exp2(s31 - m.w), live.w);
        let one = vec4<f32>(1.0);
        l = l * alpha + vec4<f32>(dot(s00 + s01, one), dot(s10 + s11, one),
                                  dot(s20 + s21, one), dot(s30 + s31, one));
        if (moved) {
            o00 *= alpha.x; o01 *= alpha.x;
            o10 *= alpha.y; o11 *= alpha.y;
            o20 *= alpha.z; o21 *= alpha.z;
            o30 *= alpha.w; o31 *= alpha.w;
        }

        // O += P·V. Key 32h + 4src + c belongs to lane `group + src`: its P for this thread's 4
        // rows comes by shuffle, the V row from workgroup memory.
        for (var c = 0u; c < 4u; c++) {
            var p0 = vec4<f32>(s00[c], s10[c], s20[c], s30[c]);
            var p1 = vec4<f32>(s01[c], s11[c], s21[c], s31[c]);
            // Dropout (philox.wgsl; dead code without it) after the row sums, as SDPA drops
            // the normalized probabilities: one call for this thread's 4 rows at one key.
            if (DROPOUT) {
                p0 *= drop4(head, i0 / 4u + ty, j0 + 4u * tx + c);
                if (two) {
                    p1 *= drop4(head, i0 / 4u + ty, j0 + 32u + 4u * tx + c);
                }
            }
            for (var src = 0u; src < 8u; src++) {
                let owner = group | src;
                let j = 4u * src + c;
                let pr = subgroupShuffle(p0, owner);
                let v0 = vs[j * 16u + tx];
                let v1 = vs[j * 16u + 8u + tx];
                o00 += pr.x * v0; o01 += pr.x * v1;
                o10 += pr.y * v0; o11 += pr.y * v1;
                o20 += pr.z * v0; o21 += pr.z * v1;
                o30 += pr.w * v0; o31 += pr.w * v1;
                if (two) {
                    let ps = subgroupShuffle(p1, owner);
                    let w0 = vs[(j + 32u) * 16u + tx];
                    let w1 = vs[(j + 32u) * 16u + 8u + tx];
                    o00 += ps.x * w0; o01 += ps.x * w1;
                    o10 += ps.y * w0; o11 += ps.y * w1;
                    o20 += ps.z * w0; o21 += ps.z * w1;
                    o30 += ps.w * w0; o31 += ps.w * w1;
                }
            }
        }
    }

    // Combine the row group's partial sums; a row with no allowed key returns 0 (SDPA's way).
    var ls = l + subgroupShuffleXor(l, 1u);
    ls = ls + subgroupShuffleXor(ls, 2u);
    ls = ls + subgroupShuffleXor(ls, 4u);
    let inv = select(vec4<f32>(0.0), vec4<f32>(1.0) / ls, ls > vec4<f32>(0.0));
    let base = head * n * d;
    let r0 = i0 + 4u * ty;
    store8(base, r0, tx, d, n, o00 * inv.x, o01 * inv.x);
    store8(base, r0 + 1u, tx, d, n, o10 * inv.y, o11 * inv.y);
    store8(base, r0 + 2u, tx, d, n, o20 * inv.z, o21 * inv.z);
    store8(base, r0 + 3u, tx, d, n, o30 * inv.w, o31 * inv.w);
    // The training forward keeps each row's logsumexp for the backward (tiled_lse.wgsl; a no-op
    // from tiled_nolse.wgsl in inference). m and ls are the same on the row group's 8 lanes.
    if (tx == 0u) {
        save_lse(head, r0, m.x, ls.x);
        save_lse(head, r0 + 1u, m.y, ls.y);
        save_lse(head, r0 + 2u, m.z, ls.z);
        save_lse(head, r0 + 3u, m.w, ls.w);
    }
}

// This thread's words of key block j0 of K/V head `head`: word w = t + 128i of the block, i.e. key w % BC and word
// w / BC of its row for K (consecutive threads, consecutive keys: the transposed stores of
// stage_kv hit consecutive banks) and key w / wpr, word w % wpr for V (consecutive words). Keys
// past the n (= M) keys read as zero words (0.0 in every dtype).
fn fetch_kv(head: u32, n: u32, j0: u32, t: u32, wpr: u32,
            kr: ptr<function, array<vec4<u32>, KV_MAX>>,
            vr: ptr<function, array<vec4<u32>, KV_MAX>>) {
    for (var i = 0u; i < KV_MAX; i++) {
        let w = t + 128u * i;
        if (w < BC * wpr) {
            let kk = w % BC;
            var x = vec4<u32>(0u);
            if (j0 + kk < n) {
                x = k[(head * n + j0 + kk) * wpr + w / BC];
            }
            (*kr)[i] = x;
            let kv = w / wpr;
            var y = vec4<u32>(0u);
            if (j0 + kv < n) {
                y = v[(head * n + j0 + kv) * wpr + w % wpr];
            }
            (*vr)[i] = y;
        }
    }
}

// The words fetched by fetch_kv into the tiles: K transposed (ks[d][key]), V as it is.
fn stage_kv(pitch: u32, t: u32, wpr: u32,
            kr: ptr<function, array<vec4<u32>, KV_MAX>>,
            vr: ptr<function, array<vec4<u32>, KV_MAX>>) {
    for (var i = 0u; i < KV_MAX; i++) {
        let w = t + 128u * i;
        if (w < BC * wpr) {
            let x = (*kr)[i];
            stage_k(pitch, (w / BC) * EPW, w % BC, word4(x, 0u), word4(x, 1u));
            let y = (*vr)[i];
            let c = (w / wpr) * 16u + (w % wpr) * (EPW / 4u);
            vs[c] = word4(y, 0u);
            if (EPW == 8u) {
                vs[c + 1u] = word4(y, 1u);
            }
        }
    }
}

// The EPW values of one 16-byte word (d = d0 .. d0 + EPW - 1 of row `r`) into the transposed
// Q tile qs[d][r] (16 vec4 per d). (WGSL passes no pointer to an override-sized array, hence two.)
fn stage_q(d0: u32, r: u32, lo: vec4<f32>, hi: vec4<f32>) {
    for (var e = 0u; e < 4u; e++) {
        qs[(d0 + e) * 16u + r / 4u][r % 4u] = lo[e];
    }
    if (EPW == 8u) {
        for (var e = 0u; e < 4u; e++) {
            qs[(d0 + 4u + e) * 16u + r / 4u][r % 4u] = hi[e];
        }
    }
}

// The same for key `r` into the transposed K tile ks[d][r] (`pitch` vec4 per d).
fn stage_k(pitch: u32, d0: u32, r: u32, lo: vec4<f32>, hi: vec4<f32>) {
    for (var e = 0u; e < 4u; e++) {
        ks[(d0 + e) * pitch + r / 4u][r % 4u] = lo[e];
    }
    if (EPW == 8u) {
        for (var e = 0u; e < 4u; e++) {
            ks[(d0 + 4u + e) * pitch + r / 4u][r % 4u] = hi[e];
        }
    }
}

// Writes row i of O, columns 4tx .. +3 and 32 + 4tx .. +3, skipping what lies past N or D.
fn store8(base: u32, i: u32, tx: u32, d: u32, n: u32, a: vec4<f32>, b: vec4<f32>) {
    if (i >= n) {
        return;
    }
    store_vec(base + i * d, 4u * tx, d, a);
    store_vec(base + i * d, 32u + 4u * tx, d, b);
}
