//! `.npy` in and out (crate `npyz`): bring-your-own Q/K/V/mask, the output, and `--save-inputs`.
//!
//! - Q, K, V: `[B, H, N, D]`, float32 or float16, C order; the three must agree in shape and dtype.
//! - masks: bool or float32, `[N, N]`, `[B, 1, N, N]` or `[B, H, N, N]` (checked in `mask.rs`).
//! - outputs: float32 or float16 as the run's dtype; bf16 has no numpy dtype, so bf16 tensors are
//!   written as float32 holding exactly the bf16 values (`torch.from_numpy(a).bfloat16()` is exact).
//!
//! Every error names the file, what was expected and what was found. Writes are atomic (a temp
//! file in the target's folder, then rename).

use std::io::BufReader;
use std::path::Path;

use npyz::WriterBuilder;

use crate::mask::{MaskValues, UserMask};
use crate::problem::DType;
use crate::{Error, Result};

fn bad(path: &Path, msg: String) -> Error {
    Error::InvalidProblem(format!("{}: {msg}", path.display()))
}

/// The header numpy writes is a flat dict (`{'descr': '<f4', 'fortran_order': False, 'shape':
/// (2, 3), }`): at most a tuple inside a dict, at most 64 KiB. A deeper or longer one is refused
/// before npyz parses it (its parser took minutes on a header of nested brackets the fuzzer made).
fn check_header(path: &Path, f: &mut std::fs::File) -> Result<()> {
    use std::io::{Read, Seek};
    let malformed = |why: &str| bad(path, format!("not a valid .npy file ({why})"));
    let mut head = [0u8; 12];
    let got = f
        .read(&mut head)
        .map_err(|e| bad(path, format!("cannot read: {e}")))?;
    if got < 10 || &head[..6] != b"\x93NUMPY" {
        return Err(malformed("no .npy magic"));
    }
    let (len, start) = match head[6] {
        1 => (u16::from_le_bytes([head[8], head[9]]) as u64, 10),
        2 | 3 if got >= 12 => (
            u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as u64,
            12,
        ),
        v => return Err(malformed(&format!("format version {v}"))),
    };
    if len > 65_536 {
        return Err(malformed(&format!("a header of {len} bytes")));
    }
    let mut text = vec![0u8; len as usize];
    f.seek(std::io::SeekFrom::Start(start))
        .and_then(|_| f.read_exact(&mut text))
        .map_err(|_| malformed("the header is cut short"))?;
    let mut depth = 0i32;
    for c in text {
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            _ => {}
        }
        if depth > 2 {
            return Err(malformed("a header nested deeper than numpy writes"));
        }
    }
    f.rewind()
        .map_err(|e| bad(path, format!("cannot read: {e}")))
}

/// Opens an .npy file and returns its header (shape, type string) and reader.
fn open(path: &Path) -> Result<npyz::NpyFile<BufReader<std::fs::File>>> {
    let mut f = crate::infile::open(path).map_err(|e| bad(path, format!("cannot open: {e}")))?;
    check_header(path, &mut f)?;
    let npy = npyz::NpyFile::new(BufReader::new(f))
        .map_err(|e| bad(path, format!("not a valid .npy file ({e})")))?;
    if npy.order() != npyz::Order::C {
        return Err(bad(
            path,
            "Fortran-ordered arrays are not supported; save a C-contiguous array".into(),
        ));
    }
    Ok(npy)
}

fn type_str(npy: &npyz::NpyFile<BufReader<std::fs::File>>) -> String {
    match npy.dtype() {
        npyz::DType::Plain(ts) => ts.to_string(),
        other => other.descr(),
    }
}

/// The header's shape must fit the file: its element count times `item` bytes at most the file's
/// size (else a forged header would make the reader allocate for data that is not there).
fn check_len(path: &Path, shape: &[u64], item: u64) -> Result<()> {
    let file = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let bytes = shape
        .iter()
        .try_fold(item, |a, &d| a.checked_mul(d))
        .filter(|&b| b <= file);
    match bytes {
        Some(_) => Ok(()),
        None => Err(bad(
            path,
            format!(
                "the header's shape {shape:?} needs more data than the file's {file} bytes hold"
            ),
        )),
    }
}

fn read_err(path: &Path, e: std::io::Error) -> Error {
    bad(
        path,
        format!(
            "data is truncated or corrupt (expected as many values as the header's shape): {e}"
        ),
    )
}

/// A Q/K/V tensor: shape, dtype and values widened to f32.
#[derive(Debug, Clone)]
pub struct Tensor {
    pub shape: Vec<u64>,
    pub dtype: DType,
    pub values: Vec<f32>,
}

/// Reads a `[B, H, N, D]` float32 or float16 tensor.
pub fn read_qkv(path: &Path) -> Result<Tensor> {
    let npy = open(path)?;
    let shape = npy.shape().to_vec();
    let ts = type_str(&npy);
    if shape.len() != 4 {
        return Err(bad(
            path,
            format!("expected a 4-d [B, H, N, D] array, got shape {shape:?}"),
        ));
    }
    if shape.contains(&0) {
        return Err(bad(
            path,
            format!("shape {shape:?} has a zero size; every dimension must be at least 1"),
        ));
    }
    let item = match ts.as_str() {
        "<f2" => 2,
        _ => 4,
    };
    check_len(path, &shape, item)?;
    let (dtype, values) = match ts.as_str() {
        "<f4" => (
            DType::F32,
            npy.into_vec::<f32>().map_err(|e| read_err(path, e))?,
        ),
        "<f2" => (
            DType::F16,
            npy.into_vec::<half::f16>()
                .map_err(|e| read_err(path, e))?
                .into_iter()
                .map(|h| h.to_f32())
                .collect(),
        ),
        other => {
            return Err(bad(
                path,
                format!("expected dtype float32 (<f4) or float16 (<f2), got {other}"),
            ))
        }
    };
    if let Some((i, v)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(bad(
            path,
            format!("element {i} is {v}: inputs must be finite"),
        ));
    }
    Ok(Tensor {
        shape,
        dtype,
        values,
    })
}

/// Reads a bool or float32 mask (its shape is checked against the problem in `mask.rs`).
pub fn read_mask(path: &Path) -> Result<UserMask> {
    let npy = open(path)?;
    let shape = npy.shape().to_vec();
    let ts = type_str(&npy);
    if shape.len() != 2 && shape.len() != 4 {
        return Err(bad(
            path,
            format!("a mask must be [N, N] or [B, 1 or H, N, N], got shape {shape:?}"),
        ));
    }
    check_len(path, &shape, if ts == "|b1" { 1 } else { 4 })?;
    let values = match ts.as_str() {
        "|b1" => MaskValues::Bool(npy.into_vec::<bool>().map_err(|e| read_err(path, e))?),
        "<f4" => MaskValues::Float(npy.into_vec::<f32>().map_err(|e| read_err(path, e))?),
        other => {
            return Err(bad(
                path,
                format!("expected mask dtype bool (|b1) or float32 (<f4), got {other}"),
            ))
        }
    };
    Ok(UserMask {
        shape,
        values,
        source: path.display().to_string(),
    })
}

/// Writes `values` with `shape` as .npy in `dtype` (bf16: float32, see the module docs),
/// atomically.
pub fn write(path: &Path, shape: &[u64], dtype: DType, values: &[f32]) -> Result<()> {
    let io = |source: std::io::Error| Error::Io {
        path: path.display().to_string(),
        source,
    };
    let mut buf: Vec<u8> = Vec::new();
    {
        let cursor = std::io::Cursor::new(&mut buf);
        match dtype {
            DType::F16 => {
                let mut w = npyz::WriteOptions::<half::f16>::new()
                    .default_dtype()
                    .shape(shape)
                    .writer(cursor)
                    .begin_nd()
                    .map_err(io)?;
                w.extend(values.iter().map(|v| half::f16::from_f32(*v)))
                    .map_err(io)?;
                w.finish().map_err(io)?;
            }
            DType::F32 | DType::BF16 => {
                let mut w = npyz::WriteOptions::<f32>::new()
                    .default_dtype()
                    .shape(shape)
                    .writer(cursor)
                    .begin_nd()
                    .map_err(io)?;
                w.extend(values.iter().copied()).map_err(io)?;
                w.finish().map_err(io)?;
            }
        }
    }
    crate::outfile::write_atomic(path, &buf)
}

/// Writes a bool mask as .npy, atomically.
pub fn write_bool(path: &Path, shape: &[u64], values: &[bool]) -> Result<()> {
    let io = |source: std::io::Error| Error::Io {
        path: path.display().to_string(),
        source,
    };
    let mut buf: Vec<u8> = Vec::new();
    {
        let mut w = npyz::WriteOptions::<bool>::new()
            .default_dtype()
            .shape(shape)
            .writer(std::io::Cursor::new(&mut buf))
            .begin_nd()
            .map_err(io)?;
        w.extend(values.iter().copied()).map_err(io)?;
        w.finish().map_err(io)?;
    }
    crate::outfile::write_atomic(path, &buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_f32_f16_and_bool() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.npy");
        let vals: Vec<f32> = (0..24).map(|i| i as f32 * 0.25 - 3.0).collect();
        write(&p, &[1, 2, 3, 4], DType::F32, &vals).unwrap();
        let t = read_qkv(&p).unwrap();
        assert_eq!(
            (t.shape, t.dtype, t.values),
            (vec![1, 2, 3, 4], DType::F32, vals.clone())
        );
        write(&p, &[1, 2, 3, 4], DType::F16, &vals).unwrap();
        let t = read_qkv(&p).unwrap();
        assert_eq!((t.dtype, t.values), (DType::F16, vals));
        let m = dir.path().join("m.npy");
        write_bool(&m, &[2, 2], &[true, false, false, true]).unwrap();
        let u = read_mask(&m).unwrap();
        assert_eq!(u.values, MaskValues::Bool(vec![true, false, false, true]));
    }
}
