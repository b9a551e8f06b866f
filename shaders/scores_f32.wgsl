// scores_f32.wgsl — scores prelude: how the materialized N x N scores S (then P) are stored, for
// the kernels that move them four at a time (scale.wgsl, mask.wgsl, softmax4.wgsl). Here f32,
// as `unfused` / `unfused-inplace` keep them; scores_f16.wgsl and scores_bf16.wgsl keep them in
// 16 bits, as PyTorch's naive path does in half precision (`unfused-coop`).
//   sw            four consecutive scores as stored (16 bytes here, 8 in 16 bits)
//   s_wide(w)     those four as f32
//   s_narrow(x)   four f32 rounded to the stored form
alias sw = vec4<f32>;
fn s_wide(w: sw) -> vec4<f32> { return w; }
fn s_narrow(x: vec4<f32>) -> sw { return x; }
