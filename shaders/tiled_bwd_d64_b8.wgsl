// tiled_bwd_d64_b8.wgsl — a small tile of the fused backward (tiled_bwd_wide.wgsl) for 32 < D <= 64:
// 8 rows and keys, 16 threads, 9280 bytes of workgroup storage for dK/dV.
const D4: u32 = 16u;  // vec4 slots of a staged row
const BT: u32 = 8u;  // query rows and keys of a tile
