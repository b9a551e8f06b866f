// tiled_bwd_d32.wgsl — the fused backward's 32 x 32 tile (tiled_bwd_common.wgsl) for D <= 32.
const D4: u32 = 8u;  // vec4 slots of a staged row
const BT: u32 = 32u;  // query rows and keys of a tile
// Staged as f32 (sv): widened when put (rows start at even elements, tiled_bwd_common.wgsl), read
// as they are.
alias sv = vec4<f32>;
fn to_sv(x: vec4<st>) -> sv { return widen4(x, 0u); }
fn wide(x: sv) -> vec4<f32> { return x; }
