//! The result-file reader behind `compare` and `report`: any bytes give rows, a page or an error,
//! never a panic or a hang; a page's text never carries the file's raw HTML.
#![no_main]

use libfuzzer_sys::fuzz_target;

use attn_wgpu::report::{compare, html};

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    if let Ok(rows) = compare::parse_value("fuzz.json", &value) {
        let md = compare::markdown(&rows, Some("tiled"));
        assert!(!md.contains("<script"), "raw HTML in the Markdown");
    }
    let mut f = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut f, data).unwrap();
    if let Ok(inputs) = html::read_inputs(&[f.path()]) {
        let page = html::page(&inputs);
        assert!(!page.contains("<script"), "raw HTML in the page");
    }
});
