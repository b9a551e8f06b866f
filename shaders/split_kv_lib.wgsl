// split_kv_lib.wgsl — what both split passes (split_kv.wgsl, split_kv_hpl.wgsl) share, appended
// to them: they declare sacc, sml, po, pml and the overrides GROUP, SPLITS.

// The slice's partials, once every key group's (m, l) is in sml and its weighted output in sacc
// ([key group][head][D]): the output summed over the NG key groups, and the merged (m, l) of each
// of the GROUP heads (g0 .. g0 + GROUP - 1) of query row i.
fn write_partials(t: u32, d: u32, ng: u32, g0: u32, n: u32, i: u32, split: u32) {
    let ninf = neg_inf();
    for (var e = t; e < GROUP * d; e += WG) {
        let hg = e / d;
        let c = e % d;
        var o = 0.0;
        for (var r = 0u; r < ng; r++) {
            o += sacc[(r * GROUP + hg) * d + c];
        }
        po[(((g0 + hg) * n + i) * SPLITS + split) * d + c] = o;
    }
    if (t < GROUP) {
        var mt = ninf;
        for (var r = 0u; r < ng; r++) {
            mt = max(mt, sml[r * GROUP + t].x);
        }
        var l = 0.0;
        for (var r = 0u; r < ng; r++) {
            let ml = sml[r * GROUP + t];
            if (ml.x > ninf) {
                l += ml.y * exp2(ml.x - mt);
            }
        }
        pml[((g0 + t) * n + i) * SPLITS + split] = vec2<f32>(mt, l);
    }
}
