// tiled_bwd_d128_b16.wgsl — a small tile of the fused backward (tiled_bwd_wide.wgsl) for 64 < D <= 128:
// 16 rows and keys, 64 threads, 35968 bytes of workgroup storage for dK/dV.
const D4: u32 = 32u;  // vec4 slots of a staged row
const BT: u32 = 16u;  // query rows and keys of a tile
