// tiled_coop_bwd_kv.wgsl — `tiled-coop`'s dK/dV kernel (kernels/tiled_coop_bwd.rs):
// FlashAttention-2's dK/dV pass on cooperative matrices, f16 in device memory, every product
// accumulating in f32.
enable wgpu_cooperative_matrix;
//
// A workgroup of 128 threads (four 32-wide subgroups) owns 64 keys of one K/V head; subgroup g
// owns keys 16g .. 16g + 15, keeps their K and V as f16 matrices and dK, dV as f32 accumulators
// (D16 = D / 16 of each, D <= 64), and walks the query blocks of 16 rows that see them (from the
// diagonal when causal), for each query head of the K/V head's group in turn. Per block (Q, dO
// rows staged in workgroup memory, with their L and D):
//   1. Sᵀ = K Qᵀ and dPᵀ = V dOᵀ (16 keys x 16 rows, f32), Sᵀ to sf;
//   2. lane (key = lane % 16, half = lane / 16) reads rows half + 2e and 8 + half + 2e of Sᵀ and
//      recomputes P = exp2(S·scale·log2 e + bias·log2 e - L) (0 where masked); dPᵀ then takes
//      Sᵀ's place in sf, and the lane makes P ∘ Z and dS = P ∘ (dP ∘ Z - D)·scale (Z: the dropout
//      factors, D = rowsum(dO ∘ O)), each rounded to one f16 (as FlashAttention-2 rounds them);
//   3. P ∘ Z goes through the subgroup's sp tile into dV += (P ∘ Z)ᵀ dO, then dS through the same
//      tile into dK += dSᵀ Q.
// Each subgroup loads its K and V matrices once, straight from device memory (K and V are padded
// by 128 rows past the last head, so a subgroup's 16 rows never leave the buffer; rows past M are
// masked), so the workgroup arrays hold one block: ks, vs 2 x 16 x 72 f16, sp 4 x 16 x 16 f16 (one
// tile a subgroup: P ∘ Z, then dS), sf 4 x 16 x 16 f32 (one tile a subgroup: Sᵀ, then dPᵀ), L and
// D 2 x 16 f32: 10880 bytes at D = 64. Workgroup storage is what limits this kernel on the H200
// (B8 H16 N4096 D64 causal, results/EXPERIMENTS.md, v34-bwd-kv-direct): staging the 64 keys' K and V through workgroup
// memory first (30848 bytes) ran 8650 µs, reading them as matrices (17024) 5554, the same kernel
// with 13824 unused bytes added back (30848) 8336; one sf tile instead of two (12928) 5113; one sp
// tile too (10880) 5018.

@group(0) @binding(1) var<storage, read> q: array<vec4<u32>>;  // 8 halves per element
@group(0) @binding(2) var<storage, read> k: array<st>;         // K, read as matrices
@group(0) @binding(3) var<storage, read> v: array<st>;
@group(0) @binding(4) var<storage, read> g: array<vec4<u32>>;  // dO
@group(0) @binding(5) var<storage, read> lse: array<f32>;
@group(0) @binding(6) var<storage, read> delta: array<f32>;
@group(0) @binding(7) var<storage, read_write> o: array<st>;   // dK (`o` for tiled_coop_lib's st_o)
@group(0) @binding(8) var<storage, read_write> dv: array<st>;

const BK: u32 = 64u;  // keys per workgroup
const BC: u32 = 16u;  // query rows per block
const LOG2E: f32 = 1.4426950408889634;
const LO: u32 = 0u;   // tiled_coop_lib's st_p: one f16
override D16: u32 = 4u;
override KP: u32 = D16 * 16u + 8u;

var<workgroup> ks: array<f16, BC * KP>;  // each block's Q ([row][KP])
var<workgroup> vs: array<f16, BC * KP>;  // dO
var<workgroup> sp: array<f16, 1024>;     // per subgroup [16 rows][16 keys]: P ∘ Z, then dS
var<workgroup> sf: array<f32, 1024>;     // per subgroup Sᵀ, then dPᵀ ([16 rows][16 keys]), or dK, dV
var<workgroup> ls: array<f32, 16>;       // L of the block's rows
var<workgroup> dls: array<f32, 16>;      // D of the block's rows

var<private> ka0: coop_mat16x16<f16, A>;
var<private> ka1: coop_mat16x16<f16, A>;
var<private> ka2: coop_mat16x16<f16, A>;
var<private> ka3: coop_mat16x16<f16, A>;
var<private> va0: coop_mat16x16<f16, A>;
var<private> va1: coop_mat16x16<f16, A>;
var<private> va2: coop_mat16x16<f16, A>;
var<private> va3: coop_mat16x16<f16, A>;
var<private> dk0: coop_mat16x16<f32, C>;
var<private> dk1: coop_mat16x16<f32, C>;
var<private> dk2: coop_mat16x16<f32, C>;
var<private> dk3: coop_mat16x16<f32, C>;
var<private> dv0: coop_mat16x16<f32, C>;
var<private> dv1: coop_mat16x16<f32, C>;
var<private> dv2: coop_mat16x16<f32, C>;
var<private> dv3: coop_mat16x16<f32, C>;

@compute @workgroup_size(128, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>,
        @builtin(local_invocation_index) t: u32, @builtin(subgroup_id) sg: u32,
        @builtin(subgroup_invocation_id) lane: u32) {
    let n = params.seq;
    let nk = params.kv_seq;
    let d = D16 * 16u;
    let d8 = d / 8u;
    // wg.y is a K/V head; its kv_group query heads are walked in turn into the same accumulators.
    let kvh = params.head_offset / params.kv_group + wg.y;
    let g0 = kvh * params.kv_group;
    let j0 = wg.x * BK;
    let js = j0 + sg * 16u;  // this subgroup's first key
    let row = lane % 16u;
    let half = lane / 16u;
    let j = js + row;         // this lane's key
    let causal = params.causal != 0u;
    let ninf = neg_inf();
    let sc = params.scale * LOG2E;
    let fb = sg * 256u;
    let pb = sg * 256u;

    // This subgroup's 16 keys of K and V as matrices, straight from device memory.
    for (var e = lane; e < 256u; e += 32u) {
        sf[fb + e] = 0.0;
    }
    subgroupBarrier();
    let zero = coopLoadT<coop_mat16x16<f32, C>>(&sf[fb], 16u);
    let kr = (kvh * nk + js) * d;
    ka0 = coopLoadT<coop_mat16x16<f16, A>>(&k[kr], d); va0 = coopLoadT<coop_mat16x16<f16, A>>(&v[kr], d); dk0 = zero; dv0 = zero;
    if (D16 > 1u) { ka1 = coopLoadT<coop_mat16x16<f16, A>>(&k[kr + 16u], d); va1 = coopLoadT<coop_mat16x16<f16, A>>(&v[kr + 16u], d); dk1 = zero; dv1 = zero; }
    if (D16 > 2u) { ka2 = coopLoadT<coop_mat16x16<f16, A>>(&k[kr + 32u], d); va2 = coopLoadT<coop_mat16x16<f16, A>>(&v[kr + 32u], d); dk2 = zero; dv2 = zero; }
    if (D16 > 3u) { ka3 = coopLoadT<coop_mat16x16<f16, A>>(&k[kr + 48u], d); va3 = coopLoadT<coop_mat16x16<f16, A>>(&v[kr + 48u], d); dk3 = zero; dv3 = zero; }

    // Causal: the first block of rows that sees key j0 (row i sees keys up to i + causal_off).
    let first = first_row_block(j0, BC);
    let words = BC * d8;
    for (var r = 0u; r < params.kv_group; r++) {
        let head = g0 + r;
        let qb = head * n * d8;
        // The next block's Q and dO rows (one 16-byte word each a thread) and, threads 0 .. 15,
        // its rows' L and D, loaded into registers a block ahead.
        var pq = ld_rows(qb, first, t, n, d8, words, true);
        var pg = ld_rows(qb, first, t, n, d8, words, false);
        var pst = vec2<f32>(0.0);
        if (t < 16u) {
            pst = ld_stats(head, first + t, n);
        }
        for (var i0 = first; i0 < n; i0 += BC) {
            // The previous block's matrix loads are done before Q and dO go in.
            workgroupBarrier();
            stage(t, d8, words, pq, pg);
            if (t < 16u) {
                ls[t] = pst.x;
                dls[t] = pst.y;
            }
            workgroupBarrier();
            if (i0 + BC < n) {
                pq = ld_rows(qb, i0 + BC, t, n, d8, words, true);
                pg = ld_rows(qb, i0 + BC, t, n, d8, words, false);
                if (t < 16u) {
                    pst = ld_stats(head, i0 + BC + t, n);
                }
            }
            if (causal && i32(i0 + 15u) + params.causal_off < i32(js)) {
                continue;  // no row of the block sees this subgroup's keys
            }

            // 1. Sᵀ and dPᵀ.
            var s = coopMultiplyAdd(ka0, coopLoad<coop_mat16x16<f16, B>>(&ks[0], KP), zero);
            var dp = coopMultiplyAdd(va0, coopLoad<coop_mat16x16<f16, B>>(&vs[0], KP), zero);
            if (D16 > 1u) { s = coopMultiplyAdd(ka1, coopLoad<coop_mat16x16<f16, B>>(&ks[16u], KP), s); dp = coopMultiplyAdd(va1, coopLoad<coop_mat16x16<f16, B>>(&vs[16u], KP), dp); }
            if (D16 > 2u) { s = coopMultiplyAdd(ka2, coopLoad<coop_mat16x16<f16, B>>(&ks[32u], KP), s); dp = coopMultiplyAdd(va2, coopLoad<coop_mat16x16<f16, B>>(&vs[32u], KP), dp); }
            if (D16 > 3u) { s = coopMultiplyAdd(ka3, coopLoad<coop_mat16x16<f16, B>>(&ks[48u], KP), s); dp = coopMultiplyAdd(va3, coopLoad<coop_mat16x16<f16, B>>(&vs[48u], KP), dp); }
            coopStore(s, &sf[fb], 16u);
            subgroupBarrier();

            // 2. P ∘ Z and dS of this lane's key j with rows i0 + half + 2e (a) and + 8 (b).
            let ra = half + vec4<u32>(0u, 2u, 4u, 6u);
            let rb = ra + 8u;
            let pa = exp2(masked_col(ld_s(fb, half, row, 0u) * sc, head, i0 + ra, j, n, nk, causal, ninf)
                          - vec4<f32>(ls[ra.x], ls[ra.y], ls[ra.z], ls[ra.w]));
            let pbv = exp2(masked_col(ld_s(fb, half, row, 8u) * sc, head, i0 + rb, j, n, nk, causal, ninf)
                           - vec4<f32>(ls[rb.x], ls[rb.y], ls[rb.z], ls[rb.w]));
            subgroupBarrier();
            coopStore(dp, &sf[fb], 16u);
            subgroupBarrier();
            var za = vec4<f32>(1.0);
            var zb = vec4<f32>(1.0);
            if (DROPOUT) {
                za = drop_col(head, i0 + ra, j);
                zb = drop_col(head, i0 + rb, j);
            }
            let dpa = ld_s(fb, half, row, 0u) * za;
            let dpb = ld_s(fb, half, row, 8u) * zb;
            st_p(pb, half, row, 0u, pa * za);
            st_p(pb, half, row, 8u, pbv * zb);
            subgroupBarrier();
            let pt = coopLoad<coop_mat16x16<f16, A>>(&sp[pb], 16u);
            // 3a. dV += (P ∘ Z)ᵀ dO.
            dv0 = coopMultiplyAdd(pt, coopLoadT<coop_mat16x16<f16, B>>(&vs[0], KP), dv0);
            if (D16 > 1u) { dv1 = coopMultiplyAdd(pt, coopLoadT<coop_mat16x16<f16, B>>(&vs[16u], KP), dv1); }
            if (D16 > 2u) { dv2 = coopMultiplyAdd(pt, coopLoadT<coop_mat16x16<f16, B>>(&vs[32u], KP), dv2); }
            if (D16 > 3u) { dv3 = coopMultiplyAdd(pt, coopLoadT<coop_mat16x16<f16, B>>(&vs[48u], KP), dv3); }
            subgroupBarrier();
            st_p(pb, half, row, 0u, pa * (dpa - vec4<f32>(dls[ra.x], dls[ra.y], dls[ra.z], dls[ra.w])) * params.scale);
            st_p(pb, half, row, 8u, pbv * (dpb - vec4<f32>(dls[rb.x], dls[rb.y], dls[rb.z], dls[rb.w])) * params.scale);
            subgroupBarrier();

            // 3b. dK += dSᵀ Q.
            let dst = coopLoad<coop_mat16x16<f16, A>>(&sp[pb], 16u);
            dk0 = coopMultiplyAdd(dst, coopLoadT<coop_mat16x16<f16, B>>(&ks[0], KP), dk0);
            if (D16 > 1u) { dk1 = coopMultiplyAdd(dst, coopLoadT<coop_mat16x16<f16, B>>(&ks[16u], KP), dk1); }
            if (D16 > 2u) { dk2 = coopMultiplyAdd(dst, coopLoadT<coop_mat16x16<f16, B>>(&ks[32u], KP), dk2); }
            if (D16 > 3u) { dk3 = coopMultiplyAdd(dst, coopLoadT<coop_mat16x16<f16, B>>(&ks[48u], KP), dk3); }
        }
    }

    // dK and dV of this lane's key through sf, one tile (16 columns) at a time.
    let live = j < nk;
    let ob = (kvh * nk + j) * d;
    subgroupBarrier();
    coopStore(dk0, &sf[fb], 16u); subgroupBarrier(); if (live) { st_row16(ob, d, half, row, fb, 0u, true); } subgroupBarrier();
    coopStore(dv0, &sf[fb], 16u); subgroupBarrier(); if (live) { st_row16(ob, d, half, row, fb, 0u, false); } subgroupBarrier();
    if (D16 > 1u) {
        coopStore(dk1, &sf[fb], 16u); subgroupBarrier(); if (live) { st_row16(ob, d, half, row, fb, 16u, true); } subgroupBarrier();
        coopStore(dv1, &sf[fb], 16u); subgroupBarrier(); if (live) { st_row16(ob, d, half, row, fb, 16u, false); } subgroupBarrier();
    }
    if (D16 > 2u) {
        coopStore(dk2, &sf[fb], 16u); subgroupBarrier(); if (live) { st_row16(ob, d, half, row, fb, 32u, true); } subgroupBarrier();
        coopStore(dv2, &sf[fb], 16u); subgroupBarrier(); if (live) { st_row16(ob, d, half, row, fb, 32u, false); } subgroupBarrier();
    }
    if (D16 > 3u) {
        coopStore(dk3, &sf[fb], 16u); subgroupBarrier(); if (live) { st_row16(ob, d, half, row, fb, 48u, true); } subgroupBarrier();
        coopStore(dv3, &sf[fb], 16u); subgroupBarrier(); if (live) { st_row16(ob, d, half, row, fb, 48u, false); }
    }
}

// Element e of rows i0 .. of Q (q_rows) or dO as 8 halves; 0 past N and past `words`.
fn ld_rows(qb: u32, i0: u32, e: u32, n: u32, d8: u32, words: u32, q_rows: bool) -> vec4<u32> {
    if (e >= words || i0 + e / d8 >= n) {
        return vec4<u32>(0u);
    }
    if (q_rows) {
        return q[qb + i0 * d8 + e];
    }
    return g[qb + i0 * d8 + e];
}

// (L, D) of row i of `head` (L = +inf, D = 0 past N: P = 0 there).
fn ld_stats(head: u32, i: u32, n: u32) -> vec2<f32> {
    let at = head * n + min(i, n - 1u);
    return select(vec2<f32>(-neg_inf(), 0.0), vec2<f32>(lse[at], delta[at]), i < n);
}

// Scores (base 2) of rows i (4 of them) with key j: -inf past N or M, above the causal diagonal,
// plus the mask bias.
fn masked_col(s: vec4<f32>, head: u32, i: vec4<u32>, j: u32, n: u32, nk: u32, causal: bool, ninf: f32) -> vec4<f32> {
    let allowed = (i < vec4<u32>(n)) & vec4<bool>(j < nk)
        & ((vec4<i32>(i32(j)) <= vec4<i32>(i) + vec4<i32>(params.causal_off)) | vec4<bool>(!causal));
    var b = vec4<f32>(0.0);
    if (HAS_MASK) {
        let ic = min(i, vec4<u32>(n - 1u));
        let jc = min(j, nk - 1u);
        b = vec4<f32>(mask_bias(head, ic.x, jc), mask_bias(head, ic.y, jc),
                      mask_bias(head, ic.z, jc), mask_bias(head, ic.w, jc)) * LOG2E;
    }
    return select(vec4<f32>(ninf), s + b, allowed);
}

// Dropout factors of rows i (4 of them) at key j: one Philox call each (philox.wgsl).
fn drop_col(head: u32, i: vec4<u32>, j: u32) -> vec4<f32> {
    return vec4<f32>(drop1(head, i.x, j), drop1(head, i.y, j), drop1(head, i.z, j), drop1(head, i.w, j));
}

// Columns c0 .. c0 + 15 of this lane's key row (sf holds them as one [16][16] tile) to dK (`o`,
// via tiled_coop_lib's st_o) or dV.
fn st_row16(ob: u32, d: u32, half: u32, row: u32, fb: u32, c0: u32, to_dk: bool) {
    for (var c = 0u; c < 16u; c += 8u) {
        let x = ld_s(fb, half, row, c);
        if (to_dk) {
            st_o(ob, d, half, c0 + c, x);
        } else {
            for (var k2 = 0u; k2 < 4u; k2++) {
                let col = c0 + c + half + 2u * k2;
                if (col < d) {
                    dv[ob + col] = pack(x[k2], x[k2]);
                }
            }
        }
    }
}

// tiled_coop_lib.wgsl's hook for P's low part: none here (LO = 0).
fn st_lo(e: u32, x: vec4<f32>) {}
