// split_kv_hpl.wgsl — the split pass of `split-kv` (kernels/split_kv.rs) for groups of at most
// 4 query heads per K/V head whose rows fit WPL * HW <= 2 words a lane (D <= 128 at f16, 64 at
// f32): split_kv.wgsl with every lane set serving all GROUP query heads of its K/V head. Each K/V
// word a lane loads feeds GROUP dot products and output updates instead of being loaded again by
// GROUP lane sets, so the workgroup's 128 / KW lane sets are all key groups: 4x the unique K/V
// rows in flight of split_kv.wgsl at the same registers per row. On the H200 (Hq 32, Hkv 8,
// D 128, N 1, f16) B16 M65536 went from 2322 to 1418 µs (results/EXPERIMENTS.md, v31-*).
// Per-head state lives in named variables behind `if (GROUP > c)` (arrays indexed by head were
// not kept in registers on the H200, v25 dec4). Same partial layout and combine as split_kv.wgsl.

@group(0) @binding(1) var<storage, read> q: array<st>;
@group(0) @binding(2) var<storage, read> k: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> po: array<f32>;
@group(0) @binding(5) var<storage, read_write> pml: array<vec2<f32>>;

override SPLITS: u32 = 1u;
override GROUP: u32 = 1u;
override KW: u32 = 16u;
override WPL: u32 = 1u;
override UNROLL: u32 = 8u;
const WG: u32 = 128u;
const LMAX: u32 = 16u;
const HW: u32 = EPW / 4u;
const LOG2E: f32 = 1.4426950408889634;

var<workgroup> sml: array<vec2<f32>, 64>;  // [lane set][head]: (m, l)
var<workgroup> sacc: array<f32, 4096>;     // [lane set][head][D]

@compute @workgroup_size(128, 1, 1)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
    @builtin(subgroup_id) sg_id: u32,
    @builtin(subgroup_size) sg_size: u32,
    @builtin(subgroup_invocation_id) sg_lane: u32,
) {
    let n = params.seq;
    let nk = params.kv_seq;
    let d = params.head_dim;
    let ng = WG / KW;                                 // key groups = lane sets
    let kg = sg_id * (sg_size / KW) + sg_lane / KW;   // this lane set
    let lane = sg_lane % KW;
    let split = wg.x;
    let i = wg.y;
    let kvh = params.head_offset / GROUP + wg.z;
    let g0 = kvh * GROUP;
    let lkv = wg.z;
    let wpr = d / EPW;
    let ninf = neg_inf();
    let qscale = params.scale * LOG2E;

    // This lane's words of each head's query row (scaled, base 2): e = w * HW + h, e < 2.
    var q0: array<vec4<f32>, 2>; var q1: array<vec4<f32>, 2>; var q2: array<vec4<f32>, 2>; var q3: array<vec4<f32>, 2>;
    var a0: array<vec4<f32>, 2>; var a1: array<vec4<f32>, 2>; var a2: array<vec4<f32>, 2>; var a3: array<vec4<f32>, 2>;
    for (var w = 0u; w < WPL; w++) {
        for (var h = 0u; h < HW; h++) {
            let cw = lane + w * KW;
            let e = w * HW + h;
            q0[e] = qword(0u, g0, n, i, d, cw, wpr, h) * qscale; a0[e] = vec4<f32>(0.0);
            if (GROUP > 1u) { q1[e] = qword(1u, g0, n, i, d, cw, wpr, h) * qscale; a1[e] = vec4<f32>(0.0); }
            if (GROUP > 2u) { q2[e] = qword(2u, g0, n, i, d, cw, wpr, h) * qscale; a2[e] = vec4<f32>(0.0); }
            if (GROUP > 3u) { q3[e] = qword(3u, g0, n, i, d, cw, wpr, h) * qscale; a3[e] = vec4<f32>(0.0); }
        }
    }

    let j_end = causal_keys(i + 1u);
    let stepk = ng * UNROLL;
    var m0 = ninf; var m1 = ninf; var m2 = ninf; var m3 = ninf;
    var l0 = 0.0; var l1 = 0.0; var l2 = 0.0; var l3 = 0.0;
    for (var blk = split; blk * stepk < j_end; blk += SPLITS) {
        let base = blk * stepk;
        var kw: array<vec4<u32>, LMAX>;
        var vw: array<vec4<u32>, LMAX>;
        for (var u = 0u; u < UNROLL; u++) {
            let row = (lkv * nk + min(base + kg + u * ng, j_end - 1u)) * wpr;
            for (var w = 0u; w < WPL; w++) {
                let cw = min(lane + w * KW, wpr - 1u);
                kw[u * WPL + w] = k[row + cw];
                vw[u * WPL + w] = v[row + cw];
            }
        }
        var s0: array<f32, LMAX>; var s1: array<f32, LMAX>; var s2: array<f32, LMAX>; var s3: array<f32, LMAX>;
        for (var u = 0u; u < UNROLL; u++) {
            var p0 = 0.0; var p1 = 0.0; var p2 = 0.0; var p3 = 0.0;
            for (var w = 0u; w < WPL; w++) {
                for (var h = 0u; h < HW; h++) {
                    let kx = word4(kw[u * WPL + w], h);
                    let e = w * HW + h;
                    p0 += dot(q0[e], kx);
                    if (GROUP > 1u) { p1 += dot(q1[e], kx); }
                    if (GROUP > 2u) { p2 += dot(q2[e], kx); }
                    if (GROUP > 3u) { p3 += dot(q3[e], kx); }
                }
            }
            s0[u] = p0; s1[u] = p1; s2[u] = p2; s3[u] = p3;
        }
        for (var o = 1u; o < KW; o <<= 1u) {
            for (var u = 0u; u < UNROLL; u++) {
                s0[u] += subgroupShuffleXor(s0[u], o);
                if (GROUP > 1u) { s1[u] += subgroupShuffleXor(s1[u], o); }
                if (GROUP > 2u) { s2[u] += subgroupShuffleXor(s2[u], o); }
                if (GROUP > 3u) { s3[u] += subgroupShuffleXor(s3[u], o); }
            }
        }
        head_step(g0, i, base, kg, ng, j_end, &s0, &m0, &l0, &a0, &vw);
        if (GROUP > 1u) { head_step(g0 + 1u, i, base, kg, ng, j_end, &s1, &m1, &l1, &a1, &vw); }
        if (GROUP > 2u) { head_step(g0 + 2u, i, base, kg, ng, j_end, &s2, &m2, &l2, &a2, &vw); }
        if (GROUP > 3u) { head_step(g0 + 3u, i, base, kg, ng, j_end, &s3, &m3, &l3, &a3, &vw); }
    }

    // Merge the key groups per head (as split_kv.wgsl, with lane set kg holding every head).
    if (lane == 0u) {
        sml[kg * GROUP + 0u] = vec2<f32>(m0, l0);
        if (GROUP > 1u) { sml[kg * GROUP + 1u] = vec2<f32>(m1, l1); }
        if (GROUP > 2u) { sml[kg * GROUP + 2u] = vec2<f32>(m2, l2); }
        if (GROUP > 3u) { sml[kg * GROUP + 3u] = vec2<f32>(m3, l3); }
    }
    workgroupBarrier();
    store_acc(kg, 0u, m0, a0, lane, d, wpr, ng);
    if (GROUP > 1u) { store_acc(kg, 1u, m1, a1, lane, d, wpr, ng); }
    if (GROUP > 2u) { store_acc(kg, 2u, m2, a2, lane, d, wpr, ng); }
    if (GROUP > 3u) { store_acc(kg, 3u, m3, a3, lane, d, wpr, ng); }
    workgroupBarrier();
    write_partials(t, d, ng, g0, n, i, split);
}

// Head c's query words of this lane (0 past the row).
fn qword(c: u32, g0: u32, n: u32, i: u32, d: u32, cw: u32, wpr: u32, h: u32) -> vec4<f32> {
    if (cw >= wpr) {
        return vec4<f32>(0.0);
    }
    let e = ((g0 + c) * n + i) * d + cw * EPW + h * 4u;
    return vec4<f32>(load(q[e / PACK], e), load(q[(e + 1u) / PACK], e + 1u),
                     load(q[(e + 2u) / PACK], e + 2u), load(q[(e + 3u) / PACK], e + 3u));
}

// Head c's output words of lane set kg, weighted by 2^(m - max over the key groups), to sacc.
fn store_acc(kg: u32, c: u32, m: f32, acc: array<vec4<f32>, 2>, lane: u32, d: u32, wpr: u32, ng: u32) {
    let ninf = neg_inf();
    var mx = ninf;
    for (var r = 0u; r < ng; r++) {
        mx = max(mx, sml[r * GROUP + c].x);
    }
    let wk = select(0.0, exp2(m - mx), m > ninf);
    for (var w = 0u; w < WPL; w++) {
        let cw = lane + w * KW;
        if (cw < wpr) {
            for (var h = 0u; h < HW; h++) {
                let x = acc[w * HW + h] * wk;
                let at = (kg * GROUP + c) * d + cw * EPW + h * 4u;
                sacc[at] = x.x; sacc[at + 1u] = x.y; sacc[at + 2u] = x.z; sacc[at + 3u] = x.w;
            }
        }
    }
}

// One head's online-softmax step over the block's UNROLL keys of this lane set: its scores s
// (masked here), running maximum m and sum l, and output words a += P V.
fn head_step(head: u32, i: u32, base: u32, kg: u32, ng: u32, j_end: u32,
             s: ptr<function, array<f32, LMAX>>, m: ptr<function, f32>, l: ptr<function, f32>,
             a: ptr<function, array<vec4<f32>, 2>>, vw: ptr<function, array<vec4<u32>, LMAX>>) {
    let ninf = neg_inf();
    var mb = ninf;
    for (var u = 0u; u < UNROLL; u++) {
        let j = base + kg + u * ng;
        var x = (*s)[u];
        if (HAS_MASK) {
            x += mask_bias(head, i, min(j, j_end - 1u)) * LOG2E;
        }
        x = select(ninf, x, j < j_end);
        (*s)[u] = x;
        mb = max(mb, x);
    }
    let m_new = max(*m, mb);
    let live = m_new > ninf;
    let alpha = select(1.0, exp2(*m - m_new), live);
    (*a)[0] *= alpha;
    (*a)[1] *= alpha;
    var sum = 0.0;
    for (var u = 0u; u < UNROLL; u++) {
        let p = select(0.0, exp2((*s)[u] - m_new), live);
        sum += p;
        var pz = p;
        if (DROPOUT) {
            pz = p * drop1(head, i, min(base + kg + u * ng, j_end - 1u));
        }
        for (var w = 0u; w < WPL; w++) {
            for (var h = 0u; h < HW; h++) {
                (*a)[w * HW + h] += pz * word4((*vw)[u * WPL + w], h);
            }
        }
    }
    *l = *l * alpha + sum;
    *m = m_new;
}
