// tiled_bwd_common.wgsl — the fused backward kernels' 32 x 32 tile (appended to tiled_bwd_kv.wgsl
// and tiled_bwd_q.wgsl, or to their chunked forms tiled_bwd_chunk_kv.wgsl and
// tiled_bwd_chunk_q.wgsl, with tiled_bwd_lib.wgsl and a tile file: tiled_bwd_d32.wgsl and
// tiled_bwd_d64.wgsl (whole rows) and tiled_bwd_d64c.wgsl / tiled_bwd_d128c.wgsl (chunks) stage
// f32, tiled_bwd_d64h.wgsl, tiled_bwd_d80h.wgsl and tiled_bwd_d128h.wgsl the f16/bf16 words).
//
// Tiles of 32 query rows x 32 keys, 128 threads. Staged rows are D4 vec4 over d ([row][d/4], D up
// to 128, zero-padded to a multiple of 4), each vec4 an `sv` of the tile file (read through
// `wide`). Phase A (`scores`) gives thread t the rows 4(t/16) .. +3 and
// the keys t%16 and t%16 + 16 of the tile (consecutive threads, consecutive vec4 of ks/vs: no bank
// conflicts), and computes for them S = Q·Kᵀ and dP = dO·Vᵀ as dot products over d, then
// P = exp2(S·scale·log2 e + bias·log2 e - L) (0 where the mask blocks, past N, or for a row with no
// allowed key, whose L is +inf) and dS = P ∘ (dP - D)·scale; with dropout (factors Z) the P of dV
// is P ∘ Z and dS = P ∘ (dP ∘ Z - D)·scale (D = rowsum(dO ∘ O) is unchanged: O holds the drops).

// The staged tiles every kernel of this tile declares (the entry files add their own P / dS
// tiles): Q and dO rows ([row][d/4], or of one chunk of d in the chunked kernels), K and V rows
// ([key][d/4]), and the rows' L and D.
var<workgroup> qs: array<sv, 32u * RS>;
var<workgroup> gs: array<sv, 32u * RS>;
var<workgroup> ks: array<sv, 32u * RS>;
var<workgroup> vs: array<sv, 32u * RS>;
var<workgroup> lse_s: array<f32, 32>;
var<workgroup> dl_s: array<f32, 32>;

// P and dS of this thread's 4 rows x 2 keys: p<r> / ds<r> = (key tc, key tc + 16) of row 4tr + r.
// Named registers, not arrays indexed in loops, so that no driver puts them in local memory.
struct Tile {
    p0: vec2<f32>, p1: vec2<f32>, p2: vec2<f32>, p3: vec2<f32>,
    ds0: vec2<f32>, ds1: vec2<f32>, ds2: vec2<f32>, ds3: vec2<f32>,
}

fn scores(head: u32, i0: u32, j0: u32, t: u32, n: u32, d: u32) -> Tile {
    return finish(dots(Dots(), t, (d + 3u) / 4u), head, i0, j0, t, n);
}

// Raw S (s<r>) and dP (g<r>) of this thread's 4 rows x 2 keys, as `Tile` holds P and dS.
struct Dots {
    s0: vec2<f32>, s1: vec2<f32>, s2: vec2<f32>, s3: vec2<f32>,
    g0: vec2<f32>, g1: vec2<f32>, g2: vec2<f32>, g3: vec2<f32>,
}

// `acc` plus the dot products over the staged vec4 c4 < d4 (all of d, or one chunk of it:
// tiled_bwd_chunk_kv.wgsl).
fn dots(acc: Dots, t: u32, d4: u32) -> Dots {
    let tr = t / 16u;
    let tc = t % 16u;
    let r0 = 4u * tr;
    var s0 = acc.s0; var s1 = acc.s1; var s2 = acc.s2; var s3 = acc.s3;
    var g0 = acc.g0; var g1 = acc.g1; var g2 = acc.g2; var g3 = acc.g3;
    for (var c4 = 0u; c4 < d4; c4++) {
        let k0 = wide(ks[tc * RS + c4]);
        let k1 = wide(ks[(tc + 16u) * RS + c4]);
        let v0 = wide(vs[tc * RS + c4]);
        let v1 = wide(vs[(tc + 16u) * RS + c4]);
        let a0 = wide(qs[r0 * RS + c4]);
        let a1 = wide(qs[(r0 + 1u) * RS + c4]);
        let a2 = wide(qs[(r0 + 2u) * RS + c4]);
        let a3 = wide(qs[(r0 + 3u) * RS + c4]);
        let b0 = wide(gs[r0 * RS + c4]);
        let b1 = wide(gs[(r0 + 1u) * RS + c4]);
        let b2 = wide(gs[(r0 + 2u) * RS + c4]);
        let b3 = wide(gs[(r0 + 3u) * RS + c4]);
        s0 += vec2<f32>(dot(a0, k0), dot(a0, k1));
        s1 += vec2<f32>(dot(a1, k0), dot(a1, k1));
        s2 += vec2<f32>(dot(a2, k0), dot(a2, k1));
        s3 += vec2<f32>(dot(a3, k0), dot(a3, k1));
        g0 += vec2<f32>(dot(b0, v0), dot(b0, v1));
        g1 += vec2<f32>(dot(b1, v0), dot(b1, v1));
        g2 += vec2<f32>(dot(b2, v0), dot(b2, v1));
        g3 += vec2<f32>(dot(b3, v0), dot(b3, v1));
    }
    return Dots(s0, s1, s2, s3, g0, g1, g2, g3);
}

// P and dS of this thread's rows and keys from their raw S and dP.
fn finish(x: Dots, head: u32, i0: u32, j0: u32, t: u32, n: u32) -> Tile {
    let tr = t / 16u;
    let tc = t % 16u;
    let r0 = 4u * tr;
    let s0 = x.s0; let s1 = x.s1; let s2 = x.s2; let s3 = x.s3;
    let g0 = x.g0; let g1 = x.g1; let g2 = x.g2; let g3 = x.g3;
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
// vec4 w % D4 (at most 8 slots: 32 rows x 32 vec4 / 128 threads; slots past BT x D4 are never
// loaded or put). The slots hold the storage dtype's raw words (tiled_bwd_lib.wgsl, `row4_raw`),
// converted only when put (`to_sv`, the tile file's): a widening right after the load waits for
// the load there, and the prefetch hides nothing (it made f32 1.49x faster and f16 1 %,
// results/EXPERIMENTS.md v20-bwd-ab; raw words made bf16 at D = 64 1.54x faster on the H100, f16
// 1 %, v44-bwd). Where two elements share a u32 word (PACK = 2: bf16) every row starts at an even
// element: D is even there (the host refuses odd D for bf16, src/kernels/tiled_bwd.rs `check`).
// Named registers, not arrays, as for Tile.
struct Share {
    a0: vec4<st>, a1: vec4<st>, a2: vec4<st>, a3: vec4<st>,
    a4: vec4<st>, a5: vec4<st>, a6: vec4<st>, a7: vec4<st>,
    b0: vec4<st>, b1: vec4<st>, b2: vec4<st>, b3: vec4<st>,
    b4: vec4<st>, b5: vec4<st>, b6: vec4<st>, b7: vec4<st>,
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
    if (BT * D4 > 512u) {
        x.a4 = fetch1(rows, false, base, r0, t + 512u, n, d);
        x.b4 = fetch1(rows, true, base, r0, t + 512u, n, d);
        x.a5 = fetch1(rows, false, base, r0, t + 640u, n, d);
        x.b5 = fetch1(rows, true, base, r0, t + 640u, n, d);
        x.a6 = fetch1(rows, false, base, r0, t + 768u, n, d);
        x.b6 = fetch1(rows, true, base, r0, t + 768u, n, d);
        x.a7 = fetch1(rows, false, base, r0, t + 896u, n, d);
        x.b7 = fetch1(rows, true, base, r0, t + 896u, n, d);
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
    put1(rows, t, x.a0, x.b0);
    put1(rows, t + 128u, x.a1, x.b1);
    put1(rows, t + 256u, x.a2, x.b2);
    put1(rows, t + 384u, x.a3, x.b3);
    if (BT * D4 > 512u) {
        put1(rows, t + 512u, x.a4, x.b4);
        put1(rows, t + 640u, x.a5, x.b5);
        put1(rows, t + 768u, x.a6, x.b6);
        put1(rows, t + 896u, x.a7, x.b7);
    }
}

// Slot w's raw words into the staged tiles.
fn put1(rows: bool, w: u32, a: vec4<st>, b: vec4<st>) {
    if (w >= BT * D4) {
        return;
    }
    let at = (w / D4) * RS + w % D4;
    if (rows) {
        qs[at] = to_sv(a);
        gs[at] = to_sv(b);
    } else {
        ks[at] = to_sv(a);
        vs[at] = to_sv(b);
    }
}

// The chunked kernels' staging (tiled_bwd_chunk_kv.wgsl, tiled_bwd_chunk_q.wgsl; the others
// stage through `fetch` and `put_share`).
// Chunk ch (vec4 ch D4 .. ch D4 + D4 - 1 of every row; 0 past D, N or M) of Q and dO (rows =
// true: query rows r0 .. r0 + 31 of head `head`) or of K and V (rows = false: keys r0 .. of its
// K/V head) into the staged tiles, loaded and put at once (no register prefetch); `both` = false
// stages Q (or K) alone.
fn stage_chunk(rows: bool, both: bool, head: u32, r0: u32, t: u32, nq: u32, d: u32, ch: u32) {
    let n = select(params.kv_seq, nq, rows);
    let base = select(kv_head(head), head, rows) * n * d;
    let a = select(1u, 0u, rows);  // K or Q
    let b = select(2u, 3u, rows);  // V or dO
    for (var w = t; w < BT * D4; w += 128u) {
        let row = w / D4;
        let c4 = ch * D4 + w % D4;
        let at = row * RS + w % D4;
        let x = to_sv(row4_raw(a, base, r0 + row, c4, n, d));
        if (rows) {
            qs[at] = x;
        } else {
            ks[at] = x;
        }
        if (both) {
            let y = to_sv(row4_raw(b, base, r0 + row, c4, n, d));
            if (rows) {
                gs[at] = y;
            } else {
                vs[at] = y;
            }
        }
    }
}
