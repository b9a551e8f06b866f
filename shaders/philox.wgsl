// philox.wgsl — dropout's keep decision (appended by `kernel!(.., dropout)` when the run has
// --dropout > 0; shaders/dropout_none.wgsl otherwise): Philox4x32-10 (Random123) as in
// src/dropout.rs, its CPU twin, which the tests pin to Random123's known answers.
//
// Element (i, j) of global head g = b·H + h is kept iff word i & 3 of
// philox4x32_10(counter = (i >> 2, j, g, 0), key = (seed low, seed high)) >= params.drop_threshold;
// kept probabilities are multiplied by params.drop_scale = 1 / (1 - p). One call gives the
// factors of 4 consecutive rows at one key (`drop4`): the kernels that own 4 consecutive rows per
// thread pay one call per 4 scores.
const DROPOUT: bool = true;

// (high, low) 32-bit halves of a * b: WGSL has no 64-bit integers, so from 16-bit pieces.
fn mulhilo(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let mid = ((a0 * b0) >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return vec2<u32>(a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u), a * b);
}

fn philox4x32_10(counter: vec4<u32>, key: vec2<u32>) -> vec4<u32> {
    var c = counter;
    var k = key;
    for (var r = 0u; r < 10u; r++) {
        if (r > 0u) {
            k += vec2<u32>(0x9E3779B9u, 0xBB67AE85u);
        }
        let x = mulhilo(0xD2511F53u, c.x);
        let y = mulhilo(0xCD9E8D57u, c.z);
        c = vec4<u32>(y.x ^ c.y ^ k.x, y.y, x.x ^ c.w ^ k.y, x.y);
    }
    return c;
}

// The Philox words of rows 4 i4 .. 4 i4 + 3 at key j of global head g (word r: row 4 i4 + r).
fn keep_words(g: u32, i4: u32, j: u32) -> vec4<u32> {
    return philox4x32_10(vec4<u32>(i4, j, g, 0u), vec2<u32>(params.drop_key0, params.drop_key1));
}

// Dropout factors (0 or 1 / (1 - p)) of four Philox words.
fn factors(w: vec4<u32>) -> vec4<f32> {
    return select(vec4<f32>(0.0), vec4<f32>(params.drop_scale), w >= vec4<u32>(params.drop_threshold));
}

// Dropout factors of rows 4 i4 .. 4 i4 + 3 at key j of global head g.
fn drop4(g: u32, i4: u32, j: u32) -> vec4<f32> {
    return factors(keep_words(g, i4, j));
}

// The factor of row i alone (a whole call for one score: for kernels without 4 rows per thread).
fn drop1(g: u32, i: u32, j: u32) -> f32 {
    return drop4(g, i >> 2u, j)[i & 3u];
}
