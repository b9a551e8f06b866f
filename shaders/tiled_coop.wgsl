// tiled_coop.wgsl — fused attention on cooperative matrices (tensor cores where the hardware has
// them): the `tiled-coop` variant. f16 Q, K, V and O in device memory; every product accumulates in
// f32; the softmax statistics are f32.
enable wgpu_cooperative_matrix;
//
// A workgroup of 128 threads (four subgroups of 32) owns BR = 64 query rows; subgroup g owns rows
// 16g .. 16g+15. Per key block of BC = 32 keys:
//   1. all threads stage K and V of the block in workgroup memory (f16);
//   2. subgroup g computes S = Q Kᵀ for its 16 rows: 2 tiles of 16 x 16, 4 steps of 16 over D,
//      f16 inputs, f32 accumulator, stored row-major to `ss`;
//   3. thread t owns row t/2 and keys 16(t%2) .. +15: it scales, masks, updates the running max
//      (shared with its partner thread t^1 through `red`) and writes P = exp2(S - m) as two f16
//      parts, P = hi + lo (`ps`, `pl`): one f16 alone rounds P to 11 bits, an error the f16
//      tolerance (inputs exact in f16, everything else f32) does not allow; hi + lo keeps ~22;
//   4. subgroup g computes P V = hi V + lo V for its rows (4 tiles of 16 x 16 over D, 2 steps over
//      the 32 keys, two products each) into `ss`;
//   5. thread t rescales its 32 output columns of row t/2 by alpha = exp2(m_old - m_new) and adds
//      its part of P V. (The output stays in registers: a cooperative matrix cannot be scaled row
//      by row.)
// Cooperative loads: `coopLoadT` reads row-major, `coopLoad` column-major; Kᵀ is K read
// column-major. The S and P V products never reach device memory.
// Workgroup storage: Q 64x64 + K 32x64 + V 32x64 + P hi and lo 2 x 64x32 (f16) = 24 KiB, S / PV
// 64x64 f32 = 16 KiB, zero tile 1 KiB, red 0.5 KiB: 42496 bytes.

@group(0) @binding(1) var<storage, read> q: array<st>;
@group(0) @binding(2) var<storage, read> k: array<st>;
@group(0) @binding(3) var<storage, read> v: array<st>;
@group(0) @binding(4) var<storage, read_write> o: array<st>;

const BR: u32 = 64u;
const BC: u32 = 32u;
const DM: u32 = 64u;  // row pitch of the staged Q, K, V (D <= 64)
const LOG2E: f32 = 1.4426950408889634;
// P's low part is stored times 2^12: unscaled it would mostly be an f16 subnormal, which the
// matrix units may flush to zero (on the H200 the unscaled version gave bit-identical results to
// P in one f16 alone).
const LO_SCALE: f32 = 4096.0;
const LO_UNSCALE: f32 = 0.000244140625;

var<workgroup> qs: array<f16, 4096>;   // [64 rows][64]
var<workgroup> ks: array<f16, 2048>;   // [32 keys][64]
var<workgroup> vs: array<f16, 2048>;   // [32 keys][64]
var<workgroup> ps: array<f16, 2048>;   // [64 rows][32 keys]: P rounded to f16
var<workgroup> pl: array<f16, 2048>;   // [64 rows][32 keys]: (P - ps) * 2^12, the rounding error
                                       // scaled out of f16's subnormal range
var<workgroup> ss: array<f32, 4096>;   // [64 rows][64]: S (first 32 columns), then P V
var<workgroup> zt: array<f32, 256>;    // a zero 16 x 16 tile: the accumulators' start
var<workgroup> red: array<f32, 128>;   // partner exchange of row maxima / sums

@compute @workgroup_size(128, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let n = params.seq;
    let d = params.head_dim;
    let head = params.head_offset + wg.y;
    let i0 = wg.x * BR;
    let base = head * n * d;
    let causal = params.causal != 0u;
    let ninf = neg_inf();
    let sg = t / 32u;           // this thread's subgroup (32-wide subgroups, checked by the host)
    let d16 = (d + 15u) / 16u;  // 16-column steps over D
    let row = t / 2u;           // softmax / output row of this thread
    let half = t % 2u;
    let i = i0 + row;
    let qscale = params.scale * LOG2E;

    zt[t] = 0.0;
    zt[t + 128u] = 0.0;
    for (var e = t; e < BR * DM; e += 128u) {
        let r = e / DM;
        let c = e % DM;
        var x = 0.0;
        if (i0 + r < n && c < d) {
            let ei = base + (i0 + r) * d + c;
            x = load(q[ei / PACK], ei);
        }
        qs[e] = f16(x);
    }

    var m = ninf;
    var l = 0.0;  // this thread's share (16 keys a block) of its row's running sum
    var o0 = vec4<f32>(0.0); var o1 = vec4<f32>(0.0); var o2 = vec4<f32>(0.0); var o3 = vec4<f32>(0.0);
    var o4 = vec4<f32>(0.0); var o5 = vec4<f32>(0.0); var o6 = vec4<f32>(0.0); var o7 = vec4<f32>(0.0);

    var kv_end = n;
    if (causal) {
        kv_end = min(n, i0 + BR);
    }
    for (var j0 = 0u; j0 < kv_end; j0 += BC) {
        workgroupBarrier();
        for (var e = t; e < BC * DM; e += 128u) {
            let r = e / DM;
            let c = e % DM;
            var kx = 0.0;
            var vx = 0.0;
            if (j0 + r < n && c < d) {
                let ei = base + (j0 + r) * d + c;
                kx = load(k[ei / PACK], ei);
                vx = load(v[ei / PACK], ei);
            }
            ks[e] = f16(kx);
            vs[e] = f16(vx);
        }
        workgroupBarrier();

        // 2. S = Q Kᵀ for this subgroup's 16 rows and the block's 32 keys.
        for (var nt = 0u; nt < 2u; nt++) {
            var acc = coopLoadT<coop_mat16x16<f32, C>>(&zt[0], 16u);
            for (var s = 0u; s < d16; s++) {
                let a = coopLoadT<coop_mat16x16<f16, A>>(&qs[sg * 16u * DM + s * 16u], DM);
                let b = coopLoad<coop_mat16x16<f16, B>>(&ks[nt * 16u * DM + s * 16u], DM);
                acc = coopMultiplyAdd(a, b, acc);
            }
            coopStoreT(acc, &ss[sg * 16u * DM + nt * 16u], DM);
        }
        workgroupBarrier();

        // 3. Online softmax: row `row`, keys j0 + 16*half .. +15.
        let kb = j0 + half * 16u;
        let sb = row * DM + half * 16u;
        var s0 = masked(vec4<f32>(ss[sb], ss[sb + 1u], ss[sb + 2u], ss[sb + 3u]) * qscale, head, i, kb, n, causal, ninf);
        var s1 = masked(vec4<f32>(ss[sb + 4u], ss[sb + 5u], ss[sb + 6u], ss[sb + 7u]) * qscale, head, i, kb + 4u, n, causal, ninf);
        var s2 = masked(vec4<f32>(ss[sb + 8u], ss[sb + 9u], ss[sb + 10u], ss[sb + 11u]) * qscale, head, i, kb + 8u, n, causal, ninf);
        var s3 = masked(vec4<f32>(ss[sb + 12u], ss[sb + 13u], ss[sb + 14u], ss[sb + 15u]) * qscale, head, i, kb + 12u, n, causal, ninf);
        red[t] = max(max(max4(s0), max4(s1)), max(max4(s2), max4(s3)));
        workgroupBarrier();
        let m_new = max(m, max(red[t], red[t ^ 1u]));
        let step = online_step(s0, s1, s2, s3, m, l, m_new, ninf);
        m = step.m;
        l = step.l;
        let alpha = step.alpha;
        s0 = step.p0;
        s1 = step.p1;
        s2 = step.p2;
        s3 = step.p3;
        let pb = row * BC + half * 16u;
        store_p(pb, s0);
        store_p(pb + 4u, s1);
        store_p(pb + 8u, s2);
        store_p(pb + 12u, s3);
        workgroupBarrier();

        // 4. P V for this subgroup's 16 rows: D/16 tiles, 2 steps over the 32 keys.
        for (var nt = 0u; nt < d16; nt++) {
            var acc = coopLoadT<coop_mat16x16<f32, C>>(&zt[0], 16u);
            var acc_lo = coopLoadT<coop_mat16x16<f32, C>>(&zt[0], 16u);
            for (var s = 0u; s < 2u; s++) {
                let b = coopLoadT<coop_mat16x16<f16, B>>(&vs[s * 16u * DM + nt * 16u], DM);
                let hi = coopLoadT<coop_mat16x16<f16, A>>(&ps[sg * 16u * BC + s * 16u], BC);
                let lo = coopLoadT<coop_mat16x16<f16, A>>(&pl[sg * 16u * BC + s * 16u], BC);
                acc = coopMultiplyAdd(hi, b, acc);
                acc_lo = coopMultiplyAdd(lo, b, acc_lo);
            }
            coopStoreT(acc + acc_lo * LO_UNSCALE, &ss[sg * 16u * DM + nt * 16u], DM);
        }
        workgroupBarrier();

        // 5. O row `row`, columns 32*half .. +31: rescale, add this block's P V.
        let ob = row * DM + half * 32u;
        o0 = o0 * alpha + ld4(ob);
        o1 = o1 * alpha + ld4(ob + 4u);
        o2 = o2 * alpha + ld4(ob + 8u);
        o3 = o3 * alpha + ld4(ob + 12u);
        o4 = o4 * alpha + ld4(ob + 16u);
        o5 = o5 * alpha + ld4(ob + 20u);
        o6 = o6 * alpha + ld4(ob + 24u);
        o7 = o7 * alpha + ld4(ob + 28u);
    }

    // The row's sum is split over the two partner threads; no allowed key at all: 0 (SDPA's way).
    workgroupBarrier();
    red[t] = l;
    workgroupBarrier();
    let lsum = red[t] + red[t ^ 1u];
    let inv = select(0.0, 1.0 / lsum, lsum > 0.0);
    if (i < n) {
        let c0 = half * 32u;
        store4(base + i * d, c0, d, o0 * inv);
        store4(base + i * d, c0 + 4u, d, o1 * inv);
        store4(base + i * d, c0 + 8u, d, o2 * inv);
        store4(base + i * d, c0 + 12u, d, o3 * inv);
        store4(base + i * d, c0 + 16u, d, o4 * inv);
        store4(base + i * d, c0 + 20u, d, o5 * inv);
        store4(base + i * d, c0 + 24u, d, o6 * inv);
        store4(base + i * d, c0 + 28u, d, o7 * inv);
    }
}

fn ld4(e: u32) -> vec4<f32> {
    return vec4<f32>(ss[e], ss[e + 1u], ss[e + 2u], ss[e + 3u]);
}

// P as hi + lo f16 parts. The rounding goes through pack2x16float/unpack2x16float so that no
// compiler folds f32(f16(p)) back to p (which would make lo zero).
fn store_p(e: u32, p: vec4<f32>) {
    let r = vec4<f32>(unpack2x16float(pack2x16float(p.xy)), unpack2x16float(pack2x16float(p.zw)));
    let hi = vec4<f16>(r);
    let lo = vec4<f16>((p - r) * LO_SCALE);
    ps[e] = hi.x;
    ps[e + 1u] = hi.y;
    ps[e + 2u] = hi.z;
    ps[e + 3u] = hi.w;
    pl[e] = lo.x;
    pl[e + 1u] = lo.y;
    pl[e + 2u] = lo.z;
    pl[e + 3u] = lo.w;
}

// Output columns c .. c+3 of one row (PACK elements per store), skipping those past D.
fn store4(row: u32, c: u32, d: u32, x: vec4<f32>) {
    for (var k2 = 0u; k2 < 4u; k2 += PACK) {
        if (c + k2 < d) {
            let e = row + c + k2;
            o[e / PACK] = pack(x[k2], x[min(k2 + 1u, 3u)]);
        }
    }
}
