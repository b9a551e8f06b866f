// tiled_bwd_q.wgsl — FlashAttention-2's dQ kernel, deterministic (no float atomics, which WGSL
// lacks): a workgroup of 128 threads owns 32 query rows of one head and walks the key blocks they
// see (up to the diagonal when causal), recomputing P and dS on chip (tiled_bwd_common.wgsl,
// phase A) and accumulating dQ += dS·K in registers (phase B: rows 4(t/16) .. +3, columns
// 4(t%16) .. +3 and, above D = 64, 4(t%16) + 64 .. +3; outer products over the 32 keys of a
// block, dS through workgroup memory as [key][row/4]). Three barriers per key block; the next
// block's K and V are loaded into registers before this block's products
// (tiled_bwd_common.wgsl, `fetch`) and stored after the first barrier.
// Workgroup storage: qs, gs, ks, vs 4 x 32 x (D4 + 1) vec4 (8.5 KiB each for D4 = 16), dst 4 KiB, lse_s,
// dl_s 256 B: 39168 bytes for D4 = 16, 22784 for D4 = 8; staged in 16 bits (8 bytes a vec4), 25856
// for D4 = 20 and 38144 for D4 = 32.

// Bindings 1-6 (Q, K, V, dO, L, D): tiled_bwd_lib.wgsl.
@group(0) @binding(7) var<storage, read_write> dq: array<st>;

var<workgroup> dst: array<vec4<f32>, 256>;  // [key][row/4]: 32 x 8

@compute @workgroup_size(128, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let n = params.seq;
    let d = head_dim();
    let head = params.head_offset + wg.y;
    let i0 = wg.x * BT;
    let tr = t / 16u;
    let tc = t % 16u;
    // Phase B's column vec4 (threads past D / 4 compute a copy of the last one and store nothing).
    let tcc = min(tc, D4 - 1u);
    put_share(true, t, fetch(true, head, i0, t, n, d));
    stage_stats(head, i0, t, n);

    var dq0 = vec4<f32>(0.0); var dq1 = vec4<f32>(0.0); var dq2 = vec4<f32>(0.0); var dq3 = vec4<f32>(0.0);
    // D4 > 16: the second column vec4 tc + 16 (threads past D / 4 again compute a copy).
    let tc2 = min(tc + 16u, D4 - 1u);
    var dq4 = vec4<f32>(0.0); var dq5 = vec4<f32>(0.0); var dq6 = vec4<f32>(0.0); var dq7 = vec4<f32>(0.0);
    // Keys these rows see: all M, or up to the causal diagonal of the block's last row.
    let end = causal_keys(i0 + BT);
    var next = fetch(false, head, 0u, t, n, d);
    for (var j0 = 0u; j0 < end; j0 += BT) {
        // The previous block's K, V and dS are consumed (and Q, dO staged) before K, V go in.
        workgroupBarrier();
        put_share(false, t, next);
        workgroupBarrier();
        if (j0 + BT < end) {
            next = fetch(false, head, j0 + BT, t, n, d);
        }
        let tile = scores(head, i0, j0, t, n, d);
        dst[tc * 8u + tr] = vec4<f32>(tile.ds0.x, tile.ds1.x, tile.ds2.x, tile.ds3.x);
        dst[(tc + 16u) * 8u + tr] = vec4<f32>(tile.ds0.y, tile.ds1.y, tile.ds2.y, tile.ds3.y);
        workgroupBarrier();
        for (var j = 0u; j < BT; j++) {
            let s4 = dst[j * 8u + tr];
            let kr = wide(ks[j * RS + tcc]);
            dq0 += s4.x * kr; dq1 += s4.y * kr; dq2 += s4.z * kr; dq3 += s4.w * kr;
            if (D4 > 16u) {
                let kr2 = wide(ks[j * RS + tc2]);
                dq4 += s4.x * kr2; dq5 += s4.y * kr2; dq6 += s4.z * kr2; dq7 += s4.w * kr2;
            }
        }
    }
    if (4u * tc < d) {
        store_q(head, i0 + 4u * tr, tc, n, d, dq0);
        store_q(head, i0 + 4u * tr + 1u, tc, n, d, dq1);
        store_q(head, i0 + 4u * tr + 2u, tc, n, d, dq2);
        store_q(head, i0 + 4u * tr + 3u, tc, n, d, dq3);
    }
    if (D4 > 16u && 4u * (tc + 16u) < d) {
        store_q(head, i0 + 4u * tr, tc + 16u, n, d, dq4);
        store_q(head, i0 + 4u * tr + 1u, tc + 16u, n, d, dq5);
        store_q(head, i0 + 4u * tr + 2u, tc + 16u, n, d, dq6);
        store_q(head, i0 + 4u * tr + 3u, tc + 16u, n, d, dq7);
    }
}
