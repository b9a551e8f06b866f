// tiled_bwd_wide_kv.wgsl — FlashAttention-2's dK/dV kernel on the small tiles (tiled_bwd_kv.wgsl's
// wide twin; the tile is tiled_bwd_wide.wgsl's): a workgroup of NT threads owns BT keys of one
// K/V head and walks the query blocks that see them (from the diagonal when causal), recomputing
// P and dS on chip (phase A) and accumulating in registers (phase B)
//   dV += Pᵀ·dO,   dK += dSᵀ·Q
// as outer products over the BT rows of a block: thread t owns keys 4(t/H2) .. +3 and the column
// vec4 t%H2 and t%H2 + H2. Three barriers per query block; no atomics.
// Workgroup storage: qs, gs, ks, vs 4 x BT x (D4 + 1) vec4, ps, dss 2 x BT x BT f32, lse_s, dl_s:
// 35968 bytes at D4 = 32 with BT = 16 (each tile file states its own).

// Bindings 1-6 (Q, K, V, dO, L, D): tiled_bwd_lib.wgsl.
@group(0) @binding(7) var<storage, read_write> dk: array<st>;
@group(0) @binding(8) var<storage, read_write> dv: array<st>;

var<workgroup> qs: array<vec4<f32>, BT * RS>;   // [row][d/4]
var<workgroup> gs: array<vec4<f32>, BT * RS>;
var<workgroup> ks: array<vec4<f32>, BT * RS>;   // [key][d/4]
var<workgroup> vs: array<vec4<f32>, BT * RS>;
var<workgroup> ps: array<vec4<f32>, BT * BT / 4u>;   // [row][key/4]
var<workgroup> dss: array<vec4<f32>, BT * BT / 4u>;
var<workgroup> lse_s: array<f32, BT>;
var<workgroup> dl_s: array<f32, BT>;

@compute @workgroup_size(NT, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let n = params.seq;
    let d = head_dim();
    // wg.y is a K/V head; its kv_group query heads are walked in turn (tiled_bwd_kv.wgsl).
    let kvh = params.head_offset / params.kv_group + wg.y;
    let g0 = kvh * params.kv_group;
    let j0 = wg.x * BT;
    let tk = t / H2;
    let c = t % H2;
    let tc = t % KH;
    let r0 = a_row(t);
    stage(false, g0, j0, t, n, d);

    var dk0 = vec4<f32>(0.0); var dk1 = vec4<f32>(0.0); var dk2 = vec4<f32>(0.0); var dk3 = vec4<f32>(0.0);
    var dk4 = vec4<f32>(0.0); var dk5 = vec4<f32>(0.0); var dk6 = vec4<f32>(0.0); var dk7 = vec4<f32>(0.0);
    var dv0 = vec4<f32>(0.0); var dv1 = vec4<f32>(0.0); var dv2 = vec4<f32>(0.0); var dv3 = vec4<f32>(0.0);
    var dv4 = vec4<f32>(0.0); var dv5 = vec4<f32>(0.0); var dv6 = vec4<f32>(0.0); var dv7 = vec4<f32>(0.0);
    // Causal: the first query block whose rows see key j0.
    let first = first_row_block(j0, BT);
    for (var r = 0u; r < params.kv_group; r++) {
    let head = g0 + r;
    for (var i0 = first; i0 < n; i0 += BT) {
        // The previous block's Q, dO, P and dS are consumed before the next go in.
        workgroupBarrier();
        stage(true, head, i0, t, n, d);
        stage_stats(head, i0, t, n);
        workgroupBarrier();
        let tile = scores(head, i0, j0, t, n, d);
        if (r0 < BT) {
            put(r0, tc, tile.p0, tile.ds0);
            if (AR == 2u) {
                put(r0 + 1u, tc, tile.p1, tile.ds1);
            }
        }
        workgroupBarrier();
        // Phase B: keys 4tk .. +3, column vec4 c and c + H2.
        for (var i = 0u; i < BT; i++) {
            let p4 = ps[i * (BT / 4u) + tk];
            let s4 = dss[i * (BT / 4u) + tk];
            let ga = gs[i * RS + c];
            let gb = gs[i * RS + c + H2];
            let qa = qs[i * RS + c];
            let qb = qs[i * RS + c + H2];
            dv0 += p4.x * ga; dv1 += p4.y * ga; dv2 += p4.z * ga; dv3 += p4.w * ga;
            dv4 += p4.x * gb; dv5 += p4.y * gb; dv6 += p4.z * gb; dv7 += p4.w * gb;
            dk0 += s4.x * qa; dk1 += s4.y * qa; dk2 += s4.z * qa; dk3 += s4.w * qa;
            dk4 += s4.x * qb; dk5 += s4.y * qb; dk6 += s4.z * qb; dk7 += s4.w * qb;
        }
    }
    }
    let m = params.kv_seq;
    let j = j0 + 4u * tk;
    if (4u * c < d) {
        store_kv(kvh, j, c, m, d, dk0, dv0);
        store_kv(kvh, j + 1u, c, m, d, dk1, dv1);
        store_kv(kvh, j + 2u, c, m, d, dk2, dv2);
        store_kv(kvh, j + 3u, c, m, d, dk3, dv3);
    }
    if (4u * (c + H2) < d) {
        store_kv(kvh, j, c + H2, m, d, dk4, dv4);
        store_kv(kvh, j + 1u, c + H2, m, d, dk5, dv5);
        store_kv(kvh, j + 2u, c + H2, m, d, dk6, dv6);
        store_kv(kvh, j + 3u, c + H2, m, d, dk7, dv7);
    }
}
