// tiled_bwd_d256_b8.wgsl — a small tile of the fused backward (tiled_bwd_wide.wgsl) for 128 < D <= 256:
// 8 rows and keys, 64 threads, 33856 bytes of workgroup storage for dK/dV.
const D4: u32 = 64u;  // vec4 slots of a staged row
const BT: u32 = 8u;  // query rows and keys of a tile
