// tiled_bwd_d64h.wgsl — the fused backward's 32 x 32 tile (tiled_bwd_common.wgsl) for 32 < D <= 64
// in f16/bf16, staged in 16 bits: 25856 bytes of workgroup storage for dK/dV instead of the f32
// staging's 43264 (tiled_bwd_d64.wgsl), so more workgroups share an SM's memory and half the
// bytes cross it per staged element.
const D4: u32 = 16u;  // vec4 slots of a staged row
const BT: u32 = 32u;  // query rows and keys of a tile
// Staged in the storage dtype's 16 bits (sv = h4, 8 bytes a vec4), put as loaded and widened
// when read. f16 and bf16 only (the host's choice; bf16 rows start at even elements, D being even).
alias sv = h4;
fn to_sv(x: vec4<st>) -> sv { return h4_of(x); }
fn wide(x: sv) -> vec4<f32> { return h4_wide(x); }
