//! The `.npy` reader behind `--q/--k/--v` and `--mask`: any bytes give a tensor or an error, never
//! a panic, an abort or a huge allocation. The bytes go through a real file, as a user's do.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut f, data).unwrap();
    let _ = attn_wgpu::npy::read_qkv(f.path());
    let _ = attn_wgpu::npy::read_mask(f.path());
});
