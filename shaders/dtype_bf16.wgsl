// dtype_bf16.wgsl — storage prelude: bfloat16 as 16-bit patterns, two per u32 (element 2k in the low
// half). WGSL has no bf16: a load widens exactly (the pattern is the top half of an f32); a store
// rounds to nearest even. Runs on every adapter. (Names: see dtype_f32.wgsl.)
alias st = u32;
const PACK: u32 = 2u;
fn load(w: st, e: u32) -> f32 {
    return bitcast<f32>(select(w << 16u, w & 0xffff0000u, (e & 1u) == 1u));
}
// f32 -> bf16 bits, round to nearest even; NaN stays a (quiet) NaN.
fn bf16_bits(x: f32) -> u32 {
    let u = bitcast<u32>(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (u >> 16u) | 0x40u;
    }
    return (u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u;
}
fn pack(a: f32, b: f32) -> st { return bf16_bits(a) | (bf16_bits(b) << 16u); }
// h4 (see dtype_f32.wgsl): 2 words of 2 patterns (slots 0 and 1 hold the same word, as 2 and 3).
alias h4 = vec2<u32>;
fn h4_of(x: vec4<st>) -> h4 { return vec2<u32>(x[0], x[2]); }
fn h4_wide(x: h4) -> vec4<f32> { return word4(vec4<u32>(x, 0u, 0u), 0u); }
// 16-byte words (see dtype_f32.wgsl): 8 bf16 patterns, two per u32, element 2k in the low half.
const EPW: u32 = 8u;
fn word4(w: vec4<u32>, h: u32) -> vec4<f32> {
    let a = w[2u * h];
    let b = w[2u * h + 1u];
    return bitcast<vec4<f32>>(vec4<u32>(a << 16u, a & 0xffff0000u, b << 16u, b & 0xffff0000u));
}
