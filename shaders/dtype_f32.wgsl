// dtype_f32.wgsl — storage prelude: Q, K, V and O stored as f32 (one element per array slot).
//
// Every dtype prelude declares the same names, so each kernel body is written once:
//   st            the storage array's element type
//   PACK          elements per storage slot (1, or 2 for 16-bit patterns in a u32)
//   load(w, e)    element e (an *element* index) as f32, given w = array[e / PACK]
//   pack(a, b)    the storage slot holding elements (a, b); b is ignored when PACK = 1
alias st = f32;
const PACK: u32 = 1u;
fn load(w: st, e: u32) -> f32 { return w; }
fn pack(a: f32, b: f32) -> st { return a; }
// h4: 4 elements as the fused backward's 16-bit staging keeps them (tiled_bwd_d*h.wgsl), from
// 4 raw slots of consecutive elements, the first even (h4_of), and widened (h4_wide): f32 has no
// 16-bit form and keeps vec4<f32> (the host never stages f32 in 16 bits).
alias h4 = vec4<f32>;
fn h4_of(x: vec4<st>) -> h4 { return x; }
fn h4_wide(x: h4) -> vec4<f32> { return x; }
// 16-byte loads (vector kernels bind Q/K/V as array<vec4<u32>>): EPW elements per word, and
// word4(w, h) = elements 4h .. 4h+3 of word w, widened to f32 (h = 0 only, for f32).
const EPW: u32 = 4u;
fn word4(w: vec4<u32>, h: u32) -> vec4<f32> { return bitcast<vec4<f32>>(w); }
