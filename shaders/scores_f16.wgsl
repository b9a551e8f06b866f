// scores_f16.wgsl — scores prelude (names: see scores_f32.wgsl): four IEEE halves in two u32
// (element 2k in the low half), rounded to nearest by pack2x16float; -inf stays -inf.
alias sw = vec2<u32>;
fn s_wide(w: sw) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}
fn s_narrow(x: vec4<f32>) -> sw {
    return vec2<u32>(pack2x16float(x.xy), pack2x16float(x.zw));
}
