// tiled_bwd_d64.wgsl — the fused backward kernels' row width for 32 < D <= 64 (see tiled_bwd_common.wgsl).
const D4: u32 = 16u;
