// tiled_bwd_d32.wgsl — the fused backward kernels' row width for D <= 32 (see tiled_bwd_common.wgsl).
const D4: u32 = 8u;
