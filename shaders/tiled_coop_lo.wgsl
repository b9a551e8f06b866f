// tiled_coop_lo.wgsl — the forward cooperative-matrix kernels' (tiled_coop.wgsl,
// tiled_coop_rt2.wgsl) hook for tiled_coop_lib.wgsl's `st_p`: P's low part to their `sl` array,
// with LO != 0. (The backward kernels, LO = 0, define it as a no-op.)

// P's low part at st_p's element e.
fn st_lo(e: u32, x: vec4<f32>) {
    let lo = vec4<f16>(x);
    sl[e] = lo.x;
    sl[e + 32u] = lo.y;
    sl[e + 64u] = lo.z;
    sl[e + 96u] = lo.w;
}
