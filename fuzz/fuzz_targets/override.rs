//! `--override NAME=VALUE` parsing and its knob check: any text is a (name, value) that the knobs
//! allow or an error naming why, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok((name, value)) = attn_wgpu::tile::parse_override(s) {
        assert!(value.is_finite());
        assert!(attn_wgpu::tile::KNOBS.iter().any(|k| k.name == name));
    }
});
