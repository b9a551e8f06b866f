//! Every file the tool writes goes through here, so that no output is ever lost, half-written or
//! written over an input:
//! - [`write_atomic`]: a temp file in the target's folder, synced, then renamed into place. A
//!   symlink is written through (its target is replaced, the link stays); a device node, FIFO,
//!   socket or folder at the path is refused; the file keeps the mode of the one it replaces, or
//!   gets the umask's (0666 & !umask), as any new file.
//! - [`check_writable`]: the same refusals, plus a real write test in the folder, before any work
//!   (a read-only folder or /proc is refused at once, not after the run).
//! - [`check_distinct`]: a command's outputs are distinct from each other and from its inputs,
//!   compared as files (links and `./` spellings resolved), not as strings.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

fn io_err(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Where a write to `path` lands: `path` itself, or the end of its chain of symlinks (which must
/// then exist as a folder entry's parent: a dangling link's target folder must exist).
fn resolve(path: &Path) -> std::io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&p)?;
                p = if target.is_absolute() {
                    target
                } else {
                    p.parent().unwrap_or(Path::new(".")).join(target)
                };
            }
            _ => return Ok(p),
        }
    }
    Err(std::io::Error::other("too many levels of symbolic links"))
}

/// Why an existing entry at `path` (after links) cannot be replaced by a results file.
fn not_a_file(path: &Path) -> Option<String> {
    let m = std::fs::metadata(path).ok()?;
    let t = m.file_type();
    if t.is_file() {
        return None;
    }
    let what = if t.is_dir() {
        "a folder"
    } else {
        kind_of_special(&t)
    };
    Some(format!(
        "{} is {what}, not a regular file: refusing to replace it",
        path.display()
    ))
}

#[cfg(unix)]
fn kind_of_special(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() || t.is_block_device() {
        "a device node"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

#[cfg(not(unix))]
fn kind_of_special(_: &std::fs::FileType) -> &'static str {
    "not a regular file"
}

fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// The temp files being written now: an interrupt removes them ([`remove_in_flight`]) before the
/// process ends, so no `.attn-wgpu-*.tmp` is left beside an output.
static IN_FLIGHT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Removes every temp file being written now: the interrupt handler calls it (main.rs).
pub fn remove_in_flight() {
    if let Ok(v) = IN_FLIGHT.lock() {
        for p in v.iter() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Keeps a temp file's path in [`IN_FLIGHT`] while it lives.
struct Registered(PathBuf);

impl Registered {
    fn new(p: &Path) -> Registered {
        if let Ok(mut v) = IN_FLIGHT.lock() {
            v.push(p.to_path_buf());
        }
        Registered(p.to_path_buf())
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Ok(mut v) = IN_FLIGHT.lock() {
            v.retain(|x| *x != self.0);
        }
    }
}

/// Writes `bytes` to `path` atomically (see the module's comment).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let target = resolve(path).map_err(|e| io_err(path, e))?;
    if let Some(why) = not_a_file(&target) {
        return Err(io_err(path, std::io::Error::other(why)));
    }
    let dir = folder_of(&target);
    let existing = std::fs::metadata(&target).ok().map(|m| m.permissions());
    let mut builder = tempfile::Builder::new();
    builder.prefix(".attn-wgpu-").suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // Created with 0666 like any new file: the kernel applies the umask.
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut tmp = builder.tempfile_in(dir).map_err(|e| io_err(path, e))?;
    let _registered = Registered::new(tmp.path());
    tmp.write_all(bytes).map_err(|e| io_err(path, e))?;
    // The tests of an interrupt during the write hold it open here (tests/hostile.rs).
    if std::env::var_os("ATTN_WGPU_TEST_PAUSE_WRITE").is_some() {
        std::thread::sleep(std::time::Duration::from_secs(20));
    }
    if let Some(perm) = existing {
        std::fs::set_permissions(tmp.path(), perm).map_err(|e| io_err(path, e))?;
    }
    tmp.as_file().sync_all().map_err(|e| io_err(path, e))?;
    tmp.persist(&target).map_err(|e| io_err(path, e.error))?;
    Ok(())
}

/// Checks, before any work, that `path` can be written: its folder exists and takes a new file,
/// and what sits at the path (after links) is a regular file or nothing. The message names the
/// flag and the path.
pub fn check_writable(flag: &str, path: &Path) -> std::result::Result<(), String> {
    let target = resolve(path).map_err(|e| format!("{flag} {}: {e}", path.display()))?;
    if let Some(why) = not_a_file(&target) {
        return Err(format!("{flag} {}: {why}", path.display()));
    }
    let dir = folder_of(&target);
    if !dir.is_dir() {
        return Err(format!(
            "{flag} {}: folder {} does not exist",
            path.display(),
            dir.display()
        ));
    }
    tempfile::Builder::new()
        .prefix(".attn-wgpu-probe-")
        .tempfile_in(dir)
        .map(drop)
        .map_err(|e| {
            format!(
                "{flag} {}: cannot write in folder {}: {e}",
                path.display(),
                dir.display()
            )
        })?;
    // The name itself (and the `.failed` sibling a failing run writes instead) must be one the
    // folder takes: a name too long fails only when it is created, so create it now, then remove
    // it (only where nothing is there yet).
    for name in [target.clone(), failed_run_path(&target)] {
        if std::fs::symlink_metadata(&name).is_ok() {
            continue;
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&name)
            .map_err(|e| {
                format!(
                    "{flag} {}: cannot create {}: {e}",
                    path.display(),
                    name.display()
                )
            })?;
        let _ = std::fs::remove_file(&name);
    }
    Ok(())
}

/// A file's identity: (device, inode) when it exists, else its canonical folder and name.
#[derive(PartialEq, Eq, Debug)]
enum Identity {
    #[cfg(unix)]
    Inode(u64, u64),
    Path(PathBuf),
}

fn identity(path: &Path) -> Identity {
    #[cfg(unix)]
    if let Ok(m) = std::fs::metadata(path) {
        use std::os::unix::fs::MetadataExt;
        return Identity::Inode(m.dev(), m.ino());
    }
    let target = resolve(path).unwrap_or_else(|_| path.to_path_buf());
    let dir =
        std::fs::canonicalize(folder_of(&target)).unwrap_or_else(|_| folder_of(&target).into());
    Identity::Path(match target.file_name() {
        Some(name) => dir.join(name),
        None => dir,
    })
}

/// One path a command reads or writes, with the flag that named it.
pub struct Named<'a> {
    pub flag: &'a str,
    pub path: &'a Path,
    pub output: bool,
}

impl<'a> Named<'a> {
    pub fn input(flag: &'a str, path: &'a Path) -> Self {
        Named {
            flag,
            path,
            output: false,
        }
    }

    pub fn output(flag: &'a str, path: &'a Path) -> Self {
        Named {
            flag,
            path,
            output: true,
        }
    }
}

/// Refuses two outputs naming the same file, and an output naming an input; the message names
/// both flags and the path.
pub fn check_distinct(paths: &[Named]) -> std::result::Result<(), String> {
    let ids: Vec<Identity> = paths.iter().map(|n| identity(n.path)).collect();
    for (i, a) in paths.iter().enumerate() {
        for (j, b) in paths.iter().enumerate().skip(i + 1) {
            if !(a.output || b.output) || ids[i] != ids[j] {
                continue;
            }
            let (out, other) = if a.output { (a, b) } else { (b, a) };
            let role = if other.output { "output" } else { "input" };
            return Err(format!(
                "{} {} and {} {} name the same file: writing {} would replace the {role}",
                a.flag,
                a.path.display(),
                b.flag,
                b.path.display(),
                out.flag
            ));
        }
    }
    Ok(())
}

/// Where the results of a run that failed validation go: `path` when nothing is there yet, else
/// `<stem>.failed.<ext>` beside it, so an earlier (passing) file is never replaced by a failing one.
pub fn failed_run_path(path: &Path) -> PathBuf {
    let target = resolve(path).unwrap_or_else(|_| path.to_path_buf());
    if std::fs::metadata(&target).is_err() {
        return path.to_path_buf();
    }
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match path.extension() {
        Some(e) => format!("{stem}.failed.{}", e.to_string_lossy()),
        None => format!("{stem}.failed"),
    };
    path.with_file_name(name)
}
