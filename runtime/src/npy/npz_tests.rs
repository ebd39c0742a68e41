//! `.npz` reading and writing: round trips, archives NumPy wrote, and damaged archives.
//!
//! The `SAVEZ*` fixtures are files NumPy 2.4 wrote (hex, so the tests need no Python):
//! `np.savez(f, a=np.arange(3, dtype='<i4'), b=np.array([[1.5, -2.0]], dtype='<f4'))`; the
//! same arrays with `zipfile.ZIP64_LIMIT = 0` (NumPy's layout for arrays of 2 GiB and more:
//! ZIP64 sizes, offsets and end records); `np.savez_compressed(f, a=..., c=np.zeros(64))`; and
//! `np.savez` of `a` into an unseekable stream (data descriptors after the data).

use std::borrow::Cow;
use std::io::Write as _;

use super::zip::Writer;
use super::*;

const SAVEZ: &[&str] = &[
    "504b03042d00000000000000210002ecbda9ffffffffffffffff05001400612e6e7079010010008c00000000",
    "0000008c00000000000000934e554d5059010076007b276465736372273a20273c6934272c2027666f727472",
    "616e5f6f72646572273a2046616c73652c20277368617065273a2028332c292c207d20202020202020202020",
    "2020202020202020202020202020202020202020202020202020202020202020202020202020202020202020",
    "2020202020200a000000000100000002000000504b03042d000000000000002100fdcfa508ffffffffffffff",
    "ff05001400622e6e70790100100088000000000000008800000000000000934e554d5059010076007b276465",
    "736372273a20273c6634272c2027666f727472616e5f6f72646572273a2046616c73652c2027736861706527",
    "3a2028312c2032292c207d202020202020202020202020202020202020202020202020202020202020202020",
    "202020202020202020202020202020202020202020202020200a0000c03f000000c0504b01022d032d000000",
    "00000000210002ecbda98c0000008c000000050000000000000000000000800100000000612e6e7079504b01",
    "022d032d000000000000002100fdcfa50888000000880000000500000000000000000000008001c300000062",
    "2e6e7079504b0506000000000200020066000000820100000000",
];

const SAVEZ_COMPRESSED: &[&str] = &[
    "504b03042d00000008000000210002ecbda9ffffffffffffffff05001400612e6e7079010010008c00000000",
    "0000004c000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9369a2aea3a09e965f5452",
    "9498179f5f94920a12774bcc294e058a17672416a402f91ac63a9a3a0ab50a14002e06206004622620060050",
    "4b03042d0000000800000021005ed6e93effffffffffffffff05001400632e6e707901001000800200000000",
    "00004a000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9366a1aea3a09e965f545294",
    "98179f5f94920a12774bcc294e058a17672416a402f91a66263a9a3a0ab50ae4032e865130a20100504b0102",
    "2d032d00000008000000210002ecbda94c0000008c000000050000000000000000000000800100000000612e",
    "6e7079504b01022d032d0000000800000021005ed6e93e4a0000008002000005000000000000000000000080",
    "0183000000632e6e7079504b0506000000000200020066000000040100000000",
];

const SAVEZ_ZIP64: &[&str] = &[
    "504b03042d00000000000000210002ecbda9ffffffffffffffff05001400612e6e7079010010008c00000000",
    "0000008c00000000000000934e554d5059010076007b276465736372273a20273c6934272c2027666f727472",
    "616e5f6f72646572273a2046616c73652c20277368617065273a2028332c292c207d20202020202020202020",
    "2020202020202020202020202020202020202020202020202020202020202020202020202020202020202020",
    "2020202020200a000000000100000002000000504b03042d000000000000002100fdcfa508ffffffffffffff",
    "ff05001400622e6e70790100100088000000000000008800000000000000934e554d5059010076007b276465",
    "736372273a20273c6634272c2027666f727472616e5f6f72646572273a2046616c73652c2027736861706527",
    "3a2028312c2032292c207d202020202020202020202020202020202020202020202020202020202020202020",
    "202020202020202020202020202020202020202020202020200a0000c03f000000c0504b01022d032d000000",
    "00000000210002ecbda9ffffffffffffffff050014000000000000000000800100000000612e6e7079010010",
    "008c000000000000008c00000000000000504b01022d032d000000000000002100fdcfa508ffffffffffffff",
    "ff05001c0000000000000000008001ffffffff622e6e70790100180088000000000000008800000000000000",
    "c300000000000000504b06062c000000000000002d002d000000000000000000020000000000000002000000",
    "0000000096000000000000008201000000000000504b060700000000180200000000000001000000504b0506",
    "000000000200020096000000820100000000",
];

const SAVEZ_STREAM: &[&str] = &[
    "504b03042d00080000000000210000000000ffffffffffffffff05001400612e6e7079010010000000000000",
    "0000000000000000000000934e554d5059010076007b276465736372273a20273c6934272c2027666f727472",
    "616e5f6f72646572273a2046616c73652c20277368617065273a2028332c292c207d20202020202020202020",
    "2020202020202020202020202020202020202020202020202020202020202020202020202020202020202020",
    "2020202020200a000000000100000002000000504b070802ecbda98c000000000000008c0000000000000050",
    "4b01022d032d00080000000000210002ecbda98c0000008c0000000500000000000000000000008001000000",
    "00612e6e7079504b0506000000000100010033000000db0000000000",
];

fn unhex(lines: &[&str]) -> Vec<u8> {
    let hex: String = lines.concat();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// An archive of `arrays` from Mote's writer (every ZIP64 record when `zip64`).
fn npz(arrays: &[(String, Tensor)], zip64: bool) -> Vec<u8> {
    let w = Writer::new(Vec::new());
    let w = if zip64 { w.force_zip64() } else { w };
    write_npz_into(w, arrays, Path::new("memory")).unwrap()
}

fn message(r: Result<impl std::fmt::Debug>) -> String {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e @ Error::Npy { .. }) => e.to_string(),
        Err(e) => panic!("expected Error::Npy, got {e:?}"),
    }
}

fn expect_err(bytes: &[u8], wanted: &str) {
    let m = message(parse_npz(bytes, "t.npz"));
    assert!(m.contains(wanted), "`{m}` does not say `{wanted}`");
}

/// Positions of the central directory headers (the fixtures' data holds no `PK\1\2`).
fn central_headers(bytes: &[u8]) -> Vec<usize> {
    bytes
        .windows(4)
        .enumerate()
        .filter(|(_, w)| *w == b"PK\x01\x02")
        .map(|(i, _)| i)
        .collect()
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

// Offsets in a central directory header.
const C_FLAGS: usize = 8;
const C_METHOD: usize = 10;
const C_CRC: usize = 16;
const C_COMPRESSED: usize = 20;
const C_SIZE: usize = 24;
const C_OFFSET: usize = 42;

fn check_a_and_b(got: &[(String, Tensor)]) {
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].0, "a");
    assert_eq!(got[0].1.shape(), &[3]);
    assert_eq!(got[0].1.as_slice::<i32>().unwrap(), &[0, 1, 2]);
    assert_eq!(got[1].0, "b");
    assert_eq!(got[1].1.shape(), &[1, 2]);
    assert_eq!(got[1].1.as_slice::<f32>().unwrap(), &[1.5, -2.0]);
}

fn deflate(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn crc32(data: &[u8]) -> u32 {
    let mut c = flate2::Crc::new();
    c.update(data);
    c.sum()
}

/// A one-entry archive whose entry is `data` deflated, claiming `size` bytes uncompressed.
fn deflated_archive(name: &str, data: &[u8], size: u64, trailing: &[u8]) -> Vec<u8> {
    let mut raw = deflate(data);
    raw.extend_from_slice(trailing);
    let mut w = Writer::new(Vec::new());
    w.add_raw(name, 8, crc32(data), size, &raw).unwrap();
    w.finish().unwrap()
}

#[test]
fn npz_round_trip_every_dtype() {
    let dtypes = [
        DType::BOOL,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];
    let arrays: Vec<(String, Tensor)> = dtypes
        .iter()
        .enumerate()
        .map(|(i, &dt)| {
            let shape: &[i64] = match i % 3 {
                0 => &[2, 3],
                1 => &[],
                _ => &[0, 4],
            };
            let n = shape.iter().product::<i64>() as usize;
            let bytes: Vec<u8> = (0..n * dt.size_bytes())
                .map(|k| {
                    if dt == DType::BOOL {
                        (k % 2) as u8
                    } else {
                        (k * 37 + i) as u8
                    }
                })
                .collect();
            (
                format!("{dt}_{i}"),
                Tensor::from_bytes(shape, dt, &bytes).unwrap(),
            )
        })
        .collect();
    for zip64 in [false, true] {
        let back = parse_npz(&npz(&arrays, zip64), "t.npz").unwrap();
        assert_eq!(back.len(), arrays.len());
        for ((k, t), (k2, t2)) in arrays.iter().zip(&back) {
            assert_eq!(k, k2);
            assert_eq!(t.dtype(), t2.dtype(), "{k}");
            assert_eq!(t.shape(), t2.shape(), "{k}");
            assert_eq!(t.data(), t2.data(), "{k}");
        }
    }
    // The same through a file.
    let dir = std::env::temp_dir().join(format!("mote-npz-dtypes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("all.npz");
    write_npz(&p, &arrays).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), npz(&arrays, false));
    let back = read_npz(&p).unwrap();
    assert_eq!(back.len(), arrays.len());
    assert!(back
        .iter()
        .zip(&arrays)
        .all(|(a, b)| a.0 == b.0 && a.1.data() == b.1.data()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn writer_layout() {
    let a = Tensor::from_slice(&[3], &[0i32, 1, 2]).unwrap();
    let plain = npz(&[("a".into(), a.clone())], false);
    let zip64 = npz(&[("a".into(), a)], true);
    let has = |b: &[u8], sig: &[u8]| b.windows(4).any(|w| w == sig);
    // Classic: no ZIP64 record; the end record closes the file and counts one entry.
    assert!(!has(&plain, b"PK\x06\x06") && !has(&plain, b"PK\x06\x07"));
    let end = plain.len() - 22;
    assert_eq!(&plain[end..end + 4], b"PK\x05\x06");
    assert_eq!(&plain[end + 8..end + 12], &[1, 0, 1, 0]);
    // Forced ZIP64: the ZIP64 end record and locator precede the end record, whose fields all
    // defer to them; the central header keeps sizes and offset in its extra field.
    assert!(has(&zip64, b"PK\x06\x06"));
    let end = zip64.len() - 22;
    assert_eq!(&zip64[end - 20..end - 16], b"PK\x06\x07");
    assert_eq!(&zip64[end + 8..end + 20], &[0xFF; 12]);
    let c = central_headers(&zip64)[0];
    assert_eq!(get32(&zip64, c + C_COMPRESSED), u32::MAX);
    assert_eq!(get32(&zip64, c + C_OFFSET), u32::MAX);
    // An empty archive is the end record alone, as NumPy writes it.
    let empty = npz(&[], false);
    assert_eq!(empty.len(), 22);
    assert!(parse_npz(&empty, "e").unwrap().is_empty());
    assert!(parse_npz(&npz(&[], true), "e").unwrap().is_empty());
}

#[test]
fn reads_numpy_savez() {
    check_a_and_b(&parse_npz(&unhex(SAVEZ), "savez.npz").unwrap());
}

#[test]
fn reads_numpy_zip64_layout() {
    let bytes = unhex(SAVEZ_ZIP64);
    // The fixture really is ZIP64 throughout.
    assert!(bytes.windows(4).any(|w| w == b"PK\x06\x06"));
    let c = central_headers(&bytes);
    assert_eq!(get32(&bytes, c[0] + C_SIZE), u32::MAX);
    assert_eq!(get32(&bytes, c[1] + C_OFFSET), u32::MAX);
    check_a_and_b(&parse_npz(&bytes, "zip64.npz").unwrap());
}

#[test]
fn reads_numpy_savez_compressed() {
    let got = parse_npz(&unhex(SAVEZ_COMPRESSED), "c.npz").unwrap();
    assert_eq!(got[0].0, "a");
    assert_eq!(got[0].1.as_slice::<i32>().unwrap(), &[0, 1, 2]);
    assert_eq!(got[1].0, "c");
    assert_eq!(got[1].1.shape(), &[64]);
    assert_eq!(got[1].1.as_slice::<f64>().unwrap(), &[0.0; 64]);
}

#[test]
fn reads_numpy_streamed_data_descriptors() {
    let got = parse_npz(&unhex(SAVEZ_STREAM), "s.npz").unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1.as_slice::<i32>().unwrap(), &[0, 1, 2]);
}

#[test]
fn npz_entries_borrow_stored_data() {
    let stored = unhex(SAVEZ);
    let e = npz_entries(&stored, "s").unwrap();
    assert_eq!(
        e.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["a.npy", "b.npy"]
    );
    assert!(e.iter().all(|(_, d)| matches!(d, Cow::Borrowed(_))));
    assert!(e[0].1.starts_with(MAGIC));
    let deflated = unhex(SAVEZ_COMPRESSED);
    let e = npz_entries(&deflated, "c").unwrap();
    assert!(e.iter().all(|(_, d)| matches!(d, Cow::Owned(_))));
    assert_eq!(e[1].1.len(), 640);
}

#[test]
fn truncations_and_byte_flips_never_panic() {
    let a = Tensor::from_slice(&[2], &[7i64, 8]).unwrap();
    let ours = npz(&[("x".into(), a.clone()), ("y".into(), a)], true);
    for bytes in [
        unhex(SAVEZ),
        unhex(SAVEZ_COMPRESSED),
        unhex(SAVEZ_ZIP64),
        unhex(SAVEZ_STREAM),
        ours,
    ] {
        for n in 0..bytes.len() {
            // The end record must close the archive: no prefix of one is an archive.
            message(parse_npz(&bytes[..n], "t"));
            let _ = parse_npz(&bytes[n..], "t");
        }
        let mut b = bytes.clone();
        for i in 0..b.len() {
            for flip in [0x01, 0x80, 0xFF] {
                b[i] ^= flip;
                let _ = parse_npz(&b, "t");
                let _ = npz_entries(&b, "t");
                b[i] ^= flip;
            }
        }
    }
}

#[test]
fn crc_mismatch_is_an_error() {
    // A data byte of the stored entry `a` (its last, inside the array).
    let mut b = unhex(SAVEZ);
    let c = central_headers(&b);
    let a_end = get32(&b, c[1] + C_OFFSET) as usize;
    b[a_end - 1] ^= 1;
    expect_err(&b, "entry 0 `a.npy`: CRC-32 mismatch");
    // The recorded CRC of a deflated entry.
    let mut b = unhex(SAVEZ_COMPRESSED);
    let c = central_headers(&b);
    let crc = get32(&b, c[1] + C_CRC);
    put32(&mut b, c[1] + C_CRC, crc ^ 0x8000_0000);
    expect_err(&b, "entry 1 `c.npy`: CRC-32 mismatch");
}

#[test]
fn encryption_and_unknown_methods_are_refused() {
    let mut b = unhex(SAVEZ);
    let c = central_headers(&b)[1];
    put16(&mut b, c + C_FLAGS, 1);
    expect_err(&b, "entry 1 `b.npy`: encrypted entries are not supported");
    let mut b = unhex(SAVEZ);
    put16(&mut b, c + C_METHOD, 12);
    expect_err(&b, "compression method 12 (bzip2) is not supported");
    let mut b = unhex(SAVEZ);
    put16(&mut b, c + C_METHOD, 99);
    expect_err(&b, "compression method 99 (AES encryption)");
    // The local header must agree with the central directory.
    let mut b = unhex(SAVEZ);
    put16(&mut b, 8, 8);
    expect_err(&b, "entry 0 `a.npy`: the local header disagrees");
}

#[test]
fn claimed_sizes_beyond_the_data_are_errors() {
    // A stored entry claiming 2 GiB runs past the central directory.
    let mut b = unhex(SAVEZ);
    let c = central_headers(&b)[0];
    put32(&mut b, c + C_COMPRESSED, 0x7FFF_FFFF);
    put32(&mut b, c + C_SIZE, 0x7FFF_FFFF);
    expect_err(
        &b,
        "entry 0 `a.npy`: 2147483647 bytes of data at offset 55 run past",
    );
    // Stored sizes must agree.
    let mut b = unhex(SAVEZ);
    put32(&mut b, c + C_SIZE, 141);
    expect_err(&b, "stored entry of 140 bytes claims 141 bytes");
    // A deflated entry claiming more than deflate can produce is refused before decoding.
    let mut b = unhex(SAVEZ_COMPRESSED);
    let c = central_headers(&b)[0];
    put32(&mut b, c + C_SIZE, 0x7FFF_FFFF);
    expect_err(
        &b,
        "claims 2147483647 bytes uncompressed from 76 deflated bytes",
    );
    // Claims one byte off either way.
    put32(&mut b, c + C_SIZE, 141);
    expect_err(&b, "inflates to 140 bytes, 141 claimed");
    put32(&mut b, c + C_SIZE, 139);
    expect_err(&b, "more than the 139 bytes claimed");
    // A real 4 MiB bomb inflates when it says so, and stops at a smaller claim.
    let zeros = vec![0u8; 4 << 20];
    let bomb = deflated_archive("z.npy", &zeros, zeros.len() as u64, &[]);
    let e = npz_entries(&bomb, "bomb").unwrap();
    assert_eq!(e[0].1.len(), zeros.len());
    let bomb = deflated_archive("z.npy", &zeros, 100_000, &[]);
    assert!(message(npz_entries(&bomb, "bomb")).contains("more than the 100000 bytes claimed"));
    // Bytes after the end of the deflate stream.
    let b = deflated_archive("z.npy", b"abc", 3, b"junk");
    assert!(message(npz_entries(&b, "t")).contains("4 bytes of compressed data after the end"));
    // Not deflate at all.
    let mut w = Writer::new(Vec::new());
    w.add_raw("z.npy", 8, 0, 10, &[0xFF; 8]).unwrap();
    let b = w.finish().unwrap();
    assert!(message(npz_entries(&b, "t")).contains("entry 0 `z.npy`"));
}

#[test]
fn bad_offsets_are_errors() {
    let fresh = || unhex(SAVEZ);
    let c = central_headers(&fresh());
    let dir = c[0];
    // A local header past the end of the archive.
    let mut b = fresh();
    put32(&mut b, c[1] + C_OFFSET, 0x00FF_FFFF);
    expect_err(
        &b,
        "entry 1 `b.npy`: local header (offset 16777215) past the end of the archive",
    );
    // A local header inside the central directory.
    let mut b = fresh();
    put32(&mut b, c[1] + C_OFFSET, dir as u32);
    expect_err(&b, "runs into the central directory");
    // No local header where the offset points.
    let mut b = fresh();
    put32(&mut b, c[1] + C_OFFSET, 100);
    expect_err(
        &b,
        "entry 1 `b.npy`: no local header at offset 100 (bad signature)",
    );
    // Two entries naming the same local header.
    let mut b = fresh();
    put32(&mut b, c[1] + C_OFFSET, 0);
    expect_err(&b, "entry 1 `b.npy`: the local header names `a.npy`");
    // Entry `a` stretched over `b`: the two share bytes.
    let mut b = fresh();
    let a_len = (dir - 55) as u32;
    put32(&mut b, c[0] + C_COMPRESSED, a_len);
    put32(&mut b, c[0] + C_SIZE, a_len);
    expect_err(&b, "entries 0 and 1 overlap");
    // The end record's directory offset and size.
    let end = b.len() - 22;
    let mut b = fresh();
    put32(&mut b, end + 16, dir as u32 + 1);
    expect_err(&b, "does not end where the end record starts");
    let mut b = fresh();
    put32(&mut b, end + 16, 0xFFFF_FFF0);
    expect_err(&b, "does not end where the end record starts");
    // More entries than the directory holds.
    let mut b = fresh();
    put16(&mut b, end + 8, 3);
    put16(&mut b, end + 10, 3);
    expect_err(&b, "3 entries cannot fit");
    // Fewer: the rest of the directory is left over.
    let mut b = fresh();
    put16(&mut b, end + 8, 1);
    put16(&mut b, end + 10, 1);
    expect_err(&b, "bytes in the central directory after its 1 entries");
}

#[test]
fn archive_structure_errors() {
    let end = unhex(SAVEZ).len() - 22;
    // Multi-disk.
    let mut b = unhex(SAVEZ);
    put16(&mut b, end + 4, 1);
    expect_err(&b, "multi-disk archives are not supported");
    let mut b = unhex(SAVEZ);
    let c = central_headers(&b)[0];
    put16(&mut b, c + 34, 2);
    expect_err(&b, "on disk 2");
    // Trailing bytes after the end record; a comment is fine.
    let mut b = unhex(SAVEZ);
    b.push(0);
    expect_err(&b, "no end-of-central-directory record at its end");
    let mut b = unhex(SAVEZ);
    put16(&mut b, end + 20, 3);
    b.extend_from_slice(b"PK!");
    check_a_and_b(&parse_npz(&b, "comment").unwrap());
    // Not a zip at all.
    expect_err(b"PK", "too short");
    expect_err(&[0u8; 100], "no end-of-central-directory record");
    // Duplicate names.
    let a = Tensor::from_slice(&[1], &[1u8]).unwrap();
    let b = npz(&[("k".into(), a.clone()), ("k".into(), a)], false);
    expect_err(&b, "entry 1 `k.npy`: a second entry of that name");
    // ZIP64: a locator pointing nowhere, a missing extra field, disagreeing records.
    let z = unhex(SAVEZ_ZIP64);
    let zend = z.len() - 22;
    let mut b = z.clone();
    put32(&mut b, zend - 20 + 8, 3);
    expect_err(&b, "no ZIP64 end-of-central-directory record at offset 3");
    let mut b = z.clone();
    put32(&mut b, zend - 20 + 8, 0x7FFF_FFFF);
    expect_err(&b, "where no ZIP64 end record fits");
    let mut b = z.clone();
    put32(&mut b, zend + 16, 5);
    expect_err(&b, "disagree");
    let mut b = z.clone();
    let c = central_headers(&b)[1];
    put16(&mut b, c + 30, 0); // extra length: the ZIP64 field is gone
    put16(&mut b, c + 32, 28); // ...and its bytes become the comment
    expect_err(
        &b,
        "entry 1 `b.npy`: the ZIP64 extra field lacks the uncompressed size",
    );
}

#[test]
fn names_are_bytes_decoded_as_utf8() {
    let t = Tensor::from_slice(&[1], &[1.0f32]).unwrap();
    let b = npz(&[("naïve/ключ".into(), t)], false);
    let c = central_headers(&b)[0];
    assert_eq!(
        u16::from_le_bytes([b[c + C_FLAGS], b[c + C_FLAGS + 1]]),
        1 << 11
    );
    assert_eq!(parse_npz(&b, "u").unwrap()[0].0, "naïve/ключ");
    // Invalid UTF-8 is replaced, not refused (the name is only a key).
    let mut w = Writer::new(Vec::new());
    let npy = npy_bytes(&Tensor::from_slice(&[1], &[2u8]).unwrap()).unwrap();
    w.add_raw("\u{ff}.npy", 0, crc32(&npy), npy.len() as u64, &npy)
        .unwrap();
    let mut b = w.finish().unwrap();
    // Turn the two bytes of `ÿ` into one invalid byte and a space, in both headers.
    for i in 0..b.len() - 1 {
        if b[i..i + 2] == [0xC3, 0xBF] {
            b[i] = 0xFF;
            b[i + 1] = b'_';
        }
    }
    assert_eq!(parse_npz(&b, "u").unwrap()[0].0, "\u{fffd}_");
}
