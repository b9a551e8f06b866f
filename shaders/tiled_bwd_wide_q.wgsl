// tiled_bwd_wide_q.wgsl — FlashAttention-2's dQ kernel on the small tiles (tiled_bwd_q.wgsl's wide
// twin; the tile is tiled_bwd_wide.wgsl's): a workgroup of NT threads owns BT query rows of one
// head and walks the key blocks they see (up to the diagonal when causal), recomputing P and dS
// on chip (phase A) and accumulating dQ += dS·K in registers (phase B: rows 4(t/H2) .. +3, column
// vec4 t%H2 and t%H2 + H2, dS through workgroup memory as [key][row/4]). Three barriers per key
// block.
// Workgroup storage: qs, gs, ks, vs 4 x BT x (D4 + 1) vec4, dst BT x BT f32, lse_s, dl_s: 34944
// bytes at D4 = 32 with BT = 16.

// Bindings 1-6 (Q, K, V, dO, L, D): tiled_bwd_lib.wgsl.
@group(0) @binding(7) var<storage, read_write> dq: array<st>;

var<workgroup> qs: array<vec4<f32>, BT * RS>;
var<workgroup> gs: array<vec4<f32>, BT * RS>;
var<workgroup> ks: array<vec4<f32>, BT * RS>;
var<workgroup> vs: array<vec4<f32>, BT * RS>;
var<workgroup> dst: array<vec4<f32>, BT * BT / 4u>;  // [key][row/4]
var<workgroup> lse_s: array<f32, BT>;
var<workgroup> dl_s: array<f32, BT>;

@compute @workgroup_size(NT, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let n = params.seq;
    let d = head_dim();
    let head = params.head_offset + wg.y;
    let i0 = wg.x * BT;
    let tk = t / H2;
    let c = t % H2;
    let tc = t % KH;
    let r0 = a_row(t);
    stage(true, head, i0, t, n, d);
    stage_stats(head, i0, t, n);

    var dq0 = vec4<f32>(0.0); var dq1 = vec4<f32>(0.0); var dq2 = vec4<f32>(0.0); var dq3 = vec4<f32>(0.0);
    var dq4 = vec4<f32>(0.0); var dq5 = vec4<f32>(0.0); var dq6 = vec4<f32>(0.0); var dq7 = vec4<f32>(0.0);
    // Keys these rows see: all M, or up to the causal diagonal of the block's last row.
    let end = causal_keys(i0 + BT);
    for (var j0 = 0u; j0 < end; j0 += BT) {
        // The previous block's K, V and dS are consumed (and Q, dO staged) before K, V go in.
        workgroupBarrier();
        stage(false, head, j0, t, n, d);
        workgroupBarrier();
        let tile = scores(head, i0, j0, t, n, d);
        if (r0 < BT) {
            let at = tc * (BT / 4u) + r0 / 4u;
            let far = (tc + KH) * (BT / 4u) + r0 / 4u;
            dst[at][r0 % 4u] = tile.ds0.x;
            dst[far][r0 % 4u] = tile.ds0.y;
            if (AR == 2u) {
                dst[at][r0 % 4u + 1u] = tile.ds1.x;
                dst[far][r0 % 4u + 1u] = tile.ds1.y;
            }
        }
        workgroupBarrier();
        for (var j = 0u; j < BT; j++) {
            let s4 = dst[j * (BT / 4u) + tk];
            let ka = ks[j * RS + c];
            let kb = ks[j * RS + c + H2];
            dq0 += s4.x * ka; dq1 += s4.y * ka; dq2 += s4.z * ka; dq3 += s4.w * ka;
            dq4 += s4.x * kb; dq5 += s4.y * kb; dq6 += s4.z * kb; dq7 += s4.w * kb;
        }
    }
    let i = i0 + 4u * tk;
    if (4u * c < d) {
        store_q(head, i, c, n, d, dq0);
        store_q(head, i + 1u, c, n, d, dq1);
        store_q(head, i + 2u, c, n, d, dq2);
        store_q(head, i + 3u, c, n, d, dq3);
    }
    if (4u * (c + H2) < d) {
        store_q(head, i, c + H2, n, d, dq4);
        store_q(head, i + 1u, c + H2, n, d, dq5);
        store_q(head, i + 2u, c + H2, n, d, dq6);
        store_q(head, i + 3u, c + H2, n, d, dq7);
    }
}
