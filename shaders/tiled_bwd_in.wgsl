// tiled_bwd_in.wgsl — the fused backward kernels' inputs (tiled_bwd_common.wgsl) read one element
// at a time, in the storage dtype: for any D (tiled_bwd_in_words.wgsl takes D a multiple of 8).

@group(0) @binding(1) var<storage, read> q: array<st>;
@group(0) @binding(2) var<storage, read> k: array<st>;
@group(0) @binding(3) var<storage, read> v: array<st>;
@group(0) @binding(4) var<storage, read> g: array<st>;

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
