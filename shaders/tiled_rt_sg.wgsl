// tiled_rt_sg.wgsl — row reductions of tiled_rt.wgsl through subgroup shuffles (appended to it).
//
// Threads 4*ty .. 4*ty + 3 share rows. With subgroups of at least 4 invocations laid out in
// local-invocation order (what every driver we know of does for a 1-D workgroup; the variant asks
// for subgroup_min_size >= 4 and the validation of every run would catch another layout), those
// four are lanes that differ in their two low bits: two xor-shuffles combine them, with no
// workgroup memory and no barrier.

fn row_max(x: vec4<f32>, t: u32) -> vec4<f32> {
    let a = max(x, subgroupShuffleXor(x, 1u));
    return max(a, subgroupShuffleXor(a, 2u));
}

fn row_sum(x: vec4<f32>, t: u32) -> vec4<f32> {
    let a = x + subgroupShuffleXor(x, 1u);
    return a + subgroupShuffleXor(a, 2u);
}
