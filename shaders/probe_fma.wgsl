// probe_fma.wgsl — the f32 arithmetic probe: ITERS steps of 4 independent vec4 FMA chains per
// thread (16 scalar chains, enough to cover FMA latency), no memory traffic but one guarded store.
//
// FLOPs per thread = ITERS * 4 chains * 4 lanes * 2 (a multiply-add counts 2). The multiplier and
// addend come from the uniform block so the compiler cannot fold the loop away; the final store
// is conditional on a value the chains never reach, so it costs nothing but keeps them alive.

@group(0) @binding(1) var<storage, read_write> sink: array<f32>;

override ITERS: u32 = 1024u;

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let t = f32(linear_group(wg, nwg) * 256u + li);
    let m = vec4<f32>(params.scale);
    let c = vec4<f32>(1e-3, 2e-3, 3e-3, 4e-3);
    var a0 = vec4<f32>(t, t + 1.0, t + 2.0, t + 3.0) * 1e-6;
    var a1 = a0 + 0.1;
    var a2 = a0 + 0.2;
    var a3 = a0 + 0.3;
    for (var i = 0u; i < ITERS; i++) {
        a0 = fma(a0, m, c);
        a1 = fma(a1, m, c);
        a2 = fma(a2, m, c);
        a3 = fma(a3, m, c);
    }
    let s = a0 + a1 + a2 + a3;
    if (s.x == -12345.0) {
        sink[0] = s.x + s.y + s.z + s.w;
    }
}
