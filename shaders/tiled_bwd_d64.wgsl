// tiled_bwd_d64.wgsl — the fused backward's 32 x 32 tile (tiled_bwd_common.wgsl) for 32 < D <= 64.
const D4: u32 = 16u;  // vec4 slots of a staged row
const BT: u32 = 32u;  // query rows and keys of a tile
