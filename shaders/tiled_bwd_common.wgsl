// tiled_bwd_common.wgsl — what the two fused backward kernels share (appended to
// tiled_bwd_kv.wgsl and tiled_bwd_q.wgsl, which declare the bindings q, k, v, g (= dO), lse,
// delta and the workgroup arrays qs, gs, ks, vs, lse_s, dl_s).
//
// Tiles of 32 query rows x 32 keys, 128 threads. Staged rows are D4 vec4 over d ([row][d/4], D up
// to 64, zero-padded to a multiple of 4). Phase A (`scores`) gives thread t the rows 4(t/16) .. +3 and
// the keys t%16 and t%16 + 16 of the tile (consecutive threads, consecutive vec4 of ks/vs: no bank
// conflicts), and computes for them S = Q·Kᵀ and dP = dO·Vᵀ as dot products over d, then
// P = exp2(S·scale·log2 e + bias·log2 e - L) (0 where the mask blocks, past N, or for a row with no
// allowed key, whose L is +inf) and dS = P ∘ (dP - D)·scale; with dropout (factors Z) the P of dV
// is P ∘ Z and dS = P ∘ (dP ∘ Z - D)·scale (D = rowsum(dO ∘ O) is unchanged: O holds the drops).

const BT: u32 = 32u;       // rows and keys per tile
const LOG2E: f32 = 1.4426950408889634;
// The head dimension as a pipeline constant (the host sets it to D so the loops over d unroll).
override HD: u32 = 0u;
// D4, the vec4 slots per staged row (8 for D <= 32, 16 for D <= 64), sizes the workgroup arrays:
// a `const` from a third file, tiled_bwd_d32.wgsl or tiled_bwd_d64.wgsl (naga 30 panics on these
// arrays sized by an `override`). Rows are RS = D4 + 1 vec4 apart: with a stride of D4 (a multiple
// of 32 banks) the 16 threads reading 16 different key rows at the same d in `scores` all hit the
// same banks (a 16-way conflict on every K and V load); one vec4 of padding spreads them.
const RS: u32 = D4 + 1u;

fn head_dim() -> u32 {
    return select(params.head_dim, HD, HD != 0u);
}

// Row i of a [N, D] tensor in the storage dtype as vec4 c4 (0 past N or D): Q (which = 0), K (1),
// V (2) or dO (3). (WGSL passes no storage pointers to functions, hence the switch.)
fn row4(which: u32, base: u32, i: u32, c4: u32, n: u32, d: u32) -> vec4<f32> {
    var x = vec4<f32>(0.0);
    if (i < n) {
        for (var c = 0u; c < 4u; c++) {
            if (4u * c4 + c < d) {
                let e = base + i * d + 4u * c4 + c;
                switch (which) {
                    case 0u: { x[c] = load(q[e / PACK], e); }
                    case 1u: { x[c] = load(k[e / PACK], e); }
                    case 2u: { x[c] = load(v[e / PACK], e); }
                    default: { x[c] = load(g[e / PACK], e); }
                }
            }
        }
    }
    return x;
}

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

// P of row i (local row il) with keys j.x, j.y from their raw scores s: exp2 of the scaled score
// (base 2, plus the bias) minus L; 0 where the mask blocks or past N.
fn prob(head: u32, i: u32, j: vec2<u32>, n: u32, s: vec2<f32>, il: u32) -> vec2<f32> {
    let causal = params.causal != 0u;
    let diag = vec2<i32>(i32(i) + params.causal_off);
    let ok = (j < vec2<u32>(params.kv_seq)) & vec2<bool>(i < n)
        & ((vec2<i32>(j) <= diag) | vec2<bool>(!causal));
    var b = vec2<f32>(0.0);
    if (HAS_MASK) {
        b = vec2<f32>(mask_bias(head, i, j.x), mask_bias(head, i, j.y)) * LOG2E;
    }
    let s2 = s * (params.scale * LOG2E) + b;
    return select(vec2<f32>(0.0), exp2(s2 - vec2<f32>(lse_s[il])), ok);
}

// Stores 4 gradient values of row `row` (of a [N, D] tensor), columns 4 c4 .. +3, PACK at a time.
fn grad_index(head: u32, row: u32, c4: u32, n: u32, d: u32) -> u32 {
    return (head * n + row) * d + 4u * c4;
}

// Register prefetch (the forward's PREFETCH): a thread's share of the next tile's staged rows,
// loaded from device memory before this tile's products and stored to workgroup memory after the
// barrier that frees the tiles. Slot m of thread t is vec4 w = t + 128 m of the tile: row w / D4,
// vec4 w % D4 (at most 4 slots: 32 rows x 16 vec4 / 128 threads).
struct Share {
    a0: vec4<f32>, a1: vec4<f32>, a2: vec4<f32>, a3: vec4<f32>,
    b0: vec4<f32>, b1: vec4<f32>, b2: vec4<f32>, b3: vec4<f32>,
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
    return x;
}

fn fetch1(rows: bool, second: bool, base: u32, r0: u32, w: u32, n: u32, d: u32) -> vec4<f32> {
    if (w >= BT * D4) {
        return vec4<f32>(0.0);
    }
    // Q, dO for rows; K, V for keys.
    let which = select(select(1u, 2u, second), select(0u, 3u, second), rows);
    return row4(which, base, r0 + w / D4, w % D4, n, d);
}

fn put_share(rows: bool, t: u32, x: Share) {
    put1(rows, t, x.a0, x.b0);
    put1(rows, t + 128u, x.a1, x.b1);
    put1(rows, t + 256u, x.a2, x.b2);
    put1(rows, t + 384u, x.a3, x.b3);
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

// L and D of query rows i0 .. i0+31 into lse_s / dl_s (L = +inf past N).
fn stage_stats(head: u32, i0: u32, t: u32, n: u32) {
    if (t < BT) {
        let i = i0 + t;
        lse_s[t] = select(-neg_inf(), lse[head * n + min(i, n - 1u)], i < n);
        dl_s[t] = select(0.0, delta[head * n + min(i, n - 1u)], i < n);
    }
}
