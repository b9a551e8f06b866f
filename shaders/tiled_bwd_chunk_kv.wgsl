// tiled_bwd_chunk_kv.wgsl — the dK/dV kernel of tiled_bwd_kv.wgsl with the head dimension walked
// in NCH chunks of D4 vec4 (tiled_bwd_d64c.wgsl: two of 8, D <= 64; tiled_bwd_d128c.wgsl: two of
// 16, D <= 128; tiled_bwd_d256c.wgsl: four of 16, D <= 256, f32; tiled_bwd_d256h.wgsl: four of 16
// staged in 16 bits, D <= 256, f16/bf16), for inputs whose four staged 32-row tiles of the whole D
// do not fit workgroup memory (68 KiB at D = 128 in f32 against NVIDIA's 48): the 32 x 32 tile of
// tiled_bwd_common.wgsl instead of the small tiles of tiled_bwd_wide.wgsl (16 x 16 at D = 128,
// 8 x 8 at D = 256).
//
// A workgroup of 128 threads owns 32 keys of one K/V head and walks the query blocks that see
// them. Per query block:
//   phase A, chunk by chunk: stage Q, dO (the block's rows) and K, V (the workgroup's keys) of
//     the chunk, and add its dot products to S and dP (`dots`); then P and dS (`finish`) into
//     workgroup memory, as tiled_bwd_kv.wgsl does;
//   phase B, the last chunk first (its Q and dO are still staged), then the others (re-staged):
//     dV += Pᵀ·dO and dK += dSᵀ·Q for the chunk's columns (thread t: keys 4(t/16) .. +3,
//     chunk column vec4 t % 16 (threads past D4 compute a copy and store nothing)), into the
//     chunk's named accumulators (c0 .. c3: registers, never an array indexed by the chunk).
// 2 NCH + 1 + 2 (NCH - 1) barriers a query block; no register prefetch (loads wait). K and V are
// staged again for every query block (from L2; their device-memory bytes are one pass).
// Workgroup storage: qs, gs, ks, vs 4 x 32 x (D4 + 1) sv (16 bytes in f32, 8 in 16 bits), ps, dss
// 2 x 4 KiB, lse_s, dl_s 256 B: 43264 bytes for D4 = 16 in f32, 26880 for D4 = 8, 25856 for
// D4 = 16 in 16 bits.

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
    var c0 = Grad4();  // chunk 0's columns
    var c1 = Grad4();  // chunk 1's
    var c2 = Grad4();  // chunk 2's (NCH = 4)
    var c3 = Grad4();  // chunk 3's (NCH = 4)
    let first = first_row_block(j0, BT);
    for (var r = 0u; r < params.kv_group; r++) {
    let head = g0 + r;
    for (var i0 = first; i0 < n; i0 += BT) {
        var acc = Dots();
        for (var ch = 0u; ch < NCH; ch++) {
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
        // Phase B: the last chunk first (still staged), then the others, re-staged.
        for (var b = 0u; b < NCH; b++) {
            let ch = NCH - 1u - b;
            if (b > 0u) {
                workgroupBarrier();
                stage_chunk(true, true, head, i0, t, n, d, ch);
                workgroupBarrier();
            }
            if (ch == 0u) {
                c0 = phase_b(c0, tr, tcc);
            } else if (ch == 1u) {
                c1 = phase_b(c1, tr, tcc);
            } else if (NCH > 2u && ch == 2u) {
                c2 = phase_b(c2, tr, tcc);
            } else if (NCH > 3u) {
                c3 = phase_b(c3, tr, tcc);
            }
        }
    }
    }
    if (tc < D4) {
        let j = j0 + 4u * tr;
        store4(kvh, j, tc, d, c0);
        store4(kvh, j, tc + D4, d, c1);
        if (NCH > 2u) {
            store4(kvh, j, tc + 2u * D4, d, c2);
            store4(kvh, j, tc + 3u * D4, d, c3);
        }
    }
}

// This thread's 4 keys of dK and dV from key j at column vec4 c4 (of the whole row).
fn store4(kvh: u32, j: u32, c4: u32, d: u32, x: Grad4) {
    let m = params.kv_seq;
    store_kv(kvh, j, c4, m, d, x.k0, x.v0);
    store_kv(kvh, j + 1u, c4, m, d, x.k1, x.v1);
    store_kv(kvh, j + 2u, c4, m, d, x.k2, x.v2);
    store_kv(kvh, j + 3u, c4, m, d, x.k3, x.v3);
}
