// tiled_bwd_in_words.wgsl — the fused backward kernels' inputs (tiled_bwd_common.wgsl) read as
// 16-byte words (4 f32 or 8 halves) and widened once (the dtype prelude's word4), as the forward's
// tiled_v2.wgsl reads them, where D is a multiple of 8: a row's vec4 c4 (elements 4c4 .. 4c4 + 3)
// then lies inside one word, and every tensor is a whole number of words. Else tiled_bwd_in.wgsl.

@group(0) @binding(1) var<storage, read> q: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> k: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> g: array<vec4<u32>>;

// Row i of a [N, D] tensor as vec4 c4 (0 past N or D): Q (which = 0), K (1), V (2) or dO (3).
fn row4(which: u32, base: u32, i: u32, c4: u32, n: u32, d: u32) -> vec4<f32> {
    if (i >= n || 4u * c4 >= d) {
        return vec4<f32>(0.0);
    }
    let e = base + i * d + 4u * c4;  // a multiple of 4
    let w = e / EPW;
    var x = vec4<u32>(0u);
    switch (which) {
        case 0u: { x = q[w]; }
        case 1u: { x = k[w]; }
        case 2u: { x = v[w]; }
        default: { x = g[w]; }
    }
    return word4(x, (e % EPW) / 4u);
}
