// dropout_none.wgsl — appended instead of philox.wgsl when the run has no dropout: DROPOUT is a
// constant false, so the kernels' `if (DROPOUT)` blocks are dead code and no Philox work is done.
const DROPOUT: bool = false;

fn keep_words(g: u32, i4: u32, j: u32) -> vec4<u32> {
    return vec4<u32>(0u);
}

fn factors(w: vec4<u32>) -> vec4<f32> {
    return vec4<f32>(1.0);
}

fn drop4(g: u32, i4: u32, j: u32) -> vec4<f32> {
    return vec4<f32>(1.0);
}

fn drop1(g: u32, i: u32, j: u32) -> f32 {
    return 1.0;
}
