// tiled_nolse.wgsl — appended to the fused forward kernels in inference: the logsumexp is not kept
// (see tiled_lse.wgsl).
fn save_lse(head: u32, i: u32, m: f32, l: f32) {}
