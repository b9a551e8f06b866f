// tiled_rt_wg.wgsl — row reductions of tiled_rt.wgsl through workgroup memory (appended to it).
//
// Threads 4*ty .. 4*ty + 3 share rows; each publishes its vec4 (one value per row) and reads its
// three partners' after a barrier. Called from uniform control flow only, and tiled_rt.wgsl puts a
// barrier between consecutive calls (the one after writing `pt`), so a call never overwrites
// values its predecessor's readers still need.

var<workgroup> part: array<vec4<f32>, 64>;

fn row_max(x: vec4<f32>, t: u32) -> vec4<f32> {
    part[t] = x;
    workgroupBarrier();
    let g = (t / 4u) * 4u;
    return max(max(part[g], part[g + 1u]), max(part[g + 2u], part[g + 3u]));
}

fn row_sum(x: vec4<f32>, t: u32) -> vec4<f32> {
    part[t] = x;
    workgroupBarrier();
    let g = (t / 4u) * 4u;
    return part[g] + part[g + 1u] + part[g + 2u] + part[g + 3u];
}
