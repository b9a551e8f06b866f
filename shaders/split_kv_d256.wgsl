// split_kv_d256.wgsl — split_kv.wgsl's tile for D <= 256: 16 keys per tile, rows of 257 floats
// (16.1 KiB of K in workgroup memory).
const BK: u32 = 16u;
const KP: u32 = 257u;
const KS: u32 = 4112u;
