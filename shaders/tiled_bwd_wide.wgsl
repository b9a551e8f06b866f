// tiled_bwd_wide.wgsl — the small tiles of the fused backward kernels (appended to
// tiled_bwd_wide_kv.wgsl and tiled_bwd_wide_q.wgsl with tiled_bwd_lib.wgsl and a tile file,
// tiled_bwd_d<D>_b<BT>.wgsl, that sets D4 and BT): wide heads, and D = 64 where workgroup memory
// is small.
//
// Workgroup memory holds four staged f32 tiles of BT rows of D (Q, dO, K, V): 32 rows fit at
// D = 64 in NVIDIA's 48 KiB (tiled_bwd_common.wgsl), so wider heads take fewer: BT = 16 at
// D <= 128 and 8 at D <= 256 there, half that in lavapipe's 32 KiB, and BT = 8 at D = 64 in
// 16 KiB (the host picks the largest that fits: src/kernels/tiled_bwd.rs, `Tile`). A tile has
// BT x D4 vec4 and the workgroup NT = BT x D4 / 8 threads, so that staging is 8 vec4 a thread
// and phase B 4 x 2 vec4 (64 threads at D = 128 with BT = 16). A tile is staged straight from
// device memory (no register prefetch: a thread's share of the next Q and dO would be 16 vec4
// more registers beside its 16 vec4 of gradient accumulators).
//
// Phase A (`scores`): thread t owns AR rows (AR = 4 BT / D4, 1 or 2: rows AR(t/KH) .. +AR-1;
// where 4 BT < D4 the threads past BT rows are idle) and the keys t%KH and t%KH + KH (KH = BT / 2)
// and computes S = Q·Kᵀ and dP = dO·Vᵀ over d, then P and dS as tiled_bwd_common.wgsl does.
// Phase B (in the kernels) gives thread t the 4 rows (keys for dK/dV) 4(t/H2) .. +3 and the
// columns vec4 t%H2 and t%H2 + H2 (H2 = D4 / 2).

const NT: u32 = BT * D4 / 8u;    // threads per workgroup
const KH: u32 = BT / 2u;         // phase A: keys tc and tc + KH
const AR: u32 = max(4u * BT / D4, 1u);  // phase A: rows per thread (1 or 2)
const H2: u32 = D4 / 2u;         // phase B: column vec4 c and c + H2

// P and dS of this thread's AR rows x 2 keys: p<r> / ds<r> = (key tc, key tc + KH) of row r0 + r.
struct Tile {
    p0: vec2<f32>, p1: vec2<f32>,
    ds0: vec2<f32>, ds1: vec2<f32>,
}

// This thread's first phase-A row (BT or more: none).
fn a_row(t: u32) -> u32 {
    return AR * (t / KH);
}

fn scores(head: u32, i0: u32, j0: u32, t: u32, n: u32, d: u32) -> Tile {
    let tc = t % KH;
    let r0 = a_row(t);
    var out: Tile;
    if (r0 >= BT) {
        return out;
    }
    let d4 = (d + 3u) / 4u;
    var s0 = vec2<f32>(0.0); var s1 = vec2<f32>(0.0);
    var g0 = vec2<f32>(0.0); var g1 = vec2<f32>(0.0);
    for (var c4 = 0u; c4 < d4; c4++) {
        let k0 = ks[tc * RS + c4];
        let k1 = ks[(tc + KH) * RS + c4];
        let v0 = vs[tc * RS + c4];
        let v1 = vs[(tc + KH) * RS + c4];
        let a0 = qs[r0 * RS + c4];
        let b0 = gs[r0 * RS + c4];
        s0 += vec2<f32>(dot(a0, k0), dot(a0, k1));
        g0 += vec2<f32>(dot(b0, v0), dot(b0, v1));
        if (AR == 2u) {
            let a1 = qs[(r0 + 1u) * RS + c4];
            let b1 = gs[(r0 + 1u) * RS + c4];
            s1 += vec2<f32>(dot(a1, k0), dot(a1, k1));
            g1 += vec2<f32>(dot(b1, v0), dot(b1, v1));
        }
    }
    let j = vec2<u32>(j0 + tc, j0 + tc + KH);
    let e0 = prob(head, i0 + r0, j, n, s0, r0);
    // Dropout (philox.wgsl; factors 1 without it): one call per score, a thread having 1 or 2 rows.
    var z0 = vec2<f32>(1.0);
    if (DROPOUT) {
        z0 = vec2<f32>(drop1(head, i0 + r0, j.x), drop1(head, i0 + r0, j.y));
    }
    out.p0 = e0 * z0;
    out.ds0 = e0 * (g0 * z0 - dl_s[r0]) * params.scale;
    if (AR == 2u) {
        let e1 = prob(head, i0 + r0 + 1u, j, n, s1, r0 + 1u);
        var z1 = vec2<f32>(1.0);
        if (DROPOUT) {
            z1 = vec2<f32>(drop1(head, i0 + r0 + 1u, j.x), drop1(head, i0 + r0 + 1u, j.y));
        }
        out.p1 = e1 * z1;
        out.ds1 = e1 * (g1 * z1 - dl_s[r0 + 1u]) * params.scale;
    }
    return out;
}

// Stages rows r0 .. r0 + BT - 1 of Q and dO (rows = true, query head `head`) or of K and V
// (rows = false, its K/V head) into qs, gs or ks, vs (zeros past N and D): 8 vec4 a thread each.
fn stage(rows: bool, head: u32, r0: u32, t: u32, nq: u32, d: u32) {
    let n = select(params.kv_seq, nq, rows);
    let base = select(kv_head(head), head, rows) * n * d;
    let a = select(1u, 0u, rows);  // Q or K
    let b = select(2u, 3u, rows);  // dO or V
    for (var w = t; w < BT * D4; w += NT) {
        let at = (w / D4) * RS + w % D4;
        let x = row4(a, base, r0 + w / D4, w % D4, n, d);
        let y = row4(b, base, r0 + w / D4, w % D4, n, d);
        if (rows) {
            qs[at] = x;
            gs[at] = y;
        } else {
            ks[at] = x;
            vs[at] = y;
        }
    }
}
