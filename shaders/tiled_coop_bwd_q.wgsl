// tiled_coop_bwd_q.wgsl — `tiled-coop`'s dQ kernel (kernels/tiled_coop_bwd.rs): FlashAttention-2's
// dQ pass on cooperative matrices, f16 in device memory, every product accumulating in f32.
enable wgpu_cooperative_matrix;
//
// A workgroup of 256 threads (eight 32-wide subgroups) owns BR = 128 query rows of one head;
// subgroup g owns rows 16g .. 16g + 15 and keeps their Q and dO as f16 matrices and dQ as f32
// accumulators (D16 = D / 16 of each, D <= 64). Per key block of 16 keys (staged in workgroup
// memory as the forward does, tiled_coop_lib.wgsl):
//   1. S = Q Kᵀ and dP = dO Vᵀ (16 x 16 each, f32), S to sf;
//   2. lane (row = lane % 16, half = lane / 16) reads its 8 keys of S and recomputes
//      P = exp2(S·scale·log2 e + bias·log2 e - L) (0 where masked; L = +inf for a row with no
//      allowed key); dP then takes S's place in sf, and the lane makes dS = P ∘ (dP ∘ Z - D)·scale
//      (Z: the dropout factors, D = rowsum(dO ∘ O)), rounded to one f16 (as FlashAttention-2
//      rounds dS) into sp;
//   3. dQ += dS K.
// Causal blocks above the subgroup's rows are skipped. Workgroup storage: K and V 2 x 16 x (D + 8)
// f16, dS 8 x 16 x 16 f16, S then dP 8 x 16 x 16 f32: 16896 bytes at D = 64, 2112 a subgroup. On the
// H200 at N = 4096 (results/EXPERIMENTS.md, v34-bwd-kv-direct): S and dP side by side with four
// subgroups (3712 bytes a subgroup) 3620 µs, one tile 3543-3559, eight subgroups 3464.

@group(0) @binding(1) var<storage, read> q: array<st>;
@group(0) @binding(2) var<storage, read> k: array<vec4<u32>>;  // 8 halves per element
@group(0) @binding(3) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> g: array<st>;         // dO (padded by BR rows)
@group(0) @binding(5) var<storage, read> lse: array<f32>;
@group(0) @binding(6) var<storage, read> delta: array<f32>;
@group(0) @binding(7) var<storage, read_write> o: array<st>;   // dQ (`o` for tiled_coop_lib's st_o)

const BR: u32 = 128u;  // 16 rows a subgroup
const BC: u32 = 16u;
const LOG2E: f32 = 1.4426950408889634;
const LO: u32 = 0u;  // tiled_coop_lib's st_p: one f16
override D16: u32 = 4u;
override KP: u32 = D16 * 16u + 8u;

var<workgroup> ks: array<f16, BC * KP>;  // [key][KP]
var<workgroup> vs: array<f16, BC * KP>;
var<workgroup> sp: array<f16, 2048>;     // per subgroup [16 keys][16 rows]: dS
var<workgroup> sf: array<f32, 2048>;     // per subgroup S, then dP ([16 keys][16 rows]), or dQ

var<private> qa0: coop_mat16x16<f16, A>;
var<private> qa1: coop_mat16x16<f16, A>;
var<private> qa2: coop_mat16x16<f16, A>;
var<private> qa3: coop_mat16x16<f16, A>;
var<private> ga0: coop_mat16x16<f16, A>;
var<private> ga1: coop_mat16x16<f16, A>;
var<private> ga2: coop_mat16x16<f16, A>;
var<private> ga3: coop_mat16x16<f16, A>;
var<private> acc0: coop_mat16x16<f32, C>;
var<private> acc1: coop_mat16x16<f32, C>;
var<private> acc2: coop_mat16x16<f32, C>;
var<private> acc3: coop_mat16x16<f32, C>;

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>,
        @builtin(local_invocation_index) t: u32, @builtin(subgroup_id) sg: u32,
        @builtin(subgroup_invocation_id) lane: u32) {
    let n = params.seq;
    let nk = params.kv_seq;
    let d = D16 * 16u;
    let head = params.head_offset + wg.y;
    let base = head * n * d;
    let i0 = wg.x * BR;
    let r0 = i0 + sg * 16u;
    let row = lane % 16u;
    let half = lane / 16u;
    let i = r0 + row;
    let d8 = d / 8u;
    let words = BC * d8;
    let causal = params.causal != 0u;
    let ninf = neg_inf();
    let sc = params.scale * LOG2E;
    let fb = sg * 256u;
    let pb = sg * 256u;
    let li = select(-neg_inf(), lse[head * n + min(i, n - 1u)], i < n);
    let di = select(0.0, delta[head * n + min(i, n - 1u)], i < n);

    for (var e = lane; e < 256u; e += 32u) {
        sf[fb + e] = 0.0;
    }
    subgroupBarrier();
    let zero = coopLoadT<coop_mat16x16<f32, C>>(&sf[fb], 16u);
    let qrow = base + r0 * d;
    qa0 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow], d); ga0 = coopLoadT<coop_mat16x16<f16, A>>(&g[qrow], d); acc0 = zero;
    if (D16 > 1u) { qa1 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 16u], d); ga1 = coopLoadT<coop_mat16x16<f16, A>>(&g[qrow + 16u], d); acc1 = zero; }
    if (D16 > 2u) { qa2 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 32u], d); ga2 = coopLoadT<coop_mat16x16<f16, A>>(&g[qrow + 32u], d); acc2 = zero; }
    if (D16 > 3u) { qa3 = coopLoadT<coop_mat16x16<f16, A>>(&q[qrow + 48u], d); ga3 = coopLoadT<coop_mat16x16<f16, A>>(&g[qrow + 48u], d); acc3 = zero; }

    let kv_end = causal_keys(i0 + BR);
    let kvb = kv_head(head) * nk * d8;
    var pk = ld_k(kvb, 0u, t, nk, d8, words);
    var pv = ld_v(kvb, 0u, t, nk, d8, words);
    for (var j0 = 0u; j0 < kv_end; j0 += BC) {
        workgroupBarrier();
        stage(t, d8, words, pk, pv);
        workgroupBarrier();
        if (j0 + BC < kv_end) {
            pk = ld_k(kvb, j0 + BC, t, nk, d8, words); pv = ld_v(kvb, j0 + BC, t, nk, d8, words);
        }
        if (causal && i32(j0) > i32(r0 + 15u) + params.causal_off) {
            continue;  // every key of the block is above this subgroup's rows
        }

        // 1. S and dP.
        var s = coopMultiplyAdd(qa0, coopLoad<coop_mat16x16<f16, B>>(&ks[0], KP), zero);
        var dp = coopMultiplyAdd(ga0, coopLoad<coop_mat16x16<f16, B>>(&vs[0], KP), zero);
        if (D16 > 1u) { s = coopMultiplyAdd(qa1, coopLoad<coop_mat16x16<f16, B>>(&ks[16u], KP), s); dp = coopMultiplyAdd(ga1, coopLoad<coop_mat16x16<f16, B>>(&vs[16u], KP), dp); }
        if (D16 > 2u) { s = coopMultiplyAdd(qa2, coopLoad<coop_mat16x16<f16, B>>(&ks[32u], KP), s); dp = coopMultiplyAdd(ga2, coopLoad<coop_mat16x16<f16, B>>(&vs[32u], KP), dp); }
        if (D16 > 3u) { s = coopMultiplyAdd(qa3, coopLoad<coop_mat16x16<f16, B>>(&ks[48u], KP), s); dp = coopMultiplyAdd(ga3, coopLoad<coop_mat16x16<f16, B>>(&vs[48u], KP), dp); }
        coopStore(s, &sf[fb], 16u);
        subgroupBarrier();

        // 2. P and dS of this lane's keys kb + 2e and kb + 8 + 2e.
        let kb = j0 + half;
        let p0 = exp2(masked(ld_s(fb, half, row, 0u) * sc, head, i, kb, 2u, nk, causal, ninf) - li);
        let p1 = exp2(masked(ld_s(fb, half, row, 8u) * sc, head, i, kb + 8u, 2u, nk, causal, ninf) - li);
        subgroupBarrier();
        coopStore(dp, &sf[fb], 16u);
        subgroupBarrier();
        var dp0 = ld_s(fb, half, row, 0u);
        var dp1 = ld_s(fb, half, row, 8u);
        if (DROPOUT) {
            dp0 *= drop_quad(head, i, kb, lane & 3u);
            dp1 *= drop_quad(head, i, kb + 8u, lane & 3u);
        }
        st_p(pb, half, row, 0u, p0 * (dp0 - di) * params.scale);
        st_p(pb, half, row, 8u, p1 * (dp1 - di) * params.scale);
        subgroupBarrier();

        // 3. dQ += dS K.
        let ds = coopLoad<coop_mat16x16<f16, A>>(&sp[pb], 16u);
        acc0 = coopMultiplyAdd(ds, coopLoadT<coop_mat16x16<f16, B>>(&ks[0], KP), acc0);
        if (D16 > 1u) { acc1 = coopMultiplyAdd(ds, coopLoadT<coop_mat16x16<f16, B>>(&ks[16u], KP), acc1); }
        if (D16 > 2u) { acc2 = coopMultiplyAdd(ds, coopLoadT<coop_mat16x16<f16, B>>(&ks[32u], KP), acc2); }
        if (D16 > 3u) { acc3 = coopMultiplyAdd(ds, coopLoadT<coop_mat16x16<f16, B>>(&ks[48u], KP), acc3); }
    }

    // dQ through sf, one tile (16 columns) at a time.
    let ob = base + i * d;
    subgroupBarrier();
    coopStore(acc0, &sf[fb], 16u); subgroupBarrier(); if (i < n) { st_row16(ob, d, half, row, fb, 0u); } subgroupBarrier();
    if (D16 > 1u) { coopStore(acc1, &sf[fb], 16u); subgroupBarrier(); if (i < n) { st_row16(ob, d, half, row, fb, 16u); } subgroupBarrier(); }
    if (D16 > 2u) { coopStore(acc2, &sf[fb], 16u); subgroupBarrier(); if (i < n) { st_row16(ob, d, half, row, fb, 32u); } subgroupBarrier(); }
    if (D16 > 3u) { coopStore(acc3, &sf[fb], 16u); subgroupBarrier(); if (i < n) { st_row16(ob, d, half, row, fb, 48u); } }
}

// Columns c0 .. c0 + 15 of this lane's row (sf holds them as one [16][16] tile) to `o`.
fn st_row16(ob: u32, d: u32, half: u32, row: u32, fb: u32, c0: u32) {
    st_o(ob, d, half, c0, ld_s(fb, half, row, 0u));
    st_o(ob, d, half, c0 + 8u, ld_s(fb, half, row, 8u));
}

// tiled_coop_lib.wgsl's hook for P's low part: none here (LO = 0).
fn st_lo(e: u32, x: vec4<f32>) {}
