// probe_fma_f16.wgsl — the f16 arithmetic probe: as probe_fma.wgsl with vec4<f16> chains.
// Compiled only where the adapter has SHADER_F16 (src/probe.rs puts `enable f16;` first).

@group(0) @binding(1) var<storage, read_write> sink: array<f32>;

override ITERS: u32 = 1024u;

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let t = f16(li) * 1e-3h;
    let m = vec4<f16>(f16(params.scale));
    let c = vec4<f16>(1e-3h, 2e-3h, 3e-3h, 4e-3h);
    var a0 = vec4<f16>(t, t + 0.01h, t + 0.02h, t + 0.03h);
    var a1 = a0 + 0.1h;
    var a2 = a0 + 0.2h;
    var a3 = a0 + 0.3h;
    for (var i = 0u; i < ITERS; i++) {
        a0 = fma(a0, m, c);
        a1 = fma(a1, m, c);
        a2 = fma(a2, m, c);
        a3 = fma(a3, m, c);
    }
    let s = a0 + a1 + a2 + a3;
    if (s.x == -1234.0h) {
        sink[0] = f32(s.x + s.y + s.z + s.w);
    }
}
