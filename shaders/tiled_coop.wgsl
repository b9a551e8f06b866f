// tiled_coop.wgsl — fused attention on cooperative matrices (tensor cores where the hardware has
// them): the `tiled-coop` variant. f16 Q, K, V and O in device memory; every product accumulates in
// f32; the softmax statistics are f32.
enable wgpu_cooperative_matrix;
// The rare rescale below runs cooperative-matrix operations under a subgroup-uniform branch
// (`subgroupAny`); naga's uniformity analysis only knows workgroup uniformity and would refuse it.
diagnostic(off, derivative_uniformity);
//
// A workgroup of 128 threads (four 32-wide subgroups) owns BR = 64 query rows; subgroup g owns
// rows 16g .. 16g+15. Per key block of BC keys (64 for D <= 64, 32 for D <= 128, 16 for D <= 256:
// what fits K and V of the block in workgroup memory):
//   1. all threads stage K and V of the block in workgroup memory (16-byte loads, rows padded to
//      D + 8 halves so that the matrix loads are free of bank conflicts); with PREFETCH the next
//      block's loads are issued before this block is computed and land in registers meanwhile;
//   2. subgroup g computes S = Q Kᵀ for its 16 rows in chunks of 32 keys (16 when BC = 16): a
//      tile of 16 x 16 per 16 keys, D/16 steps each (Q is held in registers as D/16 A matrices),
//      stored column-major to `sf` ([key][row]); lane (row = lane % 16, half = lane / 16) reads
//      the scores of its row at keys 2c + half: BC/2 scores a block, no bank conflicts;
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
// D/16 (`D16`) and BC are pipeline constants: the loops over tiles and keys have known trip
// counts, unroll, and keep the arrays of matrices (Q, the accumulators) in registers.
// Cooperative loads: `coopLoadT` reads row-major, `coopLoad` column-major; Kᵀ is K read
// column-major. The host checks D % 16 == 0, D <= 256 and 32-wide subgroups, and pads Q by 64 rows
// (Q is read straight from device memory; rows past N are never written back).
// Workgroup storage: K and V 2 x BC x (D + 8) f16, P hi and lo 2 x 4 x BC x 16 f16, sf
// 4 x 32 x 16 f32 (8 KiB): 43008 bytes at D = 64 (BC = 64), 33792 at D = 128 (BC = 32), 29184 at
// D = 256 (BC = 16).

@group(0) @binding(1) var<storage, read> q: array<st>;
@group(0) @binding(2) var<storage, read> k: array<vec4<u32>>;  // 8 halves per element
@group(0) @binding(3) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> o: array<st>;

const BR: u32 = 64u;   // rows per workgroup: 16 per subgroup
const LOG2E: f32 = 1.4426950408889634;
// D / 16: the 16-column tiles of a row of Q, K, V and O (1 .. 16, D up to 256). The host sets it
// to D / 16, so every loop over the tiles has a known trip count and unrolls, and the arrays of
// matrices below stay in registers.
override D16: u32 = 4u;
// Keys per block: 64 for D <= 64, 32 for D <= 128, 16 for D <= 256 (what fits the staged K and
// V in workgroup memory; the host chooses, see src/kernels/tiled_coop.rs).
override BC: u32 = 64u;
// How P enters P V: 0: P in one f16, as FlashAttention does (11 bits: within PyTorch's rule, the
// host's default; fails `--tolerance strict`); 2: P = hi + lo f16 parts (lo an f16 subnormal for small P), both products into the same
// accumulators. (1, lo scaled by 2^12 into a second set of accumulators, was measured slower on the
// H200 and removed: results/h200/2026-12-02-v6.)
override LO: u32 = 2u;
// Rescale only when a row's block maximum exceeds its reference maximum by more than TAU (base 2);
// 0: whenever it grows (FlashAttention-2's rule).
override TAU: f32 = 8.0;
// 1: the next block's K and V are loaded into registers while this block is computed.
override PREFETCH: u32 = 1u;

override KP: u32 = D16 * 16u + 8u;  // row pitch (halves) of the staged K and V
override KCH: u32 = min(BC, 32u);  // keys per chunk of S that crosses sf at once (2 tiles, or 1)
override XPC: u32 = KCH / 8u;    // vec4 of scores per lane per chunk
const MAX_TILES: u32 = 16u;      // D16 at most
const MAX_X: u32 = 8u;           // BC / 8 at most
const MAX_LD: u32 = 4u;          // 16-byte words of K (and of V) per thread per block at most

var<workgroup> ks: array<f16, BC * KP>;  // [BC keys][KP]
var<workgroup> vs: array<f16, BC * KP>;  // [BC keys][KP]
var<workgroup> sp: array<f16, 64u * BC>; // per subgroup [BC keys][16 rows]: P rounded to f16
var<workgroup> sl: array<f16, 64u * BC>; // per subgroup [BC keys][16 rows]: the low part (LO)
var<workgroup> sf: array<f32, 2048>;     // per subgroup [32][16]: a chunk of S, or 2 tiles of O

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
    // N=1024 and 5 % at N=4096 on the H200: results/h200/2026-12-02-v11-order-kp.)
    let i0 = wg.x * BR;
    let r0 = i0 + sg * 16u;  // first row of this subgroup
    let row = lane % 16u;
    let half = lane / 16u;
    let i = r0 + row;
    let d8 = d / 8u;         // 16-byte elements of k and v per row
    let words = BC * d8;     // of them per block
    let causal = params.causal != 0u;
    let ninf = neg_inf();
    let qscale = params.scale * LOG2E;
    let fb = sg * 512u;      // this subgroup's part of sf
    let pb = sg * BC * 16u;  // ... of sp and sl

    for (var e = lane; e < 256u; e += 32u) {
        sf[fb + e] = 0.0;
    }
    subgroupBarrier();
    let zero = coopLoadT<coop_mat16x16<f32, C>>(&sf[fb], 16u);

    // Q of this subgroup's 16 rows, D/16 A matrices (row-major, from device memory), and the
    // P V accumulators, one 16 x 16 tile per 16 columns of O.
    let qrow = base + r0 * d;
    var qa: array<coop_mat16x16<f16, A>, MAX_TILES>;
    var acc: array<coop_mat16x16<f32, C>, MAX_TILES>;
    for (var c = 0u; c < D16; c++) {
        qa[c] = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 16u * c], d);
        acc[c] = zero;
    }
    var m = ninf;  // the row's reference maximum (base 2)
    var l = 0.0;   // this lane's share of the row's sum of P, relative to m

    // Keys this block's rows may see: all M, or up to the causal diagonal of its last row.
    let kv_end = causal_keys(i0 + BR);
    let kvb = kv_head(head) * nk * d8;  // first element of this head's K/V head in k and v
    // This thread's words of the K and V block being staged: word t + 128w of the block.
    var pk: array<vec4<u32>, MAX_LD>;
    var pv: array<vec4<u32>, MAX_LD>;
    if (PREFETCH != 0u) {
        fetch(kvb, 0u, t, nk, d8, words, &pk, &pv);
    }
    for (var j0 = 0u; j0 < kv_end; j0 += BC) {
        // 1. Stage K and V (the previous block must be consumed first).
        workgroupBarrier();
        if (PREFETCH == 0u) {
            fetch(kvb, j0, t, nk, d8, words, &pk, &pv);
        }
        for (var w = 0u; w < MAX_LD; w++) {
            if (t + 128u * w < words) {
                stage(t + 128u * w, d8, pk[w], pv[w]);
            }
        }
        workgroupBarrier();
        let jn = j0 + BC;
        if (PREFETCH != 0u && jn < kv_end) {
            fetch(kvb, jn, t, nk, d8, words, &pk, &pv);
        }
        if (causal && i32(j0) > i32(r0 + 15u) + params.causal_off) {
            continue;  // every key of the block is above this subgroup's rows
        }

        // 2. S = Q Kᵀ in chunks of KCH keys through sf; in chunk ch the lane reads keys
        //    j0 + KCH ch + c + half + 2e (c = 0, 8, ..; e = 0..3) into x[XPC ch + c / 8].
        let kb = j0 + half;
        var x: array<vec4<f32>, MAX_X>;
        for (var ch = 0u; ch < BC / KCH; ch++) {
            if (ch > 0u) {
                subgroupBarrier();  // every lane has read the previous chunk
            }
            s_chunk(ch, fb, &qa, zero);
            subgroupBarrier();
            for (var c = 0u; c < XPC; c++) {
                let kc = ch * KCH + 8u * c;
                x[ch * XPC + c] = masked(ld_s(fb, half, row, 8u * c) * qscale, head, i, kb + kc, 2u,
                                         nk, causal, ninf);
            }
        }
        var bm = ninf;
        for (var c = 0u; c < BC / 8u; c++) {
            bm = max(bm, max4(x[c]));
        }
        bm = max(bm, subgroupShuffleXor(bm, 16u));

        // 3. Lazy rescale. Rows whose block maximum exceeds the reference by more than TAU move
        //    it: alpha = exp2(m_old - m_new) (0 before the row's first allowed key). The P V
        //    accumulators, relative to the old m, are rescaled in place through sf (a matrix cannot
        //    be scaled row by row), two tiles at a time, unless no row of the subgroup has
        //    accumulated anything yet.
        let need = bm > m + TAU;
        if (subgroupAny(need)) {
            let alpha = select(1.0, exp2(m - bm), need);
            if (subgroupAny(need && m > ninf)) {
                for (var c = 0u; c < D16; c += 2u) {
                    subgroupBarrier();  // every lane has read sf (scores, or the previous pair)
                    coopStore(acc[c], &sf[fb], 16u);
                    if (c + 1u < D16) {
                        coopStore(acc[c + 1u], &sf[fb + 256u], 16u);
                    }
                    subgroupBarrier();
                    scale_s(fb, half, row, alpha);
                    subgroupBarrier();
                    acc[c] = coopLoad<coop_mat16x16<f32, C>>(&sf[fb], 16u);
                    if (c + 1u < D16) {
                        acc[c + 1u] = coopLoad<coop_mat16x16<f32, C>>(&sf[fb + 256u], 16u);
                    }
                }
            }
            m = select(m, bm, need);
            l *= alpha;
        }

        // 4. P = exp2(S - m) (0 while the row has seen no allowed key), hi and lo parts.
        let live = m > ninf;
        var ps = vec4<f32>(0.0);
        for (var c = 0u; c < BC / 8u; c++) {
            var p = select(vec4<f32>(0.0), exp2(x[c] - m), live);
            ps += p;
            // Dropout (philox.wgsl; dead code without it) after the row sum. This lane's keys
            // are kb + 8c + 2e; the 4 lanes of a row quad share the Philox calls (drop_quad).
            if (DROPOUT) {
                p *= drop_quad(head, i, kb + 8u * c, lane & 3u);
            }
            st_p(pb, half, row, 8u * c, p);
        }
        l += dot(ps, vec4<f32>(1.0));
        subgroupBarrier();

        // 5. O += P V over the block's steps of 16 keys.
        for (var kk = 0u; kk < BC / 16u; kk++) {
            let ph = coopLoad<coop_mat16x16<f16, A>>(&sp[pb + kk * 256u], 16u);
            let pl = coopLoad<coop_mat16x16<f16, A>>(&sl[pb + kk * 256u], 16u);
            let vp = kk * 16u * KP;
            for (var c = 0u; c < D16; c++) {
                let vb = coopLoadT<coop_mat16x16<f16, B>>(&vs[vp + 16u * c], KP);
                acc[c] = coopMultiplyAdd(ph, vb, acc[c]);
                if (LO != 0u) {
                    acc[c] = coopMultiplyAdd(pl, vb, acc[c]);
                }
            }
        }
    }

    // O = accumulators / l, with the row's sum split over the two partner lanes; no allowed key
    // at all: 0 (SDPA's way). Through sf, two tiles (32 columns) at a time.
    let lsum = l + subgroupShuffleXor(l, 16u);
    let inv = select(0.0, 1.0 / lsum, lsum > 0.0);
    let ob = base + i * d;
    for (var c = 0u; c < D16; c += 2u) {
        subgroupBarrier();
        coopStore(acc[c], &sf[fb], 16u);
        if (c + 1u < D16) {
            coopStore(acc[c + 1u], &sf[fb + 256u], 16u);
        }
        subgroupBarrier();
        if (i < n) {
            for (var e = 0u; e < 4u; e++) {
                st_o(ob, d, half, 16u * c + 8u * e, ld_s(fb, half, row, 8u * e) * inv);
            }
        }
    }
}

// Chunk ch of the block's scores for this subgroup (keys KCH ch .. + KCH - 1): KCH / 16 tiles of
// 16 keys, stored column-major to sf ([key][row]).
fn s_chunk(ch: u32, fb: u32, qa: ptr<function, array<coop_mat16x16<f16, A>, MAX_TILES>>,
           zero: coop_mat16x16<f32, C>) {
    for (var nt = 0u; nt < KCH / 16u; nt++) {
        let kp = (ch * KCH + nt * 16u) * KP;
        var s = zero;
        for (var c = 0u; c < D16; c++) {
            s = coopMultiplyAdd((*qa)[c], coopLoad<coop_mat16x16<f16, B>>(&ks[kp + 16u * c], KP), s);
        }
        coopStore(s, &sf[fb + nt * 256u], 16u);
    }
}

// This thread's words of key block j0: word e = t + 128w of the block is 8 halves at key e / d8,
// column 8 (e % d8) of K and of V; 0 past the M keys.
fn fetch(kvb: u32, j0: u32, t: u32, nk: u32, d8: u32, words: u32,
         pk: ptr<function, array<vec4<u32>, MAX_LD>>, pv: ptr<function, array<vec4<u32>, MAX_LD>>) {
    for (var w = 0u; w < MAX_LD; w++) {
        let e = t + 128u * w;
        if (e < words) {
            var kx = vec4<u32>(0u);
            var vx = vec4<u32>(0u);
            if (j0 + e / d8 < nk) {
                kx = k[kvb + j0 * d8 + e];
                vx = v[kvb + j0 * d8 + e];
            }
            (*pk)[w] = kx;
            (*pv)[w] = vx;
        }
    }
}

// Writes element e of K and V into ks and vs ([key][KP]).
fn stage(e: u32, d8: u32, kx: vec4<u32>, vx: vec4<u32>) {
    let a = (e / d8) * KP + (e % d8) * 8u;
    let k01 = vec2<f16>(unpack2x16float(kx.x)); let k23 = vec2<f16>(unpack2x16float(kx.y));
    let k45 = vec2<f16>(unpack2x16float(kx.z)); let k67 = vec2<f16>(unpack2x16float(kx.w));
    ks[a] = k01.x; ks[a + 1u] = k01.y; ks[a + 2u] = k23.x; ks[a + 3u] = k23.y;
    ks[a + 4u] = k45.x; ks[a + 5u] = k45.y; ks[a + 6u] = k67.x; ks[a + 7u] = k67.y;
    let v01 = vec2<f16>(unpack2x16float(vx.x)); let v23 = vec2<f16>(unpack2x16float(vx.y));
    let v45 = vec2<f16>(unpack2x16float(vx.z)); let v67 = vec2<f16>(unpack2x16float(vx.w));
    vs[a] = v01.x; vs[a + 1u] = v01.y; vs[a + 2u] = v23.x; vs[a + 3u] = v23.y;
    vs[a + 4u] = v45.x; vs[a + 5u] = v45.y; vs[a + 6u] = v67.x; vs[a + 7u] = v67.y;
}

// sf of row `row` at columns c + half, c + 2 + half, c + 4 + half, c + 6 + half ([column][row]:
// the 32 lanes touch 32 different banks).
fn ld_s(fb: u32, half: u32, row: u32, c: u32) -> vec4<f32> {
    let e = fb + (c + half) * 16u + row;
    return vec4<f32>(sf[e], sf[e + 32u], sf[e + 64u], sf[e + 96u]);
}

// Multiplies this lane's 16 elements of sf (row `row`, columns 2c + half) by a.
fn scale_s(fb: u32, half: u32, row: u32, a: f32) {
    for (var c = 0u; c < 32u; c += 2u) {
        let e = fb + (c + half) * 16u + row;
        sf[e] *= a;
    }
}

// x rounded to f16's 11 significant bits (in f16's normal range) by integer operations: a compiler
// may fold f32(f16(x)) back to x — the H200's did, which silently made the low part zero.
fn round_f16(x: vec4<f32>) -> vec4<f32> {
    let u = bitcast<vec4<u32>>(x);
    return bitcast<vec4<f32>>((u + vec4<u32>(0x1000u)) & vec4<u32>(0xFFFFE000u));
}

// P of row `row` at keys c + half, +2, +4, +6 as hi (sp) and, with LO, lo (sl) f16 parts.
fn st_p(pb: u32, half: u32, row: u32, c: u32, p: vec4<f32>) {
    let e = pb + (c + half) * 16u + row;
    let r = round_f16(p);
    let hi = vec4<f16>(r);
    sp[e] = hi.x;
    sp[e + 32u] = hi.y;
    sp[e + 64u] = hi.z;
    sp[e + 96u] = hi.w;
    if (LO != 0u) {
        let lo = vec4<f16>(p - r);
        sl[e] = lo.x;
        sl[e + 32u] = lo.y;
        sl[e + 64u] = lo.z;
        sl[e + 96u] = lo.w;
    }
}

// Dropout factors of this lane's row i at keys j, j + 2, j + 4, j + 6. The lanes q = lane & 3
// of a quad hold rows 4a .. 4a + 3 (r0 is a multiple of 16) and need the same keys: lane q makes
// the one Philox call of key j + 2q, whose word r belongs to row 4a + r, and the quad exchanges
// words by xor shuffles (lane q ^ d sends its word q): 1 call per lane instead of 4.
fn drop_quad(head: u32, i: u32, j: u32, q: u32) -> vec4<f32> {
    let w = keep_words(head, i >> 2u, j + 2u * q);
    var mine = vec4<u32>(0u);
    mine[q] = w[q];
    mine[q ^ 1u] = subgroupShuffleXor(w[q ^ 1u], 1u);
    mine[q ^ 2u] = subgroupShuffleXor(w[q ^ 2u], 2u);
    mine[q ^ 3u] = subgroupShuffleXor(w[q ^ 3u], 3u);
    return factors(mine);
}

// O of one row at columns c + half, +2, +4, +6, skipping those past D.
fn st_o(ob: u32, d: u32, half: u32, c: u32, x: vec4<f32>) {
    for (var k2 = 0u; k2 < 4u; k2++) {
        let col = c + half + 2u * k2;
        if (col < d) {
            o[ob + col] = pack(x[k2], x[k2]);
        }
    }
}
