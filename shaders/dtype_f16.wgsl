// dtype_f16.wgsl — storage prelude: IEEE half stored as WGSL f16 (needs SHADER_F16). Loads widen
// to f32; all arithmetic stays f32. (Names: see dtype_f32.wgsl.)
enable f16;
alias st = f16;
const PACK: u32 = 1u;
fn load(w: st, e: u32) -> f32 { return f32(w); }
fn pack(a: f32, b: f32) -> st { return f16(a); }
