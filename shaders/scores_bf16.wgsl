// scores_bf16.wgsl — scores prelude (names: see scores_f32.wgsl): four bf16 patterns in two u32
// (element 2k in the low half), rounded to nearest even by dtype_bf16.wgsl's bf16_bits (composed
// with the bf16 storage prelude only).
alias sw = vec2<u32>;
fn s_wide(w: sw) -> vec4<f32> {
    return bitcast<vec4<f32>>(
        vec4<u32>(w.x << 16u, w.x & 0xffff0000u, w.y << 16u, w.y & 0xffff0000u)
    );
}
fn s_narrow(x: vec4<f32>) -> sw {
    return vec2<u32>(
        bf16_bits(x.x) | (bf16_bits(x.y) << 16u),
        bf16_bits(x.z) | (bf16_bits(x.w) << 16u)
    );
}
