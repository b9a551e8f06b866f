// common.wgsl — prepended to every kernel of attn-wgpu (see src/kernels/mod.rs, `shader!` and
// `kernel!`; a dtype prelude, shaders/dtype_*.wgsl, may come before it).
//
// Every dispatch gets its own `Params` uniform at binding 0 (src/plan.rs, struct Params), so one
// kernel can be dispatched over a slice of the heads without recompiling it.
struct Params {
    heads: u32,        // heads covered by this dispatch (B*H or a chunk of it)
    seq: u32,          // N
    head_dim: u32,     // D
    causal: u32,       // 1: key j takes part in row i iff j <= i (top-left aligned, as SDPA's is_causal)
    scale: f32,        // softmax scale, 1/sqrt(D) by default
    neg_inf_bits: u32, // bit pattern of -inf: WGSL has no infinite literal, so it comes in at run time
    head_offset: u32,  // first global head of this dispatch (chunked plans)
    heads_per_batch: u32, // H
    mask_bstride: u32, // mask bias [Bm, Hm, N, N]: N x N blocks per batch element (0: broadcast)
    mask_hstride: u32, // ... and per head (0: broadcast)
    factor: f32,       // kernel-specific factor (math: sqrt(scale))
    drop_threshold: u32, // dropout: P dropped iff its Philox word < this (shaders/philox.wgsl)
    drop_scale: f32,   // ... kept P multiplied by 1 / (1 - p)
    drop_key0: u32,    // ... the Philox key: the run's seed, low word
    drop_key1: u32,    // ... and high word
    kv_group: u32,     // H / Hkv: global query head g reads K/V head g / kv_group (GQA)
    kv_seq: u32,       // M: keys per head (seq is N, the query rows)
    causal_off: i32,   // causal: key j takes part in row i iff j <= i + causal_off (0 top-left, M - N bottom-right)
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;

// The K/V head of global query head g (grouped-query attention; g itself without it).
fn kv_head(g: u32) -> u32 {
    return g / params.kv_group;
}

// Whether the causal rule lets key j take part in query row i (always true without causal).
fn causal_ok(i: u32, j: u32) -> bool {
    return params.causal == 0u || i32(j) <= i32(i) + params.causal_off;
}

// The keys 0 .. k that query rows before `end` may see: all M, or up to the causal diagonal
// (0 when the diagonal lies left of key 0).
fn causal_keys(end: u32) -> u32 {
    if (params.causal == 0u) {
        return params.kv_seq;
    }
    return u32(clamp(i32(end) + params.causal_off, 0, i32(params.kv_seq)));
}

// The first query row that sees key j (row i sees keys up to i + causal_off; 0 without causal),
// rounded down to a multiple of `block`: where a backward pass owning key j starts its walk.
fn first_row_block(j: u32, block: u32) -> u32 {
    if (params.causal == 0u) {
        return 0u;
    }
    return u32(clamp(i32(j) - params.causal_off, 0, i32(params.seq))) / block * block;
}

fn neg_inf() -> f32 {
    return bitcast<f32>(params.neg_inf_bits);
}

// Grids larger than 65535 workgroups are split over x and y (src/plan.rs, grid_2d).
fn linear_group(wg: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wg.x + wg.y * nwg.x;
}
