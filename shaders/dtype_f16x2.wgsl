// dtype_f16x2.wgsl — storage prelude: IEEE half as 16-bit patterns, two per u32, converted with the
// core builtins unpack2x16float / pack2x16float: f16 data on adapters *without* SHADER_F16 (used by
// `math`'s conversion dispatches, which therefore run everywhere). (Names: see dtype_f32.wgsl.)
alias st = u32;
const PACK: u32 = 2u;
fn load(w: st, e: u32) -> f32 { return unpack2x16float(w)[e & 1u]; }
fn pack(a: f32, b: f32) -> st { return pack2x16float(vec2<f32>(a, b)); }
// h4 (see dtype_f32.wgsl): 2 words of 2 halves (slots 0 and 1 hold the same word, as 2 and 3).
alias h4 = vec2<u32>;
fn h4_of(x: vec4<st>) -> h4 { return vec2<u32>(x[0], x[2]); }
fn h4_wide(x: h4) -> vec4<f32> { return word4(vec4<u32>(x, 0u, 0u), 0u); }
// 16-byte words (see dtype_f32.wgsl): 8 halves, two per u32, element 2k in the low half.
const EPW: u32 = 8u;
fn word4(w: vec4<u32>, h: u32) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(w[2u * h]), unpack2x16float(w[2u * h + 1u]));
}
