// tiled_coop_rt2.wgsl — the `tiled-coop` kernel for D <= 64: tiled_coop.wgsl with two row tiles
// per subgroup. f16 Q, K, V and O in device memory; every product accumulates in f32; the softmax
// statistics are f32.
enable wgpu_cooperative_matrix;
// The rare rescale runs cooperative-matrix operations under a subgroup-uniform branch
// (`subgroupAny`); naga's uniformity analysis only knows workgroup uniformity and would refuse it.
diagnostic(off, derivative_uniformity);
//
// A workgroup of 128 threads (four 32-wide subgroups) owns BR = 128 query rows; subgroup g owns
// rows 32g .. 32g+31 as two tiles of 16 (tile 1: rows 32g .., tile 2: rows 32g + 16 ..). Per
// key block of 16 keys the steps are tiled_coop.wgsl's (read its header), done for both tiles:
// every K and V matrix loaded from workgroup memory feeds two products instead of one, the two
// Q Kᵀ chains are independent (one hides the other's latency), and the staging and its two
// workgroup barriers are paid once per 32 rows instead of 16 (FlashAttention-2 gives each warp
// 32+ rows at D = 64 for the same reasons). On the H200 (B8 H16 causal f16, D = 64) this took
// N = 1024 from 323.8 to 269.3 µs and N = 4096 from 3667.5 to 2789.7
// (results/EXPERIMENTS.md, v29-coop-rt2). It holds 2 x D/16 Q matrices and P V accumulators,
// so only D <= 64 (D16 <= 4) is taken here; at D = 128 the same code was slower than one tile.
// Lane (row = lane % 16, half = lane / 16) keeps the statistics of row `row` of both tiles.
// Workgroup storage: K and V 2 x 16 x (D + 8) f16, P hi and lo 2 x 8 x 16 x 16 f16, sf 4 x 32 x
// 16 f32 (both tiles' scores, or two tiles of O): 20992 bytes at D = 64.

@group(0) @binding(1) var<storage, read> q: array<st>;
@group(0) @binding(2) var<storage, read> k: array<vec4<u32>>;  // 8 halves per element
@group(0) @binding(3) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> o: array<st>;

const BR: u32 = 128u;  // rows per workgroup: 32 per subgroup
const LOG2E: f32 = 1.4426950408889634;
// D / 16: 1 .. 4 (D up to 64), set by the host.
override D16: u32 = 4u;
const BC: u32 = 16u;   // keys per block
// As in tiled_coop.wgsl: how P enters P V (0: one f16, 2: hi + lo), the lazy-rescale threshold,
// the register prefetch of the next K/V block.
override LO: u32 = 2u;
override TAU: f32 = 8.0;
override PREFETCH: u32 = 1u;
override KP: u32 = D16 * 16u + 8u;  // row pitch (halves) of the staged K and V

var<workgroup> ks: array<f16, BC * KP>;  // [BC keys][KP]
var<workgroup> vs: array<f16, BC * KP>;  // [BC keys][KP]
var<workgroup> sp: array<f16, 2048>;  // [tile][subgroup][16 keys][16 rows]: P rounded to f16
var<workgroup> sl: array<f16, 2048>;  // [tile][subgroup][16 keys][16 rows]: the low part (LO)
var<workgroup> sf: array<f32, 2048>;  // per subgroup [32][16]: both tiles of S, or 2 tiles of O

// This subgroup's Q (qa<c>: tile 1, qb<c>: tile 2, columns 16c .. 16c+15) and P V accumulators.
var<private> qa0: coop_mat16x16<f16, A>;
var<private> qa1: coop_mat16x16<f16, A>;
var<private> qa2: coop_mat16x16<f16, A>;
var<private> qa3: coop_mat16x16<f16, A>;
var<private> qb0: coop_mat16x16<f16, A>;
var<private> qb1: coop_mat16x16<f16, A>;
var<private> qb2: coop_mat16x16<f16, A>;
var<private> qb3: coop_mat16x16<f16, A>;
var<private> acc0: coop_mat16x16<f32, C>;
var<private> acc1: coop_mat16x16<f32, C>;
var<private> acc2: coop_mat16x16<f32, C>;
var<private> acc3: coop_mat16x16<f32, C>;
var<private> accb0: coop_mat16x16<f32, C>;
var<private> accb1: coop_mat16x16<f32, C>;
var<private> accb2: coop_mat16x16<f32, C>;
var<private> accb3: coop_mat16x16<f32, C>;

@compute @workgroup_size(128, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>,
        @builtin(local_invocation_index) t: u32, @builtin(subgroup_id) sg: u32,
        @builtin(subgroup_invocation_id) lane: u32) {
    let n = params.seq;
    let nk = params.kv_seq;  // keys (M)
    let d = D16 * 16u;
    let head = params.head_offset + wg.y;
    let base = head * n * d;
    let i0 = wg.x * BR;
    let r0 = i0 + sg * 32u;  // first row of this subgroup
    let row = lane % 16u;
    let half = lane / 16u;
    let i = r0 + row;        // this lane's row of tile 1
    let i2 = i + 16u;        // ... and of tile 2
    let d8 = d / 8u;         // 16-byte elements of k and v per row
    let words = BC * d8;     // of them per block: at most 128, one per thread
    let causal = params.causal != 0u;
    let ninf = neg_inf();
    let qscale = params.scale * LOG2E;
    let fb = sg * 512u;      // this subgroup's part of sf
    let pb = sg * 256u;      // ... of sp and sl (tile 1; tile 2 at pb + 1024)

    for (var e = lane; e < 256u; e += 32u) {
        sf[fb + e] = 0.0;
    }
    subgroupBarrier();
    let zero = coopLoadT<coop_mat16x16<f32, C>>(&sf[fb], 16u);

    // Q of this subgroup's 32 rows (row-major, from device memory; the host pads Q by BR rows).
    let qrow = base + r0 * d;
    qa0 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 0u], d); qb0 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 16u * d + 0u], d); acc0 = zero; accb0 = zero;
    if (D16 > 1u) { qa1 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 16u], d); qb1 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 16u * d + 16u], d); acc1 = zero; accb1 = zero; }
    if (D16 > 2u) { qa2 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 32u], d); qb2 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 16u * d + 32u], d); acc2 = zero; accb2 = zero; }
    if (D16 > 3u) { qa3 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 48u], d); qb3 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 16u * d + 48u], d); acc3 = zero; accb3 = zero; }
    var m = ninf;   // the row's reference maximum (base 2), tile 1
    var l = 0.0;    // this lane's share of the row's sum of P, relative to m, tile 1
    var m2 = ninf;  // the same for tile 2
    var l2 = 0.0;

    let kv_end = causal_keys(i0 + BR);
    let kvb = kv_head(head) * nk * d8;
    var pk = vec4<u32>(0u);
    var pv = vec4<u32>(0u);
    if (PREFETCH != 0u) {
        pk = ld_k(kvb, 0u, t, nk, d8, words); pv = ld_v(kvb, 0u, t, nk, d8, words);
    }
    for (var j0 = 0u; j0 < kv_end; j0 += BC) {
        // 1. Stage K and V (the previous block must be consumed first).
        workgroupBarrier();
        if (PREFETCH == 0u) {
            pk = ld_k(kvb, j0, t, nk, d8, words); pv = ld_v(kvb, j0, t, nk, d8, words);
        }
        stage(t, d8, words, pk, pv);
        workgroupBarrier();
        let jn = j0 + BC;
        if (PREFETCH != 0u && jn < kv_end) {
            pk = ld_k(kvb, jn, t, nk, d8, words); pv = ld_v(kvb, jn, t, nk, d8, words);
        }
        if (causal && i32(j0) > i32(r0 + 31u) + params.causal_off) {
            continue;  // every key of the block is above this subgroup's rows
        }

        // 2. Both tiles of S = Q Kᵀ through sf (tile 1 at fb, tile 2 at fb + 256); lane (row,
        //    half) reads keys j0 + c + half + 2e of its row of each tile.
        s_tiles(fb, zero);
        subgroupBarrier();
        let kb = j0 + half;
        let x0 = masked(ld_s(fb, half, row, 0u) * qscale, head, i, kb, 2u, nk, causal, ninf);
        let x1 = masked(ld_s(fb, half, row, 8u) * qscale, head, i, kb + 8u, 2u, nk, causal, ninf);
        let y0 = masked(ld_s(fb + 256u, half, row, 0u) * qscale, head, i2, kb, 2u, nk, causal, ninf);
        let y1 = masked(ld_s(fb + 256u, half, row, 8u) * qscale, head, i2, kb + 8u, 2u, nk, causal, ninf);
        var bm = max(max4(x0), max4(x1));
        bm = max(bm, subgroupShuffleXor(bm, 16u));
        var bm2 = max(max4(y0), max4(y1));
        bm2 = max(bm2, subgroupShuffleXor(bm2, 16u));

        // 3. Lazy rescale, per tile (tiled_coop.wgsl step 3); sf is free again once every lane
        //    has read its scores (rescale_pair starts with a subgroup barrier).
        let need = bm > m + TAU;
        if (subgroupAny(need)) {
            let alpha = select(1.0, exp2(m - bm), need);
            if (subgroupAny(need && m > ninf)) {
                rescale_pair(0u, 0u, fb, half, row, alpha);
                if (D16 > 2u) { rescale_pair(0u, 1u, fb, half, row, alpha); }
            }
            m = select(m, bm, need);
            l *= alpha;
        }
        let need2 = bm2 > m2 + TAU;
        if (subgroupAny(need2)) {
            let alpha2 = select(1.0, exp2(m2 - bm2), need2);
            if (subgroupAny(need2 && m2 > ninf)) {
                rescale_pair(1u, 0u, fb, half, row, alpha2);
                if (D16 > 2u) { rescale_pair(1u, 1u, fb, half, row, alpha2); }
            }
            m2 = select(m2, bm2, need2);
            l2 *= alpha2;
        }

        // 4. P = exp2(S - m) per tile (0 while the row has seen no allowed key), then dropout.
        var p0 = select(vec4<f32>(0.0), exp2(x0 - m), m > ninf);
        var p1 = select(vec4<f32>(0.0), exp2(x1 - m), m > ninf);
        var q0 = select(vec4<f32>(0.0), exp2(y0 - m2), m2 > ninf);
        var q1 = select(vec4<f32>(0.0), exp2(y1 - m2), m2 > ninf);
        l += dot(p0 + p1, vec4<f32>(1.0));
        l2 += dot(q0 + q1, vec4<f32>(1.0));
        if (DROPOUT) {
            p0 *= drop_quad(head, i, kb, lane & 3u);
            p1 *= drop_quad(head, i, kb + 8u, lane & 3u);
            q0 *= drop_quad(head, i2, kb, lane & 3u);
            q1 *= drop_quad(head, i2, kb + 8u, lane & 3u);
        }
        st_p(pb, half, row, 0u, p0);
        st_p(pb, half, row, 8u, p1);
        st_p(pb + 1024u, half, row, 0u, q0);
        st_p(pb + 1024u, half, row, 8u, q1);
        subgroupBarrier();

        // 5. O += P V for both tiles over the block's 16 keys.
        pv_step(coopLoad<coop_mat16x16<f16, A>>(&sp[pb], 16u), coopLoad<coop_mat16x16<f16, A>>(&sl[pb], 16u),
                coopLoad<coop_mat16x16<f16, A>>(&sp[pb + 1024u], 16u), coopLoad<coop_mat16x16<f16, A>>(&sl[pb + 1024u], 16u));
    }

    // O = accumulators / l per tile (0 for a row with no allowed key), through sf.
    let lsum = l + subgroupShuffleXor(l, 16u);
    let inv = select(0.0, 1.0 / lsum, lsum > 0.0);
    let lsum2 = l2 + subgroupShuffleXor(l2, 16u);
    let inv2 = select(0.0, 1.0 / lsum2, lsum2 > 0.0);
    if (half == 0u) {
        save_lse(head, i, m, lsum);  // training: L = m + log2(sum) (tiled_lse.wgsl)
        save_lse(head, i2, m2, lsum2);
    }
    out_pair(0u, 0u, fb, base + i * d, d, half, row, i < n, inv);
    if (D16 > 2u) { out_pair(0u, 1u, fb, base + i * d, d, half, row, i < n, inv); }
    out_pair(1u, 0u, fb, base + i2 * d, d, half, row, i2 < n, inv2);
    if (D16 > 2u) { out_pair(1u, 1u, fb, base + i2 * d, d, half, row, i2 < n, inv2); }
}

// Both tiles' 16 x 16 scores for the block: each K matrix loaded once for the two products.
fn s_tiles(fb: u32, zero: coop_mat16x16<f32, C>) {
    let k0 = coopLoad<coop_mat16x16<f16, B>>(&ks[0], KP);
    var s = coopMultiplyAdd(qa0, k0, zero);
    var s2 = coopMultiplyAdd(qb0, k0, zero);
    if (D16 > 1u) { let k1 = coopLoad<coop_mat16x16<f16, B>>(&ks[16u], KP); s = coopMultiplyAdd(qa1, k1, s); s2 = coopMultiplyAdd(qb1, k1, s2); }
    if (D16 > 2u) { let k2 = coopLoad<coop_mat16x16<f16, B>>(&ks[32u], KP); s = coopMultiplyAdd(qa2, k2, s); s2 = coopMultiplyAdd(qb2, k2, s2); }
    if (D16 > 3u) { let k3 = coopLoad<coop_mat16x16<f16, B>>(&ks[48u], KP); s = coopMultiplyAdd(qa3, k3, s); s2 = coopMultiplyAdd(qb3, k3, s2); }
    coopStore(s, &sf[fb], 16u);
    coopStore(s2, &sf[fb + 256u], 16u);
}

// acc<c> += P V (tile 1) and accb<c> += P2 V (tile 2): each V matrix loaded once for both.
fn pv_step(ph: coop_mat16x16<f16, A>, pl: coop_mat16x16<f16, A>, qh: coop_mat16x16<f16, A>, ql: coop_mat16x16<f16, A>) {
    let vb0 = coopLoadT<coop_mat16x16<f16, B>>(&vs[0u], KP); acc0 = coopMultiplyAdd(ph, vb0, acc0); accb0 = coopMultiplyAdd(qh, vb0, accb0); if (LO != 0u) { acc0 = coopMultiplyAdd(pl, vb0, acc0); accb0 = coopMultiplyAdd(ql, vb0, accb0); }
    if (D16 > 1u) { let vb1 = coopLoadT<coop_mat16x16<f16, B>>(&vs[16u], KP); acc1 = coopMultiplyAdd(ph, vb1, acc1); accb1 = coopMultiplyAdd(qh, vb1, accb1); if (LO != 0u) { acc1 = coopMultiplyAdd(pl, vb1, acc1); accb1 = coopMultiplyAdd(ql, vb1, accb1); } }
    if (D16 > 2u) { let vb2 = coopLoadT<coop_mat16x16<f16, B>>(&vs[32u], KP); acc2 = coopMultiplyAdd(ph, vb2, acc2); accb2 = coopMultiplyAdd(qh, vb2, accb2); if (LO != 0u) { acc2 = coopMultiplyAdd(pl, vb2, acc2); accb2 = coopMultiplyAdd(ql, vb2, accb2); } }
    if (D16 > 3u) { let vb3 = coopLoadT<coop_mat16x16<f16, B>>(&vs[48u], KP); acc3 = coopMultiplyAdd(ph, vb3, acc3); accb3 = coopMultiplyAdd(qh, vb3, accb3); if (LO != 0u) { acc3 = coopMultiplyAdd(pl, vb3, acc3); accb3 = coopMultiplyAdd(ql, vb3, accb3); } }
}

// Accumulators 2p and 2p + 1 of tile `tile` (the second only where D16 has it) to sf, and back.
fn store_pair(tile: u32, p: u32, fb: u32) {
    switch tile * 2u + p {
        case 0u: { coopStore(acc0, &sf[fb], 16u); if (D16 > 1u) { coopStore(acc1, &sf[fb + 256u], 16u); } }
        case 1u: { coopStore(acc2, &sf[fb], 16u); if (D16 > 3u) { coopStore(acc3, &sf[fb + 256u], 16u); } }
        case 2u: { coopStore(accb0, &sf[fb], 16u); if (D16 > 1u) { coopStore(accb1, &sf[fb + 256u], 16u); } }
        default: { coopStore(accb2, &sf[fb], 16u); if (D16 > 3u) { coopStore(accb3, &sf[fb + 256u], 16u); } }
    }
}

fn load_pair(tile: u32, p: u32, fb: u32) {
    switch tile * 2u + p {
        case 0u: { acc0 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb], 16u); if (D16 > 1u) { acc1 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb + 256u], 16u); } }
        case 1u: { acc2 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb], 16u); if (D16 > 3u) { acc3 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb + 256u], 16u); } }
        case 2u: { accb0 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb], 16u); if (D16 > 1u) { accb1 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb + 256u], 16u); } }
        default: { accb2 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb], 16u); if (D16 > 3u) { accb3 = coopLoad<coop_mat16x16<f32, C>>(&sf[fb + 256u], 16u); } }
    }
}

// The lazy rescale of tile `tile`'s accumulators 2p, 2p + 1 by the row factor a, through sf.
fn rescale_pair(tile: u32, p: u32, fb: u32, half: u32, row: u32, a: f32) {
    subgroupBarrier();  // every lane has read sf (its scores, or the previous pair)
    store_pair(tile, p, fb);
    subgroupBarrier();
    scale_s(fb, half, row, a);
    subgroupBarrier();
    load_pair(tile, p, fb);
}

// Output columns 32p .. 32p + 31 of this lane's row of tile `tile` (row start ob) divided by the
// row sum.
fn out_pair(tile: u32, p: u32, fb: u32, ob: u32, d: u32, half: u32, row: u32, live: bool, inv: f32) {
    subgroupBarrier();
    store_pair(tile, p, fb);
    subgroupBarrier();
    if (live) {
        st_o(ob, d, half, 32u * p, ld_s(fb, half, row, 0u) * inv);
        st_o(ob, d, half, 32u * p + 8u, ld_s(fb, half, row, 8u) * inv);
        st_o(ob, d, half, 32u * p + 16u, ld_s(fb, half, row, 16u) * inv);
        st_o(ob, d, half, 32u * p + 24u, ld_s(fb, half, row, 24u) * inv);
    }
}
