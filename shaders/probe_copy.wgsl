// probe_copy.wgsl — the bandwidth probe: dst = src, vec4<f32> at a time (src/probe.rs).
//
// Each thread copies VPT vec4s spaced one grid apart, so neighbouring threads touch neighbouring
// 16-byte words on every step (coalesced on GPUs, sequential on CPUs). Bytes moved = read + write.
// `params.heads` carries the number of vec4s (the common Params block is reused, see common.wgsl).

@group(0) @binding(1) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<f32>>;

const VPT: u32 = 4u;

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let n = params.heads;
    let threads = nwg.x * nwg.y * 256u;
    let t = linear_group(wg, nwg) * 256u + li;
    for (var k = 0u; k < VPT; k++) {
        let i = t + k * threads;
        if (i < n) {
            dst[i] = src[i];
        }
    }
}
