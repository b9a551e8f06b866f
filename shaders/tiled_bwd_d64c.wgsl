// tiled_bwd_d64c.wgsl — the chunked 32 x 32 tile (tiled_bwd_chunk_kv.wgsl, tiled_bwd_chunk_q.wgsl)
// for 32 < D <= 64 in f32: two chunks of 8 vec4, 26880 bytes of workgroup storage for dK/dV, within
// lavapipe's 32 KiB (where the tests run the chunked kernels' logic).
const D4: u32 = 8u;   // vec4 slots of a staged chunk row
const BT: u32 = 32u;  // query rows and keys of a tile
const NCH: u32 = 2u;  // chunks of D4 vec4 a row
alias sv = vec4<f32>;
fn to_sv(x: vec4<st>) -> sv { return widen4(x, 0u); }
fn wide(x: sv) -> vec4<f32> { return x; }
