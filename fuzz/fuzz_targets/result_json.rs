//! The result-file reader behind `compare` and `report`: any bytes give rows, a page or an error,
//! never a panic or a hang; a page's text never carries the file's raw HTML; gzipped bytes are
//! inflated (bounded) like the committed suites.
#![no_main]

use libfuzzer_sys::fuzz_target;

use attn_wgpu::report::{compare, html};

fuzz_target!(|data: &[u8]| {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        if let Ok(rows) = compare::parse_value("fuzz.json", &value) {
            let md = compare::markdown(&rows, Some("tiled"));
            assert!(!md.contains("<script"), "raw HTML in the Markdown");
        }
    }
    // As a file, whatever the bytes: a gzipped one (the suites in results/ are) is inflated by
    // infile::read_to_string, to at most its limit.
    let mut f = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut f, data).unwrap();
    if let Ok(inputs) = html::read_inputs(&[f.path()]) {
        let page = html::page(&inputs);
        assert!(!page.contains("<script"), "raw HTML in the page");
    }
});
