// tiled_bwd_d256c.wgsl — the chunked 32 x 32 tile (tiled_bwd_chunk_kv.wgsl, tiled_bwd_chunk_q.wgsl)
// for 128 < D <= 256 in f32: four chunks of 16 vec4, 43264 bytes of workgroup storage for dK/dV
// (the whole D staged in f32 would take 136 KiB). dK and dV of a thread's 4 keys at one column vec4
// of each chunk take 128 registers.
const D4: u32 = 16u;  // vec4 slots of a staged chunk row
const BT: u32 = 32u;  // query rows and keys of a tile
const NCH: u32 = 4u;  // chunks of D4 vec4 a row
alias sv = vec4<f32>;
fn to_sv(x: vec4<st>) -> sv { return widen4(x, 0u); }
fn wide(x: sv) -> vec4<f32> { return x; }
