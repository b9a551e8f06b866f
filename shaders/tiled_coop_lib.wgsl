// tiled_coop_lib.wgsl — the helpers both cooperative-matrix kernels share (tiled_coop.wgsl, one
// row tile of 16 query rows a subgroup; tiled_coop_rt2.wgsl, two): K/V loads and staging, the
// score reads from `sf`, P's rounding and stores, dropout factors and O's stores. They use the
// including kernel's binding `o`, workgroup arrays (ks, vs, sf, sp), constants (KP, LO) and
// `st_lo` (where P's low part goes: the forward kernels' sl, tiled_coop_lo.wgsl; the backward
// kernels, tiled_coop_bwd_*.wgsl, have LO = 0 and no sl). The kernels that stage K and V block by block
// (all but tiled_coop_bwd_kv.wgsl) also include tiled_coop_kv.wgsl, which reads the bindings k, v.

// Writes element e of a block's K and V (or, in tiled_coop_bwd_kv.wgsl, Q and dO) rows into ks
// and vs ([row][KP]), if the block has it.
fn stage(e: u32, d8: u32, words: u32, kx: vec4<u32>, vx: vec4<u32>) {
    if (e >= words) {
        return;
    }

    let a = (e / d8) * KP + (e % d8) * 8u;
    let k01 = vec2<f16>(unpack2x16float(kx.x)); let k23 = vec2<f16>(unpack2x16float(kx.y));
    let k45 = vec2<f16>(unpack2x16float(kx.z)); let k67 = vec2<f16>(unpack2x16float(kx.w));
    ks[a] = k01.x; ks[a + 1u] = k01.y; ks[a + 2u] = k23.x; ks[a + 3u] = k23.y;
    ks[a + 4u] = k45.x; ks[a + 5u] = k45.y; ks[a + 6u] = k67.x; ks[a + 7u] = k67.y;
    let v01 = vec2<f16>(unpack2x16float(vx.x)); let v23 = vec2<f16>(unpack2x16float(vx.y));
    let v45 = vec2<f16>(unpack2x16float(vx.z)); let v67 = vec2<f16>(unpack2x16float(vx.w));
    vs[a] = v01.x; vs[a + 1u] = v01.y; vs[a + 2u] = v23.x; vs[a + 3u] = v23.y;
    vs[a + 4u] = v45.x; vs[a + 5u] = v45.y; vs[a + 6u] = v67.x; vs[a + 7u] = v67.y;
}

// sf of row `row` at columns c + half, c + 2 + half, c + 4 + half, c + 6 + half ([column][row]:
// the 32 lanes touch 32 different banks).
fn ld_s(fb: u32, half: u32, row: u32, c: u32) -> vec4<f32> {
    let e = fb + (c + half) * 16u + row;
    return vec4<f32>(sf[e], sf[e + 32u], sf[e + 64u], sf[e + 96u]);
}

// Multiplies this lane's 16 elements of sf (row `row`, columns 2c + half) by a.
fn scale_s(fb: u32, half: u32, row: u32, a: f32) {
    for (var c = 0u; c < 32u; c += 2u) {
        let e = fb + (c + half) * 16u + row;
        sf[e] *= a;
    }
}

// x rounded to f16's 11 significant bits (in f16's normal range) by integer operations: a compiler
// may fold f32(f16(x)) back to x — the H200's did, which silently made the low part zero.
fn round_f16(x: vec4<f32>) -> vec4<f32> {
    let u = bitcast<vec4<u32>>(x);
    return bitcast<vec4<f32>>((u + vec4<u32>(0x1000u)) & vec4<u32>(0xFFFFE000u));
}

// P of row `row` at keys c + half, +2, +4, +6 as hi (sp) and, with LO, lo (`st_lo`) f16 parts.
fn st_p(pb: u32, half: u32, row: u32, c: u32, p: vec4<f32>) {
    let e = pb + (c + half) * 16u + row;
    let r = round_f16(p);
    let hi = vec4<f16>(r);
    sp[e] = hi.x;
    sp[e + 32u] = hi.y;
    sp[e + 64u] = hi.z;
    sp[e + 96u] = hi.w;
    if (LO != 0u) {
        st_lo(e, p - r);  // the including kernel's: the forward stores it to sl
    }
}

// Dropout factors of this lane's row i at keys j, j + 2, j + 4, j + 6. The lanes q = lane & 3
// of a quad hold rows 4a .. 4a + 3 (r0 is a multiple of 16) and need the same keys: lane q makes
// the one Philox call of key j + 2q, whose word r belongs to row 4a + r, and the quad exchanges
// words by xor shuffles (lane q ^ d sends its word q): 1 call per lane instead of 4.
fn drop_quad(head: u32, i: u32, j: u32, q: u32) -> vec4<f32> {
    let w = keep_words(head, i >> 2u, j + 2u * q);
    var mine = vec4<u32>(0u);
    mine[q] = w[q];
    mine[q ^ 1u] = subgroupShuffleXor(w[q ^ 1u], 1u);
    mine[q ^ 2u] = subgroupShuffleXor(w[q ^ 2u], 2u);
    mine[q ^ 3u] = subgroupShuffleXor(w[q ^ 3u], 3u);
    return factors(mine);
}

// O of one row at columns c + half, +2, +4, +6, skipping those past D.
fn st_o(ob: u32, d: u32, half: u32, c: u32, x: vec4<f32>) {
    for (var k2 = 0u; k2 < 4u; k2++) {
        let col = c + half + 2u * k2;
        if (col < d) {
            o[ob + col] = pack(x[k2], x[k2]);
        }
    }
}
