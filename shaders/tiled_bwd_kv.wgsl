// tiled_bwd_kv.wgsl — FlashAttention-2's dK/dV kernel: a workgroup of 128 threads owns 32 keys of
// one head and walks the query blocks that see them (from the diagonal when causal), recomputing
// P and dS on chip (tiled_bwd_common.wgsl, phase A) and accumulating in registers (phase B)
//   dV += Pᵀ·dO,   dK += dSᵀ·Q
// as outer products over the 32 rows of a block: thread t owns keys 4(t/16) .. +3 and columns
// 4(t%16) .. +3, and above D = 64 also 4(t%16) + 64 .. +3 (D <= 128). P and dS go through
// workgroup memory ([row][key/4]) between the phases; nothing N x N reaches device memory. Three
// barriers per query block; the next block's Q and dO are loaded into registers before this
// block's products (tiled_bwd_common.wgsl, `fetch`). No atomics: every dK/dV element has one
// owner (dQ has its own kernel, tiled_bwd_q.wgsl).
// Workgroup storage: qs, gs, ks, vs 4 x 32 x (D4 + 1) vec4 (8.5 KiB each for D4 = 16), ps, dss 2 x 4 KiB,
// lse_s, dl_s 256 B: 43264 bytes for D4 = 16, 26880 for D4 = 8; staged in 16 bits (8 bytes a
// vec4), 25856 for D4 = 16, 29952 for D4 = 20 and 42240 for D4 = 32.

// Bindings 1-6 (Q, K, V, dO, L, D): tiled_bwd_lib.wgsl.
@group(0) @binding(7) var<storage, read_write> dk: array<st>;
@group(0) @binding(8) var<storage, read_write> dv: array<st>;

var<workgroup> ps: array<vec4<f32>, 256>;   // [row][key/4]: 32 x 8
var<workgroup> dss: array<vec4<f32>, 256>;

@compute @workgroup_size(128, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let n = params.seq;
    let d = head_dim();
    // wg.y is a K/V head; its kv_group query heads (one without GQA) are walked in turn, their
    // dK and dV contributions summed in the same registers.
    let kvh = params.head_offset / params.kv_group + wg.y;
    let g0 = kvh * params.kv_group;
    let j0 = wg.x * BT;
    let tr = t / 16u;
    let tc = t % 16u;
    // Phase B's column vec4 (threads past D / 4 compute a copy of the last one and store nothing).
    let tcc = min(tc, D4 - 1u);
    put_share(false, t, fetch(false, g0, j0, t, n, d));

    var dk0 = vec4<f32>(0.0); var dk1 = vec4<f32>(0.0); var dk2 = vec4<f32>(0.0); var dk3 = vec4<f32>(0.0);
    var dv0 = vec4<f32>(0.0); var dv1 = vec4<f32>(0.0); var dv2 = vec4<f32>(0.0); var dv3 = vec4<f32>(0.0);
    // D4 > 16: the second column vec4 tc + 16 (threads past D / 4 again compute a copy).
    let tc2 = min(tc + 16u, D4 - 1u);
    var dk4 = vec4<f32>(0.0); var dk5 = vec4<f32>(0.0); var dk6 = vec4<f32>(0.0); var dk7 = vec4<f32>(0.0);
    var dv4 = vec4<f32>(0.0); var dv5 = vec4<f32>(0.0); var dv6 = vec4<f32>(0.0); var dv7 = vec4<f32>(0.0);
    // Causal: rows before j0 see none of these keys; start at the first block that sees key j0.
    let first = first_row_block(j0, BT);
    for (var r = 0u; r < params.kv_group; r++) {
    let head = g0 + r;
    var next = fetch(true, head, first, t, n, d);
    for (var i0 = first; i0 < n; i0 += BT) {
        // The previous block's Q, dO, P and dS are consumed before the next go in.
        workgroupBarrier();
        put_share(true, t, next);
        stage_stats(head, i0, t, n);
        workgroupBarrier();
        if (i0 + BT < n) {
            next = fetch(true, head, i0 + BT, t, n, d);
        }
        let tile = scores(head, i0, j0, t, n, d);
        put(4u * tr, tc, tile.p0, tile.ds0);
        put(4u * tr + 1u, tc, tile.p1, tile.ds1);
        put(4u * tr + 2u, tc, tile.p2, tile.ds2);
        put(4u * tr + 3u, tc, tile.p3, tile.ds3);
        workgroupBarrier();
        // Phase B: keys 4tr .. +3, columns 4tc .. +3.
        for (var i = 0u; i < BT; i++) {
            let p4 = ps[i * 8u + tr];
            let s4 = dss[i * 8u + tr];
            let gr = wide(gs[i * RS + tcc]);
            let qr = wide(qs[i * RS + tcc]);
            dv0 += p4.x * gr; dv1 += p4.y * gr; dv2 += p4.z * gr; dv3 += p4.w * gr;
            dk0 += s4.x * qr; dk1 += s4.y * qr; dk2 += s4.z * qr; dk3 += s4.w * qr;
            if (D4 > 16u) {
                let gr2 = wide(gs[i * RS + tc2]);
                let qr2 = wide(qs[i * RS + tc2]);
                dv4 += p4.x * gr2; dv5 += p4.y * gr2; dv6 += p4.z * gr2; dv7 += p4.w * gr2;
                dk4 += s4.x * qr2; dk5 += s4.y * qr2; dk6 += s4.z * qr2; dk7 += s4.w * qr2;
            }
        }
        // dQ of the block's rows += dS · K (tiled_bwd_kv_dq.wgsl; a no-op without
        // `--bwd-dq atomic`, tiled_bwd_kv_nodq.wgsl).
        add_dq(head, i0, t, n, d);
    }
    }
    let c4 = tc;
    if (4u * c4 < d) {
        store_kv(kvh, j0 + 4u * tr, c4, params.kv_seq, d, dk0, dv0);
        store_kv(kvh, j0 + 4u * tr + 1u, c4, params.kv_seq, d, dk1, dv1);
        store_kv(kvh, j0 + 4u * tr + 2u, c4, params.kv_seq, d, dk2, dv2);
        store_kv(kvh, j0 + 4u * tr + 3u, c4, params.kv_seq, d, dk3, dv3);
    }
    if (D4 > 16u && 4u * (c4 + 16u) < d) {
        store_kv(kvh, j0 + 4u * tr, c4 + 16u, params.kv_seq, d, dk4, dv4);
        store_kv(kvh, j0 + 4u * tr + 1u, c4 + 16u, params.kv_seq, d, dk5, dv5);
        store_kv(kvh, j0 + 4u * tr + 2u, c4 + 16u, params.kv_seq, d, dk6, dv6);
        store_kv(kvh, j0 + 4u * tr + 3u, c4 + 16u, params.kv_seq, d, dk7, dv7);
    }
}

