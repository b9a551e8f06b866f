// tiled_bwd_d256h.wgsl — the chunked 32 x 32 tile (tiled_bwd_chunk_kv.wgsl, tiled_bwd_chunk_q.wgsl)
// for 128 < D <= 256 in f16/bf16: four chunks of 16 vec4 staged in 16 bits, 25856 bytes of
// workgroup storage for dK/dV (within lavapipe's 32 KiB, where the tests run it).
const D4: u32 = 16u;  // vec4 slots of a staged chunk row
const BT: u32 = 32u;  // query rows and keys of a tile
const NCH: u32 = 4u;  // chunks of D4 vec4 a row
// Staged in the storage dtype's 16 bits (sv = h4, 8 bytes a vec4), put as loaded and widened
// when read. f16 and bf16 only (the host's choice; bf16 rows start at even elements, D being even).
alias sv = h4;
fn to_sv(x: vec4<st>) -> sv { return h4_of(x); }
fn wide(x: sv) -> vec4<f32> { return h4_wide(x); }
