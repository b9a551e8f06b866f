//! Every file the tool reads goes through here: it must be a regular file (after links). A FIFO, a
//! device node, a socket or a folder is refused before it is opened, since opening a FIFO for
//! reading blocks until a writer comes (the tool hung on `--q FIFO`) and a device can stream
//! forever. The error says what the path is instead.

use std::fs::File;
use std::io::{Error, ErrorKind, Read, Result};
use std::path::Path;

/// What sits at `path` when it is not a regular file (None for a regular file).
fn not_regular(path: &Path) -> Result<Option<&'static str>> {
    let t = std::fs::metadata(path)?.file_type();
    if t.is_file() {
        return Ok(None);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return Ok(Some("a FIFO"));
        }
        if t.is_socket() {
            return Ok(Some("a socket"));
        }
        if t.is_char_device() || t.is_block_device() {
            return Ok(Some("a device"));
        }
    }
    Ok(Some(if t.is_dir() { "a folder" } else { "not a file" }))
}

/// Opens `path` for reading once it is known to be a regular file.
pub fn open(path: &Path) -> Result<File> {
    if let Some(what) = not_regular(path)? {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("not a regular file ({what})"),
        ));
    }
    File::open(path)
}

/// The most text a gzipped file may inflate to: far above any result file (a full suite's largest
/// is 0.3 MB), far below what would exhaust memory (a small file can inflate a thousandfold).
pub const MAX_INFLATED: u64 = 1 << 30;

/// The whole of a regular file as text; a gzipped one (its first bytes say so, whatever its name:
/// the suites kept in results/ are `*.json.gz`) is inflated, to at most [`MAX_INFLATED`] bytes.
pub fn read_to_string(path: &Path) -> Result<String> {
    let mut bytes = Vec::new();
    open(path)?.read_to_end(&mut bytes)?;
    text(bytes, MAX_INFLATED)
}

/// `bytes` as text, inflated first when gzipped, to at most `limit` bytes.
fn text(mut bytes: Vec<u8>, limit: u64) -> Result<String> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .take(limit + 1)
            .read_to_end(&mut out)?;
        if out.len() as u64 > limit {
            return Err(Error::new(
                ErrorKind::InvalidData,
                format!("gzipped, and inflates to more than {limit} bytes"),
            ));
        }
        bytes = out;
    }
    String::from_utf8(bytes)
        .map_err(|e| Error::new(ErrorKind::InvalidData, format!("not UTF-8 text ({e})")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn folders_and_fifos_are_refused_before_opening() {
        let d = tempfile::tempdir().unwrap();
        let e = super::open(d.path()).unwrap_err();
        assert!(e.to_string().contains("a folder"), "{e}");
        #[cfg(unix)]
        {
            let fifo = d.path().join("f");
            let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
            // SAFETY: a valid NUL-terminated path; mkfifo only creates a node.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            let e = super::open(&fifo).unwrap_err();
            assert!(e.to_string().contains("a FIFO"), "{e}");
        }
        let f = d.path().join("x.txt");
        std::fs::write(&f, "hi").unwrap();
        assert_eq!(super::read_to_string(&f).unwrap(), "hi");
    }

    #[test]
    fn gzipped_text_is_inflated_up_to_the_limit() {
        use std::io::Write;
        let gz = |t: &[u8]| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            e.write_all(t).unwrap();
            e.finish().unwrap()
        };
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("r.json.gz");
        std::fs::write(&f, gz(b"{\"runs\": []}")).unwrap();
        assert_eq!(super::read_to_string(&f).unwrap(), "{\"runs\": []}");
        // A bomb: 1 MB of zeros in about 1 KB is refused past the limit, not inflated whole.
        let e = super::text(gz(&vec![b'0'; 1 << 20]), 1 << 16).unwrap_err();
        assert!(
            e.to_string().contains("inflates to more than 65536 bytes"),
            "{e}"
        );
        assert_eq!(super::text(gz(&[b'0'; 100]), 100).unwrap().len(), 100);
        let e = super::text(gz(&[0xff, 0xfe]), 100).unwrap_err();
        assert!(e.to_string().contains("not UTF-8"), "{e}");
    }
}
