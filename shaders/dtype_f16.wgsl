// dtype_f16.wgsl — storage prelude: IEEE half stored as WGSL f16 (needs SHADER_F16). Loads widen
// to f32; all arithmetic stays f32. (Names: see dtype_f32.wgsl.)
enable f16;
alias st = f16;
const PACK: u32 = 1u;
fn load(w: st, e: u32) -> f32 { return f32(w); }
fn pack(a: f32, b: f32) -> st { return f16(a); }
// h4 (see dtype_f32.wgsl): 4 halves.
alias h4 = vec4<f16>;
fn h4_of(x: vec4<st>) -> h4 { return x; }
fn h4_wide(x: h4) -> vec4<f32> { return vec4<f32>(x); }
// 16-byte words (see dtype_f32.wgsl): 8 halves, two per u32, element 2k in the low half.
const EPW: u32 = 8u;
fn word4(w: vec4<u32>, h: u32) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(w[2u * h]), unpack2x16float(w[2u * h + 1u]));
}
