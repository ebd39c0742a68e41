//! `.npy` and `.npz` files (NumPy's format, versions 1–3), read and written without NumPy.
//!
//! bfloat16, which NumPy lacks, is written as the 2-byte void type `<V2` (what `ml_dtypes`
//! arrays produce) and `<V2` is read back as bfloat16.

use std::borrow::Cow;
use std::io::Write;
use std::path::Path;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{num_elements, Tensor};

mod zip;

const MAGIC: &[u8] = b"\x93NUMPY";

fn npy_err(path: &str, message: impl Into<String>) -> Error {
    Error::Npy {
        path: path.to_string(),
        message: message.into(),
    }
}

fn descr_for(dt: DType) -> Option<&'static str> {
    Some(match dt {
        DType::BOOL => "|b1",
        DType::I8 => "|i1",
        DType::U8 => "|u1",
        DType::I16 => "<i2",
        DType::U16 => "<u2",
        DType::I32 => "<i4",
        DType::U32 => "<u4",
        DType::I64 => "<i8",
        DType::U64 => "<u8",
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::BF16 => "<V2",
        _ => return None,
    })
}

fn dtype_for(descr: &str) -> Option<DType> {
    // `=` is native order, little-endian on every platform Mote supports.
    let d = descr.replace('=', "<");
    Some(match d.as_str() {
        "|b1" | "<b1" => DType::BOOL,
        "|i1" | "<i1" => DType::I8,
        "|u1" | "<u1" => DType::U8,
        "<i2" => DType::I16,
        "<u2" => DType::U16,
        "<i4" => DType::I32,
        "<u4" => DType::U32,
        "<i8" => DType::I64,
        "<u8" => DType::U64,
        "<f2" => DType::F16,
        "<f4" => DType::F32,
        "<f8" => DType::F64,
        "<V2" | "|V2" => DType::BF16,
        _ => return None,
    })
}

/// Parsed header dictionary.
struct Header {
    dtype: DType,
    fortran: bool,
    shape: Vec<i64>,
}

fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let k1 = format!("'{key}'");
    let k2 = format!("\"{key}\"");
    let at = header
        .find(&k1)
        .map(|i| i + k1.len())
        .or_else(|| header.find(&k2).map(|i| i + k2.len()))?;
    let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
    Some(rest)
}

fn parse_header(h: &str, path: &str) -> Result<Header> {
    let descr = dict_value(h, "descr").ok_or_else(|| npy_err(path, "header has no 'descr'"))?;
    let quote = descr.chars().next().filter(|c| *c == '\'' || *c == '"');
    let descr = quote
        .and_then(|q| descr[1..].split(q).next())
        .ok_or_else(|| {
            npy_err(
                path,
                "unsupported dtype description (structured arrays are not tensors)",
            )
        })?;
    let dtype =
        dtype_for(descr).ok_or_else(|| npy_err(path, format!("unsupported dtype `{descr}`")))?;
    let fortran = dict_value(h, "fortran_order")
        .map(|v| v.starts_with("True"))
        .ok_or_else(|| npy_err(path, "header has no 'fortran_order'"))?;
    let shape_txt = dict_value(h, "shape").ok_or_else(|| npy_err(path, "header has no 'shape'"))?;
    let inner = shape_txt
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or_else(|| npy_err(path, "malformed 'shape'"))?;
    let shape = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches('L').parse::<i64>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| npy_err(path, format!("malformed shape `({inner})`")))?;
    if shape.iter().any(|&d| d < 0) {
        return Err(npy_err(path, "negative dimension"));
    }
    Ok(Header {
        dtype,
        fortran,
        shape,
    })
}

/// Parse the bytes of one `.npy` file. `name` is used in error messages.
pub fn parse_npy(bytes: &[u8], name: &str) -> Result<Tensor> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(npy_err(name, "not a .npy file (bad magic)"));
    }
    let major = bytes[6];
    let (hlen, start): (usize, usize) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err(npy_err(name, "truncated header"));
            }
            (
                u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                12,
            )
        }
        v => return Err(npy_err(name, format!("unsupported .npy version {v}"))),
    };
    let header_bytes = bytes
        .get(start..start.saturating_add(hlen))
        .ok_or_else(|| npy_err(name, "truncated header"))?;
    let header =
        std::str::from_utf8(header_bytes).map_err(|_| npy_err(name, "header is not text"))?;
    let h = parse_header(header, name)?;
    let data = &bytes[start + hlen..];
    let n = num_elements(&h.shape).map_err(|e| npy_err(name, e.to_string()))?;
    let esz = h.dtype.size_bytes();
    let need = n
        .checked_mul(esz)
        .ok_or_else(|| npy_err(name, "array too large"))?;
    if data.len() < need {
        return Err(npy_err(
            name,
            format!("truncated data: {} bytes for {need} expected", data.len()),
        ));
    }
    let data = &data[..need];
    if !h.fortran || h.shape.len() < 2 {
        return Tensor::from_bytes(&h.shape, h.dtype, data);
    }
    // Column-major on disk: transpose element by element into row-major.
    let dims: Vec<usize> = h.shape.iter().map(|&d| d as usize).collect();
    let mut out = vec![0u8; need];
    let mut idx = vec![0usize; dims.len()];
    for (f_index, chunk) in data.chunks_exact(esz).enumerate() {
        let mut rem = f_index;
        for (k, &d) in dims.iter().enumerate() {
            idx[k] = rem % d;
            rem /= d;
        }
        let c_index = idx
            .iter()
            .zip(&dims)
            .fold(0usize, |acc, (&i, &d)| acc * d + i);
        out[c_index * esz..(c_index + 1) * esz].copy_from_slice(chunk);
    }
    Tensor::from_bytes(&h.shape, h.dtype, &out)
}

/// The bytes of a `.npy` (version 1) file holding `t`.
pub fn npy_bytes(t: &Tensor) -> Result<Vec<u8>> {
    let mut out = npy_header(t)?;
    out.reserve_exact(t.byte_len());
    out.extend_from_slice(t.data());
    Ok(out)
}

/// The header of a `.npy` (version 1) file holding `t`: magic, version, length, dictionary.
fn npy_header(t: &Tensor) -> Result<Vec<u8>> {
    let descr = descr_for(t.dtype()).ok_or_else(|| {
        Error::Unsupported(format!("{} tensors cannot be saved as .npy", t.dtype()))
    })?;
    let shape = match t.shape() {
        [d] => format!("({d},)"),
        s => format!(
            "({})",
            s.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Pad so the data starts 64-byte aligned, header ends with '\n'.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let hlen = u16::try_from(header.len())
        .map_err(|_| Error::Unsupported("tensor rank too large for .npy".into()))?;
    let mut out = Vec::with_capacity(10 + header.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&hlen.to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    Ok(out)
}

/// Read a `.npy` file.
pub fn read_npy(path: impl AsRef<Path>) -> Result<Tensor> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    parse_npy(&bytes, &path.display().to_string())
}

/// Write a `.npy` file.
pub fn write_npy(path: impl AsRef<Path>, t: &Tensor) -> Result<()> {
    let path = path.as_ref();
    std::fs::write(path, npy_bytes(t)?).map_err(|e| Error::io(path, e))
}

/// Read every array of a `.npz` file, in archive order (keys without the `.npy` suffix).
pub fn read_npz(path: impl AsRef<Path>) -> Result<Vec<(String, Tensor)>> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    parse_npz(&bytes, &path.display().to_string())
}

/// Parse the bytes of a `.npz` archive (`name` labels errors), as [`read_npz`].
///
/// The archive is read by Mote's own zip reader (stored and deflated entries, ZIP64), which
/// checks its structure, each entry's size and CRC-32 (`docs/fuzzing.md`).
pub fn parse_npz(bytes: &[u8], name: &str) -> Result<Vec<(String, Tensor)>> {
    let entries =
        zip::entries(bytes).map_err(|m| npy_err(name, format!("not a valid .npz: {m}")))?;
    let mut out = Vec::with_capacity(entries.len());
    for entry in &entries {
        // One entry at a time: a deflated entry's bytes are dropped once parsed.
        let data = entry.data(bytes).map_err(|m| npy_err(name, m))?;
        let key = entry.name.strip_suffix(".npy").unwrap_or(&entry.name);
        let tensor = parse_npy(&data, &format!("{name}:{}", entry.name))?;
        out.push((key.to_string(), tensor));
    }
    Ok(out)
}

/// The raw entries of a `.npz` (or any zip archive of stored and deflated entries): each
/// file name as stored (with its `.npy` suffix) and its uncompressed bytes, borrowed from
/// `bytes` when the entry is stored. Checked as [`parse_npz`] checks them.
pub fn npz_entries<'a>(bytes: &'a [u8], name: &str) -> Result<Vec<(String, Cow<'a, [u8]>)>> {
    let entries =
        zip::entries(bytes).map_err(|m| npy_err(name, format!("not a valid .npz: {m}")))?;
    entries
        .into_iter()
        .map(|e| {
            let data = e.data(bytes).map_err(|m| npy_err(name, m))?;
            Ok((e.name, data))
        })
        .collect()
}

/// Write a `.npz` file (uncompressed, like `numpy.savez`; ZIP64 records where sizes or offsets
/// need them).
pub fn write_npz(path: impl AsRef<Path>, arrays: &[(String, Tensor)]) -> Result<()> {
    let path = path.as_ref();
    let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    write_npz_into(
        zip::Writer::new(std::io::BufWriter::new(file)),
        arrays,
        path,
    )?;
    Ok(())
}

/// Write `arrays` as `.npy` entries through `zip` (`path` labels I/O errors).
fn write_npz_into<W: Write>(
    mut zip: zip::Writer<W>,
    arrays: &[(String, Tensor)],
    path: &Path,
) -> Result<W> {
    for (key, t) in arrays {
        let header = npy_header(t)?;
        zip.add_stored(&format!("{key}.npy"), &[&header, t.data()])
            .map_err(|e| Error::io(path, e))?;
    }
    zip.finish().map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod npz_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_round_trip_every_dtype() {
        for dt in [
            DType::F32,
            DType::F16,
            DType::BF16,
            DType::F64,
            DType::I8,
            DType::U8,
            DType::I16,
            DType::I32,
            DType::I64,
            DType::BOOL,
        ] {
            let bytes: Vec<u8> = (0..(6 * dt.size_bytes())).map(|i| (i % 2) as u8).collect();
            let t = Tensor::from_bytes(&[2, 3], dt, &bytes).unwrap();
            let back = parse_npy(&npy_bytes(&t).unwrap(), "x").unwrap();
            assert_eq!(back.dtype(), dt);
            assert_eq!(back.shape(), &[2, 3]);
            assert_eq!(back.data(), t.data());
        }
    }

    #[test]
    fn reads_fortran_order_and_rejects_garbage() {
        let hdr = "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }";
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&[1, 0]);
        b.extend_from_slice(&(hdr.len() as u16).to_le_bytes());
        b.extend_from_slice(hdr.as_bytes());
        for v in [0i32, 3, 1, 4, 2, 5] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let t = parse_npy(&b, "f").unwrap();
        assert_eq!(t.as_slice::<i32>().unwrap(), &[0, 1, 2, 3, 4, 5]);
        assert!(parse_npy(&b[..b.len() - 1], "f").is_err());
        assert!(parse_npy(b"garbage", "g").is_err());
        let bad = b
            .iter()
            .map(|&c| if c == b'i' { b'c' } else { c })
            .collect::<Vec<_>>();
        assert!(parse_npy(&bad, "h").is_err());
    }

    #[test]
    fn npz_round_trip() {
        let dir = std::env::temp_dir().join(format!("mote-npz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.npz");
        let a = Tensor::from_slice(&[3], &[1.0f32, 2.0, 3.0]).unwrap();
        let b = Tensor::from_slice(&[2, 1], &[7i64, 8]).unwrap();
        write_npz(&p, &[("out0".into(), a), ("out1".into(), b)]).unwrap();
        let back = read_npz(&p).unwrap();
        assert_eq!(back[0].0, "out0");
        assert_eq!(back[1].1.as_slice::<i64>().unwrap(), &[7, 8]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
