// split_kv_d128.wgsl — split_kv.wgsl's tile for D <= 128: 32 keys per tile, rows of 129 floats
// (16.1 KiB of K in workgroup memory).
const BK: u32 = 32u;
const KP: u32 = 129u;
const KS: u32 = 4128u;
