// tiled_v3.wgsl — fused attention for SIMT cores at head sizes 72 .. 256 (the `tiled` variant's
// tile `rt3`, where the adapter has subgroups of >= 8 lanes): tiled_v2.wgsl's thread layout and
// per-thread work, with the head dimension walked in chunks of 64 columns so that the workgroup's
// storage stays 32 KiB at every D (it fits lavapipe's and browsers' 32 KiB) and the key block
// stays 32 keys instead of shrinking with D (tiled_rt.wgsl's block falls to 4 keys at D = 256).
//
// A workgroup of 128 threads owns BR = 64 query rows of one head and walks key blocks of BC = 32
// keys. Thread t = 8*ty + tx (ty = 0..15, tx = 0..7) owns
//   rows     4ty .. 4ty+3                                  (as in tiled_v2.wgsl),
//   keys     4tx .. 4tx+3 of each block                    (one vec4 of the transposed K chunk),
//   columns  64c + 4tx .. +3 and 64c + 32 + 4tx .. +3      of O, for every chunk c < NCH,
// so its S tile is 4 x 4 scores and its O tile 4 rows x 8 NCH columns (64 registers at D = 128,
// 128 at D = 256). Per key block:
//   S = Q·Kᵀ, chunk by chunk: stage the chunk's Q (transposed, pre-scaled) and K (transposed),
//     then per column 1 vec4 of Q and 1 of K feed 16 multiply-adds (as in tiled_v2.wgsl);
//   the online softmax over the block's 32 keys (the 8 lanes of a row group hold them: xor
//     shuffles, no workgroup memory);
//   P to workgroup memory once (into K's dead tile), V's chunks 1 and 2 into Q's dead tile;
//   O += P·V, chunk by chunk: per key one vec4 of P (this thread's 4 rows; the row group's 8
//     lanes read the same word) and 2 of V feed 32 multiply-adds (4 shuffles per key and chunk
//     in the first version: 1.03-1.26x slower on the H100, results/EXPERIMENTS.md v39-rt3).
// V's first chunk is staged with Q's and K's first (it is not read during S = Q·Kᵀ). Barriers a
// block: 2 NCH + 2, and 2 more at D > 192 (V's chunk 3 waits for chunk 0 to be consumed).
//
// Q is re-staged for every key block (the chunks replace each other): Q crosses L2 BR / BC = 2
// times as often as K; its bytes from device memory are still one pass (the plan's figure).
// Workgroup storage: one array of 2048 vec4 = 32 KiB (Q's chunk 16 KiB, K's 8, V's 8).
//
// Q, K and V are bound as array<vec4<u32>> (16-byte words of the storage dtype: D must be a
// multiple of 8), O as the storage dtype; everything on chip is f32. Masking from
// tiled_mask.wgsl, the row logsumexp of the training forward from tiled_lse.wgsl (a no-op from
// tiled_nolse.wgsl), the stores from tiled_store.wgsl. Host code: src/kernels/tiled.rs.

@group(0) @binding(1) var<storage, read> q: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> k: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> o: array<st>;

// The head dimension (the host sets it to D: every loop has a known trip count and unrolls, and
// the O tiles stay in registers).
override HD: u32 = 128u;
// Chunks of 64 columns (the last one may be partial: D = 72 has one of 8).
override NCH: u32 = (HD + 63u) / 64u;
// 1: the next chunk's Q and K words (the next block's first chunk after the last) are loaded into
// registers before this chunk's products, so their latency hides behind the arithmetic (up to 12
// vec4 registers); 0: loaded after the barrier that frees the tiles. The host sets 1 up to
// D = 128 and 0 above, where the O tile's 128 registers leave no room (measured on the H100).
override PREFETCH: u32 = 1u;
// The lazy-rescale threshold (tiled_mask.wgsl's lazy_max, base 2): O is rescaled only in a block
// where some row's maximum grew by more than TAU; 0 (the host's default, src/kernels/tiled.rs
// LAZY_TAU): whenever it grew.
override TAU: f32 = 0.0;
const BR: u32 = 64u;
const BC: u32 = 32u;
// vec4<u32> words of a chunk each thread stages, at most (f32: 16 words a row of the chunk).
const QW: u32 = 8u;  // 64 rows x 16 / 128 threads
const KW: u32 = 4u;  // 32 keys x 16 / 128 threads
const CW: u32 = 64u;
const LOG2E: f32 = 1.4426950408889634;

// One array, three regions that change roles within a key block:
//   QS (1024 vec4): Q's chunk [d][row / 4] (64 x 16) during S = Q·Kᵀ, then V's chunks 1 and 2
//                   [key][d / 4] (32 x 16 each, at QS and QS + 512) during P·V;
//   KS (512):       K's chunk [d][key / 4] (64 x 8) during S, then P [key][row / 4] (32 x 16);
//   VS (512):       V's chunk 0 (staged with Q's and K's first), then chunk 3.
var<workgroup> sm: array<vec4<f32>, 2048>;
const QS: u32 = 0u;
const KS: u32 = 1024u;
const VS: u32 = 1536u;

@compute @workgroup_size(128, 1, 1)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    let n = params.seq;
    let nk = params.kv_seq;  // keys (M)
    let head = params.head_offset + wg.y;
    let kvh = kv_head(head);
    let i0 = wg.x * BR;
    let causal = params.causal != 0u;
    let ninf = neg_inf();
    let ty = t / 8u;
    let tx = t % 8u;
    let qscale = params.scale * LOG2E;

    var m = vec4<f32>(ninf);  // running max of each row (base 2)
    var l = vec4<f32>(0.0);   // this thread's share of each row's running sum
    // The O tile, one named tile per chunk (not an array indexed by the chunk: a loop that holds
    // barriers may not unroll, and a dynamically indexed array leaves registers for local memory,
    // which cost 2-3x on the H100, results/EXPERIMENTS.md). Tiles past NCH are dead code.
    var o0 = zero_tile();
    var o1 = zero_tile();
    var o2 = zero_tile();
    var o3 = zero_tile();

    // Keys this block's rows may see: all M, or up to the causal diagonal of its last row.
    let kv_end = causal_keys(i0 + BR);
    // This thread's words of the Q and K chunk being staged (see fetch_qk).
    var qr: array<vec4<u32>, QW>;
    var kr: array<vec4<u32>, KW>;
    if (PREFETCH != 0u) {
        fetch_qk(head, kvh, n, nk, i0, 0u, 0u, t, &qr, &kr);
    }
    for (var j0 = 0u; j0 < kv_end; j0 += BC) {
        // S = Q·Kᵀ: s<r> = scores of row 4ty + r with keys 4tx .. +3, summed over the chunks.
        var s0 = vec4<f32>(0.0);
        var s1 = vec4<f32>(0.0);
        var s2 = vec4<f32>(0.0);
        var s3 = vec4<f32>(0.0);
        for (var c = 0u; c < NCH; c++) {
            // The previous chunk (or block) must be consumed before its tiles are overwritten.
            workgroupBarrier();
            if (PREFETCH == 0u) {
                fetch_qk(head, kvh, n, nk, i0, j0, c, t, &qr, &kr);
            }
            stage_qk(c, t, qscale, &qr, &kr);
            if (c == 0u) {
                stage_v(kvh, nk, j0, 0u, t, VS);
            }
            workgroupBarrier();
            if (PREFETCH != 0u) {
                if (c + 1u < NCH) {
                    fetch_qk(head, kvh, n, nk, i0, j0, c + 1u, t, &qr, &kr);
                } else if (j0 + BC < kv_end) {
                    fetch_qk(head, kvh, n, nk, i0, j0 + BC, 0u, t, &qr, &kr);
                }
            }
            let dn = min(CW, HD - CW * c);
            for (var dd = 0u; dd < dn; dd++) {
                let a = sm[QS + dd * 16u + ty];
                let b = sm[KS + dd * 8u + tx];
                s0 += a.x * b;
                s1 += a.y * b;
                s2 += a.z * b;
                s3 += a.w * b;
            }
        }
        // Only blocks that cross the diagonal or M, or all of them with a mask bias, are masked.
        if (HAS_MASK || j0 + BC > nk || (causal && i32(j0 + BC) > i32(i0 + 1u) + params.causal_off)) {
            let i = i0 + 4u * ty;
            let jk = j0 + 4u * tx;
            s0 = masked(s0, head, i, jk, 1u, nk, causal, ninf);
            s1 = masked(s1, head, i + 1u, jk, 1u, nk, causal, ninf);
            s2 = masked(s2, head, i + 2u, jk, 1u, nk, causal, ninf);
            s3 = masked(s3, head, i + 3u, jk, 1u, nk, causal, ninf);
        }

        // Row maxima over this thread's keys, then over the row group's 8 lanes.
        var mb = vec4<f32>(max4(s0), max4(s1), max4(s2), max4(s3));
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
        s0 = select(vec4<f32>(0.0), exp2(s0 - m.x), live.x);
        s1 = select(vec4<f32>(0.0), exp2(s1 - m.y), live.y);
        s2 = select(vec4<f32>(0.0), exp2(s2 - m.z), live.z);
        s3 = select(vec4<f32>(0.0), exp2(s3 - m.w), live.w);
        let one = vec4<f32>(1.0);
        l = l * alpha + vec4<f32>(dot(s0, one), dot(s1, one), dot(s2, one), dot(s3, one));
        if (moved) {
            o0 = rescale(o0, alpha);
            if (NCH > 1u) { o1 = rescale(o1, alpha); }
            if (NCH > 2u) { o2 = rescale(o2, alpha); }
            if (NCH > 3u) { o3 = rescale(o3, alpha); }
        }
        // Dropout (philox.wgsl; dead code without it) after the row sums, as SDPA drops the
        // normalized probabilities: one call for this thread's 4 rows at each of its keys.
        if (DROPOUT) {
            for (var e = 0u; e < 4u; e++) {
                let f = drop4(head, i0 / 4u + ty, j0 + 4u * tx + e);
                s0[e] *= f.x;
                s1[e] *= f.y;
                s2[e] *= f.z;
                s3[e] *= f.w;
            }
        }

        // P to workgroup memory once (into K's dead chunk), with V's chunks 1 and 2 (into Q's):
        // per key and chunk a thread then reads its 4 rows' P as one vec4 (the row group's 8
        // lanes read the same word: a broadcast) instead of 4 shuffles.
        workgroupBarrier();
        for (var e = 0u; e < 4u; e++) {
            sm[KS + (4u * tx + e) * 16u + ty] = vec4<f32>(s0[e], s1[e], s2[e], s3[e]);
        }
        if (NCH > 1u) { stage_v(kvh, nk, j0, 1u, t, QS); }
        if (NCH > 2u) { stage_v(kvh, nk, j0, 2u, t, QS + 512u); }
        workgroupBarrier();
        o0 = pv(o0, VS, ty, tx);
        if (NCH > 1u) { o1 = pv(o1, QS, ty, tx); }
        if (NCH > 2u) { o2 = pv(o2, QS + 512u, ty, tx); }
        if (NCH > 3u) {
            workgroupBarrier();
            stage_v(kvh, nk, j0, 3u, t, VS);
            workgroupBarrier();
            o3 = pv(o3, VS, ty, tx);
        }
    }

    // Combine the row group's partial sums; a row with no allowed key returns 0 (SDPA's way).
    var ls = l + subgroupShuffleXor(l, 1u);
    ls = ls + subgroupShuffleXor(ls, 2u);
    ls = ls + subgroupShuffleXor(ls, 4u);
    let inv = select(vec4<f32>(0.0), vec4<f32>(1.0) / ls, ls > vec4<f32>(0.0));
    let base = head * n * HD;
    let r0 = i0 + 4u * ty;
    store_tile(o0, 0u, inv, base, r0, n, tx);
    if (NCH > 1u) { store_tile(o1, 1u, inv, base, r0, n, tx); }
    if (NCH > 2u) { store_tile(o2, 2u, inv, base, r0, n, tx); }
    if (NCH > 3u) { store_tile(o3, 3u, inv, base, r0, n, tx); }
    // The training forward keeps each row's logsumexp for the backward (tiled_lse.wgsl; a no-op
    // from tiled_nolse.wgsl in inference). m and ls are the same on the row group's 8 lanes.
    if (tx == 0u) {
        save_lse(head, r0, m.x, ls.x);
        save_lse(head, r0 + 1u, m.y, ls.y);
        save_lse(head, r0 + 2u, m.z, ls.z);
        save_lse(head, r0 + 3u, m.w, ls.w);
    }
}

// Words of a row in device memory, and of a chunk.
fn words_per_row() -> u32 {
    return HD / EPW;
}

// Words of chunk c in a row (the last chunk may be partial).
fn chunk_words(c: u32) -> u32 {
    return min(CW / EPW, words_per_row() - c * (CW / EPW));
}

// This thread's words of chunk c: of Q rows i0 .. i0 + 63 (word w = t + 128x of the chunk is row
// w % 64, word w / 64 of the chunk: consecutive threads, consecutive rows, so the transposed
// stores of stage_qk hit consecutive banks) and of K rows j0 .. j0 + 31 of head `kvh` (row
// w % 32); zero past N and M.
fn fetch_qk(head: u32, kvh: u32, n: u32, nk: u32, i0: u32, j0: u32, c: u32, t: u32,
            qr: ptr<function, array<vec4<u32>, QW>>, kr: ptr<function, array<vec4<u32>, KW>>) {
    let wpr = words_per_row();
    let cw = chunk_words(c);
    for (var x = 0u; x < QW; x++) {
        let w = t + 128u * x;
        var y = vec4<u32>(0u);
        if (w < BR * cw && i0 + w % BR < n) {
            y = q[(head * n + i0 + w % BR) * wpr + c * (CW / EPW) + w / BR];
        }
        (*qr)[x] = y;
    }
    for (var x = 0u; x < KW; x++) {
        let w = t + 128u * x;
        var y = vec4<u32>(0u);
        if (w < BC * cw && j0 + w % BC < nk) {
            y = k[(kvh * nk + j0 + w % BC) * wpr + c * (CW / EPW) + w / BC];
        }
        (*kr)[x] = y;
    }
}

// The words fetched by fetch_qk into the tiles: Q transposed and pre-scaled (sm[QS + d * 16 +
// row / 4]), K transposed (sm[KS + d * 8 + key / 4]).
fn stage_qk(c: u32, t: u32, qscale: f32,
            qr: ptr<function, array<vec4<u32>, QW>>, kr: ptr<function, array<vec4<u32>, KW>>) {
    let cw = chunk_words(c);
    for (var x = 0u; x < QW; x++) {
        let w = t + 128u * x;
        if (w < BR * cw) {
            let r = w % BR;
            let d0 = (w / BR) * EPW;
            let y = (*qr)[x];
            let lo = word4(y, 0u) * qscale;
            let hi = word4(y, 1u) * qscale;
            for (var e = 0u; e < 4u; e++) {
                sm[QS + (d0 + e) * 16u + r / 4u][r % 4u] = lo[e];
            }
            if (EPW == 8u) {
                for (var e = 0u; e < 4u; e++) {
                    sm[QS + (d0 + 4u + e) * 16u + r / 4u][r % 4u] = hi[e];
                }
            }
        }
    }
    for (var x = 0u; x < KW; x++) {
        let w = t + 128u * x;
        if (w < BC * cw) {
            let kk = w % BC;
            let d0 = (w / BC) * EPW;
            let y = (*kr)[x];
            let lo = word4(y, 0u);
            let hi = word4(y, 1u);
            for (var e = 0u; e < 4u; e++) {
                sm[KS + (d0 + e) * 8u + kk / 4u][kk % 4u] = lo[e];
            }
            if (EPW == 8u) {
                for (var e = 0u; e < 4u; e++) {
                    sm[KS + (d0 + 4u + e) * 8u + kk / 4u][kk % 4u] = hi[e];
                }
            }
        }
    }
}

// Chunk c of V rows j0 .. j0 + 31 into sm[at + key * 16 + d / 4] as they are (consecutive
// threads, consecutive words of a row; zero past the M keys).
fn stage_v(kvh: u32, nk: u32, j0: u32, c: u32, t: u32, at: u32) {
    let wpr = words_per_row();
    let cw = chunk_words(c);
    for (var w = t; w < BC * cw; w += 128u) {
        let kv = w / cw;
        let dw = w % cw;
        var y = vec4<u32>(0u);
        if (j0 + kv < nk) {
            y = v[(kvh * nk + j0 + kv) * wpr + c * (CW / EPW) + dw];
        }
        let s = at + kv * 16u + dw * (EPW / 4u);
        sm[s] = word4(y, 0u);
        if (EPW == 8u) {
            sm[s + 1u] = word4(y, 1u);
        }
    }
}

// This thread's O tile of one chunk: rows 4ty + r (r = 0..3), columns 4tx .. +3 (a) and
// 32 + 4tx .. +3 (b) of the chunk.
struct Tile {
    a0: vec4<f32>, b0: vec4<f32>,
    a1: vec4<f32>, b1: vec4<f32>,
    a2: vec4<f32>, b2: vec4<f32>,
    a3: vec4<f32>, b3: vec4<f32>,
}

fn zero_tile() -> Tile {
    let z = vec4<f32>(0.0);
    return Tile(z, z, z, z, z, z, z, z);
}

fn rescale(o: Tile, alpha: vec4<f32>) -> Tile {
    return Tile(o.a0 * alpha.x, o.b0 * alpha.x, o.a1 * alpha.y, o.b1 * alpha.y,
                o.a2 * alpha.z, o.b2 * alpha.z, o.a3 * alpha.w, o.b3 * alpha.w);
}

// o += P·V over the V chunk staged at sm[at ..], with P (this thread's 4 rows at each key) from
// the block's P in KS.
fn pv(o_in: Tile, at: u32, ty: u32, tx: u32) -> Tile {
    var o = o_in;
    for (var j = 0u; j < BC; j++) {
        let pr = sm[KS + j * 16u + ty];
        let v0 = sm[at + j * 16u + tx];
        let v1 = sm[at + j * 16u + 8u + tx];
        o.a0 += pr.x * v0; o.b0 += pr.x * v1;
        o.a1 += pr.y * v0; o.b1 += pr.y * v1;
        o.a2 += pr.z * v0; o.b2 += pr.z * v1;
        o.a3 += pr.w * v0; o.b3 += pr.w * v1;
    }
    return o;
}

// Chunk c of this thread's 4 output rows, normalized by 1 / l (skipping rows past N).
fn store_tile(o: Tile, c: u32, inv: vec4<f32>, base: u32, r0: u32, n: u32, tx: u32) {
    let a = CW * c + 4u * tx;
    if (r0 < n) {
        store_vec(base + r0 * HD, a, HD, o.a0 * inv.x);
        store_vec(base + r0 * HD, a + 32u, HD, o.b0 * inv.x);
    }
    if (r0 + 1u < n) {
        store_vec(base + (r0 + 1u) * HD, a, HD, o.a1 * inv.y);
        store_vec(base + (r0 + 1u) * HD, a + 32u, HD, o.b1 * inv.y);
    }
    if (r0 + 2u < n) {
        store_vec(base + (r0 + 2u) * HD, a, HD, o.a2 * inv.z);
        store_vec(base + (r0 + 2u) * HD, a + 32u, HD, o.b2 * inv.z);
    }
    if (r0 + 3u < n) {
        store_vec(base + (r0 + 3u) * HD, a, HD, o.a3 * inv.w);
        store_vec(base + (r0 + 3u) * HD, a + 32u, HD, o.b3 * inv.w);
    }
}
