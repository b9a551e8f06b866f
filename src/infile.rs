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

/// The whole of a regular file as text.
pub fn read_to_string(path: &Path) -> Result<String> {
    let mut s = String::new();
    open(path)?.read_to_string(&mut s)?;
    Ok(s)
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
}
