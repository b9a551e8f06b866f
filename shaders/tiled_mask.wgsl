// tiled_mask.wgsl — score masking shared by tiled.wgsl and tiled_coop.wgsl (appended to them by
// `kernel!(.. + "tiled_mask.wgsl", ..)`; they define LOG2E).

// Scores (base 2) of row i with keys j .. j+3: -inf past N or above the diagonal, plus the mask
// bias (in base 2, like the scores) when the problem has one.
fn masked(s: vec4<f32>, head: u32, i: u32, j: u32, n: u32, causal: bool, ninf: f32) -> vec4<f32> {
    let jv = vec4<u32>(j) + vec4<u32>(0u, 1u, 2u, 3u);
    let allowed = (jv < vec4<u32>(n)) & ((jv <= vec4<u32>(i)) | vec4<bool>(!causal));
    var b = vec4<f32>(0.0);
    if (HAS_MASK) {
        b = vec4<f32>(mask_bias(head, i, j), mask_bias(head, i, j + 1u),
                      mask_bias(head, i, j + 2u), mask_bias(head, i, j + 3u)) * LOG2E;
    }
    return select(vec4<f32>(ninf), s + b, allowed);
}

fn max4(v: vec4<f32>) -> f32 {
    return max(max(v.x, v.y), max(v.z, v.w));
}
