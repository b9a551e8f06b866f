// mask_bias.wgsl — mask prelude with the normalized additive bias buffer (src/mask.rs): f32
// [Bm, Hm, N, M], 0 = takes part, -inf = blocked, a float mask's values otherwise; broadcast over
// batch / heads through zero strides. The host replaces MASK_BINDING with the kernel's binding.
@group(0) @binding(MASK_BINDING) var<storage, read> mask_buf: array<f32>;
const HAS_MASK: bool = true;
// Bias of global head gh (b*H + h), query row i, key j; 0 outside N x M.
fn mask_bias(gh: u32, i: u32, j: u32) -> f32 {
    let n = params.seq;
    let m = params.kv_seq;
    if (i >= n || j >= m) {
        return 0.0;
    }
    let b = gh / params.heads_per_batch;
    let h = gh % params.heads_per_batch;
    return mask_buf[((b * params.mask_bstride + h * params.mask_hstride) * n + i) * m + j];
}
