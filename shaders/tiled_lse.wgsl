// tiled_lse.wgsl — appended to the fused forward kernels in training mode (`--backward`): each
// row's logsumexp L in base 2 (L = m + log2 l over the scaled scores in base 2), what
// FlashAttention-2's backward needs to recompute P = exp2(S·scale·log2 e - L) without the row
// statistics. A row with no allowed key stores +inf, so that its recomputed P is 0 (zero
// gradients, as its output is 0). Binding 5 follows Q, K, V, O (the mask, if any, comes after).
@group(0) @binding(5) var<storage, read_write> lse: array<f32>;

fn save_lse(head: u32, i: u32, m: f32, l: f32) {
    if (i < params.seq) {
        lse[head * params.seq + i] = select(-neg_inf(), m + log2(l), l > 0.0);
    }
}
