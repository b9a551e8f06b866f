// tiled_coop_kv.wgsl — the K/V block loads of the cooperative-matrix kernels that stage K and V
// block by block (tiled_coop.wgsl, tiled_coop_rt2.wgsl, tiled_coop_bwd_q.wgsl): they read the
// including kernel's bindings k and v as 16-byte elements (array<vec4<u32>>); tiled_coop_lib.wgsl's
// `stage` writes them to workgroup memory. tiled_coop_bwd_kv.wgsl reads K and V as matrices
// instead and does not include this file.

// Element e of this block's K (or V) rows: 8 halves at row e / d8, column 8 (e % d8); 0 past the
// M keys and past the block's `words` elements.
fn ld_k(kvb: u32, j0: u32, e: u32, n: u32, d8: u32, words: u32) -> vec4<u32> {
    if (e >= words || j0 + e / d8 >= n) {
        return vec4<u32>(0u);
    }
    return k[kvb + j0 * d8 + e];
}

fn ld_v(kvb: u32, j0: u32, e: u32, n: u32, d8: u32, words: u32) -> vec4<u32> {
    if (e >= words || j0 + e / d8 >= n) {
        return vec4<u32>(0u);
    }
    return v[kvb + j0 * d8 + e];
}
