// tiled_bwd_d128c.wgsl — the chunked 32 x 32 tile (tiled_bwd_chunk_kv.wgsl, tiled_bwd_chunk_q.wgsl)
// for 64 < D <= 128 in f32: two chunks of 16 vec4, 43264 bytes of workgroup storage for dK/dV
// (the whole D staged in f32 would take 68 KiB).
const D4: u32 = 16u;  // vec4 slots of a staged chunk row
const BT: u32 = 32u;  // query rows and keys of a tile
const NCH: u32 = 2u;  // chunks of D4 vec4 a row
alias sv = vec4<f32>;
fn to_sv(x: vec4<st>) -> sv { return widen4(x, 0u); }
fn wide(x: sv) -> vec4<f32> { return x; }
