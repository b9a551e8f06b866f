// tiled_bwd_d256_b4.wgsl — a small tile of the fused backward (tiled_bwd_wide.wgsl) for 128 < D <= 256:
// 4 rows and keys, 32 threads, 16800 bytes of workgroup storage for dK/dV.
const D4: u32 = 64u;  // vec4 slots of a staged row
const BT: u32 = 4u;  // query rows and keys of a tile
