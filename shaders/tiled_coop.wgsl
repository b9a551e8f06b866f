// tiled_coop.wgsl — fused attention on cooperative matrices (tensor cores where the hardware has
// them): the `tiled-coop` variant for D > 64 (tiled_coop_rt2.wgsl, two row tiles a subgroup,
// takes D <= 64). f16 Q, K, V and O in device memory; every product accumulates in f32; the
// softmax statistics are f32. Helpers shared with tiled_coop_rt2.wgsl: tiled_coop_lib.wgsl.
enable wgpu_cooperative_matrix;
// The rare rescale below runs cooperative-matrix operations under a subgroup-uniform branch
// (`subgroupAny`); naga's uniformity analysis only knows workgroup uniformity and would refuse it.
diagnostic(off, derivative_uniformity);
//
// A workgroup of 128 threads (four 32-wide subgroups) owns BR = 64 query rows; subgroup g owns
// rows 16g .. 16g+15. Per key block of BC = 16 keys:
//   1. all threads stage K and V of the block in workgroup memory (16-byte loads, rows padded to
//      D + 8 halves so that the matrix loads are free of bank conflicts); with PREFETCH the next
//      block's loads are issued before this block is computed and land in registers meanwhile;
//   2. subgroup g computes its 16 x 16 tile of S = Q Kᵀ in D/16 steps (Q is held in registers as
//      D/16 A matrices) and stores it column-major to `sf` ([key][row]); lane (row = lane % 16,
//      half = lane / 16) reads the scores of its row at keys 2c + half: 8 scores a block, no bank
//      conflicts;
//   3. lazy rescaling (FlashAttention-4's trick): the row keeps a reference maximum m and
//      P = exp2(S - m) is used as it is while the block's maximum exceeds m by at most TAU (in base
//      2: P <= 2^TAU, well inside f16's range). Only when some row of the subgroup needs a larger m
//      (rarely, after its first allowed keys) are the P V accumulators rescaled, in place through
//      `sf`, two tiles at a time (a matrix cannot be scaled row by row). They stay in the matrix
//      registers from block to block and reach `sf` once more at the end, to be divided by the
//      row sums and written out;
//   4. writes P as f16 to `sp` ([key][row]) and, with LO > 0, its rounding error lo = P - hi to
//      `sl`: P in one f16 keeps 11 bits, an error the f16 tolerance (inputs exact in f16,
//      everything else f32) does not allow; hi + lo keeps ~22;
//   5. accumulates P V as hi V + lo V into the same accumulators.
// D/16 (`D16`, 1 .. 16: D up to 256) is a pipeline constant. The D/16 Q matrices and P V
// accumulators are named private variables (qa0.., acc0..) with every use behind a test of D16
// that the constant folds, so that they stay in registers: arrays of matrices indexed in loops
// were 44 % slower on the H200 (results/EXPERIMENTS.md, v26-coop-wide).
// Cooperative loads: `coopLoadT` reads row-major, `coopLoad` column-major; Kᵀ is K read
// column-major. The host checks D % 16 == 0, D <= 256 and 32-wide subgroups, and pads Q by 128 rows
// (Q is read straight from device memory; rows past N are never written back).
// Workgroup storage: K and V 2 x 16 x (D + 8) f16, P hi and lo 2 x 4 x 16 x 16 f16, sf
// 4 x 32 x 16 f32 (8 KiB): 20992 bytes at D = 128, 29184 at D = 256.

@group(0) @binding(1) var<storage, read> q: array<st>;
@group(0) @binding(2) var<storage, read> k: array<vec4<u32>>;  // 8 halves per element
@group(0) @binding(3) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> o: array<st>;

const BR: u32 = 64u;   // rows per workgroup: 16 per subgroup
const LOG2E: f32 = 1.4426950408889634;
// D / 16: the 16-column tiles of a row of Q, K, V and O (1 .. 16, D up to 256), set by the host.
override D16: u32 = 4u;
// Keys per block: one 16 x 16 tile of scores per subgroup. (Blocks of 32 and 64 keys were slower
// on the H200 at D = 64 and 128: src/kernels/tiled_coop.rs has the figures.)
const BC: u32 = 16u;
// How P enters P V: 0: P in one f16, as FlashAttention does (11 bits: within PyTorch's rule, the
// host's default; fails `--tolerance strict`); 2: P = hi + lo f16 parts (lo an f16 subnormal for small P), both products into the same
// accumulators. (1, lo scaled by 2^12 into a second set of accumulators, was measured slower on the
// H200 and removed: results/EXPERIMENTS.md, v6.)
override LO: u32 = 2u;
// Rescale only when a row's block maximum exceeds its reference maximum by more than TAU (base 2);
// 0: whenever it grows (FlashAttention-2's rule).
override TAU: f32 = 8.0;
// 1: the next block's K and V are loaded into registers while this block is computed.
override PREFETCH: u32 = 1u;
override KP: u32 = D16 * 16u + 8u;  // row pitch (halves) of the staged K and V

var<workgroup> ks: array<f16, BC * KP>;  // [BC keys][KP]
var<workgroup> vs: array<f16, BC * KP>;  // [BC keys][KP]
var<workgroup> sp: array<f16, 1024>;  // per subgroup [16 keys][16 rows]: P rounded to f16
var<workgroup> sl: array<f16, 1024>;  // per subgroup [16 keys][16 rows]: the low part (LO)
var<workgroup> sf: array<f32, 2048>;  // per subgroup [32][16]: a tile of S, or 2 tiles of O

// This subgroup's 16 rows of Q (qa<c>: columns 16c .. 16c+15) and its P V accumulators (acc<c>).
var<private> qa0: coop_mat16x16<f16, A>;
var<private> qa1: coop_mat16x16<f16, A>;
var<private> qa2: coop_mat16x16<f16, A>;
var<private> qa3: coop_mat16x16<f16, A>;
var<private> qa4: coop_mat16x16<f16, A>;
var<private> qa5: coop_mat16x16<f16, A>;
var<private> qa6: coop_mat16x16<f16, A>;
var<private> qa7: coop_mat16x16<f16, A>;
var<private> qa8: coop_mat16x16<f16, A>;
var<private> qa9: coop_mat16x16<f16, A>;
var<private> qa10: coop_mat16x16<f16, A>;
var<private> qa11: coop_mat16x16<f16, A>;
var<private> qa12: coop_mat16x16<f16, A>;
var<private> qa13: coop_mat16x16<f16, A>;
var<private> qa14: coop_mat16x16<f16, A>;
var<private> qa15: coop_mat16x16<f16, A>;
var<private> acc0: coop_mat16x16<f32, C>;
var<private> acc1: coop_mat16x16<f32, C>;
var<private> acc2: coop_mat16x16<f32, C>;
var<private> acc3: coop_mat16x16<f32, C>;
var<private> acc4: coop_mat16x16<f32, C>;
var<private> acc5: coop_mat16x16<f32, C>;
var<private> acc6: coop_mat16x16<f32, C>;
var<private> acc7: coop_mat16x16<f32, C>;
var<private> acc8: coop_mat16x16<f32, C>;
var<private> acc9: coop_mat16x16<f32, C>;
var<private> acc10: coop_mat16x16<f32, C>;
var<private> acc11: coop_mat16x16<f32, C>;
var<private> acc12: coop_mat16x16<f32, C>;
var<private> acc13: coop_mat16x16<f32, C>;
var<private> acc14: coop_mat16x16<f32, C>;
var<private> acc15: coop_mat16x16<f32, C>;

@compute @workgroup_size(128, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>,
        @builtin(local_invocation_index) t: u32, @builtin(subgroup_id) sg: u32,
        @builtin(subgroup_invocation_id) lane: u32) {
    let n = params.seq;
    let nk = params.kv_seq;  // keys (M)
    let d = D16 * 16u;
    let head = params.head_offset + wg.y;
    let base = head * n * d;
    // Query blocks in grid order. (Heaviest first, the causal tail's usual trick, was 1 % slower at
    // N=1024 and 5 % at N=4096 on the H200: results/EXPERIMENTS.md, v11-order-kp.)
    let i0 = wg.x * BR;
    let r0 = i0 + sg * 16u;  // first row of this subgroup
    let row = lane % 16u;
    let half = lane / 16u;
    let i = r0 + row;
    let d8 = d / 8u;         // 16-byte elements of k and v per row
    let words = BC * d8;     // of them per block
    let iters = (words + 127u) / 128u;  // per thread per block: D / 64 rounded up (at most 4)
    let causal = params.causal != 0u;
    let ninf = neg_inf();
    let qscale = params.scale * LOG2E;
    let fb = sg * 512u;      // this subgroup's part of sf
    let pb = sg * 256u;      // ... of sp and sl

    for (var e = lane; e < 256u; e += 32u) {
        sf[fb + e] = 0.0;
    }
    subgroupBarrier();
    let zero = coopLoadT<coop_mat16x16<f32, C>>(&sf[fb], 16u);

    // Q of this subgroup's 16 rows, D/16 A matrices (row-major, from device memory).
    let qrow = base + r0 * d;
    qa0 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 0u], d); acc0 = zero;
    if (D16 > 1u) { qa1 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 16u], d); acc1 = zero; }
    if (D16 > 2u) { qa2 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 32u], d); acc2 = zero; }
    if (D16 > 3u) { qa3 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 48u], d); acc3 = zero; }
    if (D16 > 4u) { qa4 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 64u], d); acc4 = zero; }
    if (D16 > 5u) { qa5 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 80u], d); acc5 = zero; }
    if (D16 > 6u) { qa6 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 96u], d); acc6 = zero; }
    if (D16 > 7u) { qa7 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 112u], d); acc7 = zero; }
    if (D16 > 8u) { qa8 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 128u], d); acc8 = zero; }
    if (D16 > 9u) { qa9 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 144u], d); acc9 = zero; }
    if (D16 > 10u) { qa10 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 160u], d); acc10 = zero; }
    if (D16 > 11u) { qa11 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 176u], d); acc11 = zero; }
    if (D16 > 12u) { qa12 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 192u], d); acc12 = zero; }
    if (D16 > 13u) { qa13 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 208u], d); acc13 = zero; }
    if (D16 > 14u) { qa14 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 224u], d); acc14 = zero; }
    if (D16 > 15u) { qa15 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 240u], d); acc15 = zero; }
    var m = ninf;  // the row's reference maximum (base 2)
    var l = 0.0;   // this lane's share of the row's sum of P, relative to m

    // Keys this block's rows may see: all M, or up to the causal diagonal of its last row.
    let kv_end = causal_keys(i0 + BR);
    let kvb = kv_head(head) * nk * d8;  // first element of this head's K/V head in k and v
    var pk0 = vec4<u32>(0u); var pk1 = vec4<u32>(0u); var pk2 = vec4<u32>(0u); var pk3 = vec4<u32>(0u);
    var pv0 = vec4<u32>(0u); var pv1 = vec4<u32>(0u); var pv2 = vec4<u32>(0u); var pv3 = vec4<u32>(0u);
    if (PREFETCH != 0u) {
        pk0 = ld_k(kvb, 0u, t, nk, d8, words); pv0 = ld_v(kvb, 0u, t, nk, d8, words);
        if (iters > 1u) { pk1 = ld_k(kvb, 0u, t + 128u, nk, d8, words); pv1 = ld_v(kvb, 0u, t + 128u, nk, d8, words); }
        if (iters > 2u) { pk2 = ld_k(kvb, 0u, t + 256u, nk, d8, words); pv2 = ld_v(kvb, 0u, t + 256u, nk, d8, words); }
        if (iters > 3u) { pk3 = ld_k(kvb, 0u, t + 384u, nk, d8, words); pv3 = ld_v(kvb, 0u, t + 384u, nk, d8, words); }
    }
    for (var j0 = 0u; j0 < kv_end; j0 += BC) {
        // 1. Stage K and V (the previous block must be consumed first).
        workgroupBarrier();
        if (PREFETCH == 0u) {
            pk0 = ld_k(kvb, j0, t, nk, d8, words); pv0 = ld_v(kvb, j0, t, nk, d8, words);
            if (iters > 1u) { pk1 = ld_k(kvb, j0, t + 128u, nk, d8, words); pv1 = ld_v(kvb, j0, t + 128u, nk, d8, words); }
            if (iters > 2u) { pk2 = ld_k(kvb, j0, t + 256u, nk, d8, words); pv2 = ld_v(kvb, j0, t + 256u, nk, d8, words); }
            if (iters > 3u) { pk3 = ld_k(kvb, j0, t + 384u, nk, d8, words); pv3 = ld_v(kvb, j0, t + 384u, nk, d8, words); }
        }
        stage(t, d8, words, pk0, pv0);
        if (iters > 1u) { stage(t + 128u, d8, words, pk1, pv1); }
        if (iters > 2u) { stage(t + 256u, d8, words, pk2, pv2); }
        if (iters > 3u) { stage(t + 384u, d8, words, pk3, pv3); }
        workgroupBarrier();
        let jn = j0 + BC;
        if (PREFETCH != 0u && jn < kv_end) {
            pk0 = ld_k(kvb, jn, t, nk, d8, words); pv0 = ld_v(kvb, jn, t, nk, d8, words);
            if (iters > 1u) { pk1 = ld_k(kvb, jn, t + 128u, nk, d8, words); pv1 = ld_v(kvb, jn, t + 128u, nk, d8, words); }
            if (iters > 2u) { pk2 = ld_k(kvb, jn, t + 256u, nk, d8, words); pv2 = ld_v(kvb, jn, t + 256u, nk, d8, words); }
            if (iters > 3u) { pk3 = ld_k(kvb, jn, t + 384u, nk, d8, words); pv3 = ld_v(kvb, jn, t + 384u, nk, d8, words); }
        }
        if (causal && i32(j0) > i32(r0 + 15u) + params.causal_off) {
            continue;  // every key of the block is above this subgroup's rows
        }

        // 2. S = Q Kᵀ, one 16 x 16 tile, through sf; lane (row, half) reads keys
        //    j0 + c + half + 2e (c = 0, 8; e = 0..3) of its row into x0 (c = 0) and x1 (c = 8).
        s_tile(fb, zero);
        subgroupBarrier();
        let kb = j0 + half;
        let x0 = masked(ld_s(fb, half, row, 0u) * qscale, head, i, kb, 2u, nk, causal, ninf);
        let x1 = masked(ld_s(fb, half, row, 8u) * qscale, head, i, kb + 8u, 2u, nk, causal, ninf);
        var bm = max(max4(x0), max4(x1));
        bm = max(bm, subgroupShuffleXor(bm, 16u));

        // 3. Lazy rescale. Rows whose block maximum exceeds the reference by more than TAU move
        //    it: alpha = exp2(m_old - m_new) (0 before the row's first allowed key). The P V
        //    accumulators, relative to the old m, are rescaled in place through sf (a matrix cannot
        //    be scaled row by row), unless no row of the subgroup has accumulated anything yet.
        let need = bm > m + TAU;
        if (subgroupAny(need)) {
            let alpha = select(1.0, exp2(m - bm), need);
            if (subgroupAny(need && m > ninf)) {
                rescale_pair(0u, fb, half, row, alpha);
                if (D16 > 2u) { rescale_pair(1u, fb, half, row, alpha); }
                if (D16 > 4u) { rescale_pair(2u, fb, half, row, alpha); }
                if (D16 > 6u) { rescale_pair(3u, fb, half, row, alpha); }
                if (D16 > 8u) { rescale_pair(4u, fb, half, row, alpha); }
                if (D16 > 10u) { rescale_pair(5u, fb, half, row, alpha); }
                if (D16 > 12u) { rescale_pair(6u, fb, half, row, alpha); }
                if (D16 > 14u) { rescale_pair(7u, fb, half, row, alpha); }
            }
            m = select(m, bm, need);
            l *= alpha;
        }

        // 4. P = exp2(S - m) (0 while the row has seen no allowed key), hi and lo parts.
        let live = m > ninf;
        var p0 = select(vec4<f32>(0.0), exp2(x0 - m), live);
        var p1 = select(vec4<f32>(0.0), exp2(x1 - m), live);
        l += dot(p0 + p1, vec4<f32>(1.0));
        // Dropout (philox.wgsl; dead code without it) after the row sum. This lane's keys are
        // kb + 2e and kb + 8 + 2e; the 4 lanes of a row quad share the Philox calls (drop_quad).
        if (DROPOUT) {
            p0 *= drop_quad(head, i, kb, lane & 3u);
            p1 *= drop_quad(head, i, kb + 8u, lane & 3u);
        }
        st_p(pb, half, row, 0u, p0);
        st_p(pb, half, row, 8u, p1);
        subgroupBarrier();

        // 5. O += P V over the block's 16 keys.
        let ph = coopLoad<coop_mat16x16<f16, A>>(&sp[pb], 16u);
        let pl = coopLoad<coop_mat16x16<f16, A>>(&sl[pb], 16u);
        pv_step(ph, pl);
    }

    // O = accumulators / l, with the row's sum split over the two partner lanes; no allowed key
    // at all: 0 (SDPA's way). Through sf, two tiles (32 columns) at a time.
    let lsum = l + subgroupShuffleXor(l, 16u);
    let inv = select(0.0, 1.0 / lsum, lsum > 0.0);
    if (half == 0u) {
        save_lse(head, i, m, lsum);  // training: L = m + log2(sum) (tiled_lse.wgsl)
    }
    let ob = base + i * d;
    out_pair(0u, fb, ob, d, half, row, i < n, inv);
    if (D16 > 2u) { out_pair(1u, fb, ob, d, half, row, i < n, inv); }
    if (D16 > 4u) { out_pair(2u, fb, ob, d, half, row, i < n, inv); }
    if (D16 > 6u) { out_pair(3u, fb, ob, d, half, row, i < n, inv); }
    if (D16 > 8u) { out_pair(4u, fb, ob, d, half, row, i < n, inv); }
    if (D16 > 10u) { out_pair(5u, fb, ob, d, half, row, i < n, inv); }
    if (D16 > 12u) { out_pair(6u, fb, ob, d, half, row, i < n, inv); }
    if (D16 > 14u) { out_pair(7u, fb, ob, d, half, row, i < n, inv); }
}

// The block's 16 x 16 tile of scores for this subgroup, stored column-major to sf ([key][row]).
fn s_tile(fb: u32, zero: coop_mat16x16<f32, C>) {
    var s = coopMultiplyAdd(qa0, coopLoad<coop_mat16x16<f16, B>>(&ks[0], KP), zero);
    if (D16 > 1u) { s = coopMultiplyAdd(qa1, coopLoad<coop_mat16x16<f16, B>>(&ks[16u], KP), s); }
    if (D16 > 2u) { s = coopMultiplyAdd(qa2, coopLoad<coop_mat16x16<f16, B>>(&ks[32u], KP), s); }
    if (D16 > 3u) { s = coopMultiplyAdd(qa3, coopLoad<coop_mat16x16<f16, B>>(&ks[48u], KP), s); }
    if (D16 > 4u) { s = coopMultiplyAdd(qa4, coopLoad<coop_mat16x16<f16, B>>(&ks[64u], KP), s); }
    if (D16 > 5u) { s = coopMultiplyAdd(qa5, coopLoad<coop_mat16x16<f16, B>>(&ks[80u], KP), s); }
    if (D16 > 6u) { s = coopMultiplyAdd(qa6, coopLoad<coop_mat16x16<f16, B>>(&ks[96u], KP), s); }
    if (D16 > 7u) { s = coopMultiplyAdd(qa7, coopLoad<coop_mat16x16<f16, B>>(&ks[112u], KP), s); }
    if (D16 > 8u) { s = coopMultiplyAdd(qa8, coopLoad<coop_mat16x16<f16, B>>(&ks[128u], KP), s); }
    if (D16 > 9u) { s = coopMultiplyAdd(qa9, coopLoad<coop_mat16x16<f16, B>>(&ks[144u], KP), s); }
    if (D16 > 10u) { s = coopMultiplyAdd(qa10, coopLoad<coop_mat16x16<f16, B>>(&ks[160u], KP), s); }
    if (D16 > 11u) { s = coopMultiplyAdd(qa11, coopLoad<coop_mat16x16<f16, B>>(&ks[176u], KP), s); }
    if (D16 > 12u) { s = coopMultiplyAdd(qa12, coopLoad<coop_mat16x16<f16, B>>(&ks[192u], KP), s); }
    if (D16 > 13u) { s = coopMultiplyAdd(qa13, coopLoad<coop_mat16x16<f16, B>>(&ks[208u], KP), s); }
    if (D16 > 14u) { s = coopMultiplyAdd(qa14, coopLoad<coop_mat16x16<f16, B>>(&ks[224u], KP), s); }
    if (D16 > 15u) { s = coopMultiplyAdd(qa15, coopLoad<coop_mat16x16<f16, B>>(&ks[240u], KP), s); }
    coopStore(s, &sf[fb], 16u);
}

// acc<c> += P V for the block's 16 staged V rows (P as hi + lo with LO).
fn pv_step(ph: coop_mat16x16<f16, A>, pl: coop_mat16x16<f16, A>) {
    let vb0 = coopLoadT<coop_mat16x16<f16, B>>(&vs[0u], KP); acc0 = coopMultiplyAdd(ph, vb0, acc0); if (LO != 0u) { acc0 = coopMultiplyAdd(pl, vb0, acc0); }
    if (D16 > 1u) { let vb1 = coopLoadT<coop_mat16x16<f16, B>>(&vs[16u], KP); acc1 = coopMultiplyAdd(ph, vb1, acc1); if (LO != 0u) { acc1 = coopMultiplyAdd(pl, vb1, acc1); } }
    if (D16 > 2u) { let vb2 = coopLoadT<coop_mat16x16<f16, B>>(&vs[32u], KP); acc2 = coopMultiplyAdd(ph, vb2, acc2); if (LO != 0u) { acc2 = coopMultiplyAdd(pl, vb2, acc2); } }
    if (D16 > 3u) { let vb3 = coopLoadT<coop_mat16x16<f16, B>>(&vs[48u], KP); acc3 = coopMultiplyAdd(ph, vb3, acc3); if (LO != 0u) { acc3 = coopMultiplyAdd(pl, vb3, acc3); } }
    if (D16 > 4u) { let vb4 = coopLoadT<coop_mat16x16<f16, B>>(&vs[64u], KP); acc4 = coopMultiplyAdd(ph, vb4, acc4); if (LO != 0u) { acc4 = coopMultiplyAdd(pl, vb4, acc4); } }
    if (D16 > 5u) { let vb5 = coopLoadT<coop_mat16x16<f16, B>>(&vs[80u], KP); acc5 = coopMultiplyAdd(ph, vb5, acc5); if (LO != 0u) { acc5 = coopMultiplyAdd(pl, vb5, acc5); } }
    if (D16 > 6u) { let vb6 = coopLoadT<coop_mat16x16<f16, B>>(&vs[96u], KP); acc6 = coopMultiplyAdd(ph, vb6, acc6); if (LO != 0u) { acc6 = coopMultiplyAdd(pl, vb6, acc6); } }
    if (D16 > 7u) { let vb7 = coopLoadT<coop_mat16x16<f16, B>>(&vs[112u], KP); acc7 = coopMultiplyAdd(ph, vb7, acc7); if (LO != 0u) { acc7 = coopMultiplyAdd(pl, vb7, acc7); } }
    if (D16 > 8u) { let vb8 = coopLoadT<coop_mat16x16<f16, B>>(&vs[128u], KP); acc8 = coopMultiplyAdd(ph, vb8, acc8); if (LO != 0u) { acc8 = coopMultiplyAdd(pl, vb8, acc8); } }
    if (D16 > 9u) { let vb9 = coopLoadT<coop_mat16x16<f16, B>>(&vs[144u], KP); acc9 = coopMultiplyAdd(ph, vb9, acc9); if (LO != 0u) { acc9 = coopMultiplyAdd(pl, vb9, acc9); } }
    if (D16 > 10u) { let vb10 = coopLoadT<coop_mat16x16<f16, B>>(&vs[160u], KP); acc10 = coopMultiplyAdd(ph, vb10, acc10); if (LO != 0u) { acc10 = coopMultiplyAdd(pl, vb10, acc10); } }
    if (D16 > 11u) { let vb11 = coopLoadT<coop_mat16x16<f16, B>>(&vs[176u], KP); acc11 = coopMultiplyAdd(ph, vb11, acc11); if (LO != 0u) { acc11 = coopMultiplyAdd(pl, vb11, acc11); } }
    if (D16 > 12u) { let vb12 = coopLoadT<coop_mat16x16<f16, B>>(&vs[192u], KP); acc12 = coopMultiplyAdd(ph, vb12, acc12); if (LO != 0u) { acc12 = coopMultiplyAdd(pl, vb12, acc12); } }
    if (D16 > 13u) { let vb13 = coopLoadT<coop_mat16x16<f16, B>>(&vs[208u], KP); acc13 = coopMultiplyAdd(ph, vb13, acc13); if (LO != 0u) { acc13 = coopMultiplyAdd(pl, vb13, acc13); } }
    if (D16 > 14u) { let vb14 = coopLoadT<coop_mat16x16<f16, B>>(&vs[224u], KP); acc14 = coopMultiplyAdd(ph, vb14, acc14); if (LO != 0u) { acc14 = coopMultiplyAdd(pl, vb14, acc14); } }
    if (D16 > 15u) { let vb15 = coopLoadT<coop_mat16x16<f16, B>>(&vs[240u], KP); acc15 = coopMultiplyAdd(ph, vb15, acc15); if (LO != 0u) { acc15 = coopMultiplyAdd(pl, vb15, acc15); } }
}

// Accumulators 2p and 2p + 1 (the second only where D16 has it) to sf, and back.
fn store_pair(p: u32, fb: u32) {
    switch p {
        case 0u: { coopStore(acc0, &sf[fb], 16u); if (D16 > 1u) { coopStore(acc1, &sf[fb + 256u], 16u); } }
        case 1u: { coopStore(acc2, &sf[fb], 16u); if (D16 > 3u) { coopStore(acc3, &sf[fb + 256u], 16u); } }
        case 2u: { coopStore(acc4, &sf[fb], 16u); if (D16 > 5u) { coopStore(acc5, &sf[fb + 256u], 16u); } }
        case 3u: { coopStore(acc6, &sf[fb], 16u); if (D16 > 7u) { coopStore(acc7, &sf[fb + 256u], 16u); } }
        case 4u: { coopStore(acc8, &sf[fb], 16u); if (D16 > 9u) { coopStore(acc9, &sf[fb + 256u], 16u); } }
        case 5u: { coopStore(acc10, &sf[fb], 16u); if (D16 > 11u) { coopStore(acc11, &sf[fb + 256u], 16u); } }
        case 6u: { coopStore(acc12, &sf[fb], 16u); if (D16 > 13u) { coopStore(acc13, &sf[fb + 256u], 16u); } }
        default: { coopStore(acc14, &sf[fb], 16u); coopStore(acc15, &sf[fb + 256u], 16u); }
    }
}

fn load_pair(p: u32, fb: u32) {
    switch p {
        case 0u: { acc0 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb], 16u); if (D16 > 1u) { acc1 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb + 256u], 16u); } }
        case 1u: { acc2 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb], 16u); if (D16 > 3u) { acc3 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb + 256u], 16u); } }
        case 2u: { acc4 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb], 16u); if (D16 > 5u) { acc5 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb + 256u], 16u); } }
        case 3u: { acc6 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb], 16u); if (D16 > 7u) { acc7 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb + 256u], 16u); } }
        case 4u: { acc8 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb], 16u); if (D16 > 9u) { acc9 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb + 256u], 16u); } }
        case 5u: { acc10 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb], 16u); if (D16 > 11u) { acc11 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb + 256u], 16u); } }
        case 6u: { acc12 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb], 16u); if (D16 > 13u) { acc13 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb + 256u], 16u); } }
        default: { acc14 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb], 16u); acc15 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb + 256u], 16u); }
    }
}

// The lazy rescale of accumulators 2p, 2p + 1 by the row factor a, through sf.
fn rescale_pair(p: u32, fb: u32, half: u32, row: u32, a: f32) {
    subgroupBarrier();  // every lane has read sf (its scores, or the previous pair)
    store_pair(p, fb);
    subgroupBarrier();
    scale_s(fb, half, row, a);
    subgroupBarrier();
    load_pair(p, fb);
}

// Output columns 32p .. 32p + 31 of row i (accumulators 2p, 2p + 1) divided by the row sum.
fn out_pair(p: u32, fb: u32, ob: u32, d: u32, half: u32, row: u32, live: bool, inv: f32) {
    subgroupBarrier();
    store_pair(p, fb);
    subgroupBarrier();
    if (live) {
        st_o(ob, d, half, 32u * p, ld_s(fb, half, row, 0u) * inv);
        st_o(ob, d, half, 32u * p + 8u, ld_s(fb, half, row, 8u) * inv);
        st_o(ob, d, half, 32u * p + 16u, ld_s(fb, half, row, 16u) * inv);
        st_o(ob, d, half, 32u * p + 24u, ld_s(fb, half, row, 24u) * inv);
    }
}
