// tiled_bwd_common.wgsl — the D <= 64 fused backward kernels' tile (appended to tiled_bwd_kv.wgsl
// and tiled_bwd_q.wgsl with tiled_bwd_lib.wgsl and tiled_bwd_d32.wgsl or tiled_bwd_d64.wgsl).
//
// Tiles of 32 query rows x 32 keys, 128 threads. Staged rows are D4 vec4 over d ([row][d/4], D up
// to 64, zero-padded to a multiple of 4). Phase A (`scores`) gives thread t the rows 4(t/16) .. +3 and
// the keys t%16 and t%16 + 16 of the tile (consecutive threads, consecutive vec4 of ks/vs: no bank
// conflicts), and computes for them S = Q·Kᵀ and dP = dO·Vᵀ as dot products over d, then
// P = exp2(S·scale·log2 e + bias·log2 e - L) (0 where the mask blocks, past N, or for a row with no
// allowed key, whose L is +inf) and dS = P ∘ (dP - D)·scale; with dropout (factors Z) the P of dV
// is P ∘ Z and dS = P ∘ (dP ∘ Z - D)·scale (D = rowsum(dO ∘ O) is unchanged: O holds the drops).

// P and dS of this thread's 4 rows x 2 keys: p<r> / ds<r> = (key tc, key tc + 16) of row 4tr + r.
// Named registers, not arrays indexed in loops, so that no driver puts them in local memory.
struct Tile {
    p0: vec2<f32>, p1: vec2<f32>, p2: vec2<f32>, p3: vec2<f32>,
    ds0: vec2<f32>, ds1: vec2<f32>, ds2: vec2<f32>, ds3: vec2<f32>,
}

fn scores(head: u32, i0: u32, j0: u32, t: u32, n: u32, d: u32) -> Tile {
    let tr = t / 16u;
    let tc = t % 16u;
    let d4 = (d + 3u) / 4u;
    let r0 = 4u * tr;
    var s0 = vec2<f32>(0.0); var s1 = vec2<f32>(0.0); var s2 = vec2<f32>(0.0); var s3 = vec2<f32>(0.0);
    var g0 = vec2<f32>(0.0); var g1 = vec2<f32>(0.0); var g2 = vec2<f32>(0.0); var g3 = vec2<f32>(0.0);
    for (var c4 = 0u; c4 < d4; c4++) {
        let k0 = ks[tc * RS + c4];
        let k1 = ks[(tc + 16u) * RS + c4];
        let v0 = vs[tc * RS + c4];
        let v1 = vs[(tc + 16u) * RS + c4];
        let a0 = qs[r0 * RS + c4];
        let a1 = qs[(r0 + 1u) * RS + c4];
        let a2 = qs[(r0 + 2u) * RS + c4];
        let a3 = qs[(r0 + 3u) * RS + c4];
        let b0 = gs[r0 * RS + c4];
        let b1 = gs[(r0 + 1u) * RS + c4];
        let b2 = gs[(r0 + 2u) * RS + c4];
        let b3 = gs[(r0 + 3u) * RS + c4];
        s0 += vec2<f32>(dot(a0, k0), dot(a0, k1));
        s1 += vec2<f32>(dot(a1, k0), dot(a1, k1));
        s2 += vec2<f32>(dot(a2, k0), dot(a2, k1));
        s3 += vec2<f32>(dot(a3, k0), dot(a3, k1));
        g0 += vec2<f32>(dot(b0, v0), dot(b0, v1));
        g1 += vec2<f32>(dot(b1, v0), dot(b1, v1));
        g2 += vec2<f32>(dot(b2, v0), dot(b2, v1));
        g3 += vec2<f32>(dot(b3, v0), dot(b3, v1));
    }
    let j = vec2<u32>(j0 + tc, j0 + tc + 16u);
    var out: Tile;
    let e0 = prob(head, i0 + r0, j, n, s0, r0);
    let e1 = prob(head, i0 + r0 + 1u, j, n, s1, r0 + 1u);
    let e2 = prob(head, i0 + r0 + 2u, j, n, s2, r0 + 2u);
    let e3 = prob(head, i0 + r0 + 3u, j, n, s3, r0 + 3u);
    // Dropout (philox.wgsl; factors 1 without it): P·V used P ∘ Z, so dV takes P ∘ Z and the
    // softmax's backward dP ∘ Z. The 4 rows are consecutive: one call per key.
    var za = vec4<f32>(1.0);
    var zb = vec4<f32>(1.0);
    if (DROPOUT) {
        za = drop4(head, (i0 + r0) / 4u, j.x);
        zb = drop4(head, (i0 + r0) / 4u, j.y);
    }
    let z0 = vec2<f32>(za.x, zb.x);
    let z1 = vec2<f32>(za.y, zb.y);
    let z2 = vec2<f32>(za.z, zb.z);
    let z3 = vec2<f32>(za.w, zb.w);
    out.p0 = e0 * z0; out.p1 = e1 * z1; out.p2 = e2 * z2; out.p3 = e3 * z3;
    out.ds0 = e0 * (g0 * z0 - dl_s[r0]) * params.scale;
    out.ds1 = e1 * (g1 * z1 - dl_s[r0 + 1u]) * params.scale;
    out.ds2 = e2 * (g2 * z2 - dl_s[r0 + 2u]) * params.scale;
    out.ds3 = e3 * (g3 * z3 - dl_s[r0 + 3u]) * params.scale;
    return out;
}

// Register prefetch (the forward's PREFETCH): a thread's share of the next tile's staged rows,
// loaded from device memory before this tile's products and stored to workgroup memory after the
// barrier that frees the tiles. Slot m of thread t is vec4 w = t + 128 m of the tile: row w / D4,
// vec4 w % D4 (at most 4 slots: 32 rows x 16 vec4 / 128 threads). The slots hold the storage
// dtype's raw words (tiled_bwd_lib.wgsl, `row4_raw`), widened to f32 only when put: a widening
// right after the load would wait for the load there, and the prefetch would hide nothing (it
// made f32 1.49x faster and f16 1 %, results/EXPERIMENTS.md v20-bwd-ab). `odd` keeps, per slot
// (bit 2m: a, 2m + 1: b), whether its first element has an odd index (two per u32 word).
struct Share {
    a0: vec4<st>, a1: vec4<st>, a2: vec4<st>, a3: vec4<st>,
    b0: vec4<st>, b1: vec4<st>, b2: vec4<st>, b3: vec4<st>,
    odd: u32,
}

// Q and dO (rows = true) or K and V (rows = false) of rows r0 .. r0+31 of query head `head`
// (K and V: its K/V head), this thread's slots.
fn fetch(rows: bool, head: u32, r0: u32, t: u32, nq: u32, d: u32) -> Share {
    // N query rows of Q, dO; M keys of K, V.
    let n = select(params.kv_seq, nq, rows);
    let base = select(kv_head(head), head, rows) * n * d;
    var x: Share;
    x.a0 = fetch1(rows, false, base, r0, t, n, d);
    x.b0 = fetch1(rows, true, base, r0, t, n, d);
    x.a1 = fetch1(rows, false, base, r0, t + 128u, n, d);
    x.b1 = fetch1(rows, true, base, r0, t + 128u, n, d);
    x.a2 = fetch1(rows, false, base, r0, t + 256u, n, d);
    x.b2 = fetch1(rows, true, base, r0, t + 256u, n, d);
    x.a3 = fetch1(rows, false, base, r0, t + 384u, n, d);
    x.b3 = fetch1(rows, true, base, r0, t + 384u, n, d);
    x.odd = 0u;
    if (PACK == 2u) {
        // A and B of a slot share the row, hence the parity.
        for (var m = 0u; m < 4u; m++) {
            let w = t + 128u * m;
            let odd = (base + (r0 + w / D4) * d) & 1u;
            x.odd |= (odd << (2u * m)) | (odd << (2u * m + 1u));
        }
    }
    return x;
}

fn fetch1(rows: bool, second: bool, base: u32, r0: u32, w: u32, n: u32, d: u32) -> vec4<st> {
    if (w >= BT * D4) {
        return vec4<st>();
    }
    // Q, dO for rows; K, V for keys.
    let which = select(select(1u, 2u, second), select(0u, 3u, second), rows);
    return row4_raw(which, base, r0 + w / D4, w % D4, n, d);
}

fn put_share(rows: bool, t: u32, x: Share) {
    put1(rows, t, widen4(x.a0, x.odd & 1u), widen4(x.b0, (x.odd >> 1u) & 1u));
    put1(rows, t + 128u, widen4(x.a1, (x.odd >> 2u) & 1u), widen4(x.b1, (x.odd >> 3u) & 1u));
    put1(rows, t + 256u, widen4(x.a2, (x.odd >> 4u) & 1u), widen4(x.b2, (x.odd >> 5u) & 1u));
    put1(rows, t + 384u, widen4(x.a3, (x.odd >> 6u) & 1u), widen4(x.b3, (x.odd >> 7u) & 1u));
}

fn put1(rows: bool, w: u32, a: vec4<f32>, b: vec4<f32>) {
    if (w >= BT * D4) {
        return;
    }
    let at = (w / D4) * RS + w % D4;
    if (rows) {
        qs[at] = a;
        gs[at] = b;
    } else {
        ks[at] = a;
        vs[at] = b;
    }
}

