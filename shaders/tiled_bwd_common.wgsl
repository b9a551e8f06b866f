// tiled_bwd_common.wgsl — what the two fused backward kernels share (appended to
// tiled_bwd_kv.wgsl and tiled_bwd_q.wgsl, which declare the bindings q, k, v, g (= dO), lse,
// delta and the workgroup arrays qs, gs, ks, vs, lse_s, dl_s).
//
// Tiles of 32 query rows x 32 keys, 128 threads. Staged rows are D4 vec4 over d ([row][d/4], D up
// to 64, zero-padded to a multiple of 4). Phase A (`scores`) gives thread t the rows 4(t/16) .. +3 and
// the keys t%16 and t%16 + 16 of the tile (consecutive threads, consecutive vec4 of ks/vs: no bank
// conflicts), and computes for them S = Q·Kᵀ and dP = dO·Vᵀ as dot products over d, then
// P = exp2(S·scale·log2 e + bias·log2 e - L) (0 where the mask blocks, past N, or for a row with no
// allowed key, whose L is +inf) and dS = P ∘ (dP - D)·scale.

const BT: u32 = 32u;       // rows and keys per tile
const LOG2E: f32 = 1.4426950408889634;
// The head dimension as a pipeline constant (the host sets it to D so the loops over d unroll).
override HD: u32 = 0u;
// D4, the vec4 slots per staged row (8 for D <= 32, 16 for D <= 64), sizes the workgroup arrays:
// a `const` from a third file, tiled_bwd_d32.wgsl or tiled_bwd_d64.wgsl (naga 30 panics on these
// arrays sized by an `override`).

fn head_dim() -> u32 {
    return select(params.head_dim, HD, HD != 0u);
}

// Row (or key) r0 + r of a [N, D] tensor in the storage dtype as vec4 c4 (0 past N or D).
fn row4_q(base: u32, i: u32, c4: u32, n: u32, d: u32) -> vec4<f32> {
    var x = vec4<f32>(0.0);
    if (i < n) {
        for (var c = 0u; c < 4u; c++) {
            if (4u * c4 + c < d) { let e = base + i * d + 4u * c4 + c; x[c] = load(q[e / PACK], e); }
        }
    }
    return x;
}
fn row4_k(base: u32, i: u32, c4: u32, n: u32, d: u32) -> vec4<f32> {
    var x = vec4<f32>(0.0);
    if (i < n) {
        for (var c = 0u; c < 4u; c++) {
            if (4u * c4 + c < d) { let e = base + i * d + 4u * c4 + c; x[c] = load(k[e / PACK], e); }
        }
    }
    return x;
}
fn row4_v(base: u32, i: u32, c4: u32, n: u32, d: u32) -> vec4<f32> {
    var x = vec4<f32>(0.0);
    if (i < n) {
        for (var c = 0u; c < 4u; c++) {
            if (4u * c4 + c < d) { let e = base + i * d + 4u * c4 + c; x[c] = load(v[e / PACK], e); }
        }
    }
    return x;
}
fn row4_g(base: u32, i: u32, c4: u32, n: u32, d: u32) -> vec4<f32> {
    var x = vec4<f32>(0.0);
    if (i < n) {
        for (var c = 0u; c < 4u; c++) {
            if (4u * c4 + c < d) { let e = base + i * d + 4u * c4 + c; x[c] = load(g[e / PACK], e); }
        }
    }
    return x;
}

// Stages query rows i0 .. i0+31 of Q and dO, with their L and D (L = +inf past N).
fn stage_rows(head: u32, i0: u32, t: u32, n: u32, d: u32) {
    let base = head * n * d;
    let d4 = (d + 3u) / 4u;
    for (var w = t; w < BT * D4; w += 128u) {
        let r = w / D4;
        let c4 = w % D4;
        if (c4 < d4) {
            qs[r * D4 + c4] = row4_q(base, i0 + r, c4, n, d);
            gs[r * D4 + c4] = row4_g(base, i0 + r, c4, n, d);
        }
    }
    if (t < BT) {
        let i = i0 + t;
        lse_s[t] = select(bitcast<f32>(0x7f800000u), lse[head * n + min(i, n - 1u)], i < n);
        dl_s[t] = select(0.0, delta[head * n + min(i, n - 1u)], i < n);
    }
}

// Stages keys j0 .. j0+31 of K and V.
fn stage_keys(head: u32, j0: u32, t: u32, n: u32, d: u32) {
    let base = head * n * d;
    let d4 = (d + 3u) / 4u;
    for (var w = t; w < BT * D4; w += 128u) {
        let r = w / D4;
        let c4 = w % D4;
        if (c4 < d4) {
            ks[r * D4 + c4] = row4_k(base, j0 + r, c4, n, d);
            vs[r * D4 + c4] = row4_v(base, j0 + r, c4, n, d);
        }
    }
}

// P and dS of this thread's 4 rows x 2 keys: p[r] / ds[r] = (key tc, key tc + 16) of row 4tr + r.
struct Tile {
    p: array<vec2<f32>, 4>,
    ds: array<vec2<f32>, 4>,
}

fn scores(head: u32, i0: u32, j0: u32, t: u32, n: u32, d: u32) -> Tile {
    let tr = t / 16u;
    let tc = t % 16u;
    let d4 = (d + 3u) / 4u;
    var s: array<vec2<f32>, 4>;
    var dp: array<vec2<f32>, 4>;
    for (var c4 = 0u; c4 < d4; c4++) {
        let k0 = ks[tc * D4 + c4];
        let k1 = ks[(tc + 16u) * D4 + c4];
        let v0 = vs[tc * D4 + c4];
        let v1 = vs[(tc + 16u) * D4 + c4];
        for (var r = 0u; r < 4u; r++) {
            let a = qs[(4u * tr + r) * D4 + c4];
            let b = gs[(4u * tr + r) * D4 + c4];
            s[r] += vec2<f32>(dot(a, k0), dot(a, k1));
            dp[r] += vec2<f32>(dot(b, v0), dot(b, v1));
        }
    }
    let causal = params.causal != 0u;
    let qscale = params.scale * LOG2E;
    var out: Tile;
    for (var r = 0u; r < 4u; r++) {
        let il = 4u * tr + r;
        let i = i0 + il;
        for (var c = 0u; c < 2u; c++) {
            let j = j0 + tc + 16u * c;
            var pv = 0.0;
            if (i < n && j < n && (!causal || j <= i)) {
                let s2 = s[r][c] * qscale + mask_bias(head, i, j) * LOG2E;
                pv = exp2(s2 - lse_s[il]);
            }
            out.p[r][c] = pv;
            out.ds[r][c] = pv * (dp[r][c] - dl_s[il]) * params.scale;
        }
    }
    return out;
}

// Stores 4 gradient values of row `row` (of a [N, D] tensor), columns 4 c4 .. +3, PACK at a time.
fn grad_index(head: u32, row: u32, c4: u32, n: u32, d: u32) -> u32 {
    return (head * n + row) * d + 4u * c4;
}
