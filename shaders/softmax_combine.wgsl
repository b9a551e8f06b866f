// softmax_combine.wgsl — the online-softmax merge shared by softmax.wgsl and softmax4.wgsl
// (appended to them by `shader!(.. + "softmax_combine.wgsl")`).

// Adds (m2, l2) into (m1, l1), where l is a sum of exp(x - m); a side with m = -inf holds nothing
// and is skipped, so partially masked rows never produce -inf - -inf.
fn combine(m1: f32, l1: f32, m2: f32, l2: f32, ninf: f32) -> vec2<f32> {
    if (m2 == ninf) {
        return vec2<f32>(m1, l1);
    }
    if (m1 == ninf) {
        return vec2<f32>(m2, l2);
    }
    let m = max(m1, m2);
    return vec2<f32>(m, l1 * exp(m1 - m) + l2 * exp(m2 - m));
}
