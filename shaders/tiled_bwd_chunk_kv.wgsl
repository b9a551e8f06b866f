// tiled_bwd_chunk_kv.wgsl — the dK/dV kernel of tiled_bwd_kv.wgsl with the head dimension walked
// in two chunks of D4 vec4 (tiled_bwd_d64c.wgsl: D4 = 8, D <= 64; tiled_bwd_d128c.wgsl: D4 = 16,
// D <= 128), for f32 inputs whose four staged 32-row tiles of the whole D do not fit workgroup
// memory (68 KiB at D = 128 against NVIDIA's 48): the 32 x 32 tile of tiled_bwd_common.wgsl
// instead of the small tiles of tiled_bwd_wide.wgsl (16 x 16 at D = 128).
//
// A workgroup of 128 threads owns 32 keys of one K/V head and walks the query blocks that see
// them. Per query block:
//   phase A, chunk by chunk: stage Q, dO (the block's rows) and K, V (the workgroup's keys) of
//     the chunk, and add its dot products to S and dP (`dots`); then P and dS (`finish`) into
//     workgroup memory, as tiled_bwd_kv.wgsl does;
//   phase B, the last chunk first (its Q and dO are still staged), then the first (re-staged):
//     dV += Pᵀ·dO and dK += dSᵀ·Q for the chunk's columns (thread t: keys 4(t/16) .. +3,
//     chunk column vec4 t % 16 (threads past D4 compute a copy and store nothing)).
// 2 x 2 + 1 + 2 barriers a query block; no register prefetch (loads wait). K and V are staged
// again for every query block (from L2; their device-memory bytes are one pass).
// Workgroup storage: qs, gs, ks, vs 4 x 32 x (D4 + 1) vec4 f32, ps, dss 2 x 4 KiB, lse_s, dl_s
// 256 B: 43264 bytes for D4 = 16, 26880 for D4 = 8.

// Bindings 1-6 (Q, K, V, dO, L, D): tiled_bwd_lib.wgsl.
@group(0) @binding(7) var<storage, read_write> dk: array<st>;
@group(0) @binding(8) var<storage, read_write> dv: array<st>;

var<workgroup> ps: array<vec4<f32>, 256>;   // [row][key/4]: 32 x 8
var<workgroup> dss: array<vec4<f32>, 256>;

// dK and dV of this thread's 4 keys at one chunk column vec4.
struct Grad4 {
    k0: vec4<f32>, k1: vec4<f32>, k2: vec4<f32>, k3: vec4<f32>,
    v0: vec4<f32>, v1: vec4<f32>, v2: vec4<f32>, v3: vec4<f32>,
}

// Phase B over the 32 staged rows: dV += Pᵀ·dO, dK += dSᵀ·Q at chunk column vec4 c4.
fn phase_b(a: Grad4, tr: u32, c4: u32) -> Grad4 {
    var x = a;
    for (var i = 0u; i < BT; i++) {
        let p4 = ps[i * 8u + tr];
        let s4 = dss[i * 8u + tr];
        let gr = wide(gs[i * RS + c4]);
        let qr = wide(qs[i * RS + c4]);
        x.v0 += p4.x * gr; x.v1 += p4.y * gr; x.v2 += p4.z * gr; x.v3 += p4.w * gr;
        x.k0 += s4.x * qr; x.k1 += s4.y * qr; x.k2 += s4.z * qr; x.k3 += s4.w * qr;
    }
    return x;
}

@compute @workgroup_size(128, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let n = params.seq;
    let d = head_dim();
    let kvh = params.head_offset / params.kv_group + wg.y;
    let g0 = kvh * params.kv_group;
    let j0 = wg.x * BT;
    let tr = t / 16u;
    let tc = t % 16u;
    let tcc = min(tc, D4 - 1u);
    var lo = Grad4();  // chunk 0's columns
    var hi = Grad4();  // chunk 1's
    let first = first_row_block(j0, BT);
    for (var r = 0u; r < params.kv_group; r++) {
    let head = g0 + r;
    for (var i0 = first; i0 < n; i0 += BT) {
        var acc = Dots();
        for (var ch = 0u; ch < 2u; ch++) {
            // The previous chunk's (or block's) staged tiles, P and dS are consumed.
            workgroupBarrier();
            if (ch == 0u) {
                stage_stats(head, i0, t, n);
            }
            stage_chunk(true, true, head, i0, t, n, d, ch);
            stage_chunk(false, true, head, j0, t, n, d, ch);
            workgroupBarrier();
            acc = dots(acc, t, D4);
        }
        let tile = finish(acc, head, i0, j0, t, n);
        put(4u * tr, tc, tile.p0, tile.ds0);
        put(4u * tr + 1u, tc, tile.p1, tile.ds1);
        put(4u * tr + 2u, tc, tile.p2, tile.ds2);
        put(4u * tr + 3u, tc, tile.p3, tile.ds3);
        workgroupBarrier();
        hi = phase_b(hi, tr, tcc);
        workgroupBarrier();
        stage_chunk(true, true, head, i0, t, n, d, 0u);
        workgroupBarrier();
        lo = phase_b(lo, tr, tcc);
    }
    }
    if (tc < D4) {
        store4(kvh, j0 + 4u * tr, tc, d, lo, hi);
    }
}

// This thread's 4 keys of dK and dV from key j, chunk column vec4 c4 of both chunks.
fn store4(kvh: u32, j: u32, c4: u32, d: u32, lo: Grad4, hi: Grad4) {
    let m = params.kv_seq;
    let c_hi = c4 + D4;
    store_kv(kvh, j, c4, m, d, lo.k0, lo.v0);
    store_kv(kvh, j + 1u, c4, m, d, lo.k1, lo.v1);
    store_kv(kvh, j + 2u, c4, m, d, lo.k2, lo.v2);
    store_kv(kvh, j + 3u, c4, m, d, lo.k3, lo.v3);
    store_kv(kvh, j, c_hi, m, d, hi.k0, hi.v0);
    store_kv(kvh, j + 1u, c_hi, m, d, hi.k1, hi.v1);
    store_kv(kvh, j + 2u, c_hi, m, d, hi.k2, hi.v2);
    store_kv(kvh, j + 3u, c_hi, m, d, hi.k3, hi.v3);
}
